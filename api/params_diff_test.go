package api

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/tailroot/tailroot/tsdb"
)

// TestDifferentialQueryParams is the differential against the upstream web
// API for the request parameters that change an answer without changing
// the query: lookback_delta, limit and the X-Prometheus-Use-Start-Timestamps
// header, on instant and range queries (limit on range queries only), with
// the results cache on: each request is sent twice, so a range query's
// second answer comes from the cache.
func TestDifferentialQueryParams(t *testing.T) {
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadDiffData(t, db)
	ours, theirs, _, _ := cachedAPI(t, db, false)
	send := func(h http.Handler, path string, params url.Values, header http.Header) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path+"?"+params.Encode(), nil)
		for k, v := range header {
			req.Header[k] = v
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	r := rand.New(rand.NewPCG(37, 41))
	n := 80
	if testing.Short() {
		n = 24
	}
	compared := 0
	for i, q := range genQueries(r, n) {
		params := url.Values{"query": {q}}
		switch r.IntN(4) {
		case 0:
			params.Set("lookback_delta", []string{"30s", "1m", "17m", "1h"}[r.IntN(4)])
		case 1:
			params.Set("limit", strconv.Itoa(1+r.IntN(3)))
		case 2:
			params.Set("lookback_delta", "2m")
			params.Set("limit", "2")
		}
		var header http.Header
		if r.IntN(3) == 0 {
			header = http.Header{"X-Prometheus-Use-Start-Timestamps": {[]string{"false", "true"}[r.IntN(2)]}}
		}
		path := "/api/v1/query"
		if i%2 == 0 {
			// An instant vector's order is unspecified (count_values
			// follows a map's), so which elements a limit keeps is too.
			params.Del("limit")
			params.Set("time", strconv.FormatInt(diffStart.Unix()+int64(r.IntN(4000)), 10))
		} else {
			path = "/api/v1/query_range"
			start := diffStart.Unix() + int64(r.IntN(1800))
			params.Set("start", strconv.FormatInt(start, 10))
			params.Set("end", strconv.FormatInt(start+int64(r.IntN(2400)), 10))
			params.Set("step", []string{"15", "30s", "1m", "97"}[r.IntN(4)])
		}
		c2, b2 := send(theirs, path, params, header)
		b2 = canonicalVector(t, b2)
		for range 2 {
			c1, b1 := send(ours, path, params, header)
			if b1 = canonicalVector(t, b1); c1 != c2 || b1 != b2 {
				t.Errorf("%s %s %v:\ntailroot %d %s\nupstream %d %s", path, params.Encode(), header, c1, trunc(b1), c2, trunc(b2))
			}
			compared++
		}
	}
	t.Logf("compared %d requests", compared)
}
