package sim

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

var t0 = time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC)

func mustNew(t testing.TB, o Options) *Simulator {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run steps s every Interval from start through end inclusive and returns
// the last step's series.
func run(s *Simulator, start, end time.Time) []Series {
	var out []Series
	for t := start; !t.After(end); t = t.Add(s.opts.Interval) {
		out = s.Step(t)
	}
	return out
}

// sumWhere adds the float values of the series named name.
func sumWhere(series []Series, name string) float64 {
	v := 0.0
	for _, s := range series {
		if s.Labels.Get(model.MetricNameLabel) == name {
			v += s.Samples[0].V
		}
	}
	return v
}

// The bucket lists below are retyped from vLLM's vllm/v1/metrics/loggers.py
// (PrometheusStatLogger.__init__), independently of metrics.go.
var (
	wantTTFT = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	wantITL  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	wantReq  = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
	wantIter = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	// build_1_2_5_buckets(131072) and build_1_2_5_buckets(32768), by hand.
	want125Len131072 = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000}
	want125Len32768  = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000}
)

func TestHistogramsMatchVLLM(t *testing.T) {
	o := DefaultOptions()
	o.DeprecatedMetrics = true
	s := mustNew(t, o)
	series := run(s, t0.Add(14*time.Hour), t0.Add(14*time.Hour+10*time.Minute))

	byModelLen := map[string][]float64{
		"meta-llama/Llama-3.1-8B-Instruct":  want125Len131072,
		"meta-llama/Llama-3.1-70B-Instruct": want125Len32768,
	}
	want := func(fam, modelName string) []float64 {
		switch fam {
		case "vllm:time_to_first_token_seconds":
			return wantTTFT
		case "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds", "vllm:request_time_per_output_token_seconds":
			return wantITL
		case "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds", "vllm:request_inference_time_seconds",
			"vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds":
			return wantReq
		case "vllm:iteration_tokens_total":
			return wantIter
		case "vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:request_params_max_tokens":
			return byModelLen[modelName]
		}
		t.Fatalf("unexpected histogram family %q", fam)
		return nil
	}

	type key struct{ fam, inst string }
	type acc struct {
		les      []float64
		cum      []float64
		count    float64
		hasCount bool
		model    string
	}
	hs := map[key]*acc{}
	for _, sr := range series {
		if sr.Metadata.Type != model.MetricTypeHistogram {
			continue
		}
		name := sr.Labels.Get(model.MetricNameLabel)
		fam := familyName(name, sr.Metadata)
		k := key{fam, sr.Labels.Get("instance")}
		a := hs[k]
		if a == nil {
			a = &acc{model: sr.Labels.Get("model_name")}
			hs[k] = a
		}
		switch {
		case strings.HasSuffix(name, "_bucket"):
			le, err := strconv.ParseFloat(sr.Labels.Get("le"), 64)
			if err != nil {
				t.Fatalf("%s: le: %v", sr.Labels, err)
			}
			a.les = append(a.les, le)
			a.cum = append(a.cum, sr.Samples[0].V)
		case strings.HasSuffix(name, "_count"):
			a.count, a.hasCount = sr.Samples[0].V, true
		}
	}
	// 13 families (12 + the deprecated TPOT) × 6 instances.
	if len(hs) != 13*6 {
		t.Fatalf("got %d histograms, want %d", len(hs), 13*6)
	}
	for k, a := range hs {
		w := append(append([]float64{}, want(k.fam, a.model)...), math.Inf(1))
		if !reflect.DeepEqual(a.les, w) {
			t.Errorf("%v: le = %v, want %v", k, a.les, w)
		}
		for i := 1; i < len(a.cum); i++ {
			if a.cum[i] < a.cum[i-1] {
				t.Errorf("%v: bucket le=%v has %v < previous %v", k, a.les[i], a.cum[i], a.cum[i-1])
			}
		}
		if !a.hasCount || a.count != a.cum[len(a.cum)-1] {
			t.Errorf("%v: _count %v != +Inf bucket %v", k, a.count, a.cum[len(a.cum)-1])
		}
		if a.count == 0 {
			t.Errorf("%v: no observations after 10 minutes at peak", k)
		}
	}
}

func TestLabelsAndFormatting(t *testing.T) {
	s := mustNew(t, DefaultOptions())
	series := s.Step(t0)
	if got, want := len(series), s.NumSeries(); got != want {
		t.Fatalf("Step returned %d series, NumSeries says %d", got, want)
	}
	seen := map[string]bool{}
	for _, sr := range series {
		for _, n := range []string{"model_name", "engine", "job", "instance"} {
			if sr.Labels.Get(n) == "" {
				t.Fatalf("%s lacks label %s", sr.Labels, n)
			}
		}
		if seen[sr.Labels.String()] {
			t.Fatalf("duplicate series %s", sr.Labels)
		}
		seen[sr.Labels.String()] = true
	}
	// Prometheus 3 normalises le values to OpenMetrics floats.
	for _, l := range []string{
		`{__name__="vllm:time_to_first_token_seconds_bucket", engine="0", instance="llama-3-1-8b-instruct-0:8000", job="vllm", le="1.0", model_name="meta-llama/Llama-3.1-8B-Instruct"}`,
		`{__name__="vllm:e2e_request_latency_seconds_bucket", engine="0", instance="llama-3-1-70b-instruct-2:8000", job="vllm", le="7680.0", model_name="meta-llama/Llama-3.1-70B-Instruct"}`,
		`{__name__="vllm:request_success_total", engine="0", finished_reason="length", instance="llama-3-1-70b-instruct-1:8000", job="vllm", model_name="meta-llama/Llama-3.1-70B-Instruct"}`,
		`{__name__="vllm:kv_cache_usage_perc", engine="0", instance="llama-3-1-8b-instruct-1:8000", job="vllm", model_name="meta-llama/Llama-3.1-8B-Instruct"}`,
	} {
		if !seen[l] {
			t.Errorf("missing series %s", l)
		}
	}
}

func TestCountersMonotonic(t *testing.T) {
	o := DefaultOptions()
	o.NativeHistograms = true
	o.DeprecatedMetrics = true
	o.Noise = 0.5 // large swings make a decrease more likely to show
	s := mustNew(t, o)
	var prev []Series
	steps := 480
	if testing.Short() {
		steps = 120
	}
	for i := range steps {
		ts := t0.Add(10*time.Hour + time.Duration(i)*o.Interval)
		cur := s.Step(ts)
		for j, sr := range cur {
			if sr.Metadata.Type == model.MetricTypeGauge {
				v := sr.Samples[0].V
				if v < 0 || (strings.Contains(sr.Labels.Get(model.MetricNameLabel), "usage_perc") && v > 1) {
					t.Fatalf("%s = %v out of range", sr.Labels, v)
				}
				continue
			}
			if len(sr.Histograms) == 1 {
				h := sr.Histograms[0].H
				if err := h.Validate(); err != nil {
					t.Fatalf("%s: invalid native histogram: %v", sr.Labels, err)
				}
				if prev != nil {
					p := prev[j].Histograms[0].H
					if h.Count < p.Count || h.Sum < p.Sum {
						t.Fatalf("%s: native count/sum fell from %d/%v to %d/%v", sr.Labels, p.Count, p.Sum, h.Count, h.Sum)
					}
					if h.ToFloat(nil).DetectReset(p.ToFloat(nil)) {
						t.Fatalf("%s: native histogram reset at %v", sr.Labels, ts)
					}
				}
				continue
			}
			if sr.Samples[0].T != ts.UnixMilli() {
				t.Fatalf("%s: timestamp %d, want %d", sr.Labels, sr.Samples[0].T, ts.UnixMilli())
			}
			if prev != nil && sr.Samples[0].V < prev[j].Samples[0].V {
				t.Fatalf("%s fell from %v to %v at %v", sr.Labels, prev[j].Samples[0].V, sr.Samples[0].V, ts)
			}
		}
		prev = cur
	}
	if sumWhere(prev, "vllm:request_success_total") == 0 {
		t.Fatal("no requests simulated")
	}
}

// The mean rate is MeanRPS·(1 + a·cos(2π(h−14)/24)) with a = (F−1)/(F+1).
// For F = 3, a = 0.5. Averaged over the hour centred on a peak or trough,
// cos contributes ±sin(π/24)/(π/24) = ±0.9971469, so
//
//	peak hour:   1 + 0.5·0.9971469 = 1.4985735
//	trough hour: 1 − 0.5·0.9971469 = 0.5014265,  ratio 2.98862.
//
// Default fleet: 3·(8 + 2.2) = 30.6 requests/s on average, 110160 an hour,
// so 165083 in the peak hour and 55237 in the trough hour. Poisson noise on
// those counts is 0.25% and 0.43%.
func TestDiurnalPeakOverTrough(t *testing.T) {
	count := func(from time.Time) float64 {
		o := DefaultOptions()
		o.Noise = 0
		s := mustNew(t, o)
		before := sumWhere(s.Step(from), "vllm:request_success_total")
		after := sumWhere(run(s, from.Add(o.Interval), from.Add(time.Hour)), "vllm:request_success_total")
		return after - before
	}
	peak := count(t0.Add(13*time.Hour + 30*time.Minute))
	trough := count(t0.Add(1*time.Hour + 30*time.Minute))
	within(t, "peak-hour requests", peak, 165083, 0.015)
	within(t, "trough-hour requests", trough, 55237, 0.02)
	within(t, "peak/trough", peak/trough, 2.98862, 0.025)
}

func within(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	if math.Abs(got-want) > rel*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g ± %.1f%%", what, got, want, rel*100)
	} else {
		t.Logf("%s = %.6g (want %.6g)", what, got, want)
	}
}

// queueModel is a model with fixed prompt (1000 tokens) and output (100
// tokens) so the queue formulas in doc.go can be evaluated by hand.
func queueModel(rps float64) Model {
	return Model{
		Name: "fixed", MeanRPS: rps,
		PromptMedian: 1000, OutputMedian: 100,
		MaxTokens: 1000, MaxModelLen: 4096, MaxNumSeqs: 64, KVCacheTokens: 1_000_000,
		ChunkTokens: 2048, PrefillTokensPerSec: 10000, DecodeStep: 0.01, BatchDoubling: 50,
	}
}

// Hand calculation (Tp = 1000/10000 = 0.1 s; Ō = 100; d(b) = 0.01·(1+b/50)):
//
//	λ = 2: b = 2·(0.1+1)/(1−2·100·0.01/50) = 2.2/0.96 = 2.29167,
//	       d = 0.0104583; P-K with ρ = 0.2, E[T²]/E[T] = 0.1:
//	       0.2·0.1/(2·0.8) = 0.0125; mean queue = 0.0125 + d/2 = 0.0177292.
//	λ = 8: b = 8.8/0.84 = 10.4762, d = 0.0120952; ρ = 0.8:
//	       0.8·0.1/(2·0.2) = 0.2; mean queue = 0.2 + d/2 = 0.2060476.
//
// The batch-slot term is below 1e-6 s at both loads (c = 64, μ = 64/2.38 =
// 26.9/s, ρ^√130 with ρ ≤ 0.3). Mean ITL = d + stall share · stall length,
// stall share = λ·(1000/2048 + 0.5)·d, stall length 1000/10000 = 0.1 s:
//
//	λ = 2: 0.0104583 + 2·0.988281·0.0104583·0.1 = 0.0125254
//	λ = 8: 0.0120952 + 8·0.988281·0.0120952·0.1 = 0.0216580
func TestQueueAndITLRiseWithLoad(t *testing.T) {
	measure := func(rps float64) (queue, itl, decodeSum, itlSum float64) {
		o := Options{Models: []Model{queueModel(rps)}, DiurnalFactor: 1, Seed: 7}
		s := mustNew(t, o)
		run(s, t0, t0.Add(time.Hour))
		for _, in := range s.instances {
			queue += in.queue.sum
			itl += in.itl.sum
			decodeSum += in.decode.sum
		}
		var nq, ni uint64
		for _, in := range s.instances {
			nq += in.queue.count
			ni += in.itl.count
		}
		return queue / float64(nq), itl / float64(ni), decodeSum, itl
	}
	qLow, itlLow, dLow, iLow := measure(2)
	qHigh, itlHigh, _, _ := measure(8)
	within(t, "mean queue at 2 req/s", qLow, 0.0177292, 0.05)
	within(t, "mean queue at 8 req/s", qHigh, 0.2060476, 0.05)
	within(t, "mean ITL at 2 req/s", itlLow, 0.0125254, 0.03)
	within(t, "mean ITL at 8 req/s", itlHigh, 0.0216580, 0.03)
	// In vLLM decode time is the sum of a request's inter-token gaps.
	within(t, "ITL _sum / decode _sum", iLow/dLow, 1, 1e-9)
}

func TestDeterministic(t *testing.T) {
	o := DefaultOptions()
	o.NativeHistograms = true
	a, b := mustNew(t, o), mustNew(t, o)
	o.Seed++
	c := mustNew(t, o)
	differ := false
	for i := range 40 {
		ts := t0.Add(time.Duration(i) * o.Interval)
		sa, sb, sc := a.Step(ts), b.Step(ts), c.Step(ts)
		if !reflect.DeepEqual(sa, sb) {
			t.Fatalf("step %d differs between two simulators with the same seed", i)
		}
		if !reflect.DeepEqual(sa, sc) {
			differ = true
		}
	}
	if !differ {
		t.Fatal("a different seed gave the same series")
	}
}

func TestStepGapsAndRepeats(t *testing.T) {
	// One Step across a 10-minute gap simulates it in Interval sub-steps:
	// the request count is that of 40 single steps, within noise.
	o := DefaultOptions()
	o.Noise = 0
	gap := mustNew(t, o)
	gap.Step(t0.Add(12 * time.Hour))
	got := sumWhere(gap.Step(t0.Add(12*time.Hour+10*time.Minute)), "vllm:request_success_total")
	// 615 s from 11:59:45 (the first step's 15 s plus the 600 s gap): the
	// mean of cos(2π(h−14)/24) over h−14 ∈ [−2.004167, −1.833333] is
	// (24/2π)·(sin(−0.479966) − sin(−0.524689))/0.170833
	//   = 3.819719·(−0.461749 + 0.500632)/0.170833 = 0.869397,
	// so 30.6 req/s · (1 + 0.5·0.869397) · 615 s = 27000 requests.
	within(t, "requests over a gap", got, 27000, 0.025)

	again := gap.Step(t0.Add(12*time.Hour + 10*time.Minute))
	if v := sumWhere(again, "vllm:request_success_total"); v != got {
		t.Fatalf("repeated Step changed counters: %v → %v", got, v)
	}
}

func TestBuild125Buckets(t *testing.T) {
	// Doctest of vLLM's build_1_2_5_buckets: build_1_2_5_buckets(100) ==
	// [1, 2, 5, 10, 20, 50, 100].
	if got, want := build125Buckets(100), []float64{1, 2, 5, 10, 20, 50, 100}; !reflect.DeepEqual(got, want) {
		t.Fatalf("build125Buckets(100) = %v, want %v", got, want)
	}
	if got := build125Buckets(131072); !reflect.DeepEqual(got, want125Len131072) {
		t.Fatalf("build125Buckets(131072) = %v", got)
	}
}

func TestOptionsValidation(t *testing.T) {
	bad := func(f func(*Options)) Options {
		o := DefaultOptions()
		f(&o)
		return o
	}
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"interval", bad(func(o *Options) { o.Interval = time.Microsecond }), "Interval"},
		{"instances", bad(func(o *Options) { o.InstancesPerModel = -1 }), "InstancesPerModel"},
		{"diurnal", bad(func(o *Options) { o.DiurnalFactor = 0.5 }), "DiurnalFactor"},
		{"peak", bad(func(o *Options) { o.PeakHour = 24 }), "PeakHour"},
		{"noise", bad(func(o *Options) { o.Noise = -1 }), "Noise"},
		{"proto", bad(func(o *Options) { o.ProtoMsg = "v3" }), "ProtoMsg"},
		{"url", bad(func(o *Options) { o.URL = "ftp://x" }), "URL"},
		{"model rps", bad(func(o *Options) { o.Models = []Model{queueModel(0)} }), "MeanRPS"},
		{"model nan", bad(func(o *Options) { m := queueModel(1); m.DecodeStep = math.NaN(); o.Models = []Model{m} }), "DecodeStep"},
		{"model hit", bad(func(o *Options) { m := queueModel(1); m.PrefixHitRatio = 0.9; o.Models = []Model{m} }), "PrefixHitRatio"},
		{"model dup", bad(func(o *Options) { o.Models = []Model{queueModel(1), queueModel(2)} }), "duplicate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: err = %v, want one naming %s", err, c.want)
			}
		})
	}
	if _, err := New(Options{}); err != nil {
		t.Fatalf("New(Options{}): %v", err)
	}
}
