package tailfn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/tsdb/records"
)

// The errors of Decompose besides those of loading and evaluating.
var (
	// ErrNoRequests: the window holds no requests (no records, and for
	// the fallback no series either).
	ErrNoRequests = errors.New("no requests")
	// ErrUnanswerable wraps the statistic's own refusal (too few requests
	// for the level, a Shapley over too many stages): the data cannot
	// answer the question as asked.
	ErrUnanswerable = errors.New("cannot decompose")
)

// unanswerable marks err as ErrUnanswerable and keeps its text.
type unanswerable struct{ err error }

func (u unanswerable) Error() string   { return u.err.Error() }
func (u unanswerable) Unwrap() []error { return []error{ErrUnanswerable, u.err} }

func markUnanswerable(err error) error { return unanswerable{err} }

// noRequests is ErrNoRequests saying where: "no requests in window".
func noRequests(where string) error { return fmt.Errorf("%w in %s", ErrNoRequests, where) }

// seriesSelector selects the series called name with matchers ms.
func seriesSelector(name string, ms []*labels.Matcher) *parser.VectorSelector {
	return &parser.VectorSelector{Name: name, LabelMatchers: append([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, name)}, ms...)}
}

// DecomposeMethods are the methods Decompose takes: auto (tail mean from
// records, else the series fallback), tail_mean, euler, excess, shapley.
var DecomposeMethods = []string{"auto", "tail_mean", "euler", "excess", "shapley"}

// SeriesFallback is where method auto reads a window that has no request
// records: the engine and storage to evaluate increase() over, and the
// series names. A zero SeriesFallback (nil Engine) has no fallback.
type SeriesFallback struct {
	Engine    promql.QueryEngine
	Queryable storage.Queryable
	// AccumulatorSums and AccumulatorCounts name the tail-accumulator
	// series (docs/stages.md); StageHistograms the native histogram of
	// stage seconds with label stage.
	AccumulatorSums, AccumulatorCounts, StageHistograms string
}

// DecomposeRequest is one decomposition.
type DecomposeRequest struct {
	Window Window
	// Baseline is the window Shapley reverts stages to (method shapley).
	Baseline Window
	Metric   string  // e2e or ttft
	P        float64 // the quantile level, in (0, 1)
	Method   string  // one of DecomposeMethods
	// Heat asks for the heat table of the window's requests.
	Heat bool
	// Visit, when set, sees every record of the window as it is loaded.
	Visit func(*records.Record)
}

// Decomposition is a breakdown with what goes around it.
type Decomposition struct {
	Breakdown attribution.Breakdown
	// Requests is the number of requests in the window (from the series
	// fallback: the counts, rounded).
	Requests int
	Heat     *attribution.Heat // when asked for and from records
	// Clamped counts requests with overlapping stages whose residual was
	// set to 0.
	Clamped  int
	Warnings []string
	// Nodes is the nodes the answer covers, from Cluster.Decompose; zero
	// from Decompose (this server alone).
	Nodes Nodes
}

// Decompose is the breakdown of the attribution endpoints: from the
// window's request records by Method, or for method auto on e2e without
// records, from the series (fb): the tail accumulators over
// increase(… anchored), an estimate inside bounds; else the stage
// histograms, an upper bound per stage from the comonotonic coupling
// (docs/functions.md, "Which method answers"). Errors: ErrNoRequests when
// nothing answers, ErrUnanswerable (wrapping the statistic's error) when
// the data cannot answer as asked; anything else is a failure to load or
// evaluate.
func Decompose(ctx context.Context, src RecordSource, fb SeriesFallback, req DecomposeRequest) (Decomposition, error) {
	if !slices.Contains(DecomposeMethods, req.Method) {
		return Decomposition{}, fmt.Errorf("method %q: want one of %v", req.Method, DecomposeMethods)
	}
	if req.Metric != "e2e" && req.Metric != "ttft" {
		return Decomposition{}, fmt.Errorf("metric %q: want e2e or ttft", req.Metric)
	}
	var d Decomposition
	reqs, clamped, err := loadRequests(ctx, src, req.Window, req.Metric, req.Visit, &d.Warnings)
	if err != nil {
		return d, err
	}
	d.Clamped = clamped
	if reqs.Len() == 0 {
		if req.Method == "auto" && req.Metric == "e2e" {
			return fromSeries(ctx, fb, req)
		}
		return d, noRequests("window")
	}
	d.Requests = reqs.Len()
	switch req.Method {
	case "auto", "tail_mean":
		d.Breakdown, err = attribution.TailMean(reqs, req.P)
	case "euler":
		d.Breakdown, err = attribution.Euler(reqs, req.P, attribution.EulerOptions{})
	case "excess":
		d.Breakdown, err = attribution.Excess(reqs, req.P)
	case "shapley":
		base, _, berr := loadRequests(ctx, src, req.Baseline, req.Metric, nil, &d.Warnings)
		if berr != nil {
			return d, berr
		}
		if base.Len() == 0 {
			return d, noRequests("baseline window")
		}
		var res attribution.ShapleyResult
		res, err = attribution.Shapley(reqs, base, req.P)
		d.Breakdown = res.Breakdown
	}
	if err != nil {
		return d, markUnanswerable(err)
	}
	if req.Heat {
		h, err := attribution.HeatTable(reqs, nil)
		if err != nil {
			return d, markUnanswerable(err)
		}
		d.Heat = &h
	}
	return d, nil
}

// loadRequests loads the window's records as end-to-end or TTFT stages.
func loadRequests(ctx context.Context, src RecordSource, w Window, metric string, visit func(*records.Record), warnings *[]string) (attribution.Requests, int, error) {
	if src == nil {
		return attribution.Requests{}, 0, nil
	}
	pop, err := Load(ctx, src, w, visit)
	if err != nil {
		return attribution.Requests{}, 0, err
	}
	if pop.Clamped > 0 {
		*warnings = append(*warnings, fmt.Sprintf("%d requests had overlapping stages (negative other, down to -%gs); other was set to 0", pop.Clamped, pop.ClampedMax))
	}
	if metric == "e2e" {
		return pop.Requests, pop.Clamped, nil
	}
	reqs, skipped, err := pop.TTFTRequests()
	if err != nil {
		return attribution.Requests{}, 0, err
	}
	skippedWarning(warnings, skipped)
	return reqs, pop.Clamped, nil
}

// fromSeries is the chain below records: accumulators, then histograms.
func fromSeries(ctx context.Context, fb SeriesFallback, req DecomposeRequest) (Decomposition, error) {
	if fb.Engine == nil {
		return Decomposition{}, noRequests("window")
	}
	d, err := fromAccumulators(ctx, fb, req)
	if !errors.Is(err, ErrNoRequests) {
		return d, err
	}
	return fromHistograms(ctx, fb, req)
}

// increaseOver is `sum by (by) (increase(name{matchers}[window] [anchored]))`
// evaluated at the window's end: the counters' growth over exactly the
// window. anchored takes the difference of the samples at the window's
// ends without extrapolation, which is exact over the derived series
// (their zero and previous-value samples, docs/stages.md).
func increaseOver(ctx context.Context, fb SeriesFallback, name string, w Window, anchored bool, by ...string) (promql.Vector, error) {
	rng := time.Duration(w.Maxt-w.Mint+1) * time.Millisecond
	ms := &parser.MatrixSelector{VectorSelector: seriesSelector(name, w.Matchers), Range: rng}
	if anchored {
		ms.VectorSelector.(*parser.VectorSelector).Anchored = true
	}
	expr := &parser.AggregateExpr{Op: parser.SUM, Grouping: by, Expr: &parser.Call{Func: parser.Functions["increase"], Args: parser.Expressions{ms}}}
	q, err := fb.Engine.NewInstantQuery(ctx, fb.Queryable, nil, expr.String(), time.UnixMilli(w.Maxt))
	if err != nil {
		return nil, fmt.Errorf("increase of %s: %w", name, err)
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, fmt.Errorf("increase of %s: %w", name, res.Err)
	}
	vec, _ := res.Value.(promql.Vector)
	// The result is only valid until the query is closed.
	return slices.Clone(vec), nil
}

// fromAccumulators is TailMeanFromAccumulators over the accumulator
// series' increase in the window, all of it one group.
func fromAccumulators(ctx context.Context, fb SeriesFallback, req DecomposeRequest) (Decomposition, error) {
	sums, err := increaseOver(ctx, fb, fb.AccumulatorSums, req.Window, true, LabelStage, LabelE2EBucket)
	if err != nil {
		return Decomposition{}, err
	}
	counts, err := increaseOver(ctx, fb, fb.AccumulatorCounts, req.Window, true, LabelE2EBucket)
	if err != nil {
		return Decomposition{}, err
	}
	groups, _, err := TailMeanFromAccumulators(sums, counts, req.P)
	if err != nil {
		return Decomposition{}, err
	}
	if len(groups) == 0 || !(groups[0].Requests > 0) {
		return Decomposition{}, noRequests("window")
	}
	g := groups[0]
	return Decomposition{
		Breakdown: g.Breakdown, Requests: int(math.Round(g.Requests)),
		Warnings: []string{"no request records in the window: the breakdown is estimated from tail accumulators (bounds per stage)"},
	}, nil
}

// fromHistograms bounds E[X_i | S ≥ q] per stage with the comonotonic
// coupling over the window's increase of the stage histograms. Each
// stage's value is the mean of its own top t values, above its tail
// contribution under any dependence, and their sum bounds the tail mean;
// no lower bound is claimed. increase() extrapolates, so counts are not
// integers: the bound then takes the smallest tail share of any
// population (attribution.ComonotonicBound).
func fromHistograms(ctx context.Context, fb SeriesFallback, req DecomposeRequest) (Decomposition, error) {
	inc, err := increaseOver(ctx, fb, fb.StageHistograms, req.Window, false, LabelStage)
	if err != nil {
		return Decomposition{}, err
	}
	groups, _, err := StageHistogramGroups(inc, nil)
	if err != nil {
		return Decomposition{}, markUnanswerable(err)
	}
	if len(groups) == 0 {
		return Decomposition{}, noRequests("window")
	}
	g := groups[0]
	// The request count is the largest stage histogram's count: every
	// request observes every stage it went through.
	n := 0.0
	for _, h := range g.Hists {
		c := 0.0
		for _, v := range h.Counts {
			c += v
		}
		n = math.Max(n, c)
	}
	if !(n > 0) {
		return Decomposition{}, noRequests("window")
	}
	e, err := attribution.ComonotonicBound(g.Stages, g.Hists, req.P)
	if err != nil {
		return Decomposition{}, markUnanswerable(err)
	}
	b := attribution.Breakdown{
		Method: attribution.MethodComonotonicBound, Kind: attribution.KindBound, P: req.P,
		Quantile: math.NaN(), QuantileLower: math.NaN(), QuantileUpper: math.NaN(), TargetLower: math.NaN(), Count: n,
	}
	for j, st := range g.Stages {
		if !slices.Contains(StageNames, st) {
			continue // a stage the breakdown does not know
		}
		v := e.PerStage[j]
		b.Stages = append(b.Stages, st)
		b.Contrib = append(b.Contrib, v)
		b.Lower = append(b.Lower, 0)
		b.Upper = append(b.Upper, v)
		b.Target += v
	}
	b.TargetUpper = b.Target
	return Decomposition{
		Breakdown: b, Requests: int(math.Round(n)),
		Warnings: []string{"no request records or tail accumulators in the window: each stage is an upper bound from the stage histograms (comonotonic coupling), and their sum bounds the tail mean; the request count is estimated by increase()"},
	}, nil
}
