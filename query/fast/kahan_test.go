package fast

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/util/kahansum"
)

// checkKahanFold folds xs into one step with kahanFold and with
// kahansum.Inc and fails unless sum and compensation agree bit for bit
// after every addition.
func checkKahanFold(t *testing.T, xs []float64) {
	t.Helper()
	has, seen := []bool{true}, []bool{false}
	val, c := []float64{0}, []float64{0}
	var want, wantC float64
	for i, x := range xs {
		kahanFold(has, []float64{x}, seen, val, c)
		if i == 0 {
			want, wantC = x, 0
		} else {
			want, wantC = kahansum.Inc(x, want, wantC)
		}
		if math.Float64bits(val[0]) != math.Float64bits(want) || math.Float64bits(c[0]) != math.Float64bits(wantC) {
			t.Fatalf("after %d of %v: kahanFold gives (%#x, %#x), kahansum.Inc (%#x, %#x)", i+1, xs,
				math.Float64bits(val[0]), math.Float64bits(c[0]), math.Float64bits(want), math.Float64bits(wantC))
		}
	}
}

func TestKahanFold(t *testing.T) {
	nan1 := math.Float64frombits(0x7ff8000000000001)
	nan2 := math.Float64frombits(0xfff4000000000abc) // negative, signalling payload
	inf, max := math.Inf(1), math.MaxFloat64
	for _, xs := range [][]float64{
		{1, 1e100, 1, -1e100},
		{0.1, 0.2, 0.3, -0.6},
		{max, max, -max},
		{-max, -max, 1},
		{inf, -inf, 1},
		{1, inf, nan1},
		{nan1, nan2, 1},
		{1, nan2, nan1},
		{nan2, 1, nan1, inf},
		{math.Copysign(0, -1), math.Copysign(0, -1), 0},
		{5e-324, 5e-324, -1e-310, 1},
		{1, 1e-16, 1e-16, 1e-16, -1},
	} {
		checkKahanFold(t, xs)
	}
	// Steps without a value and steps not yet seen, over several steps.
	has := []bool{true, false, true, true}
	seen := []bool{true, true, false, true}
	val, c := []float64{1, 2, 3, nan1}, []float64{0.5, 0, 0, 0}
	v := []float64{1e300, 7, 4, nan2}
	kahanFold(has, v, seen, val, c)
	w0, c0 := kahansum.Inc(1e300, 1, 0.5)
	w3, c3 := kahansum.Inc(nan2, nan1, 0)
	want := [][2]float64{{w0, c0}, {2, 0}, {4, 0}, {w3, c3}}
	for i := range want {
		if math.Float64bits(val[i]) != math.Float64bits(want[i][0]) || math.Float64bits(c[i]) != math.Float64bits(want[i][1]) || !seen[i] {
			t.Errorf("step %d: (%v, %v, seen %v), want (%v, %v)", i, val[i], c[i], seen[i], want[i][0], want[i][1])
		}
	}
}

// FuzzKahanFold checks kahanFold against kahansum.Inc bit for bit over
// arbitrary bit patterns (NaN payloads, infinities, subnormals).
func FuzzKahanFold(f *testing.F) {
	f.Add(uint64(0x3ff0000000000000), uint64(0x7ff8000000000001), uint64(0xfff4000000000abc), uint64(0x7ff0000000000000))
	f.Add(uint64(0x7fefffffffffffff), uint64(0x7fefffffffffffff), uint64(0xffefffffffffffff), uint64(1))
	f.Fuzz(func(t *testing.T, a, b, c, d uint64) {
		checkKahanFold(t, []float64{math.Float64frombits(a), math.Float64frombits(b), math.Float64frombits(c), math.Float64frombits(d)})
	})
}

// BenchmarkKahanFold is the sum fold's inner loop over one column of 241
// steps, a value at every step: kahanFold (on amd64 with AVX2 the
// assembly) against the Go loop and the loop that called kahansum.Inc for
// each step.
func BenchmarkKahanFold(b *testing.B) {
	const steps = 241
	has, seen := make([]bool, steps), make([]bool, steps)
	v, val, c := make([]float64, steps), make([]float64, steps), make([]float64, steps)
	for i := range has {
		has[i], seen[i] = true, true
		v[i], val[i] = float64(i%7)*0.37, float64(i)*1.1
	}
	b.Run("impl=kahanFold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			kahanFold(has, v, seen, val, c)
		}
	})
	b.Run("impl=kahanFoldGo", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			kahanFoldGo(has, v, seen, val, c)
		}
	})
	b.Run("impl=kahansum.Inc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, h := range has {
				if !h {
					continue
				}
				if !seen[i] {
					seen[i], val[i], c[i] = true, v[i], 0
					continue
				}
				val[i], c[i] = kahansum.Inc(v[i], val[i], c[i])
			}
		}
	})
}
