package fast

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/prometheus/prometheus/model/value"
)

// errCorruptChunk is returned for XOR chunk bytes that do not decode.
var errCorruptChunk = errors.New("corrupt XOR chunk")

// xorPadding is how many zero bytes follow a chunk's bits in the decoder's
// copy: a sample is at most 145 bits and the decoder loads 8 bytes at a
// time, so a read that starts inside the chunk never leaves the copy.
const xorPadding = 32

// sampleFilter says which samples of a leaf any step can use: those
// inside some step's window (ts-width, ts], with ts = start + i*interval up
// to end. Its arithmetic assumes start-width and end+4*interval fit an
// int64 (the evaluator hands back queries near the ends of time). A sample outside every window changes no step's value (a window
// that held samples on both sides of it would hold it too), so it is
// dropped before it costs a copy, and a chunk outside every window is not
// decoded at all.
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

// appendXOR decodes the XOR chunk data (Prometheus' tsdb/chunkenc float
// encoding: a sample count, then timestamps as delta-of-deltas and values
// as XORs with the previous value, bit-packed) and appends the samples f
// keeps to buf. It reads the bits straight from a padded copy in scratch
// with one 8-byte load per field, where the chunk iterator makes several
// calls through interfaces per sample; the values it yields are bitwise
// those of the iterator (FuzzXORDecode checks it).
func appendXOR(buf []fpoint, scratch []byte, data []byte, f *sampleFilter) ([]fpoint, []byte, error) {
	if len(data) < 2 {
		return buf, scratch, errCorruptChunk
	}
	n := int(binary.BigEndian.Uint16(data))
	if n == 0 {
		return buf, scratch, nil
	}
	body := data[2:]
	scratch = append(scratch[:0], body...)
	scratch = append(scratch, make([]byte, xorPadding)...)
	b := scratch
	nbits := uint(len(body)) * 8

	var (
		end, interval, width = f.end, f.interval, f.width
		dropStale            = f.dropStale
		t, tDelta            int64
		vbits                uint64
		leading, trailing    uint
		pos                  uint
		next                 int64
	)
	for i := 0; i < n; i++ {
		if pos > nbits {
			return buf, scratch, errCorruptChunk
		}
		switch i {
		case 0:
			// A varint timestamp and the value's 64 bits, byte-aligned.
			var k int
			t, k = binary.Varint(body)
			if k <= 0 || uint(k)*8+64 > nbits {
				return buf, scratch, errCorruptChunk
			}
			pos = uint(k) * 8
			vbits = readBits(b, pos, 64)
			pos += 64
			next = f.firstStep(t)
		case 1:
			// A uvarint delta, byte-aligned, then the value as below.
			d, k := binary.Uvarint(body[pos/8:])
			if k <= 0 {
				return buf, scratch, errCorruptChunk
			}
			pos += uint(k) * 8
			tDelta = int64(d)
			t += tDelta
		default:
			// The delta of deltas: 0, or a prefix 10, 110, 1110 with
			// 14, 17, 20 bits, or 1111 with 64 bits.
			w := load(b, pos)
			var dod int64
			switch {
			case w>>63 == 0:
				pos++
			case w>>62 == 0b10:
				dod = signed(w<<2>>(64-14), 14)
				pos += 2 + 14
			case w>>61 == 0b110:
				dod = signed(w<<3>>(64-17), 17)
				pos += 3 + 17
			case w>>60 == 0b1110:
				dod = signed(w<<4>>(64-20), 20)
				pos += 4 + 20
			default:
				dod = int64(readBits(b, pos+4, 64))
				pos += 4 + 64
			}
			tDelta += dod
			t += tDelta
		}
		if i > 0 {
			// The value: 0 (unchanged), 10 and the meaningful bits
			// within the previous leading/trailing zeros, or 11, 5 bits
			// of leading zeros, 6 bits of length (0 meaning 64) and the
			// bits.
			w := load(b, pos)
			switch {
			case w>>63 == 0:
				pos++
			case w>>62 == 0b10:
				mbits := 64 - leading - trailing
				vbits ^= readBits(b, pos+2, mbits) << trailing
				pos += 2 + mbits
			default:
				lead := uint(w << 2 >> (64 - 5))
				mbits := uint(w << 7 >> (64 - 6))
				if mbits == 0 {
					mbits = 64
				}
				if lead+mbits > 64 {
					return buf, scratch, errCorruptChunk
				}
				leading, trailing = lead, 64-lead-mbits
				vbits ^= readBits(b, pos+13, mbits) << trailing
				pos += 13 + mbits
			}
		}
		// Keep the sample if a window holds it; next is the first step
		// at or after t.
		if t > end {
			continue
		}
		switch {
		case t > next && t <= next+4*interval:
			for next < t {
				next += interval
			}
		case t > next || t <= next-interval:
			// A jump, or (in a chunk no TSDB writes) a step back.
			next = f.firstStep(t)
		}
		if t <= next-width {
			continue
		}
		v := math.Float64frombits(vbits)
		if dropStale && value.IsStaleNaN(v) {
			continue
		}
		buf = append(buf, fpoint{t, v})
	}
	if pos > nbits {
		return buf, scratch, errCorruptChunk
	}
	return buf, scratch, nil
}

// load returns the 64 bits from bit pos on, of which at least the top 57
// are the stream's.
func load(b []byte, pos uint) uint64 {
	return binary.BigEndian.Uint64(b[pos>>3:]) << (pos & 7)
}

// readBits returns the k (1 to 64) bits from bit pos on.
func readBits(b []byte, pos, k uint) uint64 {
	if k <= 56 {
		return load(b, pos) >> (64 - k)
	}
	hi := load(b, pos) >> 32
	return hi<<(k-32) | load(b, pos+32)>>(64-(k-32))
}

// signed is the chunk encoder's sz-bit delta of deltas as a number: values
// above 2^(sz-1) stand for negative ones.
func signed(bits uint64, sz uint) int64 {
	if bits > 1<<(sz-1) {
		bits -= 1 << sz
	}
	return int64(bits)
}
