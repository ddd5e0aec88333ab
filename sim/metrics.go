package sim

import (
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/metadata"
)

// Bucket boundaries, copied from vLLM's PrometheusStatLogger.__init__ in
// vllm/v1/metrics/loggers.py (the lists are the same from v0.8 through
// v0.12). Classic histograms get a +Inf bucket on top of each list.
var (
	// histogram_time_to_first_token ("vllm:time_to_first_token_seconds").
	ttftBuckets = []float64{
		0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0,
		2560.0,
	}
	// histogram_inter_token_latency, histogram_time_per_output_token and
	// histogram_request_time_per_output_token share this list.
	itlBuckets = []float64{
		0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
	}
	// request_latency_buckets: e2e, queue, inference, prefill and decode time.
	requestLatencyBuckets = []float64{
		0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
	}
	// histogram_iteration_tokens ("vllm:iteration_tokens_total").
	iterationTokensBuckets = []float64{
		1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
	}
)

// build125Buckets mirrors vLLM's build_1_2_5_buckets(max_model_len), used for
// the per-request token-count histograms: 1, 2, 5, 10, 20, 50, … up to and
// including max.
func build125Buckets(maxValue int) []float64 {
	var b []float64
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			v := m * p
			if v > maxValue {
				return b
			}
			b = append(b, float64(v))
		}
	}
}

// family is one metric family as vLLM declares it. name is the name a
// Prometheus scrape stores: counters carry _total; histograms are the base of
// their _bucket/_sum/_count series (and the name of the native form).
type family struct {
	name    string
	meta    metadata.Metadata
	buckets []float64 // classic bounds without +Inf; nil = per-model (token counts)
	native  bool      // a latency histogram, also emitted natively on request
}

func counter(name, help string) *family {
	return &family{name: name, meta: metadata.Metadata{Type: model.MetricTypeCounter, Help: help}}
}

func gauge(name, help string) *family {
	return &family{name: name, meta: metadata.Metadata{Type: model.MetricTypeGauge, Help: help}}
}

// latency declares a seconds histogram. vLLM declares no units; the unit is
// the one the _seconds suffix names, as OpenMetrics would carry it.
func latency(name, help string, buckets []float64) *family {
	return &family{
		name:    name,
		meta:    metadata.Metadata{Type: model.MetricTypeHistogram, Help: help, Unit: "seconds"},
		buckets: buckets,
		native:  true,
	}
}

func countHistogram(name, help string, buckets []float64) *family {
	return &family{name: name, meta: metadata.Metadata{Type: model.MetricTypeHistogram, Help: help}, buckets: buckets}
}

// The families, with vLLM's names and documentation strings.
var (
	famRunning = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
	famWaiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
	famKVUsage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")

	famPrefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	famPrefixHits    = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	famPreemptions   = counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	famPromptTokens  = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	famGenTokens     = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	famSuccess       = counter("vllm:request_success_total", "Count of successfully processed requests.")

	famReqPromptTokens = countHistogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", nil)
	famReqGenTokens    = countHistogram("vllm:request_generation_tokens", "Number of generation tokens processed.", nil)
	famReqMaxTokens    = countHistogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", nil)
	famIterTokens      = countHistogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", iterationTokensBuckets)

	famTTFT      = latency("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	famITL       = latency("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets)
	famReqTPOT   = latency("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", itlBuckets)
	famE2E       = latency("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets)
	famQueue     = latency("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets)
	famInference = latency("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", requestLatencyBuckets)
	famPrefill   = latency("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets)
	famDecode    = latency("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", requestLatencyBuckets)

	// Deprecated names (vLLM 0.9–0.11), emitted with Options.DeprecatedMetrics.
	famGPUCacheUsage    = gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.")
	famGPUPrefixQueries = counter("vllm:gpu_prefix_cache_queries_total", "GPU prefix cache queries, in terms of number of queried tokens.DEPRECATED: Use vllm:prefix_cache_queries instead.")
	famGPUPrefixHits    = counter("vllm:gpu_prefix_cache_hits_total", "GPU prefix cache hits, in terms of number of cached tokens.DEPRECATED: Use vllm:prefix_cache_hits instead.")
	famTPOT             = latency("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.", itlBuckets)
)

// finishReasons are the finished_reason label values of
// vllm:request_success_total (str(FinishReason) in vllm/v1/engine).
var finishReasons = [...]string{"stop", "length", "abort"}

const (
	reasonStop = iota
	reasonLength
	reasonAbort
)

// Label names a vLLM server and the scrape attach to every series.
const (
	labelModel    = "model_name"
	labelEngine   = "engine"
	labelJob      = "job"
	labelInstance = "instance"
	labelReason   = "finished_reason"
)
