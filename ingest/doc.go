// Package ingest decodes what clients push — Prometheus remote write 1.0 and
// 2.0 today — validates it against the configured limits and appends it to
// the store.
//
// In: an HTTP request body (snappy-compressed protobuf) and its headers.
// Out: samples, native histograms, exemplars and metadata appended through a
// storage.AppendableV2, and a response that says what was written.
//
// Invariants: a request is answered 2xx only after its appender committed, so
// an acknowledged sample is in the WAL; a bad series is reported (4xx naming
// it) while the good series of the same request are kept; nothing is
// partially decoded into the store — decoding finishes before the first append.
package ingest
