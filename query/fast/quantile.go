package fast

import (
	"math"
	"strconv"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// histogramQuantile is upstream's histogram_quantile over classic buckets:
// series are grouped by their labels without le once, not per step, and
// each step's buckets, in series order, go to promql.BucketQuantile.
func (ev *evaluator) histogramQuantile(n *quantile, cols []*column) []*column {
	if math.IsNaN(n.q) || n.q < 0 || n.q > 1 {
		ev.addAnno(annotations.NewInvalidQuantileWarning(n.q, n.qPos))
	}
	if histColumns(cols) {
		return ev.nativeQuantile(n, cols)
	}
	type member struct {
		col *column
		ub  float64
	}
	type group struct {
		lset    labels.Labels
		name    string // quoted in annotations under delayed name removal
		members []member
	}
	var (
		groups []*group
		index  = map[string]int{}
		key    []byte
	)
	nameFor := func(ls labels.Labels) string {
		if ev.opts.DelayedNameRemoval && n.inLeaf {
			return ls.Get(model.MetricNameLabel)
		}
		return ""
	}
	for _, c := range cols {
		le := c.lset.Get(labels.BucketLabel)
		ub, err := strconv.ParseFloat(le, 64)
		if err != nil || math.IsNaN(ub) {
			ev.addAnno(annotations.NewBadBucketLabelWarning(nameFor(c.lset), le, n.argPos))
			continue
		}
		key = c.lset.BytesWithoutLabels(key, labels.BucketLabel)
		gi, ok := index[string(key)]
		if !ok {
			gi = len(groups)
			index[string(key)] = gi
			ls := labels.NewBuilder(c.lset).Del(labels.BucketLabel).Labels()
			groups = append(groups, &group{lset: ls, name: nameFor(ls)})
		}
		groups[gi].members = append(groups[gi].members, member{c, ub})
	}
	out := make([]*column, 0, len(groups))
	var buckets promql.Buckets
	for _, g := range groups {
		c := &column{lset: g.lset, dropName: true, v: make([]float64, ev.steps), has: make([]bool, ev.steps)}
		for i := 0; i < ev.steps; i++ {
			buckets = buckets[:0]
			for _, m := range g.members {
				if m.col.has[i] {
					buckets = append(buckets, promql.Bucket{UpperBound: m.ub, Count: m.col.v[i]})
				}
			}
			if len(buckets) == 0 {
				continue
			}
			q, forced, _, _, _, _ := promql.BucketQuantile(n.q, buckets)
			if forced {
				// Handed back at the end of the query: see evaluator.forced.
				ev.forced.Store(true)
			}
			c.v[i], c.has[i] = q, true
		}
		out = append(out, c)
	}
	return out
}

// binopSink applies a binary operation with a number to each value, as
// upstream's VectorscalarBinop does for floats.
type binopSink struct {
	b    *binop
	next sink
	out  []*column
}

func (s *binopSink) batch(cols []*column) error {
	b := s.b
	s.out = s.out[:0]
	for _, c := range cols {
		any := false
		for i, h := range c.has {
			if !h {
				continue
			}
			lf, rf := c.v[i], b.scalar
			if b.scalarLeft {
				lf, rf = rf, lf
			}
			v, keep := elemBinop(b.op, lf, rf)
			if b.op.IsComparisonOperator() && b.scalarLeft {
				v = rf
			}
			if b.returnBool {
				if keep {
					v = 1
				} else {
					v = 0
				}
				keep = true
			}
			if keep {
				c.v[i] = v
				any = true
			} else {
				c.has[i] = false
			}
		}
		if b.op.IsComparisonOperator() && !b.returnBool {
			// A filter keeps the metric name.
		} else {
			c.dropName = true
		}
		if any {
			s.out = append(s.out, c)
		}
	}
	return s.next.batch(s.out)
}

func elemBinop(op parser.ItemType, lhs, rhs float64) (float64, bool) {
	switch op {
	case parser.ADD:
		return lhs + rhs, true
	case parser.SUB:
		return lhs - rhs, true
	case parser.MUL:
		return lhs * rhs, true
	case parser.DIV:
		return lhs / rhs, true
	case parser.POW:
		return math.Pow(lhs, rhs), true
	case parser.MOD:
		return math.Mod(lhs, rhs), true
	case parser.EQLC:
		return lhs, lhs == rhs
	case parser.NEQ:
		return lhs, lhs != rhs
	case parser.GTR:
		return lhs, lhs > rhs
	case parser.LSS:
		return lhs, lhs < rhs
	case parser.GTE:
		return lhs, lhs >= rhs
	case parser.LTE:
		return lhs, lhs <= rhs
	}
	panic("BUG: fast: operator " + op.String())
}
