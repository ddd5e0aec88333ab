package tailfn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOrderKey checks that keys order as the values do, across signs,
// zeros, subnormals and infinities, and that keyValue inverts orderKey.
func TestOrderKey(t *testing.T) {
	vals := []float64{
		math.Inf(-1), -math.MaxFloat64, -1, -math.SmallestNonzeroFloat64, math.Copysign(0, -1), 0,
		math.SmallestNonzeroFloat64, 1e-300, 0.001, 1, 1.0000000000000002, 100, math.MaxFloat64, math.Inf(1),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		vals = append(vals, math.Float64frombits(rng.Uint64()))
	}
	vals = slices.DeleteFunc(vals, math.IsNaN)
	for _, a := range vals {
		if b := keyValue(orderKey(a)); b != a {
			t.Errorf("keyValue(orderKey(%v)) = %v", a, b)
		}
		for _, b := range vals[:20] {
			if ka, kb := orderKey(a), orderKey(b); (a < b) != (ka < kb) || (a == b) != (ka == kb) {
				t.Errorf("%v vs %v: keys %d vs %d", a, b, ka, kb)
			}
		}
	}
	if math.Signbit(keyValue(orderKey(math.Copysign(0, -1)))) {
		t.Error("−0 does not map to +0")
	}
}

// TestSplitKeys checks the thresholds both ends of a split compute.
func TestSplitKeys(t *testing.T) {
	for _, tc := range []struct {
		lo, hi uint64
		fanout int
		want   []uint64
	}{
		{5, 5, 3, nil},
		{5, 8, 3, []uint64{5, 6, 7}},
		{5, 8, 255, []uint64{5, 6, 7}},
		{0, 7, 3, []uint64{1, 3, 5}},
		{0, math.MaxUint64, 1, []uint64{math.MaxUint64 / 2}},
	} {
		if got := SplitKeys(tc.lo, tc.hi, tc.fanout); !slices.Equal(got, tc.want) {
			t.Errorf("SplitKeys(%d, %d, %d) = %v, want %v", tc.lo, tc.hi, tc.fanout, got, tc.want)
		}
	}
	ks := SplitKeys(1<<63, 1<<63+1<<56, 255)
	if len(ks) != 255 || !slices.IsSorted(ks) || len(slices.Compact(slices.Clone(ks))) != 255 || ks[0] <= 1<<63 || ks[254] >= 1<<63+1<<56 {
		t.Errorf("255 thresholds inside the interval, increasing: %v…%v", ks[0], ks[len(ks)-1])
	}
}
