package fast

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
)

// FuzzDenseHistogram checks the dense path against upstream's
// FloatHistogram methods, bit for bit: a window of counter histograms of
// one layout (with zero, equal and falling buckets, so that Compact drops
// some and DetectReset fires) rated by denseRate then compacted and
// multiplied, against histogramRate's CopyTo, Sub, Add, Compact(0), Mul;
// and a sum of such rates (and of histograms of other layouts of the same
// schema) by denseSum, against KahanAdd, Add of the compensation and
// Compact(0).
func FuzzDenseHistogram(f *testing.F) {
	for seed := range uint64(20) {
		f.Add(seed, uint8(seed%5+2), uint8(seed%4+1))
	}
	f.Fuzz(func(t *testing.T, seed uint64, points, series uint8) {
		r := rand.New(rand.NewPCG(seed, 3))
		n := int(points%8) + 2
		var want, got []*histogram.FloatHistogram
		var factors []float64
		layouts := [][]histogram.Span{
			{{Offset: -3, Length: 4}, {Offset: 2, Length: 3}},
			{{Offset: 0, Length: 6}},
			{{Offset: -1, Length: 2}, {Offset: 0, Length: 2}, {Offset: 5, Length: 1}},
		}
		for s := 0; s < int(series%5)+1; s++ {
			spans := layouts[r.IntN(len(layouts))]
			nb := 0
			for _, sp := range spans {
				nb += int(sp.Length)
			}
			w := make([]hpoint, n)
			prev := make([]float64, nb)
			for i := range w {
				h := &histogram.FloatHistogram{
					Schema: 1, ZeroThreshold: 1e-3, CounterResetHint: histogram.UnknownCounterReset,
					PositiveSpans: slices.Clone(spans), PositiveBuckets: make([]float64, nb),
					NegativeSpans: []histogram.Span{{Offset: 1, Length: 2}}, NegativeBuckets: make([]float64, 2),
				}
				for k := range h.PositiveBuckets {
					switch r.IntN(5) {
					case 0: // unchanged: a zero difference, compacted away
						h.PositiveBuckets[k] = prev[k]
					case 1: // a fall: a counter reset
						h.PositiveBuckets[k] = prev[k] / 3
					default:
						h.PositiveBuckets[k] = prev[k] + r.Float64()*10
					}
					h.Count += h.PositiveBuckets[k]
				}
				copy(prev, h.PositiveBuckets)
				h.NegativeBuckets[0], h.NegativeBuckets[1] = float64(i), float64(i)*0.5
				h.ZeroCount = float64(i) * 1.5
				h.Count += h.ZeroCount + h.NegativeBuckets[0] + h.NegativeBuckets[1]
				h.Sum = h.Count * 0.37
				w[i] = hpoint{t: int64(i) * 15_000, h: h}
			}
			sh := &histShard{}
			sh.pairs(w)
			if sh.breaks[n]-sh.breaks[1] != 0 {
				t.Fatalf("one layout seen as several: %v", sh.breaks)
			}
			// Upstream: histogramRate's steps, then the factor.
			factor := 1 + r.Float64()
			up := upstreamRate(w)
			up.Mul(factor)
			dst := &histogram.FloatHistogram{}
			sh.denseRate(w, sh.resets, dst)
			c := &column{h: []histogram.FloatHistogram{*dst}, hraw: []bool{true}, v: []float64{factor}}
			// The sum takes the dense rate before it is materialised.
			got = append(got, &histogram.FloatHistogram{})
			c.h[0].CopyTo(got[len(got)-1])
			factors = append(factors, factor)
			materialize(c)
			if !sameBits(&c.h[0], up) {
				t.Fatalf("rate: dense %v, upstream %v", &c.h[0], up)
			}
			want = append(want, up)
		}
		// Upstream's sum: a copy of the first, KahanAdd of the others, the
		// compensation added, Compact(0).
		sum := want[0].Copy()
		var comp *histogram.FloatHistogram
		for _, h := range want[1:] {
			var err error
			if comp, _, _, err = sum.KahanAdd(h, comp); err != nil {
				t.Fatal(err)
			}
		}
		if comp != nil {
			_, _, _, _ = sum.Add(comp)
		}
		sum.Compact(0)
		var ds denseSum
		for i, h := range got {
			if !ds.add(h, factors[i], true) {
				t.Fatalf("dense sum refused input %d: %v", i, h)
			}
		}
		out := &histogram.FloatHistogram{}
		ds.output(out)
		if !sameBits(out, sum) {
			t.Fatalf("sum: dense %v, upstream %v", out, sum)
		}
	})
}

// upstreamRate is histogramRate's arithmetic for a counter window of one
// layout without gauges, through the FloatHistogram methods.
func upstreamRate(w []hpoint) *histogram.FloatHistogram {
	prev := w[0].h
	if w[1].h.DetectReset(prev) {
		prev = &histogram.FloatHistogram{Schema: w[1].h.Schema, CustomValues: w[1].h.CustomValues}
	}
	h, err := w[len(w)-1].h.CopyToSchema(w[len(w)-1].h.Schema)
	if err != nil {
		panic(err)
	}
	if _, _, _, err := h.Sub(prev); err != nil {
		panic(err)
	}
	for _, p := range w[1:] {
		if p.h.DetectReset(prev) {
			if _, _, _, err := h.Add(prev); err != nil {
				panic(err)
			}
		}
		prev = p.h
	}
	h.CounterResetHint = histogram.GaugeType
	return h.Compact(0)
}

func sameBits(a, b *histogram.FloatHistogram) bool {
	same := func(x, y []float64) bool {
		return slices.EqualFunc(x, y, func(p, q float64) bool { return math.Float64bits(p) == math.Float64bits(q) })
	}
	return a.CounterResetHint == b.CounterResetHint && a.Schema == b.Schema &&
		math.Float64bits(a.ZeroThreshold) == math.Float64bits(b.ZeroThreshold) &&
		math.Float64bits(a.ZeroCount) == math.Float64bits(b.ZeroCount) &&
		math.Float64bits(a.Count) == math.Float64bits(b.Count) && math.Float64bits(a.Sum) == math.Float64bits(b.Sum) &&
		slices.Equal(a.PositiveSpans, b.PositiveSpans) && slices.Equal(a.NegativeSpans, b.NegativeSpans) &&
		same(a.PositiveBuckets, b.PositiveBuckets) && same(a.NegativeBuckets, b.NegativeBuckets)
}
