// Package api serves tailroot over HTTP: the Prometheus HTTP API (query,
// metadata, status, admin), the ingest endpoints, health and readiness, and
// tailroot's own /metrics, routed with gorilla/mux.
//
// In: HTTP requests. Out: responses in the Prometheus JSON envelope
// ({"status":…,"data":…} or {"status":"error","errorType":…,"error":…}),
// gzip-compressed when the client accepts it.
//
// RecordsShard (POST /api/v1/records/shard) is the node side of exact tail
// queries across servers: it answers one round of the protocol of
// docs/distributed-tails.md over this server's records, through the same
// tailfn.LocalShard the querying server uses for its own.
package api
