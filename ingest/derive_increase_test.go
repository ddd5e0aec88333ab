package ingest

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

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb"
	"github.com/tailroot/tailroot/tsdb/records"
)

// genRequests returns n requests arriving uniformly in [from, from+span)
// ms, on two instances, with heavy-tailed queueing and decode so that the
// P99 tail is made of a few stages.
func genRequests(t testing.TB, r *rand.Rand, n int, from, span int64) []Item {
	items := make([]Item, n)
	for i := range items {
		var st [records.NumStages]float64
		st[records.StageQueue] = r.ExpFloat64() * 0.05
		if r.IntN(50) == 0 {
			st[records.StageQueue] += r.ExpFloat64() * 2
		}
		st[records.StageTokenize] = 0.001 + r.Float64()*0.002
		st[records.StagePrefill] = math.Exp(r.NormFloat64()*0.5 - 2.5)
		st[records.StageDecode] = math.Exp(r.NormFloat64()*0.8 - 0.5)
		st[records.StageDetokenize] = r.Float64() * 0.001
		st[records.StageNetwork] = r.ExpFloat64() * 0.003
		st[records.StageOther] = r.Float64() * 0.002
		ls := labels.FromStrings("instance", fmt.Sprintf("i%d", i%2), "model_name", "m")
		items[i] = testItem(t, from+r.Int64N(span), fmt.Sprintf("r%d", i), ls, st)
	}
	return items
}

// tailEngine is the query engine with tailroot's functions, as serve
// builds it.
func tailEngine(t testing.TB) *query.Engine {
	t.Helper()
	reg := query.NewRegistry()
	if err := tailfn.Register(reg, nil); err != nil {
		t.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	return ng
}

func instant(t testing.TB, ng *query.Engine, db *tsdb.DB, qs string, at int64) promql.Vector {
	t.Helper()
	q, err := ng.NewInstantQuery(context.Background(), db, nil, qs, time.UnixMilli(at))
	if err != nil {
		t.Fatalf("%s: %v", qs, err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", qs, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		t.Fatalf("%s: %v", qs, err)
	}
	return v
}

// windowTruth is what the records say about the requests stamped in
// (a, b]: stamps are their end times, Time + E2E to the millisecond,
// rounded up to the next whole second (DeriveResolution 1s).
type windowTruth struct {
	n      int
	exact  attribution.Breakdown
	counts map[string]float64 // e2e_bucket → requests
}

func truthOf(t testing.TB, items []Item, a, b int64) windowTruth {
	t.Helper()
	names := make([]string, records.NumStages)
	cols := make([][]float64, records.NumStages)
	for j := range names {
		names[j] = records.Stage(j).String()
	}
	grid := attribution.DefaultGrid()
	w := windowTruth{counts: map[string]float64{}}
	for i := range items {
		r := &items[i].Record
		end := r.Time + int64(math.Round(r.E2E*1000))
		stamp := end
		if rem := end % 1000; rem != 0 {
			stamp += 1000 - rem
		}
		if stamp <= a || stamp > b {
			continue
		}
		w.n++
		for j := range cols {
			cols[j] = append(cols[j], r.Stages[j])
		}
		bk := grid.Bucket(r.E2E)
		label := "+Inf"
		if bk < len(grid.Upper()) {
			label = formatBound(grid.Upper()[bk])
		}
		w.counts[label]++
	}
	if w.n == 0 {
		return w
	}
	reqs, err := attribution.NewRequests(names, cols)
	if err != nil {
		t.Fatal(err)
	}
	if w.exact, err = attribution.TailMean(reqs, 0.99); err != nil {
		t.Fatal(err)
	}
	return w
}

// seriesAnswer is tail_mean_from_accumulators' "all" rows.
type seriesAnswer map[string]map[string]float64 // stage → statistic → value

func tailFromSeries(t testing.TB, ng *query.Engine, db *tsdb.DB, rangeFn string, a, b int64) (seriesAnswer, map[string]float64) {
	t.Helper()
	rng := fmt.Sprintf("%dms", b-a)
	qs := fmt.Sprintf(`tail_mean_from_accumulators(0.99, sum by (stage, e2e_bucket) (%s), sum by (e2e_bucket) (%s), "all")`,
		fmt.Sprintf(rangeFn, SeriesTailStageSum, rng), fmt.Sprintf(rangeFn, SeriesTailRequests, rng))
	ans := seriesAnswer{}
	for _, s := range instant(t, ng, db, qs, b) {
		st := s.Metric.Get(tailfn.LabelStage)
		if ans[st] == nil {
			ans[st] = map[string]float64{}
		}
		ans[st][s.Metric.Get(tailfn.LabelStatistic)] = s.F
	}
	counts := map[string]float64{}
	for _, s := range instant(t, ng, db, fmt.Sprintf(`sum by (e2e_bucket) (%s)`, fmt.Sprintf(rangeFn, SeriesTailRequests, rng)), b) {
		counts[s.Metric.Get(LabelE2EBucket)] = s.F
	}
	return ans, counts
}

const (
	anchoredIncrease = `increase(%s[%s] anchored)`
	plainIncrease    = `increase(%s[%s])`
)

// checkWindow compares the series' answer over (a, b] with the records'.
// Over increase(… anchored) every bucket's count must be the number of
// requests stamped in the window, and the bracket of every stage and of
// the tail mean must hold the records' value. Plain increase()
// extrapolates to the window's ends: its counts are only reported, and
// checked never to lose a request when the window starts before the
// series do (their zero samples are inside it).
func checkWindow(t *testing.T, ng *query.Engine, db *tsdb.DB, items []Item, a, b int64, startsBeforeSeries bool) {
	t.Helper()
	truth := truthOf(t, items, a, b)
	if truth.n == 0 {
		t.Fatalf("window (%d, %d] holds no request", a, b)
	}
	ans, counts := tailFromSeries(t, ng, db, anchoredIncrease, a, b)
	for bk, want := range truth.counts {
		if got := counts[bk]; math.Abs(got-want) > 1e-9 {
			t.Errorf("bucket %s: increase anchored %v, want %v requests", bk, got, want)
		}
	}
	for bk, got := range counts {
		if truth.counts[bk] == 0 && got != 0 {
			t.Errorf("bucket %s: increase anchored %v, want 0", bk, got)
		}
	}
	if len(ans) == 0 {
		t.Fatalf("tail_mean_from_accumulators over increase anchored: no answer for %d requests", truth.n)
	}
	tol := func(x float64) float64 { return 1e-9 * math.Max(1, math.Abs(x)) }
	for j := range records.NumStages {
		name := records.Stage(j).String()
		x, row := truth.exact.Contrib[j], ans[name]
		if row == nil {
			t.Errorf("stage %s missing from the series answer", name)
			continue
		}
		if x < row["lower"]-tol(x) || x > row["upper"]+tol(x) {
			t.Errorf("E[%s | e2e ≥ P99] = %v from records, outside [%v, %v] from series", name, x, row["lower"], row["upper"])
		}
	}
	e := ans[tailfn.StageE2E]
	if x := truth.exact.Target; x < e["lower"]-tol(x) || x > e["upper"]+tol(x) {
		t.Errorf("E[e2e | e2e ≥ P99] = %v from records, outside [%v, %v] from series", x, e["lower"], e["upper"])
	}
	if got := e["requests"]; math.Abs(got-float64(truth.n)) > 1e-9 {
		t.Errorf("series see %v requests, records %d", got, truth.n)
	}
	relErr := math.Abs(e["target"]-truth.exact.Target) / truth.exact.Target
	t.Logf("(%d, %d] n=%d: tail mean records %.5f, series %.5f (rel. error %.2g) in [%.5f, %.5f]",
		a, b, truth.n, truth.exact.Target, e["target"], relErr, e["lower"], e["upper"])

	plain, plainCounts := tailFromSeries(t, ng, db, plainIncrease, a, b)
	worst := 0.0
	for bk, want := range truth.counts {
		got := plainCounts[bk]
		if startsBeforeSeries && got < want-1e-9 {
			t.Errorf("bucket %s: plain increase %v < %v requests: a request was lost", bk, got, want)
		}
		worst = max(worst, math.Abs(got-want)/want)
	}
	if pe := plain[tailfn.StageE2E]; pe != nil {
		t.Logf("  plain increase(): worst bucket count off by %.1f%%, tail mean %.5f", 100*worst, pe["target"])
	} else {
		t.Logf("  plain increase(): no answer (worst bucket count off by %.1f%%)", 100*worst)
	}
}

// TestIncreaseSeesBackfill: N requests pushed at once, ending in the last
// 20 minutes, are all seen by increase() over the window that holds them,
// and by one that starts half-way.
func TestIncreaseSeesBackfill(t *testing.T) {
	ng := tailEngine(t)
	for _, n := range []int{1, 10, 2000, 50000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			if n > 2000 && testing.Short() {
				t.Skip("short")
			}
			db := openTestDB(t)
			p := openTestRecords(t, db, testRecordsOptions(t.TempDir()))
			now := time.Now().UnixMilli()
			from, span := now-20*60_000, int64(15*60_000)
			items := genRequests(t, rand.New(rand.NewPCG(uint64(n), 7)), n, from, span)
			if err := p.Append(context.Background(), "test", items); err != nil {
				t.Fatal(err)
			}
			end := now + 60_000 // every end time is before this
			checkWindow(t, ng, db, items, from-60_000, end, true)
			if n >= 2000 {
				checkWindow(t, ng, db, items, from+span/2+137, end, false)
				checkWindow(t, ng, db, items, from+span/4, from+3*span/4, false)
			}
		})
	}
}

// TestIncreaseSeesStream: the same for 40 pushes in time order, as a live
// server receives them, checked over the whole stream and from mid-stream.
func TestIncreaseSeesStream(t *testing.T) {
	ng := tailEngine(t)
	db := openTestDB(t)
	p := openTestRecords(t, db, testRecordsOptions(t.TempDir()))
	now := time.Now().UnixMilli()
	from, span := now-25*60_000, int64(20*60_000)
	var all []Item
	r := rand.New(rand.NewPCG(3, 9))
	const pushes = 40
	for k := range pushes {
		step := span / pushes
		items := genRequests(t, r, 100, from+int64(k)*step, step)
		if err := p.Append(context.Background(), "test", items); err != nil {
			t.Fatal(err)
		}
		all = append(all, items...)
	}
	end := now + 60_000
	checkWindow(t, ng, db, all, from-60_000, end, true)
	checkWindow(t, ng, db, all, from+span/2+411, end, false)
	checkWindow(t, ng, db, all, from+span/3, from+2*span/3, false)
}

// TestLateRequestsRestamped: a request that ended before its label set's
// newest sample, or before the backfill window, is still counted (at the
// stamp the docs give) and shows in the restamp counter.
func TestLateRequestsRestamped(t *testing.T) {
	db := openTestDB(t)
	reg := prometheus.NewRegistry()
	o := testRecordsOptions(t.TempDir())
	p, err := NewRecords(db, db.Metadata, o, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	now := time.Now().UnixMilli()
	ls := labels.FromStrings("model_name", "m")
	st := [records.NumStages]float64{records.StagePrefill: 0.2}
	push := func(ms int64, id string) {
		t.Helper()
		if err := p.Append(context.Background(), "test", []Item{testItem(t, ms, id, ls, st)}); err != nil {
			t.Fatal(err)
		}
	}
	push(now-5*60_000, "a")
	push(now-10*60_000, "late")  // behind the series' newest sample
	push(now-3*3600_000, "old")  // before the 30 minute backfill window
	push(now+3600_000, "future") // after now
	m := p.m.restamped
	for reason, want := range map[string]float64{"behind_series": 1, "outside_backfill_window": 1, "future": 1} {
		if got := testutil.ToFloat64(m.WithLabelValues(reason)); got != want {
			t.Errorf("restamped{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	ng := tailEngine(t)
	v := instant(t, ng, db, fmt.Sprintf(`sum(increase(%s[2h] anchored))`, SeriesTailRequests), time.Now().UnixMilli()+5000)
	if len(v) != 1 || v[0].F != 4 {
		t.Errorf("increase over 2h: %v, want 4 requests", v)
	}
	// The late one is counted just after the first request's stamp.
	first := (now - 5*60_000 + 200 + 999) / 1000 * 1000
	v = instant(t, ng, db, fmt.Sprintf(`sum(%s)`, SeriesTailRequests), first+1)
	if len(v) != 1 || v[0].F != 2 {
		t.Errorf("count at %d: %v, want 2 (the first and the late request)", first+1, v)
	}
}

// TestRecoveredSeriesCounted: after a crash, a series first created by the
// recovered requests (never appended by the crashed process) gets its zero
// sample, so increase() counts it; one the crashed process did append
// does not get a second, which would read as a counter reset.
func TestRecoveredSeriesCounted(t *testing.T) {
	db := openTestDB(t)
	dir := t.TempDir()
	ng := tailEngine(t)
	ls := labels.FromStrings("model_name", "m")
	now := time.Now().UnixMilli()
	total := func() float64 {
		t.Helper()
		v := instant(t, ng, db, fmt.Sprintf(`sum(increase(%s[1h] anchored))`, SeriesTailRequests), time.Now().UnixMilli()+5000)
		if len(v) != 1 {
			return 0
		}
		return v[0].F
	}

	// X is stored and journalled, but no derived sample is appended
	// before the crash.
	o := testRecordsOptions(dir)
	o.DeriveInterval = time.Hour
	p, err := NewRecords(db, db.Metadata, o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Append(context.Background(), "test", []Item{testItem(t, now-120_000, "x", ls, [records.NumStages]float64{records.StagePrefill: 0.2})}); err != nil {
		t.Fatal(err)
	}
	crash(t, p)
	p = openTestRecordsNoCleanup(t, db, testRecordsOptions(dir))
	if got := total(); got != 1 {
		t.Errorf("after recovering X: increase %v, want 1", got)
	}
	// Y is appended to the series (derive interval 0) and then the process
	// crashes before a checkpoint.
	if err := p.Append(context.Background(), "test", []Item{testItem(t, now-60_000, "y", ls, [records.NumStages]float64{records.StageDecode: 3})}); err != nil {
		t.Fatal(err)
	}
	crash(t, p)
	p = openTestRecordsNoCleanup(t, db, testRecordsOptions(dir))
	defer p.Close()
	if got := total(); got != 2 {
		t.Errorf("after recovering Y: increase %v, want 2", got)
	}
}

func openTestRecordsNoCleanup(t testing.TB, db *tsdb.DB, o RecordsOptions) *Records {
	t.Helper()
	p, err := NewRecords(db, db.Metadata, o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
