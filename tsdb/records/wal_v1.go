package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
)

// The version 1 WAL: one file per partition generation,
// "<start>-<seq>.wal", written by releases before the store moved to one
// prometheus tsdb/wlog log (log.go). Open still reads these files and seals
// each into a segment at once (migrateV1); nothing writes them any more.
// Layout and replay rules: docs/format/records.md, "Version 1 WAL file".

const (
	walMagic        = "TRWL"
	walVersion      = 1
	walHeaderLen    = 28
	entryHeaderLen  = 8
	entryTrailerLen = 4
	entryOverhead   = entryHeaderLen + entryTrailerLen
	// maxEntryPayload bounds one entry, so a corrupt length cannot make
	// replay allocate or skip gigabytes.
	maxEntryPayload = 64 << 20
	// targetEntryPayload is where Append cuts a batch into entries: small
	// enough that replay memory stays flat, large enough that framing is
	// noise.
	targetEntryPayload = 1 << 20
)

// walHeader is the 28-byte file header.
type walHeader struct {
	PartStart, PartDur int64
}

// Marshal appends the header bytes to dst.
func (h walHeader) Marshal(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, walMagic...)
	dst = append(dst, walVersion, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.PartStart))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.PartDur))
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// Unmarshal decodes a header from the front of src.
func (h *walHeader) Unmarshal(src []byte) (tail []byte, err error) {
	if len(src) < walHeaderLen {
		return src, fmt.Errorf("wal header: %w (%d bytes)", errShort, len(src))
	}
	le := binary.LittleEndian
	if got, want := crc32.Checksum(src[:24], castagnoli), le.Uint32(src[24:]); got != want {
		return src, fmt.Errorf("wal header: checksum %#08x, stored %#08x", got, want)
	}
	if string(src[:4]) != walMagic || src[4] != walVersion || src[5] != 0 || src[6] != 0 || src[7] != 0 {
		return src, fmt.Errorf("wal header: bad magic %q or version %d", src[:4], src[4])
	}
	*h = walHeader{PartStart: int64(le.Uint64(src[8:])), PartDur: int64(le.Uint64(src[16:]))}
	if h.PartDur <= 0 || h.PartStart < 0 || h.PartStart%h.PartDur != 0 {
		return src, fmt.Errorf("wal header: bad partition start %d duration %d", h.PartStart, h.PartDur)
	}
	return src[walHeaderLen:], nil
}

// walBatch is the payload of one WAL entry: a count and that many rows.
type walBatch struct {
	Records []Record
}

// Marshal appends the payload bytes to dst.
func (b *walBatch) Marshal(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b.Records)))
	for i := range b.Records {
		dst = b.Records[i].Marshal(dst)
	}
	return dst
}

// Unmarshal decodes a payload. The whole of src must be consumed by the
// rows; an entry's payload is exactly one batch.
func (b *walBatch) Unmarshal(src []byte) (tail []byte, err error) {
	d := decoder{b: src}
	n := d.uvarint("record count")
	if d.err != nil {
		return src, fmt.Errorf("wal batch: %w", d.err)
	}
	// A row is at least 16 floats; a count beyond that is corrupt and must
	// not size an allocation.
	if n > uint64(len(d.b))/minRowBytes {
		return src, fmt.Errorf("wal batch: %d records in %d bytes", n, len(d.b))
	}
	b.Records = make([]Record, n)
	rest := d.b
	for i := range b.Records {
		if rest, err = b.Records[i].Unmarshal(rest); err != nil {
			b.Records = nil
			return src, fmt.Errorf("wal batch: record %d: %w", i, err)
		}
	}
	return rest, nil
}

// appendEntry frames payload as one WAL entry.
func appendEntry(dst, payload []byte) []byte {
	var l [4]byte
	binary.LittleEndian.PutUint32(l[:], uint32(len(payload)))
	dst = append(dst, l[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(l[:], castagnoli))
	dst = append(dst, payload...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(payload, castagnoli))
}

// entryAt checks whether a whole, valid entry starts at b[0]; it returns the
// payload and the entry length when it does.
func entryAt(b []byte) (payload []byte, n int, ok bool) {
	if len(b) < entryOverhead {
		return nil, 0, false
	}
	le := binary.LittleEndian
	l := le.Uint32(b)
	if crc32.Checksum(b[:4], castagnoli) != le.Uint32(b[4:]) || l > maxEntryPayload {
		return nil, 0, false
	}
	end := entryHeaderLen + int(l)
	if end+entryTrailerLen > len(b) {
		return nil, 0, false
	}
	p := b[entryHeaderLen:end]
	if crc32.Checksum(p, castagnoli) != le.Uint32(b[end:]) {
		return nil, 0, false
	}
	return p, end + entryTrailerLen, true
}

// replayWAL decodes a whole WAL file image. It returns the header, the
// records of every intact entry and the length of the intact prefix; a torn
// tail makes good < len(data), corruption before the tail is an error naming
// file and offset. The rules are the replay table of the format spec.
func replayWAL(file string, data []byte) (h walHeader, recs []Record, good int, err error) {
	if _, err := h.Unmarshal(data); err != nil {
		return h, nil, 0, &CorruptionError{File: file, Offset: 0, Reason: err.Error()}
	}
	corrupt := func(off int, format string, args ...any) error {
		return &CorruptionError{File: file, Offset: int64(off), Reason: fmt.Sprintf(format, args...)}
	}
	le := binary.LittleEndian
	off := walHeaderLen
	for off < len(data) {
		b := data[off:]
		if len(b) < entryHeaderLen {
			return h, recs, off, nil // torn header
		}
		l := le.Uint32(b)
		if crc32.Checksum(b[:4], castagnoli) != le.Uint32(b[4:]) {
			if o := nextValidEntry(data, off+1); o >= 0 {
				return h, nil, 0, corrupt(off, "entry header checksum mismatch; a valid entry follows at offset %d", o)
			}
			return h, recs, off, nil // torn write: garbage or zero fill to the end
		}
		if l > maxEntryPayload {
			return h, nil, 0, corrupt(off, "entry length %d exceeds %d", l, maxEntryPayload)
		}
		end := off + entryOverhead + int(l)
		if end > len(data) {
			return h, recs, off, nil // torn: the entry was never written whole
		}
		payload, _, ok := entryAt(b)
		if !ok {
			// The header is intact, so the length is trusted: look for
			// valid entries after this one, not inside its payload.
			if o := nextValidEntry(data, end); o >= 0 {
				return h, nil, 0, corrupt(off, "entry payload checksum mismatch (%d-byte payload); a valid entry follows at offset %d", l, o)
			}
			return h, recs, off, nil // torn last entry, possibly followed by fill
		}
		var batch walBatch
		tail, err := batch.Unmarshal(payload)
		if err == nil && len(tail) != 0 {
			err = fmt.Errorf("%d bytes after the last record", len(tail))
		}
		if err != nil {
			return h, nil, 0, corrupt(off, "entry does not decode: %v", err)
		}
		for i := range batch.Records {
			if t := batch.Records[i].Time; t < h.PartStart || t-h.PartStart >= h.PartDur {
				return h, nil, 0, corrupt(off, "record time %d outside partition [%d, %d)", t, h.PartStart, h.PartStart+h.PartDur)
			}
		}
		recs = append(recs, batch.Records...)
		off = end
	}
	return h, recs, off, nil
}

// nextValidEntry returns the first offset ≥ from where a valid entry starts,
// or -1. Only called on the rare bad-header path; linear in the file size.
func nextValidEntry(data []byte, from int) int {
	for o := from; o+entryOverhead <= len(data); o++ {
		if _, _, ok := entryAt(data[o:]); ok {
			return o
		}
	}
	return -1
}

// v1WAL is a version 1 WAL file found by load.
type v1WAL struct {
	start int64
	seq   int
	path  string
}

// migrateV1 reads the version 1 WAL files and seals each into a segment,
// then removes it: the records move out of the old format without passing
// through the new log, and a crash halfway is harmless (a WAL whose
// segment exists is removed, as before). A torn last entry is dropped as
// the old replay did; corruption before it is an error.
func (s *Store) migrateV1(wals []v1WAL) error {
	slices.SortFunc(wals, func(a, b v1WAL) int {
		if c := cmpInt64(a.start, b.start); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	for _, w := range wals {
		p := s.parts[w.start]
		sealed := slices.ContainsFunc(p.segs, func(m segmentMeta) bool { return m.seq == w.seq })
		if !sealed {
			data, err := os.ReadFile(w.path)
			if err != nil {
				return err
			}
			h, recs, good, err := replayWAL(w.path, data)
			if err != nil {
				return err
			}
			if h.PartDur != s.dur || h.PartStart != w.start {
				return fmt.Errorf("wal %s: partition %d/%d ms, store uses duration %d ms (PartitionDuration changed?)", w.path, h.PartStart, h.PartDur, s.dur)
			}
			if good < len(data) {
				s.log.Warn("records: dropping torn tail of a version 1 WAL", "file", w.path, "offset", good, "bytes", len(data)-good)
			}
			p.head = &headGen{seq: w.seq, recs: recs}
			for i := range recs {
				s.observe(recs[i].Time)
			}
			if err := s.seal(p); err != nil {
				return fmt.Errorf("migrate version 1 wal %s: %w", w.path, err)
			}
			s.log.Info("records: sealed a version 1 WAL into a segment", "file", w.path, "records", len(recs))
		}
		if err := os.Remove(w.path); err != nil {
			return fmt.Errorf("migrate version 1 wal: %w", err)
		}
	}
	return nil
}
