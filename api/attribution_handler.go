package api

import (
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/internal/httpapi"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/tailfn"
)

// Default names of the tail-accumulator series the endpoints fall back to
// when a window has no request records (see docs/stages.md).
const (
	DefaultAccumulatorSums   = "tailroot_tail_stage_seconds_sum"
	DefaultAccumulatorCounts = "tailroot_tail_requests_total"
	// DefaultStageHistograms is the native histogram of stage seconds,
	// label stage, that the last step of the fallback reads.
	DefaultStageHistograms = "tailroot_request_stage_seconds"
)

// AttributionOptions configures the attribution endpoints. Zero values mean
// the documented default.
type AttributionOptions struct {
	// Build identifies the binary in reports (version and commit).
	Build BuildInfo
	// KernelVersion returns the release of the running kernel; nil reads
	// /proc/sys/kernel/osrelease (what uname -r prints).
	KernelVersion func() string
	// Uploader stores reports when a request asks for upload=true; nil
	// refuses such requests with 400.
	Uploader ReportUploader
	// AccumulatorSums and AccumulatorCounts name the tail-accumulator
	// series; empty means DefaultAccumulatorSums / DefaultAccumulatorCounts.
	AccumulatorSums, AccumulatorCounts string
	// Now is the clock for default window ends; nil means time.Now.
	Now func() time.Time
	// Logger receives upload failures; nil discards.
	Logger *slog.Logger
	// Cluster, when set, answers /breakdown, /report and /ab over the
	// records of this server and its peers (attribution_nodes.go); nil
	// reads the local records only.
	Cluster *tailfn.Cluster
}

// Attribution serves /api/v1/attribution/{report,breakdown,ab}: tail
// decompositions, heat tables and A/B intervals as JSON, from request
// records (src) and, when a window has none, from tail accumulators stored
// as series (evaluated by engine over q).
type Attribution struct {
	engine   *query.Engine
	q        storage.Queryable
	src      tailfn.RecordSource
	fallback tailfn.SeriesFallback
	opts     AttributionOptions
}

// NewAttribution builds the attribution handlers. The engine evaluates the
// series fallback (increase() of the accumulators and stage histograms;
// tailfn's functions need not be registered); a nil engine has none, and
// only records are used.
func NewAttribution(engine *query.Engine, q storage.Queryable, src tailfn.RecordSource, opts AttributionOptions) *Attribution {
	if opts.KernelVersion == nil {
		opts.KernelVersion = kernelRelease
	}
	if opts.AccumulatorSums == "" {
		opts.AccumulatorSums = DefaultAccumulatorSums
	}
	if opts.AccumulatorCounts == "" {
		opts.AccumulatorCounts = DefaultAccumulatorCounts
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Attribution{engine: engine, q: q, src: src, opts: opts}
	if engine != nil {
		a.fallback = tailfn.SeriesFallback{
			Engine: engine, Queryable: q,
			AccumulatorSums: opts.AccumulatorSums, AccumulatorCounts: opts.AccumulatorCounts, StageHistograms: DefaultStageHistograms,
		}
	}
	return a
}

// Register mounts the endpoints on r (GET, and POST with a form body, as
// the Prometheus API takes its parameters).
func (a *Attribution) Register(r *mux.Router) {
	r.HandleFunc("/api/v1/attribution/report", a.report).Methods(http.MethodGet, http.MethodPost)
	r.HandleFunc("/api/v1/attribution/breakdown", a.breakdown).Methods(http.MethodGet, http.MethodPost)
	r.HandleFunc("/api/v1/attribution/ab", a.ab).Methods(http.MethodGet, http.MethodPost)
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// errNoRequests is the 422 the plugin contract asks for when a window holds
// no data: not a 404, which means "not implemented".
var errNoRequests = httpapi.Unprocessable(errors.New("no requests in window"))

// selectorParam parses a label-matcher set ({a="b"}); empty means all.
// A name other than the records pseudo-metric is refused.
func (a *Attribution) selectorParam(r *http.Request, name string, required bool) ([]*labels.Matcher, string, error) {
	s := strings.TrimSpace(r.FormValue(name))
	if s == "" || s == "{}" {
		if required {
			return nil, "", httpapi.BadData("parameter %s: required", name)
		}
		return nil, "{}", nil
	}
	ms, err := a.engine.Parser().ParseMetricSelector(s)
	if err != nil {
		return nil, "", httpapi.BadData("parameter %s=%q: %v", name, s, err)
	}
	ms, err = tailfn.RecordMatchers(ms)
	if err != nil {
		return nil, "", httpapi.BadData("parameter %s: %v", name, err)
	}
	return ms, s, nil
}

// levelParam reads a level in (0, 1).
func levelParam(r *http.Request, name string, def float64) (float64, error) {
	s := r.FormValue(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0 && v < 1) {
		return 0, httpapi.BadData("parameter %s=%q: want a number in (0, 1)", name, s)
	}
	return v, nil
}

// baselineParam reads the baseline window of a Shapley comparison, which
// /report and /breakdown both take in either of two forms:
// baseline_offset (a duration: the same window that long earlier, e.g. 1d
// for "yesterday at this time") or baseline_start and baseline_end (any
// window, as a dashboard's second time range gives it). Both forms at once
// is refused rather than one silently winning.
func baselineParam(r *http.Request, ms []*labels.Matcher, win tailfn.Window) (tailfn.Window, error) {
	hasOff := r.FormValue("baseline_offset") != ""
	hasRange := r.FormValue("baseline_start") != "" || r.FormValue("baseline_end") != ""
	switch {
	case hasOff && hasRange:
		return tailfn.Window{}, httpapi.BadData("parameters baseline_offset and baseline_start/baseline_end: give one form, not both")
	case hasOff:
		off, err := httpapi.PositiveDurationParam(r, "baseline_offset", 0)
		if err != nil {
			return tailfn.Window{}, err
		}
		base := win
		base.Mint -= off.Milliseconds()
		base.Maxt -= off.Milliseconds()
		return base, nil
	case hasRange:
		bs, err := httpapi.TimeParam(r, "baseline_start", time.Time{}, true)
		if err != nil {
			return tailfn.Window{}, err
		}
		be, err := httpapi.TimeParam(r, "baseline_end", time.Time{}, true)
		if err != nil {
			return tailfn.Window{}, err
		}
		return window(ms, bs, be)
	}
	return tailfn.Window{}, httpapi.BadData("parameter baseline_offset (e.g. 1d) or baseline_start and baseline_end: required for method shapley")
}

// window returns the records window (start, end].
func window(ms []*labels.Matcher, start, end time.Time) (tailfn.Window, error) {
	if !end.After(start) {
		return tailfn.Window{}, httpapi.BadData("window: end %s is not after start %s", end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	return tailfn.WindowAt(ms, end, end.Sub(start)), nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }
