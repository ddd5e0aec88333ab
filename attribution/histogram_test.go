package attribution

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// histOf buckets a sample on grid upper bounds (+Inf appended), with sum.
func histOf(x []float64, upper []float64) Histogram {
	u := append(append([]float64(nil), upper...), math.Inf(1))
	h := Histogram{Upper: u, Counts: make([]float64, len(u))}
	for _, v := range x {
		h.Counts[sort.SearchFloat64s(upper, v)]++
		h.Sum += v
	}
	return h
}

// histOfCDF gives each bucket its exact probability mass ×n under cdf.
func histOfCDF(cdf func(float64) float64, upper []float64, n float64) Histogram {
	u := append(append([]float64(nil), upper...), math.Inf(1))
	h := Histogram{Upper: u, Counts: make([]float64, len(u)), Sum: math.NaN()}
	prev := 0.0
	for b, x := range upper {
		c := cdf(x)
		h.Counts[b] = n * (c - prev)
		prev = c
	}
	h.Counts[len(upper)] = n * (1 - prev)
	return h
}

func linGrid(step, top float64) []float64 {
	var u []float64
	for x := step; x <= top+step/2; x += step {
		u = append(u, x)
	}
	return u
}

func TestFromCumulative(t *testing.T) {
	h, err := FromCumulative([]float64{1, 2, math.Inf(1)}, []float64{3, 5, 6}, 7.5)
	if err != nil {
		t.Fatal(err)
	}
	if h.Counts[0] != 3 || h.Counts[1] != 2 || h.Counts[2] != 1 {
		t.Errorf("counts %v", h.Counts)
	}
	bad := []struct {
		name       string
		upper, cum []float64
	}{
		{"decreasing counts", []float64{1, 2}, []float64{3, 2}},
		{"unsorted bounds", []float64{2, 1}, []float64{1, 2}},
		{"inf not last", []float64{math.Inf(1), 2}, []float64{1, 2}},
		{"empty", []float64{1}, []float64{0}},
		{"length", []float64{1, 2}, []float64{1}},
	}
	for _, c := range bad {
		if _, err := FromCumulative(c.upper, c.cum, math.NaN()); err == nil {
			t.Errorf("%s accepted", c.name)
		}
	}
}

func TestHistogramQuantileModel(t *testing.T) {
	// Buckets [0,1] 4, (1,2] 4, (2,+Inf) 2; n = 10. p = 0.5: rank 5, one
	// into the second bucket's 4 → 1 + 1/4 = 1.25. p = 0.95: rank 9.5 in
	// the +Inf bucket → its lower edge 2. p = 0.2: rank 2 → 0.5.
	h := Histogram{Upper: []float64{1, 2, math.Inf(1)}, Counts: []float64{4, 4, 2}}
	for _, c := range []struct{ p, want float64 }{{0.5, 1.25}, {0.95, 2}, {0.2, 0.5}, {0, 0}, {1, 2}} {
		if got := h.quantile(c.p); !approx(got, c.want, 1e-15) {
			t.Errorf("quantile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
}

func TestHistogramMeans(t *testing.T) {
	// Stage a: buckets [0,1] 2, (1,3] 2, sum 5 → mean 1.25, exact.
	// Stage b: no sum; [0,1] 1, (1,3] 3 → midpoints (0.5 + 3·2)/4 = 1.625,
	// edges [(0 + 3·1)/4, (1 + 3·3)/4] = [0.75, 2.5].
	a := Histogram{Upper: []float64{1, 3}, Counts: []float64{2, 2}, Sum: 5}
	b := Histogram{Upper: []float64{1, 3}, Counts: []float64{1, 3}, Sum: math.NaN()}
	got, err := HistogramMeans([]string{"a", "b"}, []Histogram{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != KindEstimate || got.Method != MethodMean {
		t.Errorf("kind %v method %v", got.Kind, got.Method)
	}
	if got.Contrib[0] != 1.25 || got.Contrib[1] != 1.625 || got.Lower[1] != 0.75 || got.Upper[1] != 2.5 {
		t.Errorf("means %v lower %v upper %v", got.Contrib, got.Lower, got.Upper)
	}
	if got.Target != 2.875 || got.TargetLower != 2 || got.TargetUpper != 3.75 {
		t.Errorf("target %v [%v, %v]", got.Target, got.TargetLower, got.TargetUpper)
	}
	exact, _ := HistogramMeans([]string{"a"}, []Histogram{a})
	if exact.Kind != KindExact {
		t.Errorf("with sums: kind %v", exact.Kind)
	}
}

func TestComonotonicBoundHandWorked(t *testing.T) {
	// n = 100, p = 0.99: t = 100 − ⌈99·0.99⌉ = 100 − 99 = 1, the single
	// largest value. Buckets [0,1] 90, (1,2] 9, (2,+Inf) 1.
	// Without sum: the top value is in the +Inf bucket → +Inf.
	// With sum 150: the bottom 99 are ≥ 90·0 + 9·1 = 9, so the top one is
	// ≤ 150 − 9 = 141.
	h := Histogram{Upper: []float64{1, 2, math.Inf(1)}, Counts: []float64{90, 9, 1}, Sum: math.NaN()}
	got, err := ComonotonicBound([]string{"a"}, []Histogram{h}, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(got.Value, 1) {
		t.Errorf("no sum: %v, want +Inf", got.Value)
	}
	h.Sum = 150
	got, _ = ComonotonicBound([]string{"a", "b"}, []Histogram{h, h}, 0.99)
	if got.Value != 282 || got.PerStage[0] != 141 || got.Kind != KindBound || got.Upper != 282 {
		t.Errorf("with sum: %+v, want 2·141", got)
	}
}

// TestComonotonicBoundHoldsOnRecords: on random records of every shape
// (independent, dependent, heavy-tailed, tied), the bound from per-stage
// histograms is never below the records' P_p(S) nor their tail mean.
func TestComonotonicBoundHoldsOnRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	grid := DefaultGrid().Upper()
	for trial := range 300 {
		n := 2 + rng.IntN(2000)
		if trial < 20 {
			n = 2 + trial // small n, where ⌈(n−1)p⌉ matters
		}
		k := 1 + rng.IntN(7)
		p := []float64{0.5, 0.7, 0.9, 0.99, 0.999, 1, rng.Float64()}[rng.IntN(7)]
		cols := randCols(rng, n, k)
		hists := make([]Histogram, k)
		for j := range cols {
			hists[j] = histOf(cols[j], grid)
			if trial%2 == 0 {
				hists[j].Sum = math.NaN()
			}
		}
		got, err := ComonotonicBound(stageNames(k), hists, p)
		if err != nil {
			t.Fatal(err)
		}
		q, target, _ := refTailMean(cols, p)
		if got.Value < target*(1-1e-12) || target < q*(1-1e-12) {
			t.Fatalf("trial %d (n=%d k=%d p=%v): bound %v, tail mean %v, q %v", trial, n, k, p, got.Value, target, q)
		}
	}
}

// TestComonotonicQuantileIsNotABound: two independent stages that are 100
// with probability 0.008 and below 1 otherwise. Each stage's P99 is below
// 1, so Σ q_i < 2, but P(S ≥ 99) = 1 − 0.992² ≈ 0.0159 > 0.01, so P99(S)
// is near 100. ComonotonicBound stays above it.
func TestComonotonicQuantileIsNotABound(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	const n = 100_000
	cols := [][]float64{make([]float64, n), make([]float64, n)}
	for j := range cols {
		for r := range n {
			cols[j][r] = rng.Float64()
			if rng.Float64() < 0.008 {
				cols[j][r] = 100
			}
		}
	}
	grid := []float64{1, 99, 100}
	hists := []Histogram{histOf(cols[0], grid), histOf(cols[1], grid)}
	cq, err := ComonotonicQuantile([]string{"a", "b"}, hists, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	qs := refQuantile(refTotals(cols), 0.99)
	if !(cq.Value < 2 && qs >= 99) || cq.Kind != KindEstimate {
		t.Errorf("Σ q_i = %v (%v), P99(S) = %v: expected Σ q_i < 2 ≤ 99 ≤ P99", cq.Value, cq.Kind, qs)
	}
	cb, _ := ComonotonicBound([]string{"a", "b"}, hists, 0.99)
	if cb.Value < qs {
		t.Errorf("bound %v below P99 %v", cb.Value, qs)
	}
}

func TestIndependenceEstimateExact(t *testing.T) {
	cases := []struct {
		name  string
		hists []Histogram
		p     float64
		want  float64
		tol   float64
	}{
		{
			// U(0,1) + U(0,1) is triangular: P(S > s) = (2−s)²/2 for s ≥ 1,
			// so P99 = 2 − √0.02 = 1.8585786437626906. One bucket [0,1] is
			// exactly U(0,1) under the model. U = 2·q(0.995) = 1.99,
			// resolution k·U/(2·16383) = 1.2e-4.
			name: "two uniforms",
			hists: []Histogram{
				{Upper: []float64{1}, Counts: []float64{1}, Sum: math.NaN()},
				{Upper: []float64{1}, Counts: []float64{5}, Sum: math.NaN()},
			},
			p: 0.99, want: 2 - math.Sqrt(0.02), tol: 1.3e-4,
		},
		{
			// Exp(1) + Exp(1) is Gamma(2, 1): P99 = 6.638352067993811
			// (distuv.Gamma{Alpha: 2, Beta: 1}.Quantile; scipy
			// stats.gamma.ppf(0.99, 2) agrees). Histograms carry the exact
			// Exp(1) mass of 0.005-wide buckets; resolution 2·10.6/32766 ≈
			// 6.5e-4 plus the within-bucket model error.
			name: "exponentials",
			hists: []Histogram{
				histOfCDF(func(x float64) float64 { return 1 - math.Exp(-x) }, linGrid(0.005, 40), 1e6),
				histOfCDF(func(x float64) float64 { return 1 - math.Exp(-x) }, linGrid(0.005, 40), 1e6),
			},
			p: 0.99, want: distuv.Gamma{Alpha: 2, Beta: 1}.Quantile(0.99), tol: 1e-3,
		},
		{
			// N(10,1) + N(10,1) = N(20, 2): P99 = 20 + √2·z_0.99 =
			// 23.289952714266374 (scipy). Buckets 0.005 wide over [0, 30].
			name: "normals",
			hists: []Histogram{
				histOfCDF(distuv.Normal{Mu: 10, Sigma: 1}.CDF, linGrid(0.005, 30), 1e6),
				histOfCDF(distuv.Normal{Mu: 10, Sigma: 1}.CDF, linGrid(0.005, 30), 1e6),
			},
			p: 0.99, want: 23.289952714266374, tol: 2e-3,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := IndependenceEstimate([]string{"a", "b"}, c.hists, c.p, ConvolutionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got.Value-c.want) > c.tol {
				t.Errorf("%v, want %v ± %v", got.Value, c.want, c.tol)
			}
			if got.Kind != KindEstimate || got.Method != MethodIndependenceEstimate {
				t.Errorf("kind %v method %v", got.Kind, got.Method)
			}
		})
	}
	// The distuv value is the textbook one: Gamma(2) quantile from
	// 1 − e^{−x}(1 + x) = 0.99 at x = 6.63835.
	x := distuv.Gamma{Alpha: 2, Beta: 1}.Quantile(0.99)
	if f := 1 - math.Exp(-x)*(1+x); math.Abs(f-0.99) > 1e-12 {
		t.Errorf("gamma quantile check %v", f)
	}
}

// TestIndependenceEstimateMatchesDraws: for independent stages, the
// estimate from histograms matches the type-7 P99 of the sum of 10⁶ draws
// within 1%: the draws' own standard error is about 0.2% here, and 1%-wide
// buckets add at most a fraction of a percent.
func TestIndependenceEstimateMatchesDraws(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	const n = 1_000_000
	cols := [][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
	for r := range n {
		cols[0][r] = rng.ExpFloat64() * 0.05               // queue
		cols[1][r] = math.Exp(0.4*rng.NormFloat64()) * 0.2 // prefill
		cols[2][r] = 0.5 + 0.1*rng.Float64()               // decode
	}
	g, _ := ExpGrid(1e-4, 1.01, 1200)
	hists := []Histogram{histOf(cols[0], g.Upper()), histOf(cols[1], g.Upper()), histOf(cols[2], g.Upper())}
	got, err := IndependenceEstimate(stageNames(3), hists, 0.99, ConvolutionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := refQuantile(refTotals(cols), 0.99)
	if rel := math.Abs(got.Value-want) / want; rel > 0.01 {
		t.Errorf("estimate %v, draws %v (%.3g)", got.Value, want, rel)
	}
}

// TestComonotonicBoundHoldsOnRates: the same records with their histogram
// counts scaled as rate() and increase() scale them (by 1/range seconds,
// or an extrapolation factor), so they are no longer integers. The bound
// must still hold for the records' tail mean. The reference is
// brute force: the tail mean from the sorted sums. Scaled counts used to
// give t = n − ⌈(n−1)p⌉ as if n were the population, e.g. n = 0.4 gave the
// mean of everything, below the tail.
func TestComonotonicBoundHoldsOnRates(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	grid := DefaultGrid().Upper()
	for trial := range 300 {
		n := 2 + rng.IntN(3000)
		if trial < 30 {
			n = 2 + trial
		}
		k := 1 + rng.IntN(7)
		p := []float64{0.3, 0.5, 0.9, 0.99, 0.999, 1, rng.Float64()}[rng.IntN(7)]
		scale := []float64{1.0 / 60, 1.0 / 300, 1.0 / 3600, 1.0437, 0.37}[rng.IntN(5)]
		cols := randCols(rng, n, k)
		hists := make([]Histogram, k)
		for j := range cols {
			hists[j] = histOf(cols[j], grid)
			for b := range hists[j].Counts {
				hists[j].Counts[b] *= scale
			}
			if trial%2 == 0 {
				hists[j].Sum = math.NaN()
			} else {
				hists[j].Sum *= scale
			}
		}
		got, err := ComonotonicBound(stageNames(k), hists, p)
		if err != nil {
			t.Fatal(err)
		}
		// Brute force: S per request, sorted; the tail is rank ≥ ⌈(n−1)p⌉.
		s := make([]float64, n)
		for _, col := range cols {
			for r, x := range col {
				s[r] += x
			}
		}
		slices.Sort(s)
		c := int(math.Ceil(float64(n-1) * p))
		target := 0.0
		for _, x := range s[c:] {
			target += x
		}
		target /= float64(n - c)
		if got.Value < target*(1-1e-12) {
			t.Fatalf("trial %d (n=%d k=%d p=%v scale %v): bound %v below the tail mean %v", trial, n, k, p, scale, got.Value, target)
		}
	}
}

// TestMinTailFraction against a brute-force scan over N.
func TestMinTailFraction(t *testing.T) {
	for _, p := range []float64{0, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99, 0.995, 0.999} {
		want := 1.0
		for n := 1.0; n <= 20000; n++ {
			want = math.Min(want, (n-math.Ceil((n-1)*p))/n)
		}
		if got := minTailFraction(p); got > want || got < want*(1-1e-4) {
			t.Errorf("p=%v: %v, want %v (at most 1e-4 relative below)", p, got, want)
		}
	}
	if got, want := minTailFraction(1-1e-9), 1e-9/(1+1e-9); math.Abs(got-want) > 1e-15 {
		t.Errorf("p=1−1e-9: %v, want the floor %v", got, want)
	}
}
