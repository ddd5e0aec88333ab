package requests

import (
	"container/list"
	"fmt"
	"math"
	mrand "math/rand"
	"math/rand/v2"
	"time"
)

// Options configure the simulator. Zero values mean the default noted on
// each field.
type Options struct {
	// Trace names the embedded arrival trace (Traces). Empty means
	// "azure-conv". Ignored when Arrivals is set.
	Trace string
	// Arrivals, when set, is the trace to replay instead.
	Arrivals []Arrival
	// Start is the wall time of trace offset 0. Zero means 2023-11-16
	// 18:15:46 UTC, the start of the Azure conversation trace.
	Start time.Time
	// Speedup compresses the trace's arrival times by this factor (2 plays
	// an hour in 30 minutes at twice the load). Zero means 1.
	Speedup float64
	// Limit replays only the first Limit arrivals. Zero means all.
	Limit int
	// Seed makes a run reproducible.
	Seed uint64
	// Model is the model_name label. Empty means "llama-3.1-8b-instruct".
	Model string
	// Instances is the number of servers requests are routed over (to the
	// one with the fewest requests). Zero means 2.
	Instances int
	// Job is the job label (the service name of the spans). Empty means
	// "vllm".
	Job string
	// MaxNumSeqs is vLLM's max_num_seqs: requests running at once per
	// instance. Zero means 128.
	MaxNumSeqs int
	// KVTokens is the KV-cache capacity per instance in tokens (prompt plus
	// output of running requests). Zero means 400,000.
	KVTokens int
	// ChunkTokens is the prefill token budget of one engine step (chunked
	// prefill). Zero means 2048.
	ChunkTokens int
	// PrefillRate is prefill throughput, tokens per second. Zero means
	// 30,000.
	PrefillRate float64
	// DecodeStep is the step time with one running request; each further
	// running request adds DecodeSlope. Zeros mean 10 ms and 0.1 ms.
	DecodeStep, DecodeSlope time.Duration
	// MaxOutputTokens caps a request's output (max_tokens). Zero means
	// 4096.
	MaxOutputTokens int
	// CacheBlocks is the prefix cache per instance, in 512-token blocks,
	// used with traces that carry block ids (Mooncake). Zero means 2000.
	CacheBlocks int
	// PromptTokenIDs keeps each request's synthetic prompt token ids (for
	// sending prompt_token_ids instead of a precomputed entropy).
	PromptTokenIDs bool
}

func (o Options) withDefaults() Options {
	if o.Trace == "" {
		o.Trace = "azure-conv"
	}
	if o.Start.IsZero() {
		o.Start = time.Date(2023, 11, 16, 18, 15, 46, 680590000, time.UTC)
	}
	if o.Speedup <= 0 {
		o.Speedup = 1
	}
	if o.Model == "" {
		o.Model = "llama-3.1-8b-instruct"
	}
	if o.Instances <= 0 {
		o.Instances = 2
	}
	if o.Job == "" {
		o.Job = "vllm"
	}
	if o.MaxNumSeqs <= 0 {
		o.MaxNumSeqs = 128
	}
	if o.KVTokens <= 0 {
		o.KVTokens = 400000
	}
	if o.ChunkTokens <= 0 {
		o.ChunkTokens = 2048
	}
	if o.PrefillRate <= 0 {
		o.PrefillRate = 30000
	}
	if o.DecodeStep <= 0 {
		o.DecodeStep = 10 * time.Millisecond
	}
	if o.DecodeSlope <= 0 {
		o.DecodeSlope = 100 * time.Microsecond
	}
	if o.MaxOutputTokens <= 0 {
		o.MaxOutputTokens = 4096
	}
	if o.CacheBlocks <= 0 {
		o.CacheBlocks = 2000
	}
	return o
}

// Request is one simulated request: its lifecycle timestamps (Unix ns),
// the stages measured outside the engine and its token counts.
//
//	arrival ─tokenize─ … queued ─queue─ scheduled ─prefill─ first token
//	  ─decode─ last token ─detokenize─ ─network─ … finished
//
// The gaps marked … are frontend overheads that no stage names; they end
// up in the residual stage other.
type Request struct {
	ID       string
	TraceID  [16]byte
	Model    string
	Instance string
	Job      string

	Arrival, Queued, Scheduled, FirstToken, LastToken, Finished int64
	// TokenTimes holds the emission time of every output token.
	TokenTimes []int64
	// Tokenize, Detokenize and Network are seconds.
	Tokenize, Detokenize, Network float64

	PromptTokens, OutputTokens, CachedTokens int
	// PromptEntropy is the Shannon entropy (bits) of the synthetic prompt's
	// token ids; PromptTokenIDs holds them when Options.PromptTokenIDs.
	PromptEntropy  float64
	PromptTokenIDs []int64
}

// maxSyntheticPrompt caps the synthetic prompt drawn per request unless
// its ids are kept: entropy is then that of the first 1024 tokens, which
// keeps an hour of Mooncake (8k tokens per prompt on average) cheap to
// simulate.
const maxSyntheticPrompt = 1024

// blockTokens is the Mooncake trace's prefix block size.
const blockTokens = 512

type simReq struct {
	out         *Request
	blocks      []uint32
	uncached    int
	prefillLeft int
	kv          int
}

type instance struct {
	name    string
	clock   int64
	waiting []*simReq
	running []*simReq
	kvUsed  int
	cache   *lru
}

// Simulate replays the trace through the serving model and returns every
// request, ordered by arrival. The same Options give the same requests.
//
// Serving model, per instance, one engine step at a time (vLLM's
// continuous batching with chunked prefill): at the start of a step,
// waiting requests whose tokenisation is done are admitted in arrival order
// while fewer than MaxNumSeqs run and their prompt plus output fit the KV
// cache; the step then gives up to ChunkTokens of prefill to admitted
// requests in order (a request is scheduled at the start of the first step
// that prefills it). The step lasts DecodeStep + DecodeSlope·(decoding
// requests) + (prefill tokens)/PrefillRate, times a log-normal jitter
// (σ = 0.05). At its end every decoding request emits a token and a request
// whose prefill completed emits its first one. Prompt blocks found in the
// instance's prefix cache (longest cached prefix, LRU) are not prefilled.
// Tokenize ≈ 1.5 µs per prompt token, detokenize ≈ 0.3 µs per output token
// plus 0.1 ms, network ≈ 1.5 ms, each log-normal; 50–300 µs of frontend
// overhead lands in other at each end.
func Simulate(o Options) ([]Request, error) {
	o = o.withDefaults()
	arr := o.Arrivals
	if arr == nil {
		var err error
		if arr, err = LoadTrace(o.Trace); err != nil {
			return nil, err
		}
	}
	if o.Limit > 0 && o.Limit < len(arr) {
		arr = arr[:o.Limit]
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5bd1e995))
	zipfSrc := mrand.New(mrand.NewSource(int64(o.Seed) ^ 0x2545F491))
	insts := make([]*instance, o.Instances)
	for i := range insts {
		insts[i] = &instance{name: fmt.Sprintf("%s-%d", o.Job, i), cache: newLRU(o.CacheBlocks)}
	}
	out := make([]Request, len(arr))
	start := o.Start.UnixNano()
	for i, a := range arr {
		r := &out[i]
		r.Model, r.Job = o.Model, o.Job
		r.ID = fmt.Sprintf("chatcmpl-%016x", rng.Uint64())
		for k := range r.TraceID {
			r.TraceID[k] = byte(rng.Uint32())
		}
		r.Arrival = start + int64(float64(a.Offset)/o.Speedup)
		r.PromptTokens = max(a.PromptTokens, 1)
		r.OutputTokens = min(max(a.OutputTokens, 1), o.MaxOutputTokens)
		r.Tokenize = 1.5e-6 * float64(r.PromptTokens) * lognormal(rng, 0.2)
		frontIn := 50e-6 + 100e-6*rng.Float64()
		r.Queued = r.Arrival + nanos(r.Tokenize+frontIn)
		r.PromptEntropy, r.PromptTokenIDs = syntheticPrompt(zipfSrc, rng, r.PromptTokens, o.PromptTokenIDs)

		// Route to the least loaded instance, as it is when the request
		// arrives.
		var best *instance
		for _, in := range insts {
			in.advance(r.Arrival, &o, rng)
			if best == nil || len(in.waiting)+len(in.running) < len(best.waiting)+len(best.running) {
				best = in
			}
		}
		r.Instance = best.name
		best.waiting = append(best.waiting, &simReq{out: r, blocks: a.Blocks, kv: r.PromptTokens + r.OutputTokens})
	}
	for _, in := range insts {
		in.advance(math.MaxInt64, &o, rng)
	}
	for i := range out {
		r := &out[i]
		r.Detokenize = (100e-6 + 0.3e-6*float64(r.OutputTokens)) * lognormal(rng, 0.2)
		r.Network = 1.5e-3 * lognormal(rng, 0.4)
		frontOut := 50e-6 + 150e-6*rng.Float64()
		r.Finished = r.LastToken + nanos(r.Detokenize+r.Network+frontOut)
	}
	return out, nil
}

func nanos(sec float64) int64 { return int64(math.Round(sec * 1e9)) }

// lognormal returns exp(N(−σ²/2, σ²)), mean 1.
func lognormal(rng *rand.Rand, sigma float64) float64 {
	return math.Exp(sigma*rng.NormFloat64() - sigma*sigma/2)
}

const vocab = 32000

// syntheticPrompt draws the prompt's token ids from a Zipf law over a
// 32,000-token vocabulary with a per-request exponent in [1.05, 1.45), and
// returns their empirical Shannon entropy in bits.
func syntheticPrompt(src *mrand.Rand, rng *rand.Rand, n int, keep bool) (float64, []int64) {
	if !keep {
		n = min(n, maxSyntheticPrompt)
	}
	z := mrand.NewZipf(src, 1.05+0.4*rng.Float64(), 1, vocab-1)
	var counts [vocab]int32
	var ids []int64
	if keep {
		ids = make([]int64, n)
	}
	for i := range n {
		t := z.Uint64()
		counts[t]++
		if keep {
			ids[i] = int64(t)
		}
	}
	var h float64
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(n)
			h -= p * math.Log2(p)
		}
	}
	return math.Max(h, 0), ids
}

// advance runs engine steps until the instance's clock reaches t or it has
// nothing to do.
func (in *instance) advance(t int64, o *Options, rng *rand.Rand) {
	for in.clock < t {
		if len(in.running) == 0 {
			if len(in.waiting) == 0 {
				if t != math.MaxInt64 {
					in.clock = t
				}
				return
			}
			if q := in.waiting[0].out.Queued; q > in.clock {
				if q >= t {
					in.clock = t
					return
				}
				in.clock = q
			}
		}
		in.step(o, rng)
	}
}

func (in *instance) step(o *Options, rng *rand.Rand) {
	now := in.clock
	for len(in.waiting) > 0 && len(in.running) < o.MaxNumSeqs {
		w := in.waiting[0]
		if w.out.Queued > now || (in.kvUsed+w.kv > o.KVTokens && len(in.running) > 0) {
			break
		}
		in.waiting = in.waiting[1:]
		cached := in.cache.prefix(w.blocks) * blockTokens
		cached = min(cached, w.out.PromptTokens-1)
		w.out.CachedTokens = cached
		w.uncached = w.out.PromptTokens - cached
		w.prefillLeft = w.uncached
		in.kvUsed += w.kv
		in.running = append(in.running, w)
	}
	budget := o.ChunkTokens
	prefillTokens, decoding := 0, 0
	completed := make([]bool, len(in.running))
	for i, r := range in.running {
		if r.prefillLeft == 0 {
			decoding++
			continue
		}
		if budget == 0 {
			continue
		}
		if r.out.Scheduled == 0 {
			r.out.Scheduled = now
		}
		take := min(r.prefillLeft, budget)
		r.prefillLeft -= take
		budget -= take
		prefillTokens += take
		completed[i] = r.prefillLeft == 0
	}
	dur := float64(o.DecodeStep) + float64(o.DecodeSlope)*float64(decoding) + float64(prefillTokens)/o.PrefillRate*1e9
	end := now + int64(dur*lognormal(rng, 0.05))
	if end <= now {
		end = now + 1
	}
	kept := in.running[:0]
	for i, r := range in.running {
		switch {
		case completed[i]:
			r.out.FirstToken = end
			r.out.TokenTimes = append(make([]int64, 0, r.out.OutputTokens), end)
			in.cache.insert(r.blocks)
		case r.prefillLeft == 0:
			r.out.TokenTimes = append(r.out.TokenTimes, end)
		}
		if r.prefillLeft == 0 && len(r.out.TokenTimes) == r.out.OutputTokens {
			r.out.LastToken = end
			in.kvUsed -= r.kv
			continue
		}
		kept = append(kept, r)
	}
	clear(in.running[len(kept):])
	in.running = kept
	in.clock = end
}

// lru is a prefix cache of prompt blocks.
type lru struct {
	cap   int
	ll    *list.List
	items map[uint32]*list.Element
}

func newLRU(n int) *lru { return &lru{cap: n, ll: list.New(), items: map[uint32]*list.Element{}} }

// prefix returns how many leading blocks are cached, touching them.
func (c *lru) prefix(blocks []uint32) int {
	n := 0
	for _, b := range blocks {
		e, ok := c.items[b]
		if !ok {
			break
		}
		c.ll.MoveToFront(e)
		n++
	}
	return n
}

func (c *lru) insert(blocks []uint32) {
	for _, b := range blocks {
		if e, ok := c.items[b]; ok {
			c.ll.MoveToFront(e)
			continue
		}
		c.items[b] = c.ll.PushFront(b)
		if c.ll.Len() > c.cap {
			old := c.ll.Back()
			c.ll.Remove(old)
			delete(c.items, old.Value.(uint32))
		}
	}
}
