package query

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tailroot/tailroot/query/qlimit"
)

// checkSubquerySteps refuses, before evaluation, a query with a subquery
// of more steps than MaxSamples. The engine evaluates a subquery once over
// its whole window (the outer query's range plus every enclosing
// subquery's range plus its own) and holds a point per step per series, so
// such a query fails at MaxSamples anyway for any series — but only after
// allocating the steps: sum_over_time(vector(1)[1d:1ms]), 34 bytes, held
// 3.5 GB and ran for seconds after its client had gone. Refused here, it
// costs a parse.
func (e *Engine) checkSubquerySteps(qs string, outer time.Duration) error {
	if !strings.Contains(qs, ":") {
		return nil // no subquery without [range:step]; most queries skip the parse
	}
	expr, err := e.parser.ParseExpr(qs)
	if err != nil {
		return nil // the engine reports parse errors as it always has
	}
	var walk func(n parser.Node, window time.Duration) error
	walk = func(n parser.Node, window time.Duration) error {
		if sq, ok := n.(*parser.SubqueryExpr); ok {
			step := sq.Step
			if step <= 0 {
				step = time.Minute // NoStepSubqueryIntervalFn
			}
			window += sq.Range
			if steps := int64(window / step); steps > int64(e.opts.MaxSamples) {
				return &qlimit.Error{
					Limit: "query.max-samples", Value: e.opts.MaxSamples, Got: int(min(steps, 1<<62)),
					What: fmt.Sprintf("subquery [%s:%s] steps (each step holds a sample per series)", sq.Range, step),
				}
			}
		}
		for _, c := range parser.Children(n) {
			if c == nil {
				continue
			}
			if err := walk(c, window); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(expr, outer)
}
