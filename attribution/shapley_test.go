package attribution

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestShapleyHandWorked(t *testing.T) {
	ab := []string{"A", "B"}
	now := mustRequests(t, ab, [][]float64{{1, 2, 4}, {1, 3, 2}}) // S = 2 5 6
	cases := []struct {
		name             string
		base             [][]float64
		p                float64
		qNow, qBase, all float64
		phi              []float64
	}{
		{
			// p = 1 (max). P_now = 6. Baseline A = 1 1 2, B = 1 2 2, S = 2 3 4,
			// P_base = 4. n = m = 3, so rank r maps to baseline rank r.
			// Revert A: ranks of 1 2 4 are 0 1 2 → 1 1 2; S = 2 4 4, max 4,
			// v(A) = 2. Revert B: ranks of 1 3 2 are 0 2 1 → 1 2 2; S = 2 4 6,
			// v(B) = 0. Both: S = 2 3 4, max 4 = P_base, v(AB) = 2.
			// φ_A = ½·v(A) + ½·(v(AB) − v(B)) = 1 + 1 = 2;
			// φ_B = ½·v(B) + ½·(v(AB) − v(A)) = 0.
			name: "no dependence change",
			base: [][]float64{{1, 1, 2}, {1, 2, 2}}, p: 1,
			qNow: 6, qBase: 4, all: 4, phi: []float64{2, 0},
		},
		{
			// Same marginals, pairing changed: A = 1 1 2, B = 2 2 1, S = 3 3 3,
			// P_base = 3. v(A), v(B) as above (2, 0); all-reverted max is
			// still 4, but v(AB) = 6 − 3 = 3. φ_A = 1 + ½·3 = 2.5,
			// φ_B = 0 + ½·(3 − 2) = 0.5: each carries half the dependence
			// effect 4 − 3 = 1.
			name: "dependence change split equally",
			base: [][]float64{{1, 1, 2}, {2, 2, 1}}, p: 1,
			qNow: 6, qBase: 3, all: 4, phi: []float64{2.5, 0.5},
		},
		{
			// p = 0.5, m = 2 ≠ n = 3. P_now = median(2 5 6) = 5. Baseline
			// A = 0 2, B = 1 1, S = 1 3, P_base = 1 + 0.5·2 = 2. Rank r maps to
			// baseline rank r·(m−1)/(n−1) = r/2. Revert A: ranks 0 1 2 → 0, 1,
			// 2 (interpolated) → S = 0+1 1+3 2+2 = 1 4 4, median 4, v(A) = 1.
			// Revert B: B ranks of 1 3 2 are 0 2 1 → 1 1 1; S = 2 3 5, median
			// 3, v(B) = 2. Both: S = 1 2 3, median 2 = P_base, v(AB) = 3.
			// φ_A = ½·1 + ½·(3 − 2) = 1; φ_B = ½·2 + ½·(3 − 1) = 2.
			name: "interpolated ranks",
			base: [][]float64{{0, 2}, {1, 1}}, p: 0.5,
			qNow: 5, qBase: 2, all: 2, phi: []float64{1, 2},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Shapley(now, mustRequests(t, ab, c.base), c.p)
			if err != nil {
				t.Fatal(err)
			}
			if res.Quantile != c.qNow || res.Baseline != c.qBase || res.AllReverted != c.all || res.Target != c.qNow-c.qBase {
				t.Errorf("now %v base %v all %v target %v; want %v %v %v", res.Quantile, res.Baseline, res.AllReverted, res.Target, c.qNow, c.qBase, c.all)
			}
			for j, want := range c.phi {
				if !approx(res.Contrib[j], want, 1e-12) {
					t.Errorf("φ_%s = %v, want %v", ab[j], res.Contrib[j], want)
				}
			}
		})
	}
}

func TestRevertColumnTiesAndMidRank(t *testing.T) {
	// Ties share the mid-rank: three 5s occupy ranks 0..2, mid-rank 1, and
	// all map to the baseline's rank-1 value 20. The 9 (rank 3) maps to 40.
	got := revertColumn([]float64{5, 9, 5, 5}, []float64{40, 10, 30, 20})
	if !slices.Equal(got, []float64{20, 40, 20, 20}) {
		t.Errorf("got %v", got)
	}
	// One current request maps to the baseline median: (1+3)/2 = 2.
	if got := revertColumn([]float64{7}, []float64{1, 3}); got[0] != 2 {
		t.Errorf("n=1: %v", got)
	}
}

func TestShapleyAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 60 {
		k := 1 + rng.IntN(5)
		n, m := 2+rng.IntN(60), 2+rng.IntN(60)
		if trial%3 == 0 {
			m = n
		}
		p := []float64{0.5, 0.9, 0.99, 1, rng.Float64()}[rng.IntN(5)]
		now, base := randCols(rng, n, k), randCols(rng, m, k)
		res, err := Shapley(mustRequests(t, stageNames(k), now), mustRequests(t, stageNames(k), base), p)
		if err != nil {
			t.Fatal(err)
		}
		want := refShapley(now, base, p)
		for j := range want {
			if !approx(res.Contrib[j], want[j], 1e-9) {
				t.Fatalf("trial %d (k=%d n=%d m=%d p=%v): φ_%d = %v, reference %v", trial, k, n, m, p, j, res.Contrib[j], want[j])
			}
		}
		// Efficiency.
		if d := sum(res.Contrib) - (res.Quantile - res.Baseline); math.Abs(d) > 1e-9 {
			t.Fatalf("trial %d: Σφ − (P_now − P_base) = %v", trial, d)
		}
	}
}

func TestShapleyProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 2000
	for trial := range 20 {
		now, base := randCols(rng, n, 4), randCols(rng, n, 4)
		// Stage 1 is a copy of stage 0, now and in the baseline: symmetric.
		now[1] = slices.Clone(now[0])
		base[1] = slices.Clone(base[0])
		// Stage 3 is the same multiset now and in the baseline (shuffled):
		// it maps to itself.
		base[3] = slices.Clone(now[3])
		rng.Shuffle(n, func(a, b int) { base[3][a], base[3][b] = base[3][b], base[3][a] })

		res, err := Shapley(mustRequests(t, stageNames(4), now), mustRequests(t, stageNames(4), base), 0.99)
		if err != nil {
			t.Fatal(err)
		}
		phi := res.Contrib
		if d := sum(phi) - (res.Quantile - res.Baseline); math.Abs(d) > 1e-9 {
			t.Errorf("trial %d: efficiency off by %v", trial, d)
		}
		if math.Abs(phi[0]-phi[1]) > 1e-9 {
			t.Errorf("trial %d: symmetric stages got %v and %v", trial, phi[0], phi[1])
		}
		// Null stage: zero marginal contribution everywhere except into the
		// grand coalition, where v(all) uses the baseline itself; so its
		// value is exactly (AllReverted − Baseline)/k.
		gap := (res.AllReverted - res.Baseline) / 4
		if math.Abs(phi[3]-gap) > 1e-12 {
			t.Errorf("trial %d: null stage φ = %v, want dependence share %v", trial, phi[3], gap)
		}
	}

	// When the baseline is now up to per-stage monotone maps, the
	// dependence effect is zero and the unchanged stage gets exactly 0.
	now := randCols(rng, n, 3)
	base := [][]float64{make([]float64, n), make([]float64, n), slices.Clone(now[2])}
	for r := range n {
		base[0][r] = 2*now[0][r] + 1
		base[1][r] = math.Sqrt(now[1][r])
	}
	res, err := Shapley(mustRequests(t, stageNames(3), now), mustRequests(t, stageNames(3), base), 0.99)
	if err != nil {
		t.Fatal(err)
	}
	if res.AllReverted != res.Baseline || res.Contrib[2] != 0 {
		t.Errorf("all reverted %v vs baseline %v; null stage φ = %v", res.AllReverted, res.Baseline, res.Contrib[2])
	}
}

func TestShapleyErrors(t *testing.T) {
	a := tenRequests(t)
	b := mustRequests(t, []string{"queue", "decode", "prefill"}, [][]float64{{1}, {1}, {1}})
	if _, err := Shapley(a, b, 0.99); !errors.Is(err, ErrStages) {
		t.Errorf("stage order: %v", err)
	}
	cols := make([][]float64, 13)
	for j := range cols {
		cols[j] = []float64{1}
	}
	big := mustRequests(t, stageNames(13), cols)
	if _, err := Shapley(big, big, 0.99); !errors.Is(err, ErrTooManyStages) {
		t.Errorf("13 stages: %v", err)
	}
	empty := mustRequests(t, a.Stages(), [][]float64{{}, {}, {}})
	if _, err := Shapley(a, empty, 0.99); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty baseline: %v", err)
	}
}
