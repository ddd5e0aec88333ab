package records

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"

	"github.com/tailroot/tailroot/internal/wlogcut"
)

// The store's write-ahead log is one prometheus tsdb/wlog directory,
// Dir/wal, shared by every partition: wlog frames records into 32 KiB
// pages with a CRC32C per fragment, cuts segments and truncates whole ones.
// The payloads of its records are ours (docs/format/records.md, "WAL"):
//
//	batch  records of one partition generation, with a sequence number
//	drop   retention removed a partition
//	mark   the newest sequence number, when everything before was dropped
//
// The wlog writer flushes a page on every Log call but fsyncs only when it
// cuts a segment, and then asynchronously; Append needs its records on
// stable storage before it returns, so storeLog fsyncs the segment files
// itself (through its own descriptor, which covers every write to the
// file) and the directory when a segment appeared. A torn tail is cut off
// by truncating the last segment at the end of its last whole record
// (wlog's own Repair rewrites the segment and drops every later one
// without looking; we refuse instead when a whole record follows the
// damage, as the version 1 WAL did).
const (
	walDirName = "wal"
	// walSegmentBytes is where wlog cuts segments. Sealed records leave the
	// log one whole segment at a time, so smaller segments free the disk
	// sooner; larger ones mean fewer files.
	walSegmentBytes = 32 << 20
	// wlogPageSize and wlogHeaderLen mirror tsdb/wlog's unexported page
	// size and fragment header (type u8, length u16 BE, crc32c u32 BE); only
	// the scan that tells corruption from a torn tail needs them.
	wlogPageSize  = 32 << 10
	wlogHeaderLen = 7

	logTypeBatch byte = 1
	logTypeDrop  byte = 2
	logTypeMark  byte = 3

	// batchFixedLen is the part of a batch payload written with fixed
	// widths, so that Append can fill in the sequence number and the
	// generation under the store lock after encoding the rows outside it.
	batchFixedLen = 1 + 8 + 4
	batchFlagMeta = 1 << 0
)

// logBatch is the payload of one batch record: records of one partition
// generation, each with the caller's bytes when Meta is set.
type logBatch struct {
	Seq       uint64
	Gen       int
	PartStart int64
	PartDur   int64
	Records   []Record
	Meta      [][]byte // nil, or one entry per record
}

// appendBatchHeader appends the header of a batch payload; Seq, Gen and
// the record count (the last 4 bytes) have fixed widths so that a caller
// may fill them in later (patchBatch, and frame for the count).
func appendBatchHeader(dst []byte, b *logBatch, n int) []byte {
	dst = append(dst, logTypeBatch)
	dst = binary.LittleEndian.AppendUint64(dst, b.Seq)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(b.Gen))
	dst = binary.AppendUvarint(dst, uint64(b.PartStart))
	dst = binary.AppendUvarint(dst, uint64(b.PartDur))
	var flags byte
	if b.Meta != nil {
		flags |= batchFlagMeta
	}
	dst = append(dst, flags)
	return binary.LittleEndian.AppendUint32(dst, uint32(n))
}

// appendBatchRow appends one record and, with meta, its caller bytes.
func appendBatchRow(dst []byte, r *Record, withMeta bool, meta []byte) []byte {
	dst = r.Marshal(dst)
	if withMeta {
		dst = binary.AppendUvarint(dst, uint64(len(meta)))
		dst = append(dst, meta...)
	}
	return dst
}

func patchBatch(payload []byte, seq uint64, gen int) {
	binary.LittleEndian.PutUint64(payload[1:], seq)
	binary.LittleEndian.PutUint32(payload[9:], uint32(gen))
}

// Marshal appends the payload bytes to dst.
func (b *logBatch) Marshal(dst []byte) []byte {
	dst = appendBatchHeader(dst, b, len(b.Records))
	for i := range b.Records {
		var m []byte
		if b.Meta != nil {
			m = b.Meta[i]
		}
		dst = appendBatchRow(dst, &b.Records[i], b.Meta != nil, m)
	}
	return dst
}

// Unmarshal decodes a batch payload; all of src must be consumed. The
// records and meta share no memory with src.
func (b *logBatch) Unmarshal(src []byte) (tail []byte, err error) {
	if len(src) < batchFixedLen || src[0] != logTypeBatch {
		return src, fmt.Errorf("wal batch: %w or wrong type", errShort)
	}
	le := binary.LittleEndian
	*b = logBatch{Seq: le.Uint64(src[1:]), Gen: int(le.Uint32(src[9:]))}
	d := decoder{b: src[batchFixedLen:]}
	start, dur := d.uvarint("partition start"), d.uvarint("partition duration")
	flags := d.byte("flags")
	// d.bytes is nil once the decoder failed: check before reading it.
	nb := d.bytes(4, "record count")
	if d.err != nil {
		return src, fmt.Errorf("wal batch: %w", d.err)
	}
	n := uint64(binary.LittleEndian.Uint32(nb))
	if start > 1<<62 || dur == 0 || dur > 1<<62 || start%dur != 0 {
		return src, fmt.Errorf("wal batch: bad partition start %d duration %d", start, dur)
	}
	if flags&^batchFlagMeta != 0 {
		return src, fmt.Errorf("wal batch: unknown flags %#x", flags)
	}
	if n > uint64(len(d.b))/minRowBytes {
		return src, fmt.Errorf("wal batch: %d records in %d bytes", n, len(d.b))
	}
	b.PartStart, b.PartDur = int64(start), int64(dur)
	b.Records = make([]Record, n)
	if flags&batchFlagMeta != 0 {
		b.Meta = make([][]byte, n)
	}
	rest := d.b
	for i := range b.Records {
		if rest, err = b.Records[i].Unmarshal(rest); err != nil {
			return src, fmt.Errorf("wal batch: record %d: %w", i, err)
		}
		if b.Meta != nil {
			l, k := binary.Uvarint(rest)
			if k <= 0 || l > uint64(len(rest)-k) {
				return src, fmt.Errorf("wal batch: record %d: bad meta length", i)
			}
			b.Meta[i] = append([]byte(nil), rest[k:k+int(l)]...)
			rest = rest[k+int(l):]
		}
	}
	return rest, nil
}

// appendDrop encodes a drop record: retention removed the partition.
func appendDrop(dst []byte, start int64) []byte {
	return binary.AppendUvarint(append(dst, logTypeDrop), uint64(start))
}

// appendMark encodes a mark record: the newest batch sequence number, the
// first record of a segment cut so that every older one can go.
func appendMark(dst []byte, seq uint64) []byte {
	return binary.LittleEndian.AppendUint64(append(dst, logTypeMark), seq)
}

// storeLog is the open log.
//
// cur, segs, lastSeq and first are guarded by the Store's mutex; end is
// written under it and read by group commit under posMu; the sync fields
// are guarded by syncMu. A syncer takes syncMu alone; closing and cutting
// take the Store mutex and then syncMu.
//
// A write is acknowledged only once a sync covers it, so after a failed
// write or sync everything after good, the end of the newest synced write,
// belongs to writes that are refused: cutBack removes it from the files
// (the refused write may have put some of its pages there) and fails every
// sync from then on.
type storeLog struct {
	dir string
	w   *wlog.WL

	first   int      // lowest segment still on disk
	cur     int      // segment the last write went to (or the one opened)
	segs    []segSeq // per segment still on disk, the newest batch in it
	lastSeq uint64   // newest batch sequence number
	lastSeg int      // a segment at or before the one holding lastSeq
	curUsed bool     // cur holds a batch or drop record (not only a mark)

	posMu sync.Mutex
	end   logEnd // the newest successful write

	syncMu    sync.Mutex
	synced    uint64
	good      logEnd // the newest write a sync covered
	err       error  // a write or sync failed: every later sync fails
	cut       bool   // the files were cut back to good
	syncedSeg int    // segments before it hold nothing unsynced
	dirSeg    int    // the directory entry of every segment up to it is synced
	f         *os.File
	fSeg      int
	done      bool
}

// logEnd is where the log ended after write number n: segment seg holds
// off bytes, the last of them the end of that write's last record.
type logEnd struct {
	n   uint64
	seg int
	off int64
}

type segSeq struct {
	seg    int
	maxSeq uint64
}

// noteBatch records that batch seq went to segment seg or a later one.
func (l *storeLog) noteBatch(seg int, seq uint64) {
	if n := len(l.segs); n > 0 && l.segs[n-1].seg == seg {
		l.segs[n-1].maxSeq = max(l.segs[n-1].maxSeq, seq)
	} else {
		l.segs = append(l.segs, segSeq{seg, seq})
	}
	if seq >= l.lastSeq {
		l.lastSeq, l.lastSeg = seq, seg
	}
}

// openLog starts the writer after replay: wlog creates the segment after
// the last one on disk.
func openLog(dir string, logger *slog.Logger, first, lastSeg int, segs []segSeq, lastSeq uint64) (*storeLog, error) {
	w, err := wlog.NewSize(logger, nil, dir, walSegmentBytes, compression.None)
	if err != nil {
		return nil, fmt.Errorf("open wal: %w", err)
	}
	cur, off, err := w.LastSegmentAndOffset()
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open wal: %w", err)
	}
	if first < 0 {
		first = cur
	}
	l := &storeLog{dir: dir, w: w, first: first, cur: cur, segs: segs, lastSeq: lastSeq, lastSeg: lastSeg, syncedSeg: cur, dirSeg: cur - 1, fSeg: -1}
	if lastSeq == 0 {
		l.lastSeg = cur
	}
	l.end = logEnd{seg: cur, off: int64(off)}
	l.good = l.end
	// The new segment's directory entry; replay already synced the rest.
	if err := l.syncDir(cur); err != nil {
		_ = w.Close()
		return nil, err
	}
	return l, nil
}

// write logs payloads in one call. Called with the Store's mutex held. It
// returns the write's number for syncTo and the segment the write started
// in (the first records of the call may sit there, the rest after it).
func (l *storeLog) write(payloads [][]byte) (seq uint64, startSeg int, err error) {
	startSeg = l.cur
	if err := l.w.Log(payloads...); err != nil {
		return 0, startSeg, fmt.Errorf("write wal: %w", err)
	}
	n, err := l.logged()
	if err != nil {
		return 0, startSeg, fmt.Errorf("write wal: %w", err)
	}
	l.curUsed = true
	return n, startSeg, nil
}

// logged notes where a successful Log left the end of the log and returns
// the write's number. After a successful Log wlog has flushed its page, so
// the writer's offset is the segment file's size.
func (l *storeLog) logged() (uint64, error) {
	seg, off, err := l.w.LastSegmentAndOffset()
	if err != nil {
		return 0, err
	}
	l.cur = seg
	l.posMu.Lock()
	defer l.posMu.Unlock()
	l.end = logEnd{n: l.end.n + 1, seg: seg, off: int64(off)}
	return l.end.n, nil
}

// syncTo returns once every write up to seq is on stable storage. Callers
// that arrive while a sync runs wait for it and usually find their write
// covered (group commit).
func (l *storeLog) syncTo(seq uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.synced >= seq {
		return nil
	}
	if l.err != nil {
		// Not synced before the failure: cut back, or about to be.
		return fmt.Errorf("sync wal: an earlier write or sync failed: %w", l.err)
	}
	if l.done {
		return nil
	}
	l.posMu.Lock()
	target := l.end
	l.posMu.Unlock()
	err := l.syncThrough(target.seg)
	if err == nil {
		err = l.syncDir(target.seg)
	}
	if err != nil {
		// A later fsync may well succeed although this one lost pages:
		// nothing written so far may be acknowledged any more.
		l.err = err
		return err
	}
	l.syncedSeg, l.synced, l.good = target.seg, target.n, target
	return nil
}

func (l *storeLog) syncThrough(last int) error {
	for k := l.syncedSeg; k <= last; k++ {
		if err := l.syncSegment(k, k == last); err != nil {
			return err
		}
	}
	return nil
}

// cutBack makes every sync from now on fail with cause (unless it covers
// a write synced already), stops the writer without flushing it, and cuts
// the files back to the end of the newest synced write, so that a reload
// or a restart sees nothing of a refused write. Called with the Store's
// mutex held; a failed cut is retried by the next call (Recover).
func (l *storeLog) cutBack(cause error) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.err == nil {
		l.err = cause
	}
	l.done = true
	if l.f != nil {
		_ = l.f.Close()
		l.f, l.fSeg = nil, -1
	}
	if l.cut {
		return nil
	}
	if err := wlogcut.Cut(l.dir, l.good.seg, l.good.off); err != nil {
		return fmt.Errorf("cut wal back to segment %d offset %d: %w", l.good.seg, l.good.off, err)
	}
	l.cut = true
	return nil
}

// syncSegment fsyncs segment k; keep leaves its descriptor open for the
// next sync. A segment already removed held only sealed records.
func (l *storeLog) syncSegment(k int, keep bool) error {
	if l.fSeg != k {
		if l.f != nil {
			_ = l.f.Close()
			l.f, l.fSeg = nil, -1
		}
		f, err := os.Open(wlog.SegmentName(l.dir, k))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sync wal segment %d: %w", k, err)
		}
		l.f, l.fSeg = f, k
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("sync wal segment %d: %w", k, err)
	}
	if !keep {
		_ = l.f.Close()
		l.f, l.fSeg = nil, -1
	}
	return nil
}

// syncDir fsyncs the log directory when segments up to last were created
// since the last time.
func (l *storeLog) syncDir(last int) error {
	if last <= l.dirSeg {
		return nil
	}
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("sync wal directory: %w", err)
	}
	l.dirSeg = last
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// truncate removes the segments before low. live is false when no record
// of the log is needed any more: then, if the log holds anything, a new
// segment is cut with a mark of the newest sequence number and every older
// segment goes (the newest batch's segment would otherwise stay for the
// sequence number alone).
func (l *storeLog) truncate(low int, live bool) error {
	if !live && (l.first < l.cur || l.curUsed) {
		k, err := l.w.NextSegmentSync()
		if err != nil {
			return fmt.Errorf("cut wal segment: %w", err)
		}
		if err := l.w.Log(appendMark(nil, l.lastSeq)); err != nil {
			return fmt.Errorf("write wal mark: %w", err)
		}
		n, err := l.logged()
		if err != nil {
			return fmt.Errorf("write wal mark: %w", err)
		}
		l.curUsed, l.lastSeg = false, k
		if err := l.syncTo(n); err != nil {
			return err
		}
		low = k
	}
	low = min(low, l.cur, l.lastSeg)
	if low <= l.first {
		return nil
	}
	if err := l.w.Truncate(low); err != nil {
		return fmt.Errorf("truncate wal: %w", err)
	}
	l.first = low
	k := 0
	for k < len(l.segs) && l.segs[k].seg < low {
		k++
	}
	l.segs = l.segs[k:]
	return nil
}

// firstUnreleased returns the first segment that may hold a batch newer
// than seq, or -1 when none does.
func (l *storeLog) firstUnreleased(seq uint64) int {
	for _, e := range l.segs {
		if e.maxSeq > seq {
			return e.seg
		}
	}
	return -1
}

// close flushes, fsyncs and closes the log.
func (l *storeLog) close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.done {
		return nil
	}
	l.done = true
	if l.f != nil {
		_ = l.f.Close()
	}
	if err := l.w.Close(); err != nil {
		return fmt.Errorf("close wal: %w", err)
	}
	return nil
}

// abandon drops the log without flushing, as after a failed write whose
// page state is unknown (Recover reads the files again) or a crash in a
// test.
func (l *storeLog) abandon() {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.done = true
	if l.f != nil {
		_ = l.f.Close()
	}
}

// readSegments reads every record of the log in dir in order, calling fn
// with the payload, its segment and its offset there. A segment that ends
// in a torn record is cut back to its last whole record when nothing whole
// follows the damage (in it or in a later segment), and the later segments
// are removed; otherwise, or when fn fails, the error is a
// *CorruptionError naming the segment file and the record's offset.
// repair false reports a torn tail as an error instead of cutting it.
func readSegments(dir string, logger *slog.Logger, repair bool, fn func(payload []byte, seg int, off int64) error) (first, last int, err error) {
	first, last, err = wlog.Segments(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("list wal segments: %w", err)
	}
	if first < 0 {
		return -1, -1, nil
	}
	for k := first; k <= last; k++ {
		path := wlog.SegmentName(dir, k)
		good, rerr := readSegment(path, fn)
		if rerr == nil {
			continue
		}
		var ce *CorruptionError
		if errors.As(rerr, &ce) {
			return first, last, rerr
		}
		// The reader stopped at a record it could not read whole.
		if !repair {
			return first, last, &CorruptionError{File: path, Offset: good, Reason: rerr.Error()}
		}
		if at, ok, err := wholeRecordAfter(dir, k, last, good); err != nil {
			return first, last, err
		} else if ok {
			return first, last, &CorruptionError{
				File: path, Offset: good,
				Reason: fmt.Sprintf("%v; a whole record follows at %s offset %d", rerr, filepath.Base(wlog.SegmentName(dir, at.seg)), at.off),
			}
		}
		logger.Warn("records: dropping torn WAL tail", "segment", path, "offset", good, "err", rerr)
		if err := truncateSync(path, good); err != nil {
			return first, last, fmt.Errorf("truncate torn wal tail: %w", err)
		}
		for j := k + 1; j <= last; j++ {
			if err := os.Remove(wlog.SegmentName(dir, j)); err != nil {
				return first, last, fmt.Errorf("remove wal segment after torn tail: %w", err)
			}
		}
		if err := syncDir(dir); err != nil {
			return first, last, err
		}
		return first, k, nil
	}
	return first, last, nil
}

// readSegment reads one segment. good is the end of the last whole record;
// a reader error is returned as is, fn's errors as CorruptionError.
func readSegment(path string, fn func(payload []byte, seg int, off int64) error) (good int64, err error) {
	seg, err := wlog.OpenReadSegment(path)
	if err != nil {
		return 0, fmt.Errorf("open wal segment: %w", err)
	}
	defer seg.Close()
	r := wlog.NewReader(bufio.NewReaderSize(seg, 1<<20))
	for r.Next() {
		if err := fn(r.Record(), seg.Index(), good); err != nil {
			return good, &CorruptionError{File: path, Offset: good, Reason: err.Error()}
		}
		good = r.Offset()
	}
	if err := r.Err(); err != nil {
		var ce *wlog.CorruptionErr
		if errors.As(err, &ce) {
			return good, ce.Err
		}
		return good, err
	}
	// wlog's reader ends quietly on a header torn after its first byte or
	// a payload torn before its first; only zero padding may follow the
	// last whole record.
	rest, err := readFrom(path, good)
	if err != nil {
		return good, fmt.Errorf("read wal segment: %w", err)
	}
	if slices.ContainsFunc(rest, func(c byte) bool { return c != 0 }) {
		return good, fmt.Errorf("%d bytes after the last whole record are not page padding", len(rest))
	}
	return good, nil
}

type logPos struct {
	seg int
	off int
}

// wholeRecordAfter reports the first fragment that starts a record (full
// or first) and checks out, after offset from of segment k or anywhere in
// the segments after it up to last. Fragments never cross a page, which
// keeps the scan from trusting random bytes.
func wholeRecordAfter(dir string, k, last int, from int64) (logPos, bool, error) {
	for j := k; j <= last; j++ {
		data, err := os.ReadFile(wlog.SegmentName(dir, j))
		if err != nil {
			return logPos{}, false, fmt.Errorf("read wal segment: %w", err)
		}
		start := 0
		if j == k {
			start = int(from) + 1
		}
		for o := start; o+wlogHeaderLen < len(data); o++ {
			if recordStartAt(data, o) {
				return logPos{j, o}, true, nil
			}
		}
	}
	return logPos{}, false, nil
}

func recordStartAt(b []byte, o int) bool {
	h := b[o]
	typ, comp := h&7, h>>3
	if (typ != 1 && typ != 2) || comp > 2 { // full or first; none, snappy or zstd
		return false
	}
	n := int(binary.BigEndian.Uint16(b[o+1:]))
	if n == 0 || o%wlogPageSize+wlogHeaderLen+n > wlogPageSize || o+wlogHeaderLen+n > len(b) {
		return false
	}
	return crc32.Checksum(b[o+wlogHeaderLen:o+wlogHeaderLen+n], castagnoli) == binary.BigEndian.Uint32(b[o+3:])
}

// LoggedBatch is one batch as ReplayWAL hands it back.
type LoggedBatch struct {
	// Seq is the batch's sequence number: it grows by one per WAL record,
	// across restarts, and Append returns the last of its batch.
	Seq     uint64
	Records []Record
	// Meta holds the bytes given with each record to AppendBatch, or is
	// nil when none were.
	Meta [][]byte
}

// ReplayWAL calls fn, in log order, for every batch in the WAL whose
// sequence number is above after. With Options.HoldWAL every batch above
// the last Release is still in the WAL, sealed or not; a caller that keeps
// state derived from the records recovers it from here. It refuses while
// Append refuses (call Recover first). fn must not call the store.
func (s *Store) ReplayWAL(after uint64, fn func(b LoggedBatch) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.failed != nil {
		return fmt.Errorf("replay wal: store failed earlier: %w", s.failed)
	}
	_, _, err := readSegments(s.wal.dir, s.log, false, func(p []byte, _ int, _ int64) error {
		if len(p) < batchFixedLen || p[0] != logTypeBatch || binary.LittleEndian.Uint64(p[1:]) <= after {
			return nil
		}
		var b logBatch
		tail, err := b.Unmarshal(p)
		if err == nil && len(tail) != 0 {
			err = fmt.Errorf("%d bytes after the last record", len(tail))
		}
		if err != nil {
			return err
		}
		return fn(LoggedBatch{Seq: b.Seq, Records: b.Records, Meta: b.Meta})
	})
	if err != nil {
		return fmt.Errorf("replay wal: %w", err)
	}
	return nil
}

// LastSeq returns the sequence number of the newest batch in the WAL, 0
// when there has been none.
func (s *Store) LastSeq() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.wal == nil {
		return 0
	}
	return s.wal.lastSeq
}

// AdvanceSeq makes the next batch's sequence number larger than seq: a
// caller whose state counts batches up to seq (from a checkpoint) must not
// see new batches numbered at or below it, even if the WAL lost its newest
// batches. The next batch written persists it.
func (s *Store) AdvanceSeq(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal != nil && seq > s.wal.lastSeq {
		s.wal.lastSeq = seq
	}
}

// Release tells the store that the caller's own state covers every batch
// up to seq (with Options.HoldWAL; a no-op without): WAL segments holding
// only such batches, and only sealed records, are removed.
func (s *Store) Release(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if seq > s.released {
		s.released = seq
	}
	return s.truncateLog()
}

// truncateLog removes the WAL segments that hold nothing an open head or
// (with HoldWAL) an unreleased batch needs. Called with s.mu held.
func (s *Store) truncateLog() error {
	if s.wal == nil || s.failed != nil {
		return nil
	}
	low, live := s.wal.cur, false
	for _, p := range s.parts {
		if p.head != nil {
			low, live = min(low, p.head.firstSeg), true
		}
	}
	if s.opts.HoldWAL {
		if k := s.wal.firstUnreleased(s.released); k >= 0 {
			low, live = min(low, k), true
		}
	}
	err := s.wal.truncate(low, live)
	if err != nil {
		// A failed cut or mark leaves the writer's state unknown.
		s.fail(err)
	}
	return err
}

// readFrom returns the bytes of the file at path from off to its end.
func readFrom(path string, off int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}
