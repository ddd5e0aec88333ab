package records

import (
	"fmt"
	"math"

	"github.com/prometheus/prometheus/model/labels"
)

// segCols is a parsed raw body. Integer columns are decoded up front (they
// must be scanned anyway to find row boundaries); float columns stay
// byte-shuffled and are gathered per row, so rows that fail the time range or
// matchers cost nothing beyond the scan.
type segCols struct {
	n        int
	sets     []labels.Labels
	times    []int64
	setIDs   []uint32
	traceOff []int32 // offset into traceIDs per row, or -1
	traceIDs []byte
	reqOff   []uint32 // n+1 offsets into reqData
	reqData  string
	floats   [numColumns][]byte // shuffled float columns by column number
	prompt   []uint32
	output   []uint32
	itlCount []uint32
	itlKept  []uint32
	itlOff   []int // n+1 offsets into the itl values column, in values
	itlVals  []byte
	itlTotal int
}

// appendShuffled appends vals as a byte-shuffled float column.
func appendShuffled(dst []byte, vals []float64) []byte {
	for j := range 8 {
		shift := 56 - 8*j
		for _, v := range vals {
			dst = append(dst, byte(math.Float64bits(v)>>shift))
		}
	}
	return dst
}

// shuffledAt gathers value i of a shuffled column of m values.
func shuffledAt(planes []byte, m, i int) float64 {
	var u uint64
	for j := range 8 {
		u = u<<8 | uint64(planes[j*m+i])
	}
	return math.Float64frombits(u)
}

func isFloatColumn(c int) bool {
	return (c >= colStage0 && c <= colTTFT) || c == colEntropy || (c >= colITLSummary0 && c < colITLKept)
}

// decodeBody parses the raw body of a segment with header h, checking every
// structural rule of docs/format/records.md.
func decodeBody(raw []byte, h *segmentHeader) (*segCols, error) {
	n := int(h.Count)
	c := &segCols{n: n}
	d := decoder{b: raw}
	c.sets = decodeLabelSets(&d)
	if d.err != nil {
		return nil, d.err
	}

	for col := range numColumns {
		l := d.uvarint("column length")
		if d.err == nil && l > uint64(len(d.b)) {
			d.fail("column %d: length %d exceeds %d remaining", col, l, len(d.b))
		}
		data := d.bytes(int(l), "column")
		if d.err != nil {
			return nil, d.err
		}
		if err := c.decodeColumn(col, data, h); err != nil {
			return nil, fmt.Errorf("column %d: %w", col, err)
		}
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%d bytes after the last column", len(d.b))
	}
	return c, nil
}

// decodeLabelSets reads the symbol and label-set tables at the front of a raw
// body. On error it returns nil with d.err set.
func decodeLabelSets(d *decoder) []labels.Labels {
	nsym := d.uvarint("symbol count")
	if d.err == nil && nsym > uint64(len(d.b)) {
		d.fail("symbol count %d exceeds body", nsym)
	}
	var syms []string
	if d.err == nil {
		syms = make([]string, nsym)
	}
	for i := range syms {
		syms[i] = d.string("symbol")
		if d.err == nil && i > 0 && syms[i] <= syms[i-1] {
			d.fail("symbol %d %q not after %q", i, syms[i], syms[i-1])
		}
	}
	nset := d.uvarint("label set count")
	if d.err == nil && nset > uint64(len(d.b)) {
		d.fail("label set count %d exceeds body", nset)
	}
	var sets []labels.Labels
	if d.err == nil {
		sets = make([]labels.Labels, nset)
	}
	sym := func(field string) string {
		ref := d.uvarint(field)
		if d.err == nil && ref >= uint64(len(syms)) {
			d.fail("%s ref %d out of %d symbols", field, ref, len(syms))
		}
		if d.err != nil {
			return ""
		}
		return syms[ref]
	}
	for s := range sets {
		np := d.uvarint("label pair count")
		if d.err == nil && np > uint64(len(d.b))/2 {
			d.fail("label set %d: %d pairs exceed body", s, np)
		}
		if d.err != nil {
			break
		}
		b := labels.NewScratchBuilder(int(np))
		prev := ""
		for p := range int(np) {
			name, value := sym("label name"), sym("label value")
			switch {
			case d.err != nil:
			case name == "" || value == "":
				d.fail("label set %d: empty name or value (%q=%q)", s, name, value)
			case p > 0 && name <= prev:
				d.fail("label set %d: %q not after %q", s, name, prev)
			}
			prev = name
			b.Add(name, value)
		}
		sets[s] = b.Labels()
	}
	if d.err != nil {
		return nil
	}
	return sets
}

// decodeTimes decodes the delta-of-delta time column of n rows and checks
// that the times are ordered and span exactly [h.MinT, h.MaxT].
func decodeTimes(data []byte, n int, h *segmentHeader) ([]int64, error) {
	if n == 0 {
		return nil, fmt.Errorf("no rows")
	}
	d := decoder{b: data}
	times := make([]int64, n)
	var prevD int64
	for k := range n {
		v := d.varint("time")
		switch k {
		case 0:
			times[0] = v
		case 1:
			prevD = v
			times[1] = times[0] + v
		default:
			prevD += v
			times[k] = times[k-1] + prevD
		}
		if d.err == nil && k > 0 && times[k] < times[k-1] {
			d.fail("time %d of row %d before %d", times[k], k, times[k-1])
		}
		if d.err != nil {
			return nil, d.err
		}
	}
	if times[0] != h.MinT || times[n-1] != h.MaxT {
		return nil, fmt.Errorf("times span [%d, %d], header says [%d, %d]", times[0], times[n-1], h.MinT, h.MaxT)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%d bytes left over", len(d.b))
	}
	return times, nil
}

// decodeSetIDs decodes the label-set column of n rows; every id must index
// one of nsets label sets.
func decodeSetIDs(data []byte, n, nsets int) ([]uint32, error) {
	d := decoder{b: data}
	ids := make([]uint32, n)
	for k := range n {
		v := d.uvarint("label set id")
		if d.err == nil && v >= uint64(nsets) {
			d.fail("row %d: label set %d out of %d", k, v, nsets)
		}
		if d.err != nil {
			return nil, d.err
		}
		ids[k] = uint32(v)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%d bytes left over", len(d.b))
	}
	return ids, nil
}

func (c *segCols) decodeColumn(col int, data []byte, h *segmentHeader) error {
	n := c.n
	d := decoder{b: data}
	switch {
	case col == colTime:
		var err error
		if c.times, err = decodeTimes(data, n, h); err != nil {
			return err
		}
		return nil
	case col == colLabelSet:
		var err error
		if c.setIDs, err = decodeSetIDs(data, n, len(c.sets)); err != nil {
			return err
		}
		return nil
	case col == colTraceID:
		bm := d.bytes((n+7)/8, "trace bitmap")
		if d.err != nil {
			break
		}
		if n%8 != 0 && bm[len(bm)-1]>>(n%8) != 0 {
			d.fail("trace bitmap has bits past row %d", n)
			break
		}
		c.traceOff = make([]int32, n)
		present := 0
		for k := range n {
			c.traceOff[k] = -1
			if bm[k/8]&(1<<(k%8)) != 0 {
				c.traceOff[k] = int32(present * 16)
				present++
			}
		}
		c.traceIDs = d.bytes(16*present, "trace ids")
		for i := 0; d.err == nil && i < present; i++ {
			if TraceID(c.traceIDs[16*i : 16*i+16]).IsZero() {
				d.fail("trace id %d is zero", i)
			}
		}
	case col == colRequestID:
		c.reqOff = make([]uint32, n+1)
		var buf []byte
		for k := range n {
			l := d.uvarint("request id length")
			if d.err == nil && l > uint64(len(d.b)) {
				d.fail("request id of %d bytes exceeds column", l)
			}
			buf = append(buf, d.bytes(int(l), "request id")...)
			c.reqOff[k+1] = uint32(len(buf))
		}
		c.reqData = string(buf)
	case isFloatColumn(col):
		c.floats[col] = d.bytes(8*n, "float column")
	case col == colPrompt, col == colOutput, col == colITLCount, col == colITLKept:
		v := make([]uint32, n)
		for k := range n {
			v[k] = d.uint32("count")
		}
		switch col {
		case colPrompt:
			c.prompt = v
		case colOutput:
			c.output = v
		case colITLCount:
			c.itlCount = v
		case colITLKept:
			c.itlKept = v
			c.itlOff = make([]int, n+1)
			for k := range n {
				if d.err == nil && v[k] != 0 && (v[k] != c.itlCount[k] || v[k] > MaxITLValues) {
					d.fail("row %d keeps %d itl values of %d", k, v[k], c.itlCount[k])
				}
				c.itlOff[k+1] = c.itlOff[k] + int(v[k])
			}
			c.itlTotal = c.itlOff[n]
		}
	case col == colITLValues:
		if c.itlTotal > len(data)/8 {
			d.fail("%d itl values in %d bytes", c.itlTotal, len(data))
			break
		}
		c.itlVals = d.bytes(8*c.itlTotal, "itl values")
	default:
		return fmt.Errorf("BUG: no decoder for column %d", col)
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%d bytes left over", len(d.b))
	}
	return nil
}

// row materialises row k. The record shares no memory with the segment.
func (c *segCols) row(k int) Record {
	n := c.n
	r := Record{
		Time:         c.times[k],
		Labels:       c.sets[c.setIDs[k]],
		RequestID:    c.reqData[c.reqOff[k]:c.reqOff[k+1]],
		E2E:          shuffledAt(c.floats[colE2E], n, k),
		TTFT:         shuffledAt(c.floats[colTTFT], n, k),
		PromptTokens: c.prompt[k],
		OutputTokens: c.output[k],
	}
	if off := c.traceOff[k]; off >= 0 {
		copy(r.TraceID[:], c.traceIDs[off:off+16])
	}
	for st := range NumStages {
		r.Stages[st] = shuffledAt(c.floats[colStage0+st], n, k)
	}
	r.PromptEntropy = shuffledAt(c.floats[colEntropy], n, k)
	it := &r.ITL
	it.Count = c.itlCount[k]
	s := [6]float64{}
	for i := range s {
		s[i] = shuffledAt(c.floats[colITLSummary0+i], n, k)
	}
	it.Sum, it.Min, it.Max, it.P50, it.P90, it.P99 = s[0], s[1], s[2], s[3], s[4], s[5]
	if kept := c.itlKept[k]; kept > 0 {
		it.Values = make([]float64, kept)
		for i := range it.Values {
			it.Values[i] = shuffledAt(c.itlVals, c.itlTotal, c.itlOff[k]+i)
		}
	}
	return r
}
