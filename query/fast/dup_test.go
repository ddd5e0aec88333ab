package fast_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/tailroot/tailroot/query/fast"
)

// TestDuplicateTimesAcrossSources: a persisted block and out-of-order
// samples in the head (and, compacted, an overlapping block) holding
// float and native histogram samples at the same times with other values. Which of two the TSDB's
// merge keeps depends on how its iterators are walked (upstream seeks
// where a window starts past the last sample it read), so over such a
// TSDB the fast path reads sample iterators, which it walks as upstream
// does, rather than chunks.
func TestDuplicateTimesAcrossSources(t *testing.T) {
	for _, compact := range []bool{false, true} {
		o := tsdb.DefaultOptions()
		o.OutOfOrderTimeWindow = (3 * time.Hour).Milliseconds()
		db, err := tsdb.Open(t.TempDir(), nil, nil, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		at := func(d time.Duration) int64 { return diffStart.Add(d).UnixMilli() }
		ls := labels.FromStrings("__name__", "dup_total", "job", "a")
		hs := labels.FromStrings("__name__", "dup_seconds", "job", "a")
		hist := func(n int64) *histogram.Histogram {
			return &histogram.Histogram{
				Schema: 0, Count: uint64(3 * n), Sum: float64(n),
				PositiveSpans: []histogram.Span{{Length: 2}}, PositiveBuckets: []int64{n, n},
			}
		}
		app := db.AppenderV2(context.Background())
		for d := time.Duration(0); d <= 2*time.Hour; d += 30 * time.Second {
			if _, err := app.Append(0, ls, 0, at(d), float64(d/time.Second), nil, nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := app.Append(0, hs, 0, at(d), 0, hist(int64(d/time.Second)), nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := db.CompactHead(tsdb.NewRangeHead(db.Head(), at(0), at(time.Hour)-1)); err != nil {
			t.Fatal(err)
		}
		app = db.AppenderV2(context.Background())
		for d := time.Duration(0); d < time.Hour; d += 5 * time.Minute {
			if _, err := app.Append(0, ls, 0, at(d), -1, nil, nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := app.Append(0, hs, 0, at(d), 0, hist(int64(d/time.Second)*2+7), nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
		if compact {
			if err := db.CompactOOOHead(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
		for _, qs := range []string{
			`last_over_time(dup_total[59s])`, `sum(last_over_time(dup_total[1m]))`, `dup_total`, `max_over_time(dup_total[10m])`,
			`sum(rate(dup_seconds[5m]))`, `histogram_count(rate(dup_seconds[1m]))`, `increase(dup_seconds[10m])`,
		} {
			for _, step := range []time.Duration{5 * time.Minute, 30 * time.Second, 7 * time.Minute} {
				start, end := diffStart.Add(-2*time.Minute), diffStart.Add(70*time.Minute)
				qry, err := ng.NewRangeQuery(context.Background(), db, nil, qs, start, end, step)
				if err != nil {
					t.Fatal(err)
				}
				res := qry.Exec(context.Background())
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				for _, q := range []storage.Queryable{db, samplesQueryable{db}} {
					got, _, err := mustCompile(t, qs).Range(context.Background(), q, fast.DefaultOptions(), start, end, step)
					_, samples := q.(samplesQueryable)
					if err != nil {
						t.Fatalf("samples=%v %s: %v", samples, qs, err)
					}
					if d := diffValues(res.Value, got, false); d != "" {
						t.Errorf("compacted=%v samples=%v %s step %s:\n%s", compact, samples, qs, step, d)
					}
				}
			}
		}
	}
}
