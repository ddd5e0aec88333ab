package causalfn

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb"
)

// t0 is the first sample; every test series has one sample per 15 s. It
// is a multiple of 15 s, as subquery steps are, so a [30m:15s] subquery
// reads exactly the written samples.
var t0 = time.Unix(1_700_000_010, 0)

const step = 15 * time.Second

// at returns the time of sample i.
func at(i int) time.Time { return t0.Add(time.Duration(i) * step) }

// newEngine builds an engine whose registry holds the causal functions.
func newEngine(t testing.TB) *query.Engine {
	t.Helper()
	r := query.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	if err := Register(r); err == nil {
		t.Fatal("second Register accepted duplicate names")
	}
	ng, err := query.New(query.DefaultOptions(), r, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	return ng
}

// openDB opens a tailroot TSDB in a temporary directory and writes the
// given series, sample i of each at at(i); NaN values are written as NaN
// samples, and a series may start late (nil-padded via skip).
func openDB(t testing.TB, data map[string][]float64) *tsdb.DB {
	t.Helper()
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	app := db.AppenderV2(context.Background())
	p := newParser()
	for sel, vals := range data {
		ls := p(t, sel)
		for i, v := range vals {
			if _, err := app.Append(0, ls, 0, at(i).UnixMilli(), v, nil, nil, storage.AOptions{}); err != nil {
				t.Fatalf("append %s: %v", ls, err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return db
}

// newParser returns a function turning `name{a="b"}` into labels.
func newParser() func(testing.TB, string) labels.Labels {
	return func(t testing.TB, s string) labels.Labels {
		t.Helper()
		name, rest, _ := strings.Cut(s, "{")
		b := labels.NewBuilder(labels.FromStrings(model.MetricNameLabel, name))
		rest = strings.TrimSuffix(rest, "}")
		for _, kv := range strings.Split(rest, ",") {
			if kv == "" {
				continue
			}
			k, v, _ := strings.Cut(kv, "=")
			b.Set(strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"`))
		}
		return b.Labels()
	}
}

// instant runs q at ts and returns the vector and warnings; it fails the
// test on an error.
func instant(t testing.TB, ng *query.Engine, st storage.Queryable, q string, ts time.Time) (promql.Vector, annotations.Annotations) {
	t.Helper()
	v, annos, err := tryInstant(ng, st, q, ts)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v, annos
}

func tryInstant(ng *query.Engine, st storage.Queryable, q string, ts time.Time) (promql.Vector, annotations.Annotations, error) {
	qry, err := ng.NewInstantQuery(context.Background(), st, nil, q, ts)
	if err != nil {
		return nil, nil, err
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		return nil, res.Warnings, res.Err
	}
	v, ok := res.Value.(promql.Vector)
	if !ok {
		return nil, nil, nil
	}
	// The vector is only valid until Close: copy it.
	out := make(promql.Vector, len(v))
	copy(out, v)
	return out, res.Warnings, nil
}

// get returns the value of the element with the given label values, and
// the element's labels.
func get(t testing.TB, v promql.Vector, pairs ...string) (float64, labels.Labels) {
	t.Helper()
	for _, s := range v {
		ok := true
		for i := 0; i+1 < len(pairs); i += 2 {
			if s.Metric.Get(pairs[i]) != pairs[i+1] {
				ok = false
				break
			}
		}
		if ok {
			return s.F, s.Metric
		}
	}
	t.Fatalf("no element with %v in %v", pairs, v)
	return 0, labels.EmptyLabels()
}

func closeTo(t testing.TB, what string, got, want, rel float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > rel*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.15g, want %.15g", what, got, want)
	}
}

// workload returns n points of an outcome driven by x1 two steps back, a
// noise candidate x2 and a confounder z that drives both.
func workload(n int) (y, x1, x2, z []float64) {
	r := rand.New(rand.NewPCG(11, 12))
	y, x1, x2, z = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		z[i] = 5 + r.NormFloat64()
		x1[i] = 2 + 0.5*z[i] + r.NormFloat64()
		x2[i] = 10 + r.NormFloat64()
		y[i] = 1 + 0.3*z[i] + r.NormFloat64()*0.5
		if i >= 2 {
			y[i] += 0.8 * x1[i-2]
		}
	}
	return
}

// TestThroughEngineMatchesCausal runs every function inside PromQL over a
// real TSDB and checks each number against the attribution/causal (or rca)
// function called directly on the same values: independent of the query
// plumbing (windows, alignment, labels) that this package adds.
func TestThroughEngineMatchesCausal(t *testing.T) {
	const n = 120
	y, x1, x2, z := workload(n)
	db := openDB(t, map[string][]float64{
		`latency{job="a"}`:          y,
		`driver{job="a", k="one"}`:  x1,
		`driver{job="a", k="two"}`:  x2,
		`confounder{job="a"}`:       z,
		`queue_other{job="a"}`:      x2,
		`DCGM_FI_DEV_SM_CLOCK{i=1}`: x1,
	})
	ng := newEngine(t)
	end := at(n - 1)
	// The window (end − 30m, end] holds exactly the n samples.
	const win = "[30m:15s]"
	s := func(v []float64, name string) causal.Series { return causal.Series{Name: name, Values: v} }

	t.Run("granger", func(t *testing.T) {
		v, _ := instant(t, ng, db, `granger(latency`+win+`, driver`+win+`, 4)`, end)
		for _, c := range []struct {
			k string
			x []float64
		}{{"one", x1}, {"two", x2}} {
			want, err := causal.Granger(s(y, "y"), s(c.x, "x"), nil, 4)
			if err != nil {
				t.Fatal(err)
			}
			best := want.Tests[want.BestAIC-1]
			f, ls := get(t, v, "k", c.k, "statistic", "f")
			closeTo(t, c.k+" F", f, best.F, 1e-12)
			if ls.Get("lag") != strconv.Itoa(want.BestAIC) || ls.Get("candidate") != `driver{job="a", k="`+c.k+`"}` {
				t.Errorf("%s labels %s, want lag %d", c.k, ls, want.BestAIC)
			}
			p, _ := get(t, v, "k", c.k, "statistic", "p_value")
			closeTo(t, c.k+" p", p, best.PValue, 1e-9)
			lb, _ := get(t, v, "k", c.k, "statistic", "lag_bic")
			closeTo(t, c.k+" BIC lag", lb, float64(want.BestBIC), 0)
			ls2, _ := get(t, v, "k", c.k, "statistic", "lag_seconds")
			closeTo(t, c.k+" lag seconds", ls2, float64(want.BestAIC)*15, 0)
		}
		// x1 drives y two steps later; x2 is noise.
		if p, _ := get(t, v, "k", "one", "statistic", "q_value"); p > 1e-6 {
			t.Errorf("driver one q = %v, want tiny", p)
		}
		if p, _ := get(t, v, "k", "two", "statistic", "p_value"); p < 0.01 {
			t.Errorf("noise driver p = %v, want large", p)
		}
		// With the confounder as conditioning series.
		v, _ = instant(t, ng, db, `granger(latency`+win+`, driver{k="one"}`+win+`, 3, confounder`+win+`)`, end)
		want, err := causal.Granger(s(y, "y"), s(x1, "x"), []causal.Series{s(z, "z")}, 3)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := get(t, v, "statistic", "f")
		closeTo(t, "conditional F", f, want.Tests[want.BestAIC-1].F, 1e-12)
	})

	t.Run("lagged_correlation", func(t *testing.T) {
		v, _ := instant(t, ng, db, `lagged_correlation(latency`+win+`, driver{k="one"}`+win+`, 5)`, end)
		want, err := causal.PrewhitenedCCF(s(x1, "x"), s(y, "y"), 5, -1)
		if err != nil {
			t.Fatal(err)
		}
		r, ls := get(t, v, "statistic", "correlation")
		closeTo(t, "correlation", r, want.BestCorr, 1e-12)
		if ls.Get("lag") != "2" || want.BestLag != 2 {
			t.Errorf("lag label %q, reference %d; x1 leads y by 2", ls.Get("lag"), want.BestLag)
		}
		lo, _ := get(t, v, "statistic", "lower")
		hi, _ := get(t, v, "statistic", "upper")
		closeTo(t, "lower", lo, want.Lower, 1e-12)
		closeTo(t, "upper", hi, want.Upper, 1e-12)
		pv, _ := get(t, v, "statistic", "p_value")
		closeTo(t, "p_value", pv, want.PValue, 1e-12)
	})

	t.Run("backdoor_effect", func(t *testing.T) {
		v, _ := instant(t, ng, db, `backdoor_effect(latency`+win+`, driver{k="one"}`+win+`, confounder`+win+`)`, end)
		want, err := causal.BackdoorEffect(s(y, "y"), s(x1, "x"), []causal.Series{s(z, "z")}, -1)
		if err != nil {
			t.Fatal(err)
		}
		for stat, w := range map[string]float64{
			"effect": want.Coef, "std_error": want.StdErr, "lower": want.Lower, "upper": want.Upper, "p_value": want.PValue, "q_value": want.PValue,
		} {
			got, _ := get(t, v, "statistic", stat)
			closeTo(t, stat, got, w, 1e-12)
		}
	})

	t.Run("counterfactual", func(t *testing.T) {
		// Baseline: the first 10 minutes, the first 40 points.
		v, _ := instant(t, ng, db, `counterfactual(latency`+win+`, driver{k="one"}`+win+`, 600, confounder`+win+`)`, end)
		want, err := causal.Counterfactual(s(y, "y"), s(x1, "x"), []causal.Series{s(z, "z")},
			causal.Window{Start: 0, End: n}, causal.Baseline{Window: causal.Window{Start: 0, End: 40}})
		if err != nil {
			t.Fatal(err)
		}
		for stat, w := range map[string]float64{
			"counterfactual": want.Series[n-1], "observed": y[n-1], "delta": want.Delta[n-1],
			"effect": want.Effect.Coef, "baseline": want.Baseline,
		} {
			got, _ := get(t, v, "statistic", stat)
			closeTo(t, stat, got, w, 1e-12)
		}
	})

	t.Run("root_cause and robust_score", func(t *testing.T) {
		// A change at point 80: the clock drops, the queue explodes.
		clock := make([]float64, n)
		queue := make([]float64, n)
		noise := make([]float64, n)
		r := rand.New(rand.NewPCG(5, 5))
		for i := range n {
			clock[i] = 1980 + 5*r.NormFloat64()
			if i >= 80 {
				clock[i] -= 800
			}
			queue[i] = 0.05 + 0.01*r.NormFloat64() + math.Max(0, 1900-clock[i])*0.01
			noise[i] = r.NormFloat64()
		}
		db := openDB(t, map[string][]float64{
			`DCGM_FI_DEV_SM_CLOCK{instance="a"}`:            clock,
			`vllm:request_queue_time_seconds{instance="a"}`: queue,
			`tailroot_page_faults_total{instance="a"}`:      noise,
			`ttft{instance="a"}`:                            queue,
		})
		q := `root_cause(ttft` + win + `, {__name__=~"DCGM_.*|vllm:.*|tailroot_.*"}` + win + `)`
		v, _ := instant(t, ng, db, q, end)
		cands := []rca.Candidate{
			{Name: `DCGM_FI_DEV_SM_CLOCK{instance="a"}`, Metric: "DCGM_FI_DEV_SM_CLOCK", Labels: map[string]string{"__name__": "DCGM_FI_DEV_SM_CLOCK", "instance": "a"}, Values: clock},
			{Name: `tailroot_page_faults_total{instance="a"}`, Metric: "tailroot_page_faults_total", Labels: map[string]string{"__name__": "tailroot_page_faults_total", "instance": "a"}, Values: noise},
			{Name: `vllm:request_queue_time_seconds{instance="a"}`, Metric: "vllm:request_queue_time_seconds", Labels: map[string]string{"__name__": "vllm:request_queue_time_seconds", "instance": "a"}, Values: queue},
		}
		want, err := rca.Rank(s(queue, "ttft"), cands, rca.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if want.Ranking[0].Name != cands[0].Name {
			t.Fatalf("reference ranks %s first, want the clock", want.Ranking[0].Name)
		}
		for _, w := range want.Ranking {
			rank, ls := get(t, v, "candidate", w.Name, "statistic", "rank")
			closeTo(t, w.Name+" rank", rank, float64(w.Rank), 0)
			sc, _ := get(t, v, "candidate", w.Name, "statistic", "score")
			closeTo(t, w.Name+" score", sc, w.Score, 1e-12)
			qv, _ := get(t, v, "candidate", w.Name, "statistic", "q_value")
			closeTo(t, w.Name+" q", qv, w.QValue, 1e-12)
			if ls.Get("node") != w.Node {
				t.Errorf("%s node label %q, want %q", w.Name, ls.Get("node"), w.Node)
			}
		}
		ct, _ := get(t, v, "candidate", cands[0].Name, "statistic", "change_time")
		closeTo(t, "change time", ct, float64(at(want.ChangePoint).Unix()), 0)

		v, _ = instant(t, ng, db, `robust_score(ttft`+win+`, {__name__=~"DCGM_.*|vllm:.*|tailroot_.*"}`+win+`)`, end)
		cs := []causal.Series{s(clock, cands[0].Name), s(noise, cands[1].Name), s(queue, cands[2].Name)}
		base, err := causal.RobustScores(cs, want.ChangePoint, false)
		if err != nil {
			t.Fatal(err)
		}
		for k, b := range base {
			sc, _ := get(t, v, "candidate", b.Name, "statistic", "score")
			closeTo(t, b.Name+" robust score", sc, b.Score, 1e-12)
			rk, _ := get(t, v, "candidate", b.Name, "statistic", "rank")
			closeTo(t, b.Name+" robust rank", rk, float64(k+1), 0)
		}
	})

	t.Run("drift", func(t *testing.T) {
		// The last 15 minutes against the 15 before.
		v, _ := instant(t, ng, db, `drift(driver[15m], driver[15m] offset 15m, 5)`, end)
		for _, c := range []struct {
			k string
			x []float64
		}{{"one", x1}, {"two", x2}} {
			cur, ref := s(c.x[60:], "cur"), s(c.x[:60], "ref")
			d, p, err := causal.KSTest(ref, cur)
			if err != nil {
				t.Fatal(err)
			}
			psi, err := causal.PSI(ref, cur, 5)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := get(t, v, "k", c.k, "statistic", "ks")
			closeTo(t, c.k+" ks", got, d, 1e-15)
			got, _ = get(t, v, "k", c.k, "statistic", "ks_p_value")
			closeTo(t, c.k+" ks p", got, p, 1e-12)
			got, _ = get(t, v, "k", c.k, "statistic", "psi")
			closeTo(t, c.k+" psi", got, psi, 1e-12)
		}
	})

	t.Run("change_point", func(t *testing.T) {
		v, _ := instant(t, ng, db, `change_point(driver{k="two"}`+win+`)`, end)
		want, err := causal.BOCPD(s(x2, "x"), causal.BOCPDOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := get(t, v, "statistic", "probability")
		closeTo(t, "probability", p, want.BestProb, 1e-12)
		ct, _ := get(t, v, "statistic", "change_time")
		closeTo(t, "change time", ct, float64(at(want.Best).Unix()), 0)
	})
}
