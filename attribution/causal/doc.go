// Package causal relates covariate series (kernel and GPU signals, queue
// depths, batch sizes) to latency series. Every function is pure: slices in,
// numbers out, with the exact formula in its doc comment.
//
// What is here, and the reference each one is checked against:
//
//   - OLS by Householder QR, classical and Newey–West (HAC) standard errors,
//     matching statsmodels OLS(...).fit(cov_type='HAC', cov_kwds={'maxlags': L}).
//   - Granger causality F-test, matching statsmodels grangercausalitytests
//     'ssr_ftest', with optional conditioning series and lag choice by AIC/BIC.
//   - Lagged cross-correlation after prewhitening both series with an AR(p)
//     filter fitted to the driver (Yule–Walker, order by AIC as R's ar.yw).
//   - Backdoor adjustment effect (OLS with given confounders, HAC errors) and
//     a linear counterfactual series ("outcome if the treatment stayed at its
//     baseline").
//   - Bayesian online change point detection (Adams & MacKay 2007) and BARO
//     robust scoring (Pham et al. 2024) to rank root-cause candidates.
//   - Benjamini–Hochberg adjusted p-values.
//   - Drift between two windows: two-sample Kolmogorov–Smirnov (scipy
//     ks_2samp mode='asymp') and the population stability index.
//
// Conventions. A Series carries a name that errors and results repeat, so a
// failure points at the offending metric. Inputs are never modified. Values
// must be finite: NaN or ±Inf anywhere is an error naming the index (ErrNaN),
// because silently dropping points would shift the time alignment that
// lagged models depend on. Series that are used together must have equal
// lengths (ErrLength).
package causal
