package tsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/wlog"
)

// Options configures the series store. Every field says what its zero value
// means; start from DefaultOptions.
type Options struct {
	// Dir is the data directory. Required.
	Dir string
	// Retention is how long samples are kept. Zero or negative means the
	// Prometheus default of 15 days.
	Retention time.Duration
	// RetentionSize caps the bytes of blocks, WAL and head chunks on disk. Zero
	// or negative means no size limit.
	RetentionSize int64
	// OutOfOrderWindow accepts samples up to this far behind the newest sample
	// of a series. Zero disables out-of-order ingestion, as in Prometheus.
	OutOfOrderWindow time.Duration
	// MaxExemplars is the size of the in-memory exemplar ring. Zero disables
	// exemplar storage; negative is invalid.
	MaxExemplars int64
	// MinBlockDuration is the head block span before it is compacted to disk.
	// Zero means the Prometheus default of 2h.
	MinBlockDuration time.Duration
	// MaxBlockDuration is the largest span local compaction merges blocks
	// into. Zero means Prometheus' default: 10% of retention, at most 31
	// days. Equal to MinBlockDuration turns local compaction off, which a
	// Thanos sidecar uploading the 2h blocks requires (a block merged
	// before it was uploaded would be missing from the bucket). Values below
	// MinBlockDuration are raised to it.
	MaxBlockDuration time.Duration
	// MetadataWALRecords writes a series' metadata (type, help, unit) into
	// the WAL whenever an append carries metadata that differs from what the
	// series had, so that remote write 2.0 forwarding, which reads the WAL,
	// sends it (Prometheus' metadata-wal-records). False keeps metadata out
	// of the WAL; forwarded series then arrive without it.
	MetadataWALRecords bool
	// NoLockfile disables the directory lock file; only tests set it.
	NoLockfile bool
	// RecoverInterval is how often, after a failed write, the store checks
	// whether the disk accepts writes again and tries to reopen. Zero or
	// negative means one second.
	RecoverInterval time.Duration
	// ProbeBytes is the size of the file written and fsynced to check that
	// the disk has room again before reopening. Zero or negative means 1 MiB.
	ProbeBytes int64
	// MinFreeBytes refuses writes (ErrUnavailable) while the filesystem of
	// Dir has less free space, and accepts them again once it has; checked
	// before every commit. It keeps the WAL and the head chunk files away
	// from ENOSPC, which upstream code answers with a panic in the head
	// chunk writer. Zero means 64 MiB; negative disables the check.
	MinFreeBytes int64
	// DrainTimeout bounds how long a reopen waits for open queriers and
	// appenders; after it the store reports itself unhealthy and keeps
	// waiting. Zero or negative means one minute.
	DrainTimeout time.Duration
	// HeadMMapInterval is how often full head chunks are written from the
	// heap to the m-mapped head chunk files (the Prometheus DB does it once
	// a minute); see startHeadMMap. Zero means five seconds; negative
	// leaves it to the Prometheus DB.
	HeadMMapInterval time.Duration
}

// DefaultOptions returns the options tailroot serves with unless told
// otherwise: 15 days of retention, no size cap, a 30 minute out-of-order
// window (agents flush their disk queues late), 100k exemplars and metadata
// in the WAL (a record only when a series' metadata changes).
func DefaultOptions() Options {
	return Options{
		Retention:          15 * 24 * time.Hour,
		OutOfOrderWindow:   30 * time.Minute,
		MaxExemplars:       100000,
		RecoverInterval:    time.Second,
		ProbeBytes:         1 << 20,
		MinFreeBytes:       64 << 20,
		DrainTimeout:       time.Minute,
		MetadataWALRecords: true,
	}
}

// DB is the embedded Prometheus TSDB together with tailroot's metadata
// store. It implements storage.Storage, storage.AppendableV2 and the admin
// and status interface of the Prometheus API.
//
// The Prometheus DB inside is reopened after a failed WAL write (see
// guard.go), so it is never handed out: every method takes a lease on the
// current one.
type DB struct {
	opts   Options
	po     *ptsdb.Options
	logger *slog.Logger
	reg    *ownedRegisterer

	// mu: a read lease is held by every open appender and querier and for
	// the duration of every other call; the write lock only while the
	// Prometheus DB is closed and reopened. Leases are taken with TryRLock,
	// so nothing waits behind a reopen (and nested leases cannot deadlock):
	// they fail with ErrUnavailable instead.
	mu       sync.RWMutex
	draining atomic.Bool // a reopen waits for the leases to end
	cur      *ptsdb.DB   // nil while a reopen failed
	stats    *ptsdb.DBStats
	gen      uint64                             // incremented by every reopen; tags series refs
	head     atomic.Pointer[ptsdb.Head]         // of the last open, for Head during a reopen
	wn       atomic.Pointer[wlog.WriteNotified] // set again on every reopen
	written  atomic.Pointer[func(minT int64)]   // SetWriteListener

	w writeGuard

	stopc    chan struct{}
	bg       sync.WaitGroup
	closed   atomic.Bool
	closeErr error
	once     sync.Once

	recoveries prometheus.Counter
	failures   prometheus.Counter
	refusing   prometheus.Gauge

	Metadata *MetadataStore
}

// Open opens (creating if needed) the store in opts.Dir and replays its WAL.
func Open(opts Options, logger *slog.Logger, reg prometheus.Registerer) (*DB, error) {
	if opts.Dir == "" {
		return nil, errors.New("open tsdb: data dir is empty")
	}
	if opts.MaxExemplars < 0 {
		return nil, fmt.Errorf("open tsdb: max exemplars %d is negative", opts.MaxExemplars)
	}
	if opts.RecoverInterval <= 0 {
		opts.RecoverInterval = time.Second
	}
	if opts.ProbeBytes <= 0 {
		opts.ProbeBytes = 1 << 20
	}
	if opts.MinFreeBytes == 0 {
		opts.MinFreeBytes = 64 << 20
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = time.Minute
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	po := ptsdb.DefaultOptions()
	if opts.Retention > 0 {
		po.RetentionDuration = opts.Retention.Milliseconds()
	}
	if opts.RetentionSize > 0 {
		po.MaxBytes = opts.RetentionSize
	}
	if opts.OutOfOrderWindow > 0 {
		po.OutOfOrderTimeWindow = opts.OutOfOrderWindow.Milliseconds()
	}
	if opts.MinBlockDuration > 0 {
		po.MinBlockDuration = opts.MinBlockDuration.Milliseconds()
	}
	po.MaxBlockDuration = maxBlockDuration(opts.MaxBlockDuration, po.RetentionDuration, po.MinBlockDuration)
	po.EnableExemplarStorage = opts.MaxExemplars > 0
	po.MaxExemplars = opts.MaxExemplars
	po.NoLockfile = opts.NoLockfile
	po.EnableMetadataWALRecords = opts.MetadataWALRecords
	// Start timestamps are not stored: that needs the experimental XOR2 chunk
	// encoding, and blocks must stay readable by Thanos and Mimir.

	f := promauto.With(reg)
	db := &DB{
		opts: opts, po: po, logger: logger, reg: newOwnedRegisterer(reg),
		stopc: make(chan struct{}),
		recoveries: f.NewCounter(prometheus.CounterOpts{
			Name: "tailroot_tsdb_write_recoveries_total",
			Help: "Times the TSDB was reopened on a clean WAL after a failed write.",
		}),
		failures: f.NewCounter(prometheus.CounterOpts{
			Name: "tailroot_tsdb_write_failures_total",
			Help: "Commits that failed to reach the WAL (or the out-of-order WBL); each stops writes until the WAL is safe again.",
		}),
		refusing: f.NewGauge(prometheus.GaugeOpts{
			Name: "tailroot_tsdb_writes_refused",
			Help: "1 while writes are refused after a failed WAL write, until the TSDB is reopened on a clean WAL.",
		}),
	}
	if err := db.open(); err != nil {
		return nil, err
	}
	md, err := openMetadata(opts.Dir)
	if err != nil {
		_ = db.cur.Close()
		return nil, err
	}
	db.Metadata = md
	registerTimeGauges(reg, db)
	db.startRecovery()
	db.startHeadMMap()
	return db, nil
}

// open opens the Prometheus DB into db.cur; the caller holds db.mu (or has
// not shared db yet).
func (db *DB) open() error {
	stats := ptsdb.NewDBStats()
	pdb, err := ptsdb.Open(db.opts.Dir, db.logger, db.reg, db.po, stats)
	if err != nil {
		db.reg.unregisterAll()
		return fmt.Errorf("open tsdb %s: %w", db.opts.Dir, err)
	}
	db.cur, db.stats = pdb, stats
	db.head.Store(pdb.Head())
	if wn := db.wn.Load(); wn != nil {
		pdb.SetWriteNotified(*wn)
	}
	if err := db.w.reset(db.opts.Dir, db.reg); err != nil {
		_ = pdb.Close()
		db.cur = nil
		db.reg.unregisterAll()
		return fmt.Errorf("open tsdb %s: %w", db.opts.Dir, err)
	}
	return nil
}

// maxBlockDuration is the largest compacted block span, in milliseconds,
// derived as Prometheus derives it: the configured value when set,
// otherwise 10% of retention (so that retention deletes whole blocks
// without a long tail) capped at 31 days; never below the head block span.
func maxBlockDuration(configured time.Duration, retentionMs, minBlockMs int64) int64 {
	maxMs := configured.Milliseconds()
	if configured <= 0 {
		maxMs = (31 * 24 * time.Hour).Milliseconds()
		if retentionMs > 0 && retentionMs/10 < maxMs {
			maxMs = retentionMs / 10
		}
	}
	return max(maxMs, minBlockMs)
}

// registerTimeGauges exposes the TSDB's time bounds under the names
// Prometheus' own binary registers (not the tsdb package): a Thanos sidecar
// reads prometheus_tsdb_lowest_timestamp_seconds from /metrics to learn the
// oldest time it can serve.
func registerTimeGauges(reg prometheus.Registerer, db *DB) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "prometheus_tsdb_lowest_timestamp_seconds",
			Help: "Lowest timestamp value stored in the database.",
		}, func() float64 {
			if bb := db.Blocks(); len(bb) > 0 {
				return float64(bb[0].Meta().MinTime / 1000)
			}
			return float64(db.Head().MinTime() / 1000)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "prometheus_tsdb_head_min_time_seconds",
			Help: "Minimum time bound of the head block.",
		}, func() float64 { return float64(db.Head().MinTime() / 1000) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "prometheus_tsdb_head_max_time_seconds",
			Help: "Maximum timestamp of the head block.",
		}, func() float64 { return float64(db.Head().MaxTime() / 1000) }),
	)
}

// Dir returns the data directory.
func (db *DB) Dir() string { return db.opts.Dir }

// Close stops recovery, flushes metadata and closes the TSDB.
func (db *DB) Close() error {
	db.once.Do(func() {
		db.closed.Store(true)
		close(db.stopc)
		db.bg.Wait()
		db.mu.Lock()
		defer db.mu.Unlock()
		var err error
		if db.cur != nil {
			err = db.cur.Close()
			db.cur = nil
		}
		db.closeErr = errors.Join(db.Metadata.close(), err)
	})
	return db.closeErr
}

// lease returns the current Prometheus DB with a read lease that release
// ends, or ErrUnavailable while it is being reopened (or could not be).
func (db *DB) lease() (pdb *ptsdb.DB, gen uint64, release func(), err error) {
	pdb, gen, err = db.tryLease()
	if err != nil {
		return nil, 0, nil, err
	}
	var once sync.Once
	return pdb, gen, func() { once.Do(db.mu.RUnlock) }, nil
}

// tryLease is lease for callers that end it with db.mu.RUnlock themselves.
func (db *DB) tryLease() (*ptsdb.DB, uint64, error) {
	if db.draining.Load() || !db.mu.TryRLock() {
		return nil, 0, fmt.Errorf("%w: the TSDB is being reopened after a failed write", ErrUnavailable)
	}
	if db.cur == nil {
		db.mu.RUnlock()
		if db.closed.Load() {
			return nil, 0, ErrClosed
		}
		return nil, 0, fmt.Errorf("%w: the TSDB could not be reopened after a failed write yet", ErrUnavailable)
	}
	return db.cur, db.gen, nil
}

// Querier implements storage.Queryable.
func (db *DB) Querier(mint, maxt int64) (storage.Querier, error) {
	pdb, _, release, err := db.lease()
	if err != nil {
		return nil, err
	}
	q, err := pdb.Querier(mint, maxt)
	if err != nil {
		release()
		return nil, err
	}
	return &leasedQuerier{Querier: q, release: release}, nil
}

// ChunkQuerier implements storage.ChunkQueryable.
func (db *DB) ChunkQuerier(mint, maxt int64) (storage.ChunkQuerier, error) {
	pdb, _, release, err := db.lease()
	if err != nil {
		return nil, err
	}
	q, err := pdb.ChunkQuerier(mint, maxt)
	if err != nil {
		release()
		return nil, err
	}
	return &leasedChunkQuerier{ChunkQuerier: q, release: release}, nil
}

// LeaseTSDB returns the Prometheus TSDB in use and a release that ends the
// hold, which keeps a reopen from closing it meanwhile, as a querier's does.
// The fast PromQL path reads the persisted blocks through it one by one
// (fast.TSDBSource) rather than through the merging chunk querier.
func (db *DB) LeaseTSDB() (*ptsdb.DB, func(), error) {
	pdb, _, release, err := db.lease()
	if err != nil {
		return nil, nil, err
	}
	return pdb, release, nil
}

// ExemplarQuerier implements storage.ExemplarQueryable. Exemplars live in
// memory, so a querier of a DB closed by a reopen still reads safely.
func (db *DB) ExemplarQuerier(ctx context.Context) (storage.ExemplarQuerier, error) {
	pdb, _, release, err := db.lease()
	if err != nil {
		return nil, err
	}
	defer release()
	return pdb.ExemplarQuerier(ctx)
}

// StartTime implements storage.Storage.
func (db *DB) StartTime() (int64, error) {
	pdb, _, release, err := db.lease()
	if err != nil {
		return 0, err
	}
	defer release()
	return pdb.StartTime()
}

// Head returns the head block of the current Prometheus DB (during a
// reopen, of the last one). It is for statistics such as MinTime and
// MaxTime: the head it returns is closed by the next reopen.
func (db *DB) Head() *ptsdb.Head { return db.head.Load() }

// SetWriteNotified sets what is notified after every commit (the WAL
// watcher of remote write); it carries over reopens.
func (db *DB) SetWriteNotified(wn wlog.WriteNotified) {
	db.wn.Store(&wn)
	if pdb, _, release, err := db.lease(); err == nil {
		pdb.SetWriteNotified(wn)
		release()
	}
}

// Stats implements the Prometheus API's status/tsdb source.
func (db *DB) Stats(statsByLabelName string, limit int) (*ptsdb.Stats, error) {
	pdb, _, release, err := db.lease()
	if err != nil {
		return nil, err
	}
	defer release()
	return pdb.Head().Stats(statsByLabelName, limit), nil
}

// WALReplayStatus reports the progress of the WAL replay done by the last
// open.
func (db *DB) WALReplayStatus() (ptsdb.WALReplayStatus, error) {
	db.mu.RLock() // a reopen replaces stats; waiting for it is what the caller asks
	defer db.mu.RUnlock()
	return db.stats.Head.WALReplayStatus.GetWALReplayStatus(), nil
}

// BlockMetas lists the persisted blocks.
func (db *DB) BlockMetas() ([]ptsdb.BlockMeta, error) {
	pdb, _, release, err := db.lease()
	if err != nil {
		return nil, err
	}
	defer release()
	return pdb.BlockMetas(), nil
}

// Blocks lists the persisted blocks of the current Prometheus DB.
func (db *DB) Blocks() []*ptsdb.Block {
	pdb, _, release, err := db.lease()
	if err != nil {
		return nil
	}
	defer release()
	return pdb.Blocks()
}

// Snapshot writes a snapshot of the blocks (and the head if withHead) to dir.
func (db *DB) Snapshot(dir string, withHead bool) error {
	pdb, _, release, err := db.lease()
	if err != nil {
		return err
	}
	defer release()
	return pdb.Snapshot(dir, withHead)
}

// CleanTombstones rewrites blocks without their deleted samples.
func (db *DB) CleanTombstones() error {
	pdb, _, release, err := db.lease()
	if err != nil {
		return err
	}
	defer release()
	return pdb.CleanTombstones()
}

// Compact runs a compaction of the current Prometheus DB, as its background
// loop does; tests and tools use it.
func (db *DB) Compact(ctx context.Context) error {
	pdb, _, release, err := db.lease()
	if err != nil {
		return err
	}
	defer release()
	return pdb.Compact(ctx)
}

// Delete marks samples of matching series in [mint, maxt] deleted. The
// tombstones go through the WAL, so Delete is a write: it is refused while
// writes are, and a failed one stops writes as a failed commit does.
func (db *DB) Delete(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) error {
	pdb, _, release, err := db.lease()
	if err != nil {
		return err
	}
	defer release()
	err = db.w.commit(db, func() error { return pdb.Delete(ctx, mint, maxt, ms...) }, nil)
	if err == nil {
		db.notifyWritten(mint)
	}
	return err
}

var (
	_ storage.Storage      = (*DB)(nil)
	_ storage.AppendableV2 = (*DB)(nil)
)

// leasedQuerier ends its lease on Close.
type leasedQuerier struct {
	storage.Querier
	release func()
}

func (q *leasedQuerier) Close() error {
	defer q.release()
	return q.Querier.Close()
}

type leasedChunkQuerier struct {
	storage.ChunkQuerier
	release func()
}

func (q *leasedChunkQuerier) Close() error {
	defer q.release()
	return q.ChunkQuerier.Close()
}

// CompactHead compacts the given head range into a block; tests and tools
// use it.
func (db *DB) CompactHead(head *ptsdb.RangeHead) error {
	pdb, _, release, err := db.lease()
	if err != nil {
		return err
	}
	defer release()
	return pdb.CompactHead(head)
}
