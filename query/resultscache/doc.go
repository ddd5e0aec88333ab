// Package resultscache answers range queries from cached results, as the
// Cortex and Thanos query frontends do, but inside the engine: Cache.Wrap
// decorates a promql.QueryEngine, so /api/v1/query_range, the Grafana
// plugin (which calls it) and anything else given the wrapped engine share
// one cache. A decorator rather than an HTTP handler in front of
// query_range because the engine is where the answer is a Matrix: pieces
// are merged as series and points, not re-encoded JSON, and the API's own
// encoding stays the one byte-for-byte path for cached and uncached
// answers alike.
//
// In: range queries (query, start, end, step, options). Out: the same
// promql.Result the wrapped engine gives for that range, bit for bit.
//
// How: a query's answer is kept as extents — runs of consecutive steps on
// its step grid — under a key of the normalised query, step, start mod
// step, lookback delta, start-timestamp option and whatever Options.KeyFrom
// adds (the tenant). A query reads the extents overlapping its range,
// evaluates only the missing runs with the wrapped engine, and joins the
// series. Steps later than now − Options.MaxFreshness are answered but
// never kept. Memory is bounded by Options.MaxBytes (an estimate of labels,
// points and histograms), least recently used queries evicted first.
//
// Invariants:
//   - Only queries whose steps are independent of the range are cached
//     (see cacheable): upstream PromQL functions only, no @, no negative
//     offsets, no duration expressions. Everything else passes through.
//   - A step at time ts depends only on samples at or before ts, so a write
//     or delete reaching back to time t (Invalidate(t), called by the TSDB
//     after every commit) drops every cached step ≥ t, and a query in
//     flight when it happens does not store steps ≥ t. A move of the
//     storage's oldest sample time (retention) empties the cache.
//   - A piece evaluated with annotations is answered but not kept, so a
//     hit never drops a warning the full evaluation gives.
//   - A missing piece that fails is not the answer: the query is then
//     evaluated over its whole range, uncached, and that result (data or
//     error) returned, so the cache never turns an answer into an error.
//   - Results share memory with the cache: they are read-only.
//
// Requests skip the cache with WithBypass (the API sets it for
// Cache-Control: no-store, nocache=1 and stats=…), and the whole cache is
// bypassed while Options.Bypass says so (remote stores in the global view:
// their writes are not seen here).
package resultscache
