package fast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/schema"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// Options configures evaluation. Zero values mean the documented default.
type Options struct {
	// LookbackDelta is how far back an instant selector looks. Zero means 5m.
	LookbackDelta time.Duration
	// MaxSamples is the upstream engine's --query.max-samples. A query whose
	// upstream accounting (the points of its inner range-function results,
	// which upstream holds all at once, plus the samples of the window it
	// evaluates) could come near it is handed back
	// with ErrFallback, so the upstream engine decides the refusal exactly
	// as it would alone. Zero means 50 million.
	MaxSamples int
	// Workers is how many goroutines shard the series of one query. Zero
	// or negative means GOMAXPROCS, at most 4: over storage without chunks
	// every worker walks the whole selection (each reads through its own
	// querier), so more workers cost index work on every one of them.
	Workers int
	// BatchSeries is how many series are evaluated before their step
	// values are folded into the aggregation; it bounds memory to
	// BatchSeries columns of step values. Zero or negative means 1024.
	BatchSeries int
	// DelayedNameRemoval mirrors the upstream engine option: it only
	// changes the metric names quoted in histogram_quantile annotations.
	DelayedNameRemoval bool
}

// DefaultOptions matches query.DefaultOptions.
func DefaultOptions() Options {
	return Options{LookbackDelta: 5 * time.Minute, MaxSamples: 50_000_000, BatchSeries: 1024}
}

func (o Options) withDefaults() Options {
	if o.LookbackDelta <= 0 {
		o.LookbackDelta = 5 * time.Minute
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = 50_000_000
	}
	if o.Workers <= 0 {
		o.Workers = min(runtime.GOMAXPROCS(0), 4)
	}
	if o.BatchSeries <= 0 {
		o.BatchSeries = 1024
	}
	return o
}

// column is one output series: a value per step and whether it exists.
// The producer owns v and has; a sink that keeps them copies them.
type column struct {
	lset     labels.Labels
	v        []float64
	has      []bool
	dropName bool
	h        []histogram.FloatHistogram // a step's histogram where the column holds them (histogram.go)
	hraw     []bool                     // h[i] is a dense rate yet to compact and multiply by v[i] (histogram_dense.go)
}

// sink receives columns in upstream's series order. cols is reused once
// batch returns.
type sink interface {
	batch(cols []*column) error
}

// evaluator runs one plan over one time range.
type evaluator struct {
	ctx                  context.Context
	q                    storage.Queryable
	opts                 Options
	start, end, interval int64
	steps                int
	instant              bool

	mu    sync.Mutex
	annos annotations.Annotations
	// forced is set when histogram_quantile had to force a step's buckets
	// monotonic; the query is then handed back (ErrForcedMonotonicity).
	forced atomic.Bool
	// overBudget is set when a sum of histograms could reach upstream's
	// MaxSamples accounting; the query is then handed back.
	overBudget atomic.Bool
}

func (ev *evaluator) addAnno(err error) {
	ev.mu.Lock()
	ev.annos.Add(err)
	ev.mu.Unlock()
}

// Range evaluates the plan at every step from start to end, as a range
// query does, and returns the result sorted as upstream sorts it.
func (p *Plan) Range(ctx context.Context, q storage.Queryable, opts Options, start, end time.Time, step time.Duration) (promql.Matrix, annotations.Annotations, error) {
	if step <= 0 {
		return nil, nil, errors.New("fast: zero or negative step")
	}
	ev := &evaluator{ctx: ctx, q: q, opts: opts.withDefaults(), start: start.UnixMilli(), end: end.UnixMilli(), interval: step.Milliseconds()}
	if ev.interval <= 0 {
		return nil, nil, ErrFallback
	}
	if !saneTimes(ev.start, ev.end, ev.interval) {
		return nil, nil, ErrFallback
	}
	ev.steps = int((ev.end-ev.start)/ev.interval) + 1
	cols, err := ev.runTop(p)
	if err != nil {
		return nil, ev.annos, err
	}
	mat := make(promql.Matrix, 0, len(cols))
	for _, c := range cols {
		n := 0
		for _, h := range c.has {
			if h {
				n++
			}
		}
		if n == 0 {
			continue
		}
		if c.h != nil {
			mat = append(mat, promql.Series{Metric: outputLabels(c), Histograms: histPoints(c, ev.start, ev.interval, n)})
			continue
		}
		pts := make([]promql.FPoint, 0, n)
		for i, h := range c.has {
			if h {
				pts = append(pts, promql.FPoint{T: ev.start + int64(i)*ev.interval, F: c.v[i]})
			}
		}
		mat = append(mat, promql.Series{Metric: outputLabels(c), Floats: pts})
	}
	sort.Sort(mat)
	return mat, ev.annos, nil
}

// Instant evaluates the plan at ts, as an instant query does, in upstream's
// order of results.
func (p *Plan) Instant(ctx context.Context, q storage.Queryable, opts Options, ts time.Time) (promql.Vector, annotations.Annotations, error) {
	t := ts.UnixMilli()
	opts = opts.withDefaults()
	// One step leaves little to share: each series is a few samples, and
	// over storage without chunks a second worker would walk the whole
	// selection a second time.
	opts.Workers = 1
	if !saneTimes(t, t, 1) {
		return nil, nil, ErrFallback
	}
	ev := &evaluator{ctx: ctx, q: q, opts: opts, start: t, end: t, interval: 1, steps: 1, instant: true}
	cols, err := ev.runTop(p)
	if err != nil {
		return nil, ev.annos, err
	}
	vec := make(promql.Vector, 0, len(cols))
	for _, c := range cols {
		if c.has[0] && c.h != nil {
			vec = append(vec, promql.Sample{Metric: outputLabels(c), T: t, H: c.h[0].Copy()})
		} else if c.has[0] {
			vec = append(vec, promql.Sample{Metric: outputLabels(c), T: t, F: c.v[0]})
		}
	}
	return vec, ev.annos, nil
}

// saneTimes reports whether the step arithmetic (windows reaching a
// range or the lookback before start, a few steps past end) stays far from
// an int64's ends; queries near the ends of time go upstream.
func saneTimes(start, end, interval int64) bool {
	const limit = math.MaxInt64 / 8
	return start > -limit && end < limit && end >= start && interval > 0 && interval < limit
}

func outputLabels(c *column) labels.Labels {
	if c.dropName {
		return c.lset.DropReserved(schema.IsMetadataLabel)
	}
	return c.lset
}

func (ev *evaluator) runTop(p *Plan) (cols []*column, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fast: %v", r)
		}
	}()
	c := &collector{}
	err = ev.run(p.root, c)
	if err == nil && ev.forced.Load() {
		err = ErrForcedMonotonicity
	}
	if err == nil && ev.overBudget.Load() {
		err = ErrFallback
	}
	if err != nil {
		if cerr := ev.checkContext(); cerr != nil && !errors.Is(err, ErrFallback) {
			// Storage reports the context's end in its own words.
			return nil, cerr
		}
		return nil, err
	}
	return c.cols, nil
}

func (ev *evaluator) run(n node, s sink) error {
	switch n := n.(type) {
	case *leaf:
		err := ev.runLeaf(n, s)
		if n.hist && errors.Is(err, errHistogramFirst) {
			return ev.runHistLeaf(n, s)
		}
		return err
	case *binop:
		return ev.run(n.expr, &binopSink{b: n, next: s})
	case *histFn:
		return ev.run(n.expr, &histFnSink{f: n, next: s})
	case *aggregate:
		a := newAggregator(ev, n)
		if err := ev.run(n.expr, a); err != nil {
			return err
		}
		return s.batch(a.output())
	case *quantile:
		c := &collector{}
		if err := ev.run(n.expr, c); err != nil {
			return err
		}
		return s.batch(ev.histogramQuantile(n, c.cols))
	}
	return fmt.Errorf("BUG: fast: unknown node %T", n)
}

// checkContext maps the context's end onto upstream's errors.
func (ev *evaluator) checkContext() error {
	if err := ev.ctx.Err(); err != nil {
		switch {
		case errors.Is(err, context.Canceled):
			return promql.ErrQueryCanceled("expression evaluation")
		case errors.Is(err, context.DeadlineExceeded):
			return promql.ErrQueryTimeout("expression evaluation")
		}
		return err
	}
	return nil
}

// collector keeps copies of every column it receives.
type collector struct{ cols []*column }

func (c *collector) batch(cols []*column) error {
	for _, col := range cols {
		c.cols = append(c.cols, &column{
			lset: col.lset, dropName: col.dropName,
			v: append([]float64(nil), col.v...), has: append([]bool(nil), col.has...),
		})
		if col.h != nil {
			c.cols[len(c.cols)-1].h = copyHist(col)
		}
	}
	return nil
}

// pieces runs f over [0,n) in contiguous pieces of grain that at most
// workers goroutines take in turn, each calling f with its own w, and
// returns the first error (by worker). A worker that a busy machine
// slows takes fewer pieces, so the others are not held up waiting for its
// fixed share, as they are with parallel. f's results must not depend on
// which worker ran a piece.
func pieces(workers, n, grain int, f func(w, lo, hi int) error) error {
	if n == 0 {
		return nil
	}
	grain = max(grain, 1)
	workers = min(workers, (n+grain-1)/grain)
	if workers <= 1 {
		return f(0, 0, n)
	}
	var (
		next   atomic.Int64
		failed atomic.Bool
	)
	return parallel(workers, workers, func(w, _, _ int) error {
		for !failed.Load() {
			lo := int(next.Add(int64(grain))) - grain
			if lo >= n {
				return nil
			}
			if err := f(w, lo, min(n, lo+grain)); err != nil {
				failed.Store(true)
				return err
			}
		}
		return nil
	})
}

// parallel runs f over [0,n) split into at most workers contiguous parts
// and returns the first error.
func parallel(workers, n int, f func(w, lo, hi int) error) error {
	if n == 0 {
		return nil
	}
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		return f(0, 0, n)
	}
	var (
		wg   sync.WaitGroup
		errs = make([]error, workers)
	)
	per := (n + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*per, min(n, (w+1)*per)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[w] = fmt.Errorf("fast: %v", r)
				}
			}()
			errs[w] = f(w, lo, hi)
		}()
	}
	wg.Wait()
	// The first error, not a join: callers match promql's error types.
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
