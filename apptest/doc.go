// Package apptest starts the real tailroot binary in a child process and
// talks to it over HTTP, so tests see what users see: flags, signals,
// restarts and the wire formats.
//
// apptest/thanos runs tailroot inside a real Thanos deployment (sidecar,
// store, compact, query); apptest/internal/thanos holds the processes and
// helpers for it that other tests can reuse.
package apptest
