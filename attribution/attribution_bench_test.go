package attribution

import (
	"math"
	"math/rand/v2"
	"testing"
)

// benchRequests is 1M requests × 7 stages of log-normal durations with a
// shared per-request factor, built once.
var benchRequests = func() func(b *testing.B) Requests {
	var r Requests
	return func(b *testing.B) Requests {
		if r.Len() == 0 {
			rng := rand.New(rand.NewPCG(1, 1))
			cols := randColsShape(rng, 1_000_000, 7)
			var err error
			if r, err = NewRequests(stageNames(7), cols); err != nil {
				b.Fatal(err)
			}
		}
		return r
	}
}()

var (
	sinkBreakdown Breakdown
	sinkFloat     float64
)

func BenchmarkTailMean1Mx7(b *testing.B) {
	reqs := benchRequests(b)
	b.ReportAllocs()
	for b.Loop() {
		bd, err := TailMean(reqs, 0.99)
		if err != nil {
			b.Fatal(err)
		}
		sinkBreakdown = bd
	}
}

func BenchmarkExcess1Mx7(b *testing.B) {
	reqs := benchRequests(b)
	b.ReportAllocs()
	for b.Loop() {
		sinkBreakdown, _ = Excess(reqs, 0.99)
	}
}

func BenchmarkEuler1Mx7(b *testing.B) {
	reqs := benchRequests(b)
	b.ReportAllocs()
	for b.Loop() {
		sinkBreakdown, _ = Euler(reqs, 0.99, EulerOptions{})
	}
}

func BenchmarkNewRequests1Mx7(b *testing.B) {
	reqs := benchRequests(b)
	cols := make([][]float64, reqs.K())
	for j := range cols {
		cols[j] = reqs.Stage(j)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewRequests(reqs.Stages(), cols)
		if err != nil {
			b.Fatal(err)
		}
		sinkFloat = r.Total()[0]
	}
}

func BenchmarkQuantile1M(b *testing.B) {
	reqs := benchRequests(b)
	b.ReportAllocs()
	for b.Loop() {
		sinkFloat = Quantile(reqs.Total(), 0.99)
	}
}

func BenchmarkAccumulate1Mx7(b *testing.B) {
	reqs := benchRequests(b)
	grid := DefaultGrid()
	b.ReportAllocs()
	for b.Loop() {
		sinkFloat = Accumulate(reqs, grid).Count[0]
	}
}

func BenchmarkTailMeanAccumulators(b *testing.B) {
	acc := Accumulate(benchRequests(b), DefaultGrid())
	b.ReportAllocs()
	for b.Loop() {
		sinkBreakdown, _ = TailMeanAccumulators(acc, 0.99)
	}
}

func BenchmarkShapley100kx7(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	now := mustRequests(b, stageNames(7), randColsShape(rng, 100_000, 7))
	base := mustRequests(b, stageNames(7), randColsShape(rng, 100_000, 7))
	b.ReportAllocs()
	for b.Loop() {
		r, _ := Shapley(now, base, 0.99)
		sinkFloat = r.Target
	}
}

func BenchmarkIndependenceEstimate7(b *testing.B) {
	hists := make([]Histogram, 7)
	upper := DefaultGrid().Upper()
	for j := range hists {
		hists[j] = histOfCDF(func(x float64) float64 { return 1 - math.Exp(-x*float64(j+1)) }, upper, 1e6)
	}
	b.ReportAllocs()
	for b.Loop() {
		e, _ := IndependenceEstimate(stageNames(7), hists, 0.99, ConvolutionOptions{})
		sinkFloat = e.Value
	}
}

func BenchmarkQuantileCIBootstrap100k(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	x := make([]float64, 100_000)
	for i := range x {
		x[i] = rng.ExpFloat64()
	}
	b.ReportAllocs()
	for b.Loop() {
		iv, _ := QuantileCI(x, 0.99, 0.95, CIOptions{})
		sinkFloat = iv.Lower
	}
}
