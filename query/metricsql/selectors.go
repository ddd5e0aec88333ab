package metricsql

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// modifiers are a selector's or subquery's offset and @ in PromQL form.
type modifiers struct {
	offset     time.Duration
	timestamp  *int64
	startOrEnd parser.ItemType
}

func (t *translator) modifiers(re *metricsql.RollupExpr) (modifiers, error) {
	var m modifiers
	if re.Offset != nil {
		d, err := t.duration(re.Offset, "offset")
		if err != nil {
			return m, err
		}
		m.offset = d
	}
	if re.At == nil {
		return m, nil
	}
	switch at := re.At.(type) {
	case *metricsql.NumberExpr:
		// PromQL keeps @ timestamps in milliseconds and rejects values
		// beyond what int64 milliseconds can hold.
		v := at.N * 1000
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1<<62 {
			return m, unsupportedf("@ "+str(at), "timestamp out of range")
		}
		ts := int64(math.Round(v))
		m.timestamp = &ts
	case *metricsql.FuncExpr:
		switch name := strings.ToLower(at.Name); {
		case name == "start" && len(at.Args) == 0:
			m.startOrEnd = parser.START
		case name == "end" && len(at.Args) == 0:
			m.startOrEnd = parser.END
		default:
			return m, unsupported("@ "+str(at), "PromQL's @ takes a number, start() or end()")
		}
	default:
		return m, unsupported("@ "+str(at), "PromQL's @ takes a number, start() or end()")
	}
	return m, nil
}

func (m modifiers) apply(vs *parser.VectorSelector) {
	vs.OriginalOffset = m.offset
	vs.Timestamp = m.timestamp
	vs.StartOrEnd = m.startOrEnd
}

// duration converts a MetricsQL duration (5m, 1h30m, 300, 5i with i in
// steps) to a time.Duration with millisecond resolution.
func (t *translator) duration(d *metricsql.DurationExpr, what string) (time.Duration, error) {
	s := string(d.AppendString(nil))
	ms, err := metricsql.DurationValue(s, t.step.Milliseconds())
	if err != nil {
		return 0, unsupportedf(what+" "+s, "cannot read duration: %v", err)
	}
	const limit = math.MaxInt64 / int64(time.Millisecond)
	if ms > limit || ms < -limit {
		return 0, unsupportedf(what+" "+s, "duration out of range")
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// selectors builds one PromQL selector per or-delimited filter group.
//
// `{a="b" or c="d"}` becomes `{a="b"} or {c="d"}`. PromQL's `or` drops a
// right-hand series whose labels, ignoring the metric name, equal a
// left-hand one's. That can only lose a series when the groups filter the
// metric name differently, so such selectors are refused.
func (t *translator) selectors(me *metricsql.MetricExpr, m modifiers) ([]*parser.VectorSelector, error) {
	if len(me.LabelFilterss) == 0 {
		return nil, unsupported("{}", "a selector needs at least one label filter")
	}
	out := make([]*parser.VectorSelector, 0, len(me.LabelFilterss))
	var nameKey string
	for i, lfs := range me.LabelFilterss {
		vs, key, err := selector(lfs)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			nameKey = key
		} else if key != nameKey {
			return nil, unsupported(str(me), "or-delimited filter groups that differ in their metric-name filters have no exact PromQL form")
		}
		m.apply(vs)
		out = append(out, vs)
	}
	return out, nil
}

// selector builds a PromQL selector for one filter group. key describes the
// group's metric-name filters, for the or-group check.
func selector(lfs []metricsql.LabelFilter) (*parser.VectorSelector, string, error) {
	vs := &parser.VectorSelector{}
	var names []string
	for _, lf := range lfs {
		mt := labels.MatchEqual
		switch {
		case lf.IsNegative && lf.IsRegexp:
			mt = labels.MatchNotRegexp
		case lf.IsNegative:
			mt = labels.MatchNotEqual
		case lf.IsRegexp:
			mt = labels.MatchRegexp
		}
		m, err := labels.NewMatcher(mt, lf.Label, lf.Value)
		if err != nil {
			return nil, "", unsupportedf(string(lf.AppendString(nil)), "invalid matcher: %v", err)
		}
		vs.LabelMatchers = append(vs.LabelMatchers, m)
		if lf.Label == model.MetricNameLabel {
			names = append(names, m.String())
		}
	}
	// Print `name{...}` only when the name is a plain identifier PromQL
	// will not read as a keyword and there is no second name filter;
	// otherwise the name stays a __name__ matcher inside the braces.
	if len(names) == 1 {
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual && bareName(m.Value) {
				vs.Name = m.Value
			}
		}
	}
	slices.Sort(names)
	return vs, strings.Join(names, ","), nil
}

func bareName(s string) bool {
	return model.LegacyValidation.IsValidMetricName(s) && !reservedWords[strings.ToLower(s)]
}

// reservedWords are identifiers the PromQL lexer reads as something other
// than a metric name (keywords, aggregators, number spellings).
var reservedWords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true,
	"sum": true, "avg": true, "count": true, "min": true, "max": true, "group": true,
	"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "count_values": true,
	"quantile": true, "limitk": true, "limit_ratio": true,
	"offset": true, "smoothed": true, "anchored": true, "by": true, "without": true,
	"on": true, "ignoring": true, "group_left": true, "group_right": true,
	"fill": true, "fill_left": true, "fill_right": true, "bool": true,
	"start": true, "end": true, "step": true, "range": true, "max_of": true, "min_of": true,
	"inf": true, "nan": true,
}

// instantSelector emits an instant-vector selector, or-chaining filter groups.
func (t *translator) instantSelector(me *metricsql.MetricExpr, m modifiers) (parser.Expr, error) {
	vss, err := t.selectors(me, m)
	if err != nil {
		return nil, err
	}
	alts := make([]parser.Expr, len(vss))
	for i, vs := range vss {
		alts[i] = vs
	}
	return orChain(alts), nil
}

// isRangeish reports whether e is a range selector or a subquery.
func isRangeish(e metricsql.Expr) bool {
	re, ok := e.(*metricsql.RollupExpr)
	return ok && (re.Window != nil || re.ForSubquery())
}

// rollup translates a RollupExpr outside a rollup function's argument:
// a plain selector with offset/@, a range selector or a subquery.
func (t *translator) rollup(re *metricsql.RollupExpr) (parser.Expr, error) {
	if re.ForSubquery() {
		return t.subquery(re)
	}
	me, ok := re.Expr.(*metricsql.MetricExpr)
	if !ok {
		if re.Window != nil {
			return nil, unsupported(str(re), "a window on an expression is an implicit subquery in MetricsQL; write [window:step]")
		}
		return nil, unsupported(str(re), "PromQL allows offset and @ only on selectors and subqueries")
	}
	m, err := t.modifiers(re)
	if err != nil {
		return nil, err
	}
	if re.Window == nil {
		return t.instantSelector(me, m)
	}
	alts, err := t.rangeAlts(re)
	if err != nil {
		return nil, err
	}
	if len(alts) > 1 {
		return nil, unsupported(str(re), "or-delimited filters in a range selector need an enclosing rollup function")
	}
	return alts[0], nil
}

// rangeAlts translates a rollup function's argument into range vectors, one
// per or-delimited filter group. A selector without a window gets [step],
// as MetricsQL does.
func (t *translator) rangeAlts(e metricsql.Expr) ([]parser.Expr, error) {
	var (
		me     *metricsql.MetricExpr
		m      modifiers
		window = t.step
	)
	switch e := e.(type) {
	case *metricsql.MetricExpr:
		me = e
	case *metricsql.RollupExpr:
		if e.ForSubquery() {
			sq, err := t.subquery(e)
			if err != nil {
				return nil, err
			}
			return []parser.Expr{sq}, nil
		}
		inner, ok := e.Expr.(*metricsql.MetricExpr)
		if !ok {
			return nil, unsupported(str(e), "a rollup over an expression is an implicit subquery in MetricsQL; write (expr)[window:step]")
		}
		me = inner
		var err error
		if m, err = t.modifiers(e); err != nil {
			return nil, err
		}
		if e.Window != nil {
			if window, err = t.duration(e.Window, "window"); err != nil {
				return nil, err
			}
		}
	default:
		x, err := t.expr(e)
		if err != nil {
			return nil, err
		}
		if x.Type() == parser.ValueTypeMatrix {
			return []parser.Expr{x}, nil
		}
		return nil, unsupported(str(e), "a rollup over an expression is an implicit subquery in MetricsQL; write (expr)[window:step]")
	}
	vss, err := t.selectors(me, m)
	if err != nil {
		return nil, err
	}
	out := make([]parser.Expr, len(vss))
	for i, vs := range vss {
		out[i] = &parser.MatrixSelector{VectorSelector: vs, Range: window}
	}
	return out, nil
}

// subquery emits expr[window:step]; a missing window or step is the query
// step, as in MetricsQL (PromQL would use the global evaluation interval).
func (t *translator) subquery(re *metricsql.RollupExpr) (parser.Expr, error) {
	inner, err := t.vectorish(re.Expr)
	if err != nil {
		return nil, err
	}
	if inner.Type() == parser.ValueTypeScalar {
		if inner, err = t.call(str(re.Expr), "vector", inner); err != nil {
			return nil, err
		}
	}
	m, err := t.modifiers(re)
	if err != nil {
		return nil, err
	}
	sq := &parser.SubqueryExpr{
		Expr:           subqueryOperand(inner),
		Range:          t.step,
		Step:           t.step,
		OriginalOffset: m.offset,
		Timestamp:      m.timestamp,
		StartOrEnd:     m.startOrEnd,
	}
	if re.Window != nil {
		if sq.Range, err = t.duration(re.Window, "window"); err != nil {
			return nil, err
		}
	}
	if re.Step != nil {
		if sq.Step, err = t.duration(re.Step, "step"); err != nil {
			return nil, err
		}
	}
	return sq, nil
}

// subqueryOperand parenthesises everything but a bare selector, call or
// aggregation, since the printer adds no parentheses of its own.
func subqueryOperand(e parser.Expr) parser.Expr {
	switch x := e.(type) {
	case *parser.VectorSelector:
		if x.OriginalOffset == 0 && x.Timestamp == nil && x.StartOrEnd == 0 {
			return e
		}
	case *parser.Call, *parser.AggregateExpr, *parser.ParenExpr:
		return e
	}
	return &parser.ParenExpr{Expr: e}
}
