package records

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// SegmentRef describes one sealed segment file, for readers outside the
// store that copy segments elsewhere (the Parquet history export).
type SegmentRef struct {
	// Path is the segment file. Segments are immutable; the file exists
	// until retention removes its partition.
	Path string
	// Name is the file name, "<start>-<seq>.seg".
	Name string
	// PartitionStart and PartitionDuration are Unix ms and ms.
	PartitionStart, PartitionDuration int64
	// Seq is the partition generation; segments of one partition are read
	// in Seq order.
	Seq int
	// MinTime and MaxTime are the first and last record times, Unix ms.
	MinTime, MaxTime int64
	Records          int
}

// Segments lists every sealed segment, by partition start then Seq.
func (s *Store) Segments() ([]SegmentRef, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	var out []SegmentRef
	for _, p := range s.sortedParts() {
		for _, m := range p.segs {
			out = append(out, s.segmentRef(p.start, m))
		}
	}
	return out, nil
}

func (s *Store) segmentRef(start int64, m segmentMeta) SegmentRef {
	return SegmentRef{
		Path: m.path, Name: filepath.Base(m.path),
		PartitionStart: start, PartitionDuration: s.dur, Seq: m.seq,
		MinTime: m.minT, MaxTime: m.maxT, Records: m.count,
	}
}

// HeldPartitions returns the starts (Unix ms) of the partitions that
// overlap [mint, maxt] and that the store holds, sealed or open, in
// ascending order. A partition not listed was never written or was removed
// by retention; the store has none of its records.
func (s *Store) HeldPartitions(mint, maxt int64) ([]int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	var out []int64
	for _, p := range s.sortedParts() {
		if p.start+s.dur <= mint || p.start > maxt {
			continue
		}
		if len(p.segs) > 0 || p.head != nil {
			out = append(out, p.start)
		}
	}
	return out, nil
}

// PartitionDuration is the store's partition span in ms.
func (s *Store) PartitionDuration() int64 { return s.dur }

// ReadSegmentFile reads and decodes a whole segment file, verifying its
// checksum. It also returns the file's crc32c (its last four bytes), which
// identifies the content: two segments with the same name and checksum hold
// the same records.
func ReadSegmentFile(path string) (Segment, uint32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Segment{}, 0, fmt.Errorf("read segment: %w", err)
	}
	var seg Segment
	tail, err := seg.Unmarshal(data)
	if err != nil {
		return Segment{}, 0, &CorruptionError{File: path, Reason: err.Error()}
	}
	if len(tail) != 0 {
		return Segment{}, 0, &CorruptionError{File: path, Offset: int64(len(data) - len(tail)), Reason: "trailing bytes after segment"}
	}
	return seg, binary.LittleEndian.Uint32(data[len(data)-segTrailerLen:]), nil
}

// SegmentChecksum returns a segment file's crc32c, its last four bytes,
// without reading the rest: enough to name the content (see
// ReadSegmentFile), not to verify it.
func SegmentChecksum(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("segment checksum: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("segment checksum: %w", err)
	}
	if fi.Size() < segHeaderLen+segTrailerLen {
		return 0, &CorruptionError{File: path, Offset: fi.Size(), Reason: "file shorter than a segment header and trailer"}
	}
	var b [segTrailerLen]byte
	if _, err := f.ReadAt(b[:], fi.Size()-segTrailerLen); err != nil {
		return 0, fmt.Errorf("segment checksum: %w", err)
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}
