// Package attribution holds pure statistics: tail decomposition of latency
// into stages that adds up, A/B intervals for quantiles, and (in causal/)
// tests that relate kernel and GPU covariates to stage latency.
//
// Nothing here touches storage or HTTP: functions take slices and return
// numbers, each with its formula in the doc comment.
//
// # What comes in
//
//   - Requests: per-request stage durations X_i (i = 1..k), columnar, one
//     []float64 per stage, finite and ≥ 0. S = Σ_i X_i per request;
//     NewRequestsResidual adds a residual stage so the stages add up to a
//     measured end-to-end time.
//   - Accumulators: per-bucket stage sums and counts on a fixed
//     end-to-end grid (DefaultGrid), as stored in series at ingest.
//   - Histogram: one stage's bucket counts (and sum, if known), when
//     neither records nor accumulators exist.
//   - Plain samples ([]float64) for A/B intervals.
//
// # What goes out
//
// Every number carries a Method (which computation made it) and a Kind:
// exact (the defined statistic of the given data), estimate (an
// approximation; bounds attached where derivable) or bound (one-sided).
// Per-stage decompositions are a Breakdown, single figures an Estimate,
// intervals an Interval.
//
// # Definitions that hold throughout
//
//   - Sample quantiles are Hyndman–Fan type 7 (R's and numpy's default):
//     P_p = x_(⌊h⌋) + (h−⌊h⌋)(x_(⌊h⌋+1) − x_(⌊h⌋)), h = (n−1)p, 0-based
//     order statistics. q = P_p(S); p = DefaultP = 0.99 unless given.
//   - The tail is {S ≥ q}, ties included.
//   - Histogram quantiles use the piecewise-uniform model (see Histogram).
//   - Output token positions are 1-based and bucketed by powers of two,
//     (2^(k−1), 2^k] (TokenPositionBucket), wherever tokens are counted.
//
// # Which function to use
//
//	records:       TailMean (default), Euler, Excess, Shapley, HeatTable
//	accumulators:  TailMeanAccumulators (estimate with guaranteed bounds)
//	histograms:    HistogramMeans (exact with sums), ComonotonicBound (upper
//	               bound, any dependence), IndependenceEstimate,
//	               ComonotonicQuantile
//	samples:       QuantileCI, QuantileDiffCI (CIOrderStatistic, the
//	               distribution-free default, or the bootstrap,
//	               Maritz–Jarrett and delta methods, each refused by
//	               CheckCIMethod at a p and n where it covers less than
//	               nominal: ErrInvalidMethod)
//
// Invariants: tail-mean, excess and Shapley contributions add up to their
// target to rounding (Residual ≈ 0); the true records value lies within the
// bounds TailMeanAccumulators returns; ComonotonicBound is never below the
// records' P_p(S) or tail mean, also when its counts are scaled by rate()
// or increase(). Inputs are never modified.
package attribution
