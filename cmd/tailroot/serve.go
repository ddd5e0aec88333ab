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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/tailroot/tailroot/api"
	"github.com/tailroot/tailroot/ingest"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb"
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
	enableAdmin                          bool
	simulate                             bool
	db                                   tsdb.Options
	ingest                               ingest.Options
	query                                query.Options
	shutdownTimeout                      time.Duration
}

func parseServeFlags(args []string) (*serveConfig, *flag.FlagSet, error) {
	c := &serveConfig{db: tsdb.DefaultOptions(), ingest: ingest.DefaultOptions(), query: query.DefaultOptions()}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:9490", "address to serve HTTP on")
	fs.StringVar(&c.dataDir, "data-dir", "./data", "directory for the TSDB and tailroot's state")
	fs.StringVar(&c.webConfig, "web.config.file", "", "exporter-toolkit web configuration file enabling TLS and/or basic auth (the Prometheus format)")
	fs.BoolVar(&c.enableAdmin, "web.enable-admin-api", false, "serve the TSDB admin endpoints (delete_series, snapshot, clean_tombstones)")
	fs.StringVar(&c.logLevel, "log.level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&c.simulate, "simulate", false, "feed the server from the built-in vLLM workload simulator")
	fs.DurationVar(&c.db.Retention, "storage.tsdb.retention.time", c.db.Retention, "how long to keep samples")
	fs.Var(bytesFlag{&c.db.RetentionSize}, "storage.tsdb.retention.size", "maximum bytes of blocks to keep (e.g. 512MB); 0 means no limit")
	fs.DurationVar(&c.db.OutOfOrderWindow, "storage.tsdb.out-of-order-time-window", c.db.OutOfOrderWindow, "accept samples this far behind the newest of their series; 0 disables")
	fs.Int64Var(&c.db.MaxExemplars, "storage.exemplars.max", c.db.MaxExemplars, "exemplars kept in memory; 0 disables exemplar storage")
	fs.Var(bytesFlag{&c.ingest.MaxBodyBytes}, "ingest.max-body-size", "largest compressed write body accepted (413 above)")
	fs.IntVar(&c.ingest.MaxSeriesPerRequest, "ingest.max-series-per-request", c.ingest.MaxSeriesPerRequest, "largest number of series in one write (413 above); 0 means no limit")
	fs.IntVar(&c.ingest.MaxLabelsPerSeries, "ingest.max-labels-per-series", c.ingest.MaxLabelsPerSeries, "series with more labels are rejected; 0 means no limit")
	fs.DurationVar(&c.query.Timeout, "query.timeout", c.query.Timeout, "maximum time a query may take")
	fs.IntVar(&c.query.MaxSamples, "query.max-samples", c.query.MaxSamples, "maximum samples a query may load into memory")
	fs.IntVar(&c.query.MaxConcurrent, "query.max-concurrency", c.query.MaxConcurrent, "queries evaluated at once; more wait")
	fs.DurationVar(&c.query.LookbackDelta, "query.lookback-delta", c.query.LookbackDelta, "how far back an instant selector looks for a sample")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to wait for in-flight requests on SIGTERM")
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return c, fs, nil
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

	c.query.ActiveQueryDir = filepath.Join(c.dataDir, "queries")
	if err := os.MkdirAll(c.query.ActiveQueryDir, 0o755); err != nil {
		return fmt.Errorf("create query log dir: %w", err)
	}
	engine, err := query.New(c.query, nil, logger.With("component", "query"), reg)
	if err != nil {
		return err
	}
	defer engine.Close()

	rw := ingest.NewRemoteWrite(db, db.Metadata, c.ingest, logger.With("component", "ingest"), reg)
	srv := api.New(db, engine, api.Handlers{RemoteWrite: rw}, api.Options{
		ListenAddress: c.listen,
		EnableAdmin:   c.enableAdmin,
		Flags:         flagsMap,
		Retention:     c.db.Retention.String(),
		Build: api.BuildInfo{
			Version: version, Revision: revision, Branch: branch, BuildUser: buildUser, BuildDate: buildDate,
		},
	}, logger.With("component", "api"), reg)

	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	httpSrv := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelError),
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

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
		go func() {
			if err := runSimulator(ctx, "http://"+ln.Addr().String(), logger.With("component", "sim")); err != nil && !errors.Is(err, context.Canceled) {
				logger.Error("simulator stopped", "err", err)
			}
		}()
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
