package tsdb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/wlog"

	"github.com/tailroot/tailroot/internal/wlogcut"
)

// Why writes stop after a failed WAL write, and how they resume.
//
// The Prometheus WAL (tsdb/wlog) buffers a 32 KiB page in memory. When a
// write of that page fails (ENOSPC, EIO), the page keeps what it held, and
// a record spanning pages may be half in the file and half dropped (the
// upstream "TODO" in wlog.log). The next successful flush writes that page
// after the gap: a torn record, and records of commits that were answered
// with an error. On the next start, replay stops at the torn record and
// Repair deletes everything after it, including every write acknowledged
// after the disk recovered; complete records of failed commits are
// replayed, so samples of requests answered 5xx reappear.
//
// wlog has no public way to drop a poisoned page, and a cut to a fresh
// segment (NextSegment) first flushes it. So tailroot:
//
//  1. serialises commits (appends still build their batches in parallel)
//     and, after each successful one, records where the WAL and the
//     out-of-order WBL end: the newest segment and its size, which after a
//     successful Log is exactly the end of the last acknowledged record;
//  2. on a failed commit (an error from Commit or Rollback, or the WBL's
//     writes_failed counter moving, which the head only logs) cuts both
//     logs back to those positions at once (truncate the segment, delete
//     newer ones), so a kill -9 from here on replays exactly the
//     acknowledged writes, and refuses every write with ErrUnavailable
//     (HTTP 503 with Retry-After; readiness false);
//  3. every Options.RecoverInterval writes and fsyncs a probe file of
//     Options.ProbeBytes; once that succeeds, closes the Prometheus DB under
//     the write lock (no appender or querier open), cuts the logs back again
//     (Close flushed the poisoned page), reopens it (replay, then a fresh
//     segment) and accepts writes again.
//
// A reopen starts series refs afresh, so refs handed out are tagged with
// the generation and a stale ref is ignored (the series is found by its
// labels), which keeps ref caches of callers safe.

// Errors of the write path.
var (
	// ErrUnavailable is wrapped by writes refused (and by the commit that
	// failed) while the WAL is not known to be safe, and by reads during a
	// reopen. Nothing of a write that returned it is stored; retry later.
	ErrUnavailable = errors.New("tsdb unavailable")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("tsdb closed")
)

// RetryAfter is what writers are told to wait after ErrUnavailable.
const RetryAfter = time.Second

const (
	refGenShift = 48
	refMask     = 1<<refGenShift - 1
)

func tagRef(ref storage.SeriesRef, gen uint64) storage.SeriesRef {
	if ref == 0 {
		return 0
	}
	return storage.SeriesRef(uint64(ref)&refMask | (gen&0xffff)<<refGenShift)
}

func untagRef(ref storage.SeriesRef, gen uint64) storage.SeriesRef {
	if uint64(ref)>>refGenShift != gen&0xffff {
		return 0
	}
	return ref & refMask
}

// logPos is where a write log ended after the last successful commit.
type logPos struct {
	dir       string
	seg       int // -1: no segment existed
	off       int64
	cur, next string // paths of segments seg and seg+1
}

func (p *logPos) setSeg(i int) {
	p.seg, p.cur, p.next = i, wlog.SegmentName(p.dir, i), wlog.SegmentName(p.dir, i+1)
}

func currentPos(dir string) (logPos, error) {
	p := logPos{dir: dir, seg: -1}
	_, last, err := wlog.Segments(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("list segments of %s: %w", dir, err)
	}
	if last < 0 {
		return p, nil
	}
	p.setSeg(last)
	return p, p.stat()
}

func (p *logPos) stat() error {
	fi, err := os.Stat(p.cur)
	if err != nil {
		return fmt.Errorf("stat wal segment: %w", err)
	}
	p.off = fi.Size()
	return nil
}

// advance follows the log to its newest segment and size. Segments are cut
// by the commit being recorded or by head truncation; never more than a few.
func (p *logPos) advance() error {
	if p.seg < 0 {
		np, err := currentPos(p.dir)
		*p = np
		return err
	}
	for {
		if _, err := os.Stat(p.next); err != nil {
			break
		}
		p.setSeg(p.seg + 1)
	}
	err := p.stat()
	if errors.Is(err, fs.ErrNotExist) {
		// Head truncation removed the segment, and the next one too
		// (the WBL's truncation after an out-of-order compaction cuts
		// segments past p.next): list the log again.
		np, err := currentPos(p.dir)
		*p = np
		return err
	}
	return err
}

// cut removes everything written after p: newer segments, and the tail of
// segment p.seg (internal/wlogcut).
func (p logPos) cut() error {
	return wlogcut.Cut(p.dir, p.seg, p.off)
}

// refusal is why writes are refused.
type refusal struct {
	err    error
	since  time.Time
	reopen bool // a write failed: the DB must be reopened; else space is low
}

// writeGuard serialises commits and keeps the positions of the last
// acknowledged write.
type writeGuard struct {
	mu       sync.Mutex
	wal, wbl logPos
	wblFails float64 // the WBL's writes_failed after the last commit
	reg      *ownedRegisterer
	refuse   atomic.Pointer[refusal]
	down     atomic.Bool // the last reopen failed: nothing is served
	kick     chan struct{}
}

// reset records the positions after an open; the caller holds g.mu or has
// not shared the DB yet.
func (g *writeGuard) reset(dir string, reg *ownedRegisterer) error {
	var err error
	if g.wal, err = currentPos(filepath.Join(dir, "wal")); err != nil {
		return err
	}
	if g.wbl, err = currentPos(filepath.Join(dir, wlog.WblDirName)); err != nil {
		return err
	}
	g.reg = reg
	g.wblFails = reg.wblFailedWrites()
	return nil
}

func (g *writeGuard) refused() error {
	if r := g.refuse.Load(); r != nil {
		return fmt.Errorf("%w: writes are refused since %s after a failed write (%v); they resume once the disk accepts writes and the WAL is reopened",
			ErrUnavailable, r.since.UTC().Format(time.RFC3339), r.err)
	}
	return nil
}

// commit runs fn (a Commit, Rollback or Delete of the Prometheus DB of
// generation gen) as the only writer, and turns any failure into a refusal.
// rollback, if not nil, ends the appender when fn is refused: the head
// creates series at Append, and only a Commit or Rollback logs their
// records, so an appender left open would leave series that later samples
// refer to but the WAL does not know.
func (g *writeGuard) commit(db *DB, fn, rollback func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.refuse.Load(); r != nil {
		// While a reopen is pending the WAL must not be written at all:
		// the reopened head forgets these series anyway.
		if !r.reopen && rollback != nil {
			_ = g.run(db, rollback)
		}
		return g.refused()
	}
	if err := db.checkFree(); err != nil {
		g.refuse.Store(&refusal{err: err, since: time.Now()})
		db.refusing.Set(1)
		db.logger.Warn("tsdb: refusing writes until the disk has room again", "err", err)
		g.kickRecovery()
		if rollback != nil {
			_ = g.run(db, rollback)
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return g.run(db, fn)
}

// run runs one write; on success it records where the logs end, on
// failure it cuts them back there and refuses writes until a reopen. The
// caller holds g.mu.
func (g *writeGuard) run(db *DB, fn func() error) error {
	err := callRecovering(fn)
	// A failed WAL write fails the commit; a failed WBL write is only
	// logged by the head, and counted.
	wblF := g.reg.wblFailedWrites()
	if err == nil && wblF == g.wblFails {
		if err = errors.Join(g.wal.advance(), g.wbl.advance()); err == nil {
			return nil
		}
	}
	if err == nil {
		err = errors.New("write to the out-of-order WBL failed")
	}
	g.wblFails = wblF
	db.failures.Inc()
	cutErr := errors.Join(g.wal.cut(), g.wbl.cut())
	g.refuse.Store(&refusal{err: err, since: time.Now(), reopen: true})
	db.refusing.Set(1)
	db.logger.Error("tsdb: write failed; WAL cut back to the last acknowledged write, refusing writes until the disk accepts writes and the TSDB is reopened",
		"err", err, "wal_segment", g.wal.seg, "wal_offset", g.wal.off, "cut_err", cutErr)
	g.kickRecovery()
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func (g *writeGuard) kickRecovery() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// callRecovering runs fn, turning a panic into an error. The head's chunk
// writer panics when a head chunk cannot be written (ENOSPC): the commit
// then failed, and the head may hold locks it never releases, so the DB is
// reopened as after any failed commit (or, if a lock is never released, the
// reopen waits and Healthy reports it).
func callRecovering(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in the TSDB commit: %v", r)
		}
	}()
	return fn()
}

// checkFree returns an error when the data directory's filesystem has less
// than Options.MinFreeBytes available.
func (db *DB) checkFree() error {
	if db.opts.MinFreeBytes < 0 {
		return nil
	}
	free, err := freeBytes(db.opts.Dir)
	if err != nil {
		return err
	}
	if free < db.opts.MinFreeBytes {
		return fmt.Errorf("%d bytes free in %s, below the minimum of %d", free, db.opts.Dir, db.opts.MinFreeBytes)
	}
	return nil
}

// Ready returns nil when writes are accepted, or why not: the WAL guard
// refuses them, or the metadata store could not be written (writes that
// carry metadata get 503 until it can).
func (db *DB) Ready() error {
	if db.closed.Load() {
		return ErrClosed
	}
	if err := db.w.refused(); err != nil {
		return err
	}
	if db.Metadata != nil {
		return db.Metadata.Ready()
	}
	return nil
}

// Healthy returns nil unless the TSDB is closed or could not be reopened
// after a failed write (then neither reads nor writes are served).
func (db *DB) Healthy() error {
	if db.closed.Load() {
		return ErrClosed
	}
	if db.w.down.Load() {
		return fmt.Errorf("%w: the TSDB could not be reopened after a failed write yet", ErrUnavailable)
	}
	return nil
}

// startRecovery starts the loop that reopens the DB after failed writes.
func (db *DB) startRecovery() {
	db.w.kick = make(chan struct{}, 1)
	db.bg.Add(1)
	go db.recoverLoop()
}

func (db *DB) recoverLoop() {
	defer db.bg.Done()
	for {
		select {
		case <-db.stopc:
			return
		case <-db.w.kick:
		}
		t := time.NewTicker(db.opts.RecoverInterval)
		disabled := false
		for {
			// After a failed write, compactions would truncate the WAL,
			// which flushes the poisoned page; the reopened DB has them
			// enabled again. A refusal on low space leaves them on.
			if r := db.w.refuse.Load(); !disabled && r != nil && r.reopen {
				if pdb, _, release, err := db.lease(); err == nil {
					pdb.DisableCompactions()
					release()
					disabled = true
				}
			}
			if db.tryReopen() {
				break
			}
			select {
			case <-db.stopc:
				t.Stop()
				return
			case <-t.C:
			}
		}
		t.Stop()
	}
}

// tryReopen reopens the DB on the logs cut back to the last acknowledged
// write, if the disk takes a probe write.
func (db *DB) tryReopen() bool {
	if err := errors.Join(db.checkFree(), probeSpace(db.opts.Dir, db.opts.ProbeBytes)); err != nil {
		db.logger.Debug("tsdb: disk does not accept writes yet", "err", err)
		return false
	}
	g := &db.w
	if r := g.refuse.Load(); r != nil && !r.reopen {
		// Nothing failed: the logs are as the last commit left them.
		g.mu.Lock()
		defer g.mu.Unlock()
		if r := g.refuse.Load(); r != nil && !r.reopen {
			g.refuse.Store(nil)
			db.refusing.Set(0)
			db.logger.Info("tsdb: the disk has room again; accepting writes")
			return true
		}
		return false // a reopen became necessary; the next tick does it
	}
	if !db.drain() {
		return true // closed
	}
	defer db.mu.Unlock()
	if db.closed.Load() {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	start := time.Now()
	if db.cur != nil {
		if err := db.cur.Close(); err != nil {
			db.logger.Warn("tsdb: close after a failed write", "err", err)
		}
		db.cur = nil
		db.reg.unregisterAll()
	}
	if err := errors.Join(g.wal.cut(), g.wbl.cut()); err != nil {
		db.logger.Error("tsdb: cut the WAL back to the last acknowledged write", "err", err)
		g.down.Store(true)
		return false
	}
	if err := db.open(); err != nil {
		db.logger.Error("tsdb: reopen after a failed write", "err", err)
		g.down.Store(true)
		return false
	}
	db.gen++
	g.down.Store(false)
	g.refuse.Store(nil)
	db.refusing.Set(0)
	db.recoveries.Inc()
	db.logger.Info("tsdb: reopened on a clean WAL; accepting writes again", "took", time.Since(start))
	return true
}

// drain takes the write lock once every lease has ended; new leases fail
// meanwhile. After Options.DrainTimeout it marks the store unhealthy and
// keeps waiting; it gives up only on Close.
func (db *DB) drain() bool {
	db.draining.Store(true)
	defer db.draining.Store(false)
	deadline := time.Now().Add(db.opts.DrainTimeout)
	for !db.mu.TryLock() {
		if time.Now().After(deadline) && !db.w.down.Load() {
			db.w.down.Store(true)
			db.logger.Error("tsdb: queriers or appenders still open; cannot reopen after a failed write", "waited", db.opts.DrainTimeout)
		}
		select {
		case <-db.stopc:
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return true
}

// probeSpace writes and fsyncs n bytes in dir, then removes them.
func probeSpace(dir string, n int64) error {
	f, err := os.CreateTemp(dir, ".space-probe-*")
	if err != nil {
		return fmt.Errorf("space probe: %w", err)
	}
	defer os.Remove(f.Name())
	buf := make([]byte, min(n, 64<<10))
	for left := n; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			_ = f.Close()
			return fmt.Errorf("space probe: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("space probe: %w", err)
	}
	return f.Close()
}

// AppenderV2 implements storage.AppendableV2. While writes are refused the
// appender fails every call with ErrUnavailable.
func (db *DB) AppenderV2(ctx context.Context) storage.AppenderV2 {
	if err := db.w.refused(); err != nil {
		return errAppender{err}
	}
	pdb, gen, err := db.tryLease()
	if err != nil {
		return errAppender{err}
	}
	return &appenderV2{db: db, gen: gen, app: pdb.AppenderV2(ctx), min: newLowest()}
}

// Appender implements storage.Appendable (the v1 interface the Prometheus
// API asks for; tailroot itself appends through AppenderV2). Refs it
// returns are not tagged: do not keep them across appenders.
func (db *DB) Appender(ctx context.Context) storage.Appender {
	pdb, gen, release, err := db.lease()
	if err != nil {
		return errAppenderV1{errAppender{err}}
	}
	return &appenderV1{Appender: pdb.Appender(ctx), db: db, gen: gen, release: release, min: newLowest()}
}

// appenderV2 holds a lease (a read lock of db.mu) until Commit or
// Rollback; like any appender it is used by one goroutine.
type appenderV2 struct {
	db       *DB
	gen      uint64
	app      storage.AppenderV2
	released bool
	min      lowest
}

func (a *appenderV2) release() {
	if !a.released {
		a.released = true
		a.db.mu.RUnlock()
	}
}

func (a *appenderV2) Append(ref storage.SeriesRef, ls labels.Labels, st, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts storage.AOptions) (storage.SeriesRef, error) {
	a.min.see(t)
	r, err := a.app.Append(untagRef(ref, a.gen), ls, st, t, v, h, fh, opts)
	return tagRef(r, a.gen), err
}

func (a *appenderV2) AppendExemplars(ref storage.SeriesRef, ls labels.Labels, exs []exemplar.Exemplar) (storage.SeriesRef, error) {
	ea, ok := a.app.(storage.ExemplarAppenderV2)
	if !ok {
		return 0, fmt.Errorf("appender %T does not append exemplars", a.app)
	}
	r, err := ea.AppendExemplars(untagRef(ref, a.gen), ls, exs)
	return tagRef(r, a.gen), err
}

func (a *appenderV2) GetRef(ls labels.Labels, hash uint64) (storage.SeriesRef, labels.Labels) {
	if g, ok := a.app.(storage.GetRef); ok {
		r, l := g.GetRef(ls, hash)
		return tagRef(r, a.gen), l
	}
	return 0, labels.EmptyLabels()
}

func (a *appenderV2) Commit() error {
	defer a.release()
	err := a.db.w.commit(a.db, a.app.Commit, a.app.Rollback)
	if err == nil {
		a.db.notifyWritten(a.min.t)
	}
	return err
}

func (a *appenderV2) Rollback() error {
	defer a.release()
	return a.db.w.commit(a.db, a.app.Rollback, a.app.Rollback)
}

type appenderV1 struct {
	storage.Appender
	db      *DB
	gen     uint64
	release func()
	min     lowest
}

func (a *appenderV1) Commit() error {
	defer a.release()
	err := a.db.w.commit(a.db, a.Appender.Commit, a.Appender.Rollback)
	if err == nil {
		a.db.notifyWritten(a.min.t)
	}
	return err
}

func (a *appenderV1) Rollback() error {
	defer a.release()
	return a.db.w.commit(a.db, a.Appender.Rollback, a.Appender.Rollback)
}

// errAppender refuses everything with err.
type errAppender struct{ err error }

func (a errAppender) Append(storage.SeriesRef, labels.Labels, int64, int64, float64, *histogram.Histogram, *histogram.FloatHistogram, storage.AOptions) (storage.SeriesRef, error) {
	return 0, a.err
}

func (a errAppender) AppendExemplars(storage.SeriesRef, labels.Labels, []exemplar.Exemplar) (storage.SeriesRef, error) {
	return 0, a.err
}
func (a errAppender) Commit() error   { return a.err }
func (a errAppender) Rollback() error { return nil }

// errAppenderV1 is errAppender for the v1 interface.
type errAppenderV1 struct{ errAppender }

func (a errAppenderV1) Append(storage.SeriesRef, labels.Labels, int64, float64) (storage.SeriesRef, error) {
	return 0, a.err
}
func (errAppenderV1) SetOptions(*storage.AppendOptions) {}
func (a errAppenderV1) AppendExemplar(storage.SeriesRef, labels.Labels, exemplar.Exemplar) (storage.SeriesRef, error) {
	return 0, a.err
}

func (a errAppenderV1) AppendHistogram(storage.SeriesRef, labels.Labels, int64, *histogram.Histogram, *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return 0, a.err
}

func (a errAppenderV1) UpdateMetadata(storage.SeriesRef, labels.Labels, metadata.Metadata) (storage.SeriesRef, error) {
	return 0, a.err
}

func (a errAppenderV1) AppendSTZeroSample(storage.SeriesRef, labels.Labels, int64, int64) (storage.SeriesRef, error) {
	return 0, a.err
}

var (
	_ storage.Appender           = errAppenderV1{}
	_ storage.ExemplarAppenderV2 = (*appenderV2)(nil)
	_ storage.ExemplarAppenderV2 = errAppender{}
)

// ownedRegisterer registers on reg and remembers what it registered, so
// that a reopen can unregister the closed DB's metrics before the new DB
// registers its own. It also keeps the WAL's and WBL's writes_failed
// counters: the head only logs a failed WBL write.
type ownedRegisterer struct {
	reg prometheus.Registerer

	mu        sync.Mutex
	owned     []prometheus.Collector
	wblFailed prometheus.Collector
	ch        chan prometheus.Metric // reused by wblFailedWrites
}

func newOwnedRegisterer(reg prometheus.Registerer) *ownedRegisterer {
	return &ownedRegisterer{reg: reg, ch: make(chan prometheus.Metric, 4)}
}

const wblFailedName = `"prometheus_tsdb_out_of_order_wbl_writes_failed_total"`

func (r *ownedRegisterer) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owned = append(r.owned, c)
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if strings.Contains(d.String(), wblFailedName) {
			r.wblFailed = c
		}
	}
	return nil
}

func (r *ownedRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *ownedRegisterer) Unregister(c prometheus.Collector) bool {
	return r.reg.Unregister(c)
}

func (r *ownedRegisterer) unregisterAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.owned {
		r.reg.Unregister(c)
	}
	r.owned, r.wblFailed = nil, nil
}

// wblFailedWrites reads the WBL's writes_failed counter.
func (r *ownedRegisterer) wblFailedWrites() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wblFailed == nil {
		return 0
	}
	r.wblFailed.Collect(r.ch)
	var v float64
	for len(r.ch) > 0 {
		var d dto.Metric
		if (<-r.ch).Write(&d) == nil && d.Counter != nil {
			v += d.Counter.GetValue()
		}
	}
	return v
}

func (a errAppenderV1) AppendHistogramSTZeroSample(storage.SeriesRef, labels.Labels, int64, int64, *histogram.Histogram, *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return 0, a.err
}
