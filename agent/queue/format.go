package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	segmentMagic   = "TRQS"
	cursorMagic    = "TRQC"
	formatVersion  = 1
	segmentHdrSize = 8
	recordHdrSize  = 8
	cursorSize     = 28
)

// Errors of record and cursor decoding.
var (
	// ErrShortRecord is returned when fewer bytes remain than a record
	// header or its payload needs (a torn write at the end of a segment).
	ErrShortRecord = errors.New("short record")
	// ErrBadCRC is returned when a record's checksum does not match.
	ErrBadCRC = errors.New("record checksum mismatch")
)

func segmentHeader() []byte {
	h := make([]byte, segmentHdrSize)
	copy(h, segmentMagic)
	h[4] = formatVersion
	return h
}

func checkSegmentHeader(b []byte) error {
	if len(b) < segmentHdrSize {
		return fmt.Errorf("segment header: %d bytes, want %d", len(b), segmentHdrSize)
	}
	if string(b[:4]) != segmentMagic {
		return fmt.Errorf("segment header: magic %q, want %q", b[:4], segmentMagic)
	}
	if b[4] != formatVersion {
		return fmt.Errorf("segment header: version %d, want %d", b[4], formatVersion)
	}
	return nil
}

// recordCRC is the checksum of a record: CRC-32C over the length bytes and
// the payload, so a corrupted length is caught too.
func recordCRC(lenBytes, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, lenBytes)
	return crc32.Update(c, castagnoli, payload)
}

// AppendRecord appends the framed record of payload to dst.
func AppendRecord(dst, payload []byte) []byte {
	var h [recordHdrSize]byte
	binary.LittleEndian.PutUint32(h[:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:], recordCRC(h[:4], payload))
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// DecodeRecord decodes the record at the start of b, checking its length
// against maxLen and its CRC. It returns the payload (aliasing b) and the
// bytes after the record.
func DecodeRecord(b []byte, maxLen uint32) (payload, tail []byte, err error) {
	if len(b) < recordHdrSize {
		return nil, b, fmt.Errorf("record header: %d bytes: %w", len(b), ErrShortRecord)
	}
	n := binary.LittleEndian.Uint32(b[:4])
	if n > maxLen {
		return nil, b, fmt.Errorf("record length %d over the limit of %d: %w", n, maxLen, ErrBadCRC)
	}
	if uint64(len(b)-recordHdrSize) < uint64(n) {
		return nil, b, fmt.Errorf("record of %d bytes, %d present: %w", n, len(b)-recordHdrSize, ErrShortRecord)
	}
	payload = b[recordHdrSize : recordHdrSize+int(n)]
	if got, want := recordCRC(b[:4], payload), binary.LittleEndian.Uint32(b[4:8]); got != want {
		return nil, b, fmt.Errorf("record crc %#08x, stored %#08x: %w", got, want, ErrBadCRC)
	}
	return payload, b[recordHdrSize+int(n):], nil
}

// Position is where a record starts or ends: a segment number and a byte
// offset in it.
type Position struct {
	Segment uint64
	Offset  int64
}

func (p Position) less(o Position) bool {
	return p.Segment < o.Segment || (p.Segment == o.Segment && p.Offset < o.Offset)
}

func (p Position) String() string { return fmt.Sprintf("%d:%d", p.Segment, p.Offset) }

// MarshalCursor encodes the cursor file.
func MarshalCursor(p Position) []byte {
	b := make([]byte, cursorSize)
	copy(b, cursorMagic)
	b[4] = formatVersion
	binary.LittleEndian.PutUint64(b[8:], p.Segment)
	binary.LittleEndian.PutUint64(b[16:], uint64(p.Offset))
	binary.LittleEndian.PutUint32(b[24:], crc32.Checksum(b[:24], castagnoli))
	return b
}

// UnmarshalCursor decodes the cursor file.
func UnmarshalCursor(b []byte) (Position, error) {
	if len(b) != cursorSize {
		return Position{}, fmt.Errorf("cursor: %d bytes, want %d", len(b), cursorSize)
	}
	if string(b[:4]) != cursorMagic {
		return Position{}, fmt.Errorf("cursor: magic %q, want %q", b[:4], cursorMagic)
	}
	if b[4] != formatVersion {
		return Position{}, fmt.Errorf("cursor: version %d, want %d", b[4], formatVersion)
	}
	if got, want := crc32.Checksum(b[:24], castagnoli), binary.LittleEndian.Uint32(b[24:]); got != want {
		return Position{}, fmt.Errorf("cursor: crc %#08x, stored %#08x", got, want)
	}
	p := Position{Segment: binary.LittleEndian.Uint64(b[8:]), Offset: int64(binary.LittleEndian.Uint64(b[16:]))}
	if p.Offset < segmentHdrSize {
		return Position{}, fmt.Errorf("cursor: offset %d inside the segment header", p.Offset)
	}
	return p, nil
}
