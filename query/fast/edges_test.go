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

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/tailroot/tailroot/query/fast"
)

// edgeSpan is how much data openEdgeDB writes.
const edgeSpan = 3 * time.Hour

// edgeValues are the float values that take the arithmetic's odd paths:
// infinities, NaN, negative zero, overflowing and subnormal magnitudes,
// and pairs whose Kahan compensation is not zero.
var edgeValues = []float64{
	math.Inf(1), math.Inf(-1), math.NaN(), math.Copysign(0, -1), 0, 1e308, -1e308, 1e-308, 5e-324,
	1, -1, 1e16, -1e16, 3, 0.1, 1e-3, 7e15,
}

// openEdgeDB writes 3 h of series that sit at the edges of the
// arithmetic and of the sample layout, on a 30 s grid whose times fall on
// the minute steps and window ends the queries use: counters that reset to
// exactly 0, to a lower but non-zero value and restart above their last
// value, counters through +Inf and NaN and with huge and tiny increments;
// gauges drawn from edgeValues; sparse series with one sample in ten
// minutes, or two at the ends of a five-minute window; stale markers on
// step times; series that start and stop inside the range; and series
// that lack the labels queries group by. layout places them:
//   - "head": all in the head;
//   - "blocks": three persisted blocks and the head, with deletions in a
//     block, across two blocks and in the head;
//   - "ooo": as "blocks" with an out-of-order window, out-of-order
//     samples in the blocks' time (some at a persisted sample's own time,
//     with another value) and in the head, then compacted out of the head
//     into a block that overlaps the others.
func openEdgeDB(t testing.TB, seed uint64, layout string) *tsdb.DB {
	t.Helper()
	o := tsdb.DefaultOptions()
	if layout == "ooo" {
		o.OutOfOrderTimeWindow = (4 * time.Hour).Milliseconds()
	}
	db, err := tsdb.Open(t.TempDir(), nil, nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	r := rand.New(rand.NewPCG(seed, 23))
	base := diffStart.UnixMilli()
	end := diffStart.Add(edgeSpan).UnixMilli()
	type series struct {
		ls         labels.Labels
		kind       string
		v          float64
		every      int64 // ms between samples, a multiple of 30 s
		from, to   int64 // the series lives in [from, to)
		staleEvery int64 // a stale marker on every staleEvery-th sample time; 0: none
	}
	var all []*series
	for i := range 12 {
		s := &series{every: []int64{30_000, 60_000, 120_000}[r.IntN(3)], from: base, to: end + 1}
		if r.IntN(3) == 0 {
			s.from = base + r.Int64N(edgeSpan.Milliseconds()/2)/30_000*30_000
		}
		if r.IntN(3) == 0 {
			s.to = s.from + r.Int64N(edgeSpan.Milliseconds())/30_000*30_000
		}
		if r.IntN(4) == 0 {
			s.staleEvery = []int64{7, 11, 20}[r.IntN(3)]
		}
		kinds := []string{"reset", "special", "gauge", "sparse", "pair"}
		s.kind = kinds[i%len(kinds)]
		b := labels.NewBuilder(labels.EmptyLabels())
		switch s.kind {
		case "reset", "special":
			b.Set("__name__", "edge_total")
		default:
			b.Set("__name__", "edge_gauge")
		}
		b.Set("kind", s.kind)
		b.Set("id", fmt.Sprint(i))
		// Some series lack the labels queries group by.
		if i%3 != 0 {
			b.Set("zone", []string{"a", "b"}[i%2])
		}
		if i%4 != 1 {
			b.Set("pod", fmt.Sprint("p", i%3))
		}
		s.ls = b.Labels()
		switch s.kind {
		case "sparse":
			s.every = 600_000
		case "pair":
			// Two samples five minutes apart, then a quiet quarter hour:
			// a 5m window ending on the second holds exactly the first
			// only when it is not exclusive of it.
			s.every = 300_000
		}
		all = append(all, s)
	}
	les := []string{"0.1", "1", "10", "+Inf"}
	var bucketV [2][4]float64

	app := db.AppenderV2(context.Background())
	add := func(ls labels.Labels, ts int64, v float64) {
		if _, err := app.Append(0, ls, 0, ts, v, nil, nil, storage.AOptions{}); err != nil {
			t.Fatalf("append %s @%d: %v", ls, ts, err)
		}
	}
	pick := func() float64 { return edgeValues[r.IntN(len(edgeValues))] }
	for ts := base; ts <= end; ts += 30_000 {
		for n, s := range all {
			if ts < s.from || ts >= s.to || (ts-base)%s.every != 0 {
				continue
			}
			k := (ts - base) / s.every
			if s.kind == "pair" && k%4 >= 2 {
				continue
			}
			if s.staleEvery > 0 && k%s.staleEvery == s.staleEvery-1 {
				add(s.ls, ts, math.Float64frombits(value.StaleNaN))
				continue
			}
			switch s.kind {
			case "reset":
				switch x := r.IntN(20); {
				case x == 0:
					s.v = 0
				case x == 1:
					s.v /= 3 // lower, not zero
				case x == 2:
					s.v += 1e6 // a restart that ends above the last value
				default:
					s.v += float64(r.IntN(20))
				}
			case "special":
				switch x := r.IntN(30); {
				case x == 0:
					s.v = math.Inf(1)
				case x == 1:
					s.v = math.NaN()
				case x == 2:
					s.v = 0
				case x < 6:
					s.v = math.Abs(s.v) + 1e300
				case x < 10:
					s.v = math.Abs(s.v) + 1e-300
				default:
					if math.IsNaN(s.v) || math.IsInf(s.v, 0) {
						s.v = 0
					}
					s.v += 1e15 + float64(r.IntN(3))
				}
			default:
				s.v = pick()
				if r.IntN(3) == 0 {
					s.v = r.NormFloat64() * 10
				}
			}
			add(s.ls, ts, s.v)
			_ = n
		}
		// Classic buckets: two instances, counts that stay cumulative,
		// with an infinite and a NaN count now and then.
		if (ts-base)%60_000 == 0 {
			for in := range bucketV {
				inc := float64(r.IntN(3))
				for li, le := range les {
					bucketV[in][li] += inc + float64(li)
					v := bucketV[in][li]
					if r.IntN(150) == 0 {
						v = []float64{math.NaN(), math.Inf(1)}[r.IntN(2)]
					}
					ls := labels.FromStrings("__name__", "edge_bucket", "le", le, "inst", fmt.Sprint(in))
					add(ls, ts, v)
				}
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if layout == "head" {
		return db
	}
	at := func(d time.Duration) int64 { return diffStart.Add(d).UnixMilli() }
	for _, c := range [][2]time.Duration{{0, 40 * time.Minute}, {40 * time.Minute, 80 * time.Minute}, {80 * time.Minute, 2 * time.Hour}} {
		if err := db.CompactHead(tsdb.NewRangeHead(db.Head(), at(c[0]), at(c[1])-1)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	del := func(from, to time.Duration, ms ...*labels.Matcher) {
		t.Helper()
		if err := db.Delete(ctx, at(from), at(to), ms...); err != nil {
			t.Fatal(err)
		}
	}
	// Deleted ranges that end and begin on step times.
	del(10*time.Minute, 15*time.Minute, labels.MustNewMatcher(labels.MatchEqual, "kind", "reset"))
	del(35*time.Minute, 45*time.Minute, labels.MustNewMatcher(labels.MatchEqual, "zone", "a"))
	del(150*time.Minute, 155*time.Minute, labels.MustNewMatcher(labels.MatchEqual, "kind", "gauge"))
	if layout != "ooo" {
		return db
	}
	app = db.AppenderV2(ctx)
	for _, s := range all {
		for k := 0; k < 8; k++ {
			// Inside the blocks' time, some at a persisted sample's own time.
			ts := at(time.Duration(r.IntN(110)) * time.Minute)
			if r.IntN(2) == 0 {
				ts += 15_000
			}
			_, _ = app.Append(0, s.ls, 0, ts, pick(), nil, nil, storage.AOptions{})
		}
		// And in the head's own time, between its samples.
		ts := at(2*time.Hour+time.Duration(r.IntN(50))*time.Minute) + 15_000
		_, _ = app.Append(0, s.ls, 0, ts, pick(), nil, nil, storage.AOptions{})
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if seed%2 == 0 {
		if err := db.CompactOOOHead(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// genEdgeQuery builds a query over openEdgeDB's series from the shapes
// Compile takes: every range function, aggregations by and without labels
// some series lack, and arithmetic and comparisons with literals,
// special ones included.
func genEdgeQuery(r *rand.Rand) string {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	rng := pick("1s", "30s", "59s", "1m", "61s", "90s", "5m", "10m", "11m", "1h")
	m := pick("edge_total", `edge_total{kind="reset"}`, `edge_total{kind="special"}`, "edge_gauge",
		`edge_gauge{kind="sparse"}`, `edge_gauge{kind="pair"}`, `edge_gauge{zone="a"}`, `edge_gauge{pod!="p1"}`)
	fn := pick("rate", "increase", "irate", "delta", "sum_over_time", "avg_over_time", "min_over_time",
		"max_over_time", "count_over_time", "last_over_time")
	inner := m
	if r.IntN(4) != 0 {
		inner = fmt.Sprintf("%s(%s[%s])", fn, m, rng)
	}
	agg := pick("sum", "avg", "min", "max", "count")
	grouping := pick("", " by (zone)", " by (pod)", " by (zone, pod)", " without (id)", " without (zone)", " by (nosuch)", " without (id, kind, pod)", " by ()", " without ()")
	num := pick("2", "0.5", "-3", "0", "1e308", "NaN", "Inf", "-Inf", "1e-3", "(3)")
	cmp := pick(">", "<", ">=", "<=", "==", "!=")
	arith := pick("+", "-", "*", "/", "%", "^")
	q := pick("0.5", "0.99", "0", "1", "NaN", "-1", "2")
	switch r.IntN(9) {
	case 0, 1:
		return fmt.Sprintf("%s%s (%s)", agg, grouping, inner)
	case 2:
		return fmt.Sprintf("%s %s %s", inner, arith, num)
	case 3:
		return fmt.Sprintf("%s %s %s", num, arith, inner)
	case 4:
		return fmt.Sprintf("%s %s%s %s", inner, cmp, pick("", " bool"), num)
	case 5:
		return fmt.Sprintf("%s %s%s %s", num, cmp, pick("", " bool"), inner)
	case 6:
		return fmt.Sprintf("%s%s (%s) %s %s", agg, grouping, inner, arith, num)
	case 7:
		b := pick("edge_bucket", `edge_bucket{inst="1"}`)
		return pick(
			fmt.Sprintf("histogram_quantile(%s, sum by (le) (rate(%s[%s])))", q, b, rng),
			fmt.Sprintf("histogram_quantile(%s, rate(%s[%s]))", q, b, rng),
			fmt.Sprintf("histogram_quantile(%s, %s)", q, b),
		)
	default:
		return inner
	}
}

// edgeRange draws a query time range at the edges of what Compile takes:
// steps larger than the window, windows not a multiple of the step, a
// start off the step grid (to the millisecond), a single step, start ==
// end, and a month at 1 h over the 3 h of data.
func edgeRange(r *rand.Rand) (start, end time.Time, step time.Duration, instant bool) {
	minute := func(n int) time.Time { return diffStart.Add(time.Duration(n) * time.Minute) }
	switch r.IntN(8) {
	case 0:
		return minute(r.IntN(200)), time.Time{}, 0, true
	case 1:
		// Off the grid, to the millisecond.
		return minute(r.IntN(200)).Add(time.Duration(r.IntN(60_000)) * time.Millisecond), time.Time{}, 0, true
	case 2:
		s := minute(r.IntN(200))
		return s, s, time.Minute, false // start == end
	case 3:
		s := minute(r.IntN(200)).Add(time.Duration(r.IntN(60_000)) * time.Millisecond)
		return s, s.Add(30 * time.Second), time.Minute, false // one step
	case 4:
		s := diffStart.Add(-20 * 24 * time.Hour)
		return s, s.Add(30 * 24 * time.Hour), time.Hour, false
	case 5:
		s := minute(r.IntN(200) - 10).Add(time.Duration(r.IntN(60_000)) * time.Millisecond)
		step := []time.Duration{7 * time.Second, 90 * time.Second, 7 * time.Minute, time.Hour}[r.IntN(4)]
		return s, s.Add(time.Duration(r.IntN(240)) * time.Minute), step, false
	default:
		s := minute(r.IntN(200) - 10)
		step := []time.Duration{time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 15 * time.Minute}[r.IntN(6)]
		return s, s.Add(time.Duration(r.IntN(240)) * time.Minute), step, false
	}
}

// runEdgeDifferential compares the fast path with the upstream engine
// over n queries from gen and ranges from edgeRange on db, with the given
// lookback delta. Where between is not nil it runs after half the queries
// (a compaction between queries). At least minRan of the queries must be
// evaluated by the fast path.
func runEdgeDifferential(t *testing.T, db *tsdb.DB, seed uint64, n int, lookback time.Duration, between func(), gen func(*rand.Rand) string, minRan int) {
	t.Helper()
	ng := promql.NewEngine(promql.EngineOpts{
		MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: lookback, UseStartTimestamps: true,
	})
	p := parser.NewParser(parser.Options{})
	r := rand.New(rand.NewPCG(seed, 101))
	fo := fast.DefaultOptions()
	fo.LookbackDelta = lookback
	fo.BatchSeries = []int{1, 5, 64}[seed%3]
	fo.Workers = []int{1, 3, 8}[seed%3]
	samplesOnly := samplesQueryable{db}
	var ran, fellBack int
	for i := range n {
		if i == n/2 && between != nil {
			between()
		}
		qs := gen(r)
		expr, err := p.ParseExpr(qs)
		if err != nil {
			t.Fatalf("%s: %v", qs, err)
		}
		plan, ok := fast.Compile(expr)
		if !ok {
			continue // -3 ^ x is -(3 ^ x): a unary minus Compile leaves
		}
		start, end, step, instant := edgeRange(r)
		q := pickQueryable(i, db, samplesOnly)
		want, wantW, skip := upstreamAnswer(t, ng, db, qs, instant, start, end, step)
		if skip {
			continue
		}
		got, gotW, ferr := fastAnswer(plan, q, fo, instant, start, end, step)
		desc := fmt.Sprintf("%s instant=%v start=%d end=%d step=%s lookback=%s chunks=%v", qs, instant, start.UnixMilli(), end.UnixMilli(), step, lookback, i%2 == 0)
		if errors.Is(ferr, fast.ErrFallback) {
			fellBack++
			continue
		}
		if ferr != nil {
			t.Fatalf("%s: fast: %v", desc, ferr)
		}
		ran++
		if d := diffValues(want, got, strings.HasPrefix(qs, "histogram_quantile")); d != "" {
			t.Errorf("%s:\n%s", desc, d)
		}
		if w, g := annoStrings(wantW), annoStrings(gotW); !slices.Equal(w, g) {
			t.Errorf("%s: annotations\nupstream %q\nfast     %q", desc, w, g)
		}
	}
	t.Logf("%d queries: %d evaluated by the fast path, %d handed back", n, ran, fellBack)
	if ran < minRan {
		t.Errorf("only %d of %d queries were evaluated by the fast path", ran, n)
	}
}

// TestDifferentialEdges is the differential over openEdgeDB's edge
// values and layouts, the edge query ranges of edgeRange, lookback
// deltas other than 5m, and (in the blocks layouts) a compaction of the
// head between queries.
func TestDifferentialEdges(t *testing.T) {
	cases := []struct {
		layout   string
		seed     uint64
		lookback time.Duration
	}{
		{"head", 1, 5 * time.Minute},
		{"head", 2, 90 * time.Second},
		{"blocks", 3, 5 * time.Minute},
		{"blocks", 4, 17 * time.Minute},
		{"ooo", 5, 5 * time.Minute},
		{"ooo", 6, time.Minute},
		{"ooo", 10, 3 * time.Minute},
		{"ooo", 12, 5 * time.Minute},
		{"blocks", 11, 10 * time.Second},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/seed=%d/lookback=%s", c.layout, c.seed, c.lookback), func(t *testing.T) {
			db := openEdgeDB(t, c.seed, c.layout)
			var between func()
			if c.layout != "head" {
				between = func() {
					// The head holds more than 1.5 block ranges after a
					// late write: compaction persists it mid-test.
					app := db.AppenderV2(context.Background())
					ls := labels.FromStrings("__name__", "edge_gauge", "kind", "late", "zone", "a")
					for ts := diffStart.Add(edgeSpan); ts.Before(diffStart.Add(edgeSpan + 3*time.Hour)); ts = ts.Add(time.Minute) {
						if _, err := app.Append(0, ls, 0, ts.UnixMilli(), 1, nil, nil, storage.AOptions{}); err != nil {
							t.Fatal(err)
						}
					}
					if err := app.Commit(); err != nil {
						t.Fatal(err)
					}
					before := len(db.Blocks())
					if err := db.Compact(context.Background()); err != nil {
						t.Fatal(err)
					}
					t.Logf("compaction: %d blocks, then %d", before, len(db.Blocks()))
				}
			}
			runEdgeDifferential(t, db, c.seed, 120, c.lookback, between, genEdgeQuery, 60)
		})
	}
}
