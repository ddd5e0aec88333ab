// Package tailfn puts tailroot's attribution statistics behind PromQL: it
// registers planned functions (see query.PlannedFunc) that decompose a tail
// latency into stages, build heat tables, and give quantile intervals, over
// request records or over series.
//
// In: a query.Registry to register into and a RecordSource (the
// request-record store). Record functions take their records as a range
// selector of the pseudo-metric RecordsMetric, "requests":
//
//	tail_mean(0.99, requests{model_name="llama"}[5m])
//
// The selector is never evaluated as series: its matchers select records
// whose Time lies in (t − 5m, t], shifted by offset or pinned by @ like any
// range selector. Series functions (tail_mean_from_accumulators and the
// histogram_* fallbacks) take ordinary PromQL expressions.
//
// Out: instant vectors, one sample per row, so results compose with topk,
// sum by (stage) and arithmetic. Every row carries the labels stage (a
// canonical stage, or "e2e" for whole-request rows), method (the
// attribution.Method or CI method that computed it), kind (exact, estimate
// or bound: nothing estimated is labelled exact) and statistic (what the
// number is: contribution, share, lower, upper, …). By default a
// decomposition returns only its per-stage contributions, so
// sum(tail_mean(…)) is the decomposed target; a trailing statistic argument
// selects other rows or "all".
//
// Invariants: tail_mean, tail_excess and tail_shapley contributions add up
// to their target to rounding (the statistics guarantee it; Load keeps
// the records' stage sums intact); bootstrap intervals use BootstrapSeed,
// so an interval is reproducible and equals attribution.QuantileCI's on the
// same data; quantile_ci and quantile_diff_ci default to the
// order-statistic interval and fail (naming method, p and n) where a
// method covers less than nominal. docs/functions.md documents every
// function with its formula.
//
// Across servers: registered over a Cluster (the local records plus peers,
// each a Shard), tail_mean, tail_excess, tail_euler, tail_heat,
// quantile_ci, quantile_diff_ci and tail_shapley return what one server
// holding every record would (bootstrap and Maritz–Jarrett intervals up to
// ClusterOptions.MaxCIValues order statistics, past it by the
// order-statistic interval with an info annotation): the same quantiles bit for bit (found by a distributed
// selection on the float64 order, docs/distributed-tails.md), sums equal
// up to the order of addition. Nodes exchange counts, sums and a few
// order statistics, not records (tail_shapley excepted: it fetches stage
// columns). A peer that does not answer fails the query with an error
// naming it, or, with partial responses accepted, leaves it out and says
// so in a warning.
// Cluster.Decompose and Cluster.QuantileDiff are the attribution
// endpoints' breakdown, heat table and A/B interval over the same nodes
// and rounds, for metric ttft too (ShardRequest.Records: each node
// decomposes its own records' TTFT); what needs whole records stays local
// and says so; every answer carries the Nodes it covers.
//
// Go entry points: the attribution endpoints (api/) call the same code
// without PromQL text. Decompose is their breakdown (records by method, or
// for auto the series fallback: TailMeanFromAccumulators over the
// accumulators' increase, then the comonotonic bound over
// StageHistogramGroups); its errors are ErrNoRequests, ErrUnanswerable
// (the statistic refused) or the failure to load or evaluate, never one
// read as another. TokenHeat counts inter-token gaps on the token position
// buckets of attribution.TokenPositionBucket, those of the derived
// tailroot_token_latency_seconds series.
package tailfn
