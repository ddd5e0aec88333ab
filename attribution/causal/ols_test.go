package causal

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// Five points worked by hand:
//
//	x = 1 2 3 4 5, y = 2 4 5 4 5; x̄ = 3, ȳ = 4
//	Sxy = (−2)(−2) + (−1)(0) + 0·1 + 1·0 + 2·1 = 6, Sxx = 10
//	slope = 0.6, intercept = 4 − 0.6·3 = 2.2
//	fitted 2.8 3.4 4.0 4.6 5.2, residuals −0.8 0.6 1.0 −0.6 −0.2
//	RSS = 0.64+0.36+1+0.36+0.04 = 2.4, TSS = 4+0+1+0+1 = 6, R² = 0.6
//	σ² = 2.4/3 = 0.8; se(slope) = √(0.8/10) = √0.08
//	se(intercept) = √(0.8·(1/5 + 9/10)) = √0.88
func TestOLSHandWorked(t *testing.T) {
	fit, err := OLS(ser("y", 2, 4, 5, 4, 5), []Series{ser("x", 1, 2, 3, 4, 5)}, true)
	if err != nil {
		t.Fatal(err)
	}
	checkNear(t, "intercept", fit.Coef[0], 2.2, 1e-14)
	checkNear(t, "slope", fit.Coef[1], 0.6, 1e-14)
	for i, want := range []float64{-0.8, 0.6, 1.0, -0.6, -0.2} {
		checkNear(t, "resid", fit.Resid[i], want, 1e-14)
	}
	checkNear(t, "RSS", fit.RSS, 2.4, 1e-14)
	checkNear(t, "TSS", fit.TSS, 6, 1e-14)
	checkNear(t, "R2", fit.R2, 0.6, 1e-14)
	checkNear(t, "se intercept", fit.StdErr[0], math.Sqrt(0.88), 1e-14)
	checkNear(t, "se slope", fit.StdErr[1], math.Sqrt(0.08), 1e-14)
	if fit.Names[0] != "const" || fit.Names[1] != "x" || fit.DFResid != 3 {
		t.Errorf("names %v dfresid %d", fit.Names, fit.DFResid)
	}
}

// Newey–West with L = 1 on the same five points, by hand. Scores
// u_t = (e_t, x_t e_t): (−.8,−.8) (.6,1.2) (1,3) (−.6,−2.4) (−.2,−1).
//
//	Γ0 = [[2.4, 6.0], [6.0, 17.84]]
//	Γ1 = Σ_{t≥1} u_t u_{t−1}ᵀ = [[−0.36, −0.6], [−0.96, −2.16]]
//	S  = Γ0 + ½(Γ1 + Γ1ᵀ) = [[2.04, 5.22], [5.22, 15.68]]
//	(XᵀX)⁻¹ = [[55, −15], [−15, 5]]/50 = [[1.1, −0.3], [−0.3, 0.1]]
//	B·S = [[0.678, 1.038], [−0.09, 0.002]]
//	Cov = B·S·B = [[0.4344, −0.0996], [−0.0996, 0.0272]]
//
// With the small-sample correction every entry is multiplied by 5/3.
func TestHACHandWorked(t *testing.T) {
	fit, err := OLS(ser("y", 2, 4, 5, 4, 5), []Series{ser("x", 1, 2, 3, 4, 5)}, true)
	if err != nil {
		t.Fatal(err)
	}
	h, err := fit.HAC(1, false)
	if err != nil {
		t.Fatal(err)
	}
	checkNear(t, "cov00", h.Cov.At(0, 0), 0.4344, 1e-13)
	checkNear(t, "cov01", h.Cov.At(0, 1), -0.0996, 1e-13)
	checkNear(t, "cov11", h.Cov.At(1, 1), 0.0272, 1e-13)
	checkNear(t, "se slope", h.StdErr[1], math.Sqrt(0.0272), 1e-13)
	hc, err := fit.HAC(1, true)
	if err != nil {
		t.Fatal(err)
	}
	checkNear(t, "corrected cov11", hc.Cov.At(1, 1), 0.0272*5/3, 1e-13)
	if h.Lag != 1 {
		t.Errorf("lag %d", h.Lag)
	}
}

// NIST StRD Longley (https://www.itl.nist.gov/div898/strd/lls/data/Longley.shtml):
// employment on six macro series, 16 years, condition number ~10⁷ after
// adding the intercept. Certified values to 15 digits; QR reproduces them to
// about 1e-13 relative, the test allows 1e-11.
var (
	longleyY = []float64{60323, 61122, 60171, 61187, 63221, 63639, 64989, 63761, 66019, 67857, 68169, 66513, 68655, 69564, 69331, 70551}
	longleyX = [][]float64{
		{83.0, 88.5, 88.2, 89.5, 96.2, 98.1, 99.0, 100.0, 101.2, 104.6, 108.4, 110.8, 112.6, 114.2, 115.7, 116.9},
		{234289, 259426, 258054, 284599, 328975, 346999, 365385, 363112, 397469, 419180, 442769, 444546, 482704, 502601, 518173, 554894},
		{2356, 2325, 3682, 3351, 2099, 1932, 1870, 3578, 2904, 2822, 2936, 4681, 3813, 3931, 4806, 4007},
		{1590, 1456, 1616, 1650, 3099, 3594, 3547, 3350, 3048, 2857, 2798, 2637, 2552, 2514, 2572, 2827},
		{107608, 108632, 109773, 110929, 112075, 113270, 115094, 116219, 117388, 118734, 120445, 121950, 123366, 125368, 127852, 130081},
		{1947, 1948, 1949, 1950, 1951, 1952, 1953, 1954, 1955, 1956, 1957, 1958, 1959, 1960, 1961, 1962},
	}
	longleyCoef = []float64{-3482258.63459582, 15.0618722713733, -0.358191792925910e-01, -2.02022980381683, -1.03322686717359, -0.511041056535807e-01, 1829.15146461355}
	longleySE   = []float64{890420.383607373, 84.9149257747669, 0.334910077722432e-01, 0.488399681651699, 0.214274163161675, 0.226073200069370, 455.478499142212}
)

func TestOLSLongleyNIST(t *testing.T) {
	xs := make([]Series, len(longleyX))
	for i, c := range longleyX {
		xs[i] = Series{Name: "x" + string(rune('1'+i)), Values: c}
	}
	fit, err := OLS(Series{Name: "y", Values: longleyY}, xs, true)
	if err != nil {
		t.Fatal(err)
	}
	rel := func(got, want float64) float64 { return math.Abs(got-want) / math.Abs(want) }
	for i := range longleyCoef {
		if r := rel(fit.Coef[i], longleyCoef[i]); r > 1e-11 {
			t.Errorf("coef %d = %.15g, certified %.15g (rel err %.2g)", i, fit.Coef[i], longleyCoef[i], r)
		}
		if r := rel(fit.StdErr[i], longleySE[i]); r > 1e-11 {
			t.Errorf("se %d = %.15g, certified %.15g (rel err %.2g)", i, fit.StdErr[i], longleySE[i], r)
		}
	}
	if r := rel(fit.RSS, 836424.055505915); r > 1e-11 {
		t.Errorf("RSS = %.15g (rel err %.2g)", fit.RSS, r)
	}
	if r := rel(math.Sqrt(fit.Sigma2), 304.854073561965); r > 1e-9 {
		t.Errorf("residual sd = %.15g (rel err %.2g)", math.Sqrt(fit.Sigma2), r)
	}
	if r := rel(fit.R2, 0.995479004577296); r > 1e-12 {
		t.Errorf("R2 = %.15g (rel err %.2g)", fit.R2, r)
	}
}

// naiveOLS solves the normal equations with an explicit inverse: the
// textbook formula, written independently of the QR path.
func naiveOLS(t *testing.T, y []float64, cols [][]float64) (coef, resid []float64, xtxInv *mat.Dense) {
	t.Helper()
	n, k := len(y), len(cols)
	x := mat.NewDense(n, k, nil)
	for j, c := range cols {
		for i, v := range c {
			x.Set(i, j, v)
		}
	}
	var xtx mat.Dense
	xtx.Mul(x.T(), x)
	xtxInv = new(mat.Dense)
	if err := xtxInv.Inverse(&xtx); err != nil {
		t.Fatal(err)
	}
	var xty, b mat.Dense
	xty.Mul(x.T(), mat.NewDense(n, 1, y))
	b.Mul(xtxInv, &xty)
	coef = make([]float64, k)
	for j := range coef {
		coef[j] = b.At(j, 0)
	}
	resid = make([]float64, n)
	for i := range resid {
		e := y[i]
		for j := range cols {
			e -= coef[j] * cols[j][i]
		}
		resid[i] = e
	}
	return coef, resid, xtxInv
}

// naiveHAC is the Newey–West sandwich as a double sum over all pairs of
// observations: S = Σ_t Σ_s w(|t−s|)·u_t u_sᵀ with w(l) = 1 − l/(L+1) for
// l ≤ L, else 0.
func naiveHAC(resid []float64, cols [][]float64, xtxInv *mat.Dense, lag int) *mat.Dense {
	n, k := len(resid), len(cols)
	s := mat.NewDense(k, k, nil)
	for ti := range n {
		for si := range n {
			l := ti - si
			if l < 0 {
				l = -l
			}
			if l > lag {
				continue
			}
			w := 1 - float64(l)/float64(lag+1)
			for a := range k {
				for b := range k {
					s.Set(a, b, s.At(a, b)+w*cols[a][ti]*resid[ti]*cols[b][si]*resid[si])
				}
			}
		}
	}
	var tmp, cov mat.Dense
	tmp.Mul(xtxInv, s)
	cov.Mul(&tmp, xtxInv)
	return &cov
}

func TestOLSAndHACAgainstNaive(t *testing.T) {
	r := rng(1)
	n := 120
	x1 := ar1(r, n, 0.6)
	x2 := ar1(r, n, -0.3)
	e := ar1(r, n, 0.5)
	y := make([]float64, n)
	for i := range y {
		y[i] = 1.5 - 2*x1[i] + 0.7*x2[i] + e[i]
	}
	fit, err := OLS(ser("y", y...), []Series{ser("x1", x1...), ser("x2", x2...)}, true)
	if err != nil {
		t.Fatal(err)
	}
	cols := [][]float64{ones(n), x1, x2}
	coef, resid, inv := naiveOLS(t, y, cols)
	rss := 0.0
	for _, v := range resid {
		rss += v * v
	}
	for j := range coef {
		checkNear(t, "coef", fit.Coef[j], coef[j], 1e-9)
		checkNear(t, "se", fit.StdErr[j], math.Sqrt(rss/float64(n-3)*inv.At(j, j)), 1e-9)
	}
	for i := range resid {
		checkNear(t, "resid", fit.Resid[i], resid[i], 1e-9)
	}
	for _, lag := range []int{0, 1, 4, DefaultHACLag(n)} {
		h, err := fit.HAC(lag, false)
		if err != nil {
			t.Fatal(err)
		}
		want := naiveHAC(resid, cols, inv, lag)
		for a := range 3 {
			for b := range 3 {
				checkNear(t, "hac cov", h.Cov.At(a, b), want.At(a, b), 1e-9)
			}
		}
	}
	// No intercept: TSS is uncentered (Σy²), as statsmodels.
	fit0, err := OLS(ser("y", y...), []Series{ser("x1", x1...)}, false)
	if err != nil {
		t.Fatal(err)
	}
	coef0, _, _ := naiveOLS(t, y, [][]float64{x1})
	checkNear(t, "coef no intercept", fit0.Coef[0], coef0[0], 1e-9)
	tss := 0.0
	for _, v := range y {
		tss += v * v
	}
	checkNear(t, "uncentered TSS", fit0.TSS, tss, 1e-12)
}

func TestDefaultHACLag(t *testing.T) {
	// floor(4·(n/100)^(2/9)): n=100 → 4; n=480 → 4·4.8^(2/9) = 5.67 → 5;
	// n=16 → 4·0.16^(2/9) = 2.66 → 2; n=1000 → 4·10^(2/9) = 6.68 → 6.
	for n, want := range map[int]int{100: 4, 480: 5, 16: 2, 1000: 6} {
		if got := DefaultHACLag(n); got != want {
			t.Errorf("DefaultHACLag(%d) = %d, want %d", n, got, want)
		}
	}
}
