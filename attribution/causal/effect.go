package causal

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Effect is the adjusted linear effect of a treatment on an outcome.
type Effect struct {
	Treatment string
	// Coef is the treatment coefficient b in
	//   outcome_t = a + b·treatment_t + Σ_j c_j·confounder_{j,t} + e_t.
	Coef float64
	// StdErr is its Newey–West standard error (OLSResult.HAC with HACLag,
	// no small-sample correction). Z = Coef/StdErr; PValue = 2·Φ(−|Z|);
	// [Lower, Upper] = Coef ∓ 1.959964·StdErr. The normal reference matches
	// statsmodels, whose robust covariances default to use_t=False.
	StdErr, Z, PValue float64
	Lower, Upper      float64
	HACLag            int
	// Fit is the full regression (coefficient 0 the intercept, 1 the
	// treatment, then the confounders in the order given).
	Fit *OLSResult
}

// BackdoorEffect estimates the effect of treatment on outcome adjusting for
// the given confounders (a backdoor adjustment set, chosen by the caller from
// the known serving graph): it regresses outcome on an intercept, the
// treatment and the confounders by OLS and reports the treatment coefficient
// with HAC errors, because latency series are autocorrelated and classical
// errors would overstate significance. hacLag < 0 selects
// DefaultHACLag(n).
//
// Errors: those of OLS (ErrNaN, ErrLength, ErrTooShort, ErrSingular naming a
// constant treatment or confounder) and of HAC.
func BackdoorEffect(outcome, treatment Series, confounders []Series, hacLag int) (*Effect, error) {
	x := append([]Series{treatment}, confounders...)
	fit, err := OLS(outcome, x, true)
	if err != nil {
		return nil, fmt.Errorf("backdoor effect of %q: %w", treatment.Name, err)
	}
	hac, err := fit.HAC(hacLag, false)
	if err != nil {
		return nil, fmt.Errorf("backdoor effect of %q: %w", treatment.Name, err)
	}
	b, se := fit.Coef[1], hac.StdErr[1]
	z := b / se
	return &Effect{
		Treatment: treatment.Name,
		Coef:      b, StdErr: se, Z: z,
		PValue: 2 * distuv.UnitNormal.Survival(math.Abs(z)),
		Lower:  b - z975*se, Upper: b + z975*se,
		HACLag: hac.Lag,
		Fit:    fit,
	}, nil
}

// Window is the half-open index range [Start, End) of a series.
type Window struct{ Start, End int }

func (w Window) check(n int, what string) error {
	if w.Start < 0 || w.End > n || w.Start >= w.End {
		return fmt.Errorf("%s window [%d, %d) outside series of %d points: %w", what, w.Start, w.End, n, ErrArgument)
	}
	return nil
}

// Baseline says what value the treatment is held at in a counterfactual:
// the mean of the treatment over Window when Window is non-empty
// (End > Start), otherwise Value.
type Baseline struct {
	Value  float64
	Window Window
}

// CounterfactualResult is "the outcome had the treatment stayed at its
// baseline".
type CounterfactualResult struct {
	// Effect is the treatment coefficient b of the fit (with HAC errors at
	// the default lag).
	Effect *Effect
	// Baseline is the treatment level used.
	Baseline float64
	// Series has the length of the input:
	//   Series_t = outcome_t − b·(treatment_t − Baseline).
	Series []float64
	// Delta_t = b·(treatment_t − Baseline), the part of outcome_t attributed
	// to the treatment's departure from its baseline.
	Delta []float64
	// Resid are the regression residuals over the fit window, kept so the
	// caller can judge the fit (autocorrelation, outliers).
	Resid []float64
}

// Counterfactual fits
//
//	outcome_t = a + b·treatment_t + Σ_j c_j·confounder_{j,t} + e_t,  t ∈ fit
//
// and returns, for every t of the series,
//
//	counterfactual_t = outcome_t − b·(treatment_t − baseline).
//
// Only the treatment term is reverted: the confounders and the residual keep
// their observed values, so the counterfactual differs from the observation
// exactly by the treatment's modelled contribution. This is a linear,
// no-interaction model; it answers "P99 if X had stayed at baseline" only
// as far as that model holds.
//
// Errors: those of BackdoorEffect, and ErrArgument for a fit or baseline
// window outside the series.
func Counterfactual(outcome, treatment Series, confounders []Series, fit Window, baseline Baseline) (*CounterfactualResult, error) {
	all := append([]Series{outcome, treatment}, confounders...)
	if err := checkAligned(all...); err != nil {
		return nil, fmt.Errorf("counterfactual: %w", err)
	}
	n := len(outcome.Values)
	if err := fit.check(n, "fit"); err != nil {
		return nil, fmt.Errorf("counterfactual: %w", err)
	}
	base := baseline.Value
	if baseline.Window.End > baseline.Window.Start {
		if err := baseline.Window.check(n, "baseline"); err != nil {
			return nil, fmt.Errorf("counterfactual: %w", err)
		}
		base = mean(treatment.Values[baseline.Window.Start:baseline.Window.End])
	} else if math.IsNaN(base) || math.IsInf(base, 0) {
		return nil, fmt.Errorf("counterfactual: baseline value %v: %w", base, ErrNaN)
	}
	cut := func(s Series) Series {
		return Series{Name: s.Name, Values: s.Values[fit.Start:fit.End]}
	}
	conf := make([]Series, len(confounders))
	for i, c := range confounders {
		conf[i] = cut(c)
	}
	eff, err := BackdoorEffect(cut(outcome), cut(treatment), conf, -1)
	if err != nil {
		return nil, fmt.Errorf("counterfactual: %w", err)
	}
	res := &CounterfactualResult{
		Effect: eff, Baseline: base,
		Series: make([]float64, n), Delta: make([]float64, n),
		Resid: eff.Fit.Resid,
	}
	for t := range n {
		d := eff.Coef * (treatment.Values[t] - base)
		res.Delta[t] = d
		res.Series[t] = outcome.Values[t] - d
	}
	return res, nil
}
