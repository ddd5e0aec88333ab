package evidence

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"

	"github.com/tailroot/tailroot/internal/fsutil"
)

// Options configure a Store. Every field says what its zero value means.
type Options struct {
	// Dir holds the store's files. Required; created if missing.
	Dir string
	// Retention is how long items are kept, measured from Now to the end
	// of an item's span. 0 keeps items forever.
	Retention time.Duration
	// PartitionDuration is the time span of one partition. 0 means 1 h.
	// Reopening with another duration is fine: partitions are named by
	// their start and each keeps the items appended to it.
	PartitionDuration time.Duration
	// Now is the retention clock; nil means time.Now.
	Now func() time.Time
	// Logger receives what reopening cut off and retention failures; nil
	// discards them.
	Logger *slog.Logger
}

// DefaultOptions returns a 7-day retention and 1 h partitions. Dir must
// still be set.
func DefaultOptions() Options {
	return Options{Retention: 7 * 24 * time.Hour, PartitionDuration: time.Hour}
}

// retentionEvery is how often Append deletes expired partitions.
const retentionEvery = time.Minute

// Store is the evidence store. It is safe for concurrent use.
type Store struct {
	opts   Options
	dur    int64 // partition duration, ns
	log    *slog.Logger
	unlock func() error

	mu            sync.RWMutex
	parts         map[int64]*partition // by start, Unix ns
	intern        map[string]string
	stats         Stats
	lastRetention time.Time
	closed        bool
}

// partition is one wlog directory and the index of its records.
type partition struct {
	start int64 // Unix ns
	dir   string
	segs  map[int]*segment
	w     *wlog.WL // nil until the first Append to it since Open
	maxTo int64
	idx   []entry
}

// segment is a read descriptor of one wlog segment (Append fsyncs through
// it too) and the bytes of it that are known whole.
type segment struct {
	f    *os.File
	size int64
}

// entry indexes one record: what queries filter and sort on, and where
// its JSON is.
type entry struct {
	from, to int64 // Unix ns
	latency  float64
	seg      int32
	off      int64  // where readRecordAt finds the record in its segment
	jsonOff  uint32 // of the JSON in the record's payload
	n        uint32 // JSON length
	pid      uint32
	kind     string // interned, like node, comm and probe
	node     string
	comm     string
	probe    string
}

// Stats describe the store.
type Stats struct {
	Items, Partitions int
	Bytes             int64 // size of the partitions' wlog segments
	// CorruptBytes were cut off partition logs, or left behind in
	// version 1 files converted, on Open (torn writes, corruption) since
	// the store was opened.
	CorruptBytes int64
}

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("evidence store closed")

// Open opens or creates the store in opts.Dir and rebuilds the index.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("evidence store: Options.Dir is empty")
	}
	if opts.PartitionDuration <= 0 {
		opts.PartitionDuration = time.Hour
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("evidence store: retention %v is negative", opts.Retention)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("evidence store: %w", err)
	}
	unlock, err := fsutil.LockDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("evidence store: %w", err)
	}
	s := &Store{
		opts: opts, dur: int64(opts.PartitionDuration), log: log, unlock: unlock,
		parts: map[int64]*partition{}, intern: map[string]string{},
	}
	if err := s.openParts(); err != nil {
		s.closeFiles()
		_ = unlock()
		return nil, err
	}
	if _, err := s.applyRetention(opts.Now()); err != nil {
		log.Warn("evidence store: retention", "err", err)
	}
	return s, nil
}

// openParts converts version 1 files, removes what an interrupted
// conversion left and opens every partition directory.
func (s *Store) openParts() error {
	ents, err := os.ReadDir(s.opts.Dir)
	if err != nil {
		return fmt.Errorf("evidence store: %w", err)
	}
	var v1, dirs []int64
	for _, e := range ents {
		start, kind, ok := parseName(e.Name())
		switch {
		case !ok:
		case kind == nameV1 && !e.IsDir():
			v1 = append(v1, start)
		case kind == nameTmp && e.IsDir():
			if err := os.RemoveAll(filepath.Join(s.opts.Dir, e.Name())); err != nil {
				return fmt.Errorf("evidence store: %w", err)
			}
		case kind == nameDir && e.IsDir():
			dirs = append(dirs, start)
		}
	}
	for _, start := range v1 {
		if err := s.migrateV1(start); err != nil {
			return err
		}
		if !slices.Contains(dirs, start) {
			dirs = append(dirs, start)
		}
	}
	for _, start := range dirs {
		p, err := s.openPartition(start)
		if err != nil {
			return err
		}
		s.parts[start] = p
	}
	return nil
}

const tmpSuffix = ".tmp"

// Kinds of names in Dir.
const (
	nameDir = iota // evidence-<start>: a partition's wlog directory
	nameV1         // evidence-<start>.log: a version 1 partition file
	nameTmp        // evidence-<start>.tmp: a conversion in progress
)

func partName(start int64) string {
	return "evidence-" + strconv.FormatInt(start/int64(time.Millisecond), 10)
}

func partFileV1(start int64) string { return partName(start) + ".log" }

func parseName(name string) (start int64, kind int, ok bool) {
	v, ok := strings.CutPrefix(name, "evidence-")
	if !ok {
		return 0, 0, false
	}
	kind = nameDir
	if w, ok := strings.CutSuffix(v, ".log"); ok {
		v, kind = w, nameV1
	} else if w, ok := strings.CutSuffix(v, tmpSuffix); ok {
		v, kind = w, nameTmp
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 || ms > 1<<62/int64(time.Millisecond) {
		return 0, 0, false
	}
	return ms * int64(time.Millisecond), kind, true
}

// openPartition opens the directory of the partition starting at start
// (making it if missing) and indexes its records, cutting the log at the
// first bad one.
func (s *Store) openPartition(start int64) (*partition, error) {
	dir := filepath.Join(s.opts.Dir, partName(start))
	p := &partition{start: start, dir: dir, segs: map[int]*segment{}}
	if err := os.Mkdir(dir, 0o755); err == nil {
		if err := fsutil.SyncDir(s.opts.Dir); err != nil {
			return nil, err
		}
		return p, nil
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("evidence store: %w", err)
	}
	if err := s.index(p); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// index reads a partition's segments into p.idx. At the first record that
// is torn, fails its checksum or does not decode, the segment is cut at
// the end of the record before and every later segment is removed: what
// follows damage cannot be trusted to be framed right.
func (s *Store) index(p *partition) error {
	first, last, err := wlog.Segments(p.dir)
	if err != nil {
		return fmt.Errorf("evidence store: %s: %w", p.dir, err)
	}
	if first < 0 {
		return nil
	}
	for k := first; k <= last; k++ {
		path := wlog.SegmentName(p.dir, k)
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("evidence store: %w", err)
		}
		sg := &segment{f: f}
		p.segs[k] = sg
		good, data, cause := scanSegment(f, func(payload []byte, off int64) error {
			h, jsonOff, err := decodeHeader(payload)
			if err != nil {
				return err
			}
			s.addEntry(p, h, k, off, uint32(jsonOff), uint32(len(payload)-jsonOff))
			return nil
		})
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("evidence store: %w", err)
		}
		sg.size = fi.Size()
		if cause == nil {
			continue
		}
		// Lost is what held data: the zeros wlog pads a page with when it
		// closes a segment are not counted.
		lost := data - good
		for j := k + 1; j <= last; j++ {
			later := wlog.SegmentName(p.dir, j)
			if b, err := os.ReadFile(later); err == nil {
				lost += int64(strings.LastIndexFunc(string(b), func(c rune) bool { return c != 0 }) + 1)
			}
			if err := os.Remove(later); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("evidence store: %w", err)
			}
		}
		s.log.Warn("evidence store: cut a partition log at a bad record", "segment", path, "offset", good, "bytes_lost", lost, "err", cause)
		if err := truncateSync(path, good); err != nil {
			return fmt.Errorf("evidence store: truncate %s: %w", path, err)
		}
		if err := fsutil.SyncDir(p.dir); err != nil {
			return err
		}
		sg.size = good
		s.stats.CorruptBytes += lost
		return nil
	}
	return nil
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
	return errors.Join(err, f.Close())
}

// writer returns the partition's wlog writer, opening it (a new segment
// after the last) on first use.
func (p *partition) writer() (*wlog.WL, error) {
	if p.w != nil {
		return p.w, nil
	}
	w, err := wlog.NewSize(nil, nil, p.dir, segmentBytes, compression.None)
	if err != nil {
		return nil, fmt.Errorf("evidence store: open %s: %w", p.dir, err)
	}
	if err := fsutil.SyncDir(p.dir); err != nil {
		_ = w.Close()
		return nil, err
	}
	p.w = w
	return w, nil
}

// seg returns the read descriptor of segment k, opening it if needed,
// with its size as of now.
func (p *partition) seg(k int) (*segment, error) {
	sg := p.segs[k]
	if sg == nil {
		f, err := os.Open(wlog.SegmentName(p.dir, k))
		if err != nil {
			return nil, fmt.Errorf("evidence store: %w", err)
		}
		sg = &segment{f: f}
		p.segs[k] = sg
	}
	fi, err := sg.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("evidence store: %w", err)
	}
	sg.size = fi.Size()
	return sg, nil
}

// bytes is the size of the partition's segments.
func (p *partition) bytes() int64 {
	var n int64
	for _, sg := range p.segs {
		n += sg.size
	}
	return n
}

func (p *partition) close() error {
	var errs []error
	if p.w != nil {
		errs = append(errs, p.w.Close())
		p.w = nil
	}
	for _, sg := range p.segs {
		errs = append(errs, sg.f.Close())
	}
	return errors.Join(errs...)
}

func (s *Store) addEntry(p *partition, h header, seg int, off int64, jsonOff, n uint32) {
	p.idx = append(p.idx, entry{
		from: h.from, to: h.to, latency: h.latency, seg: int32(seg), off: off, jsonOff: jsonOff, n: n, pid: h.pid,
		kind: s.str(h.kind), node: s.str(h.node), comm: s.str(h.comm), probe: s.str(h.probe),
	})
	p.maxTo = max(p.maxTo, h.to)
}

// str interns a label-like string: nodes, kinds, comms and probes repeat
// across many items.
func (s *Store) str(v string) string {
	if w, ok := s.intern[v]; ok {
		return w
	}
	s.intern[v] = v
	return v
}

// Append writes items (checked by ParseBatch or Item.Validate) and fsyncs
// them before returning. On an error none of them is indexed; what was
// written is cut off the logs.
func (s *Store) Append(items []Item) error {
	if len(items) == 0 {
		return nil
	}
	type pending struct {
		buf     []byte // the bodies, one after the other
		ends    []int
		bodies  [][]byte
		hdrs    []header
		jsonOff []uint32
	}
	byPart := map[int64]*pending{}
	for i := range items {
		it := &items[i]
		js, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("evidence store: encode item %d: %w", i, err)
		}
		h := headerOf(it)
		start := h.from - h.from%s.dur
		pd := byPart[start]
		if pd == nil {
			pd = &pending{}
			byPart[start] = pd
		}
		from := len(pd.buf)
		pd.buf = appendBody(pd.buf, h, js)
		pd.ends = append(pd.ends, len(pd.buf))
		pd.hdrs = append(pd.hdrs, h)
		pd.jsonOff = append(pd.jsonOff, uint32(len(pd.buf)-from-len(js)))
	}
	for _, pd := range byPart {
		from := 0
		for _, end := range pd.ends {
			pd.bodies = append(pd.bodies, pd.buf[from:end])
			from = end
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	starts := make([]int64, 0, len(byPart))
	for st := range byPart {
		starts = append(starts, st)
	}
	slices.Sort(starts)
	type pos struct{ seg, off int }
	before := map[int64]pos{} // partition → its log's end before this Append
	fail := func(err error) error {
		for st, at := range before {
			s.parts[st].undo(at.seg, int64(at.off))
		}
		return err
	}
	for _, st := range starts {
		p := s.parts[st]
		if p == nil {
			var err error
			if p, err = s.openPartition(st); err != nil {
				return fail(err)
			}
			s.parts[st] = p
		}
		w, err := p.writer()
		if err != nil {
			return fail(err)
		}
		seg, off, err := w.LastSegmentAndOffset()
		if err != nil {
			return fail(fmt.Errorf("evidence store: %s: %w", p.dir, err))
		}
		before[st] = pos{seg, off}
		if err := w.Log(byPart[st].bodies...); err != nil {
			return fail(fmt.Errorf("evidence store: write %s: %w", p.dir, err))
		}
	}
	// wlog fsyncs a segment only when it cuts it, and then asynchronously:
	// the segments written to are fsynced here, and the directory when
	// wlog cut a segment.
	locs := map[int64][]pos{}
	for _, st := range starts {
		p, pd, at := s.parts[st], byPart[st], before[st]
		last, _, err := p.w.LastSegmentAndOffset()
		if err != nil {
			return fail(fmt.Errorf("evidence store: %s: %w", p.dir, err))
		}
		for k := at.seg; k <= last; k++ {
			sg, err := p.seg(k)
			if err != nil {
				return fail(err)
			}
			if err := sg.f.Sync(); err != nil {
				return fail(fmt.Errorf("evidence store: sync %s: %w", sg.f.Name(), err))
			}
		}
		if last > at.seg {
			if err := fsutil.SyncDir(p.dir); err != nil {
				return fail(err)
			}
		}
		// Where each record landed: walk what was written, moving to the
		// next segment where one ends.
		cur := at
		var buf []byte
		for i, body := range pd.bodies {
			for {
				sg := p.segs[cur.seg]
				got, end, err := readRecordAt(sg.f, int64(cur.off), sg.size, len(body), buf)
				if err == nil && string(got) == string(body) {
					locs[st] = append(locs[st], cur)
					cur.off, buf = int(end), got
					break
				}
				if cur.seg >= last {
					return fail(fmt.Errorf("evidence store: %s: record %d not found where it was written: %v", p.dir, i, err))
				}
				cur = pos{cur.seg + 1, 0}
			}
		}
	}
	for _, st := range starts {
		p, pd := s.parts[st], byPart[st]
		for i, h := range pd.hdrs {
			at := locs[st][i]
			s.addEntry(p, h, at.seg, int64(at.off), pd.jsonOff[i], uint32(len(pd.bodies[i]))-pd.jsonOff[i])
		}
	}
	if now := s.opts.Now(); now.Sub(s.lastRetention) >= retentionEvery {
		if _, err := s.applyRetention(now); err != nil {
			s.log.Warn("evidence store: retention", "err", err)
		}
		s.closeIdleWriters(now)
	}
	return nil
}

// closeIdleWriters closes the wlog writers of partitions that ended more
// than a partition ago: agents push what just happened, so those rarely
// get more, and a writer holds a page buffer, a descriptor and a
// goroutine. A late item opens a new one (and a new segment).
func (s *Store) closeIdleWriters(now time.Time) {
	for st, p := range s.parts {
		if p.w == nil || st+2*s.dur > now.UnixNano() {
			continue
		}
		if err := p.w.Close(); err != nil {
			s.log.Warn("evidence store: close an idle partition writer", "dir", p.dir, "err", err)
		}
		p.w = nil
		// Close padded the last page; the size is what Stats reports.
		if _, last, err := wlog.Segments(p.dir); err == nil && last >= 0 {
			if _, err := p.seg(last); err != nil {
				s.log.Warn("evidence store: stat a segment", "dir", p.dir, "err", err)
			}
		}
	}
}

// undo cuts what an Append that failed wrote after segment seg, offset
// off. The writer is closed first (its page no longer matches the file);
// the next Append opens a new one.
func (p *partition) undo(seg int, off int64) {
	if p.w != nil {
		_ = p.w.Close()
		p.w = nil
	}
	for k, sg := range p.segs {
		if k > seg {
			_ = sg.f.Close()
			_ = os.Remove(sg.f.Name())
			delete(p.segs, k)
		}
	}
	_, last, _ := wlog.Segments(p.dir)
	for k := seg + 1; k <= last; k++ {
		_ = os.Remove(wlog.SegmentName(p.dir, k))
	}
	_ = truncateSync(wlog.SegmentName(p.dir, seg), off)
	if sg := p.segs[seg]; sg != nil {
		sg.size = off
	}
}

// Query selects items.
type Query struct {
	// Start and End bound the window: items whose span overlaps
	// [Start, End] match. A zero Start or End leaves that side open.
	Start, End time.Time
	// Kind, Node, Comm and Probe match exactly; "" matches any.
	Kind, Node, Comm, Probe string
	// PID matches exactly; 0 matches any.
	PID uint32
	// Limit is the most items returned; 0 means all.
	Limit int
	// Slowest orders by latency, slowest first (ties by time); false
	// orders by span start.
	Slowest bool
}

// Result is what Select found.
type Result struct {
	// Items are the canonical JSON of the selected items.
	Items []json.RawMessage
	// Matched counts the matching items before Limit.
	Matched int
}

// Select returns the items matching q. Items past the retention are never
// returned, whether or not their partition has been deleted yet.
func (s *Store) Select(q Query) (Result, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return Result{}, ErrClosed
	}
	lo, hi := int64(-1<<63), int64(1<<63-1)
	if !q.Start.IsZero() {
		lo = q.Start.UnixNano()
	}
	if !q.End.IsZero() {
		hi = q.End.UnixNano()
	}
	if s.opts.Retention > 0 {
		lo = max(lo, s.opts.Now().Add(-s.opts.Retention).UnixNano())
	}
	type hit struct {
		p *partition
		e *entry
	}
	var hits []hit
	for _, p := range s.parts {
		if p.start > hi || p.maxTo < lo {
			continue
		}
		for i := range p.idx {
			e := &p.idx[i]
			if e.from > hi || e.to < lo ||
				(q.Kind != "" && e.kind != q.Kind) || (q.Node != "" && e.node != q.Node) ||
				(q.Comm != "" && e.comm != q.Comm) || (q.Probe != "" && e.probe != q.Probe) ||
				(q.PID != 0 && e.pid != q.PID) {
				continue
			}
			hits = append(hits, hit{p, e})
		}
	}
	byTime := func(a, b hit) int {
		if c := cmp.Compare(a.e.from, b.e.from); c != 0 {
			return c
		}
		return cmp.Compare(a.e.to, b.e.to)
	}
	if q.Slowest {
		slices.SortFunc(hits, func(a, b hit) int {
			if c := cmp.Compare(b.e.latency, a.e.latency); c != 0 {
				return c
			}
			return byTime(a, b)
		})
	} else {
		slices.SortFunc(hits, byTime)
	}
	res := Result{Matched: len(hits)}
	if q.Limit > 0 && len(hits) > q.Limit {
		hits = hits[:q.Limit]
	}
	res.Items = make([]json.RawMessage, len(hits))
	for i, h := range hits {
		sg := h.p.segs[int(h.e.seg)]
		b, _, err := readRecordAt(sg.f, h.e.off, sg.size, int(h.e.jsonOff+h.e.n), nil)
		if err != nil || len(b) != int(h.e.jsonOff+h.e.n) {
			return Result{}, fmt.Errorf("evidence store: read %s at %d: %v", sg.f.Name(), h.e.off, err)
		}
		res.Items[i] = b[h.e.jsonOff:]
	}
	return res, nil
}

// ApplyRetention deletes the partition directories whose items all ended before
// now − Retention and returns how many it deleted.
func (s *Store) ApplyRetention(now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.applyRetention(now)
}

func (s *Store) applyRetention(now time.Time) (int, error) {
	s.lastRetention = now
	if s.opts.Retention <= 0 {
		return 0, nil
	}
	cutoff := now.Add(-s.opts.Retention).UnixNano()
	var errs []error
	n := 0
	for st, p := range s.parts {
		// A partition holds items starting before start+dur, so it is
		// complete (nothing new can arrive within retention) and expired
		// once its end and every item's end are past the cutoff.
		if p.maxTo >= cutoff || st+s.dur > cutoff {
			continue
		}
		_ = p.close()
		if err := os.RemoveAll(p.dir); err != nil {
			errs = append(errs, err)
		}
		delete(s.parts, st)
		n++
	}
	if n > 0 {
		s.intern = map[string]string{}
		for _, p := range s.parts {
			for i := range p.idx {
				e := &p.idx[i]
				e.kind, e.node, e.comm, e.probe = s.str(e.kind), s.str(e.node), s.str(e.comm), s.str(e.probe)
			}
		}
	}
	return n, errors.Join(errs...)
}

// Retention returns Options.Retention (0: items are kept forever).
func (s *Store) Retention() time.Duration { return s.opts.Retention }

// Stats returns the store's counts.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.stats
	st.Partitions = len(s.parts)
	for _, p := range s.parts {
		st.Items += len(p.idx)
		st.Bytes += p.bytes()
	}
	return st
}

// Close closes the files and releases the directory lock.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.closeFiles()
	return errors.Join(err, s.unlock())
}

func (s *Store) closeFiles() error {
	var errs []error
	for _, p := range s.parts {
		errs = append(errs, p.close())
	}
	return errors.Join(errs...)
}
