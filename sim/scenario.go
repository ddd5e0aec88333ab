package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// Scenario is a reproducible incident: a fleet, a window of simulated time
// and at most one fault, whose ground truth Generate writes out.
type Scenario struct {
	// Fault is the fault to inject; "" = none (a quiet window).
	Fault FaultKind
	// Instance is the faulty instance's index in fleet order (see Fault).
	Instance int
	// Severity scales the fault (see Fault). 0 = 1.
	Severity float64
	// Seed makes the scenario reproducible. Options.Seed is ignored.
	Seed uint64
	// Start is the time of the first sample. Zero = 2025-03-04 12:30 UTC,
	// an hour and a half before the default diurnal peak.
	Start time.Time
	// Length is the window. 0 = 2h.
	Length time.Duration
	// FaultAt is the fault's start as an offset into the window. 0 = 65 % of
	// Length. Must leave at least 10 steps on both sides.
	FaultAt time.Duration
	// FaultFor is how long the fault lasts. 0 = to the end of the window.
	FaultFor time.Duration
	// Labels are added to every series (e.g. cluster="sim-incident"), so
	// a scenario pushed into a server with live data never collides with
	// it; the ground truth's and the signals' queries select them too.
	// Empty = none. A name the series already carry is refused.
	Labels map[string]string
	// InstancePrefix is put before every instance label (e.g.
	// "sim-incident/"), so per-instance queries (the root-cause ranking
	// groups by instance) never mix the scenario's servers with live ones
	// of the same name. Empty = the fleet's own names.
	InstancePrefix string
	// Options is the fleet. Zero Models = one Llama-3.1-8B model;
	// InstancesPerModel 0 = 2; Covariates is always on; Faults, URL and
	// Backfill are ignored. Noise, DiurnalFactor and PeakHour keep their
	// meaning, but 0 for them means DefaultOptions' 0.15, 3 and 14.
	Options Options
}

// DefaultScenarioStart is the start of a scenario whose Start is zero.
var DefaultScenarioStart = time.Date(2025, 3, 4, 12, 30, 0, 0, time.UTC)

// GroundTruth says what a scenario did: the fault, where and when, and which
// series an ideal root-cause ranking puts first.
type GroundTruth struct {
	Fault       FaultKind `json:"fault"`
	Description string    `json:"description"`
	Severity    float64   `json:"severity"`
	Seed        uint64    `json:"seed"`
	// Instance and Model are the labels of the faulty vLLM server.
	Instance string `json:"instance"`
	Model    string `json:"model_name"`
	// WindowStart and WindowEnd bound the generated samples; Start and End
	// the fault (End = WindowEnd when it lasts to the end).
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	// Step is the sample interval (StepSeconds in JSON).
	Step        time.Duration `json:"-"`
	StepSeconds float64       `json:"step_seconds"`
	Start       time.Time     `json:"start"`
	End         time.Time     `json:"end"`
	// RootCause names the root-cause series: its metric, its node in the
	// serving graph, its Signal name and a PromQL query for it.
	RootCause RootCause `json:"root_cause"`
	// Stages are the latency stages the fault lengthens; Moves the other
	// metrics it moves.
	Stages []string `json:"stages"`
	Moves  []string `json:"moves"`
}

// RootCause identifies the root-cause series of a fault.
type RootCause struct {
	Metric string `json:"metric"`
	Node   string `json:"node"`
	Signal string `json:"signal"`
	Query  string `json:"query"`
}

// Incident is a generated scenario: every series with one sample per step,
// and the ground truth.
type Incident struct {
	Truth GroundTruth
	// Times are the step times, oldest first.
	Times []time.Time
	// Series holds len(Times) samples each (or native histogram samples).
	Series []Series
	sim    *Simulator
	// prefix is the Scenario's InstancePrefix.
	prefix string
	// extra is the Scenario's Labels as matchers to append inside a
	// selector's braces (`,cluster="sim-incident"`), or "".
	extra string
}

func (sc *Scenario) options() (Options, error) {
	o := sc.Options
	if len(o.Models) == 0 {
		o.Models = DefaultModels()[:1]
	}
	if o.InstancesPerModel == 0 {
		o.InstancesPerModel = 2
	}
	if o.Noise == 0 {
		o.Noise = 0.15
	}
	if o.DiurnalFactor == 0 {
		o.DiurnalFactor = 3
	}
	if o.PeakHour == 0 {
		o.PeakHour = 14
	}
	o.Seed = sc.Seed
	o.Covariates = true
	o.URL, o.Backfill, o.Faults = "", 0, nil
	return o.withDefaults()
}

// Generate simulates the scenario.
func (sc Scenario) Generate() (*Incident, error) {
	o, err := sc.options()
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if sc.Start.IsZero() {
		sc.Start = DefaultScenarioStart
	}
	if sc.Length == 0 {
		sc.Length = 2 * time.Hour
	}
	steps := int(sc.Length / o.Interval)
	if steps < 30 {
		return nil, fmt.Errorf("scenario: Length %v is %d steps of %v, need 30", sc.Length, steps, o.Interval)
	}
	if sc.FaultAt == 0 {
		sc.FaultAt = time.Duration(float64(sc.Length) * 0.65).Truncate(o.Interval)
	}
	if sc.FaultAt < 10*o.Interval || sc.FaultAt > sc.Length-10*o.Interval {
		return nil, fmt.Errorf("scenario: FaultAt %v must leave 10 steps of %v on each side of the %v window", sc.FaultAt, o.Interval, sc.Length)
	}
	if sc.FaultFor < 0 {
		return nil, fmt.Errorf("scenario: FaultFor %v must be >= 0", sc.FaultFor)
	}
	end := sc.Start.Add(time.Duration(steps-1) * o.Interval)
	extra := ""
	names := make([]string, 0, len(sc.Labels))
	for k := range sc.Labels {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		switch k {
		case labelEngine, labelInstance, labelJob, labelModel, model.MetricNameLabel, "le", "gpu", "modelName", "finished_reason":
			return nil, fmt.Errorf("scenario: label %q is one the series already carry", k)
		}
		if !model.LegacyValidation.IsValidLabelName(k) {
			return nil, fmt.Errorf("scenario: label name %q is not valid", k)
		}
		extra += fmt.Sprintf(",%s=%q", k, sc.Labels[k])
	}
	truth := GroundTruth{
		Fault: sc.Fault, Seed: sc.Seed, Severity: sc.Severity,
		WindowStart: sc.Start, WindowEnd: end, Step: o.Interval, StepSeconds: o.Interval.Seconds(),
		Description: "no fault",
	}
	if sc.Fault != "" {
		f := Fault{Kind: sc.Fault, Instance: sc.Instance, Start: sc.Start.Add(sc.FaultAt), Duration: sc.FaultFor, Severity: sc.Severity}
		o.Faults = []Fault{f}
		if err := f.validate(len(o.Models) * o.InstancesPerModel); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		info, _ := Info(sc.Fault)
		truth.Description = info.Description
		truth.Start = f.Start
		truth.End = end
		if sc.FaultFor > 0 && f.Start.Add(sc.FaultFor).Before(end) {
			truth.End = f.Start.Add(sc.FaultFor)
		}
		truth.Stages, truth.Moves = info.Stages, info.Moves
		if truth.Severity == 0 {
			truth.Severity = 1
		}
		m := o.Models[sc.Instance/o.InstancesPerModel]
		truth.Model = m.Name
		truth.Instance = fmt.Sprintf("%s%s-%d:8000", sc.InstancePrefix, slug(m.Name), sc.Instance%o.InstancesPerModel)
		sig, ok := signalFor(info.RootMetric)
		if !ok {
			panic("BUG: no signal for root metric " + info.RootMetric)
		}
		truth.RootCause = RootCause{
			Metric: info.RootMetric, Node: info.RootNode,
			Signal: signalName(info.RootMetric, truth.Instance),
			Query:  sig.query(fmt.Sprintf("{instance=%q%s}", truth.Instance, extra)),
		}
	}
	s, err := New(o)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	inc := &Incident{Truth: truth, sim: s, extra: extra, prefix: sc.InstancePrefix}
	for i := range steps {
		t := sc.Start.Add(time.Duration(i) * o.Interval)
		inc.Times = append(inc.Times, t)
		inc.Series = merge(inc.Series, s.Step(t))
	}
	if len(names) > 0 || sc.InstancePrefix != "" {
		for i := range inc.Series {
			b := labels.NewBuilder(inc.Series[i].Labels)
			for _, k := range names {
				b.Set(k, sc.Labels[k])
			}
			if v := inc.Series[i].Labels.Get(labelInstance); v != "" && sc.InstancePrefix != "" {
				b.Set(labelInstance, sc.InstancePrefix+v)
			}
			inc.Series[i].Labels = b.Labels()
		}
	}
	return inc, nil
}

// PushStats counts the samples of a push: Accepted were acknowledged,
// Rejected were in batches the server refused for good (4xx), Unsent were
// never acknowledged because ctx ended.
type PushStats struct {
	Accepted, Rejected, Unsent int
}

// Push sends the incident to a tailroot server (or any remote-write
// receiver) at url + /api/v1/write, retrying as Run does until ctx ends.
//
// The samples go in time order across all series, a few steps per request
// (as many as Options.BatchSamples holds): a TSDB head accepts a sample only
// if it is newer than its series' last one and not older than the head's
// newest sample minus half a block range, so sending one whole series
// after another would move the head's newest time to the window's end with
// the first series and refuse the older half of every later one. In time
// order the whole window is accepted by an empty server, and by a server
// with live data as long as the window starts after its newest sample
// minus half a block range (1h by default).
//
// It returns an error when any sample was not accepted; the stats say how
// many were.
func (inc *Incident) Push(ctx context.Context, url string) (PushStats, error) {
	var st PushStats
	if url == "" {
		return st, errors.New("push: empty URL")
	}
	total := 0
	for _, s := range inc.Series {
		total += len(s.Samples) + len(s.Histograms)
	}
	p := &pusher{s: inc.sim, url: strings.TrimRight(url, "/") + writePath, log: inc.sim.opts.Logger}
	per := max(1, inc.sim.opts.BatchSamples/max(1, len(inc.Series)))
	for lo := 0; lo < len(inc.Times); lo += per {
		hi := min(lo+per, len(inc.Times))
		part := make([]Series, len(inc.Series))
		for i, s := range inc.Series {
			part[i] = Series{Labels: s.Labels, Metadata: s.Metadata}
			if len(s.Samples) > 0 {
				part[i].Samples = s.Samples[lo:hi]
			}
			if len(s.Histograms) > 0 {
				part[i].Histograms = s.Histograms[lo:hi]
			}
		}
		if err := p.push(ctx, part, hi-lo); err != nil {
			st = PushStats{Accepted: p.samples, Rejected: p.rejected, Unsent: total - p.samples - p.rejected}
			return st, fmt.Errorf("push to %s: %w", url, err)
		}
	}
	st = PushStats{Accepted: p.samples, Rejected: p.rejected}
	if st.Rejected > 0 {
		return st, fmt.Errorf("push to %s: the server refused %d of %d samples", url, st.Rejected, total)
	}
	return st, nil
}

// Signal is one derived per-step series of an incident, as a root-cause
// query would read it from the stored series.
type Signal struct {
	// Name is metric{instance="…"} (or {model_name="…"} for the target).
	Name string
	// Metric is the source metric name; Node is set only for a derived
	// signal that no metric name maps to (the frontend residual: "tokenize").
	Metric, Node string
	// Instance is the vLLM server the signal belongs to.
	Instance string
	// Query is the PromQL that computes the signal from the stored series at
	// a 15 s step.
	Query string
	// Values has one value per step after the first (len(Times) − 1).
	Values []float64
}

// signalKind says how a signal is derived from its series.
type signalKind int

const (
	sigRate  signalKind = iota // counter: Δ/Δt, summed over other labels
	sigMean                    // histogram: Δ_sum/Δ_count
	sigGauge                   // gauge: the value
)

type signalDef struct {
	metric string
	kind   signalKind
}

// query returns the PromQL for the signal over selector sel ("{…}").
func (d signalDef) query(sel string) string {
	switch d.kind {
	case sigRate:
		return fmt.Sprintf("sum(rate(%s%s[30s]))", d.metric, sel)
	case sigMean:
		return fmt.Sprintf("sum(rate(%s_sum%s[30s])) / sum(rate(%s_count%s[30s]))", d.metric, sel, d.metric, sel)
	}
	return fmt.Sprintf("sum(%s%s)", d.metric, sel)
}

// signalDefs are the per-instance signals of Incident.Signals, in order.
var signalDefs = []signalDef{
	{"vllm:request_success_total", sigRate},
	{"vllm:request_prompt_tokens", sigMean},
	{"vllm:request_generation_tokens", sigMean},
	{"vllm:prompt_tokens_total", sigRate},
	{"vllm:generation_tokens_total", sigRate},
	{"vllm:num_requests_running", sigGauge},
	{"vllm:num_requests_waiting", sigGauge},
	{"vllm:kv_cache_usage_perc", sigGauge},
	{"vllm:num_preemptions_total", sigRate},
	{"vllm:request_queue_time_seconds", sigMean},
	{"vllm:request_prefill_time_seconds", sigMean},
	{"vllm:request_decode_time_seconds", sigMean},
	{"vllm:inter_token_latency_seconds", sigMean},
	{"vllm:time_to_first_token_seconds", sigMean},
	{"vllm:e2e_request_latency_seconds", sigMean},
	{"tailroot_runqueue_delay_seconds", sigMean},
	{"tailroot_gil_wait_seconds", sigMean},
	{"tailroot_block_io_latency_seconds", sigMean},
	{"tailroot_cuda_call_seconds", sigMean},
	{"tailroot_page_faults_total", sigRate},
	{"DCGM_FI_DEV_SM_CLOCK", sigGauge},
	{"DCGM_FI_DEV_MEM_CLOCK", sigGauge},
	{"DCGM_FI_DEV_GPU_UTIL", sigGauge},
	{"DCGM_FI_DEV_POWER_USAGE", sigGauge},
	{"DCGM_FI_DEV_FB_USED", sigGauge},
}

func signalFor(metric string) (signalDef, bool) {
	for _, d := range signalDefs {
		if d.metric == metric {
			return d, true
		}
	}
	return signalDef{}, false
}

func signalName(metric, instance string) string {
	return fmt.Sprintf("%s{instance=%q}", metric, instance)
}

// FrontendResidual is the Metric of the derived frontend signal: TTFT minus
// queue and prefill time, the part of TTFT spent in the API server
// (tokenisation, scheduling, the GIL). Its Node is "tokenize".
const FrontendResidual = "frontend_residual_seconds"

// Signals derives, for every instance, the per-step signals a root-cause
// ranking reads (signalDefs, in that order, then the frontend residual),
// each as its Query would compute it at a 15 s step: counters as rates
// (Δ/Δt summed over their other labels), histograms as means
// (Δ_sum/Δ_count), gauges as values. A mean over a step with no
// observations repeats the previous step's value (the next one's at the
// start), as a dashboard's "connect nulls" would.
func (inc *Incident) Signals() []Signal {
	type key struct{ metric, instance string }
	idx := map[key][]int{}
	for i, s := range inc.Series {
		k := key{s.Labels.Get(model.MetricNameLabel), s.Labels.Get(labelInstance)}
		if len(s.Samples) == 0 {
			continue
		}
		idx[k] = append(idx[k], i)
	}
	n := len(inc.Times) - 1
	dt := inc.sim.opts.Interval.Seconds()
	// total sums the selected series at step j.
	total := func(metric, inst string, j int) float64 {
		v := 0.0
		for _, i := range idx[key{metric, inst}] {
			v += inc.Series[i].Samples[j].V
		}
		return v
	}
	var out []Signal
	for _, inst := range inc.instances() {
		sel := fmt.Sprintf("{instance=%q%s}", inst, inc.extra)
		var ttft, queue, prefill []float64
		for _, d := range signalDefs {
			vals := make([]float64, n)
			switch d.kind {
			case sigRate:
				for j := range n {
					vals[j] = (total(d.metric, inst, j+1) - total(d.metric, inst, j)) / dt
				}
			case sigGauge:
				for j := range n {
					vals[j] = total(d.metric, inst, j+1)
				}
			case sigMean:
				for j := range n {
					ds := total(d.metric+"_sum", inst, j+1) - total(d.metric+"_sum", inst, j)
					dc := total(d.metric+"_count", inst, j+1) - total(d.metric+"_count", inst, j)
					vals[j] = math.NaN()
					if dc > 0 {
						vals[j] = ds / dc
					}
				}
				fillGaps(vals)
			}
			switch d.metric {
			case "vllm:time_to_first_token_seconds":
				ttft = vals
			case "vllm:request_queue_time_seconds":
				queue = vals
			case "vllm:request_prefill_time_seconds":
				prefill = vals
			}
			out = append(out, Signal{
				Name: signalName(d.metric, inst), Metric: d.metric, Instance: inst,
				Query: d.query(sel), Values: vals,
			})
		}
		front := make([]float64, n)
		for j := range front {
			front[j] = ttft[j] - queue[j] - prefill[j]
		}
		out = append(out, Signal{
			Name: signalName(FrontendResidual, inst), Metric: FrontendResidual, Node: "tokenize", Instance: inst,
			Query: signalDef{"vllm:time_to_first_token_seconds", sigMean}.query(sel) + " - (" +
				signalDef{"vllm:request_queue_time_seconds", sigMean}.query(sel) + ") - (" +
				signalDef{"vllm:request_prefill_time_seconds", sigMean}.query(sel) + ")",
			Values: front,
		})
	}
	return out
}

// Target is the signal that defines the incident: the mean end-to-end
// latency of the faulty model (of the first model without a fault) over
// all its instances.
func (inc *Incident) Target() Signal {
	return inc.ModelMean("vllm:e2e_request_latency_seconds")
}

// ModelMean is the mean of the histogram family metric (Δ_sum/Δ_count per
// step) over all instances of the faulty model, or of the first model
// without a fault: a model-level latency an alert would watch.
func (inc *Incident) ModelMean(metric string) Signal {
	modelName := inc.Truth.Model
	if modelName == "" {
		modelName = inc.sim.opts.Models[0].Name
	}
	n := len(inc.Times) - 1
	sum := make([]float64, len(inc.Times))
	cnt := make([]float64, len(inc.Times))
	for _, s := range inc.Series {
		if s.Labels.Get(labelModel) != modelName || len(s.Samples) == 0 {
			continue
		}
		var dst []float64
		switch s.Labels.Get(model.MetricNameLabel) {
		case metric + "_sum":
			dst = sum
		case metric + "_count":
			dst = cnt
		default:
			continue
		}
		for j, x := range s.Samples {
			dst[j] += x.V
		}
	}
	vals := make([]float64, n)
	for j := range vals {
		vals[j] = math.NaN()
		if dc := cnt[j+1] - cnt[j]; dc > 0 {
			vals[j] = (sum[j+1] - sum[j]) / dc
		}
	}
	fillGaps(vals)
	sel := fmt.Sprintf("{model_name=%q%s}", modelName, inc.extra)
	return Signal{
		Name:   metric + ":mean" + sel,
		Metric: metric,
		Query:  signalDef{metric, sigMean}.query(sel),
		Values: vals,
	}
}

// instances lists the instance labels in fleet order.
func (inc *Incident) instances() []string {
	var out []string
	for _, m := range inc.sim.opts.Models {
		for i := range inc.sim.opts.InstancesPerModel {
			out = append(out, fmt.Sprintf("%s%s-%d:8000", inc.prefix, slug(m.Name), i))
		}
	}
	return out
}

// fillGaps replaces NaNs by the previous value, leading NaNs by the first
// value; an all-NaN slice becomes zeros.
func fillGaps(v []float64) {
	first := -1
	for i, x := range v {
		if !math.IsNaN(x) {
			first = i
			break
		}
	}
	if first < 0 {
		clear(v)
		return
	}
	for i := range first {
		v[i] = v[first]
	}
	for i := first + 1; i < len(v); i++ {
		if math.IsNaN(v[i]) {
			v[i] = v[i-1]
		}
	}
}
