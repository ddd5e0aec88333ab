package sim

import (
	"math"
	"reflect"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
)

func TestNativeIndex(t *testing.T) {
	// Schema 3: bucket i holds (2^((i-1)/8), 2^(i/8)].
	cases := []struct {
		v    float64
		want int32
	}{
		{1, 0},
		{math.Nextafter(1, 2), 1},
		{math.Exp2(1.0 / 8), 1},
		{2, 8},
		{0.5, -8},
		{0.001, -79}, // log2(0.001)·8 = -79.726, ceil = -79
		{2560, 91},   // log2(2560)·8 = 90.58, ceil = 91
	}
	for _, c := range cases {
		if got := nativeBuckets.Index(c.v); got != c.want {
			t.Errorf("Index(%v) = %d, want %d", c.v, got, c.want)
		}
	}
}

func TestNativeSnapshot(t *testing.T) {
	var h nativeHist
	h.observe(4, 1)    // bucket 16
	h.observe(1, 2)    // bucket 0 (grows the slice downwards)
	h.observe(1.05, 1) // bucket 1
	h.observe(0, 3)    // zero bucket
	got := h.snapshot()
	want := &histogram.Histogram{
		Schema:          3,
		ZeroThreshold:   nativeZeroThreshold,
		ZeroCount:       3,
		Count:           7,
		Sum:             4 + 2 + 1.05,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 2}, {Offset: 14, Length: 1}},
		PositiveBuckets: []int64{2, -1, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestClassicObserve(t *testing.T) {
	h := newClassicHist([]float64{0.1, 1}, false)
	h.observe(0.1, 1) // le=0.1 includes its bound
	h.observe(0.5, 2)
	h.observe(3, 1) // +Inf
	if want := []uint64{1, 2, 1}; !reflect.DeepEqual(h.counts, want) {
		t.Fatalf("counts = %v, want %v", h.counts, want)
	}
	if h.count != 4 || math.Abs(h.sum-4.1) > 1e-12 {
		t.Fatalf("count, sum = %d, %v, want 4, 4.1", h.count, h.sum)
	}
}
