// Package attribution holds pure statistics: tail decomposition of latency
// into stages that adds up, A/B intervals for quantiles, and (in causal/)
// tests that relate kernel and GPU covariates to stage latency.
//
// Nothing here touches storage or HTTP: functions take slices and return
// numbers, each with its formula in the doc comment.
package attribution
