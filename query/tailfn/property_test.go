package tailfn

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb/records"
)

// randomRecords draws n records in [start, start+span) ms: stages from a
// mix of zeros, coarse values (ties) and heavy tails, instances i0..i4.
func randomRecords(rng *rand.Rand, n int, start, span int64) []records.Record {
	out := make([]records.Record, n)
	for i := range out {
		r := records.Record{
			Time:      start + rng.Int64N(span),
			Labels:    labels.FromStrings("model_name", "m", "instance", fmt.Sprintf("i%d", rng.IntN(5))),
			RequestID: fmt.Sprintf("q%d", i),
		}
		for j := range r.Stages {
			switch rng.IntN(4) {
			case 0: // zero
			case 1:
				r.Stages[j] = float64(rng.IntN(5)) / 10 // ties
			case 2:
				r.Stages[j] = rng.ExpFloat64()
			default:
				r.Stages[j] = math.Exp(rng.NormFloat64() * 1.5) // heavy tail
			}
		}
		r.E2E = r.Sum()
		r.TTFT = r.Stages[records.StageQueue] + r.Stages[records.StagePrefill]
		out[i] = r
	}
	return out
}

// naive is the brute-force reference: S summed in stage order, the type-7
// quantile from a full sort, conditional means by plain loops.
type naive struct{ x [][records.NumStages]float64 }

func (nv naive) s(i int) float64 {
	s := 0.0
	for _, v := range nv.x[i] {
		s += v
	}
	return s
}

func (nv naive) quantile(p float64) float64 {
	s := make([]float64, len(nv.x))
	for i := range s {
		s[i] = nv.s(i)
	}
	return type7(s, p)
}

func type7(x []float64, p float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	h := float64(len(s)-1) * p
	lo := int(math.Floor(h))
	if lo+1 >= len(s) {
		return s[lo]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

// mean of stage j (or S when j < 0) over requests with lo ≤ S (< hi when
// hi is finite).
func (nv naive) mean(j int, lo, hi float64) (float64, int) {
	sum, n := 0.0, 0
	for i := range nv.x {
		s := nv.s(i)
		if s < lo || s >= hi {
			continue
		}
		n++
		if j < 0 {
			sum += s
		} else {
			sum += nv.x[i][j]
		}
	}
	return sum / float64(n), n
}

func selectNaive(recs []records.Record, mint, maxt int64, keep func(labels.Labels) bool) naive {
	var nv naive
	for _, r := range recs {
		if r.Time >= mint && r.Time <= maxt && keep(r.Labels) {
			nv.x = append(nv.x, r.Stages)
		}
	}
	return nv
}

// rowsOf evaluates expr at ts and indexes the result by
// "stage/statistic" (and band, when present).
func rowsOf(t *testing.T, ng *query.Engine, st storage.Queryable, expr string, ts time.Time) map[string]float64 {
	t.Helper()
	q, err := ng.NewInstantQuery(context.Background(), st, nil, expr, ts)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	out := map[string]float64{}
	for _, s := range res.Value.(promql.Vector) {
		k := s.Metric.Get(LabelStage) + "/" + s.Metric.Get(LabelStatistic)
		if b := s.Metric.Get(LabelBand); b != "" {
			k = b + "/" + k
		}
		out[k] = s.F
	}
	return out
}

func near(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

// TestFunctionsMatchNaive compares the PromQL function path (real store,
// real engine) with the brute-force reference on random records, and checks
// that contributions add up to their target within 1e-9.
func TestFunctionsMatchNaive(t *testing.T) {
	iters := 25
	if testing.Short() {
		iters = 8
	}
	const hour = int64(time.Hour / time.Millisecond)
	for it := range iters {
		rng := rand.New(rand.NewPCG(uint64(it), 99))
		store := openStore(t)
		n := 1 + rng.IntN(400)
		base := randomRecords(rng, 1+rng.IntN(400), 1, hour) // (0, 1h]
		now := randomRecords(rng, n, hour+1, hour)           // (1h, 2h]
		if err := store.Append(append(slices.Clone(base), now...)); err != nil {
			t.Fatal(err)
		}
		ng := newEngine(t, store)
		st := loadSeries(t, "")
		at := time.UnixMilli(2 * hour)
		p := []float64{0.5, 0.9, 0.99, 0.999, rng.Float64()*0.98 + 0.01}[it%5]
		sel := `requests{instance=~"i[0-2]"}`
		keep := func(ls labels.Labels) bool { return ls.Get("instance") <= "i2" }
		nv := selectNaive(now, hour+1, 2*hour, keep)
		nb := selectNaive(base, 1, hour, keep)
		if len(nv.x) == 0 || len(nb.x) == 0 {
			continue
		}
		name := fmt.Sprintf("iter %d n=%d p=%v", it, len(nv.x), p)

		q := nv.quantile(p)
		got := rowsOf(t, ng, st, fmt.Sprintf(`tail_mean(%v, %s[1h], "all")`, p, sel), at)
		tm, cnt := nv.mean(-1, q, math.Inf(1))
		excess := rowsOf(t, ng, st, fmt.Sprintf(`tail_excess(%v, %s[1h], "all")`, p, sel), at)
		all, _ := nv.mean(-1, 0, math.Inf(1))
		sumC, sumE := 0.0, 0.0
		for j, stage := range StageNames {
			want, _ := nv.mean(j, q, math.Inf(1))
			if g := got[stage+"/contribution"]; !near(g, want, 1e-9) {
				t.Errorf("%s: tail_mean %s = %v, naive %v", name, stage, g, want)
			}
			mj, _ := nv.mean(j, 0, math.Inf(1))
			if g := excess[stage+"/contribution"]; !near(g, want-mj, 1e-9) {
				t.Errorf("%s: tail_excess %s = %v, naive %v", name, stage, g, want-mj)
			}
			sumC += got[stage+"/contribution"]
			sumE += excess[stage+"/contribution"]
		}
		if !near(got["e2e/quantile"], q, 1e-12) || !near(got["e2e/target"], tm, 1e-9) || got["e2e/count"] != float64(cnt) {
			t.Errorf("%s: quantile %v target %v count %v, naive %v %v %d", name, got["e2e/quantile"], got["e2e/target"], got["e2e/count"], q, tm, cnt)
		}
		if !near(sumC, got["e2e/target"], 1e-9) || !near(sumE, excess["e2e/target"], 1e-9) || !near(excess["e2e/target"], tm-all, 1e-9) {
			t.Errorf("%s: contributions sum to %v (tail mean %v), excess %v (target %v, naive %v)", name, sumC, got["e2e/target"], sumE, excess["e2e/target"], tm-all)
		}

		// Heat table: bands [P50, P90) and ≥P90.
		heat := rowsOf(t, ng, st, fmt.Sprintf(`tail_heat(%s[1h], "all", "0.5,0.9")`, sel), at)
		p50, p90 := nv.quantile(0.5), nv.quantile(0.9)
		for _, b := range []struct {
			name   string
			lo, hi float64
		}{{"P50-P90", p50, p90}, {"≥P90", p90, math.Inf(1)}} {
			ms, c := nv.mean(-1, b.lo, b.hi)
			if heat[b.name+"/e2e/count"] != float64(c) {
				t.Errorf("%s: heat %s count %v, naive %d", name, b.name, heat[b.name+"/e2e/count"], c)
			}
			if c == 0 {
				continue
			}
			for j, stage := range StageNames {
				m, _ := nv.mean(j, b.lo, b.hi)
				if g := heat[b.name+"/"+stage+"/share"]; ms > 0 && !near(g, m/ms, 1e-9) {
					t.Errorf("%s: heat %s %s share %v, naive %v", name, b.name, stage, g, m/ms)
				}
			}
		}

		// Shapley efficiency: Σ φ = P_p(now) − P_p(baseline), both naive.
		sh := rowsOf(t, ng, st, fmt.Sprintf(`tail_shapley(%v, %s[1h], %s[1h] offset 1h, "all")`, p, sel, sel), at)
		sumS := 0.0
		for _, stage := range StageNames {
			sumS += sh[stage+"/contribution"]
		}
		if d := q - nb.quantile(p); !near(sumS, d, 1e-9) || !near(sh["e2e/target"], d, 1e-9) {
			t.Errorf("%s: Shapley values sum to %v, target %v, naive change %v", name, sumS, sh["e2e/target"], d)
		}
	}
}

// TestCIMatchesAttribution checks that the PromQL interval functions return
// exactly the interval attribution computes on the same values: coverage of
// those intervals is tested in attribution (TestIntervalCoverage).
func TestCIMatchesAttribution(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	store := openStore(t)
	// Enough requests per group for every method to be accepted at p = 0.5
	// (the delta method needs n ≥ 2000 there).
	recs := randomRecords(rng, 12000, 1, 3_600_000)
	if err := store.Append(recs); err != nil {
		t.Fatal(err)
	}
	ng := newEngine(t, store)
	at := time.UnixMilli(3_600_000)
	var a, b, ttftA []float64
	for _, r := range recs {
		if r.Labels.Get("instance") == "i0" {
			a, ttftA = append(a, r.E2E), append(ttftA, r.TTFT)
		} else {
			b = append(b, r.E2E)
		}
	}
	for _, m := range []struct {
		arg    string
		method attribution.CIMethod
	}{{"bootstrap", attribution.CIBootstrap}, {"maritz_jarrett", attribution.CIMaritzJarrett}, {"delta", attribution.CIDeltaKDE}, {"order_statistic", attribution.CIOrderStatistic}} {
		opts := attribution.CIOptions{Method: m.method, Seed: BootstrapSeed}
		for _, c := range []struct {
			field string
			x     []float64
		}{{"e2e", a}, {"ttft", ttftA}} {
			want, err := attribution.QuantileCI(c.x, 0.5, 0.95, opts)
			if err != nil {
				t.Fatal(err)
			}
			got := rowsOf(t, ng, loadSeries(t, ""), fmt.Sprintf(`quantile_ci(0.5, 0.95, requests{instance="i0"}[1h], %q, %q)`, m.arg, c.field), at)
			k := c.field + "/"
			if got[k+"quantile"] != want.Estimate || got[k+"lower"] != want.Lower || got[k+"upper"] != want.Upper || got[k+"se"] != want.SE {
				t.Errorf("%s %s: function %v, attribution %+v", m.arg, c.field, got, want)
			}
		}
		// diff = P(b) − P(a): attribution's a − b with the groups swapped.
		want, err := attribution.QuantileDiffCI(b, a, 0.5, 0.95, opts)
		if err != nil {
			t.Fatal(err)
		}
		got := rowsOf(t, ng, loadSeries(t, ""), fmt.Sprintf(`quantile_diff_ci(0.5, 0.95, requests{instance="i0"}[1h], requests{instance!="i0"}[1h], %q)`, m.arg), at)
		if got["e2e/diff"] != want.Estimate || got["e2e/lower"] != want.Lower || got["e2e/upper"] != want.Upper {
			t.Errorf("%s diff: function %v, attribution %+v", m.arg, got, want)
		}
		if !near(got["e2e/b"]-got["e2e/a"], type7(b, 0.5)-type7(a, 0.5), 1e-12) {
			t.Errorf("%s diff: a %v b %v", m.arg, got["e2e/a"], got["e2e/b"])
		}
	}
}

// TestAccumulatorsBracketRecords feeds accumulators built from random
// records on the default grid through tail_mean_from_accumulators and
// checks that the records' exact tail means lie inside the returned bounds.
func TestAccumulatorsBracketRecords(t *testing.T) {
	for it := range 10 {
		rng := rand.New(rand.NewPCG(uint64(it), 7))
		recs := randomRecords(rng, 50+rng.IntN(2000), 0, 1)
		nv := naive{}
		cols := make([][]float64, records.NumStages)
		for _, r := range recs {
			nv.x = append(nv.x, r.Stages)
			for j, v := range r.Stages {
				cols[j] = append(cols[j], v)
			}
		}
		reqs, err := attribution.NewRequests(StageNames, cols)
		if err != nil {
			t.Fatal(err)
		}
		acc := attribution.Accumulate(reqs, attribution.DefaultGrid())
		var series string
		series += "load 1m\n"
		for b, c := range acc.Count {
			if c == 0 {
				continue
			}
			_, hi := acc.Grid.Edges(b)
			le := fmt.Sprint(hi)
			if math.IsInf(hi, 1) {
				le = "+Inf"
			}
			series += fmt.Sprintf("\tcnt{e2e_bucket=%q} %v\n", le, c)
			for j, st := range StageNames {
				series += fmt.Sprintf("\tsums{stage=%q, e2e_bucket=%q} %v\n", st, le, acc.Sum[j][b])
			}
		}
		st := loadSeries(t, series)
		ng := newEngine(t, nil)
		p := 0.9 + 0.09*rng.Float64()
		got := rowsOf(t, ng, st, fmt.Sprintf(`tail_mean_from_accumulators(%v, sums, cnt, "all")`, p), time.Unix(0, 0))
		q := nv.quantile(p)
		for j, stage := range StageNames {
			want, _ := nv.mean(j, q, math.Inf(1))
			lo, hi := got[stage+"/lower"], got[stage+"/upper"]
			if !(want >= lo-1e-9 && want <= hi+1e-9) {
				t.Errorf("iter %d p=%v: %s tail mean %v outside [%v, %v]", it, p, stage, want, lo, hi)
			}
		}
		tm, _ := nv.mean(-1, q, math.Inf(1))
		if lo, hi := got["e2e/lower"], got["e2e/upper"]; !(tm >= lo-1e-9 && tm <= hi+1e-9) {
			t.Errorf("iter %d p=%v: tail mean %v outside [%v, %v]", it, p, tm, lo, hi)
		}
	}
}
