package query

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/stats"

	"github.com/tailroot/tailroot/query/fast"
)

// Engine names for Options.Engine.
const (
	EngineFast     = "fast"
	EngineUpstream = "upstream"
)

// fastQuery evaluates with query/fast and, when that package hands the
// query back (fast.ErrFallback), with the upstream engine, so a caller
// never sees the difference except in speed.
type fastQuery struct {
	e       *Engine
	plan    *fast.Plan
	q       storage.Queryable
	opts    promql.QueryOpts
	qs      string
	stmt    *parser.EvalStmt
	instant bool

	mu       sync.Mutex // guards cancel and upstream, which Cancel reads
	cancel   context.CancelFunc
	upstream promql.Query
	stats    *stats.QueryTimers
	samples  *stats.QuerySamples
}

// newFastQuery returns a fast query for qs, or nil when the fast path does
// not take it (the engine is set to upstream, the expression is not one it
// compiles, the options ask for what only upstream records).
func (e *Engine) newFastQuery(q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) *fastQuery {
	if e.opts.Engine == EngineUpstream {
		return nil
	}
	if opts != nil {
		if opts.EnablePerStepStats() {
			return nil
		}
		if st := opts.UseStartTimestamps(); st != nil && !*st {
			return nil
		}
		if co, ok := opts.(promql.QueryCostOpts); ok && (co.MaxSeries() != 0 || co.MaxSamplesRead() != 0 || co.MaxQueryDuration() != 0) {
			return nil
		}
	}
	expr, err := e.parser.ParseExpr(qs)
	if err != nil {
		return nil
	}
	plan, ok := fast.Compile(expr)
	if !ok {
		return nil
	}
	for _, m := range plan.Metrics() {
		if _, native := e.fast.native.Load(m); native {
			return nil
		}
	}
	lookback := e.opts.LookbackDelta
	if opts != nil && opts.LookbackDelta() > 0 {
		lookback = opts.LookbackDelta()
	}
	return &fastQuery{
		e: e, plan: plan, q: q, opts: opts, qs: qs, instant: step == 0,
		stmt:    &parser.EvalStmt{Expr: expr, Start: start, End: end, Interval: step, LookbackDelta: lookback},
		stats:   stats.NewQueryTimers(),
		samples: stats.NewQuerySamples(false),
	}
}

// fastCounters count the queries the fast path answered and those it
// handed back to the upstream engine while evaluating.
type fastCounters struct {
	answered, handedBack atomic.Uint64
	// native holds metric names that had native histogram samples: their
	// queries go upstream without a first attempt. At most maxNative.
	native  sync.Map
	nNative atomic.Int64
}

const maxNative = 10_000

func (c *fastCounters) rememberNative(names []string) {
	for _, n := range names {
		if c.nNative.Load() >= maxNative {
			return
		}
		if _, loaded := c.native.LoadOrStore(n, struct{}{}); !loaded {
			c.nNative.Add(1)
		}
	}
}

func (c *fastCounters) register(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tailroot_query_fast_answered_total",
		Help: "Queries the fast path (query/fast) evaluated.",
	}, func() float64 { return float64(c.answered.Load()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tailroot_query_fast_handed_back_total",
		Help: "Queries the fast path compiled but handed to the upstream engine while evaluating (a native histogram, a start timestamp, a sample budget near --query.max-samples).",
	}, func() float64 { return float64(c.handedBack.Load()) }))
}

// FastPathCounts returns how many queries the fast path answered and how
// many it handed back to the upstream engine after compiling them.
func (e *Engine) FastPathCounts() (answered, handedBack uint64) {
	return e.fast.answered.Load(), e.fast.handedBack.Load()
}

func (f *fastQuery) Exec(ctx context.Context) *promql.Result {
	ctx, cancel := context.WithTimeout(ctx, f.e.opts.Timeout)
	f.mu.Lock()
	f.cancel = cancel
	f.mu.Unlock()
	defer cancel()
	res, err := f.exec(ctx)
	if errors.Is(err, fast.ErrFallback) {
		f.e.fast.handedBack.Add(1)
		if errors.Is(err, fast.ErrHistogram) {
			f.e.fast.rememberNative(f.plan.Metrics())
		}
		return f.fallback(ctx)
	}
	f.e.fast.answered.Add(1)
	if err != nil {
		return &promql.Result{Err: err, Warnings: res.Warnings}
	}
	return res
}

func (f *fastQuery) exec(ctx context.Context) (*promql.Result, error) {
	slot, err := f.e.tracker.Insert(ctx, f.qs)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return &promql.Result{}, promql.ErrQueryTimeout("query queue")
		}
		return &promql.Result{}, promql.ErrQueryCanceled("query queue")
	}
	defer f.e.tracker.Delete(slot)
	timer := f.stats.GetTimer(stats.EvalTotalTime).Start()
	defer timer.Stop()
	fo := fast.Options{
		LookbackDelta:      f.stmt.LookbackDelta,
		MaxSamples:         f.e.opts.MaxSamples,
		DelayedNameRemoval: f.e.opts.DelayedNameRemoval,
	}
	if f.instant {
		vec, annos, err := f.plan.Instant(ctx, f.q, fo, f.stmt.Start)
		return &promql.Result{Value: vec, Warnings: annos}, err
	}
	mat, annos, err := f.plan.Range(ctx, f.q, fo, f.stmt.Start, f.stmt.End, f.stmt.Interval)
	return &promql.Result{Value: mat, Warnings: annos}, err
}

// fallback evaluates the query with the upstream engine.
func (f *fastQuery) fallback(ctx context.Context) *promql.Result {
	var (
		qry promql.Query
		err error
	)
	if f.instant {
		qry, err = f.e.ng.NewInstantQuery(ctx, f.q, f.opts, f.qs, f.stmt.Start)
	} else {
		qry, err = f.e.ng.NewRangeQuery(ctx, f.q, f.opts, f.qs, f.stmt.Start, f.stmt.End, f.stmt.Interval)
	}
	if err != nil {
		return &promql.Result{Err: err}
	}
	f.mu.Lock()
	f.upstream = qry
	f.mu.Unlock()
	return qry.Exec(ctx)
}

func (f *fastQuery) Close() {
	if u := f.up(); u != nil {
		u.Close()
	}
}

func (f *fastQuery) up() promql.Query {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.upstream
}

func (f *fastQuery) Statement() parser.Statement { return f.stmt }

func (f *fastQuery) Stats() *stats.Statistics {
	if u := f.up(); u != nil {
		return u.Stats()
	}
	return &stats.Statistics{Timers: f.stats, Samples: f.samples}
}

func (f *fastQuery) Cancel() {
	f.mu.Lock()
	cancel, u := f.cancel, f.upstream
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if u != nil {
		u.Cancel()
	}
}

func (f *fastQuery) String() string { return f.qs }
