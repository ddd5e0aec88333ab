package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tailroot/tailroot/internal/httpapi"
	"github.com/tailroot/tailroot/internal/inflight"
	"github.com/tailroot/tailroot/internal/tenant"
	"github.com/tailroot/tailroot/tsdb/evidence"
)

// EvidenceOptions configure the evidence endpoints. Zero values mean the
// documented default.
type EvidenceOptions struct {
	// MaxBodyBytes bounds a POST body; larger ones get 413. 0 means 16 MiB.
	MaxBodyBytes int64
	// Limits bound items (evidence.DefaultLimits for zero fields); MinTime
	// and MaxTime are set per request from the store's retention and
	// MaxFuture.
	Limits evidence.Limits
	// MaxFuture is how far past the server's clock an item may start
	// (agents' clock skew). 0 means 1 h.
	MaxFuture time.Duration
	// DefaultLimit and MaxLimit are the items a GET returns without a
	// limit parameter, and the most it may ask for. 0 means 1000 and
	// 10000.
	DefaultLimit, MaxLimit int
	// Now is the clock for time bounds and default windows; nil means
	// time.Now.
	Now func() time.Time
	// Logger receives store failures; nil discards.
	Logger *slog.Logger
	// Registerer receives tailroot_evidence_items_total{outcome}; nil
	// registers nothing.
	Registerer prometheus.Registerer
	// TenantStore returns the store of a tenant (tenancy on: one store per
	// tenant, so no query can reach another's items). A request whose
	// context carries a tenant uses it; with it nil such a request is
	// refused rather than served from the shared store.
	TenantStore func(id string) (*evidence.Store, error)
}

// Evidence serves POST and GET /api/v1/evidence over an evidence store:
// node agents push stacks and CUDA timelines (agent/EVIDENCE.md), and
// reports and users read them back by time window. It is also the
// EvidenceSource of attribution reports.
type Evidence struct {
	store *evidence.Store
	opts  EvidenceOptions
	items *prometheus.CounterVec
}

// NewEvidence builds the evidence handlers over store.
func NewEvidence(store *evidence.Store, opts EvidenceOptions) *Evidence {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.MaxFuture <= 0 {
		opts.MaxFuture = time.Hour
	}
	if opts.DefaultLimit <= 0 {
		opts.DefaultLimit = 1000
	}
	if opts.MaxLimit <= 0 {
		opts.MaxLimit = 10000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Evidence{store: store, opts: opts}
	if opts.Registerer != nil {
		e.items = promauto.With(opts.Registerer).NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_evidence_items_total", Help: "Evidence items pushed, by outcome (stored, rejected).",
		}, []string{"outcome"})
	}
	return e
}

// Register mounts POST and GET /api/v1/evidence on r; call it before the
// Prometheus API catch-all is mounted.
func (e *Evidence) Register(r *mux.Router) {
	r.HandleFunc("/api/v1/evidence", e.push).Methods(http.MethodPost)
	r.HandleFunc("/api/v1/evidence", e.query).Methods(http.MethodGet)
}

// storeFor is the store a request reads and writes: its tenant's with
// tenancy on, the shared one otherwise.
func (e *Evidence) storeFor(ctx context.Context) (*evidence.Store, error) {
	t := tenant.FromContext(ctx)
	if t == nil {
		return e.store, nil
	}
	if e.opts.TenantStore == nil {
		return nil, errors.New("evidence: no per-tenant store configured")
	}
	return e.opts.TenantStore(t.ID)
}

// maxErrorsShown bounds the item errors listed in one 400.
const maxErrorsShown = 10

// push stores a batch. Good items are stored even when others are bad; the
// answer is then 400 naming the bad ones (the agent drops a refused batch,
// and its good items are already kept).
func (e *Evidence) push(w http.ResponseWriter, r *http.Request) {
	// No Content-Type is refused as well: a cross-site browser POST
	// without one needs no CORS preflight.
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		httpapi.WriteError(w, http.StatusUnsupportedMediaType, httpapi.ErrBadData, fmt.Sprintf("Content-Type %q: want application/json", ct))
		return
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		httpapi.WriteError(w, http.StatusUnsupportedMediaType, httpapi.ErrBadData, fmt.Sprintf("Content-Encoding %q: send the JSON uncompressed", ce))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, e.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			httpapi.WriteError(w, http.StatusRequestEntityTooLarge, httpapi.ErrBadData, fmt.Sprintf("evidence body over %d bytes", e.opts.MaxBodyBytes))
			return
		}
		if status, ok := inflight.StatusOf(err); ok {
			if status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", inflight.RetryAfter)
			}
			httpapi.WriteError(w, status, httpapi.ErrBadData, "read evidence body: "+err.Error())
			return
		}
		httpapi.WriteError(w, http.StatusBadRequest, httpapi.ErrBadData, "read evidence body: "+err.Error())
		return
	}
	store, err := e.storeFor(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	now := e.opts.Now()
	lim := e.opts.Limits
	if ret := store.Retention(); ret > 0 {
		lim.MinTime = now.Add(-ret)
	}
	lim.MaxTime = now.Add(e.opts.MaxFuture)
	good, bad, err := evidence.ParseBatch(body, lim)
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, httpapi.ErrBadData, err.Error())
		return
	}
	if err := store.Append(good); err != nil {
		e.opts.Logger.Error("store evidence", "err", err)
		httpapi.WriteError(w, http.StatusInternalServerError, httpapi.ErrInternal, err.Error())
		return
	}
	e.count("stored", len(good))
	e.count("rejected", len(bad))
	data := map[string]int{"stored": len(good), "rejected": len(bad)}
	if len(bad) == 0 {
		httpapi.WriteData(w, data)
		return
	}
	msgs := make([]string, 0, min(len(bad), maxErrorsShown))
	for _, err := range bad[:min(len(bad), maxErrorsShown)] {
		msgs = append(msgs, err.Error())
	}
	if len(bad) > maxErrorsShown {
		msgs = append(msgs, fmt.Sprintf("and %d more", len(bad)-maxErrorsShown))
	}
	httpapi.Write(w, http.StatusBadRequest, httpapi.Response{
		Status: "error", ErrorType: httpapi.ErrBadData, Data: data,
		Error: fmt.Sprintf("%d of %d evidence items rejected (%d stored): %s", len(bad), len(bad)+len(good), len(good), strings.Join(msgs, "; ")),
	})
}

func (e *Evidence) count(outcome string, n int) {
	if e.items != nil && n > 0 {
		e.items.WithLabelValues(outcome).Add(float64(n))
	}
}

// query serves GET /api/v1/evidence?start=&end=&kind=&node=&pid=&comm=
// &probe=&limit=&order=time|latency: the items whose span overlaps
// [start, end] (default: the hour before now) as the data array of the
// Prometheus envelope, with a warning when limit cut the result.
func (e *Evidence) query(w http.ResponseWriter, r *http.Request) {
	q, err := e.parseQuery(r)
	if err != nil {
		httpapi.WriteErr(w, err)
		return
	}
	store, err := e.storeFor(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	res, err := store.Select(q)
	if err != nil {
		e.opts.Logger.Error("select evidence", "err", err)
		httpapi.WriteError(w, http.StatusInternalServerError, httpapi.ErrInternal, err.Error())
		return
	}
	var warnings []string
	if res.Matched > len(res.Items) {
		warnings = append(warnings, fmt.Sprintf("%d of %d matching evidence items returned (limit %d)", len(res.Items), res.Matched, q.Limit))
	}
	httpapi.WriteData(w, res.Items, warnings...)
}

func (e *Evidence) parseQuery(r *http.Request) (evidence.Query, error) {
	end, err := httpapi.TimeParam(r, "end", e.opts.Now(), false)
	if err != nil {
		return evidence.Query{}, err
	}
	start, err := httpapi.TimeParam(r, "start", end.Add(-time.Hour), false)
	if err != nil {
		return evidence.Query{}, err
	}
	if end.Before(start) {
		return evidence.Query{}, httpapi.BadData("parameter end %s is before start %s", end.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano))
	}
	q := evidence.Query{
		Start: start, End: end, Kind: r.FormValue("kind"), Node: r.FormValue("node"),
		Comm: r.FormValue("comm"), Probe: r.FormValue("probe"), Limit: e.opts.DefaultLimit,
	}
	if q.Kind != "" && q.Kind != evidence.KindStack && q.Kind != evidence.KindCUDATimeline {
		return q, httpapi.BadData("parameter kind=%q: want %s or %s", q.Kind, evidence.KindStack, evidence.KindCUDATimeline)
	}
	if s := r.FormValue("pid"); s != "" {
		pid, err := strconv.ParseUint(s, 10, 32)
		if err != nil || pid == 0 {
			return q, httpapi.BadData("parameter pid=%q: want a process id", s)
		}
		q.PID = uint32(pid)
	}
	if s := r.FormValue("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > e.opts.MaxLimit {
			return q, httpapi.BadData("parameter limit=%q: want 1 to %d", s, e.opts.MaxLimit)
		}
		q.Limit = n
	}
	switch o := r.FormValue("order"); o {
	case "", "time":
	case "latency":
		q.Slowest = true
	default:
		return q, httpapi.BadData("parameter order=%q: want time or latency", o)
	}
	return q, nil
}

// WindowEvidence implements EvidenceSource: the slowest stacks and CUDA
// timelines whose spans overlap [start, end], at most limit of each.
func (e *Evidence) WindowEvidence(ctx context.Context, start, end time.Time, limit int) (stacks, timelines []json.RawMessage, err error) {
	store, err := e.storeFor(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range []struct {
		kind string
		dst  *[]json.RawMessage
	}{{evidence.KindStack, &stacks}, {evidence.KindCUDATimeline, &timelines}} {
		res, err := store.Select(evidence.Query{Start: start, End: end, Kind: k.kind, Limit: limit, Slowest: true})
		if err != nil {
			return nil, nil, err
		}
		*k.dst = res.Items
	}
	return stacks, timelines, nil
}
