package causal

import (
	"math"
	"testing"
)

// TestLaggedCorrelationUnrelatedPairs: 200 pairs of independent AR(1)
// series (φ = 0.7 and 0.5, 240 points: an hour at 15 s), searched over
// lags −10..10 as `lagged_correlation(…, 10)` does. Under no relation the
// interval at the lag maximising |r| must exclude zero for at most ~5 % of
// pairs (family-wise level 0.95; 8 % allows for the 200-pair binomial
// spread, sd 1.5 %). The uncorrected interval, recomputed here with
// z = 1.96, excludes zero for about 1 − 0.95^21 ≈ 66 % of pairs — the
// failure this correction removes — and the test checks that it still
// would, so the test can tell the two apart.
func TestLaggedCorrelationUnrelatedPairs(t *testing.T) {
	const pairs, n, maxLag = 200, 240, 10
	r := rng(12)
	excl, naive, small := 0, 0, 0
	for range pairs {
		x, y := ar1(r, n, 0.7), ar1(r, n, 0.5)
		res, err := PrewhitenedCCF(ser("x", x...), ser("y", y...), maxLag, -1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Lower > 0 || res.Upper < 0 {
			excl++
		}
		if (res.PValue < 0.05) != (res.Lower > 0 || res.Upper < 0) {
			t.Errorf("p-value %v disagrees with interval [%v, %v]", res.PValue, res.Lower, res.Upper)
		}
		if res.PValue < 0.05 {
			small++
		}
		nb := float64(n - res.AR.Order - abs(res.BestLag))
		if math.Abs(math.Atanh(res.BestCorr)) > 1.959963984540054/math.Sqrt(nb-3) {
			naive++
		}
	}
	t.Logf("interval excludes zero: %d of %d pairs corrected, %d uncorrected", excl, pairs, naive)
	if f := float64(excl) / pairs; f > 0.08 {
		t.Errorf("corrected interval excludes zero for %.1f%% of unrelated pairs, want ≤ ~5%%", 100*f)
	}
	if f := float64(naive) / pairs; f < 0.4 {
		t.Errorf("uncorrected interval excludes zero for only %.1f%%: the null data are not what the test assumes", 100*f)
	}
}

// TestLaggedCorrelationRealLag: y_t = β·x_{t−4} + noise for 40 pairs with
// a modest effect (β = 0.35, so the lag-4 correlation is about 0.3 after
// prewhitening): the corrected interval must still exclude zero and find
// the lag in at least 38 of 40.
func TestLaggedCorrelationRealLag(t *testing.T) {
	const pairs, n, maxLag, lag = 40, 240, 10, 4
	r := rng(13)
	found := 0
	for range pairs {
		x := ar1(r, n, 0.7)
		y := ar1(r, n, 0.5)
		for i := lag; i < n; i++ {
			y[i] += 0.35 * x[i-lag]
		}
		res, err := PrewhitenedCCF(ser("x", x...), ser("y", y...), maxLag, -1)
		if err != nil {
			t.Fatal(err)
		}
		if res.BestLag == lag && res.Lower > 0 {
			found++
		}
	}
	t.Logf("real lag found with an interval above zero in %d of %d pairs", found, pairs)
	if found < 38 {
		t.Errorf("real lag-%d relation found in %d of %d pairs, want ≥ 38", lag, found, pairs)
	}
}
