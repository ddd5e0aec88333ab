package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb"
)

// FuzzQueryParams sends arbitrary query, time, range and step parameters to
// /api/v1/query and /api/v1/query_range. Whatever they are, the server
// answers with the Prometheus envelope and a status Prometheus would use
// (200, 400 bad_data, 422 execution, 503 timeout/canceled) — never a panic
// or an unexplained 500.
func FuzzQueryParams(f *testing.F) {
	for _, s := range []struct{ q, t, start, end, step string }{
		{`sum by (model_name) (rate(http_requests_total[5m]))`, "1700001000", "1700000000", "1700003600", "60"},
		{`histogram_quantile(0.99, rate(ttft_seconds[5m]))`, "2023-11-14T22:30:00Z", "1700000000", "1700000600", "15s"},
		{`vllm:num_requests_running @ end()`, "", "1700000000.5", "1699999999", "0"},
		{`{`, "abc", "-1e30", "1e30", "-5"},
		{`WITH (x = vllm:num_requests_running) x * 2`, "1700000100", "", "", ""},
		{`max_over_time(rate(http_requests_total[1m])[30m:])`, "1700002000", "1700000000", "1700003600", "0.001"},
	} {
		f.Add(s.q, s.t, s.start, s.end, s.step)
	}
	o := tsdb.DefaultOptions()
	o.Dir = f.TempDir()
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close() })
	loadDiffData(f, db)
	qo := query.DefaultOptions()
	qo.MaxSamples = 1_000_000
	ng, err := query.New(qo, nil, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = ng.Close() })
	h := New(db, ng, Handlers{}, Options{}, nil, prometheus.NewRegistry()).router

	f.Fuzz(func(t *testing.T, q, ts, start, end, step string) {
		for _, c := range []struct {
			path   string
			params url.Values
		}{
			{"/api/v1/query", url.Values{"query": {q}, "time": {ts}}},
			{"/api/v1/query_range", url.Values{"query": {q}, "start": {start}, "end": {end}, "step": {step}}},
		} {
			code, body := get(t, h, c.path, c.params)
			var env struct {
				Status    string `json:"status"`
				ErrorType string `json:"errorType"`
				Error     string `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &env); err != nil {
				t.Fatalf("%s %v: body is not JSON: %q", c.path, c.params, body)
			}
			switch code {
			case http.StatusOK:
				if env.Status != "success" {
					t.Fatalf("%s %v: 200 with status %q", c.path, c.params, env.Status)
				}
			case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusServiceUnavailable:
				if env.Status != "error" || env.ErrorType == "" || env.Error == "" {
					t.Fatalf("%s %v: %d without an error envelope: %s", c.path, c.params, code, body)
				}
			default:
				t.Fatalf("%s %v: unexpected status %d: %s", c.path, c.params, code, body)
			}
		}
	})
}
