package resultscache_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/resultscache"
	"github.com/tailroot/tailroot/tsdb"
)

// t0 is the first sample time of the generated data (far in the past, so
// nothing is within the freshness window unless a test sets the clock).
var t0 = time.Unix(1_700_000_000, 0)

const scrape = 15 * time.Second

// openDB returns a TSDB with two hours of counters, gauges, classic and
// native histograms, accepting out-of-order writes for the late-write tests.
func openDB(t testing.TB) *tsdb.DB {
	t.Helper()
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.OutOfOrderWindow = 24 * time.Hour
	o.NoLockfile = true
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	r := rand.New(rand.NewPCG(3, 5))
	app := db.AppenderV2(context.Background())
	les := []string{"0.05", "0.1", "0.5", "1", "+Inf"}
	counters := map[string]float64{}
	for step := 0; step < 480; step++ {
		ts := t0.Add(time.Duration(step) * scrape).UnixMilli()
		for _, model := range []string{"a", "b"} {
			for _, inst := range []string{"1", "2", "3"} {
				if step > 200 && step < 230 && inst == "3" {
					continue // a gap: series absent for a while
				}
				ls := labels.FromStrings("__name__", "tokens_total", "model", model, "instance", inst)
				counters[model+inst] += float64(r.IntN(50))
				if step == 300 && inst == "2" {
					counters[model+inst] = 1 // a reset
				}
				mustAppend(t, app, ls, ts, counters[model+inst])
				mustAppend(t, app, labels.FromStrings("__name__", "kv_usage", "model", model, "instance", inst), ts, r.Float64())
				var cum float64
				for _, le := range les {
					key := model + inst + le
					cum += float64(r.IntN(5))
					counters[key] += cum
					mustAppend(t, app, labels.FromStrings("__name__", "ttft_bucket", "model", model, "instance", inst, "le", le), ts, counters[key])
				}
				h := tsdbutil.GenerateTestHistogram(int64(step + r.IntN(3)))
				if _, err := app.Append(0, labels.FromStrings("__name__", "itl", "model", model, "instance", inst), 0, ts, 0, h, nil, storage.AOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return db
}

func mustAppend(t testing.TB, app storage.AppenderV2, ls labels.Labels, ts int64, v float64) {
	t.Helper()
	if _, err := app.Append(0, ls, 0, ts, v, nil, nil, storage.AOptions{}); err != nil {
		t.Fatal(err)
	}
}

func newEngine(t testing.TB) *query.Engine {
	t.Helper()
	ng, err := query.New(query.DefaultOptions(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	return ng
}

func newCache(ng *query.Engine, reg prometheus.Registerer, mod func(*resultscache.Options)) *resultscache.Cache {
	o := resultscache.DefaultOptions()
	o.Parser = ng.Parser()
	o.Registerer = reg
	if mod != nil {
		mod(&o)
	}
	return resultscache.New(o)
}

// rangeQuery evaluates qs over [start, end] with ng and returns its matrix
// (deep-copied, so the query can be closed) or the error.
func rangeQuery(t testing.TB, ctx context.Context, ng promql.QueryEngine, q storage.Queryable, qs string, start, end time.Time, step time.Duration) (promql.Matrix, error) {
	t.Helper()
	qry, err := ng.NewRangeQuery(ctx, q, nil, qs, start, end, step)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	m, ok := res.Value.(promql.Matrix)
	if !ok {
		t.Fatalf("%s: %T, want a matrix", qs, res.Value)
	}
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		out[i] = promql.Series{Metric: s.Metric, Floats: append([]promql.FPoint(nil), s.Floats...)}
		for _, p := range s.Histograms {
			out[i].Histograms = append(out[i].Histograms, promql.HPoint{T: p.T, H: p.H.Copy()})
		}
	}
	return out, nil
}

// sameMatrix reports the first difference between two answers, comparing
// floats bit for bit (NaN payloads and −0 included).
func sameMatrix(a, b promql.Matrix) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d series, want %d", len(a), len(b))
	}
	for i := range a {
		if !labels.Equal(a[i].Metric, b[i].Metric) {
			return fmt.Errorf("series %d is %s, want %s", i, a[i].Metric, b[i].Metric)
		}
		if len(a[i].Floats) != len(b[i].Floats) || len(a[i].Histograms) != len(b[i].Histograms) {
			return fmt.Errorf("%s: %d floats %d histograms, want %d %d", a[i].Metric, len(a[i].Floats), len(a[i].Histograms), len(b[i].Floats), len(b[i].Histograms))
		}
		for j, p := range a[i].Floats {
			w := b[i].Floats[j]
			if p.T != w.T || math.Float64bits(p.F) != math.Float64bits(w.F) {
				return fmt.Errorf("%s point %d: %v, want %v", a[i].Metric, j, p, w)
			}
		}
		for j, p := range a[i].Histograms {
			w := b[i].Histograms[j]
			if p.T != w.T || !p.H.Equals(w.H) {
				return fmt.Errorf("%s histogram %d at %d: %v, want %v at %d", a[i].Metric, j, p.T, p.H, w.H, w.T)
			}
		}
	}
	return nil
}

var dashboardQueries = []string{
	`sum by (model) (rate(tokens_total[1m]))`,
	`histogram_quantile(0.99, sum by (le, model) (rate(ttft_bucket[2m])))`,
	`histogram_quantile(0.9, sum by (model) (rate(itl[5m])))`,
	`sum by (model) (rate(itl[5m]))`,
	`kv_usage`,
	`avg_over_time(kv_usage[3m] offset 2m)`,
	`max_over_time(rate(tokens_total[1m])[10m:30s])`,
	`topk(2, kv_usage)`,
	`count_values("v", floor(kv_usage * 3))`,
	`absent(tokens_total{instance="3"})`,
	`time() - timestamp(kv_usage)`,
	`scalar(sum(kv_usage)) * 2`,
	`increase(tokens_total{instance="2"}[5m]) > 100`,
	`1`,
	`nothing_here`,
}

// TestSplitMergeExact answers overlapping ranges of each query through the
// cache — a miss, then ranges that reuse cached extents on either side and
// in the middle — and requires each answer to equal the uncached engine's
// bit for bit.
func TestSplitMergeExact(t *testing.T) {
	db := openDB(t)
	ng := newEngine(t)
	reg := prometheus.NewRegistry()
	c := newCache(ng, reg, nil)
	cached := c.Wrap(ng)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 1))
	for _, qs := range dashboardQueries {
		for _, step := range []time.Duration{15 * time.Second, 60 * time.Second, 97 * time.Second} {
			// Ranges on one step grid, in an order that leaves cached
			// extents before, after and inside later queries.
			base := t0.Add(time.Duration(r.IntN(60)) * time.Second)
			for i, span := range [][2]int{{20, 40}, {0, 30}, {35, 60}, {10, 50}, {5, 70}, {30, 31}, {0, 80}} {
				start := base.Add(time.Duration(span[0]) * step)
				end := base.Add(time.Duration(span[1])*step + time.Duration(r.IntN(int(step/time.Second)))*time.Second)
				got, err := rangeQuery(t, ctx, cached, db, qs, start, end, step)
				if err != nil {
					t.Fatalf("%s step %s range %d: %v", qs, step, i, err)
				}
				want, err := rangeQuery(t, ctx, ng, db, qs, start, end, step)
				if err != nil {
					t.Fatal(err)
				}
				if err := sameMatrix(got, want); err != nil {
					t.Errorf("%s step %s range %v: %v", qs, step, span, err)
				}
			}
		}
	}
	hits := testutil.ToFloat64(metric(t, reg, "tailroot_query_results_cache_hits_total"))
	partial := testutil.ToFloat64(metric(t, reg, "tailroot_query_results_cache_partial_hits_total"))
	if hits == 0 || partial == 0 {
		t.Errorf("hits %v, partial hits %v: want both > 0 (the test did not exercise the cache)", hits, partial)
	}
	t.Logf("hits %v, partial %v, bytes %d, entries %d", hits, partial, c.Bytes(), c.Len())
}

// metric finds a registered collector's single metric by name.
func metric(t testing.TB, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			v := mf.GetMetric()[0]
			var f float64
			switch {
			case v.Counter != nil:
				f = v.Counter.GetValue()
			case v.Gauge != nil:
				f = v.Gauge.GetValue()
			}
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return f })
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}
