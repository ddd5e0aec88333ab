package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/query/qlimit"
)

// Options configures evaluation. Zero values mean the documented default.
type Options struct {
	// Timeout aborts a query after this long. Zero means 2 minutes.
	Timeout time.Duration
	// MaxSamples caps the samples one query may hold in memory. Zero means
	// 50 million, the Prometheus default.
	MaxSamples int
	// LookbackDelta is how far back an instant selector looks. Zero means 5m.
	LookbackDelta time.Duration
	// MaxConcurrent caps concurrently executing queries; zero means 20, as in
	// Prometheus. The rest wait.
	MaxConcurrent int
	// ActiveQueryDir, when set, keeps a log of running queries there, so a
	// query that crashed the process is logged at the next start.
	ActiveQueryDir string
	// Limits bound a query's length, size and depth before it is parsed,
	// and its MetricsQL WITH templates before they are expanded; the zero
	// value checks nothing. They apply wherever the engine's parser is used
	// (queries, format_query, parse_query, series matchers).
	Limits qlimit.Limits
	// MetricsQL, when true, translates every query PromQL rejects and
	// MetricsQL accepts, for every client. When false (the default) only
	// queries whose context carries WithMetricsQL are translated (the
	// API sets it for dialect=metricsql), so a Prometheus client gets the
	// error Prometheus would return.
	MetricsQL bool
	// Experimental PromQL features, off by default as in Prometheus
	// (--enable-feature=promql-experimental-functions, …). tailroot's own
	// functions do not depend on them.
	ExperimentalFunctions bool
	BinopFillModifiers    bool
	UnquotedUTF8Names     bool
	DelayedNameRemoval    bool
	// Engine chooses the evaluator: EngineFast (the default, also for "")
	// evaluates the expressions query/fast compiles with it and the rest
	// upstream; EngineUpstream sends every query to the upstream engine.
	Engine string
}

// DefaultOptions is what `tailroot serve` evaluates with.
func DefaultOptions() Options {
	return Options{
		Timeout:       2 * time.Minute,
		MaxSamples:    50_000_000,
		LookbackDelta: 5 * time.Minute,
		MaxConcurrent: 20,
		Limits:        qlimit.DefaultLimits(),
		Engine:        EngineFast,
	}
}

type metricsQLKey struct{}

// WithMetricsQL marks a query's context as accepting MetricsQL: a query
// PromQL rejects is then translated when MetricsQL accepts it.
func WithMetricsQL(ctx context.Context) context.Context {
	return context.WithValue(ctx, metricsQLKey{}, true)
}

// metricsQLAllowed reports whether ctx accepts MetricsQL.
func (e *Engine) metricsQLAllowed(ctx context.Context) bool {
	if e.opts.MetricsQL {
		return true
	}
	v, _ := ctx.Value(metricsQLKey{}).(bool)
	return v
}

// Engine evaluates PromQL with the upstream engine and falls back to
// translating MetricsQL. It implements promql.QueryEngine, so the upstream
// Prometheus API and test suite drive it unchanged.
type Engine struct {
	reg    *Registry
	ng     *promql.Engine
	parser parser.Parser
	funcs  map[string]*parser.Function
	opts   Options
	// tracker bounds concurrency for fast queries as for upstream ones.
	tracker promql.QueryTracker
	fast    fastCounters
}

// New builds an engine over the functions of reg (DefaultRegistry when nil).
func New(opts Options, reg *Registry, logger *slog.Logger, promReg prometheus.Registerer) (*Engine, error) {
	if reg == nil {
		reg = DefaultRegistry()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.MaxSamples <= 0 {
		opts.MaxSamples = 50_000_000
	}
	if opts.LookbackDelta <= 0 {
		opts.LookbackDelta = 5 * time.Minute
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 20
	}
	switch opts.Engine {
	case "":
		opts.Engine = EngineFast
	case EngineFast, EngineUpstream:
	default:
		return nil, fmt.Errorf("query engine %q: want %q or %q", opts.Engine, EngineFast, EngineUpstream)
	}
	funcs := reg.Functions()
	p := qlimit.Parser{Parser: parser.NewParser(parser.Options{
		EnableExperimentalFunctions: opts.ExperimentalFunctions,
		EnableBinopFillModifiers:    opts.BinopFillModifiers,
		EnableUnquotedUTF8Names:     opts.UnquotedUTF8Names,
		Functions:                   funcs,
	}), Limits: opts.Limits}
	var tracker promql.QueryTracker
	if opts.ActiveQueryDir != "" {
		t, err := promql.NewActiveQueryTracker(opts.ActiveQueryDir, opts.MaxConcurrent, logger)
		if err != nil {
			return nil, fmt.Errorf("active query log: %w", err)
		}
		tracker = t
	} else {
		tracker = newConcurrencyLimit(opts.MaxConcurrent)
	}
	ng := promql.NewEngine(promql.EngineOpts{
		Logger:             logger,
		Reg:                promReg,
		MaxSamples:         opts.MaxSamples,
		Timeout:            opts.Timeout,
		ActiveQueryTracker: tracker,
		LookbackDelta:      opts.LookbackDelta,
		// Subqueries without a step use the global evaluation interval in
		// Prometheus; tailroot has no rule evaluation, so 1m, its default.
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		EnableDelayedNameRemoval: opts.DelayedNameRemoval,
		UseStartTimestamps:       true,
		Parser:                   p,
	})
	e := &Engine{reg: reg, ng: ng, parser: p, funcs: funcs, opts: opts, tracker: tracker}
	e.fast.register(promReg)
	return e, nil
}

// Parser returns the PromQL parser with tailroot's functions, for the API's
// format_query, parse_query and series matchers.
func (e *Engine) Parser() parser.Parser { return e.parser }

// LookbackDelta is how far back instant selectors look.
func (e *Engine) LookbackDelta() time.Duration { return e.opts.LookbackDelta }

// Upstream returns the wrapped upstream engine.
func (e *Engine) Upstream() *promql.Engine { return e.ng }

// Close releases the engine's resources.
func (e *Engine) Close() error { return e.ng.Close() }

// NewInstantQuery implements promql.QueryEngine.
func (e *Engine) NewInstantQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, ts time.Time) (promql.Query, error) {
	if err := e.checkSubquerySteps(qs, 0); err != nil {
		return nil, err
	}
	if expr, calls, err := e.plan(qs); err != nil {
		return nil, err
	} else if calls != nil {
		return &plannedQuery{e: e, q: q, opts: opts, expr: expr, calls: calls, start: ts, end: ts, qs: qs}, nil
	}
	if fq := e.newFastQuery(q, opts, qs, ts, ts, 0); fq != nil {
		return fq, nil
	}
	qry, err := e.ng.NewInstantQuery(ctx, q, opts, qs, ts)
	if err == nil || !isParseError(err) || !e.metricsQLAllowed(ctx) {
		return qry, err
	}
	translated, ok, lerr := e.translate(ctx, qs, 0)
	if lerr != nil {
		return nil, lerr
	}
	if !ok {
		return nil, err
	}
	if err := e.checkSubquerySteps(translated, 0); err != nil {
		return nil, err
	}
	qry, terr := e.ng.NewInstantQuery(ctx, q, opts, translated, ts)
	if terr != nil {
		return nil, err
	}
	return &translatedQuery{Query: qry, from: qs, to: translated}, nil
}

// NewRangeQuery implements promql.QueryEngine.
func (e *Engine) NewRangeQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (promql.Query, error) {
	if err := e.checkSubquerySteps(qs, end.Sub(start)); err != nil {
		return nil, err
	}
	if expr, calls, err := e.plan(qs); err != nil {
		return nil, err
	} else if calls != nil {
		if step <= 0 {
			return nil, fmt.Errorf("zero or negative query resolution step widths are not accepted")
		}
		if expr.Type() != parser.ValueTypeVector && expr.Type() != parser.ValueTypeScalar {
			return nil, fmt.Errorf("invalid expression type %q for range query, must be Scalar or instant Vector", parser.DocumentedType(expr.Type()))
		}
		return &plannedQuery{e: e, q: q, opts: opts, expr: expr, calls: calls, start: start, end: end, step: step, qs: qs}, nil
	}
	if step > 0 {
		if fq := e.newFastQuery(q, opts, qs, start, end, step); fq != nil {
			return fq, nil
		}
	}
	qry, err := e.ng.NewRangeQuery(ctx, q, opts, qs, start, end, step)
	if err == nil || !isParseError(err) || !e.metricsQLAllowed(ctx) {
		return qry, err
	}
	translated, ok, lerr := e.translate(ctx, qs, step)
	if lerr != nil {
		return nil, lerr
	}
	if !ok {
		return nil, err
	}
	if err := e.checkSubquerySteps(translated, end.Sub(start)); err != nil {
		return nil, err
	}
	qry, terr := e.ng.NewRangeQuery(ctx, q, opts, translated, start, end, step)
	if terr != nil {
		return nil, err
	}
	return &translatedQuery{Query: qry, from: qs, to: translated}, nil
}

// translate returns the PromQL form of a MetricsQL query, when it has one.
// fatal is set when the query must be refused with that error rather than
// with PromQL's parse error: it is over a limit, or translating it ran past
// the query timeout or the client went away. Translation runs under the
// query timeout and ctx: the caller gets its answer when either ends,
// while the translation itself, bounded by Options.Limits, finishes in the
// background.
func (e *Engine) translate(ctx context.Context, qs string, step time.Duration) (out string, ok bool, fatal error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := e.translateMetricsQL(qs, step)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		var le *qlimit.Error
		if errors.As(r.err, &le) {
			return "", false, r.err
		}
		return r.out, r.err == nil, nil
	case <-ctx.Done():
		return "", false, fmt.Errorf("translate MetricsQL: %w (query.timeout=%s)", context.Cause(ctx), e.opts.Timeout)
	}
}

func isParseError(err error) bool {
	var pes parser.ParseErrors
	var pe *parser.ParseErr
	return errors.As(err, &pes) || errors.As(err, &pe)
}

// translatedQuery tells the caller, as an info annotation, what PromQL a
// MetricsQL query was evaluated as.
type translatedQuery struct {
	promql.Query
	from, to string
}

func (q *translatedQuery) Exec(ctx context.Context) *promql.Result {
	res := q.Query.Exec(ctx)
	if res.Warnings == nil {
		res.Warnings = annotations.Annotations{}
	}
	res.Warnings.Add(fmt.Errorf("%w: MetricsQL query evaluated as PromQL %q", annotations.PromQLInfo, abbreviate(q.to, maxInfoQuery)))
	return res
}

// maxInfoQuery caps the translation quoted in infos: a few templates can
// expand to a query far longer than the one sent, and repeating it in every
// response would cost more than evaluating it.
const maxInfoQuery = 1024

// abbreviate cuts s to at most n bytes on a rune boundary, saying how long
// it was.
func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes in all)", s[:cut], len(s))
}

// concurrencyLimit is a QueryTracker that only bounds concurrency, for
// engines without an active-query log directory.
type concurrencyLimit struct{ slots chan struct{} }

func newConcurrencyLimit(n int) *concurrencyLimit {
	return &concurrencyLimit{slots: make(chan struct{}, n)}
}

func (c *concurrencyLimit) GetMaxConcurrent() int { return cap(c.slots) }

func (c *concurrencyLimit) Insert(ctx context.Context, _ string) (int, error) {
	select {
	case c.slots <- struct{}{}:
		return 0, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (c *concurrencyLimit) Delete(int) { <-c.slots }

func (c *concurrencyLimit) Close() error { return nil }
