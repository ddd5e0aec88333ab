package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tailroot/tailroot/internal/fsutil"
)

// Options configure a Store. Every field says what its zero value means.
type Options struct {
	// Dir holds the store's files. Required; created if missing.
	Dir string
	// PartitionDuration is the time span of one partition, a whole number of
	// milliseconds. 0 means 2h. It is written into every file; reopening a
	// directory with another duration is an error.
	PartitionDuration time.Duration
	// Retention is how long records are kept, measured from the time passed
	// to ApplyRetention. 0 keeps records forever.
	Retention time.Duration
	// MaxSegmentBytes seals a partition's WAL into a segment once the WAL
	// reaches this many bytes, and is the largest batch Append takes.
	// 0 means 64 MiB; at most 256 MiB.
	MaxSegmentBytes int64
	// SyncEveryWrite makes every Append fsync on its own while holding the
	// store lock. false (the default) is group commit: concurrent Appends
	// share one fsync. Either way Append returns only after its records are
	// fsynced; group commit trades nothing in durability for throughput
	// under concurrency.
	SyncEveryWrite bool
	// RetentionCheckInterval runs ApplyRetention(time.Now()) in the
	// background at this interval. 0 runs no background loop.
	RetentionCheckInterval time.Duration
	// RetentionHold, when set, is asked before retention removes a
	// partition, once per sealed segment; if it returns true for any of
	// them the whole partition is kept until a later retention pass. A
	// partition with an open WAL is sealed first, so its records are asked
	// about too. It lets a copy of the segments elsewhere (the Parquet
	// history of tsdb/records/history) finish before the local files go.
	// It is called with the store lock held and must not call the store.
	// nil removes partitions as soon as they are past retention.
	RetentionHold func(SegmentRef) bool
	// HoldWAL keeps every WAL batch the caller has not passed to Release,
	// even once its records are sealed, so that ReplayWAL hands it back
	// after a crash: a caller that derives state from the records (ingest's
	// derived series) recovers it from this one log instead of a journal of
	// its own. false removes WAL segments as soon as their records are
	// sealed.
	HoldWAL bool
	// Logger receives errors of background work (retention, sealing that is
	// retried later). nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns 2h partitions, no retention, 64 MiB segments and
// group commit. Dir must still be set.
func DefaultOptions() Options {
	return Options{
		PartitionDuration: 2 * time.Hour,
		MaxSegmentBytes:   64 << 20,
	}
}

const maxSegmentBytesLimit = 256 << 20

// Store is the request-record store. It is safe for concurrent use.
type Store struct {
	opts   Options
	dur    int64 // partition duration, ms
	grace  int64 // late-record grace before a partition is due, ms
	log    *slog.Logger
	unlock func() error

	mu       sync.RWMutex
	parts    map[int64]*partition // by partition start
	hasData  bool
	maxT     int64 // newest record time seen
	lastCut  int64 // partitions with index < lastCut have been sealed once due
	cutoff   int64 // retention: partitions ending at or before it are gone
	closed   bool
	failed   error // sticky: a WAL write or sync failed; no more appends
	wal      *storeLog
	released uint64 // HoldWAL: the caller's state covers batches up to it

	stop      chan struct{}
	bg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// partition is one time range [start, start+dur): its sealed segments and at
// most one open WAL generation (the head).
type partition struct {
	start   int64
	segs    []segmentMeta // in seq order
	head    *headGen
	nextSeq int
}

type segmentMeta struct {
	path       string
	seq        int
	minT, maxT int64
	count      int
	size       int64
}

// headGen is an open WAL generation and its records in append order. recs is
// only appended to, so a reader may keep a prefix of it without a lock.
// Its batches are in WAL segments firstSeg and later; bytes is the size of
// their payloads.
type headGen struct {
	seq      int
	firstSeg int
	bytes    int64
	recs     []Record
}

// Open opens or creates the store in opts.Dir: it replays the WAL
// (dropping a torn last record), seals every version 1 WAL file into a
// segment, seals partitions that are due, and starts the retention loop if
// configured.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("open records store: Options.Dir is empty")
	}
	if opts.PartitionDuration == 0 {
		opts.PartitionDuration = DefaultOptions().PartitionDuration
	}
	if opts.MaxSegmentBytes == 0 {
		opts.MaxSegmentBytes = DefaultOptions().MaxSegmentBytes
	}
	switch {
	case opts.PartitionDuration < time.Millisecond || opts.PartitionDuration%time.Millisecond != 0:
		return nil, fmt.Errorf("open records store: PartitionDuration %v is not a positive whole number of milliseconds", opts.PartitionDuration)
	case opts.Retention < 0:
		return nil, fmt.Errorf("open records store: Retention %v is negative", opts.Retention)
	case opts.MaxSegmentBytes < 0 || opts.MaxSegmentBytes > maxSegmentBytesLimit:
		return nil, fmt.Errorf("open records store: MaxSegmentBytes %d outside [1, %d]", opts.MaxSegmentBytes, maxSegmentBytesLimit)
	case opts.RetentionCheckInterval < 0:
		return nil, fmt.Errorf("open records store: RetentionCheckInterval %v is negative", opts.RetentionCheckInterval)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("open records store: %w", err)
	}
	unlock, err := fsutil.LockDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("open records store: %w", err)
	}
	s := &Store{
		opts:   opts,
		dur:    opts.PartitionDuration.Milliseconds(),
		log:    log,
		unlock: unlock,
		parts:  map[int64]*partition{},
		cutoff: math.MinInt64,
		stop:   make(chan struct{}),
	}
	s.grace = s.dur / 2
	if err := s.load(); err != nil {
		s.closeFiles()
		_ = unlock()
		return nil, fmt.Errorf("open records store %s: %w", opts.Dir, err)
	}
	if opts.RetentionCheckInterval > 0 {
		s.bg.Add(1)
		go s.retentionLoop()
	}
	return s, nil
}

// fileName is "<start>-<seq>.<ext>".
func fileName(start int64, seq int, ext string) string {
	return fmt.Sprintf("%d-%06d.%s", start, seq, ext)
}

func parseFileName(name string) (start int64, seq int, ext string, ok bool) {
	base, ext, found := strings.Cut(name, ".")
	if !found || (ext != "wal" && ext != "seg") {
		return 0, 0, "", false
	}
	a, b, found := strings.Cut(base, "-")
	if !found {
		return 0, 0, "", false
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || start < 0 || seq < 0 || len(b) < 6 {
		return 0, 0, "", false
	}
	return start, seq, ext, true
}

// load reads the directory into s: segments, then version 1 WAL files
// (sealed into segments at once), then the WAL. Called by Open and Recover.
func (s *Store) load() error {
	entries, err := os.ReadDir(s.opts.Dir)
	if err != nil {
		return err
	}
	var v1 []v1WAL
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(s.opts.Dir, name)
		if strings.HasSuffix(name, ".tmp") {
			if err := os.Remove(path); err != nil {
				return err
			}
			continue
		}
		start, seq, ext, ok := parseFileName(name)
		if !ok || e.IsDir() {
			continue
		}
		if start%s.dur != 0 {
			return fmt.Errorf("file %s: partition start %d is not a multiple of partition duration %d ms (PartitionDuration changed?)", name, start, s.dur)
		}
		p := s.partition(start)
		p.nextSeq = max(p.nextSeq, seq+1)
		if ext == "wal" {
			v1 = append(v1, v1WAL{start, seq, path})
			continue
		}
		meta, err := s.readSegmentMeta(path, start, seq)
		if err != nil {
			return err
		}
		p.segs = append(p.segs, meta)
		s.observe(meta.maxT)
	}
	for _, p := range s.parts {
		slices.SortFunc(p.segs, func(a, b segmentMeta) int { return a.seq - b.seq })
	}
	if err := s.migrateV1(v1); err != nil {
		return err
	}
	if err := s.replayLog(); err != nil {
		return err
	}
	s.lastCut = s.cutIndex()
	err = s.sealDue()
	return errors.Join(err, s.truncateLog())
}

// replayLog loads the WAL into the heads (cutting a torn tail) and opens it
// for writing.
func (s *Store) replayLog() error {
	dir := filepath.Join(s.opts.Dir, walDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var (
		segs    []segSeq
		lastSeq uint64
		lastSeg = -1
	)
	first, _, err := readSegments(dir, s.log, true, func(payload []byte, seg int, _ int64) error {
		if len(payload) == 0 {
			return errors.New("empty wal record")
		}
		switch payload[0] {
		case logTypeBatch:
			var b logBatch
			tail, err := b.Unmarshal(payload)
			if err == nil && len(tail) != 0 {
				err = fmt.Errorf("%d bytes after the last record", len(tail))
			}
			if err != nil {
				return fmt.Errorf("batch does not decode: %v", err)
			}
			if n := len(segs); n > 0 && segs[n-1].seg == seg {
				segs[n-1].maxSeq = max(segs[n-1].maxSeq, b.Seq)
			} else {
				segs = append(segs, segSeq{seg, b.Seq})
			}
			if b.Seq >= lastSeq {
				lastSeq, lastSeg = b.Seq, seg
			}
			return s.replayBatch(&b, seg, len(payload))
		case logTypeMark:
			if len(payload) != 9 {
				return errors.New("mark record does not decode")
			}
			if seq := binary.LittleEndian.Uint64(payload[1:]); seq >= lastSeq {
				lastSeq, lastSeg = seq, seg
			}
			return nil
		case logTypeDrop:
			start, n := binary.Uvarint(payload[1:])
			if n <= 0 || n != len(payload)-1 {
				return errors.New("drop record does not decode")
			}
			if p := s.parts[int64(start)]; p != nil {
				p.head = nil
				if len(p.segs) == 0 {
					delete(s.parts, int64(start))
				}
			}
			return nil
		default:
			return fmt.Errorf("unknown wal record type %d", payload[0])
		}
	})
	if err != nil {
		return err
	}
	l, err := openLog(dir, s.log, first, lastSeg, segs, lastSeq)
	if err != nil {
		return err
	}
	s.wal = l
	return nil
}

// replayBatch adds one logged batch to its partition's head, unless its
// generation is sealed already (the WAL keeps sealed batches until their
// segment of the log is truncated).
func (s *Store) replayBatch(b *logBatch, seg, size int) error {
	if b.PartDur != s.dur {
		return fmt.Errorf("batch for partition %d/%d ms, store uses duration %d ms (PartitionDuration changed?)", b.PartStart, b.PartDur, s.dur)
	}
	for i := range b.Records {
		if t := b.Records[i].Time; t < b.PartStart || t-b.PartStart >= b.PartDur {
			return fmt.Errorf("record time %d outside partition [%d, %d)", t, b.PartStart, b.PartStart+b.PartDur)
		}
	}
	p := s.partition(b.PartStart)
	p.nextSeq = max(p.nextSeq, b.Gen+1)
	for _, m := range p.segs {
		if m.seq == b.Gen {
			return nil
		}
	}
	if h := p.head; h != nil && h.seq != b.Gen {
		if b.Gen < h.seq {
			return fmt.Errorf("batch of generation %d after generation %d of partition %d", b.Gen, h.seq, b.PartStart)
		}
		// An older generation left open (a seal that never happened):
		// seal it now, as a later one exists.
		if err := s.seal(p); err != nil {
			return err
		}
	}
	if p.head == nil {
		p.head = &headGen{seq: b.Gen, firstSeg: seg}
	}
	p.head.recs = append(p.head.recs, b.Records...)
	p.head.bytes += int64(size)
	for i := range b.Records {
		s.observe(b.Records[i].Time)
	}
	return nil
}

func (s *Store) readSegmentMeta(path string, start int64, seq int) (segmentMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return segmentMeta{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return segmentMeta{}, err
	}
	var b [segHeaderLen]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return segmentMeta{}, &CorruptionError{File: path, Reason: "segment header: " + err.Error()}
	}
	h, err := readSegmentHeader(b[:])
	if err != nil {
		return segmentMeta{}, &CorruptionError{File: path, Reason: err.Error()}
	}
	if h.PartDur != s.dur || h.PartStart != start {
		return segmentMeta{}, fmt.Errorf("segment %s: partition %d/%d ms, store uses duration %d ms (PartitionDuration changed?)", path, h.PartStart, h.PartDur, s.dur)
	}
	if want := int64(segHeaderLen) + int64(h.CompLen) + segTrailerLen; fi.Size() != want {
		return segmentMeta{}, &CorruptionError{File: path, Offset: fi.Size(), Reason: fmt.Sprintf("file is %d bytes, header says %d", fi.Size(), want)}
	}
	return segmentMeta{path: path, seq: seq, minT: h.MinT, maxT: h.MaxT, count: int(h.Count), size: fi.Size()}, nil
}

func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *Store) partition(start int64) *partition {
	p := s.parts[start]
	if p == nil {
		p = &partition{start: start, nextSeq: 1}
		s.parts[start] = p
	}
	return p
}

func (s *Store) observe(t int64) {
	if !s.hasData || t > s.maxT {
		s.maxT, s.hasData = t, true
	}
}

// cutIndex is the partition index below which partitions are due: index i is
// due when (i+1)·dur + grace ≤ maxT.
func (s *Store) cutIndex() int64 {
	if !s.hasData || s.maxT < s.grace {
		return 0
	}
	return (s.maxT - s.grace) / s.dur
}

// sealDue seals the head of every partition that is due. Errors are joined;
// a failed seal leaves its WAL in place to be retried.
func (s *Store) sealDue() error {
	var errs []error
	for _, p := range s.sortedParts() {
		if p.head != nil && p.start/s.dur < s.lastCut {
			if err := s.seal(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (s *Store) sortedParts() []*partition {
	ps := make([]*partition, 0, len(s.parts))
	for _, p := range s.parts {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *partition) int { return cmpInt64(a.start, b.start) })
	return ps
}

// seal writes p's head into a segment (temp file, fsync, rename, directory
// fsync). Called with s.mu held. The head stays open if writing the
// segment fails. Its batches stay in the WAL until truncateLog finds their
// log segment needed by no open head (replay skips sealed generations).
func (s *Store) seal(p *partition) error {
	h := p.head
	if h == nil {
		return nil
	}
	if len(h.recs) > 0 {
		seg := Segment{PartitionStart: p.start, PartitionDuration: s.dur, Records: h.recs}
		data := seg.Marshal(nil)
		name := fileName(p.start, h.seq, "seg")
		if err := fsutil.WriteFileAtomic(s.opts.Dir, name, data); err != nil {
			return fmt.Errorf("seal partition %d: %w", p.start, err)
		}
		hdr, err := readSegmentHeader(data)
		if err != nil {
			panic(fmt.Sprintf("BUG: segment just written does not parse: %v", err))
		}
		p.segs = append(p.segs, segmentMeta{
			path: filepath.Join(s.opts.Dir, name), seq: h.seq,
			minT: hdr.MinT, maxT: hdr.MaxT, count: len(h.recs), size: int64(len(data)),
		})
	}
	p.head = nil
	return nil
}

// Flush seals every open partition now, so all records are in compressed
// segments. Later appends to those partitions open new WAL generations.
func (s *Store) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	var errs []error
	for _, p := range s.sortedParts() {
		if err := s.seal(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, s.truncateLog())...)
}

// ApplyRetention removes every partition that ends at or before
// now − Retention: its segments and its WAL. Later appends into a removed
// partition fail with ErrOutOfRetention. A no-op when Retention is 0.
// Options.RetentionHold can keep a partition for a later pass; its open
// WAL is then sealed first.
func (s *Store) ApplyRetention(now time.Time) error {
	if s.opts.Retention == 0 {
		return nil
	}
	cutoff := now.UnixMilli() - s.opts.Retention.Milliseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.cutoff = max(s.cutoff, cutoff)
	var errs []error
	for start, p := range s.parts {
		if start+s.dur > s.cutoff {
			continue
		}
		if s.opts.RetentionHold != nil && s.held(p, &errs) {
			continue
		}
		// The drop goes into the WAL first, so that a replay after a crash
		// does not bring back the head's records.
		if err := s.logDrop(start); err != nil {
			errs = append(errs, fmt.Errorf("retention: %w", err))
			continue
		}
		p.head = nil
		kept := p.segs[:0]
		for _, m := range p.segs {
			if err := os.Remove(m.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("retention: %w", err))
				kept = append(kept, m)
			}
		}
		p.segs = kept
		if len(p.segs) == 0 {
			delete(s.parts, start)
		}
	}
	return errors.Join(append(errs, s.truncateLog())...)
}

// logDrop writes and syncs a drop record for the partition at start.
// Called with s.mu held.
func (s *Store) logDrop(start int64) error {
	if s.failed != nil {
		return fmt.Errorf("store failed earlier: %w", s.failed)
	}
	seq, _, err := s.wal.write([][]byte{appendDrop(nil, start)})
	if err == nil {
		err = s.wal.syncTo(seq)
	}
	if err != nil {
		s.fail(err)
	}
	return err
}

// held seals p's open WAL and reports whether RetentionHold keeps any of
// its segments. A partition whose WAL does not seal is kept: removing it
// would drop records the hold never saw.
func (s *Store) held(p *partition, errs *[]error) bool {
	if p.head != nil {
		if err := s.seal(p); err != nil {
			*errs = append(*errs, fmt.Errorf("retention: %w", err))
			return true
		}
	}
	for _, m := range p.segs {
		if s.opts.RetentionHold(s.segmentRef(p.start, m)) {
			return true
		}
	}
	return false
}

func (s *Store) retentionLoop() {
	defer s.bg.Done()
	t := time.NewTicker(s.opts.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			if err := s.ApplyRetention(now); err != nil && !errors.Is(err, ErrClosed) {
				s.log.Error("records: apply retention", "err", err)
			}
		}
	}
}

// Stats describe what the store holds.
type Stats struct {
	Records      int64 // stored records, head and segments
	HeadRecords  int64 // records in open WAL generations
	Partitions   int
	Segments     int
	WALBytes     int64 // batches of the open WAL generations (what sealing moves into segments)
	WALDiskBytes int64 // files of the WAL directory: sealed batches too until truncated
	SegmentBytes int64
	BytesOnDisk  int64 // WALDiskBytes + SegmentBytes
	MaxTime      int64 // newest record time seen, Unix ms; 0 when empty
}

// Stats returns current counts and sizes.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{Partitions: len(s.parts)}
	if s.hasData {
		st.MaxTime = s.maxT
	}
	for _, p := range s.parts {
		for _, m := range p.segs {
			st.Segments++
			st.Records += int64(m.count)
			st.SegmentBytes += m.size
		}
		if p.head != nil {
			st.HeadRecords += int64(len(p.head.recs))
			st.WALBytes += p.head.bytes
		}
	}
	if s.wal != nil {
		if n, err := s.wal.w.Size(); err == nil {
			st.WALDiskBytes = n
		}
	}
	st.Records += st.HeadRecords
	st.BytesOnDisk = st.WALDiskBytes + st.SegmentBytes
	return st
}

// Close stops background work, syncs and closes the WAL and releases the
// directory. It does not seal: the next Open replays the WAL.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.bg.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		s.closeErr = errors.Join(s.closeFiles(), s.unlock())
	})
	return s.closeErr
}

func (s *Store) closeFiles() error {
	if s.wal == nil {
		return nil
	}
	l := s.wal
	s.wal = nil
	if s.failed != nil {
		// The writer's page state after the failed write is unknown:
		// flushing it could add garbage. What is on disk is read again.
		l.abandon()
		return nil
	}
	return l.close()
}
