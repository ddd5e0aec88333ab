package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// genSignals generates sc and returns its signals by name.
func genSignals(t *testing.T, sc Scenario) (*Incident, map[string][]float64) {
	t.Helper()
	inc, err := sc.Generate()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for _, s := range inc.Signals() {
		out[s.Name] = s.Values
	}
	return inc, out
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// TestFaultsMoveTheirRootCause compares each fault with the quiet run of the
// same seed. The host and instance random streams do not depend on the
// fault, so: before the fault every signal is identical; the other
// instance is identical throughout; and the root cause's level moves by the
// documented factor (run-queue delay ×60, page faults ×40, block IO ×50,
// SM clock ×0.55, arrivals ×2 within capacity, long prompts) while the
// stages the fault names grow.
func TestFaultsMoveTheirRootCause(t *testing.T) {
	const (
		length  = 40 * time.Minute
		faultAt = 20 * time.Minute
	)
	_, quiet := genSignals(t, Scenario{Seed: 4, Length: length, FaultAt: faultAt})
	// Signal j covers steps j → j+1; the fault at step 80 is active from
	// the sub-step whose midpoint follows it, signal 80. Skip two steps of
	// transition for the levels after it.
	const first, after = 80, 82
	for _, c := range []struct {
		kind     FaultKind
		root     string
		lo, hi   float64 // bounds on median(root after) faulty / quiet
		stage    string  // a signal of a lengthened stage
		minGrown float64 // its median after, faulty / quiet, at least
	}{
		{FaultCPUContention, "tailroot_runqueue_delay_seconds", 59, 61, FrontendResidual, 10},
		{FaultPageFaultStorm, "tailroot_page_faults_total", 39, 41, "vllm:inter_token_latency_seconds", 1.25},
		{FaultNoisyIO, "tailroot_block_io_latency_seconds", 49, 51, "vllm:request_queue_time_seconds", 2},
		{FaultGPUThrottle, "DCGM_FI_DEV_SM_CLOCK", 0.54, 0.56, "vllm:request_prefill_time_seconds", 1.4},
		{FaultLoadSurge, "vllm:request_success_total", 1.6, 2.1, "vllm:request_queue_time_seconds", 2},
		// Long prompts arrive at 0.06/s, 0.9 a step beside ~180 others of
		// mean 1150 tokens: a step's mean rises by 0.9·(100000 − 1150)/181
		// on average, ×1.43; a median step may carry none, so this one
		// compares means.
		{FaultLongContext, "vllm:request_prompt_tokens", 1.3, 1.6, "vllm:request_queue_time_seconds", 2},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			inc, got := genSignals(t, Scenario{Fault: c.kind, Instance: 1, Seed: 4, Length: length, FaultAt: faultAt})
			tr := inc.Truth
			if tr.Instance != "llama-3-1-8b-instruct-1:8000" || tr.RootCause.Metric != c.root ||
				tr.RootCause.Signal != signalName(c.root, tr.Instance) || !tr.Start.Equal(tr.WindowStart.Add(faultAt)) {
				t.Fatalf("ground truth %+v", tr)
			}
			for name, v := range got {
				q := quiet[name]
				if !slices.Equal(v[:first], q[:first]) {
					t.Errorf("%s differs from the quiet run before the fault", name)
				}
				if !containsInstance(name, tr.Instance) && !slices.Equal(v, q) {
					t.Errorf("%s, on the healthy instance, differs from the quiet run", name)
				}
			}
			root := signalName(c.root, tr.Instance)
			ratio := median(got[root][after:]) / median(quiet[root][after:])
			if c.kind == FaultLongContext {
				ratio = meanOf(got[root][after:]) / meanOf(quiet[root][after:])
			}
			if !(ratio >= c.lo && ratio <= c.hi) {
				t.Errorf("root cause %s moved ×%.3f, want within [%v, %v]", root, ratio, c.lo, c.hi)
			}
			stage := signalName(c.stage, tr.Instance)
			if g := median(got[stage][after:]) / median(quiet[stage][after:]); !(g >= c.minGrown) {
				t.Errorf("stage signal %s grew ×%.3f, want ≥ %v", stage, g, c.minGrown)
			}
		})
	}
}

func meanOf(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func containsInstance(signal, instance string) bool {
	return strings.Contains(signal, `"`+instance+`"`)
}

// TestCovariatesWithoutFault: a quiet two-hour window has the host and GPU
// levels host.go documents, and they wander (the AR(1) noise) without any
// fault, so a regression can learn their effects.
func TestCovariatesWithoutFault(t *testing.T) {
	inc, sig := genSignals(t, Scenario{Seed: 8})
	inst := "llama-3-1-8b-instruct-0:8000"
	get := func(m string) []float64 { return sig[signalName(m, inst)] }
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	cv := func(v []float64) float64 {
		m, s := mean(v), 0.0
		for _, x := range v {
			s += (x - m) * (x - m)
		}
		return math.Sqrt(s/float64(len(v))) / m
	}
	// Levels: E[e^{x − σ²/2}] = 1, so time averages sit near the base
	// levels; over 2 h of an AR(1) with τ = 5 min the average's own sd is
	// σ·√(2τ/T) ≈ 7 % (run-queue) to 9 % (page faults, block IO).
	for _, c := range []struct {
		metric   string
		lo, hi   float64
		minCV    float64
		constant bool
	}{
		{metric: "tailroot_runqueue_delay_seconds", lo: 30e-6, hi: 52e-6, minCV: 0.05},
		{metric: "tailroot_page_faults_total", lo: 300, hi: 520, minCV: 0.05},
		{metric: "tailroot_block_io_latency_seconds", lo: 0.42e-3, hi: 0.8e-3, minCV: 0.05},
		// 15 µs·(λ/λ̄)^0.7 + 2.5·40 µs, λ/λ̄ near 1.3 at this hour.
		{metric: "tailroot_gil_wait_seconds", lo: 90e-6, hi: 160e-6, minCV: 0.03},
		{metric: "DCGM_FI_DEV_SM_CLOCK", lo: 1900, hi: 1980, minCV: 0.001},
		{metric: "DCGM_FI_DEV_GPU_UTIL", lo: 30, hi: 100, minCV: 0.01},
		{metric: "DCGM_FI_DEV_MEM_CLOCK", lo: 2619, hi: 2619, constant: true},
		{metric: "DCGM_FI_DEV_FB_USED", lo: 16000 + 0.11*430000 - 1, hi: 16000 + 0.11*430000 + 1, constant: true},
	} {
		v := get(c.metric)
		m := mean(v)
		if !(m >= c.lo && m <= c.hi) {
			t.Errorf("%s: mean %v, want in [%v, %v]", c.metric, m, c.lo, c.hi)
		}
		if c.constant {
			if slices.Min(v) != slices.Max(v) {
				t.Errorf("%s varies: [%v, %v]", c.metric, slices.Min(v), slices.Max(v))
			}
		} else if x := cv(v); x < c.minCV || x > 0.8 {
			t.Errorf("%s: coefficient of variation %.4f, want in [%v, 0.8]", c.metric, x, c.minCV)
		}
	}
	if inc.Truth.Fault != "" || inc.Truth.Description != "no fault" {
		t.Errorf("quiet truth %+v", inc.Truth)
	}
}

func TestFaultValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		sc   Scenario
		want string
	}{
		{"unknown fault", Scenario{Fault: "disk_full"}, `unknown Kind "disk_full"`},
		{"instance", Scenario{Fault: FaultLoadSurge, Instance: 2}, "Instance 2 outside the fleet's 2 instances"},
		{"severity", Scenario{Fault: FaultLoadSurge, Severity: 11}, "Severity 11 must be in [0, 10]"},
		{"fault too early", Scenario{Fault: FaultLoadSurge, FaultAt: time.Minute}, "FaultAt 1m0s must leave 10 steps"},
		{"fault too late", Scenario{Fault: FaultLoadSurge, Length: time.Hour, FaultAt: 58 * time.Minute}, "must leave 10 steps"},
		{"short window", Scenario{Length: 5 * time.Minute}, "need 30"},
		{"negative duration", Scenario{Fault: FaultLoadSurge, FaultFor: -time.Second}, "FaultFor -1s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.sc.Generate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
	if _, err := New(Options{Faults: []Fault{{Kind: FaultGPUThrottle, Instance: 9}}}); err == nil || !strings.Contains(err.Error(), "Faults[0]") {
		t.Errorf("New with a fault on instance 9: %v", err)
	}
	for _, k := range FaultKinds() {
		fi, ok := Info(k)
		if !ok || fi.RootMetric == "" || fi.RootNode == "" || len(fi.Stages) == 0 || fi.Description == "" {
			t.Errorf("Info(%s) = %+v, %v", k, fi, ok)
		}
		if _, ok := signalFor(fi.RootMetric); !ok {
			t.Errorf("%s: root metric %s is not a signal", k, fi.RootMetric)
		}
	}
}

// TestFaultDuration: a fault with a duration ends; the level returns.
func TestFaultDuration(t *testing.T) {
	inc, got := genSignals(t, Scenario{Fault: FaultCPUContention, Seed: 4, Length: time.Hour, FaultAt: 20 * time.Minute, FaultFor: 10 * time.Minute})
	_, quiet := genSignals(t, Scenario{Seed: 4, Length: time.Hour, FaultAt: 20 * time.Minute})
	if want := inc.Truth.Start.Add(10 * time.Minute); !inc.Truth.End.Equal(want) {
		t.Errorf("truth end %v, want %v", inc.Truth.End, want)
	}
	root := signalName("tailroot_runqueue_delay_seconds", inc.Truth.Instance)
	during := median(got[root][82:118]) / median(quiet[root][82:118])
	afterwards := median(got[root][122:]) / median(quiet[root][122:])
	if during < 59 || math.Abs(afterwards-1) > 1e-9 {
		t.Errorf("run-queue ×%v during, ×%v after the fault; want ×60 and ×1", during, afterwards)
	}
}
