package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// noiseTau is the correlation time of the arrival-rate wobble.
const noiseTau = 10 * time.Minute

// instance is one simulated vLLM server: its random stream, its queue state
// and the cumulative values it exposes.
type instance struct {
	m   *Model
	rng *rand.Rand

	noise   float64 // AR(1) state of the log rate wobble
	backlog float64 // requests above capacity, waiting (fluid)

	// Gauges, as last set.
	running, waiting, kvUsage float64
	// Counters.
	promptTokens, genTokens, preemptions, prefixQueries, prefixHits float64
	success                                                         [len(finishReasons)]float64

	// Histograms.
	ttft, itl, reqTPOT, e2e, queue, inference, prefill, decode *classicHist
	reqPromptTokens, reqGenTokens, reqMaxTokens, iterTokens    *classicHist

	// host is the node and GPU model (host.go); nil unless covariates or
	// faults are on, and then the only thing that changes the serving model.
	host *host
	// faults are the faults injected into this instance (faults.go).
	faults []Fault

	// label, keep and records serve Options.Records: the instance label,
	// whether to keep records, and those kept since TakeRecords.
	label   string
	keep    bool
	seq     uint64
	records []Record
	// subStart, subDt, subN and subK place the current sub-step's
	// requests evenly over it.
	subStart   time.Time
	subDt      float64
	subN, subK int
}

func newInstance(m *Model, seed uint64, idx int, noise float64, native bool) *instance {
	in := &instance{
		m: m,
		// One stream per instance, so adding a model leaves the others alone.
		rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15^uint64(idx))),
	}
	in.noise = noise * in.rng.NormFloat64()
	tok := build125Buckets(m.MaxModelLen)
	in.ttft = newClassicHist(ttftBuckets, native)
	in.itl = newClassicHist(itlBuckets, native)
	in.reqTPOT = newClassicHist(itlBuckets, native)
	in.e2e = newClassicHist(requestLatencyBuckets, native)
	in.queue = newClassicHist(requestLatencyBuckets, native)
	in.inference = newClassicHist(requestLatencyBuckets, native)
	in.prefill = newClassicHist(requestLatencyBuckets, native)
	in.decode = newClassicHist(requestLatencyBuckets, native)
	in.reqPromptTokens = newClassicHist(tok, false)
	in.reqGenTokens = newClassicHist(tok, false)
	in.reqMaxTokens = newClassicHist(tok, false)
	in.iterTokens = newClassicHist(iterationTokensBuckets, false)
	return in
}

// diurnal returns the factor on the mean rate at time t:
//
//	1 + a·cos(2π(h − PeakHour)/24),  a = (F − 1)/(F + 1),
//
// with h the UTC hour of day and F = DiurnalFactor, so the peak (1 + a) is F
// times the trough (1 − a) and the daily mean is 1.
func diurnal(t time.Time, factor, peakHour float64) float64 {
	a := (factor - 1) / (factor + 1)
	sec := t.UTC().Sub(t.UTC().Truncate(24 * time.Hour)).Seconds()
	h := sec / 3600
	return 1 + a*math.Cos(2*math.Pi*(h-peakHour)/24)
}

// meanState is the serving model's steady state at arrival rate lambda; see
// the formulas in doc.go.
type meanState struct {
	b          float64 // running requests
	itl        float64 // decode step time at b
	capacity   float64 // mu, the most requests per second the instance completes
	waitMean   float64 // mean stochastic queue wait (P-K + slot term)
	waitProb   float64 // probability a request waits at all
	stallFrac  float64 // fraction of decode steps that carry a prefill chunk
	stallExtra float64 // extra step time of such a step
	ctxTokens  float64 // mean KV tokens a running request holds

	prefillRate float64 // prefill tokens per second, after engineMod
	frontend    float64 // mean seconds added to each request's frontend time
	longKV      float64 // KV tokens held by long-context requests
}

// engineMod is what the host model and the active faults do to the serving
// model for one sub-step. noMod leaves it exactly as documented in doc.go.
type engineMod struct {
	prefillRate float64 // factor on PrefillTokensPerSec
	decodeStep  float64 // factor on DecodeStep
	frontend    float64 // seconds added to each request's frontend time
	blockFrac   float64 // fraction of time the engine is blocked (weight loads)
	blockLen    float64 // mean seconds of one block
	longRate    float64 // long-context requests per second
	longTokens  float64 // their mean prompt length in tokens
}

var noMod = engineMod{prefillRate: 1, decodeStep: 1}

func (m *Model) meanOutput() float64 {
	return math.Min(m.OutputMedian*math.Exp(m.OutputSigma*m.OutputSigma/2), float64(m.MaxTokens))
}

// steady returns the mean state at arrival rate lambda; see doc.go.
// With a modifier other than noMod (host model or faults, see faults.go):
// prefill and decode run at the modified speeds; long-context prompts take
// ρ_L = r_L·T_L of the prefill stage (T_L their prefill time) and add
// r_L·T_L²/(2(1−ρ)) to the Pollaczek–Khinchine wait; an engine blocked a
// fraction f of the time in blocks of mean length L serves (1−f) of its
// capacity and adds f·L/(1−ρ) to the mean wait.
func (m *Model) steady(lambda float64, mod engineMod) meanState {
	var s meanState
	rate := m.PrefillTokensPerSec * mod.prefillRate
	dstep := m.DecodeStep * mod.decodeStep
	s.prefillRate = rate
	s.frontend = mod.frontend
	pm := m.PromptMedian * math.Exp(m.PromptSigma*m.PromptSigma/2)
	om := m.meanOutput()
	pu := pm * (1 - m.PrefixHitRatio)
	tp := pu / rate
	s.ctxTokens = pm + om/2
	c := math.Max(1, math.Min(float64(m.MaxNumSeqs), float64(m.KVCacheTokens)/s.ctxTokens))
	step := func(b float64) float64 { return dstep * (1 + b/m.BatchDoubling) }

	tl := mod.longTokens / rate
	rhoL := math.Min(0.9, mod.longRate*tl)
	muSlots := c / (tp + om*step(c))
	muPrefill := math.Inf(1)
	if pu > 0 {
		muPrefill = rate / pu * (1 - rhoL)
	}
	s.capacity = math.Min(muSlots, muPrefill) * (1 - mod.blockFrac)
	// Above capacity the excess waits in the backlog; the engine itself
	// sees the admitted rate.
	lambda = math.Min(lambda, s.capacity)

	// Little's law on the running set: b = λ·(Tp + Ō·step(b)), solved for b.
	denom := 1 - lambda*om*dstep/m.BatchDoubling
	s.b = c
	if denom > 0 {
		s.b = math.Min(c, lambda*(tp+om*dstep)/denom)
	}
	s.itl = step(s.b)

	// Prefill stage: M/G/1, Pollaczek–Khinchine Wq = ρ·E[T²]/(2·E[T]·(1−ρ)).
	// For a log-normal prompt E[T²]/E[T] = median·e^(1.5σ²)·(1−hit)/rate.
	const rhoMax = 0.98
	rhoP := math.Min(lambda*tp, rhoMax)
	tau2 := m.PromptMedian * math.Exp(1.5*m.PromptSigma*m.PromptSigma) * (1 - m.PrefixHitRatio) / rate
	s.waitMean = rhoP * tau2 / (2 * (1 - rhoP))
	if rhoL > 0 || mod.blockFrac > 0 {
		rho := math.Min(rhoP+rhoL, rhoMax)
		s.waitMean = (rhoP*tau2 + mod.longRate*tl*tl) / (2 * (1 - rho))
		s.waitMean += mod.blockFrac * mod.blockLen / (1 - rho)
		// Long prompts stay resident while they prefill and decode.
		s.longKV = mod.longRate * (tl + om*step(s.b)) * mod.longTokens
	}
	// Batch slots: M/M/c with Sakasegawa's Lq ≈ ρ^√(2(c+1))/(1−ρ), Wq = Lq/λ.
	rhoS := math.Min(lambda/muSlots, rhoMax)
	if lambda > 0 {
		s.waitMean += math.Pow(rhoS, math.Sqrt(2*(c+1))) / (1 - rhoS) / lambda
	}
	s.waitProb = math.Max(math.Max(rhoP, rhoS), 0.01)

	s.stallFrac = math.Min(0.9, lambda*(pu/float64(m.ChunkTokens)+0.5)*s.itl+rhoL)
	s.stallExtra = math.Min(pu, float64(m.ChunkTokens)) / rate
	if rhoL > 0 {
		// Stalls behind a long prompt carry a full chunk; weight them in.
		full := float64(m.ChunkTokens) / rate
		s.stallExtra += (full - s.stallExtra) * rhoL / s.stallFrac
	}
	return s
}

// advance simulates dt seconds whose midpoint is mid; the arrival rate is
// taken at mid (midpoint rule).
func (in *instance) advance(mid time.Time, dt float64, o *Options) {
	m, r := in.m, in.rng
	if o.Noise > 0 {
		phi := math.Exp(-dt / noiseTau.Seconds())
		in.noise = phi*in.noise + math.Sqrt(1-phi*phi)*o.Noise*r.NormFloat64()
	}
	lambda := m.MeanRPS * diurnal(mid, o.DiurnalFactor, o.PeakHour) * math.Exp(in.noise-o.Noise*o.Noise/2)
	mod, fx := noMod, activeEffects(in.faults, mid)
	lambda *= fx.rate
	if in.host != nil {
		mod = in.host.before(dt, lambda/m.MeanRPS, fx)
	}
	st := m.steady(lambda, mod)

	// Fluid overflow: above capacity the excess queues and completions run
	// at capacity; below, the backlog drains with the spare capacity.
	done := lambda
	if lambda > st.capacity {
		in.backlog += (lambda - st.capacity) * dt
		done = st.capacity
	} else if in.backlog > 0 {
		drain := math.Min(in.backlog, (st.capacity-lambda)*dt)
		in.backlog -= drain
		done += drain / dt
	}
	backlogWait := 0.0
	if in.backlog > 0 {
		backlogWait = in.backlog / st.capacity
	}

	var chunks, uncached int
	nShort := poisson(r, done*dt)
	nLong := 0
	if mod.longRate > 0 {
		nLong = poisson(r, mod.longRate*dt)
	}
	in.subStart = mid.Add(-time.Duration(dt * 0.5 * float64(time.Second)))
	in.subDt, in.subN, in.subK = dt, nShort+nLong, 0
	for range nShort {
		c, u := in.request(&st, backlogWait, 0)
		chunks += c
		uncached += u
	}
	if nLong > 0 {
		for range nLong {
			p := int(mod.longTokens * (0.8 + 0.4*r.Float64()))
			c, u := in.request(&st, backlogWait, p)
			chunks += c
			uncached += u
		}
	}

	// Engine steps: busy for min(1, b) of the time, one step per decode
	// step time; chunks ride on steps that also decode.
	steps := math.Min(1, st.b) * dt / st.itl
	mixed := math.Min(steps, float64(chunks))
	batch := math.Max(1, math.Round(st.b))
	in.iterTokens.observe(batch, stochRound(r, steps-mixed))
	if mixed > 0 {
		in.iterTokens.observe(math.Round(st.b+float64(uncached)/float64(chunks)), stochRound(r, mixed))
	}

	in.running = math.Min(math.Max(0, math.Round(st.b+math.Sqrt(st.b)*r.NormFloat64())), float64(m.MaxNumSeqs))
	in.waiting = float64(poisson(r, in.backlog+lambda*st.waitMean))
	in.kvUsage = math.Min(1, (in.running*st.ctxTokens+st.longKV)/float64(m.KVCacheTokens)*lognormJitter(r, 0.05))
	if in.kvUsage > 0.9 {
		// Near a full cache the scheduler preempts running requests.
		in.preemptions += float64(poisson(r, dt*20*(in.kvUsage-0.9)))
	}
	if in.host != nil {
		in.host.after(dt, &st, m, steps)
	}
}

// request simulates one finished request and records it; it returns the
// number of prefill chunks and uncached prompt tokens it used. promptLen > 0
// fixes the prompt length (a long-context request) instead of drawing it.
func (in *instance) request(st *meanState, backlogWait float64, promptLen int) (chunks, uncached int) {
	m, r := in.m, in.rng
	var prompt int
	if promptLen > 0 {
		prompt = clampInt(promptLen, 1, m.MaxModelLen-1)
	} else {
		prompt = clampInt(int(math.Round(m.PromptMedian*math.Exp(m.PromptSigma*r.NormFloat64()))), 1, m.MaxModelLen-1)
	}
	maxTok := min(m.MaxTokens, m.MaxModelLen-prompt)
	output := max(1, int(math.Round(m.OutputMedian*math.Exp(m.OutputSigma*r.NormFloat64()))))
	reason := reasonStop
	if output >= maxTok {
		output, reason = maxTok, reasonLength
	}
	if m.AbortRatio > 0 && r.Float64() < m.AbortRatio {
		output, reason = 1+r.IntN(output), reasonAbort
	}

	// Prefix cache hits come in whole 16-token blocks; at least one prompt
	// token is always computed.
	cached := 0
	if m.PrefixHitRatio > 0 {
		frac := m.PrefixHitRatio * (0.5 + r.Float64())
		cached = min(int(float64(prompt)*frac)/16*16, prompt-1)
	}
	uncached = prompt - cached
	chunks = (uncached + m.ChunkTokens - 1) / m.ChunkTokens

	// Queue: fluid backlog, then the wait for the running engine step to
	// end, then (with probability waitProb) an exponential wait whose mean
	// makes the overall mean st.waitMean.
	queue := backlogWait + r.Float64()*st.itl
	if r.Float64() < st.waitProb {
		queue += r.ExpFloat64() * st.waitMean / st.waitProb
	}
	// Prefill: one engine step per chunk plus the prompt compute.
	prefill := (float64(chunks)*st.itl + float64(uncached)/st.prefillRate) * lognormJitter(r, 0.1)
	// Frontend: HTTP, tokenisation and detokenisation before the queue.
	frontend := (0.002 + float64(prompt)*1e-6) * lognormJitter(r, 0.2)
	if st.frontend > 0 {
		// Scheduler and GIL waits of the API server (host.go).
		frontend += st.frontend * lognormJitter(r, 0.3)
	}
	ttft := frontend + queue + prefill

	// Decode: output-1 inter-token gaps. Most run at the request's step time
	// (three groups with their own jitter); a stallFrac share of steps also
	// carries another request's prefill chunk and takes stallExtra longer.
	decode := 0.0
	if n := output - 1; n > 0 {
		itl := st.itl * lognormJitter(r, 0.05)
		stalls := binomial(r, n, st.stallFrac)
		plain := n - stalls
		groups := [...]int{plain / 2, plain / 3, plain - plain/2 - plain/3}
		for _, g := range groups {
			if g > 0 {
				v := itl * lognormJitter(r, 0.08)
				in.itl.observe(v, uint64(g))
				decode += v * float64(g)
			}
		}
		for _, g := range [...]int{stalls / 2, stalls - stalls/2} {
			if g > 0 {
				v := itl + st.stallExtra*(0.5+r.Float64())
				in.itl.observe(v, uint64(g))
				decode += v * float64(g)
			}
		}
		in.reqTPOT.observe(decode/float64(n), 1)
	}

	in.ttft.observe(ttft, 1)
	in.queue.observe(queue, 1)
	in.prefill.observe(prefill, 1)
	in.decode.observe(decode, 1)
	in.inference.observe(prefill+decode, 1)
	in.e2e.observe(ttft+decode, 1)
	in.reqPromptTokens.observe(float64(prompt), 1)
	in.reqGenTokens.observe(float64(output), 1)
	in.reqMaxTokens.observe(float64(m.MaxTokens), 1)

	in.success[reason]++
	if in.keep {
		// Spread evenly over the sub-step; no random draw, so keeping
		// records leaves the series unchanged.
		off := in.subDt * (float64(in.subK) + 0.5) / float64(in.subN)
		in.records = append(in.records, Record{
			Model: m.Name, Instance: in.label, Job: "vllm", Seq: in.seq,
			Arrival:  in.subStart.Add(time.Duration(off * float64(time.Second))),
			Frontend: frontend, Queue: queue, Prefill: prefill, Decode: decode,
			PromptTokens: prompt, OutputTokens: output, CachedTokens: cached,
			FinishReason: finishReasons[reason],
		})
		in.seq++
	}
	in.subK++
	in.promptTokens += float64(prompt)
	in.genTokens += float64(output)
	in.prefixQueries += float64(prompt)
	in.prefixHits += float64(cached)
	return chunks, uncached
}

// poisson draws a Poisson variate: Knuth's product method below mean 30, a
// rounded normal above (relative error of the variance < 2% there).
func poisson(r *rand.Rand, mean float64) int {
	if !(mean > 0) {
		return 0
	}
	if mean < 30 {
		l, k, p := math.Exp(-mean), 0, r.Float64()
		for p > l {
			k++
			p *= r.Float64()
		}
		return k
	}
	return max(0, int(math.Round(mean+math.Sqrt(mean)*r.NormFloat64())))
}

// binomial draws Binomial(n, p): Bernoulli trials up to 50, a clamped
// rounded normal above.
func binomial(r *rand.Rand, n int, p float64) int {
	if p <= 0 || n <= 0 {
		return 0
	}
	if n <= 50 {
		k := 0
		for range n {
			if r.Float64() < p {
				k++
			}
		}
		return k
	}
	mean := float64(n) * p
	return clampInt(int(math.Round(mean+math.Sqrt(mean*(1-p))*r.NormFloat64())), 0, n)
}

// lognormJitter is a log-normal factor with mean 1 and log-space sd sigma.
func lognormJitter(r *rand.Rand, sigma float64) float64 {
	return math.Exp(sigma*r.NormFloat64() - sigma*sigma/2)
}

// stochRound rounds x ≥ 0 up with probability frac(x), so sums stay unbiased.
func stochRound(r *rand.Rand, x float64) uint64 {
	if !(x > 0) {
		return 0
	}
	f := math.Floor(x)
	if r.Float64() < x-f {
		f++
	}
	return uint64(f)
}

func clampInt(v, lo, hi int) int {
	return max(lo, min(hi, v))
}
