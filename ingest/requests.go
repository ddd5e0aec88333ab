package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/internal/fsutil"
	"github.com/tailroot/tailroot/internal/tenant"
	"github.com/tailroot/tailroot/tsdb/records"
)

// RecordsOptions configure the request-record pipeline: the record store it
// opens, the series it derives and the limits of its HTTP endpoints. Every
// field says what zero means.
type RecordsOptions struct {
	// Store configures the record store; Store.Dir is required.
	// Store.RetentionCheckInterval is ignored: the pipeline applies
	// retention itself, right after a checkpoint, so that retention never
	// removes a record the checkpoint does not count. Store.HoldWAL is
	// always set: the store's WAL is the log the derived state is
	// recovered from (derive_checkpoint.go).
	Store records.Options
	// StateDir holds the derived-series checkpoint. Empty means
	// Store.Dir/derived.
	StateDir string
	// SeriesLabels are the request labels copied onto derived series.
	// nil means DefaultSeriesLabels; an empty non-nil slice keeps none.
	SeriesLabels []string
	// MaxSeriesLabelSets caps the distinct projected label sets; requests
	// of further sets are counted under {tailroot_overflow="true"}. Zero
	// means 10,000.
	MaxSeriesLabelSets int
	// DeriveInterval is how often derived series are appended to the TSDB,
	// like a scrape interval. Zero appends them after every batch, before
	// the batch is acknowledged.
	DeriveInterval time.Duration
	// RefreshInterval re-appends unchanged derived series so that they do
	// not go stale (Prometheus' lookback is 5 minutes). Zero means 2m.
	RefreshInterval time.Duration
	// DeriveResolution is the slot width of derived samples: a request is
	// counted at the end of the slot holding its end time (Time + E2E), so
	// windows aligned to it hold exactly the requests that ended in them.
	// Zero means 1s.
	DeriveResolution time.Duration
	// BackfillWindow is how far behind the wall clock a derived sample may
	// be stamped; older requests are counted at its edge instead, and
	// tailroot_records_derived_restamped_total says how many. It must not
	// exceed the TSDB's out-of-order window (or, without one, 1h: half the
	// head's block range). Zero means 30m.
	BackfillWindow time.Duration
	// CheckpointInterval is how often the derived state is checkpointed,
	// the record store's WAL released up to it and retention applied.
	// Zero means 1m.
	CheckpointInterval time.Duration
	// RecoverInterval is how often, after a failed write to the record
	// store, the pipeline tries to recover its files (a batch arriving also
	// tries, at most this often). Zero means 1s.
	RecoverInterval time.Duration
	// MaxJournalBytes checkpoints early when the batches logged since the
	// last checkpoint (those a restart replays from the record store's
	// WAL) pass this many bytes. Zero means 64 MiB.
	MaxJournalBytes int64
	// MaxBatchItems caps the requests committed together (one record-store
	// append and fsync). Zero means 100,000.
	MaxBatchItems int
	// Grid is the end-to-end grid of the tail accumulators. The zero value
	// means attribution.DefaultGrid(); it must not change over the life of
	// a state directory.
	Grid attribution.Grid
	// MaxBodyBytes caps a pushed body as sent; 413 above. Zero means 32 MiB.
	MaxBodyBytes int64
	// MaxDecodedBytes caps a gzip-decoded body; 413 above. Zero means
	// 4 × MaxBodyBytes.
	MaxDecodedBytes int64
	// MaxRecordsPerRequest caps the requests (lines, or spans) of one push;
	// the push is refused whole with 413 above it. Zero means 100,000.
	MaxRecordsPerRequest int
	// MaxLineBytes caps one NDJSON line; a longer line is rejected as bad.
	// Zero means 4 MiB.
	MaxLineBytes int
	// Limits bound the content of one request.
	Limits RequestLimits
	// MaxQueryRecords caps the records GET /api/v1/requests returns. Zero
	// means 100,000.
	MaxQueryRecords int
}

// DefaultRecordsOptions returns the defaults; Store.Dir must still be set.
func DefaultRecordsOptions() RecordsOptions {
	return RecordsOptions{Store: records.DefaultOptions()}
}

func (o RecordsOptions) withDefaults() RecordsOptions {
	if o.StateDir == "" && o.Store.Dir != "" {
		o.StateDir = o.Store.Dir + string(os.PathSeparator) + "derived"
	}
	if o.Store.PartitionDuration == 0 {
		o.Store.PartitionDuration = records.DefaultOptions().PartitionDuration
	}
	o.Store.RetentionCheckInterval = 0
	o.Store.HoldWAL = true
	if o.SeriesLabels == nil {
		o.SeriesLabels = DefaultSeriesLabels
	}
	if o.MaxSeriesLabelSets <= 0 {
		o.MaxSeriesLabelSets = 10000
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 2 * time.Minute
	}
	if o.DeriveResolution <= 0 {
		o.DeriveResolution = time.Second
	}
	if o.BackfillWindow <= 0 {
		o.BackfillWindow = 30 * time.Minute
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = time.Minute
	}
	if o.RecoverInterval <= 0 {
		o.RecoverInterval = time.Second
	}
	if o.MaxJournalBytes <= 0 {
		o.MaxJournalBytes = 64 << 20
	}
	if o.MaxBatchItems <= 0 {
		o.MaxBatchItems = 100000
	}
	if o.Grid.Buckets() <= 1 {
		o.Grid = attribution.DefaultGrid()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 32 << 20
	}
	if o.MaxDecodedBytes <= 0 {
		o.MaxDecodedBytes = 4 * o.MaxBodyBytes
	}
	if o.MaxRecordsPerRequest <= 0 {
		o.MaxRecordsPerRequest = 100000
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = 4 << 20
	}
	if o.MaxQueryRecords <= 0 {
		o.MaxQueryRecords = 100000
	}
	o.Limits = o.Limits.withDefaults()
	return o
}

// Errors of the records pipeline.
var (
	// ErrRecordsClosed is returned by Append after Close.
	ErrRecordsClosed = errors.New("records pipeline closed")
	// ErrRecordsFailed is wrapped by every Append after a write to the
	// record store failed, until the pipeline has recovered
	// its files as a restart would (retried every RecoverInterval, and
	// before each batch); nothing of a batch that got it is acknowledged.
	ErrRecordsFailed = errors.New("records pipeline failed")
)

// Records is the request-record pipeline: it stores each batch of requests
// in the record store and folds it into the derived series (end-to-end and
// stage histograms, tail accumulators, token latencies, prompt entropy),
// which it appends to the TSDB.
//
// Ordering, per batch, in one worker goroutine (group commit: batches that
// arrive while one is being written are committed together):
//
//  1. the batch is appended to the record store with each item's meta
//     beside its record (one WAL write and one fsync for the group);
//  2. it is queued for the derived state;
//  3. the batch is acknowledged.
//
// Every DeriveInterval (with zero, before step 3) the queued requests are
// folded into the in-memory state slot by slot and each changed series is
// appended at its slot's stamp (derive_stamp.go); the state is
// checkpointed every CheckpointInterval, with the number of the last store
// WAL batch it counts, and the store may then drop those batches from its
// WAL. After a crash the checkpoint plus the WAL batches after it rebuild
// the state exactly, so a record is counted in the series once if and
// only if it is in the store. Counters are cumulative across restarts.
type Records struct {
	opts   RecordsOptions
	store  *records.Store
	app    storage.AppendableV2
	logger *slog.Logger

	subs      chan *submission
	ctl       chan func()
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	// Owned by the worker.
	d         *deriver
	seq       uint64 // last record-store WAL batch the state counts
	logged    int64  // bytes appended to the store since the checkpoint
	metaBuf   []byte // item meta of the group being committed
	failed    error
	lastTry   time.Time // last recovery attempt after failed
	lastFull  int64
	recovered bool // the state was rebuilt from logged batches
	// abandoned makes the worker exit without flushing or checkpointing,
	// as a killed process would; only tests set it.
	abandoned bool

	cutoff atomic.Int64 // retention: records before it are refused, Unix ms
	// failedErr mirrors failed for Ready, outside the worker.
	failedErr atomic.Pointer[error]

	m recordsMetrics
}

type recordsMetrics struct {
	ingested      *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	batches       prometheus.Counter
	commitSeconds prometheus.Histogram
	flushSeconds  prometheus.Histogram
	flushErrors   prometheus.Counter
	overflow      prometheus.Gauge
	labelSets     prometheus.Gauge
	unresolved    prometheus.Counter
	recoveries    prometheus.Counter
	restamped     *prometheus.CounterVec
}

type submission struct {
	items []Item
	done  chan error
}

// NewRecords opens the record store, restores the derived state (the
// checkpoint, then every store WAL batch after it; a version 1 journal is
// migrated) and
// starts the worker. app receives the derived series; md, if not nil, their
// metadata.
func NewRecords(app storage.AppendableV2, md MetadataSink, opts RecordsOptions, logger *slog.Logger, reg prometheus.Registerer) (*Records, error) {
	opts = opts.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Store.Dir == "" {
		return nil, errors.New("records pipeline: Store.Dir is empty")
	}
	opts.Store.Logger = logger
	store, err := records.Open(opts.Store)
	if err != nil {
		return nil, err
	}
	p := &Records{
		opts: opts, store: store, app: app, logger: logger,
		subs: make(chan *submission, 64), ctl: make(chan func()), stop: make(chan struct{}), done: make(chan struct{}),
		m: newRecordsMetrics(reg),
	}
	p.cutoff.Store(math.MinInt64)
	if err := p.recover(); err != nil {
		_ = store.Close()
		return nil, err
	}
	if md != nil {
		for family, m := range derivedMetadata {
			if err := md.Set(family, m); err != nil {
				_ = p.closeFiles()
				return nil, fmt.Errorf("records pipeline: store metadata: %w", err)
			}
		}
	}
	if p.recovered {
		p.flushSeries(false)
	}
	go p.run()
	return p, nil
}

func newRecordsMetrics(reg prometheus.Registerer) recordsMetrics {
	f := promauto.With(reg)
	return recordsMetrics{
		ingested: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_records_ingested_total",
			Help: "Request records stored, by source (requests, traces).",
		}, []string{"source"}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_records_rejected_total",
			Help: "Pushed requests or spans rejected as invalid, by source.",
		}, []string{"source"}),
		batches: f.NewCounter(prometheus.CounterOpts{
			Name: "tailroot_records_batches_total",
			Help: "Batches committed to the record store (group commits).",
		}),
		commitSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:                        "tailroot_records_commit_seconds",
			Help:                        "Time to commit one batch: record store write and fsync, and state update.",
			NativeHistogramBucketFactor: 1.1,
		}),
		flushSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:                        "tailroot_records_derive_flush_seconds",
			Help:                        "Time to append the derived series to the TSDB.",
			NativeHistogramBucketFactor: 1.1,
		}),
		flushErrors: f.NewCounter(prometheus.CounterOpts{
			Name: "tailroot_records_derive_flush_errors_total",
			Help: "Failed appends of derived series; they are retried at the next flush.",
		}),
		overflow: f.NewGauge(prometheus.GaugeOpts{
			Name: "tailroot_records_series_overflow",
			Help: "1 when the derived series hit MaxSeriesLabelSets and new label sets go to the overflow set.",
		}),
		labelSets: f.NewGauge(prometheus.GaugeOpts{
			Name: "tailroot_records_series_label_sets",
			Help: "Distinct label sets of the derived series.",
		}),
		recoveries: f.NewCounter(prometheus.CounterOpts{
			Name: "tailroot_records_recoveries_total",
			Help: "Times the pipeline recovered its store and state after a failed write, without a restart.",
		}),
		restamped: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_records_derived_restamped_total",
			Help: "Requests counted in the derived series at a later time than their own end time, by reason: future (end time after now), behind_series (ended before a sample already written for their label set), outside_backfill_window (older than the backfill window).",
		}, []string{"reason"}),
		unresolved: f.NewCounter(prometheus.CounterOpts{
			Name: "tailroot_records_recovery_unresolved_total",
			Help: "Version 1 journal entries at migration whose stored records could not be identified; their records are missing from the derived series.",
		}),
	}
}

func (p *Records) recover() error {
	if err := os.MkdirAll(p.opts.StateDir, 0o755); err != nil {
		return fmt.Errorf("records pipeline: %w", err)
	}
	d, seq, version, err := loadCheckpoint(p.opts.StateDir, p.opts.Grid, p.opts.SeriesLabels, p.opts.MaxSeriesLabelSets)
	if err != nil {
		return fmt.Errorf("records pipeline: %w", err)
	}
	entries, hasJournal, err := readJournalV1(p.opts.StateDir)
	if err != nil {
		return fmt.Errorf("records pipeline: %w", err)
	}
	recovered := false
	if version == checkpointVersionV1 {
		// Written before the store's WAL carried the state's inputs: every
		// record the store holds is counted once the version 1 journal is
		// folded in, and counting continues from the store's WAL now.
		_, unresolved := recoverEntries(d, entries, seq, p.store.Stats().Records)
		if unresolved > 0 {
			p.m.unresolved.Add(float64(unresolved))
			p.logger.Error("records: version 1 journal entries whose stored records could not be identified; their requests are missing from the derived series", "entries", unresolved)
		}
		p.logger.Info("records: migrating the version 1 derive journal", "entries", len(entries))
		seq, recovered = p.store.LastSeq(), true
	} else {
		n := 0
		err := p.store.ReplayWAL(seq, func(b records.LoggedBatch) error {
			for i := range b.Records {
				it := Item{Record: b.Records[i]}
				var m []byte
				if b.Meta != nil {
					m = b.Meta[i]
				}
				if err := unmarshalItemMeta(m, &it); err != nil {
					return fmt.Errorf("batch %d record %d: %w", b.Seq, i, err)
				}
				d.add(&it)
			}
			seq = b.Seq
			n++
			return nil
		})
		if err != nil {
			return fmt.Errorf("records pipeline: %w", err)
		}
		recovered = n > 0
	}
	// Batches appended from now on are numbered after what the state
	// counts, even if the store's WAL lost its newest batches.
	p.store.AdvanceSeq(seq)
	d.res, d.maxAge, d.refresh = p.opts.DeriveResolution.Milliseconds(), p.opts.BackfillWindow.Milliseconds(), p.opts.RefreshInterval.Milliseconds()
	p.d, p.seq, p.logged = d, seq, 0
	p.recovered = recovered
	if p.recovered {
		// The crashed process may have appended derived samples after the
		// checkpoint's clocks, up to its wall clock: the recovered requests
		// are counted from now on, after all of them.
		d.advanceClocks(time.Now().UnixMilli())
		d.markAllDirty()
		if err := p.afterCrash(); err != nil {
			p.logger.Error("records: list derived series after recovery; series first created by recovered requests may lack their zero sample", "err", err)
		}
	}
	if p.recovered || hasJournal {
		if err := p.writeCheckpoint(); err != nil {
			return fmt.Errorf("records pipeline: %w", err)
		}
	}
	return nil
}

// afterCrash reads the derived series the crashed process left in the
// TSDB, when the appendable can be queried (the TSDB can): it moves every
// clock past samples stamped at or after now (possible when the restart
// is fast or a stamp was moved ahead), and flags the series the TSDB does
// not hold so that they get their zero sample.
func (p *Records) afterCrash() error {
	q, ok := p.app.(storage.Queryable)
	if !ok {
		return nil
	}
	now := time.Now().UnixMilli()
	qr, err := q.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		return err
	}
	defer qr.Close()
	have := map[uint64]struct{}{}
	newest := int64(math.MinInt64)
	var it chunkenc.Iterator
	for family := range derivedMetadata {
		m := labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, family)
		ss := qr.Select(context.Background(), false, &storage.SelectHints{Start: math.MinInt64, End: math.MaxInt64, Func: "series"}, m)
		for ss.Next() {
			have[ss.At().Labels().Hash()] = struct{}{}
		}
		if err := ss.Err(); err != nil {
			return err
		}
		ss = qr.Select(context.Background(), false, &storage.SelectHints{Start: now, End: math.MaxInt64}, m)
		for ss.Next() {
			it = ss.At().Iterator(it)
			if it.Seek(now) == chunkenc.ValNone {
				continue
			}
			newest = max(newest, it.AtT())
			for it.Next() != chunkenc.ValNone {
				newest = max(newest, it.AtT())
			}
		}
		if err := ss.Err(); err != nil {
			return err
		}
	}
	if newest != math.MinInt64 {
		p.d.advanceClocks(newest + 1)
	}
	p.d.markMissing(func(ls labels.Labels) bool { _, ok := have[ls.Hash()]; return ok })
	return nil
}

// Store returns the record store, for reading (GET /api/v1/requests, the
// query layer). Appends must go through Append.
func (p *Records) Store() *records.Store { return p.store }

// Options returns the options in force, defaults filled in.
func (p *Records) Options() RecordsOptions { return p.opts }

// Cutoff returns the time (Unix ms) before which records are refused
// because retention has removed their partition; math.MinInt64 when none is.
func (p *Records) Cutoff() int64 { return p.cutoff.Load() }

// InRetention reports whether a record at t (Unix ms) may still be stored:
// the store removes whole partitions that end at or before the cutoff.
func (p *Records) InRetention(t int64) bool {
	c := p.cutoff.Load()
	if c == math.MinInt64 {
		return true
	}
	dur := p.opts.Store.PartitionDuration.Milliseconds()
	return t-t%dur+dur > c
}

// CheckItem reports why an item cannot be appended, or nil.
func (p *Records) CheckItem(it *Item) error {
	if err := it.Record.Validate(); err != nil {
		return err
	}
	for j, v := range it.Record.Stages {
		if v < 0 {
			return fmt.Errorf("stage %s = %v: stages overlap (their sum exceeds end-to-end)", records.Stage(j), v)
		}
	}
	for k, g := range it.Gaps {
		if !(g >= 0) || math.IsInf(g, 1) {
			return fmt.Errorf("inter-token gap %d = %v is not finite and ≥ 0", k, g)
		}
	}
	if !p.InRetention(it.Record.Time) {
		return fmt.Errorf("%w: time %d", records.ErrOutOfRetention, it.Record.Time)
	}
	return nil
}

// Append stores items and folds them into the derived series. It returns
// once they are durable (in the record store's fsynced WAL); with
// DeriveInterval 0 the derived series have then been appended too. The
// batch is refused whole, before anything is written, if an item fails
// CheckItem (the error names its index).
//
// source labels tailroot_records_ingested_total.
func (p *Records) Append(ctx context.Context, source string, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	for i := range items {
		if err := p.CheckItem(&items[i]); err != nil {
			return fmt.Errorf("append item %d: %w", i, err)
		}
	}
	// With tenancy on, the records are the tenant's: its label replaces
	// any value the client sent (after the checks, so the label a client
	// cannot choose does not count against its label limits), and they
	// count against its records/s limit.
	if t := tenant.FromContext(ctx); t != nil {
		if err := t.AllowRecords(len(items)); err != nil {
			return err
		}
		for i := range items {
			items[i].Record.Labels = t.Stamp(items[i].Record.Labels)
		}
	}
	s := &submission{items: items, done: make(chan error, 1)}
	select {
	case p.subs <- s:
	case <-p.stop:
		return ErrRecordsClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once submitted the batch is committed or failed as a whole; waiting
	// for the answer regardless of ctx keeps the acknowledgement truthful.
	err := <-s.done
	if err == nil {
		p.m.ingested.WithLabelValues(source).Add(float64(len(items)))
	}
	return err
}

func (p *Records) run() {
	defer close(p.done)
	var flushC <-chan time.Time
	if p.opts.DeriveInterval > 0 {
		t := time.NewTicker(p.opts.DeriveInterval)
		defer t.Stop()
		flushC = t.C
	}
	ckpt := time.NewTicker(p.opts.CheckpointInterval)
	defer ckpt.Stop()
	retry := time.NewTicker(p.opts.RecoverInterval)
	defer retry.Stop()
	for {
		select {
		case <-retry.C:
			if p.failed != nil {
				p.tryRecover()
			}
		case s := <-p.subs:
			group := []*submission{s}
			n := len(s.items)
		drain:
			for n < p.opts.MaxBatchItems {
				select {
				case s2 := <-p.subs:
					group = append(group, s2)
					n += len(s2.items)
				default:
					break drain
				}
			}
			p.commit(group)
		case f := <-p.ctl:
			f()
		case <-flushC:
			p.flushSeries(false)
		case <-ckpt.C:
			p.checkpoint()
		case <-p.stop:
			for {
				select {
				case s := <-p.subs:
					s.done <- ErrRecordsClosed
				case f := <-p.ctl:
					f()
				default:
					if !p.abandoned {
						p.flushSeries(false)
						p.checkpoint()
					}
					return
				}
			}
		}
	}
}

// commit writes one group of submissions; see the type's doc comment for
// the order of steps.
func (p *Records) commit(group []*submission) {
	start := time.Now()
	reply := func(err error) {
		for _, s := range group {
			s.done <- err
		}
	}
	if p.failed != nil && !p.tryRecover() {
		reply(fmt.Errorf("%w: %v", ErrRecordsFailed, p.failed))
		return
	}
	var items []Item
	var ends []int
	kept := group[:0]
	for _, s := range group {
		ok := true
		for i := range s.items {
			if !p.InRetention(s.items[i].Record.Time) {
				s.done <- fmt.Errorf("append item %d: %w: time %d", i, records.ErrOutOfRetention, s.items[i].Record.Time)
				ok = false
				break
			}
		}
		if ok {
			kept = append(kept, s)
			items = append(items, s.items...)
			ends = append(ends, len(items))
		}
	}
	group = kept
	if len(items) == 0 {
		return
	}
	soft, hard := appendLimits(p.opts.Store.MaxSegmentBytes)
	batches, metaBuf := splitAppends(items, soft, hard, ends, p.metaBuf)
	if cap(metaBuf) <= 64<<20 {
		p.metaBuf = metaBuf // reused by the next commit; one huge group's is not kept
	}
	for k := range batches {
		b := &batches[k]
		seq, err := p.store.AppendBatch(b.recs, b.meta)
		if err != nil {
			// Batches before k are stored; keep the state in step with the
			// store until recovery rebuilds it from the store's WAL.
			stored := 0
			for _, done := range batches[:k] {
				p.d.pending = append(p.d.pending, done.items...)
				stored += len(done.items)
			}
			p.fail(err)
			// A submission whose items all went out in the stored appends
			// is acknowledged: it is in the fsynced WAL. The others are
			// refused. Appends are cut between submissions, so only one
			// larger than half a segment can straddle the failed one
			// (docs/stages.md).
			werr := fmt.Errorf("%w: %v", ErrRecordsFailed, err)
			at := 0
			for _, s := range group {
				at += len(s.items)
				if at <= stored {
					s.done <- nil
				} else {
					s.done <- werr
				}
			}
			return
		}
		p.seq = seq
		p.logged += int64(b.bytes)
	}
	p.d.pending = append(p.d.pending, items...)
	p.m.batches.Inc()
	if p.opts.DeriveInterval == 0 {
		p.flushSeries(false)
	}
	p.m.commitSeconds.Observe(time.Since(start).Seconds())
	reply(nil)
	if p.logged >= p.opts.MaxJournalBytes {
		p.checkpoint()
	}
}

func (p *Records) fail(err error) {
	p.logger.Error("records: write failed; refusing appends until the store is recovered", "err", err)
	p.failed = err
	p.failedErr.Store(&err)
	p.lastTry = time.Now()
}

// tryRecover rebuilds the pipeline's files and state after a failed write
// as a restart would: the record store reloads its files if it refuses, and
// the derived state is rebuilt from the checkpoint plus the store's WAL
// batches after it, then checkpointed (which needs the disk to take writes
// again). It is tried at most once per RecoverInterval and reports whether
// the pipeline accepts batches.
func (p *Records) tryRecover() bool {
	if p.failed == nil {
		return true
	}
	if time.Since(p.lastTry) < p.opts.RecoverInterval {
		return false
	}
	p.lastTry = time.Now()
	if err := p.store.Recover(); err != nil {
		p.logger.Debug("records: store not recovered yet", "err", err)
		return false
	}
	if err := p.recover(); err != nil {
		p.logger.Debug("records: derived state not recovered yet", "err", err)
		return false
	}
	p.logger.Info("records: recovered after a failed write; accepting batches again", "failed_with", p.failed)
	p.failed = nil
	p.failedErr.Store(nil)
	p.m.recoveries.Inc()
	return true
}

// Ready returns nil while batches are accepted, or the write failure that
// makes them refused until recovery.
func (p *Records) Ready() error {
	if e := p.failedErr.Load(); e != nil {
		return fmt.Errorf("%w: %v", ErrRecordsFailed, *e)
	}
	return nil
}

// flushSeries folds the pending requests into the derived state and
// appends the derived series; full also re-appends the unchanged ones.
// Errors are logged and counted: the state keeps the values and the next
// flush appends every series again.
func (p *Records) flushSeries(full bool) {
	start := time.Now()
	now := start.UnixMilli()
	if now-p.lastFull >= p.opts.RefreshInterval.Milliseconds() {
		full = true
	}
	err := p.appendDerived(now, full)
	if isTimestampCollision(err) {
		// The derived series already hold a sample at or after a stamp:
		// a previous process appended beyond the clocks it left, or the
		// TSDB moved its window. Counters are cumulative, so writing the
		// whole state a second after now is exact.
		p.d.advanceClocks(now + 1000)
		p.d.markAllDirty()
		err = p.appendDerived(now, true)
	}
	for reason, n := range p.d.drainRestamped() {
		if n > 0 {
			p.m.restamped.WithLabelValues(restampReasons[reason]).Add(float64(n))
			p.logger.Warn("records: requests counted in the derived series later than their end time", "reason", restampReasons[reason], "requests", n)
		}
	}
	p.m.labelSets.Set(float64(len(p.d.order)))
	if p.d.overflow != nil {
		p.m.overflow.Set(1)
	}
	if err != nil {
		p.d.markAllDirty()
		p.m.flushErrors.Inc()
		p.logger.Error("records: append derived series", "err", err)
		return
	}
	if full {
		p.lastFull = now
	}
	p.m.flushSeconds.Observe(time.Since(start).Seconds())
}

// appendDerived appends the derived series in one commit.
func (p *Records) appendDerived(now int64, full bool) error {
	app := p.app.AppenderV2(context.Background())
	if _, err := p.d.flush(app, now, full); err != nil {
		_ = app.Rollback()
		return err
	}
	return app.Commit()
}

// isTimestampCollision reports whether err says a derived sample's timestamp
// is not after the series' newest one.
func isTimestampCollision(err error) bool {
	return errors.Is(err, storage.ErrDuplicateSampleForTimestamp) ||
		errors.Is(err, storage.ErrOutOfOrderSample) ||
		errors.Is(err, storage.ErrOutOfBounds) ||
		errors.Is(err, storage.ErrTooOldSample)
}

// checkpoint writes the state, releases the store's WAL up to it and
// applies retention. Retention runs only here, right after the state
// counts every stored record, so it never removes a record a replay would
// still have to count.
func (p *Records) checkpoint() {
	if p.failed != nil {
		return
	}
	// The checkpoint releases the store's WAL up to p.seq, so it must
	// cover every stored request: fold the pending ones first.
	p.flushSeries(false)
	if err := p.writeCheckpoint(); err != nil {
		p.logger.Error("records: checkpoint derived state", "err", err)
		return
	}
	if p.opts.Store.Retention > 0 {
		now := time.Now()
		if err := p.store.ApplyRetention(now); err != nil {
			p.logger.Error("records: apply retention", "err", err)
		}
		p.cutoff.Store(now.UnixMilli() - p.opts.Store.Retention.Milliseconds())
	}
}

func (p *Records) writeCheckpoint() error {
	data, err := p.d.marshalCheckpoint(p.seq)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(p.opts.StateDir, checkpointFile, data); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	p.logged = 0
	if err := os.Remove(filepath.Join(p.opts.StateDir, journalFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove version 1 journal: %w", err)
	}
	if err := p.store.Release(p.seq); err != nil {
		// The checkpoint stands; the WAL keeps a little more until the
		// next one.
		p.logger.Warn("records: release store WAL", "err", err)
	}
	return nil
}

// Flush appends the changed derived series and checkpoints now; tests and
// tools use it to make series and state current.
func (p *Records) Flush(ctx context.Context) error {
	return p.do(ctx, func() { p.checkpoint() })
}

// Accumulators returns the current tail accumulators of the label sets (as
// projected onto SeriesLabels) for which keep is true, merged; nil keeps
// all.
func (p *Records) Accumulators(ctx context.Context, keep func(labels.Labels) bool) (*attribution.Accumulators, error) {
	var acc *attribution.Accumulators
	err := p.do(ctx, func() { p.flushSeries(false); acc = p.d.accumulators(keep) })
	return acc, err
}

// do runs f on the worker goroutine, which owns the derived state.
func (p *Records) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case p.ctl <- func() { f(); close(done) }:
	case <-p.stop:
		return ErrRecordsClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-done
	return nil
}

// Close stops the worker after the submitted batches, appends the derived
// series, checkpoints, and closes the store.
func (p *Records) Close() error {
	p.closeOnce.Do(func() {
		close(p.stop)
		<-p.done
		p.closeErr = p.closeFiles()
	})
	return p.closeErr
}

func (p *Records) closeFiles() error {
	return p.store.Close()
}
