package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tailroot/tailroot/tsdb/records"
)

// ExportOptions configure an Exporter. Every field says what zero means.
type ExportOptions struct {
	// Node names this server in keys and manifests (see ValidNode).
	// Required.
	Node string
	// Interval is how often Run looks for newly sealed segments. 0 means
	// 30s.
	Interval time.Duration
	// Logger receives export errors, which Run retries at the next
	// interval. nil discards them.
	Logger *slog.Logger
	// Registerer receives the exporter's metrics
	// (tailroot_records_history_*). nil registers none.
	Registerer prometheus.Registerer
}

// DefaultExportOptions returns a 30s interval; Node must still be set.
func DefaultExportOptions() ExportOptions { return ExportOptions{Interval: 30 * time.Second} }

// Exporter copies the sealed segments of a record store into a Bucket as
// Parquet (docs/format/records-parquet.md). It is crash-safe and
// idempotent: a segment counts as exported only once its manifest is
// written, after all its files, and exporting it again writes the same
// keys. Use Held as the store's Options.RetentionHold so that retention
// waits for the export.
type Exporter struct {
	store *records.Store
	bkt   Bucket
	opts  ExportOptions
	log   *slog.Logger

	m exportMetrics

	run  sync.Mutex // one ExportPending at a time
	mu   sync.Mutex
	done map[doneKey]bool // local segments whose manifest exists
}

// doneKey identifies a local segment. The name alone is not enough: a
// partition recreated after retention (a late record after a restart)
// starts its generations again at 1.
type doneKey struct {
	name       string
	minT, maxT int64
	n          int
}

func keyOf(ref records.SegmentRef) doneKey {
	return doneKey{ref.Name, ref.MinTime, ref.MaxTime, ref.Records}
}

// NewExporter validates opts. It reads and writes nothing until
// ExportPending or Run.
func NewExporter(store *records.Store, bkt Bucket, opts ExportOptions) (*Exporter, error) {
	if err := ValidNode(opts.Node); err != nil {
		return nil, fmt.Errorf("history exporter: %w", err)
	}
	if opts.Interval < 0 {
		return nil, fmt.Errorf("history exporter: Interval %v is negative", opts.Interval)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultExportOptions().Interval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Exporter{store: store, bkt: bkt, opts: opts, log: log, done: map[doneKey]bool{}, m: newExportMetrics(opts.Registerer)}, nil
}

type exportMetrics struct {
	segments, files, records, errors prometheus.Counter
	pending                          prometheus.Gauge
}

func newExportMetrics(reg prometheus.Registerer) exportMetrics {
	f := promauto.With(reg)
	return exportMetrics{
		segments: f.NewCounter(prometheus.CounterOpts{Name: "tailroot_records_history_exported_segments_total", Help: "Sealed record segments written to the Parquet history."}),
		files:    f.NewCounter(prometheus.CounterOpts{Name: "tailroot_records_history_exported_files_total", Help: "Parquet files written to the history."}),
		records:  f.NewCounter(prometheus.CounterOpts{Name: "tailroot_records_history_exported_records_total", Help: "Request records written to the Parquet history."}),
		errors:   f.NewCounter(prometheus.CounterOpts{Name: "tailroot_records_history_export_errors_total", Help: "Segments whose export failed (retried at the next interval)."}),
		pending: f.NewGauge(prometheus.GaugeOpts{
			Name: "tailroot_records_history_pending_segments",
			Help: "Sealed segments not yet exported after the last pass; retention keeps their partitions locally meanwhile.",
		}),
	}
}

// Held reports whether ref still waits for export, for
// records.Options.RetentionHold. It only consults memory, as the store
// calls it under its lock: after a restart every segment is held until the
// first ExportPending has seen its manifest.
func (e *Exporter) Held(ref records.SegmentRef) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.done[keyOf(ref)]
}

// ExportStats count one ExportPending pass.
type ExportStats struct {
	Segments int // segments written in this pass
	Files    int // Parquet files written
	Records  int // records written
	Already  int // segments whose manifest already existed
}

// ExportPending exports every sealed segment that is not yet exported and
// returns what it wrote. Errors of single segments are joined; the others
// are still exported.
func (e *Exporter) ExportPending(ctx context.Context) (ExportStats, error) {
	e.run.Lock()
	defer e.run.Unlock()
	refs, err := e.store.Segments()
	if err != nil {
		return ExportStats{}, fmt.Errorf("export history: %w", err)
	}
	var st ExportStats
	var errs []error
	pending := 0
	defer func() { e.m.pending.Set(float64(pending)) }()
	for i, ref := range refs {
		if err := ctx.Err(); err != nil {
			pending += len(refs) - i
			return st, err
		}
		e.mu.Lock()
		done := e.done[keyOf(ref)]
		e.mu.Unlock()
		if done {
			continue
		}
		files, recs, already, err := e.export(ctx, ref)
		if err != nil {
			e.m.errors.Inc()
			pending++
			errs = append(errs, fmt.Errorf("export segment %s: %w", ref.Name, err))
			continue
		}
		if already {
			st.Already++
		} else {
			st.Segments++
			st.Files += files
			st.Records += recs
			e.m.segments.Inc()
			e.m.files.Add(float64(files))
			e.m.records.Add(float64(recs))
		}
		e.mu.Lock()
		e.done[keyOf(ref)] = true
		e.mu.Unlock()
	}
	return st, errors.Join(errs...)
}

// export writes one segment: its hour files, then its manifest.
func (e *Exporter) export(ctx context.Context, ref records.SegmentRef) (files, recs int, already bool, err error) {
	// The trailer names the segment; reading and decoding it all is left
	// for segments not exported yet, so a restart over weeks of exported
	// segments costs one small read and one HEAD per segment.
	crc, err := records.SegmentChecksum(ref.Path)
	if err != nil {
		return 0, 0, false, err
	}
	id := segmentID(ref.PartitionStart, ref.Seq, crc)
	mkey := manifestKey(e.opts.Node, id)
	if ok, err := e.bkt.Exists(ctx, mkey); err != nil {
		return 0, 0, false, err
	} else if ok {
		return 0, 0, true, nil
	}
	seg, full, err := records.ReadSegmentFile(ref.Path)
	if err != nil {
		return 0, 0, false, err
	}
	if full != crc || seg.PartitionStart != ref.PartitionStart {
		return 0, 0, false, fmt.Errorf("segment %s changed while exported", ref.Path)
	}
	m := manifest{
		FormatVersion: FormatVersion, Node: e.opts.Node, Segment: id,
		PartStart: seg.PartitionStart, PartDur: seg.PartitionDuration, Seq: ref.Seq,
		MinTime: seg.Records[0].Time, MaxTime: seg.Records[len(seg.Records)-1].Time,
		Records: len(seg.Records),
	}
	meta := fileMeta{Node: e.opts.Node, Segment: id, PartStart: seg.PartitionStart, PartDur: seg.PartitionDuration}
	// Segment rows are sorted by time, so each hour is one run.
	for lo := 0; lo < len(seg.Records); {
		h := hourStart(seg.Records[lo].Time)
		hi := lo
		for hi < len(seg.Records) && seg.Records[hi].Time < h+hourMs {
			hi++
		}
		data, err := encodeFile(seg.Records[lo:hi], meta)
		if err != nil {
			return 0, 0, false, err
		}
		key := fileKey(e.opts.Node, id, h)
		if err := e.bkt.Put(ctx, key, data); err != nil {
			return 0, 0, false, err
		}
		m.Files = append(m.Files, manifestFile{Key: key, MinTime: seg.Records[lo].Time, MaxTime: seg.Records[hi-1].Time, Records: hi - lo})
		lo = hi
	}
	body, err := json.Marshal(m)
	if err != nil {
		return 0, 0, false, fmt.Errorf("encode manifest: %w", err)
	}
	if err := e.bkt.Put(ctx, mkey, body); err != nil {
		return 0, 0, false, err
	}
	return len(m.Files), m.Records, false, nil
}

// Run exports pending segments every Interval until ctx is done, logging
// errors and retrying them at the next tick. It exports once right away.
func (e *Exporter) Run(ctx context.Context) {
	t := time.NewTicker(e.opts.Interval)
	defer t.Stop()
	for {
		st, err := e.ExportPending(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Error("records history: export", "bucket", e.bkt.String(), "err", err)
		}
		if st.Segments > 0 {
			e.log.Info("records history: exported", "segments", st.Segments, "files", st.Files, "records", st.Records)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
