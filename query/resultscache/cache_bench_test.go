package resultscache_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/tailroot/tailroot/query/resultscache"
	"github.com/tailroot/tailroot/tsdb"
)

// benchDB holds 6 h at 15 s of a dashboard's data: 8 models × 20
// instances × a classic histogram of 8 buckets plus a counter (1,440
// series, 2.1 M samples).
func benchDB(b *testing.B) *tsdb.DB {
	b.Helper()
	o := tsdb.DefaultOptions()
	o.Dir = b.TempDir()
	o.NoLockfile = true
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	r := rand.New(rand.NewPCG(9, 9))
	les := []string{"0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "+Inf"}
	type key struct{ m, i, le int }
	cum := map[key]float64{}
	for step := 0; step < 1440; step++ {
		app := db.AppenderV2(context.Background())
		ts := t0.Add(time.Duration(step) * scrape).UnixMilli()
		for m := 0; m < 8; m++ {
			for i := 0; i < 20; i++ {
				model, inst := "m"+strconv.Itoa(m), "i"+strconv.Itoa(i)
				var c float64
				for l, le := range les {
					c += float64(r.IntN(4))
					cum[key{m, i, l}] += c
					mustAppend(b, app, labels.FromStrings("__name__", "ttft_bucket", "model", model, "instance", inst, "le", le), ts, cum[key{m, i, l}])
				}
				cum[key{m, i, -1}] += float64(r.IntN(100))
				mustAppend(b, app, labels.FromStrings("__name__", "tokens_total", "model", model, "instance", inst), ts, cum[key{m, i, -1}])
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// BenchmarkDashboardRefresh is a dashboard panel refreshed every minute:
// a 3 h range at 60 s whose window moves one step per refresh, with the
// clock at the window's end (so the last 10 minutes are always
// evaluated, as in production). "uncached" is the engine alone; "cached"
// reuses the steps earlier refreshes computed; "history" is a fixed range
// older than the freshness window viewed again (a full hit).
func BenchmarkDashboardRefresh(b *testing.B) {
	db := benchDB(b)
	ng := newEngine(b)
	ctx := context.Background()
	for _, qs := range []struct{ name, q string }{
		{"p99", `histogram_quantile(0.99, sum by (le, model) (rate(ttft_bucket[1m])))`},
		{"rate_sum", `sum by (model) (rate(tokens_total[5m]))`},
	} {
		step := time.Minute
		window := 3 * time.Hour
		run := func(b *testing.B, eng func(now *time.Time) promql.QueryEngine, slide bool) {
			now := t0.Add(window)
			e := eng(&now)
			// One evaluation before timing: the cache holds what an
			// earlier refresh left, the engine's pools are warm.
			if !slide {
				now = now.Add(time.Hour)
			}
			if _, err := rangeQuery(b, ctx, e, db, qs.q, t0, t0.Add(window), step); err != nil {
				b.Fatal(err)
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				end := t0.Add(window)
				if slide {
					end = end.Add(time.Duration(i%150) * step)
					i++
				}
				now = end
				if !slide {
					now = end.Add(time.Hour)
				}
				m, err := rangeQuery(b, ctx, e, db, qs.q, end.Add(-window), end, step)
				if err != nil || len(m) != 8 {
					b.Fatalf("%d series, %v", len(m), err)
				}
			}
		}
		plain := func(*time.Time) promql.QueryEngine { return ng }
		withCache := func(now *time.Time) promql.QueryEngine {
			o := resultscache.DefaultOptions()
			o.Parser = ng.Parser()
			o.Now = func() time.Time { return *now }
			return resultscache.New(o).Wrap(ng)
		}
		b.Run(qs.name+"/uncached", func(b *testing.B) { run(b, plain, true) })
		b.Run(qs.name+"/cached", func(b *testing.B) { run(b, withCache, true) })
		b.Run(qs.name+"/history", func(b *testing.B) { run(b, withCache, false) })
	}
}
