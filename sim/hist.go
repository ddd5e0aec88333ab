package sim

import (
	"sort"

	"github.com/prometheus/prometheus/model/histogram"

	"github.com/tailroot/tailroot/internal/nativehist"
)

// classicHist accumulates observations into fixed upper bounds, like a
// prometheus_client Histogram. counts are per bucket (not cumulative); the
// last one is the +Inf bucket.
type classicHist struct {
	bounds []float64
	counts []uint64
	sum    float64
	count  uint64
	native *nativeHist // nil unless native histograms are on for this family
}

func newClassicHist(bounds []float64, native bool) *classicHist {
	h := &classicHist{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
	if native {
		h.native = &nativeHist{}
	}
	return h
}

// observe adds n observations of value v. A bucket counts values <= its
// bound, as prometheus_client does.
func (h *classicHist) observe(v float64, n uint64) {
	if n == 0 {
		return
	}
	h.counts[sort.SearchFloat64s(h.bounds, v)] += n
	h.sum += v * float64(n)
	h.count += n
	if h.native != nil {
		h.native.observe(v, n)
	}
}

// Native histograms use schema 3 (bucket growth factor 2^(1/8) ≈ 1.09, what
// client_golang picks for NativeHistogramBucketFactor 1.1) and client_golang's
// default zero threshold 2^-128.
const (
	nativeSchema        = 3
	nativeZeroThreshold = nativehist.ZeroThreshold
)

var nativeBuckets = nativehist.MustSchema(nativeSchema)

// nativeHist accumulates a cumulative native histogram (schema 3).
type nativeHist struct{ nativehist.Dense }

func (h *nativeHist) observe(v float64, n uint64) { h.Observe(nativeBuckets, v, n) }

// snapshot returns the histogram as Prometheus holds it: integer buckets,
// delta-encoded, one span per run of non-empty buckets.
func (h *nativeHist) snapshot() *histogram.Histogram { return h.Histogram(nativeBuckets) }
