// Package nativehist holds the bucket arithmetic of Prometheus native
// histograms that tailroot's producers share (the simulator and the series
// derived from request records), so both place a value in the same bucket
// client_golang would.
package nativehist

import (
	"fmt"
	"math"
	"sort"
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
