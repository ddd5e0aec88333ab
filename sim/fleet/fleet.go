// Package fleet generates incidents of a small GPU serving fleet as the
// exporters of real machines report them, for judging root-cause ranking
// without reusing its assumptions.
//
// It is written apart from attribution/rca and imports nothing of it (nor
// of sim): its metric names, labels and physics are its own, so a ranker
// that only recognises the simulator's serving graph, or one that joins
// series by equal instance labels, fails here as it would on a real fleet.
//
// In: a Class and a seed. Out: an Incident — every series as raw samples
// (counters cumulative, histograms as _sum/_count, gauges as read), the
// metadata each exporter would send (type, unit, help), and the Truth: the
// fault's host, onset and the metric names that count as its root cause.
//
// # The fleet
//
// Two hosts, gpu-1 and gpu-2, each running vLLM (instance host:8000, job
// vllm), dcgm-exporter (host:9400, job dcgm, labels gpu, UUID, Hostname,
// modelName), node-exporter (host:9100, job node) and a backup agent
// (host:9256, job backup, an exporter no table knows). Scrapes every 15 s
// for 2 h, with up to 2 s of scrape jitter per exporter.
//
// # Physics, per host and step
//
//   - Arrivals λ = 7 req/s · AR(1) noise (sd 6 %, 5 min correlation) · the
//     load factor; completions are Poisson(λ·15 s).
//   - Prompt and output lengths ≈ 850 and 220 tokens with 4 % noise.
//   - SM clock = 1980 MHz less |AR(1) jitter| (sd 25 MHz, boost control);
//     speed s = clock / 1980.
//   - prefill = prompt / (19 000 tok/s · s); TPOT = 11 ms / s · (1 + 0.25 ·
//     running / 64) · (1 + majfault/s / 4000); decode = output · TPOT.
//   - frontend = 14 ms + 0.45 ms · majfault/s + 90 ms · (busy CPUs / 8)³,
//     the API server's tokenisation, scheduling and detokenisation.
//   - utilisation ρ = λ·(prefill + decode)/48 (48 concurrent decodes' worth
//     of capacity); queue = 40 ms · ρ/(1 − ρ), ρ capped at 0.96.
//   - TTFT = queue + frontend + prefill; e2e = TTFT + decode; the running
//     and waiting gauges follow Little's law.
//
// Each latency histogram's _sum grows by count × mean × (1 + e), e normal
// with sd 0.35/√count (per-request variation averaged over the scrape).
//
// # Classes
//
// See Classes. Faults start at a uniformly random time between 40 % and
// 80 % of the window and last to its end; the ranker is not told when.
// Decoys (a backup job uploading over the network) jump ×20 at the fault's
// onset on the faulty host, or at a random time in fault-free windows.
package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Class is a kind of incident.
type Class string

// The classes. Strong faults move TTFT by 30 % or more; mild ones by 5–15 %.
const (
	// GPUThrottle: the SM clock drops to ~1250 MHz (HW slowdown).
	GPUThrottle Class = "gpu_throttle"
	// MildThrottle: the SM clock drops to ~1760 MHz.
	MildThrottle Class = "mild_throttle"
	// PageFaults: major page faults rise from ~4/s to ~250/s (memory
	// pressure evicts the engine's mapped files). The causes are the major
	// faults and the memory pressure (PSI) that name this fault.
	PageFaults Class = "page_fault_storm"
	// LoadSurge: arrivals ×1.45.
	LoadSurge Class = "load_surge"
	// MildLoadSurge: arrivals ×1.15.
	MildLoadSurge Class = "mild_load_surge"
	// CPUContention: a noisy neighbour keeps 6 of 8 CPUs busy.
	CPUContention Class = "cpu_contention"
	// LongPrompts: prompts grow ×1.8 (a client changes its template).
	LongPrompts Class = "long_prompts"
	// DecoyThrottle: GPUThrottle, moderate (~1500 MHz), with a backup job
	// starting at the same moment on the same host.
	DecoyThrottle Class = "decoy_throttle"
	// DecoyPageFaults: PageFaults with the same decoy.
	DecoyPageFaults Class = "decoy_page_faults"
	// NoFault: nothing happens to the service; in half the seeds a backup
	// job starts at a random time.
	NoFault Class = "no_fault"
)

// Classes lists every class, fault-free last.
func Classes() []Class {
	return []Class{GPUThrottle, MildThrottle, PageFaults, LoadSurge, MildLoadSurge, CPUContention, LongPrompts, DecoyThrottle, DecoyPageFaults, NoFault}
}

// Sample is one scraped value.
type Sample struct {
	T int64 // Unix milliseconds
	V float64
}

// Series is one stored series.
type Series struct {
	Labels  map[string]string // __name__ included
	Samples []Sample
}

// Metadata is what an exporter says about a metric family.
type Metadata struct {
	Type, Unit, Help string
}

// Truth is what happened.
type Truth struct {
	Class Class
	Fault bool
	// Host is the faulty host ("" without a fault).
	Host string
	// Onset is the fault's first affected scrape time (zero without one).
	Onset time.Time
	// Causes are the metric names that count as the root cause on Host:
	// any of them ranked first is a hit.
	Causes []string
	// DecoyAt is when the decoy jumped (zero if there was none).
	DecoyAt time.Time
}

// Incident is one generated window.
type Incident struct {
	Start, End time.Time
	Step       time.Duration
	Series     []Series
	Metadata   map[string]Metadata
	Truth      Truth
	// Target is a PromQL expression for the fleet's mean TTFT, the alert an
	// operator starts from.
	Target string
}

// Hosts are the machines of the fleet.
var Hosts = []string{"gpu-1", "gpu-2"}

const (
	step   = 15 * time.Second
	length = 2 * time.Hour
)

// Start is the first scrape of every incident.
var Start = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// TargetQuery is the fleet's mean TTFT over 1 m windows.
const TargetQuery = `sum(rate(vllm:time_to_first_token_seconds_sum[1m])) / sum(rate(vllm:time_to_first_token_seconds_count[1m]))`

// Generate builds the incident of class c for seed. The same arguments give
// the same incident.
func Generate(c Class, seed uint64) (*Incident, error) {
	if !slices.Contains(Classes(), c) {
		return nil, fmt.Errorf("fleet: unknown class %q", c)
	}
	r := rand.New(rand.NewPCG(seed, 0x666c656574))
	n := int(length / step)
	inc := &Incident{Start: Start, End: Start.Add(time.Duration(n-1) * step), Step: step, Metadata: metadata(), Target: TargetQuery}
	tr := Truth{Class: c, Fault: c != NoFault}
	faulty := r.IntN(len(Hosts))
	onset := int(float64(n) * (0.4 + 0.4*r.Float64()))
	decoy := -1
	switch c {
	case DecoyThrottle, DecoyPageFaults:
		decoy = onset
	case NoFault:
		if r.IntN(2) == 0 {
			decoy = int(float64(n) * (0.4 + 0.4*r.Float64()))
		}
	}
	if tr.Fault {
		tr.Host = Hosts[faulty]
		tr.Onset = Start.Add(time.Duration(onset) * step)
		tr.Causes = causes[c]
	}
	if decoy >= 0 {
		tr.DecoyAt = Start.Add(time.Duration(decoy) * step)
	}
	inc.Truth = tr
	for h, host := range Hosts {
		f := fault{}
		if h == faulty && tr.Fault {
			f = fault{class: c, onset: onset}
		}
		d := -1
		if h == faulty {
			d = decoy
		}
		inc.Series = append(inc.Series, simulateHost(r, host, h, n, f, d)...)
	}
	return inc, nil
}

// causes are the root-cause metrics of each fault class.
var causes = map[Class][]string{
	GPUThrottle:     {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"},
	MildThrottle:    {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"},
	DecoyThrottle:   {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"},
	PageFaults:      {"node_vmstat_pgmajfault", "node_pressure_memory_waiting_seconds_total"},
	DecoyPageFaults: {"node_vmstat_pgmajfault", "node_pressure_memory_waiting_seconds_total"},
	LoadSurge:       {"vllm:request_success_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total"},
	MildLoadSurge:   {"vllm:request_success_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total"},
	CPUContention:   {"node_pressure_cpu_waiting_seconds_total", "node_cpu_seconds_total", "node_load1"},
	LongPrompts:     {"vllm:request_prompt_tokens", "vllm:prompt_tokens_total"},
}

type fault struct {
	class Class
	onset int // -1 or 0 with class "" = none
}

// active is the fault's strength at step t: 0 before the onset, ramping to
// 1 over three scrapes.
func (f fault) active(c Class, t int) float64 {
	if f.class != c || t < f.onset {
		return 0
	}
	return math.Min(1, float64(t-f.onset+1)/3)
}

// ar is an AR(1) process with stationary sd and correlation time tau steps.
type ar struct {
	x, phi, sd float64
	r          *rand.Rand
}

func newAR(r *rand.Rand, sd, tau float64) *ar {
	a := &ar{phi: math.Exp(-1 / tau), sd: sd, r: r}
	a.x = sd * r.NormFloat64()
	return a
}

func (a *ar) next() float64 {
	a.x = a.phi*a.x + a.sd*math.Sqrt(1-a.phi*a.phi)*a.r.NormFloat64()
	return a.x
}

func poisson(r *rand.Rand, mean float64) float64 {
	if mean > 50 {
		return math.Max(0, math.Round(mean+math.Sqrt(mean)*r.NormFloat64()))
	}
	l, k, p := math.Exp(-mean), 0.0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// recorder accumulates the samples of one host's series.
type recorder struct {
	series map[string]*Series
	order  []string
}

func (rc *recorder) add(lbls map[string]string, t int64, v float64) {
	key := seriesKey(lbls)
	s := rc.series[key]
	if s == nil {
		s = &Series{Labels: lbls}
		rc.series[key] = s
		rc.order = append(rc.order, key)
	}
	s.Samples = append(s.Samples, Sample{T: t, V: v})
}

// seriesKey tells apart the series of one host.
func seriesKey(l map[string]string) string {
	return l["__name__"] + "\x00" + l["cpu"] + "\x00" + l["mode"] + "\x00" + l["device"] + "\x00" + l["finished_reason"]
}

func with(base map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func simulateHost(r *rand.Rand, host string, h, n int, f fault, decoy int) []Series {
	rc := &recorder{series: map[string]*Series{}}
	vllm := map[string]string{"instance": host + ":8000", "job": "vllm", "model_name": "llama-3.1-8b"}
	dcgm := map[string]string{
		"instance": host + ":9400", "job": "dcgm", "gpu": "0",
		"UUID": fmt.Sprintf("GPU-%08x-1c2d-4e5f-8a9b-%012x", 0x5eed0000+h, 0xabc000+h), "Hostname": host, "modelName": "NVIDIA H100 80GB HBM3",
	}
	node := map[string]string{"instance": host + ":9100", "job": "node"}
	backup := map[string]string{"instance": host + ":9256", "job": "backup"}

	load, plen, olen := newAR(r, 0.06, 20), newAR(r, 0.04, 8), newAR(r, 0.04, 8)
	clk, faults, cpu := newAR(r, 25, 6), newAR(r, 0.25, 4), newAR(r, 0.15, 10)
	netNoise, bkNoise := newAR(r, 0.1, 4), newAR(r, 0.2, 4)
	jit := map[string]int64{}
	for _, j := range []string{"vllm", "dcgm", "node", "backup"} {
		jit[j] = r.Int64N(2000)
	}
	ts := func(t int, job string) int64 { return Start.Add(time.Duration(t)*step).UnixMilli() + jit[job] }

	// Cumulative counters.
	cum := map[string]float64{}
	counter := func(lbls map[string]string, job string, t int, inc float64) {
		key := seriesKey(lbls)
		cum[key] += inc
		rc.add(lbls, ts(t, job), cum[key])
	}
	hist := func(name string, t int, count, mean float64) {
		e := 0.0
		if count > 0 {
			e = 0.35 / math.Sqrt(count) * r.NormFloat64()
		}
		counter(with(vllm, "__name__", name+"_sum"), "vllm", t, math.Max(0, count*mean*(1+e)))
		counter(with(vllm, "__name__", name+"_count"), "vllm", t, count)
	}
	running := 20.0
	for t := range n {
		lf := 1 + 0.45*f.active(LoadSurge, t) + 0.15*f.active(MildLoadSurge, t)
		lam := 7 * math.Exp(load.next()) * lf
		pl := 850 * math.Exp(plen.next()) * (1 + 0.8*f.active(LongPrompts, t))
		ol := 220 * math.Exp(olen.next())
		drop := 730*f.active(GPUThrottle, t) + 220*f.active(MildThrottle, t) + 480*f.active(DecoyThrottle, t)
		clock := 1980 - math.Abs(clk.next()) - drop
		s := clock / 1980
		maj := 4 * math.Exp(faults.next()) * (1 + 62*(f.active(PageFaults, t)+f.active(DecoyPageFaults, t)))
		busy := 0.6*math.Exp(cpu.next()) + 5.4*f.active(CPUContention, t)
		throttled := 0.0
		if drop > 0 {
			throttled = 8 // HW slowdown
		}

		prefill := pl / (19000 * s)
		tpot := 0.011 / s * (1 + 0.25*running/64) * (1 + maj/4000)
		decode := ol * tpot
		frontend := 0.014 + 0.00045*maj + 0.09*math.Pow(busy/8, 3)
		rho := math.Min(0.96, lam*(prefill+decode)/48)
		queue := 0.040 * rho / (1 - rho)
		ttft := queue + frontend + prefill
		e2e := ttft + decode
		running = lam * (prefill + decode)
		waiting := lam * queue

		done := poisson(r, lam*step.Seconds())
		hist("vllm:time_to_first_token_seconds", t, done, ttft)
		hist("vllm:e2e_request_latency_seconds", t, done, e2e)
		hist("vllm:request_queue_time_seconds", t, done, queue)
		hist("vllm:request_prefill_time_seconds", t, done, prefill)
		hist("vllm:request_decode_time_seconds", t, done, decode)
		hist("vllm:time_per_output_token_seconds", t, done*ol, tpot)
		hist("vllm:request_prompt_tokens", t, done, pl)
		hist("vllm:request_generation_tokens", t, done, ol)
		counter(with(vllm, "__name__", "vllm:request_success_total", "finished_reason", "stop"), "vllm", t, done)
		counter(with(vllm, "__name__", "vllm:prompt_tokens_total"), "vllm", t, done*pl)
		counter(with(vllm, "__name__", "vllm:generation_tokens_total"), "vllm", t, done*ol)
		counter(with(vllm, "__name__", "vllm:num_preemptions_total"), "vllm", t, poisson(r, 0.02*step.Seconds()))
		rc.add(with(vllm, "__name__", "vllm:num_requests_running"), ts(t, "vllm"), math.Round(running+math.Sqrt(running)*r.NormFloat64()*0.3))
		rc.add(with(vllm, "__name__", "vllm:num_requests_waiting"), ts(t, "vllm"), math.Max(0, math.Round(waiting+math.Sqrt(waiting+0.1)*r.NormFloat64()*0.3)))
		rc.add(with(vllm, "__name__", "vllm:gpu_cache_usage_perc"), ts(t, "vllm"), math.Min(1, running*(pl+ol/2)/400000))

		util := math.Min(100, 100*rho*1.3+2*r.NormFloat64())
		rc.add(with(dcgm, "__name__", "DCGM_FI_DEV_SM_CLOCK"), ts(t, "dcgm"), math.Round(clock))
		rc.add(with(dcgm, "__name__", "DCGM_FI_DEV_MEM_CLOCK"), ts(t, "dcgm"), 2619)
		rc.add(with(dcgm, "__name__", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"), ts(t, "dcgm"), throttled)
		rc.add(with(dcgm, "__name__", "DCGM_FI_DEV_GPU_UTIL"), ts(t, "dcgm"), math.Round(math.Max(0, util)))
		rc.add(with(dcgm, "__name__", "DCGM_FI_PROF_SM_ACTIVE"), ts(t, "dcgm"), math.Max(0, util/100*0.8+0.01*r.NormFloat64()))
		power := 120 + 480*util/100*s*s + 6*r.NormFloat64()
		rc.add(with(dcgm, "__name__", "DCGM_FI_DEV_POWER_USAGE"), ts(t, "dcgm"), power)
		rc.add(with(dcgm, "__name__", "DCGM_FI_DEV_GPU_TEMP"), ts(t, "dcgm"), math.Round(38+power/20+0.7*r.NormFloat64()))
		rc.add(with(dcgm, "__name__", "DCGM_FI_DEV_FB_USED"), ts(t, "dcgm"), 71234+math.Round(20*r.NormFloat64()))
		rc.add(with(dcgm, "__name__", "DCGM_FI_DEV_XID_ERRORS"), ts(t, "dcgm"), 0)

		counter(with(node, "__name__", "node_vmstat_pgmajfault"), "node", t, poisson(r, maj*step.Seconds()))
		counter(with(node, "__name__", "node_vmstat_pgfault"), "node", t, poisson(r, 9000*step.Seconds()*math.Exp(0.05*r.NormFloat64())))
		counter(with(node, "__name__", "node_pressure_cpu_waiting_seconds_total"), "node", t, step.Seconds()*math.Min(1, 0.01+0.2*math.Pow(busy/8, 2)*(1+0.1*r.NormFloat64())))
		counter(with(node, "__name__", "node_pressure_memory_waiting_seconds_total"), "node", t, step.Seconds()*math.Max(0, 0.001+maj/5000*(1+0.2*r.NormFloat64())))
		for c := range 8 {
			cu := math.Min(1, (busy/8+0.05)*(1+0.1*r.NormFloat64()))
			for _, m := range []struct {
				mode  string
				share float64
			}{{"user", 0.8 * cu}, {"system", 0.2 * cu}, {"iowait", 0.005}, {"idle", math.Max(0, 1-cu-0.005)}} {
				counter(with(node, "__name__", "node_cpu_seconds_total", "cpu", fmt.Sprint(c), "mode", m.mode), "node", t, step.Seconds()*m.share)
			}
		}
		rc.add(with(node, "__name__", "node_load1"), ts(t, "node"), math.Max(0, busy+running/16+0.3*r.NormFloat64()))
		rc.add(with(node, "__name__", "node_memory_MemAvailable_bytes"), ts(t, "node"), 2.1e11*(1-0.1*math.Min(1, maj/250))+1e8*r.NormFloat64())
		counter(with(node, "__name__", "node_disk_io_time_seconds_total", "device", "nvme0n1"), "node", t, step.Seconds()*math.Min(1, 0.02*(1+0.3*r.NormFloat64())+maj/3000))
		counter(with(node, "__name__", "node_disk_read_bytes_total", "device", "nvme0n1"), "node", t, step.Seconds()*(2e6*math.Exp(0.2*r.NormFloat64())+maj*4096*8))
		jump := 1.0
		if decoy >= 0 && t >= decoy {
			jump = 20
		}
		counter(with(node, "__name__", "node_network_transmit_bytes_total", "device", "eth0"), "node", t, step.Seconds()*(3e6*math.Exp(netNoise.next())+1.5e6*(jump-1)))
		counter(with(node, "__name__", "node_network_receive_bytes_total", "device", "eth0"), "node", t, step.Seconds()*2e6*lam/7*math.Exp(0.1*r.NormFloat64()))
		counter(with(backup, "__name__", "backup_uploaded_bytes_total"), "backup", t, step.Seconds()*1.5e6*jump*math.Exp(bkNoise.next()))
		rc.add(with(backup, "__name__", "backup_running"), ts(t, "backup"), math.Min(1, jump-1))
	}
	out := make([]Series, 0, len(rc.order))
	for _, k := range rc.order {
		out = append(out, *rc.series[k])
	}
	return out
}

func metadata() map[string]Metadata {
	c := func(u, h string) Metadata { return Metadata{Type: "counter", Unit: u, Help: h} }
	g := func(u, h string) Metadata { return Metadata{Type: "gauge", Unit: u, Help: h} }
	hi := func(u, h string) Metadata { return Metadata{Type: "histogram", Unit: u, Help: h} }
	return map[string]Metadata{
		"vllm:time_to_first_token_seconds":           hi("seconds", "Histogram of time to first token in seconds."),
		"vllm:e2e_request_latency_seconds":           hi("seconds", "Histogram of end to end request latency in seconds."),
		"vllm:request_queue_time_seconds":            hi("seconds", "Histogram of time spent in WAITING phase for request."),
		"vllm:request_prefill_time_seconds":          hi("seconds", "Histogram of time spent in PREFILL phase for request."),
		"vllm:request_decode_time_seconds":           hi("seconds", "Histogram of time spent in DECODE phase for request."),
		"vllm:time_per_output_token_seconds":         hi("seconds", "Histogram of time per output token in seconds."),
		"vllm:request_prompt_tokens":                 hi("", "Number of prefill tokens processed."),
		"vllm:request_generation_tokens":             hi("", "Number of generation tokens processed."),
		"vllm:request_success_total":                 c("", "Count of successfully processed requests."),
		"vllm:prompt_tokens_total":                   c("", "Number of prefill tokens processed."),
		"vllm:generation_tokens_total":               c("", "Number of generation tokens processed."),
		"vllm:num_preemptions_total":                 c("", "Cumulative number of preemption from the engine."),
		"vllm:num_requests_running":                  g("", "Number of requests in model execution batches."),
		"vllm:num_requests_waiting":                  g("", "Number of requests waiting to be processed."),
		"vllm:gpu_cache_usage_perc":                  g("", "GPU KV-cache usage. 1 means 100 percent usage."),
		"DCGM_FI_DEV_SM_CLOCK":                       g("", "SM clock frequency (in MHz)."),
		"DCGM_FI_DEV_MEM_CLOCK":                      g("", "Memory clock frequency (in MHz)."),
		"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS":         g("", "Throttling reasons."),
		"DCGM_FI_DEV_GPU_UTIL":                       g("", "GPU utilization (in %)."),
		"DCGM_FI_PROF_SM_ACTIVE":                     g("", "The ratio of cycles an SM has at least 1 warp assigned."),
		"DCGM_FI_DEV_POWER_USAGE":                    g("", "Power draw (in W)."),
		"DCGM_FI_DEV_GPU_TEMP":                       g("", "GPU temperature (in C)."),
		"DCGM_FI_DEV_FB_USED":                        g("", "Framebuffer memory used (in MiB)."),
		"DCGM_FI_DEV_XID_ERRORS":                     g("", "Value of the last XID error encountered."),
		"node_vmstat_pgmajfault":                     c("", "/proc/vmstat information field pgmajfault."),
		"node_vmstat_pgfault":                        c("", "/proc/vmstat information field pgfault."),
		"node_pressure_cpu_waiting_seconds_total":    c("seconds", "Total time in seconds that processes have waited for CPU time"),
		"node_pressure_memory_waiting_seconds_total": c("seconds", "Total time in seconds that processes have waited for memory"),
		"node_cpu_seconds_total":                     c("seconds", "Seconds the CPUs spent in each mode."),
		"node_load1":                                 g("", "1m load average."),
		"node_memory_MemAvailable_bytes":             g("bytes", "Memory information field MemAvailable_bytes."),
		"node_disk_io_time_seconds_total":            c("seconds", "Total seconds spent doing I/Os."),
		"node_disk_read_bytes_total":                 c("bytes", "The total number of bytes read successfully."),
		"node_network_transmit_bytes_total":          c("bytes", "Network device statistic transmit_bytes."),
		"node_network_receive_bytes_total":           c("bytes", "Network device statistic receive_bytes."),
		"backup_uploaded_bytes_total":                c("bytes", "Bytes uploaded by the backup agent."),
		"backup_running":                             g("", "1 while a backup runs."),
	}
}
