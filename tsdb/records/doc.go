// Package records stores one request record per LLM-inference request: the
// joint per-request stage vector (queue, tokenize, prefill, decode,
// detokenize, network, other) with its labels, ids, token counts, TTFT,
// inter-token latencies and prompt entropy. Per-stage histograms are
// marginals, and per-stage P99s never add up to the end-to-end P99; tail
// attribution needs the joint vector, so it is kept here, beside the series
// store, with its own retention.
//
// In: batches of Record from ingest through Store.Append.
// Out: Store.Select, a time-ordered stream of the records in a time range
// that match Prometheus label matchers; and Store.SelectColumns, the same
// records in the same order as a ColumnBatch holding only the fields asked
// for, for callers that aggregate (tail attribution reads stages and TTFT
// of a million records without materialising one Record).
//
// Invariants: Append returns only after every record of the batch is in
// the fsynced write-ahead log, one prometheus tsdb/wlog log (Dir/wal) for
// every partition; a crash loses no record whose Append returned, and
// reopening cuts a torn last WAL record but refuses a WAL corrupted in the
// middle. After a failed write or sync the WAL is cut back to the newest
// synced write, so nothing of a refused batch is stored, and Append refuses
// until Recover reloads the files as Open would. Stages of every stored record sum to its
// end-to-end time exactly. With Options.HoldWAL every WAL batch after the
// caller's last Release stays readable through ReplayWAL, with the caller's
// per-record bytes given to AppendBatch (ingest recovers its derived series
// from them, so a batch is durable in one fsync).
// Files are time-partitioned (Options.PartitionDuration) and partitions never
// overlap, so Select orders by sorting one partition at a time.
//
// Segments, HeldPartitions and ReadSegmentFile let package history copy
// sealed segments to Parquet; Options.RetentionHold makes retention wait
// for that copy.
//
// The byte layout of WAL records and segment files is specified in
// docs/format/records.md; version 1 WAL files (one per partition generation)
// are sealed into segments on first open (wal_v1.go).
//
// TenantSource (tenant.go) confines Select and SelectColumns to the tenant
// of the context: the tenant's matchers added, its label stripped from the
// records and label sets returned.
package records
