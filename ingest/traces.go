package ingest

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tailroot/tailroot/internal/validation"
	"github.com/tailroot/tailroot/tsdb/records"
)

// Span attributes read from LLM request spans. The gen_ai.latency.* and
// gen_ai.request.id names are vLLM's (vllm/tracing.py SpanAttributes); the
// others are OpenTelemetry GenAI semantic conventions, old and new names.
const (
	attrQueue          = "gen_ai.latency.time_in_queue"
	attrTTFT           = "gen_ai.latency.time_to_first_token"
	attrE2E            = "gen_ai.latency.e2e"
	attrScheduler      = "gen_ai.latency.time_in_scheduler"
	attrModelForward   = "gen_ai.latency.time_in_model_forward"
	attrModelExecute   = "gen_ai.latency.time_in_model_execute"
	attrModelPrefill   = "gen_ai.latency.time_in_model_prefill"
	attrModelDecode    = "gen_ai.latency.time_in_model_decode"
	attrModelInference = "gen_ai.latency.time_in_model_inference"
	attrPromptTokens   = "gen_ai.usage.prompt_tokens"
	attrOutputTokens   = "gen_ai.usage.completion_tokens"
	attrInputTokens    = "gen_ai.usage.input_tokens"
	attrOutputTokens2  = "gen_ai.usage.output_tokens"
	attrResponseModel  = "gen_ai.response.model"
	attrRequestModel   = "gen_ai.request.model"
	attrRequestID      = "gen_ai.request.id"
	attrResponseID     = "gen_ai.response.id"
	attrOperation      = "gen_ai.operation.name"

	vllmSpanName = "llm_request"
)

// Traces is the POST /v1/traces handler (OTLP/HTTP traces, protobuf or
// JSON, optionally gzip). LLM request spans become request records that keep
// their trace id (SpanToItem says which spans and how); other spans are
// accepted and dropped, since tailroot is not a trace store.
//
// Status codes follow OTLP/HTTP: 200 with an ExportTraceServiceResponse,
// whose partial_success counts and names the LLM spans that were rejected
// as invalid (the others were stored); 400 for a body that does not decode;
// 413 over the body or span limit; 415 for another Content-Type or
// Content-Encoding; 503 when the store failed, so the exporter retries.
type Traces struct {
	p      *Records
	logger *slog.Logger
	spans  *prometheus.CounterVec
}

// NewTraces returns the handler; records go to p.
func NewTraces(p *Records, logger *slog.Logger, reg prometheus.Registerer) *Traces {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Traces{p: p, logger: logger, spans: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Name: "tailroot_otlp_spans_total",
		Help: "OTLP spans received, by outcome: record (stored as a request record), ignored (not an LLM request span), rejected (an LLM span that was invalid).",
	}, []string{"outcome"})}
}

// otlpFormat is the encoding of an OTLP/HTTP body.
type otlpFormat int

const (
	otlpProto otlpFormat = iota
	otlpJSON
)

func (f otlpFormat) contentType() string {
	if f == otlpJSON {
		return "application/json"
	}
	return "application/x-protobuf"
}

// errNoContentType refuses a write without a Content-Type (415): every
// real sender names its format, while a cross-site browser POST with no
// type needs no CORS preflight, so accepting one lets any web page write.
var errNoContentType = errors.New("the request has no Content-Type; writes must name their format")

func parseOTLPContentType(ct string) (otlpFormat, error) {
	if ct == "" {
		// A browser may POST a body without a Content-Type across sites
		// without asking first; writes need the type they really are.
		return 0, errNoContentType
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return 0, fmt.Errorf("content type %q: %w", ct, err)
	}
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		return otlpProto, nil
	case "application/json":
		return otlpJSON, nil
	}
	return 0, fmt.Errorf("content type %q is not accepted; send application/x-protobuf or application/json", mt)
}

// writeOTLPError answers with a google.rpc.Status in the request's
// encoding, as OTLP/HTTP asks.
func writeOTLPError(w http.ResponseWriter, f otlpFormat, code int, err error) {
	retryAfter(w, code)
	st := &statuspb.Status{Code: grpcCode(code), Message: err.Error()}
	var body []byte
	if f == otlpJSON {
		body, _ = protojson.Marshal(st)
	} else {
		body, _ = proto.Marshal(st)
	}
	w.Header().Set("Content-Type", f.contentType())
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// grpcCode maps an HTTP status to the gRPC code OTLP pairs with it.
func grpcCode(http int) int32 {
	switch http {
	case 400:
		return 3 // INVALID_ARGUMENT
	case 413:
		return 8 // RESOURCE_EXHAUSTED
	case 415:
		return 3
	case 503:
		return 14 // UNAVAILABLE
	}
	return 13 // INTERNAL
}

func (h *Traces) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "OTLP traces require POST", http.StatusMethodNotAllowed)
		return
	}
	f, err := parseOTLPContentType(r.Header.Get("Content-Type"))
	if err != nil {
		writeOTLPError(w, otlpProto, http.StatusUnsupportedMediaType, err)
		return
	}
	o := h.p.opts
	body, status, err := readBody(r, o.MaxBodyBytes, o.MaxDecodedBytes, 2)
	if err != nil {
		writeOTLPError(w, f, status, err)
		return
	}
	req := ptraceotlp.NewExportRequest()
	if f == otlpJSON {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		writeOTLPError(w, f, http.StatusBadRequest, fmt.Errorf("decode OTLP traces: %w", err))
		return
	}
	td := req.Traces()
	if n := td.SpanCount(); n > o.MaxRecordsPerRequest {
		writeOTLPError(w, f, http.StatusRequestEntityTooLarge, fmt.Errorf("request has %d spans, over the limit of %d", n, o.MaxRecordsPerRequest))
		return
	}
	items, ignored, rejected := TracesToItems(td, o.Limits)
	for i := 0; i < len(items); {
		if err := h.p.CheckItem(&items[i]); err != nil {
			rejected = append(rejected, fmt.Sprintf("span %s: %v", spanName(&items[i].Record), err))
			items = append(items[:i], items[i+1:]...)
			continue
		}
		i++
	}
	h.spans.WithLabelValues("ignored").Add(float64(ignored))
	h.spans.WithLabelValues("rejected").Add(float64(len(rejected)))
	if len(rejected) > 0 {
		h.p.m.rejected.WithLabelValues("traces").Add(float64(len(rejected)))
	}
	if err := h.p.Append(r.Context(), "traces", items); err != nil {
		code := storeStatus(w, err)
		if errors.Is(err, records.ErrOutOfRetention) {
			code = http.StatusBadRequest
		}
		writeOTLPError(w, f, code, fmt.Errorf("store request records: %w", err))
		return
	}
	h.spans.WithLabelValues("record").Add(float64(len(items)))

	resp := ptraceotlp.NewExportResponse()
	if len(rejected) > 0 {
		ps := resp.PartialSuccess()
		ps.SetRejectedSpans(int64(len(rejected)))
		msg := strings.Join(rejected[:min(len(rejected), 10)], "; ")
		if len(rejected) > 10 {
			msg += fmt.Sprintf("; and %d more", len(rejected)-10)
		}
		ps.SetErrorMessage(msg)
	}
	var out []byte
	if f == otlpJSON {
		out, err = resp.MarshalJSON()
	} else {
		out, err = resp.MarshalProto()
	}
	if err != nil {
		writeOTLPError(w, f, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", f.contentType())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

func spanName(r *records.Record) string {
	if r.RequestID != "" {
		return fmt.Sprintf("%x (request %s)", r.TraceID[:], r.RequestID)
	}
	return fmt.Sprintf("%x", r.TraceID[:])
}

// TracesToItems converts every LLM request span of td. ignored counts the
// other spans; rejected describes the LLM spans that were invalid.
func TracesToItems(td ptrace.Traces, lim RequestLimits) (items []Item, ignored int, rejected []string) {
	lim = lim.withDefaults()
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		rs := rss.At(i)
		res := rs.Resource()
		sss := rs.ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				sp := spans.At(k)
				it, ok, err := SpanToItem(res, sp, lim)
				switch {
				case err != nil:
					rejected = append(rejected, fmt.Sprintf("span %s/%s %q: %v", sp.TraceID(), sp.SpanID(), sp.Name(), err))
				case ok:
					items = append(items, it)
				default:
					ignored++
				}
			}
		}
	}
	return items, ignored, rejected
}

// SpanToItem converts one span into a request record. ok is false for a
// span that is not an LLM request span.
//
// vLLM's llm_request span (or any span with gen_ai.latency.e2e or
// gen_ai.latency.time_in_queue) maps as follows; every attribute is
// seconds:
//
//	arrival  = span start
//	e2e      = gen_ai.latency.e2e, else end − start
//	queue    = gen_ai.latency.time_in_queue
//	prefill  = gen_ai.latency.time_in_model_prefill,
//	           else time_to_first_token − time_in_queue
//	decode   = gen_ai.latency.time_in_model_decode,
//	           else time_in_model_inference − prefill,
//	           else e2e − time_to_first_token
//	ttft     = gen_ai.latency.time_to_first_token
//	other    = e2e − Σ (the residual: frontend, tokenisation, scheduling)
//
// time_in_scheduler, time_in_model_forward and time_in_model_execute
// overlap prefill and decode (they are GPU or scheduler time inside those
// intervals), so they are not stages; they are checked to be durations.
// Any other span with gen_ai.operation.name (the OpenTelemetry GenAI
// conventions) and kind SERVER, INTERNAL or UNSPECIFIED maps with e2e = its
// duration and everything in other; CLIENT spans time the same request from
// the caller and would count it twice, so they are ignored.
//
// Labels: model_name from gen_ai.response.model (else gen_ai.request.model);
// job and instance from the resource the way Prometheus 3 derives them
// (service.namespace/service.name and service.instance.id). Ids:
// gen_ai.request.id (else gen_ai.response.id) and the span's trace id.
func SpanToItem(res pcommon.Resource, sp ptrace.Span, lim RequestLimits) (Item, bool, error) {
	attrs := sp.Attributes()
	_, hasE2E := attrs.Get(attrE2E)
	_, hasQueue := attrs.Get(attrQueue)
	vllm := sp.Name() == vllmSpanName || hasE2E || hasQueue
	if !vllm {
		if _, ok := attrs.Get(attrOperation); !ok {
			return Item{}, false, nil
		}
		if k := sp.Kind(); k != ptrace.SpanKindServer && k != ptrace.SpanKindInternal && k != ptrace.SpanKindUnspecified {
			return Item{}, false, nil
		}
	}
	var it Item
	r := &it.Record
	start, end := sp.StartTimestamp(), sp.EndTimestamp()
	if start == 0 {
		return it, true, errors.New("start time is 0")
	}
	if _, err := validation.UnixNano(uint64(start)); err != nil {
		return it, true, fmt.Errorf("start time: %w", err)
	}
	if _, err := validation.UnixNano(uint64(end)); err != nil {
		return it, true, fmt.Errorf("end time: %w", err)
	}
	if end < start {
		return it, true, fmt.Errorf("non-monotonic timestamps: end %s is before start %s", fmtNS(int64(end)), fmtNS(int64(start)))
	}
	r.Time = int64(start) / 1e6

	get := func(name string) (float64, bool, error) {
		v, ok := attrs.Get(name)
		if !ok {
			return 0, false, nil
		}
		var f float64
		switch v.Type() {
		case pcommon.ValueTypeDouble:
			f = v.Double()
		case pcommon.ValueTypeInt:
			f = float64(v.Int())
		default:
			return 0, false, fmt.Errorf("%s is a %s, want a number of seconds", name, v.Type())
		}
		if !(f >= 0) || math.IsInf(f, 1) {
			return 0, false, fmt.Errorf("%s = %v is not a finite duration ≥ 0", name, f)
		}
		return f, true, nil
	}
	var (
		vals = map[string]float64{}
		have = map[string]bool{}
	)
	names := []string{attrE2E, attrQueue, attrTTFT, attrModelPrefill, attrModelDecode, attrModelInference, attrScheduler, attrModelForward, attrModelExecute}
	if !vllm {
		names = []string{attrE2E, attrTTFT}
	}
	for _, name := range names {
		v, ok, err := get(name)
		if err != nil {
			return it, true, err
		}
		vals[name], have[name] = v, ok
	}
	r.E2E = secondsBetween(int64(start), int64(end))
	if have[attrE2E] {
		r.E2E = vals[attrE2E]
	}
	if have[attrTTFT] {
		r.TTFT, it.HasTTFT = vals[attrTTFT], true
	}
	if vllm {
		queue := vals[attrQueue]
		r.Stages[records.StageQueue] = queue
		prefill, havePrefill := vals[attrModelPrefill], have[attrModelPrefill]
		if !havePrefill && have[attrTTFT] && have[attrQueue] && r.TTFT >= queue {
			prefill, havePrefill = r.TTFT-queue, true
		}
		r.Stages[records.StagePrefill] = prefill
		switch {
		case have[attrModelDecode]:
			r.Stages[records.StageDecode] = vals[attrModelDecode]
		case have[attrModelInference] && havePrefill && vals[attrModelInference] >= prefill:
			r.Stages[records.StageDecode] = vals[attrModelInference] - prefill
		case have[attrTTFT] && r.E2E >= r.TTFT:
			r.Stages[records.StageDecode] = r.E2E - r.TTFT
		}
	}
	if err := settleStages(r); err != nil {
		return it, true, err
	}

	reqID := stringAttr(attrs, attrRequestID)
	if reqID == "" {
		reqID = stringAttr(attrs, attrResponseID)
	}
	tid := sp.TraceID()
	traceHex := ""
	if !tid.IsEmpty() {
		traceHex = tid.String()
	}
	if err := setIDs(r, reqID, traceHex); err != nil {
		return it, true, err
	}
	if n, ok := intAttr(attrs, attrPromptTokens, attrInputTokens); ok {
		r.PromptTokens = n
	}
	if n, ok := intAttr(attrs, attrOutputTokens, attrOutputTokens2); ok {
		r.OutputTokens = n
	}

	lm := map[string]string{}
	if m := stringAttr(attrs, attrResponseModel); m != "" {
		lm["model_name"] = m
	} else if m := stringAttr(attrs, attrRequestModel); m != "" {
		lm["model_name"] = m
	}
	ra := res.Attributes()
	if svc := stringAttr(ra, "service.name"); svc != "" {
		if ns := stringAttr(ra, "service.namespace"); ns != "" {
			svc = ns + "/" + svc
		}
		lm["job"] = svc
	}
	if inst := stringAttr(ra, "service.instance.id"); inst != "" {
		lm["instance"] = inst
	}
	ls, err := buildLabels(lm, lim)
	if err != nil {
		return it, true, err
	}
	r.Labels = ls
	if err := r.Validate(); err != nil {
		return it, true, err
	}
	return it, true, nil
}

func stringAttr(m pcommon.Map, name string) string {
	v, ok := m.Get(name)
	if !ok {
		return ""
	}
	if v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return v.AsString()
}

// intAttr returns the first of names present as a non-negative integer
// that fits in uint32.
func intAttr(m pcommon.Map, names ...string) (uint32, bool) {
	for _, name := range names {
		v, ok := m.Get(name)
		if !ok {
			continue
		}
		var n float64
		switch v.Type() {
		case pcommon.ValueTypeInt:
			n = float64(v.Int())
		case pcommon.ValueTypeDouble:
			n = v.Double()
		default:
			continue
		}
		if n >= 0 && n <= math.MaxUint32 && n == math.Trunc(n) {
			return uint32(n), true
		}
	}
	return 0, false
}
