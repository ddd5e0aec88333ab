package attribution

import (
	"encoding/binary"
	"math"
	"testing"
)

// decodeCols turns fuzz bytes into k stages of quantised durations (many
// ties and zeros) and a quantile level.
func decodeCols(data []byte) ([][]float64, float64, bool) {
	if len(data) < 3 {
		return nil, 0, false
	}
	k := 1 + int(data[0]%6)
	p := float64(data[1]) / 255
	data = data[2:]
	n := len(data) / (2 * k)
	if n == 0 || n > 2000 {
		return nil, 0, false
	}
	cols := make([][]float64, k)
	for j := range cols {
		cols[j] = make([]float64, n)
		for r := range n {
			v := binary.LittleEndian.Uint16(data[2*(j*n+r):])
			cols[j][r] = float64(v%1000) / 8
		}
	}
	return cols, p, true
}

// FuzzDecompose checks TailMean, Excess and Euler against the naive
// references, that tail means add up, and that accumulator brackets hold,
// on arbitrary (tie-heavy) inputs.
func FuzzDecompose(f *testing.F) {
	f.Add([]byte{2, 250, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0})
	f.Add([]byte{0, 255, 9, 9, 9, 9, 9, 9})
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{3, 128, 10, 200, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 210, 220, 230})
	grid, _ := NewGrid([]float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256})
	f.Fuzz(func(t *testing.T, data []byte) {
		cols, p, ok := decodeCols(data)
		if !ok {
			return
		}
		reqs, err := NewRequests(stageNames(len(cols)), cols)
		if err != nil {
			t.Fatal(err)
		}
		q, target, contrib := refTailMean(cols, p)
		b, err := TailMean(reqs, p)
		if err != nil {
			t.Fatal(err)
		}
		if b.Quantile != q || !approx(b.Target, target, 1e-12) || math.Abs(sum(b.Contrib)-b.Target) > 1e-9 {
			t.Fatalf("tail mean: q %v target %v Σ %v; reference %v %v", b.Quantile, b.Target, sum(b.Contrib), q, target)
		}
		for j := range contrib {
			if !approx(b.Contrib[j], contrib[j], 1e-12) {
				t.Fatalf("stage %d: %v, reference %v", j, b.Contrib[j], contrib[j])
			}
		}
		if _, err := Excess(reqs, p); err != nil {
			t.Fatal(err)
		}
		eu, err := Euler(reqs, p, EulerOptions{HalfWidth: 2, Kernel: WindowEpanechnikov})
		if err != nil {
			t.Fatal(err)
		}
		for j, w := range refEuler(cols, p, 2, WindowEpanechnikov) {
			if !approx(eu.Contrib[j], w, 1e-12) {
				t.Fatalf("euler stage %d: %v, reference %v", j, eu.Contrib[j], w)
			}
		}
		acc, err := TailMeanAccumulators(Accumulate(reqs, grid), p)
		if err != nil {
			t.Fatal(err)
		}
		for j := range contrib {
			if contrib[j] < acc.Lower[j]-1e-9 || contrib[j] > acc.Upper[j]+1e-9 {
				t.Fatalf("stage %d: records %v outside [%v, %v]", j, contrib[j], acc.Lower[j], acc.Upper[j])
			}
		}
		if target < acc.TargetLower-1e-9 || target > acc.TargetUpper+1e-9 || q < acc.QuantileLower || q > acc.QuantileUpper {
			t.Fatalf("records %v (q %v) outside [%v, %v] (q in [%v, %v])", target, q, acc.TargetLower, acc.TargetUpper, acc.QuantileLower, acc.QuantileUpper)
		}
	})
}

// FuzzFromCumulative decodes Prometheus-style cumulative buckets from
// bytes; any input either is rejected or yields a histogram on which every
// histogram function runs without panicking and returns ordered results.
func FuzzFromCumulative(f *testing.F) {
	f.Add([]byte{1, 3, 2, 5, 4, 6}, false)
	f.Add([]byte{0, 1, 1, 1}, true)
	f.Add([]byte{5, 0, 6, 0, 7, 9}, true)
	f.Add([]byte{2, 2, 1, 3}, false)
	f.Fuzz(func(t *testing.T, data []byte, inf bool) {
		if len(data) < 2 || len(data) > 200 {
			return
		}
		nb := len(data) / 2
		upper := make([]float64, nb)
		cum := make([]float64, nb)
		for i := range nb {
			upper[i] = float64(data[2*i]) / 16
			cum[i] = float64(data[2*i+1])
		}
		if inf {
			upper[nb-1] = math.Inf(1)
		}
		h, err := FromCumulative(upper, cum, math.NaN())
		if err != nil {
			return
		}
		if sum(h.Counts) != cum[nb-1] {
			t.Fatalf("counts %v do not add to %v", h.Counts, cum[nb-1])
		}
		hs := []Histogram{h, h}
		names := []string{"a", "b"}
		for _, p := range []float64{0, 0.5, 0.99, 1} {
			cb, err := ComonotonicBound(names, hs, p)
			if err != nil {
				t.Fatal(err)
			}
			cq, err := ComonotonicQuantile(names, hs, p)
			if err != nil {
				t.Fatal(err)
			}
			ie, err := IndependenceEstimate(names, hs, p, ConvolutionOptions{Cells: 256})
			if err != nil {
				t.Fatal(err)
			}
			// The estimate lies in [0, U + kΔ/2], U = Σ_i q_i(1 − (1−p)/k)
			// the union bound and Δ = U/(cells−1).
			u := 2 * h.quantile(1-(1-p)/2)
			if math.IsNaN(ie.Value) || ie.Value < 0 || ie.Value > u*(1+1.0/255)*(1+1e-12) {
				t.Fatalf("p=%v: independence %v outside [0, %v]", p, ie.Value, u*(1+1.0/255))
			}
			if math.IsNaN(cb.Value) || math.IsNaN(cq.Value) || cq.Value < 0 {
				t.Fatalf("p=%v: bound %v, comonotonic quantile %v", p, cb.Value, cq.Value)
			}
		}
		if _, err := HistogramMeans(names, hs); err != nil {
			t.Fatal(err)
		}
	})
}
