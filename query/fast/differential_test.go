package fast_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
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
	o := tsdb.DefaultOptions()
	o.OutOfOrderTimeWindow = 0
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
		return pick("histogram_quantile(0.9, sum(rate(ttft_seconds["+rng+"])))", "sum(rate(ttft_seconds["+rng+"]))", "rate(ttft_seconds["+rng+"])")
	default:
		return inner()
	}
}

// TestDifferential compares the fast path with the upstream engine, result
// for result, bitwise, over generated queries, ranges and steps.
func TestDifferential(t *testing.T) {
	for _, delayed := range []bool{false, true} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("delayed_name_removal=%v/seed=%d", delayed, seed), func(t *testing.T) {
				runDifferential(t, delayed, seed, 250)
			})
		}
	}
}

func runDifferential(t *testing.T, delayed bool, seed uint64, n int) {
	db := openDiffDB(t, seed)
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
	var compiled, ran, fellBack int
	for i := 0; i < n; i++ {
		qs := genQuery(r)
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
		ctx := context.Background()
		var (
			want, got   parser.Value
			wantW, gotW annotations.Annotations
			ferr        error
		)
		if instant {
			qry, err := ng.NewInstantQuery(ctx, db, nil, qs, start)
			if err != nil {
				t.Fatal(err)
			}
			res := qry.Exec(ctx)
			want, wantW, err = res.Value, res.Warnings, res.Err
			if err != nil {
				t.Fatalf("%s: upstream: %v", qs, err)
			}
			var v promql.Vector
			v, gotW, ferr = plan.Instant(ctx, pickQueryable(i, db, samplesOnly), fo, start)
			got = v
		} else {
			qry, err := ng.NewRangeQuery(ctx, db, nil, qs, start, end, step)
			if err != nil {
				t.Fatal(err)
			}
			res := qry.Exec(ctx)
			want, wantW, err = res.Value, res.Warnings, res.Err
			if err != nil {
				t.Fatalf("%s: upstream: %v", qs, err)
			}
			var m promql.Matrix
			m, gotW, ferr = plan.Range(ctx, pickQueryable(i, db, samplesOnly), fo, start, end, step)
			got = m
		}
		if errors.Is(ferr, fast.ErrFallback) {
			fellBack++
			if !strings.Contains(qs, "ttft_seconds") && !errors.Is(ferr, fast.ErrForcedMonotonicity) {
				t.Errorf("%s: fell back on float data", qs)
			}
			continue
		}
		if ferr != nil {
			t.Fatalf("%s: fast: %v", qs, ferr)
		}
		ran++
		desc := fmt.Sprintf("%s instant=%v start=%d end=%d step=%s", qs, instant, start.Unix(), end.Unix(), step)
		sortVec := strings.HasPrefix(qs, "histogram_quantile")
		if d := diffValues(want, got, sortVec); d != "" {
			t.Errorf("%s:\n%s", desc, d)
		}
		if w, g := annoStrings(wantW), annoStrings(gotW); !slices.Equal(w, g) {
			t.Errorf("%s: annotations\nupstream %q\nfast     %q", desc, w, g)
		}
	}
	t.Logf("%d queries: %d compiled, %d evaluated by the fast path, %d handed back", n, compiled, ran, fellBack)
	if ran < n/3 {
		t.Errorf("only %d of %d queries were evaluated by the fast path", ran, n)
	}
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
			if len(w[i].Histograms) > 0 {
				return "upstream returned histograms"
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
			if !labels.Equal(w[i].Metric, g[i].Metric) || w[i].T != g[i].T || !sameFloat(w[i].F, g[i].F) || w[i].H != nil {
				return fmt.Sprintf("sample %d = %v, want %v", i, g[i], w[i])
			}
		}
	default:
		return fmt.Sprintf("unexpected upstream type %T", want)
	}
	return ""
}
