package causalfn

import (
	"context"
	"fmt"
	"strconv"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/query"
)

// maxLagLimit bounds max_lag arguments: a lag of 100 steps is 25 minutes at
// 15 s, more than any serving feedback loop.
const maxLagLimit = 100

// pairwise evaluates the outcome, the candidates and the optional extra
// series (conditioning or confounders) of a pairwise function.
type pairwise struct {
	outcome series
	cands   []series
	extra   []series
}

func loadPairwise(ctx context.Context, c *query.Call, extra *arg) (*pairwise, error) {
	p := &pairwise{}
	var err error
	if p.outcome, err = oneArg(ctx, c, arg{0, "outcome"}); err != nil {
		return nil, err
	}
	if p.cands, err = matrixArg(ctx, c, arg{1, "candidates"}); err != nil {
		return nil, err
	}
	if extra != nil && extra.index < len(c.Args) {
		if p.extra, err = matrixArg(ctx, c, *extra); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// aligned returns the outcome, candidate s and the extra series on their
// common points as causal.Series, and the timestamps. Series with no
// timestamp in common (raw range selectors over targets scraped at
// different offsets) are an error that says how to align them.
func (p *pairwise) aligned(s *series) ([]int64, causal.Series, causal.Series, []causal.Series, error) {
	all := []*series{&p.outcome, s}
	for i := range p.extra {
		all = append(all, &p.extra[i])
	}
	ts, vals := align(all...)
	if len(ts) == 0 {
		return nil, causal.Series{}, causal.Series{}, nil, fmt.Errorf(
			"no timestamps in common with the outcome (or the other series): evaluate them on one grid with a subquery, e.g. x[1h:15s] instead of x[1h]: %w",
			causal.ErrLength)
	}
	out := make([]causal.Series, len(all))
	for i, x := range all {
		out[i] = causal.Series{Name: x.id(), Values: vals[i]}
	}
	return ts, out[0], out[1], out[2:], nil
}

// funcGranger: granger(outcome, candidates, max_lag [, conditioning]).
func funcGranger(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	p, err := loadPairwise(ctx, c, &arg{3, "conditioning"})
	if err != nil {
		return nil, nil, err
	}
	maxLag, err := intArg(ctx, c, arg{2, "max_lag"}, 1, maxLagLimit)
	if err != nil {
		return nil, nil, err
	}
	step := gridStep(p.outcome.t)
	res := &result{t: c.T.UnixMilli()}
	k := &skipper{fn: c.Func.Name}
	type row struct {
		s   *series
		lag int
		p   float64
		f   float64
	}
	var rows []row
	for i := range p.cands {
		s := &p.cands[i]
		ts, y, x, cond, err := p.aligned(s)
		if err != nil {
			k.fail(s, err)
			continue
		}
		if err := contiguous(ts, step); err != nil {
			k.fail(s, err)
			continue
		}
		g, err := causal.Granger(y, x, cond, maxLag)
		if err != nil {
			k.fail(s, err)
			continue
		}
		best := g.Tests[g.BestAIC-1]
		rows = append(rows, row{s, g.BestAIC, best.PValue, best.F})
		lag := strconv.Itoa(g.BestAIC)
		res.add(s, best.F, "statistic", "f", "lag", lag)
		res.add(s, best.PValue, "statistic", "p_value", "lag", lag)
		res.add(s, float64(g.BestAIC*int(step))/1000, "statistic", "lag_seconds", "lag", lag)
		res.add(s, float64(g.BestBIC), "statistic", "lag_bic")
		k.ok++
	}
	if len(rows) > 0 {
		ps := make([]float64, len(rows))
		for i, r := range rows {
			ps[i] = r.p
		}
		qs, err := causal.BenjaminiHochberg(ps)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: BUG: %w", c.Func.Name, err)
		}
		for i, r := range rows {
			res.add(r.s, qs[i], "statistic", "q_value", "lag", strconv.Itoa(r.lag))
		}
	}
	annos, err := k.done(len(p.cands))
	sortStats(res.vec)
	return res.vec, annos, err
}

// funcLaggedCorrelation: lagged_correlation(outcome, candidates, max_lag).
func funcLaggedCorrelation(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	p, err := loadPairwise(ctx, c, nil)
	if err != nil {
		return nil, nil, err
	}
	maxLag, err := intArg(ctx, c, arg{2, "max_lag"}, 0, maxLagLimit)
	if err != nil {
		return nil, nil, err
	}
	step := gridStep(p.outcome.t)
	res := &result{t: c.T.UnixMilli()}
	k := &skipper{fn: c.Func.Name}
	for i := range p.cands {
		s := &p.cands[i]
		ts, y, x, _, err := p.aligned(s)
		if err != nil {
			k.fail(s, err)
			continue
		}
		if err := contiguous(ts, step); err != nil {
			k.fail(s, err)
			continue
		}
		r, err := causal.PrewhitenedCCF(x, y, maxLag, -1)
		if err != nil {
			k.fail(s, err)
			continue
		}
		lag := strconv.Itoa(r.BestLag)
		res.add(s, r.BestCorr, "statistic", "correlation", "lag", lag)
		res.add(s, r.Lower, "statistic", "lower", "lag", lag)
		res.add(s, r.Upper, "statistic", "upper", "lag", lag)
		res.add(s, r.PValue, "statistic", "p_value", "lag", lag)
		res.add(s, float64(r.BestLag*int(step))/1000, "statistic", "lag_seconds", "lag", lag)
		k.ok++
	}
	annos, err := k.done(len(p.cands))
	sortStats(res.vec)
	return res.vec, annos, err
}

// funcBackdoorEffect: backdoor_effect(outcome, treatments [, confounders]).
func funcBackdoorEffect(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	p, err := loadPairwise(ctx, c, &arg{2, "confounders"})
	if err != nil {
		return nil, nil, err
	}
	res := &result{t: c.T.UnixMilli()}
	k := &skipper{fn: c.Func.Name}
	var done []*series
	var ps []float64
	for i := range p.cands {
		s := &p.cands[i]
		_, y, x, conf, err := p.aligned(s)
		if err != nil {
			k.fail(s, err)
			continue
		}
		e, err := causal.BackdoorEffect(y, x, conf, -1)
		if err != nil {
			k.fail(s, err)
			continue
		}
		res.add(s, e.Coef, "statistic", "effect")
		res.add(s, e.StdErr, "statistic", "std_error")
		res.add(s, e.Lower, "statistic", "lower")
		res.add(s, e.Upper, "statistic", "upper")
		res.add(s, e.PValue, "statistic", "p_value")
		done = append(done, s)
		ps = append(ps, e.PValue)
		k.ok++
	}
	if len(ps) > 0 {
		qs, err := causal.BenjaminiHochberg(ps)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: BUG: %w", c.Func.Name, err)
		}
		for i, s := range done {
			res.add(s, qs[i], "statistic", "q_value")
		}
	}
	annos, err := k.done(len(p.cands))
	sortStats(res.vec)
	return res.vec, annos, err
}

// funcCounterfactual: counterfactual(outcome, treatments, baseline_seconds
// [, confounders]).
func funcCounterfactual(ctx context.Context, c *query.Call) (promql.Vector, annotations.Annotations, error) {
	p, err := loadPairwise(ctx, c, &arg{3, "confounders"})
	if err != nil {
		return nil, nil, err
	}
	a := arg{2, "baseline_seconds"}
	base, err := c.Scalar(ctx, a.index)
	if err != nil {
		return nil, nil, err
	}
	if !(base > 0) {
		return nil, nil, fmt.Errorf("%s: %s must be > 0 seconds, got %v", c.Func.Name, a, base)
	}
	res := &result{t: c.T.UnixMilli()}
	k := &skipper{fn: c.Func.Name}
	for i := range p.cands {
		s := &p.cands[i]
		ts, y, x, conf, err := p.aligned(s)
		if err != nil {
			k.fail(s, err)
			continue
		}
		if len(ts) == 0 {
			k.fail(s, fmt.Errorf("no timestamps in common with the outcome: %w", causal.ErrTooShort))
			continue
		}
		nb := 0
		for nb < len(ts) && float64(ts[nb]-ts[0]) < base*1000 {
			nb++
		}
		cf, err := causal.Counterfactual(y, x, conf, causal.Window{Start: 0, End: len(ts)},
			causal.Baseline{Window: causal.Window{Start: 0, End: nb}})
		if err != nil {
			k.fail(s, err)
			continue
		}
		last := len(ts) - 1
		res.add(s, cf.Series[last], "statistic", "counterfactual")
		res.add(s, y.Values[last], "statistic", "observed")
		res.add(s, cf.Delta[last], "statistic", "delta")
		res.add(s, cf.Effect.Coef, "statistic", "effect")
		res.add(s, cf.Baseline, "statistic", "baseline")
		k.ok++
	}
	annos, err := k.done(len(p.cands))
	sortStats(res.vec)
	return res.vec, annos, err
}
