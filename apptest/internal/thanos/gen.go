package thanos

import (
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/internal/nativehist"
)

// Workload describes the series one inference node writes: for every
// model, per step, a deterministic number of requests (a diurnal curve with
// noise) whose queue, prefill and decode times are log-normal. From the
// same requests it keeps, as a scraped vLLM and tailroot's derivation
// would:
//
//	vllm:e2e_request_latency_seconds_{bucket,sum,count}  classic histogram
//	vllm:time_to_first_token_seconds                     native histogram (schema 3)
//	vllm:request_success_total                           counter
//	vllm:num_requests_running                            gauge
//	tailroot_tail_stage_seconds_sum{stage,e2e_bucket}    tail accumulators on
//	tailroot_tail_requests_total{e2e_bucket}             attribution.DefaultGrid
//
// so rate, histogram_quantile over both histogram kinds, aggregations and
// tail_mean_from_accumulators all have real input.
type Workload struct {
	// Labels are added to every series (instance, and for a server that
	// holds several nodes' data, the cluster label those nodes carry as an
	// external label).
	Labels map[string]string
	// Models are the model_name values; one set of series each.
	Models []string
	// Seed makes the requests reproducible.
	Seed uint64
	// Step is the sample interval.
	Step time.Duration
	// Rate is the mean number of requests per model and step.
	Rate float64
	// KeepRequests keeps every request's stage times, for TailMean.
	KeepRequests bool
}

// E2EBounds are the le bounds of the classic end-to-end histogram.
var E2EBounds = []float64{0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13}

// Stages are the stage label values of the tail accumulators.
var Stages = []string{"queue", "prefill", "decode"}

var ttftSchema = nativehist.MustSchema(3)

type modelState struct {
	model   string
	buckets []float64 // cumulative per E2EBounds, plus +Inf
	sum     float64
	count   float64
	ttft    nativehist.Dense
	success float64
	running float64
	tailSum map[int][]float64 // grid bucket → per stage seconds
	tailReq map[int]float64
}

// Generator produces the workload's samples step by step.
type Generator struct {
	w      Workload
	rng    *rand.Rand
	grid   attribution.Grid
	models []*modelState
	base   labels.Labels
	steps  []stepCount
	reqs   []request
}

// request is one generated request: the step it was counted in and its
// stage times (Stages order).
type request struct {
	t int64
	x [3]float64
}

// stepCount is how many requests (all models) the step ending at t drew.
type stepCount struct {
	t int64 // milliseconds
	n int
}

// NewGenerator starts the workload with every counter at zero.
func NewGenerator(w Workload) *Generator {
	if w.Step <= 0 {
		w.Step = time.Minute
	}
	if w.Rate <= 0 {
		w.Rate = 20
	}
	g := &Generator{w: w, rng: rand.New(rand.NewPCG(w.Seed, w.Seed^0x9e3779b97f4a7c15)), grid: attribution.DefaultGrid(), base: labels.FromMap(w.Labels)}
	for _, m := range w.Models {
		g.models = append(g.models, &modelState{
			model: m, buckets: make([]float64, len(E2EBounds)+1),
			tailSum: map[int][]float64{}, tailReq: map[int]float64{},
		})
	}
	return g
}

// advance draws the requests of the step ending at t.
func (g *Generator) advance(t time.Time) {
	hour := float64(t.Unix()%86400) / 3600
	load := 1 + 0.6*math.Sin(2*math.Pi*(hour-8)/24)
	total := 0
	defer func() { g.steps = append(g.steps, stepCount{t.UnixMilli(), total}) }()
	for mi, m := range g.models {
		n := int(g.w.Rate*load*(0.7+0.6*g.rng.Float64())) + mi
		total += n
		slow := 1 + 0.8*load // queueing grows with load: a tail that moves
		for range n {
			q := math.Exp(g.rng.NormFloat64()*0.8-2.5) * slow
			p := math.Exp(g.rng.NormFloat64()*0.4 - 1.6)
			d := math.Exp(g.rng.NormFloat64()*0.5 + 0.1)
			e2e := q + p + d
			if g.w.KeepRequests {
				g.reqs = append(g.reqs, request{t.UnixMilli(), [3]float64{q, p, d}})
			}
			for i, b := range E2EBounds {
				if e2e <= b {
					m.buckets[i]++
				}
			}
			m.buckets[len(E2EBounds)]++
			m.sum += e2e
			m.count++
			m.ttft.Observe(ttftSchema, q+p, 1)
			m.success++
			b := g.grid.Bucket(e2e)
			s := m.tailSum[b]
			if s == nil {
				s = make([]float64, len(Stages))
				m.tailSum[b] = s
			}
			s[0] += q
			s[1] += p
			s[2] += d
			m.tailReq[b]++
		}
		m.running = float64(n) / 4
	}
}

// Requests returns the number of requests the workload generated in steps
// ending in (from, to], and the most any one of those steps drew: the ground
// truth a query's increase over that window estimates.
func (g *Generator) Requests(from, to time.Time) (total, maxPerStep int) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	for _, s := range g.steps {
		if s.t > lo && s.t <= hi {
			total += s.n
			maxPerStep = max(maxPerStep, s.n)
		}
	}
	return total, maxPerStep
}

// TailMean is the ground truth of the tail-mean allocation over the
// requests of steps ending in (from, to] (all models): with S the end-to-end
// time and q its p-quantile (Hyndman–Fan type 7, as tailroot's functions
// define it), E[X_i | S ≥ q] for each stage of Stages. It needs
// Workload.KeepRequests.
func (g *Generator) TailMean(p float64, from, to time.Time) (q float64, means []float64, n int) {
	lo, hi := from.UnixMilli(), to.UnixMilli()
	var in []request
	for _, r := range g.reqs {
		if r.t > lo && r.t <= hi {
			in = append(in, r)
		}
	}
	if len(in) == 0 {
		return math.NaN(), nil, 0
	}
	s := make([]float64, len(in))
	for i, r := range in {
		s[i] = r.x[0] + r.x[1] + r.x[2]
	}
	sorted := append([]float64(nil), s...)
	sort.Float64s(sorted)
	h := float64(len(sorted)-1) * p
	k := int(math.Floor(h))
	q = sorted[k]
	if k+1 < len(sorted) {
		q += (h - float64(k)) * (sorted[k+1] - sorted[k])
	}
	means = make([]float64, len(Stages))
	for i, r := range in {
		if s[i] >= q {
			n++
			for j := range means {
				means[j] += r.x[j]
			}
		}
	}
	for j := range means {
		means[j] /= float64(n)
	}
	return q, means, n
}

// Append adds the samples of every step in [from, to) to series (keyed by
// the label set's string form), advancing the workload.
func (g *Generator) Append(series map[string]*prompb.TimeSeries, from, to time.Time) {
	for t := from; t.Before(to); t = t.Add(g.w.Step) {
		g.advance(t)
		ms := t.UnixMilli()
		for _, m := range g.models {
			for i, b := range E2EBounds {
				addFloat(series, g.labels(m, "vllm:e2e_request_latency_seconds_bucket", "le", strconv.FormatFloat(b, 'g', -1, 64)), ms, m.buckets[i])
			}
			addFloat(series, g.labels(m, "vllm:e2e_request_latency_seconds_bucket", "le", "+Inf"), ms, m.buckets[len(E2EBounds)])
			addFloat(series, g.labels(m, "vllm:e2e_request_latency_seconds_sum"), ms, m.sum)
			addFloat(series, g.labels(m, "vllm:e2e_request_latency_seconds_count"), ms, m.count)
			addFloat(series, g.labels(m, "vllm:request_success_total"), ms, m.success)
			addFloat(series, g.labels(m, "vllm:num_requests_running"), ms, m.running)
			ls := g.labels(m, "vllm:time_to_first_token_seconds")
			ts := entry(series, ls)
			ts.Histograms = append(ts.Histograms, prompb.FromIntHistogram(ms, m.ttft.Histogram(ttftSchema)))
			bs := make([]int, 0, len(m.tailReq))
			for b := range m.tailReq {
				bs = append(bs, b)
			}
			sort.Ints(bs)
			for _, b := range bs {
				bound := "+Inf"
				if b < len(g.grid.Upper()) {
					bound = strconv.FormatFloat(g.grid.Upper()[b], 'g', -1, 64)
				}
				for si, st := range Stages {
					addFloat(series, g.labels(m, "tailroot_tail_stage_seconds_sum", "stage", st, "e2e_bucket", bound), ms, m.tailSum[b][si])
				}
				addFloat(series, g.labels(m, "tailroot_tail_requests_total", "e2e_bucket", bound), ms, m.tailReq[b])
			}
		}
	}
}

func (g *Generator) labels(m *modelState, name string, kv ...string) labels.Labels {
	b := labels.NewBuilder(g.base)
	b.Set("__name__", name)
	b.Set("model_name", m.model)
	for i := 0; i+1 < len(kv); i += 2 {
		b.Set(kv[i], kv[i+1])
	}
	return b.Labels()
}

func entry(series map[string]*prompb.TimeSeries, ls labels.Labels) *prompb.TimeSeries {
	k := ls.String()
	ts := series[k]
	if ts == nil {
		ts = &prompb.TimeSeries{}
		ls.Range(func(l labels.Label) { ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value}) })
		series[k] = ts
	}
	return ts
}

func addFloat(series map[string]*prompb.TimeSeries, ls labels.Labels, ms int64, v float64) {
	ts := entry(series, ls)
	ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: ms, Value: v})
}
