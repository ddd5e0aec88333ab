package ingest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tailroot/tailroot/tsdb/records"
)

// Targets a source metric can map onto besides the canonical stages
// (records.Stage names): whole-request and composite quantities that
// engines export but that are not one stage.
const (
	// TargetE2E is the end-to-end latency.
	TargetE2E = "e2e"
	// TargetTTFT is the time to first token (queue + prefill + the
	// frontend time before them).
	TargetTTFT = "ttft"
	// TargetITL is the inter-token latency (time per output token).
	TargetITL = "itl"
	// TargetInference is prefill + decode, for engines that do not split
	// them.
	TargetInference = "inference"
)

// SourceKind says how a source metric measures its quantity.
type SourceKind int

const (
	// Histogram is a latency histogram in seconds, stored either classic
	// (name_sum, name_count, name_bucket) or native (name).
	Histogram SourceKind = iota
	// CounterMicros is a cumulative counter of microseconds summed over
	// requests; the mean per request divides its rate by the rate of the
	// request counter Count (Triton's nv_inference_*_duration_us).
	CounterMicros
)

// SourceMetric maps one metric an inference server exports, under the
// name it is stored as, onto a canonical stage or a Target*. Source series
// are stored as they arrive; the mapping is applied at query time, so it
// can be read across engines (see MeanQuery).
type SourceMetric struct {
	// Engine is vllm, sglang, tgi, triton, trtllm or otel-genai.
	Engine string
	// Name is the metric name as stored (for histograms the family name,
	// without _sum/_count/_bucket).
	Name string
	// Target is a canonical stage name or a Target* constant.
	Target string
	Kind   SourceKind
	// Count is the request counter CounterMicros divides by.
	Count string
	// Matchers restrict the series, in PromQL syntax without braces
	// (Triton reports its ensemble's pre- and post-processing models as
	// models of their own).
	Matchers string
}

// StageSources is the documented mapping (docs/stages.md) from engine
// metrics to canonical stages. Where an engine reports a composite (TTFT,
// inference) it maps to that composite, never to a stage it does not
// measure.
var StageSources = []SourceMetric{
	{Engine: "vllm", Name: "vllm:e2e_request_latency_seconds", Target: TargetE2E},
	{Engine: "vllm", Name: "vllm:request_queue_time_seconds", Target: "queue"},
	{Engine: "vllm", Name: "vllm:request_prefill_time_seconds", Target: "prefill"},
	{Engine: "vllm", Name: "vllm:request_decode_time_seconds", Target: "decode"},
	{Engine: "vllm", Name: "vllm:request_inference_time_seconds", Target: TargetInference},
	{Engine: "vllm", Name: "vllm:time_to_first_token_seconds", Target: TargetTTFT},
	{Engine: "vllm", Name: "vllm:inter_token_latency_seconds", Target: TargetITL},
	{Engine: "vllm", Name: "vllm:time_per_output_token_seconds", Target: TargetITL},

	{Engine: "sglang", Name: "sglang:e2e_request_latency_seconds", Target: TargetE2E},
	{Engine: "sglang", Name: "sglang:queue_time_seconds", Target: "queue"},
	{Engine: "sglang", Name: "sglang:time_to_first_token_seconds", Target: TargetTTFT},
	{Engine: "sglang", Name: "sglang:inter_token_latency_seconds", Target: TargetITL},
	{Engine: "sglang", Name: "sglang:time_per_output_token_seconds", Target: TargetITL},

	{Engine: "tgi", Name: "tgi_request_duration", Target: TargetE2E},
	{Engine: "tgi", Name: "tgi_request_queue_duration", Target: "queue"},
	{Engine: "tgi", Name: "tgi_request_validation_duration", Target: "tokenize"},
	{Engine: "tgi", Name: "tgi_request_inference_duration", Target: TargetInference},
	{Engine: "tgi", Name: "tgi_request_mean_time_per_token_duration", Target: TargetITL},

	{Engine: "triton", Name: "nv_inference_request_duration_us", Target: TargetE2E, Kind: CounterMicros, Count: "nv_inference_request_success", Matchers: `model!~"preprocessing|postprocessing"`},
	{Engine: "triton", Name: "nv_inference_queue_duration_us", Target: "queue", Kind: CounterMicros, Count: "nv_inference_request_success", Matchers: `model!~"preprocessing|postprocessing"`},
	{Engine: "triton", Name: "nv_inference_compute_infer_duration_us", Target: TargetInference, Kind: CounterMicros, Count: "nv_inference_request_success", Matchers: `model!~"preprocessing|postprocessing|ensemble"`},
	{Engine: "triton", Name: "nv_inference_compute_infer_duration_us", Target: "tokenize", Kind: CounterMicros, Count: "nv_inference_request_success", Matchers: `model="preprocessing"`},
	{Engine: "triton", Name: "nv_inference_compute_infer_duration_us", Target: "detokenize", Kind: CounterMicros, Count: "nv_inference_request_success", Matchers: `model="postprocessing"`},

	{Engine: "trtllm", Name: "trtllm_e2e_request_latency_seconds", Target: TargetE2E},
	{Engine: "trtllm", Name: "trtllm_request_queue_time_seconds", Target: "queue"},
	{Engine: "trtllm", Name: "trtllm_request_prefill_time_seconds", Target: "prefill"},
	{Engine: "trtllm", Name: "trtllm_request_decode_time_seconds", Target: "decode"},
	{Engine: "trtllm", Name: "trtllm_request_inference_time_seconds", Target: TargetInference},
	{Engine: "trtllm", Name: "trtllm_time_to_first_token_seconds", Target: TargetTTFT},
	{Engine: "trtllm", Name: "trtllm_time_per_output_token_seconds", Target: TargetITL},

	// OpenTelemetry GenAI server metrics (gen_ai.server.*), as the OTLP
	// endpoint names them (unit suffix added, dots to underscores).
	{Engine: "otel-genai", Name: "gen_ai_server_request_duration_seconds", Target: TargetE2E},
	{Engine: "otel-genai", Name: "gen_ai_server_time_to_first_token_seconds", Target: TargetTTFT},
	{Engine: "otel-genai", Name: "gen_ai_server_time_per_output_token_seconds", Target: TargetITL},
}

// Sources returns the source metrics that map onto target (a canonical
// stage or a Target*), in table order.
func Sources(target string) []SourceMetric {
	var out []SourceMetric
	for _, s := range StageSources {
		if s.Target == target {
			out = append(out, s)
		}
	}
	return out
}

// IsTarget reports whether name is a canonical stage or a Target*.
func IsTarget(name string) bool {
	for s := range records.Stage(records.NumStages) {
		if s.String() == name {
			return true
		}
	}
	return slices.Contains([]string{TargetE2E, TargetTTFT, TargetITL, TargetInference}, name)
}

// MeanQuery returns PromQL for the mean seconds per request of the source
// over a range window (a PromQL duration such as "5m"), aggregated by the
// given labels. Histograms read either storage form:
//
//	(sum by (L) (rate(N_sum[w])) or sum by (L) (histogram_sum(rate(N[w]))))
//	  / (sum by (L) (rate(N_count[w])) or sum by (L) (histogram_count(rate(N[w]))))
//
// Triton's microsecond counters divide by the request counter:
//
//	sum by (L) (rate(N[w])) / 1e6 / sum by (L) (rate(Count[w]))
func (s SourceMetric) MeanQuery(window string, by ...string) (string, error) {
	if window == "" {
		return "", fmt.Errorf("mean query for %s: empty window", s.Name)
	}
	agg := "sum"
	if len(by) > 0 {
		agg = fmt.Sprintf("sum by (%s)", strings.Join(by, ", "))
	}
	sel := func(name string) string {
		m := "__name__=" + quote(name)
		if s.Matchers != "" {
			m += ", " + s.Matchers
		}
		return "{" + m + "}[" + window + "]"
	}
	switch s.Kind {
	case Histogram:
		return fmt.Sprintf("(%[1]s (rate(%[2]s)) or %[1]s (histogram_sum(rate(%[3]s)))) / (%[1]s (rate(%[4]s)) or %[1]s (histogram_count(rate(%[3]s))))",
			agg, sel(s.Name+"_sum"), sel(s.Name), sel(s.Name+"_count")), nil
	case CounterMicros:
		if s.Count == "" {
			return "", fmt.Errorf("mean query for %s: no request counter", s.Name)
		}
		return fmt.Sprintf("%[1]s (rate(%[2]s)) / 1e6 / %[1]s (rate(%[3]s))", agg, sel(s.Name), sel(s.Count)), nil
	}
	return "", fmt.Errorf("mean query for %s: unknown kind %d", s.Name, s.Kind)
}

// quote renders a PromQL string literal.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
