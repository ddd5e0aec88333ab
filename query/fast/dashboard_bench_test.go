package fast_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/tailroot/tailroot/query"
)

// The shapes of the dashboard measurements in docs/benchmarks.md: "L" is 51 k series over 2 h
// (classic histogram x_bucket by stage and le, a tokens_total counter by
// model, and a native histogram xn_seconds by stage), "S" is 2.6 k series
// over 24 h. Building L takes a while, so by default both are cut to a
// twentieth of their series; TAILROOT_BENCH_FULL=1 builds the full shapes
// (the figures in docs/benchmarks.md).
type benchShape struct {
	name      string
	instances int           // per stage / model
	span      time.Duration // of data
	scrape    time.Duration
	queries   []benchQuery
}

type benchQuery struct {
	name    string
	qs      string
	rng     time.Duration // 0: instant query at the end
	step    time.Duration
	classic bool // reads only float series (the native ones read histograms)
}

var (
	stages = []string{"queue", "tokenize", "prefill", "decode", "detokenize", "network", "other"}
	les    = []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"}
	models = []string{"llama-8b", "llama-70b", "qwen-7b", "qwen-72b", "mistral-7b", "mixtral-8x7b", "gemma-9b", "phi-3"}
)

const (
	qHistogram = `histogram_quantile(0.99, sum by (le, stage) (rate(x_bucket[1m])))`
	qTokens    = `sum by (model) (rate(tokens_total[5m]))`
	qNative    = `histogram_quantile(0.99, sum by (stage) (rate(xn_seconds[1m])))`
)

func shapes() []benchShape {
	full := os.Getenv("TAILROOT_BENCH_FULL") == "1"
	l := benchShape{name: "L", instances: 600, span: 2 * time.Hour, scrape: 15 * time.Second, queries: []benchQuery{
		{"histogram_range_1h_15s", qHistogram, time.Hour, 15 * time.Second, true},
		{"tokens_range_1h_15s", qTokens, time.Hour, 15 * time.Second, true},
		{"native_range_1h_15s", qNative, time.Hour, 15 * time.Second, false},
		{"histogram_instant", qHistogram, 0, 0, true},
		{"tokens_instant", qTokens, 0, 0, true},
	}}
	s := benchShape{name: "S", instances: 30, span: 24 * time.Hour, scrape: 15 * time.Second, queries: []benchQuery{
		{"histogram_range_24h_5m", qHistogram, 24 * time.Hour, 5 * time.Minute, true},
		{"tokens_range_24h_5m", qTokens, 24 * time.Hour, 5 * time.Minute, true},
		{"native_range_24h_5m", qNative, 24 * time.Hour, 5 * time.Minute, false},
		{"histogram_instant", qHistogram, 0, 0, true},
	}}
	if !full {
		l.instances /= 20
		s.instances = 3
	}
	return []benchShape{l, s}
}

var benchStart = time.Unix(1_760_000_000, 0)

// seriesCount is the number of series a shape writes.
func (s benchShape) seriesCount() int {
	return s.instances * (len(stages)*len(les) + len(models) + len(stages))
}

// buildBenchDB writes the shape: bucket counters that grow by random
// observations, counters with a reset per hour for a few instances, and
// native histograms with the same observations.
func buildBenchDB(b *testing.B, s benchShape) *tsdb.DB {
	b.Helper()
	o := tsdb.DefaultOptions()
	db, err := tsdb.Open(b.TempDir(), nil, nil, o, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	r := rand.New(rand.NewPCG(15, 51))
	type bucketSet struct {
		ls    []labels.Labels
		cum   []float64
		nativ labels.Labels
		h     *histogram.Histogram
		ref   []storage.SeriesRef
		nref  storage.SeriesRef
		abs   []float64 // native bucket counts, cumulative over time
	}
	var sets []*bucketSet
	for inst := 0; inst < s.instances; inst++ {
		in := fmt.Sprintf("10.%d.%d.%d:8000", inst/65536, inst/256%256, inst%256)
		for _, st := range stages {
			bs := &bucketSet{cum: make([]float64, len(les)), ref: make([]storage.SeriesRef, len(les)), abs: make([]float64, 48)}
			for _, le := range les {
				bs.ls = append(bs.ls, labels.FromStrings("__name__", "x_bucket", "instance", in, "stage", st, "le", le))
			}
			bs.nativ = labels.FromStrings("__name__", "xn_seconds", "instance", in, "stage", st)
			bs.h = &histogram.Histogram{Schema: 3, ZeroThreshold: 1e-4, PositiveSpans: []histogram.Span{{Offset: -40, Length: 48}}, PositiveBuckets: make([]int64, 48)}
			sets = append(sets, bs)
		}
	}
	type counter struct {
		ls  labels.Labels
		v   float64
		ref storage.SeriesRef
	}
	var counters []*counter
	for inst := 0; inst < s.instances; inst++ {
		for _, m := range models {
			counters = append(counters, &counter{ls: labels.FromStrings("__name__", "tokens_total", "instance", fmt.Sprint(inst), "model", m)})
		}
	}
	end := benchStart.Add(s.span)
	scrape := s.scrape.Milliseconds()
	for ts := benchStart.UnixMilli(); ts <= end.UnixMilli(); ts += scrape {
		app := db.AppenderV2(context.Background())
		for _, bs := range sets {
			obs := r.IntN(20)
			for range obs {
				// A log-normal latency: its bucket index among les.
				v := r.ExpFloat64() * 0.3
				for i := range les {
					if i == len(les)-1 || v <= leValue(i) {
						for j := i; j < len(les); j++ {
							bs.cum[j]++
						}
						break
					}
				}
				bi := min(47, max(0, int(v*40)))
				bs.abs[bi]++
				bs.h.Count++
				bs.h.Sum += v
			}
			for i := range bs.ls {
				bs.ref[i], err = app.Append(bs.ref[i], bs.ls[i], 0, ts, bs.cum[i], nil, nil, storage.AOptions{})
				if err != nil {
					b.Fatal(err)
				}
			}
			prev := int64(0)
			for i := range bs.h.PositiveBuckets {
				bs.h.PositiveBuckets[i] = int64(bs.abs[i]) - prev
				prev = int64(bs.abs[i])
			}
			bs.nref, err = app.Append(bs.nref, bs.nativ, 0, ts, 0, bs.h.Copy(), nil, storage.AOptions{})
			if err != nil {
				b.Fatal(err)
			}
		}
		for i, c := range counters {
			c.v += float64(r.IntN(4000))
			if i%97 == 0 && (ts/scrape)%240 == 0 {
				c.v = 0
			}
			c.ref, err = app.Append(c.ref, c.ls, 0, ts, c.v, nil, nil, storage.AOptions{})
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	// Persist what a server would have persisted by now (the 24 h shape
	// becomes 2 h blocks plus a head, whose full chunks are in the head
	// chunk files, as the server writes them within seconds), and keep
	// background compaction from running during the measurements.
	if err := db.Compact(context.Background()); err != nil {
		b.Fatal(err)
	}
	db.ForceHeadMMap()
	db.DisableCompactions()
	return db
}

var leValues = func() []float64 {
	out := make([]float64, len(les))
	for i, le := range les {
		out[i], _ = strconv.ParseFloat(le, 64)
	}
	return out
}()

func leValue(i int) float64 { return leValues[i] }

var benchSink atomic.Int64

// BenchmarkDashboard runs each dashboard query on the fast path and on the
// upstream engine, in the same run over the same TSDB, and reports the
// peak heap in use while the query runs.
func BenchmarkDashboard(b *testing.B) {
	for _, s := range shapes() {
		b.Run(fmt.Sprintf("shape=%s/series=%d", s.name, s.seriesCount()), func(b *testing.B) {
			db := buildBenchDB(b, s)
			end := benchStart.Add(s.span)
			for _, q := range s.queries {
				checkSameAnswer(b, db, q, end)
				for _, eng := range []string{query.EngineFast, query.EngineUpstream} {
					b.Run(q.name+"/engine="+eng, func(b *testing.B) {
						opts := query.DefaultOptions()
						opts.Engine = eng
						ng, err := query.New(opts, nil, nil, nil)
						if err != nil {
							b.Fatal(err)
						}
						defer ng.Close()
						run := func() {
							var (
								qry promql.Query
								err error
							)
							if q.rng == 0 {
								qry, err = ng.NewInstantQuery(context.Background(), db, nil, q.qs, end)
							} else {
								qry, err = ng.NewRangeQuery(context.Background(), db, nil, q.qs, end.Add(-q.rng), end, q.step)
							}
							if err != nil {
								b.Fatal(err)
							}
							res := qry.Exec(context.Background())
							if res.Err != nil {
								b.Fatal(res.Err)
							}
							switch v := res.Value.(type) {
							case promql.Matrix:
								benchSink.Add(int64(len(v)))
							case promql.Vector:
								benchSink.Add(int64(len(v)))
							}
							qry.Close()
						}
						run() // warm the head's caches for both engines alike
						runtime.GC()
						peak := watchHeap()
						cpu0 := cpuTime()
						b.ReportAllocs()
						b.ResetTimer()
						for b.Loop() {
							run()
						}
						b.StopTimer()
						b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MB")
						// CPU seconds of the process per query: on a shared
						// machine wall time also counts waiting for a core.
						b.ReportMetric((cpuTime()-cpu0).Seconds()*1000/float64(b.N), "cpu-ms/op")
					})
				}
			}
		})
	}
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkSameAnswer fails the benchmark unless both engines return the same
// result, bitwise, over the benchmark's data (blocks and head for the 24 h
// shape): speed is only worth measuring for the same answers.
func checkSameAnswer(b *testing.B, db *tsdb.DB, q benchQuery, end time.Time) {
	b.Helper()
	var vals []parser.Value
	for _, eng := range []string{query.EngineFast, query.EngineUpstream} {
		opts := query.DefaultOptions()
		opts.Engine = eng
		ng, err := query.New(opts, nil, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		var qry promql.Query
		if q.rng == 0 {
			qry, err = ng.NewInstantQuery(context.Background(), db, nil, q.qs, end)
		} else {
			qry, err = ng.NewRangeQuery(context.Background(), db, nil, q.qs, end.Add(-q.rng), end, q.step)
		}
		if err != nil {
			b.Fatal(err)
		}
		res := qry.Exec(context.Background())
		if res.Err != nil {
			b.Fatal(res.Err)
		}
		vals = append(vals, res.Value)
		_ = ng.Close()
	}
	if d := diffValues(vals[1], vals[0], true); d != "" {
		b.Fatalf("%s: fast and upstream answers differ: %s", q.name, d)
	}
}

// watchHeap samples the bytes of live and not yet swept heap objects
// every 10 ms (runtime/metrics, which does not stop the world) until
// the returned function is called, which returns the peak seen.
func watchHeap() func() uint64 {
	var (
		peak   atomic.Uint64
		stop   = make(chan struct{})
		done   = make(chan struct{})
		sample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	)
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		return peak.Load()
	}
}
