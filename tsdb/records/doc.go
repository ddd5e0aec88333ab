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
// Invariants: Append returns only after every record of the batch is in a
// fsynced write-ahead log; a crash loses no record whose Append returned, and
// reopening drops a torn last WAL entry but refuses a WAL corrupted in the
// middle. A failed write is cut off the WAL; after a failed sync Append
// refuses until Recover reloads the files as Open would. Stages of every
// stored record sum to its end-to-end time exactly.
// Files are time-partitioned (Options.PartitionDuration) and partitions never
// overlap, so Select orders by sorting one partition at a time.
//
// Segments, HeldPartitions and ReadSegmentFile let package history copy
// sealed segments to Parquet; Options.RetentionHold makes retention wait
// for that copy.
//
// The byte layout of WAL and segment files is specified in
// docs/format/records.md.
//
// TenantSource (tenant.go) confines Select and SelectColumns to the tenant
// of the context: the tenant's matchers added, its label stripped from the
// records and label sets returned.
package records
