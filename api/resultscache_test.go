package api

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/resultscache"
	"github.com/tailroot/tailroot/tsdb"
)

// TestDifferentialWithResultsCache is the differential against the upstream
// web API with the results cache on: every generated range query is sent
// three times — a miss, a repeat (a hit), and a range shifted by whole steps
// that overlaps the cached one (a partial hit) — and every answer must be
// byte-identical to upstream's for the same request.
func TestDifferentialWithResultsCache(t *testing.T) {
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.OutOfOrderWindow = 0
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadDiffData(t, db)

	ours, theirs, cache, reg := cachedAPI(t, db, true)

	r := rand.New(rand.NewPCG(13, 17))
	n := 150
	if testing.Short() {
		n = 40
	}
	compared := 0
	for _, q := range genQueries(r, n) {
		start := diffStart.Unix() + int64(r.IntN(1800))
		end := start + int64(r.IntN(2400))
		stepS := []int64{15, 30, 60, 97}[r.IntN(4)]
		shift := int64(r.IntN(21)-10) * stepS
		for _, rng := range [][2]int64{{start, end}, {start, end}, {start + shift, end + shift + stepS*int64(r.IntN(5))}} {
			params := url.Values{
				"query": {q}, "start": {strconv.FormatInt(rng[0], 10)},
				"end": {strconv.FormatInt(rng[1], 10)}, "step": {strconv.FormatInt(stepS, 10)},
			}
			c1, b1 := get(t, ours, "/api/v1/query_range", params)
			c2, b2 := get(t, theirs, "/api/v1/query_range", params)
			if c1 != c2 || b1 != b2 {
				t.Errorf("%s:\ntailroot %d %s\nupstream %d %s", params.Encode(), c1, trunc(b1), c2, trunc(b2))
			}
			compared++
		}
	}
	hits := testutil.ToFloat64(counterOf(t, reg, "tailroot_query_results_cache_hits_total"))
	partial := testutil.ToFloat64(counterOf(t, reg, "tailroot_query_results_cache_partial_hits_total"))
	if hits < float64(n)/4 || partial == 0 {
		t.Errorf("%v hits and %v partial hits over %d requests: the cache was hardly used", hits, partial, compared)
	}
	t.Logf("compared %d range requests: %v hits, %v partial hits, %d bytes cached", compared, hits, partial, cache.Bytes())
}

// TestResultsCacheBypass: Cache-Control: no-store, nocache=1 and stats=…
// evaluate without the cache; a plain repeat is a hit.
func TestResultsCacheBypass(t *testing.T) {
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadDiffData(t, db)
	ng, err := query.New(query.DefaultOptions(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	reg := prometheus.NewRegistry()
	co := resultscache.DefaultOptions()
	co.Parser = ng.Parser()
	co.Registerer = reg
	cache := resultscache.New(co)
	h := New(db, ng, Handlers{}, Options{ResultsCache: cache}, nil, prometheus.NewRegistry()).router
	params := url.Values{
		"query": {`sum by (model_name) (rate(http_requests_total[5m]))`},
		"start": {strconv.FormatInt(diffStart.Unix(), 10)}, "end": {strconv.FormatInt(diffStart.Unix()+3000, 10)}, "step": {"60"},
	}
	send := func(method string, params url.Values, header http.Header) {
		t.Helper()
		var req *http.Request
		if method == http.MethodPost {
			req = httptest.NewRequest(method, "/api/v1/query_range", strings.NewReader(params.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			req = httptest.NewRequest(method, "/api/v1/query_range?"+params.Encode(), nil)
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	with := func(k, v string) url.Values {
		p := url.Values{}
		for kk, vv := range params {
			p[kk] = vv
		}
		p.Set(k, v)
		return p
	}
	bypassed := func() float64 {
		return testutil.ToFloat64(counterOf(t, reg, "tailroot_query_results_cache_bypassed_total"))
	}
	for i, c := range []struct {
		method string
		params url.Values
		header http.Header
	}{
		{http.MethodGet, params, http.Header{"Cache-Control": {"no-store"}}},
		{http.MethodGet, params, http.Header{"Cache-Control": {"max-age=0, No-Cache"}}},
		{http.MethodGet, with("nocache", "1"), nil},
		{http.MethodPost, with("nocache", "1"), nil},
		{http.MethodGet, with("stats", "all"), nil},
	} {
		before := bypassed()
		send(c.method, c.params, c.header)
		if bypassed()-before != 1 {
			t.Errorf("request %d (%s %v %v) was not bypassed", i, c.method, c.params, c.header)
		}
		if cache.Len() != 0 {
			t.Fatalf("request %d filled the cache", i)
		}
	}
	send(http.MethodGet, params, nil)
	send(http.MethodPost, params, nil)
	if hits := testutil.ToFloat64(counterOf(t, reg, "tailroot_query_results_cache_hits_total")); hits != 1 {
		t.Errorf("plain GET then POST: %v hits, want 1", hits)
	}
}

// counterOf returns the registered metric called name.
// cachedAPI is the API over db with the results cache on, wired as the
// server wires it (every write to db invalidates the cache), upstream's web
// API over the same db, the cache, and the registry of its metrics.
func cachedAPI(t *testing.T, db *tsdb.DB, admin bool) (ours, theirs http.Handler, cache *resultscache.Cache, reg *prometheus.Registry) {
	t.Helper()
	qopts := query.DefaultOptions()
	ng, err := query.New(qopts, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	reg = prometheus.NewRegistry()
	co := resultscache.DefaultOptions()
	co.Parser = ng.Parser()
	co.Registerer = reg
	cache = resultscache.New(co)
	db.SetWriteListener(cache.Invalidate)
	ours = New(db, ng, Handlers{}, Options{EnableAdmin: admin, ResultsCache: cache}, nil, prometheus.NewRegistry()).router
	return ours, upstreamHandler(t, db, qopts), cache, reg
}

func counterOf(t testing.TB, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			v := mf.GetMetric()[0].GetCounter().GetValue()
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return v })
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}
