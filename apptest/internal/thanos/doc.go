// Package thanos runs real Thanos components (sidecar, store, query,
// compact) as processes for tailroot's end-to-end tests, and holds the
// helpers those tests share: a filesystem bucket, block metadata read from
// it, a Prometheus-API query client with result comparison, and a
// deterministic generator of inference-serving series for backfills, which
// also keeps the ground truth its series are built from (requests per step,
// tail means from the requests themselves).
//
// In: the thanos binary (Binary builds it with the project's shared
// peers script, which caches it), tailroot servers started by apptest.
// Out: running processes that are killed when the test ends, and their logs
// on failure. Holds: every helper fails the test (t.Fatal) rather than
// returning an error, and every wait has a deadline.
package thanos
