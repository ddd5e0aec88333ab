package fast_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/query/fast"
)

// diffStart is the first sample time of the generated data.
var diffStart = time.Unix(1_750_000_000, 0)

// openDiffDB writes 2 h of random series: counters with resets, gaps and
// stale markers, gauges with NaN, classic histogram buckets (with a bad le
// and non-monotonic buckets now and then) and native histograms.
func openDiffDB(t testing.TB, seed uint64) *tsdb.DB {
	t.Helper()
	return openDiffDBWith(t, seed, 0, nil)
}

// openDiffDBWith is openDiffDB with an out-of-order window of ooo ms and,
// where extra is not nil, the samples extra adds at each 5 s tick.
func openDiffDBWith(t testing.TB, seed uint64, ooo int64, extra func(ts int64, add func(labels.Labels, int64, float64, *histogram.Histogram))) *tsdb.DB {
	t.Helper()
	o := tsdb.DefaultOptions()
	o.OutOfOrderTimeWindow = ooo
	db, err := tsdb.Open(t.TempDir(), nil, nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	r := rand.New(rand.NewPCG(seed, 7))
	app := db.AppenderV2(context.Background())
	add := func(ls labels.Labels, ts int64, v float64, h *histogram.Histogram) {
		if _, err := app.Append(0, ls, 0, ts, v, h, nil, storage.AOptions{}); err != nil {
			t.Fatalf("append %s: %v", ls, err)
		}
	}
	jobs := []string{"api", "db", "gpu"}
	les := []string{"0.005", "0.01", "0.1", "0.25", "1", "2.5", "10", "+Inf"}
	type series struct {
		ls       labels.Labels
		v        float64
		interval int64 // ms between samples
		jitter   int64
		gapFrom  int64
		gapTo    int64
		staleAt  int64
		kind     int // 0 counter, 1 gauge, 2 bucket
		le       int
		inst     int
		job      int
	}
	var all []*series
	end := diffStart.Add(2 * time.Hour).UnixMilli()
	for j, job := range jobs {
		for inst := 0; inst < 4; inst++ {
			base := func(kind int) *series {
				s := &series{kind: kind, inst: inst, job: j}
				s.interval = []int64{10_000, 15_000, 30_000, 60_000}[r.IntN(4)]
				s.jitter = []int64{0, 0, 1500, 4000}[r.IntN(4)]
				if r.IntN(3) == 0 {
					s.gapFrom = diffStart.UnixMilli() + r.Int64N(7_200_000)
					s.gapTo = s.gapFrom + r.Int64N(1_200_000)
				}
				if r.IntN(4) == 0 {
					s.staleAt = diffStart.UnixMilli() + r.Int64N(7_200_000)
				}
				return s
			}
			in := fmt.Sprintf("10.0.0.%d:9000", inst)
			for _, code := range []string{"200", "500"} {
				s := base(0)
				s.ls = labels.FromStrings("__name__", "req_total", "job", job, "instance", in, "code", code)
				all = append(all, s)
			}
			g := base(1)
			g.ls = labels.FromStrings("__name__", "queue_depth", "job", job, "instance", in)
			all = append(all, g)
			for li, le := range les {
				s := base(2)
				s.interval, s.jitter, s.gapFrom, s.gapTo, s.staleAt = 15_000, 0, 0, 0, 0
				s.le = li
				s.ls = labels.FromStrings("__name__", "lat_seconds_bucket", "job", job, "instance", in, "le", le)
				all = append(all, s)
			}
			if inst == 0 {
				s := base(2)
				s.interval, s.jitter, s.gapFrom, s.gapTo, s.staleAt = 15_000, 0, 0, 0, 0
				s.le = -1
				s.ls = labels.FromStrings("__name__", "lat_seconds_bucket", "job", job, "instance", in, "le", "bogus")
				all = append(all, s)
			}
		}
	}
	// Buckets of one instance share their increments so they stay
	// cumulative, except where a deliberate dip forces monotonicity.
	bucketInc := map[string]float64{}
	for ts := diffStart.UnixMilli(); ts <= end; ts += 5_000 {
		for k := range bucketInc {
			delete(bucketInc, k)
		}
		for _, s := range all {
			due := (ts-diffStart.UnixMilli())%s.interval == 0
			if !due {
				continue
			}
			at := ts
			if s.jitter > 0 {
				at += r.Int64N(s.jitter)
			}
			if s.gapFrom != 0 && at >= s.gapFrom && at < s.gapTo {
				continue
			}
			if s.staleAt != 0 && at >= s.staleAt && at < s.staleAt+s.interval {
				add(s.ls, at, math.Float64frombits(value.StaleNaN), nil)
				continue
			}
			switch s.kind {
			case 0:
				s.v += float64(r.IntN(50)) + r.Float64()
				if r.IntN(60) == 0 {
					s.v = float64(r.IntN(5))
				}
			case 1:
				s.v = r.NormFloat64() * 100
				if r.IntN(80) == 0 {
					s.v = math.NaN()
				}
			case 2:
				key := fmt.Sprint(s.job, s.inst)
				if s.le == 0 {
					bucketInc[key] = 0
				}
				bucketInc[key] += float64(r.IntN(4))
				inc := bucketInc[key]
				if r.IntN(200) == 0 {
					inc = 0 // a dip: the bucket lags those below it
				}
				s.v += inc
			}
			add(s.ls, at, s.v, nil)
		}
		if extra != nil {
			extra(ts, add)
		}
		if (ts-diffStart.UnixMilli())%15_000 == 0 {
			step := (ts - diffStart.UnixMilli()) / 15_000
			for j, job := range jobs {
				h := &histogram.Histogram{
					Schema: 1, ZeroThreshold: 1e-3, ZeroCount: uint64(step),
					PositiveSpans:   []histogram.Span{{Offset: -2, Length: 3}},
					PositiveBuckets: []int64{step + 1, int64(j), -1},
				}
				h.Count = h.ZeroCount + uint64(step+1) + uint64(step+1+int64(j)) + uint64(step+int64(j))
				h.Sum = float64(h.Count) * 0.3
				add(labels.FromStrings("__name__", "ttft_seconds", "job", job), ts, 0, h)
			}
			addNativeSeries(r, step, ts, add)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	// Persist part or all of it, so that both the head's chunks and
	// persisted ones (which the fast path decodes itself) are read, and a
	// series' chunks come from a block and the head at once.
	switch seed % 3 {
	case 2:
		persistDiff(t, db, diffStart.Add(time.Hour).UnixMilli())
	case 0:
		persistDiff(t, db, end+1)
	}
	return db
}

// addNativeSeries writes, at the 15 s sample number step, the native
// histograms beyond ttft_seconds: exponential ones with counter resets,
// a schema change, a gap and random bucket growth (lat_native_seconds),
// custom-bucket ones with a change of bounds in one series and a gauge
// histogram in another (lat_nhcb_seconds), and a metric whose selection
// mixes a float series with histograms (mixed_seconds).
func addNativeSeries(r *rand.Rand, step, ts int64, add func(labels.Labels, int64, float64, *histogram.Histogram)) {
	for j, job := range []string{"api", "db", "gpu"} {
		// Exponential: api resets every 25 min, db changes schema at
		// 50 min and has a gap, gpu grows randomly with a negative span.
		k := step
		if job == "api" {
			k = step % 100
		}
		if job == "db" && step >= 300 && step < 330 {
			continue
		}
		schema := int32(2)
		if job == "db" && step >= 200 {
			schema = 0
		}
		b1, b2 := uint64(k*2+1), uint64(k+int64(j))
		if job == "gpu" {
			b1 += uint64(r.IntN(5) * int(k))
		}
		h := &histogram.Histogram{
			Schema: schema, ZeroThreshold: 1e-3, ZeroCount: uint64(k),
			PositiveSpans:   []histogram.Span{{Offset: 0, Length: 2}, {Offset: 3, Length: 1}},
			PositiveBuckets: []int64{int64(b1), int64(b2) - int64(b1), int64(k)},
		}
		// The buckets' absolute counts are b1, b2 and b2+k.
		h.Count = h.ZeroCount + b1 + b2 + b2 + uint64(k)
		if job == "gpu" {
			h.NegativeSpans = []histogram.Span{{Offset: 1, Length: 1}}
			h.NegativeBuckets = []int64{k}
			h.Count += uint64(k)
		}
		h.Sum = float64(h.Count)*0.25 + float64(j)
		add(labels.FromStrings("__name__", "lat_native_seconds", "job", job), ts, 0, h)

		// Custom buckets: gpu's bounds change at 1 h; db is a gauge.
		bounds := []float64{0.1, 0.5, 1, 5}
		if job == "gpu" && step >= 240 {
			bounds = []float64{0.1, 1, 5}
		}
		n := uint64(step + 1)
		c := &histogram.Histogram{
			Schema: histogram.CustomBucketsSchema, CustomValues: bounds,
			PositiveSpans:   []histogram.Span{{Offset: 0, Length: 2}},
			PositiveBuckets: []int64{int64(n), int64(j)},
		}
		c.Count = n + n + uint64(j)
		c.Sum = float64(c.Count) * 0.7
		if job == "db" {
			c.CounterResetHint = histogram.GaugeType
		}
		add(labels.FromStrings("__name__", "lat_nhcb_seconds", "job", job), ts, 0, c)
	}
	if step%2 == 0 {
		add(labels.FromStrings("__name__", "mixed_seconds", "job", "api"), ts, float64(step), nil)
		m := &histogram.Histogram{Schema: 0, Count: uint64(step), Sum: float64(step), ZeroCount: uint64(step)}
		add(labels.FromStrings("__name__", "mixed_seconds", "job", "db"), ts, 0, m)
	}
}

// persistDiff writes the head's samples before maxt into a block.
func persistDiff(t testing.TB, db *tsdb.DB, maxt int64) {
	t.Helper()
	if err := db.CompactHead(tsdb.NewRangeHead(db.Head(), diffStart.UnixMilli(), maxt-1)); err != nil {
		t.Fatal(err)
	}
	if len(db.Blocks()) == 0 {
		t.Fatal("no block persisted")
	}
}

// genQuery builds one query from the shapes the fast path takes, and some
// it must hand back.
func genQuery(r *rand.Rand) string {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	rng := pick("30s", "1m", "2m", "5m", "7m", "15m", "1h")
	counter := pick(`req_total`, `req_total{code="500"}`, `req_total{job=~"api|gpu", code!="200"}`, `req_total{instance="10.0.0.1:9000"}`)
	gauge := pick(`queue_depth`, `queue_depth{job="db"}`)
	bucket := pick(`lat_seconds_bucket`, `lat_seconds_bucket{job="api"}`, `lat_seconds_bucket{le=~"0.1|1|\\+Inf"}`)
	grouping := pick("", " by (job)", " by (instance)", " without (instance)", " by (job, code)", " without (code, instance)")
	agg := pick("sum", "avg", "min", "max", "count")
	num := pick("2", "0.5", "-3", "100", "0", "1e-3")
	cmp := pick(">", "<", ">=", "<=", "==", "!=")
	arith := pick("+", "-", "*", "/", "%", "^")
	inner := func() string {
		switch r.IntN(6) {
		case 0:
			return fmt.Sprintf("%s(%s[%s])", pick("rate", "increase", "irate"), counter, rng)
		case 1:
			return fmt.Sprintf("%s(%s[%s])", pick("delta", "sum_over_time", "avg_over_time", "min_over_time", "max_over_time", "count_over_time", "last_over_time"), gauge, rng)
		case 2:
			return fmt.Sprintf("%s(%s[%s])", pick("sum_over_time", "avg_over_time", "min_over_time", "max_over_time", "count_over_time", "last_over_time"), counter, rng)
		case 3:
			return gauge
		case 4:
			return counter
		default:
			return fmt.Sprintf("rate(%s[%s])", bucket, rng)
		}
	}
	q := pick("0.5", "0.9", "0.99", "0", "1", "1.5", "-0.1")
	switch r.IntN(10) {
	case 0, 1:
		return fmt.Sprintf("%s%s (%s)", agg, grouping, inner())
	case 2:
		return fmt.Sprintf("histogram_quantile(%s, sum by (%s) (rate(%s[%s])))", q, pick("le", "le, job", "le, instance", "job, le"), bucket, rng)
	case 3:
		return fmt.Sprintf("histogram_quantile(%s, %s)", q, pick("rate("+bucket+"["+rng+"])", bucket, "sum without (instance) (rate("+bucket+"["+rng+"]))"))
	case 4:
		return fmt.Sprintf("%s %s %s", inner(), arith, num)
	case 5:
		return fmt.Sprintf("%s %s %s(%s)", num, arith, agg, inner())
	case 6:
		return fmt.Sprintf("%s %s%s %s", inner(), cmp, pick("", " bool"), num)
	case 7:
		return fmt.Sprintf("%s %s%s %s", num, cmp, pick("", " bool"), inner())
	case 8:
		return genNativeQuery(r, rng, q)
	default:
		return inner()
	}
}

// genNativeQuery builds a query over native histograms: the shapes the
// fast path takes over them and some it must hand back.
func genNativeQuery(r *rand.Rand, rng, q string) string {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	{
		m := pick("ttft_seconds", "lat_native_seconds", "lat_native_seconds", `lat_native_seconds{job!="gpu"}`, "lat_nhcb_seconds", `lat_nhcb_seconds{job="api"}`, "mixed_seconds")
		fn := pick("rate", "increase")
		in := fmt.Sprintf("%s(%s[%s])", fn, m, rng)
		return pick(
			"histogram_quantile("+q+", sum("+in+"))",
			"histogram_quantile("+q+", sum by (job) ("+in+"))",
			"histogram_quantile("+q+", "+in+")",
			"sum("+in+")", "sum by (job) ("+in+")", "sum without (job) ("+in+")",
			"count by (job) ("+in+")", "sum(sum by (job) ("+in+"))", in,
			"max("+in+")", "irate("+m+"["+rng+"])",
			"histogram_count(sum by (job) ("+in+"))", "histogram_sum("+in+")", "histogram_avg(sum("+in+"))",
			"histogram_quantile("+q+", sum by (job) ("+in+")) * 1000", "histogram_count(sum("+in+")) > 0.5",
			"count("+in+") > 1", "sum("+in+") * 2",
		)
	}
}

// TestDifferential compares the fast path with the upstream engine, result
// for result, bitwise, over generated queries, ranges and steps.
func TestDifferential(t *testing.T) {
	for _, delayed := range []bool{false, true} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("delayed_name_removal=%v/seed=%d", delayed, seed), func(t *testing.T) {
				runDifferential(t, delayed, seed, 250, genQuery)
			})
		}
	}
}

// TestDifferentialNative is TestDifferential over native histogram
// queries only: resets, a schema change, gaps, custom buckets whose
// bounds change, a gauge histogram and a mixed float/histogram selection.
func TestDifferentialNative(t *testing.T) {
	gen := func(r *rand.Rand) string {
		return genNativeQuery(r, []string{"30s", "1m", "2m", "5m", "7m", "15m", "1h"}[r.IntN(7)], []string{"0.5", "0.9", "0.99", "0", "1", "1.5", "-0.1"}[r.IntN(7)])
	}
	for _, delayed := range []bool{false, true} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("delayed_name_removal=%v/seed=%d", delayed, seed), func(t *testing.T) {
				runDifferential(t, delayed, seed, 120, gen)
			})
		}
	}
}

func runDifferential(t *testing.T, delayed bool, seed uint64, n int, gen func(*rand.Rand) string) {
	runDifferentialOn(t, openDiffDB(t, seed), delayed, seed, n, gen)
}

// runDifferentialOn is runDifferential over db.
func runDifferentialOn(t *testing.T, db *tsdb.DB, delayed bool, seed uint64, n int, gen func(*rand.Rand) string) {
	ng := promql.NewEngine(promql.EngineOpts{
		MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
		EnableDelayedNameRemoval: delayed, UseStartTimestamps: true, EnableAtModifier: true,
	})
	p := parser.NewParser(parser.Options{})
	r := rand.New(rand.NewPCG(seed, 99))
	fo := fast.DefaultOptions()
	fo.DelayedNameRemoval = delayed
	fo.BatchSeries = 7 // several batches even on small data
	fo.Workers = 3     // more goroutines than cores, to shake out races
	// The fast path reads chunks where the storage serves them and
	// samples where it does not; every other query reads samples.
	var samplesOnly storage.Queryable = samplesQueryable{db}
	var compiled, ran, fellBack, nativeRan int
	for i := 0; i < n; i++ {
		qs := gen(r)
		expr, err := p.ParseExpr(qs)
		if err != nil {
			t.Fatalf("%s: %v", qs, err)
		}
		plan, ok := fast.Compile(expr)
		if !ok {
			continue
		}
		compiled++
		instant := r.IntN(4) == 0
		start := diffStart.Add(time.Duration(r.IntN(7200)) * time.Second)
		step := []time.Duration{time.Second, 7 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute}[r.IntN(6)]
		end := start.Add(time.Duration(r.IntN(3600)) * time.Second)
		want, wantW, skip := upstreamAnswer(t, ng, db, qs, instant, start, end, step)
		if skip {
			continue
		}
		got, gotW, ferr := fastAnswer(plan, pickQueryable(i, db, samplesOnly), fo, instant, start, end, step)
		if errors.Is(ferr, fast.ErrFallback) {
			fellBack++
			if os.Getenv("DIFF_DEBUG") != "" {
				t.Logf("fallback %s (step %s, instant %v): %v", qs, step, instant, ferr)
			}
			if !nativeQuery(qs) && !errors.Is(ferr, fast.ErrForcedMonotonicity) {
				t.Errorf("%s: fell back on float data", qs)
			}
			continue
		}
		if ferr != nil {
			t.Fatalf("%s: fast: %v", qs, ferr)
		}
		ran++
		if nativeQuery(qs) {
			nativeRan++
		}
		desc := fmt.Sprintf("%s instant=%v start=%d end=%d step=%s", qs, instant, start.Unix(), end.Unix(), step)
		sortVec := strings.HasPrefix(qs, "histogram_quantile")
		if d := diffValues(want, got, sortVec); d != "" {
			t.Errorf("%s:\n%s", desc, d)
		}
		if w, g := annoStrings(wantW), annoStrings(gotW); !slices.Equal(w, g) {
			t.Errorf("%s: annotations\nupstream %q\nfast     %q", desc, w, g)
		}
	}
	t.Logf("%d queries: %d compiled, %d evaluated by the fast path (%d over native histograms), %d handed back", n, compiled, ran, nativeRan, fellBack)
	if nativeRan == 0 {
		t.Errorf("no query over native histograms was evaluated by the fast path")
	}
	if ran < n/3 {
		t.Errorf("only %d of %d queries were evaluated by the fast path", ran, n)
	}
}

// mustCompile parses qs and compiles it for the fast path, failing the
// test where either refuses.
// upstreamPanicked reports, and logs, an upstream evaluation that ended
// in a runtime panic the engine recovered: with a deletion in a persisted
// block, the prometheus module's block series set can panic merging its
// trimming interval into the tombstones (tombstones.Intervals.Add, index
// out of range), for some query ranges. There is no answer to compare.
// upstreamAnswer evaluates qs on the upstream engine ng over q, at start
// (instant) or over [start, end] by step; skip reports a query upstream
// itself panicked on (upstreamPanicked).
func upstreamAnswer(t *testing.T, ng *promql.Engine, q storage.Queryable, qs string, instant bool, start, end time.Time, step time.Duration) (v parser.Value, ws annotations.Annotations, skip bool) {
	t.Helper()
	var (
		qry promql.Query
		err error
	)
	if instant {
		qry, err = ng.NewInstantQuery(context.Background(), q, nil, qs, start)
	} else {
		qry, err = ng.NewRangeQuery(context.Background(), q, nil, qs, start, end, step)
	}
	if err != nil {
		t.Fatal(err)
	}
	res := qry.Exec(context.Background())
	if upstreamPanicked(t, qs, res.Err) {
		return nil, nil, true
	}
	if res.Err != nil {
		t.Fatalf("%s: upstream: %v", qs, res.Err)
	}
	return res.Value, res.Warnings, false
}

// fastAnswer is upstreamAnswer's query on the fast path.
func fastAnswer(plan *fast.Plan, q storage.Queryable, fo fast.Options, instant bool, start, end time.Time, step time.Duration) (parser.Value, annotations.Annotations, error) {
	if instant {
		v, ws, err := plan.Instant(context.Background(), q, fo, start)
		return v, ws, err
	}
	m, ws, err := plan.Range(context.Background(), q, fo, start, end, step)
	return m, ws, err
}

func upstreamPanicked(t *testing.T, qs string, err error) bool {
	if err == nil || !strings.Contains(err.Error(), "runtime error") {
		return false
	}
	t.Logf("%s: upstream panicked, skipped: %v", qs, err)
	return true
}

func mustCompile(t testing.TB, qs string) *fast.Plan {
	t.Helper()
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(qs)
	if err != nil {
		t.Fatal(err)
	}
	plan, ok := fast.Compile(expr)
	if !ok {
		t.Fatalf("%s: not compiled", qs)
	}
	return plan
}

// samplesQueryable hides the TSDB's chunk querier.
type samplesQueryable struct{ q storage.Queryable }

func (s samplesQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return s.q.Querier(mint, maxt)
}

func pickQueryable(i int, chunked, samples storage.Queryable) storage.Queryable {
	if i%2 == 0 {
		return chunked
	}
	return samples
}

func annoStrings(a annotations.Annotations) []string {
	w, i := a.AsStrings("", 0, 0)
	out := append(w, i...)
	slices.Sort(out)
	return out
}

func sameFloat(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
}

func diffValues(want, got parser.Value, sortVec bool) string {
	switch w := want.(type) {
	case promql.Matrix:
		g, ok := got.(promql.Matrix)
		if !ok {
			return fmt.Sprintf("type %T, want %T", got, want)
		}
		if len(w) != len(g) {
			return fmt.Sprintf("%d series, want %d\nwant %v\ngot  %v", len(g), len(w), w, g)
		}
		for i := range w {
			if !labels.Equal(w[i].Metric, g[i].Metric) {
				return fmt.Sprintf("series %d: %s, want %s", i, g[i].Metric, w[i].Metric)
			}
			if len(w[i].Histograms) != len(g[i].Histograms) {
				return fmt.Sprintf("%s: %d histogram points, want %d", w[i].Metric, len(g[i].Histograms), len(w[i].Histograms))
			}
			for j, p := range w[i].Histograms {
				q := g[i].Histograms[j]
				if p.T != q.T || !sameHistogram(p.H, q.H) {
					return fmt.Sprintf("%s: histogram point %d = %v@%d, want %v@%d", w[i].Metric, j, q.H, q.T, p.H, p.T)
				}
			}
			if len(w[i].Floats) != len(g[i].Floats) {
				return fmt.Sprintf("%s: %d points, want %d\nwant %v\ngot  %v", w[i].Metric, len(g[i].Floats), len(w[i].Floats), w[i].Floats, g[i].Floats)
			}
			for j, p := range w[i].Floats {
				q := g[i].Floats[j]
				if p.T != q.T || !sameFloat(p.F, q.F) {
					return fmt.Sprintf("%s: point %d = %v@%d, want %v@%d", w[i].Metric, j, q.F, q.T, p.F, p.T)
				}
			}
		}
	case promql.Vector:
		g, ok := got.(promql.Vector)
		if !ok {
			return fmt.Sprintf("type %T, want %T", got, want)
		}
		if sortVec {
			w, g = slices.Clone(w), slices.Clone(g)
			cmp := func(a, b promql.Sample) int { return labels.Compare(a.Metric, b.Metric) }
			slices.SortFunc(w, cmp)
			slices.SortFunc(g, cmp)
		}
		if len(w) != len(g) {
			return fmt.Sprintf("%d samples, want %d\nwant %v\ngot  %v", len(g), len(w), w, g)
		}
		for i := range w {
			if !labels.Equal(w[i].Metric, g[i].Metric) || w[i].T != g[i].T || !sameFloat(w[i].F, g[i].F) || !sameHistogram(w[i].H, g[i].H) {
				return fmt.Sprintf("sample %d = %v, want %v", i, g[i], w[i])
			}
		}
	default:
		return fmt.Sprintf("unexpected upstream type %T", want)
	}
	return ""
}

// sameHistogram compares two histograms bit for bit: every float, span,
// custom bound and the counter reset hint.
func sameHistogram(a, b *histogram.FloatHistogram) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	sameFloats := func(x, y []float64) bool {
		return slices.EqualFunc(x, y, sameFloat)
	}
	spans := func(x, y []histogram.Span) bool { return slices.Equal(x, y) }
	return a.CounterResetHint == b.CounterResetHint && a.Schema == b.Schema &&
		sameFloat(a.ZeroThreshold, b.ZeroThreshold) && sameFloat(a.ZeroCount, b.ZeroCount) &&
		sameFloat(a.Count, b.Count) && sameFloat(a.Sum, b.Sum) &&
		spans(a.PositiveSpans, b.PositiveSpans) && spans(a.NegativeSpans, b.NegativeSpans) &&
		sameFloats(a.PositiveBuckets, b.PositiveBuckets) && sameFloats(a.NegativeBuckets, b.NegativeBuckets) &&
		sameFloats(a.CustomValues, b.CustomValues)
}

// nativeQuery reports whether qs reads a metric holding native histograms.
func nativeQuery(qs string) bool {
	for _, m := range []string{"ttft_seconds", "lat_native_seconds", "lat_nhcb_seconds", "mixed_seconds"} {
		if strings.Contains(qs, m) {
			return true
		}
	}
	return false
}
