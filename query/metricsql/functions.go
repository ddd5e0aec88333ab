package metricsql

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/prometheus/promql/parser"
)

// funcRule translates one MetricsQL function call. Rules take precedence
// over passing a same-named PromQL function through.
type funcRule func(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error)

// funcRules are the MetricsQL functions with an exact PromQL rewrite.
// docs/metricsql.md has one table row per entry; keep them in step.
// It is filled in init because the rules recurse into the translator,
// which looks rules up.
var funcRules map[string]funcRule

func init() {
	funcRules = map[string]funcRule{
		// VictoriaMetrics documents these four as computed "the way Prometheus
		// does"; PromQL's own functions are that definition (docs/metricsql.md
		// notes where VictoriaMetrics' numbers differ).
		"rate_prometheus":     renamed("rate"),
		"increase_prometheus": renamed("increase"),
		"delta_prometheus":    renamed("delta"),
		"changes_prometheus":  renamed("changes"),
		// default_rollup is the last raw sample in the window.
		"default_rollup": renamed("last_over_time"),
		// holt_winters was renamed in Prometheus 3; same arguments and algorithm.
		"holt_winters": renamed("double_exponential_smoothing"),
		// Timestamp in seconds of the first / last raw sample in the window.
		"tfirst_over_time": renamed("ts_of_first_over_time"),
		"tlast_over_time":  renamed("ts_of_last_over_time"),

		"median_over_time":  medianOverTime,
		"range_over_time":   rangeOverTime,
		"timestamp":         timestampFunc,
		"step":              stepFunc,
		"vector":            vectorFunc,
		"drop_empty_series": dropEmptySeries,
		"label_set":         labelSet,
		"label_del":         labelDel,
		"label_copy":        labelCopy(false),
		"label_move":        labelCopy(true),
		"label_map":         labelMap,

		// Same name in PromQL (experimental) but a different signature:
		// MetricsQL's is histogram_quantiles("phi_label", phi..., buckets).
		"histogram_quantiles": refuse("PromQL's histogram_quantiles has a different signature"),
	}
}

// refused gives the reason for MetricsQL functions that have no exact PromQL
// form; anything else PromQL does not know gets a generic reason.
var refused = map[string]string{
	"now":              "now() is the wall clock at evaluation, constant over a range query; time() is not",
	"zscore_over_time": "MetricsQL returns NaN when the last sample is older than the scrape interval",
	"lag":              "MetricsQL falls back to the sample before the window",
	"lifetime":         "MetricsQL measures from the sample before the window",
	"union":            "PromQL's or deduplicates ignoring the metric name; union keeps both",
	"sort_by_label_numeric": "PromQL's sort_by_label orders naturally but differs on numbers " +
		"with leading zeros and signs",
	"keep_last_value": "fills gaps over the whole query range",
	"keep_next_value": "fills gaps over the whole query range",
	"interpolate":     "fills gaps over the whole query range",
	"range_quantile":  "aggregates over the whole query range, not a window",
	"range_median":    "aggregates over the whole query range, not a window",
	"label_keep":      "PromQL cannot drop all labels but a list",
	"label_transform": "PromQL's label_replace replaces the whole value, not every match",
	"label_value":     "PromQL cannot turn a label value into a sample value",
	"rand":            "PromQL has no random numbers",
}

func (t *translator) funcCall(fe *metricsql.FuncExpr) (parser.Expr, error) {
	name := strings.ToLower(fe.Name)
	if name == "" || name == "union" {
		return nil, unsupported("union", refused["union"])
	}
	var (
		out parser.Expr
		err error
	)
	if rule, ok := funcRules[name]; ok {
		out, err = rule(t, fe)
	} else if f, ok := t.fn(name); ok {
		out, err = t.callArgs(f, name+"()", fe.Args)
	} else {
		return nil, t.noFunc(name)
	}
	if err != nil {
		return nil, err
	}
	if fe.KeepMetricNames && !keepsName(out) {
		return nil, unsupported(name+"() keep_metric_names", "the PromQL translation drops the metric name")
	}
	return out, nil
}

func (t *translator) noFunc(name string) error {
	if f, ok := t.funcs[name]; ok && f != nil && f.Experimental {
		return missingFunc(name+"()", name, t.funcs)
	}
	if r, ok := refused[name]; ok {
		return unsupported(name+"()", r)
	}
	return unsupported(name+"()", "no exact PromQL equivalent")
}

// argType is the PromQL type of f's i-th parameter, or ValueTypeNone past
// the end (the verifying parse then reports the surplus argument).
func argType(f *parser.Function, i int) parser.ValueType {
	switch {
	case i < len(f.ArgTypes):
		return f.ArgTypes[i]
	case f.Variadic != 0 && len(f.ArgTypes) > 0:
		return f.ArgTypes[len(f.ArgTypes)-1]
	}
	return parser.ValueTypeNone
}

// callArgs builds f(args...) with each argument coerced to its parameter
// type. When the range argument carries or-delimited filter groups, the call
// is repeated per group and the results or-ed: per-series functions give
// the same series either way.
func (t *translator) callArgs(f *parser.Function, construct string, args []metricsql.Expr) (parser.Expr, error) {
	out := make(parser.Expressions, len(args))
	mat := -1
	var alts []parser.Expr
	for i, a := range args {
		want := argType(f, i)
		if want == parser.ValueTypeMatrix && mat < 0 {
			var err error
			if alts, err = t.rangeAlts(a); err != nil {
				return nil, err
			}
			mat = i
			continue
		}
		x, err := t.coerce(a, want)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	if mat < 0 {
		return &parser.Call{Func: f, Args: out}, nil
	}
	if len(alts) > 1 && f.Name == "absent_over_time" {
		return nil, unsupported(construct, "absent_over_time looks at all filter groups together; per-group calls differ")
	}
	calls := make([]parser.Expr, len(alts))
	for i, m := range alts {
		a := slices.Clone(out)
		a[mat] = m
		calls[i] = &parser.Call{Func: f, Args: a}
	}
	return orChain(calls), nil
}

func renamed(to string) funcRule {
	return func(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
		f, ok := t.fn(to)
		if !ok {
			return nil, missingFunc(strings.ToLower(fe.Name)+"()", to, t.funcs)
		}
		return t.callArgs(f, strings.ToLower(fe.Name)+"()", fe.Args)
	}
}

func refuse(reason string) funcRule {
	return func(_ *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
		return nil, unsupported(strings.ToLower(fe.Name)+"()", reason)
	}
}

func wantArgs(fe *metricsql.FuncExpr, n int) error {
	if len(fe.Args) != n {
		return unsupportedf(str(fe), "%s() takes %d argument(s), got %d", strings.ToLower(fe.Name), n, len(fe.Args))
	}
	return nil
}

// overRange applies build to each range alternative of a rollup's single
// argument and or-s the results.
func (t *translator) overRange(fe *metricsql.FuncExpr, build func(m parser.Expr) (parser.Expr, error)) (parser.Expr, error) {
	if err := wantArgs(fe, 1); err != nil {
		return nil, err
	}
	alts, err := t.rangeAlts(fe.Args[0])
	if err != nil {
		return nil, err
	}
	out := make([]parser.Expr, len(alts))
	for i, m := range alts {
		if out[i], err = build(m); err != nil {
			return nil, err
		}
	}
	return orChain(out), nil
}

// median_over_time(m) = quantile_over_time(0.5, m).
func medianOverTime(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
	return t.overRange(fe, func(m parser.Expr) (parser.Expr, error) {
		return t.call("median_over_time()", "quantile_over_time", num(0.5), m)
	})
}

// range_over_time(m) = max_over_time(m) - min_over_time(m); both drop the
// metric name, so the series pair up one to one.
func rangeOverTime(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
	return t.overRange(fe, func(m parser.Expr) (parser.Expr, error) {
		hi, err := t.call("range_over_time()", "max_over_time", m)
		if err != nil {
			return nil, err
		}
		lo, err := t.call("range_over_time()", "min_over_time", m)
		if err != nil {
			return nil, err
		}
		return &parser.BinaryExpr{Op: parser.SUB, LHS: hi, RHS: lo}, nil
	})
}

// timestamp(x[d]) is MetricsQL's rollup form: the time of the last raw
// sample in the window, PromQL's ts_of_last_over_time. timestamp(x) on an
// instant vector is PromQL's own timestamp().
func timestampFunc(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
	if err := wantArgs(fe, 1); err != nil {
		return nil, err
	}
	if isRangeish(fe.Args[0]) {
		return renamed("ts_of_last_over_time")(t, fe)
	}
	f, ok := t.fn("timestamp")
	if !ok {
		return nil, missingFunc("timestamp()", "timestamp", t.funcs)
	}
	return t.callArgs(f, "timestamp()", fe.Args)
}

// step() is the query step in seconds. PromQL's own step() is 0 for instant
// queries, so the literal from Options.Step is emitted instead.
func stepFunc(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
	if err := wantArgs(fe, 0); err != nil {
		return nil, err
	}
	return num(t.step.Seconds()), nil
}

// vector(x) is the identity on series in MetricsQL and scalar-to-vector in
// PromQL; only the scalar case needs PromQL's vector().
func vectorFunc(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
	if err := wantArgs(fe, 1); err != nil {
		return nil, err
	}
	x, err := t.vectorish(fe.Args[0])
	if err != nil {
		return nil, err
	}
	if x.Type() == parser.ValueTypeScalar {
		return t.call("vector()", "vector", x)
	}
	return x, nil
}

// drop_empty_series(q) = q: a PromQL result never holds a series without
// samples.
func dropEmptySeries(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
	if err := wantArgs(fe, 1); err != nil {
		return nil, err
	}
	return t.coerce(fe.Args[0], parser.ValueTypeVector)
}

// labelArgs returns the series argument and the string arguments after it.
func (t *translator) labelArgs(fe *metricsql.FuncExpr, pairs bool) (parser.Expr, []string, error) {
	name := strings.ToLower(fe.Name)
	if len(fe.Args) < 1 {
		return nil, nil, unsupportedf(str(fe), "%s() needs a series argument", name)
	}
	q, err := t.coerce(fe.Args[0], parser.ValueTypeVector)
	if err != nil {
		return nil, nil, err
	}
	ss := make([]string, 0, len(fe.Args)-1)
	for _, a := range fe.Args[1:] {
		s, ok := a.(*metricsql.StringExpr)
		if !ok {
			return nil, nil, unsupportedf(str(fe), "%s() takes string literals after the series argument", name)
		}
		ss = append(ss, s.S)
	}
	if pairs && len(ss)%2 != 0 {
		return nil, nil, unsupportedf(str(fe), "%s() takes label arguments in pairs", name)
	}
	return q, ss, nil
}

// labelReplace emits label_replace(q, dst, repl, src, regex).
func (t *translator) labelReplace(construct string, q parser.Expr, dst, repl, src, regex string) (parser.Expr, error) {
	return t.call(construct, "label_replace", q,
		&parser.StringLiteral{Val: dst}, &parser.StringLiteral{Val: repl},
		&parser.StringLiteral{Val: src}, &parser.StringLiteral{Val: regex})
}

// literalRepl escapes $ so label_replace inserts the text verbatim.
func literalRepl(s string) string { return strings.ReplaceAll(s, "$", "$$") }

// label_set(q, "k", "v", ...): label_replace with an empty source label and
// an empty regex always matches, and sets k to v (removes k when v is "",
// as MetricsQL does).
func labelSet(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
	q, ss, err := t.labelArgs(fe, true)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(ss); i += 2 {
		if q, err = t.labelReplace("label_set()", q, ss[i], literalRepl(ss[i+1]), "", ""); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// label_del(q, "k", ...): setting k to "" removes it.
func labelDel(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
	q, ss, err := t.labelArgs(fe, false)
	if err != nil {
		return nil, err
	}
	for _, l := range ss {
		if q, err = t.labelReplace("label_del()", q, l, "", "", ""); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// label_copy(q, "src", "dst", ...) copies a non-empty src to dst and leaves
// the series alone when src is missing (regex (.+) does not match ""),
// which is what MetricsQL does. label_move then removes src unless it is
// dst.
func labelCopy(move bool) funcRule {
	return func(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
		construct := strings.ToLower(fe.Name) + "()"
		q, ss, err := t.labelArgs(fe, true)
		if err != nil {
			return nil, err
		}
		for i := 0; i < len(ss); i += 2 {
			src, dst := ss[i], ss[i+1]
			if q, err = t.labelReplace(construct, q, dst, "${1}", src, "(.+)"); err != nil {
				return nil, err
			}
			if move && src != dst {
				if q, err = t.labelReplace(construct, q, src, "", "", ""); err != nil {
					return nil, err
				}
			}
		}
		return q, nil
	}
}

// label_map(q, "l", "from1", "to1", ...) maps the value of l through a table
// in one lookup. It becomes one anchored label_replace per pair, ordered so
// that no pair rewrites a value an earlier pair produced; a cycle (a->b,
// b->a) has no such order and is refused.
func labelMap(t *translator, fe *metricsql.FuncExpr) (parser.Expr, error) {
	q, ss, err := t.labelArgs(fe, false)
	if err != nil {
		return nil, err
	}
	if len(ss) < 1 || len(ss)%2 != 1 {
		return nil, unsupported(str(fe), "label_map() takes a label and from/to pairs")
	}
	label := ss[0]
	// Later pairs win for a repeated source value, as in MetricsQL's map.
	table := map[string]string{}
	var froms []string
	for i := 1; i < len(ss); i += 2 {
		if _, ok := table[ss[i]]; !ok {
			froms = append(froms, ss[i])
		}
		table[ss[i]] = ss[i+1]
	}
	order, ok := mapOrder(froms, table)
	if !ok {
		return nil, unsupported(str(fe), "the mapping has a cycle; chained label_replace calls would apply it twice")
	}
	for _, from := range order {
		to := table[from]
		if q, err = t.labelReplace("label_map()", q, label, literalRepl(to), label, regexp.QuoteMeta(from)); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// mapOrder orders the non-identity pairs so that a pair reading value v
// runs before any pair writing v; otherwise the reader would remap the
// writer's output. ok is false on a cycle.
func mapOrder(froms []string, table map[string]string) (order []string, ok bool) {
	var pending []string
	for _, f := range froms {
		if table[f] != f {
			pending = append(pending, f)
		}
	}
	for len(pending) > 0 {
		progressed := false
		for i, f := range pending {
			// f writes table[f]; it must wait while the pair reading that value is pending.
			blocked := false
			for _, g := range pending {
				if g != f && g == table[f] {
					blocked = true
					break
				}
			}
			if !blocked {
				order = append(order, f)
				pending = slices.Delete(pending, i, i+1)
				progressed = true
				break
			}
		}
		if !progressed {
			return nil, false
		}
	}
	return order, true
}

var aggrOps = map[string]parser.ItemType{
	"sum": parser.SUM, "avg": parser.AVG, "count": parser.COUNT, "min": parser.MIN, "max": parser.MAX,
	"group": parser.GROUP, "stddev": parser.STDDEV, "stdvar": parser.STDVAR,
	"topk": parser.TOPK, "bottomk": parser.BOTTOMK, "count_values": parser.COUNT_VALUES,
	"quantile": parser.QUANTILE, "limitk": parser.LIMITK,
}

// aggrRefused gives reasons for MetricsQL aggregations left untranslated.
var aggrRefused = map[string]string{
	"any":      "picks one series per group for the whole range; PromQL picks per step",
	"distinct": "PromQL's count_values counts NaN as a value",
	"geomean":  "exp(avg(ln(x))) differs from MetricsQL for negative values",
}

type grouping struct {
	labels  []string
	without bool
}

func (t *translator) aggregate(ae *metricsql.AggrFuncExpr) (parser.Expr, error) {
	name := strings.ToLower(ae.Name)
	if ae.Limit > 0 {
		return nil, unsupported(fmt.Sprintf("%s(...) limit %d", name, ae.Limit), "PromQL aggregations have no output limit")
	}
	var g grouping
	switch strings.ToLower(ae.Modifier.Op) {
	case "", "by":
		g.labels = ae.Modifier.Args
	case "without":
		g.labels, g.without = ae.Modifier.Args, true
	default:
		return nil, unsupportedf(ae.Modifier.Op, "unknown aggregation modifier")
	}
	switch name {
	case "median":
		return t.aggr(ae, g, parser.QUANTILE, num(0.5))
	case "sum2", "share", "zscore", "mad":
		return t.composite(ae, name, g)
	}
	op, ok := aggrOps[name]
	if !ok {
		if r, ok := aggrRefused[name]; ok {
			return nil, unsupported(name+"()", r)
		}
		return nil, unsupported(name+"()", "no exact PromQL equivalent")
	}
	if op.IsExperimentalAggregator() && !t.opts.EnableExperimentalFunctions {
		return nil, unsupported(name+"()", "experimental in PromQL and disabled in the target parser")
	}
	if !op.IsAggregatorWithParam() {
		return t.aggr(ae, g, op, nil)
	}
	if len(ae.Args) != 2 {
		return nil, unsupportedf(str(ae), "%s() takes a parameter and one series argument", name)
	}
	want := parser.ValueTypeScalar
	if op == parser.COUNT_VALUES {
		want = parser.ValueTypeString
	}
	param, err := t.coerce(ae.Args[0], want)
	if err != nil {
		return nil, err
	}
	ae2 := *ae
	ae2.Args = ae.Args[1:]
	return t.aggr(&ae2, g, op, param)
}

// aggr emits op(param, arg) with the grouping; arg is ae's only argument.
func (t *translator) aggr(ae *metricsql.AggrFuncExpr, g grouping, op parser.ItemType, param parser.Expr) (parser.Expr, error) {
	if len(ae.Args) != 1 {
		return nil, unsupportedf(str(ae), "PromQL aggregations take one series argument; MetricsQL's multi-argument form unions %d", len(ae.Args))
	}
	x, err := t.coerce(ae.Args[0], parser.ValueTypeVector)
	if err != nil {
		return nil, err
	}
	return g.agg(op, param, x), nil
}

func (g grouping) agg(op parser.ItemType, param, x parser.Expr) *parser.AggregateExpr {
	return &parser.AggregateExpr{Op: op, Param: param, Expr: x, Grouping: g.labels, Without: g.without}
}

// perGroup joins each input series with its group's aggregate: on(by) or
// ignoring(without) group_left, where the aggregate side has one series.
func (g grouping) perGroup(op parser.ItemType, lhs, rhs parser.Expr) parser.Expr {
	return &parser.BinaryExpr{
		Op: op, LHS: paren(lhs), RHS: paren(rhs),
		VectorMatching: &parser.VectorMatching{
			Card: parser.CardManyToOne, On: !g.without, MatchingLabels: g.labels,
		},
	}
}

// composite emits MetricsQL aggregations that are formulas over PromQL ones.
// The per-series results drop the metric name (MetricsQL keeps it).
//
//	sum2(x)   = sum(x ^ 2)
//	share(x)  = (x >= 0) / on(g) group_left sum(x >= 0)           negatives and NaN dropped
//	zscore(x) = (x - on(g) group_left avg(x)) / on(g) group_left stddev(x)
//	mad(x)    = quantile(0.5, abs(x - on(g) group_left quantile(0.5, x)))
func (t *translator) composite(ae *metricsql.AggrFuncExpr, name string, g grouping) (parser.Expr, error) {
	if len(ae.Args) != 1 {
		return nil, unsupportedf(str(ae), "%s() takes one series argument", name)
	}
	if slices.Contains(g.labels, "__name__") {
		return nil, unsupported(str(ae), "the PromQL formula drops __name__ before grouping by it")
	}
	x, err := t.coerce(ae.Args[0], parser.ValueTypeVector)
	if err != nil {
		return nil, err
	}
	switch name {
	case "sum2":
		sq := &parser.BinaryExpr{Op: parser.POW, LHS: paren(x), RHS: num(2)}
		return g.agg(parser.SUM, nil, sq), nil
	case "share":
		nonNeg := &parser.BinaryExpr{Op: parser.GTE, LHS: paren(x), RHS: num(0)}
		return g.perGroup(parser.DIV, nonNeg, g.agg(parser.SUM, nil, nonNeg)), nil
	case "zscore":
		dev := g.perGroup(parser.SUB, x, g.agg(parser.AVG, nil, x))
		return g.perGroup(parser.DIV, dev, g.agg(parser.STDDEV, nil, x)), nil
	default: // mad
		dev := g.perGroup(parser.SUB, x, g.agg(parser.QUANTILE, num(0.5), x))
		abs, err := t.call("mad()", "abs", dev)
		if err != nil {
			return nil, err
		}
		return g.agg(parser.QUANTILE, num(0.5), abs), nil
	}
}
