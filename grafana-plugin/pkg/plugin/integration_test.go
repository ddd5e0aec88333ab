package plugin

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"
	"golang.org/x/crypto/bcrypt"
)

// fixedRange is the golden queries' panel range: the whole fixed data set.
var fixedRange = backend.TimeRange{From: T0, To: T0.Add(10 * time.Minute)}

func dataQuery(refID string, model map[string]any, tr backend.TimeRange) backend.DataQuery {
	raw, err := json.Marshal(model)
	if err != nil {
		panic(err)
	}
	return backend.DataQuery{RefID: refID, JSON: raw, TimeRange: tr, Interval: fixedStep, MaxDataPoints: 1000}
}

func query(t *testing.T, ds *Datasource, q backend.DataQuery) backend.DataResponse {
	t.Helper()
	resp, err := ds.QueryData(context.Background(), &backend.QueryDataRequest{Queries: []backend.DataQuery{q}})
	if err != nil {
		t.Fatalf("QueryData: %v", err)
	}
	r, ok := resp.Responses[q.RefID]
	if !ok {
		t.Fatalf("no response for RefID %s", q.RefID)
	}
	return r
}

// floatsOf returns a frame field's values as float64 (nullable as NaN).
func floatsOf(t *testing.T, f *data.Field) []float64 {
	t.Helper()
	out := make([]float64, f.Len())
	for i := range out {
		v, err := f.FloatAt(i)
		if err != nil {
			t.Fatalf("field %s: %v", f.Name, err)
		}
		out[i] = v
	}
	return out
}

// TestPromQLGolden runs every promql form against the fixed data set,
// checks the numbers against values worked out by hand from
// fixedWriteRequest, and compares the whole response with its golden file.
func TestPromQLGolden(t *testing.T) {
	srv := fixedServer(t)
	ds := newTestDatasource(t, backend.DataSourceInstanceSettings{Type: ID, URL: srv.URL})
	early := backend.TimeRange{From: T0, To: T0.Add(2 * time.Minute)}

	t.Run("range_timeseries", func(t *testing.T) {
		r := query(t, ds, dataQuery("A", map[string]any{"queryType": "promql", "expr": "vllm:num_requests_running", "range": true, "legendFormat": "{{instance}}"}, early))
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		if len(r.Frames) != 2 {
			t.Fatalf("%d frames, want one per instance (2)", len(r.Frames))
		}
		for k, f := range r.Frames {
			// 2 minutes at 15 s: points i = 0..8, value i (gpu-0) or 2i (gpu-1).
			vals := floatsOf(t, f.Fields[1])
			if len(vals) != 9 {
				t.Fatalf("frame %d: %d points, want 9", k, len(vals))
			}
			for i, v := range vals {
				if want := float64((k + 1) * i); v != want {
					t.Errorf("frame %d point %d = %v, want %v", k, i, v, want)
				}
			}
			if got := f.Fields[1].Config.DisplayNameFromDS; got != []string{"gpu-0", "gpu-1"}[k] {
				t.Errorf("frame %d legend %q", k, got)
			}
			if f.Meta.Type != data.FrameTypeTimeSeriesMulti {
				t.Errorf("frame type %q", f.Meta.Type)
			}
		}
		checkGolden(t, "range_timeseries", r)
	})

	t.Run("range_quantile", func(t *testing.T) {
		// Per second the buckets gain 1/15 (≤0.5), 3/15 (≤1), 4/15 (≤2, +Inf).
		// P50: rank 0.5·4/15 = 2/15 lies in (0.5, 1] between cumulative 1/15
		// and 3/15: 0.5 + 0.5·(2/15−1/15)/(3/15−1/15) = 0.75.
		// P99: rank 3.96/15 in (1, 2] between 3/15 and 4/15: 1 + 0.96 = 1.96.
		for _, c := range []struct {
			q    string
			want float64
		}{{"0.5", 0.75}, {"0.99", 1.96}} {
			r := query(t, ds, dataQuery("A", map[string]any{"expr": "histogram_quantile(" + c.q + ", sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[1m])))"}, early))
			if r.Error != nil {
				t.Fatal(r.Error)
			}
			if len(r.Frames) != 1 {
				t.Fatalf("%d frames, want 1", len(r.Frames))
			}
			vals := floatsOf(t, r.Frames[0].Fields[1])
			if len(vals) != 8 { // T0 has a single sample: no rate
				t.Fatalf("%d points, want 8", len(vals))
			}
			for i, v := range vals {
				if !approx(v, c.want) {
					t.Errorf("P%s point %d = %v, want %v", c.q, i, v, c.want)
				}
			}
			if c.q == "0.99" {
				if name := r.Frames[0].Fields[1].Config.DisplayNameFromDS; !strings.HasPrefix(name, "histogram_quantile(0.99") {
					t.Errorf("label-less series is named %q, want the expression", name)
				}
				checkGolden(t, "range_quantile", r)
			}
		}
	})

	t.Run("instant_numeric", func(t *testing.T) {
		r := query(t, ds, dataQuery("A", map[string]any{"expr": "sum(vllm:num_requests_running)", "instant": true}, fixedRange))
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		// At T0+10m, i = 40: 40 + 80.
		if len(r.Frames) != 1 || r.Frames[0].Meta.Type != data.FrameTypeNumericMulti {
			t.Fatalf("want one numeric-multi frame, got %d", len(r.Frames))
		}
		if v := floatsOf(t, r.Frames[0].Fields[1]); len(v) != 1 || v[0] != 120 {
			t.Errorf("value %v, want [120]", v)
		}
		checkGolden(t, "instant_numeric", r)
	})

	t.Run("instant_table", func(t *testing.T) {
		r := query(t, ds, dataQuery("A", map[string]any{"expr": "vllm:num_requests_running", "instant": true, "format": "table"}, fixedRange))
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		f := r.Frames[0]
		var names []string
		for _, fl := range f.Fields {
			names = append(names, fl.Name)
		}
		if want := []string{"Time", "__name__", "instance", "job", "model_name", "Value"}; !slices.Equal(names, want) {
			t.Errorf("columns %v, want %v", names, want)
		}
		if v := floatsOf(t, f.Fields[5]); !slices.Equal(v, []float64{40, 80}) {
			t.Errorf("values %v, want [40 80]", v)
		}
		checkGolden(t, "instant_table", r)
	})

	t.Run("heatmap_format", func(t *testing.T) {
		// From T0+1m on, each 1m window holds four samples 15 s apart, so the
		// rate is the exact per-second gain.
		full := backend.TimeRange{From: T0.Add(time.Minute), To: T0.Add(3 * time.Minute)}
		r := query(t, ds, dataQuery("A", map[string]any{"expr": "sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[1m]))", "format": "heatmap"}, full))
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		f := r.Frames[0]
		if f.Meta.Type != frameTypeHeatmapRows || len(f.Fields) != 5 {
			t.Fatalf("type %q with %d fields, want heatmap-rows with Time + 4 buckets", f.Meta.Type, len(f.Fields))
		}
		// De-accumulated per-second counts: 1/15, 2/15, 1/15, 0.
		for k, want := range []float64{1.0 / 15, 2.0 / 15, 1.0 / 15, 0} {
			fl := f.Fields[k+1]
			if fl.Name != []string{"0.5", "1", "2", "+Inf"}[k] {
				t.Errorf("bucket field %d named %q", k, fl.Name)
			}
			for i, v := range floatsOf(t, fl) {
				if math.Abs(v-want) > 1e-12 {
					t.Errorf("bucket %s point %d = %v, want %v", fl.Name, i, v, want)
				}
			}
		}
		checkGolden(t, "heatmap_format", r)
	})

	t.Run("native_histogram", func(t *testing.T) {
		at := backend.TimeRange{From: T0, To: T0.Add(time.Minute)} // i = 4
		r := query(t, ds, dataQuery("A", map[string]any{"expr": "vllm:time_to_first_token_seconds", "instant": true}, at))
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		f := r.Frames[0]
		if f.Meta.Type != frameTypeHeatmapCells {
			t.Fatalf("type %q, want heatmap-cells", f.Meta.Type)
		}
		// Zero bucket [-0.001, 0.001]: 4; (0.5, 1]: 8; (1, 2]: 12.
		if got := floatsOf(t, f.Fields[1]); !slices.Equal(got, []float64{-0.001, 0.5, 1}) {
			t.Errorf("yMin %v", got)
		}
		if got := floatsOf(t, f.Fields[2]); !slices.Equal(got, []float64{0.001, 1, 2}) {
			t.Errorf("yMax %v", got)
		}
		if got := floatsOf(t, f.Fields[3]); !slices.Equal(got, []float64{4, 8, 12}) {
			t.Errorf("count %v", got)
		}
		checkGolden(t, "native_histogram", r)
	})

	t.Run("scalar", func(t *testing.T) {
		r := query(t, ds, dataQuery("A", map[string]any{"expr": "scalar(sum(vllm:num_requests_running))", "instant": true}, fixedRange))
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		if v := floatsOf(t, r.Frames[0].Fields[1]); len(v) != 1 || v[0] != 120 {
			t.Errorf("scalar %v, want 120", v)
		}
		checkGolden(t, "scalar", r)
	})

	t.Run("metricsql", func(t *testing.T) {
		// A WITH template is MetricsQL-only syntax: 2 · 80 at T0+10m.
		r := query(t, ds, dataQuery("A", map[string]any{"expr": `WITH (r = vllm:num_requests_running{instance="gpu-1"}) r * 2`, "instant": true}, fixedRange))
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		if v := floatsOf(t, r.Frames[0].Fields[1]); len(v) != 1 || v[0] != 160 {
			t.Errorf("value %v, want [160]", v)
		}
		checkGolden(t, "metricsql", r)
	})

	t.Run("range_and_instant", func(t *testing.T) {
		r := query(t, ds, dataQuery("A", map[string]any{"expr": `vllm:num_requests_running{instance="gpu-0"}`, "range": true, "instant": true}, early))
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		if len(r.Frames) != 2 || r.Frames[0].Meta.Type != data.FrameTypeTimeSeriesMulti || r.Frames[1].Meta.Type != data.FrameTypeNumericMulti {
			t.Fatalf("want a range frame then an instant frame, got %d frames", len(r.Frames))
		}
	})
}

// TestQueryErrors: each failure is its own RefID's error, with the source
// Grafana uses to tell users' mistakes from plugin bugs.
func TestQueryErrors(t *testing.T) {
	srv := fixedServer(t)
	ds := newTestDatasource(t, backend.DataSourceInstanceSettings{Type: ID, URL: srv.URL})
	qs := []backend.DataQuery{
		dataQuery("parse", map[string]any{"expr": "sum(", "range": true}, fixedRange),
		{RefID: "json", JSON: []byte(`{"expr": 5}`), TimeRange: fixedRange},
		dataQuery("type", map[string]any{"queryType": "flux", "expr": "x"}, fixedRange),
		dataQuery("empty", map[string]any{"expr": "  "}, fixedRange),
		dataQuery("format", map[string]any{"expr": "up", "format": "graph"}, fixedRange),
		dataQuery("good", map[string]any{"expr": "sum(vllm:num_requests_running)", "instant": true}, fixedRange),
	}
	resp, err := ds.QueryData(context.Background(), &backend.QueryDataRequest{Queries: qs})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref, contains string
		status        backend.Status
	}{
		{"parse", "parse error", backend.StatusBadRequest},
		{"json", "query JSON", backend.StatusBadRequest},
		{"type", `queryType "flux"`, backend.StatusBadRequest},
		{"empty", "expr is empty", backend.StatusBadRequest},
		{"format", `format "graph"`, backend.StatusBadRequest},
	} {
		r := resp.Responses[c.ref]
		if r.Error == nil || !strings.Contains(r.Error.Error(), c.contains) {
			t.Errorf("%s: error %v, want it to contain %q", c.ref, r.Error, c.contains)
			continue
		}
		if r.ErrorSource != backend.ErrorSourceDownstream || r.Status != c.status {
			t.Errorf("%s: source %q status %d, want downstream %d", c.ref, r.ErrorSource, r.Status, c.status)
		}
	}
	if g := resp.Responses["good"]; g.Error != nil || len(g.Frames) != 1 {
		t.Errorf("good query beside failing ones: %v", g.Error)
	}

	// A server that is not there: downstream, bad gateway.
	gone := newTestDatasource(t, backend.DataSourceInstanceSettings{Type: ID, URL: "http://127.0.0.1:1"})
	r := query(t, gone, dataQuery("A", map[string]any{"expr": "up"}, fixedRange))
	if r.Error == nil || r.ErrorSource != backend.ErrorSourceDownstream || r.Status != backend.StatusBadGateway {
		t.Errorf("unreachable server: %v source %q status %d", r.Error, r.ErrorSource, r.Status)
	}
}

// endpointMissing reports whether the server answers 404 on path: servers
// older than the attribution API do.
func endpointMissing(t *testing.T, base, path string) bool {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusNotFound
}

// TestAttributionNotSupported: a server without an attribution endpoint
// answers 404, and each kind says so on its own RefID. It runs against a
// server that has none of them (answering 404 as gorilla/mux does, in plain
// text) and against the real binary for each endpoint it still lacks.
func TestAttributionNotSupported(t *testing.T) {
	models := map[string]map[string]any{
		"breakdown": {"queryType": "breakdown", "metric": "e2e"},
		"rootcause": {"queryType": "rootcause", "target": "sum(vllm:num_requests_running)"},
		"causal":    {"queryType": "causal", "outcome": "a", "treatment": "b"},
		"ab":        {"queryType": "ab", "a": `{instance="gpu-0"}`, "b": `{instance="gpu-1"}`},
	}
	none := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(none.Close)
	for _, c := range []struct{ name, url string }{{"no endpoints", none.URL}, {"tailroot binary", fixedServer(t).URL}} {
		t.Run(c.name, func(t *testing.T) {
			ds := newTestDatasource(t, backend.DataSourceInstanceSettings{Type: ID, URL: c.url})
			checked := 0
			for kind, m := range models {
				if !endpointMissing(t, c.url, attributionPath[kind]) {
					continue
				}
				checked++
				r := query(t, ds, dataQuery(kind, m, fixedRange))
				want := "this tailroot server does not support " + kind + " yet"
				if r.Error == nil || r.Error.Error() != want {
					t.Errorf("%s: error %v, want %q", kind, r.Error, want)
				}
				if r.ErrorSource != backend.ErrorSourceDownstream || r.Status != backend.StatusNotImplemented {
					t.Errorf("%s: source %q status %d", kind, r.ErrorSource, r.Status)
				}
			}
			if c.url == none.URL && checked != len(models) {
				t.Fatalf("checked %d kinds, want %d", checked, len(models))
			}
			t.Logf("%d of %d kinds answered 404", checked, len(models))
		})
	}
}

// sender collects CallResource answers.
type sender struct {
	got []*backend.CallResourceResponse
}

func (s *sender) Send(r *backend.CallResourceResponse) error { s.got = append(s.got, r); return nil }

func callResource(t *testing.T, ds *Datasource, path, rawURL string) (int, []byte) {
	t.Helper()
	var s sender
	if err := ds.CallResource(context.Background(), &backend.CallResourceRequest{Path: path, URL: rawURL, Method: "GET"}, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.got) != 1 {
		t.Fatalf("%d responses, want 1", len(s.got))
	}
	return s.got[0].Status, s.got[0].Body
}

func TestResources(t *testing.T) {
	srv := fixedServer(t)
	ds := newTestDatasource(t, backend.DataSourceInstanceSettings{Type: ID, URL: srv.URL})
	for _, c := range []struct {
		path, url string
		want      []string
	}{
		{"metrics", "metrics", []string{"vllm:e2e_request_latency_seconds_bucket", "vllm:num_requests_running", "vllm:time_to_first_token_seconds"}},
		{"labels", "labels", []string{"__name__", "instance", "job", "le", "model_name"}},
		{"label-values", "label-values?label=instance", []string{"gpu-0", "gpu-1"}},
		{"label-values", "label-values?label=le&match%5B%5D=vllm:e2e_request_latency_seconds_bucket", []string{"+Inf", "0.5", "1", "2"}},
		{"label-values", "label-values?label=nosuchlabel", []string{}},
	} {
		code, body := callResource(t, ds, c.path, c.url)
		var got []string
		if err := json.Unmarshal(body, &got); code != 200 || err != nil {
			t.Errorf("%s: %d %s", c.url, code, body)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.url, got, c.want)
		}
	}
	for _, c := range []struct {
		path, url string
		code      int
	}{
		{"label-values", "label-values", 400},
		{"nope", "nope", 404},
	} {
		if code, body := callResource(t, ds, c.path, c.url); code != c.code {
			t.Errorf("%s: %d %s, want %d", c.url, code, body, c.code)
		}
	}
}

func TestCheckHealth(t *testing.T) {
	srv := fixedServer(t)
	ds := newTestDatasource(t, backend.DataSourceInstanceSettings{Type: ID, URL: srv.URL})
	res, err := ds.CheckHealth(context.Background(), &backend.CheckHealthRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != backend.HealthStatusOk || !strings.HasPrefix(res.Message, "tailroot ") {
		t.Errorf("health %v %q", res.Status, res.Message)
	}
	var bi buildInfo
	if err := json.Unmarshal(res.JSONDetails, &bi); err != nil || bi.GoVersion == "" {
		t.Errorf("details %s: %v", res.JSONDetails, err)
	}
	gone := newTestDatasource(t, backend.DataSourceInstanceSettings{Type: ID, URL: "http://127.0.0.1:1"})
	res, _ = gone.CheckHealth(context.Background(), &backend.CheckHealthRequest{})
	if res.Status != backend.HealthStatusError || !strings.Contains(res.Message, "cannot reach tailroot") {
		t.Errorf("unreachable: %v %q", res.Status, res.Message)
	}
}

// TestBasicAuth runs a server that requires basic auth (the Prometheus web
// config format) and configures the datasource as Grafana stores it: the
// password only in secureJsonData.
func TestBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth_users:\n  grafana: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := startServer("grafana", "s3cret", "--web.config.file", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, password string
		ok             bool
	}{{"right password", "s3cret", true}, {"wrong password", "nope", false}} {
		t.Run(c.name, func(t *testing.T) {
			ds := newTestDatasource(t, backend.DataSourceInstanceSettings{
				Type: ID, URL: srv.URL, BasicAuthEnabled: true, BasicAuthUser: "grafana",
				DecryptedSecureJSONData: map[string]string{"basicAuthPassword": c.password},
			})
			res, err := ds.CheckHealth(context.Background(), &backend.CheckHealthRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if (res.Status == backend.HealthStatusOk) != c.ok {
				t.Errorf("health %v %q", res.Status, res.Message)
			}
			r := query(t, ds, dataQuery("A", map[string]any{"expr": "vector(1)", "instant": true}, fixedRange))
			if (r.Error == nil) != c.ok {
				t.Errorf("query error %v", r.Error)
			}
			if !c.ok && r.Status != backend.StatusUnauthorized {
				t.Errorf("status %d, want 401", r.Status)
			}
		})
	}
}
