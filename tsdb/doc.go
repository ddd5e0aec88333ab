// Package tsdb owns tailroot's on-disk state: the embedded Prometheus TSDB
// (WAL, head, blocks, compaction, retention, out-of-order window, native
// histograms, exemplars) and the metric metadata that arrives with writes.
// Beside it, tsdb/records keeps per-request records and tsdb/evidence the
// stacks and CUDA timelines node agents push, each with its own retention;
// tsdb/forward tails the WAL to send everything to remote_write endpoints.
//
// In: Options (data directory, retention, limits) and appends from ingest.
// Out: a storage.Queryable / ExemplarQueryable for the query layer and the
// admin operations of the Prometheus API (snapshot, delete, tombstones).
//
// Invariants: every acknowledged append is in the WAL before Commit returns;
// Close flushes the head so a restart replays nothing twice.
package tsdb
