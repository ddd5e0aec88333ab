package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/storage"
)

// result is what one request wrote. fatal is a store failure: everything
// was rolled back. bad lists rejected series and samples: the rest was
// committed.
type result struct {
	samples, histograms, exemplars int
	bad                            badList
	fatal                          error
}

// badList keeps the first few rejections verbatim and counts the rest, so a
// response names what was wrong without growing with the request.
type badList struct {
	count int
	first []string
}

const maxReportedErrors = 10

func (b *badList) add(format string, args ...any) {
	b.count++
	if len(b.first) < maxReportedErrors {
		b.first = append(b.first, fmt.Sprintf(format, args...))
	}
}

func (b *badList) err() error {
	msg := strings.Join(b.first, "; ")
	if b.count > len(b.first) {
		msg += fmt.Sprintf("; and %d more", b.count-len(b.first))
	}
	return fmt.Errorf("%d rejected (the rest was written): %s", b.count, msg)
}

// rejectable reports whether an append error is about the sample (the
// sender must not retry it) rather than about the store.
func rejectable(err error) (reason string, ok bool) {
	var herr histogram.Error
	switch {
	case errors.Is(err, storage.ErrOutOfOrderSample):
		return "out_of_order", true
	case errors.Is(err, storage.ErrOutOfBounds):
		return "out_of_bounds", true
	case errors.Is(err, storage.ErrTooOldSample):
		return "too_old", true
	case errors.Is(err, storage.ErrDuplicateSampleForTimestamp):
		return "duplicate", true
	case errors.As(err, &herr):
		return "invalid_histogram", true
	}
	return "", false
}

// appender wraps one storage appender for one request.
type appender struct {
	h       *RemoteWrite
	app     storage.AppenderV2
	exApp   storage.ExemplarAppenderV2
	maxTime int64
	res     result
	sb      labels.ScratchBuilder
	exs     []exemplar.Exemplar
	dups    *dupIndex
	// meta is the metadata of the series being appended, handed to the
	// store so that it reaches the WAL (and remote write 2.0 forwarding);
	// zero when the request carried none for it.
	meta metadata.Metadata
}

// dupIndex finds the earlier entries of one request for the same series.
// The head keeps the first of a request's samples at one timestamp and
// drops the others silently, so the handler compares them itself: a repeat
// with the same value is dropped (a retried or merged batch), one with
// another value is reported as a conflict, as one across requests is.
//
// It is pooled by the handler and keyed by the hash the series cache
// already computes, so a request without repeats costs one map insert per
// series and no allocation once warm.
type dupIndex struct {
	last map[uint64]int32 // series key → newest entry with that key
	prev []int32          // entry → earlier entry with the same key, or -1
	ls   []labels.Labels  // entry → its labels, for entries recorded
	out  []int
}

// reset prepares the index for a request of n entries.
func (d *dupIndex) reset(n int) {
	if d.last == nil {
		d.last = make(map[uint64]int32, n)
	}
	clear(d.last)
	d.prev = slices.Grow(d.prev[:0], n)[:n]
	d.ls = slices.Grow(d.ls[:0], n)[:n]
}

// earlier records entry i, whose labels are ls and series key key, and
// returns the earlier entries with the same labels, usually none. The
// result is valid until the next call.
func (d *dupIndex) earlier(key uint64, ls labels.Labels, i int) []int {
	d.out = d.out[:0]
	p, ok := d.last[key]
	if !ok {
		p = -1
	}
	for j := p; j >= 0; j = d.prev[j] {
		if labels.Equal(d.ls[j], ls) {
			d.out = append(d.out, int(j))
		}
	}
	d.prev[i] = p
	d.ls[i] = ls
	d.last[key] = int32(i)
	return d.out
}

// release drops the labels the index holds, so a pooled index keeps none
// of a request alive.
func (d *dupIndex) release() {
	clear(d.ls)
}

// repeated handles a float sample whose timestamp this request already
// carried for the series, with value prev: it reports a conflict when the
// values differ. The sample is skipped either way.
func (a *appender) repeated(ls labels.Labels, t int64, v, prev float64) {
	if math.Float64bits(v) == math.Float64bits(prev) {
		return
	}
	a.reject("duplicate", ls, t, fmt.Errorf("%w: the request has %g and %g", storage.ErrDuplicateSampleForTimestamp, prev, v))
}

func (h *RemoteWrite) newAppender(ctx context.Context, entries int) *appender {
	app := h.app.AppenderV2(ctx)
	ex, _ := app.(storage.ExemplarAppenderV2)
	d, _ := h.dupPool.Get().(*dupIndex)
	if d == nil {
		d = &dupIndex{}
	}
	d.reset(entries)
	return &appender{
		h:       h,
		app:     app,
		exApp:   ex,
		maxTime: timestamp.FromTime(time.Now().Add(h.opts.MaxFutureSkew)),
		sb:      labels.NewScratchBuilder(16),
		dups:    d,
	}
}

// finish commits (or, after a store failure, rolls back) and returns the result.
func (a *appender) finish() result {
	a.dups.release()
	a.h.dupPool.Put(a.dups)
	if a.res.fatal != nil {
		_ = a.app.Rollback()
		a.res.samples, a.res.histograms, a.res.exemplars = 0, 0, 0
		return a.res
	}
	if err := a.app.Commit(); err != nil {
		a.res.fatal = fmt.Errorf("commit: %w", err)
		a.res.samples, a.res.histograms, a.res.exemplars = 0, 0, 0
	}
	return a.res
}

// sample appends one float or histogram sample, sorting any error into a
// rejection or a fatal store failure. It returns the (possibly new) ref.
func (a *appender) sample(ref storage.SeriesRef, ls labels.Labels, st, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, bool) {
	if t > a.maxTime {
		a.reject("too_far_in_future", ls, t, fmt.Errorf("timestamp is more than %s ahead of the server clock", a.h.opts.MaxFutureSkew))
		return ref, false
	}
	if h != nil && histogram.IsExponentialSchemaReserved(h.Schema) && h.Schema > histogram.ExponentialSchemaMax {
		if err := h.ReduceResolution(histogram.ExponentialSchemaMax); err != nil {
			a.reject("invalid_histogram", ls, t, err)
			return ref, false
		}
	}
	if fh != nil && histogram.IsExponentialSchemaReserved(fh.Schema) && fh.Schema > histogram.ExponentialSchemaMax {
		if err := fh.ReduceResolution(histogram.ExponentialSchemaMax); err != nil {
			a.reject("invalid_histogram", ls, t, err)
			return ref, false
		}
	}
	nref, err := a.app.Append(ref, ls, st, t, v, h, fh, storage.AOptions{Metadata: a.meta})
	if err == nil {
		return nref, true
	}
	if reason, ok := rejectable(err); ok {
		a.reject(reason, ls, t, err)
		return ref, false
	}
	a.res.fatal = fmt.Errorf("append to series %s: %w", ls.String(), err)
	return ref, false
}

func (a *appender) reject(reason string, ls labels.Labels, t int64, err error) {
	a.h.rejected.WithLabelValues(reason).Inc()
	a.res.bad.add("series %s at %d: %v", ls.String(), t, err)
}

// exemplars appends sorted exemplars; exemplar storage is best effort in
// Prometheus, so only out-of-order ones are reported to the sender.
func (a *appender) exemplars(ref storage.SeriesRef, ls labels.Labels, exs []exemplar.Exemplar) {
	if len(exs) == 0 || a.exApp == nil {
		return
	}
	valid := exs[:0]
	for _, e := range exs {
		if e.Ts > a.maxTime {
			a.res.bad.add("exemplar of series %s at %d: timestamp is more than %s ahead of the server clock", ls.String(), e.Ts, a.h.opts.MaxFutureSkew)
			continue
		}
		valid = append(valid, e)
	}
	if len(valid) == 0 {
		return
	}
	slices.SortFunc(valid, exemplar.Compare)
	_, err := a.exApp.AppendExemplars(ref, ls, valid)
	failed := 0
	if pErr, ok := errors.AsType[*storage.AppendPartialError](err); ok {
		for _, e := range pErr.ExemplarErrors {
			failed++
			if errors.Is(e.Err, storage.ErrOutOfOrderExemplar) {
				a.res.bad.add("exemplar of series %s: %v", ls.String(), e.Err)
			}
		}
	} else if err != nil {
		if errors.Is(err, storage.ErrOutOfOrderExemplar) {
			a.res.bad.add("exemplar of series %s: %v", ls.String(), err)
		}
		a.h.logger.Debug("exemplars not stored", "series", ls.String(), "err", err)
		return
	}
	a.res.exemplars += len(valid) - failed
}

// validate checks a freshly built label set; the error names what is wrong.
func (h *RemoteWrite) validate(ls labels.Labels) error {
	if ls.IsEmpty() {
		return errors.New("series has no labels")
	}
	if ls.Get(model.MetricNameLabel) == "" {
		return errors.New("series has no metric name (__name__ missing or empty)")
	}
	return h.rules.Labels(ls)
}

// appendV1 writes a remote write 1.0 request decoded to views.
func (h *RemoteWrite) appendV1(ctx context.Context, req *v1Request) result {
	a := h.newAppender(ctx, len(req.series))
	for i := range req.series {
		s := &req.series[i]
		pairs := req.pairs[s.pairs.from:s.pairs.to]
		samples := req.samples[s.samples.from:s.samples.to]
		hists := req.hists[s.hists.from:s.hists.to]
		exs := req.exs[s.exs.from:s.exs.to]
		n := len(samples) + len(hists)

		var (
			ls  labels.Labels
			ref storage.SeriesRef
			key uint64
			hit bool
		)
		if h.cache != nil {
			key = seriesKeyBytes(pairs)
			var e cacheEntry
			if e, hit = h.cache.get(key); hit && equalPairBytes(e.ls, pairs) {
				ls, ref = e.ls, e.ref
			} else {
				hit = false
			}
		}
		if h.cache == nil {
			key = seriesKeyBytes(pairs)
		}
		if !hit {
			a.sb.Reset()
			for _, p := range pairs {
				a.sb.Add(string(p[0]), string(p[1]))
			}
			a.sb.Sort()
			ls = a.sb.Labels()
			if err := h.validate(ls); err != nil {
				h.rejected.WithLabelValues("invalid_labels").Add(float64(n))
				a.res.bad.add("series %s: %v", ls.String(), err)
				continue
			}
		}
		startRef := ref
		earlier := a.dups.earlier(key, ls, i)
	samplesV1:
		for k, s := range samples {
			if k > 0 && s.Timestamp == samples[k-1].Timestamp {
				a.repeated(ls, s.Timestamp, s.Value, samples[k-1].Value)
				continue
			}
			for _, j := range earlier {
				o := req.series[j].samples
				for _, p := range req.samples[o.from:o.to] {
					if p.Timestamp == s.Timestamp {
						a.repeated(ls, s.Timestamp, s.Value, p.Value)
						continue samplesV1
					}
				}
			}
			var ok bool
			if ref, ok = a.sample(ref, ls, 0, s.Timestamp, s.Value, nil, nil); ok {
				a.res.samples++
			}
			if a.res.fatal != nil {
				return a.finish()
			}
		}
		for j := range hists {
			hp := &hists[j]
			var ok bool
			if hp.IsFloatHistogram() {
				ref, ok = a.sample(ref, ls, 0, hp.Timestamp, 0, nil, hp.ToFloatHistogram())
			} else {
				ref, ok = a.sample(ref, ls, 0, hp.Timestamp, 0, hp.ToIntHistogram(), nil)
			}
			if ok {
				a.res.histograms++
			}
			if a.res.fatal != nil {
				return a.finish()
			}
		}
		if len(exs) > 0 {
			a.exs = a.exs[:0]
			for _, ep := range exs {
				a.exs = append(a.exs, ep.ToExemplar(&a.sb, nil))
			}
			a.exemplars(ref, ls, a.exs)
		}
		if h.cache != nil && ref != 0 && (!hit || ref != startRef) {
			h.cache.put(key, cacheEntry{ls: ls, ref: ref})
		}
	}
	if h.md != nil {
		for _, m := range req.metadata {
			if err := h.md.Set(m.MetricFamilyName, metadata.Metadata{
				Type: metricTypeV1(m.Type), Help: m.Help, Unit: m.Unit,
			}); err != nil {
				a.res.fatal = fmt.Errorf("store metadata: %w", err)
				break
			}
		}
	}
	return a.finish()
}

// appendV2 writes a remote write 2.0 request.
func (h *RemoteWrite) appendV2(ctx context.Context, req *writev2.Request) result {
	a := h.newAppender(ctx, len(req.Timeseries))
	syms := req.Symbols
	var symHash []uint64
	if h.cache != nil {
		symHash = make([]uint64, len(syms))
		for i, s := range syms {
			symHash[i] = xxhash.Sum64String(s)
		}
	}
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		n := len(ts.Samples) + len(ts.Histograms)

		var (
			ls  labels.Labels
			ref storage.SeriesRef
			key uint64
			hit bool
		)
		refs := ts.LabelsRefs
		refsOK := len(refs)%2 == 0
		for _, r := range refs {
			if int(r) >= len(syms) {
				refsOK = false
				break
			}
		}
		if !refsOK {
			h.rejected.WithLabelValues("invalid_labels").Add(float64(n))
			a.res.bad.add("series %d: labels_refs %v are odd in number or outside the symbols table (size %d)", i, refs, len(syms))
			continue
		}
		if h.cache != nil {
			key = seriesKeyRefs(refs, symHash)
			var e cacheEntry
			if e, hit = h.cache.get(key); hit && equalPairsV2(e.ls, refs, syms) {
				ls, ref = e.ls, e.ref
			} else {
				hit = false
			}
		}
		if !hit {
			var err error
			if ls, err = ts.ToLabels(&a.sb, syms); err == nil {
				err = h.validate(ls)
			}
			if err != nil {
				h.rejected.WithLabelValues("invalid_labels").Add(float64(n))
				a.res.bad.add("series %s: %v", ls.String(), err)
				continue
			}
		}
		// As in Prometheus: exemplars travel with a sample of their series;
		// a series with exemplars only is refused rather than dropped.
		if n == 0 {
			h.rejected.WithLabelValues("no_samples").Add(float64(len(ts.Exemplars)))
			a.res.bad.add("series %s: has no samples or histograms (%d exemplars need a sample of their series)", ls.String(), len(ts.Exemplars))
			continue
		}
		if len(ts.Samples) > 0 && len(ts.Histograms) > 0 {
			h.rejected.WithLabelValues("mixed_samples").Add(float64(n))
			a.res.bad.add("series %s: has both float samples and histograms", ls.String())
			continue
		}
		a.meta = metadata.Metadata{}
		if h.md != nil && (ts.Metadata.Type != 0 || ts.Metadata.HelpRef != 0 || ts.Metadata.UnitRef != 0) {
			m, err := ts.ToMetadata(syms)
			if err != nil {
				a.res.bad.add("series %s: %v", ls.String(), err)
			} else if err := h.md.Set(familyName(ls.Get(model.MetricNameLabel), m.Type), m); err != nil {
				a.res.fatal = fmt.Errorf("store metadata: %w", err)
				return a.finish()
			} else {
				a.meta = m
			}
		}
		startRef := ref
		if h.cache == nil {
			key = ls.Hash()
		}
		earlier := a.dups.earlier(key, ls, i)
	samplesV2:
		for k, s := range ts.Samples {
			if k > 0 && s.Timestamp == ts.Samples[k-1].Timestamp {
				a.repeated(ls, s.Timestamp, s.Value, ts.Samples[k-1].Value)
				continue
			}
			for _, j := range earlier {
				for _, p := range req.Timeseries[j].Samples {
					if p.Timestamp == s.Timestamp {
						a.repeated(ls, s.Timestamp, s.Value, p.Value)
						continue samplesV2
					}
				}
			}
			var ok bool
			if ref, ok = a.sample(ref, ls, s.StartTimestamp, s.Timestamp, s.Value, nil, nil); ok {
				a.res.samples++
			}
			if a.res.fatal != nil {
				return a.finish()
			}
		}
		for j := range ts.Histograms {
			hp := &ts.Histograms[j]
			var ok bool
			if hp.IsFloatHistogram() {
				ref, ok = a.sample(ref, ls, hp.StartTimestamp, hp.Timestamp, 0, nil, hp.ToFloatHistogram())
			} else {
				ref, ok = a.sample(ref, ls, hp.StartTimestamp, hp.Timestamp, 0, hp.ToIntHistogram(), nil)
			}
			if ok {
				a.res.histograms++
			}
			if a.res.fatal != nil {
				return a.finish()
			}
		}
		if len(ts.Exemplars) > 0 {
			a.exs = a.exs[:0]
			for _, ep := range ts.Exemplars {
				e, err := ep.ToExemplar(&a.sb, syms)
				if err != nil {
					a.res.bad.add("exemplar of series %s: %v", ls.String(), err)
					continue
				}
				a.exs = append(a.exs, e)
			}
			a.exemplars(ref, ls, a.exs)
		}
		if h.cache != nil && ref != 0 && (!hit || ref != startRef) {
			h.cache.put(key, cacheEntry{ls: ls, ref: ref})
		}
	}
	return a.finish()
}

// equalPairBytes reports whether ls holds exactly the pairs, in order. The
// string(b) == s comparisons do not allocate.
func equalPairBytes(ls labels.Labels, pairs [][2][]byte) bool {
	if ls.Len() != len(pairs) {
		return false
	}
	i, eq := 0, true
	ls.Range(func(l labels.Label) {
		if eq && (l.Name != string(pairs[i][0]) || l.Value != string(pairs[i][1])) {
			eq = false
		}
		i++
	})
	return eq
}

func equalPairsV2(ls labels.Labels, refs []uint32, syms []string) bool {
	if ls.Len()*2 != len(refs) {
		return false
	}
	i, eq := 0, true
	ls.Range(func(l labels.Label) {
		if eq && (l.Name != syms[refs[i]] || l.Value != syms[refs[i+1]]) {
			eq = false
		}
		i += 2
	})
	return eq
}

// familyName strips the series suffixes that belong to one family of a
// classic histogram or summary, so metadata is keyed as a scrape keys it.
func familyName(series string, t model.MetricType) string {
	switch t {
	case model.MetricTypeHistogram, model.MetricTypeGaugeHistogram:
		for _, s := range []string{"_bucket", "_sum", "_count", "_gcount", "_gsum"} {
			if f, ok := strings.CutSuffix(series, s); ok {
				return f
			}
		}
	case model.MetricTypeSummary:
		for _, s := range []string{"_sum", "_count"} {
			if f, ok := strings.CutSuffix(series, s); ok {
				return f
			}
		}
	}
	return series
}

func metricTypeV1(t prompb.MetricMetadata_MetricType) model.MetricType {
	switch t {
	case prompb.MetricMetadata_COUNTER:
		return model.MetricTypeCounter
	case prompb.MetricMetadata_GAUGE:
		return model.MetricTypeGauge
	case prompb.MetricMetadata_HISTOGRAM:
		return model.MetricTypeHistogram
	case prompb.MetricMetadata_GAUGEHISTOGRAM:
		return model.MetricTypeGaugeHistogram
	case prompb.MetricMetadata_SUMMARY:
		return model.MetricTypeSummary
	case prompb.MetricMetadata_INFO:
		return model.MetricTypeInfo
	case prompb.MetricMetadata_STATESET:
		return model.MetricTypeStateset
	}
	return model.MetricTypeUnknown
}
