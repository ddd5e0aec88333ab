package fast

import (
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// histGroup is a sum's state per step over histograms (histogram_dense.go).
type histGroup struct {
	steps []denseSum
}

// histSum folds a batch of histogram columns into the sum's groups, in
// series order per step, as upstream's aggregation does (denseSum). What
// the dense sum does not take hands the query back.
func (ag *aggregator) histSum(cols []*column) error {
	for len(ag.hist) < len(ag.groups) {
		ag.hist = append(ag.hist, &histGroup{steps: make([]denseSum, ag.ev.steps)})
	}
	// Step by step, the batch's series in order within each: a step's
	// sums stay in cache while the series' rates stream past them.
	return parallel(ag.ev.opts.Workers, ag.ev.steps, func(_, lo, hi int) error {
		for i := lo; i < hi; i++ {
			for ci, c := range cols {
				if !c.has[i] {
					continue
				}
				g := ag.groups[ag.member[ci]]
				hg := ag.hist[ag.member[ci]]
				raw := c.hraw != nil && c.hraw[i]
				if !g.seen[i] {
					g.seen[i] = true
					hg.steps[i].n = 0
				}
				if !hg.steps[i].add(&c.h[i], c.v[i], raw) {
					return ErrFallback
				}
			}
		}
		return nil
	})
}

// histOutput finishes the sums into histogram columns.
func (ag *aggregator) histOutput() []*column {
	out := make([]*column, 0, len(ag.groups))
	size := 0
	for gi, g := range ag.groups {
		hg := ag.hist[gi]
		c := &column{lset: g.lset, dropName: g.dropName, has: g.seen, v: g.val, h: make([]histogram.FloatHistogram, len(g.seen))}
		for i, seen := range g.seen {
			if seen {
				hg.steps[i].output(&c.h[i])
				size += (c.h[i].Size()+8)/16 + 1
			}
		}
		out = append(out, c)
	}
	// Upstream holds the sum's result while the next node evaluates (its
	// output, a float or a histogram per point, counted as one more);
	// where that could reach MaxSamples, upstream decides.
	if size >= ag.ev.opts.MaxSamples {
		ag.ev.overBudget.Store(true)
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

// histFn is histogram_count, histogram_sum or histogram_avg: a float per
// native histogram, from the histogram's count, sum or both, as upstream's
// simpleHistogramFunc; float input gives nothing.
type histFn struct {
	fn   string
	expr node
}

func (*histFn) isNode() {}

var histFns = map[string]bool{"histogram_count": true, "histogram_sum": true, "histogram_avg": true}

// compileHistFn compiles histogram_count/sum/avg of a vector; handled
// is false for other calls.
func (p *Plan) compileHistFn(e *parser.Call, path []parser.Node) (n node, ok, handled bool) {
	if !histFns[e.Func.Name] {
		return nil, false, false
	}
	if len(e.Args) != 1 || e.Args[0].Type() != parser.ValueTypeVector {
		return nil, false, true
	}
	inner, ok := p.compile(e.Args[0], append(path, e))
	if !ok {
		return nil, false, true
	}
	return &histFn{fn: e.Func.Name, expr: inner}, true, true
}

// histFnSink applies a histFn to each batch.
type histFnSink struct {
	f    *histFn
	next sink
	out  []*column
}

func (s *histFnSink) batch(cols []*column) error {
	s.out = s.out[:0]
	for _, c := range cols {
		if c.h == nil {
			continue
		}
		o := &column{lset: c.lset, dropName: true, v: make([]float64, len(c.has)), has: append([]bool(nil), c.has...)}
		for i, h := range c.has {
			if !h {
				continue
			}
			switch hist := &c.h[i]; s.f.fn {
			case "histogram_count":
				o.v[i] = hist.Count
			case "histogram_sum":
				o.v[i] = hist.Sum
			default:
				o.v[i] = hist.Sum / hist.Count
			}
		}
		s.out = append(s.out, o)
	}
	return s.next.batch(s.out)
}
