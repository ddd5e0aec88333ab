// Package causalfn exposes tailroot's causal statistics (attribution/causal)
// and root-cause ranking (attribution/rca) as PromQL functions, evaluated
// by the query planner because each needs whole windows of several series
// at once. Register adds them to a query.Registry; docs/causal.md is the
// user reference (formula, arguments, example and result labels of each).
//
// In: range-vector arguments — subqueries such as
// `avg(vllm:request_queue_time_seconds_sum)[2h:15s]` or range selectors —
// and scalar options, evaluated at each step's time. Out: an instant vector
// per step whose elements are statistics of candidates:
//
//	{<candidate's labels without __name__>, candidate="metric{labels}",
//	 statistic="f" | "p_value" | …, [lag="k"], [node="…"]}
//
// so results table, threshold and compose like any series; statistic(v,
// "name") keeps one statistic and drops the label, for topk and arithmetic.
//
//	granger(outcome, candidates, max_lag [, conditioning])
//	lagged_correlation(outcome, candidates, max_lag)
//	backdoor_effect(outcome, treatments [, confounders])
//	counterfactual(outcome, treatments, baseline_seconds [, confounders])
//	change_point(series [, hazard])
//	robust_score(target, candidates…)
//	root_cause(target, candidates…)
//	drift(current, reference [, bins])
//	statistic(vector, "name")
//
// # One implementation for PromQL and HTTP
//
// RootCause (ranking), Effect (backdoor, granger, ccf), LoadRange (a
// range query into Inputs) and Discover (candidates from the stored
// families) are the analysis behind both the PromQL functions and the
// endpoints /api/v1/attribution/rootcause and /api/v1/attribution/causal:
// api/ only parses parameters and writes answers. Granger's lag is the one
// AIC picks everywhere (GrangerBest).
//
// # Conventions that hold for every function
//
//   - One argument's series are the candidates (or treatments); each is
//     tested on its own against the outcome, which must be exactly one
//     series (an error names the argument otherwise).
//   - Series are aligned on the timestamps they share. Subqueries share
//     their step grid; raw range selectors over targets scraped at
//     different offsets share none, which is an error saying to use a
//     subquery. NaN values count as missing.
//   - Lagged functions (granger, lagged_correlation) need gap-free aligned
//     points: a hole inside the window is an error for that candidate,
//     because dropping it would pair the wrong times. Lag-free functions
//     drop the points where any input is missing, with an info annotation.
//   - A candidate that cannot be tested (constant, too short, a gap) is
//     left out with a warning annotation naming it and the reason; when
//     every candidate fails, the first failure is the query's error.
//   - Rankings (robust_score, root_cause) use the target's points; a
//     candidate with values at fewer than half of them is left out with a
//     warning rather than shrinking everyone's window. root_cause adds one
//     sample {statistic="verdict", verdict="incident" | "no incident" |
//     "unexplained", direction="up" | "down" | "both", reason="improved" |
//     …} (rca.Result.Verdict, Direction, Why). The target's harmful
//     direction comes from a "direction" label on it (label_replace), else
//     from its name (TargetDirection); the endpoint's direction parameter
//     is the same knob.
//   - Native histogram series are an error: pass floats
//     (histogram_quantile, histogram_avg).
package causalfn
