// Package remote gives tailroot's query engine a global view: the local
// TSDB merged with remote stores — Thanos StoreAPI endpoints (a Thanos
// Query, Store, Sidecar or Receive) and Prometheus remote read endpoints
// (other tailroot nodes, Prometheus, anything that serves /api/v1/read) —
// so PromQL and every tailroot function (tail accumulators, histogram
// fallbacks, granger, root_cause, …) run over all of them unchanged.
//
// In: the local storage.Queryable, the stores (NewStoreAPI, RemoteReadStores)
// and Options. Out: a storage.Queryable (Queryable) whose queriers merge all
// sources with storage.NewMergeQuerier.
//
// What holds:
//
//   - Local series carry the local external labels, as a Thanos sidecar or
//     Prometheus' remote read would show them; a series' own label of the
//     same name wins (Prometheus' rule). A matcher on an external label is
//     answered from its value, so {node="b"} reads nothing locally on node a.
//   - Series that differ only in a replica label (Options.ReplicaLabels,
//     Thanos' --query.replica-label) are one series: the replica labels are
//     dropped and the replicas merged with Thanos' penalty rule — follow one
//     replica, switch to another only across a gap, and after a sample at t
//     skip the other until t + 2·(t − previous t) (5 s after the first), so
//     replicas scraping at different offsets are not interleaved. Thanos'
//     counter-reset adjustment across replicas is not done.
//   - Without replica labels, equal label sets are the same data seen twice
//     (a node that is both local and behind the Thanos Query it reads) or a
//     store's history next to the local recent part: their samples are
//     chain-merged (the union by timestamp, each timestamp once).
//   - Partial response: every store that answered is named in an info
//     annotation ("store X answered"), every store that failed in a warning
//     with its error, and the query is answered from the rest — as Thanos
//     Query does with partial response on. With partial response off
//     (Options.PartialResponse false, or WithPartialResponse(ctx, false)
//     per request: partial_response=false on the HTTP API) a failed store
//     fails the query, and a Thanos endpoint is asked with the ABORT
//     strategy so its own stores must all answer too.
//   - A store's answer is read whole before the merge starts (as the
//     prometheus module's remote read storage does), so a failure half way
//     through a stream is a failed store, never a truncated series.
//     Each chunk is decoded once while reading: one whose samples go back
//     in time, or that does not decode to its end, makes the whole answer
//     a failed store ("samples out of order: …"), never a wrong series.
//   - Only evaluation is global. A server's series, label and remote read
//     endpoints keep serving its local TSDB (api.Options.Queryable): a
//     Thanos sidecar builds its StoreAPI from them, and must not re-export
//     other nodes' data under this node's external labels, nor loop
//     through a Thanos Query this node reads.
//   - Remote read has no label calls: a remote_read store lists no label
//     names or values (an info says so) rather than failing.
//   - Downsampled blocks are read as Thanos Query reads them: the maximum
//     source resolution (StoreAPIOptions.MaxSourceResolution, per request
//     WithMaxSourceResolution: max_source_resolution on the HTTP API; 0 by
//     default, raw data only) is sent as max_resolution_window, capped at
//     half the range of functions that need two samples in their window.
//     A chunk without raw data is read through the aggregate the selector's
//     function calls for (aggrsForFunc): min, max, count, sum, the
//     reset-adjusted counter for rate/increase/irate/resets, else the
//     window average sum/count. Asked for raw data only, aggregate chunks
//     are an error of that store.
package remote
