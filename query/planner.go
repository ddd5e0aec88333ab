package query

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/stats"
)

// PlannedFunc computes a tailroot function that the upstream engine cannot:
// one that needs several series over a window at once (causal tests, tail
// decomposition over series), or data outside the TSDB (request records).
//
// The planner calls it once per evaluation step with the call's arguments
// unevaluated; the function evaluates what it needs through c (Matrix,
// Vector, Scalar) or reads an argument as label matchers (Selector). The
// returned vector becomes ordinary series for the rest of the expression,
// so results compose with topk, arithmetic and aggregation.
type PlannedFunc func(ctx context.Context, c *Call) (promql.Vector, annotations.Annotations, error)

// Call is one evaluation of a planned function at one step.
type Call struct {
	Func *parser.Function
	Args parser.Expressions
	// T is the evaluation time of this step.
	T time.Time

	engine    *Engine
	queryable storage.Queryable
	opts      promql.QueryOpts
	// open holds the argument queries: their results are valid until the
	// planned function returns, when the planner closes them.
	open []promql.Query
	// annos collects the argument queries' annotations (a remote store
	// that failed, a histogram warning) so the query's result reports them.
	annos annotations.Annotations
}

func (c *Call) close() {
	for _, q := range c.open {
		q.Close()
	}
	c.open = nil
}

// Queryable is the storage the query runs over.
func (c *Call) Queryable() storage.Queryable { return c.queryable }

// Matrix evaluates argument i, a range selector or subquery, at T.
func (c *Call) Matrix(ctx context.Context, i int) (promql.Matrix, error) {
	v, err := c.eval(ctx, i)
	if err != nil {
		return nil, err
	}
	m, ok := v.(promql.Matrix)
	if !ok {
		return nil, fmt.Errorf("%s: argument %d is a %s, want a range vector", c.Func.Name, i+1, v.Type())
	}
	return m, nil
}

// Vector evaluates argument i, an instant-vector expression, at T.
func (c *Call) Vector(ctx context.Context, i int) (promql.Vector, error) {
	v, err := c.eval(ctx, i)
	if err != nil {
		return nil, err
	}
	vec, ok := v.(promql.Vector)
	if !ok {
		return nil, fmt.Errorf("%s: argument %d is a %s, want an instant vector", c.Func.Name, i+1, v.Type())
	}
	return vec, nil
}

// Scalar evaluates argument i, a scalar expression, at T.
func (c *Call) Scalar(ctx context.Context, i int) (float64, error) {
	if n, ok := Unwrap(c.Args[i]).(*parser.NumberLiteral); ok {
		return n.Val, nil
	}
	v, err := c.eval(ctx, i)
	if err != nil {
		return 0, err
	}
	s, ok := v.(promql.Scalar)
	if !ok {
		return 0, fmt.Errorf("%s: argument %d is a %s, want a scalar", c.Func.Name, i+1, v.Type())
	}
	return s.V, nil
}

// String returns argument i, a string literal.
func (c *Call) String(i int) (string, error) {
	s, ok := Unwrap(c.Args[i]).(*parser.StringLiteral)
	if !ok {
		return "", fmt.Errorf("%s: argument %d must be a string literal", c.Func.Name, i+1)
	}
	return s.Val, nil
}

// Selector reads argument i as label matchers and, for a range selector,
// its range: functions over request records select records this way
// (`tail_mean(0.99, requests{model_name="x"}[5m])`) without evaluating it.
func (c *Call) Selector(i int) ([]*labels.Matcher, time.Duration, error) {
	switch a := Unwrap(c.Args[i]).(type) {
	case *parser.VectorSelector:
		return a.LabelMatchers, 0, nil
	case *parser.MatrixSelector:
		vs, ok := a.VectorSelector.(*parser.VectorSelector)
		if !ok {
			return nil, 0, fmt.Errorf("%s: argument %d must be a selector", c.Func.Name, i+1)
		}
		if vs.OriginalOffset != 0 || vs.Timestamp != nil || vs.StartOrEnd != 0 {
			return nil, 0, fmt.Errorf("%s: argument %d: offset and @ are not supported on a record selector", c.Func.Name, i+1)
		}
		return vs.LabelMatchers, a.Range, nil
	}
	return nil, 0, fmt.Errorf("%s: argument %d must be a selector such as requests{model_name=\"x\"}[5m]", c.Func.Name, i+1)
}

func (c *Call) eval(ctx context.Context, i int) (parser.Value, error) {
	if i >= len(c.Args) {
		return nil, fmt.Errorf("%s: missing argument %d", c.Func.Name, i+1)
	}
	q, err := c.engine.NewInstantQuery(ctx, c.queryable, c.opts, c.Args[i].String(), c.T)
	if err != nil {
		return nil, fmt.Errorf("%s: argument %d: %w", c.Func.Name, i+1, err)
	}
	c.open = append(c.open, q)
	res := q.Exec(ctx)
	c.annos.Merge(res.Warnings)
	if res.Err != nil {
		return nil, fmt.Errorf("%s: argument %d: %w", c.Func.Name, i+1, res.Err)
	}
	return res.Value, nil
}

// Unwrap strips the parentheses (and step-invariant wrappers) around e, so
// a planned function can read an argument's literal or selector.
func Unwrap(e parser.Expr) parser.Expr {
	for {
		switch p := e.(type) {
		case *parser.ParenExpr:
			e = p.Expr
		case *parser.StepInvariantExpr:
			e = p.Expr
		default:
			return e
		}
	}
}

// maxPlannedSteps bounds the steps of a range query that holds a planned
// function, as Prometheus bounds points per series (11,000).
const maxPlannedSteps = 11000

// plannedName is the metric name a planned call's results are stored under
// in the overlay.
func plannedName(i int) string { return fmt.Sprintf("__tailroot_planned_%d", i) }

// plan finds the planned calls of expr. It returns nil when there are none.
func (e *Engine) plan(qs string) (parser.Expr, []*parser.Call, error) {
	if !e.reg.hasPlanned(qs) {
		return nil, nil, nil
	}
	expr, err := e.parser.ParseExpr(qs)
	if err != nil {
		return nil, nil, nil // the engine reports parse errors
	}
	var calls []*parser.Call
	var walkErr error
	var walk func(n parser.Node, inSubquery bool)
	walk = func(n parser.Node, inSubquery bool) {
		if walkErr != nil {
			return
		}
		if c, ok := n.(*parser.Call); ok && e.reg.planned(c.Func.Name) != nil {
			if inSubquery {
				walkErr = fmt.Errorf("%s cannot be evaluated inside a subquery or range function; use it at the top of the expression or in a recording of its own", c.Func.Name)
				return
			}
			calls = append(calls, c)
			return // its arguments are evaluated by the call itself
		}
		_, isSub := n.(*parser.SubqueryExpr)
		for _, ch := range parser.Children(n) {
			walk(ch, inSubquery || isSub)
		}
	}
	walk(expr, false)
	if walkErr != nil {
		return nil, nil, walkErr
	}
	if len(calls) == 0 {
		return nil, nil, nil
	}
	return expr, calls, nil
}

// rewrite returns the text of expr with each planned call replaced, in the
// parsed tree, by a selector of its overlay series with the metric name
// removed. The tree is copied along the paths to the calls; expr itself is
// left as parsed (it is the query's Statement).
func rewrite(expr parser.Expr, calls []*parser.Call) string {
	repl := make(map[*parser.Call]parser.Expr, len(calls))
	for i, c := range calls {
		repl[c] = overlaySelector(plannedName(i))
	}
	return substitute(expr, repl).String()
}

// overlaySelector is label_replace({__name__="name"}, "__name__", "", "", ""):
// the overlay series of one planned call, named as the call's result is
// (without a metric name).
func overlaySelector(name string) parser.Expr {
	str := func(s string) parser.Expr { return &parser.StringLiteral{Val: s} }
	return &parser.Call{
		Func: parser.Functions["label_replace"],
		Args: parser.Expressions{
			&parser.VectorSelector{LabelMatchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, name)}},
			str(model.MetricNameLabel), str(""), str(""), str(""),
		},
	}
}

// substitute returns e with the calls in repl replaced. Nodes on the path
// to a replaced call are shallow copies; the rest is shared with e.
func substitute(e parser.Expr, repl map[*parser.Call]parser.Expr) parser.Expr {
	switch n := e.(type) {
	case *parser.Call:
		if r, ok := repl[n]; ok {
			return r
		}
		cp := *n
		cp.Args = make(parser.Expressions, len(n.Args))
		for i, a := range n.Args {
			cp.Args[i] = substitute(a, repl)
		}
		return &cp
	case *parser.AggregateExpr:
		cp := *n
		cp.Expr = substitute(n.Expr, repl)
		if n.Param != nil {
			cp.Param = substitute(n.Param, repl)
		}
		return &cp
	case *parser.BinaryExpr:
		cp := *n
		cp.LHS, cp.RHS = substitute(n.LHS, repl), substitute(n.RHS, repl)
		return &cp
	case *parser.ParenExpr:
		return withExpr(n, func(c *parser.ParenExpr) *parser.Expr { return &c.Expr }, repl)
	case *parser.UnaryExpr:
		return withExpr(n, func(c *parser.UnaryExpr) *parser.Expr { return &c.Expr }, repl)
	case *parser.StepInvariantExpr:
		return withExpr(n, func(c *parser.StepInvariantExpr) *parser.Expr { return &c.Expr }, repl)
	case *parser.SubqueryExpr:
		return withExpr(n, func(c *parser.SubqueryExpr) *parser.Expr { return &c.Expr }, repl)
	}
	// Selectors and literals hold no calls. A planned call under a
	// matrix selector cannot parse, and plan refuses one in a subquery.
	return e
}

// withExpr returns a shallow copy of n with its one child expression (the
// field that expr points to in the copy) substituted.
func withExpr[T any](n *T, expr func(*T) *parser.Expr, repl map[*parser.Call]parser.Expr) *T {
	cp := *n
	e := expr(&cp)
	*e = substitute(*e, repl)
	return &cp
}

// plannedQuery evaluates planned calls step by step into an overlay, then
// runs the rewritten expression with the upstream engine over the storage
// merged with the overlay.
type plannedQuery struct {
	e          *Engine
	q          storage.Queryable
	opts       promql.QueryOpts
	expr       parser.Expr
	calls      []*parser.Call
	start, end time.Time
	step       time.Duration // 0 for an instant query
	qs         string

	inner promql.Query
	stop  context.CancelFunc
}

func (p *plannedQuery) Exec(ctx context.Context) *promql.Result {
	ctx, p.stop = context.WithCancel(ctx)
	var steps []time.Time
	if p.step == 0 {
		steps = []time.Time{p.start}
	} else {
		n := int(p.end.Sub(p.start)/p.step) + 1
		if n > maxPlannedSteps {
			return &promql.Result{Err: fmt.Errorf("range query with tailroot functions has %d steps, over the limit of %d: raise the step", n, maxPlannedSteps)}
		}
		for t := p.start; !t.After(p.end); t = t.Add(p.step) {
			steps = append(steps, t)
		}
	}
	ov := newOverlay()
	var annos annotations.Annotations
	for i, c := range p.calls {
		name := plannedName(i)
		seen := map[string]labels.Labels{}
		for _, t := range steps {
			call := &Call{Func: c.Func, Args: c.Args, T: t, engine: p.e, queryable: p.q, opts: p.opts}
			vec, a, err := p.e.reg.planned(c.Func.Name)(ctx, call)
			annos.Merge(a)
			annos.Merge(call.annos)
			if err != nil {
				call.close()
				return &promql.Result{Err: err, Warnings: annos}
			}
			now := map[string]bool{}
			for _, s := range vec {
				b := labels.NewBuilder(s.Metric)
				b.Set(model.MetricNameLabel, name)
				ls := b.Labels()
				ov.add(ls, t.UnixMilli(), s.F)
				k := ls.String()
				now[k] = true
				seen[k] = ls
			}
			call.close()
			// A series that stops must not be carried forward by lookback.
			for k, ls := range seen {
				if !now[k] {
					ov.add(ls, t.UnixMilli(), math.Float64frombits(value.StaleNaN))
					delete(seen, k)
				}
			}
		}
	}
	text := rewrite(p.expr, p.calls)
	var err error
	if p.step == 0 {
		p.inner, err = p.e.ng.NewInstantQuery(ctx, ov.queryable(p.q), p.opts, text, p.start)
	} else {
		p.inner, err = p.e.ng.NewRangeQuery(ctx, ov.queryable(p.q), p.opts, text, p.start, p.end, p.step)
	}
	if err != nil {
		return &promql.Result{Err: fmt.Errorf("evaluate %q: %w", text, err), Warnings: annos}
	}
	res := p.inner.Exec(ctx)
	res.Warnings.Merge(annos)
	return res
}

func (p *plannedQuery) Close() {
	if p.inner != nil {
		p.inner.Close()
	}
}

func (p *plannedQuery) Statement() parser.Statement {
	return &parser.EvalStmt{Expr: p.expr, Start: p.start, End: p.end, Interval: p.step}
}

func (p *plannedQuery) Stats() *stats.Statistics {
	if p.inner != nil {
		return p.inner.Stats()
	}
	return &stats.Statistics{Timers: stats.NewQueryTimers(), Samples: stats.NewQuerySamples(false)}
}

func (p *plannedQuery) Cancel() {
	if p.stop != nil {
		p.stop()
	}
	if p.inner != nil {
		p.inner.Cancel()
	}
}

func (p *plannedQuery) String() string { return p.qs }
