package plugin

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// TestSimulatorDashboards runs the queries of the provisioned dashboards'
// main panels against the built-in vLLM simulator: the data a user sees
// after `make run`. The workload is random, so the checks are on shape and
// physical sense, not on golden values.
func TestSimulatorDashboards(t *testing.T) {
	srv := simServer(t)
	ds := newTestDatasource(t, backend.DataSourceInstanceSettings{Type: ID, URL: srv.URL})
	now := time.Now()
	tr := backend.TimeRange{From: now.Add(-30 * time.Minute), To: now}
	run := func(t *testing.T, model map[string]any) backend.DataResponse {
		t.Helper()
		raw, _ := json.Marshal(model)
		r := query(t, ds, backend.DataQuery{RefID: "A", JSON: raw, TimeRange: tr, Interval: 30 * time.Second, MaxDataPoints: 800})
		if r.Error != nil {
			t.Fatalf("%v: %v", model, r.Error)
		}
		return r
	}

	t.Run("p99 per model", func(t *testing.T) {
		r := run(t, map[string]any{"expr": "histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))", "legendFormat": "{{model_name}}"})
		if len(r.Frames) < 2 {
			t.Fatalf("%d frames, want one per model (at least the simulator's 2)", len(r.Frames))
		}
		for _, f := range r.Frames {
			vals := floatsOf(t, f.Fields[1])
			if len(vals) < 50 {
				t.Errorf("%s: %d points over 30 min at 30 s", f.Fields[1].Config.DisplayNameFromDS, len(vals))
			}
			for _, v := range vals {
				if !(v > 0 && v <= 120) {
					t.Errorf("%s: P99 %v s is not a plausible latency", f.Fields[1].Config.DisplayNameFromDS, v)
					break
				}
			}
		}
	})

	t.Run("native histogram heatmap", func(t *testing.T) {
		r := run(t, map[string]any{"expr": "sum(rate(vllm:time_to_first_token_seconds[5m]))"})
		if len(r.Frames) != 1 || r.Frames[0].Meta.Type != frameTypeHeatmapCells {
			t.Fatalf("want one heatmap-cells frame, got %d", len(r.Frames))
		}
		f := r.Frames[0]
		if f.Rows() < 100 {
			t.Errorf("%d cells", f.Rows())
		}
		lo, hi := floatsOf(t, f.Fields[1]), floatsOf(t, f.Fields[2])
		for i := range lo {
			if !(lo[i] < hi[i]) {
				t.Fatalf("cell %d: yMin %v ≥ yMax %v", i, lo[i], hi[i])
			}
		}
	})

	t.Run("classic bucket heatmap", func(t *testing.T) {
		r := run(t, map[string]any{"expr": "sum by (le) (rate(vllm:request_queue_time_seconds_bucket[5m]))", "format": "heatmap"})
		if len(r.Frames) != 1 || r.Frames[0].Meta.Type != frameTypeHeatmapRows {
			t.Fatalf("want one heatmap-rows frame, got %d", len(r.Frames))
		}
		if n := len(r.Frames[0].Fields); n < 5 || r.Frames[0].Fields[n-1].Name != "+Inf" {
			t.Errorf("%d fields, last %q", n, r.Frames[0].Fields[n-1].Name)
		}
	})

	t.Run("gauges table", func(t *testing.T) {
		r := run(t, map[string]any{"expr": "vllm:kv_cache_usage_perc", "instant": true, "format": "table"})
		f := r.Frames[0]
		if f.Meta.Type != data.FrameTypeTable || f.Rows() < 6 {
			t.Errorf("type %q rows %d, want a table with a row per instance (6 or more)", f.Meta.Type, f.Rows())
		}
	})

	t.Run("autocompletion", func(t *testing.T) {
		code, body := callResource(t, ds, "metrics", "metrics")
		var names []string
		if err := json.Unmarshal(body, &names); code != 200 || err != nil {
			t.Fatalf("%d %s", code, body)
		}
		for _, want := range []string{"vllm:e2e_request_latency_seconds_bucket", "vllm:time_to_first_token_seconds_bucket", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"} {
			if !slices.Contains(names, want) {
				t.Errorf("metric %s missing", want)
			}
		}
		_, body = callResource(t, ds, "label-values", "label-values?label=model_name")
		var models []string
		_ = json.Unmarshal(body, &models)
		for _, want := range []string{"meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"} {
			if !slices.Contains(models, want) {
				t.Errorf("model %s missing from %v", want, models)
			}
		}
	})
}
