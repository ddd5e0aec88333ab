package apptest

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// vllmSpans builds two llm_request spans as vLLM emits them: v1
// (OutputProcessor.do_tracing: prefill and decode attributes) and v0
// (LLMEngine.do_tracing: response.model, scheduler and model times). All
// durations are doubles in seconds, token counts ints.
//
//	v1: queue 0.05, prefill 0.15, decode 1.2, e2e 1.5 → other 0.1, TTFT 0.25
//	v0: queue 0.5, TTFT 0.8 → prefill 0.3, e2e 2 → decode 1.2, other 0
func vllmSpans(start time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm")
	rs.Resource().Attributes().PutStr("service.instance.id", "gpu-node-1:8000")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("vllm.llm_engine")
	t0 := pcommon.NewTimestampFromTime(start)

	sp := ss.Spans().AppendEmpty()
	sp.SetName("llm_request")
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetTraceID(pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36})
	sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	sp.SetStartTimestamp(t0)
	sp.SetEndTimestamp(t0 + 1_600_000_000)
	a := sp.Attributes()
	a.PutDouble("gen_ai.latency.time_to_first_token", 0.25)
	a.PutDouble("gen_ai.latency.e2e", 1.5)
	a.PutDouble("gen_ai.latency.time_in_queue", 0.05)
	a.PutInt("gen_ai.usage.prompt_tokens", 120)
	a.PutInt("gen_ai.usage.completion_tokens", 40)
	a.PutDouble("gen_ai.latency.time_in_model_prefill", 0.15)
	a.PutDouble("gen_ai.latency.time_in_model_decode", 1.2)
	a.PutDouble("gen_ai.latency.time_in_model_inference", 1.35)
	a.PutStr("gen_ai.request.id", "cmpl-v1")
	a.PutDouble("gen_ai.request.top_p", 0.95)
	a.PutInt("gen_ai.request.max_tokens", 256)

	sp = ss.Spans().AppendEmpty()
	sp.SetName("llm_request")
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetTraceID(pcommon.TraceID{0x5b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x37})
	sp.SetSpanID(pcommon.SpanID{2, 2, 3, 4, 5, 6, 7, 8})
	sp.SetStartTimestamp(t0 + 1_000_000_000)
	sp.SetEndTimestamp(t0 + 3_000_000_000)
	a = sp.Attributes()
	a.PutStr("gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct")
	a.PutStr("gen_ai.request.id", "cmpl-v0")
	a.PutInt("gen_ai.usage.prompt_tokens", 10)
	a.PutInt("gen_ai.usage.completion_tokens", 20)
	a.PutDouble("gen_ai.latency.time_in_queue", 0.5)
	a.PutDouble("gen_ai.latency.time_to_first_token", 0.8)
	a.PutDouble("gen_ai.latency.e2e", 2.0)
	a.PutDouble("gen_ai.latency.time_in_scheduler", 0.01)
	a.PutDouble("gen_ai.latency.time_in_model_forward", 0.9)
	a.PutDouble("gen_ai.latency.time_in_model_execute", 1.0)
	return td
}

// TestTokensVLLMSpans posts vLLM spans to the running binary over OTLP/HTTP
// and reads back the request records and the derived series, exact values.
func TestTokensVLLMSpans(t *testing.T) {
	app := startTokens(t, t.TempDir())
	start := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	body, err := ptraceotlp.NewExportRequestFromTraces(vllmSpans(start)).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	code, resp := postBody(t, app, "/v1/traces", "application/x-protobuf", body, nil)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/traces: %d %s", code, resp)
	}
	pr := ptraceotlp.NewExportResponse()
	if err := pr.UnmarshalProto(resp); err != nil || pr.PartialSuccess().RejectedSpans() != 0 {
		t.Fatalf("response %v, rejected %d", err, pr.PartialSuccess().RejectedSpans())
	}

	recs := getRecords(t, app, `{job="vllm"}`)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	v1, v0 := recs[0], recs[1]
	if v1.RequestID != "cmpl-v1" || v1.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || v1.Time != start.UnixMilli() ||
		v1.E2E != 1.5 || v1.TTFT != 0.25 || v1.Stages.Queue != 0.05 || v1.Stages.Prefill != 0.15 || v1.Stages.Decode != 1.2 ||
		math.Abs(v1.Stages.Other-0.1) > 1e-15 || v1.PromptTokens != 120 || v1.OutputTokens != 40 ||
		v1.Labels["instance"] != "gpu-node-1:8000" || v1.Labels["job"] != "vllm" {
		t.Errorf("v1 record %+v", v1)
	}
	if v0.RequestID != "cmpl-v0" || v0.TraceID != "5bf92f3577b34da6a3ce929d0e0e4737" || v0.E2E != 2 ||
		v0.Stages.Queue != 0.5 || math.Abs(v0.Stages.Prefill-0.3) > 1e-15 || math.Abs(v0.Stages.Decode-1.2) > 1e-15 || v0.Stages.Other != 0 ||
		v0.Labels["model_name"] != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Errorf("v0 record %+v", v0)
	}

	at := time.Now()
	for _, c := range []struct {
		q    string
		want float64
	}{
		{`sum(tailroot_tail_requests_total{job="vllm"})`, 2},
		// e2e 1.5 lies in the grid bucket (2^(2/4), 2^(3/4)], e2e 2 in (2^(3/4), 2].
		{`tailroot_tail_requests_total{job="vllm", e2e_bucket="1.6817928305074292"}`, 1},
		{`tailroot_tail_requests_total{job="vllm", e2e_bucket="2"}`, 1},
		{`sum(tailroot_tail_stage_seconds_sum{stage="queue"})`, 0.55},
		{`sum(tailroot_tail_stage_seconds_sum{stage="decode"})`, 2.4},
		{`sum(histogram_count(tailroot_request_e2e_seconds))`, 2},
		{`sum(histogram_sum(tailroot_request_e2e_seconds))`, 3.5},
		{`sum(histogram_sum(tailroot_request_stage_seconds{stage="prefill"}))`, 0.45},
		{`sum(histogram_sum(tailroot_token_latency_seconds{kind="ttft", position_bucket="1"}))`, 1.05},
	} {
		if got := app.Scalar(t, c.q, at); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.q, got, c.want)
		}
	}
	// Exemplars carry the trace ids.
	codeEx, exBody := app.Get(t, "/api/v1/query_exemplars", url.Values{
		"query": {`tailroot_request_e2e_seconds`},
		"start": {strconv.FormatInt(start.Add(-time.Hour).Unix(), 10)}, "end": {strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)},
	})
	if codeEx != http.StatusOK || !strings.Contains(string(exBody), "4bf92f3577b34da6a3ce929d0e0e4736") || !strings.Contains(string(exBody), "5bf92f3577b34da6a3ce929d0e0e4737") {
		t.Errorf("exemplars: %d %s", codeEx, exBody)
	}
}

// TestTokensOTLPMetrics posts OTLP metrics (JSON, gzip) and queries them:
// names, job/instance and promoted resource attributes as Prometheus 3
// translates them, histograms as native histograms.
func TestTokensOTLPMetrics(t *testing.T) {
	app := startTokens(t, t.TempDir(), "--otlp.promote-resource-attributes=k8s.pod.name")
	ts := time.Now().Add(-30 * time.Second).Truncate(time.Millisecond)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vllm")
	rm.Resource().Attributes().PutStr("service.instance.id", "gpu-node-1:8000")
	rm.Resource().Attributes().PutStr("k8s.pod.name", "vllm-0")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	s := ms.AppendEmpty()
	s.SetName("vllm.request.success")
	sum := s.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	dp.SetIntValue(42)
	h := ms.AppendEmpty()
	h.SetName("gen_ai.server.time_to_first_token")
	h.SetUnit("s")
	eh := h.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ep := eh.DataPoints().AppendEmpty()
	ep.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	ep.SetScale(2)
	ep.Positive().BucketCounts().FromRaw([]uint64{1, 2})
	ep.SetCount(3)
	ep.SetSum(2.5)
	js, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	code, resp := postBody(t, app, "/api/v1/otlp/v1/metrics", "application/json", gzipBytes(t, js), http.Header{"Content-Encoding": {"gzip"}})
	if code != http.StatusOK {
		t.Fatalf("POST OTLP metrics: %d %s", code, resp)
	}
	var pr map[string]any
	if err := json.Unmarshal(resp, &pr); err != nil {
		t.Fatalf("response %s: %v", resp, err)
	}
	at := time.Now()
	if v := app.Scalar(t, `vllm_request_success_total{job="vllm", instance="gpu-node-1:8000", k8s_pod_name="vllm-0"}`, at); v != 42 {
		t.Errorf("counter %v, want 42", v)
	}
	if v := app.Scalar(t, `histogram_count(gen_ai_server_time_to_first_token_seconds{job="vllm"})`, at); v != 3 {
		t.Errorf("native histogram count %v, want 3", v)
	}
	if v := app.Scalar(t, `histogram_sum(gen_ai_server_time_to_first_token_seconds{job="vllm"})`, at); v != 2.5 {
		t.Errorf("native histogram sum %v, want 2.5", v)
	}
	if v := app.Scalar(t, `target_info{job="vllm", instance="gpu-node-1:8000"}`, at); v != 1 {
		t.Errorf("target_info %v", v)
	}
}
