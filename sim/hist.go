package sim

import (
	"math"
	"sort"

	"github.com/tailroot/tailroot/internal/nativehist"

	"github.com/prometheus/prometheus/model/histogram"
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

// nativeIndex returns the schema-3 bucket index of v > 0: bucket i holds
// (2^((i-1)/8), 2^(i/8)]. Same computation as client_golang.
func nativeIndex(v float64) int32 { return nativeBuckets.Index(v) }

// nativeHist accumulates a cumulative native histogram. counts is dense from
// bucket index offset upward; it grows on demand.
type nativeHist struct {
	offset int32
	counts []uint64
	zero   uint64
	sum    float64
	count  uint64
}

func (h *nativeHist) observe(v float64, n uint64) {
	h.sum += v * float64(n)
	h.count += n
	if v <= nativeZeroThreshold {
		h.zero += n
		return
	}
	idx := nativeIndex(v)
	switch {
	case len(h.counts) == 0:
		h.offset = idx
		h.counts = append(h.counts, 0)
	case idx < h.offset:
		grow := int(h.offset - idx)
		h.counts = append(make([]uint64, grow, grow+len(h.counts)), h.counts...)
		h.offset = idx
	case int(idx-h.offset) >= len(h.counts):
		h.counts = append(h.counts, make([]uint64, int(idx-h.offset)-len(h.counts)+1)...)
	}
	h.counts[idx-h.offset] += n
}

// snapshot returns the histogram as Prometheus holds it: integer buckets,
// delta-encoded, one span per run of non-empty buckets.
func (h *nativeHist) snapshot() *histogram.Histogram {
	out := &histogram.Histogram{
		Schema:        nativeSchema,
		ZeroThreshold: nativeZeroThreshold,
		ZeroCount:     h.zero,
		Count:         h.count,
		Sum:           h.sum,
	}
	var (
		prev    int64
		lastIdx = int32(math.MinInt32)
	)
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		idx := h.offset + int32(i)
		switch {
		case lastIdx == math.MinInt32:
			out.PositiveSpans = append(out.PositiveSpans, histogram.Span{Offset: idx, Length: 1})
		case idx == lastIdx+1:
			out.PositiveSpans[len(out.PositiveSpans)-1].Length++
		default:
			out.PositiveSpans = append(out.PositiveSpans, histogram.Span{Offset: idx - lastIdx - 1, Length: 1})
		}
		out.PositiveBuckets = append(out.PositiveBuckets, int64(c)-prev)
		prev = int64(c)
		lastIdx = idx
	}
	return out
}
