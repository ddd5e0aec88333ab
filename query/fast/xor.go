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
// keeps to buf. It decodes every sample first (decodeXOR) and filters
// them in place after: the decoding loop then has fewer values to keep
// live, and the filter is a loop of predictable branches.
func appendXOR(buf []fpoint, data []byte, f *sampleFilter) ([]fpoint, error) {
	from := len(buf)
	buf, err := decodeXOR(buf, data)
	if err != nil {
		return buf[:from], err
	}
	return f.keep(buf, from), nil
}

// keep drops from buf[from:], in place, the samples no window holds (and
// stale markers where f drops them), and returns what is left.
func (f *sampleFilter) keep(buf []fpoint, from int) []fpoint {
	var (
		end, interval, width = f.end, f.interval, f.width
		dropStale            = f.dropStale
		lo                   = f.start - width
		out                  = buf[:from]
	)
	if width >= interval {
		// Windows at least a step wide leave no gaps between them: every
		// sample in (start-width, end] is in one. Most chunks keep every
		// sample: they are only read up to the first one to drop, and
		// moved only from there on. (The times are far from an int64's
		// ends: t-lo-1 < end-lo, unsigned, is lo < t <= end.)
		span := uint64(end - lo)
		i := from
		for ; i < len(buf); i++ {
			s := buf[i]
			if uint64(s.t-lo-1) >= span || (dropStale && math.Float64bits(s.f) == value.StaleNaN) {
				break
			}
		}
		out = buf[:i]
		for _, s := range buf[i:] {
			if uint64(s.t-lo-1) < span && !(dropStale && math.Float64bits(s.f) == value.StaleNaN) {
				out = append(out, s)
			}
		}
		return out
	}
	if sorted(buf[from:]) {
		return f.keepSorted(buf, from)
	}
	// Samples out of order (no TSDB writes such a chunk): each on its
	// own.
	next := int64(math.MinInt64) // forces firstStep on the first sample
	for _, s := range buf[from:] {
		t := s.t
		if t > end {
			continue
		}
		// next is the first step at or after t.
		switch {
		case t > next && t <= next+4*interval:
			for next < t {
				next += interval
			}
		case t > next || t <= next-interval:
			// A jump, or (in a chunk no TSDB writes) a step back.
			next = f.firstStep(t)
		}
		if t <= next-width || (dropStale && math.Float64bits(s.f) == value.StaleNaN) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// sorted reports whether the samples' times never go down.
func sorted(pts []fpoint) bool {
	for i := 1; i < len(pts); i++ {
		if pts[i].t < pts[i-1].t {
			return false
		}
	}
	return true
}

// keepSorted is keep for samples in time order and windows narrower than
// a step: it walks the windows rather than testing every sample against
// them, so a sample costs one comparison (skipped between windows, kept
// inside one) and a step one jump.
func (f *sampleFilter) keepSorted(buf []fpoint, from int) []fpoint {
	out := buf[:from]
	i, n := from, len(buf)
	if i == n {
		return out
	}
	for ts := f.firstStep(buf[i].t); ts <= f.end; ts += f.interval {
		for lo := ts - f.width; i < n && buf[i].t <= lo; i++ {
		}
		if i == n {
			break
		}
		if buf[i].t > ts {
			// No sample in this window: on to the first that holds the
			// next one (firstStep is past end when none does).
			ts = f.firstStep(buf[i].t) - f.interval
			continue
		}
		for ; i < n && buf[i].t <= ts; i++ {
			if !(f.dropStale && math.Float64bits(buf[i].f) == value.StaleNaN) {
				out = append(out, buf[i])
			}
		}
	}
	return out
}

// decodeXOR appends every sample of the XOR chunk data to buf. It cuts a
// sample's fields from one loaded word where they fit (see load); the
// values it yields are bitwise those of the chunk iterator (FuzzXORDecode
// checks it). A read past the end of the bytes yields zeros and is caught
// once, after the loop, rather than per sample. (Tracking here whether the
// times go down, for keep, costs more than keep's own pass: it takes
// registers the loop needs.)
func decodeXOR(buf []fpoint, data []byte) ([]fpoint, error) {
	if len(data) < 2 {
		return buf, errCorruptChunk
	}
	n := int(binary.BigEndian.Uint16(data))
	if n == 0 {
		return buf, nil
	}
	body := data[2:]

	// The first sample: a varint timestamp and the value's 64 bits,
	// byte-aligned; the second: a uvarint delta, byte-aligned, then its
	// value as every other.
	t, k := binary.Varint(body)
	if k <= 0 || k+8 > len(body) {
		return buf, errCorruptChunk
	}
	vbits := binary.BigEndian.Uint64(body[k:])
	buf = append(buf, fpoint{t, math.Float64frombits(vbits)})
	if n == 1 {
		return buf, nil
	}
	p := k + 8
	d, k2 := binary.Uvarint(body[p:])
	if k2 <= 0 {
		return buf, errCorruptChunk
	}
	p += k2
	tDelta := int64(d)
	// Every sample from the third on takes at least two bits (a delta of
	// deltas and a value); a count that says more than the bytes can hold
	// is corrupt, and must not size the buffer.
	if 2*(n-2) > 8*(len(body)-p) {
		return buf, errCorruptChunk
	}
	from := len(buf)
	buf = growPoints(buf, n-1)[:from+n-1]
	dst := buf[from:]

	pos := uint(p) * 8
	var leading, trailing uint
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
				dod = int64(readBits(body, pos+4, 64))
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
				if lead+mb > 64 {
					return buf[:from], errCorruptChunk
				}
				hdr, mbits = 13, mb
				leading, trailing = lead, 64-lead-mb
			}
			var bits uint64
			if used+hdr+mbits <= 57 {
				bits = v << (hdr & 63) >> ((64 - mbits) & 63)
			} else {
				bits = readBits(body, pos+used+hdr, mbits)
			}
			pos += used + hdr + mbits
			vbits ^= bits << (trailing & 63)
		}
		dst[j] = fpoint{t, math.Float64frombits(vbits)}
	}
	if pos > uint(len(body))*8 {
		return buf[:from], errCorruptChunk
	}
	return buf, nil
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
