package causal

import (
	"math"
	"testing"
)

// exactKSCDF is P(D_n < k/n) for integer k by counting Poisson paths, an
// algorithm independent of the ones under test. With T_i = n·U_(i) the
// order statistics of n uniforms on [0, n] — the arrival times of a rate-1
// Poisson process N conditioned on N(n) = n — the event D_n < k/n is
// i − k < T_i < i − 1 + k for all i, which for integer k only constrains N
// at integer times:
//
//	N(j) ≤ j + k − 1  and  N(j) ≥ j − k + 1  for j = 0..n.
//
// Stepping N one unit of time at a time (Poisson(1) increments) and
// dividing by P(N(n) = n) gives the probability.
func exactKSCDF(n, k int) float64 {
	pois := make([]float64, 2*k+1) // e⁻¹/m!
	for m := range pois {
		lg, _ := math.Lgamma(float64(m) + 1)
		pois[m] = math.Exp(-1 - lg)
	}
	cur := make([]float64, n+1)
	next := make([]float64, n+1)
	cur[0] = 1
	for j := 1; j <= n; j++ {
		clear(next)
		lo, hi := max(0, j-k+1), min(n, j+k-1)
		for a := max(0, j-k); a <= min(n, j+k-2); a++ {
			if cur[a] == 0 {
				continue
			}
			for b := max(a, lo); b <= hi && b-a < len(pois); b++ {
				next[b] += cur[a] * pois[b-a]
			}
		}
		cur, next = next, cur
	}
	lg, _ := math.Lgamma(float64(n) + 1)
	pn := math.Exp(-float64(n) + float64(n)*math.Log(float64(n)) - lg)
	return cur[n] / pn
}

func TestKSTwoSidedSFClosedForms(t *testing.T) {
	// Ruben–Gambino, 1/2n < x ≤ 1/n: P(D_n ≤ x) = n!/nⁿ·(2nx − 1)ⁿ.
	// n = 2, x = 0.4: 2/4·0.6² = 0.18.
	checkNear(t, "n=2 x=.4", ksTwoSidedSF(2, 0.4), 0.82, 1e-15)
	// n = 1: D_1 = max(U, 1 − U), P(D_1 ≥ x) = 2(1 − x) for x ≥ 1/2.
	checkNear(t, "n=1 x=.7", ksTwoSidedSF(1, 0.7), 0.6, 1e-15)
	// n·x ≥ n − 1: P(D_n ≥ x) = 2(1 − x)ⁿ; n = 3, x = 0.7 → 2·0.3³ = 0.054.
	checkNear(t, "n=3 x=.7", ksTwoSidedSF(3, 0.7), 0.054, 1e-15)
	// x ≥ 1/2: 2·P(D⁺ ≥ x) by Birnbaum–Tingey, n = 3, x = 0.6:
	// 0.6·[C(3,0)·0.6⁻¹·0.4³ + C(3,1)·(0.6+1/3)⁰·(0.4−1/3)²]
	// = 0.6·[0.106667 + 0.013333] = 0.072, doubled 0.144.
	checkNear(t, "n=3 x=.6", ksTwoSidedSF(3, 0.6), 0.144, 1e-14)
	checkNear(t, "x≤1/2n", ksTwoSidedSF(10, 0.04), 1, 0)
	checkNear(t, "x≥1", ksTwoSidedSF(10, 1), 0, 0)
}

func TestKSTwoSidedSFAgainstPathCount(t *testing.T) {
	cases := []struct {
		n, k   int
		method string
	}{
		{20, 3, "durbin"},     // n x² = 0.45
		{100, 8, "durbin"},    // 0.64
		{100, 12, "pomeranz"}, // 1.44
		{40, 10, "pomeranz"},  // 2.5
		{130, 22, "pomeranz"}, // 3.72
		{60, 17, "smirnov"},   // 4.8: 2·P(D⁺ ≥ x), intersection term negligible
		{1000, 12, "durbin"},  // n > 140, n x^1.5 = 1.31
		{300, 15, "pelz-good"},
		{2000, 40, "pelz-good"},
		{500, 35, "smirnov"}, // n x² = 2.45
	}
	for _, c := range cases {
		x := float64(c.k) / float64(c.n)
		want := 1 - exactKSCDF(c.n, c.k)
		got := ksTwoSidedSF(c.n, x)
		tol := 1e-10
		if c.method == "pelz-good" {
			tol = 1e-5 // an asymptotic expansion
		}
		if c.method == "smirnov" {
			// 2·P(D⁺ ≥ x) drops P(D⁺ ≥ x and D⁻ ≥ x), as scipy does here;
			// at n = 500, x = 0.07 that term is 4.7e-9.
			tol = 1e-8
		}
		if math.Abs(got-want) > tol {
			t.Errorf("n=%d x=%g (%s): sf %.12g, path count %.12g", c.n, x, c.method, got, want)
		}
	}
}

// The internal methods agree with each other where their ranges meet.
func TestKSMethodsAgree(t *testing.T) {
	for _, c := range []struct {
		n int
		x float64
	}{{50, 0.11}, {120, 0.0791}, {140, 0.0734}, {80, 0.157}} {
		d, p := durbinMTWCDF(c.n, c.x), pomeranzCDF(c.n, c.x)
		if math.Abs(d-p) > 1e-11 {
			t.Errorf("n=%d x=%g: Durbin %.15g, Pomeranz %.15g", c.n, c.x, d, p)
		}
	}
	// Large n: Pelz–Good is close to the exact Durbin value.
	d, pg := durbinMTWCDF(5000, 0.01), pelzGoodCDF(5000, 0.01)
	if math.Abs(d-pg) > 1e-6 {
		t.Errorf("n=5000: Durbin %.12g, Pelz-Good %.12g", d, pg)
	}
}
