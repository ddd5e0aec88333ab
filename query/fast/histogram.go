package fast

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/parser/posrange"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
)

// errHistogramFirst is the ErrHistogram a leaf returns when it met a
// native histogram before handing any column to its sink: a leaf that
// may read histograms (leaf.hist) then starts over on them.
var errHistogramFirst = fmt.Errorf("%w before any output", ErrHistogram)

// histBatchSeries bounds the series of one histogram batch: each holds a
// FloatHistogram per step.
const histBatchSeries = 32

// histPathOK reports whether the nodes above a rate or increase (path,
// from the root) take the native histograms it returns: from the rate
// up, sums and parentheses until a node that turns them into floats
// (count, histogram_quantile, histogram_count/sum/avg), above which
// anything goes, or the root.
func histPathOK(path []parser.Node) bool {
	for i := len(path) - 1; i >= 0; i-- {
		switch n := path[i].(type) {
		case *parser.ParenExpr:
		case *parser.AggregateExpr:
			switch n.Op {
			case parser.SUM:
			case parser.COUNT:
				return true
			default:
				return false
			}
		case *parser.Call:
			return n.Func.Name == "histogram_quantile" || histFns[n.Func.Name]
		default:
			return false
		}
	}
	return true
}

// statsPath reports whether upstream reads a selector under path through
// its HistogramStatsIterator (the engine's detectHistogramStatsDecoding):
// below histogram_count, histogram_sum or histogram_avg and no function
// that needs the buckets. That iterator passes a gauge hint through, so
// rate and increase then find counter resets between gauge histograms from
// their counts alone, where the full histograms' DetectReset also sees
// buckets that go down.
func statsPath(path []parser.Node) bool {
	stats := false
	for i := len(path) - 1; i >= 0; i-- {
		switch n := path[i].(type) {
		case *parser.SubqueryExpr:
			return false
		case *parser.Call:
			switch n.Func.Name {
			case "histogram_count", "histogram_sum", "histogram_avg", "timestamp", "start_timestamp", "absent":
				stats = true
			case "histogram_quantile", "histogram_quantiles", "histogram_fraction", "histogram_stddev", "histogram_stdvar", "changes":
				return false
			}
		case *parser.AggregateExpr:
			if n.Op == parser.COUNT_VALUES {
				return false
			}
		case *parser.BinaryExpr:
			switch n.Op {
			case parser.TRIM_UPPER, parser.TRIM_LOWER, parser.EQLC, parser.NEQ:
				return false
			}
		}
	}
	return stats
}

// hpoint is one histogram sample; h is owned by the worker and reused.
type hpoint struct {
	t int64
	h *histogram.FloatHistogram
}

// histShard is one worker's querier, series set and buffers for a
// histogram leaf.
type histShard struct {
	querier storage.Querier
	seriesWalk
	it      chunkenc.Iterator
	pts     []hpoint // the series' samples in the windows; pts[:cap] keep their histograms
	zero    histogram.FloatHistogram
	resets  []bool // resets[j]: pts[j].h.DetectReset(pts[j-1].h)
	breaks  []int  // breaks[j+1]-breaks[j]: pts[j] has another layout than pts[j-1] (or a gauge hint)
	below   belowCache
	annos   []error    // one step's annotations, before they go to the evaluator
	maxWin  int        // the largest sample count (upstream's) of the points one series read
	chunked histChunks // where the leaf reads chunks (runHistChunks)
}

// runHistLeaf evaluates a rate or increase over native histograms. Where
// the storage serves chunks it reads them (runHistChunks, which sees the
// resets upstream sees without its iterators: histogram_chunk.go). Else,
// and where the chunks are not ones that reader takes, it reads through
// sample iterators, as upstream does, so that the counter reset hints
// (which a merge of blocks resets to unknown where it joins them, and
// where a seek lands) are the ones upstream sees: it reads each series as
// upstream's buffered iterator does when the range is at least the step
// (one Next, a Seek to the first window's start, then Next to the end;
// with a range shorter than the step, a Seek to each step's window start
// it has not read past). Any float sample other than a stale marker in
// the windows (a mixed selection) hands the query back.
func (ev *evaluator) runHistLeaf(l *leaf, s sink) error {
	if cq, ok := chunkQueryable(ev.q); ok {
		err := ev.runHistChunks(l, s, cq)
		if !errors.Is(err, errHistChunk) {
			return err
		}
	}
	mint, maxt, hints := ev.selectHints(l)
	shards := make([]histShard, ev.opts.Workers)
	defer func() {
		for i := range shards {
			if shards[i].querier != nil {
				_ = shards[i].querier.Close()
			}
		}
	}()
	if err := parallel(len(shards), len(shards), func(w, _, _ int) error {
		h := *hints
		q, err := ev.q.Querier(mint, maxt)
		if err != nil {
			return err
		}
		shards[w].querier = q
		shards[w].set = q.Select(ev.ctx, false, &h, slices.Clone(l.vs.LabelMatchers)...)
		return nil
	}); err != nil {
		return err
	}
	return ev.histBatches(l, s, shards, func(sh *histShard) error { return sh.read(ev, l) })
}

// histBatches evaluates a histogram leaf's series batch by batch into s,
// each worker filling its shard's pts for a series with read. A read
// that returns errHistChunk before any batch went to s returns it (the
// leaf starts over on samples), after that ErrFallback.
func (ev *evaluator) histBatches(l *leaf, s sink, shards []histShard, read func(sh *histShard) error) error {
	batch := max(1, min(ev.opts.BatchSeries, histBatchSeries))
	bufs := getBuffers(batch * ev.steps)
	defer putBuffers(bufs)
	cols := ev.columns(l, bufs, 0, batch)
	// Each column's histograms are allocated when a series first
	// needs them, and reused by the next batches.
	// A sum takes dense rates as they are; other sinks get upstream's
	// histograms.
	_, dense := s.(*aggregator)
	nonEmpty := make([]bool, batch)
	walks := make([]*seriesWalk, len(shards))
	for w := range shards {
		walks[w] = &shards[w].seriesWalk
	}
	var (
		out     []*column
		total   int
		emitted bool
	)
	for {
		n, err := ev.walkBatch(walks, cols, nonEmpty, func(w int, c *column) (bool, error) {
			sh := &shards[w]
			if c.h == nil {
				c.h, c.hraw = make([]histogram.FloatHistogram, ev.steps), make([]bool, ev.steps)
			}
			if err := read(sh); err != nil {
				return false, err
			}
			return sh.rateSteps(ev, l, c)
		})
		if errors.Is(err, errHistChunk) && emitted {
			return ErrFallback
		}
		if err != nil {
			return err
		}
		out = out[:0]
		for i := 0; i < n; i++ {
			if !nonEmpty[i] {
				continue
			}
			// Upstream counts a histogram point as its size in 16-byte
			// units and holds the whole inner result at once (a dense
			// rate is no smaller than its compacted self).
			for j, h := range cols[i].has {
				if h {
					total += (cols[i].h[j].Size() + 8) / 16
				}
			}
			if !dense {
				materialize(&cols[i])
			}
			out = append(out, &cols[i])
		}
		// Upstream's peak is the inner result plus one series' window;
		// where that could reach MaxSamples, upstream decides.
		maxWin := 0
		for w := range shards {
			maxWin = max(maxWin, shards[w].maxWin)
		}
		if total+maxWin >= ev.opts.MaxSamples {
			return ErrFallback
		}
		emitted = true
		if err := s.batch(out); err != nil {
			return err
		}
		if n < batch {
			break
		}
	}
	for w := range shards {
		if err := shards[w].set.Err(); err != nil {
			return err
		}
	}
	ev.mu.Lock()
	ev.annos.Merge(shards[0].set.Warnings())
	ev.mu.Unlock()
	return ev.checkContext()
}

// read fills pts with the current series' histogram samples in
// [mint, maxt], without stale markers, calling the iterator's Next and
// Seek as upstream's buffered iterator does for this query's steps (see
// runHistLeaf).
func (sh *histShard) read(ev *evaluator, l *leaf) error {
	mint, maxt := ev.window(l)
	s := sh.set.At()
	sh.it = s.Iterator(sh.it)
	sh.pts = sh.pts[:0]
	rng := l.rng.Milliseconds()
	stepRange := min(rng, ev.interval)
	if ev.instant {
		stepRange = rng
	}
	var (
		vt       = sh.it.Next()
		lastTime = int64(math.MinInt64)
		lastRead = int64(math.MinInt64) // the last sample taken
	)
	// take looks at the sample the iterator is on, once.
	take := func() error {
		t := sh.it.AtT()
		if t <= lastRead {
			return nil
		}
		lastRead = t
		if t < mint || t > maxt {
			return nil
		}
		if vt == chunkenc.ValFloat {
			if _, f := sh.it.At(); value.IsStaleNaN(f) {
				return nil
			}
			return ErrHistogram // floats and histograms in one selection
		}
		if sh.it.AtST() != 0 {
			return ErrFallback
		}
		n := len(sh.pts)
		if n == cap(sh.pts) {
			sh.pts = append(sh.pts, hpoint{h: &histogram.FloatHistogram{}})
		}
		sh.pts = sh.pts[:n+1]
		p := &sh.pts[n]
		if p.h == nil {
			p.h = &histogram.FloatHistogram{}
		}
		p.t, p.h = sh.it.AtFloatHistogram(p.h)
		if value.IsStaleNaN(p.h.Sum) {
			sh.pts = sh.pts[:n]
			return nil
		}
		if l.stats && p.h.CounterResetHint == histogram.GaugeType {
			// Upstream finds resets from the counts alone (statsPath).
			return ErrFallback
		}
		return nil
	}
	ts := ev.start
	for k := 0; k < ev.steps && vt != chunkenc.ValNone; k, ts = k+1, ts+ev.interval {
		delta := stepRange
		if k == 0 {
			delta = rng
		}
		if t0 := ts - delta; t0 > lastTime {
			if vt = sh.it.Seek(t0); vt == chunkenc.ValNone {
				break
			}
			lastTime = sh.it.AtT()
			if err := take(); err != nil {
				return err
			}
		}
		for lastTime < ts {
			if vt = sh.it.Next(); vt == chunkenc.ValNone {
				break
			}
			lastTime = sh.it.AtT()
			if err := take(); err != nil {
				return err
			}
		}
	}
	if err := sh.it.Err(); err != nil {
		return fmt.Errorf("read %s: %w", s.Labels(), err)
	}
	win := 0
	for _, p := range sh.pts {
		win += (p.h.Size() + 8) / 16
	}
	sh.maxWin = max(sh.maxWin, win)
	return nil
}

// rateSteps computes rate or increase at every step from pts into c.h:
// a window whose histograms share one layout by denseRate, the others
// by histogramRate.
func (sh *histShard) rateSteps(ev *evaluator, l *leaf, c *column) (bool, error) {
	clear(c.has)
	clear(c.hraw)
	pts, rng := sh.pts, l.rng.Milliseconds()
	if len(pts) < 2 {
		return false, nil
	}
	if sh.chunked.set != nil {
		sh.chunkPairs()
	} else {
		sh.pairs(pts)
	}
	isRate := l.fn == "rate"
	name := c.lset.Get(model.MetricNameLabel)
	any := false
	lo, hi := 0, 0
	ts := ev.start
	for i := 0; i < ev.steps; i, ts = i+1, ts+ev.interval {
		for lo < len(pts) && pts[lo].t <= ts-rng {
			lo++
		}
		for hi < len(pts) && pts[hi].t <= ts {
			hi++
		}
		if hi-lo < 2 {
			continue
		}
		if sh.breaks[hi]-sh.breaks[lo+1] == 0 {
			sh.denseRate(pts[lo:hi], sh.resets[lo:hi], &c.h[i])
			c.v[i] = histFactor(pts[lo:hi], c.h[i].Count, ts, l, isRate)
			c.has[i], c.hraw[i] = true, true
			any = true
			continue
		}
		sh.annos = sh.annos[:0]
		ok, err := sh.histogramRate(pts[lo:hi], &c.h[i], name, l)
		for _, a := range sh.annos {
			ev.addAnno(a)
		}
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		extrapolateHistogram(pts[lo:hi], &c.h[i], ts, l, isRate)
		c.has[i] = true
		any = true
	}
	return any, nil
}

// histOpDone is the outcome of one Sub or Add in histogramRate, as
// upstream takes it: true to go on; false with nil for a mix of
// exponential and custom buckets (no histogram, upstream's warning
// replacing the step's annotations); false with ErrFallback for a
// reconciliation of custom bounds or any other error.
func (sh *histShard) histOpDone(reconciled bool, err error, name string, pos posrange.PositionRange) (bool, error) {
	if err != nil {
		if errors.Is(err, histogram.ErrHistogramsIncompatibleSchema) {
			sh.annos = append(sh.annos[:0], annotations.NewMixedExponentialCustomHistogramsWarning(name, pos))
			return false, nil
		}
		return false, ErrFallback
	}
	if reconciled {
		return false, ErrFallback
	}
	return true, nil
}

// histogramRate is upstream's histogramRate for a counter (rate and
// increase) without start timestamps, into dst: the same FloatHistogram
// methods in the same order, the same annotations (into sh.annos, which
// it replaces where upstream returns fresh ones). It reports false where
// upstream returns no histogram, and ErrFallback where upstream would
// fail the query or reconcile custom bucket bounds.
func (sh *histShard) histogramRate(w []hpoint, dst *histogram.FloatHistogram, name string, l *leaf) (bool, error) {
	pos := l.argPos
	prev := w[0].h
	last := w[len(w)-1].h
	usingCustomBuckets := prev.UsesCustomBuckets()
	if prev.CounterResetHint == histogram.GaugeType || last.CounterResetHint == histogram.GaugeType {
		sh.annos = append(sh.annos, annotations.NewNativeHistogramNotCounterWarning(name, pos))
	}
	if second := w[1].h; second.DetectReset(prev) {
		sh.zero = histogram.FloatHistogram{Schema: second.Schema, CustomValues: second.CustomValues}
		prev = &sh.zero
		usingCustomBuckets = second.UsesCustomBuckets()
	}
	if last.UsesCustomBuckets() != usingCustomBuckets {
		sh.annos = append(sh.annos, annotations.NewMixedExponentialCustomHistogramsWarning(name, pos))
		return false, nil
	}
	minSchema := min(last.Schema, prev.Schema)
	for _, p := range w[1 : len(w)-1] {
		curr := p.h
		if curr.CounterResetHint == histogram.GaugeType {
			sh.annos = append(sh.annos, annotations.NewNativeHistogramNotCounterWarning(name, pos))
		}
		if curr.Schema < minSchema {
			minSchema = curr.Schema
		}
		if curr.UsesCustomBuckets() != usingCustomBuckets {
			sh.annos = append(sh.annos[:0], annotations.NewMixedExponentialCustomHistogramsWarning(name, pos))
			return false, nil
		}
	}
	if minSchema == last.Schema {
		last.CopyTo(dst)
	} else {
		h, err := last.CopyToSchema(minSchema)
		if err != nil {
			return false, ErrFallback
		}
		*dst = *h
	}
	_, _, reconciled, err := dst.Sub(prev)
	if ok, err := sh.histOpDone(reconciled, err, name, pos); !ok {
		return false, err
	}
	for i, p := range w[1:] {
		curr := p.h
		if curr.DetectReset(prev) {
			_, _, reconciled, err := dst.Add(prev)
			if ok, err := sh.histOpDone(reconciled, err, name, pos); !ok {
				return false, err
			}
		}
		prev = w[i+1].h
	}
	dst.CounterResetHint = histogram.GaugeType
	dst.Compact(0)
	return true, nil
}

// extrapolateHistogram is the rest of upstream's extrapolatedRate for a
// histogram counter: the same arithmetic on the window's times and the
// first sample's count, then Mul by the factor.
func extrapolateHistogram(w []hpoint, h *histogram.FloatHistogram, ts int64, l *leaf, isRate bool) {
	h.Mul(histFactor(w, h.Count, ts, l, isRate))
}

// histFactor is the extrapolation factor of a histogram rate whose count
// (before the factor) is count: upstream takes it from the window's times
// and the counts as it does a float counter's from its values, so it is
// the float path's arithmetic (rateCache) on the first sample's count.
func histFactor(w []hpoint, count float64, ts int64, l *leaf, isRate bool) float64 {
	n := len(w) - 1
	firstT, lastT := w[0].t, w[n].t
	rr := rangeOf(l)
	var rc rateCache
	rc.fill(firstT-(ts-rr.ms), ts-lastT, lastT-firstT, n, rr, isRate)
	return rc.counterFactor(w[0].h.Count, count, rr, isRate)
}

// histColumns reports whether cols hold histograms (a leaf's columns are
// all of one kind).
func histColumns(cols []*column) bool {
	return len(cols) > 0 && cols[0].h != nil
}

// copyHist copies the present steps of a histogram column.
func copyHist(c *column) []histogram.FloatHistogram {
	out := make([]histogram.FloatHistogram, len(c.h))
	for i, h := range c.has {
		if h {
			c.h[i].CopyTo(&out[i])
		}
	}
	return out
}

// histPoints returns the n present steps of a histogram column as
// upstream's points, each histogram its own copy.
func histPoints(c *column, start, interval int64, n int) []promql.HPoint {
	pts := make([]promql.HPoint, 0, n)
	for i, h := range c.has {
		if h {
			pts = append(pts, promql.HPoint{T: start + int64(i)*interval, H: c.h[i].Copy()})
		}
	}
	return pts
}
