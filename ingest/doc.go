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
// response that says what was written and what was rejected. Metadata that
// arrives with a series (remote write 2.0, OTLP, the derived series) goes
// with its appends too, so the TSDB can log it in the WAL for remote write
// 2.0 forwarding (tsdb/forward); remote write 1.0 sends metadata apart from
// the series, so it only reaches the metadata store.
//
// Invariants: a request is answered 2xx only after what it carried is
// durable (the TSDB WAL, the record store's WAL, which also carries what the
// derived series need to be rebuilt); a
// bad item is reported (4xx naming it) while the good items of the same
// request are kept; decoding finishes before the first append, so a
// malformed body changes nothing; a crash never counts a record twice in
// the derived series. Every path applies the same label and timestamp
// rules (internal/validation: label count, name and value length, UTF-8,
// timestamps within int64); OTLP points are checked before translation, so
// a hostile point costs no translator time. Decoded bodies are leased from
// the in-flight budget (internal/inflight) before they are allocated, so
// gzip and snappy bombs are refused (413, or 503 with Retry-After) rather
// than allocated. Writes without their real Content-Type are refused (415):
// a cross-site browser POST can send none or text/plain without a CORS
// preflight. A 5xx means nothing of the request was stored: 503
// with Retry-After while a store refuses writes after a failed one
// (tsdb.ErrUnavailable, ErrRecordsFailed), which clears by itself; the
// record pipeline recovers its store and derived state in-process, as a
// restart would.
// Derived samples are stamped with each request's end
// time (derive_stamp.go), and every derived series starts with a zero
// sample, so increase(…[w] anchored) over them counts exactly the requests
// that ended in the window. Token positions are bucketed by
// attribution.TokenPositionBucket, the buckets of the breakdown endpoint's
// token heat map too. The request-record endpoints answer in the
// Prometheus envelope and read API times through internal/httpapi, as
// api/ does (Unix seconds or RFC 3339, within Prometheus' range).
//
// Tenancy (docs/tenancy.md): when a request's context carries a tenant
// (internal/tenant), its series are appended through tsdb.TenantAppendable
// (cmd/tailroot wires it), its request records get the tenant label in
// Records.Append, replacing any client value, and count against its
// records/s limit; GET /api/v1/requests reads through
// records.TenantSource. A per-tenant limit answers 429 with Retry-After
// (tenant.LimitError), and nothing of the request is stored.
package ingest
