package bpf

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
)

// Expected slots computed by hand from the bucket definition
// slot s holds (2^(s-31), 2^(s-30)] seconds:
func TestSlotHandComputed(t *testing.T) {
	cases := []struct {
		name string
		ns   uint64
		want int
	}{
		{"zero", 0, 0},
		{"1ns in (0.931, 1.863] ns", 1, 1},
		{"2ns in (1.863, 3.725] ns", 2, 2},
		{"953ns <= 2^-20 s = 953.674 ns", 953, 10},
		{"954ns > 2^-20 s", 954, 11},
		{"1us in (953.67, 1907.35] ns", 1000, 11},
		{"976562ns <= 2^-10 s = 976562.5 ns", 976562, 20},
		{"976563ns > 2^-10 s", 976563, 21},
		{"1ms in (0.977, 1.953] ms", 1_000_000, 21},
		{"2^-9 s = 1953125 ns exactly, upper-inclusive", 1_953_125, 21},
		{"1953126ns", 1_953_126, 22},
		{"0.5 s exactly", 500_000_000, 29},
		{"0.5 s + 1ns", 500_000_001, 30},
		{"1 s exactly", 1_000_000_000, 30},
		{"1 s + 1ns", 1_000_000_001, 31},
		{"2 s exactly", 2_000_000_000, 31},
		{"2^33 s exactly", 8_589_934_592_000_000_000, 63},
		{"above 2^33 s folds into top", 8_589_934_592_000_000_001, 63},
		{"max uint64", math.MaxUint64, 63},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Slot(c.ns); got != c.want {
				t.Fatalf("Slot(%d) = %d, want %d", c.ns, got, c.want)
			}
		})
	}
}

// promKey is client_golang's schema-0 bucket key for a positive value
// (prometheus/client_golang histogram.go, findBucket for schema <= 0):
// frac, exp := math.Frexp(v); key = exp, minus one when frac == 0.5.
func promKey(v float64) int {
	frac, exp := math.Frexp(v)
	if frac == 0.5 {
		exp--
	}
	return exp
}

// TestSlotMatchesClientGolang compares the integer bucketing with the
// bucket client_golang would put the same value, in seconds, in. Values are
// kept below 2^53 ns so ns/1e9 is computed from an exact float64.
func TestSlotMatchesClientGolang(t *testing.T) {
	check := func(ns uint64) {
		t.Helper()
		want := promKey(float64(ns)/1e9) + nativeOffset
		if got := Slot(ns); got != want {
			t.Fatalf("Slot(%d) = %d, client_golang bucket key %d => slot %d", ns, got, want-nativeOffset, want)
		}
	}
	// Every bucket boundary that is a whole number of ns (2^j s for j >= -9,
	// since 1e9 = 2^9 * 1953125), and its neighbours.
	for j := -9; j <= 23; j++ {
		b := uint64(math.Ldexp(1e9, j))
		check(b - 1)
		check(b)
		check(b + 1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		ns := r.Uint64N(1<<53-1) >> r.UintN(53)
		if ns == 0 {
			continue
		}
		check(ns)
	}
}

func TestNativeHandComputed(t *testing.T) {
	var h Hist
	h.Slots[0] = 2  // two exact zeros
	h.Slots[11] = 3 // native index -19: (2^-20, 2^-19] s
	h.Slots[12] = 1 // index -18
	h.Slots[15] = 4 // index -15, after two empty buckets
	h.SumNs = 4_000_000
	nh := h.Native()
	want := &histogram.Histogram{
		CounterResetHint: histogram.UnknownCounterReset,
		Schema:           0,
		ZeroThreshold:    math.Ldexp(1, -128),
		ZeroCount:        2,
		Count:            10,
		Sum:              0.004,
		PositiveSpans:    []histogram.Span{{Offset: -19, Length: 2}, {Offset: 2, Length: 1}},
		PositiveBuckets:  []int64{3, -2, 3},
	}
	if !nh.Equals(want) {
		t.Fatalf("Native() = %v\nwant        %v", nh, want)
	}
	if err := nh.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	// Prometheus' own iterator must see the buckets at the right bounds.
	wantBuckets := []struct {
		lo, hi float64
		count  uint64
	}{
		{math.Ldexp(1, -20), math.Ldexp(1, -19), 3},
		{math.Ldexp(1, -19), math.Ldexp(1, -18), 1},
		{math.Ldexp(1, -16), math.Ldexp(1, -15), 4},
	}
	it := nh.PositiveBucketIterator()
	for i, w := range wantBuckets {
		if !it.Next() {
			t.Fatalf("iterator ended at bucket %d", i)
		}
		b := it.At()
		if b.Lower != w.lo || b.Upper != w.hi || b.Count != w.count || b.LowerInclusive || !b.UpperInclusive {
			t.Fatalf("bucket %d = %+v, want (%g, %g] count %d", i, b, w.lo, w.hi, w.count)
		}
	}
	if it.Next() {
		t.Fatalf("extra bucket %+v", it.At())
	}
}

func TestNativeEmptyAndTop(t *testing.T) {
	var h Hist
	nh := h.Native()
	if nh.Count != 0 || len(nh.PositiveSpans) != 0 || nh.Validate() != nil {
		t.Fatalf("empty: %v (validate %v)", nh, nh.Validate())
	}
	h.Slots[1] = 1
	h.Slots[63] = 5
	nh = h.Native()
	// slot 1 is index -29; slot 63 is index 33, 62 buckets later.
	want := []histogram.Span{{Offset: -29, Length: 1}, {Offset: 61, Length: 1}}
	if len(nh.PositiveSpans) != 2 || nh.PositiveSpans[0] != want[0] || nh.PositiveSpans[1] != want[1] {
		t.Fatalf("spans %v, want %v", nh.PositiveSpans, want)
	}
	if err := nh.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestHistHelpers(t *testing.T) {
	var a, b Hist
	a.Slots[21] = 2 // (0.977 ms, 1.953 ms]
	a.Slots[23] = 1 // (3.9 ms, 7.8 ms]
	a.SumNs = 7_000_000
	b.Slots[23] = 4
	b.SumNs = 20_000_000
	a.Add(&b)
	if a.Count() != 7 || a.SumNs != 27_000_000 {
		t.Fatalf("after Add: count %d sum %d, want 7 and 27000000", a.Count(), a.SumNs)
	}
	// Lower bound of slot 23 is 2^-8 s = 3.906 ms >= 2 ms; slot 21's is 0.977 ms.
	if got := a.CountAbove(0.002); got != 5 {
		t.Fatalf("CountAbove(2ms) = %d, want 5", got)
	}
	if got := SlotUpperBound(30); got != 1 {
		t.Fatalf("SlotUpperBound(30) = %g, want 1", got)
	}
	bin, _ := a.MarshalBinary()
	var c Hist
	if err := c.UnmarshalBinary(bin); err != nil || c != a {
		t.Fatalf("round trip: %v %+v", err, c)
	}
	if err := c.UnmarshalBinary(bin[:10]); err == nil {
		t.Fatal("short input accepted")
	}
}

func FuzzHistUnmarshal(f *testing.F) {
	var h Hist
	h.Slots[5], h.Slots[40], h.SumNs = 3, 1, 99
	seed, _ := h.MarshalBinary()
	f.Add(seed)
	f.Add(make([]byte, HistSize))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Hist
		if err := h.UnmarshalBinary(b); err != nil {
			return
		}
		back, _ := h.MarshalBinary()
		if string(back) != string(b) {
			t.Fatal("round trip changed bytes")
		}
		nh := h.Native()
		var sum uint64
		for _, c := range h.Slots[1:] {
			sum += c
		}
		if sum > math.MaxInt64 {
			return // delta encoding needs int64 counts; the kernel never gets there
		}
		if nh.Count != h.Count() || nh.ZeroCount != h.Slots[0] {
			t.Fatalf("count %d zero %d, want %d %d", nh.Count, nh.ZeroCount, h.Count(), h.Slots[0])
		}
	})
}
