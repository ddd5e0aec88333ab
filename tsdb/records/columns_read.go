package records

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
)

// colPrep is a prepared job: the located columns of a segment body and the
// rows it contributes, or the chosen rows of a head snapshot.
type colPrep struct {
	raw    *[]byte // pooled body the columns point into
	n      int     // rows in the segment
	sets   []labels.Labels
	cols   [numColumns][]byte
	times  []int64
	setIDs []uint32
	// The rows taken: rows when non-nil (some label sets fail the
	// matchers), else the time range [lo, hi).
	lo, hi   int
	rows     []int32
	count    int
	headRows []int32 // head: the records taken, in time order
}

func (p *colPrep) release() {
	if p != nil && p.raw != nil {
		putBuf(&rawPool, p.raw)
		p.raw = nil
	}
}

// prepareBody locates the columns of a raw body and picks its rows: the
// label sets are decoded and matched, the time column only when the segment
// straddles the query range or the times are needed, the label-set column
// only when some set fails the matchers or the ids are asked for. The
// framing of every column is checked; contents only of what is decoded.
func (q *columnQuery) prepareBody(raw []byte, h *segmentHeader, needTime bool) (*colPrep, error) {
	n := int(h.Count)
	p := &colPrep{n: n}
	d := decoder{b: raw}
	p.sets = decodeLabelSets(&d)
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
		if isFloatColumn(col) && len(data) != 8*n {
			return nil, fmt.Errorf("column %d: %d bytes for %d float values", col, len(data), n)
		}
		p.cols[col] = data
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%d bytes after the last column", len(d.b))
	}

	setOK := make([]bool, len(p.sets))
	some, all := false, true
	for i, ls := range p.sets {
		setOK[i] = matchesAll(q.matchers, ls)
		some = some || setOK[i]
		all = all && setOK[i]
	}
	if !some {
		return p, nil
	}
	partial := h.MinT < q.mint || h.MaxT > q.maxt
	var err error
	if needTime || partial {
		if p.times, err = decodeTimes(p.cols[colTime], n, h); err != nil {
			return nil, fmt.Errorf("column %d: %w", colTime, err)
		}
	}
	p.lo, p.hi = 0, n
	if partial {
		p.lo = sort.Search(n, func(k int) bool { return p.times[k] >= q.mint })
		p.hi = sort.Search(n, func(k int) bool { return p.times[k] > q.maxt })
	}
	if p.lo >= p.hi {
		return p, nil
	}
	if !all || q.want&ColumnLabelSet != 0 {
		if p.setIDs, err = decodeSetIDs(p.cols[colLabelSet], n, len(p.sets)); err != nil {
			return nil, fmt.Errorf("column %d: %w", colLabelSet, err)
		}
	}
	p.count = p.hi - p.lo
	if !all {
		p.rows = make([]int32, 0, p.count)
		for k := p.lo; k < p.hi; k++ {
			if setOK[p.setIDs[k]] {
				p.rows = append(p.rows, int32(k))
			}
		}
		p.count = len(p.rows)
	}
	return p, nil
}

func matchesAll(ms []*labels.Matcher, ls labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

// prepareHead picks the head records in range that match, in time order
// (stable, so equal times keep append order).
func (q *columnQuery) prepareHead(j *colJob) *colPrep {
	var rows []int32
	sorted := true
	for i := range j.head {
		r := &j.head[i]
		if r.Time < q.mint || r.Time > q.maxt || !matchesAll(q.matchers, r.Labels) {
			continue
		}
		if len(rows) > 0 && j.head[rows[len(rows)-1]].Time > r.Time {
			sorted = false
		}
		rows = append(rows, int32(i))
	}
	if !sorted {
		slices.SortStableFunc(rows, func(a, b int32) int { return cmpInt64(j.head[a].Time, j.head[b].Time) })
	}
	return &colPrep{headRows: rows, count: len(rows)}
}

const noSetID = math.MaxUint32

// gatherSegment decodes the requested columns of p's rows into the batch
// rows [off, off+p.count).
func (q *columnQuery) gatherSegment(off int, p *colPrep) error {
	o := &q.out
	end := off + p.count
	if q.keepTime && p.times != nil {
		dst := o.Time[off:end]
		if p.rows != nil {
			for k, r := range p.rows {
				dst[k] = p.times[r]
			}
		} else {
			copy(dst, p.times[p.lo:p.hi])
		}
	}
	if q.want&ColumnLabelSet != 0 {
		gid := make([]uint32, len(p.sets))
		for i := range gid {
			gid[i] = noSetID
		}
		id := func(k int) uint32 {
			s := p.setIDs[k]
			if gid[s] == noSetID {
				gid[s] = q.sets.id(p.sets[s])
			}
			return gid[s]
		}
		dst := o.LabelSet[off:end]
		if p.rows != nil {
			for k, r := range p.rows {
				dst[k] = id(int(r))
			}
		} else {
			for k := range dst {
				dst[k] = id(p.lo + k)
			}
		}
	}
	for st := range Stage(NumStages) {
		if q.want&ColumnStage(st) != 0 {
			p.floats(o.Stages[st][off:end], colStage0+int(st))
		}
	}
	for _, f := range q.floatOuts() {
		p.floats((*f.dst)[off:end], f.col)
	}
	if q.want&ColumnPromptTokens != 0 {
		if err := p.uint32s(o.PromptTokens[off:end], colPrompt); err != nil {
			return err
		}
	}
	if q.want&ColumnOutputTokens != 0 {
		if err := p.uint32s(o.OutputTokens[off:end], colOutput); err != nil {
			return err
		}
	}
	return nil
}

// floats decodes the taken rows of float column col into dst.
func (p *colPrep) floats(dst []float64, col int) {
	planes := p.cols[col]
	if p.rows == nil {
		unshuffleRange(dst, planes, p.n, p.lo)
		return
	}
	for k, r := range p.rows {
		dst[k] = shuffledAt(planes, p.n, int(r))
	}
}

// unshuffleRange decodes values lo, lo+1, … of a shuffled column of m
// values into dst, reading the eight byte planes in step, each
// sequentially. (Loading eight bytes of each plane at a time and
// transposing them in registers is no faster: the loop is bound by memory
// bandwidth.)
func unshuffleRange(dst []float64, planes []byte, m, lo int) {
	n := len(dst)
	if n == 0 {
		return
	}
	p0 := planes[0*m+lo:][:n]
	p1 := planes[1*m+lo:][:n]
	p2 := planes[2*m+lo:][:n]
	p3 := planes[3*m+lo:][:n]
	p4 := planes[4*m+lo:][:n]
	p5 := planes[5*m+lo:][:n]
	p6 := planes[6*m+lo:][:n]
	p7 := planes[7*m+lo:][:n]
	for i := range dst {
		dst[i] = math.Float64frombits(uint64(p0[i])<<56 | uint64(p1[i])<<48 | uint64(p2[i])<<40 | uint64(p3[i])<<32 |
			uint64(p4[i])<<24 | uint64(p5[i])<<16 | uint64(p6[i])<<8 | uint64(p7[i]))
	}
}

// uint32s decodes uvarint column col (every row, to check its framing) and
// keeps the taken rows in dst.
func (p *colPrep) uint32s(dst []uint32, col int) error {
	b := p.cols[col]
	next := 0 // index into p.rows
	for k := range p.n {
		var v uint64
		if len(b) > 0 && b[0] < 0x80 {
			v, b = uint64(b[0]), b[1:]
		} else {
			var w int
			v, w = binary.Uvarint(b)
			if w <= 0 {
				return fmt.Errorf("column %d: row %d: bad uvarint", col, k)
			}
			b = b[w:]
		}
		if v > math.MaxUint32 {
			return fmt.Errorf("column %d: row %d: %d exceeds 2^32-1", col, k, v)
		}
		switch {
		case p.rows != nil:
			if next < len(p.rows) && int(p.rows[next]) == k {
				dst[next] = uint32(v)
				next++
			}
		case k >= p.lo && k < p.hi:
			dst[k-p.lo] = uint32(v)
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("column %d: %d bytes left over", col, len(b))
	}
	return nil
}

// gatherHead copies the requested fields of the taken head records into
// the batch rows [off, off+len(rows)).
func (q *columnQuery) gatherHead(off int, head []Record, rows []int32) {
	o := &q.out
	w := q.want
	fs := q.floatOuts()
	for k, i := range rows {
		r := &head[i]
		at := off + k
		if q.keepTime {
			o.Time[at] = r.Time
		}
		if w&ColumnLabelSet != 0 {
			o.LabelSet[at] = q.sets.id(r.Labels)
		}
		for st := range Stage(NumStages) {
			if w&ColumnStage(st) != 0 {
				o.Stages[st][at] = r.Stages[st]
			}
		}
		for _, f := range fs {
			(*f.dst)[at] = f.get(r)
		}
		if w&ColumnPromptTokens != 0 {
			o.PromptTokens[at] = r.PromptTokens
		}
		if w&ColumnOutputTokens != 0 {
			o.OutputTokens[at] = r.OutputTokens
		}
	}
}

// readFileInto reads the file at path into *buf, growing it if needed.
func readFileInto(path string, buf *[]byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size > segHeaderLen+math.MaxUint32+segTrailerLen {
		return nil, &CorruptionError{File: path, Offset: size, Reason: "file is larger than any segment"}
	}
	if int64(cap(*buf)) < size {
		*buf = make([]byte, size, bufCap(int(size)))
	}
	b := (*buf)[:size]
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("read segment %s: %w", path, err)
	}
	*buf = b
	return b, nil
}
