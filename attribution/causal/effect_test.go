package causal

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// On the five hand-worked points (see TestOLSHandWorked, TestHACHandWorked)
// the effect is the slope 0.6 with HAC(1) standard error √0.0272.
func TestBackdoorEffectHandWorked(t *testing.T) {
	e, err := BackdoorEffect(ser("y", 2, 4, 5, 4, 5), ser("x", 1, 2, 3, 4, 5), nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	se := math.Sqrt(0.0272)
	z := 0.6 / se
	checkNear(t, "coef", e.Coef, 0.6, 1e-14)
	checkNear(t, "se", e.StdErr, se, 1e-13)
	checkNear(t, "z", e.Z, z, 1e-12)
	// Two-sided normal p-value via erfc, independent of gonum's distuv.
	checkNear(t, "p", e.PValue, math.Erfc(z/math.Sqrt2), 1e-12)
	checkNear(t, "lower", e.Lower, 0.6-1.959963984540054*se, 1e-13)
	checkNear(t, "upper", e.Upper, 0.6+1.959963984540054*se, 1e-13)
	if e.Treatment != "x" || e.HACLag != 1 {
		t.Errorf("treatment %q lag %d", e.Treatment, e.HACLag)
	}
}

// confounded: z drives both the treatment and the outcome; the true effect
// of the treatment is 2.
func confounded(n int, seed uint64) (y, tr, z []float64) {
	r := rng(seed)
	z = ar1(r, n, 0.7)
	tr = make([]float64, n)
	y = make([]float64, n)
	e := ar1(r, n, 0.5)
	for i := range y {
		tr[i] = 1.5*z[i] + r.NormFloat64()
		y[i] = 10 + 2*tr[i] + 3*z[i] + e[i]
	}
	return y, tr, z
}

func TestBackdoorEffectRemovesConfounding(t *testing.T) {
	y, tr, z := confounded(600, 9)
	naive, err := BackdoorEffect(ser("y", y...), ser("batch", tr...), nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	adj, err := BackdoorEffect(ser("y", y...), ser("batch", tr...), []Series{ser("z", z...)}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if naive.Lower <= 2 && 2 <= naive.Upper {
		t.Errorf("unadjusted interval [%g, %g] covers the true effect; the test data are not confounded", naive.Lower, naive.Upper)
	}
	if !(adj.Lower <= 2 && 2 <= adj.Upper) {
		t.Errorf("adjusted effect %g, interval [%g, %g] misses 2", adj.Coef, adj.Lower, adj.Upper)
	}
	if adj.HACLag != DefaultHACLag(600) {
		t.Errorf("lag %d", adj.HACLag)
	}
	// Coefficient against the naive normal equations.
	coef, _, _ := naiveOLS(t, y, [][]float64{ones(600), tr, z})
	checkNear(t, "adjusted coef", adj.Coef, coef[1], 1e-9)
}

func TestCounterfactual(t *testing.T) {
	// The treatment steps up by 4 at t = 300; with effect 2 the outcome
	// rises by 8. Holding the treatment at its pre-step mean should remove
	// the step.
	y, tr, z := confounded(600, 10)
	for i := 300; i < 600; i++ {
		tr[i] += 4
		y[i] += 8
	}
	res, err := Counterfactual(ser("p99", y...), ser("batch", tr...), []Series{ser("z", z...)},
		Window{0, 600}, Baseline{Window: Window{0, 300}})
	if err != nil {
		t.Fatal(err)
	}
	base := mean(tr[:300])
	checkNear(t, "baseline", res.Baseline, base, 1e-15)
	coef, resid, _ := naiveOLS(t, y, [][]float64{ones(600), tr, z})
	b := coef[1]
	for i := range y {
		checkNear(t, "counterfactual", res.Series[i], y[i]-b*(tr[i]-base), 1e-9)
		checkNear(t, "delta", res.Delta[i], b*(tr[i]-base), 1e-9)
	}
	for i := range resid {
		checkNear(t, "resid", res.Resid[i], resid[i], 1e-9)
	}
	before, after := mean(res.Series[:300]), mean(res.Series[300:])
	if math.Abs(after-before) > 1.5 {
		t.Errorf("counterfactual step %g (observed step %g)", after-before, mean(y[300:])-mean(y[:300]))
	}

	// A fixed baseline value and a fit window shorter than the series.
	fixed, err := Counterfactual(ser("p99", y...), ser("batch", tr...), nil, Window{100, 500}, Baseline{Value: 1})
	if err != nil {
		t.Fatal(err)
	}
	c2, _, _ := naiveOLS(t, y[100:500], [][]float64{ones(400), tr[100:500]})
	checkNear(t, "fixed-baseline effect", fixed.Effect.Coef, c2[1], 1e-9)
	checkNear(t, "fixed-baseline series", fixed.Series[0], y[0]-c2[1]*(tr[0]-1), 1e-9)
	if len(fixed.Resid) != 400 {
		t.Errorf("resid length %d", len(fixed.Resid))
	}
}

func TestEffectErrors(t *testing.T) {
	y := []float64{1, 3, 2, 5, 4, 6}
	flat := []float64{3, 3, 3, 3, 3, 3}
	_, err := BackdoorEffect(ser("p99", y...), ser("gpu_clock", flat...), nil, 1)
	if !errors.Is(err, ErrSingular) || !strings.Contains(err.Error(), `"gpu_clock"`) {
		t.Errorf("constant treatment: %v", err)
	}
	_, err = BackdoorEffect(ser("p99", y[:2]...), ser("t", y[:2]...), nil, 0)
	if !errors.Is(err, ErrTooShort) {
		t.Errorf("two points, two coefficients: %v", err)
	}
	_, err = BackdoorEffect(ser("p99", y...), ser("t", y[:5]...), nil, 0)
	if !errors.Is(err, ErrLength) || !strings.Contains(err.Error(), "6 points") || !strings.Contains(err.Error(), "has 5") {
		t.Errorf("length: %v", err)
	}
	bad := append([]float64{}, y...)
	bad[4] = math.Inf(1)
	_, err = BackdoorEffect(ser("p99", y...), ser("t", bad...), nil, 0)
	if !errors.Is(err, ErrNaN) || !strings.Contains(err.Error(), "index 4") {
		t.Errorf("inf: %v", err)
	}
	_, err = Counterfactual(ser("p99", y...), ser("t", y...), nil, Window{0, 9}, Baseline{})
	if !errors.Is(err, ErrArgument) {
		t.Errorf("window: %v", err)
	}
	_, err = Counterfactual(ser("p99", y...), ser("t", y...), nil, Window{0, 6}, Baseline{Window: Window{2, 8}})
	if !errors.Is(err, ErrArgument) {
		t.Errorf("baseline window: %v", err)
	}
}
