package evidence

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"github.com/prometheus/prometheus/tsdb/wlog"
)

// Each partition is one prometheus tsdb/wlog directory. wlog frames a
// record into fragments that never cross a 32 KiB page, each with a
// 7-byte header (type u8, length u16 BE, crc32c u32 BE of the fragment),
// pads the rest of a page with zeros when a header no longer fits, and
// never lets a record cross a segment. Its reader reads sequentially and
// does not say where a record starts, so Select reads an item back with
// readRecordAt below, from the offset that indexing (the end of the
// previous record) or Append (walking what it wrote) found.
const (
	// wlogPageSize, wlogHeaderLen and the fragment types mirror tsdb/wlog's
	// unexported constants (its docs/format/wal.md describes them).
	wlogPageSize  = 32 << 10
	wlogHeaderLen = 7
	wlogTypeMask  = 0x07 // the low bits; higher bits flag compression
	fragPageTerm  = 0    // the rest of the page is zeros
	fragFull      = 1
	fragFirst     = 2
	fragMiddle    = 3
	fragLast      = 4
)

// segmentBytes is where a partition's log cuts segments (a multiple of
// the page size). An hour of evidence is a few MiB; a partition is
// deleted whole, so segments only bound the size of one file. Tests make
// it small to cross segments.
var segmentBytes = 16 << 20

var errNotRecord = errors.New("no wlog record at offset")

// readRecordAt reads the wlog record that starts at off of r, or after
// the page padding at off, and returns its payload, appended to buf, and
// where the record ends. size is the segment's length. hint is the
// expected payload length: a whole record in one fragment is then read in
// one call.
func readRecordAt(r io.ReaderAt, off, size int64, hint int, buf []byte) (payload []byte, end int64, err error) {
	payload = buf[:0]
	var hdr []byte // only the general path needs it
	first := true
	for {
		if left := wlogPageSize - off%wlogPageSize; left < wlogHeaderLen {
			off += left
		}
		if off+wlogHeaderLen > size {
			return nil, off, fmt.Errorf("%w %d: past the end", errNotRecord, off)
		}
		// The common case: one full fragment of hint bytes.
		if first && hint > 0 && off%wlogPageSize+wlogHeaderLen+int64(hint) <= wlogPageSize && off+wlogHeaderLen+int64(hint) <= size {
			b := slices.Grow(payload, wlogHeaderLen+hint)[:wlogHeaderLen+hint]
			if _, err := r.ReadAt(b, off); err != nil {
				return nil, off, err
			}
			if b[0]&wlogTypeMask == fragFull && int(binary.BigEndian.Uint16(b[1:])) == hint &&
				crc32.Checksum(b[wlogHeaderLen:], castagnoli) == binary.BigEndian.Uint32(b[3:]) {
				return append(b[:0], b[wlogHeaderLen:]...), off + wlogHeaderLen + int64(hint), nil
			}
		}
		if hdr == nil {
			hdr = make([]byte, wlogHeaderLen)
		}
		if _, err := r.ReadAt(hdr, off); err != nil {
			return nil, off, err
		}
		typ := hdr[0] & wlogTypeMask
		if hdr[0] != typ {
			return nil, off, fmt.Errorf("%w %d: compressed fragment (type %#x)", errNotRecord, off, hdr[0])
		}
		if typ == fragPageTerm {
			if !first {
				return nil, off, fmt.Errorf("%w %d: record cut by page padding", errNotRecord, off)
			}
			off += wlogPageSize - off%wlogPageSize
			continue
		}
		if typ > fragLast || (first != (typ == fragFull || typ == fragFirst)) {
			return nil, off, fmt.Errorf("%w %d: fragment type %d out of order", errNotRecord, off, typ)
		}
		n := int64(binary.BigEndian.Uint16(hdr[1:]))
		if off%wlogPageSize+wlogHeaderLen+n > wlogPageSize || off+wlogHeaderLen+n > size {
			return nil, off, fmt.Errorf("%w %d: fragment of %d bytes overruns its page", errNotRecord, off, n)
		}
		at := len(payload)
		payload = slices.Grow(payload, int(n))[:at+int(n)]
		if _, err := r.ReadAt(payload[at:], off+wlogHeaderLen); err != nil {
			return nil, off, err
		}
		if crc32.Checksum(payload[at:], castagnoli) != binary.BigEndian.Uint32(hdr[3:]) {
			return nil, off, fmt.Errorf("%w %d: fragment checksum mismatch", errNotRecord, off)
		}
		off += wlogHeaderLen + n
		if typ == fragFull || typ == fragLast {
			return payload, off, nil
		}
		first = false
	}
}

// scanSegment reads one segment with wlog's reader and calls fn with each
// record and the offset the record was read from (the end of the one
// before). good is the end of the last whole record; err says why the
// segment does not end there (a torn or corrupt record), nil when only
// page padding follows. data is the end of the last non-zero byte (at
// least good): what lies between good and data is what a cut loses.
func scanSegment(f *os.File, fn func(payload []byte, off int64) error) (good, data int64, err error) {
	good, err = scanRecords(f, fn)
	if _, serr := f.Seek(good, io.SeekStart); serr != nil {
		return good, good, serr
	}
	rest, rerr := io.ReadAll(f)
	if rerr != nil {
		return good, good, rerr
	}
	nz := bytes.LastIndexFunc(rest, func(c rune) bool { return c != 0 })
	data = good + int64(nz+1)
	if err == nil && nz >= 0 {
		// wlog's reader ends quietly on a header torn after its first byte
		// or a payload torn before its first: only zeros may follow.
		err = fmt.Errorf("%d bytes after the last whole record are not page padding", data-good)
	}
	return good, data, err
}

func scanRecords(f *os.File, fn func(payload []byte, off int64) error) (good int64, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	r := wlog.NewReader(bufio.NewReaderSize(f, 1<<16))
	for r.Next() {
		if err := fn(r.Record(), good); err != nil {
			return good, err
		}
		good = r.Offset()
	}
	return good, r.Err()
}
