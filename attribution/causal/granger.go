package causal

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// GrangerLag is the F-test of "x does not Granger-cause y" at one lag order.
type GrangerLag struct {
	Lag int
	// N is the number of usable observations, len(y) − Lag: the rows
	// t = Lag..len−1 that have all their lags (statsmodels lagmat2ds with
	// trim='both').
	N int
	// F = ((RSS_r − RSS_u)/p) / (RSS_u/(N − k_u)), PValue = P(F(DF1, DF2) > F)
	// with DF1 = p and DF2 = N − k_u, k_u = 1 + p(2 + m) for m conditioning
	// series. Without conditioning DF2 = N − 2p − 1, statsmodels' 'ssr_ftest'.
	F, PValue float64
	DF1, DF2  int
	// RSSRestricted is from y_t ~ 1 + y_{t−1..t−p} + z_{t−1..t−p};
	// RSSUnrestricted adds x_{t−1..t−p}.
	RSSRestricted, RSSUnrestricted float64
}

// GrangerResult holds the F-test at every lag 1..maxLag and the lag orders
// preferred by the information criteria.
type GrangerResult struct {
	Tests []GrangerLag // Tests[p−1] is lag p
	// AIC[p−1] and BIC[p−1] are for the unrestricted model at lag p, all
	// fitted on the common sample t = maxLag..len−1 (n_c rows) so that they
	// are comparable across p:
	//
	//	llf = −n_c/2 · (ln 2π + ln(RSS/n_c) + 1)
	//	AIC = −2·llf + 2·k_u,   BIC = −2·llf + ln(n_c)·k_u
	//
	// which are statsmodels' OLSResults.aic/.bic for that regression.
	AIC, BIC []float64
	// BestAIC and BestBIC are the lags minimising each criterion; ties go
	// to the smaller lag.
	BestAIC, BestBIC int
}

// Granger tests whether the past of x helps predict y beyond y's own past
// (and the past of the conditioning series cond), for every lag order
// p = 1..maxLag. For each p it fits, on rows t = p..n−1,
//
//	restricted:   y_t = c + Σ_{j=1}^{p} a_j y_{t−j} + Σ_z Σ_{j=1}^{p} d_{zj} z_{t−j} + e_t
//	unrestricted: the same + Σ_{j=1}^{p} b_j x_{t−j}
//
// and reports the F statistic for b_1 = … = b_p = 0. With no conditioning
// series this is exactly statsmodels grangercausalitytests(data[[y, x]],
// maxlag)['ssr_ftest'] (note statsmodels' column order: it tests whether the
// second column causes the first).
//
// Errors: ErrNaN, ErrLength, ErrArgument for maxLag < 1, ErrTooShort when
// len − maxLag < k_u + 1, ErrSingular naming the lagged series that is
// constant or collinear (for example a constant y or x).
func Granger(y, x Series, cond []Series, maxLag int) (*GrangerResult, error) {
	all := append([]Series{y, x}, cond...)
	if err := checkAligned(all...); err != nil {
		return nil, fmt.Errorf("granger: %w", err)
	}
	if maxLag < 1 {
		return nil, fmt.Errorf("granger: max lag %d, want ≥ 1: %w", maxLag, ErrArgument)
	}
	n := len(y.Values)
	m := len(cond)
	if ku := 1 + maxLag*(2+m); n-maxLag < ku+1 {
		return nil, fmt.Errorf("granger: %d usable observations at lag %d for %d coefficients: %w",
			n-maxLag, maxLag, ku, ErrTooShort)
	}
	res := &GrangerResult{
		Tests: make([]GrangerLag, maxLag),
		AIC:   make([]float64, maxLag),
		BIC:   make([]float64, maxLag),
	}
	for p := 1; p <= maxLag; p++ {
		r, u, err := grangerFits(y, x, cond, p, p)
		if err != nil {
			return nil, fmt.Errorf("granger: lag %d: %w", p, err)
		}
		df2 := u.DFResid
		f := ((r.RSS - u.RSS) / float64(p)) / (u.RSS / float64(df2))
		res.Tests[p-1] = GrangerLag{
			Lag: p, N: u.N, F: f,
			PValue: distuv.F{D1: float64(p), D2: float64(df2)}.Survival(f),
			DF1:    p, DF2: df2,
			RSSRestricted: r.RSS, RSSUnrestricted: u.RSS,
		}
		// Information criteria on the common sample.
		_, uc, err := grangerFits(y, x, cond, p, maxLag)
		if err != nil {
			return nil, fmt.Errorf("granger: lag %d on common sample: %w", p, err)
		}
		nc := float64(uc.N)
		llf := -nc / 2 * (math.Log(2*math.Pi) + math.Log(uc.RSS/nc) + 1)
		res.AIC[p-1] = -2*llf + 2*float64(uc.K)
		res.BIC[p-1] = -2*llf + math.Log(nc)*float64(uc.K)
	}
	res.BestAIC = argmin(res.AIC) + 1
	res.BestBIC = argmin(res.BIC) + 1
	return res, nil
}

// grangerFits fits the restricted and unrestricted regressions at lag p on
// rows t = start..n−1 (start ≥ p). The lag columns are subslices of the
// inputs, so nothing is copied.
func grangerFits(y, x Series, cond []Series, p, start int) (restricted, unrestricted *OLSResult, err error) {
	n := len(y.Values)
	rows := n - start
	cols := [][]float64{ones(rows)}
	names := []string{"const"}
	addLags := func(s Series) {
		for j := 1; j <= p; j++ {
			cols = append(cols, s.Values[start-j:n-j])
			names = append(names, fmt.Sprintf("%s lag %d", s.Name, j))
		}
	}
	addLags(y)
	for _, z := range cond {
		addLags(z)
	}
	yt := y.Values[start:]
	// Clip capacity so the appends below cannot alias the restricted fit's
	// column list.
	restricted, err = fitOLS(yt, cols[:len(cols):len(cols)], names[:len(names):len(names)], true)
	if err != nil {
		return nil, nil, err
	}
	addLags(x)
	unrestricted, err = fitOLS(yt, cols, names, true)
	if err != nil {
		return nil, nil, err
	}
	return restricted, unrestricted, nil
}

func argmin(v []float64) int {
	best := 0
	for i, x := range v {
		if x < v[best] {
			best = i
		}
	}
	return best
}
