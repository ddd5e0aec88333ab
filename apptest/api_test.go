package apptest

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

func writeSeries(t *testing.T, app *App, ts []prompb.TimeSeries) {
	t.Helper()
	c := writeClient(t, app, remoteapi.WriteV1MessageType)
	if _, err := c.Store(context.Background(), compress(t, &prompb.WriteRequest{Timeseries: ts}), 0); err != nil {
		t.Fatal(err)
	}
}

func gauge(name, inst string, t0 time.Time, vals ...float64) prompb.TimeSeries {
	s := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "instance", Value: inst}}}
	for i, v := range vals {
		s.Samples = append(s.Samples, prompb.Sample{Timestamp: t0.Add(time.Duration(i) * 15 * time.Second).UnixMilli(), Value: v})
	}
	return s
}

// TestAPIEndToEnd covers what Grafana and operators use beyond queries:
// MetricsQL fallback, admin endpoints, gzip, tailroot's own metrics, flags.
func TestAPIEndToEnd(t *testing.T) {
	app := Start(t, t.TempDir(), "--web.enable-admin-api")
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	writeSeries(t, app, []prompb.TimeSeries{
		gauge("queue_depth", "a", t0, 1, 2, 3, 4),
		gauge("queue_depth", "b", t0, 10, 20, 30, 40),
	})
	at := t0.Add(time.Minute)

	t.Run("metricsql fallback", func(t *testing.T) {
		// Without the opt-in, a query PromQL rejects gets PromQL's error,
		// as from Prometheus: rate() of an instant vector, WITH templates.
		for _, q := range []string{`WITH (q = queue_depth) median(q)`, `rate(queue_depth)`} {
			code, body := app.Get(t, "/api/v1/query", url.Values{"query": {q}, "time": {seconds(at.UnixMilli())}})
			if code != 400 || !strings.Contains(string(body), `"errorType":"bad_data"`) {
				t.Errorf("%s without dialect=metricsql: %d %s", q, code, body)
			}
		}
		code, body := app.Get(t, "/api/v1/query", url.Values{"query": {`rate(queue_depth)`}, "time": {seconds(at.UnixMilli())}, "dialect": {"metricsql"}})
		if code != 200 || !strings.Contains(string(body), "MetricsQL query evaluated as PromQL") {
			t.Errorf("rate(queue_depth) with dialect=metricsql: %d %s", code, body)
		}
		code, body = app.Get(t, "/api/v1/query", url.Values{"query": {`queue_depth`}, "dialect": {"sql"}})
		if code != 400 || !strings.Contains(string(body), `dialect \"sql\"`) {
			t.Errorf("unknown dialect: %d %s", code, body)
		}
		code, body = app.Get(t, "/api/v1/query", url.Values{"query": {`WITH (q = queue_depth) median(q)`}, "time": {seconds(at.UnixMilli())}, "dialect": {"metricsql"}})
		var r Response
		if err := json.Unmarshal(body, &r); err != nil || code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		// median of {4, 40} is 22; the info names the PromQL that ran.
		if !strings.Contains(string(r.Data), `"22"`) || len(r.Infos) != 1 || !strings.Contains(r.Infos[0], "quantile(0.5, queue_depth)") {
			t.Errorf("metricsql: %s", body)
		}
		code, body = app.Get(t, "/api/v1/query", url.Values{"query": {`sum(queue_depth`}})
		if code != 400 || !strings.Contains(string(body), `"errorType":"bad_data"`) || !strings.Contains(string(body), "unclosed left parenthesis") {
			t.Errorf("bad query: %d %s", code, body)
		}
	})

	t.Run("gzip", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, app.URL+"/api/v1/status/flags", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("Content-Encoding = %q, want gzip", resp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(zr)
		if !strings.Contains(string(b), `"storage.tsdb.retention.time":"15d"`) {
			t.Errorf("flags: %s", b)
		}
	})

	t.Run("own metrics", func(t *testing.T) {
		_, body := app.Get(t, "/metrics", nil)
		for _, want := range []string{`tailroot_remote_write_requests_total{code="204",version="1.0"} 1`, `tailroot_remote_write_written_total{kind="sample"} 8`, "prometheus_tsdb_head_series 2"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})

	t.Run("admin", func(t *testing.T) {
		resp := app.Post(t, "/api/v1/admin/tsdb/delete_series?match[]="+url.QueryEscape(`queue_depth{instance="a"}`), "application/x-www-form-urlencoded", nil, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("delete_series: %d", resp.StatusCode)
		}
		if v := app.InstantVector(t, `queue_depth`, at); len(v) != 1 || v[0].Metric["instance"] != "b" {
			t.Errorf("after delete: %+v", v)
		}
		resp = app.Post(t, "/api/v1/admin/tsdb/clean_tombstones", "application/x-www-form-urlencoded", nil, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("clean_tombstones: %d", resp.StatusCode)
		}
		resp = app.Post(t, "/api/v1/admin/tsdb/snapshot", "application/x-www-form-urlencoded", nil, nil)
		var snap struct {
			Data struct {
				Name string `json:"name"`
			} `json:"data"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&snap)
		resp.Body.Close()
		if snap.Data.Name == "" {
			t.Fatalf("snapshot: %d", resp.StatusCode)
		}
		if _, err := os.Stat(filepath.Join(app.DataDir, "snapshots", snap.Data.Name)); err != nil {
			t.Errorf("snapshot dir: %v", err)
		}
	})
}

func TestAdminOffByDefault(t *testing.T) {
	app := Start(t, t.TempDir())
	resp := app.Post(t, "/api/v1/admin/tsdb/snapshot", "application/x-www-form-urlencoded", nil, nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnavailableForLegalReasons && !strings.Contains(string(b), "admin APIs disabled") {
		t.Errorf("snapshot without --web.enable-admin-api: %d %s", resp.StatusCode, b)
	}
}
