package causal

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mathext"
)

// z975 is the 0.975 quantile of the standard normal distribution.
const z975 = 1.959963984540054

// AR is an autoregressive model fitted by Yule–Walker.
type AR struct {
	Order int
	// Coef holds φ_1..φ_p of (x_t − μ) = Σ φ_j (x_{t−j} − μ) + ε_t.
	Coef []float64
	Mean float64
	// Var is the innovation variance v_p from the Levinson–Durbin recursion.
	Var float64
	// AIC[p] = n·ln(v_p) + 2p for p = 0..maxOrder (R's ar.yw criterion, up to
	// a constant).
	AIC []float64
}

// DefaultAROrder is R's ar() default maximum order, min(n−1, ⌊10·log10 n⌋).
func DefaultAROrder(n int) int {
	return min(n-1, int(math.Floor(10*math.Log10(float64(n)))))
}

// FitAR fits AR(p) to x by Yule–Walker for every p = 0..maxOrder and keeps
// the order with the smallest AIC (ties to the smaller order), as R's
// ar(x, method="yule-walker"):
//
//	μ   = mean(x)
//	r_k = (1/n) Σ_{t=0}^{n−1−k} (x_t − μ)(x_{t+k} − μ)            (biased autocovariance)
//	v_0 = r_0
//	φ_mm = (r_m − Σ_{j=1}^{m−1} φ_{m−1,j} r_{m−j}) / v_{m−1}    (Levinson–Durbin)
//	φ_mj = φ_{m−1,j} − φ_mm φ_{m−1,m−j},  v_m = v_{m−1}(1 − φ_mm²)
//	AIC_m = n·ln(v_m) + 2m
//
// Yule–Walker is used rather than OLS because its fitted filter is always
// stationary and all orders come out of one O(maxOrder²) recursion. The
// recursion stops early if v_m reaches zero (a perfectly predictable series).
// maxOrder < 0 selects DefaultAROrder(n).
//
// Errors: ErrNaN, ErrTooShort for n < 2, ErrArgument for maxOrder ≥ n,
// ErrSingular naming x when it is constant.
func FitAR(x Series, maxOrder int) (*AR, error) {
	if err := checkFinite(x); err != nil {
		return nil, fmt.Errorf("ar: %w", err)
	}
	n := len(x.Values)
	if n < 2 {
		return nil, fmt.Errorf("ar: series %q has %d points, need 2: %w", x.Name, n, ErrTooShort)
	}
	if maxOrder < 0 {
		maxOrder = DefaultAROrder(n)
	}
	if maxOrder >= n {
		return nil, fmt.Errorf("ar: order %d for %d points: %w", maxOrder, n, ErrArgument)
	}
	mu := mean(x.Values)
	r := make([]float64, maxOrder+1)
	for k := range r {
		s := 0.0
		for t := 0; t+k < n; t++ {
			s += (x.Values[t] - mu) * (x.Values[t+k] - mu)
		}
		r[k] = s / float64(n)
	}
	if r[0] == 0 {
		return nil, fmt.Errorf("ar: series %q is constant: %w", x.Name, ErrSingular)
	}
	ar := &AR{Mean: mu, Var: r[0], AIC: []float64{float64(n) * math.Log(r[0])}}
	phi := make([]float64, 0, maxOrder)
	prev := make([]float64, 0, maxOrder)
	v := r[0]
	best := 0
	for m := 1; m <= maxOrder; m++ {
		num := r[m]
		for j := 1; j < m; j++ {
			num -= phi[j-1] * r[m-j]
		}
		k := num / v
		prev = append(prev[:0], phi...)
		phi = append(phi, k)
		for j := 1; j < m; j++ {
			phi[j-1] = prev[j-1] - k*prev[m-j-1]
		}
		v *= 1 - k*k
		if !(v > 0) {
			break
		}
		ar.AIC = append(ar.AIC, float64(n)*math.Log(v)+2*float64(m))
		if ar.AIC[m] < ar.AIC[best] {
			best = m
			ar.Coef = append(ar.Coef[:0], phi...)
			ar.Var = v
		}
	}
	ar.Order = best
	return ar, nil
}

// Filter returns the innovations e_t = (s_t − μ_s) − Σ_j φ_j (s_{t−j} − μ_s)
// for t = p..n−1, where μ_s is the mean of s itself (the AR's own mean is
// used only for the series it was fitted to). len(result) = n − p.
func (a *AR) Filter(s []float64) []float64 {
	mu := mean(s)
	p := a.Order
	if len(s) <= p {
		return nil
	}
	out := make([]float64, len(s)-p)
	for t := p; t < len(s); t++ {
		e := s[t] - mu
		for j, phi := range a.Coef {
			e -= phi * (s[t-j-1] - mu)
		}
		out[t-p] = e
	}
	return out
}

// CCFResult is the cross-correlation of two prewhitened series.
type CCFResult struct {
	// AR is the filter fitted to x and applied to both series.
	AR *AR
	// Lags runs −maxLag..maxLag. Corr[i] is the Pearson correlation of the
	// pairs (x̃_t, ỹ_{t+Lags[i]}) over the N[i] = m − |lag| overlapping
	// points, m = n − p the filtered length. A positive lag means x leads y.
	Lags []int
	Corr []float64
	N    []int
	// BestLag maximises |Corr| (ties to the smaller |lag|, then the positive
	// lag); BestCorr is its correlation and [Lower, Upper] its 95% interval
	// by the Fisher transform, corrected for having chosen the lag:
	//
	//   tanh(atanh(r) ∓ z_K/sqrt(N − 3)),  z_K = Φ⁻¹(1 − (1 − 0.95^(1/K))/2)
	//
	// with K = 2·maxLag + 1 the lags searched (Šidák). The plain interval
	// (z = 1.96) is valid for one lag fixed in advance; reported at the lag
	// that maximises |r| it excludes zero for most unrelated pairs, since
	// the maximum of K near-independent |r| (x is white after the filter)
	// exceeds 1.96/√N far more often than 5 %. With z_K the chance that any
	// of the K intervals excludes zero under no relation is 1 − 0.95 = 5 %
	// for independent lags and at most that (Šidák's inequality) otherwise.
	BestLag      int
	BestCorr     float64
	Lower, Upper float64
	// PValue is the Šidák-adjusted p-value of BestCorr against no
	// correlation at any lag: 1 − (1 − p₁)^K with p₁ = 2·(1 − Φ(|atanh r|·√(N − 3))).
	// It is below 0.05 exactly when [Lower, Upper] excludes zero.
	PValue float64
	// Searched is K, the number of lags the maximum was taken over.
	Searched int
}

// sidakZ returns the two-sided normal critical value for a family of k
// tests at family-wise level: Φ⁻¹(1 − (1 − level^(1/k))/2).
func sidakZ(level float64, k int) float64 {
	// 1 − level^(1/k) = −expm1(log(level)/k), kept accurate for large k.
	alpha := -math.Expm1(math.Log(level) / float64(k))
	return -mathext.NormalQuantile(alpha / 2)
}

// sidakP returns 1 − (1 − p)^k, accurate for small p.
func sidakP(p float64, k int) float64 {
	return -math.Expm1(float64(k) * math.Log1p(-p))
}

// PrewhitenedCCF cross-correlates x and y at lags −maxLag..maxLag after
// filtering both with the AR model fitted to x (FitAR with maxOrder; 0
// disables prewhitening). Prewhitening removes x's own autocorrelation, which
// otherwise spreads one true lag over many spuriously significant ones
// (Box–Jenkins transfer-function identification).
//
// Errors: ErrNaN, ErrLength, ErrArgument for maxLag < 0, ErrTooShort when the
// filtered length leaves fewer than 4 pairs at the largest lag, ErrSingular
// naming the series whose filtered values are constant.
func PrewhitenedCCF(x, y Series, maxLag, maxOrder int) (*CCFResult, error) {
	if err := checkAligned(x, y); err != nil {
		return nil, fmt.Errorf("ccf: %w", err)
	}
	if maxLag < 0 {
		return nil, fmt.Errorf("ccf: max lag %d, want ≥ 0: %w", maxLag, ErrArgument)
	}
	ar, err := FitAR(x, maxOrder)
	if err != nil {
		return nil, fmt.Errorf("ccf: %w", err)
	}
	xf, yf := ar.Filter(x.Values), ar.Filter(y.Values)
	m := len(xf)
	if m-maxLag < 4 {
		return nil, fmt.Errorf("ccf: %d points after AR(%d) filter leave %d pairs at lag %d, need 4: %w",
			m, ar.Order, m-maxLag, maxLag, ErrTooShort)
	}
	res := &CCFResult{AR: ar}
	bestAbs := -1.0
	for k := -maxLag; k <= maxLag; k++ {
		var xs, ys []float64
		if k >= 0 {
			xs, ys = xf[:m-k], yf[k:]
		} else {
			xs, ys = xf[-k:], yf[:m+k]
		}
		r, which := pearson(xs, ys)
		if which != 0 {
			name := x.Name
			if which == 2 {
				name = y.Name
			}
			return nil, fmt.Errorf("ccf: series %q is constant after prewhitening (lag %d): %w", name, k, ErrSingular)
		}
		res.Lags = append(res.Lags, k)
		res.Corr = append(res.Corr, r)
		res.N = append(res.N, len(xs))
		a := math.Abs(r)
		better := a > bestAbs ||
			(a == bestAbs && (abs(k) < abs(res.BestLag) || (abs(k) == abs(res.BestLag) && k > 0)))
		if better {
			bestAbs, res.BestLag, res.BestCorr = a, k, r
		}
	}
	nb := m - abs(res.BestLag)
	res.Searched = len(res.Lags)
	se := 1 / math.Sqrt(float64(nb-3))
	z, h := math.Atanh(res.BestCorr), sidakZ(0.95, res.Searched)*se
	res.Lower, res.Upper = math.Tanh(z-h), math.Tanh(z+h)
	// p₁ = 2·(1 − Φ(|z|/se)) = erfc(|z|/(se·√2)).
	res.PValue = sidakP(math.Erfc(math.Abs(z)/se/math.Sqrt2), res.Searched)
	return res, nil
}

// pearson returns the sample correlation of a and b; which is 1 or 2 when a
// or b has zero variance (and r is then meaningless).
func pearson(a, b []float64) (r float64, which int) {
	ma, mb := mean(a), mean(b)
	var sab, saa, sbb float64
	for i := range a {
		da, db := a[i]-ma, b[i]-mb
		sab += da * db
		saa += da * da
		sbb += db * db
	}
	switch {
	case saa == 0:
		return 0, 1
	case sbb == 0:
		return 0, 2
	}
	r = sab / math.Sqrt(saa*sbb)
	return max(-1, min(1, r)), 0
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func abs(k int) int {
	if k < 0 {
		return -k
	}
	return k
}
