// Package nativehist holds the bucket arithmetic of Prometheus native
// histograms that tailroot's producers share (the simulator and the series
// derived from request records), so both place a value in the same bucket
// client_golang would.
package nativehist

import (
	"fmt"
	"math"
	"sort"

	"github.com/prometheus/prometheus/model/histogram"
)

// ZeroThreshold is client_golang's default zero-bucket width, 2^-128.
const ZeroThreshold = 2.938735877055719e-39

// Schema is an exponential native-histogram schema: bucket i holds
// (2^((i−1)/2^s), 2^(i/2^s)].
type Schema struct {
	s      int32
	bounds []float64 // fractions in [0.5, 1) where buckets start within one power of two
}

// NewSchema returns schema s, 0 ≤ s ≤ 8 (the exponential schemas whose
// index fits the fraction table; Prometheus allows −4..8).
func NewSchema(s int32) (Schema, error) {
	if s < 0 || s > 8 {
		return Schema{}, fmt.Errorf("native histogram schema %d: want 0..8", s)
	}
	b := make([]float64, 1<<s)
	for k := range b {
		b[k] = math.Exp2(float64(k)/float64(len(b)) - 1)
	}
	return Schema{s: s, bounds: b}, nil
}

// MustSchema is NewSchema for constants.
func MustSchema(s int32) Schema {
	sc, err := NewSchema(s)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return sc
}

// Schema returns the schema number.
func (sc Schema) Schema() int32 { return sc.s }

// Index returns the bucket index of v > 0, computed as client_golang does:
// with v = frac·2^exp, frac in [0.5, 1), the index is exp−1 doubled s times
// plus the position of frac among the bucket starts.
func (sc Schema) Index(v float64) int32 {
	frac, exp := math.Frexp(v)
	return int32(sort.SearchFloat64s(sc.bounds, frac) + (exp-1)*len(sc.bounds))
}

// Upper returns the upper bound 2^(i/2^s) of bucket i.
func (sc Schema) Upper(i int32) float64 {
	return math.Exp2(float64(i) / float64(len(sc.bounds)))
}

// Dense is a cumulative integer native histogram of values ≥ 0, its
// buckets held densely from index Offset upward so an observation is one
// increment. The exported fields and their JSON names are what callers
// checkpoint.
type Dense struct {
	Offset int32    `json:"o"`
	Counts []uint64 `json:"c,omitempty"`
	Zero   uint64   `json:"z"`
	Count  uint64   `json:"n"`
	Sum    float64  `json:"s"`
}

// Observe adds n observations of v, placed by sc; values up to
// ZeroThreshold go to the zero bucket.
func (d *Dense) Observe(sc Schema, v float64, n uint64) {
	d.Count += n
	d.Sum += v * float64(n)
	if v <= ZeroThreshold {
		d.Zero += n
		return
	}
	idx := sc.Index(v)
	switch {
	case len(d.Counts) == 0:
		d.Offset = idx
		d.Counts = append(d.Counts, 0)
	case idx < d.Offset:
		grow := int(d.Offset - idx)
		d.Counts = append(make([]uint64, grow, grow+len(d.Counts)), d.Counts...)
		d.Offset = idx
	case int(idx-d.Offset) >= len(d.Counts):
		d.Counts = append(d.Counts, make([]uint64, int(idx-d.Offset)-len(d.Counts)+1)...)
	}
	d.Counts[idx-d.Offset] += n
}

// Histogram returns d as Prometheus stores it under schema sc: integer
// buckets, delta-encoded, one span per run of non-empty buckets.
func (d *Dense) Histogram(sc Schema) *histogram.Histogram {
	out := &histogram.Histogram{
		Schema:        sc.s,
		ZeroThreshold: ZeroThreshold,
		ZeroCount:     d.Zero,
		Count:         d.Count,
		Sum:           d.Sum,
	}
	var prev int64
	last := int32(math.MinInt32)
	for i, c := range d.Counts {
		if c == 0 {
			continue
		}
		idx := d.Offset + int32(i)
		switch {
		case last == math.MinInt32:
			out.PositiveSpans = append(out.PositiveSpans, histogram.Span{Offset: idx, Length: 1})
		case idx == last+1:
			out.PositiveSpans[len(out.PositiveSpans)-1].Length++
		default:
			out.PositiveSpans = append(out.PositiveSpans, histogram.Span{Offset: idx - last - 1, Length: 1})
		}
		out.PositiveBuckets = append(out.PositiveBuckets, int64(c)-prev)
		prev = int64(c)
		last = idx
	}
	return out
}
