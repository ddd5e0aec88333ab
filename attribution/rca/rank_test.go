package rca

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/tailroot/tailroot/attribution/causal"
)

// chain is a two-node graph a → b.
func chain(t *testing.T) *Graph {
	t.Helper()
	g, err := NewGraph([]Node{{Name: "a", Family: "f"}, {Name: "b", Family: "f"}}, []Edge{{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func seq(n int, f func(t int) float64) []float64 {
	v := make([]float64, n)
	for t := range v {
		v[t] = f(t)
	}
	return v
}

// TestRankHandChecked: a = 1..10 then 20 (ten times); b = 2a + 1 exactly;
// c is constant and unmapped. With the change point given at 10:
//
//	a: median(1..10) = 5.5, Q25 = 3.25, Q75 = 7.75 (numpy linear), IQR 4.5,
//	   so Score = Shift = |20 − 5.5|/4.5 = 29/9 = 3.2222…; the step test
//	   has b̂ = 20 − 5.5 = 14.5 and the post residuals are exactly 0.
//	b: its parent a explains it exactly: residual 0 (up to rounding), so
//	   Score ≈ 0, not anomalous, explained by a.
//	c: constant, IQR 0 → unit 1, departure 0: Score 0.
func TestRankHandChecked(t *testing.T) {
	a := seq(20, func(t int) float64 {
		if t < 10 {
			return float64(t + 1)
		}
		return 20
	})
	b := seq(20, func(t int) float64 { return 2*a[t] + 1 })
	c := seq(20, func(int) float64 { return 5 })
	res, err := Rank(causal.Series{Name: "target", Values: a}, []Candidate{
		{Name: "b", Node: "b", Values: b},
		{Name: "c", Metric: "unmapped_metric", Values: c},
		{Name: "a", Node: "a", Values: a},
	}, Options{Graph: chain(t), ChangePoint: 10, MinBefore: 8})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Ranked{}
	for _, r := range res.Ranking {
		by[r.Name] = r
	}
	if res.Ranking[0].Name != "a" {
		t.Fatalf("first = %s, want a", res.Ranking[0].Name)
	}
	ra := by["a"]
	if math.Abs(ra.Score-29.0/9) > 1e-12 || math.Abs(ra.Shift-29.0/9) > 1e-12 || ra.BARO != ra.Score {
		t.Errorf("a: Score %v Shift %v BARO %v, want 29/9", ra.Score, ra.Shift, ra.BARO)
	}
	if !ra.Anomalous || ra.Explained != "" || ra.PValue > 1e-6 {
		t.Errorf("a: anomalous %v explained %q p %v; want anomalous, unexplained, p < 1e-6", ra.Anomalous, ra.Explained, ra.PValue)
	}
	rb := by["b"]
	if rb.Score > 1e-3 || rb.Anomalous || rb.Explained != "a" || !slices.Equal(rb.Parents, []string{"a"}) {
		t.Errorf("b: Score %v anomalous %v explained %q parents %v; want ~0, false, a, [a]", rb.Score, rb.Anomalous, rb.Explained, rb.Parents)
	}
	if rb.BARO != (2*20+1-12.0)/9 {
		// b's own robust score: median 12, IQR 9, post 41 → 29/9 as well.
		t.Errorf("b: BARO %v, want 29/9", rb.BARO)
	}
	rc := by["c"]
	if rc.Score != 0 || rc.Node != "" || rc.Family != FamilyOther {
		t.Errorf("c: Score %v node %q family %q, want 0, unmapped, other", rc.Score, rc.Node, rc.Family)
	}
}

// TestRankEffectLargerThanCause is the case plain BARO gets wrong: the
// cause moves 6 IQRs, its effect (a queue that grows nonlinearly) 500. The
// graph puts the cause first and marks the effect as explained by it.
func TestRankEffectLargerThanCause(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n, cp := 200, 140
	cause := seq(n, func(t int) float64 {
		v := 10 + r.NormFloat64()
		if t >= cp {
			v += 8
		}
		return v
	})
	effect := seq(n, func(t int) float64 {
		// Queue-like: flat while the cause is low, explodes past 15.
		return 0.05*cause[t] + math.Max(0, cause[t]-15)*50 + 0.02*r.NormFloat64()
	})
	noise := seq(n, func(int) float64 { return r.NormFloat64() })
	cands := []Candidate{
		{Name: "queue", Metric: "vllm:request_queue_time_seconds", Values: effect},
		{Name: "clock", Metric: "DCGM_FI_DEV_SM_CLOCK", Values: cause},
		{Name: "pf", Metric: "tailroot_page_faults_total", Values: noise},
	}
	// clock is not a parent of queue in the serving graph; its descendant
	// prefill is. Use a graph where it is a grandparent via prefill, with no
	// prefill candidate: the regression has no parents, the graph still
	// explains.
	res, err := Rank(causal.Series{Name: "ttft", Values: effect}, cands, Options{ChangePoint: cp})
	if err != nil {
		t.Fatal(err)
	}
	if res.Baseline[0].Name != "queue" {
		t.Fatalf("BARO ranks %s first; the test wants the case BARO gets wrong", res.Baseline[0].Name)
	}
	if res.Ranking[0].Name != "clock" {
		t.Fatalf("ranking %v, want clock first", names(res.Ranking))
	}
	q := res.Ranking[slices.IndexFunc(res.Ranking, func(r Ranked) bool { return r.Name == "queue" })]
	if !q.Anomalous || q.Explained != "clock" || q.Rank != 2 {
		t.Errorf("queue: anomalous %v explained %q rank %d; want true, clock, 2", q.Anomalous, q.Explained, q.Rank)
	}
}

// TestRankGroups: an anomaly on instance x does not explain one on y.
func TestRankGroups(t *testing.T) {
	n, cp := 60, 40
	step := func(h float64) []float64 {
		r := rand.New(rand.NewPCG(uint64(h), 9))
		return seq(n, func(t int) float64 {
			v := r.NormFloat64()
			if t >= cp {
				v += h
			}
			return v
		})
	}
	cands := []Candidate{
		{Name: "a@x", Node: "a", Labels: map[string]string{"instance": "x"}, Values: step(20)},
		{Name: "b@y", Node: "b", Labels: map[string]string{"instance": "y"}, Values: step(10)},
		{Name: "fleet", Node: "b", Values: step(12)},
	}
	res, err := Rank(causal.Series{Name: "t", Values: step(5)}, cands, Options{Graph: chain(t), ChangePoint: cp})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Ranked{}
	for _, r := range res.Ranking {
		by[r.Name] = r
	}
	if by["b@y"].Explained != "" || !by["b@y"].Anomalous {
		t.Errorf("b@y: explained %q anomalous %v; instance x must not explain instance y", by["b@y"].Explained, by["b@y"].Anomalous)
	}
	// A candidate without the grouping label links to every group.
	if by["fleet"].Explained != "a@x" {
		t.Errorf("fleet: explained %q, want a@x", by["fleet"].Explained)
	}
}

func names(rs []Ranked) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// naiveQuantile is numpy.percentile(v, 100p) (linear), written out.
func naiveQuantile(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	pos := p * float64(len(s)-1)
	lo := math.Floor(pos)
	hi := math.Ceil(pos)
	return s[int(lo)] + (pos-lo)*(s[int(hi)]-s[int(lo)])
}

// naiveFit solves the normal equations XᵀX β = Xᵀy with gonum, a different
// route from the QR the package uses.
func naiveFit(y []float64, cols [][]float64) []float64 {
	n, k := len(y), len(cols)+1
	x := mat.NewDense(n, k, nil)
	for t := range n {
		x.Set(t, 0, 1)
		for j, c := range cols {
			x.Set(t, j+1, c[t])
		}
	}
	var xtx mat.Dense
	xtx.Mul(x.T(), x)
	var xty mat.VecDense
	xty.MulVec(x.T(), mat.NewVecDense(n, y))
	var beta mat.VecDense
	if err := beta.SolveVec(&xtx, &xty); err != nil {
		panic(err)
	}
	return beta.RawVector().Data
}

// naiveShiftP is the Newey–West (Bartlett, lag L, no small-sample factor)
// p-value of b in r = a + b·step, written out from the sandwich formula
// (XᵀX)⁻¹ S (XᵀX)⁻¹, S = Σ_l w_l Σ_t u_t u_{t−l} (x_t x_{t−l}ᵀ + x_{t−l} x_tᵀ)
// with w_0 = ½ counted once.
func naiveShiftP(r []float64, cp, lag int) float64 {
	n := len(r)
	step := seq(n, func(t int) float64 { return b2f(t >= cp) })
	beta := naiveFit(r, [][]float64{step})
	u := seq(n, func(t int) float64 { return r[t] - beta[0] - beta[1]*step[t] })
	var s [2][2]float64
	for l := 0; l <= lag; l++ {
		w := 1 - float64(l)/float64(lag+1)
		for t := l; t < n; t++ {
			xa := [2]float64{1, step[t]}
			xb := [2]float64{1, step[t-l]}
			for i := range 2 {
				for j := range 2 {
					v := u[t] * u[t-l] * xa[i] * xb[j]
					if l == 0 {
						s[i][j] += v
					} else {
						s[i][j] += w * (v + u[t]*u[t-l]*xb[i]*xa[j])
					}
				}
			}
		}
	}
	// (XᵀX)⁻¹ for columns [1, step]: n0 = cp zeros, n1 = n − cp ones.
	n1 := float64(n - cp)
	xtx := mat.NewDense(2, 2, []float64{float64(n), n1, n1, n1})
	var inv mat.Dense
	if err := inv.Inverse(xtx); err != nil {
		panic(err)
	}
	var cov, tmp mat.Dense
	tmp.Mul(&inv, mat.NewDense(2, 2, []float64{s[0][0], s[0][1], s[1][0], s[1][1]}))
	cov.Mul(&tmp, &inv)
	z := beta[1] / math.Sqrt(cov.At(1, 1))
	return math.Erfc(math.Abs(z) / math.Sqrt2)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestRankMatchesNaiveReference recomputes Score, Shift, BARO and the
// p-value of every candidate of a random three-node problem with the
// formulas written out plainly (normal equations, explicit quantiles, an
// explicit Newey–West sum), independently of the package's QR and HAC.
func TestRankMatchesNaiveReference(t *testing.T) {
	g, err := NewGraph([]Node{{Name: "p", Family: "f"}, {Name: "q", Family: "f"}, {Name: "c", Family: "f"}},
		[]Edge{{"p", "c"}, {"q", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(42, 7))
	n, cp, lag := 120, 70, 11
	p := seq(n, func(t int) float64 { return 3 + r.NormFloat64() + b2f(t >= cp)*4 })
	q := seq(n, func(int) float64 { return r.ExpFloat64() })
	c := seq(n, func(t int) float64 { return 1 + 0.7*p[t] - 2*q[t] + 0.3*r.NormFloat64() + b2f(t >= cp+10)*1.5 })
	cands := []Candidate{{Name: "p", Node: "p", Values: p}, {Name: "q", Node: "q", Values: q}, {Name: "c", Node: "c", Values: c}}
	res, err := Rank(causal.Series{Name: "t", Values: c}, cands, Options{Graph: g, ChangePoint: cp, HACLag: lag})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Ranked{}
	for _, rk := range res.Ranking {
		got[rk.Name] = rk
	}
	robust := func(v []float64) (score, shift float64) {
		pre, post := v[:cp], v[cp:]
		med := naiveQuantile(pre, 0.5)
		iqr := naiveQuantile(pre, 0.75) - naiveQuantile(pre, 0.25)
		for _, x := range post {
			score = math.Max(score, math.Abs(x-med)/iqr)
		}
		shift = math.Max(math.Abs(naiveQuantile(post, 0.25)-med), math.Abs(naiveQuantile(post, 0.75)-med)) / iqr
		return score, shift
	}
	beta := naiveFit(c[:cp], [][]float64{p[:cp], q[:cp]})
	resid := seq(n, func(t int) float64 { return c[t] - beta[0] - beta[1]*p[t] - beta[2]*q[t] })
	want := map[string][]float64{"p": p, "q": q, "c": resid}
	for name, v := range want {
		score, shift := robust(v)
		pv := naiveShiftP(v, cp, lag)
		g := got[name]
		close := func(what string, a, b float64) {
			if math.Abs(a-b) > 1e-8*math.Max(1, math.Abs(b)) {
				t.Errorf("%s %s = %.12g, reference %.12g", name, what, a, b)
			}
		}
		close("Score", g.Score, score)
		close("Shift", g.Shift, shift)
		close("PValue", g.PValue, pv)
		own, _ := robust(cands[slices.IndexFunc(cands, func(c Candidate) bool { return c.Name == name })].Values)
		close("BARO", g.BARO, own)
	}
	// BH within the one family of three: q_(i) = min_{j≥i} 3 p_(j)/j.
	ps := []float64{got["p"].PValue, got["q"].PValue, got["c"].PValue}
	idx := []int{0, 1, 2}
	slices.SortFunc(idx, func(a, b int) int { return int(math.Copysign(1, ps[a]-ps[b])) })
	qs := make([]float64, 3)
	run := 1.0
	for k := 2; k >= 0; k-- {
		run = math.Min(run, 3*ps[idx[k]]/float64(k+1))
		qs[idx[k]] = run
	}
	for i, name := range []string{"p", "q", "c"} {
		if math.Abs(got[name].QValue-qs[i]) > 1e-12 {
			t.Errorf("%s QValue %v, reference %v", name, got[name].QValue, qs[i])
		}
	}
	if !slices.Equal(got["c"].Parents, []string{"p", "q"}) && !slices.Equal(got["c"].Parents, []string{"q", "p"}) {
		t.Errorf("c parents %v, want p and q", got["c"].Parents)
	}
}

func TestRankBadInput(t *testing.T) {
	ok := seq(40, func(t int) float64 { return float64(t % 7) })
	for _, c := range []struct {
		name   string
		target []float64
		cands  []Candidate
		opts   Options
		want   error
		substr string
	}{
		{"nan", ok, []Candidate{{Name: "x", Values: seq(40, func(t int) float64 {
			if t == 17 {
				return math.NaN()
			}
			return 1
		})}}, Options{ChangePoint: 20}, causal.ErrNaN, "index 17"},
		{"inf target", seq(40, func(t int) float64 {
			if t == 3 {
				return math.Inf(1)
			}
			return 1
		}), nil, Options{ChangePoint: 20}, causal.ErrNaN, "target"},
		{"misaligned", ok, []Candidate{{Name: "x", Values: ok[:39]}}, Options{ChangePoint: 20}, causal.ErrLength, `"x" has 39 points, the target 40`},
		{"short before", ok, []Candidate{{Name: "x", Values: ok}}, Options{ChangePoint: 5}, causal.ErrTooShort, "need 8"},
		{"short after", ok, []Candidate{{Name: "x", Values: ok}}, Options{ChangePoint: 38}, causal.ErrTooShort, "2 after"},
		{"short target", ok[:6], nil, Options{}, causal.ErrTooShort, "need 8 before"},
		{"unknown node", ok, []Candidate{{Name: "x", Node: "nope", Values: ok}}, Options{ChangePoint: 20}, causal.ErrArgument, `node "nope"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Rank(causal.Series{Name: "target", Values: c.target}, c.cands, c.opts)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.substr) {
				t.Fatalf("err = %v, want %v containing %q", err, c.want, c.substr)
			}
		})
	}
}

// TestRankConstantSeries: constant candidates and a constant target are not
// errors. A constant candidate scores 0; one that is constant before the
// change and moves after is scored in its own units (IQR 0 → 1), as BARO.
func TestRankConstantSeries(t *testing.T) {
	n, cp := 30, 20
	flat := seq(n, func(int) float64 { return 3 })
	jump := seq(n, func(t int) float64 { return 3 + 4*b2f(t >= cp) })
	res, err := Rank(causal.Series{Name: "flat target", Values: flat}, []Candidate{
		{Name: "flat", Values: flat}, {Name: "jump", Values: jump},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ChangePoint < 8 {
		t.Errorf("change point %d on a flat target, want one leaving the baseline", res.ChangePoint)
	}
	res, err = Rank(causal.Series{Name: "t", Values: jump}, []Candidate{
		{Name: "flat", Values: flat}, {Name: "jump", Values: jump},
	}, Options{ChangePoint: cp})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Ranking[0]; r.Name != "jump" || r.Score != 4 || r.PValue != 0 {
		t.Errorf("first %s score %v p %v, want jump, 4, 0", r.Name, r.Score, r.PValue)
	}
	if r := res.Ranking[1]; r.Score != 0 || r.PValue != 1 {
		t.Errorf("flat: score %v p %v, want 0, 1", r.Score, r.PValue)
	}
}

// TestChangePointOnset: a step at 30 of 60 points with small noise; BOCPD's
// onset is 30, and the baseline floor keeps an early blip out.
func TestChangePointOnset(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	v := seq(60, func(t int) float64 { return 0.1*r.NormFloat64() + 5*b2f(t >= 30) })
	v[3] = 50 // a blip before the baseline floor of max(8, 60/5) = 12
	cp, p, err := ChangePoint(causal.Series{Name: "x", Values: v}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cp != 30 || p < 0.5 {
		t.Errorf("change point %d (p %v), want 30", cp, p)
	}
}
