package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/units"
	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/model"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"

	"github.com/tailroot/tailroot/api"
	"github.com/tailroot/tailroot/ingest"
	"github.com/tailroot/tailroot/ingest/scraper"
	"github.com/tailroot/tailroot/internal/promcfg"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/builtin"
	"github.com/tailroot/tailroot/ruler"
	"github.com/tailroot/tailroot/tsdb"
	"github.com/tailroot/tailroot/tsdb/evidence"
	"github.com/tailroot/tailroot/tsdb/forward"
)

// bytesFlag parses sizes such as 512MB or 1GiB, as Prometheus flags do.
type bytesFlag struct{ v *int64 }

func (b bytesFlag) String() string {
	if b.v == nil || *b.v == 0 {
		return "0B"
	}
	return units.Base2Bytes(*b.v).String()
}

func (b bytesFlag) Set(s string) error {
	n, err := units.ParseBase2Bytes(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("size %q: %w", s, err)
	}
	*b.v = int64(n)
	return nil
}

type serveConfig struct {
	listen, dataDir, webConfig, logLevel string
	configFile                           string
	enableAdmin                          bool
	simulate                             bool
	sim                                  simulateOptions
	db                                   tsdb.Options
	ingest                               ingest.Options
	query                                query.Options
	records                              ingest.RecordsOptions
	otlp                                 ingest.OTLPOptions
	seriesLabels, promoteAttrs           string
	reportS3                             api.S3Options
	evidence                             evidence.Options
	forward                              forward.Options
	shutdownTimeout                      time.Duration
	rules                                rulesFlags
	features                             featureList
	stores                               storesConfig
	limits                               serveLimits
	peers                                peersConfig
	parquet                              parquetConfig
	resultsCache                         resultsCacheFlags
	tenancy                              tenancyConfig
	pprof                                pprofFlags
}

func parseServeFlags(args []string) (*serveConfig, *flag.FlagSet, error) {
	c := &serveConfig{
		db: tsdb.DefaultOptions(), ingest: ingest.DefaultOptions(), query: query.DefaultOptions(),
		records: ingest.DefaultRecordsOptions(),
	}
	c.records.Store.Retention = 15 * 24 * time.Hour
	c.records.DeriveInterval = 5 * time.Second
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:9490", "address to serve HTTP on")
	fs.StringVar(&c.dataDir, "data-dir", "./data", "directory for the TSDB and tailroot's state")
	fs.StringVar(&c.configFile, "config.file", "", "Prometheus configuration file (global.external_labels, remote_write, remote_read, …); empty means Prometheus' defaults")
	fs.StringVar(&c.webConfig, "web.config.file", "", "exporter-toolkit web configuration file enabling TLS and/or basic auth (the Prometheus format)")
	fs.BoolVar(&c.enableAdmin, "web.enable-admin-api", false, "serve the TSDB admin endpoints (delete_series, snapshot, clean_tombstones)")
	fs.StringVar(&c.logLevel, "log.level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&c.simulate, "simulate", false, "feed the server from the built-in vLLM workload simulator")
	simulateFlags(fs, c)
	c.evidence = evidence.DefaultOptions()
	fs.StringVar(&c.evidence.Dir, "evidence.dir", "", "directory of the evidence store (stacks, CUDA timelines); empty means <data-dir>/evidence")
	fs.DurationVar(&c.evidence.Retention, "evidence.retention", c.evidence.Retention, "how long evidence is kept; 0 keeps it forever")
	fs.StringVar(&c.reportS3.Endpoint, "attribution.report-s3.endpoint", "", "host[:port] of an S3-compatible service that attribution reports are uploaded to (report?upload=true); empty disables uploads")
	fs.StringVar(&c.reportS3.Bucket, "attribution.report-s3.bucket", "", "bucket for attribution reports")
	fs.StringVar(&c.reportS3.Prefix, "attribution.report-s3.prefix", "", "key prefix for attribution reports")
	fs.StringVar(&c.reportS3.Region, "attribution.report-s3.region", "", "bucket region; empty lets the client discover it")
	fs.BoolVar(&c.reportS3.Insecure, "attribution.report-s3.insecure", false, "talk plain HTTP to the S3 endpoint")
	fs.BoolVar(&c.reportS3.PathStyle, "attribution.report-s3.path-style", false, "path-style bucket addressing (MinIO, Ceph)")
	fs.DurationVar(&c.db.Retention, "storage.tsdb.retention.time", c.db.Retention, "how long to keep samples")
	fs.Var(bytesFlag{&c.db.RetentionSize}, "storage.tsdb.retention.size", "maximum bytes of blocks to keep (e.g. 512MB); 0 means no limit")
	fs.DurationVar(&c.db.OutOfOrderWindow, "storage.tsdb.out-of-order-time-window", c.db.OutOfOrderWindow, "accept samples this far behind the newest of their series; 0 disables")
	fs.Int64Var(&c.db.MaxExemplars, "storage.exemplars.max", c.db.MaxExemplars, "exemplars kept in memory; 0 disables exemplar storage")
	fs.Var(bytesFlag{&c.ingest.MaxBodyBytes}, "ingest.max-body-size", "largest compressed write body accepted (413 above)")
	fs.IntVar(&c.ingest.MaxSeriesPerRequest, "ingest.max-series-per-request", c.ingest.MaxSeriesPerRequest, "largest number of series in one write (413 above); 0 means no limit")
	fs.IntVar(&c.ingest.MaxLabelsPerSeries, "ingest.max-labels-per-series", c.ingest.MaxLabelsPerSeries, "series with more labels are rejected; 0 means no limit")
	fs.StringVar(&c.records.Store.Dir, "records.dir", "", "directory of the request-record store; empty means <data-dir>/records")
	fs.DurationVar(&c.records.Store.Retention, "records.retention", c.records.Store.Retention, "how long request records are kept; 0 keeps them forever (derived series follow --storage.tsdb.retention.time)")
	fs.DurationVar(&c.records.DeriveInterval, "records.derive-interval", c.records.DeriveInterval, "how often series derived from request records are appended; 0 appends them before each push is acknowledged")
	fs.StringVar(&c.seriesLabels, "records.series-labels", strings.Join(ingest.DefaultSeriesLabels, ","), "request labels copied onto derived series (comma-separated); other request labels stay on the records only")
	fs.IntVar(&c.records.MaxSeriesLabelSets, "records.max-series-label-sets", 10000, "distinct label sets of derived series; further ones are counted under tailroot_overflow=\"true\"")
	fs.Var(bytesFlag{&c.records.MaxBodyBytes}, "records.max-body-size", "largest request-record or OTLP traces body accepted (413 above); 0 means 32MiB")
	fs.IntVar(&c.records.MaxRecordsPerRequest, "records.max-per-request", 100000, "most requests (NDJSON lines or spans) in one push (413 above)")
	fs.StringVar(&c.promoteAttrs, "otlp.promote-resource-attributes", "", "OTLP resource attributes promoted to labels of every series (comma-separated)")
	fs.BoolVar(&c.otlp.ConvertHistogramsToNHCB, "otlp.convert-histograms-to-nhcb", false, "store OTLP explicit-bucket histograms as native histograms with custom buckets instead of classic _bucket series (Prometheus' otlp.convert_histograms_to_nhcb)")
	fs.DurationVar(&c.query.Timeout, "query.timeout", c.query.Timeout, "maximum time a query may take")
	fs.IntVar(&c.query.MaxSamples, "query.max-samples", c.query.MaxSamples, "maximum samples a query may load into memory")
	fs.IntVar(&c.query.MaxConcurrent, "query.max-concurrency", c.query.MaxConcurrent, "queries evaluated at once; more wait")
	fs.DurationVar(&c.query.LookbackDelta, "query.lookback-delta", c.query.LookbackDelta, "how far back an instant selector looks for a sample")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to wait for in-flight requests on SIGTERM")
	c.rules.register(fs)
	fs.Var(&c.features, "enable-feature", "comma-separated Prometheus feature names to enable (promql-experimental-functions, promql-delayed-name-removal, promql-binop-fill-modifiers, promql-unquoted-utf8-names); repeatable")
	fs.BoolVar(&c.query.MetricsQL, "query.metricsql", false, "translate MetricsQL for every client; otherwise only for queries sent with dialect=metricsql (parameter) or X-Tailroot-Dialect: metricsql (header)")
	blockFlags(fs, c)
	addStoreFlags(fs, &c.stores)
	c.limitFlags(fs)
	addDurabilityFlags(fs, c)
	addForwardFlags(fs, c)
	addPeerFlags(fs, &c.peers)
	addRecordsCheckpointFlag(fs, c)
	c.parquet.registerFlags(fs)
	addEngineFlags(fs, c)
	addPprofFlags(fs, c)
	c.resultsCache.register(fs)
	addTenancyFlags(fs, c)
	// Last: every duration flag registered above takes Prometheus' syntax.
	promDurationFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := c.rules.resolve(c.listen); err != nil {
		return nil, fs, err
	}
	if err := c.checkLimits(); err != nil {
		return nil, fs, err
	}
	if err := c.sim.validate(c.simulate); err != nil {
		return nil, fs, err
	}
	c.records.SeriesLabels = splitList(c.seriesLabels)
	c.otlp.PromoteResourceAttributes = splitList(c.promoteAttrs)
	c.otlp.MaxBodyBytes = c.ingest.MaxBodyBytes
	if err := c.resolveTenancy(); err != nil {
		return nil, fs, err
	}
	return c, fs, nil
}

// splitList splits a comma-separated flag value, dropping empty items; an
// empty value gives an empty, non-nil list.
func splitList(s string) []string {
	out := []string{}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func serve(args []string) error {
	c, fs, err := parseServeFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logger, err := newLogger(c.logLevel)
	if err != nil {
		return err
	}
	flagsMap := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { flagsMap[f.Name] = f.Value.String() })

	cfgHolder, err := promcfg.NewHolder(c.configFile, logger.With("component", "config"))
	if err != nil {
		return err
	}
	if err := unsupportedConfig(cfgHolder.Get()); err != nil {
		return fmt.Errorf("config %s: %w", cfgHolder.Path(), err)
	}
	applyStartupConfig(c, fs, cfgHolder.Get())

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	c.db.Dir = c.dataDir
	if err := os.MkdirAll(c.dataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	db, err := tsdb.Open(c.db, logger.With("component", "tsdb"), reg)
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(); err != nil {
			logger.Error("close tsdb", "err", err)
		}
	}()
	stopForwarding, err := startForwarding(c, db, cfgHolder, logger.With("component", "remote_write"), reg)
	if err != nil {
		return err
	}
	defer stopForwarding()

	// The request-record pipeline opens before the query engine: the
	// engine's attribution functions read its store.
	if c.records.Store.Dir == "" {
		c.records.Store.Dir = filepath.Join(c.dataDir, "records")
	}
	if c.records.BackfillWindow == 0 {
		c.records.BackfillWindow = c.db.OutOfOrderWindow // derived samples as old as the TSDB takes
	}
	c.parquet.holdRetention(&c.records.Store)
	recs, err := ingest.NewRecords(db, db.Metadata, c.records, logger.With("component", "records"), reg)
	if err != nil {
		return err
	}
	defer func() {
		if err := recs.Close(); err != nil {
			logger.Error("close request records", "err", err)
		}
	}()
	recordSource, err := c.parquet.start(recs.Store(), c.records.Store.Retention, reg, logger.With("component", "records-history"))
	if err != nil {
		return err
	}
	recordSource = c.tenancy.columns(recordSource)
	defer c.parquet.stop()

	if err := applyFeatures(c.features, &c.query, logger); err != nil {
		return err
	}
	c.query.ActiveQueryDir = filepath.Join(c.dataDir, "queries")
	if err := os.MkdirAll(c.query.ActiveQueryDir, 0o755); err != nil {
		return fmt.Errorf("create query log dir: %w", err)
	}
	c.peers.discoverFrom(cfgHolder.Get(), logger.With("component", "peers"))
	recordSrc, err := c.peers.source(recordSource, reg)
	if err != nil {
		return err
	}
	funcs, err := builtin.Registry(recordSrc)
	if err != nil {
		return err
	}
	engine, err := query.New(c.query, funcs, logger.With("component", "query"), reg)
	if err != nil {
		return err
	}
	defer engine.Close()

	global, closeStores, err := c.stores.queryable(cfgHolder, db, logger.With("component", "stores"), reg)
	if err != nil {
		return err
	}
	defer closeStores()

	traces := ingest.NewTraces(recs, logger.With("component", "otlp"), reg)
	otlpMetrics := ingest.NewOTLPMetrics(c.tenancy.appendable(db), db.Metadata, c.otlp, logger.With("component", "otlp"), reg)

	rw := ingest.NewRemoteWrite(c.tenancy.appendable(db), db.Metadata, c.ingest, logger.With("component", "ingest"), reg)
	var uploader api.ReportUploader
	if c.reportS3.Endpoint != "" {
		// Credentials come from the environment (AWS_ACCESS_KEY_ID, …), not
		// flags, so they stay out of /api/v1/status/flags and ps.
		u, err := api.NewS3Uploader(c.reportS3)
		if err != nil {
			return fmt.Errorf("attribution report upload: %w", err)
		}
		uploader = u
	}
	if c.evidence.Dir == "" {
		c.evidence.Dir = filepath.Join(c.dataDir, "evidence")
	}
	c.evidence.Logger = logger.With("component", "evidence")
	evStore, err := evidence.Open(c.evidence)
	if err != nil {
		return err
	}
	defer func() {
		if err := evStore.Close(); err != nil {
			logger.Error("close evidence store", "err", err)
		}
	}()
	tenantEvidence, closeTenantEvidence := c.tenancy.tenantEvidence(c.evidence)
	defer func() {
		if err := closeTenantEvidence(); err != nil {
			logger.Error("close tenant evidence stores", "err", err)
		}
	}()
	evAPI := api.NewEvidence(evStore, api.EvidenceOptions{Logger: logger.With("component", "evidence"), Registerer: reg, TenantStore: tenantEvidence})
	apiGlobal := c.tenancy.queryable(global)
	attribution := api.NewAttribution(engine, apiGlobal, api.RecordsWithEvidence(recordSource, evAPI), api.AttributionOptions{
		Build:    api.BuildInfo{Version: version, Revision: revision, Branch: branch, BuildUser: buildUser, BuildDate: buildDate},
		Uploader: uploader,
		Logger:   logger.With("component", "attribution"),
		Cluster:  clusterOf(recordSrc),
	})
	extra := func(r *mux.Router) {
		recs.Register(r)
		c.peers.register(r, c.tenancy.columns(recs.Store()))
		evAPI.Register(r)
		attribution.Register(r)
		r.Handle("/api/v1/attribution/rootcause", api.NewRootCauseHandler(engine, apiGlobal, api.RootCauseOptions{Metadata: db.Metadata})).Methods(http.MethodGet, http.MethodPost)
		r.Handle("/api/v1/attribution/causal", api.NewCausalHandler(engine, apiGlobal)).Methods(http.MethodGet, http.MethodPost)
		r.Handle("/v1/traces", traces).Methods(http.MethodPost)
		r.Handle("/api/v1/otlp/v1/traces", traces).Methods(http.MethodPost)
		r.Handle("/api/v1/otlp/v1/metrics", otlpMetrics).Methods(http.MethodPost)
		r.Handle("/v1/metrics", otlpMetrics).Methods(http.MethodPost)
		c.pprof.register(r)
	}
	sdMetrics, err := discovery.CreateAndRegisterSDMetrics(reg)
	if err != nil {
		return fmt.Errorf("service discovery metrics: %w", err)
	}
	c.rules.opts.Logger = logger.With("component", "rules")
	c.rules.opts.Registerer = reg
	c.rules.opts.SDMetrics = sdMetrics
	rulesEngine, err := ruler.New(engine, engine.Parser(), global, db, c.rules.opts)
	if err != nil {
		return err
	}
	scrapes, err := scraper.New(db, db.Metadata, scraper.Options{SDMetrics: sdMetrics, Logger: logger.With("component", "scrape"), Registerer: reg})
	if err != nil {
		return err
	}
	reload := newReloader(cfgHolder, unsupportedConfig, logger.With("component", "config"))
	for _, step := range []struct {
		name  string
		apply func(*config.Config) error
	}{
		{"query log", queryLog(engine)},
		{"scrape", scrapes.ApplyConfig},
		{"rules", rulesEngine.ApplyConfig},
	} {
		if err := reload.add(step.name, step.apply); err != nil {
			return err
		}
	}
	rulesEngine.Run()
	defer rulesEngine.Stop()
	scrapes.Run()
	defer scrapes.Stop()
	var reloadEndpoint func() error
	if c.rules.enableLifecycle {
		reloadEndpoint = reload.reload
	}

	ready, healthy := probes(db, recs)
	resultsCache := c.resultsCache.start(db, engine, global, cfgHolder, reg, logger.With("component", "results-cache"))
	srv := api.New(db, engine, api.Handlers{RemoteWrite: rw, Extra: extra}, api.Options{
		ListenAddress: c.listen,
		EnableAdmin:   c.enableAdmin,
		Flags:         flagsMap,
		Retention:     model.Duration(c.db.Retention).String(),
		Config:        cfgHolder.Get,
		Rules:         rulesEngine,
		Targets:       scrapes.Manager(),
		Alertmanagers: rulesEngine,
		Reload:        reloadEndpoint,
		Queryable:     global,
		CORSOrigin:    c.limits.cors,
		Ready:         ready,
		Healthy:       healthy,
		ResultsCache:  resultsCache,
		Tenancy:       c.tenancy.resolver,
		Build: api.BuildInfo{
			Version: version, Revision: revision, Branch: branch, BuildUser: buildUser, BuildDate: buildDate,
		},
	}, logger.With("component", "api"), reg)

	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	httpSrv := &http.Server{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError)}
	ln = c.limits.limitServer(httpSrv, c.peers.wrap(srv.Handler()), ln)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = reload.reload()
			}
		}
	}()

	errc := make(chan error, 2)
	go func() {
		webConfig := c.webConfig
		errc <- web.Serve(ln, httpSrv, &web.FlagConfig{
			WebListenAddresses: &[]string{c.listen},
			WebConfigFile:      &webConfig,
		}, logger.With("component", "web"))
	}()
	scheme := "http"
	if c.webConfig != "" {
		scheme = "https or http, as " + c.webConfig + " says"
	}
	logger.Info("tailroot is serving", "url", "http://"+ln.Addr().String(), "scheme", scheme, "data_dir", c.dataDir, "version", version)
	if c.simulate {
		startSimulator(ctx, c, "http://"+ln.Addr().String(), logger)
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve http: %w", err)
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("http shutdown", "err", err)
	}
	return nil
}
