package history

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/tsdb/records"
)

// FormatVersion is written into every file's key/value metadata; see
// docs/format/records-parquet.md.
const FormatVersion = 1

// row is one request in the Parquet schema of docs/format/records-parquet.md.
// Field order is column order.
type row struct {
	Time              int64             `parquet:"time,timestamp(millisecond)"`
	Labels            map[string]string `parquet:"labels"`
	TraceID           *string           `parquet:"trace_id,optional"`
	RequestID         string            `parquet:"request_id"`
	Queue             float64           `parquet:"queue_seconds"`
	Tokenize          float64           `parquet:"tokenize_seconds"`
	Prefill           float64           `parquet:"prefill_seconds"`
	Decode            float64           `parquet:"decode_seconds"`
	Detokenize        float64           `parquet:"detokenize_seconds"`
	Network           float64           `parquet:"network_seconds"`
	Other             float64           `parquet:"other_seconds"`
	E2E               float64           `parquet:"e2e_seconds"`
	TTFT              float64           `parquet:"ttft_seconds"`
	PromptTokens      int64             `parquet:"prompt_tokens"`
	OutputTokens      int64             `parquet:"output_tokens"`
	PromptEntropyBits float64           `parquet:"prompt_entropy_bits"`
	ITLCount          int64             `parquet:"itl_count"`
	ITLSum            float64           `parquet:"itl_sum_seconds"`
	ITLMin            float64           `parquet:"itl_min_seconds"`
	ITLMax            float64           `parquet:"itl_max_seconds"`
	ITLP50            float64           `parquet:"itl_p50_seconds"`
	ITLP90            float64           `parquet:"itl_p90_seconds"`
	ITLP99            float64           `parquet:"itl_p99_seconds"`
	ITLValues         []float64         `parquet:"itl_seconds,optional,list"`
}

func toRow(r *records.Record) row {
	out := row{
		Time:      r.Time,
		Labels:    r.Labels.Map(),
		RequestID: r.RequestID,
		Queue:     r.Stages[records.StageQueue], Tokenize: r.Stages[records.StageTokenize],
		Prefill: r.Stages[records.StagePrefill], Decode: r.Stages[records.StageDecode],
		Detokenize: r.Stages[records.StageDetokenize], Network: r.Stages[records.StageNetwork],
		Other: r.Stages[records.StageOther],
		E2E:   r.E2E, TTFT: r.TTFT,
		PromptTokens: int64(r.PromptTokens), OutputTokens: int64(r.OutputTokens),
		PromptEntropyBits: r.PromptEntropy,
		ITLCount:          int64(r.ITL.Count),
		ITLSum:            r.ITL.Sum, ITLMin: r.ITL.Min, ITLMax: r.ITL.Max,
		ITLP50: r.ITL.P50, ITLP90: r.ITL.P90, ITLP99: r.ITL.P99,
		ITLValues: r.ITL.Values,
	}
	if !r.TraceID.IsZero() {
		s := hex.EncodeToString(r.TraceID[:])
		out.TraceID = &s
	}
	return out
}

// record converts a decoded row back and validates it as the store would
// before writing, so a damaged or foreign file cannot feed the attribution
// a record the store could never have held.
func (w *row) record() (records.Record, error) {
	r := records.Record{
		Time:      w.Time,
		Labels:    labels.FromMap(w.Labels),
		RequestID: w.RequestID,
		Stages:    [records.NumStages]float64{w.Queue, w.Tokenize, w.Prefill, w.Decode, w.Detokenize, w.Network, w.Other},
		E2E:       w.E2E, TTFT: w.TTFT,
		PromptEntropy: w.PromptEntropyBits,
		ITL: records.ITL{
			Sum: w.ITLSum, Min: w.ITLMin, Max: w.ITLMax,
			P50: w.ITLP50, P90: w.ITLP90, P99: w.ITLP99,
		},
	}
	for _, f := range []struct {
		name string
		v    int64
		dst  *uint32
	}{{"prompt_tokens", w.PromptTokens, &r.PromptTokens}, {"output_tokens", w.OutputTokens, &r.OutputTokens}, {"itl_count", w.ITLCount, &r.ITL.Count}} {
		if f.v < 0 || f.v > 1<<32-1 {
			return records.Record{}, fmt.Errorf("%s %d outside [0, 2^32-1]", f.name, f.v)
		}
		*f.dst = uint32(f.v)
	}
	if w.TraceID != nil {
		b, err := hex.DecodeString(*w.TraceID)
		if err != nil || len(b) != len(r.TraceID) {
			return records.Record{}, fmt.Errorf("trace_id %q is not 32 hex digits", *w.TraceID)
		}
		copy(r.TraceID[:], b)
		if r.TraceID.IsZero() {
			return records.Record{}, errors.New("trace_id is all zero; absent trace ids are null")
		}
	}
	if w.ITLValues != nil {
		r.ITL.Values = w.ITLValues
		if len(w.ITLValues) == 0 {
			return records.Record{}, errors.New("itl_seconds is an empty list; no gaps are written as null")
		}
	}
	if err := r.Validate(); err != nil {
		return records.Record{}, err
	}
	return r, nil
}

// fileMeta is the key/value metadata of one file.
type fileMeta struct {
	Node, Segment      string
	PartStart, PartDur int64
}

const (
	metaVersion   = "tailroot.format_version"
	metaNode      = "tailroot.node"
	metaSegment   = "tailroot.segment"
	metaPartStart = "tailroot.partition_start"
	metaPartDur   = "tailroot.partition_duration_ms"
)

// encodeFile writes recs, in order, as one Parquet file with a single row
// group: a file is at most one hour of one segment, and one row group keeps
// each column chunk contiguous for engines that read it whole.
func encodeFile(recs []records.Record, m fileMeta) ([]byte, error) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf,
		parquet.Compression(&parquet.Zstd),
		parquet.MaxRowsPerRowGroup(int64(len(recs))+1),
		parquet.KeyValueMetadata(metaVersion, strconv.Itoa(FormatVersion)),
		parquet.KeyValueMetadata(metaNode, m.Node),
		parquet.KeyValueMetadata(metaSegment, m.Segment),
		parquet.KeyValueMetadata(metaPartStart, strconv.FormatInt(m.PartStart, 10)),
		parquet.KeyValueMetadata(metaPartDur, strconv.FormatInt(m.PartDur, 10)),
	)
	const chunk = 4096
	rows := make([]row, 0, min(chunk, len(recs)))
	for i := 0; i < len(recs); i += chunk {
		rows = rows[:0]
		for j := i; j < min(i+chunk, len(recs)); j++ {
			rows = append(rows, toRow(&recs[j]))
		}
		if _, err := w.Write(rows); err != nil {
			return nil, fmt.Errorf("encode parquet: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encode parquet: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeFile reads every row of one file written by encodeFile, validating
// each record and the file's metadata.
//
// parquet-go trusts a file's structure in places and can panic on bytes no
// writer produced; a panic while decoding is turned into an error here, so
// one damaged object in a bucket fails its query instead of the server.
func decodeFile(data []byte) (recs []records.Record, m fileMeta, err error) {
	defer func() {
		if p := recover(); p != nil {
			recs, err = nil, fmt.Errorf("decode parquet: malformed file: %v", p)
		}
	}()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fileMeta{}, fmt.Errorf("decode parquet: %w", err)
	}
	if m, err = readMeta(f); err != nil {
		return nil, fileMeta{}, err
	}
	if err := checkSchema(f.Schema()); err != nil {
		return nil, fileMeta{}, err
	}
	if err := checkPages(data, f.Metadata()); err != nil {
		return nil, fileMeta{}, fmt.Errorf("decode parquet: %w", err)
	}
	r := parquet.NewGenericReader[row](f)
	defer r.Close()
	n := r.NumRows()
	if n < 0 || n > int64(len(data)) {
		return nil, fileMeta{}, fmt.Errorf("decode parquet: %d rows in %d bytes", n, len(data))
	}
	buf := make([]row, min(n, 4096))
	recs = make([]records.Record, 0, n)
	for {
		k, rerr := r.Read(buf)
		for i := range buf[:k] {
			rec, err := buf[i].record()
			if err != nil {
				return nil, fileMeta{}, fmt.Errorf("decode parquet: row %d: %w", len(recs), err)
			}
			recs = append(recs, rec)
			buf[i] = row{}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return nil, fileMeta{}, fmt.Errorf("decode parquet: %w", rerr)
		}
		if k == 0 {
			return nil, fileMeta{}, errors.New("decode parquet: reader made no progress")
		}
	}
	if int64(len(recs)) != n {
		return nil, fileMeta{}, fmt.Errorf("decode parquet: read %d rows, file says %d", len(recs), n)
	}
	return recs, m, nil
}

func readMeta(f *parquet.File) (fileMeta, error) {
	get := func(k string) (string, error) {
		v, ok := f.Lookup(k)
		if !ok {
			return "", fmt.Errorf("decode parquet: metadata %s missing", k)
		}
		return v, nil
	}
	var m fileMeta
	v, err := get(metaVersion)
	if err != nil {
		return m, err
	}
	if v != strconv.Itoa(FormatVersion) {
		return m, fmt.Errorf("decode parquet: %s %q, want %d", metaVersion, v, FormatVersion)
	}
	if m.Node, err = get(metaNode); err != nil {
		return m, err
	}
	if m.Segment, err = get(metaSegment); err != nil {
		return m, err
	}
	for _, x := range []struct {
		k   string
		dst *int64
	}{{metaPartStart, &m.PartStart}, {metaPartDur, &m.PartDur}} {
		s, err := get(x.k)
		if err != nil {
			return m, err
		}
		if *x.dst, err = strconv.ParseInt(s, 10, 64); err != nil {
			return m, fmt.Errorf("decode parquet: %s %q: %w", x.k, s, err)
		}
	}
	if m.PartDur <= 0 || m.PartStart < 0 || m.PartStart%m.PartDur != 0 {
		return m, fmt.Errorf("decode parquet: partition %d/%d ms is not aligned", m.PartStart, m.PartDur)
	}
	return m, nil
}

// wantSchema is the schema encodeFile writes; a file with another one (a
// different version, or not written by tailroot) is refused before any row
// is converted.
var wantSchema = parquet.SchemaOf(row{})

func checkSchema(s *parquet.Schema) error {
	if !parquet.EqualNodes(s, wantSchema) {
		return fmt.Errorf("decode parquet: schema %s is not the records schema", s)
	}
	return nil
}

// maxPageBytes bounds one decompressed page. The writer's pages are far
// smaller (parquet-go cuts pages at 256 KiB of buffered values).
const maxPageBytes = 16 << 20

// checkPages walks every page header of every column chunk before any
// page is decoded. parquet-go sizes its buffers from a page's declared
// uncompressed size and grows an LZ4 buffer without bound on bad input, so
// a damaged file could exhaust memory, which no recover catches. Only the
// codecs tailroot writes (zstd, or none) are accepted, each header must
// lie inside its chunk and declare at most maxPageBytes, and a zstd frame
// may not declare more content than its page.
func checkPages(data []byte, md *format.FileMetaData) error {
	for g, rg := range md.RowGroups {
		// A row has at most MaxITLValues+1 values in any column (the list
		// of gaps, or one null), and no row takes less than a byte.
		if rg.NumRows < 0 || rg.NumRows > int64(len(data)) {
			return fmt.Errorf("row group %d: %d rows in a file of %d bytes", g, rg.NumRows, len(data))
		}
		maxValues := (records.MaxITLValues + 1) * max(rg.NumRows, 1)
		for c, cc := range rg.Columns {
			m := cc.MetaData
			if m.NumValues < 0 || m.NumValues > maxValues {
				return fmt.Errorf("row group %d column %d: %d values for %d rows", g, c, m.NumValues, rg.NumRows)
			}
			if m.Codec != format.Zstd && m.Codec != format.Uncompressed {
				return fmt.Errorf("row group %d column %d: codec %s, want ZSTD or UNCOMPRESSED", g, c, m.Codec)
			}
			start := m.DataPageOffset
			if m.DictionaryPageOffset > 0 && m.DictionaryPageOffset < start {
				start = m.DictionaryPageOffset
			}
			end := start + m.TotalCompressedSize
			if start < 4 || m.TotalCompressedSize < 0 || end > int64(len(data)) || end < start {
				return fmt.Errorf("row group %d column %d: chunk [%d, %d) outside the file of %d bytes", g, c, start, end, len(data))
			}
			for off := start; off < end; {
				br := bytes.NewReader(data[off:end])
				var h format.PageHeader
				if err := thrift.NewDecoder((&thrift.CompactProtocol{}).NewReader(br)).Decode(&h); err != nil {
					return fmt.Errorf("row group %d column %d: page header at %d: %w", g, c, off, err)
				}
				body := off + int64(br.Size()) - int64(br.Len())
				if h.UncompressedPageSize < 0 || h.UncompressedPageSize > maxPageBytes ||
					h.CompressedPageSize < 0 || body+int64(h.CompressedPageSize) > end {
					return fmt.Errorf("row group %d column %d: page at %d declares %d bytes (%d compressed), limit %d within the chunk",
						g, c, off, h.UncompressedPageSize, h.CompressedPageSize, maxPageBytes)
				}
				var nv int64
				switch {
				case h.DataPageHeader.Valid:
					nv = int64(h.DataPageHeader.V.NumValues)
				case h.DataPageHeaderV2.Valid:
					nv = int64(h.DataPageHeaderV2.V.NumValues)
				case h.DictionaryPageHeader.Valid:
					nv = int64(h.DictionaryPageHeader.V.NumValues)
				}
				if nv < 0 || nv > maxValues {
					return fmt.Errorf("row group %d column %d: page at %d holds %d values for %d rows", g, c, off, nv, rg.NumRows)
				}
				page := data[body : body+int64(h.CompressedPageSize)]
				if v2 := h.DataPageHeaderV2; v2.Valid {
					// Levels come first, uncompressed; the frame follows.
					lv := int64(v2.V.RepetitionLevelsByteLength) + int64(v2.V.DefinitionLevelsByteLength)
					if lv < 0 || lv > int64(len(page)) {
						return fmt.Errorf("row group %d column %d: page at %d: levels of %d bytes in a page of %d", g, c, off, lv, len(page))
					}
					page = page[lv:]
				}
				if m.Codec == format.Zstd {
					var zh zstd.Header
					if err := zh.Decode(page); err == nil && zh.HasFCS && zh.FrameContentSize > uint64(h.UncompressedPageSize) {
						return fmt.Errorf("row group %d column %d: zstd frame at %d declares %d bytes, page %d", g, c, body, zh.FrameContentSize, h.UncompressedPageSize)
					}
				}
				off = body + int64(h.CompressedPageSize)
			}
		}
	}
	return nil
}
