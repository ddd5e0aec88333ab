package evidence

import (
	"bufio"
	"cmp"
	"encoding/json"
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

// Options configure a Store. Every field says what its zero value means.
type Options struct {
	// Dir holds the store's files. Required; created if missing.
	Dir string
	// Retention is how long items are kept, measured from Now to the end
	// of an item's span. 0 keeps items forever.
	Retention time.Duration
	// PartitionDuration is the time span of one file. 0 means 1 h.
	// Reopening with another duration is fine: files are named by their
	// start and each keeps the items appended to it.
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

// partition is one file and the index of its records.
type partition struct {
	start int64 // Unix ns
	path  string
	f     *os.File
	size  int64
	maxTo int64
	idx   []entry
}

// entry indexes one record: what queries filter and sort on, and where
// its JSON is.
type entry struct {
	from, to int64 // Unix ns
	latency  float64
	off      int64 // of the JSON in the file
	n        uint32
	pid      uint32
	kind     string // interned, like node, comm and probe
	node     string
	comm     string
	probe    string
}

// Stats describe the store.
type Stats struct {
	Items, Partitions int
	Bytes             int64 // size of the partition files
	// CorruptBytes were cut off partition files on Open (torn writes,
	// corruption) since the store was opened.
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
	ents, err := os.ReadDir(opts.Dir)
	if err != nil {
		_ = unlock()
		return nil, fmt.Errorf("evidence store: %w", err)
	}
	for _, e := range ents {
		start, ok := parseName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		p, err := s.openPartition(start, false)
		if err != nil {
			s.closeFiles()
			_ = unlock()
			return nil, err
		}
		s.parts[start] = p
	}
	if _, err := s.applyRetention(opts.Now()); err != nil {
		log.Warn("evidence store: retention", "err", err)
	}
	return s, nil
}

func partName(start int64) string {
	return "evidence-" + strconv.FormatInt(start/int64(time.Millisecond), 10) + ".log"
}

func parseName(name string) (start int64, ok bool) {
	v, ok := strings.CutPrefix(name, "evidence-")
	if !ok {
		return 0, false
	}
	v, ok = strings.CutSuffix(v, ".log")
	if !ok {
		return 0, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 || ms > 1<<62/int64(time.Millisecond) {
		return 0, false
	}
	return ms * int64(time.Millisecond), true
}

// openPartition opens (create: makes) the file of the partition starting
// at start and indexes its records, cutting the file at the first bad one.
func (s *Store) openPartition(start int64, create bool) (*partition, error) {
	path := filepath.Join(s.opts.Dir, partName(start))
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("evidence store: open partition: %w", err)
	}
	p := &partition{start: start, path: path, f: f}
	if create {
		if _, err := f.Write([]byte(fileMagic)); err != nil {
			f.Close()
			return nil, fmt.Errorf("evidence store: write %s: %w", path, err)
		}
		p.size = int64(len(fileMagic))
		if err := fsutil.SyncDir(s.opts.Dir); err != nil {
			f.Close()
			return nil, err
		}
		return p, nil
	}
	if err := s.index(p); err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}

// index reads a partition file's records into p.idx.
func (s *Store) index(p *partition) error {
	r := bufio.NewReaderSize(p.f, 1<<16)
	magic := make([]byte, len(fileMagic))
	n, err := io.ReadFull(r, magic)
	switch {
	case err == nil && string(magic) != fileMagic:
		return fmt.Errorf("evidence store: %s: not an evidence file (magic %q)", p.path, magic)
	case err != nil && string(magic[:n]) != fileMagic[:n]:
		return fmt.Errorf("evidence store: %s: not an evidence file (magic %q)", p.path, magic[:n])
	case err != nil:
		// Created, then a crash before the magic was complete.
		s.log.Warn("evidence store: partition file without a complete header; rewriting it", "file", p.path)
		if err := p.f.Truncate(0); err != nil {
			return fmt.Errorf("evidence store: truncate %s: %w", p.path, err)
		}
		if _, err := p.f.WriteAt([]byte(fileMagic), 0); err != nil {
			return fmt.Errorf("evidence store: write %s: %w", p.path, err)
		}
		p.size = int64(len(fileMagic))
		return nil
	}
	off := int64(len(fileMagic))
	var buf []byte
	var cause error
	for {
		hdr, err := r.Peek(frameHeader)
		if len(hdr) == 0 && errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			cause = errShort
			break
		}
		size := int(uint32(hdr[0]) | uint32(hdr[1])<<8 | uint32(hdr[2])<<16 | uint32(hdr[3])<<24)
		if size > maxRecordBody {
			cause = fmt.Errorf("record length %d: over %d", size, maxRecordBody)
			break
		}
		buf = slices.Grow(buf[:0], frameHeader+size)[:frameHeader+size]
		if _, err := io.ReadFull(r, buf); err != nil {
			cause = errShort
			break
		}
		h, jsonOff, n, err := decodeRecord(buf)
		if err != nil {
			cause = err
			break
		}
		s.addEntry(p, h, off+int64(jsonOff), uint32(n-jsonOff))
		off += int64(n)
	}
	end, err := p.f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("evidence store: %s: %w", p.path, err)
	}
	if cause != nil && end > off {
		s.log.Warn("evidence store: cut a partition file at a bad record", "file", p.path, "offset", off, "bytes_lost", end-off, "err", cause)
		if err := p.f.Truncate(off); err != nil {
			return fmt.Errorf("evidence store: truncate %s: %w", p.path, err)
		}
		s.stats.CorruptBytes += end - off
	}
	p.size = off
	return nil
}

func (s *Store) addEntry(p *partition, h header, off int64, n uint32) {
	p.idx = append(p.idx, entry{
		from: h.from, to: h.to, latency: h.latency, off: off, n: n, pid: h.pid,
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
// them before returning. On an error none of them is indexed; a partial
// write is cut off the files.
func (s *Store) Append(items []Item) error {
	if len(items) == 0 {
		return nil
	}
	type pending struct {
		buf  []byte
		hdrs []header
		offs []int64 // JSON offset within buf
		lens []uint32
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
		pd.buf = appendRecord(pd.buf, h, js)
		pd.hdrs = append(pd.hdrs, h)
		pd.offs = append(pd.offs, int64(len(pd.buf)-len(js)))
		pd.lens = append(pd.lens, uint32(len(js)))
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
	written := map[int64]int64{} // partition → size before this Append
	fail := func(err error) error {
		for st, size := range written {
			p := s.parts[st]
			_ = p.f.Truncate(size)
			p.size = size
		}
		return err
	}
	for _, st := range starts {
		p := s.parts[st]
		if p == nil {
			var err error
			if p, err = s.openPartition(st, true); err != nil {
				return fail(err)
			}
			s.parts[st] = p
		}
		written[st] = p.size
		if _, err := p.f.WriteAt(byPart[st].buf, p.size); err != nil {
			return fail(fmt.Errorf("evidence store: write %s: %w", p.path, err))
		}
		p.size += int64(len(byPart[st].buf))
	}
	for _, st := range starts {
		if err := s.parts[st].f.Sync(); err != nil {
			return fail(fmt.Errorf("evidence store: sync %s: %w", s.parts[st].path, err))
		}
	}
	for _, st := range starts {
		p, pd := s.parts[st], byPart[st]
		base := written[st]
		for i, h := range pd.hdrs {
			s.addEntry(p, h, base+pd.offs[i], pd.lens[i])
		}
	}
	if now := s.opts.Now(); now.Sub(s.lastRetention) >= retentionEvery {
		if _, err := s.applyRetention(now); err != nil {
			s.log.Warn("evidence store: retention", "err", err)
		}
	}
	return nil
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
// returned, whether or not their file has been deleted yet.
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
		b := make([]byte, h.e.n)
		if _, err := h.p.f.ReadAt(b, h.e.off); err != nil {
			return Result{}, fmt.Errorf("evidence store: read %s at %d: %w", h.p.path, h.e.off, err)
		}
		res.Items[i] = b
	}
	return res, nil
}

// ApplyRetention deletes the partition files whose items all ended before
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
		_ = p.f.Close()
		if err := os.Remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
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
		st.Bytes += p.size
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
		if err := p.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
