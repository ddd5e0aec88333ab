package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// The host and GPU model: what tailroot-agent (eBPF) and dcgm-exporter would
// report for the node an instance runs on, and how it feeds back into the
// serving model. Every level wanders with its own slow AR(1) noise, so the
// covariates vary (and their effects can be learnt) even without a fault:
//
//	run-queue delay per wakeup  rq  = 40 µs · e^{x_rq} · F_cpu           (σ 0.25, τ 5 min)
//	page faults per second      pf  = 400 · e^{x_pf} · F_pf              (σ 0.30, τ 3 min)
//	block IO latency            io  = 0.6 ms · e^{x_io} · F_io           (σ 0.30, τ 5 min)
//	GIL wait per acquisition    gil = 15 µs · e^{x_gil} · (λ/λ̄)^0.7 + 2.5·rq  (σ 0.10, τ 5 min)
//	SM clock                    clk = 1980 MHz · (1 − 0.012·|x_clk|) · F_clk (σ 1, τ 10 min)
//
// (F the fault factors of faults.go, 1 without a fault; λ̄ = MeanRPS). With
// s = clk/1980 the serving model of doc.go then runs with
//
//	prefill rate × s/(1 + ½·pf·25 µs), decode step × (1 + pf·25 µs)/s^0.6,
//	frontend + 120·rq + 80·gil per request (wakeups and GIL acquisitions
//	of tokenisation), and the engine blocked by weight loads (0.1 a second,
//	64 sequential reads each): f = 0.1·64·io of the time in blocks of 64·io.
//
// and reports, per step: run-queue delay over 1500 wakeups/s, GIL wait over
// 600·λ/λ̄ acquisitions/s, block IO latency over 150 IOs/s plus the loads'
// reads, CUDA synchronisation time 0.55·d_gpu + 30 µs per call (d_gpu the
// decode step without host stalls, 4 calls per step), GPU utilisation
// 100·(1 − e^{−b/20})·min(1.15, s^−0.3) + N(0, 1.2), power
// 80 + 5.2·util·s² + N(0, 5) W, SM clock clk + N(0, 4) MHz, and constant
// memory clock and framebuffer use.
type host struct {
	rng *rand.Rand
	// AR(1) log-space states.
	xRQ, xPF, xIO, xGIL, xClk float64
	// Levels of the current sub-step.
	rq, pf, io, gil, clk float64

	// Emitted values.
	pageFaults                               float64 // counter
	smClock, util, power, memClock, fbUsed   float64 // gauges
	runqueue, gilWait, blockIO, cudaCall     *classicHist
	lastLambda                               float64 // λ/MeanRPS of the sub-step
	loadsPerSec, readsPerLoad, wakeupsPerSec float64
}

// Base levels of the host model.
const (
	baseRunqueue   = 40e-6
	basePageFaults = 400
	baseBlockIO    = 0.6e-3
	baseGIL        = 15e-6
	baseSMClock    = 1980 // H100 SXM maximum boost clock, MHz
	baseMemClock   = 2619 // H100 SXM HBM3 memory clock, MHz
	pageFaultCost  = 25e-6
)

// agentBuckets are the upper bounds of the agent's latency histograms:
// powers of two in seconds from 2⁻²⁰ (≈1 µs) to 4 s, the bounds of its
// schema-0 native buckets.
var agentBuckets = func() []float64 {
	var b []float64
	for e := -20; e <= 2; e++ {
		b = append(b, math.Ldexp(1, e))
	}
	return b
}()

// Families of the covariates, with the names tailroot-agent and
// dcgm-exporter use.
var (
	famRunqueue   = latency("tailroot_runqueue_delay_seconds", "Scheduler run-queue delay per wakeup of the inference server's threads.", agentBuckets)
	famPageFaults = counter("tailroot_page_faults_total", "Page faults taken by the inference engine process.")
	famGILWait    = latency("tailroot_gil_wait_seconds", "Time a Python thread of the API server waited to take the GIL.", agentBuckets)
	famBlockIO    = latency("tailroot_block_io_latency_seconds", "Block IO latency, issue to completion, of the disk holding the model weights.", agentBuckets)
	famCUDACall   = latency("tailroot_cuda_call_seconds", "Duration of CUDA synchronisation calls (cudaStreamSynchronize) of the engine.", agentBuckets)

	famSMClock  = gauge("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).")
	famMemClock = gauge("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).")
	famGPUUtil  = gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")
	famPower    = gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).")
	famFBUsed   = gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).")
)

func newHost(seed uint64, idx int, m *Model, native bool) *host {
	h := &host{
		// Its own stream, so turning covariates on leaves the vLLM series'
		// random draws alone.
		rng:           rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, 0x2545f4914f6cdd1d^uint64(idx))),
		runqueue:      newClassicHist(agentBuckets, native),
		gilWait:       newClassicHist(agentBuckets, native),
		blockIO:       newClassicHist(agentBuckets, native),
		cudaCall:      newClassicHist(agentBuckets, native),
		memClock:      baseMemClock,
		loadsPerSec:   0.1,
		readsPerLoad:  64,
		wakeupsPerSec: 1500,
	}
	// Weights plus the preallocated KV cache (2 bytes × 2 (K, V) per token
	// and layer is folded into a round 0.11 MiB per token).
	h.fbUsed = math.Round(16000 + 0.11*float64(m.KVCacheTokens))
	r := h.rng
	h.xRQ, h.xPF, h.xIO = 0.25*r.NormFloat64(), 0.3*r.NormFloat64(), 0.3*r.NormFloat64()
	h.xGIL, h.xClk = 0.1*r.NormFloat64(), r.NormFloat64()
	return h
}

// ar1 advances an AR(1) state with stationary sd sigma and correlation time
// tau by dt seconds.
func ar1(r *rand.Rand, x, sigma float64, tau time.Duration, dt float64) float64 {
	phi := math.Exp(-dt / tau.Seconds())
	return phi*x + math.Sqrt(1-phi*phi)*sigma*r.NormFloat64()
}

// before advances the host levels by dt and returns what they do to the
// serving model. relLoad is λ/MeanRPS.
func (h *host) before(dt, relLoad float64, fx effects) engineMod {
	r := h.rng
	h.xRQ = ar1(r, h.xRQ, 0.25, 5*time.Minute, dt)
	h.xPF = ar1(r, h.xPF, 0.3, 3*time.Minute, dt)
	h.xIO = ar1(r, h.xIO, 0.3, 5*time.Minute, dt)
	h.xGIL = ar1(r, h.xGIL, 0.1, 5*time.Minute, dt)
	h.xClk = ar1(r, h.xClk, 1, 10*time.Minute, dt)
	h.rq = baseRunqueue * math.Exp(h.xRQ-0.25*0.25/2) * fx.runqueue
	h.pf = basePageFaults * math.Exp(h.xPF-0.3*0.3/2) * fx.pageFaults
	h.io = baseBlockIO * math.Exp(h.xIO-0.3*0.3/2) * fx.blockIO
	h.gil = baseGIL*math.Exp(h.xGIL)*math.Pow(math.Max(relLoad, 0.01), 0.7) + 2.5*h.rq
	h.clk = baseSMClock * (1 - 0.012*math.Abs(h.xClk)) * fx.clock
	h.lastLambda = relLoad

	s := h.clk / baseSMClock
	stall := h.pf * pageFaultCost
	blockLen := h.readsPerLoad * h.io
	return engineMod{
		prefillRate: s / (1 + stall/2),
		decodeStep:  (1 + stall) / math.Pow(s, 0.6),
		frontend:    120*h.rq + 80*h.gil,
		blockFrac:   math.Min(0.8, h.loadsPerSec*blockLen),
		blockLen:    blockLen,
		longRate:    fx.longRate,
		longTokens:  longTokens,
	}
}

// after records what the node reports for the sub-step, given the serving
// state st and the number of engine steps it ran.
func (h *host) after(dt float64, st *meanState, m *Model, steps float64) {
	r := h.rng
	s := h.clk / baseSMClock
	observeSpread(h.runqueue, r, h.rq, poisson(r, h.wakeupsPerSec*dt))
	observeSpread(h.gilWait, r, h.gil, poisson(r, 600*dt*math.Max(h.lastLambda, 0.01)))
	observeSpread(h.blockIO, r, h.io, poisson(r, 150*dt+h.loadsPerSec*h.readsPerLoad*dt))
	itlGPU := m.DecodeStep * (1 + st.b/m.BatchDoubling) / math.Pow(s, 0.6)
	observeSpread(h.cudaCall, r, 0.55*itlGPU+30e-6, poisson(r, 4*math.Max(steps, 1)))
	h.pageFaults += float64(poisson(r, h.pf*dt))

	h.smClock = math.Round(h.clk + 4*r.NormFloat64())
	util := 100*(1-math.Exp(-st.b/20))*math.Min(1.15, math.Pow(s, -0.3)) + 1.2*r.NormFloat64()
	h.util = math.Round(math.Max(0, math.Min(100, util)))
	h.power = math.Round((80+5.2*h.util*s*s+5*r.NormFloat64())*10) / 10
}

// spreadQuantiles are the midpoints of eight equal-probability bins of the
// unit exponential distribution, −ln(1 − (g + ½)/8), scaled to mean 1.
var spreadQuantiles = func() []float64 {
	q := make([]float64, 8)
	sum := 0.0
	for g := range q {
		q[g] = -math.Log(1 - (float64(g)+0.5)/8)
		sum += q[g]
	}
	for g := range q {
		q[g] *= 8 / sum
	}
	return q
}()

// observeSpread adds n observations with mean about mean and an
// exponential-like spread, in eight groups, so a histogram of thousands of
// events costs eight observations.
func observeSpread(h *classicHist, r *rand.Rand, mean float64, n int) {
	if n <= 0 {
		return
	}
	per, extra := n/8, n%8
	for g, q := range spreadQuantiles {
		c := per
		if g < extra {
			c++
		}
		if c > 0 {
			h.observe(mean*q*lognormJitter(r, 0.05), uint64(c))
		}
	}
}
