package fast

import (
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/util/kahansum"
)

// The dense path computes what upstream's FloatHistogram methods compute,
// bucket by bucket, without their span merging: a rate over a window whose
// histograms share one bucket layout is the last histogram minus the first
// (plus the value before each counter reset), bucket by bucket, as Sub and
// Add do when the layouts match; and a sum adds each present bucket with
// kahansum.Inc, inserting the buckets it has not seen, as KahanAdd does.
// A bucket is present in a rate where the difference is not zero (upstream
// compacts the rate before multiplying it by the extrapolation factor).
// The float operations and their order per bucket are upstream's, so the
// results are the same bits; Compact(0) then gives upstream's layout.

// denseSide is one side (positive or negative buckets) of a sum at one
// step, indexed by absolute bucket index from base.
type denseSide struct {
	base    int32
	val, c  []float64
	present []bool
}

// at returns the slot of bucket idx, growing the side as needed.
func (d *denseSide) at(idx int32) int {
	if len(d.val) == 0 {
		d.base = idx
		d.val, d.c, d.present = append(d.val[:0], 0), append(d.c[:0], 0), append(d.present[:0], false)
		return 0
	}
	if idx < d.base {
		n := int(d.base - idx)
		d.val = slices.Insert(d.val, 0, make([]float64, n)...)
		d.c = slices.Insert(d.c, 0, make([]float64, n)...)
		d.present = slices.Insert(d.present, 0, make([]bool, n)...)
		d.base = idx
		return 0
	}
	i := int(idx - d.base)
	for i >= len(d.val) {
		d.val, d.c, d.present = append(d.val, 0), append(d.c, 0), append(d.present, false)
	}
	return i
}

// maxDenseBuckets bounds the index range of one side of a dense sum;
// sparser histograms go upstream.
const maxDenseBuckets = 1 << 14

// fits reports whether the side can take the buckets of spans within
// maxDenseBuckets slots.
func (d *denseSide) fits(spans []histogram.Span) bool {
	var idx int32
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range spans {
		idx += s.Offset
		if s.Length > 0 {
			lo, hi = min(lo, int64(idx)), max(hi, int64(idx)+int64(s.Length)-1)
		}
		idx += int32(s.Length)
	}
	if lo > hi {
		return true
	}
	if len(d.val) > 0 {
		lo, hi = min(lo, int64(d.base)), max(hi, int64(d.base)+int64(len(d.val))-1)
	}
	return hi-lo < maxDenseBuckets
}

func (d *denseSide) reset() {
	d.val, d.c, d.present = d.val[:0], d.c[:0], d.present[:0]
}

// add adds one side of a histogram: its buckets times factor (raw: only
// those not zero before the factor, as Compact(0) keeps them).
func (d *denseSide) add(spans []histogram.Span, buckets []float64, factor float64, raw, first bool) {
	var idx int32
	bi := 0
	for _, s := range spans {
		idx += s.Offset
		if s.Length == 0 {
			continue
		}
		// Room for the whole span, then its slots in order.
		d.at(idx + int32(s.Length) - 1)
		k := d.at(idx)
		src := buckets[bi : bi+int(s.Length)]
		val, c, present := d.val[k:k+len(src)], d.c[k:k+len(src)], d.present[k:k+len(src)]
		// In pieces of up to 256 buckets: first the indexes of those to
		// add (for a rate, those not zero, found without a branch: which
		// buckets of a rate are zero varies from step to step, which a
		// branch would predict badly), then the additions.
		for p0 := 0; p0 < len(src); p0 += 256 {
			part := src[p0:min(p0+256, len(src))]
			pv, pc, pp := val[p0:p0+len(part)], c[p0:p0+len(part)], present[p0:p0+len(part)]
			var nz [256]uint16
			n := 0
			if raw {
				for j, v := range part {
					nz[n&255] = uint16(j)
					b := math.Float64bits(v) << 1 // zero for ±0 only
					n += int((b | -b) >> 63)
				}
			} else {
				for j := range part {
					nz[j] = uint16(j)
				}
				n = len(part)
			}
			for _, j16 := range nz[:n] {
				j := int(j16)
				v := part[j]
				if raw {
					// Rounded here: a multiplication fused into the
					// sum's addition would not be upstream's Mul then
					// KahanAdd.
					v = float64(v * factor)
				}
				if first || !pp[j] {
					pv[j], pc[j], pp[j] = v, 0, true
					continue
				}
				// kahansum.Inc written out, as kahanFold does (see there
				// why it is the same bits), calling Inc itself off finite
				// inputs.
				sum, cc := pv[j], pc[j]
				if !(finite(v) && finite(sum) && finite(cc)) {
					pv[j], pc[j] = kahansum.Inc(v, sum, cc)
					continue
				}
				t := sum + v
				switch {
				case t > math.MaxFloat64 || t < -math.MaxFloat64:
					cc = 0
				case math.Abs(sum) >= math.Abs(v):
					cc += (sum - t) + v
				default:
					cc += (v - t) + sum
				}
				pv[j], pc[j] = t, cc
			}
		}
		idx += int32(s.Length)
		bi += int(s.Length)
	}
}

// output writes the side's present buckets (plus their compensation where
// the sum had more than one histogram) as spans of consecutive buckets.
func (d *denseSide) output(spans []histogram.Span, buckets []float64, withC bool) ([]histogram.Span, []float64) {
	spans, buckets = spans[:0], buckets[:0]
	last := int32(0)
	open := false
	for k, p := range d.present {
		if !p {
			open = false
			continue
		}
		idx := d.base + int32(k)
		v := d.val[k]
		if withC {
			v += d.c[k]
		}
		buckets = append(buckets, v)
		if open {
			spans[len(spans)-1].Length++
		} else {
			off := idx
			if len(spans) > 0 {
				off = idx - last - 1
			}
			spans = append(spans, histogram.Span{Offset: off, Length: 1})
			open = true
		}
		last = idx
	}
	return spans, buckets
}

// denseSum is a sum of histograms at one step: upstream's
// groupedAggregation histogramValue and histogramKahanC, by bucket.
type denseSum struct {
	n             int
	isCustom      bool
	schema        int32
	threshold     float64
	custom        []float64
	zero, zeroC   float64
	count, countC float64
	sum, sumC     float64
	pos, neg      denseSide
	boundOK       bool  // okFrom is valid
	okFrom        int32 // buckets from this index up lie above the zero threshold
}

// add adds h (raw: a dense rate to multiply by factor). It reports false
// where the dense path does not apply and the query goes upstream:
// another schema, zero threshold or custom bounds than the sum's, a hint
// other than gauge, or a lowest bucket inside the zero bucket (which
// KahanAdd would drop).
func (s *denseSum) add(h *histogram.FloatHistogram, factor float64, raw bool) bool {
	if h.CounterResetHint != histogram.GaugeType {
		return false
	}
	custom := h.UsesCustomBuckets()
	if s.n == 0 {
		s.schema, s.threshold, s.custom, s.isCustom = h.Schema, h.ZeroThreshold, h.CustomValues, custom
		if custom {
			s.threshold = 0
		}
		s.pos.reset()
		s.neg.reset()
	} else if h.Schema != s.schema || custom != s.isCustom || (custom && !histogram.CustomBucketBoundsMatch(h.CustomValues, s.custom)) || (!custom && h.ZeroThreshold != s.threshold) {
		return false
	}
	if !custom && (!s.lowestAbove(h.PositiveSpans, h.PositiveBuckets, raw) || !s.lowestAbove(h.NegativeSpans, h.NegativeBuckets, raw)) {
		return false
	}
	if !s.pos.fits(h.PositiveSpans) || !s.neg.fits(h.NegativeSpans) {
		return false
	}
	z, cnt, sum := h.ZeroCount, h.Count, h.Sum
	if raw {
		z, cnt, sum = z*factor, cnt*factor, sum*factor
	}
	first := s.n == 0
	if first {
		s.zero, s.zeroC, s.count, s.countC, s.sum, s.sumC = z, 0, cnt, 0, sum, 0
		if custom {
			s.zero = 0 // Copy keeps no zero bucket for custom buckets
		}
	} else {
		if !custom {
			s.zero, s.zeroC = kahansum.Inc(z, s.zero, s.zeroC)
			s.zero, s.zeroC = kahansum.Inc(0, s.zero, s.zeroC)
		}
		s.count, s.countC = kahansum.Inc(cnt, s.count, s.countC)
		s.sum, s.sumC = kahansum.Inc(sum, s.sum, s.sumC)
	}
	s.pos.add(h.PositiveSpans, h.PositiveBuckets, factor, raw, first)
	if !custom {
		s.neg.add(h.NegativeSpans, h.NegativeBuckets, factor, raw, first)
	}
	s.n++
	return true
}

// lowestAbove reports whether the lowest bucket of a side that the sum
// would see lies above the zero threshold.
func (s *denseSum) lowestAbove(spans []histogram.Span, buckets []float64, raw bool) bool {
	// Bounds grow with the index: where the side's lowest bucket, zero
	// or not, lies at or above one known above the threshold, so does
	// every bucket it has.
	if s.boundOK && len(spans) > 0 && spans[0].Offset >= s.okFrom {
		return true
	}
	var idx int32
	bi := 0
	for _, sp := range spans {
		idx += sp.Offset
		for j := uint32(0); j < sp.Length; j, idx, bi = j+1, idx+1, bi+1 {
			if raw && buckets[bi] == 0 {
				continue
			}
			if s.boundOK && idx >= s.okFrom {
				return true
			}
			if bucketBound(s.schema, idx) <= s.threshold {
				return false
			}
			s.okFrom, s.boundOK = idx, true
			return true
		}
	}
	return true
}

// output writes the sum into dst as upstream finishes it: the
// compensation added where there is one, then Compact(0).
func (s *denseSum) output(dst *histogram.FloatHistogram) {
	withC := s.n >= 2
	dst.CounterResetHint = histogram.GaugeType
	dst.Schema, dst.ZeroThreshold, dst.CustomValues = s.schema, s.threshold, s.custom
	dst.ZeroCount, dst.Count, dst.Sum = s.zero, s.count, s.sum
	if withC {
		if !s.isCustom {
			dst.ZeroCount += s.zeroC
		}
		dst.Count += s.countC
		dst.Sum += s.sumC
	}
	dst.PositiveSpans, dst.PositiveBuckets = s.pos.output(dst.PositiveSpans, dst.PositiveBuckets, withC)
	dst.NegativeSpans, dst.NegativeBuckets = s.neg.output(dst.NegativeSpans, dst.NegativeBuckets, withC)
	dst.Compact(0)
}

// pairs computes, for each sample after the first, whether upstream sees
// a counter reset from the previous one (DetectReset, the same for every
// window holding both) and whether the dense path may not cross from the
// previous one: another bucket layout, a gauge hint, or a lowest bucket
// inside the zero bucket (which Sub and Add skip).
func (sh *histShard) pairs(pts []hpoint) {
	n := len(pts)
	sh.resets = slices.Grow(sh.resets[:0], n)[:n]
	sh.breaks = slices.Grow(sh.breaks[:0], n+1)[:n+1]
	sh.resets[0], sh.breaks[0], sh.breaks[1] = false, 0, 0
	for j := 1; j < n; j++ {
		a, b := pts[j-1].h, pts[j].h
		sh.resets[j] = b.DetectReset(a)
		br := 0
		if !sameLayout(a, b) || !sh.below.lowestAbove(b) {
			br = 1
		}
		if j+1 <= n {
			sh.breaks[j+1] = sh.breaks[j] + br
		}
	}
}

// sameLayout reports whether a and b have one bucket layout and neither
// is a gauge.
func sameLayout(a, b *histogram.FloatHistogram) bool {
	if a.CounterResetHint == histogram.GaugeType || b.CounterResetHint == histogram.GaugeType ||
		a.Schema != b.Schema || a.ZeroThreshold != b.ZeroThreshold || a.UsesCustomBuckets() != b.UsesCustomBuckets() {
		return false
	}
	if a.UsesCustomBuckets() && !histogram.CustomBucketBoundsMatch(a.CustomValues, b.CustomValues) {
		return false
	}
	return slices.Equal(a.PositiveSpans, b.PositiveSpans) && slices.Equal(a.NegativeSpans, b.NegativeSpans) &&
		len(a.PositiveBuckets) == len(b.PositiveBuckets) && len(a.NegativeBuckets) == len(b.NegativeBuckets)
}

// belowCache remembers the last layout whose lowest buckets were found
// above the zero threshold.
type belowCache struct {
	valid          bool
	schema         int32
	threshold      float64
	posIdx, negIdx int32
}

// lowestAbove reports whether the lowest positive and negative buckets of
// h (exponential) lie above its zero threshold.
func (bc *belowCache) lowestAbove(h *histogram.FloatHistogram) bool {
	if h.UsesCustomBuckets() {
		return true
	}
	pi, ni := lowestIndex(h.PositiveSpans), lowestIndex(h.NegativeSpans)
	if bc.valid && bc.schema == h.Schema && bc.threshold == h.ZeroThreshold && pi >= bc.posIdx && ni >= bc.negIdx {
		return true
	}
	for _, idx := range []int32{pi, ni} {
		if idx == noBucket {
			continue
		}
		if bucketBound(h.Schema, idx) <= h.ZeroThreshold {
			return false
		}
	}
	*bc = belowCache{valid: true, schema: h.Schema, threshold: h.ZeroThreshold, posIdx: pi, negIdx: ni}
	return true
}

const noBucket = int32(1<<31 - 1)

func lowestIndex(spans []histogram.Span) int32 {
	var idx int32
	for _, s := range spans {
		idx += s.Offset
		if s.Length > 0 {
			return idx
		}
	}
	return noBucket
}

// bucketBound is the upper bound of exponential bucket idx, as upstream
// computes it.
func bucketBound(schema, idx int32) float64 {
	probe := histogram.FloatHistogram{Schema: schema, PositiveSpans: []histogram.Span{{Offset: idx, Length: 1}}, PositiveBuckets: []float64{1}}
	it := probe.PositiveBucketIterator()
	it.Next()
	return it.At().Upper
}

// denseRate is histogramRate for a window of one layout without gauges:
// the last histogram minus the first (none where the second resets),
// plus the value before each reset, bucket by bucket, into dst, before
// Compact and the factor.
func (sh *histShard) denseRate(w []hpoint, resets []bool, dst *histogram.FloatHistogram) {
	n := len(w) - 1
	last, first := w[n].h, w[0].h
	custom := last.UsesCustomBuckets()
	last.CopyTo(dst)
	prevZero := resets[1]
	if prevZero {
		// Sub of an empty histogram.
		if !custom {
			dst.ZeroCount -= 0
		}
		dst.Count -= 0
		dst.Sum -= 0
	} else {
		subDense(dst, first, custom)
	}
	for j := 1; j <= n; j++ {
		curr := w[j].h
		if j == 1 && prevZero {
			sh.zero = histogram.FloatHistogram{Schema: curr.Schema, CustomValues: curr.CustomValues}
			if curr.DetectReset(&sh.zero) {
				if !custom {
					dst.ZeroCount += 0
				}
				dst.Count += 0
				dst.Sum += 0
			}
			continue
		}
		if resets[j] {
			addDense(dst, w[j-1].h, custom)
		}
	}
	dst.CounterResetHint = histogram.GaugeType
}

// subDense is Sub for histograms of one layout.
func subDense(dst, o *histogram.FloatHistogram, custom bool) {
	if !custom {
		dst.ZeroCount -= o.ZeroCount
	}
	dst.Count -= o.Count
	dst.Sum -= o.Sum
	for k, v := range o.PositiveBuckets {
		dst.PositiveBuckets[k] += -v
	}
	for k, v := range o.NegativeBuckets {
		dst.NegativeBuckets[k] += -v
	}
}

// addDense is Add for histograms of one layout.
func addDense(dst, o *histogram.FloatHistogram, custom bool) {
	if !custom {
		dst.ZeroCount += o.ZeroCount
	}
	dst.Count += o.Count
	dst.Sum += o.Sum
	for k, v := range o.PositiveBuckets {
		dst.PositiveBuckets[k] += v
	}
	for k, v := range o.NegativeBuckets {
		dst.NegativeBuckets[k] += v
	}
}

// materialize turns a column's dense rates into upstream's histograms:
// Compact(0), then the factor.
func materialize(c *column) {
	for i, raw := range c.hraw {
		if raw {
			c.h[i].Compact(0)
			c.h[i].Mul(c.v[i])
			c.hraw[i] = false
		}
	}
}
