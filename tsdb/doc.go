// Package tsdb owns tailroot's on-disk state: the embedded Prometheus TSDB
// (WAL, head, blocks, compaction, retention, out-of-order window, native
// histograms, exemplars) and the metric metadata that arrives with writes.
// Beside it, tsdb/records keeps per-request records and tsdb/evidence the
// stacks and CUDA timelines node agents push, each with its own retention;
// tsdb/forward tails the WAL to send everything to remote_write endpoints.
//
// In: Options (data directory, retention, limits) and appends from ingest.
// Out: a storage.Queryable / ExemplarQueryable for the query layer and the
// admin operations of the Prometheus API (snapshot, delete, tombstones);
// LeaseTSDB hands the fast PromQL path the Prometheus TSDB itself, held
// against a reopen, so that it reads the persisted blocks one by one.
//
// Invariants: every acknowledged append is in the WAL before Commit returns;
// Close flushes the head so a restart replays nothing twice. The data
// directory is laid out as Prometheus lays it out (wal/, chunks_head/, one
// ULID folder per block), and with MinBlockDuration == MaxBlockDuration no
// block is merged after it is written, so a Thanos sidecar can upload every
// 2h block; /metrics carries prometheus_tsdb_lowest_timestamp_seconds, which
// the sidecar reads. SetWriteListener is told, after every commit and
// delete, the lowest sample time it touched (the results cache drops what
// it computed from there on). Metric
// metadata is not acknowledged data: the store keeps the newest entry per
// family, bounded, written every 10 s and at Close (metadata.go says what
// a crash can lose); while it cannot be written, writes that carry
// metadata fail with ErrUnavailable (503 with Retry-After) and Ready says
// why, until a later flush succeeds.
// After a failed
// WAL (or out-of-order WBL) write no write is acknowledged that a restart
// could lose: commits are serialised, the logs are cut back to the end of
// the last acknowledged commit at once, writes fail with ErrUnavailable
// (and Ready says so) until a probe write succeeds and the Prometheus DB has
// been closed and reopened on a fresh segment; a failed commit leaves
// nothing behind. Options.MinFreeBytes refuses writes before the disk is
// full. guard.go explains why a reopen and not a retry. Full head chunks
// are written to the head chunk files every five seconds (the Prometheus
// DB alone waits a minute), so that a backlog written in seconds does not
// hold them on the heap (mmap.go).
//
// Tenancy (tenantstore.go, docs/tenancy.md): TenantAppendable stamps the
// tenant label of each appender's context and enforces the tenant's series
// and samples/s limits; TenantQueryable, TenantSampleAndChunkQueryable and
// TenantExemplarQueryable add the tenant matcher to every selection and
// strip the label from what they return, and fail closed (ErrNoTenant)
// on a context without a tenant.
package tsdb
