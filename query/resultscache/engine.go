package resultscache

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/stats"
)

type bypassKey struct{}

// WithBypass marks ctx so that range queries run with it are evaluated
// without reading or filling the cache (Cache-Control: no-store, nocache=1).
func WithBypass(ctx context.Context) context.Context {
	return context.WithValue(ctx, bypassKey{}, true)
}

func bypassed(ctx context.Context) bool {
	v, _ := ctx.Value(bypassKey{}).(bool)
	return v
}

// maxGaps is the most missing pieces evaluated separately; with more, one
// evaluation covers the first to the last, which costs fewer engine
// set-ups than many small ones.
const maxGaps = 4

// Engine is a promql.QueryEngine answering range queries through a Cache
// and passing everything else to the engine it wraps.
type Engine struct {
	promql.QueryEngine
	c *Cache
}

// Wrap returns ng with range queries answered through c. A nil c returns
// ng itself.
func (c *Cache) Wrap(ng promql.QueryEngine) promql.QueryEngine {
	if c == nil {
		return ng
	}
	return &Engine{QueryEngine: ng, c: c}
}

// NewRangeQuery implements promql.QueryEngine.
func (e *Engine) NewRangeQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (promql.Query, error) {
	c := e.c
	pass := func() (promql.Query, error) {
		c.m.bypassed.Inc()
		return e.QueryEngine.NewRangeQuery(ctx, q, opts, qs, start, end, step)
	}
	if bypassed(ctx) || step <= 0 || end.Before(start) || (c.opts.Bypass != nil && c.opts.Bypass()) {
		return pass()
	}
	if opts != nil && opts.EnablePerStepStats() {
		return pass()
	}
	expr, err := c.opts.Parser.ParseExpr(qs)
	if err != nil {
		return pass() // the wrapped engine gives the error (or translates)
	}
	if ok, _ := cacheable(expr); !ok {
		return pass()
	}
	if t := expr.Type(); t != parser.ValueTypeVector && t != parser.ValueTypeScalar {
		return pass() // the wrapped engine refuses it with Prometheus' error
	}
	// Validate as the wrapped engine does (limits, subquery steps,
	// timeouts): building the query checks the same things for the
	// whole range that the pieces will be evaluated over.
	probe, err := e.QueryEngine.NewRangeQuery(ctx, q, opts, qs, start, end, step)
	if err != nil {
		return nil, err
	}
	stepMs := step.Milliseconds()
	s, en := start.UnixMilli(), end.UnixMilli()
	// Steps are at s + k·step; the cache key carries s mod step, so only
	// queries on the same grid share extents.
	phase := ((s % stepMs) + stepMs) % stepMs
	last := s + (en-s)/stepMs*stepMs
	var b strings.Builder
	if c.opts.KeyFrom != nil {
		b.WriteString(c.opts.KeyFrom(ctx))
	}
	b.WriteByte(0)
	if opts != nil {
		b.WriteString(opts.LookbackDelta().String())
		if st := opts.UseStartTimestamps(); st != nil {
			b.WriteString(strconv.FormatBool(*st))
		}
	}
	fmt.Fprintf(&b, "\x00%d\x00%d\x00%s", stepMs, phase, expr.String())
	return &query{
		e: e, q: q, opts: opts, qs: qs, probe: probe, key: b.String(),
		start: s, end: last, step: stepMs,
		stmt: &parser.EvalStmt{Expr: expr, Start: start, End: end, Interval: step},
	}, nil
}

// query is a cacheable range query.
type query struct {
	e     *Engine
	q     storage.Queryable
	opts  promql.QueryOpts
	qs    string
	key   string
	probe promql.Query // built to validate; evaluated when nothing is cached
	stmt  *parser.EvalStmt

	start, end, step int64 // first and last step, step (ms)

	mu       sync.Mutex
	cancel   context.CancelFunc
	canceled bool
	stats    *stats.Statistics

	// passed is the wrapped engine's query whose result was returned as
	// it is (a miss too large to keep); Close releases it.
	passed promql.Query
}

func (qr *query) Statement() parser.Statement { return qr.stmt }
func (qr *query) String() string              { return qr.qs }

// Stats returns the statistics of the last piece evaluated, or nil when
// every step came from the cache. The API asks for statistics only with
// stats=…, which bypasses the cache.
func (qr *query) Stats() *stats.Statistics {
	qr.mu.Lock()
	defer qr.mu.Unlock()
	return qr.stats
}

func (qr *query) Cancel() {
	qr.mu.Lock()
	defer qr.mu.Unlock()
	qr.canceled = true
	if qr.cancel != nil {
		qr.cancel()
	}
}

// Close releases the probe query if it was not used; the result's series
// are the cache's own and need no release.
func (qr *query) Close() {
	if qr.probe != nil {
		qr.probe.Close()
		qr.probe = nil
	}
	if qr.passed != nil {
		qr.passed.Close()
		qr.passed = nil
	}
}

// Exec answers from the cached extents and evaluates the steps they lack.
// The result's series are read-only: they share memory with the cache.
func (qr *query) Exec(ctx context.Context) *promql.Result {
	c := qr.e.c
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	qr.mu.Lock()
	qr.cancel = cancel
	if qr.canceled {
		cancel()
	}
	qr.mu.Unlock()

	storeEnd := qr.end
	if fresh := c.opts.Now().Add(-c.opts.MaxFreshness).UnixMilli(); fresh < storeEnd {
		storeEnd = qr.start + floorDiv(fresh-qr.start, qr.step)*qr.step
	}
	cached, p := c.lookup(qr.key, qr.start, qr.end, storeEnd)
	stored := false
	defer func() {
		if !stored {
			c.done(p)
		}
	}()

	// The missing pieces, on the step grid.
	type gap struct{ from, to int64 }
	var gaps []gap
	next := qr.start
	for _, x := range cached {
		if x.start > next {
			gaps = append(gaps, gap{next, min(x.start-qr.step, qr.end)})
		}
		next = max(next, x.end+qr.step)
	}
	if next <= qr.end {
		gaps = append(gaps, gap{next, qr.end})
	}
	if len(gaps) > maxGaps {
		gaps = []gap{{gaps[0].from, gaps[len(gaps)-1].to}}
	}
	computedSteps := int64(0)
	for _, g := range gaps {
		computedSteps += (g.to-g.from)/qr.step + 1
	}
	totalSteps := (qr.end-qr.start)/qr.step + 1
	switch {
	case len(gaps) == 0:
		c.m.hits.Inc()
	case len(cached) == 0 || computedSteps == totalSteps:
		c.m.misses.Inc()
	default:
		c.m.partial.Inc()
	}
	c.m.stepsServed.Add(float64(totalSteps - computedSteps))
	c.m.stepsComputed.Add(float64(computedSteps))

	var warnings annotations.Annotations
	var fresh []*extent
	for _, g := range gaps {
		var inner promql.Query
		if g.from == qr.start && g.to == qr.end && qr.probe != nil {
			inner, qr.probe = qr.probe, nil
		} else {
			var err error
			inner, err = qr.e.QueryEngine.NewRangeQuery(ctx, qr.q, qr.opts, qr.qs,
				time.UnixMilli(g.from), time.UnixMilli(g.to), time.Duration(qr.step)*time.Millisecond)
			if err != nil {
				return &promql.Result{Err: err}
			}
		}
		res := inner.Exec(ctx)
		qr.mu.Lock()
		qr.stats = inner.Stats()
		qr.mu.Unlock()
		if res.Err != nil {
			inner.Close()
			if g.from == qr.start && g.to == qr.end || ctx.Err() != nil {
				return res
			}
			// A piece failed where the whole range might not (the
			// upstream querier panics on some ranges that cut a series
			// with tombstones at both ends): answer exactly as the engine
			// answers the whole range, uncached.
			return qr.whole(ctx)
		}
		m, err := asMatrix(res.Value)
		if err != nil {
			inner.Close()
			return &promql.Result{Err: err}
		}
		if len(gaps) == 1 && len(cached) == 0 && estimate(m) > c.opts.MaxEntryBytes {
			// Too large to keep: answer with the engine's own result
			// rather than copying it.
			qr.passed = inner
			return res
		}
		x := fromMatrix(m, g.from, g.to, qr.step)
		inner.Close()
		if len(res.Warnings) > 0 {
			// Annotations belong to the data they were raised on; a
			// piece that has them is answered but not kept, so a later
			// hit never loses a warning the full evaluation would give.
			warnings.Merge(res.Warnings)
			x.noStore = true
		}
		fresh = append(fresh, x)
	}

	// The answer: every series with its points in time order.
	pieces := append(append([]*extent{}, cached...), fresh...)
	sort.Slice(pieces, func(i, j int) bool { return pieces[i].start < pieces[j].start })
	var m promql.Matrix
	if len(pieces) == 1 && pieces[0].start == qr.start && pieces[0].end == qr.end {
		m = pieces[0].matrix() // nothing to join: share its arrays
	} else {
		idx := map[uint64][]int{}
		covered := qr.start - qr.step
		for _, x := range pieces {
			from := max(x.start, covered+qr.step, qr.start)
			to := min(x.end, qr.end)
			if from > to {
				continue
			}
			m = x.appendTo(m, idx, from, to)
			covered = to
		}
		sort.Sort(m)
	}

	// What may be kept: the answer up to storeEnd, when every piece in
	// it may be.
	if storeEnd >= qr.start {
		keep := true
		for _, x := range fresh {
			if x.noStore && x.start <= storeEnd {
				keep = false
			}
		}
		if keep {
			var x *extent
			if len(pieces) == 1 {
				x = pieces[0].crop(qr.start, storeEnd) // immutable: share
			} else {
				x = fromAnswer(m, qr.start, storeEnd, qr.step)
			}
			c.store(qr.key, qr.step, x, p)
			stored = true
		}
	}
	if m == nil {
		m = promql.Matrix{} // an answer with no series, as the engine gives it
	}
	if warnings == nil {
		warnings = annotations.Annotations{}
	}
	return &promql.Result{Value: m, Warnings: warnings}
}

// whole evaluates the query over its whole range with the wrapped engine
// and returns that result as it is; Close releases it.
func (qr *query) whole(ctx context.Context) *promql.Result {
	inner := qr.probe
	qr.probe = nil
	if inner == nil {
		var err error
		inner, err = qr.e.QueryEngine.NewRangeQuery(ctx, qr.q, qr.opts, qr.qs, qr.stmt.Start, qr.stmt.End, qr.stmt.Interval)
		if err != nil {
			return &promql.Result{Err: err}
		}
	}
	qr.passed = inner
	res := inner.Exec(ctx)
	qr.mu.Lock()
	qr.stats = inner.Stats()
	qr.mu.Unlock()
	return res
}

// floorDiv is a/b rounded towards −∞ (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// asMatrix accepts what a range query returns.
func asMatrix(v any) (promql.Matrix, error) {
	switch v := v.(type) {
	case promql.Matrix:
		return v, nil
	case nil:
		return nil, nil
	default:
		return nil, errors.New("resultscache: range query returned " + fmt.Sprintf("%T", v))
	}
}

// fromAnswer copies the steps of m in [from, to] into an extent. m's
// histograms are the cache's or fresh copies, so they are shared.
func fromAnswer(m promql.Matrix, from, to, step int64) *extent {
	x := &extent{start: from, end: to, step: step, series: make([]series, 0, len(m))}
	for _, s := range m {
		f := cropPoints(s.Floats, from, to, func(p promql.FPoint) int64 { return p.T })
		h := cropPoints(s.Histograms, from, to, func(p promql.HPoint) int64 { return p.T })
		if len(f) == 0 && len(h) == 0 {
			continue
		}
		x.series = append(x.series, series{metric: s.Metric, floats: cloneOrNil(f), hists: cloneOrNil(h)})
	}
	x.bytes = x.size()
	return x
}

func cloneOrNil[P any](ps []P) []P {
	if len(ps) == 0 {
		return nil
	}
	return append([]P(nil), ps...)
}
