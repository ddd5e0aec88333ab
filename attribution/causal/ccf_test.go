package causal

import (
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// x = 1..5 by hand: deviations −2 −1 0 1 2;
//
//	r0 = 10/5 = 2, r1 = (2 + 0 + 0 + 2)/5 = 0.8, r2 = (0 − 1 + 0)/5 = −0.2
//	φ11 = r1/r0 = 0.4,             v1 = 2·(1 − 0.16) = 1.68
//	φ22 = (r2 − φ11·r1)/v1 = −0.52/1.68,  v2 = v1·(1 − φ22²)
//	AIC_m = 5·ln v_m + 2m: AIC0 = 5 ln 2 is the smallest, so order 0.
func TestFitARHandWorked(t *testing.T) {
	ar, err := FitAR(ser("x", 1, 2, 3, 4, 5), 2)
	if err != nil {
		t.Fatal(err)
	}
	phi22 := -0.52 / 1.68
	v2 := 1.68 * (1 - phi22*phi22)
	checkNear(t, "AIC0", ar.AIC[0], 5*math.Log(2), 1e-14)
	checkNear(t, "AIC1", ar.AIC[1], 5*math.Log(1.68)+2, 1e-14)
	checkNear(t, "AIC2", ar.AIC[2], 5*math.Log(v2)+4, 1e-14)
	if ar.Order != 0 || len(ar.Coef) != 0 {
		t.Errorf("order %d coef %v, want 0", ar.Order, ar.Coef)
	}
	checkNear(t, "mean", ar.Mean, 3, 0)
	checkNear(t, "var", ar.Var, 2, 1e-15)
}

// The Yule–Walker coefficients solve the Toeplitz system R φ = r; check the
// Levinson–Durbin result against a direct dense solve.
func TestFitARAgainstToeplitzSolve(t *testing.T) {
	r := rng(7)
	n := 500
	x := make([]float64, n)
	for i := 2; i < n; i++ {
		x[i] = 0.6*x[i-1] - 0.3*x[i-2] + r.NormFloat64()
	}
	ar, err := FitAR(ser("x", x...), -1)
	if err != nil {
		t.Fatal(err)
	}
	if ar.Order < 2 {
		t.Fatalf("AR(2) data fitted with order %d", ar.Order)
	}
	p := ar.Order
	mu := stat.Mean(x, nil)
	acov := func(k int) float64 {
		s := 0.0
		for i := 0; i+k < n; i++ {
			s += (x[i] - mu) * (x[i+k] - mu)
		}
		return s / float64(n)
	}
	a := mat.NewDense(p, p, nil)
	b := mat.NewVecDense(p, nil)
	for i := range p {
		for j := range p {
			a.Set(i, j, acov(abs(i-j)))
		}
		b.SetVec(i, acov(i+1))
	}
	var phi mat.VecDense
	if err := phi.SolveVec(a, b); err != nil {
		t.Fatal(err)
	}
	for j := range p {
		checkNear(t, "phi", ar.Coef[j], phi.AtVec(j), 1e-10)
	}
	checkNear(t, "phi1", ar.Coef[0], 0.6, 0.1)
	checkNear(t, "phi2", ar.Coef[1], -0.3, 0.1)
}

func TestPrewhitenedCCF(t *testing.T) {
	r := rng(8)
	n := 400
	x := ar1(r, n, 0.8)
	y := make([]float64, n)
	for i := range y {
		y[i] = 0.5 * r.NormFloat64()
		if i >= 3 {
			y[i] += 2 * x[i-3]
		}
	}
	res, err := PrewhitenedCCF(ser("x", x...), ser("y", y...), 6, -1)
	if err != nil {
		t.Fatal(err)
	}
	if res.BestLag != 3 {
		t.Fatalf("best lag %d, want 3 (corr %v)", res.BestLag, res.Corr)
	}
	if res.BestCorr < 0.8 || !(res.Lower < res.BestCorr && res.BestCorr < res.Upper) {
		t.Errorf("best corr %g, interval [%g, %g]", res.BestCorr, res.Lower, res.Upper)
	}
	// Independent recomputation: filter by hand, correlate with gonum.
	p := res.AR.Order
	filt := func(s []float64) []float64 {
		mu := stat.Mean(s, nil)
		out := []float64{}
		for t := p; t < len(s); t++ {
			e := s[t] - mu
			for j := 1; j <= p; j++ {
				e -= res.AR.Coef[j-1] * (s[t-j] - mu)
			}
			out = append(out, e)
		}
		return out
	}
	xf, yf := filt(x), filt(y)
	m := len(xf)
	for i, k := range res.Lags {
		var want float64
		if k >= 0 {
			want = stat.Correlation(xf[:m-k], yf[k:], nil)
		} else {
			want = stat.Correlation(xf[-k:], yf[:m+k], nil)
		}
		checkNear(t, "corr", res.Corr[i], want, 1e-12)
		if res.N[i] != m-abs(k) {
			t.Errorf("lag %d: N = %d, want %d", k, res.N[i], m-abs(k))
		}
	}
	// 13 lags searched: the Šidák critical value Φ⁻¹(1 − (1 − 0.95^(1/13))/2),
	// computed here from gonum's normal quantile.
	zk := distuv.UnitNormal.Quantile(1 - (1-math.Pow(0.95, 1.0/13))/2)
	if res.Searched != 13 {
		t.Errorf("searched %d lags, want 13", res.Searched)
	}
	h := zk / math.Sqrt(float64(m-3-3))
	checkNear(t, "lower", res.Lower, math.Tanh(math.Atanh(res.BestCorr)-h), 1e-14)
	checkNear(t, "upper", res.Upper, math.Tanh(math.Atanh(res.BestCorr)+h), 1e-14)

	// Prewhitening matters: without it x's own memory (φ = 0.8) leaks the
	// lag-3 correlation into lags 2 and 4.
	raw, err := PrewhitenedCCF(ser("x", x...), ser("y", y...), 6, 0)
	if err != nil {
		t.Fatal(err)
	}
	if raw.AR.Order != 0 {
		t.Fatalf("order %d with maxOrder 0", raw.AR.Order)
	}
	at := func(c *CCFResult, lag int) float64 { return c.Corr[lag+6] }
	if !(at(raw, 2) > 0.6 && math.Abs(at(res, 2)) < 0.2) {
		t.Errorf("lag-2 correlation raw %g, prewhitened %g", at(raw, 2), at(res, 2))
	}
}

func TestPrewhitenedCCFErrors(t *testing.T) {
	x := []float64{1, 3, 2, 5, 4, 6, 5, 8}
	flat := []float64{2, 2, 2, 2, 2, 2, 2, 2}
	if _, err := PrewhitenedCCF(ser("queue", flat...), ser("y", x...), 1, 0); !errors.Is(err, ErrSingular) {
		t.Errorf("constant x: %v", err)
	}
	if _, err := PrewhitenedCCF(ser("x", x...), ser("p99", flat...), 1, 0); !errors.Is(err, ErrSingular) {
		t.Errorf("constant y: %v", err)
	}
	if _, err := PrewhitenedCCF(ser("x", x...), ser("y", x...), 5, 0); !errors.Is(err, ErrTooShort) {
		t.Errorf("too short: %v", err)
	}
	if _, err := PrewhitenedCCF(ser("x", x...), ser("y", x[:7]...), 1, 0); !errors.Is(err, ErrLength) {
		t.Errorf("length: %v", err)
	}
	if _, err := PrewhitenedCCF(ser("x", x...), ser("y", x...), -1, 0); !errors.Is(err, ErrArgument) {
		t.Errorf("negative lag: %v", err)
	}
}
