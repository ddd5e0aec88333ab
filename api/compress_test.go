package api

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb"
)

// compressServer is the server's root handler over the differential data.
func compressServer(t testing.TB) http.Handler {
	t.Helper()
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	loadDiffData(t, db)
	ng, err := query.New(query.DefaultOptions(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ng.Close() })
	return New(db, ng, Handlers{}, Options{}, nil, prometheus.NewRegistry()).Handler()
}

func fetch(t testing.TB, h http.Handler, path string, params url.Values, gz bool) (*http.Response, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path+"?"+params.Encode(), nil)
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}

// TestUpstreamResponsesCompressedOnce: the Prometheus API's answers are
// gzipped once, by the server's handler, at the fastest level, for clients
// that accept it, and equal the uncompressed answer; small answers are sent
// as they are.
func TestUpstreamResponsesCompressedOnce(t *testing.T) {
	h := compressServer(t)
	start := diffStart.Unix()
	big := url.Values{
		"query": {`rate(http_requests_total[5m])`}, "start": {strconv.FormatInt(start, 10)},
		"end": {strconv.FormatInt(start+3000, 10)}, "step": {"15"},
	}
	res, plain := fetch(t, h, "/api/v1/query_range", big, false)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Encoding") != "" || len(plain) < 4096 {
		t.Fatalf("plain: %d %q, %d bytes", res.StatusCode, res.Header.Get("Content-Encoding"), len(plain))
	}
	res, body := fetch(t, h, "/api/v1/query_range", big, true)
	if res.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q, want gzip", res.Header.Get("Content-Encoding"))
	}
	// The header's XFL byte (RFC 1952) says how hard the writer tried: 4 is
	// the fastest level, the one the server compresses at.
	if len(body) < 10 || body[8] != 4 {
		t.Errorf("gzip header %x: want XFL 4 (compressed at the fastest level)", body[:min(len(body), 10)])
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(plain) {
		t.Errorf("gunzipped answer differs from the plain one (compressed twice?):\n%.200s\n%.200s", got, plain)
	}

	small := url.Values{"query": {`scalar(vector(1))`}, "time": {strconv.FormatInt(start, 10)}}
	_, plainSmall := fetch(t, h, "/api/v1/query", small, false)
	res, body = fetch(t, h, "/api/v1/query", small, true)
	if res.Header.Get("Content-Encoding") != "" || string(body) != string(plainSmall) {
		t.Errorf("a small answer: Content-Encoding %q, body %s, want it plain: %s", res.Header.Get("Content-Encoding"), body, plainSmall)
	}
}

// BenchmarkInstantQueryHTTP is a small instant query through the server's
// handler, as a client that accepts gzip sends it: what a request costs
// beyond its evaluation.
func BenchmarkInstantQueryHTTP(b *testing.B) {
	h := compressServer(b)
	params := url.Values{"query": {`sum by (job) (rate(http_requests_total[5m]))`}, "time": {strconv.FormatInt(diffStart.Unix()+3000, 10)}}
	b.ReportAllocs()
	for b.Loop() {
		res, _ := fetch(b, h, "/api/v1/query", params, true)
		if res.StatusCode != http.StatusOK {
			b.Fatal(res.Status)
		}
	}
}
