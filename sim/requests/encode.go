package requests

import (
	"encoding/hex"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// LineOptions choose what AppendNDJSON sends.
type LineOptions struct {
	// TokenTimes sends every token's emission time; otherwise the
	// inter-token gaps go as itl (seconds), which is smaller on the wire.
	TokenTimes bool
	// PromptTokenIDs sends the prompt's token ids (they must have been kept,
	// Options.PromptTokenIDs) instead of the precomputed entropy.
	PromptTokenIDs bool
}

// AppendNDJSON appends r as one line of POST /api/v1/requests
// (docs/requests.schema.json), newline included. Timestamps are Unix
// seconds with nine decimals, which the server reads exactly.
func (r *Request) AppendNDJSON(dst []byte, o LineOptions) []byte {
	dst = append(dst, `{"request_id":`...)
	dst = strconv.AppendQuote(dst, r.ID)
	dst = append(dst, `,"trace_id":"`...)
	dst = hex.AppendEncode(dst, r.TraceID[:])
	dst = append(dst, `","labels":{"model_name":`...)
	dst = strconv.AppendQuote(dst, r.Model)
	dst = append(dst, `,"instance":`...)
	dst = strconv.AppendQuote(dst, r.Instance)
	dst = append(dst, `,"job":`...)
	dst = strconv.AppendQuote(dst, r.Job)
	dst = append(dst, '}')
	for _, f := range []struct {
		name string
		ns   int64
	}{
		{"arrival", r.Arrival},
		{"queued", r.Queued},
		{"scheduled", r.Scheduled},
		{"first_token", r.FirstToken},
		{"last_token", r.LastToken},
		{"finished", r.Finished},
	} {
		dst = append(dst, `,"`...)
		dst = append(dst, f.name...)
		dst = append(dst, `":`...)
		dst = appendUnixSeconds(dst, f.ns)
	}
	if o.TokenTimes {
		dst = append(dst, `,"token_times":[`...)
		for i, t := range r.TokenTimes {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendUnixSeconds(dst, t)
		}
		dst = append(dst, ']')
	} else if len(r.TokenTimes) > 1 {
		dst = append(dst, `,"itl":[`...)
		for i := 1; i < len(r.TokenTimes); i++ {
			if i > 1 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendFloat(dst, float64(r.TokenTimes[i]-r.TokenTimes[i-1])/1e9, 'g', -1, 64)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.PromptTokens), 10)
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.OutputTokens), 10)
	dst = append(dst, `,"stages":{"tokenize":`...)
	dst = strconv.AppendFloat(dst, r.Tokenize, 'g', -1, 64)
	dst = append(dst, `,"detokenize":`...)
	dst = strconv.AppendFloat(dst, r.Detokenize, 'g', -1, 64)
	dst = append(dst, `,"network":`...)
	dst = strconv.AppendFloat(dst, r.Network, 'g', -1, 64)
	dst = append(dst, '}')
	if o.PromptTokenIDs && len(r.PromptTokenIDs) == r.PromptTokens {
		dst = append(dst, `,"prompt_token_ids":[`...)
		for i, id := range r.PromptTokenIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, id, 10)
		}
		dst = append(dst, ']')
	} else {
		dst = append(dst, `,"prompt_entropy":`...)
		dst = strconv.AppendFloat(dst, r.PromptEntropy, 'g', -1, 64)
	}
	return append(dst, "}\n"...)
}

// appendUnixSeconds writes ns as decimal seconds with nine fractional
// digits.
func appendUnixSeconds(dst []byte, ns int64) []byte {
	dst = strconv.AppendInt(dst, ns/1e9, 10)
	frac := strconv.AppendInt(nil, 1e9+ns%1e9, 10)
	dst = append(dst, '.')
	return append(dst, frac[1:]...)
}

// vLLM span attribute names (vllm/tracing.py SpanAttributes).
const (
	attrQueue        = "gen_ai.latency.time_in_queue"
	attrTTFT         = "gen_ai.latency.time_to_first_token"
	attrE2E          = "gen_ai.latency.e2e"
	attrPrefill      = "gen_ai.latency.time_in_model_prefill"
	attrDecode       = "gen_ai.latency.time_in_model_decode"
	attrInference    = "gen_ai.latency.time_in_model_inference"
	attrPromptTokens = "gen_ai.usage.prompt_tokens"
	attrOutputTokens = "gen_ai.usage.completion_tokens"
	attrModel        = "gen_ai.response.model"
	attrRequestID    = "gen_ai.request.id"
	attrMaxTokens    = "gen_ai.request.max_tokens"
	attrTemperature  = "gen_ai.request.temperature"
	attrTopP         = "gen_ai.request.top_p"
	attrN            = "gen_ai.request.n"
)

// AppendSpans adds reqs to td as vLLM emits them: one resource per
// instance (service.name = Job, service.instance.id = Instance), scope
// "vllm.llm_engine", and per request a SERVER span "llm_request" that
// starts at arrival and ends when the request finished, carrying the
// gen_ai.* attributes of vLLM's do_tracing (durations in seconds as
// doubles, token counts as ints). The spans do not carry tokenize,
// detokenize or network times, which vLLM does not report; those land in
// the residual stage.
func AppendSpans(td ptrace.Traces, reqs []Request) {
	byInstance := map[string]ptrace.SpanSlice{}
	for i := range reqs {
		r := &reqs[i]
		spans, ok := byInstance[r.Instance]
		if !ok {
			rs := td.ResourceSpans().AppendEmpty()
			ra := rs.Resource().Attributes()
			ra.PutStr("service.name", r.Job)
			ra.PutStr("service.instance.id", r.Instance)
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("vllm.llm_engine")
			spans = ss.Spans()
			byInstance[r.Instance] = spans
		}
		sp := spans.AppendEmpty()
		sp.SetName("llm_request")
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetTraceID(pcommon.TraceID(r.TraceID))
		var sid [8]byte
		copy(sid[:], r.TraceID[8:])
		sid[0] ^= 0x5a
		sp.SetSpanID(pcommon.SpanID(sid))
		sp.SetStartTimestamp(pcommon.Timestamp(r.Arrival))
		sp.SetEndTimestamp(pcommon.Timestamp(r.Finished))
		a := sp.Attributes()
		sec := func(from, to int64) float64 { return float64(to-from) / 1e9 }
		a.PutDouble(attrTTFT, sec(r.Arrival, r.FirstToken))
		a.PutDouble(attrE2E, sec(r.Arrival, r.Finished))
		a.PutDouble(attrQueue, sec(r.Queued, r.Scheduled))
		a.PutInt(attrPromptTokens, int64(r.PromptTokens))
		a.PutInt(attrOutputTokens, int64(r.OutputTokens))
		a.PutDouble(attrPrefill, sec(r.Scheduled, r.FirstToken))
		a.PutDouble(attrDecode, sec(r.FirstToken, r.LastToken))
		a.PutDouble(attrInference, sec(r.Scheduled, r.LastToken))
		a.PutStr(attrRequestID, r.ID)
		a.PutStr(attrModel, r.Model)
		a.PutInt(attrMaxTokens, 4096)
		a.PutDouble(attrTemperature, 0.7)
		a.PutDouble(attrTopP, 0.95)
		a.PutInt(attrN, 1)
	}
}
