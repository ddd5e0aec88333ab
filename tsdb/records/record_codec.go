package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/prometheus/prometheus/model/labels"
)

// Row encoding of one Record, used inside WAL entries. Layout in
// docs/format/records.md, "Request record".

const flagTraceID = 1 << 0

// Marshal appends the row encoding of r to dst and returns the extended
// buffer. It does not validate; Append validates before it marshals.
func (r *Record) Marshal(dst []byte) []byte {
	dst = binary.AppendVarint(dst, r.Time)
	dst = binary.AppendUvarint(dst, uint64(r.Labels.Len()))
	r.Labels.Range(func(l labels.Label) {
		dst = appendString(dst, l.Name)
		dst = appendString(dst, l.Value)
	})
	if r.TraceID.IsZero() {
		dst = append(dst, 0)
	} else {
		dst = append(dst, flagTraceID)
		dst = append(dst, r.TraceID[:]...)
	}
	dst = appendString(dst, r.RequestID)
	for _, v := range r.Stages {
		dst = appendFloat(dst, v)
	}
	dst = appendFloat(dst, r.E2E)
	dst = appendFloat(dst, r.TTFT)
	dst = binary.AppendUvarint(dst, uint64(r.PromptTokens))
	dst = binary.AppendUvarint(dst, uint64(r.OutputTokens))
	dst = appendFloat(dst, r.PromptEntropy)
	it := &r.ITL
	dst = binary.AppendUvarint(dst, uint64(it.Count))
	for _, v := range [...]float64{it.Sum, it.Min, it.Max, it.P50, it.P90, it.P99} {
		dst = appendFloat(dst, v)
	}
	dst = binary.AppendUvarint(dst, uint64(len(it.Values)))
	for _, v := range it.Values {
		dst = appendFloat(dst, v)
	}
	return dst
}

// Unmarshal decodes one record from the front of src into r and returns the
// bytes after it. It checks structure (lengths, label order, flags, ITL value
// count) but not the numeric invariants, which Validate checks on write.
// Strings are copied; r shares no memory with src.
func (r *Record) Unmarshal(src []byte) (tail []byte, err error) {
	d := decoder{b: src}
	*r = Record{}
	r.Time = d.varint("time")
	if d.err == nil && r.Time < 0 {
		d.fail("time %d is negative", r.Time)
	}
	r.Labels = d.labels()
	switch flags := d.byte("flags"); {
	case d.err != nil:
	case flags == flagTraceID:
		copy(r.TraceID[:], d.bytes(16, "trace id"))
		if d.err == nil && r.TraceID.IsZero() {
			d.fail("trace id flag set on a zero trace id")
		}
	case flags != 0:
		d.fail("unknown flags %#x", flags)
	}
	r.RequestID = d.string("request id")
	for i := range r.Stages {
		r.Stages[i] = d.float("stage")
	}
	r.E2E = d.float("e2e")
	r.TTFT = d.float("ttft")
	r.PromptTokens = d.uint32("prompt tokens")
	r.OutputTokens = d.uint32("output tokens")
	r.PromptEntropy = d.float("prompt entropy")
	it := &r.ITL
	it.Count = d.uint32("itl count")
	it.Sum, it.Min, it.Max = d.float("itl sum"), d.float("itl min"), d.float("itl max")
	it.P50, it.P90, it.P99 = d.float("itl p50"), d.float("itl p90"), d.float("itl p99")
	n := d.uvarint("itl values")
	if d.err == nil && n != 0 && (n != uint64(it.Count) || n > MaxITLValues) {
		d.fail("%d itl values for count %d", n, it.Count)
	}
	if d.err == nil && n > 0 {
		it.Values = make([]float64, n)
		for i := range it.Values {
			it.Values[i] = d.float("itl value")
		}
	}
	if d.err != nil {
		*r = Record{}
		return src, fmt.Errorf("unmarshal record: %w", d.err)
	}
	return d.b, nil
}

// decoder reads the primitives of the formats from a byte slice. After the
// first error every read returns a zero value, so callers check d.err once.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("unexpected end of data")

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("%s: bad uvarint", field)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("%s: bad varint", field)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint32(field string) uint32 {
	v := d.uvarint(field)
	if v > math.MaxUint32 {
		d.fail("%s: %d exceeds 2^32-1", field, v)
		return 0
	}
	return uint32(v)
}

func (d *decoder) bytes(n int, field string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail("%s: %w (need %d bytes, have %d)", field, errShort, n, len(d.b))
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

func (d *decoder) byte(field string) byte {
	b := d.bytes(1, field)
	if b == nil {
		return 0
	}
	return b[0]
}

func (d *decoder) float(field string) float64 {
	b := d.bytes(8, field)
	if b == nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

func (d *decoder) string(field string) string {
	n := d.uvarint(field)
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail("%s: %w (length %d, have %d)", field, errShort, n, len(d.b))
	}
	return string(d.bytes(int(n), field))
}

// labels reads nlabels and name/value pairs, enforcing the label invariants.
func (d *decoder) labels() labels.Labels {
	n := d.uvarint("nlabels")
	if d.err == nil && n > uint64(len(d.b))/2 {
		d.fail("nlabels %d exceeds remaining %d bytes", n, len(d.b))
	}
	if d.err != nil || n == 0 {
		return labels.EmptyLabels()
	}
	b := labels.NewScratchBuilder(int(n))
	prev := ""
	for i := range int(n) {
		name, value := d.string("label name"), d.string("label value")
		if d.err != nil {
			break
		}
		switch {
		case name == "" || value == "":
			d.fail("label %d: empty name or value (%q=%q)", i, name, value)
		case i > 0 && name <= prev:
			d.fail("label %q not after %q", name, prev)
		}
		prev = name
		b.Add(name, value)
	}
	if d.err != nil {
		return labels.EmptyLabels()
	}
	return b.Labels()
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendFloat(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}
