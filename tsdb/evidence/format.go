package evidence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Record layout constants (doc.go has the diagram). fileMagic and
// frameHeader belong to the version 1 partition files, which Open
// converts (migrate.go).
const (
	fileMagic     = "TREVID01"
	recordVersion = 1
	frameHeader   = 8        // length u32 + crc32c u32
	maxRecordBody = 64 << 20 // larger lengths are corruption, not records
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is what the index keeps of a record.
type header struct {
	from, to int64 // span, Unix ns
	latency  float64
	pid      uint32
	kind     string
	node     string
	comm     string
	probe    string
}

func headerOf(it *Item) header {
	from, to := it.Span()
	return header{
		from: from.UnixNano(), to: to.UnixNano(), latency: it.Latency, pid: it.PID,
		kind: it.Kind, node: it.Node, comm: it.Comm, probe: it.Probe,
	}
}

// appendRecord appends one version 1 framed record (header and canonical
// JSON) to dst.
func appendRecord(dst []byte, h header, js []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, frameHeader)...)
	dst = appendBody(dst, h, js)
	body := dst[start+frameHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// appendBody appends a record body: the header queries filter on, then
// the item's canonical JSON. It is the payload of one wlog record.
func appendBody(dst []byte, h header, js []byte) []byte {
	dst = append(dst, recordVersion)
	dst = binary.AppendVarint(dst, h.from)
	dst = binary.AppendVarint(dst, h.to)
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(h.latency))
	dst = binary.AppendUvarint(dst, uint64(h.pid))
	for _, s := range []string{h.kind, h.node, h.comm, h.probe} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return append(dst, js...)
}

// Errors of decodeRecord.
var (
	errShort    = errors.New("record cut short")
	errChecksum = errors.New("record checksum mismatch")
)

// decodeRecord decodes the record at the start of b: its header, the
// offset of its JSON within b and the record's total length.
func decodeRecord(b []byte) (h header, jsonOff, n int, err error) {
	if len(b) < frameHeader {
		return h, 0, 0, errShort
	}
	size := binary.LittleEndian.Uint32(b)
	if size > maxRecordBody {
		return h, 0, 0, fmt.Errorf("record length %d: over %d", size, maxRecordBody)
	}
	n = frameHeader + int(size)
	if len(b) < n {
		return h, 0, 0, errShort
	}
	body := b[frameHeader:n]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return h, 0, 0, errChecksum
	}
	h, off, err := decodeHeader(body)
	if err != nil {
		return h, 0, 0, err
	}
	return h, frameHeader + off, n, nil
}

// decodeHeader decodes a record body's header and returns where its JSON
// starts.
func decodeHeader(body []byte) (h header, off int, err error) {
	if len(body) == 0 || body[0] != recordVersion {
		return h, 0, fmt.Errorf("record version: want %d", recordVersion)
	}
	p := body[1:]
	var k int
	if h.from, k = binary.Varint(p); k <= 0 {
		return h, 0, errors.New("record from: bad varint")
	}
	p = p[k:]
	if h.to, k = binary.Varint(p); k <= 0 {
		return h, 0, errors.New("record to: bad varint")
	}
	p = p[k:]
	if len(p) < 8 {
		return h, 0, errors.New("record latency: cut short")
	}
	h.latency = math.Float64frombits(binary.LittleEndian.Uint64(p))
	p = p[8:]
	pid, k := binary.Uvarint(p)
	if k <= 0 || pid > math.MaxUint32 {
		return h, 0, errors.New("record pid: bad uvarint")
	}
	h.pid = uint32(pid)
	p = p[k:]
	for _, dst := range []*string{&h.kind, &h.node, &h.comm, &h.probe} {
		l, k := binary.Uvarint(p)
		if k <= 0 || l > uint64(len(p)-k) {
			return h, 0, errors.New("record string: bad length")
		}
		*dst = string(p[k : k+int(l)])
		p = p[k+int(l):]
	}
	return h, len(body) - len(p), nil
}
