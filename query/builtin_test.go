package query_test

import (
	"testing"

	"github.com/prometheus/prometheus/promql/promqltest"

	"github.com/tailroot/tailroot/query"
)

// builtinSkips lists upstream test files tailroot does not pass, each with
// its reason. It is empty: every upstream file passes.
var builtinSkips = map[string]string{}

// TestUpstreamPromQLSuite runs Prometheus' own PromQL acceptance suite
// against the engine as `tailroot serve` builds it (DefaultOptions, the
// default function registry with tailroot's functions, MetricsQL fallback).
func TestUpstreamPromQLSuite(t *testing.T) {
	ng, err := query.New(query.DefaultOptions(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	if len(builtinSkips) > 0 {
		t.Logf("skipping %d upstream files: %v", len(builtinSkips), builtinSkips)
	}
	promqltest.RunBuiltinTests(skipper{t}, ng)
}

// skipper skips the files named in builtinSkips.
type skipper struct{ *testing.T }

func (s skipper) Run(name string, f func(*testing.T)) bool {
	return s.T.Run(name, func(t *testing.T) {
		if why, ok := builtinSkips[name]; ok {
			t.Skip(why)
		}
		f(t)
	})
}
