// Package api serves tailroot over HTTP: the Prometheus HTTP API (query,
// metadata, status, admin), the ingest endpoints, health and readiness, and
// tailroot's own /metrics, routed with gorilla/mux.
//
// In: HTTP requests. Out: responses in the Prometheus JSON envelope
// ({"status":…,"data":…} or {"status":"error","errorType":…,"error":…}),
// gzip-compressed when the client accepts it.
//
// The package routes, parses parameters and writes responses; what the
// endpoints compute lives below it. Envelope, error status, time and
// duration parsing and NaN-as-null numbers are internal/httpapi's (shared
// with ingest's endpoints); breakdowns, reports and A/B intervals call
// query/tailfn's Go entry points (tailfn.Decompose, tailfn.TokenHeat) and
// attribution's statistics directly, so an evaluation error is answered as
// that error (500), and only an empty window as 422 "no requests".
//
// CORS is off unless Options.CORSOrigin allows origins (--web.cors.origin):
// a web page a user visits cannot read the API. Every query string is
// parsed through the engine's limited parser (query/qlimit), so
// format_query, parse_query, series matchers and the attribution selectors
// refuse over-long, over-large or over-deep expressions before parsing
// them.
//
// The route table (Server.Routes, GET /api/v1/status/routes) lists every
// path and its methods, those of the Prometheus API behind the /api/v1/
// catch-all included (found by probing its router through an
// instrumentation hook that answers probes without running a handler), so
// docs/api.md is checked against what a running server really routes.
// /report and /breakdown take a Shapley baseline as baseline_offset or
// baseline_start/baseline_end alike.
//
// With Options.ResultsCache, /api/v1/query_range is answered through the
// results cache (query/resultscache) wrapped around the engine; a request
// sent with Cache-Control: no-store (or no-cache), nocache=1, or stats=…
// is evaluated without it.
//
// RecordsShard (POST /api/v1/records/shard) is the node side of exact tail
// queries across servers: it answers one round of the protocol of
// docs/distributed-tails.md over this server's records, through the same
// tailfn.LocalShard the querying server uses for its own. With
// AttributionOptions.Cluster set, /breakdown, /report and /ab answer over
// the cluster (tailfn.Cluster.Decompose, Cluster.QuantileDiff): "nodes" in
// every answer, local=true for this server alone, partial_response to
// leave out a peer that does not answer (else 502 "unavailable" naming it).
//
// With Options.Tenancy (tenancy.go, docs/tenancy.md) every request but
// the probes and /metrics resolves its tenant (401/400/403 otherwise) and
// runs with it in its context; the Prometheus API reads through the
// tenant-confined TSDB wrappers, and endpoints that cannot be confined
// (TSDB status, snapshot) answer 403. Each tenant's evidence lives in its
// own store (EvidenceOptions.TenantStore).
package api
