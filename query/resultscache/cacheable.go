package resultscache

import (
	"github.com/prometheus/prometheus/promql/parser"
)

// cacheable reports whether a range query over expr may be answered from
// cached extents, and why not when it may not. The rule is conservative: a
// query is cached only when each step's value depends on nothing but the
// samples at or before that step's time and the query's fixed options, so
// that evaluating [a, b] and [b+step, c] separately gives exactly the steps
// of [a, c]. What that excludes:
//
//   - functions other than upstream PromQL's (tailroot's planned and
//     registered functions read request records, remote peers or the wall
//     clock, and the cache cannot see those change);
//   - the @ modifier: `@ start()`/`@ end()` depend on the query range, and a
//     fixed `@ t` reads samples at t from every step, so a late write at t
//     would have to invalidate steps long after it;
//   - negative offsets, which read samples after the step's time: the
//     invalidation rule (a write at t invalidates steps ≥ t) would not hold;
//   - duration expressions (`[range()]`, `offset step()*2`): range() is the
//     query's range, and the others are rare enough not to be worth proving.
//
// time(), timestamp() and subqueries are fine: their values depend on the
// step's absolute time, and subquery steps are aligned to absolute
// multiples of their step, not to the query start.
func cacheable(expr parser.Expr) (ok bool, reason string) {
	reason = ""
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if reason != "" {
			return errStop
		}
		switch n := n.(type) {
		case *parser.Call:
			if up, found := parser.Functions[n.Func.Name]; !found || up != n.Func {
				reason = "function " + n.Func.Name + " is not upstream PromQL"
			}
		case *parser.VectorSelector:
			switch {
			case n.Timestamp != nil || n.StartOrEnd != 0:
				reason = "@ modifier"
			case n.OriginalOffset < 0:
				reason = "negative offset"
			case n.OriginalOffsetExpr != nil:
				reason = "offset expression"
			}
		case *parser.MatrixSelector:
			if n.RangeExpr != nil {
				reason = "range expression"
			}
		case *parser.SubqueryExpr:
			switch {
			case n.Timestamp != nil || n.StartOrEnd != 0:
				reason = "@ modifier"
			case n.OriginalOffset < 0:
				reason = "negative offset"
			case n.OriginalOffsetExpr != nil || n.RangeExpr != nil || n.StepExpr != nil:
				reason = "duration expression"
			}
		case *parser.DurationExpr:
			reason = "duration expression"
		}
		if reason != "" {
			return errStop
		}
		return nil
	})
	return reason == "", reason
}

type stopError struct{}

func (stopError) Error() string { return "stop" }

var errStop error = stopError{}
