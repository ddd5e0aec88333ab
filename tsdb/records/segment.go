package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/prometheus/model/labels"
)

// Segment file layout: docs/format/records.md, "Segment file".

const (
	segMagic      = "TRSG"
	segVersion    = 1
	segCodecZstd  = 1
	segHeaderLen  = 52
	segTrailerLen = 4
	// maxRawBody bounds the decompressed body. Options.MaxSegmentBytes is
	// capped so that a sealed WAL generation (< 2 × MaxSegmentBytes, as a
	// batch larger than MaxSegmentBytes is refused) stays well below it.
	maxRawBody = 1 << 30
	// minRowBytes is the least a row takes in the raw body (16 float
	// columns of 8 bytes); it bounds the record count a header may claim.
	minRowBytes = 16 * 8
	numColumns  = 25
)

// Column numbers of the raw body (docs/format/records.md).
const (
	colTime = iota
	colLabelSet
	colTraceID
	colRequestID
	colStage0      // … colStage0+6
	colE2E         = colStage0 + NumStages
	colTTFT        = colE2E + 1
	colPrompt      = colTTFT + 1
	colOutput      = colPrompt + 1
	colEntropy     = colOutput + 1
	colITLCount    = colEntropy + 1
	colITLSummary0 = colITLCount + 1 // sum, min, max, p50, p90, p99
	colITLKept     = colITLSummary0 + 6
	colITLValues   = colITLKept + 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic(fmt.Sprintf("BUG: zstd encoder: %v", err))
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder { return newDecoder(maxRawBody) })
	// zstdColumnDecoder skips the frame's xxhash64 of the decompressed
	// body, a fifth of the decompression time on the column read path. The
	// file's crc32c, checked before decompressing, already covers every
	// byte the decoder reads.
	zstdColumnDecoder = sync.OnceValue(func() *zstd.Decoder { return newDecoder(maxRawBody, zstd.IgnoreChecksum(true)) })
)

func newDecoder(maxRaw uint64, extra ...zstd.DOption) *zstd.Decoder {
	opts := []zstd.DOption{
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(maxRaw), zstd.WithDecodeAllCapLimit(true),
	}
	d, err := zstd.NewReader(nil, append(opts, extra...)...)
	if err != nil {
		panic(fmt.Sprintf("BUG: zstd decoder: %v", err))
	}
	return d
}

// Segment is a decoded segment file: the sealed rows of one partition
// generation.
type Segment struct {
	PartitionStart    int64 // Unix ms, a multiple of PartitionDuration
	PartitionDuration int64 // ms, > 0
	Records           []Record
}

// segmentHeader is the uncompressed 52-byte header.
type segmentHeader struct {
	PartStart, PartDur int64
	MinT, MaxT         int64
	Count              uint32
	RawLen, CompLen    uint32
}

// Marshal appends the segment file bytes to dst. Records are written sorted
// by time (stable), so out-of-order appends come back in order. It panics if
// a record lies outside the partition or there are no records: the store
// never asks for that.
func (s *Segment) Marshal(dst []byte) []byte {
	n := len(s.Records)
	if n == 0 || s.PartitionDuration <= 0 {
		panic(fmt.Sprintf("BUG: marshal segment with %d records, partition duration %d", n, s.PartitionDuration))
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmpInt64(s.Records[a].Time, s.Records[b].Time)
	})
	end := s.PartitionStart + s.PartitionDuration
	for _, i := range order {
		if t := s.Records[i].Time; t < s.PartitionStart || t >= end {
			panic(fmt.Sprintf("BUG: record time %d outside partition [%d, %d)", t, s.PartitionStart, end))
		}
	}
	raw := encodeBody(s.Records, order)
	if len(raw) > maxRawBody {
		panic(fmt.Sprintf("BUG: segment body of %d bytes exceeds %d", len(raw), maxRawBody))
	}
	start := len(dst)
	dst = append(dst, make([]byte, segHeaderLen)...)
	dst = zstdEncoder().EncodeAll(raw, dst)
	h := segmentHeader{
		PartStart: s.PartitionStart, PartDur: s.PartitionDuration,
		MinT: s.Records[order[0]].Time, MaxT: s.Records[order[n-1]].Time,
		Count: uint32(n), RawLen: uint32(len(raw)), CompLen: uint32(len(dst) - start - segHeaderLen),
	}
	h.put(dst[start : start+segHeaderLen])
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// Unmarshal decodes one segment file from the front of src, verifying its
// checksum, and returns the bytes after it.
func (s *Segment) Unmarshal(src []byte) (tail []byte, err error) {
	c, h, tail, err := decodeSegment(src, zstdDecoder(), maxRawBody)
	if err != nil {
		return src, err
	}
	*s = Segment{PartitionStart: h.PartStart, PartitionDuration: h.PartDur, Records: make([]Record, c.n)}
	for i := range s.Records {
		s.Records[i] = c.row(i)
	}
	return tail, nil
}

func (h *segmentHeader) put(b []byte) {
	copy(b, segMagic)
	b[4], b[5], b[6], b[7] = segVersion, segCodecZstd, 0, 0
	le := binary.LittleEndian
	le.PutUint64(b[8:], uint64(h.PartStart))
	le.PutUint64(b[16:], uint64(h.PartDur))
	le.PutUint64(b[24:], uint64(h.MinT))
	le.PutUint64(b[32:], uint64(h.MaxT))
	le.PutUint32(b[40:], h.Count)
	le.PutUint32(b[44:], h.RawLen)
	le.PutUint32(b[48:], h.CompLen)
}

// readSegmentHeader parses and sanity-checks the header without touching the
// body, so Open and Select can skip a segment by time range.
func readSegmentHeader(b []byte) (segmentHeader, error) {
	var h segmentHeader
	if len(b) < segHeaderLen {
		return h, fmt.Errorf("segment header: %w (%d bytes)", errShort, len(b))
	}
	if string(b[:4]) != segMagic {
		return h, fmt.Errorf("segment header: bad magic %q", b[:4])
	}
	if b[4] != segVersion || b[5] != segCodecZstd || b[6] != 0 || b[7] != 0 {
		return h, fmt.Errorf("segment header: unsupported version %d codec %d reserved %#x", b[4], b[5], b[6:8])
	}
	le := binary.LittleEndian
	h = segmentHeader{
		PartStart: int64(le.Uint64(b[8:])), PartDur: int64(le.Uint64(b[16:])),
		MinT: int64(le.Uint64(b[24:])), MaxT: int64(le.Uint64(b[32:])),
		Count: le.Uint32(b[40:]), RawLen: le.Uint32(b[44:]), CompLen: le.Uint32(b[48:]),
	}
	switch {
	case h.PartDur <= 0 || h.PartStart < 0 || h.PartStart%h.PartDur != 0 || h.PartStart > 1<<62-h.PartDur:
		return h, fmt.Errorf("segment header: bad partition start %d duration %d", h.PartStart, h.PartDur)
	case h.MinT < h.PartStart || h.MaxT < h.MinT || h.MaxT >= h.PartStart+h.PartDur:
		return h, fmt.Errorf("segment header: times [%d, %d] outside partition at %d", h.MinT, h.MaxT, h.PartStart)
	case h.Count == 0 || h.RawLen > maxRawBody || uint64(h.Count)*minRowBytes > uint64(h.RawLen):
		return h, fmt.Errorf("segment header: %d records in a %d-byte body", h.Count, h.RawLen)
	}
	return h, nil
}

// decodeSegment verifies and decompresses one segment file from the front of
// src and parses its columns. maxRaw bounds the decompressed size (fuzz
// targets pass a small one).
func decodeSegment(src []byte, dec *zstd.Decoder, maxRaw uint32) (*segCols, segmentHeader, []byte, error) {
	raw, h, tail, err := decompressSegment(src, dec, maxRaw, nil)
	if err != nil {
		return nil, h, src, err
	}
	c, err := decodeBody(raw, &h)
	if err != nil {
		return nil, h, src, fmt.Errorf("segment: %w", err)
	}
	return c, h, tail, nil
}

// decompressSegment verifies the header and checksum of one segment file at
// the front of src and decompresses its body into dst when dst has room for
// it (a new buffer otherwise). It returns the raw body and the bytes after
// the file.
func decompressSegment(src []byte, dec *zstd.Decoder, maxRaw uint32, dst []byte) ([]byte, segmentHeader, []byte, error) {
	h, err := readSegmentHeader(src)
	if err != nil {
		return nil, h, src, err
	}
	total := segHeaderLen + int(h.CompLen) + segTrailerLen
	if len(src) < total {
		return nil, h, src, fmt.Errorf("segment: %w (%d bytes, header says %d)", errShort, len(src), total)
	}
	body := src[segHeaderLen : segHeaderLen+int(h.CompLen)]
	if got, want := crc32.Checksum(src[:total-segTrailerLen], castagnoli), binary.LittleEndian.Uint32(src[total-segTrailerLen:]); got != want {
		return nil, h, src, fmt.Errorf("segment: checksum %#08x, stored %#08x", got, want)
	}
	if h.RawLen > maxRaw {
		return nil, h, src, fmt.Errorf("segment: body of %d bytes exceeds %d", h.RawLen, maxRaw)
	}
	if cap(dst) < int(h.RawLen) {
		dst = make([]byte, 0, h.RawLen)
	}
	raw, err := dec.DecodeAll(body, dst[:0:h.RawLen])
	if err != nil {
		return nil, h, src, fmt.Errorf("segment: decompress: %w", err)
	}
	if len(raw) != int(h.RawLen) {
		return nil, h, src, fmt.Errorf("segment: body is %d bytes, header says %d", len(raw), h.RawLen)
	}
	return raw, h, src[total:], nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// labelSetTable interns label sets and their strings while a body is built.
type labelSetTable struct {
	ids  map[string]uint32 // key: labels.Labels.Bytes
	sets []labels.Labels
	buf  []byte
}

func (t *labelSetTable) id(ls labels.Labels) uint32 {
	t.buf = ls.Bytes(t.buf[:0])
	if id, ok := t.ids[string(t.buf)]; ok {
		return id
	}
	id := uint32(len(t.sets))
	t.ids[string(t.buf)] = id
	t.sets = append(t.sets, ls)
	return id
}

// encodeBody builds the raw (uncompressed) body for recs taken in order.
func encodeBody(recs []Record, order []int) []byte {
	t := labelSetTable{ids: map[string]uint32{}}
	setIDs := make([]uint32, len(order))
	for k, i := range order {
		setIDs[k] = t.id(recs[i].Labels)
	}
	symIdx := map[string]uint64{}
	for _, ls := range t.sets {
		ls.Range(func(l labels.Label) { symIdx[l.Name], symIdx[l.Value] = 0, 0 })
	}
	syms := make([]string, 0, len(symIdx))
	for s := range symIdx {
		syms = append(syms, s)
	}
	slices.Sort(syms)
	for i, s := range syms {
		symIdx[s] = uint64(i)
	}

	var b []byte
	b = binary.AppendUvarint(b, uint64(len(syms)))
	for _, s := range syms {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(t.sets)))
	for _, ls := range t.sets {
		b = binary.AppendUvarint(b, uint64(ls.Len()))
		ls.Range(func(l labels.Label) {
			b = binary.AppendUvarint(b, symIdx[l.Name])
			b = binary.AppendUvarint(b, symIdx[l.Value])
		})
	}

	var col []byte
	emit := func() {
		b = binary.AppendUvarint(b, uint64(len(col)))
		b = append(b, col...)
		col = col[:0]
	}
	row := func(k int) *Record { return &recs[order[k]] }
	n := len(order)
	floats := make([]float64, n)
	floatCol := func(get func(r *Record) float64) {
		for k := range n {
			floats[k] = get(row(k))
		}
		col = appendShuffled(col, floats)
		emit()
	}
	uintCol := func(get func(r *Record) uint64) {
		for k := range n {
			col = binary.AppendUvarint(col, get(row(k)))
		}
		emit()
	}

	var prevT, prevD int64
	for k := range n {
		tk := row(k).Time
		switch k {
		case 0:
			col = binary.AppendVarint(col, tk)
		case 1:
			prevD = tk - prevT
			col = binary.AppendVarint(col, prevD)
		default:
			d := tk - prevT
			col = binary.AppendVarint(col, d-prevD)
			prevD = d
		}
		prevT = tk
	}
	emit()
	for _, id := range setIDs {
		col = binary.AppendUvarint(col, uint64(id))
	}
	emit()
	col = append(col, make([]byte, (n+7)/8)...)
	for k := range n {
		if tr := row(k).TraceID; !tr.IsZero() {
			col[k/8] |= 1 << (k % 8)
			col = append(col, tr[:]...)
		}
	}
	emit()
	for k := range n {
		col = appendString(col, row(k).RequestID)
	}
	emit()
	for st := range NumStages {
		floatCol(func(r *Record) float64 { return r.Stages[st] })
	}
	floatCol(func(r *Record) float64 { return r.E2E })
	floatCol(func(r *Record) float64 { return r.TTFT })
	uintCol(func(r *Record) uint64 { return uint64(r.PromptTokens) })
	uintCol(func(r *Record) uint64 { return uint64(r.OutputTokens) })
	floatCol(func(r *Record) float64 { return r.PromptEntropy })
	uintCol(func(r *Record) uint64 { return uint64(r.ITL.Count) })
	for _, get := range itlSummaryGetters {
		floatCol(get)
	}
	uintCol(func(r *Record) uint64 { return uint64(len(r.ITL.Values)) })
	floats = floats[:0]
	for k := range n {
		floats = append(floats, row(k).ITL.Values...)
	}
	col = appendShuffled(col, floats)
	emit()
	return b
}

var itlSummaryGetters = [6]func(r *Record) float64{
	func(r *Record) float64 { return r.ITL.Sum },
	func(r *Record) float64 { return r.ITL.Min },
	func(r *Record) float64 { return r.ITL.Max },
	func(r *Record) float64 { return r.ITL.P50 },
	func(r *Record) float64 { return r.ITL.P90 },
	func(r *Record) float64 { return r.ITL.P99 },
}
