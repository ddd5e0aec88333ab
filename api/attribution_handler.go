package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/tailfn"
)

// Default names of the tail-accumulator series the endpoints fall back to
// when a window has no request records (see docs/stages.md).
const (
	DefaultAccumulatorSums   = "tailroot_tail_stage_seconds_sum"
	DefaultAccumulatorCounts = "tailroot_tail_requests_total"
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
}

// Attribution serves /api/v1/attribution/{report,breakdown,ab}: tail
// decompositions, heat tables and A/B intervals as JSON, from request
// records (src) and, when a window has none, from tail accumulators stored
// as series (evaluated by engine over q).
type Attribution struct {
	engine *query.Engine
	q      storage.Queryable
	src    tailfn.RecordSource
	opts   AttributionOptions
}

// NewAttribution builds the attribution handlers. The engine should have
// the tailfn functions registered (tailfn.Register on its registry) for the
// accumulator fallback; without them only records are used.
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
	return &Attribution{engine: engine, q: q, src: src, opts: opts}
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

// apiError carries an HTTP status and Prometheus error type.
type apiError struct {
	code int
	typ  string
	err  error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func badData(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, "bad_data", fmt.Errorf(format, args...)}
}

// errNoRequests is the 422 the plugin contract asks for when a window holds
// no data: not a 404, which means "not implemented".
var errNoRequests = &apiError{http.StatusUnprocessableEntity, "execution", errors.New("no requests in window")}

func writeAttributionError(w http.ResponseWriter, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeError(w, ae.code, ae.typ, ae.Error())
		return
	}
	writeError(w, http.StatusInternalServerError, "internal", err.Error())
}

// writeAttributionData writes the success envelope with warnings.
func writeAttributionData(w http.ResponseWriter, data any, warnings []string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Status   string   `json:"status"`
		Data     any      `json:"data"`
		Warnings []string `json:"warnings,omitempty"`
	}{"success", data, warnings})
}

// num is a float that encodes NaN and ±Inf as null: JSON has no such
// numbers, and the plugin shows null as an empty cell.
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// selectorParam parses a label-matcher set ({a="b"}); empty means all.
// A name other than the records pseudo-metric is refused.
func (a *Attribution) selectorParam(r *http.Request, name string, required bool) ([]*labels.Matcher, string, error) {
	s := strings.TrimSpace(r.FormValue(name))
	if s == "" || s == "{}" {
		if required {
			return nil, "", badData("parameter %s: required", name)
		}
		return nil, "{}", nil
	}
	ms, err := a.engine.Parser().ParseMetricSelector(s)
	if err != nil {
		return nil, "", badData("parameter %s=%q: %v", name, s, err)
	}
	ms, err = tailfn.RecordMatchers(ms)
	if err != nil {
		return nil, "", badData("parameter %s: %v", name, err)
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
		return 0, badData("parameter %s=%q: want a number in (0, 1)", name, s)
	}
	return v, nil
}

// timeParam parses Unix seconds (fractional allowed) or RFC 3339.
func timeParam(r *http.Request, name string, def time.Time, required bool) (time.Time, error) {
	s := r.FormValue(name)
	if s == "" {
		if required {
			return time.Time{}, badData("parameter %s: required", name)
		}
		return def, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, badData("parameter %s=%q: want Unix seconds or RFC 3339", name, s)
}

// durationParam parses a Prometheus duration (5m) or seconds.
func durationParam(r *http.Request, name string, def time.Duration) (time.Duration, error) {
	s := r.FormValue(name)
	if s == "" {
		return def, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 && f < 1e9 {
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := model.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, badData("parameter %s=%q: want a positive duration such as 5m", name, s)
	}
	return time.Duration(d), nil
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
		return tailfn.Window{}, badData("parameters baseline_offset and baseline_start/baseline_end: give one form, not both")
	case hasOff:
		off, err := durationParam(r, "baseline_offset", 0)
		if err != nil {
			return tailfn.Window{}, err
		}
		base := win
		base.Mint -= off.Milliseconds()
		base.Maxt -= off.Milliseconds()
		return base, nil
	case hasRange:
		bs, err := timeParam(r, "baseline_start", time.Time{}, true)
		if err != nil {
			return tailfn.Window{}, err
		}
		be, err := timeParam(r, "baseline_end", time.Time{}, true)
		if err != nil {
			return tailfn.Window{}, err
		}
		return window(ms, bs, be)
	}
	return tailfn.Window{}, badData("parameter baseline_offset (e.g. 1d) or baseline_start and baseline_end: required for method shapley")
}

// window returns the records window (start, end].
func window(ms []*labels.Matcher, start, end time.Time) (tailfn.Window, error) {
	if !end.After(start) {
		return tailfn.Window{}, badData("window: end %s is not after start %s", end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	return tailfn.WindowAt(ms, end, end.Sub(start)), nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }
