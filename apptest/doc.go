// Package apptest starts the real tailroot binary in a child process and
// talks to it over HTTP, so tests see what users see: flags, signals,
// restarts and the wire formats.
//
// The docs are tested here too: TestDocsExamples runs every PromQL example
// and curl of README.md and docs/*.md (the convention is in README.md's
// Development section), TestAPIReference checks docs/api.md against the
// running server's route table, and TestSimulatedWorld asks
// docs/walkthrough.md's questions.
//
// apptest/thanos runs tailroot inside a real Thanos deployment (sidecar,
// store, compact, query); apptest/internal/thanos holds the processes and
// helpers for it that other tests can reuse.
package apptest
