package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/config"

	"github.com/tailroot/tailroot/internal/promcfg"
	"github.com/tailroot/tailroot/internal/tenant"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/remote"
	"github.com/tailroot/tailroot/query/resultscache"
	"github.com/tailroot/tailroot/tsdb"
)

// resultsCacheFlags configure the range-query results cache
// (query/resultscache).
type resultsCacheFlags struct {
	enabled bool
	opts    resultscache.Options
}

func (f *resultsCacheFlags) register(fs *flag.FlagSet) {
	f.opts = resultscache.DefaultOptions()
	f.enabled = true
	fs.BoolVar(&f.enabled, "query.results-cache.enabled", true, "answer range queries from cached step-aligned results, evaluating only the missing steps; a request skips it with Cache-Control: no-store or nocache=1")
	fs.Var(bytesFlag{&f.opts.MaxBytes}, "query.results-cache.max-size", "memory bound of the results cache (e.g. 256MiB); least recently used queries are evicted above it")
	fs.DurationVar(&f.opts.MaxFreshness, "query.results-cache.max-freshness", f.opts.MaxFreshness, "steps newer than this are never cached (data may still be arriving)")
}

// start builds the cache over engine and db, or returns nil when disabled.
// The TSDB reports every commit and delete to it, a configuration reload
// empties it (external labels and remote stores change answers), and it
// stands aside while the global view reads remote stores, whose writes it
// is not told about.
func (f *resultsCacheFlags) start(db *tsdb.DB, engine *query.Engine, global *remote.Queryable, cfg *promcfg.Holder, reg prometheus.Registerer, logger *slog.Logger) *resultscache.Cache {
	if !f.enabled {
		return nil
	}
	o := f.opts
	if o.MaxFreshness <= 0 {
		o.MaxFreshness = -1 // cache up to now, as asked
	}
	o.Parser = engine.Parser()
	o.Registerer = reg
	o.StartTime = db.StartTime
	o.Bypass = func() bool { return !global.LocalOnly() }
	// With tenancy on, one queryable answers every tenant from the request
	// context, so the tenant is part of what a cached answer is for.
	o.KeyFrom = func(ctx context.Context) string {
		if t := tenant.FromContext(ctx); t != nil {
			return t.Label + "=" + t.ID
		}
		return ""
	}
	c := resultscache.New(o)
	db.SetWriteListener(c.Invalidate)
	cfg.AddApplier(promcfg.Applier{Name: "results cache", Apply: func(*config.Config) error {
		c.Reset()
		return nil
	}})
	logger.Info("range query results cache", "max_size", bytesFlag{&f.opts.MaxBytes}.String(), "max_freshness", f.opts.MaxFreshness.String())
	return c
}
