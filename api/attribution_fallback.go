package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query/tailfn"
)

// The fallback chain of method=auto on e2e (docs/functions.md, "Which
// method answers"): request records, exact; else the tail accumulators
// over increase(… anchored), an estimate inside bounds; else the per-stage
// histograms, an upper bound per stage from the comonotonic coupling.
// Every answer names its method and kind.

// DefaultStageHistograms is the native histogram of stage seconds, label
// stage, that the last step of the chain reads.
const DefaultStageHistograms = "tailroot_request_stage_seconds"

// fromSeries is the chain below records: accumulators, then histograms.
func (a *Attribution) fromSeries(ctx context.Context, req decomposeReq) (decomposition, error) {
	d, err := a.fromAccumulators(ctx, req)
	if !errors.Is(err, errNoRequests) {
		return d, err
	}
	return a.fromHistograms(ctx, req)
}

// fromHistograms bounds E[X_i | S ≥ q] per stage with
// histogram_comonotonic_bound over the window's increase of the stage
// histograms. Each stage's value is the mean of its own top t values,
// above its tail contribution under any dependence, and their sum bounds
// the tail mean; no lower bound is claimed. increase() extrapolates, so
// counts are not integers: the bound then takes the smallest tail share of
// any population (attribution.ComonotonicBound).
func (a *Attribution) fromHistograms(ctx context.Context, req decomposeReq) (decomposition, error) {
	vs := &parser.VectorSelector{Name: DefaultStageHistograms, LabelMatchers: append([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, DefaultStageHistograms)}, req.win.Matchers...)}
	rng := fmt.Sprintf("%dms", req.win.Maxt-req.win.Mint+1)
	inc := fmt.Sprintf(`sum by (stage) (increase(%s[%s]))`, vs, rng)
	bound, err := a.instant(ctx, fmt.Sprintf(`histogram_comonotonic_bound(%v, %s)`, req.p, inc), req.win.Maxt)
	if err != nil {
		return decomposition{}, err
	}
	counts, err := a.instant(ctx, fmt.Sprintf(`histogram_count(%s)`, inc), req.win.Maxt)
	if err != nil {
		return decomposition{}, err
	}
	b := attribution.Breakdown{Method: attribution.MethodComonotonicBound, Kind: attribution.KindBound, P: req.p, Quantile: math.NaN(), QuantileLower: math.NaN(), QuantileUpper: math.NaN(), TargetLower: math.NaN()}
	per := map[string]float64{}
	for _, s := range bound {
		per[s.Metric.Get(tailfn.LabelStage)] = s.F
	}
	for _, st := range tailfn.StageNames {
		v, ok := per[st]
		if !ok {
			continue
		}
		b.Stages = append(b.Stages, st)
		b.Contrib = append(b.Contrib, v)
		b.Lower = append(b.Lower, 0)
		b.Upper = append(b.Upper, v)
		b.Target += v
	}
	b.TargetUpper = b.Target
	n := 0.0
	for _, s := range counts {
		n = math.Max(n, s.F)
	}
	if len(b.Stages) == 0 || !(n > 0) {
		return decomposition{}, errNoRequests
	}
	b.Count = n
	d := decomposition{b: b, requests: int(math.Round(n))}
	d.warnings = append(d.warnings, "no request records or tail accumulators in the window: each stage is an upper bound from the stage histograms (comonotonic coupling), and their sum bounds the tail mean; the request count is estimated by increase()")
	return d, nil
}

// instant evaluates qs at ms; a query the engine cannot parse (functions
// not registered) means there is nothing to fall back on.
func (a *Attribution) instant(ctx context.Context, qs string, ms int64) (promql.Vector, error) {
	q, err := a.engine.NewInstantQuery(ctx, a.q, nil, qs, time.UnixMilli(ms))
	if err != nil {
		return nil, errNoRequests
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	vec, _ := res.Value.(promql.Vector)
	return vec, nil
}
