package causal

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// collinearTol is the relative size below which a column's component
// orthogonal to the earlier columns counts as zero: column j is rejected when
// |R_jj| ≤ collinearTol·‖x_j‖, i.e. when the sine of its angle to the span of
// the earlier columns is below 1e-10. Constant regressors next to an
// intercept land near 1e-16; the smallest ratio in NIST's ill-conditioned
// Longley design is 8.6e-5.
const collinearTol = 1e-10

// OLSResult is an ordinary least squares fit y = Xβ + e.
type OLSResult struct {
	// Names holds the column names in coefficient order; "const" comes first
	// when the intercept was requested.
	Names []string
	// Coef is β̂ = argmin ‖y − Xβ‖², computed as R β̂ = Qᵀy from the
	// Householder QR decomposition X = QR (never via the normal equations,
	// which square the condition number).
	Coef []float64
	// StdErr is sqrt(diag(σ̂² (XᵀX)⁻¹)) with σ̂² = RSS/(n − k), the classical
	// (non-robust) standard errors, as statsmodels' bse for cov_type='nonrobust'.
	StdErr []float64
	// Resid is e = y − Xβ̂, computed from the original columns.
	Resid []float64
	// RSS = Σ e_t². TSS = Σ (y_t − ȳ)² with an intercept, Σ y_t² without
	// (statsmodels' centered/uncentered convention). R2 = 1 − RSS/TSS; NaN
	// when TSS = 0.
	RSS, TSS, R2 float64
	// Sigma2 = RSS/(n − k).
	Sigma2 float64
	// N observations, K coefficients, DFResid = N − K.
	N, K, DFResid int

	cols [][]float64 // design columns, shared with the caller, never written
	rinv []float64   // K×K row-major R⁻¹ (upper triangular)
}

// OLS regresses y on the columns x (plus a leading column of ones when
// intercept is true) by Householder QR.
//
// Errors: ErrNaN for a non-finite value, ErrLength when a regressor's length
// differs from y's, ErrTooShort when n < k + 1 (no residual degree of
// freedom), ErrSingular naming the first column that is constant (next to
// the intercept), all zero, or a linear combination of earlier columns.
func OLS(y Series, x []Series, intercept bool) (*OLSResult, error) {
	all := append([]Series{y}, x...)
	if err := checkAligned(all...); err != nil {
		return nil, fmt.Errorf("ols: %w", err)
	}
	n := len(y.Values)
	cols := make([][]float64, 0, len(x)+1)
	names := make([]string, 0, len(x)+1)
	if intercept {
		cols = append(cols, ones(n))
		names = append(names, "const")
	}
	for _, s := range x {
		cols = append(cols, s.Values)
		names = append(names, s.Name)
	}
	r, err := fitOLS(y.Values, cols, names, intercept)
	if err != nil {
		return nil, fmt.Errorf("ols: %w", err)
	}
	return r, nil
}

func ones(n int) []float64 {
	c := make([]float64, n)
	for i := range c {
		c[i] = 1
	}
	return c
}

// fitOLS is OLS without input validation; cols must all have len(y) finite
// values. centered selects the TSS convention (true when a constant column is
// part of the design).
func fitOLS(y []float64, cols [][]float64, names []string, centered bool) (*OLSResult, error) {
	n, k := len(y), len(cols)
	if k == 0 {
		return nil, fmt.Errorf("no regressors: %w", ErrArgument)
	}
	if n < k+1 {
		return nil, fmt.Errorf("%d observations for %d coefficients (need at least %d): %w", n, k, k+1, ErrTooShort)
	}
	// Householder QR on a column-major copy; the reflectors are applied to
	// qty = Qᵀy as they are formed, so Q is never built.
	buf := make([]float64, n*k)
	a := make([][]float64, k)
	for j, c := range cols {
		a[j] = buf[j*n : (j+1)*n]
		copy(a[j], c)
	}
	qty := append([]float64(nil), y...)
	rdiag := make([]float64, k)
	for j := 0; j < k; j++ {
		aj := a[j]
		colNorm := norm2(cols[j])
		s := norm2(aj[j:])
		if colNorm == 0 || s <= collinearTol*colNorm {
			return nil, fmt.Errorf("column %q is constant or a linear combination of earlier columns: %w", names[j], ErrSingular)
		}
		alpha := -math.Copysign(s, aj[j])
		aj[j] -= alpha // aj[j:] now holds the Householder vector v
		vtv := 0.0
		for _, v := range aj[j:] {
			vtv += v * v
		}
		reflect := func(c []float64) {
			d := 0.0
			for i := j; i < n; i++ {
				d += aj[i] * c[i]
			}
			f := 2 * d / vtv
			for i := j; i < n; i++ {
				c[i] -= f * aj[i]
			}
		}
		for c := j + 1; c < k; c++ {
			reflect(a[c])
		}
		reflect(qty)
		rdiag[j] = alpha
	}
	// R[j][c] = a[c][j] for c > j, R[j][j] = rdiag[j].
	rAt := func(j, c int) float64 {
		if j == c {
			return rdiag[j]
		}
		return a[c][j]
	}
	coef := make([]float64, k)
	for j := k - 1; j >= 0; j-- {
		s := qty[j]
		for c := j + 1; c < k; c++ {
			s -= rAt(j, c) * coef[c]
		}
		coef[j] = s / rdiag[j]
	}
	// R⁻¹ by back substitution, column by column.
	rinv := make([]float64, k*k)
	for c := 0; c < k; c++ {
		rinv[c*k+c] = 1 / rdiag[c]
		for j := c - 1; j >= 0; j-- {
			s := 0.0
			for m := j + 1; m <= c; m++ {
				s += rAt(j, m) * rinv[m*k+c]
			}
			rinv[j*k+c] = -s / rdiag[j]
		}
	}
	res := &OLSResult{
		Names: names, Coef: coef, N: n, K: k, DFResid: n - k,
		cols: cols, rinv: rinv,
	}
	res.Resid = make([]float64, n)
	ybar := 0.0
	for _, v := range y {
		ybar += v
	}
	ybar /= float64(n)
	for t := range y {
		e := y[t]
		for j, c := range cols {
			e -= coef[j] * c[t]
		}
		res.Resid[t] = e
		res.RSS += e * e
		if centered {
			res.TSS += (y[t] - ybar) * (y[t] - ybar)
		} else {
			res.TSS += y[t] * y[t]
		}
	}
	res.R2 = math.NaN()
	if res.TSS > 0 {
		res.R2 = 1 - res.RSS/res.TSS
	}
	res.Sigma2 = res.RSS / float64(n-k)
	res.StdErr = make([]float64, k)
	for j := range k {
		res.StdErr[j] = math.Sqrt(res.Sigma2 * res.xtxInv(j, j))
	}
	return res, nil
}

func norm2(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// xtxInv returns entry (a, b) of (XᵀX)⁻¹ = R⁻¹R⁻ᵀ.
func (r *OLSResult) xtxInv(a, b int) float64 {
	k := r.K
	s := 0.0
	for c := max(a, b); c < k; c++ {
		s += r.rinv[a*k+c] * r.rinv[b*k+c]
	}
	return s
}

// XtXInv returns (XᵀX)⁻¹, statsmodels' normalized_cov_params.
func (r *OLSResult) XtXInv() *mat.SymDense {
	m := mat.NewSymDense(r.K, nil)
	for a := range r.K {
		for b := a; b < r.K; b++ {
			m.SetSym(a, b, r.xtxInv(a, b))
		}
	}
	return m
}

// DefaultHACLag is the Newey–West (1994) plug-in lag floor(4·(n/100)^(2/9)),
// the default of statsmodels' sandwich_covariance.S_hac_simple when nlags is
// None.
func DefaultHACLag(n int) int {
	return int(math.Floor(4 * math.Pow(float64(n)/100, 2.0/9.0)))
}

// HACResult holds a heteroskedasticity- and autocorrelation-consistent
// covariance of the OLS coefficients.
type HACResult struct {
	Lag    int           // Bartlett truncation lag L actually used
	Cov    *mat.SymDense // K×K covariance of β̂
	StdErr []float64     // sqrt(diag(Cov))
}

// HAC returns the Newey–West covariance of the coefficients:
//
//	u_t  = x_t·e_t                        (x_t the t-th row of X, e_t its residual)
//	w_l  = 1 − l/(L+1)                    (Bartlett kernel, l = 0..L)
//	Γ_l  = Σ_{t=l}^{n−1} u_t u_{t−l}ᵀ
//	S    = Γ_0 + Σ_{l=1}^{L} w_l (Γ_l + Γ_lᵀ)
//	Cov  = (XᵀX)⁻¹ S (XᵀX)⁻¹              [· n/(n−k) when correction]
//
// This is statsmodels' cov_hac_simple (S_hac_simple with weights_bartlett,
// bread normalized_cov_params), which OLS(...).fit(cov_type='HAC',
// cov_kwds={'maxlags': L}) calls with use_correction=False: the fit's default
// applies no small-sample scaling, even though cov_hac_simple's own default
// is True. Pass correction=true to match cov_kwds={'maxlags': L,
// 'use_correction': True}. S is a plain sum (not divided by n) because the
// bread is (XᵀX)⁻¹, not n(XᵀX)⁻¹; the two 1/n factors cancel.
//
// lag < 0 selects DefaultHACLag(n); lag = 0 gives White's HC0. lag ≥ n is
// ErrArgument.
func (r *OLSResult) HAC(lag int, correction bool) (*HACResult, error) {
	n, k := r.N, r.K
	if lag < 0 {
		lag = DefaultHACLag(n)
	}
	if lag >= n {
		return nil, fmt.Errorf("hac: lag %d with %d observations: %w", lag, n, ErrArgument)
	}
	u := make([]float64, n*k) // row-major n×k scores
	for t := range n {
		for j, c := range r.cols {
			u[t*k+j] = c[t] * r.Resid[t]
		}
	}
	s := make([]float64, k*k)
	g := make([]float64, k*k)
	for l := 0; l <= lag; l++ {
		clear(g)
		for t := l; t < n; t++ {
			ut, us := u[t*k:(t+1)*k], u[(t-l)*k:(t-l+1)*k]
			for a := range k {
				for b := range k {
					g[a*k+b] += ut[a] * us[b]
				}
			}
		}
		w := 1 - float64(l)/float64(lag+1)
		for a := range k {
			for b := range k {
				if l == 0 {
					s[a*k+b] += g[a*k+b]
				} else {
					s[a*k+b] += w * (g[a*k+b] + g[b*k+a])
				}
			}
		}
	}
	bread := make([]float64, k*k)
	for a := range k {
		for b := range k {
			bread[a*k+b] = r.xtxInv(a, b)
		}
	}
	// tmp = bread·S, cov = tmp·bread.
	tmp := make([]float64, k*k)
	for a := range k {
		for b := range k {
			v := 0.0
			for c := range k {
				v += bread[a*k+c] * s[c*k+b]
			}
			tmp[a*k+b] = v
		}
	}
	scale := 1.0
	if correction {
		scale = float64(n) / float64(n-k)
	}
	cov := mat.NewSymDense(k, nil)
	se := make([]float64, k)
	for a := range k {
		for b := a; b < k; b++ {
			v := 0.0
			for c := range k {
				v += tmp[a*k+c] * bread[c*k+b]
			}
			cov.SetSym(a, b, scale*v)
		}
		se[a] = math.Sqrt(cov.At(a, a))
	}
	return &HACResult{Lag: lag, Cov: cov, StdErr: se}, nil
}
