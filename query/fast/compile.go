package fast

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/parser/posrange"
)

// ErrFallback is returned by Plan.Exec when the expression turned out,
// while reading, to need the upstream engine (a native histogram sample, a
// start timestamp, a sample budget close to the limit). Nothing has been
// returned to the caller; it should evaluate the query upstream.
var ErrFallback = errors.New("fast: expression needs the upstream engine")

// ErrHistogram is the ErrFallback returned when a selected series holds a
// native histogram sample. A caller may remember the metric names
// (Plan.Metrics) and send their next queries upstream directly.
var ErrHistogram = fmt.Errorf("%w: native histogram sample", ErrFallback)

// ErrForcedMonotonicity is the ErrFallback returned when histogram_quantile
// had to force some step's buckets monotonic: upstream's annotation for that
// reports a sample count that depends on how its evaluator merges
// annotations (its Merge adds into the annotation it merges with), which
// the API prints, so the upstream engine answers those queries.
var ErrForcedMonotonicity = fmt.Errorf("%w: histogram_quantile forced monotonic buckets", ErrFallback)

// node is one operator of a compiled plan. Each node streams its output
// series, in upstream's order, to a sink.
type node interface{ isNode() }

// leaf reads one selector and applies a range function (or none, for an
// instant selector) to every series at every step.
type leaf struct {
	vs       *parser.VectorSelector
	fn       string        // "" for an instant vector selector
	rng      time.Duration // range of the matrix selector
	argPos   posrange.PositionRange
	dropName bool
	hintFunc string
	hintBy   bool
	hintGrp  []string
	hist     bool // may read native histograms (runHistLeaf)
	// stats: upstream reads the selector's histograms without their
	// buckets (SkipHistogramBuckets, statsPath).
	stats bool
}

// binop applies a binary operator between each output value and a number.
type binop struct {
	op         parser.ItemType
	scalar     float64
	scalarLeft bool
	returnBool bool
	expr       node
}

// aggregate is sum/avg/min/max/count by/without.
type aggregate struct {
	op       parser.ItemType
	grouping []string // sorted
	without  bool
	exprPos  posrange.PositionRange
	expr     node
}

// quantile is histogram_quantile over classic (le) buckets.
type quantile struct {
	q      float64
	qPos   posrange.PositionRange
	argPos posrange.PositionRange
	expr   node
	inLeaf bool // the argument is a selector chain, whose metric name is kept for annotations
}

// Metrics returns the metric names the plan selects.
func (p *Plan) Metrics() []string {
	var out []string
	for _, l := range p.leafs {
		out = append(out, metricName(l.vs))
	}
	return out
}

func metricName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

func (*leaf) isNode()      {}
func (*binop) isNode()     {}
func (*aggregate) isNode() {}
func (*quantile) isNode()  {}

// Plan is a compiled expression.
type Plan struct {
	root  node
	leafs []*leaf
}

var rangeFuncs = map[string]bool{
	"rate": true, "increase": true, "delta": true, "irate": true,
	"sum_over_time": true, "avg_over_time": true, "min_over_time": true,
	"max_over_time": true, "count_over_time": true, "last_over_time": true,
}

// Compile returns a plan for expr, or false when this package does not take
// it. expr must have been parsed by the engine's parser; Compile does not
// modify it.
func Compile(expr parser.Expr) (*Plan, bool) {
	if expr.Type() != parser.ValueTypeVector {
		return nil, false
	}
	p := &Plan{}
	n, ok := p.compile(expr, nil)
	if !ok {
		return nil, false
	}
	p.root = n
	return p, true
}

func (p *Plan) compile(expr parser.Expr, path []parser.Node) (node, bool) {
	switch e := expr.(type) {
	case *parser.ParenExpr:
		return p.compile(e.Expr, append(path, e))
	case *parser.StepInvariantExpr:
		return nil, false
	case *parser.VectorSelector:
		if !simpleSelector(e) {
			return nil, false
		}
		l := &leaf{vs: e}
		l.hintFunc, l.hintBy, l.hintGrp = hintsFromPath(path)
		p.leafs = append(p.leafs, l)
		return l, true
	case *parser.Call:
		if n, ok, handled := p.compileHistFn(e, path); handled {
			return n, ok
		}
		if e.Func.Name == "histogram_quantile" {
			nl, ok := e.Args[0].(*parser.NumberLiteral)
			if !ok || e.Args[1].Type() != parser.ValueTypeVector {
				return nil, false
			}
			inner, ok := p.compile(e.Args[1], append(path, e))
			if !ok {
				return nil, false
			}
			q := &quantile{q: nl.Val, qPos: e.Args[0].PositionRange(), argPos: e.Args[1].PositionRange(), expr: inner}
			q.inLeaf = isLeafChain(inner)
			return q, true
		}
		if !rangeFuncs[e.Func.Name] || len(e.Args) != 1 {
			return nil, false
		}
		ms, ok := e.Args[0].(*parser.MatrixSelector)
		if !ok {
			return nil, false
		}
		vs, ok := ms.VectorSelector.(*parser.VectorSelector)
		if !ok || !simpleSelector(vs) || ms.Range <= 0 || ms.RangeExpr != nil {
			return nil, false
		}
		l := &leaf{
			vs: vs, fn: e.Func.Name, rng: ms.Range, argPos: e.Args[0].PositionRange(),
			dropName: e.Func.Name != "last_over_time",
		}
		l.hintFunc, l.hintBy, l.hintGrp = hintsFromPath(append(path, e))
		l.hist = (e.Func.Name == "rate" || e.Func.Name == "increase") && histPathOK(path)
		l.stats = statsPath(path)
		p.leafs = append(p.leafs, l)
		return l, true
	case *parser.AggregateExpr:
		switch e.Op {
		case parser.SUM, parser.AVG, parser.MIN, parser.MAX, parser.COUNT:
		default:
			return nil, false
		}
		if e.Param != nil {
			return nil, false
		}
		for _, g := range e.Grouping {
			if g == model.MetricNameLabel || strings.HasPrefix(g, "__") {
				return nil, false
			}
		}
		inner, ok := p.compile(e.Expr, append(path, e))
		if !ok {
			return nil, false
		}
		grp := slices.Clone(e.Grouping)
		slices.Sort(grp)
		return &aggregate{op: e.Op, grouping: grp, without: e.Without, exprPos: e.Expr.PositionRange(), expr: inner}, true
	case *parser.BinaryExpr:
		if e.VectorMatching != nil && (e.VectorMatching.Card != parser.CardOneToOne || len(e.VectorMatching.MatchingLabels) > 0 || e.VectorMatching.FillValues.LHS != nil || e.VectorMatching.FillValues.RHS != nil) {
			// A matching clause on a vector-scalar operation is a parse
			// error upstream; fill modifiers are experimental. Leave both.
			return nil, false
		}
		switch e.Op {
		case parser.ADD, parser.SUB, parser.MUL, parser.DIV, parser.POW, parser.MOD,
			parser.EQLC, parser.NEQ, parser.GTR, parser.LSS, parser.GTE, parser.LTE:
		default:
			return nil, false
		}
		lnum, lok := unwrapNumber(e.LHS)
		rnum, rok := unwrapNumber(e.RHS)
		var (
			inner parser.Expr
			b     = &binop{op: e.Op, returnBool: e.ReturnBool}
		)
		switch {
		case lok && !rok && e.RHS.Type() == parser.ValueTypeVector:
			inner, b.scalar, b.scalarLeft = e.RHS, lnum, true
		case rok && !lok && e.LHS.Type() == parser.ValueTypeVector:
			inner, b.scalar = e.LHS, rnum
		default:
			return nil, false
		}
		n, ok := p.compile(inner, append(path, e))
		if !ok {
			return nil, false
		}
		b.expr = n
		return b, true
	}
	return nil, false
}

// unwrapNumber returns the value of a number literal, possibly in
// parentheses.
func unwrapNumber(e parser.Expr) (float64, bool) {
	for {
		switch x := e.(type) {
		case *parser.ParenExpr:
			e = x.Expr
		case *parser.NumberLiteral:
			return x.Val, true
		default:
			return 0, false
		}
	}
}

// simpleSelector reports whether vs reads plainly: a metric name matched
// by equality (so dropping it cannot merge two series), no offset, no @,
// not anchored or smoothed.
func simpleSelector(vs *parser.VectorSelector) bool {
	if vs.OriginalOffset != 0 || vs.Offset != 0 || vs.OriginalOffsetExpr != nil || vs.Timestamp != nil || vs.StartOrEnd != 0 || vs.Anchored || vs.Smoothed {
		return false
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual && m.Value != "" {
			return true
		}
	}
	return false
}

func isLeafChain(n node) bool {
	for {
		switch x := n.(type) {
		case *leaf:
			return true
		case *binop:
			n = x.expr
		default:
			return false
		}
	}
}

// hintsFromPath gives the selector hints upstream gives: the nearest
// enclosing function or aggregation (stopping at a binary operation), and
// the grouping of a directly enclosing aggregation.
func hintsFromPath(path []parser.Node) (fn string, by bool, grouping []string) {
walk:
	for i := len(path) - 1; i >= 0; i-- {
		switch n := path[i].(type) {
		case *parser.AggregateExpr:
			fn = n.Op.String()
			break walk
		case *parser.Call:
			fn = n.Func.Name
			break walk
		case *parser.BinaryExpr:
			break walk
		}
	}
	if len(path) > 0 {
		if a, ok := path[len(path)-1].(*parser.AggregateExpr); ok {
			by, grouping = !a.Without, a.Grouping
		}
	}
	return fn, by, grouping
}
