package attribution

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestGrid(t *testing.T) {
	g := DefaultGrid()
	u := g.Upper()
	if len(u) != 89 || u[0] != 1.0/1024 || u[40] != 1 || u[88] != 4096 {
		t.Fatalf("default grid: %d bounds, first %v, u[40] %v, last %v", len(u), u[0], u[40], u[88])
	}
	// Schema-2 native histogram bounds are 2^(j/4); 2^(1/4) = 1.189207115…
	if !approx(u[41], 1.189207115002721, 1e-15) {
		t.Errorf("u[41] = %v", u[41])
	}
	// Upper bounds are inclusive: 1 is in the bucket whose upper bound is 1.
	for _, c := range []struct {
		v float64
		b int
	}{{0, 0}, {1.0 / 1024, 0}, {0.001, 1}, {1, 40}, {1.0000001, 41}, {4096, 88}, {5000, 89}} {
		if got := g.Bucket(c.v); got != c.b {
			t.Errorf("Bucket(%v) = %d, want %d", c.v, got, c.b)
		}
	}
	lo, hi := g.Edges(89)
	if lo != 4096 || !math.IsInf(hi, 1) {
		t.Errorf("overflow edges %v %v", lo, hi)
	}
	if _, err := NewGrid([]float64{1, 1}); err == nil {
		t.Error("non-increasing grid accepted")
	}
	if _, err := ExpGrid(1, 1, 3); err == nil {
		t.Error("growth 1 accepted")
	}
}

func TestTailMeanAccumulatorsHandWorked(t *testing.T) {
	// tenRequests on the grid [0,4] (4,8] (8,16] (16,∞):
	//	bucket 0: S 2 3 4    (requests 1 5 3)  count 3
	//	bucket 1: S 5 6 7 8  (requests 8 0 7 2) count 4
	//	bucket 2: S 10 12    (requests 4 6)    count 2, sums q 8, pf 7, dc 7
	//	bucket 3: S 20       (request 9)       count 1, sums q 8, pf 4, dc 8
	// p = 0.8: n = 10, h = 7.2, c = 8; cumulative 3 7 9 10, so b* = 2,
	// C = 2, a = 9 − 8 = 1, N_a = 1.
	//	queue:   est (8 + ½·8)/2 = 6,    bounds [8/3, (8+8)/2 = 8]
	//	prefill: est (4 + ½·7)/2 = 3.75, bounds [4/3, 11/2 = 5.5]
	//	decode:  est (8 + ½·7)/2 = 5.75, bounds [8/3, 15/2 = 7.5]
	// Records (TestTailMeanHandWorked): 5.5, 4, 6.5 — inside.
	// Target: est 15.5. Bounds with above = 20, partial = 22, lo = 8,
	// hi = 16 over m ∈ {1, 2, 22/16}: lower min((20+8)/2, (20+16)/3) = 12,
	// upper max((20+16)/2, (20+22)/3, (20+22)/2.375) = 18. Records: 16.
	// q: rank 7 is in b* too (cumulative 9 > 7); before = 7, fraction
	// (7.2 − 7 + ½)/2 = 0.35, q ≈ 8 + 0.35·8 = 10.8 in [8, 16]; records
	// 10.4.
	grid, err := NewGrid([]float64{4, 8, 16})
	if err != nil {
		t.Fatal(err)
	}
	acc := Accumulate(tenRequests(t), grid)
	b, err := TailMeanAccumulators(acc, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ est, lo, hi float64 }{{6, 8.0 / 3, 8}, {3.75, 4.0 / 3, 5.5}, {5.75, 8.0 / 3, 7.5}}
	for j, w := range want {
		if !approx(b.Contrib[j], w.est, 1e-12) || !approx(b.Lower[j], w.lo, 1e-12) || !approx(b.Upper[j], w.hi, 1e-12) {
			t.Errorf("%s: %v [%v, %v], want %v [%v, %v]", b.Stages[j], b.Contrib[j], b.Lower[j], b.Upper[j], w.est, w.lo, w.hi)
		}
	}
	if !approx(b.Target, 15.5, 1e-12) || !approx(b.TargetLower, 12, 1e-12) || !approx(b.TargetUpper, 18, 1e-12) {
		t.Errorf("target %v [%v, %v], want 15.5 [12, 18]", b.Target, b.TargetLower, b.TargetUpper)
	}
	if !approx(b.Quantile, 10.8, 1e-12) || b.QuantileLower != 8 || b.QuantileUpper != 16 {
		t.Errorf("q %v [%v, %v], want 10.8 [8, 16]", b.Quantile, b.QuantileLower, b.QuantileUpper)
	}
	if b.Kind != KindEstimate || b.Method != MethodTailMeanAccumulators || b.Count != 2 {
		t.Errorf("kind %v method %v count %v", b.Kind, b.Method, b.Count)
	}
}

// TestAccumulatorBoundsHoldOnRecords checks on random data (ties included)
// that the records' tail mean per stage, the records' tail mean of S and q
// all lie inside the brackets computed from accumulators alone.
func TestAccumulatorBoundsHoldOnRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	grids := []Grid{DefaultGrid()}
	if g, err := ExpGrid(0.5, 1.5, 10); err == nil {
		grids = append(grids, g)
	}
	if g, err := NewGrid([]float64{0, 0.002, 0.004, 0.006}); err == nil { // zero-width first bucket, coarse
		grids = append(grids, g)
	}
	const tol = 1e-9
	for trial := range 500 {
		n := 1 + rng.IntN(3000)
		k := 1 + rng.IntN(7)
		p := []float64{0, 0.5, 0.9, 0.99, 0.999, 1, rng.Float64()}[rng.IntN(7)]
		cols := randCols(rng, n, k)
		reqs := mustRequests(t, stageNames(k), cols)
		grid := grids[rng.IntN(len(grids))]
		acc := Accumulate(reqs, grid)
		// Split and merge: accumulators from two halves add up.
		if trial%2 == 0 && n > 1 {
			a1 := Accumulate(mustRequests(t, stageNames(k), sliceCols(cols, 0, n/2)), grid)
			a2 := Accumulate(mustRequests(t, stageNames(k), sliceCols(cols, n/2, n)), grid)
			if err := a1.Merge(a2); err != nil {
				t.Fatal(err)
			}
			acc = a1
		}
		got, err := TailMeanAccumulators(acc, p)
		if err != nil {
			t.Fatal(err)
		}
		q, target, contrib := refTailMean(cols, p)
		for j := range contrib {
			if contrib[j] < got.Lower[j]*(1-tol)-tol || contrib[j] > got.Upper[j]*(1+tol)+tol {
				t.Fatalf("trial %d (n=%d p=%v) stage %d: records %v outside [%v, %v]", trial, n, p, j, contrib[j], got.Lower[j], got.Upper[j])
			}
			if got.Contrib[j] < got.Lower[j]-tol || got.Contrib[j] > got.Upper[j]+tol {
				t.Fatalf("trial %d stage %d: estimate %v outside its bounds", trial, j, got.Contrib[j])
			}
		}
		if target < got.TargetLower*(1-tol)-tol || target > got.TargetUpper*(1+tol)+tol {
			t.Fatalf("trial %d (n=%d p=%v): records tail mean %v outside [%v, %v]", trial, n, p, target, got.TargetLower, got.TargetUpper)
		}
		if q < got.QuantileLower || q > got.QuantileUpper {
			t.Fatalf("trial %d (n=%d p=%v): records q %v outside [%v, %v]", trial, n, p, q, got.QuantileLower, got.QuantileUpper)
		}
		if math.Abs(sum(got.Contrib)-got.Target) > 1e-9*math.Max(1, got.Target) {
			t.Fatalf("trial %d: estimates do not add up", trial)
		}
	}
}

func TestAccumulatorEstimateCloseOnFineGrid(t *testing.T) {
	// Continuous data on a 2%-wide grid: the partial bucket holds ~2% of
	// the tail, so the estimate is within a few tenths of a percent.
	rng := rand.New(rand.NewPCG(13, 14))
	cols := randColsShape(rng, 200_000, 5)
	reqs := mustRequests(t, stageNames(5), cols)
	grid, err := ExpGrid(0.01, 1.02, 600)
	if err != nil {
		t.Fatal(err)
	}
	got, err := TailMeanAccumulators(Accumulate(reqs, grid), 0.99)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := TailMean(reqs, 0.99)
	for j := range want.Contrib {
		if rel := math.Abs(got.Contrib[j]-want.Contrib[j]) / want.Contrib[j]; rel > 3e-3 {
			t.Errorf("stage %d: %v vs records %v (%.2g)", j, got.Contrib[j], want.Contrib[j], rel)
		}
	}
}

func TestAccumulatorsAdd(t *testing.T) {
	grid := DefaultGrid()
	reqs := tenRequests(t)
	acc := NewAccumulators(grid, reqs.Stages())
	for r := range reqs.Len() {
		if err := acc.Add([]float64{reqs.Stage(0)[r], reqs.Stage(1)[r], reqs.Stage(2)[r]}); err != nil {
			t.Fatal(err)
		}
	}
	want := Accumulate(reqs, grid)
	for b := range want.Count {
		if acc.Count[b] != want.Count[b] || acc.Sum[2][b] != want.Sum[2][b] {
			t.Fatalf("bucket %d differs", b)
		}
	}
	if err := acc.Add([]float64{1, -1, 0}); err == nil {
		t.Error("negative stage accepted")
	}
	if err := acc.Add([]float64{1}); err == nil {
		t.Error("short vector accepted")
	}
	other := NewAccumulators(grid, []string{"x"})
	if err := acc.Merge(other); err == nil {
		t.Error("merge of different stages accepted")
	}
	empty := NewAccumulators(grid, reqs.Stages())
	if _, err := TailMeanAccumulators(empty, 0.99); err == nil {
		t.Error("empty accumulators accepted")
	}
}

func sliceCols(cols [][]float64, from, to int) [][]float64 {
	out := make([][]float64, len(cols))
	for j := range cols {
		out[j] = cols[j][from:to]
	}
	return out
}
