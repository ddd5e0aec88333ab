// Package api serves tailroot over HTTP: the Prometheus HTTP API (query,
// metadata, status, admin), the ingest endpoints, health and readiness, and
// tailroot's own /metrics, routed with gorilla/mux.
//
// In: HTTP requests. Out: responses in the Prometheus JSON envelope
// ({"status":…,"data":…} or {"status":"error","errorType":…,"error":…}),
// gzip-compressed when the client accepts it.
//
// CORS is off unless Options.CORSOrigin allows origins (--web.cors.origin):
// a web page a user visits cannot read the API. Every query string is
// parsed through the engine's limited parser (query/qlimit), so
// format_query, parse_query, series matchers and the attribution selectors
// refuse over-long, over-large or over-deep expressions before parsing
// them.
//
// RecordsShard (POST /api/v1/records/shard) is the node side of exact tail
// queries across servers: it answers one round of the protocol of
// docs/distributed-tails.md over this server's records, through the same
// tailfn.LocalShard the querying server uses for its own.
//
// With Options.Tenancy (tenancy.go, docs/tenancy.md) every request but
// the probes and /metrics resolves its tenant (401/400/403 otherwise) and
// runs with it in its context; the Prometheus API reads through the
// tenant-confined TSDB wrappers, and endpoints that cannot be confined
// (TSDB status, snapshot) answer 403. Each tenant's evidence lives in its
// own store (EvidenceOptions.TenantStore).
package api
