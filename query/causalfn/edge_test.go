package causalfn

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/attribution/causal"
)

// promqltest's load starts at the Unix epoch; 15 s steps from 0 are on
// every subquery's grid.
func epochAt(i int) time.Time { return time.Unix(0, 0).Add(time.Duration(i) * step) }

// TestHandChecked holds cases whose answers are worked out by hand.
func TestHandChecked(t *testing.T) {
	st := promqltest.LoadedStorage(t, `
load 15s
	x{job="a"}        3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3 2 3 8 4
	y{job="a"}        0 0 3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3 2 3
	linear{job="a"}   11 5 14 5 17 29 8 20 17 11 17 26 29 23 29 11 8 11 26 14
	step{job="a"}     0.12 -0.05 0.08 0.01 -0.1 0.04 -0.02 0.07 10.03 9.95 10.1 9.98 10.02 9.91 10.06 10 9.97 10.04 9.93 10.08
	ramp{job="a"}     1 2 3 4 5 6 7 8 9 10 20 20 20 20 20 20 20 20 20 20
	flat{job="a"}     7 7 7 7 7 7 7 7 7 7 7 7 7 7 7 7 7 7 7 7
	dist{job="a"}     1 2 3 4 5 6 7 8
`)
	ng := newEngine(t)
	end := epochAt(19)
	const win = "[5m:15s]" // (end − 5m, end]: all 20 points

	t.Run("lagged correlation of a two-step shift", func(t *testing.T) {
		// y_t = x_{t−2} for t ≥ 2, so after prewhitening both with x's AR
		// filter the pairs at lag 2 are equal up to a constant: r = 1.
		v, _ := instant(t, ng, st, `lagged_correlation(y`+win+`, x`+win+`, 3)`, end)
		r, ls := get(t, v, "statistic", "correlation")
		if ls.Get("lag") != "2" || r < 1-1e-12 {
			t.Errorf("lag %s r %v, want lag 2, r = 1", ls.Get("lag"), r)
		}
		sec, _ := get(t, v, "statistic", "lag_seconds")
		if sec != 30 {
			t.Errorf("lag_seconds %v, want 30", sec)
		}
	})

	t.Run("backdoor effect of an exact line", func(t *testing.T) {
		// linear = 2 + 3x exactly: the effect is 3.
		v, _ := instant(t, ng, st, `backdoor_effect(linear`+win+`, x`+win+`)`, end)
		b, _ := get(t, v, "statistic", "effect")
		closeTo(t, "effect", b, 3, 1e-12)
	})

	t.Run("counterfactual of an exact line", func(t *testing.T) {
		// Baseline: the first 60 s, points 0..3 of x: mean (3+1+4+1)/4 = 2.25.
		// Counterfactual at the end: 2 + 3·2.25 = 8.75; observed 14 (x = 4);
		// delta = 3·(4 − 2.25) = 5.25.
		v, _ := instant(t, ng, st, `counterfactual(linear`+win+`, x`+win+`, 60)`, end)
		for stat, want := range map[string]float64{"baseline": 2.25, "counterfactual": 8.75, "observed": 14, "delta": 5.25, "effect": 3} {
			got, _ := get(t, v, "statistic", stat)
			closeTo(t, stat, got, want, 1e-9)
		}
	})

	t.Run("change point of a step", func(t *testing.T) {
		// The level moves from ~0 to ~10 at point 8, time 120 s.
		v, _ := instant(t, ng, st, `change_point(step`+win+`)`, end)
		ct, _ := get(t, v, "statistic", "change_time")
		p, _ := get(t, v, "statistic", "probability")
		if ct != 120 || p < 0.9 {
			t.Errorf("change at %v s with probability %v, want 120 s, > 0.9", ct, p)
		}
	})

	t.Run("robust score", func(t *testing.T) {
		// Change at point 10; ramp before it is 1..10: median 5.5, IQR
		// 7.75 − 3.25 = 4.5; after it 20: score (20 − 5.5)/4.5 = 29/9.
		// flat scores 0 (IQR 0 → 1, departure 0).
		v, _ := instant(t, ng, st, `robust_score(ramp`+win+`, {__name__=~"ramp|flat"}`+win+`)`, end)
		sc, _ := get(t, v, "candidate", `ramp{job="a"}`, "statistic", "score")
		closeTo(t, "ramp score", sc, 29.0/9, 1e-12)
		sc, _ = get(t, v, "candidate", `flat{job="a"}`, "statistic", "score")
		closeTo(t, "flat score", sc, 0, 0)
		ct, _ := get(t, v, "candidate", `flat{job="a"}`, "statistic", "change_time")
		closeTo(t, "change time", ct, 150, 0)
	})

	t.Run("drift and statistic", func(t *testing.T) {
		// dist over (105 s − 60 s, 105 s] is 5 6 7 8, and an hour before
		// ... the reference (45 s − 60 s, 45 s] is 1 2 3 4. Every current
		// value exceeds every reference value: KS D = 1. PSI with ten
		// quantile bins of the reference (edges 1.3, 1.6, …, 3.7): the
		// reference puts 1/4 in bins 0, 3, 6 and 9, the current 1 in bin 9,
		// empty bins floored at 1e-4:
		//   3·(1e-4 − 0.25)·ln(1e-4/0.25) + 0.75·ln 4
		//   = 3·0.2499·7.8240460109 + 1.0397207708 = 6.9054080652.
		v, _ := instant(t, ng, st, `drift(dist[1m], dist[1m] offset 1m)`, epochAt(7))
		d, _ := get(t, v, "statistic", "ks")
		psi, _ := get(t, v, "statistic", "psi")
		closeTo(t, "ks", d, 1, 0)
		closeTo(t, "psi", psi, 6.9054080652, 1e-9)
		_, p, err := causal.KSTest(causal.Series{Name: "r", Values: []float64{1, 2, 3, 4}}, causal.Series{Name: "c", Values: []float64{5, 6, 7, 8}})
		if err != nil {
			t.Fatal(err)
		}
		kp, _ := get(t, v, "statistic", "ks_p_value")
		closeTo(t, "ks p", kp, p, 1e-15)

		v, _ = instant(t, ng, st, `statistic(drift(dist[1m], dist[1m] offset 1m), "ks")`, epochAt(7))
		if len(v) != 1 || v[0].F != 1 || v[0].Metric.Has("statistic") || v[0].Metric.Get("candidate") != `dist{job="a"}` {
			t.Errorf("statistic(…, \"ks\") = %v, want one element 1 without the statistic label", v)
		}
	})

	t.Run("topk over one statistic", func(t *testing.T) {
		v, _ := instant(t, ng, st, `topk(1, statistic(backdoor_effect(linear`+win+`, {__name__=~"x|y"}`+win+`), "effect"))`, end)
		if len(v) != 1 || v[0].Metric.Get("candidate") != `x{job="a"}` {
			t.Errorf("topk = %v, want the x effect", v)
		}
	})
}

// TestRangeQueryMatchesInstant: a range query of a causal function equals
// instant queries at each step (each step evaluates its own trailing
// window), so results are ordinary series.
func TestRangeQueryMatchesInstant(t *testing.T) {
	y, x1, _, _ := workload(120)
	db := openDB(t, map[string][]float64{`latency{job="a"}`: y, `driver{job="a"}`: x1})
	ng := newEngine(t)
	q := `statistic(backdoor_effect(latency[10m:15s], driver[10m:15s]), "effect") * 2`
	start, end := at(60), at(119)
	qry, err := ng.NewRangeQuery(context.Background(), db, nil, q, start, end, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	m := res.Value.(promql.Matrix)
	if len(m) != 1 || len(m[0].Floats) != 15 {
		t.Fatalf("range result %v, want one series of 15 points", m)
	}
	for _, p := range m[0].Floats {
		v, _ := instant(t, ng, db, q, time.UnixMilli(p.T))
		if len(v) != 1 || v[0].F != p.F {
			t.Errorf("at %d: range %v, instant %v", p.T, p.F, v)
		}
	}
}

// TestBadInput covers short, constant, NaN-containing and misaligned series
// and argument errors, each with the documented outcome.
func TestBadInput(t *testing.T) {
	st := promqltest.LoadedStorage(t, `
load 15s
	y{job="a"}        1 3 2 5 4 6 5 8 7 9 8 11 10 12 11 14 13 15 14 17
	x{job="a",k="1"}  0 1 0 3 1 2 1 5 2 3 1 6 2 4 3 7 3 5 3 8
	x{job="a",k="c"}  4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4
	flat{job="a"}     2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2
	gappy{job="a"}    0 1 0 3 1 2 1 5 2 NaN 1 6 2 4 3 7 3 5 3 8
	holes{job="a"}    0 1 0 3 1 _ 1 5 2 3 1 6 2 4 3 7 3 5 3 8
	two{k="1"}        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20
	two{k="2"}        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20
	native            {{schema:0 sum:1 count:1 buckets:[1]}}x19
`)
	ng := newEngine(t)
	end := epochAt(19)
	const win = "[5m:15s]"
	for _, c := range []struct {
		name, q string
		want    string // substring of the error
	}{
		{"short", `granger(y[1m], x{k="1"}[1m], 3)`, "too few observations"},
		{"short window names the candidate", `granger(y[1m], x{k="1"}[1m], 3)`, `candidate x{job="a", k="1"}`},
		{"constant outcome", `granger(flat` + win + `, x{k="1"}` + win + `, 2)`, "singular design"},
		{"constant only candidate", `backdoor_effect(y` + win + `, x{k="c"}` + win + `)`, `x{job="a", k="c"}`},
		{"NaN point in a lagged test", `granger(y` + win + `, gappy` + win + `, 2)`, "gap of 30s in a 15s grid"},
		// A subquery fills a missing sample by lookback, as any PromQL
		// subquery does; raw range selectors do not.
		{"missing point in a lagged test", `lagged_correlation(y[5m], holes[5m], 2)`, "no value at 75.000"},
		{"outcome with two series", `granger(two` + win + `, x` + win + `, 2)`, "argument 1 (outcome) has 2 series, want 1"},
		{"empty outcome", `granger(nothing` + win + `, x` + win + `, 2)`, "argument 1 (outcome) selects no series"},
		{"fractional lag", `granger(y` + win + `, x` + win + `, 2.5)`, "argument 3 (max_lag) must be an integer in [1, 100], got 2.5"},
		{"lag too large", `lagged_correlation(y` + win + `, x` + win + `, 500)`, "argument 3 (max_lag) must be an integer in [0, 100]"},
		{"bad baseline", `counterfactual(y` + win + `, x` + win + `, -5)`, "argument 3 (baseline_seconds) must be > 0"},
		{"bad hazard", `change_point(y` + win + `, 2)`, "argument 2 (hazard) must be in (0, 1)"},
		{"bad bins", `drift(y[1m], y[1m] offset 1m, 1)`, "argument 3 (bins) must be an integer in [2, 1000]"},
		{"native histograms", `change_point(native` + win + `)`, "holds native histograms"},
		{"instant vector where a range is needed", `granger(y, x` + win + `, 2)`, `expected type range vector in call to function "granger", got instant vector`},
		{"string where a scalar is needed", `granger(y` + win + `, x` + win + `, "2")`, `expected type scalar in call to function "granger", got string`},
		{"too few arguments", `granger(y` + win + `)`, `expected at least 3 argument(s) in call to "granger", got 1`},
		{"inside a subquery", `max_over_time(statistic(change_point(y` + win + `), "probability")[5m:1m])`, "cannot be evaluated inside a subquery"},
		{"short ranking", `root_cause(y[1m], x[1m])`, "too few observations"},
		{"duplicate candidates", `root_cause(y` + win + `, x` + win + `, x` + win + `)`, "appears twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := tryInstant(ng, st, c.q, end)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s: err = %v, want one containing %q", c.q, err, c.want)
			}
		})
	}

	t.Run("constant candidate among others is left out with a warning", func(t *testing.T) {
		v, annos := instant(t, ng, st, `granger(y`+win+`, x`+win+`, 2)`, end)
		if _, ls := get(t, v, "k", "1", "statistic", "f"); ls.Get("candidate") == "" {
			t.Error("no result for the usable candidate")
		}
		for _, s := range v {
			if s.Metric.Get("k") == "c" {
				t.Fatalf("constant candidate has a result: %v", s)
			}
		}
		w, _ := annos.AsStrings("", 0, 0)
		if len(w) != 1 || !strings.Contains(w[0], `candidate x{job="a", k="c"} left out`) || !strings.Contains(w[0], "singular") {
			t.Errorf("warnings %v, want one naming the constant candidate", w)
		}
	})

	t.Run("NaN points are dropped by lag-free functions", func(t *testing.T) {
		v, _ := instant(t, ng, st, `backdoor_effect(y`+win+`, gappy`+win+`)`, end)
		yv := []float64{1, 3, 2, 5, 4, 6, 5, 8, 7, 9, 8, 11, 10, 12, 11, 14, 13, 15, 14, 17}
		gv := []float64{0, 1, 0, 3, 1, 2, 1, 5, 2, math.NaN(), 1, 6, 2, 4, 3, 7, 3, 5, 3, 8}
		var ys, gs []float64
		for i := range yv {
			if !math.IsNaN(gv[i]) {
				ys, gs = append(ys, yv[i]), append(gs, gv[i])
			}
		}
		want, err := causal.BackdoorEffect(causal.Series{Name: "y", Values: ys}, causal.Series{Name: "g", Values: gs}, nil, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := get(t, v, "statistic", "effect")
		closeTo(t, "effect without the NaN point", got, want.Coef, 1e-12)

		v, annos := instant(t, ng, st, `change_point(gappy`+win+`)`, end)
		if len(v) != 3 {
			t.Errorf("change_point over a NaN point: %v", v)
		}
		_, info := annos.AsStrings("", 0, 0)
		if len(info) != 1 || !strings.Contains(info[0], "1 NaN or missing points") {
			t.Errorf("info %v, want one counting the dropped point", info)
		}
	})

	t.Run("a candidate covering too little of the target is left out", func(t *testing.T) {
		st := promqltest.LoadedStorage(t, `
load 15s
	y{job="a"}  1 3 2 5 4 6 5 8 7 9 8 11 10 12 11 14 13 15 14 17
	x{k="1"}    0 1 0 3 1 2 1 5 2 3 1 6 2 4 3 7 3 5 3 8
	x{k="late"} _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 7 3 5 3 8
`)
		v, annos := instant(t, ng, st, `robust_score(y`+win+`, x`+win+`)`, end)
		for _, s := range v {
			if s.Metric.Get("k") == "late" {
				t.Fatalf("late candidate ranked: %v", s)
			}
		}
		w, _ := annos.AsStrings("", 0, 0)
		if len(w) != 1 || !strings.Contains(w[0], "values at 5 of the target's 20 points") {
			t.Errorf("warnings %v", w)
		}
	})
}

// TestMisaligned: raw range selectors over series scraped at different
// offsets share no timestamp: a clear error. The same data through
// subqueries is aligned on the subquery grid and works.
func TestMisaligned(t *testing.T) {
	y, x1, _, _ := workload(80)
	o := openDB(t, map[string][]float64{`latency{job="a"}`: y})
	app := o.AppenderV2(context.Background())
	for i, v := range x1 {
		ls := labels.FromStrings(model.MetricNameLabel, "driver", "job", "a")
		if _, err := app.Append(0, ls, 0, at(i).Add(7*time.Second).UnixMilli(), v, nil, nil, storage.AOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	ng := newEngine(t)
	end := at(79).Add(10 * time.Second)
	_, _, err := tryInstant(ng, o, `granger(latency[15m], driver[15m], 2)`, end)
	if err == nil || !strings.Contains(err.Error(), "no timestamps in common") || !errors.Is(err, causal.ErrLength) {
		t.Fatalf("raw selectors: err = %v, want no timestamps in common", err)
	}
	v, _ := instant(t, ng, o, `granger(latency[15m:15s], driver[15m:15s], 2)`, end)
	if p, _ := get(t, v, "statistic", "p_value"); p > 1e-6 {
		t.Errorf("aligned by subquery: p = %v, want the lag-2 drive detected", p)
	}
}
