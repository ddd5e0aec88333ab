package ingest

import (
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/tsdb/records"
)

// Timestamps of derived samples (docs/stages.md, "Timestamps"). A request
// is counted at its own time: its end time (Time + E2E) rounded up to the
// end of its slot of DeriveResolution, so that a window (a, b] whose ends
// are multiples of the resolution holds exactly the requests that ended in
// it. A series' samples must grow in time, and the TSDB takes samples only
// so far back, so the stamp is clamped:
//
//   - not after now: a request from the future (client clock skew) is
//     stamped now (reason "future");
//   - not before the label set's clock + 1 ms: a request that ended before
//     a sample already written for its label set is stamped just after that
//     sample (reason "behind_series") — counted, but later than it happened;
//   - not before now − BackfillWindow (+1 ms): an older request is stamped
//     there (reason "outside_backfill_window").
//
// Every clamped request is counted in
// tailroot_records_derived_restamped_total{reason} and logged per flush.
//
// So that increase() sees every increment, each counter and histogram
// series gets one extra sample 1 ms before a change when it needs one:
//
//   - a zero sample (0, or an empty histogram) before its first increment,
//     the "created" point Prometheus would otherwise lack;
//   - its previous value, when its last sample is more than
//     beforeSampleGap older: a window that starts in the gap then finds
//     the value before the change inside itself (Prometheus' lookback does
//     not reach back further than 5 minutes).
//
// With these, increase(x[w] anchored) of a tail series over (a, b] is
// exactly the sum of the requests stamped in (a, b]; plain increase()
// extrapolates to the window's ends and is an estimate.
const (
	defaultDeriveResolution = 1000
	defaultBackfillWindow   = 30 * 60 * 1000
	defaultRefresh          = 2 * 60 * 1000
	beforeSampleGap         = 60 * 1000
)

// Reasons a request is not stamped at its own slot.
const (
	restampFuture = iota
	restampBehind
	restampTooOld
	numRestamp
)

var restampReasons = [numRestamp]string{"future", "behind_series", "outside_backfill_window"}

// endSlot returns the end of the slot of width res holding r's end time.
func endSlot(r *records.Record, res int64) int64 {
	end := r.Time + int64(math.Round(r.E2E*1000))
	return (end + res - 1) / res * res
}

// touchedSeries is a series changed by the slot being written.
type touchedSeries struct {
	st     *labelState
	h      *nhist // or
	c      *tailCell
	family string
}

// flushStats counts what one flush appended.
type flushStats struct{ samples, histograms, exemplars int }

// slotWriter appends the samples of one flush. After the first error it
// keeps folding requests into the state but appends nothing more; the
// caller rolls back and rewrites every series at the next flush.
type slotWriter struct {
	d   *deriver
	app storage.AppenderV2
	ts  int64 // the slot being written
	fs  flushStats
	err error
}

func (w *slotWriter) appendFloat(ser *seriesRef, family string, ts int64, v float64, exs []exemplar.Exemplar) {
	if w.err != nil {
		return
	}
	opts := storage.AOptions{MetricFamilyName: family, Metadata: derivedMetadata[family], Exemplars: exs}
	ref, err := w.app.Append(ser.ref, ser.ls, 0, ts, v, nil, nil, opts)
	if err != nil && !isPartialExemplarErr(err) {
		w.err = fmt.Errorf("append %s at %d: %w", ser.ls, ts, err)
		return
	}
	ser.ref = ref
	w.fs.samples++
	w.fs.exemplars += len(exs)
}

func (w *slotWriter) appendHist(ser *seriesRef, family string, ts int64, h *histogram.Histogram, exs []exemplar.Exemplar) {
	if w.err != nil {
		return
	}
	opts := storage.AOptions{MetricFamilyName: family, Metadata: derivedMetadata[family], Exemplars: exs}
	ref, err := w.app.Append(ser.ref, ser.ls, 0, ts, 0, h, nil, opts)
	if err != nil && !isPartialExemplarErr(err) {
		w.err = fmt.Errorf("append %s at %d: %w", ser.ls, ts, err)
		return
	}
	ser.ref = ref
	w.fs.histograms++
	w.fs.exemplars += len(exs)
}

// needsBefore reports whether a series last written at lastT, holding
// count observations, needs a sample just before a change at ts.
func needsBefore(count float64, lastT, ts int64) bool {
	return count == 0 || ts-1-lastT > beforeSampleGap
}

// touchHist is called before h (of st) changes in the current slot.
func (w *slotWriter) touchHist(st *labelState, h *nhist, family string) {
	h.touched = true
	w.d.touched = append(w.d.touched, touchedSeries{st: st, h: h, family: family})
	if h.ser.ls.IsEmpty() {
		w.d.ensureLabels(st)
	}
	if needsBefore(float64(h.Count), h.lastT, w.ts) {
		w.appendHist(&h.ser, family, w.ts-1, h.histogram(), nil)
	}
}

// touchCell is called before c (of st) changes in the current slot.
func (w *slotWriter) touchCell(st *labelState, c *tailCell) {
	c.touched = true
	w.d.touched = append(w.d.touched, touchedSeries{st: st, c: c})
	if c.ser[0].ls.IsEmpty() {
		w.d.ensureLabels(st)
	}
	if needsBefore(c.Count, c.lastT, w.ts) {
		w.writeCell(c, w.ts-1, false)
	}
}

// writeCell appends a tail cell's stage sums and count at ts.
func (w *slotWriter) writeCell(c *tailCell, ts int64, withExemplar bool) {
	for j := range c.ser {
		if j < records.NumStages {
			w.appendFloat(&c.ser[j], SeriesTailStageSum, ts, c.Sum[j], nil)
			continue
		}
		var exs []exemplar.Exemplar
		if withExemplar {
			exs = c.ex.exemplars(ts)
		}
		w.appendFloat(&c.ser[j], SeriesTailRequests, ts, c.Count, exs)
	}
}

func (w *slotWriter) writeHist(h *nhist, family string, ts int64) {
	w.appendHist(&h.ser, family, ts, h.histogram(), h.ex.exemplars(ts))
}

// writeTouched appends the new value of every series the slot changed.
func (w *slotWriter) writeTouched() {
	for _, t := range w.d.touched {
		if t.h != nil {
			w.writeHist(t.h, t.family, w.ts)
			t.h.touched, t.h.dirty, t.h.lastT, t.h.ex = false, false, w.ts, exCand{}
		} else {
			w.writeCell(t.c, w.ts, true)
			t.c.touched, t.c.dirty, t.c.lastT, t.c.ex = false, false, w.ts, exCand{}
		}
		t.st.Clock = max(t.st.Clock, w.ts)
	}
	w.d.touched = w.d.touched[:0]
}

// stamped is a pending request with its label set and stamp.
type stamped struct {
	it *Item
	st *labelState
	ts int64
}

// flush folds the pending requests into the state slot by slot, appending
// each changed series at its slot's stamp, then appends at one stamp per
// label set the series left dirty by an earlier failed flush, and with full
// also those unchanged for the refresh interval, so that they do not go
// stale. now is the wall clock, Unix ms.
//
// The state always absorbs the pending requests, even when an append
// fails: the caller then rolls back and calls markAllDirty, and the next
// flush rewrites every series (values are cumulative, so nothing is lost,
// only stamped later).
func (d *deriver) flush(app storage.AppenderV2, now int64, full bool) (flushStats, error) {
	w := &slotWriter{d: d, app: app}
	if len(d.pending) > 0 {
		floor := now - d.maxAge + 1
		ps := make([]stamped, len(d.pending))
		for i := range d.pending {
			it := &d.pending[i]
			st := d.stateFor(it.Record.Labels)
			ts := endSlot(&it.Record, d.res)
			if ts > now {
				ts = now
				d.restamped[restampFuture]++
			}
			if lo := max(st.Clock+1, floor); ts < lo {
				if ts < floor {
					d.restamped[restampTooOld]++
				} else {
					d.restamped[restampBehind]++
				}
				ts = lo
			}
			ps[i] = stamped{it: it, st: st, ts: ts}
		}
		slices.SortStableFunc(ps, func(a, b stamped) int {
			switch {
			case a.ts < b.ts:
				return -1
			case a.ts > b.ts:
				return 1
			}
			return 0
		})
		for i := 0; i < len(ps); {
			w.ts = ps[i].ts
			for ; i < len(ps) && ps[i].ts == w.ts; i++ {
				d.addAt(ps[i].it, ps[i].st, w)
			}
			w.writeTouched()
		}
		d.pending = nil
	}
	for _, st := range d.order {
		d.writeRest(w, st, now, full)
	}
	return w.fs, w.err
}

// writeRest appends st's dirty series, and with full those whose last
// sample is older than the refresh interval, at one stamp after st's clock.
//
// Only a label set written in the last two refresh intervals is refreshed
// (at now − refresh, so that a request arriving up to that late still
// lands in place): one whose clock is further behind is being backfilled,
// and a refresh would move its clock to now and every later request of the
// backfill with it. An idle set stays refreshed, as each refresh moves its
// clock forward.
func (d *deriver) writeRest(w *slotWriter, st *labelState, now int64, full bool) {
	ts := st.Clock + 1
	full = full && st.Clock >= now-2*d.refresh
	if full {
		ts = max(ts, now-d.refresh)
	}
	stale := func(lastT int64) bool { return full && lastT < now-d.refresh }
	wrote := false
	hist := func(h *nhist, family string) {
		if h == nil || h.Count == 0 || !h.dirty && !stale(h.lastT) {
			return
		}
		if h.ser.ls.IsEmpty() {
			d.ensureLabels(st)
		}
		if h.needZero {
			w.appendHist(&h.ser, family, ts-1, (&nhist{}).histogram(), nil)
		}
		w.writeHist(h, family, ts)
		h.dirty, h.needZero, h.lastT, h.ex, wrote = false, false, ts, exCand{}, true
	}
	hist(&st.E2E, SeriesE2E)
	for j := range st.Stage {
		hist(&st.Stage[j], SeriesStage)
	}
	hist(&st.Entropy, SeriesPromptEntropy)
	for kind := range st.Tokens {
		for _, h := range st.Tokens[kind] {
			hist(h, SeriesTokenLatency)
		}
	}
	for _, b := range sortedKeys(st.Tail) {
		c := st.Tail[b]
		if c.Count == 0 || !c.dirty && !stale(c.lastT) {
			continue
		}
		if c.ser[0].ls.IsEmpty() {
			d.ensureLabels(st)
		}
		if c.needZero {
			w.writeCell(&tailCell{ser: c.ser}, ts-1, false)
		}
		w.writeCell(c, ts, true)
		c.dirty, c.needZero, c.lastT, c.ex, wrote = false, false, ts, exCand{}, true
	}
	if wrote {
		st.Clock = ts
	}
}

func isPartialExemplarErr(err error) bool {
	var pe *storage.AppendPartialError
	_, herr := pe.Handle(err)
	return herr == nil
}

// drainRestamped returns the restamp counts since the last call.
func (d *deriver) drainRestamped() [numRestamp]uint64 {
	out := d.restamped
	d.restamped = [numRestamp]uint64{}
	return out
}

// maxClock is the newest stamp of any label set.
func (d *deriver) maxClock() int64 {
	var m int64
	for _, st := range d.order {
		m = max(m, st.Clock)
	}
	return m
}

// advanceClocks moves every label set's clock to at least ts, so that
// the next samples are stamped after it.
func (d *deriver) advanceClocks(ts int64) {
	for _, st := range d.order {
		st.Clock = max(st.Clock, ts)
	}
}

// markMissing flags the series that exists says the TSDB lacks, so that
// the next write gives them their zero sample. After a crash the recovered
// requests may have created series the crashed process never appended;
// those that it did append already have one, and a second would read as a
// counter reset.
func (d *deriver) markMissing(exists func(labels.Labels) bool) int {
	n := 0
	for _, st := range d.order {
		d.ensureLabels(st)
		hist := func(h *nhist) {
			if h != nil && h.Count > 0 && !exists(h.ser.ls) {
				h.needZero = true
				n++
			}
		}
		hist(&st.E2E)
		for j := range st.Stage {
			hist(&st.Stage[j])
		}
		hist(&st.Entropy)
		for kind := range st.Tokens {
			for _, h := range st.Tokens[kind] {
				hist(h)
			}
		}
		for _, c := range st.Tail {
			if c.Count > 0 && !exists(c.ser[records.NumStages].ls) {
				c.needZero = true
				n++
			}
		}
	}
	return n
}
