package attribution

import (
	"math"
	"math/bits"
)

// Output token positions are 1-based: position 1 is the first token (its
// latency is the TTFT), position p ≥ 2 the token after inter-token gap
// p−1. They are bucketed by powers of two, one definition for every view
// of them (the derived tailroot_token_latency_seconds series and the
// breakdown endpoint's token heat map): bucket 0 holds position 1, bucket
// k ≥ 1 the positions (2^(k−1), 2^k], and the last bucket every position
// past 2^(NumTokenPositionBuckets−2).
const NumTokenPositionBuckets = 14

// TokenPositionBucket is the bucket of 1-based position p (p ≤ 1 is
// bucket 0): ⌈log₂ p⌉, capped at the last bucket.
func TokenPositionBucket(p int) int {
	if p <= 1 {
		return 0
	}
	return min(bits.Len64(uint64(p-1)), NumTokenPositionBuckets-1)
}

// TokenPositionBound is the inclusive upper bound of bucket k: 2^k, or
// +Inf for the last bucket.
func TokenPositionBound(k int) float64 {
	if k >= NumTokenPositionBuckets-1 {
		return math.Inf(1)
	}
	return float64(uint64(1) << k)
}
