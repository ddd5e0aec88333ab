package tsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"
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
	// NoLockfile disables the directory lock file; only tests set it.
	NoLockfile bool
}

// DefaultOptions returns the options tailroot serves with unless told
// otherwise: 15 days of retention, no size cap, a 30 minute out-of-order
// window (agents flush their disk queues late) and 100k exemplars.
func DefaultOptions() Options {
	return Options{
		Retention:        15 * 24 * time.Hour,
		OutOfOrderWindow: 30 * time.Minute,
		MaxExemplars:     100000,
	}
}

// DB is the embedded Prometheus TSDB together with tailroot's metadata
// store. It implements storage.Storage, storage.AppendableV2 and the admin
// and status interface of the Prometheus API.
type DB struct {
	*ptsdb.DB
	dir      string
	stats    *ptsdb.DBStats
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
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
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
	// Start timestamps are not stored: that needs the experimental XOR2 chunk
	// encoding, and blocks must stay readable by Thanos and Mimir.

	stats := ptsdb.NewDBStats()
	db, err := ptsdb.Open(opts.Dir, logger, reg, po, stats)
	if err != nil {
		return nil, fmt.Errorf("open tsdb %s: %w", opts.Dir, err)
	}
	md, err := openMetadata(opts.Dir)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if reg != nil {
		registerTimeGauges(reg, db)
	}
	return &DB{DB: db, dir: opts.Dir, stats: stats, Metadata: md}, nil
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
func registerTimeGauges(reg prometheus.Registerer, db *ptsdb.DB) {
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
func (db *DB) Dir() string { return db.dir }

// Close flushes metadata and closes the TSDB.
func (db *DB) Close() error {
	return errors.Join(db.Metadata.close(), db.DB.Close())
}

// Stats implements the Prometheus API's status/tsdb source.
func (db *DB) Stats(statsByLabelName string, limit int) (*ptsdb.Stats, error) {
	return db.Head().Stats(statsByLabelName, limit), nil
}

// WALReplayStatus reports the progress of the WAL replay done by Open.
func (db *DB) WALReplayStatus() (ptsdb.WALReplayStatus, error) {
	return db.stats.Head.WALReplayStatus.GetWALReplayStatus(), nil
}

// BlockMetas lists the persisted blocks.
func (db *DB) BlockMetas() ([]ptsdb.BlockMeta, error) {
	return db.DB.BlockMetas(), nil
}

// Delete marks samples of matching series in [mint, maxt] deleted.
func (db *DB) Delete(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) error {
	return db.DB.Delete(ctx, mint, maxt, ms...)
}

var (
	_ storage.Storage      = (*DB)(nil)
	_ storage.AppendableV2 = (*DB)(nil)
)
