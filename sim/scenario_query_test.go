package sim_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/sim"
	"github.com/tailroot/tailroot/tsdb"
)

// TestSignalQueriesReproduceValues writes an incident into a TSDB and runs
// every signal's documented Query (and the ground truth's) through the
// engine at the 15 s step: the PromQL an operator would type gives the
// numbers the evaluation ranks. rate over [30s] at 15 s samples spans one
// interval and extrapolates it to the window, so it equals Δ/15 s.
func TestSignalQueriesReproduceValues(t *testing.T) {
	inc, err := sim.Scenario{Fault: sim.FaultPageFaultStorm, Seed: 6, Length: 20 * time.Minute, FaultAt: 10 * time.Minute}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	app := db.AppenderV2(context.Background())
	for _, s := range inc.Series {
		for _, x := range s.Samples {
			if _, err := app.Append(0, s.Labels, 0, x.T, x.V, nil, nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), query.NewRegistry(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	// Signal j belongs to step j+1. Start a minute in, where every counter
	// is far from zero (rate limits extrapolation near a zero crossing).
	const from = 4
	start, end := inc.Times[from+1], inc.Times[len(inc.Times)-1]
	check := func(s sim.Signal) {
		t.Helper()
		q, err := ng.NewRangeQuery(context.Background(), db, nil, s.Query, start, end, 15*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", s.Query, err)
		}
		defer q.Close()
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: %v", s.Query, res.Err)
		}
		m := res.Value.(promql.Matrix)
		if len(m) != 1 || len(m[0].Floats) != len(s.Values)-from {
			t.Fatalf("%s: %d series, want one of %d points", s.Query, len(m), len(s.Values)-from)
		}
		for i, p := range m[0].Floats {
			want := s.Values[from+i]
			if math.Abs(p.F-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Fatalf("%s at step %d: query %.12g, signal %.12g", s.Name, from+i+1, p.F, want)
			}
		}
	}
	sigs := inc.Signals()
	if len(sigs) != 52 {
		t.Fatalf("%d signals, want 52", len(sigs))
	}
	for _, s := range sigs {
		check(s)
	}
	check(inc.Target())
	check(inc.ModelMean("vllm:time_to_first_token_seconds"))
	for _, s := range sigs {
		if s.Name == inc.Truth.RootCause.Signal && s.Query != inc.Truth.RootCause.Query {
			t.Errorf("truth query %q, signal query %q", inc.Truth.RootCause.Query, s.Query)
		}
	}
}
