package query_test

import (
	"testing"

	"github.com/prometheus/prometheus/promql/promqltest"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/builtin"
	"github.com/tailroot/tailroot/tsdb/records"
)

// builtinSkips lists upstream test files tailroot does not pass, each with
// its reason. It is empty: every upstream file passes.
var builtinSkips = map[string]string{}

// TestUpstreamPromQLSuite runs Prometheus' own PromQL acceptance suite
// against the engine as `tailroot serve` builds it (DefaultOptions, the
// registry with every tailroot function), with the experimental features
// the suite exercises enabled as Prometheus enables them for it
// (--enable-feature=promql-experimental-functions,promql-delayed-name-removal,
// promql-binop-fill-modifiers,promql-unquoted-utf8-names), and with and
// without the MetricsQL fallback.
func TestUpstreamPromQLSuite(t *testing.T) {
	ro := records.DefaultOptions()
	ro.Dir = t.TempDir()
	rs, err := records.Open(ro)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	funcs, err := builtin.Registry(rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, metricsQL := range []bool{false, true} {
		opts := query.DefaultOptions()
		opts.ExperimentalFunctions, opts.DelayedNameRemoval, opts.BinopFillModifiers, opts.UnquotedUTF8Names = true, true, true, true
		opts.MetricsQL = metricsQL
		ng, err := query.New(opts, funcs, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ng.Close() })
		if len(builtinSkips) > 0 {
			t.Logf("skipping %d upstream files: %v", len(builtinSkips), builtinSkips)
		}
		name := "promql"
		if metricsQL {
			name = "metricsql-fallback"
		}
		t.Run(name, func(t *testing.T) { promqltest.RunBuiltinTests(skipper{t}, ng) })
		// The suite must exercise the fast path, not only pass around it.
		answered, handedBack := ng.FastPathCounts()
		t.Logf("%s: the fast path answered %d queries and handed back %d", name, answered, handedBack)
		if answered < 100 {
			t.Errorf("%s: the fast path answered only %d of the suite's queries", name, answered)
		}
	}
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
