package tsdb

import (
	"math"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

// SetWriteListener sets fn to be called after every write that changed
// what a query can read: a commit, with the lowest sample time it
// appended, and a Delete, with its mint. The results cache drops what it
// computed from samples at or after that time, so a late or out-of-order
// write (remote write, OTLP, derived series backfilled from request
// records, import) is seen by the next query. fn runs on the writer's
// goroutine after the commit is visible, and must be quick; nil removes
// the listener. Start timestamps are not passed: they are not stored.
func (db *DB) SetWriteListener(fn func(minT int64)) {
	if fn == nil {
		db.written.Store(nil)
		return
	}
	db.written.Store(&fn)
}

func (db *DB) notifyWritten(minT int64) {
	if minT == math.MaxInt64 {
		return
	}
	if fn := db.written.Load(); fn != nil {
		(*fn)(minT)
	}
}

// lowest tracks the lowest sample time of an appender's batch.
type lowest struct{ t int64 }

func newLowest() lowest { return lowest{t: math.MaxInt64} }

func (l *lowest) see(t int64) {
	if t < l.t {
		l.t = t
	}
}

// The v1 appender's sample methods, recording their times.

func (a *appenderV1) Append(ref storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	a.min.see(t)
	return a.Appender.Append(ref, l, t, v)
}

func (a *appenderV1) AppendHistogram(ref storage.SeriesRef, l labels.Labels, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	a.min.see(t)
	return a.Appender.AppendHistogram(ref, l, t, h, fh)
}

func (a *appenderV1) AppendSTZeroSample(ref storage.SeriesRef, l labels.Labels, t, st int64) (storage.SeriesRef, error) {
	a.min.see(st)
	return a.Appender.AppendSTZeroSample(ref, l, t, st)
}

func (a *appenderV1) AppendHistogramSTZeroSample(ref storage.SeriesRef, l labels.Labels, t, st int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	a.min.see(st)
	return a.Appender.AppendHistogramSTZeroSample(ref, l, t, st, h, fh)
}
