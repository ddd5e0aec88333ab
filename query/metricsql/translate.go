package metricsql

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tailroot/tailroot/query/qlimit"
)

// DefaultStep stands in for the query step when Options.Step is zero. It is
// VictoriaMetrics' own default step for instant queries.
const DefaultStep = 5 * time.Minute

// Options describes the PromQL engine that will evaluate the translation.
// The first four fields mirror parser.Options, so a caller copies what its
// engine's parser uses; Translate emits only what that parser accepts.
type Options struct {
	// Functions is the set of PromQL functions the target parser knows.
	// Nil means parser.Functions.
	Functions map[string]*parser.Function
	// EnableExperimentalFunctions allows emitting PromQL functions marked
	// Experimental (double_exponential_smoothing, ts_of_last_over_time,
	// start(), end(), limitk, ...). False means such translations return
	// ErrUnsupported.
	EnableExperimentalFunctions bool
	// EnableBinopFillModifiers allows passing fill(), fill_left() and
	// fill_right() through. False means they return ErrUnsupported.
	EnableBinopFillModifiers bool
	// EnableUnquotedUTF8Names is handed to the verifying parser. Output
	// always quotes names that need quoting, so it parses either way.
	EnableUnquotedUTF8Names bool
	// Step is the query resolution step. MetricsQL uses it where a query
	// leaves the lookbehind window out (rate(x) means rate(x[step])), for
	// `i` durations (x[5i]), for subqueries without a step (x[1h:]) and for
	// step(). Zero or negative means DefaultStep (5m). It is truncated to
	// whole milliseconds, PromQL's resolution; below 1ms counts as 1ms.
	Step time.Duration
	// Limits bound the query before it is parsed and its WITH templates
	// before they are expanded (metricsql's expansion is exponential in
	// the nesting of templates). The zero value checks nothing.
	Limits qlimit.Limits
}

// ParserOptions returns the PromQL parser configuration Options describes.
func (o Options) ParserOptions() parser.Options {
	return parser.Options{
		EnableExperimentalFunctions: o.EnableExperimentalFunctions,
		EnableBinopFillModifiers:    o.EnableBinopFillModifiers,
		EnableUnquotedUTF8Names:     o.EnableUnquotedUTF8Names,
		Functions:                   o.Functions,
	}
}

func (o Options) step() time.Duration {
	if o.Step <= 0 {
		return DefaultStep
	}
	if s := o.Step.Truncate(time.Millisecond); s > 0 {
		return s
	}
	return time.Millisecond
}

// Translate parses q as MetricsQL (expanding WITH templates) and returns
// equivalent PromQL text that the parser described by opts accepts.
//
// Errors: a query over opts.Limits returns a *qlimit.Error, checked before
// anything is parsed or expanded; a query that is not valid MetricsQL
// returns the MetricsQL parse error; a valid query with a construct that
// has no exact PromQL equivalent returns an *UnsupportedError naming it.
func Translate(q string, opts Options) (string, error) {
	if err := qlimit.CheckExpansion(q, opts.Limits); err != nil {
		return "", err
	}
	e, err := parseMetricsQL(q)
	if err != nil {
		return "", err
	}
	return translateExpr(e, opts)
}

// Prepare is the front end's decision in one call: it returns q unchanged
// when the target PromQL parser accepts it, its translation when only
// MetricsQL accepts it, and otherwise the PromQL parse error. When q is
// MetricsQL that cannot be translated the PromQL error is joined with the
// *UnsupportedError, so both errors.As(err, &parser.ParseErrors{}) and
// errors.Is(err, ErrUnsupported) hold.
func Prepare(q string, opts Options) (expr string, translated bool, err error) {
	if err := qlimit.CheckExpansion(q, opts.Limits); err != nil {
		return "", false, err
	}
	_, promErr := parser.NewParser(opts.ParserOptions()).ParseExpr(q)
	if promErr == nil {
		return q, false, nil
	}
	e, err := parseMetricsQL(q)
	if err != nil {
		return "", false, promErr
	}
	out, err := translateExpr(e, opts)
	if err != nil {
		return "", false, fmt.Errorf("%w; as MetricsQL: %w", promErr, err)
	}
	return out, true, nil
}

// parseMetricsQL guards the third-party parser: a panic on hostile input
// becomes an ordinary parse error, so Translate keeps its no-panic promise.
func parseMetricsQL(q string) (e metricsql.Expr, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, err = nil, fmt.Errorf("parse metricsql: parser panicked: %v", r)
		}
	}()
	e, err = metricsql.Parse(q)
	if err != nil {
		return nil, fmt.Errorf("parse metricsql: %w", err)
	}
	return e, nil
}

func translateExpr(e metricsql.Expr, opts Options) (string, error) {
	t := &translator{opts: opts, funcs: opts.Functions, step: opts.step()}
	if t.funcs == nil {
		t.funcs = parser.Functions
	}
	out, err := t.expr(e)
	if err != nil {
		return "", err
	}
	s := out.String()
	p := parser.NewParser(opts.ParserOptions())
	if _, err := p.ParseExpr(s); err != nil {
		return "", locate(p, out, err)
	}
	return s, nil
}

// locate finds the smallest emitted subexpression the target parser rejects,
// so the error names a construct rather than the whole query.
func locate(p parser.Parser, root parser.Expr, rootErr error) error {
	bad, badErr := root, rootErr
	for {
		var next parser.Expr
		var nextErr error
		for _, c := range parser.Children(bad) {
			ce, ok := c.(parser.Expr)
			if !ok {
				continue
			}
			if _, err := p.ParseExpr(ce.String()); err != nil {
				next, nextErr = ce, err
				break
			}
		}
		if next == nil {
			break
		}
		bad, badErr = next, nextErr
	}
	return unsupported(bad.String(), "the target PromQL parser rejects it: "+badErr.Error())
}

// translator walks a metricsql AST and builds a PromQL AST, which is then
// printed with the parser package's own printer so quoting is always right.
type translator struct {
	opts  Options
	funcs map[string]*parser.Function
	step  time.Duration
}

// fn returns the PromQL function name if the target parser accepts it.
func (t *translator) fn(name string) (*parser.Function, bool) {
	f, ok := t.funcs[name]
	if !ok || f == nil {
		return nil, false
	}
	if f.Experimental && !t.opts.EnableExperimentalFunctions {
		return nil, false
	}
	return f, true
}

// call builds name(args...), or says which PromQL function is missing.
func (t *translator) call(construct, name string, args ...parser.Expr) (parser.Expr, error) {
	f, ok := t.fn(name)
	if !ok {
		return nil, missingFunc(construct, name, t.funcs)
	}
	return &parser.Call{Func: f, Args: args}, nil
}

func missingFunc(construct, name string, funcs map[string]*parser.Function) error {
	if f, ok := funcs[name]; ok && f != nil && f.Experimental {
		return unsupportedf(construct, "needs PromQL %s(), which is experimental and disabled in the target parser", name)
	}
	return unsupportedf(construct, "needs PromQL %s(), which the target parser does not know", name)
}

func (t *translator) expr(e metricsql.Expr) (parser.Expr, error) {
	switch e := e.(type) {
	case *metricsql.NumberExpr:
		return num(e.N), nil
	case *metricsql.StringExpr:
		return &parser.StringLiteral{Val: e.S}, nil
	case *metricsql.MetricExpr:
		return t.instantSelector(e, modifiers{})
	case *metricsql.RollupExpr:
		return t.rollup(e)
	case *metricsql.FuncExpr:
		return t.funcCall(e)
	case *metricsql.AggrFuncExpr:
		return t.aggregate(e)
	case *metricsql.BinaryOpExpr:
		return t.binary(e)
	default:
		return nil, unsupportedf(fmt.Sprintf("%T", e), "unknown MetricsQL expression type")
	}
}

// num emits a number literal; negative values (and -0) are parenthesised
// because PromQL's unary minus binds looser than ^.
func num(v float64) parser.Expr {
	n := &parser.NumberLiteral{Val: v}
	if math.Signbit(v) && !math.IsNaN(v) {
		return &parser.ParenExpr{Expr: n}
	}
	return n
}

// paren wraps binary operands that are themselves binary expressions: the
// PromQL printer does not add parentheses for precedence.
func paren(e parser.Expr) parser.Expr {
	if _, ok := e.(*parser.BinaryExpr); ok {
		return &parser.ParenExpr{Expr: e}
	}
	return e
}

func unparen(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

// orChain joins alternatives with `or`. It is used to lift MetricsQL's
// or-delimited label filters out of a selector, one alternative per group.
func orChain(alts []parser.Expr) parser.Expr {
	out := alts[0]
	for _, a := range alts[1:] {
		out = &parser.BinaryExpr{
			Op:             parser.LOR,
			LHS:            paren(out),
			RHS:            paren(a),
			VectorMatching: &parser.VectorMatching{Card: parser.CardManyToMany},
		}
	}
	if len(alts) > 1 {
		return &parser.ParenExpr{Expr: out}
	}
	return out
}

// coerce converts an argument to the PromQL type a function parameter
// expects, the way MetricsQL treats every value as a set of series:
// a scalar where a vector is wanted becomes vector(s), a single series where
// a scalar is wanted becomes scalar(v) and a range where a vector is wanted
// becomes last_over_time(r) (MetricsQL's implicit default_rollup).
func (t *translator) coerce(a metricsql.Expr, want parser.ValueType) (parser.Expr, error) {
	switch want {
	case parser.ValueTypeVector:
		x, err := t.vectorish(a)
		if err != nil {
			return nil, err
		}
		if x.Type() == parser.ValueTypeScalar {
			return t.call(str(a), "vector", x)
		}
		return x, nil
	case parser.ValueTypeScalar:
		x, err := t.vectorish(a)
		if err != nil {
			return nil, err
		}
		if x.Type() == parser.ValueTypeVector {
			return t.call(str(a), "scalar", x)
		}
		return x, nil
	default:
		return t.expr(a)
	}
}

// vectorish translates e as an instant value; a range (x[5m], a subquery)
// is read with last_over_time, which is what MetricsQL's default_rollup is.
func (t *translator) vectorish(e metricsql.Expr) (parser.Expr, error) {
	if !isRangeish(e) {
		return t.expr(e)
	}
	alts, err := t.rangeAlts(e)
	if err != nil {
		return nil, err
	}
	f, ok := t.fn("last_over_time")
	if !ok {
		return nil, missingFunc(str(e), "last_over_time", t.funcs)
	}
	out := make([]parser.Expr, len(alts))
	for i, m := range alts {
		out[i] = &parser.Call{Func: f, Args: parser.Expressions{m}}
	}
	return orChain(out), nil
}

func str(e metricsql.Expr) string { return string(e.AppendString(nil)) }

// binary translates arithmetic, comparison and set operators.
func (t *translator) binary(be *metricsql.BinaryOpExpr) (parser.Expr, error) {
	opName := strings.ToLower(be.Op)
	op, ok := binaryOps[opName]
	switch {
	case opName == "default":
		return nil, unsupported("default", "fills gaps over the whole query range, which PromQL's per-step evaluation cannot see")
	case !ok:
		return nil, unsupportedf(opName, "no PromQL operator")
	case be.JoinModifierPrefix != nil:
		return nil, unsupported(be.JoinModifier.Op+" prefix", "PromQL cannot rename the labels a group modifier copies")
	}
	isSet := op == parser.LAND || op == parser.LOR || op == parser.LUNLESS
	if be.KeepMetricNames && !isSet && !(op.IsComparisonOperator() && !be.Bool) {
		return nil, unsupported("keep_metric_names", "PromQL drops the metric name of arithmetic and bool-comparison results")
	}
	l, err := t.vectorish(be.Left)
	if err != nil {
		return nil, err
	}
	r, err := t.vectorish(be.Right)
	if err != nil {
		return nil, err
	}
	scalarL, scalarR := l.Type() == parser.ValueTypeScalar, r.Type() == parser.ValueTypeScalar
	// A function of constants (clamp_min(40, 0) in the ru() template) is one
	// series without labels in MetricsQL, which binary operators apply to
	// every series on the other side, as PromQL does with a scalar.
	if !isSet {
		if !scalarL && fromScalar(l) {
			if l, err = t.call(str(be.Left), "scalar", l); err != nil {
				return nil, err
			}
			scalarL = true
		}
		if !scalarR && fromScalar(r) {
			if r, err = t.call(str(be.Right), "scalar", r); err != nil {
				return nil, err
			}
			scalarR = true
		}
	}
	// Set operators need vectors; MetricsQL treats a scalar as one series
	// without labels, which is exactly vector(s).
	if isSet {
		if scalarL {
			if l, err = t.call(str(be.Left), "vector", l); err != nil {
				return nil, err
			}
		}
		if scalarR {
			if r, err = t.call(str(be.Right), "vector", r); err != nil {
				return nil, err
			}
		}
		scalarL, scalarR = false, false
	}
	// PromQL requires bool between two scalars; MetricsQL filters a
	// one-series result instead, which vector(l) reproduces.
	if op.IsComparisonOperator() && !be.Bool && scalarL && scalarR {
		if l, err = t.call(str(be.Left), "vector", l); err != nil {
			return nil, err
		}
		scalarL = false
	}
	out := &parser.BinaryExpr{Op: op, LHS: paren(l), RHS: paren(r), ReturnBool: be.Bool}
	hasFill := be.FillLeft != nil || be.FillRight != nil
	hasMatching := be.GroupModifier.Op != "" || be.JoinModifier.Op != "" || hasFill
	if scalarL || scalarR {
		if hasMatching {
			return nil, unsupported(str(be), "on/ignoring/group_*/fill need instant vectors on both sides in PromQL")
		}
		return out, nil
	}
	vm, err := t.matching(be, isSet)
	if err != nil {
		return nil, err
	}
	// `if`/`ifnot` against a right side without labels (sum(x), a scalar)
	// apply it to every left series in MetricsQL; on() does that in PromQL.
	if (opName == "if" || opName == "ifnot") && labelFree(r) {
		vm = &parser.VectorMatching{Card: parser.CardManyToMany, On: true}
	}
	out.VectorMatching = vm
	return out, nil
}

var binaryOps = map[string]parser.ItemType{
	"+": parser.ADD, "-": parser.SUB, "*": parser.MUL, "/": parser.DIV, "%": parser.MOD, "^": parser.POW,
	"atan2": parser.ATAN2,
	"==":    parser.EQLC, "!=": parser.NEQ, ">": parser.GTR, "<": parser.LSS, ">=": parser.GTE, "<=": parser.LTE,
	"and": parser.LAND, "or": parser.LOR, "unless": parser.LUNLESS,
	// MetricsQL's `q1 if q2` keeps q1's points where a matching q2 point
	// exists: PromQL's `and`. `ifnot` keeps the others: `unless`.
	"if": parser.LAND, "ifnot": parser.LUNLESS,
}

func (t *translator) matching(be *metricsql.BinaryOpExpr, isSet bool) (*parser.VectorMatching, error) {
	vm := &parser.VectorMatching{Card: parser.CardOneToOne}
	if isSet {
		vm.Card = parser.CardManyToMany
	}
	switch strings.ToLower(be.GroupModifier.Op) {
	case "":
	case "on":
		vm.On = true
		vm.MatchingLabels = be.GroupModifier.Args
	case "ignoring":
		vm.MatchingLabels = be.GroupModifier.Args
	default:
		return nil, unsupportedf(be.GroupModifier.Op, "unknown group modifier")
	}
	switch strings.ToLower(be.JoinModifier.Op) {
	case "":
	case "group_left":
		vm.Card = parser.CardManyToOne
		vm.Include = be.JoinModifier.Args
	case "group_right":
		vm.Card = parser.CardOneToMany
		vm.Include = be.JoinModifier.Args
	default:
		return nil, unsupportedf(be.JoinModifier.Op, "unknown join modifier")
	}
	for _, l := range vm.Include {
		if l == "*" {
			return nil, unsupported(be.JoinModifier.Op+"(*)", "PromQL has no wildcard for labels to copy")
		}
	}
	if be.FillLeft != nil || be.FillRight != nil {
		if !t.opts.EnableBinopFillModifiers {
			return nil, unsupported("fill", "binop fill modifiers are disabled in the target parser")
		}
		if be.FillLeft != nil {
			v := be.FillLeft.N
			vm.FillValues.LHS = &v
		}
		if be.FillRight != nil {
			v := be.FillRight.N
			vm.FillValues.RHS = &v
		}
	}
	return vm, nil
}

// labelFree reports whether e always evaluates to series without any label:
// a vector() call, or an aggregation without grouping that does not keep
// input series. It is conservative: false means "may have labels".
func labelFree(e parser.Expr) bool {
	switch e := unparen(e).(type) {
	case *parser.NumberLiteral:
		return true
	case *parser.Call:
		return e.Func.Name == "vector" || e.Func.ReturnType == parser.ValueTypeScalar
	case *parser.AggregateExpr:
		switch e.Op {
		case parser.TOPK, parser.BOTTOMK, parser.LIMITK, parser.LIMIT_RATIO, parser.COUNT_VALUES:
			return false
		}
		return !e.Without && len(e.Grouping) == 0
	case *parser.BinaryExpr:
		if e.Op.IsSetOperator() || (e.VectorMatching != nil && len(e.VectorMatching.Include) > 0) {
			return false
		}
		return labelFree(e.LHS) && labelFree(e.RHS)
	}
	return false
}

// fromScalar reports whether e is vector(s), or an element-wise function of
// such values: an expression the translation made a vector only because a
// PromQL function wanted one.
func fromScalar(e parser.Expr) bool {
	c, ok := unparen(e).(*parser.Call)
	if !ok {
		return false
	}
	if c.Func.Name == "vector" {
		return true
	}
	if !elementwise[c.Func.Name] {
		return false
	}
	n := 0
	for _, a := range c.Args {
		if a.Type() != parser.ValueTypeVector {
			continue
		}
		if !fromScalar(a) {
			return false
		}
		n++
	}
	return n > 0
}

// elementwise are PromQL functions that map each sample to one sample and
// keep its labels.
var elementwise = map[string]bool{
	"abs": true, "ceil": true, "floor": true, "round": true, "exp": true, "sqrt": true,
	"ln": true, "log2": true, "log10": true, "sgn": true, "clamp": true, "clamp_min": true,
	"clamp_max": true, "deg": true, "rad": true, "sin": true, "cos": true, "tan": true,
	"asin": true, "acos": true, "atan": true, "sinh": true, "cosh": true, "tanh": true,
	"asinh": true, "acosh": true, "atanh": true,
}

// keepsName reports whether the emitted function keeps the input's metric
// name in PromQL, which makes MetricsQL's keep_metric_names a no-op on it.
func keepsName(e parser.Expr) bool {
	switch e := unparen(e).(type) {
	case *parser.VectorSelector:
		return true
	case *parser.Call:
		switch e.Func.Name {
		case "last_over_time", "first_over_time", "sort", "sort_desc", "sort_by_label",
			"sort_by_label_desc", "label_replace", "label_join":
			return true
		}
	case *parser.BinaryExpr:
		// An or-chain of lifted filter groups keeps names if every branch does.
		return e.Op == parser.LOR && keepsName(e.LHS) && keepsName(e.RHS)
	}
	return false
}
