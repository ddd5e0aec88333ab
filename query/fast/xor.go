package fast

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/prometheus/prometheus/model/value"
)

// errCorruptChunk is returned for XOR chunk bytes that do not decode.
var errCorruptChunk = errors.New("corrupt XOR chunk")

// sampleFilter says which samples of a leaf any step can use: those
// inside some step's window (ts-width, ts], with ts = start + i*interval up
// to end. Its arithmetic assumes start-width and end+4*interval fit an
// int64 (the evaluator hands back queries near the ends of time). A sample
// outside every window changes no step's value (a window that held samples
// on both sides of it would hold it too), so it is dropped before any step
// sees it, and a chunk outside every window is not decoded at all.
type sampleFilter struct {
	start, end, interval, width int64
	dropStale                   bool // range functions ignore stale markers
}

// firstStep returns the earliest step time at or after t, or MaxInt64
// when t is past the last step.
func (f *sampleFilter) firstStep(t int64) int64 {
	if t > f.end {
		return math.MaxInt64
	}
	if t <= f.start {
		return f.start
	}
	return f.start + (t-f.start+f.interval-1)/f.interval*f.interval
}

// overlaps reports whether some window meets [mint, maxt].
func (f *sampleFilter) overlaps(mint, maxt int64) bool {
	if maxt < mint {
		return false
	}
	// The earliest window that can meet the chunk is the first one that
	// ends at or after mint; it meets it if it starts before maxt.
	ts := f.firstStep(mint)
	return ts <= f.end && ts-f.width < maxt
}

// The decoder reads the chunk's bit stream by position: load returns the
// 64 bits from a bit position on, of which at least the top 57 are the
// stream's, and a sample's fields are cut from one such word wherever
// they fit in it (a delta of deltas of at most 24 bits, then a value's
// header and bits, up to 57 in all: for regular scrapes, nearly every
// sample), so a sample usually costs one load, where the chunk iterator
// makes several calls per field. The chunk is
// decoded where it lies, not from a padded copy: near its end load takes
// the last 8 bytes and shifts the ones before the position away, zeros
// past the end.

// load returns the 64 bits from bit pos of b on (len(b) at least 8).
func load(b []byte, pos uint) uint64 {
	if i := pos >> 3; i+8 <= uint(len(b)) {
		return binary.BigEndian.Uint64(b[i:]) << (pos & 7)
	}
	return loadTail(b, pos)
}

// loadTail is load within the last 8 bytes of b and past them.
func loadTail(b []byte, pos uint) uint64 {
	last := uint(len(b)) - 8
	return binary.BigEndian.Uint64(b[last:]) << ((pos>>3 - last) * 8) << (pos & 7)
}

// readBits returns the k (1 to 64) bits from bit pos on.
func readBits(b []byte, pos, k uint) uint64 {
	if k <= 57 {
		return load(b, pos) >> (64 - k)
	}
	hi := load(b, pos) >> 32
	return hi<<(k-32) | load(b, pos+32)>>(64-(k-32))
}

// appendXOR decodes the XOR chunk data (Prometheus' tsdb/chunkenc float
// encoding: a sample count, then timestamps as delta-of-deltas and values
// as XORs with the previous value, bit-packed) and appends the samples f
// keeps to buf. Every sample must be decoded (a value is an XOR with the
// one before), so decodeXOR decodes them all into buf first, in a loop
// that calls nothing (a call in the loop made the compiler keep the
// decoder's state on the stack, and it was a fifth slower; on amd64 the
// loop runs as assembly, decodeXORFast, about twice as fast again); then the
// samples no window holds (and stale markers, for range functions) are
// moved out (keep), a pass that is skipped where the filter's windows
// leave no gaps and the whole chunk lies in them, as nearly every chunk of
// a range query with a window at least a step wide does. The values it
// yields are bitwise those of the chunk iterator, in the iterator's order
// (FuzzXORDecode checks it). A read past the end of the bytes yields zeros
// and is caught once, after the loop, rather than per sample.
func appendXOR(buf []fpoint, data []byte, f *sampleFilter) ([]fpoint, error) {
	var h xorHeader
	if err := h.parse(data); err != nil || h.n == 0 {
		return buf, err
	}
	if h.n == 1 {
		if f.holds(h.t, h.vbits) {
			buf = append(buf, fpoint{h.t, math.Float64frombits(h.vbits)})
		}
		return buf, nil
	}
	n, t, vbits := h.n, h.t, h.vbits
	from := len(buf)
	buf = growPoints(buf, n)
	dst := buf[from : from+n]
	dst[0] = fpoint{t, math.Float64frombits(vbits)}
	lo, hi := f.start-f.width, f.end
	pos, odd, bad := decodeXORFast(dst[1:], h.body, h.pos, t, h.tDelta, vbits, lo, hi)
	if bad || pos > uint(len(h.body))*8 {
		return buf[:from], errCorruptChunk
	}
	if f.width >= f.interval && !odd && uint64(t-lo-1) < uint64(hi-lo) && vbits != value.StaleNaN {
		return buf[:from+n], nil
	}
	return buf[:from+f.keep(dst)], nil
}

// xorHeader is what an XOR chunk's bytes say before its bit-packed
// samples.
type xorHeader struct {
	n      int    // the sample count
	body   []byte // the bytes after the count
	t      int64  // the first sample's time
	vbits  uint64 // the first sample's value's bits
	tDelta int64  // the second sample's time delta (n ≥ 2)
	pos    uint   // the bit position of the second sample's value in body (n ≥ 2)
}

// parse reads the count, then the first sample: a varint timestamp and
// the value's 64 bits, byte-aligned; then, where there is a second, its
// uvarint time delta, byte-aligned (its value is packed as every other).
// Bytes that cannot hold the count's samples are corrupt. (A method on
// the caller's header rather than a returned one: returning the struct
// cost appendXOR about 40 ns a chunk.)
func (h *xorHeader) parse(data []byte) error {
	if len(data) < 2 {
		return errCorruptChunk
	}
	h.n, h.body = int(binary.BigEndian.Uint16(data)), data[2:]
	if h.n == 0 {
		return nil
	}
	t, k := binary.Varint(h.body)
	if k <= 0 || k+8 > len(h.body) {
		return errCorruptChunk
	}
	h.t, h.vbits = t, binary.BigEndian.Uint64(h.body[k:])
	if h.n == 1 {
		return nil
	}
	p := k + 8
	d, k2 := binary.Uvarint(h.body[p:])
	if k2 <= 0 {
		return errCorruptChunk
	}
	p += k2
	// Every sample from the third on takes at least two bits (a delta of
	// deltas and a value); a count that says more than the bytes can hold
	// is corrupt, and must not size a buffer.
	if 2*(h.n-2) > 8*(len(h.body)-p) {
		return errCorruptChunk
	}
	h.tDelta, h.pos = int64(d), uint(p)*8
	return nil
}

// decodeXOR decodes the samples of an XOR chunk from the second on into
// dst, from bit pos of body on, after a first sample at t with the value's
// bits vbits and the second's time delta tDelta. It returns the bit
// position after the last sample, odd: whether a sample lies outside
// (lo, hi] or is a stale marker (so that appendXOR must filter), and bad:
// whether a value header was corrupt.
//
// A sample's fields are cut from one 64-bit word loaded at its position
// wherever they fit in it (a delta of deltas of at most 24 bits, then a
// value's header and bits, up to 57 in all: for regular scrapes, nearly
// every sample), so a sample usually costs one load.
func decodeXOR(dst []fpoint, body []byte, pos uint, t, tDelta int64, vbits uint64, lo, hi int64) (end uint, odd, bad bool) {
	var leading, trailing uint
	span := uint64(hi - lo)
	for j := range dst {
		w := load(body, pos)
		used := uint(0) // bits of w taken
		if j > 0 {
			// The delta of deltas: 0, or a prefix 10, 110, 1110 with 14,
			// 17, 20 bits, or 1111 with 64 bits (after which w is
			// loaded again).
			var dod int64
			switch {
			case w>>63 == 0:
				used = 1
			case w>>62 == 0b10:
				dod, used = signed(w<<2>>(64-14), 14), 16
			case w>>61 == 0b110:
				dod, used = signed(w<<3>>(64-17), 17), 20
			case w>>60 == 0b1110:
				dod, used = signed(w<<4>>(64-20), 20), 24
			default:
				// 64 bits as two loads' top 32 each (readBits,
				// written out: a call here costs every sample).
				dod = int64(load(body, pos+4)>>32<<32 | load(body, pos+36)>>32)
				pos += 68
				w = load(body, pos)
			}
			tDelta += dod
		}
		t += tDelta
		// The value: 0 (unchanged), 10 and the meaningful bits within
		// the previous leading/trailing zeros, or 11, 5 bits of leading
		// zeros, 6 bits of length (0 meaning 64) and the bits. The
		// shifts' "&63"s tell the compiler that no count reaches 64.
		v := w << (used & 63) // at least 33 of its bits are the stream's
		if v>>63 == 0 {
			pos += used + 1
		} else {
			hdr, mbits := uint(2), 64-leading-trailing
			if v>>62 == 0b11 {
				lead := uint(v << 2 >> (64 - 5))
				mb := uint(v<<7>>(64-6)-1)&63 + 1 // 0 means 64
				bad = bad || lead+mb > 64
				hdr, mbits = 13, mb
				leading, trailing = lead, (64-lead-mb)&63
			}
			var bits uint64
			if used+hdr+mbits <= 57 {
				bits = v << (hdr & 63) >> ((64 - mbits) & 63)
			} else {
				at := pos + used + hdr
				bits = (load(body, at)>>32<<32 | load(body, at+32)>>32) >> ((64 - mbits) & 63)
			}
			pos += used + hdr + mbits
			vbits ^= bits << (trailing & 63)
		}
		// t in (lo, hi], unsigned: one comparison, whatever the times'
		// order.
		odd = odd || uint64(t-lo-1) >= span || vbits == value.StaleNaN
		dst[j] = fpoint{t, math.Float64frombits(vbits)}
	}
	return pos, odd, bad
}

// keep moves the points of pts that f keeps to its front, in order, and
// returns how many. The window of the point before is kept: the points in
// (prev, end] lie in the same window or the same gap, and are kept where
// they are after lo (and not stale markers that f drops); a point outside
// it finds its own (rare: once a step).
func (f *sampleFilter) keep(pts []fpoint) int {
	prev, lo, end := f.window(pts[0].t)
	drop := f.dropStale
	kept := 0
	for _, s := range pts {
		// s.t in (prev, end], unsigned: one comparison.
		if uint64(s.t-prev-1) >= uint64(end-prev) {
			prev, lo, end = f.window(s.t)
		}
		pts[kept] = s
		inc := 0
		if s.t > lo {
			inc = 1
		}
		if drop && math.Float64bits(s.f) == value.StaleNaN {
			inc = 0
		}
		kept += inc
	}
	return kept
}

// window returns, for a sample at t, the stretch (prev, end] of times
// that share its fate and the time lo after which they are kept: the
// window (lo, end] that holds t, or the gap (prev, lo] = (prev, end]
// before the next window, where windows leave gaps; past the last step,
// (f.end, MaxInt64] with nothing kept. Windows at least a step wide leave
// no gaps: (start-width, end] is one window.
func (f *sampleFilter) window(t int64) (prev, lo, end int64) {
	switch first := f.start - f.width; {
	case t > f.end:
		return f.end, math.MaxInt64, math.MaxInt64
	case f.width >= f.interval:
		if t <= first {
			return math.MinInt64, first, first
		}
		return first, first, f.end
	}
	ts := f.firstStep(t)
	prev = ts - f.interval
	if ts == f.start {
		prev = math.MinInt64
	}
	return prev, ts - f.width, ts
}

// holds reports whether f keeps a sample at t with the value's bits vbits.
func (f *sampleFilter) holds(t int64, vbits uint64) bool {
	_, lo, end := f.window(t)
	return t > lo && t <= end && !(f.dropStale && vbits == value.StaleNaN)
}

// growPoints makes room for n more points in buf, so that appending a
// chunk's samples does not grow it step by step.
func growPoints(buf []fpoint, n int) []fpoint {
	if cap(buf)-len(buf) >= n {
		return buf
	}
	out := make([]fpoint, len(buf), 2*cap(buf)+n)
	copy(out, buf)
	return out
}

// signed is the chunk encoder's sz-bit delta of deltas as a number: values
// above 2^(sz-1) stand for negative ones.
func signed(bits uint64, sz uint) int64 {
	if bits > 1<<(sz-1) {
		bits -= 1 << sz
	}
	return int64(bits)
}
