package attribution

import (
	"math"
	"testing"
)

// TestTokenPositionBuckets: bucket k holds (2^(k−1), 2^k], worked by hand
// at the edges, and every position lies within its bucket's bounds.
func TestTokenPositionBuckets(t *testing.T) {
	for _, c := range []struct{ p, k int }{
		{0, 0}, {1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 3}, {9, 4}, {64, 6}, {65, 7}, {4096, 12}, {4097, 13}, {1 << 40, 13},
	} {
		if got := TokenPositionBucket(c.p); got != c.k {
			t.Errorf("TokenPositionBucket(%d) = %d, want %d", c.p, got, c.k)
		}
	}
	for p := 1; p <= 10000; p++ {
		k := TokenPositionBucket(p)
		lo := 0.0
		if k > 0 {
			lo = TokenPositionBound(k - 1)
		}
		if !(float64(p) > lo && float64(p) <= TokenPositionBound(k)) {
			t.Fatalf("position %d in bucket %d = (%v, %v]", p, k, lo, TokenPositionBound(k))
		}
	}
	if !math.IsInf(TokenPositionBound(NumTokenPositionBuckets-1), 1) || TokenPositionBound(12) != 4096 {
		t.Error("bounds")
	}
}
