package resultscache_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query/resultscache"
)

// TestLateWriteInvalidates caches a range, writes samples inside it the way
// an agent flushing its queue late does (out of order, through the TSDB's
// appender), and requires the next answer to show them: the TSDB's write
// listener drops the cached steps at and after the lowest written time.
func TestLateWriteInvalidates(t *testing.T) {
	db := openDB(t)
	ng := newEngine(t)
	reg := prometheus.NewRegistry()
	c := newCache(ng, reg, nil)
	db.SetWriteListener(c.Invalidate)
	cached := c.Wrap(ng)
	ctx := context.Background()
	start, end, step := t0, t0.Add(2*time.Hour), time.Minute
	qs := `sum by (model) (late_total)`

	first, err := rangeQuery(t, ctx, cached, db, qs, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 0 {
		t.Fatalf("late_total before the write: %v, want nothing", first)
	}
	// A cached empty answer is an answer: the same query again is a hit.
	if _, err := rangeQuery(t, ctx, cached, db, qs, start, end, step); err != nil {
		t.Fatal(err)
	}
	if h := counter(t, reg, "hits_total"); h != 1 {
		t.Fatalf("hits %v after the repeat, want 1", h)
	}

	// Two samples an hour into the cached range, 60 and 61 minutes in.
	late := t0.Add(time.Hour)
	app := db.AppenderV2(ctx)
	mustAppend(t, app, labels.FromStrings("__name__", "late_total", "model", "a"), late.UnixMilli(), 7)
	mustAppend(t, app, labels.FromStrings("__name__", "late_total", "model", "a"), late.Add(time.Minute).UnixMilli(), 9)
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := rangeQuery(t, ctx, cached, db, qs, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	// Independently: a step at ts sees the latest sample in (ts−5m, ts];
	// steps from 60 to 65 minutes see 7 (60) then 9 (61…66 min − ε).
	want := promql.Matrix{{Metric: labels.FromStrings("model", "a")}}
	for m := 60; m <= 65; m++ {
		v := 9.0
		if m == 60 {
			v = 7
		}
		want[0].Floats = append(want[0].Floats, promql.FPoint{T: t0.Add(time.Duration(m) * time.Minute).UnixMilli(), F: v})
	}
	if err := sameMatrix(got, want); err != nil {
		t.Fatalf("after the late write: %v\ngot %v", err, got)
	}
	if n := counter(t, reg, "invalidations_total"); n != 1 {
		t.Errorf("invalidations %v, want 1", n)
	}
	// The steps before the write stayed cached: this answer was partial.
	if p := counter(t, reg, "partial_hits_total"); p != 1 {
		t.Errorf("partial hits %v, want 1 (steps before the write reused)", p)
	}

	// delete_series inside the range invalidates too.
	if err := db.Delete(ctx, late.UnixMilli(), late.UnixMilli(), labels.MustNewMatcher(labels.MatchEqual, "__name__", "late_total")); err != nil {
		t.Fatal(err)
	}
	got, err = rangeQuery(t, ctx, cached, db, qs, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	want[0].Floats = want[0].Floats[1:] // 7 at 60 min is gone; 9 from 61 min stays
	if err := sameMatrix(got, want); err != nil {
		t.Fatalf("after delete_series: %v\ngot %v", err, got)
	}
}

// TestInvalidationDuringQuery: a write that lands while a query is being
// evaluated must not leave that query's (older) answer cached.
func TestInvalidationDuringQuery(t *testing.T) {
	db := openDB(t)
	ng := newEngine(t)
	c := newCache(ng, nil, nil)
	ctx := context.Background()
	qs := `sum(late_total)`
	start, end, step := t0, t0.Add(time.Hour), time.Minute
	mid := t0.Add(30 * time.Minute)
	// The queryable's Querier is where evaluation reads; the write lands
	// right after the query read its data.
	wrote := false
	q := querierHook{db: db, after: func() {
		if wrote {
			return
		}
		wrote = true
		app := db.AppenderV2(ctx)
		mustAppend(t, app, labels.FromStrings("__name__", "late_total"), mid.UnixMilli(), 1)
		if err := app.Commit(); err != nil {
			t.Error(err)
		}
		c.Invalidate(mid.UnixMilli())
	}}
	first, err := rangeQuery(t, ctx, c.Wrap(ng), q, qs, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 0 {
		t.Fatalf("first answer %v: want empty (read before the write)", first)
	}
	got, err := rangeQuery(t, ctx, c.Wrap(ng), db, qs, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	want, err := rangeQuery(t, ctx, ng, db, qs, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameMatrix(got, want); err != nil || len(want) == 0 {
		t.Fatalf("after a write during the first query: %v (want %d series)", err, len(want))
	}
}

// querierHook runs after once each querier is closed, that is after the
// engine has read what it evaluates.
type querierHook struct {
	db    storage.Queryable
	after func()
}

func (h querierHook) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := h.db.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return hookedQuerier{Querier: q, after: h.after}, nil
}

type hookedQuerier struct {
	storage.Querier
	after func()
}

func (q hookedQuerier) Close() error {
	err := q.Querier.Close()
	q.after()
	return err
}

// TestEvictionBySize fills a small cache and checks that it stays under its
// bound, evicting the least recently used query first.
func TestEvictionBySize(t *testing.T) {
	db := openDB(t)
	ng := newEngine(t)
	reg := prometheus.NewRegistry()
	// One answer of kv_usage (6 series × 121 steps) is about 13 KiB.
	c := newCache(ng, reg, func(o *resultscache.Options) { o.MaxBytes, o.MaxEntryBytes = 40<<10, 20<<10 })
	cached := c.Wrap(ng)
	ctx := context.Background()
	start, end, step := t0, t0.Add(time.Hour), 30*time.Second
	qs := func(i int) string { return `kv_usage + ` + string(rune('0'+i)) }
	for i := 0; i < 3; i++ {
		if _, err := rangeQuery(t, ctx, cached, db, qs(i), start, end, step); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != 3 || counter(t, reg, "evictions_total") != 0 {
		t.Fatalf("after 3 queries: %d entries, %v evictions; want 3, 0 (bytes %d)", c.Len(), counter(t, reg, "evictions_total"), c.Bytes())
	}
	// Use query 0 again, so query 1 is the least recently used.
	if _, err := rangeQuery(t, ctx, cached, db, qs(0), start, end, step); err != nil {
		t.Fatal(err)
	}
	if _, err := rangeQuery(t, ctx, cached, db, qs(3), start, end, step); err != nil {
		t.Fatal(err)
	}
	if c.Bytes() > 40<<10 {
		t.Errorf("bytes %d over the bound %d", c.Bytes(), 40<<10)
	}
	if e := counter(t, reg, "evictions_total"); e != 1 {
		t.Errorf("evictions %v, want 1", e)
	}
	hitsBefore := counter(t, reg, "hits_total")
	for _, i := range []int{0, 2, 3} {
		if _, err := rangeQuery(t, ctx, cached, db, qs(i), start, end, step); err != nil {
			t.Fatal(err)
		}
	}
	if h := counter(t, reg, "hits_total") - hitsBefore; h != 3 {
		t.Errorf("queries 0, 2, 3 after the eviction: %v hits, want 3 (query 1 was the one to go)", h)
	}
	if g := counter(t, reg, "bytes"); int64(g) != c.Bytes() {
		t.Errorf("bytes gauge %v, Bytes() %d", g, c.Bytes())
	}
}

// TestFreshness: steps later than now − MaxFreshness are answered but not
// cached; the next query evaluates them again.
func TestFreshness(t *testing.T) {
	db := openDB(t)
	ng := newEngine(t)
	reg := prometheus.NewRegistry()
	now := t0.Add(time.Hour)
	c := newCache(ng, reg, func(o *resultscache.Options) { o.Now = func() time.Time { return now } })
	cached := c.Wrap(ng)
	ctx := context.Background()
	start, end, step := t0, t0.Add(time.Hour), time.Minute
	for i := 0; i < 2; i++ {
		if _, err := rangeQuery(t, ctx, cached, db, `kv_usage`, start, end, step); err != nil {
			t.Fatal(err)
		}
	}
	// 61 steps; the last 10 minutes (steps 51…60) are fresh.
	if s := counter(t, reg, "steps_served_total"); s != 51 {
		t.Errorf("steps served %v, want 51", s)
	}
	if s := counter(t, reg, "steps_computed_total"); s != 61+10 {
		t.Errorf("steps computed %v, want 71", s)
	}
}

// TestBypass: the context mark, per-step statistics and queries the cache
// must not answer are passed through without reading or filling it.
func TestBypass(t *testing.T) {
	db := openDB(t)
	ng := newEngine(t)
	reg := prometheus.NewRegistry()
	c := newCache(ng, reg, nil)
	cached := c.Wrap(ng)
	start, end, step := t0, t0.Add(time.Hour), time.Minute
	for _, tc := range []struct {
		name string
		ctx  context.Context
		qs   string
	}{
		{"WithBypass", resultscache.WithBypass(context.Background()), `kv_usage`},
		{"@ end()", context.Background(), `kv_usage @ end()`},
		{"@ t", context.Background(), `kv_usage @ 1700000600`},
		{"negative offset", context.Background(), `kv_usage offset -5m`},
		{"subquery @ start()", context.Background(), `max_over_time(kv_usage[5m:1m] @ start())`},
		{"parse error", context.Background(), `sum(`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counter(t, reg, "bypassed_total")
			got, err := rangeQuery(t, tc.ctx, cached, db, tc.qs, start, end, step)
			want, werr := rangeQuery(t, tc.ctx, ng, db, tc.qs, start, end, step)
			if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
				t.Fatalf("error %v, want %v", err, werr)
			}
			if err == nil {
				if err := sameMatrix(got, want); err != nil {
					t.Fatal(err)
				}
			}
			if b := counter(t, reg, "bypassed_total") - before; b != 1 {
				t.Errorf("bypassed %v, want 1", b)
			}
			if c.Len() != 0 {
				t.Errorf("%d entries cached, want none", c.Len())
			}
		})
	}
	// A Bypass option (remote stores in force) passes everything.
	c2 := newCache(ng, nil, func(o *resultscache.Options) { o.Bypass = func() bool { return true } })
	if _, err := rangeQuery(t, context.Background(), c2.Wrap(ng), db, `kv_usage`, start, end, step); err != nil {
		t.Fatal(err)
	}
	if c2.Len() != 0 {
		t.Errorf("with Bypass: %d entries cached, want none", c2.Len())
	}
}

// TestRetentionEmpties: when the storage's oldest sample time moves
// (retention deleted blocks), everything cached is dropped.
func TestRetentionEmpties(t *testing.T) {
	db := openDB(t)
	ng := newEngine(t)
	reg := prometheus.NewRegistry()
	oldest := int64(0)
	c := newCache(ng, reg, func(o *resultscache.Options) {
		o.StartTime = func() (int64, error) { return oldest, nil }
	})
	cached := c.Wrap(ng)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := rangeQuery(t, ctx, cached, db, `kv_usage`, t0, t0.Add(time.Hour), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != 1 || counter(t, reg, "hits_total") != 1 {
		t.Fatalf("%d entries, %v hits; want 1, 1", c.Len(), counter(t, reg, "hits_total"))
	}
	oldest = 1
	if _, err := rangeQuery(t, ctx, cached, db, `kv_usage`, t0, t0.Add(time.Hour), time.Minute); err != nil {
		t.Fatal(err)
	}
	if h := counter(t, reg, "hits_total"); h != 1 {
		t.Errorf("hits %v after the oldest time moved, want still 1", h)
	}
}

func counter(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return testutil.ToFloat64(metric(t, reg, "tailroot_query_results_cache_"+name))
}

// TestRandomLateWrites interleaves range queries through the cache with
// late writes and deletes at random times inside the data (through the
// TSDB, whose listener invalidates), and requires every cached answer to
// equal the uncached engine's at that moment.
func TestRandomLateWrites(t *testing.T) {
	db := openDB(t)
	ng := newEngine(t)
	reg := prometheus.NewRegistry()
	c := newCache(ng, reg, nil)
	db.SetWriteListener(c.Invalidate)
	cached := c.Wrap(ng)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(21, 34))
	qs := []string{`sum by (model) (rate(tokens_total[1m]))`, `max_over_time(kv_usage[2m])`, `sum(late_total)`, `count(kv_usage > 0.5)`}
	step := 30 * time.Second
	for i := 0; i < 120; i++ {
		switch r.IntN(3) {
		case 0: // a late sample, at a random time within the two hours
			app := db.AppenderV2(ctx)
			ts := t0.Add(time.Duration(r.IntN(7200)) * time.Second).UnixMilli()
			mustAppend(t, app, labels.FromStrings("__name__", "kv_usage", "model", "a", "instance", "late"), ts, r.Float64())
			mustAppend(t, app, labels.FromStrings("__name__", "late_total"), ts, float64(i))
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		if i == 60 {
			// A delete of a series' history up to a random time. Only
			// prefixes: a tombstone interval that starts inside a query's
			// range makes the upstream querier panic when the range cuts
			// chunks at both ends (tombstones.Intervals.Add indexes past
			// the end when the trimmed tail is added, prometheus v0.316),
			// with or without the cache.
			maxt := t0.Add(time.Duration(r.IntN(7200)) * time.Second).UnixMilli()
			if err := db.Delete(ctx, math.MinInt64, maxt, labels.MustNewMatcher(labels.MatchEqual, "__name__", "tokens_total"), labels.MustNewMatcher(labels.MatchEqual, "instance", "1")); err != nil {
				t.Fatal(err)
			}
		}
		q := qs[r.IntN(len(qs))]
		start := t0.Add(time.Duration(r.IntN(100)) * step)
		end := start.Add(time.Duration(r.IntN(140)) * step)
		got, err := rangeQuery(t, ctx, cached, db, q, start, end, step)
		if err != nil {
			_, uerr := rangeQuery(t, ctx, ng, db, q, start, end, step)
			t.Fatalf("round %d, %s [%s, %s]: %v (uncached: %v)", i, q, start.Format(time.TimeOnly), end.Format(time.TimeOnly), err, uerr)
		}
		want, err := rangeQuery(t, ctx, ng, db, q, start, end, step)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameMatrix(got, want); err != nil {
			t.Fatalf("round %d, %s [%s, %s]: %v", i, q, start.Format(time.TimeOnly), end.Format(time.TimeOnly), err)
		}
	}
	if h, p := counter(t, reg, "hits_total"), counter(t, reg, "partial_hits_total"); h+p < 20 || counter(t, reg, "invalidations_total") < 10 {
		t.Errorf("%v hits, %v partial, %v invalidations: the test hardly exercised the cache", h, p, counter(t, reg, "invalidations_total"))
	}
}

// TestPieceFailureFallsBack deletes stretches inside the data, which makes
// the upstream querier fail on some ranges (see TestRandomLateWrites): a
// cached query whose missing piece fails must answer exactly as the engine
// answers the whole range — the same data, or the same error. (Where the
// whole range fails with that panic and the pieces do not, the cached
// answer is the data; that case is skipped.)
func TestPieceFailureFallsBack(t *testing.T) {
	db := openDB(t)
	ng := newEngine(t)
	c := newCache(ng, nil, nil)
	db.SetWriteListener(c.Invalidate)
	cached := c.Wrap(ng)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 8))
	step := 30 * time.Second
	q := `sum by (model) (rate(tokens_total[1m]))`
	for i := 0; i < 80; i++ {
		if i%10 == 5 {
			mint := t0.Add(time.Duration(r.IntN(7200)) * time.Second).UnixMilli()
			if err := db.Delete(ctx, mint, mint+300_000, labels.MustNewMatcher(labels.MatchEqual, "__name__", "tokens_total"), labels.MustNewMatcher(labels.MatchEqual, "instance", "1")); err != nil {
				t.Fatal(err)
			}
		}
		start := t0.Add(time.Duration(r.IntN(100)) * step)
		end := start.Add(time.Duration(r.IntN(140)) * step)
		got, err := rangeQuery(t, ctx, cached, db, q, start, end, step)
		want, werr := rangeQuery(t, ctx, ng, db, q, start, end, step)
		if err == nil && werr != nil && strings.Contains(werr.Error(), "index out of range") {
			// The whole range hits the upstream panic while the
			// pieces evaluated did not: the cached answer is the data
			// (steps before the delete are unchanged by it).
			continue
		}
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Fatalf("round %d [%s, %s]: error %v, uncached %v", i, start.Format(time.TimeOnly), end.Format(time.TimeOnly), err, werr)
		}
		if err == nil {
			if err := sameMatrix(got, want); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	}
}
