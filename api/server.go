package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gorilla/mux"
	"github.com/grafana/regexp"
	"github.com/klauspost/compress/gzhttp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/route"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/scrape"
	"github.com/prometheus/prometheus/util/notifications"
	v1 "github.com/prometheus/prometheus/web/api/v1"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb"
)

// BuildInfo identifies the running binary in /api/v1/status/buildinfo.
type BuildInfo struct {
	Version, Revision, Branch, BuildUser, BuildDate string
}

// Options configures the HTTP API. Zero values mean the documented default.
type Options struct {
	// ListenAddress is reported in the API's global URL options.
	ListenAddress string
	// EnableAdmin serves the TSDB admin endpoints (delete_series, snapshot,
	// clean_tombstones); off by default, as in Prometheus.
	EnableAdmin bool
	// Flags are shown by /api/v1/status/flags.
	Flags map[string]string
	// Build identifies the binary.
	Build BuildInfo
	// Retention is shown by /api/v1/status/runtimeinfo.
	Retention string
	// RemoteReadSampleLimit, RemoteReadConcurrency and RemoteReadBytesInFrame
	// bound /api/v1/read; zero means the Prometheus defaults (5e7, 10, 1 MiB).
	RemoteReadSampleLimit  int
	RemoteReadConcurrency  int
	RemoteReadBytesInFrame int
	// Config returns the configuration in force, reported by
	// /api/v1/status/config; nil means Prometheus' defaults.
	Config func() *config.Config
	// CORSOrigin is the regexp of allowed origins; nil means ".*" as in
	// Prometheus.
	CORSOrigin *regexp.Regexp
	// Ready and Healthy back /-/ready and /-/healthy: a non-nil error
	// answers 503 with it. Ready fails while writes are refused, Healthy
	// while nothing can be served. Nil means always.
	Ready, Healthy func() error
}

// Server holds the mounted handlers.
type Server struct {
	router *mux.Router
	db     *tsdb.DB
	start  time.Time
	opts   Options
	logger *slog.Logger
}

// Handlers are the pieces the server routes to that live in other packages.
type Handlers struct {
	// RemoteWrite serves POST /api/v1/write.
	RemoteWrite http.Handler
	// Extra registers more routes on the router before the Prometheus API
	// catch-all is mounted (ingest endpoints, attribution reports).
	Extra func(r *mux.Router)
}

// New builds the HTTP handler of `tailroot serve`.
func New(db *tsdb.DB, engine *query.Engine, h Handlers, opts Options, logger *slog.Logger, reg *prometheus.Registry) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.CORSOrigin == nil {
		opts.CORSOrigin = regexp.MustCompile(".*")
	}
	if opts.RemoteReadSampleLimit <= 0 {
		opts.RemoteReadSampleLimit = 5e7
	}
	if opts.RemoteReadConcurrency <= 0 {
		opts.RemoteReadConcurrency = 10
	}
	if opts.RemoteReadBytesInFrame <= 0 {
		opts.RemoteReadBytesInFrame = 1 << 20
	}
	s := &Server{router: mux.NewRouter(), db: db, start: time.Now(), opts: opts, logger: logger}
	cfgFunc := func() config.Config { return config.DefaultConfig }
	if opts.Config != nil {
		cfgFunc = func() config.Config { return *opts.Config() }
	}
	build := &v1.PrometheusVersion{
		Version:   opts.Build.Version,
		Revision:  opts.Build.Revision,
		Branch:    opts.Build.Branch,
		BuildUser: opts.Build.BuildUser,
		BuildDate: opts.Build.BuildDate,
		GoVersion: runtime.Version(),
	}
	promAPI := v1.NewAPI(engine, db, db, db,
		func(context.Context) v1.ScrapePoolsRetriever { return noScrape{} },
		func(context.Context) v1.TargetRetriever { return noScrape{} },
		func(context.Context) v1.AlertmanagerRetriever { return noScrape{} },
		cfgFunc,
		opts.Flags,
		v1.GlobalURLOptions{ListenAddress: opts.ListenAddress, Host: opts.ListenAddress, Scheme: "http"},
		func(f http.HandlerFunc) http.HandlerFunc { return f },
		db,
		db.Dir(),
		opts.EnableAdmin,
		false, 0,
		logger,
		func(context.Context) v1.RulesRetriever { return noScrape{} },
		opts.RemoteReadSampleLimit,
		opts.RemoteReadConcurrency,
		opts.RemoteReadBytesInFrame,
		false,
		opts.CORSOrigin,
		s.runtimeInfo,
		build,
		func() []notifications.Notification { return nil },
		func() (<-chan notifications.Notification, func(), bool) { return nil, func() {}, false },
		reg, reg,
		nil,
		false, nil,
		true, false, false,
		engine.LookbackDelta(),
		false, false,
		nil,
		nil,
		v1.OpenAPIOptions{Version: opts.Build.Version},
		engine.Parser(),
		false,
		0,
	)
	apiRouter := route.New()
	promAPI.Register(apiRouter.WithPrefix("/api/v1"))

	r := s.router
	r.HandleFunc("/-/healthy", probe("Healthy", opts.Healthy)).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/-/ready", probe("Ready", opts.Ready)).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if h.RemoteWrite != nil {
		r.Handle("/api/v1/write", h.RemoteWrite)
	}
	r.HandleFunc("/api/v1/metadata", s.metadata).Methods(http.MethodGet, http.MethodPost)
	if h.Extra != nil {
		h.Extra(r)
	}
	r.PathPrefix("/api/v1/").Handler(apiRouter)
	r.HandleFunc("/", s.landing).Methods(http.MethodGet)
	return s
}

// Handler returns the root handler, gzip-compressing responses for clients
// that accept it.
func (s *Server) Handler() http.Handler {
	gz, err := gzhttp.NewWrapper(gzhttp.MinSize(1024))
	if err != nil {
		// The options above are constants; an error is a programming bug.
		panic("BUG: gzip wrapper: " + err.Error())
	}
	return gz(s.router)
}

func (s *Server) runtimeInfo() (v1.RuntimeInfo, error) {
	cwd, _ := os.Getwd()
	host, _ := os.Hostname()
	gogc := os.Getenv("GOGC")
	return v1.RuntimeInfo{
		StartTime:        s.start,
		CWD:              cwd,
		Hostname:         host,
		ServerTime:       time.Now().UTC(),
		GoroutineCount:   runtime.NumGoroutine(),
		GOMAXPROCS:       runtime.GOMAXPROCS(0),
		GOMEMLIMIT:       debug.SetMemoryLimit(-1),
		GOGC:             gogc,
		GODEBUG:          os.Getenv("GODEBUG"),
		StorageRetention: s.opts.Retention,
	}, nil
}

// metadata serves /api/v1/metadata from the metadata writers reported; the
// upstream handler reads scrape targets, which a push server does not have.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	limit, limitPer := -1, -1
	if v := r.FormValue("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_data", "limit must be a number")
			return
		}
		limit = n
	}
	if v := r.FormValue("limit_per_metric"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_data", "limit_per_metric must be a number")
			return
		}
		limitPer = n
	}
	if limit == 0 {
		writeData(w, map[string]any{})
		return
	}
	writeData(w, s.db.Metadata.Get(r.FormValue("metric"), limit, limitPer))
}

func (s *Server) landing(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	q := url.QueryEscape(`histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))`)
	_, _ = w.Write([]byte(`<!doctype html><title>tailroot</title><h1>tailroot ` + s.opts.Build.Version + `</h1>
<p>Prometheus-compatible API at <code>/api/v1</code>. Point Grafana's Prometheus datasource here.</p>
<ul><li><a href="/api/v1/query?query=` + q + `">P99 end-to-end latency by model</a></li>
<li><a href="/api/v1/labels">label names</a></li>
<li><a href="/api/v1/status/buildinfo">build info</a></li>
<li><a href="/metrics">tailroot's own metrics</a></li></ul>`))
}

type envelope struct {
	Status    string `json:"status"`
	Data      any    `json:"data,omitempty"`
	ErrorType string `json:"errorType,omitempty"`
	Error     string `json:"error,omitempty"`
}

func writeData(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(envelope{Status: "success", Data: data})
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(envelope{Status: "error", ErrorType: typ, Error: msg})
}

// noScrape answers the API's scrape, alerting and rule questions for a
// server that has none of them: empty lists, not errors, so Grafana's
// Prometheus datasource and promtool see an ordinary empty Prometheus.
type noScrape struct{}

func (noScrape) ScrapePools() []string                                 { return nil }
func (noScrape) TargetsActive() map[string][]*scrape.Target            { return nil }
func (noScrape) TargetsDropped() map[string][]*scrape.Target           { return nil }
func (noScrape) TargetsDroppedCounts() map[string]int                  { return nil }
func (noScrape) ScrapePoolConfig(string) (*config.ScrapeConfig, error) { return nil, errNoScrape }
func (noScrape) Alertmanagers() []*url.URL                             { return nil }
func (noScrape) DroppedAlertmanagers() []*url.URL                      { return nil }
func (noScrape) RuleGroups() []*rules.Group                            { return nil }
func (noScrape) AlertingRules() []*rules.AlertingRule                  { return nil }
