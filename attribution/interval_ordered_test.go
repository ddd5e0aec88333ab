package attribution

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// windowStats holds only the ranks [off, off+len(v)) of a sample of n and
// fails the test on any other, so a test sees that QuantileCIRanks names
// every rank QuantileCIOrdered reads.
type windowStats struct {
	t   *testing.T
	n   int
	off int
	v   []float64
}

func (w windowStats) Len() int { return w.n }
func (w windowStats) At(r int) float64 {
	if r < w.off || r >= w.off+len(w.v) {
		w.t.Fatalf("rank %d read outside the window [%d, %d)", r, w.off, w.off+len(w.v))
	}
	return w.v[r-w.off]
}

// TestQuantileCIOrderedMatches checks that the bootstrap and
// Maritz–Jarrett intervals computed from only the ranks QuantileCIRanks
// names equal QuantileCI's on the whole sample bit for bit, and that the
// span is a small part of a large sample.
func TestQuantileCIOrderedMatches(t *testing.T) {
	for _, n := range []int{2, 10, 1000, 100000} {
		for _, m := range []CIMethod{CIBootstrap, CIMaritzJarrett, CIOrderStatistic} {
			for _, p := range []float64{0.5, 0.9, 0.99} {
				t.Run(fmt.Sprintf("n=%d/%s/p=%v", n, m, p), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(n), 7))
					x := make([]float64, n)
					for i := range x {
						x[i] = math.Exp(rng.NormFloat64())
					}
					opts := CIOptions{Method: m, Seed: 1}
					want, werr := QuantileCI(x, p, 0.95, opts)
					lo, hi, err := QuantileCIRanks(n, p, 0.95, opts)
					if (err != nil) != (werr != nil) {
						t.Fatalf("ranks error %v, interval error %v", err, werr)
					}
					if err != nil {
						return
					}
					y := slices.Clone(x)
					slices.Sort(y)
					got, err := QuantileCIOrdered(windowStats{t: t, n: n, off: lo, v: y[lo : hi+1]}, p, 0.95, opts)
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Fatalf("ordered %+v, want %+v", got, want)
					}
					// A few standard deviations of the rank, not a share of n.
					if limit := 20*math.Sqrt(float64(n)*p*(1-p)) + 50; float64(hi-lo+1) > limit {
						t.Errorf("span %d ranks for n=%d, over %.0f", hi-lo+1, n, limit)
					}
				})
			}
		}
	}
}

// TestDeltaCIMatches checks DeltaCI from sums against QuantileCI's delta
// method on the whole sample.
func TestDeltaCIMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float64, 10000)
	for i := range x {
		x[i] = rng.ExpFloat64()
	}
	want, err := QuantileCI(x, 0.9, 0.95, CIOptions{Method: CIDeltaKDE})
	if err != nil {
		t.Fatal(err)
	}
	mean := 0.0
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	ss := 0.0
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	s := DeltaSummary{
		N: len(x), SS: ss, Estimate: Quantile(x, 0.9), IQR: Quantile(x, 0.75) - Quantile(x, 0.25),
		KernelSum: func(q, bw float64) (float64, error) {
			var in []float64
			for _, v := range x {
				if v >= q-10*bw && v < q+10*bw {
					in = append(in, v)
				}
			}
			return KernelSum(in, q, bw), nil
		},
	}
	got, err := DeltaCI(s, 0.9, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]float64{{got.Lower, want.Lower}, {got.Upper, want.Upper}, {got.SE, want.SE}, {got.Estimate, want.Estimate}} {
		if math.Abs(c[0]-c[1]) > 1e-12*math.Abs(c[1]) {
			t.Errorf("delta from sums %+v, want %+v", got, want)
		}
	}
}

// TestQuantileDiffCIOrderedMatches: the difference intervals from only the
// ranks QuantileDiffCIRanks names equal QuantileDiffCI's bit for bit.
func TestQuantileDiffCIOrderedMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	a, b := make([]float64, 30000), make([]float64, 20000)
	for i := range a {
		a[i] = math.Exp(rng.NormFloat64())
	}
	for i := range b {
		b[i] = 1.2 * math.Exp(rng.NormFloat64())
	}
	ya, yb := slices.Clone(a), slices.Clone(b)
	slices.Sort(ya)
	slices.Sort(yb)
	for _, m := range []CIMethod{CIBootstrap, CIMaritzJarrett, CIOrderStatistic} {
		for _, p := range []float64{0.5, 0.99} {
			opts := CIOptions{Method: m, Seed: 3}
			want, err := QuantileDiffCI(a, b, p, 0.9, opts)
			if err != nil {
				t.Fatalf("%s p=%v: %v", m, p, err)
			}
			ra, rb, err := QuantileDiffCIRanks(len(a), len(b), p, 0.9, opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := QuantileDiffCIOrdered(windowStats{t: t, n: len(a), off: ra[0], v: ya[ra[0] : ra[1]+1]},
				windowStats{t: t, n: len(b), off: rb[0], v: yb[rb[0] : rb[1]+1]}, p, 0.9, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s p=%v: ordered %+v, want %+v", m, p, got, want)
			}
		}
	}
}
