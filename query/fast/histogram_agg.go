package fast

import (
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/annotations"
)

// histGroup is a sum's state per step over histograms: upstream's
// groupedAggregation histogramValue, histogramKahanC and counter reset
// flags.
type histGroup struct {
	val          []histogram.FloatHistogram
	c            []*histogram.FloatHistogram
	resetSeen    []bool
	notResetSeen []bool
}

// histSum folds a batch of histogram columns into the sum's groups, in
// series order per step, as upstream's aggregation does: the first
// histogram copied, the next ones added with KahanAdd. An error (mixed
// exponential and custom buckets) or a reconciliation of custom bucket
// bounds hands the query back.
func (ag *aggregator) histSum(cols []*column) error {
	for _, g := range ag.groups {
		if g.hist == nil {
			steps := ag.ev.steps
			g.hist = &histGroup{
				val: make([]histogram.FloatHistogram, steps), c: make([]*histogram.FloatHistogram, steps),
				resetSeen: make([]bool, steps), notResetSeen: make([]bool, steps),
			}
		}
	}
	return parallel(ag.ev.opts.Workers, ag.ev.steps, func(_, lo, hi int) error {
		for ci, c := range cols {
			g := ag.groups[ag.member[ci]]
			hg := g.hist
			for i := lo; i < hi; i++ {
				if !c.has[i] {
					continue
				}
				h := &c.h[i]
				switch h.CounterResetHint {
				case histogram.CounterReset:
					hg.resetSeen[i] = true
				case histogram.NotCounterReset:
					hg.notResetSeen[i] = true
				}
				if !g.seen[i] {
					g.seen[i] = true
					h.CopyTo(&hg.val[i])
					hg.c[i] = nil
					continue
				}
				nc, _, reconciled, err := hg.val[i].KahanAdd(h, hg.c[i])
				if err != nil || reconciled {
					return ErrFallback
				}
				hg.c[i] = nc
			}
		}
		return nil
	})
}

// histOutput finishes the sums: the compensation added, Compact(0), and
// upstream's annotation where a step saw both counter reset hints.
func (ag *aggregator) histOutput() []*column {
	out := make([]*column, 0, len(ag.groups))
	for _, g := range ag.groups {
		hg := g.hist
		c := &column{lset: g.lset, dropName: g.dropName, has: g.seen, v: g.val, h: hg.val}
		for i, seen := range g.seen {
			if !seen {
				continue
			}
			if hg.c[i] != nil {
				_, _, _, _ = hg.val[i].Add(hg.c[i])
			}
			hg.val[i].Compact(0)
			if hg.resetSeen[i] && hg.notResetSeen[i] {
				ag.ev.addAnno(annotations.NewHistogramCounterResetCollisionWarning(ag.a.exprPos, annotations.HistogramAgg))
			}
		}
		out = append(out, c)
	}
	return out
}

// nativeQuantile is upstream's histogram_quantile over native
// histograms: promql.HistogramQuantile per series and step, the output
// keeping the series' labels.
func (ev *evaluator) nativeQuantile(n *quantile, cols []*column) []*column {
	out := make([]*column, 0, len(cols))
	for _, c := range cols {
		name := ""
		if ev.opts.DelayedNameRemoval && n.inLeaf {
			name = c.lset.Get(model.MetricNameLabel)
		}
		o := &column{lset: c.lset, dropName: true, v: make([]float64, ev.steps), has: make([]bool, ev.steps)}
		for i, h := range c.has {
			if !h {
				continue
			}
			q, annos := promql.HistogramQuantile(n.q, &c.h[i], name, n.argPos)
			if len(annos) > 0 {
				ev.mu.Lock()
				ev.annos.Merge(annos)
				ev.mu.Unlock()
			}
			o.v[i], o.has[i] = q, true
		}
		out = append(out, o)
	}
	return out
}
