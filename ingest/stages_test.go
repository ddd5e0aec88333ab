package ingest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

func TestStageSourcesTable(t *testing.T) {
	seen := map[string]bool{}
	engines := map[string]bool{}
	for _, s := range StageSources {
		key := s.Name + "{" + s.Matchers + "}"
		if seen[key] {
			t.Errorf("%s mapped twice", key)
		}
		seen[key] = true
		engines[s.Engine] = true
		if !IsTarget(s.Target) {
			t.Errorf("%s maps to unknown target %q", s.Name, s.Target)
		}
		if _, err := s.MeanQuery("5m", "model_name"); err != nil {
			t.Error(err)
		}
	}
	for _, e := range []string{"vllm", "sglang", "tgi", "triton", "trtllm", "otel-genai"} {
		if !engines[e] {
			t.Errorf("no mapping for %s", e)
		}
	}
	if got := Sources("queue"); len(got) != 5 {
		t.Errorf("%d sources map onto queue, want one per engine that reports it (5)", len(got))
	}
}

// TestMeanQueryEvaluates runs the generated PromQL on the upstream engine
// over series laid out by hand, one minute apart:
//
//	vllm:request_queue_time_seconds (classic)  _sum 0 → 30, _count 0 → 100: mean 0.3 s
//	vllm:request_prefill_time_seconds (native) sum 0 → 10, count 0 → 50:   mean 0.2 s
//	nv_inference_queue_duration_us{model="tensorrt_llm"} 0 → 6e6 µs,
//	  nv_inference_request_success 0 → 120:                                mean 0.05 s
//	nv_inference_compute_infer_duration_us{model="preprocessing"} 0 → 1.2e6 µs,
//	  nv_inference_request_success{model="preprocessing"} 0 → 120:         tokenize 0.01 s
//
// Both samples of every series share timestamps, so rate()'s extrapolation
// scales numerator and denominator alike and the ratios are exact.
func TestMeanQueryEvaluates(t *testing.T) {
	db := openTestDB(t)
	t1 := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	t2 := t1.Add(time.Minute)
	app := db.AppenderV2(context.Background())
	add := func(v1, v2 float64, kv ...string) {
		ls := labels.FromStrings(kv...)
		for i, v := range []float64{v1, v2} {
			ts := []time.Time{t1, t2}[i]
			if _, err := app.Append(0, ls, 0, ts.UnixMilli(), v, nil, nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(0, 30, "__name__", "vllm:request_queue_time_seconds_sum", "model_name", "m")
	add(0, 100, "__name__", "vllm:request_queue_time_seconds_count", "model_name", "m")
	for i, h := range []*histogram.Histogram{
		{Schema: 0, Count: 0, Sum: 0},
		{Schema: 0, Count: 50, Sum: 10, PositiveSpans: []histogram.Span{{Offset: -2, Length: 1}}, PositiveBuckets: []int64{50}},
	} {
		ts := []time.Time{t1, t2}[i]
		if _, err := app.Append(0, labels.FromStrings("__name__", "vllm:request_prefill_time_seconds", "model_name", "m"), 0, ts.UnixMilli(), 0, h, nil, storage.AOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	add(0, 6e6, "__name__", "nv_inference_queue_duration_us", "model", "tensorrt_llm")
	add(0, 120, "__name__", "nv_inference_request_success", "model", "tensorrt_llm")
	add(0, 1.2e6, "__name__", "nv_inference_compute_infer_duration_us", "model", "preprocessing")
	add(0, 120, "__name__", "nv_inference_request_success", "model", "preprocessing")
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}

	ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	eval := func(s SourceMetric) float64 {
		q, err := s.MeanQuery("2m")
		if err != nil {
			t.Fatal(err)
		}
		qry, err := ng.NewInstantQuery(context.Background(), db, nil, q, t2)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		res := qry.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: %v", q, res.Err)
		}
		v, err := res.Vector()
		if err != nil || len(v) != 1 {
			t.Fatalf("%s: %v, %v", q, v, err)
		}
		return v[0].F
	}
	find := func(name, target string) SourceMetric {
		for _, s := range StageSources {
			if s.Name == name && s.Target == target {
				return s
			}
		}
		t.Fatalf("no source %s → %s", name, target)
		return SourceMetric{}
	}
	for _, c := range []struct {
		src  SourceMetric
		want float64
	}{
		{find("vllm:request_queue_time_seconds", "queue"), 0.3},
		{find("vllm:request_prefill_time_seconds", "prefill"), 0.2},
		{find("nv_inference_queue_duration_us", "queue"), 0.05},
		{find("nv_inference_compute_infer_duration_us", "tokenize"), 0.01},
	} {
		if got := eval(c.src); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s → %s: mean %v, want %v", c.src.Name, c.src.Target, got, c.want)
		}
	}
}
