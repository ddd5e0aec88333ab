package sim

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"time"
)

// Remote-write protobuf message names, the values of Options.ProtoMsg and of
// the proto parameter of the Content-Type header.
const (
	ProtoMsgV1 = "prometheus.WriteRequest"        // remote write 1.0
	ProtoMsgV2 = "io.prometheus.write.v2.Request" // remote write 2.0
)

// Options configures a Simulator. Every field says what its zero value means,
// so Options{} is usable for Step; Run needs URL.
type Options struct {
	// URL is the base URL of the tailroot server; Run posts to
	// URL + "/api/v1/write". Empty is allowed for Step-only use; Run then
	// returns an error.
	URL string
	// Interval is the step between two samples of a series, like a scrape
	// interval. 0 = 15s. Must be at least 1ms when set.
	Interval time.Duration
	// Models are the served models. nil or empty = DefaultModels().
	Models []Model
	// InstancesPerModel is the number of vLLM servers per model. 0 = 3.
	InstancesPerModel int
	// Seed makes the generated series reproducible: the same Options and the
	// same Step times give the same series.
	Seed uint64
	// Start is the wall-clock time of the first live step of Run. Zero =
	// time.Now() when Run starts. Step ignores it.
	Start time.Time
	// Backfill is how much history Run generates and sends before Start,
	// as fast as the server accepts it. 0 = none.
	Backfill time.Duration
	// NativeHistograms also emits the latency histograms as native
	// (exponential, schema 3) histograms under the family name, beside the
	// classic _bucket/_sum/_count series — what Prometheus sends when it
	// scrapes both forms.
	NativeHistograms bool
	// DeprecatedMetrics also emits the names vLLM hides behind
	// --show-hidden-metrics-for-version: vllm:gpu_cache_usage_perc,
	// vllm:gpu_prefix_cache_{queries,hits}_total and
	// vllm:time_per_output_token_seconds.
	DeprecatedMetrics bool
	// DiurnalFactor is the ratio of the mean arrival rate at the daily peak
	// to the rate at the trough. 0 = 3; 1 = flat; must be >= 1.
	DiurnalFactor float64
	// PeakHour is the hour of day (UTC, fractional) of the daily peak. Zero
	// = midnight; DefaultOptions sets 14.
	PeakHour float64
	// Noise is the standard deviation, in log space, of a slow (10 minute
	// correlation time) multiplicative wobble on each instance's arrival
	// rate. 0 = none; DefaultOptions sets 0.15.
	Noise float64
	// BatchSamples is the most samples (float and histogram) one request
	// carries. Backfill and catch-up send several steps per request up to it;
	// a step with more samples is split. 0 = 5000.
	BatchSamples int
	// Client sends the requests. nil = a client with a 30s timeout.
	Client *http.Client
	// ProtoMsg selects the remote-write version: ProtoMsgV1 or ProtoMsgV2.
	// "" = ProtoMsgV2.
	ProtoMsg string
	// Logger receives push progress and failures. nil = slog.Default().
	Logger *slog.Logger
	// Covariates also emits, per instance, the node and GPU series
	// tailroot-agent and dcgm-exporter would report (run-queue delay, page
	// faults, GIL waits, block IO and CUDA call latency, SM clock, GPU
	// utilisation, power, memory clock, framebuffer use; see host.go), and
	// lets them drive the serving model. false = vLLM series only, exactly as
	// doc.go describes.
	Covariates bool
	// Faults are incidents to inject (faults.go). A fault turns the host
	// model on for every instance, so the fleet behaves the same with and
	// without Covariates; only what is emitted differs. nil = none.
	Faults []Fault
	// Records keeps every simulated request as a Record (records.go), for
	// TakeRecords; Run hands them to RecordSink. false = none kept.
	Records bool
	// RecordSink receives, in Run, the records of each batch of steps once
	// its series are acknowledged. nil = records are not sent.
	RecordSink RecordSink
	// Sent, when set, is called by Run with the time of the newest step
	// whose series the server acknowledged, before that batch's records go
	// to RecordSink, so a caller can persist it and resume after it
	// (Resume) instead of replaying.
	Sent func(t time.Time)
	// Resume, when set, makes Run start with the step after it instead of
	// Backfill before Start: the steps up to Resume are already stored.
	Resume time.Time
}

// DefaultOptions returns the options `make run` uses: two models with three
// instances each, 15s steps, a 3x day/night swing peaking at 14:00 UTC, and
// one hour of history.
func DefaultOptions() Options {
	return Options{
		URL:               "http://127.0.0.1:9090",
		Interval:          15 * time.Second,
		Models:            DefaultModels(),
		InstancesPerModel: 3,
		Seed:              1,
		Backfill:          time.Hour,
		DiurnalFactor:     3,
		PeakHour:          14,
		Noise:             0.15,
		BatchSamples:      5000,
		ProtoMsg:          ProtoMsgV2,
	}
}

// Model describes one served model and the hardware it runs on, as the
// parameters of the serving model in doc.go. Every field must be set (> 0)
// unless it says otherwise.
type Model struct {
	// Name is the served model name, the model_name label.
	Name string
	// MeanRPS is the mean request arrival rate per instance over a day, in
	// requests per second. The instantaneous rate swings around it with the
	// diurnal cycle and the noise.
	MeanRPS float64
	// PromptMedian and PromptSigma parametrise the log-normal prompt length
	// in tokens: median exp(mu), shape sigma (>= 0; 0 = every prompt is
	// PromptMedian tokens).
	PromptMedian, PromptSigma float64
	// OutputMedian and OutputSigma parametrise the log-normal length the
	// model would generate if not cut off (sigma >= 0).
	OutputMedian, OutputSigma float64
	// MaxTokens is the max_tokens request parameter; an output reaching it
	// finishes with finished_reason="length".
	MaxTokens int
	// MaxModelLen is vLLM's max_model_len; it bounds prompts and sets the
	// token-count histogram buckets.
	MaxModelLen int
	// MaxNumSeqs is vLLM's max_num_seqs, the most running requests.
	MaxNumSeqs int
	// KVCacheTokens is the KV-cache capacity in tokens; it caps the batch
	// below MaxNumSeqs when requests are long, and scales kv_cache_usage_perc.
	KVCacheTokens int
	// ChunkTokens is max_num_batched_tokens: prompts are prefilled in chunks
	// of at most this many tokens, one chunk per engine step.
	ChunkTokens int
	// PrefillTokensPerSec is the prefill throughput of one instance.
	PrefillTokensPerSec float64
	// DecodeStep is the engine step time, in seconds, with one running
	// request: the inter-token latency of an idle server.
	DecodeStep float64
	// BatchDoubling is the number of running requests at which the decode
	// step time has doubled (memory-bound decode grows linearly in batch).
	BatchDoubling float64
	// PrefixHitRatio is the mean fraction of prompt tokens served from the
	// prefix cache, in [0, 0.66]. 0 = no prefix caching hits.
	PrefixHitRatio float64
	// AbortRatio is the fraction of requests the client aborts, in [0, 1).
	// 0 = none.
	AbortRatio float64
}

// DefaultModels returns a Llama-3.1-8B instance on one H100-class GPU and a
// Llama-3.1-70B instance on four with tensor parallelism. The numbers are
// round figures of the order public vLLM benchmarks report, chosen so that
// the peak hour runs both at about half of their prefill capacity.
func DefaultModels() []Model {
	return []Model{
		{
			Name:    "meta-llama/Llama-3.1-8B-Instruct",
			MeanRPS: 8,
			// Chat-like traffic: median prompt 700 tokens (mean ~1150),
			// median answer 180 tokens.
			PromptMedian: 700, PromptSigma: 1.0,
			OutputMedian: 180, OutputSigma: 0.8,
			MaxTokens:           1024,
			MaxModelLen:         131072,
			MaxNumSeqs:          256,
			KVCacheTokens:       430000,
			ChunkTokens:         2048,
			PrefillTokensPerSec: 18000,
			DecodeStep:          0.008,
			BatchDoubling:       64,
			PrefixHitRatio:      0.35,
			AbortRatio:          0.005,
		},
		{
			Name:         "meta-llama/Llama-3.1-70B-Instruct",
			MeanRPS:      2.2,
			PromptMedian: 700, PromptSigma: 1.0,
			OutputMedian: 180, OutputSigma: 0.8,
			MaxTokens:           1024,
			MaxModelLen:         32768,
			MaxNumSeqs:          256,
			KVCacheTokens:       180000,
			ChunkTokens:         2048,
			PrefillTokensPerSec: 5000,
			DecodeStep:          0.022,
			BatchDoubling:       48,
			PrefixHitRatio:      0.35,
			AbortRatio:          0.005,
		},
	}
}

// withDefaults fills zero fields and validates the rest.
func (o Options) withDefaults() (Options, error) {
	if o.Interval == 0 {
		o.Interval = 15 * time.Second
	}
	if o.Interval < time.Millisecond {
		return o, fmt.Errorf("options: Interval %v must be at least 1ms", o.Interval)
	}
	if len(o.Models) == 0 {
		o.Models = DefaultModels()
	}
	if o.InstancesPerModel == 0 {
		o.InstancesPerModel = 3
	}
	if o.InstancesPerModel < 0 {
		return o, fmt.Errorf("options: InstancesPerModel %d must be >= 0", o.InstancesPerModel)
	}
	if o.Backfill < 0 {
		return o, fmt.Errorf("options: Backfill %v must be >= 0", o.Backfill)
	}
	if o.DiurnalFactor == 0 {
		o.DiurnalFactor = 3
	}
	if !(o.DiurnalFactor >= 1) || math.IsInf(o.DiurnalFactor, 0) {
		return o, fmt.Errorf("options: DiurnalFactor %v must be >= 1 and finite", o.DiurnalFactor)
	}
	if !(o.PeakHour >= 0 && o.PeakHour < 24) {
		return o, fmt.Errorf("options: PeakHour %v must be in [0, 24)", o.PeakHour)
	}
	if !(o.Noise >= 0 && o.Noise <= 2) {
		return o, fmt.Errorf("options: Noise %v must be in [0, 2]", o.Noise)
	}
	if o.BatchSamples == 0 {
		o.BatchSamples = 5000
	}
	if o.BatchSamples < 0 {
		return o, fmt.Errorf("options: BatchSamples %d must be >= 0", o.BatchSamples)
	}
	switch o.ProtoMsg {
	case "":
		o.ProtoMsg = ProtoMsgV2
	case ProtoMsgV1, ProtoMsgV2:
	default:
		return o, fmt.Errorf("options: ProtoMsg %q must be %q or %q", o.ProtoMsg, ProtoMsgV1, ProtoMsgV2)
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil {
			return o, fmt.Errorf("options: URL %q: %w", o.URL, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return o, fmt.Errorf("options: URL %q must be http or https", o.URL)
		}
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	for i := range o.Faults {
		if err := o.Faults[i].validate(len(o.Models) * o.InstancesPerModel); err != nil {
			return o, fmt.Errorf("options: Faults[%d]: %w", i, err)
		}
	}
	seen := make(map[string]bool, len(o.Models))
	for i := range o.Models {
		if err := o.Models[i].validate(); err != nil {
			return o, fmt.Errorf("options: Models[%d]: %w", i, err)
		}
		if seen[o.Models[i].Name] {
			return o, fmt.Errorf("options: Models[%d]: duplicate Name %q", i, o.Models[i].Name)
		}
		seen[o.Models[i].Name] = true
	}
	return o, nil
}

func (m *Model) validate() error {
	if m.Name == "" {
		return fmt.Errorf("model: Name must be set")
	}
	pos := []struct {
		name string
		v    float64
	}{
		{"MeanRPS", m.MeanRPS},
		{"PromptMedian", m.PromptMedian},
		{"OutputMedian", m.OutputMedian},
		{"MaxTokens", float64(m.MaxTokens)},
		{"MaxModelLen", float64(m.MaxModelLen)},
		{"MaxNumSeqs", float64(m.MaxNumSeqs)},
		{"KVCacheTokens", float64(m.KVCacheTokens)},
		{"ChunkTokens", float64(m.ChunkTokens)},
		{"PrefillTokensPerSec", m.PrefillTokensPerSec},
		{"DecodeStep", m.DecodeStep},
		{"BatchDoubling", m.BatchDoubling},
	}
	for _, p := range pos {
		if !(p.v > 0) || math.IsInf(p.v, 0) {
			return fmt.Errorf("model %q: %s %v must be > 0 and finite", m.Name, p.name, p.v)
		}
	}
	if m.MaxModelLen < 2 {
		return fmt.Errorf("model %q: MaxModelLen %d must be >= 2", m.Name, m.MaxModelLen)
	}
	if !(m.PromptSigma >= 0 && m.PromptSigma <= 3) {
		return fmt.Errorf("model %q: PromptSigma %v must be in [0, 3]", m.Name, m.PromptSigma)
	}
	if !(m.OutputSigma >= 0 && m.OutputSigma <= 3) {
		return fmt.Errorf("model %q: OutputSigma %v must be in [0, 3]", m.Name, m.OutputSigma)
	}
	if !(m.PrefixHitRatio >= 0 && m.PrefixHitRatio <= 0.66) {
		return fmt.Errorf("model %q: PrefixHitRatio %v must be in [0, 0.66]", m.Name, m.PrefixHitRatio)
	}
	if !(m.AbortRatio >= 0 && m.AbortRatio < 1) {
		return fmt.Errorf("model %q: AbortRatio %v must be in [0, 1)", m.Name, m.AbortRatio)
	}
	return nil
}
