package fast

import (
	"math"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/schema"
	"github.com/prometheus/prometheus/util/kahansum"
)

// aggregator folds columns into groups. Groups are numbered in the order
// their first series arrives, as upstream numbers them; each step's
// values are added in series order, so sums carry upstream's rounding.
// The fold runs in parallel over disjoint step ranges.
type aggregator struct {
	ev     *evaluator
	a      *aggregate
	index  map[string]int
	groups []*aggGroup
	lb     *labels.Builder
	keyBuf []byte
	member []int    // group of each column of the current batch
	keys   [][]byte // grouping key of each column of the current batch
	// withoutKey is the sorted grouping plus __name__: upstream's hash
	// for without ignores the metric name.
	withoutKey []string
	// hist is a sum's state per group over histograms
	// (histogram_agg.go), nil over floats.
	hist []*histGroup
}

// aggGroup is upstream's groupedAggregation, one entry per step.
type aggGroup struct {
	lset     labels.Labels
	dropName bool
	seen     []bool
	val      []float64 // floatValue
	c        []float64 // Kahan compensation
	mean     []float64 // avg: incremental mean
	count    []float64 // avg, count: groupCount
	incr     []bool    // avg: incremental mean in use
}

func newAggregator(ev *evaluator, a *aggregate) *aggregator {
	wk := append([]string{model.MetricNameLabel}, a.grouping...)
	slices.Sort(wk)
	return &aggregator{ev: ev, a: a, index: map[string]int{}, lb: labels.NewBuilder(labels.EmptyLabels()), withoutKey: slices.Compact(wk)}
}

// key writes the grouping key of lset into buf.
func (ag *aggregator) key(buf []byte, lset labels.Labels) []byte {
	if ag.a.without {
		return lset.BytesWithoutLabels(buf, ag.withoutKey...)
	}
	return lset.BytesWithLabels(buf, ag.a.grouping...)
}

// groupOf returns the group of c, whose key is key, creating it in
// arrival order.
func (ag *aggregator) groupOf(c *column, key []byte) int {
	if i, ok := ag.index[string(key)]; ok {
		return i
	}
	ag.keyBuf = append(ag.keyBuf[:0], key...)
	ag.lb.Reset(c.lset)
	var lset labels.Labels
	switch {
	case ag.a.without:
		ag.lb.Del(ag.a.grouping...)
		schema.Metadata{}.SetToLabels(ag.lb)
		lset = ag.lb.Labels()
	case len(ag.a.grouping) > 0:
		ag.lb.Keep(ag.a.grouping...)
		lset = ag.lb.Labels()
	default:
		lset = labels.EmptyLabels()
	}
	steps := ag.ev.steps
	g := &aggGroup{lset: lset, seen: make([]bool, steps), val: make([]float64, steps), c: make([]float64, steps)}
	switch ag.a.op {
	case parser.AVG:
		g.mean, g.count, g.incr = make([]float64, steps), make([]float64, steps), make([]bool, steps)
	case parser.COUNT:
		g.count = make([]float64, steps)
	}
	ag.index[string(ag.keyBuf)] = len(ag.groups)
	ag.groups = append(ag.groups, g)
	return len(ag.groups) - 1
}

func (ag *aggregator) batch(cols []*column) error {
	// Keys are built in parallel; groups are numbered in order.
	for len(ag.keys) < len(cols) {
		ag.keys = append(ag.keys, nil)
	}
	_ = parallel(ag.ev.opts.Workers, len(cols), func(_, lo, hi int) error {
		for i := lo; i < hi; i++ {
			ag.keys[i] = ag.key(ag.keys[i], cols[i].lset)
		}
		return nil
	})
	ag.member = ag.member[:0]
	for i, c := range cols {
		g := ag.groupOf(c, ag.keys[i])
		ag.member = append(ag.member, g)
		if c.dropName {
			ag.groups[g].dropName = true
		}
	}
	op := ag.a.op
	if op == parser.SUM && histColumns(cols) {
		return ag.histSum(cols)
	}
	if op == parser.SUM {
		// The dashboards' aggregation, without the per-value switch.
		return parallel(ag.ev.opts.Workers, ag.ev.steps, func(_, lo, hi int) error {
			for ci, c := range cols {
				g := ag.groups[ag.member[ci]]
				kahanFold(c.has[lo:hi], c.v[lo:hi], g.seen[lo:hi], g.val[lo:hi], g.c[lo:hi])
			}
			return nil
		})
	}
	return parallel(ag.ev.opts.Workers, ag.ev.steps, func(_, lo, hi int) error {
		for ci, c := range cols {
			g := ag.groups[ag.member[ci]]
			for i := lo; i < hi; i++ {
				if !c.has[i] {
					continue
				}
				f := c.v[i]
				if !g.seen[i] {
					g.seen[i] = true
					g.val[i] = f
					g.c[i] = 0
					if g.count != nil {
						g.count[i] = 1
					}
					if g.mean != nil {
						g.mean[i] = f
						g.incr[i] = false
					}
					continue
				}
				switch op {
				case parser.SUM:
					g.val[i], g.c[i] = kahansum.Inc(f, g.val[i], g.c[i])
				case parser.AVG:
					g.count[i]++
					count := g.count[i]
					if !g.incr[i] {
						newV, newC := kahansum.Inc(f, g.val[i], g.c[i])
						if !math.IsInf(newV, 0) {
							g.val[i], g.c[i] = newV, newC
							continue
						}
						g.incr[i] = true
						g.mean[i] = g.val[i] / (count - 1)
						g.c[i] /= count - 1
					}
					q := (count - 1) / count
					g.mean[i], g.c[i] = kahansum.Inc(f/count, q*g.mean[i], q*g.c[i])
				case parser.MAX:
					if g.val[i] < f || math.IsNaN(g.val[i]) {
						g.val[i] = f
					}
				case parser.MIN:
					if g.val[i] > f || math.IsNaN(g.val[i]) {
						g.val[i] = f
					}
				case parser.COUNT:
					g.count[i]++
				}
			}
		}
		return nil
	})
}

// output turns the groups into columns, in group order.
func (ag *aggregator) output() []*column {
	if ag.hist != nil {
		return ag.histOutput()
	}
	out := make([]*column, 0, len(ag.groups))
	for _, g := range ag.groups {
		c := &column{lset: g.lset, dropName: g.dropName, has: g.seen, v: g.val}
		for i, seen := range g.seen {
			if !seen {
				continue
			}
			switch ag.a.op {
			case parser.SUM:
				c.v[i] = g.val[i] + g.c[i]
			case parser.AVG:
				if g.incr[i] {
					c.v[i] = g.mean[i] + g.c[i]
				} else {
					c.v[i] = g.val[i]/g.count[i] + g.c[i]/g.count[i]
				}
			case parser.COUNT:
				c.v[i] = g.count[i]
			}
		}
		out = append(out, c)
	}
	return out
}
