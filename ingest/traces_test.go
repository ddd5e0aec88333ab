package ingest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/prometheus/model/labels"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tailroot/tailroot/tsdb/records"
)

var (
	traceV1 = pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	traceV0 = pcommon.TraceID{0x5b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x37}
)

// t0 is the arrival of the test spans: 2023-11-14T22:13:20Z.
const t0 = 1_700_000_000_000_000_000

// vllmTraces builds spans exactly as vLLM's OutputProcessor.do_tracing
// (v1) and LLMEngine.do_tracing (v0) emit them: resource service.name and
// service.instance.id, scope vllm.llm_engine, a SERVER span "llm_request"
// starting at the request's arrival, gen_ai.* durations as doubles (seconds)
// and token counts as ints.
func vllmTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm")
	rs.Resource().Attributes().PutStr("service.instance.id", "gpu-node-1:8000")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("vllm.llm_engine")

	// v1: queued→scheduled 0.05, scheduled→first token 0.15, first→last
	// token 1.2; e2e 1.5 (the span itself ends 0.1 s later, after output
	// processing; the e2e attribute wins).
	sp := ss.Spans().AppendEmpty()
	sp.SetName("llm_request")
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetTraceID(traceV1)
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
	a.PutDouble("gen_ai.request.temperature", 0.7)
	a.PutInt("gen_ai.request.n", 1)

	// v0: no prefill/decode attributes; scheduler, forward and execute
	// times overlap the model intervals. prefill = ttft − queue = 0.3,
	// decode = e2e − ttft = 1.2, other 0.
	sp = ss.Spans().AppendEmpty()
	sp.SetName("llm_request")
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetTraceID(traceV0)
	sp.SetSpanID(pcommon.SpanID{2, 2, 3, 4, 5, 6, 7, 8})
	sp.SetStartTimestamp(t0 + 1_000_000_000)
	sp.SetEndTimestamp(t0 + 3_000_000_000)
	a = sp.Attributes()
	a.PutStr("gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct")
	a.PutStr("gen_ai.request.id", "cmpl-v0")
	a.PutInt("gen_ai.usage.prompt_tokens", 10)
	a.PutInt("gen_ai.usage.completion_tokens", 20)
	a.PutInt("gen_ai.usage.num_sequences", 1)
	a.PutDouble("gen_ai.latency.time_in_queue", 0.5)
	a.PutDouble("gen_ai.latency.time_to_first_token", 0.8)
	a.PutDouble("gen_ai.latency.e2e", 2.0)
	a.PutDouble("gen_ai.latency.time_in_scheduler", 0.01)
	a.PutDouble("gen_ai.latency.time_in_model_forward", 0.9)
	a.PutDouble("gen_ai.latency.time_in_model_execute", 1.0)
	return td
}

func TestSpanToItemVLLM(t *testing.T) {
	items, ignored, rejected := TracesToItems(vllmTraces(), RequestLimits{})
	if len(items) != 2 || ignored != 0 || len(rejected) != 0 {
		t.Fatalf("%d items, %d ignored, rejected %v", len(items), ignored, rejected)
	}
	for i, c := range []struct {
		time   int64
		trace  pcommon.TraceID
		id     string
		ls     labels.Labels
		e2e    float64
		stages [records.NumStages]float64
		ttft   float64
		in     uint32
		out    uint32
	}{
		{
			1700000000000, traceV1, "cmpl-v1", labels.FromStrings("instance", "gpu-node-1:8000", "job", "vllm"),
			1.5,
			[records.NumStages]float64{0.05, 0, 0.15, 1.2, 0, 0, 0.1},
			0.25, 120, 40,
		},
		{
			1700000001000, traceV0, "cmpl-v0", labels.FromStrings("instance", "gpu-node-1:8000", "job", "vllm", "model_name", "meta-llama/Llama-3.1-8B-Instruct"),
			2.0,
			[records.NumStages]float64{0.5, 0, 0.3, 1.2, 0, 0, 0},
			0.8, 10, 20,
		},
	} {
		r := items[i].Record
		if r.Time != c.time || records.TraceID(c.trace) != r.TraceID || r.RequestID != c.id || !labels.Equal(r.Labels, c.ls) {
			t.Errorf("span %d: time %d trace %x id %q labels %s", i, r.Time, r.TraceID, r.RequestID, r.Labels)
		}
		if r.E2E != c.e2e || r.Sum() != r.E2E || r.TTFT != c.ttft || !items[i].HasTTFT || r.PromptTokens != c.in || r.OutputTokens != c.out {
			t.Errorf("span %d: e2e %v (sum %v) ttft %v tokens %d/%d", i, r.E2E, r.Sum(), r.TTFT, r.PromptTokens, r.OutputTokens)
		}
		for j, w := range c.stages {
			if !approxEq(r.Stages[j], w, 1e-15) {
				t.Errorf("span %d: stage %s = %v, want %v", i, records.Stage(j), r.Stages[j], w)
			}
		}
	}
}

func TestSpanToItemGenAIAndOthers(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "gateway")
	rs.Resource().Attributes().PutStr("service.namespace", "prod")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	add := func(name string, kind ptrace.SpanKind, trace byte, durNS uint64, attrs map[string]any) {
		sp := spans.AppendEmpty()
		sp.SetName(name)
		sp.SetKind(kind)
		if trace != 0 {
			sp.SetTraceID(pcommon.TraceID{trace, 1})
		}
		sp.SetStartTimestamp(t0)
		sp.SetEndTimestamp(t0 + pcommon.Timestamp(durNS))
		_ = sp.Attributes().FromRaw(attrs)
	}
	// A GenAI server span: e2e is its duration, everything is other.
	add("chat llama", ptrace.SpanKindServer, 1, 750_000_000, map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "llama", "gen_ai.response.id": "resp-1",
		"gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 22,
	})
	// The same request seen by its caller: ignored, or it would count twice.
	add("chat llama", ptrace.SpanKindClient, 1, 800_000_000, map[string]any{"gen_ai.operation.name": "chat"})
	// Not an LLM span.
	add("GET /healthz", ptrace.SpanKindServer, 3, 1000, nil)
	// LLM spans that are wrong.
	add("llm_request", ptrace.SpanKindServer, 4, 1_000_000_000, map[string]any{"gen_ai.latency.e2e": 1.0, "gen_ai.latency.time_in_queue": 2.0})
	add("llm_request", ptrace.SpanKindServer, 5, 1_000_000_000, map[string]any{"gen_ai.latency.e2e": -1.0})
	add("llm_request", ptrace.SpanKindServer, 6, 1_000_000_000, map[string]any{"gen_ai.latency.e2e": "fast"})
	add("llm_request", ptrace.SpanKindServer, 0, 1_000_000_000, map[string]any{"gen_ai.latency.e2e": 0.5})

	items, ignored, rejected := TracesToItems(td, RequestLimits{})
	if len(items) != 1 || ignored != 2 || len(rejected) != 4 {
		t.Fatalf("%d items, %d ignored, rejected %q", len(items), ignored, rejected)
	}
	r := items[0].Record
	if r.E2E != 0.75 || r.Stages[records.StageOther] != 0.75 || r.RequestID != "resp-1" || r.PromptTokens != 11 || r.OutputTokens != 22 ||
		!labels.Equal(r.Labels, labels.FromStrings("job", "prod/gateway", "model_name", "llama")) || items[0].HasTTFT {
		t.Errorf("GenAI span as %+v", r)
	}
	for i, want := range []string{"more than end-to-end", "gen_ai.latency.e2e = -1", "is a Str", "missing ids"} {
		if !strings.Contains(rejected[i], want) {
			t.Errorf("rejection %d %q, want it to mention %q", i, rejected[i], want)
		}
	}
}

func postOTLP(t *testing.T, h http.Handler, path, ct string, gz bool, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
	}
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestTracesHandler posts vLLM spans as protobuf, JSON and gzip, plus one
// bad span: the good spans are stored with their trace ids and the
// response's partial_success names the bad one.
func TestTracesHandler(t *testing.T) {
	db := openTestDB(t)
	p := openTestRecords(t, db, testRecordsOptions(t.TempDir()))
	h := NewTraces(p, nil, nil)

	td := vllmTraces()
	bad := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	bad.SetName("llm_request")
	bad.SetTraceID(pcommon.TraceID{9, 9})
	bad.SetStartTimestamp(t0)
	bad.SetEndTimestamp(t0 - 1)
	req := ptraceotlp.NewExportRequestFromTraces(td)
	pb, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	js, err := req.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		ct   string
		gz   bool
		body []byte
	}{{"application/x-protobuf", false, pb}, {"application/json", false, js}, {"application/x-protobuf", true, pb}} {
		w := postOTLP(t, h, "/v1/traces", c.ct, c.gz, c.body)
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != c.ct {
			t.Fatalf("post %d: %d %s %s", i, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		resp := ptraceotlp.NewExportResponse()
		if c.ct == "application/json" {
			err = resp.UnmarshalJSON(w.Body.Bytes())
		} else {
			err = resp.UnmarshalProto(w.Body.Bytes())
		}
		if err != nil {
			t.Fatal(err)
		}
		if ps := resp.PartialSuccess(); ps.RejectedSpans() != 1 || !strings.Contains(ps.ErrorMessage(), "non-monotonic timestamps") {
			t.Errorf("post %d: partial success %d %q", i, ps.RejectedSpans(), ps.ErrorMessage())
		}
	}
	got := selectAllRecords(t, p.Store())
	if len(got) != 6 {
		t.Fatalf("%d records, want 2 spans × 3 posts", len(got))
	}
	for _, r := range got {
		if r.TraceID != records.TraceID(traceV1) && r.TraceID != records.TraceID(traceV0) {
			t.Errorf("record with trace %x", r.TraceID)
		}
	}
	// e2e 1.5 s is in the grid bucket (2^(2/4), 2^(3/4)] = (1.414, 1.682];
	// e2e 2 s in (2^(3/4), 2^(4/4)] = (1.682, 2].
	if c := one(t, db, SeriesTailRequests, "instance", "gpu-node-1:8000", "job", "vllm", LabelE2EBucket, "1.6817928305074292"); c.f != 3 {
		t.Errorf("tail count of the 1.5 s bucket = %v, want 3", c.f)
	}
	if c := one(t, db, SeriesTailRequests, "instance", "gpu-node-1:8000", "job", "vllm", "model_name", "meta-llama/Llama-3.1-8B-Instruct", LabelE2EBucket, "2"); c.f != 3 {
		t.Errorf("tail count of the 2 s bucket = %v, want 3", c.f)
	}

	for _, c := range []struct {
		ct, enc string
		body    []byte
		code    int
	}{
		{"text/xml", "", pb, http.StatusUnsupportedMediaType},
		{"application/x-protobuf", "br", pb, http.StatusUnsupportedMediaType},
		{"application/x-protobuf", "", []byte("\xff\xff\xff"), http.StatusBadRequest},
		{"application/json", "", []byte("{"), http.StatusBadRequest},
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(c.body))
		req.Header.Set("Content-Type", c.ct)
		if c.enc != "" {
			req.Header.Set("Content-Encoding", c.enc)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.code {
			t.Errorf("%s %s: %d, want %d", c.ct, c.enc, w.Code, c.code)
		}
	}
	// Over the span limit: refused whole.
	o := testRecordsOptions(t.TempDir())
	o.MaxRecordsPerRequest = 1
	small := NewTraces(openTestRecords(t, openTestDB(t), o), nil, nil)
	if w := postOTLP(t, small, "/v1/traces", "application/x-protobuf", false, pb); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("3 spans over a limit of 1: %d", w.Code)
	}
}
