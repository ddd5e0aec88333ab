package rcaeval

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/sim/fleet"
)

// Suites are the incident suites Evaluate knows.
const (
	// SuiteServing is the simulator's incidents (Run): generated from the
	// same serving graph the ranking assumes.
	SuiteServing = "serving"
	// SuiteFleet is sim/fleet's incidents: exporters' own names and labels,
	// decoys, mild faults and fault-free windows, written apart from the
	// ranking.
	SuiteFleet = "fleet"
)

// FleetOptions configures RunFleet. Zero values select the defaults.
type FleetOptions struct {
	// Seeds per class: FirstSeed..FirstSeed+Seeds−1. 0 = 5 and 1.
	Seeds     int
	FirstSeed uint64
	// Classes to run. nil = fleet.Classes().
	Classes []fleet.Class
	// Rank configures tailroot's ranking (ChangePoint is ignored).
	Rank rca.Options
}

// FleetCase is one fleet incident's outcome.
type FleetCase struct {
	Class fleet.Class
	Seed  uint64
	Truth fleet.Truth
	// Verdict is tailroot's verdict; TailrootRank the 1-based rank of the
	// first true cause (0: missed, or a verdict other than "incident"),
	// BARORank plain BARO's at BOCPD's change point, LSRank BARO's at the
	// least-squares change point.
	Verdict string
	// VerdictReason is tailroot's reason for the verdict, in words.
	VerdictReason                  string
	TailrootRank, BARORank, LSRank int
	TailrootTop, BAROTop, LSTop    string
	Candidates                     int
	// OnsetError is each change-point method's |estimate − true onset| in
	// minutes (fault cases only); Covered whether the least-squares 95 %
	// set holds the true onset.
	OnsetError map[string]float64
	Covered    bool
	// TargetZ and TargetChange are the target's mean shift at the change
	// point as a z statistic and relative to its mean before.
	TargetZ, TargetChange float64
}

// FleetReport is the result of RunFleet.
type FleetReport struct {
	Cases   []FleetCase
	Elapsed time.Duration
}

// RunFleet ranks every class × seed of the fleet suite. The candidates are
// every series the fleet stores, as the rootcause endpoint's discovery
// sees them: counters as 1-minute rates, histograms as 1-minute means
// (Δ_sum/Δ_count), gauges as read, node_cpu_seconds_total summed over CPUs
// per mode, and per host the frontend residual (TTFT − queue − prefill).
// The target is the fleet's mean TTFT.
func RunFleet(ctx context.Context, opts FleetOptions) (*FleetReport, error) {
	if opts.Seeds <= 0 {
		opts.Seeds = 5
	}
	if opts.Classes == nil {
		opts.Classes = fleet.Classes()
	}
	if opts.FirstSeed == 0 {
		opts.FirstSeed = 1
	}
	type job struct {
		c    fleet.Class
		seed uint64
	}
	var jobs []job
	for _, c := range opts.Classes {
		for s := range uint64(opts.Seeds) {
			jobs = append(jobs, job{c, opts.FirstSeed + s})
		}
	}
	start := time.Now()
	out := make([]FleetCase, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for j := range jobs {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[j], errs[j] = runFleetCase(jobs[j].c, jobs[j].seed, opts.Rank)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for j, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("eval fleet: %s seed %d: %w", jobs[j].c, jobs[j].seed, err)
		}
	}
	return &FleetReport{Cases: out, Elapsed: time.Since(start)}, nil
}

// window is the rate and mean window in scrapes (1 minute).
const window = 4

func runFleetCase(c fleet.Class, seed uint64, ro rca.Options) (FleetCase, error) {
	inc, err := fleet.Generate(c, seed)
	if err != nil {
		return FleetCase{}, err
	}
	target, rc := fleetInputs(inc)
	ro.ChangePoint = 0
	res, err := rca.Rank(target, rc, ro)
	if err != nil {
		return FleetCase{}, err
	}
	return scoreFleetCase(inc, c, seed, target, rc, res)
}

// fleetInputs turns an incident's stored series into the target (the
// fleet's mean TTFT) and the candidates, as discovery sees them (RunFleet).
func fleetInputs(inc *fleet.Incident) (causal.Series, []rca.Candidate) {
	n := int(inc.End.Sub(inc.Start)/inc.Step) + 1
	idx := func(t int64) int {
		return int(math.Round(float64(t-inc.Start.UnixMilli()) / float64(inc.Step.Milliseconds())))
	}
	grid := func(s fleet.Series) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = math.NaN()
		}
		for _, x := range s.Samples {
			if k := idx(x.T); k >= 0 && k < n {
				v[k] = x.V
			}
		}
		return v
	}
	delta := func(v []float64) []float64 {
		out := make([]float64, n-window)
		for i := range out {
			out[i] = v[i+window] - v[i]
		}
		return out
	}
	typeOf := func(name string) string {
		for _, suf := range []string{"_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && inc.Metadata[b].Type == "histogram" {
				return "histogram" + suf
			}
		}
		return inc.Metadata[name].Type
	}
	key := func(l map[string]string, drop ...string) string {
		var ks []string
		for k, v := range l {
			if k != "__name__" && !slices.Contains(drop, k) {
				ks = append(ks, k+"="+fmt.Sprintf("%q", v))
			}
		}
		sort.Strings(ks)
		return "{" + strings.Join(ks, ", ") + "}"
	}
	type acc struct {
		metric string
		labels map[string]string
		vals   []float64
	}
	cands := map[string]*acc{}
	var order []string
	put := func(metric string, l map[string]string, v []float64, sum bool) {
		id := metric + key(l)
		a := cands[id]
		if a == nil {
			a = &acc{metric: metric, labels: l, vals: make([]float64, len(v))}
			cands[id] = a
			order = append(order, id)
		}
		for i := range v {
			if sum {
				a.vals[i] += v[i]
			} else {
				a.vals[i] = v[i]
			}
		}
	}
	sums := map[string][]float64{} // histogram family + labels → Δ_sum
	counts := map[string][]float64{}
	for _, s := range inc.Series {
		name := s.Labels["__name__"]
		v := grid(s)
		switch typeOf(name) {
		case "counter":
			d := delta(v)
			for i := range d {
				d[i] /= window * inc.Step.Seconds()
			}
			l := s.Labels
			if name == "node_cpu_seconds_total" {
				l = without(l, "cpu")
			}
			put(name, without(l, "__name__"), d, name == "node_cpu_seconds_total")
		case "histogram_sum":
			sums[strings.TrimSuffix(name, "_sum")+key(s.Labels)] = delta(v)
		case "histogram_count":
			counts[strings.TrimSuffix(name, "_count")+key(s.Labels)] = delta(v)
		default:
			put(name, without(s.Labels, "__name__"), v[window:], false)
		}
	}
	// Histogram means, and per host the frontend residual.
	var hosts []string
	for _, s := range inc.Series {
		if s.Labels["__name__"] == "vllm:time_to_first_token_seconds_count" {
			hosts = append(hosts, s.Labels["instance"])
		}
	}
	means := map[string][]float64{}
	for _, s := range inc.Series {
		name := s.Labels["__name__"]
		if typeOf(name) != "histogram_count" {
			continue
		}
		fam := strings.TrimSuffix(name, "_count")
		k := fam + key(s.Labels)
		m := make([]float64, n-window)
		for i := range m {
			m[i] = sums[k][i] / counts[k][i]
		}
		means[fam+"@"+s.Labels["instance"]] = m
		put(fam, without(s.Labels, "__name__"), m, false)
	}
	for _, h := range hosts {
		ttft, q, p := means["vllm:time_to_first_token_seconds@"+h], means["vllm:request_queue_time_seconds@"+h], means["vllm:request_prefill_time_seconds@"+h]
		r := make([]float64, len(ttft))
		for i := range r {
			r[i] = ttft[i] - q[i] - p[i]
		}
		put("frontend_residual_seconds", map[string]string{"instance": h, "job": "vllm", "node": "tokenize"}, r, false)
	}
	// The target: the fleet's mean TTFT.
	tv := make([]float64, n-window)
	{
		var ss, cs [][]float64
		for k, v := range sums {
			if strings.HasPrefix(k, "vllm:time_to_first_token_seconds{") {
				ss = append(ss, v)
				cs = append(cs, counts[k])
			}
		}
		for i := range tv {
			var a, b float64
			for j := range ss {
				a += ss[j][i]
				b += cs[j][i]
			}
			tv[i] = a / b
		}
	}
	rc := make([]rca.Candidate, 0, len(order))
	for _, id := range order {
		a := cands[id]
		ok := true
		for _, v := range a.vals {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				ok = false
			}
		}
		if ok {
			rc = append(rc, rca.Candidate{Name: id, Metric: a.metric, Labels: a.labels, Values: a.vals})
		}
	}
	return causal.Series{Name: "vllm:time_to_first_token_seconds (fleet mean)", Values: tv}, rc
}

// scoreFleetCase compares res and the baselines with the incident's truth.
func scoreFleetCase(inc *fleet.Incident, c fleet.Class, seed uint64, target causal.Series, rc []rca.Candidate, res *rca.Result) (FleetCase, error) {
	tv := target.Values
	hostOf := map[string]string{}
	joins := rca.JoinHosts(func() []map[string]string {
		out := make([]map[string]string, len(rc))
		for i := range rc {
			out[i] = rc[i].Labels
		}
		return out
	}())
	metricOf := map[string]string{}
	for i := range rc {
		hostOf[rc[i].Name], metricOf[rc[i].Name] = joins[i].Host, rc[i].Metric
	}
	tr := inc.Truth
	hit := func(names []string) int {
		for i, nm := range names {
			if tr.Fault && hostOf[nm] == tr.Host && slices.Contains(tr.Causes, metricOf[nm]) {
				return i + 1
			}
		}
		return 0
	}
	fc := FleetCase{
		Class: c, Seed: seed, Truth: tr, Verdict: res.Verdict, VerdictReason: res.VerdictReason, Candidates: len(rc), OnsetError: map[string]float64{},
		TargetZ: res.Change.Z, TargetChange: res.Change.Shift / mean(tv[:res.ChangePoint]),
	}
	var tail []string
	for _, r := range res.Ranking {
		tail = append(tail, r.Name)
	}
	var ls []string
	for _, b := range res.Baseline {
		ls = append(ls, b.Name)
	}
	bcp, _, err := rca.ChangePoint(target, rca.Options{})
	if err != nil {
		return FleetCase{}, err
	}
	series := make([]causal.Series, len(rc))
	for i := range rc {
		series[i] = causal.Series{Name: rc[i].Name, Values: rc[i].Values}
	}
	baro, err := causal.RobustScores(series, bcp, false)
	if err != nil {
		return FleetCase{}, err
	}
	var bn []string
	for _, b := range baro {
		bn = append(bn, b.Name)
	}
	fc.TailrootRank, fc.LSRank, fc.BARORank = hit(tail), hit(ls), hit(bn)
	if res.Verdict != rca.VerdictIncident {
		fc.TailrootRank = 0
	}
	if len(tail) > 0 {
		fc.TailrootTop, fc.LSTop, fc.BAROTop = tail[0], ls[0], bn[0]
	}
	if tr.Fault {
		// Index j of the candidate grid is scrape j+window; a fault at
		// scrape k first shows in the 1-minute window ending at k.
		actual := int(tr.Onset.Sub(inc.Start)/inc.Step) - window
		for _, m := range rca.ChangeMethods() {
			ch, err := rca.Onset(target, m, 0)
			if err != nil {
				return FleetCase{}, err
			}
			fc.OnsetError[m] = math.Abs(float64(ch.At-actual)) * inc.Step.Minutes()
			if m == rca.MethodMeanShift {
				fc.Covered = ch.Low <= actual && actual <= ch.High
			}
		}
	}
	return fc, nil
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func without(l map[string]string, drop ...string) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		if !slices.Contains(drop, k) {
			out[k] = v
		}
	}
	return out
}

// Summaries returns tailroot's, BARO's and least-squares BARO's summary
// over the cases of class c ("" = every fault class; fault-free windows
// are never in these).
func (r *FleetReport) Summaries(c fleet.Class) (tailroot, baro, ls rca.Summary) {
	var tc, bc, lc []rca.Case
	for _, x := range r.Cases {
		if !x.Truth.Fault || (c != "" && x.Class != c) {
			continue
		}
		tc = append(tc, rankCase(x.TailrootRank))
		bc = append(bc, rankCase(x.BARORank))
		lc = append(lc, rankCase(x.LSRank))
	}
	return rca.Summarize(tc), rca.Summarize(bc), rca.Summarize(lc)
}

// NoIncident is the share of fault-free windows answered "no incident",
// and how many there were.
func (r *FleetReport) NoIncident() (float64, int) {
	n, ok := 0, 0
	for _, x := range r.Cases {
		if !x.Truth.Fault {
			n++
			if x.Verdict == rca.VerdictNoIncident {
				ok++
			}
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return float64(ok) / float64(n), n
}

// Worse counts the fault cases where tailroot ranked the cause lower than
// BARO did.
func (r *FleetReport) Worse() int {
	n := 0
	for _, c := range r.Cases {
		if c.Truth.Fault && c.BARORank > 0 && (c.TailrootRank == 0 || c.TailrootRank > c.BARORank) {
			n++
		}
	}
	return n
}

// OnsetErrors returns, per change-point method, the median and 90th
// percentile of the onset error in minutes over the fault cases, and the
// coverage of the least-squares 95 % set.
func (r *FleetReport) OnsetErrors() (median, p90 map[string]float64, coverage float64) {
	median, p90 = map[string]float64{}, map[string]float64{}
	cov, n := 0, 0
	for _, m := range rca.ChangeMethods() {
		var e []float64
		for _, c := range r.Cases {
			if v, ok := c.OnsetError[m]; ok {
				e = append(e, v)
			}
		}
		slices.Sort(e)
		if len(e) > 0 {
			median[m] = quantile(e, 0.5)
			p90[m] = quantile(e, 0.9)
		}
	}
	for _, c := range r.Cases {
		if c.Truth.Fault {
			n++
			if c.Covered {
				cov++
			}
		}
	}
	if n > 0 {
		coverage = float64(cov) / float64(n)
	}
	return median, p90, coverage
}

func quantile(s []float64, p float64) float64 {
	h := p * float64(len(s)-1)
	i := int(h)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}

// WriteTable prints the per-class table, the fault-free line and the
// change-point errors.
func (r *FleetReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tcases\ttailroot AC@1\tAC@3\tAvg@5\tBARO AC@1\tAC@3\tAvg@5\tLS-BARO AC@1\tAC@3\tAvg@5\t")
	row := func(name string, t, b, l rca.Summary) {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", name, t.Cases, t.AC1, t.AC3, t.Avg5, b.AC1, b.AC3, b.Avg5, l.AC1, l.AC3, l.Avg5)
	}
	var classes []fleet.Class
	for _, c := range r.Cases {
		if c.Truth.Fault && !slices.Contains(classes, c.Class) {
			classes = append(classes, c.Class)
		}
	}
	for _, c := range classes {
		t, b, l := r.Summaries(c)
		row(string(c), t, b, l)
	}
	t, b, l := r.Summaries("")
	row("all faults", t, b, l)
	if err := tw.Flush(); err != nil {
		return err
	}
	if share, n := r.NoIncident(); n > 0 {
		fmt.Fprintf(w, "fault-free windows answered \"no incident\": %.3f of %d\n", share, n)
	}
	med, p90, cov := r.OnsetErrors()
	fmt.Fprintf(w, "change-time error (minutes), median / p90:")
	for _, m := range rca.ChangeMethods() {
		fmt.Fprintf(w, "  %s %.2f / %.2f", m, med[m], p90[m])
	}
	fmt.Fprintf(w, "\nleast-squares 95 %% change-time set covers the onset in %.3f of fault cases\n", cov)
	_, err := fmt.Fprintf(w, "fault cases where tailroot ranks the cause below BARO: %d (%v)\n", r.Worse(), r.Elapsed.Round(time.Millisecond))
	return err
}
