// Package ingest decodes what clients push, validates it against the
// configured limits and appends it to the stores:
//
//   - Prometheus remote write 1.0 and 2.0 (remotewrite.go, decode_v1.go,
//     append.go) → series in the TSDB;
//   - OTLP metrics (otlp.go) → series, translated as Prometheus 3 does;
//   - OTLP traces (traces.go) and the NDJSON request push (requests*.go) →
//     request records, plus the series derived from them (derive*.go):
//     stage histograms, tail accumulators, token-position latency, prompt
//     entropy; stages.go maps engine metric names onto canonical stages.
//
// In: an HTTP request body and its headers. Out: samples, native
// histograms, exemplars and metadata appended through a
// storage.AppendableV2, request records appended to tsdb/records, and a
// response that says what was written and what was rejected.
//
// Invariants: a request is answered 2xx only after what it carried is
// durable (the TSDB WAL, the record store's WAL and the derive journal); a
// bad item is reported (4xx naming it) while the good items of the same
// request are kept; decoding finishes before the first append, so a
// malformed body changes nothing; a crash never counts a record twice in
// the derived series. Derived samples are stamped with each request's end
// time (derive_stamp.go), and every derived series starts with a zero
// sample, so increase(…[w] anchored) over them counts exactly the requests
// that ended in the window.
package ingest
