package queue

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tailroot/tailroot/internal/fsutil"
)

// FsyncPolicy says when appended records are forced to disk.
type FsyncPolicy int

// The fsync policies.
const (
	// FsyncAlways syncs the segment after every Append and the cursor
	// after every Ack: a record is durable when Append returns.
	FsyncAlways FsyncPolicy = iota
	// FsyncInterval syncs dirty segments every Options.FsyncInterval; a
	// crash loses at most that much of the newest data.
	FsyncInterval
	// FsyncNever leaves writing back to the kernel (a process crash loses
	// nothing, a power loss may lose recent records).
	FsyncNever
)

// ParseFsyncPolicy parses "always", "interval" or "never".
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	switch s {
	case "always", "":
		return FsyncAlways, nil
	case "interval":
		return FsyncInterval, nil
	case "never":
		return FsyncNever, nil
	}
	return 0, fmt.Errorf("fsync policy %q: want always, interval or never", s)
}

func (p FsyncPolicy) String() string {
	switch p {
	case FsyncAlways:
		return "always"
	case FsyncInterval:
		return "interval"
	case FsyncNever:
		return "never"
	}
	return "FsyncPolicy(" + strconv.Itoa(int(p)) + ")"
}

// Options configure a queue. Zero values take the defaults noted.
type Options struct {
	// MaxBytes bounds the total size of the segment files. Zero means
	// 1 GiB. It must be at least twice SegmentBytes.
	MaxBytes int64
	// SegmentBytes is the size at which a new segment is started; one
	// record must fit in a segment. Zero means 16 MiB.
	SegmentBytes int64
	// Fsync is the sync policy (zero: FsyncAlways).
	Fsync FsyncPolicy
	// FsyncInterval is the period of FsyncInterval. Zero means 1 s.
	FsyncInterval time.Duration
	// Logger receives drops, truncations and corruption; nil discards.
	Logger *slog.Logger
}

// DefaultOptions returns the values zero fields take.
func DefaultOptions() Options {
	return Options{MaxBytes: 1 << 30, SegmentBytes: 16 << 20, Fsync: FsyncAlways, FsyncInterval: time.Second}
}

// Errors returned by the queue.
var (
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("queue closed")
	// ErrTooLarge is returned by Append for a record that does not fit in
	// one segment.
	ErrTooLarge = errors.New("record larger than a segment")
)

// Stats are the queue's counters. Counts marked "since Open" restart with
// the process; the others describe the directory.
type Stats struct {
	Bytes          int64  // size of all segment files
	Segments       int    // segment files
	Pending        int    // records not yet acknowledged
	PendingBytes   int64  // their size including framing
	Appended       uint64 // records appended since Open
	Acked          uint64 // records acknowledged since Open
	DroppedRecords uint64 // unacknowledged records deleted to stay under MaxBytes, since Open
	DroppedBytes   uint64 // their size including framing, since Open
	CorruptRecords uint64 // unreadable records skipped, since Open
	TruncatedBytes int64  // torn tail cut from the newest segment by Open
}

// Record is one record returned by Next.
type Record struct {
	// Data is the payload. It is valid until the next call to Next.
	Data []byte
	// Pos is where the record starts; pass it to Ack.
	Pos Position
	end Position
	idx int // index of the record in its segment
}

type segment struct {
	seq     uint64
	size    int64 // bytes, header included
	records int
}

// Queue is a disk-backed FIFO of records. Any number of goroutines may
// Append; one consumer calls Next and Ack alternately.
type Queue struct {
	dir  string
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	segs     []segment
	w        *os.File // newest segment, open for appending
	r        *os.File // segment at the cursor, open for reading
	rseq     uint64
	cursor   Position // first unacknowledged record
	curIdx   int      // its index in its segment
	dirty    bool
	closed   bool
	notify   chan struct{}
	readBuf  []byte
	writeBuf []byte
	stats    Stats

	stop chan struct{}
	done chan struct{}
}

// Open opens or creates the queue in dir.
func Open(dir string, opts Options) (*Queue, error) {
	d := DefaultOptions()
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = d.MaxBytes
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = d.SegmentBytes
	}
	if opts.FsyncInterval <= 0 {
		opts.FsyncInterval = d.FsyncInterval
	}
	if opts.MaxBytes < 2*opts.SegmentBytes {
		return nil, fmt.Errorf("queue: max_bytes %d is less than twice segment_bytes %d", opts.MaxBytes, opts.SegmentBytes)
	}
	if opts.SegmentBytes <= segmentHdrSize+recordHdrSize || opts.SegmentBytes > 1<<31 {
		return nil, fmt.Errorf("queue: segment_bytes %d out of range (%d..2 GiB)", opts.SegmentBytes, segmentHdrSize+recordHdrSize+1)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("queue: create dir: %w", err)
	}
	q := &Queue{dir: dir, opts: opts, log: log, notify: make(chan struct{}, 1)}
	if err := q.load(); err != nil {
		q.closeFiles()
		return nil, err
	}
	if opts.Fsync == FsyncInterval {
		q.stop, q.done = make(chan struct{}), make(chan struct{})
		go q.syncLoop()
	}
	return q, nil
}

func (q *Queue) segPath(seq uint64) string {
	return filepath.Join(q.dir, fmt.Sprintf("%020d.seg", seq))
}

// load scans the directory: segments, the torn tail of the newest, the
// cursor, and the record counts.
func (q *Queue) load() error {
	ents, err := os.ReadDir(q.dir)
	if err != nil {
		return fmt.Errorf("queue: read dir: %w", err)
	}
	var seqs []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".seg")
		if !ok || e.IsDir() {
			continue
		}
		seq, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			q.log.Warn("queue: ignoring file with a non-numeric segment name", "file", e.Name())
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for i, seq := range seqs {
		last := i == len(seqs)-1
		s, err := q.scanSegment(seq, last)
		if err != nil {
			return err
		}
		if s == nil {
			continue
		}
		q.segs = append(q.segs, *s)
	}
	if len(q.segs) == 0 {
		if err := q.roll(); err != nil {
			return err
		}
	} else {
		last := q.segs[len(q.segs)-1]
		f, err := os.OpenFile(q.segPath(last.seq), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("queue: open segment %d: %w", last.seq, err)
		}
		q.w = f
	}
	q.loadCursor()
	return nil
}

// scanSegment counts the records of a segment. For the newest segment it
// checks every CRC and truncates a torn tail; for older ones it only hops
// over record headers (corruption is handled when the record is read). A
// segment with a bad header is renamed aside and nil returned.
func (q *Queue) scanSegment(seq uint64, newest bool) (*segment, error) {
	path := q.segPath(seq)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("queue: read segment %d: %w", seq, err)
	}
	if err := checkSegmentHeader(b); err != nil {
		if newest && len(b) < segmentHdrSize {
			// Crash while creating the segment: rewrite the header.
			if err := os.WriteFile(path, segmentHeader(), 0o640); err != nil {
				return nil, fmt.Errorf("queue: rewrite header of segment %d: %w", seq, err)
			}
			return &segment{seq: seq, size: segmentHdrSize}, nil
		}
		q.log.Error("queue: segment has a bad header; moved aside, its records are lost", "segment", seq, "err", err)
		if err := os.Rename(path, path+".corrupt"); err != nil {
			return nil, fmt.Errorf("queue: move aside segment %d: %w", seq, err)
		}
		return nil, nil
	}
	s := &segment{seq: seq, size: int64(len(b))}
	rest := b[segmentHdrSize:]
	lim := uint32(q.opts.SegmentBytes)
	for len(rest) > 0 {
		if newest {
			_, tail, err := DecodeRecord(rest, lim)
			if err != nil {
				good := int64(len(b) - len(rest))
				q.log.Warn("queue: truncating torn tail of the newest segment", "segment", seq, "at", good, "bytes", int64(len(b))-good, "err", err)
				if err := os.Truncate(path, good); err != nil {
					return nil, fmt.Errorf("queue: truncate segment %d: %w", seq, err)
				}
				q.stats.TruncatedBytes += int64(len(b)) - good
				s.size = good
				break
			}
			rest = tail
		} else {
			n, ok := hop(rest, lim)
			if !ok {
				break
			}
			rest = rest[n:]
		}
		s.records++
	}
	return s, nil
}

// hop returns the framed size of the record at the start of b, without
// checking its CRC.
func hop(b []byte, lim uint32) (int, bool) {
	if len(b) < recordHdrSize {
		return 0, false
	}
	n := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	if n > lim || uint64(len(b)-recordHdrSize) < uint64(n) {
		return 0, false
	}
	return recordHdrSize + int(n), true
}

// loadCursor reads the cursor file and places it on a record boundary of
// an existing segment; without a valid cursor it starts at the oldest
// segment (resending is safe, skipping is not).
func (q *Queue) loadCursor() {
	oldest := Position{Segment: q.segs[0].seq, Offset: segmentHdrSize}
	b, err := os.ReadFile(filepath.Join(q.dir, "cursor"))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			q.log.Warn("queue: unreadable cursor; starting at the oldest segment", "err", err)
		}
		q.cursor, q.curIdx = oldest, 0
		return
	}
	p, err := UnmarshalCursor(b)
	if err != nil {
		q.log.Warn("queue: bad cursor; starting at the oldest segment", "err", err)
		q.cursor, q.curIdx = oldest, 0
		return
	}
	if p.less(oldest) {
		q.cursor, q.curIdx = oldest, 0
		return
	}
	i := q.segIndex(p.Segment)
	if i < 0 {
		// The cursor's segment was removed after being read through: start
		// at the first segment after it.
		for _, s := range q.segs {
			if s.seq > p.Segment {
				q.cursor, q.curIdx = Position{Segment: s.seq, Offset: segmentHdrSize}, 0
				return
			}
		}
		last := q.segs[len(q.segs)-1]
		q.cursor, q.curIdx = Position{Segment: last.seq, Offset: last.size}, last.records
		return
	}
	off, idx := q.boundary(q.segs[i], p.Offset)
	q.cursor, q.curIdx = Position{Segment: p.Segment, Offset: off}, idx
}

// boundary returns the last record boundary at or before off in s and the
// number of records before it.
func (q *Queue) boundary(s segment, off int64) (int64, int) {
	b, err := os.ReadFile(q.segPath(s.seq))
	if err != nil || int64(len(b)) < s.size {
		return segmentHdrSize, 0
	}
	b = b[:s.size]
	at, idx := int64(segmentHdrSize), 0
	for at < off && idx < s.records {
		n, ok := hop(b[at:], uint32(q.opts.SegmentBytes))
		if !ok || at+int64(n) > off {
			break
		}
		at += int64(n)
		idx++
	}
	return at, idx
}

func (q *Queue) segIndex(seq uint64) int {
	for i, s := range q.segs {
		if s.seq == seq {
			return i
		}
	}
	return -1
}

// roll seals the newest segment and starts the next one.
func (q *Queue) roll() error {
	seq := uint64(1)
	if len(q.segs) > 0 {
		seq = q.segs[len(q.segs)-1].seq + 1
	}
	if q.w != nil {
		if q.opts.Fsync != FsyncNever && q.dirty {
			if err := q.w.Sync(); err != nil {
				return fmt.Errorf("queue: sync segment: %w", err)
			}
		}
		if err := q.w.Close(); err != nil {
			return fmt.Errorf("queue: close segment: %w", err)
		}
		q.w, q.dirty = nil, false
	}
	f, err := os.OpenFile(q.segPath(seq), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("queue: create segment %d: %w", seq, err)
	}
	if _, err := f.Write(segmentHeader()); err != nil {
		f.Close()
		return fmt.Errorf("queue: write segment %d header: %w", seq, err)
	}
	if q.opts.Fsync != FsyncNever {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("queue: sync segment %d: %w", seq, err)
		}
		if err := fsutil.SyncDir(q.dir); err != nil {
			f.Close()
			return err
		}
	}
	q.w = f
	q.segs = append(q.segs, segment{seq: seq, size: segmentHdrSize})
	return nil
}

// Append adds a record at the end of the queue. With FsyncAlways it is on
// disk when Append returns.
func (q *Queue) Append(payload []byte) error {
	size := int64(recordHdrSize + len(payload))
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if size+segmentHdrSize > q.opts.SegmentBytes {
		return fmt.Errorf("queue: record of %d bytes, segment_bytes %d: %w", len(payload), q.opts.SegmentBytes, ErrTooLarge)
	}
	if q.active().size+size > q.opts.SegmentBytes {
		if err := q.roll(); err != nil {
			return err
		}
	}
	for q.totalBytes()+size > q.opts.MaxBytes && len(q.segs) > 1 {
		if err := q.dropOldest(); err != nil {
			return err
		}
	}
	q.writeBuf = AppendRecord(q.writeBuf[:0], payload)
	act := q.active()
	if _, err := q.w.Write(q.writeBuf); err != nil {
		// Cut a partial record so later appends stay readable.
		if terr := q.w.Truncate(act.size); terr != nil {
			err = errors.Join(err, terr)
		}
		return fmt.Errorf("queue: append to segment %d: %w", act.seq, err)
	}
	act.size += size
	act.records++
	q.dirty = true
	q.stats.Appended++
	if q.opts.Fsync == FsyncAlways {
		if err := q.w.Sync(); err != nil {
			return fmt.Errorf("queue: sync segment %d: %w", act.seq, err)
		}
		q.dirty = false
	}
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return nil
}

func (q *Queue) active() *segment { return &q.segs[len(q.segs)-1] }

func (q *Queue) totalBytes() int64 {
	var n int64
	for _, s := range q.segs {
		n += s.size
	}
	return n
}

// dropOldest deletes the oldest segment, counting what in it was not yet
// acknowledged. The caller holds mu and ensures it is not the newest.
func (q *Queue) dropOldest() error {
	s := q.segs[0]
	lost, lostBytes := 0, int64(0)
	switch {
	case s.seq == q.cursor.Segment:
		lost, lostBytes = s.records-q.curIdx, s.size-q.cursor.Offset
	case s.seq > q.cursor.Segment:
		lost, lostBytes = s.records, s.size-segmentHdrSize
	}
	q.segs = q.segs[1:]
	if q.cursor.Segment < q.segs[0].seq {
		q.cursor, q.curIdx = Position{Segment: q.segs[0].seq, Offset: segmentHdrSize}, 0
		if err := q.writeCursor(); err != nil {
			return err
		}
	}
	q.closeReader(s.seq)
	if err := os.Remove(q.segPath(s.seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("queue: remove segment %d: %w", s.seq, err)
	}
	q.stats.DroppedRecords += uint64(lost)
	q.stats.DroppedBytes += uint64(lostBytes)
	if lost > 0 {
		q.log.Warn("queue: full; dropped the oldest segment with unsent records",
			"segment", s.seq, "records", lost, "bytes", lostBytes, "max_bytes", q.opts.MaxBytes,
			"dropped_records_total", q.stats.DroppedRecords)
	}
	return nil
}

func (q *Queue) closeReader(seq uint64) {
	if q.r != nil && q.rseq == seq {
		q.r.Close()
		q.r = nil
	}
}

// writeCursor persists the cursor atomically. The caller holds mu.
func (q *Queue) writeCursor() error {
	tmp := filepath.Join(q.dir, "cursor.tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("queue: write cursor: %w", err)
	}
	_, err = f.Write(MarshalCursor(q.cursor))
	if err == nil && q.opts.Fsync == FsyncAlways {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("queue: write cursor: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(q.dir, "cursor")); err != nil {
		return fmt.Errorf("queue: replace cursor: %w", err)
	}
	if q.opts.Fsync == FsyncAlways {
		return fsutil.SyncDir(q.dir)
	}
	return nil
}

func (q *Queue) syncLoop() {
	defer close(q.done)
	t := time.NewTicker(q.opts.FsyncInterval)
	defer t.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-t.C:
			q.mu.Lock()
			if q.dirty && q.w != nil {
				if err := q.w.Sync(); err != nil {
					q.log.Error("queue: periodic sync failed", "err", err)
				} else {
					q.dirty = false
				}
			}
			q.mu.Unlock()
		}
	}
}

// Stats returns the current counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.stats
	st.Segments = len(q.segs)
	for _, s := range q.segs {
		st.Bytes += s.size
		switch {
		case s.seq == q.cursor.Segment:
			st.Pending += s.records - q.curIdx
			st.PendingBytes += s.size - q.cursor.Offset
		case s.seq > q.cursor.Segment:
			st.Pending += s.records
			st.PendingBytes += s.size - segmentHdrSize
		}
	}
	return st
}

// Close syncs and closes the queue. Next blocked in another goroutine
// returns ErrClosed.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.notify)
	q.mu.Unlock()
	if q.stop != nil {
		close(q.stop)
		<-q.done
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var err error
	if q.w != nil && q.dirty && q.opts.Fsync != FsyncNever {
		err = q.w.Sync()
	}
	return errors.Join(err, q.closeFiles())
}

func (q *Queue) closeFiles() error {
	var errs []error
	if q.w != nil {
		errs = append(errs, q.w.Close())
		q.w = nil
	}
	if q.r != nil {
		errs = append(errs, q.r.Close())
		q.r = nil
	}
	return errors.Join(errs...)
}

// readAt reads n bytes at off of the cursor's segment into the read buffer.
func (q *Queue) readAt(seq uint64, off int64, n int) ([]byte, error) {
	if q.r == nil || q.rseq != seq {
		q.closeReader(q.rseq)
		f, err := os.Open(q.segPath(seq))
		if err != nil {
			return nil, fmt.Errorf("queue: open segment %d: %w", seq, err)
		}
		q.r, q.rseq = f, seq
	}
	if cap(q.readBuf) < n {
		q.readBuf = make([]byte, n)
	}
	b := q.readBuf[:n]
	if _, err := q.r.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("queue: segment %d at %d: %w", seq, off, ErrShortRecord)
		}
		return nil, fmt.Errorf("queue: read segment %d: %w", seq, err)
	}
	return b, nil
}
