package causalfn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/query/qlimit"
)

// This file is the one implementation of root-cause and pairwise causal
// analysis over loaded series: the PromQL functions (root_cause,
// robust_score, granger, …) and the HTTP endpoints
// (/api/v1/attribution/rootcause, /api/v1/attribution/causal) differ only
// in how they load series — the planner's arguments, or LoadRange — and
// call the same RootCause, Effect and alignment.

// Input is one loaded series: labels and float points, oldest first. NaN
// values count as missing.
type Input struct {
	Labels labels.Labels
	// Family is the metric the series' expression selects when the series
	// itself has no name (rate(x[1m]) drops it); "" if unknown.
	Family string
	// Node, when set, is the serving-graph node of a candidate, overriding
	// the mapping by name (rca.Candidate.Node).
	Node string
	T    []int64
	V    []float64
}

func (in Input) series() series {
	return series{labels: in.Labels, family: in.Family, t: in.T, v: in.V}
}

// ID is how results name the series: metric{labels}.
func (in Input) ID() string {
	s := in.series()
	return s.id()
}

// Query error kinds (QueryError.Kind), as the Prometheus API names them.
const (
	KindBadData   = "bad_data"  // unparsable, wrong type, native histograms
	KindExecution = "execution" // the query failed
	KindTimeout   = "timeout"
	KindCanceled  = "canceled"
)

// QueryError is a failed LoadRange: Kind says whose fault it is.
type QueryError struct {
	Kind string
	Err  error
}

func (e *QueryError) Error() string { return e.Err.Error() }
func (e *QueryError) Unwrap() error { return e.Err }

// LoadRange evaluates expr as a range query on the start/end/step grid and
// returns its series sorted by labels, each with the family expr selects.
// what names the expression in errors ("target", "candidates", …).
func LoadRange(ctx context.Context, engine promql.QueryEngine, q storage.Queryable, what, expr string, start, end time.Time, step time.Duration) ([]Input, error) {
	qry, err := engine.NewRangeQuery(ctx, q, nil, expr, start, end, step)
	if err != nil {
		return nil, &QueryError{KindBadData, fmt.Errorf("%s %q: %w", what, expr, err)}
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		var cancel promql.ErrQueryCanceled
		var timeout promql.ErrQueryTimeout
		switch {
		case errors.As(res.Err, &timeout) || errors.Is(res.Err, context.DeadlineExceeded):
			return nil, &QueryError{KindTimeout, fmt.Errorf("%s: %w", what, res.Err)}
		case errors.As(res.Err, &cancel) || errors.Is(res.Err, context.Canceled):
			return nil, &QueryError{KindCanceled, fmt.Errorf("%s: %w", what, res.Err)}
		}
		return nil, &QueryError{KindExecution, fmt.Errorf("%s %q: %w", what, expr, res.Err)}
	}
	m, ok := res.Value.(promql.Matrix)
	if !ok {
		return nil, &QueryError{KindBadData, fmt.Errorf("%s %q is a %s, want an instant vector or scalar expression", what, expr, res.Value.Type())}
	}
	fam := FamilyOf(expr)
	// The result is only valid until Close: copy what is kept.
	out := make([]Input, 0, len(m))
	for _, s := range m {
		if len(s.Histograms) > 0 {
			return nil, &QueryError{KindBadData, fmt.Errorf("%s %q: series %s holds native histograms; pass floats (histogram_quantile, histogram_avg)", what, expr, s.Metric)}
		}
		in := Input{Labels: s.Metric, Family: fam, T: make([]int64, len(s.Floats)), V: make([]float64, len(s.Floats))}
		for i, p := range s.Floats {
			in.T[i], in.V[i] = p.T, p.F
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b Input) int { return labels.Compare(a.Labels, b.Labels) })
	return out, nil
}

// FamilyOf is Family of the parsed expression, "" when it does not parse.
func FamilyOf(expr string) string {
	p := qlimit.Parser{Parser: parser.NewParser(parser.Options{EnableExperimentalFunctions: true}), Limits: qlimit.DefaultLimits()}
	e, err := p.ParseExpr(expr)
	if err != nil {
		return ""
	}
	return Family(e)
}

// RootCauseOptions configures RootCause.
type RootCauseOptions struct {
	// Rank configures the ranking; its ChangePoint is set from ChangeAt.
	Rank rca.Options
	// ChangeAt, Unix milliseconds, gives the change instead of detecting
	// it: the first aligned point at or after it. 0 = detect.
	ChangeAt int64
	// MaxLag > 0 adds each candidate's lead over the target in steps
	// (prewhitened cross-correlation, causal.PrewhitenedCCF, up to MaxLag);
	// it needs gap-free aligned points (see Align).
	MaxLag int
	// KeepFirstDuplicate keeps the first of candidates with equal IDs
	// (with a warning) instead of failing.
	KeepFirstDuplicate bool
	// TargetUnit and TargetHelp are the target family's metadata, when the
	// caller has them. They only matter when the harmful direction is
	// inferred (see TargetDirection).
	TargetUnit, TargetHelp string
}

// DirectionLabel is the target label that gives root_cause the harmful
// direction ("up", "down" or "both"): PromQL functions take no options,
// so a direction is attached to the target with label_replace, as a
// candidate's node is.
const DirectionLabel = "direction"

// TargetDirection is the harmful direction of a ranking's target: given
// (the endpoint's direction parameter) if not ""; else the target's
// DirectionLabel; else inferred from the target's metric name (or the
// family its expression selects), unit and help (rca.HarmfulDirection).
// Errors wrap causal.ErrArgument for a value other than up, down, both.
func TargetDirection(given rca.Direction, target Input, unit, help string) (rca.Direction, error) {
	if given != "" {
		return rca.ParseDirection(string(given))
	}
	if v := target.Labels.Get(DirectionLabel); v != "" {
		d, err := rca.ParseDirection(v)
		if err != nil {
			return "", fmt.Errorf("target label %s: %w", DirectionLabel, err)
		}
		return d, nil
	}
	s := target.series()
	return rca.HarmfulDirection(s.name(), unit, help), nil
}

// RootCauseResult is a ranking with the aligned data it was computed on.
type RootCauseResult struct {
	*rca.Result
	// T are the aligned timestamps (Unix ms); Target and Candidates the
	// aligned values, Candidates in input order (less those left out).
	T          []int64
	Target     causal.Series
	Candidates []rca.Candidate
	// Lag maps a candidate's name to its lead in steps, when MaxLag > 0
	// and the test succeeded.
	Lag map[string]int
	// Warnings name candidates left out and points dropped; Infos are
	// notes (NaN points of the target dropped).
	Warnings, Infos []string
}

// minCoverage is the share of the target's points a candidate must have to
// join a ranking; one with fewer is left out (with a warning) rather than
// cutting every other candidate's window down to its points.
const minCoverage = 0.5

// RootCause ranks cands as root causes of target (rca.Rank) on one grid:
// the target's finite points; a candidate with values at fewer than half
// of them is left out with a warning; the points where a kept candidate
// has no value are dropped from all, with a warning. The per-candidate
// lead (MaxLag) is computed only when the aligned points have no hole,
// else it is left out with a warning: a lagged test pairs points by
// position. The target's harmful direction is TargetDirection's. Errors
// are rca.Rank's, a bad direction, and a duplicate candidate ID unless
// KeepFirstDuplicate.
func RootCause(target Input, cands []Input, opts RootCauseOptions) (*RootCauseResult, error) {
	res := &RootCauseResult{Lag: map[string]int{}}
	tgt, n := finite(target.series())
	if n > 0 {
		res.Infos = append(res.Infos, fmt.Sprintf("%d NaN or missing points of %s left out", n, tgt.id()))
	}
	seen := map[string]bool{}
	kept := []*series{&tgt}
	var keptIn []series
	var nodes []string
	for _, c := range cands {
		s := c.series()
		id := s.id()
		if seen[id] {
			if !opts.KeepFirstDuplicate {
				return nil, fmt.Errorf("candidate %s appears twice; give the series of each argument distinct labels (label_replace): %w", id, causal.ErrArgument)
			}
			res.Warnings = append(res.Warnings, fmt.Sprintf("candidate %s appears in more than one candidates expression; the first is used", id))
			continue
		}
		seen[id] = true
		ts, _ := align(&tgt, &s)
		if float64(len(ts)) < minCoverage*float64(len(tgt.t)) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("candidate %s left out: it has values at %d of the target's %d points, under %.0f%%",
				id, len(ts), len(tgt.t), 100*minCoverage))
			continue
		}
		keptIn = append(keptIn, s)
		nodes = append(nodes, c.Node)
	}
	for i := range keptIn {
		kept = append(kept, &keptIn[i])
	}
	ts, vals := align(kept...)
	if lost := len(tgt.t) - len(ts); lost > 0 && len(keptIn) > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d of the target's %d points left out where a candidate has no value", lost, len(tgt.t)))
	}
	res.T = ts
	res.Target = causal.Series{Name: tgt.id(), Values: vals[0]}
	res.Candidates = make([]rca.Candidate, len(keptIn))
	for i := range keptIn {
		s := &keptIn[i]
		res.Candidates[i] = rca.Candidate{Name: s.id(), Metric: s.name(), Node: nodes[i], Labels: s.labels.Map(), Values: vals[i+1]}
	}
	ro := opts.Rank
	ro.ChangePoint = 0
	dir, err := TargetDirection(ro.Direction, target, opts.TargetUnit, opts.TargetHelp)
	if err != nil {
		return nil, err
	}
	ro.Direction = dir
	if opts.ChangeAt != 0 {
		k, _ := slices.BinarySearch(ts, opts.ChangeAt)
		if k >= len(ts) {
			return nil, fmt.Errorf("change_at: no aligned point at or after it: %w", causal.ErrArgument)
		}
		ro.ChangePoint = max(k, 1)
	}
	rk, err := rca.Rank(res.Target, res.Candidates, ro)
	if err != nil {
		return nil, err
	}
	res.Result = rk
	if opts.MaxLag > 0 && len(res.Candidates) > 0 {
		if err := contiguous(ts, gridStep(ts)); err != nil {
			res.Warnings = append(res.Warnings, "lags left out: "+err.Error())
		} else {
			for _, c := range res.Candidates {
				x := causal.Series{Name: c.Name, Values: c.Values}
				if cc, err := causal.PrewhitenedCCF(x, res.Target, opts.MaxLag, -1); err == nil {
					res.Lag[c.Name] = cc.BestLag
				}
			}
		}
	}
	return res, nil
}

// EffectRequest is one pairwise causal analysis (the causal endpoint).
type EffectRequest struct {
	// Method is "backdoor", "granger" or "ccf".
	Method             string
	Outcome, Treatment Input
	Confounders        []Input
	MaxLag             int
	// Level is the interval's confidence level (backdoor; ccf gives its
	// 95 % Fisher interval only).
	Level float64
}

// EffectResult is Effect's answer.
type EffectResult struct {
	Effect, P    float64
	Lower, Upper *float64
	Lag, N       int
	// T, Observed and Counterfactual: the outcome had the treatment stayed
	// at its mean over the baseline (backdoor only; nil if it failed).
	T                        []int64
	Observed, Counterfactual []float64
}

// BaselineShare is the share of the window, from its start, that is the
// baseline of a counterfactual without an explicit baseline (the causal
// endpoint): the first quarter, at least two points.
const BaselineShare = 0.25

// Effect runs one pairwise analysis on the points where every series has a
// finite value, with the rules of the PromQL functions: lagged methods
// (granger, ccf) refuse aligned points with a hole; granger picks its lag
// by AIC (GrangerBest).
func Effect(req EffectRequest) (*EffectResult, error) {
	y, x := req.Outcome.series(), req.Treatment.series()
	all := []*series{&y, &x}
	zs := make([]series, len(req.Confounders))
	for i := range req.Confounders {
		zs[i] = req.Confounders[i].series()
		all = append(all, &zs[i])
	}
	ts, vals := align(all...)
	out := &EffectResult{N: len(ts)}
	col := func(name string, v []float64) causal.Series { return causal.Series{Name: name, Values: v} }
	outcome, treatment := col(y.id(), vals[0]), col(x.id(), vals[1])
	conf := make([]causal.Series, len(zs))
	for i := range zs {
		conf[i] = col(zs[i].id(), vals[i+2])
	}
	if req.Method != "backdoor" && len(ts) > 1 {
		if err := contiguous(ts, gridStep(ts)); err != nil {
			return nil, err
		}
	}
	switch req.Method {
	case "backdoor":
		e, err := causal.BackdoorEffect(outcome, treatment, conf, -1)
		if err != nil {
			return nil, err
		}
		lo, hi := e.Coef-quantileZ(req.Level)*e.StdErr, e.Coef+quantileZ(req.Level)*e.StdErr
		out.Effect, out.Lower, out.Upper, out.P = e.Coef, &lo, &hi, e.PValue
		base := causal.Window{Start: 0, End: max(int(BaselineShare*float64(len(ts))), 2)}
		cf, err := causal.Counterfactual(outcome, treatment, conf, causal.Window{Start: 0, End: len(ts)}, causal.Baseline{Window: base})
		if err == nil {
			out.T, out.Observed, out.Counterfactual = ts, outcome.Values, cf.Series
		}
	case "granger":
		lag, f, p, err := GrangerBest(outcome, treatment, conf, req.MaxLag)
		if err != nil {
			return nil, err
		}
		out.Effect, out.P, out.Lag = f, p, lag
	case "ccf":
		c, err := causal.PrewhitenedCCF(treatment, outcome, req.MaxLag, -1)
		if err != nil {
			return nil, err
		}
		lo, hi := c.Lower, c.Upper
		out.Effect, out.Lower, out.Upper, out.Lag = c.BestCorr, &lo, &hi, c.BestLag
		// Two-sided p-value of r at the best lag from the Fisher transform,
		// on the same N as the interval.
		out.P = math.NaN()
		for i, l := range c.Lags {
			if l == c.BestLag && c.N[i] > 3 {
				zr := math.Atanh(c.BestCorr) * math.Sqrt(float64(c.N[i]-3))
				out.P = 2 * normalSurvival(math.Abs(zr))
			}
		}
	default:
		return nil, fmt.Errorf("method %q: want backdoor, granger or ccf: %w", req.Method, causal.ErrArgument)
	}
	return out, nil
}

// GrangerBest runs causal.Granger and returns the test at the lag AIC
// picks — the one lag-selection criterion of granger() and the causal
// endpoint.
func GrangerBest(y, x causal.Series, cond []causal.Series, maxLag int) (lag int, f, p float64, err error) {
	g, err := causal.Granger(y, x, cond, maxLag)
	if err != nil {
		return 0, 0, 0, err
	}
	best := g.Tests[g.BestAIC-1]
	return g.BestAIC, best.F, best.PValue, nil
}

// quantileZ is the standard normal quantile at (1 + level)/2.
func quantileZ(level float64) float64 { return distuv.UnitNormal.Quantile((1 + level) / 2) }

func normalSurvival(z float64) float64 { return distuv.UnitNormal.Survival(z) }
