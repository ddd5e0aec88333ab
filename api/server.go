package api

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/grafana/regexp"
	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/route"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/scrape"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/notifications"
	v1 "github.com/prometheus/prometheus/web/api/v1"

	"github.com/tailroot/tailroot/internal/httpapi"
	"github.com/tailroot/tailroot/internal/tenant"
	"github.com/tailroot/tailroot/query"
	remotequery "github.com/tailroot/tailroot/query/remote"
	"github.com/tailroot/tailroot/query/resultscache"
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
	// Rules serves /api/v1/rules and /api/v1/alerts; nil answers empty
	// lists.
	Rules v1.RulesRetriever
	// Targets serves /api/v1/targets and /api/v1/scrape_pools; nil answers
	// empty lists.
	Targets interface {
		v1.TargetRetriever
		v1.ScrapePoolsRetriever
	}
	// Alertmanagers serves /api/v1/alertmanagers; nil answers empty lists.
	Alertmanagers v1.AlertmanagerRetriever
	// Reload, when set, is called by POST/PUT /-/reload (Prometheus'
	// --web.enable-lifecycle); nil leaves the endpoint unrouted.
	Reload func() error
	// CORSOrigin is the regexp of origins allowed to read the API from a
	// browser (--web.cors.origin, anchored as Prometheus anchors it); nil
	// allows none. Prometheus defaults to ".*"; tailroot does not, so a web
	// page a user visits cannot read their metrics unless configured.
	CORSOrigin *regexp.Regexp
	// Queryable is what queries (/api/v1/query, query_range) evaluate over:
	// the global view (query/remote) of `tailroot serve`. Nil means the
	// local TSDB. Series, label names and values and remote read always
	// serve the local TSDB: a Thanos sidecar builds its StoreAPI from
	// exactly these endpoints, and must not re-export other nodes' data
	// under this node's external labels (or loop through a Thanos Query
	// this node reads).
	Queryable storage.Queryable
	// Ready and Healthy back /-/ready and /-/healthy: a non-nil error
	// answers 503 with it. Ready fails while writes are refused, Healthy
	// while nothing can be served. Nil means always.
	Ready, Healthy func() error
	// ResultsCache answers /api/v1/query_range from cached step-aligned
	// extents (query/resultscache); nil evaluates every range query.
	ResultsCache *resultscache.Cache
	// Tenancy, when set, requires a tenant on every request and confines
	// each to its tenant (tenancy.go); nil means tenancy off.
	Tenancy *tenant.Resolver
}

// noOrigin matches no Origin header: CORS off.
var noOrigin = regexp.MustCompile(`^\b$`)

// Server holds the mounted handlers.
type Server struct {
	router *mux.Router
	db     *tsdb.DB
	names  storage.Queryable // what /api/v1/metadata lists families from
	start  time.Time
	opts   Options
	logger *slog.Logger

	// The route table (routes.go): the Prometheus API router, its
	// catch-all on router, the paths registered on it, and the table.
	apiRouter  http.Handler
	catchAll   *mux.Route
	upstream   upstreamRoutes
	routesOnce sync.Once
	routes     []Route
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
		opts.CORSOrigin = noOrigin
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
	var rulesRetriever v1.RulesRetriever = noScrape{}
	if opts.Rules != nil {
		rulesRetriever = opts.Rules
	}
	var amRetriever v1.AlertmanagerRetriever = noScrape{}
	if opts.Alertmanagers != nil {
		amRetriever = opts.Alertmanagers
	}
	var targets interface {
		v1.TargetRetriever
		v1.ScrapePoolsRetriever
	} = noScrape{}
	if opts.Targets != nil {
		targets = opts.Targets
	}
	var (
		q     storage.SampleAndChunkQueryable = db
		eq    storage.ExemplarQueryable       = db
		admin v1.TSDBAdminStats               = db
	)
	s.names = db
	if opts.Tenancy != nil {
		q, eq, admin = tenantStores(db)
		s.names = q
		rulesRetriever = noScrape{}
		if opts.Queryable != nil {
			opts.Queryable = tsdb.TenantQueryable(opts.Queryable)
		}
	}
	var qe promql.QueryEngine = engine
	if opts.Queryable != nil {
		qe = queryableEngine{QueryEngine: engine, q: opts.Queryable}
	}
	qe = opts.ResultsCache.Wrap(qe)
	promAPI := v1.NewAPI(qe, q, db, eq,
		func(context.Context) v1.ScrapePoolsRetriever { return targets },
		func(context.Context) v1.TargetRetriever { return targets },
		func(context.Context) v1.AlertmanagerRetriever { return amRetriever },
		cfgFunc,
		opts.Flags,
		v1.GlobalURLOptions{ListenAddress: opts.ListenAddress, Host: opts.ListenAddress, Scheme: "http"},
		func(f http.HandlerFunc) http.HandlerFunc { return f },
		admin,
		db.Dir(),
		opts.EnableAdmin,
		false, 0,
		logger,
		func(context.Context) v1.RulesRetriever { return rulesRetriever },
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
	apiRouter := route.New().WithInstrumentation(s.upstream.instrument)
	s.apiRouter = apiRouter
	promAPI.Register(apiRouter.WithPrefix("/api/v1"))

	r := s.router
	r.HandleFunc("/-/healthy", probe("Healthy", opts.Healthy)).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/-/ready", probe("Ready", opts.Ready)).Methods(http.MethodGet, http.MethodHead)
	if opts.Reload != nil {
		r.HandleFunc("/-/reload", func(w http.ResponseWriter, _ *http.Request) {
			if err := opts.Reload(); err != nil {
				http.Error(w, "failed to reload config: "+err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		}).Methods(http.MethodPost, http.MethodPut)
	}
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if h.RemoteWrite != nil {
		r.Handle("/api/v1/write", h.RemoteWrite)
	}
	r.HandleFunc("/api/v1/metadata", s.metadata).Methods(http.MethodGet, http.MethodPost)
	if h.Extra != nil {
		h.Extra(r)
	}
	r.HandleFunc(RoutesPath, s.serveRoutes).Methods(http.MethodGet)
	s.catchAll = r.PathPrefix("/api/v1/").Handler(dialect(partialResponse(maxSourceResolution(cacheControl(apiRouter)))))
	r.HandleFunc("/", s.landing).Methods(http.MethodGet)
	return s
}

// queryableEngine evaluates every query over q, whatever storage the
// caller passes: the API hands its engine the local TSDB, which its
// series, label and remote read endpoints keep reading.
type queryableEngine struct {
	promql.QueryEngine
	q storage.Queryable
}

func (e queryableEngine) NewInstantQuery(ctx context.Context, _ storage.Queryable, opts promql.QueryOpts, qs string, ts time.Time) (promql.Query, error) {
	return e.QueryEngine.NewInstantQuery(ctx, e.q, opts, qs, ts)
}

func (e queryableEngine) NewRangeQuery(ctx context.Context, _ storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (promql.Query, error) {
	return e.QueryEngine.NewRangeQuery(ctx, e.q, opts, qs, start, end, step)
}

// partialResponse reads Thanos' partial_response query parameter
// (true/false) into the request's context, where the global view's stores
// look it up; absent, the server's default holds.
func partialResponse(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query().Get("partial_response")
		if v == "" && r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
			v = r.FormValue("partial_response")
		}
		if v != "" {
			allow, err := strconv.ParseBool(v)
			if err != nil {
				httpapi.WriteError(w, http.StatusBadRequest, httpapi.ErrBadData, "partial_response must be true or false, got "+strconv.Quote(v))
				return
			}
			r = r.WithContext(remotequery.WithPartialResponse(r.Context(), allow))
		}
		next.ServeHTTP(w, r)
	})
}

// responseGzipLevel is the gzip level of answers: the fastest. A range
// query's JSON answer (the dashboards' rate by model, 40 KB) shrinks to
// 27 % of its size at level 1 and to 25 % at the library's default (5),
// which takes 1.5–2× the CPU (BenchmarkResponseGzip); at the default,
// compressing was a third of the server's CPU on the dashboards' small
// range queries. VictoriaMetrics compresses at level 1 for the same
// reason: answers cross a datacentre network, where a few KB cost less
// than the CPU.
const responseGzipLevel = gzip.BestSpeed

// Handler returns the root handler, gzip-compressing responses for clients
// that accept it.
func (s *Server) Handler() http.Handler {
	gz := gzipWrapper(responseGzipLevel)
	if s.opts.Tenancy != nil {
		return gz(tenancy(s.opts.Tenancy, s.router))
	}
	return gz(s.router)
}

// gzipWrapper compresses answers of 1 KiB or more at level for clients
// that accept gzip.
func gzipWrapper(level int) func(http.Handler) http.HandlerFunc {
	gz, err := gzhttp.NewWrapper(gzhttp.MinSize(1024), gzhttp.CompressionLevel(level))
	if err != nil {
		// The options above are constants; an error is a programming bug.
		panic("BUG: gzip wrapper: " + err.Error())
	}
	return gz
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
			httpapi.WriteError(w, http.StatusBadRequest, httpapi.ErrBadData, "limit must be a number")
			return
		}
		limit = n
	}
	if v := r.FormValue("limit_per_metric"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, httpapi.ErrBadData, "limit_per_metric must be a number")
			return
		}
		limitPer = n
	}
	if limit == 0 {
		httpapi.WriteData(w, map[string]any{})
		return
	}
	// Families are listed while they have series, as Prometheus lists the
	// metadata of its active targets: metadata of derived series that were
	// never written, or whose series are gone, is not shown. The limit
	// applies after that filter.
	all := s.db.Metadata.Get(r.FormValue("metric"), -1, limitPer)
	names, err := s.metricNames(r.Context())
	if err != nil {
		httpapi.WriteError(w, http.StatusInternalServerError, httpapi.ErrInternal, "list metric names: "+err.Error())
		return
	}
	fams := make([]string, 0, len(all))
	for f := range all {
		if hasSeries(names, f) {
			fams = append(fams, f)
		}
	}
	sort.Strings(fams)
	out := make(map[string][]metadata.Metadata, len(fams))
	for _, f := range fams {
		if limit > 0 && len(out) >= limit {
			break
		}
		out[f] = all[f]
	}
	httpapi.WriteData(w, out)
}

// metricNames lists every __name__ the TSDB holds.
func (s *Server) metricNames(ctx context.Context) (map[string]struct{}, error) {
	q, err := s.names.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	vals, _, err := q.LabelValues(ctx, model.MetricNameLabel, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]struct{}, len(vals))
	for _, v := range vals {
		out[v] = struct{}{}
	}
	return out, nil
}

// hasSeries reports whether family f has a series under its own name or a
// suffixed one (counters' _total, histograms' and summaries' parts).
func hasSeries(names map[string]struct{}, f string) bool {
	for _, suffix := range []string{"", "_total", "_bucket", "_sum", "_count", "_created", "_info", "_gcount", "_gsum"} {
		if _, ok := names[f+suffix]; ok {
			return true
		}
	}
	return false
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

// writeError is httpapi.WriteError under the name rootcause.go and
// causal.go still call; new code calls httpapi directly. It goes when they
// move out of api/.
var writeError = httpapi.WriteError

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

// dialect lets a client opt in to MetricsQL for one request, with the
// parameter dialect=metricsql or the header X-Tailroot-Dialect: metricsql;
// without it a query PromQL rejects gets PromQL's error, as from Prometheus.
// Any other dialect value is refused, so a typo is not silently PromQL.
func dialect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := r.Header.Get("X-Tailroot-Dialect")
		if v := r.URL.Query().Get("dialect"); v != "" {
			d = v
		} else if r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			if err := r.ParseForm(); err == nil {
				if v := r.PostForm.Get("dialect"); v != "" {
					d = v
				}
			}
		}
		switch strings.ToLower(d) {
		case "", "promql":
		case "metricsql":
			r = r.WithContext(query.WithMetricsQL(r.Context()))
		default:
			httpapi.WriteError(w, http.StatusBadRequest, httpapi.ErrBadData, fmt.Sprintf("dialect %q: want promql or metricsql", d))
			return
		}
		next.ServeHTTP(w, r)
	})
}
