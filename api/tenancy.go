package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"
	v1 "github.com/prometheus/prometheus/web/api/v1"

	"github.com/tailroot/tailroot/internal/tenant"
	"github.com/tailroot/tailroot/tsdb"
)

// With Options.Tenancy set, every request but the probes and /metrics
// must name a tenant (Resolver.Resolve: header, credentials, grants), and
// runs with it in its context: the Prometheus API reads the TSDB through
// tsdb.TenantSampleAndChunkQueryable and TenantExemplarQueryable, queries
// evaluate over the confined global view, delete_series deletes only the
// tenant's series, and the ingest, records, evidence and attribution
// handlers find the tenant in the context. What cannot be confined is not
// served: /api/v1/status/tsdb and status/tsdb/blocks (cardinality and
// block statistics of every tenant), admin snapshot (a copy of every
// tenant), and rules and alerts (the rule files are the operator's, over
// every tenant; their lists answer empty).

// openPaths are served without a tenant: probes and tailroot's own metrics.
var openPaths = map[string]bool{"/-/healthy": true, "/-/ready": true, "/metrics": true}

// untenantedPaths cannot be confined to one tenant.
var untenantedPaths = map[string]string{
	"/api/v1/status/tsdb":         "TSDB statistics cover every tenant",
	"/api/v1/status/tsdb/blocks":  "block statistics cover every tenant",
	"/api/v1/admin/tsdb/snapshot": "a snapshot copies every tenant",
}

// writePaths are the paths where a request writes (or deletes) data;
// every other request reads, and counts against the tenant's concurrent
// queries.
var writePaths = map[string]bool{
	"/api/v1/write":                       true,
	"/api/v1/otlp/v1/metrics":             true,
	"/v1/metrics":                         true,
	"/api/v1/otlp/v1/traces":              true,
	"/v1/traces":                          true,
	"/api/v1/admin/tsdb/delete_series":    true,
	"/api/v1/admin/tsdb/clean_tombstones": true,
}

// isWrite says whether r writes: a write path, or a POST of request
// records or evidence (their GETs read).
func isWrite(r *http.Request) bool {
	if writePaths[r.URL.Path] {
		return true
	}
	return r.Method == http.MethodPost && (r.URL.Path == "/api/v1/requests" || r.URL.Path == "/api/v1/evidence")
}

// tenancy resolves the tenant of every request and refuses what it must.
func tenancy(res *tenant.Resolver, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		write := isWrite(r)
		t, err := res.Resolve(r, write)
		if err != nil {
			e, _ := tenant.AsError(err)
			code, typ := http.StatusUnauthorized, "unauthorized"
			if e != nil {
				code = e.Status
			}
			switch code {
			case http.StatusBadRequest:
				typ = "bad_data"
			case http.StatusForbidden:
				typ = "forbidden"
			case http.StatusUnauthorized:
				w.Header().Set("WWW-Authenticate", `Basic realm="tailroot"`)
			}
			writeError(w, code, typ, err.Error())
			return
		}
		if why, ok := untenantedPaths[strings.TrimSuffix(r.URL.Path, "/")]; ok {
			writeError(w, http.StatusForbidden, "forbidden", r.URL.Path+" is not served with tenancy on: "+why)
			return
		}
		if !write {
			release, err := t.AcquireQuery()
			if err != nil {
				writeLimitError(w, err)
				return
			}
			defer release()
		}
		next.ServeHTTP(w, r.WithContext(tenant.NewContext(r.Context(), t)))
	})
}

// writeLimitError answers a per-tenant limit refusal: 429 with
// Retry-After, naming the limit.
func writeLimitError(w http.ResponseWriter, err error) {
	var le *tenant.LimitError
	if errors.As(err, &le) {
		w.Header().Set("Retry-After", strconv.Itoa(le.RetryAfterSeconds()))
	}
	writeError(w, http.StatusTooManyRequests, "too_many_requests", err.Error())
}

// tenantAdmin confines delete_series to the tenant of its request.
type tenantAdmin struct{ v1.TSDBAdminStats }

func (a tenantAdmin) Delete(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) error {
	t := tenant.FromContext(ctx)
	if t == nil {
		return tsdb.ErrNoTenant
	}
	ms, ok := t.Matchers(ms)
	if !ok {
		return nil
	}
	return a.TSDBAdminStats.Delete(ctx, mint, maxt, ms...)
}

// Stats, BlockMetas and Snapshot cover every tenant. The middleware
// refuses their endpoints first; these refuse again should a route reach
// them another way.
func (tenantAdmin) Stats(string, int) (*ptsdb.Stats, error) {
	return nil, errors.New("TSDB statistics are not served with tenancy on")
}

func (tenantAdmin) BlockMetas() ([]ptsdb.BlockMeta, error) {
	return nil, errors.New("block statistics are not served with tenancy on")
}

func (tenantAdmin) Snapshot(string, bool) error {
	return errors.New("snapshots are not served with tenancy on")
}

// tenantStores are the stores the Prometheus API reads with tenancy on.
func tenantStores(db *tsdb.DB) (storage.SampleAndChunkQueryable, storage.ExemplarQueryable, v1.TSDBAdminStats) {
	return tsdb.TenantSampleAndChunkQueryable(db), tsdb.TenantExemplarQueryable(db), tenantAdmin{db}
}
