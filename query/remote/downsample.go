package remote

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"

	"github.com/tailroot/tailroot/query/remote/storepb"
)

// AutoResolution, as a maximum source resolution, lets each selector read
// blocks of up to a fifth of the query's step (Thanos Query's
// max_source_resolution=auto), so at least five samples fall in each step.
const AutoResolution time.Duration = -1

type resolutionKey struct{}

// WithMaxSourceResolution overrides StoreAPIOptions.MaxSourceResolution for
// queries run with ctx: 0 asks StoreAPI endpoints for raw data only, a
// positive duration allows downsampled blocks of up to that resolution,
// AutoResolution one fifth of the step.
func WithMaxSourceResolution(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, resolutionKey{}, d)
}

// MaxSourceResolutionFrom returns the resolution WithMaxSourceResolution
// put in ctx, and whether there was one.
func MaxSourceResolutionFrom(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(resolutionKey{}).(time.Duration)
	return d, ok
}

// ParseMaxSourceResolution reads Thanos' max_source_resolution parameter:
// "auto", or a duration in Prometheus' syntax (0s, 5m, 1h).
func ParseMaxSourceResolution(s string) (time.Duration, error) {
	if s == "auto" {
		return AutoResolution, nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("max_source_resolution %q: want auto or a duration such as 0s, 5m, 1h: %w", s, err)
	}
	return time.Duration(d), nil
}

// maxResolutionWindow is the max_resolution_window (ms) a selector asks
// for. As in Thanos Query, a range function that needs two samples in its
// window never reads a resolution coarser than half the window: one sample
// per hour cannot make a 1h rate.
func maxResolutionWindow(ctx context.Context, def time.Duration, hints *storage.SelectHints) int64 {
	d := def
	if v, ok := MaxSourceResolutionFrom(ctx); ok {
		d = v
	}
	var ms int64
	switch {
	case d == AutoResolution:
		if hints != nil {
			ms = hints.Step / 5
		}
	case d > 0:
		ms = d.Milliseconds()
	}
	if hints != nil && hints.Range > 0 && needsTwoSamples[hints.Func] {
		ms = min(ms, hints.Range/2)
	}
	return max(ms, 0)
}

// needsTwoSamples are the range functions that take differences inside
// their window.
var needsTwoSamples = map[string]bool{
	"rate": true, "irate": true, "increase": true, "delta": true, "idelta": true,
	"deriv": true, "predict_linear": true, "holt_winters": true, "double_exponential_smoothing": true,
}

// aggrsForFunc chooses which aggregate of a downsampled chunk stands for
// the raw samples under the function that reads them, as Thanos Query does:
// the window minimum for min_*, maximum for max_*, sample count for
// count_*, sum for sum_*, the reset-adjusted counter for rate, increase,
// irate and resets, and otherwise (plain selectors, sum, avg_over_time, …)
// the average sum/count of each window.
func aggrsForFunc(f string) []storepb.Aggr {
	switch {
	case f == "min" || strings.HasPrefix(f, "min_"):
		return []storepb.Aggr{storepb.Aggr_MIN}
	case f == "max" || strings.HasPrefix(f, "max_"):
		return []storepb.Aggr{storepb.Aggr_MAX}
	case f == "count" || strings.HasPrefix(f, "count_"):
		return []storepb.Aggr{storepb.Aggr_COUNT}
	case strings.HasPrefix(f, "sum_"):
		// A plain sum wants the samples themselves: the average below.
		return []storepb.Aggr{storepb.Aggr_SUM}
	case f == "rate" || f == "increase" || f == "irate" || f == "resets":
		return []storepb.Aggr{storepb.Aggr_COUNTER}
	}
	return []storepb.Aggr{storepb.Aggr_COUNT, storepb.Aggr_SUM}
}

// chunkFromPB decodes one chunk with the TSDB's own decoders. The TSDB's
// iterators trust the chunk header (a 2-byte sample count, plus a flags
// byte for histograms); a shorter chunk would make them panic, so it is
// rejected here.
func chunkFromPB(c *storepb.Chunk) (chunkenc.Chunk, error) {
	var (
		enc    chunkenc.Encoding
		header int
	)
	switch c.GetType() {
	case storepb.Chunk_XOR:
		enc, header = chunkenc.EncXOR, 2
	case storepb.Chunk_HISTOGRAM:
		enc, header = chunkenc.EncHistogram, 3
	case storepb.Chunk_FLOAT_HISTOGRAM:
		enc, header = chunkenc.EncFloatHistogram, 3
	default:
		return nil, fmt.Errorf("unknown encoding %d", c.GetType())
	}
	if len(c.GetData()) < header {
		return nil, fmt.Errorf("%d bytes, shorter than the %s chunk header", len(c.GetData()), enc)
	}
	return chunkenc.FromData(enc, c.GetData())
}

// aggrChunkIterator returns how one StoreAPI chunk is read under aggrs: its
// raw samples when it has them, else the chosen aggregate (for COUNT+SUM
// the per-window average). A chunk missing the aggregate asked for is an
// error: the endpoint did not answer the request.
func aggrChunkIterator(ac *storepb.AggrChunk, aggrs []storepb.Aggr) (func() chunkenc.Iterator, error) {
	one := func(c *storepb.Chunk, what string) (func() chunkenc.Iterator, error) {
		if c == nil {
			return nil, fmt.Errorf("no raw data and no %s aggregate", what)
		}
		chk, err := chunkFromPB(c)
		if err != nil {
			return nil, fmt.Errorf("%s aggregate: %w", what, err)
		}
		return func() chunkenc.Iterator { return chk.Iterator(nil) }, nil
	}
	if raw := ac.GetRaw(); raw != nil {
		return one(raw, "raw")
	}
	if len(aggrs) == 1 {
		switch aggrs[0] {
		case storepb.Aggr_COUNT:
			return one(ac.GetCount(), "count")
		case storepb.Aggr_SUM:
			return one(ac.GetSum(), "sum")
		case storepb.Aggr_MIN:
			return one(ac.GetMin(), "min")
		case storepb.Aggr_MAX:
			return one(ac.GetMax(), "max")
		case storepb.Aggr_COUNTER:
			return one(ac.GetCounter(), "counter")
		}
	}
	if len(aggrs) == 2 {
		cnt, err := one(ac.GetCount(), "count")
		if err != nil {
			return nil, err
		}
		sum, err := one(ac.GetSum(), "sum")
		if err != nil {
			return nil, err
		}
		samples, err := averageSamples(cnt(), sum())
		if err != nil {
			return nil, err
		}
		return func() chunkenc.Iterator { return storage.NewListSeriesIterator(chunks.SampleSlice(samples)) }, nil
	}
	if len(aggrs) == 0 {
		return nil, errors.New("no raw data (a downsampled aggregate, but raw data was asked for)")
	}
	return nil, fmt.Errorf("no raw data, and aggregates %v cannot be read", aggrs)
}

// seriesFromPB decodes one StoreAPI series: its labels, sorted, and its
// chunks, read as aggrChunkIterator says. Overlapping chunks (a Thanos
// Query over a sidecar and a store holding the same block) are
// chain-merged, as the prometheus module does for remote read — except
// under the COUNTER aggregate, whose chunks are read in order by the
// counter iterator (it handles overlaps itself), because the reset
// adjustment needs the previous chunk's last raw value.
func seriesFromPB(ps *storepb.Series, aggrs []storepb.Aggr) (storage.Series, error) {
	b := labels.NewScratchBuilder(len(ps.GetLabels()))
	for _, l := range ps.GetLabels() {
		if l.GetName() == "" {
			return nil, errors.New("series with an empty label name")
		}
		b.Add(l.GetName(), l.GetValue())
	}
	b.Sort()
	lset := b.Labels()
	if lset.IsEmpty() {
		return nil, errors.New("series without labels")
	}
	if len(ps.GetChunks()) == 0 {
		return storage.NewListSeries(lset, nil), nil
	}
	its := make([]func() chunkenc.Iterator, 0, len(ps.GetChunks()))
	allRaw := true
	for i, ac := range ps.GetChunks() {
		if ac.GetMinTime() > ac.GetMaxTime() {
			return nil, fmt.Errorf("series %s: chunk %d: min time %d after max time %d", lset, i, ac.GetMinTime(), ac.GetMaxTime())
		}
		allRaw = allRaw && ac.GetRaw() != nil
		it, err := aggrChunkIterator(ac, aggrs)
		if err != nil {
			return nil, fmt.Errorf("series %s: chunk %d: %w", lset, i, err)
		}
		if err := checkChunkOrder(it()); err != nil {
			return nil, fmt.Errorf("series %s: chunk %d: %w", lset, i, err)
		}
		its = append(its, it)
	}
	if !allRaw && len(aggrs) == 1 && aggrs[0] == storepb.Aggr_COUNTER {
		chks := make([]chunkenc.Iterator, len(its))
		for i, f := range its {
			chks[i] = f()
		}
		samples, err := counterSamples(chks)
		if err != nil {
			return nil, fmt.Errorf("series %s: %w", lset, err)
		}
		return storage.NewListSeries(lset, samples), nil
	}
	parts := make([]storage.Series, len(its))
	for i, f := range its {
		parts[i] = &storage.SeriesEntry{Lset: lset, SampleIteratorFn: func(chunkenc.Iterator) chunkenc.Iterator { return f() }}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return storage.ChainedSeriesMerge(parts...), nil
}

// checkChunkOrder reads a decoded chunk once, before the engine does, and
// fails if its timestamps go back in time or it does not decode to the
// end. The chunk bytes are the endpoint's: XOR and histogram chunks store
// timestamp deltas, so a buggy or hostile store can encode any order, and
// chunkenc decodes it without complaint. The merge iterators and the
// engine assume time order and would silently answer wrong, so the whole
// response is the store's error instead (storeQuerier names the store; a
// warning under partial response), as a Thanos querier treats a store
// that breaks the protocol. Equal timestamps pass: a Thanos counter
// aggregate chunk repeats its last timestamp to carry the true last raw
// value (see counterSamples).
func checkChunkOrder(it chunkenc.Iterator) error {
	last := int64(math.MinInt64)
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		t := it.AtT()
		if t < last {
			return fmt.Errorf("samples out of order: %d after %d", t, last)
		}
		last = t
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}

// aggSample is one decoded sample of a downsampled series.
type aggSample struct {
	t  int64
	f  float64
	fh *histogram.FloatHistogram
}

func (s aggSample) T() int64                      { return s.t }
func (aggSample) ST() int64                       { return 0 } // aggregates keep no start times
func (s aggSample) F() float64                    { return s.f }
func (aggSample) H() *histogram.Histogram         { return nil }
func (s aggSample) FH() *histogram.FloatHistogram { return s.fh }

func (s aggSample) Type() chunkenc.ValueType {
	if s.fh != nil {
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

func (s aggSample) Copy() chunks.Sample {
	if s.fh != nil {
		s.fh = s.fh.Copy()
	}
	return s
}

// counterSamples reads the counter aggregates of downsampled chunks (and
// any raw chunks among them), in order, as one counter whose resets are
// already taken out. Thanos stores each window's counter value adjusted
// for resets inside the chunk, with the chunk's first raw value first and
// its last raw value repeated at the last timestamp; comparing that last
// raw value with the next chunk's first one finds a reset between chunks.
// The output never decreases, so rate() and increase() see no resets, and
// resets() over it counts none (as through Thanos Query). Samples going
// back in time (overlapping chunks) and NaNs (stale markers) are dropped;
// histogram samples pass through, their resets left to PromQL. The
// samples are decoded eagerly: a downsampled chunk holds one sample per
// window, and a decoding error is then the store's error, not a query's
// silent truncation.
func counterSamples(chks []chunkenc.Iterator) ([]chunks.Sample, error) {
	var (
		out         []chunks.Sample
		lastT       = int64(math.MinInt64)
		last, total float64
		floats      int
	)
	for _, c := range chks {
		for vt := c.Next(); vt != chunkenc.ValNone; vt = c.Next() {
			t := c.AtT()
			if vt != chunkenc.ValFloat {
				if t > lastT {
					_, fh := c.AtFloatHistogram(nil)
					out = append(out, aggSample{t: t, fh: fh})
					lastT = t
				}
				continue
			}
			_, v := c.At()
			switch {
			case math.IsNaN(v):
				continue
			case floats == 0:
				total = v
			case t > lastT:
				if v >= last {
					total += v - last
				} else {
					total += v
				}
			case t == lastT:
				// The chunk's true last raw value, for the next
				// chunk's reset check; not a sample of its own.
				last = v
				continue
			default:
				continue // back in time: an overlapping chunk
			}
			floats++
			lastT, last = t, v
			out = append(out, aggSample{t: t, f: total})
		}
		if err := c.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// averageSamples yields each downsampling window's average, its sum
// divided by its count, from a chunk's two aligned aggregates; a histogram
// sum is divided bucket by bucket.
func averageSamples(cnt, sum chunkenc.Iterator) ([]chunks.Sample, error) {
	var out []chunks.Sample
	for {
		ct, st := cnt.Next(), sum.Next()
		if ct == chunkenc.ValNone && st == chunkenc.ValNone {
			break
		}
		if ct != chunkenc.ValFloat || st == chunkenc.ValNone || cnt.AtT() != sum.AtT() {
			return nil, errors.New("count and sum aggregates not aligned")
		}
		t, n := cnt.At()
		if st == chunkenc.ValFloat {
			_, s := sum.At()
			out = append(out, aggSample{t: t, f: s / n})
			continue
		}
		_, fh := sum.AtFloatHistogram(nil)
		out = append(out, aggSample{t: t, fh: fh.Div(n)})
	}
	if err := cnt.Err(); err != nil {
		return nil, err
	}
	return out, sum.Err()
}
