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
	// MetadataWALRecords writes a series' metadata (type, help, unit) into
	// the WAL whenever an append carries metadata that differs from what the
	// series had, so that remote write 2.0 forwarding, which reads the WAL,
	// sends it (Prometheus' metadata-wal-records). False keeps metadata out
	// of the WAL; forwarded series then arrive without it.
	MetadataWALRecords bool
	// NoLockfile disables the directory lock file; only tests set it.
	NoLockfile bool
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
		MetadataWALRecords: true,
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
		po.MaxBlockDuration = po.MinBlockDuration
	}
	// Prometheus caps the largest compacted block at 10% of retention, up to
	// 31 days, so that retention deletes whole blocks without a long tail.
	if max := po.RetentionDuration / 10; max > po.MaxBlockDuration {
		po.MaxBlockDuration = min(max, (31 * 24 * time.Hour).Milliseconds())
	}
	po.EnableExemplarStorage = opts.MaxExemplars > 0
	po.MaxExemplars = opts.MaxExemplars
	po.NoLockfile = opts.NoLockfile
	po.EnableMetadataWALRecords = opts.MetadataWALRecords
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
	return &DB{DB: db, dir: opts.Dir, stats: stats, Metadata: md}, nil
}

// Dir returns the data directory.
func (db *DB) Dir() string { return db.dir }

// Close flushes metadata and closes the TSDB.
func (db *DB) Close() error {
	return errors.Join(db.Metadata.flush(), db.DB.Close())
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
