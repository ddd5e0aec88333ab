package fast_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/tailroot/tailroot/query/fast"
)

// openNativeEdgeDB writes 3 h of native histograms at 30 s at the edges
// of what a rate or a sum meets, one kind per series (the job label):
//   - "float": float histograms with fractional counts;
//   - "gauge": integer histograms with the gauge hint;
//   - "schema": a schema that changes every 20 samples (3, 0, 2, -1);
//   - "zt": a zero threshold that changes every 15 samples;
//   - "nhcb": custom buckets whose bounds change every 25 samples;
//   - "bucketreset": one bucket drops while the count still grows (a reset
//     only the buckets show);
//   - "mixed": floats and histograms in turn, a block of each;
//   - "empty": histograms with no observations, then a few;
//   - "big": counts near 1e15 with a sum of ±Inf or NaN now and then;
//   - "stale": stale markers on step times, and series that start and
//     stop inside the range.
//
// blocks persists two hours into three blocks, leaving the rest in the
// head.
func openNativeEdgeDB(t testing.TB, seed uint64, blocks bool) *tsdb.DB {
	t.Helper()
	db, err := tsdb.Open(t.TempDir(), nil, nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	r := rand.New(rand.NewPCG(seed, 41))
	base := diffStart.UnixMilli()
	const n = 360 // 3 h at 30 s
	kinds := []string{"float", "gauge", "schema", "zt", "nhcb", "bucketreset", "mixed", "empty", "big", "stale"}
	type state struct {
		abs  [5]uint64
		zero uint64
		sum  float64
	}
	states := make([]state, len(kinds)*2)
	app := db.AppenderV2(context.Background())
	add := func(ls labels.Labels, ts int64, f float64, h *histogram.Histogram, fh *histogram.FloatHistogram) {
		if _, err := app.Append(0, ls, 0, ts, f, h, fh, storage.AOptions{}); err != nil {
			t.Fatalf("append %s @%d: %v", ls, ts, err)
		}
	}
	for i := 0; i < n; i++ {
		ts := base + int64(i)*30_000
		for k, kind := range kinds {
			for inst := 0; inst < 2; inst++ {
				s := &states[k*2+inst]
				ls := labels.FromStrings("__name__", "edge_native_seconds", "job", kind, "instance", fmt.Sprint(inst))
				if kind == "stale" {
					from, to := 20+inst*60, 300-inst*90
					if i < from || i >= to {
						continue
					}
					if i%13 == 0 {
						add(ls, ts, 0, &histogram.Histogram{Sum: math.Float64frombits(value.StaleNaN)}, nil)
						continue
					}
				}
				if kind == "mixed" && (i/30)%2 == 1 {
					add(ls, ts, float64(i), nil, nil)
					continue
				}
				for b := range s.abs {
					s.abs[b] += uint64(r.IntN(4))
				}
				s.zero += uint64(r.IntN(2))
				s.sum += r.Float64() * 3
				h := &histogram.Histogram{Schema: 1, ZeroThreshold: 1e-3}
				switch kind {
				case "gauge":
					h.CounterResetHint = histogram.GaugeType
					for b := range s.abs {
						s.abs[b] = uint64(r.IntN(10))
					}
				case "schema":
					h.Schema = []int32{3, 0, 2, -1}[(i/20)%4]
				case "zt":
					h.ZeroThreshold = []float64{1e-3, 0.01, 1e-4}[(i/15)%3]
				case "nhcb":
					h.Schema = histogram.CustomBucketsSchema
					h.ZeroThreshold = 0
					h.CustomValues = [][]float64{{0.1, 0.5, 1, 5}, {0.1, 1, 5, 10}, {0.5, 1, 2, 5}}[(i/25)%3]
				case "bucketreset":
					if i%17 == 5 {
						s.abs[1] = 0
						s.abs[4] += 40
					}
				case "empty":
					if i < 100 || i%7 != 0 {
						s.abs, s.zero, s.sum = [5]uint64{}, 0, 0
					}
				case "big":
					for b := range s.abs {
						s.abs[b] += 1e14
					}
				}
				if kind == "nhcb" {
					s.zero = 0
				}
				h.ZeroCount = s.zero
				h.PositiveSpans = []histogram.Span{{Offset: -1, Length: 3}, {Offset: 1, Length: 2}}
				h.PositiveBuckets = make([]int64, len(s.abs))
				h.Count = s.zero
				var prev int64
				for b, v := range s.abs {
					h.PositiveBuckets[b] = int64(v) - prev
					prev = int64(v)
					h.Count += v
				}
				h.Sum = s.sum
				if kind == "nhcb" {
					h.PositiveSpans = []histogram.Span{{Offset: 0, Length: 5}}
				}
				if kind == "big" && i%23 == 0 {
					h.Sum = []float64{math.Inf(1), math.Inf(-1), math.NaN()}[r.IntN(3)]
				}
				if kind == "float" {
					fh := h.ToFloat(nil)
					for b := range fh.PositiveBuckets {
						fh.PositiveBuckets[b] += 0.25 * float64(i)
						fh.Count += 0.25 * float64(i)
					}
					add(ls, ts, 0, nil, fh)
					continue
				}
				add(ls, ts, 0, h, nil)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if blocks {
		at := func(d time.Duration) int64 { return diffStart.Add(d).UnixMilli() }
		for _, c := range [][2]time.Duration{{0, 40 * time.Minute}, {40 * time.Minute, 80 * time.Minute}, {80 * time.Minute, 2 * time.Hour}} {
			if err := db.CompactHead(tsdb.NewRangeHead(db.Head(), at(c[0]), at(c[1])-1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return db
}

// genNativeEdgeQuery builds the native histogram shapes Compile takes over
// openNativeEdgeDB's series.
func genNativeEdgeQuery(r *rand.Rand) string {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	m := pick("edge_native_seconds", `edge_native_seconds{job="float"}`, `edge_native_seconds{job="gauge"}`,
		`edge_native_seconds{job="schema"}`, `edge_native_seconds{job="zt"}`, `edge_native_seconds{job="nhcb"}`,
		`edge_native_seconds{job="bucketreset"}`, `edge_native_seconds{job="mixed"}`, `edge_native_seconds{job="empty"}`,
		`edge_native_seconds{job="big"}`, `edge_native_seconds{job="stale"}`, `edge_native_seconds{job=~"schema|zt"}`,
		`edge_native_seconds{job=~"nhcb|bucketreset"}`)
	rng := pick("30s", "31s", "1m", "90s", "5m", "10m", "1h")
	in := fmt.Sprintf("%s(%s[%s])", pick("rate", "increase"), m, rng)
	q := pick("0.5", "0.9", "0.99", "0", "1", "NaN", "-1", "2")
	return pick(
		"histogram_quantile("+q+", sum("+in+"))",
		"histogram_quantile("+q+", sum by (job) ("+in+"))",
		"histogram_quantile("+q+", "+in+")",
		"sum("+in+")", "sum by (job) ("+in+")", "sum without (instance) ("+in+")", "sum by (instance) ("+in+")",
		"count by (job) ("+in+")", "sum(sum by (job) ("+in+"))", in,
		"histogram_count("+in+")", "histogram_sum(sum by (job) ("+in+"))", "histogram_avg("+in+")",
		"histogram_quantile("+q+", sum by (job) ("+in+")) * 1000", "histogram_count(sum by (job) ("+in+")) > 0.5",
		"histogram_count("+in+") > bool 1", "sum("+in+") / 2",
	)
}

// TestDifferentialNativeEdges is the differential over openNativeEdgeDB,
// in the head and over blocks, with edgeRange's query ranges.
func TestDifferentialNativeEdges(t *testing.T) {
	for _, blocks := range []bool{false, true} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("blocks=%v/seed=%d", blocks, seed), func(t *testing.T) {
				db := openNativeEdgeDB(t, seed, blocks)
				runEdgeDifferential(t, db, seed, 100, 5*time.Minute, nil, genNativeEdgeQuery, 30)
			})
		}
	}
}

// TestStatsGaugeHandedBack: under histogram_count, histogram_sum and
// histogram_avg upstream reads histograms without their buckets and finds
// the resets between gauge histograms from their counts alone, so the fast
// path hands those back; with the buckets needed (histogram_quantile, or
// == comparing the counts) it answers as upstream does.
func TestStatsGaugeHandedBack(t *testing.T) {
	db := openNativeEdgeDB(t, 1, false)
	ts := diffStart.Add(88 * time.Minute)
	ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	for _, c := range []struct {
		qs       string
		handBack bool
	}{
		{`histogram_count(rate(edge_native_seconds{job="gauge"}[5m]))`, true},
		{`histogram_sum(sum by (job) (increase(edge_native_seconds{job="gauge"}[10m])))`, true},
		{`histogram_avg(rate(edge_native_seconds{job="gauge"}[5m])) * 2`, true},
		{`histogram_count(rate(edge_native_seconds{job="gauge"}[5m])) == 3`, false},
		{`histogram_quantile(0.5, rate(edge_native_seconds{job="gauge"}[5m]))`, false},
		{`histogram_count(rate(edge_native_seconds{job="bucketreset"}[5m]))`, false},
	} {
		plan := mustCompile(t, c.qs)
		for _, q := range []storage.Queryable{db, samplesQueryable{db}} {
			got, _, err := plan.Instant(context.Background(), q, fast.DefaultOptions(), ts)
			if c.handBack {
				if !errors.Is(err, fast.ErrFallback) {
					t.Errorf("%s: %v, want ErrFallback", c.qs, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", c.qs, err)
			}
			qry, err := ng.NewInstantQuery(context.Background(), db, nil, c.qs, ts)
			if err != nil {
				t.Fatal(err)
			}
			res := qry.Exec(context.Background())
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if d := diffValues(res.Value, got, true); d != "" {
				t.Errorf("%s:\n%s", c.qs, d)
			}
		}
	}
}
