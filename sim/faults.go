package sim

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// FaultKind names an incident the simulator can inject.
type FaultKind string

// The faults, each with the series it moves first (its root cause) and the
// stages it lengthens. Magnitudes are at Severity 1; Severity s scales a
// factor m to 1 + (m−1)·s.
const (
	// FaultCPUContention starves the API server of CPU: the run-queue delay
	// per wakeup grows 60× (40 µs → 2.4 ms), the GIL holder is descheduled
	// so GIL waits grow with it, and tokenisation and the rest of the
	// frontend slow down (TTFT). Root cause: tailroot_runqueue_delay_seconds.
	FaultCPUContention FaultKind = "cpu_contention"
	// FaultPageFaultStorm raises the engine process's page-fault rate 40×
	// (memory pressure on the host); each fault stalls the decode loop, so
	// the decode step (ITL, decode time) grows about 40 %.
	// Root cause: tailroot_page_faults_total.
	FaultPageFaultStorm FaultKind = "page_fault_storm"
	// FaultNoisyIO puts a noisy neighbour on the disk the engine loads
	// weights (LoRA adapters, swapped-out layers) from: block IO latency
	// grows 50×, each load blocks the engine 50× longer, and requests queue.
	// Root cause: tailroot_block_io_latency_seconds.
	FaultNoisyIO FaultKind = "noisy_io"
	// FaultGPUThrottle drops the SM clock to 55 % (power or thermal
	// slowdown): prefill runs at the clock's speed, decode at its 0.6th
	// power, CUDA synchronisation waits grow, utilisation rises, power
	// falls. Root cause: DCGM_FI_DEV_SM_CLOCK.
	FaultGPUThrottle FaultKind = "gpu_throttle"
	// FaultLoadSurge multiplies the instance's arrival rate by 2 (a client
	// retry storm, sticky routing): batch, KV usage and queue grow, and past
	// capacity a backlog builds. Root cause: vllm:request_success_total.
	FaultLoadSurge FaultKind = "load_surge"
	// FaultLongContext adds long-context requests (100k-token prompts, one
	// every ~16 s) whose chunked prefill blocks the short ones: queue time
	// and inter-token stalls grow, the mean prompt length jumps.
	// Root cause: vllm:request_prompt_tokens.
	FaultLongContext FaultKind = "long_context"
)

// FaultKinds lists every fault, in the order above.
func FaultKinds() []FaultKind {
	return []FaultKind{
		FaultCPUContention, FaultPageFaultStorm, FaultNoisyIO,
		FaultGPUThrottle, FaultLoadSurge, FaultLongContext,
	}
}

// Fault is an incident injected into one instance.
type Fault struct {
	Kind FaultKind
	// Instance is the index of the faulty instance in fleet order: the
	// instances of Models[0] first, then those of Models[1], and so on.
	Instance int
	// Start is when the fault begins.
	Start time.Time
	// Duration is how long it lasts. 0 = until the simulation ends.
	Duration time.Duration
	// Severity scales the fault's magnitude: a factor m becomes
	// 1 + (m−1)·Severity. 0 = 1; must be in [0, 10].
	Severity float64
}

// FaultInfo is what a fault does, for ground truth and documentation.
type FaultInfo struct {
	Kind        FaultKind
	Description string
	// RootMetric is the series the fault moves first, and RootNode its node
	// in the serving graph (attribution/rca).
	RootMetric, RootNode string
	// Stages are the latency stages it lengthens.
	Stages []string
	// Moves are the other metrics it moves downstream of the root cause.
	Moves []string
}

var faultInfo = map[FaultKind]FaultInfo{
	FaultCPUContention: {
		Description: "CPU contention on the API server: run-queue delay ×60, GIL waits and tokenisation slow down",
		RootMetric:  "tailroot_runqueue_delay_seconds", RootNode: "runqueue",
		Stages: []string{"tokenize", "ttft", "e2e"},
		Moves:  []string{"tailroot_gil_wait_seconds", "vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"},
	},
	FaultPageFaultStorm: {
		Description: "page-fault storm in the engine process: page faults ×40, each stalls the decode loop",
		RootMetric:  "tailroot_page_faults_total", RootNode: "page_faults",
		Stages: []string{"decode", "e2e"},
		Moves: []string{
			"vllm:inter_token_latency_seconds", "vllm:request_decode_time_seconds",
			"vllm:num_requests_running", "vllm:kv_cache_usage_perc",
		},
	},
	FaultNoisyIO: {
		Description: "noisy IO neighbour during weight loads: block IO latency ×50, the engine blocks while loading",
		RootMetric:  "tailroot_block_io_latency_seconds", RootNode: "block_io",
		Stages: []string{"queue", "ttft", "e2e"},
		Moves:  []string{"vllm:request_queue_time_seconds", "vllm:num_requests_waiting"},
	},
	FaultGPUThrottle: {
		Description: "GPU throttling: SM clock to 55 %, prefill and decode slow down",
		RootMetric:  "DCGM_FI_DEV_SM_CLOCK", RootNode: "gpu_clock",
		Stages: []string{"prefill", "decode", "ttft", "e2e"},
		Moves: []string{
			"tailroot_cuda_call_seconds", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE",
			"vllm:request_prefill_time_seconds", "vllm:inter_token_latency_seconds",
		},
	},
	FaultLoadSurge: {
		Description: "load surge: arrival rate ×2 on one instance",
		RootMetric:  "vllm:request_success_total", RootNode: "load",
		Stages: []string{"queue", "decode", "ttft", "e2e"},
		Moves: []string{
			"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
			"vllm:prompt_tokens_total", "vllm:request_queue_time_seconds",
		},
	},
	FaultLongContext: {
		Description: "long-context requests (100k-token prompts, one every ~16 s) block short ones",
		RootMetric:  "vllm:request_prompt_tokens", RootNode: "tokens",
		Stages: []string{"queue", "prefill", "decode", "ttft", "e2e"},
		Moves: []string{
			"vllm:prompt_tokens_total", "vllm:kv_cache_usage_perc",
			"vllm:request_queue_time_seconds", "vllm:inter_token_latency_seconds",
		},
	},
}

// Info describes the fault kind k; ok is false for an unknown kind.
func Info(k FaultKind) (FaultInfo, bool) {
	fi, ok := faultInfo[k]
	if !ok {
		return FaultInfo{}, false
	}
	fi.Kind = k
	fi.Stages = slices.Clone(fi.Stages)
	fi.Moves = slices.Clone(fi.Moves)
	return fi, true
}

// Fault magnitudes at severity 1.
const (
	cpuRunqueueFactor = 60
	pageFaultFactor   = 40
	blockIOFactor     = 50
	throttleClock     = 0.55 // SM clock as a fraction of its usual value
	surgeFactor       = 2
	longRate          = 0.06   // long-context requests per second
	longTokens        = 100000 // their mean prompt length
)

func (f *Fault) severity() float64 {
	if f.Severity == 0 {
		return 1
	}
	return f.Severity
}

func (f *Fault) validate(instances int) error {
	if _, ok := faultInfo[f.Kind]; !ok {
		return fmt.Errorf("fault: unknown Kind %q (known: %v)", f.Kind, FaultKinds())
	}
	if f.Instance < 0 || f.Instance >= instances {
		return fmt.Errorf("fault %s: Instance %d outside the fleet's %d instances", f.Kind, f.Instance, instances)
	}
	if f.Duration < 0 {
		return fmt.Errorf("fault %s: Duration %v must be >= 0", f.Kind, f.Duration)
	}
	if !(f.Severity >= 0 && f.Severity <= 10) {
		return fmt.Errorf("fault %s: Severity %v must be in [0, 10]", f.Kind, f.Severity)
	}
	return nil
}

func (f *Fault) activeAt(t time.Time) bool {
	if t.Before(f.Start) {
		return false
	}
	return f.Duration == 0 || t.Before(f.Start.Add(f.Duration))
}

// effects are the factors the active faults put on one instance at one
// time; the zero fault set gives identity factors.
type effects struct {
	runqueue, pageFaults, blockIO, rate float64 // factors, 1 = none
	clock                               float64 // SM clock factor, 1 = none
	longRate                            float64 // long-context requests per second
}

var noEffects = effects{runqueue: 1, pageFaults: 1, blockIO: 1, rate: 1, clock: 1}

func activeEffects(faults []Fault, t time.Time) effects {
	fx := noEffects
	for i := range faults {
		f := &faults[i]
		if !f.activeAt(t) {
			continue
		}
		s := f.severity()
		scale := func(m float64) float64 { return 1 + (m-1)*s }
		switch f.Kind {
		case FaultCPUContention:
			fx.runqueue *= scale(cpuRunqueueFactor)
		case FaultPageFaultStorm:
			fx.pageFaults *= scale(pageFaultFactor)
		case FaultNoisyIO:
			fx.blockIO *= scale(blockIOFactor)
		case FaultGPUThrottle:
			fx.clock *= math.Max(0.2, scale(throttleClock))
		case FaultLoadSurge:
			fx.rate *= scale(surgeFactor)
		case FaultLongContext:
			fx.longRate += longRate * s
		}
	}
	return fx
}
