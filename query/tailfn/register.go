package tailfn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query"
)

// Result label names. Every result carries LabelStage, LabelMethod and
// LabelKind; most carry LabelStatistic.
const (
	LabelStage     = "stage"
	LabelMethod    = "method"
	LabelKind      = "kind"
	LabelStatistic = "statistic"
	LabelBand      = "band"
	// StageE2E is the stage label of rows about the whole request (target,
	// quantile, counts) rather than one stage, so that summing the per-stage
	// contributions never picks them up by accident.
	StageE2E = "e2e"
)

// BootstrapSeed seeds every bootstrap interval the functions compute, so
// the same records give the same interval on every evaluation (and the
// same as attribution.QuantileCI with this seed).
const BootstrapSeed uint64 = 1

type impl func(ctx context.Context, c *query.Call, src RecordSource) (promql.Vector, annotations.Annotations, error)

// spec is one function. As in the PromQL parser, the last of args is the
// type of the optional arguments: a call takes len(args)−1 to
// len(args)−1+variadic arguments (all of them when variadic is 0).
type spec struct {
	name     string
	args     []parser.ValueType
	variadic int
	fn       impl
}

var (
	scalar = parser.ValueTypeScalar
	matrix = parser.ValueTypeMatrix
	vector = parser.ValueTypeVector
	str    = parser.ValueTypeString
)

// specs lists every function; docs/functions.md documents each.
func specs() []spec {
	return []spec{
		{"tail_mean", []parser.ValueType{scalar, matrix, str}, 1, breakdownFn(tailMeanBreakdown)},
		{"tail_euler", []parser.ValueType{scalar, matrix, str}, 1, breakdownFn(eulerBreakdown)},
		{"tail_excess", []parser.ValueType{scalar, matrix, str}, 1, breakdownFn(excessBreakdown)},
		{"tail_shapley", []parser.ValueType{scalar, matrix, matrix, str}, 1, tailShapley},
		{"tail_heat", []parser.ValueType{matrix, str}, 2, tailHeat},
		{"quantile_ci", []parser.ValueType{scalar, scalar, matrix, str}, 2, quantileCI},
		{"quantile_diff_ci", []parser.ValueType{scalar, scalar, matrix, matrix, str}, 2, quantileDiffCI},
		{"tail_mean_from_accumulators", []parser.ValueType{scalar, vector, vector, str}, 1, tailMeanFromAccumulators},
		{"histogram_stage_means", []parser.ValueType{vector, vector}, 1, histogramStageMeans},
		{"histogram_comonotonic_bound", []parser.ValueType{scalar, vector, vector}, 1, histogramComonotonicBound},
		{"histogram_comonotonic_quantile", []parser.ValueType{scalar, vector}, 0, histogramComonotonicQuantile},
		{"histogram_independence_quantile", []parser.ValueType{scalar, vector}, 0, histogramIndependenceQuantile},
	}
}

// Names lists the functions Register adds, in documentation order.
func Names() []string {
	var out []string
	for _, s := range specs() {
		out = append(out, s.name)
	}
	return out
}

// Register adds tailroot's attribution functions to r. Record functions
// read src; with a nil src they fail at evaluation with a clear error
// (series functions still work). Call it before query.New builds an
// engine over r.
//
// With a *Cluster as src, tail_mean, tail_excess, tail_euler, tail_heat,
// quantile_ci, quantile_diff_ci and tail_shapley run over every node of the cluster
// (docs/distributed-tails.md); the other functions read its local records.
func Register(r *query.Registry, src RecordSource) error {
	cl, _ := src.(*Cluster)
	if cl != nil {
		src = cl.local
	}
	dist := distSpecs(cl)
	for _, s := range specs() {
		fn := s.fn
		if d, ok := dist[s.name]; ok {
			fn = d
		}
		f := &parser.Function{Name: s.name, ArgTypes: s.args, Variadic: s.variadic, ReturnType: parser.ValueTypeVector}
		err := r.RegisterPlanned(f, func(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
			return fn(ctx, c, src)
		})
		if err != nil {
			return fmt.Errorf("register attribution functions: %w", err)
		}
	}
	return nil
}

// argError names the function, the argument's position and role.
func argError(c *query.Call, i int, role string, err error) error {
	return fmt.Errorf("%s: argument %d (%s): %w", c.Func.Name, i+1, role, err)
}

// levelArg reads a scalar in the open interval (0, 1): a quantile level or
// a confidence level.
func levelArg(ctx context.Context, c *query.Call, i int, role string) (float64, error) {
	v, err := c.Scalar(ctx, i)
	if err != nil {
		return 0, err
	}
	if !(v > 0 && v < 1) {
		return 0, argError(c, i, role, fmt.Errorf("%v is outside (0, 1)", v))
	}
	return v, nil
}

// optString returns string argument i, or def when the call has fewer
// arguments.
func optString(c *query.Call, i int, def string) (string, error) {
	if i >= len(c.Args) {
		return def, nil
	}
	return c.String(i)
}

// statisticArg reads the optional statistic selector at i and checks it
// against the allowed values.
func statisticArg(c *query.Call, i int, def string, allowed []string) (string, error) {
	s, err := optString(c, i, def)
	if err != nil {
		return "", err
	}
	if s != "all" && !slices.Contains(allowed, s) {
		return "", argError(c, i, "statistic", fmt.Errorf("%q is not one of %s, all", s, strings.Join(allowed, ", ")))
	}
	return s, nil
}

// windowArg reads argument i as a records selector.
func windowArg(c *query.Call, i int, role string) (Window, error) {
	w, err := selectorWindow(c.Args[i], c.T)
	if err != nil {
		return Window{}, argError(c, i, role, err)
	}
	return w, nil
}

// errNoSource is returned by record functions registered without a source.
var errNoSource = errors.New("this server has no request-record store")

// loadArg selects and loads the records of argument i.
func loadArg(ctx context.Context, c *query.Call, src RecordSource, i int, role string, annos *annotations.Annotations) (Population, Window, error) {
	if src == nil {
		return Population{}, Window{}, fmt.Errorf("%s: %w", c.Func.Name, errNoSource)
	}
	w, err := windowArg(c, i, role)
	if err != nil {
		return Population{}, Window{}, err
	}
	pop, err := Load(ctx, src, w, nil)
	if err != nil {
		return Population{}, Window{}, fmt.Errorf("%s: argument %d: %w", c.Func.Name, i+1, err)
	}
	noteLoad(c, i, w, pop.Requests.Len(), pop.Clamped, pop.ClampedMax, annos)
	return pop, w, nil
}

// noteLoad adds the annotations of a loaded window of argument i: records
// whose overlapping stages were clamped, and a window with no records.
func noteLoad(c *query.Call, i int, w Window, n, clamped int, clampedMax float64, annos *annotations.Annotations) {
	if clamped > 0 {
		annos.Add(fmt.Errorf("%w: %s: %d records had overlapping stages (negative other, down to -%gs); other was set to 0, so their end-to-end time counts the overlap twice",
			annotations.PromQLWarning, c.Func.Name, clamped, clampedMax))
	}
	if n == 0 {
		annos.Add(fmt.Errorf("%w: %s: no request records match %s in (%d, %d] ms",
			annotations.PromQLInfo, c.Func.Name, c.Args[i], w.Mint-1, w.Maxt))
	}
}

// warnData turns an error the statistics raise on the data (too few
// requests for a method) into a warning and an empty result: the query is
// well formed, the window just cannot support the number.
func warnData(c *query.Call, annos annotations.Annotations, err error) (promql.Vector, annotations.Annotations, error) {
	annos.Add(fmt.Errorf("%w: %s: %v", annotations.PromQLWarning, c.Func.Name, err))
	return nil, annos, nil
}

// rows builds a result vector at one time, each row the base labels plus
// the row's own.
type rows struct {
	t    int64
	base labels.Labels
	vec  promql.Vector
}

func newRows(c *query.Call) *rows { return &rows{t: c.T.UnixMilli(), base: labels.EmptyLabels()} }

// add appends a row with labels kv (name, value pairs) on top of base.
func (o *rows) add(v float64, kv ...string) {
	b := labels.NewBuilder(o.base)
	for i := 0; i+1 < len(kv); i += 2 {
		b.Set(kv[i], kv[i+1])
	}
	o.vec = append(o.vec, promql.Sample{Metric: b.Labels(), T: o.t, F: v})
}

// stat adds a row with the standard labels.
func (o *rows) stat(v float64, stage, method string, kind attribution.Kind, statistic string) {
	o.add(v, LabelStage, stage, LabelMethod, method, LabelKind, kind.String(), LabelStatistic, statistic)
}

// kinds says what kind of number the whole-request rows of a breakdown
// are; contributions carry the breakdown's own Kind.
type kinds struct{ target, quantile, count attribution.Kind }

var (
	recordKinds = kinds{target: attribution.KindExact, quantile: attribution.KindExact, count: attribution.KindExact}
	eulerKinds  = kinds{target: attribution.KindExact, quantile: attribution.KindExact, count: attribution.KindExact}
	accKinds    = kinds{target: attribution.KindEstimate, quantile: attribution.KindEstimate, count: attribution.KindEstimate}
)

// breakdownStats are the statistic values a breakdown function accepts.
var breakdownStats = []string{"contribution", "share", "target", "quantile", "residual", "count", "requests"}

// emitBreakdown writes the rows of b that sel asks for; n is the number of
// requests (or summed counts) in the window.
func emitBreakdown(o *rows, b attribution.Breakdown, k kinds, sel string, n float64) {
	want := func(s string) bool { return sel == "all" || sel == s }
	m := b.Method.String()
	for j, st := range b.Stages {
		if want("contribution") {
			o.stat(b.Contrib[j], st, m, b.Kind, "contribution")
		}
		if want("share") {
			o.stat(ratio(b.Contrib[j], b.Target), st, m, b.Kind, "share")
		}
		if b.Lower != nil {
			if want("lower") {
				o.stat(b.Lower[j], st, m, attribution.KindBound, "lower")
			}
			if want("upper") {
				o.stat(b.Upper[j], st, m, attribution.KindBound, "upper")
			}
		}
	}
	if want("target") {
		o.stat(b.Target, StageE2E, m, k.target, "target")
	}
	if b.Lower != nil && !math.IsNaN(b.TargetLower) {
		if want("lower") {
			o.stat(b.TargetLower, StageE2E, m, attribution.KindBound, "lower")
		}
		if want("upper") {
			o.stat(b.TargetUpper, StageE2E, m, attribution.KindBound, "upper")
		}
	}
	if want("quantile") {
		o.stat(b.Quantile, StageE2E, m, k.quantile, "quantile")
	}
	if want("residual") {
		o.stat(b.Residual, StageE2E, m, b.Kind, "residual")
	}
	if want("count") {
		o.stat(b.Count, StageE2E, m, k.count, "count")
	}
	if want("requests") {
		o.stat(n, StageE2E, m, k.count, "requests")
	}
}

// ratio is a/b, NaN when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
