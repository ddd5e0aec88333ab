// Package api serves tailroot over HTTP: the Prometheus HTTP API (query,
// metadata, status, admin), the ingest endpoints, health and readiness, and
// tailroot's own /metrics, routed with gorilla/mux.
//
// In: HTTP requests. Out: responses in the Prometheus JSON envelope
// ({"status":…,"data":…} or {"status":"error","errorType":…,"error":…}),
// gzip-compressed when the client accepts it.
package api
