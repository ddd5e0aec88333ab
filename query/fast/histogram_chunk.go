package fast

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// errHistChunk says a histogram leaf met a chunk its chunk reader does not
// take (another encoding than integer histograms, a gauge histogram chunk,
// chunks that overlap, counts that go down inside a chunk); the leaf then
// reads samples as upstream does (runHistLeaf), or hands the query back
// where it has already given output.
var errHistChunk = errors.New("histogram chunk the chunk reader does not take")

// The chunk reader for integer histogram chunks (tsdb/chunkenc's
// HistogramChunk: a sample count and a counter reset header, the chunk's
// one bucket layout, then per sample a timestamp, count, zero count and
// every bucket as deltas of deltas, and the sum as an XOR) decodes every
// sample into the int64 state the chunk iterator keeps, and converts to
// floats only the samples some step's window holds, into one flat array
// per series, without a FloatHistogram per sample. The floats are the
// iterator's (AtFloatHistogram's float sums of the bucket deltas, as it
// computes them into a histogram it is given); FuzzHistChunkDecode checks
// them.
//
// Why the counter reset hints can be left out: within one chunk the
// layout is fixed and no sample is a counter reset against the one before
// (the appender cuts a new chunk on a reset, a layout it cannot recode, or
// a sample after a stale marker), so DetectReset says no between two
// samples of one chunk whatever the hint (NotCounterReset from the
// iterator, or Unknown where a merge of blocks or a seek lands), and the
// reader checks that the counts indeed do not go down between the samples
// one window may hold (TestDecodeHistChunkRefuses). The first sample
// of a chunk comes with UnknownCounterReset from the chunk iterator (it
// never hands out the header's CounterReset), so DetectReset compares it
// in full with the sample before, as upstream does.

// histLayout is one chunk's bucket layout; the slices are shared by the
// FloatHistograms of its samples and never written to.
type histLayout struct {
	schema         int32
	zeroThreshold  float64
	pos, neg       []histogram.Span
	custom         []float64
	npos, nbuckets int
}

func (a *histLayout) same(b *histLayout) bool {
	return a.schema == b.schema && math.Float64bits(a.zeroThreshold) == math.Float64bits(b.zeroThreshold) &&
		slices.Equal(a.pos, b.pos) && slices.Equal(a.neg, b.neg) && floatsEqual(a.custom, b.custom)
}

// floatsEqual compares bit for bit: custom bounds are equal only where
// their bits are (NaN and -0 included).
func floatsEqual(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

// histSample is one decoded sample some window holds.
type histSample struct {
	t                int64
	count, zero, sum float64
	layout           int32 // index into histSeries.layouts
	first            bool  // the first sample of its chunk: hint UnknownCounterReset
	off              int32 // its buckets in vals: positive, then negative
}

// histSeries is one series' decoded samples, and the decoder's state.
type histSeries struct {
	samples []histSample
	vals    []float64
	layouts []histLayout
	below   []uint8 // per layout, for chunkPairs

	// The iterator's state for the chunk being decoded.
	pb, nb, pbd, nbd []int64
	scratch          histLayout
	fh               histogram.FloatHistogram // for chunks read through their iterator
}

func (s *histSeries) reset() {
	s.samples, s.vals, s.layouts = s.samples[:0], s.vals[:0], s.layouts[:0]
}

// maxChunkBuckets bounds the buckets of a chunk the reader decodes;
// wider ones go through the leaf's sample path.
const maxChunkBuckets = 1 << 12

// histReader cuts fields from a chunk's bit stream by position (load).
type histReader struct {
	b   []byte
	pos uint
}

var varbitSizes = [9]uint{0, 3, 6, 9, 12, 18, 25, 56, 64}

// varbit reads a varbit-encoded int (chunkenc's putVarbitInt): a prefix of
// n ones and a zero (eight ones: none) gives the size of the bits after
// it, values above 2^(sz-1) standing for negative ones.
func (r *histReader) varbit() int64 {
	w := load(r.b, r.pos)
	n := uint(bits.LeadingZeros64(^w))
	if n == 0 {
		r.pos++
		return 0
	}
	if n < 7 {
		sz := varbitSizes[n]
		v := w << (n + 1) >> (64 - sz)
		r.pos += n + 1 + sz
		if v > 1<<(sz-1) {
			v -= 1 << sz
		}
		return int64(v)
	}
	return r.varbitLong(n)
}

func (r *histReader) varbitLong(n uint) int64 {
	if n == 7 {
		v := readBits(r.b, r.pos+8, 56)
		r.pos += 8 + 56
		if v > 1<<55 {
			v -= 1 << 56
		}
		return int64(v)
	}
	v := readBits(r.b, r.pos+8, 64)
	r.pos += 8 + 64
	return int64(v)
}

// varbitPairs decodes the short varbit ints (a 0; 10 and 3 bits; 110 and
// 6 bits) that lie whole within the top 12 bits of a word, up to two: in
// bits 0-1 how many, 2-5 the bits of the first, 8-11 of both, then the
// values as int8s from bit 16 and 24. Decoding a sample's buckets is a
// chain of dependent steps (the next one starts where this one ends);
// two per lookup halve it.
var varbitPairs = func() (t [4096]uint32) {
	for top := range t {
		var (
			n, used, used1 uint32
			vals           [2]int64
		)
		for n < 2 {
			rest := uint64(top) << (52 + used)
			left := 12 - used
			var (
				v int64
				k uint32
			)
			switch {
			case left >= 1 && rest>>63 == 0:
				k = 1
			case left >= 5 && rest>>62 == 0b10:
				v, k = signed(rest<<2>>61, 3), 5
			case left >= 9 && rest>>61 == 0b110:
				v, k = signed(rest<<3>>58, 6), 9
			}
			if k == 0 {
				break
			}
			vals[n] = v
			used += k
			if n++; n == 1 {
				used1 = used
			}
		}
		t[top] = n | used1<<2 | used<<8 | uint32(uint8(int8(vals[0])))<<16 | uint32(uint8(int8(vals[1])))<<24
	}
	return t
}()

// bucketDods reads one side's buckets of a sample after a chunk's first:
// a varbit delta of deltas each, added to the bucket's delta (dd) and
// its delta to the bucket before (d). It returns the position after them.
// bucketRun takes the short ones; a longer one it leaves to a call here,
// so that its loop makes no call (around which every value it keeps in a
// register would be stored to the stack).
func bucketDods(b []byte, pos uint, dd, d []int64) uint {
	for i := 0; ; i++ {
		var k int
		pos, k = bucketRun(b, pos, dd[i:], d[i:])
		if i += k; i >= len(d) {
			return pos
		}
		r := histReader{b: b, pos: pos}
		x := dd[i] + r.varbit()
		pos = r.pos
		dd[i] = x
		d[i] += x
	}
}

// bucketRun is bucketDods' loop up to the first delta of deltas outside
// -31..32: it returns how many buckets it read. The bits come from a word
// loaded once per 45 bits or more (57 of its bits are the stream's), the
// deltas of deltas cut from it two at a time by varbitPairs.
func bucketRun(b []byte, pos uint, dd, d []int64) (uint, int) {
	dd = dd[:len(d)]
	w := load(b, pos)
	used := uint(0) // bits of w taken (w is shifted past them)
	n := len(d)
	i := 0
	for i < n {
		if used > 45 {
			pos += used
			w, used = load(b, pos), 0
		}
		e := varbitPairs[w>>52]
		switch {
		case e&3 == 2 && i+1 < n:
			k := uint(e>>8) & 15
			w <<= k
			used += k
			x := dd[i] + int64(int8(e>>16))
			dd[i] = x
			d[i] += x
			y := dd[i+1] + int64(int8(e>>24))
			dd[i+1] = y
			d[i+1] += y
			i += 2
		case e&3 != 0:
			k := uint(e>>2) & 15
			w <<= k
			used += k
			x := dd[i] + int64(int8(e>>16))
			dd[i] = x
			d[i] += x
			i++
		default:
			return pos + used, i
		}
	}
	return pos + used, n
}

// uvarbit reads a varbit-encoded uint (putVarbitUint).
func (r *histReader) uvarbit() uint64 {
	w := load(r.b, r.pos)
	n := min(uint(bits.LeadingZeros64(^w)), 8)
	if n == 0 {
		r.pos++
		return 0
	}
	sz := varbitSizes[n]
	plen := n + 1
	if n == 8 {
		plen = 8
	}
	v := readBits(r.b, r.pos+plen, sz)
	r.pos += plen + sz
	return v
}

func (r *histReader) bits(k uint) uint64 {
	v := readBits(r.b, r.pos, k)
	r.pos += k
	return v
}

func (r *histReader) overrun() bool { return r.pos > uint(len(r.b))*8 }

// layout reads the chunk's layout (readHistogramChunkLayout) into l, the
// slices appended to spans and custom.
func (r *histReader) layout(l *histLayout) error {
	switch b := r.bits(8); b {
	case 0:
		l.zeroThreshold = 0
	case 255:
		l.zeroThreshold = math.Float64frombits(r.bits(64))
	default:
		l.zeroThreshold = math.Ldexp(0.5, int(b)-243)
	}
	l.schema = int32(r.varbit())
	var err error
	if l.pos, err = r.spans(l.pos[:0]); err != nil {
		return err
	}
	if l.neg, err = r.spans(l.neg[:0]); err != nil {
		return err
	}
	l.custom = l.custom[:0]
	if histogram.IsCustomBucketsSchema(l.schema) {
		n := r.uvarbit()
		if n > maxChunkBuckets {
			return errHistChunk
		}
		for range n {
			switch b := r.uvarbit(); b {
			case 0:
				l.custom = append(l.custom, math.Float64frombits(r.bits(64)))
			default:
				l.custom = append(l.custom, float64(b-1)/1000)
			}
		}
	}
	if len(l.custom) == 0 {
		l.custom = nil
	}
	if !histogram.IsCustomBucketsSchema(l.schema) && (l.schema < histogram.ExponentialSchemaMin || l.schema > histogram.ExponentialSchemaMax) {
		// Unknown schemas are an error, and those the iterator
		// reduces to a lower resolution are rare: both as upstream
		// reads them.
		return errHistChunk
	}
	l.npos = countBuckets(l.pos)
	l.nbuckets = l.npos + countBuckets(l.neg)
	if l.nbuckets > maxChunkBuckets || r.overrun() {
		return errHistChunk
	}
	return nil
}

func (r *histReader) spans(out []histogram.Span) ([]histogram.Span, error) {
	n := r.uvarbit()
	if n > maxChunkBuckets {
		return nil, errHistChunk
	}
	for range n {
		length := r.uvarbit()
		offset := r.varbit()
		out = append(out, histogram.Span{Length: uint32(length), Offset: int32(offset)})
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func countBuckets(spans []histogram.Span) int {
	n := 0
	for _, s := range spans {
		n += int(s.Length)
		if n > maxChunkBuckets {
			return n
		}
	}
	return n
}

// decodeHistChunk appends the samples of the integer histogram chunk data
// that f keeps (without stale markers) to s; maxt is the chunk's last
// time (or above it), after which no sample lies: decoding stops at the
// first sample past the last window that can hold one (lastHolding), as
// the leaf skips the chunks no window meets. It returns errHistChunk for
// what it does not take (a gauge chunk, an unknown or reduced schema,
// counts that go down, times that do not go up) and errCorruptChunk for
// bytes that do not decode; the caller then reads the chunk through its
// iterator, which reports the error as upstream sees it.
func (s *histSeries) decodeHistChunk(data []byte, f *sampleFilter, maxt int64) error {
	if len(data) < 3 {
		return errCorruptChunk
	}
	total := int(binary.BigEndian.Uint16(data))
	if chunkenc.CounterResetHeader(data[2]&chunkenc.CounterResetHeaderMask) == chunkenc.GaugeType {
		return errHistChunk
	}
	if total == 0 {
		return nil
	}
	if len(data) < 8 {
		return errCorruptChunk
	}
	r := histReader{b: data, pos: 24}
	l := &s.scratch
	if err := r.layout(l); err != nil {
		if r.overrun() {
			return errCorruptChunk
		}
		return err
	}
	// Every sample after the first takes at least 4 bits (the time, the
	// count, the zero count and the sum); a count that says more than
	// the bytes can hold is corrupt, and must not size anything.
	if 4*(total-1) > len(data)*8-int(r.pos) {
		return errCorruptChunk
	}
	np, nb := l.npos, l.nbuckets
	s.pb, s.pbd = resizeInts(s.pb, np), resizeInts(s.pbd, np)
	s.nb, s.nbd = resizeInts(s.nb, nb-np), resizeInts(s.nbd, nb-np)
	pb, pbd, nbk, nbd := s.pb, s.pbd, s.nb, s.nbd

	layout := int32(-1)
	from, fromVals, fromLayouts := len(s.samples), len(s.vals), len(s.layouts)
	fail := func(err error) error {
		s.samples, s.vals, s.layouts = s.samples[:from], s.vals[:fromVals], s.layouts[:fromLayouts]
		return err
	}
	var (
		t, tDelta, cntDelta, zDelta int64
		cnt, zcnt                   uint64
		sum                         float64
		leading, trailing           uint
		next                        = int64(math.MinInt64)
		prevKept                    bool // the last sample that was not stale is in s.samples
		last                        = f.lastHolding(maxt)
	)
	for j := range total {
		stale := false
		if j == 0 {
			t = r.varbit()
			if t > last {
				break
			}
			cnt = r.uvarbit()
			zcnt = r.uvarbit()
			sum = math.Float64frombits(r.bits(64))
			for i := range pb {
				pb[i] = r.varbit()
			}
			for i := range nbk {
				nbk[i] = r.varbit()
			}
			stale = math.Float64bits(sum) == value.StaleNaN
		} else {
			tDod := r.varbit()
			tDelta += tDod
			if tDelta <= 0 || t+tDelta < t {
				return fail(errHistChunk) // times that do not go up (or wrap)
			}
			t += tDelta
			if t > last {
				break
			}
			cntDelta += r.varbit()
			cnt = uint64(int64(cnt) + cntDelta)
			zDelta += r.varbit()
			zcnt = uint64(int64(zcnt) + zDelta)
			// The sum: 0 (unchanged), 10 and the meaningful bits within
			// the previous leading/trailing zeros, or 11, 5 bits of
			// leading zeros, 6 of length (0 meaning 64) and the bits.
			w := load(r.b, r.pos)
			if w>>63 != 0 {
				hdr, mbits := uint(2), 64-leading-trailing
				if w>>62 == 0b11 {
					lead := uint(w << 2 >> (64 - 5))
					mb := uint(w<<7>>(64-6)-1)&63 + 1
					if lead+mb > 64 {
						return fail(errCorruptChunk)
					}
					hdr, mbits = 13, mb
					leading, trailing = lead, 64-lead-mb
				}
				v := readBits(r.b, r.pos+hdr, mbits)
				r.pos += hdr + mbits
				sum = math.Float64frombits(math.Float64bits(sum) ^ v<<(trailing&63))
			} else {
				r.pos++
			}
			stale = math.Float64bits(sum) == value.StaleNaN
			if !stale {
				r.pos = bucketDods(r.b, r.pos, pbd, pb)
				r.pos = bucketDods(r.b, r.pos, nbd, nbk)
			}
		}
		if r.overrun() {
			return fail(errCorruptChunk)
		}
		if stale {
			continue
		}
		// Does some window hold t? (sampleFilter.keep, one sample.)
		if t > f.end {
			prevKept = false
			continue
		}
		if t > next || t <= next-f.interval {
			next = f.firstStep(t)
		}
		if t <= next-f.width {
			prevKept = false
			continue
		}
		if layout < 0 {
			layout = int32(len(s.layouts))
			s.layouts = append(s.layouts, histLayout{})
			s.layouts[layout].copyFrom(l)
		}
		off := len(s.vals)
		s.vals = growFloats(s.vals, nb)[:off+nb]
		dst := s.vals[off : off+nb]
		smp := histSample{
			t: t, count: float64(cnt), zero: float64(zcnt), sum: sum,
			layout: layout, first: j == 0, off: int32(off),
		}
		// The counts of two samples one window may hold (the last one
		// kept is the one before) never go down within a chunk, compared
		// as DetectReset compares them, as floats: the sign bits of the
		// differences (x-y is -0 or negative only where x < y).
		var down uint64
		prev := dst[:0]
		if prevKept {
			p := &s.samples[len(s.samples)-1]
			prev = s.vals[p.off : int(p.off)+nb]
			down = math.Float64bits(smp.count-p.count) | math.Float64bits(smp.zero-p.zero)
		}
		convert(dst[:np], pb, prev, &down)
		convert(dst[np:], nbk, prev[min(np, len(prev)):], &down)
		if down>>63 != 0 {
			return fail(errHistChunk)
		}
		s.samples = append(s.samples, smp)
		prevKept = true
	}
	return nil
}

// lastHolding returns the time of the last step whose window can hold a
// sample at or before maxt (math.MinInt64 where none can): a window
// (s-width, s] holds one only where s-width < maxt. Where every step can,
// it returns math.MaxInt64: the decoder then reads the chunk to its end,
// as it reads the last chunks of a range (the head's open chunk has no
// last time), and refuses times that do not go up anywhere in it.
func (f *sampleFilter) lastHolding(maxt int64) int64 {
	if maxt >= f.end || maxt > math.MaxInt64-f.width {
		return math.MaxInt64
	}
	lim := maxt + f.width - 1 // the latest step that can
	if lim >= f.end {
		return math.MaxInt64
	}
	if lim < f.start {
		return math.MinInt64
	}
	return f.start + (lim-f.start)/f.interval*f.interval
}

// convert writes a side's bucket counts (the running sums of its deltas
// d) as floats to dst, as AtFloatHistogram into a histogram does (the
// engine's range selectors pass one): a float sum of the deltas converted
// one by one, which rounds differently from converting the integer sum
// once counts pass 2^53. It ORs into down the bits of each count less the
// one in prev (none where prev is empty).
func convert(dst []float64, d []int64, prev []float64, down *uint64) {
	dst = dst[:len(d)]
	var cur float64
	if len(prev) == 0 {
		for i, x := range d {
			cur += float64(x)
			dst[i] = cur
		}
		return
	}
	prev = prev[:len(d)]
	acc := *down
	for i, x := range d {
		cur += float64(x)
		dst[i] = cur
		acc |= math.Float64bits(cur - prev[i])
	}
	*down = acc
}

// copyFrom makes l a copy of o with slices of its own (o is scratch).
func (l *histLayout) copyFrom(o *histLayout) {
	*l = *o
	if o.pos != nil {
		l.pos = append([]histogram.Span(nil), o.pos...)
	}
	if o.neg != nil {
		l.neg = append([]histogram.Span(nil), o.neg...)
	}
	if o.custom != nil {
		l.custom = append([]float64(nil), o.custom...)
	}
}

func resizeInts(s []int64, n int) []int64 {
	if cap(s) < n {
		return make([]int64, n)
	}
	s = s[:n]
	clear(s)
	return s
}

func growFloats(s []float64, n int) []float64 {
	if cap(s)-len(s) >= n {
		return s
	}
	out := make([]float64, len(s), 2*cap(s)+n)
	copy(out, s)
	return out
}

// iterHistChunk is decodeHistChunk through the chunk's own iterator: for
// a head chunk whose last samples the head's isolation hides, and for
// bytes the decoder refuses (the iterator then reports the error upstream
// sees).
func (s *histSeries) iterHistChunk(it chunkenc.Iterator, f *sampleFilter) error {
	from, fromVals, fromLayouts := len(s.samples), len(s.vals), len(s.layouts)
	fail := func(err error) error {
		s.samples, s.vals, s.layouts = s.samples[:from], s.vals[:fromVals], s.layouts[:fromLayouts]
		return err
	}
	var (
		layout  = int32(-1)
		read    int
		lastT   = int64(math.MinInt64)
		prev    histSample
		hasPrev bool
		next    = int64(math.MinInt64)
	)
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		if vt != chunkenc.ValHistogram {
			return fail(errHistChunk)
		}
		read++
		t, fh := it.AtFloatHistogram(&s.fh)
		if t <= lastT {
			return fail(errHistChunk)
		}
		lastT = t
		if value.IsStaleNaN(fh.Sum) {
			continue
		}
		if fh.CounterResetHint == histogram.GaugeType {
			return fail(errHistChunk)
		}
		l := &s.scratch
		l.schema, l.zeroThreshold, l.pos, l.neg, l.custom = fh.Schema, fh.ZeroThreshold, fh.PositiveSpans, fh.NegativeSpans, fh.CustomValues
		l.npos, l.nbuckets = len(fh.PositiveBuckets), len(fh.PositiveBuckets)+len(fh.NegativeBuckets)
		if layout >= 0 && !s.layouts[layout].same(l) {
			return fail(errHistChunk)
		}
		cur := histSample{t: t, count: fh.Count, zero: fh.ZeroCount, sum: fh.Sum, first: read == 1}
		if hasPrev && (cur.count < prev.count || cur.zero < prev.zero) {
			return fail(errHistChunk)
		}
		if hasPrev && layout >= 0 {
			pv := s.vals[prev.off : int(prev.off)+l.nbuckets]
			for i, v := range fh.PositiveBuckets {
				if v < pv[i] {
					return fail(errHistChunk)
				}
			}
			for i, v := range fh.NegativeBuckets {
				if v < pv[l.npos+i] {
					return fail(errHistChunk)
				}
			}
		}
		if t > f.end {
			continue
		}
		if t > next || t <= next-f.interval {
			next = f.firstStep(t)
		}
		// A sample kept for the comparison only (no window holds
		// it) is dropped once the next one is compared.
		keep := t > next-f.width
		if layout < 0 {
			layout = int32(len(s.layouts))
			s.layouts = append(s.layouts, histLayout{})
			s.layouts[layout].copyFrom(l)
		}
		off := len(s.vals)
		s.vals = append(s.vals, fh.PositiveBuckets...)
		s.vals = append(s.vals, fh.NegativeBuckets...)
		cur.layout, cur.off = layout, int32(off)
		prev, hasPrev = cur, true
		if keep {
			s.samples = append(s.samples, cur)
		}
	}
	if err := it.Err(); err != nil {
		return fail(err)
	}
	return nil
}

// histChunks is a histogram shard's chunk querier, series set and
// decoding buffers.
type histChunks struct {
	querier storage.ChunkQuerier
	set     storage.ChunkSeriesSet
	cit     chunks.Iterator
	it      chunkenc.Iterator
	series  histSeries
	fhs     []histogram.FloatHistogram // pts' histograms, over series.vals
}

// chunkWalkSet lets walkBatch walk a chunk series set: it needs only the
// labels, the reads go to the chunks (histShard.readChunks).
type chunkWalkSet struct{ storage.ChunkSeriesSet }

func (s chunkWalkSet) At() storage.Series { return labelsOnly{s.ChunkSeriesSet.At()} }

type labelsOnly struct{ storage.ChunkSeries }

func (labelsOnly) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	panic("BUG: fast: a chunk series read as samples")
}

// runHistChunks is runHistLeaf over chunks: each worker selects through
// its own chunk querier (a chunk reader is not safe for concurrent use)
// and decodes the chunks of the series it takes. It returns errHistChunk,
// before any output, where a chunk is not one it takes, or where the data
// in range comes from sources that overlap in time (overlapsInRange).
func (ev *evaluator) runHistChunks(l *leaf, s sink, cq storage.ChunkQueryable) error {
	mint, maxt, hints := ev.selectHints(l)
	if overlap, err := overlapsInRange(cq, mint, maxt); err != nil {
		return err
	} else if overlap {
		// The merge would re-encode overlapping chunks walking them with
		// Next only; of two samples at one time upstream's seeks can
		// keep the other. Sample iterators walk as upstream does.
		return errHistChunk
	}
	shards := make([]histShard, ev.opts.Workers)
	defer func() {
		for i := range shards {
			if q := shards[i].chunked.querier; q != nil {
				_ = q.Close()
			}
		}
	}()
	if err := parallel(len(shards), len(shards), func(w, _, _ int) error {
		h := *hints
		// Whole chunks: the first sample of a chunk trimming re-encoded
		// would not be the one whose hint upstream reads as unknown.
		h.DisableTrimming = true
		q, err := cq.ChunkQuerier(mint, maxt)
		if err != nil {
			return err
		}
		hc := &shards[w].chunked
		hc.querier = q
		hc.set = q.Select(ev.ctx, false, &h, slices.Clone(l.vs.LabelMatchers)...)
		shards[w].set = chunkWalkSet{hc.set}
		return nil
	}); err != nil {
		return err
	}
	f := ev.filter(l)
	return ev.histBatches(l, s, shards, func(sh *histShard) error { return sh.readChunks(&f) })
}

// histIteratorType is the type of an integer histogram chunk's own
// iterator.
var histIteratorType = reflect.TypeOf(chunkenc.NewHistogramChunk().Iterator(nil))

// readChunks fills pts with the current series' samples that some window
// holds, from its chunks: integer histogram chunks whose samples are all
// visible by decodeHistChunk, the others through their iterators. Chunks
// that overlap (out-of-order data, blocks not yet compacted together),
// other encodings and gauge histograms return errHistChunk.
func (sh *histShard) readChunks(f *sampleFilter) error {
	hc := &sh.chunked
	series := hc.set.At()
	hc.cit = series.Iterator(hc.cit)
	hs := &hc.series
	hs.reset()
	prevMax := int64(math.MinInt64)
	for hc.cit.Next() {
		m := hc.cit.At()
		if m.MinTime <= prevMax || m.MaxTime < m.MinTime {
			return errHistChunk
		}
		prevMax = m.MaxTime
		if !f.overlaps(m.MinTime, m.MaxTime) {
			continue
		}
		if m.Chunk.Encoding() != chunkenc.EncHistogram {
			return errHistChunk
		}
		whole := false
		if _, ok := m.Chunk.(*chunkenc.HistogramChunk); ok {
			whole = true
		} else {
			// A head chunk: its iterator is other than the chunk's
			// own where the head's isolation hides its last samples.
			hc.it = m.Chunk.Iterator(hc.it)
			whole = reflect.TypeOf(hc.it) == histIteratorType
		}
		if whole {
			err := hs.decodeHistChunk(m.Chunk.Bytes(), f, m.MaxTime)
			if err == nil {
				continue
			}
			if !errors.Is(err, errCorruptChunk) {
				return err
			}
			hc.it = m.Chunk.Iterator(hc.it)
		}
		if err := hs.iterHistChunk(hc.it, f); err != nil {
			if errors.Is(err, errHistChunk) {
				return err
			}
			return fmt.Errorf("read %s: %w", series.Labels(), err)
		}
	}
	if err := hc.cit.Err(); err != nil {
		return fmt.Errorf("read %s: %w", series.Labels(), err)
	}
	sh.points()
	return nil
}

// chunkPairs is pairs for samples read by readChunks: a sample after one
// of its own chunk has that one's layout and the hint "not a reset"
// (DetectReset then says no), so only pairs across chunks are compared
// in full, and a layout's lowest buckets are tested once.
func (sh *histShard) chunkPairs() {
	hs := &sh.chunked.series
	pts := sh.pts
	n := len(pts)
	sh.resets = slices.Grow(sh.resets[:0], n)[:n]
	sh.breaks = slices.Grow(sh.breaks[:0], n+1)[:n+1]
	sh.resets[0], sh.breaks[0], sh.breaks[1] = false, 0, 0
	// below[k]: layout k's lowest buckets lie inside the zero bucket
	// (0 untested, 1 no, 2 yes).
	below := slices.Grow(hs.below[:0], len(hs.layouts))[:len(hs.layouts)]
	clear(below)
	hs.below = below
	for j := 1; j < n; j++ {
		smp := &hs.samples[j]
		br := 0
		if smp.first || smp.layout != hs.samples[j-1].layout {
			// Another chunk (each has a layout of its own).
			a, b := pts[j-1].h, pts[j].h
			sh.resets[j] = b.DetectReset(a)
			if !sameLayout(a, b) || !sh.below.lowestAbove(b) {
				br = 1
			}
		} else {
			sh.resets[j] = false
			if below[smp.layout] == 0 {
				below[smp.layout] = 1
				if !sh.below.lowestAbove(pts[j].h) {
					below[smp.layout] = 2
				}
			}
			if below[smp.layout] == 2 {
				br = 1
			}
		}
		sh.breaks[j+1] = sh.breaks[j] + br
	}
}

// points makes pts of the decoded samples: FloatHistograms over the flat
// bucket values and their chunk's layout, as the chunk iterator hands
// them out (the hint unknown on a chunk's first sample, not a reset on
// the others).
func (sh *histShard) points() {
	hc := &sh.chunked
	hs := &hc.series
	n := len(hs.samples)
	hc.fhs = slices.Grow(hc.fhs[:0], n)[:n]
	sh.pts = slices.Grow(sh.pts[:0], n)[:n]
	win := 0
	for j := range hs.samples {
		smp := &hs.samples[j]
		lay := &hs.layouts[smp.layout]
		hint := histogram.NotCounterReset
		if smp.first {
			hint = histogram.UnknownCounterReset
		}
		off, np, nb := int(smp.off), lay.npos, lay.nbuckets
		fh := &hc.fhs[j]
		*fh = histogram.FloatHistogram{
			CounterResetHint: hint,
			Schema:           lay.schema,
			ZeroThreshold:    lay.zeroThreshold,
			ZeroCount:        smp.zero,
			Count:            smp.count,
			Sum:              smp.sum,
			PositiveSpans:    lay.pos,
			NegativeSpans:    lay.neg,
			PositiveBuckets:  hs.vals[off : off+np : off+np],
			NegativeBuckets:  hs.vals[off+np : off+nb : off+nb],
			CustomValues:     lay.custom,
		}
		sh.pts[j] = hpoint{t: smp.t, h: fh}
		win += (fh.Size() + 8) / 16
	}
	sh.maxWin = max(sh.maxWin, win)
}
