package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query/fast"
)

// TestLeaseTSDBFastPath: the fast path reads this DB's persisted blocks
// through LeaseTSDB (fast.TSDBSource) and answers as the upstream engine
// does over the same DB; the lease is released (Close would wait on it).
func TestLeaseTSDBFastPath(t *testing.T) {
	o := DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	// Equal block durations keep the 2 h blocks apart: with level
	// compaction on, how many survive depends on the hour the test runs.
	o.MinBlockDuration = 2 * time.Hour
	o.MaxBlockDuration = 2 * time.Hour
	db, err := Open(o, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var _ fast.TSDBSource = db

	start := time.Now().Add(-10 * time.Hour).Truncate(time.Hour)
	const step = int64(30_000)
	app := db.AppenderV2(context.Background())
	for ts := start.UnixMilli(); ts < start.Add(10*time.Hour).UnixMilli(); ts += step {
		for i, job := range []string{"a", "b", "c"} {
			ls := labels.FromStrings("__name__", "x_total", "job", job)
			v := float64((ts-start.UnixMilli())/step*int64(i+1)) + 0.25
			if _, err := app.Append(0, ls, 0, ts, v, nil, nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	pdb, release, err := db.LeaseTSDB()
	if err != nil {
		t.Fatal(err)
	}
	blocks := len(pdb.Blocks())
	release()
	if blocks < 3 {
		t.Fatalf("%d blocks, want several", blocks)
	}

	const qs = `sum by (job) (rate(x_total[5m]))`
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(qs)
	if err != nil {
		t.Fatal(err)
	}
	plan, ok := fast.Compile(expr)
	if !ok {
		t.Fatal("not compiled")
	}
	qStart, qEnd := start.Add(time.Hour), start.Add(10*time.Hour)
	got, _, err := plan.Range(context.Background(), db, fast.DefaultOptions(), qStart, qEnd, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	q, err := ng.NewRangeQuery(context.Background(), db, nil, qs, qStart, qEnd, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := res.Value.(promql.Matrix)
	if len(want) != 3 {
		t.Fatalf("upstream %d series, want 3", len(want))
	}
	sameFloats(t, qs, got, want)
}

// sameFloats fails t unless got holds want's series, labels and float
// points bitwise, in want's order.
func sameFloats(t *testing.T, desc string, got, want promql.Matrix) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d series, upstream %d", desc, len(got), len(want))
	}
	for i := range want {
		if !labels.Equal(got[i].Metric, want[i].Metric) || len(got[i].Floats) != len(want[i].Floats) {
			t.Fatalf("%s: series %d: %s with %d points, upstream %s with %d", desc, i, got[i].Metric, len(got[i].Floats), want[i].Metric, len(want[i].Floats))
		}
		for j, p := range want[i].Floats {
			if g := got[i].Floats[j]; g.T != p.T || g.F != p.F {
				t.Errorf("%s: %s at %d: %v, upstream %v", desc, want[i].Metric, p.T, g.F, p.F)
			}
		}
	}
}
