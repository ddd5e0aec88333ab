// Package history keeps request records past local retention: it writes
// the sealed segments of a records.Store as Apache Parquet files, Hive
// partitioned by UTC date and hour, to a local directory or an
// S3-compatible bucket, and reads them back for record queries. The files
// are the fleet's request history for DuckDB, Spark, Trino or ClickHouse,
// and let tailroot answer tail_mean and the other record functions over
// windows the local store has dropped.
//
// In: a records.Store (Exporter reads its sealed segments) and a Bucket
// (DirBucket or S3Bucket).
// Out: Parquet files and per-segment manifests in the bucket (Exporter);
// Source, a Select/SelectColumns over local and exported partitions that
// query/tailfn uses as its record source.
//
// Invariants: a segment is exported when its manifest exists, and the
// manifest is written after every file of the segment; exporting a segment
// again writes the same keys, so a crash or restart never duplicates a
// file. Retention waits for export when Exporter.Held is the store's
// RetentionHold. Source reads each record partition from exactly one
// place, so its answers equal the local store's before retention, bit for
// bit and in the same order. Every decoded row is validated as the store
// validates an appended record.
//
// The layout and schema are specified in docs/format/records-parquet.md.
package history
