package attribution

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// tenRequests is the hand-worked example used across tests:
//
//	r   queue prefill decode   S
//	0     1     2      3       6
//	1     0     1      1       2
//	2     2     2      4       8
//	3     1     1      2       4
//	4     5     3      2      10
//	5     0     2      1       3
//	6     3     4      5      12
//	7     1     3      3       7
//	8     2     1      2       5
//	9     8     4      8      20
//
// Sorted S (ranks 0..9): 2 3 4 5 6 7 8 10 12 20. Column means: queue 2.3,
// prefill 2.3, decode 3.1; mean S 7.7.
func tenRequests(t testing.TB) Requests {
	return mustRequests(t, []string{"queue", "prefill", "decode"}, [][]float64{
		{1, 0, 2, 1, 5, 0, 3, 1, 2, 8},
		{2, 1, 2, 1, 3, 2, 4, 3, 1, 4},
		{3, 1, 4, 2, 2, 1, 5, 3, 2, 8},
	})
}

func checkBreakdown(t *testing.T, b Breakdown, q, target float64, contrib []float64) {
	t.Helper()
	if !approx(b.Quantile, q, 1e-12) || !approx(b.Target, target, 1e-12) {
		t.Errorf("quantile, target = %v, %v; want %v, %v", b.Quantile, b.Target, q, target)
	}
	for j, c := range contrib {
		if !approx(b.Contrib[j], c, 1e-12) {
			t.Errorf("contrib[%s] = %v, want %v", b.Stages[j], b.Contrib[j], c)
		}
	}
}

func TestTailMeanHandWorked(t *testing.T) {
	reqs := tenRequests(t)
	t.Run("p=0.8", func(t *testing.T) {
		// h = 9·0.8 = 7.2: q = 10 + 0.2·(12−10) = 10.4. Tail: requests 6
		// (S 12) and 9 (S 20), mean 16 = queue (3+8)/2 5.5 + prefill
		// (4+4)/2 4 + decode (5+8)/2 6.5.
		b, err := TailMean(reqs, 0.8)
		if err != nil {
			t.Fatal(err)
		}
		checkBreakdown(t, b, 10.4, 16, []float64{5.5, 4, 6.5})
		if b.Count != 2 || b.Method != MethodTailMeanRecords || b.Kind != KindExact {
			t.Errorf("count %v method %v kind %v", b.Count, b.Method, b.Kind)
		}
	})
	t.Run("p=0.5", func(t *testing.T) {
		// h = 4.5: q = 6 + 0.5·(7−6) = 6.5. Tail: requests 7 2 4 6 9 (S 7 8
		// 10 12 20), mean 57/5 = 11.4 = queue 19/5 3.8 + prefill 16/5 3.2 +
		// decode 22/5 4.4.
		b, err := TailMean(reqs, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		checkBreakdown(t, b, 6.5, 11.4, []float64{3.8, 3.2, 4.4})
	})
	t.Run("p=1 keeps the maximum", func(t *testing.T) {
		b, err := TailMean(reqs, 1)
		if err != nil {
			t.Fatal(err)
		}
		checkBreakdown(t, b, 20, 20, []float64{8, 4, 8})
	})
	t.Run("p=0 is the plain mean", func(t *testing.T) {
		b, err := TailMean(reqs, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkBreakdown(t, b, 2, 7.7, []float64{2.3, 2.3, 3.1})
	})
}

func TestExcessHandWorked(t *testing.T) {
	// p = 0.5: tail means 3.8 3.2 4.4 (TestTailMeanHandWorked) minus column
	// means 2.3 2.3 3.1 = 1.5 0.9 1.3; target 11.4 − 7.7 = 3.7.
	b, err := Excess(tenRequests(t), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	checkBreakdown(t, b, 6.5, 3.7, []float64{1.5, 0.9, 1.3})
	if math.Abs(b.Residual) > 1e-12 || b.Kind != KindExact || b.Method != MethodExcess {
		t.Errorf("residual %v kind %v method %v", b.Residual, b.Kind, b.Method)
	}
}

func TestEulerHandWorked(t *testing.T) {
	reqs := tenRequests(t)
	cases := []struct {
		name    string
		p       float64
		opts    EulerOptions
		q       float64
		contrib []float64
		resid   float64
	}{
		// h = 4.5, |r−4.5| ≤ 1: ranks 4, 5 = requests 0 (1,2,3) and 7
		// (1,3,3): means 1, 2.5, 3; sum 6.5 = q.
		{"box W=1", 0.5, EulerOptions{HalfWidth: 1}, 6.5, []float64{1, 2.5, 3}, 0},
		// ranks 3..6 = requests 8 (2,1,2), 0, 7, 2 (2,2,4): 1.5, 2, 3.
		{"box W=2", 0.5, EulerOptions{HalfWidth: 2}, 6.5, []float64{1.5, 2, 3}, 0},
		// Epanechnikov W=2: ranks 3,4,5,6 at u = ∓0.75, ∓0.25 get weights
		// 0.4375, 0.9375, 0.9375, 0.4375 (sum 2.75). queue (0.4375·2 +
		// 0.9375·1 + 0.9375·1 + 0.4375·2)/2.75 = 3.625/2.75; prefill
		// 6/2.75; decode 8.25/2.75 = 3.
		{
			"epanechnikov W=2", 0.5,
			EulerOptions{HalfWidth: 2, Kernel: WindowEpanechnikov},
			6.5,
			[]float64{3.625 / 2.75, 6 / 2.75, 3},
			0,
		},
		// h = 7.2, ranks 7, 8 = requests 4 (5,3,2) and 6 (3,4,5): 4, 3.5,
		// 3.5, sum 11; q = 10.4, residual −0.6.
		{"box W=1 p=0.8", 0.8, EulerOptions{HalfWidth: 1}, 10.4, []float64{4, 3.5, 3.5}, -0.6},
		// Rescaled by 10.4/11.
		{
			"rescaled", 0.8,
			EulerOptions{HalfWidth: 1, Rescale: true},
			10.4,
			[]float64{4 * 10.4 / 11, 3.5 * 10.4 / 11, 3.5 * 10.4 / 11},
			-0.6,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := Euler(reqs, c.p, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkBreakdown(t, b, c.q, c.q, c.contrib)
			if !approx(b.Residual, c.resid, 1e-12) {
				t.Errorf("residual %v, want %v", b.Residual, c.resid)
			}
			if b.Kind != KindEstimate || b.Method != MethodEuler {
				t.Errorf("kind %v method %v", b.Kind, b.Method)
			}
		})
	}
}

// TestAgainstReference compares TailMean, Excess and Euler with the naive
// references on random inputs, and checks that contributions add up.
func TestAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		n := 1 + rng.IntN(400)
		k := 1 + rng.IntN(8)
		p := []float64{0, 0.5, 0.9, 0.99, 0.999, 1, rng.Float64()}[rng.IntN(7)]
		cols := randCols(rng, n, k)
		reqs := mustRequests(t, stageNames(k), cols)

		q, target, contrib := refTailMean(cols, p)
		b, err := TailMean(reqs, p)
		if err != nil {
			t.Fatal(err)
		}
		if b.Quantile != q {
			t.Fatalf("trial %d: q %v, reference %v", trial, b.Quantile, q)
		}
		if !approx(b.Target, target, 1e-12) || math.Abs(sum(b.Contrib)-b.Target) > 1e-9 {
			t.Fatalf("trial %d: target %v (Σ %v), reference %v", trial, b.Target, sum(b.Contrib), target)
		}
		for j := range contrib {
			if !approx(b.Contrib[j], contrib[j], 1e-12) {
				t.Fatalf("trial %d stage %d: %v, reference %v", trial, j, b.Contrib[j], contrib[j])
			}
		}

		ex, err := Excess(reqs, p)
		if err != nil {
			t.Fatal(err)
		}
		for j := range contrib {
			want := contrib[j] - sum(cols[j])/float64(n)
			if !approx(ex.Contrib[j], want, 1e-12) {
				t.Fatalf("trial %d excess stage %d: %v, reference %v", trial, j, ex.Contrib[j], want)
			}
		}
		if math.Abs(sum(ex.Contrib)-ex.Target) > 1e-9 {
			t.Fatalf("trial %d: excess Σ %v, target %v", trial, sum(ex.Contrib), ex.Target)
		}

		w := 1 + rng.Float64()*20
		kernel := WindowKernel(rng.IntN(2))
		eu, err := Euler(reqs, p, EulerOptions{HalfWidth: w, Kernel: kernel})
		if err != nil {
			t.Fatal(err)
		}
		want := refEuler(cols, p, w, kernel)
		for j := range want {
			if !approx(eu.Contrib[j], want[j], 1e-12) {
				t.Fatalf("trial %d euler stage %d (w %v kernel %d): %v, reference %v", trial, j, w, kernel, eu.Contrib[j], want[j])
			}
		}
		if eu.Quantile != q || !approx(eu.Residual, q-sum(want), 1e-9) {
			t.Fatalf("trial %d euler: q %v residual %v; want %v %v", trial, eu.Quantile, eu.Residual, q, q-sum(want))
		}
	}
}

func TestEulerDefaultWidthNearSmoothQuantile(t *testing.T) {
	// Smooth data, large n: the default window's residual is small against
	// q, i.e. E[S | S ≈ q] ≈ q as the Euler identity says.
	rng := rand.New(rand.NewPCG(3, 4))
	cols := randColsShape(rng, 200_000, 4)
	b, err := Euler(mustRequests(t, stageNames(4), cols), 0.99, EulerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The window mean of a convex quantile function sits above q by about
	// Q''(p)·δ²/6 (δ = 200/n in probability): 0.1% here; a window off
	// centre by a few hundred ranks would be off by several percent.
	if rel := math.Abs(b.Residual) / b.Quantile; rel > 3e-3 {
		t.Errorf("residual %v is %.2g of q %v", b.Residual, rel, b.Quantile)
	}
	// Default width: max(5, 0.1·n·0.01) = 200 ranks either side of
	// h = 199999·0.99 = 197999.01: ranks 197800..198199, 400 requests.
	if b.Count != 400 {
		t.Errorf("count %v, want 400", b.Count)
	}
}

// randColsShape draws smooth log-normal stages with a shared factor.
func randColsShape(rng *rand.Rand, n, k int) [][]float64 {
	cols := make([][]float64, k)
	for j := range cols {
		cols[j] = make([]float64, n)
	}
	for r := range n {
		f := rng.NormFloat64()
		for j := range cols {
			cols[j][r] = math.Exp(0.5*rng.NormFloat64() + 0.5*f + float64(j)/4)
		}
	}
	return cols
}

func TestNewRequestsValidation(t *testing.T) {
	cases := []struct {
		name   string
		stages []string
		cols   [][]float64
	}{
		{"no stages", nil, nil},
		{"names vs columns", []string{"a", "b"}, [][]float64{{1}}},
		{"empty name", []string{""}, [][]float64{{1}}},
		{"duplicate", []string{"a", "a"}, [][]float64{{1}, {1}}},
		{"ragged", []string{"a", "b"}, [][]float64{{1, 2}, {1}}},
		{"negative", []string{"a"}, [][]float64{{1, -0.5}}},
		{"nan", []string{"a"}, [][]float64{{math.NaN()}}},
		{"inf", []string{"a"}, [][]float64{{math.Inf(1)}}},
		{"sum overflows", []string{"a", "b"}, [][]float64{{math.MaxFloat64}, {math.MaxFloat64}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := NewRequests(c.stages, c.cols); err == nil {
				t.Error("accepted")
			}
		})
	}
	empty := mustRequests(t, []string{"a"}, [][]float64{{}})
	if _, err := TailMean(empty, 0.99); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty tail mean: %v", err)
	}
	if _, err := TailMean(tenRequests(t), 1.5); err == nil {
		t.Error("p=1.5 accepted")
	}
	if _, err := Euler(tenRequests(t), 0.5, EulerOptions{HalfWidth: 0.5}); err == nil {
		t.Error("half-width 0.5 accepted")
	}
}

func TestNewRequestsResidual(t *testing.T) {
	// Request 0: 1+2 of 4 → residual 1. Request 1: 3+4 = 7 with total
	// 7·(1−1e-12): rounding, residual 0. Request 2: stages 5 > total 4.
	r, err := NewRequestsResidual([]string{"a", "b"}, [][]float64{{1, 3}, {2, 4}}, []float64{4, 7 * (1 - 1e-12)}, "other")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Stage(2); !slices.Equal(got, []float64{1, 0}) || r.Stages()[2] != "other" {
		t.Errorf("residual column %v %v", got, r.Stages())
	}
	if !slices.Equal(r.Total(), []float64{4, 7}) {
		t.Errorf("totals %v", r.Total())
	}
	if _, err := NewRequestsResidual([]string{"a"}, [][]float64{{5}}, []float64{4}, "other"); err == nil {
		t.Error("stages above total accepted")
	}
}

func TestQuantileSelectMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 2000 {
		n := 1 + rng.IntN(300)
		x := make([]float64, n)
		for i := range x {
			switch trial % 3 {
			case 0:
				x[i] = rng.Float64()
			case 1:
				x[i] = float64(rng.IntN(4)) // heavy ties
			default:
				x[i] = float64(n - i) // descending
			}
		}
		p := rng.Float64()
		if trial%10 == 0 {
			p = 1
		}
		if got, want := Quantile(x, p), refQuantile(x, p); got != want {
			t.Fatalf("trial %d: n=%d p=%v: %v, want %v", trial, n, p, got, want)
		}
	}
	// numpy.percentile([1, 2, 3, 4], 90) = 3.7 (linear, type 7).
	if got := Quantile([]float64{4, 1, 3, 2}, 0.9); !approx(got, 3.7, 1e-15) {
		t.Errorf("P90 of 1..4 = %v, want 3.7", got)
	}
}
