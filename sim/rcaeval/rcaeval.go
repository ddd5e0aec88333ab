// Package rcaeval measures root-cause ranking on two suites of incidents
// with known root causes, kept apart from attribution/ (which must not
// import the simulators):
//
//   - serving (Run): the simulator's incidents (sim.Scenario), generated
//     from the serving graph the ranking assumes; tailroot's ranking
//     (rca.Rank) against plain BARO at the same change point.
//   - fleet (RunFleet): sim/fleet's incidents, written apart from the
//     ranking (exporters' own names, host:port instances per exporter,
//     decoys, mild faults, fault-free windows); tailroot against BARO at
//     BOCPD's change point and at the least-squares one, the "no incident"
//     share of fault-free windows and each change-point method's error.
//
// In: Options or FleetOptions. Out: a Report or FleetReport with one case
// per incident and the summaries (AC@1, AC@3, Avg@5) per class and
// overall. Incidents depend only on their seeds: the same options give the
// same report.
package rcaeval

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/sim"
)

// Options configures Run. Zero values select the defaults.
type Options struct {
	// Cases is the number of incidents per fault kind. 0 = 20.
	Cases int
	// Seed selects the incidents. 0 = 1.
	Seed uint64
	// Faults are the fault kinds to run. nil = sim.FaultKinds().
	Faults []sim.FaultKind
	// Parallel is how many incidents are generated and ranked at once.
	// 0 = GOMAXPROCS.
	Parallel int
	// Rank configures tailroot's ranking (its ChangePoint is ignored).
	Rank rca.Options
}

// CaseResult is one incident's outcome.
type CaseResult struct {
	Fault    sim.FaultKind
	Seed     uint64
	Truth    sim.GroundTruth
	Target   string // the signal the change point was detected on
	Detected int    // detected change point (index into the signals)
	Actual   int    // the fault's first affected index
	// TailrootRank and BARORank are the 1-based ranks of the true root
	// cause (0: not ranked), Top the first-ranked candidate of each.
	TailrootRank, BARORank int
	TailrootTop, BAROTop   string
	Candidates             int
}

// Report is the result of Run.
type Report struct {
	Cases []CaseResult
	// Elapsed is the wall time of the whole run.
	Elapsed time.Duration
}

// Run generates Options.Cases incidents per fault kind and ranks each.
// Incident i of fault k uses seed Seed·1000 + i (fault kinds differ in the
// fault only), a random faulty instance of two, a fault start between 55 %
// and 75 % of the two-hour window and a severity between 0.8 and 1.2.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Cases <= 0 {
		opts.Cases = 20
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Faults == nil {
		opts.Faults = sim.FaultKinds()
	}
	par := opts.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	type job struct {
		k    sim.FaultKind
		i    int
		seed uint64
	}
	var jobs []job
	for _, k := range opts.Faults {
		if _, ok := sim.Info(k); !ok {
			return nil, fmt.Errorf("eval: unknown fault %q", k)
		}
		for i := range opts.Cases {
			jobs = append(jobs, job{k, i, opts.Seed*1000 + uint64(i)})
		}
	}
	start := time.Now()
	out := make([]CaseResult, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				out[j], errs[j] = runCase(jobs[j].k, jobs[j].seed, opts.Rank)
			}
		}()
	}
	for j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			close(next)
			wg.Wait()
			return nil, ctx.Err()
		}
	}
	close(next)
	wg.Wait()
	for j, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("eval: %s case %d (seed %d): %w", jobs[j].k, jobs[j].i, jobs[j].seed, err)
		}
	}
	return &Report{Cases: out, Elapsed: time.Since(start)}, nil
}

// Scenario returns the incident Run generates for fault k and seed.
func Scenario(k sim.FaultKind, seed uint64) sim.Scenario {
	r := rand.New(rand.NewPCG(seed, 0x7461696c726f6f74))
	const length = 2 * time.Hour
	step := 15 * time.Second
	at := time.Duration(float64(length) * (0.55 + 0.2*r.Float64())).Truncate(step)
	return sim.Scenario{
		Fault:    k,
		Seed:     seed,
		Instance: r.IntN(2),
		Severity: 0.8 + 0.4*r.Float64(),
		Length:   length,
		FaultAt:  at,
	}
}

// targets are the model-level latencies a change point is looked for in:
// the alert an operator starts from is on TTFT or on end-to-end latency.
var targets = []string{"vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"}

func runCase(k sim.FaultKind, seed uint64, ro rca.Options) (CaseResult, error) {
	sc := Scenario(k, seed)
	inc, err := sc.Generate()
	if err != nil {
		return CaseResult{}, err
	}
	sigs := inc.Signals()
	cands := make([]rca.Candidate, len(sigs))
	for i, s := range sigs {
		cands[i] = rca.Candidate{
			Name: s.Name, Metric: s.Metric, Node: s.Node,
			Labels: map[string]string{"instance": s.Instance},
			Values: s.Values,
		}
	}
	// The target is whichever model latency changes more clearly: the
	// change point of each (rca.Onset, the ranking's default method), then the larger shift of the
	// median across it, in units of the interquartile range before it. The
	// ground truth is not consulted.
	var target sim.Signal
	cp, best := 0, -1.0
	for _, m := range targets {
		t := inc.ModelMean(m)
		ts := causal.Series{Name: t.Name, Values: t.Values}
		ch, err := rca.Onset(ts, ro.ChangeMethod, ro.MinBefore)
		if err != nil {
			return CaseResult{}, err
		}
		c := ch.At
		if sh := medianShift(t.Values, c); sh > best {
			target, cp, best = t, c, sh
		}
	}
	ro.ChangePoint = cp
	res, err := rca.Rank(causal.Series{Name: target.Name, Values: target.Values}, cands, ro)
	if err != nil {
		return CaseResult{}, err
	}
	truth := []string{inc.Truth.RootCause.Signal}
	tail := make([]string, len(res.Ranking))
	for i, r := range res.Ranking {
		tail[i] = r.Name
	}
	baro := make([]string, len(res.Baseline))
	for i, r := range res.Baseline {
		baro[i] = r.Name
	}
	// Signals start at the second step: index j is step j+1.
	actual := int(inc.Truth.Start.Sub(inc.Truth.WindowStart)/inc.Truth.Step) - 1
	return CaseResult{
		Fault: k, Seed: seed, Truth: inc.Truth, Target: target.Name,
		Detected: res.ChangePoint, Actual: actual,
		TailrootRank: rca.Case{Ranking: tail, Truth: truth}.RankOf(),
		BARORank:     rca.Case{Ranking: baro, Truth: truth}.RankOf(),
		TailrootTop:  tail[0], BAROTop: baro[0],
		Candidates: len(cands),
	}, nil
}

// medianShift is |median(v[cp:]) − median(v[:cp])| / IQR(v[:cp]).
func medianShift(v []float64, cp int) float64 {
	pre, post := slices.Clone(v[:cp]), slices.Clone(v[cp:])
	slices.Sort(pre)
	slices.Sort(post)
	q := func(s []float64, p float64) float64 {
		h := p * float64(len(s)-1)
		i := int(h)
		if i+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[i] + (h-float64(i))*(s[i+1]-s[i])
	}
	iqr := q(pre, 0.75) - q(pre, 0.25)
	if iqr <= 0 {
		iqr = 1
	}
	return math.Abs(q(post, 0.5)-q(pre, 0.5)) / iqr
}

// Summaries returns tailroot's and BARO's summary over the cases of fault k
// ("" = all cases).
func (r *Report) Summaries(k sim.FaultKind) (tailroot, baro rca.Summary) {
	var tc, bc []rca.Case
	for _, c := range r.Cases {
		if k != "" && c.Fault != k {
			continue
		}
		tc = append(tc, rankCase(c.TailrootRank))
		bc = append(bc, rankCase(c.BARORank))
	}
	return rca.Summarize(tc), rca.Summarize(bc)
}

// Worse counts the cases where tailroot ranked the true root cause lower
// than BARO did.
func (r *Report) Worse() int {
	n := 0
	for _, c := range r.Cases {
		if c.BARORank > 0 && (c.TailrootRank == 0 || c.TailrootRank > c.BARORank) {
			n++
		}
	}
	return n
}

// rankCase builds a Case whose truth sits at 1-based rank r (0: absent).
func rankCase(r int) rca.Case {
	if r == 0 {
		return rca.Case{Truth: []string{"truth"}}
	}
	rk := make([]string, r)
	for i := range rk {
		rk[i] = "other"
	}
	rk[r-1] = "truth"
	return rca.Case{Ranking: rk, Truth: []string{"truth"}}
}

// WriteTable prints the per-fault and overall table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tcases\ttailroot AC@1\tAC@3\tAvg@5\tBARO AC@1\tAC@3\tAvg@5\t")
	var kinds []sim.FaultKind
	seen := map[sim.FaultKind]bool{}
	for _, c := range r.Cases {
		if !seen[c.Fault] {
			seen[c.Fault] = true
			kinds = append(kinds, c.Fault)
		}
	}
	row := func(name string, t, b rca.Summary) {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", name, t.Cases, t.AC1, t.AC3, t.Avg5, b.AC1, b.AC3, b.Avg5)
	}
	for _, k := range kinds {
		t, b := r.Summaries(k)
		row(string(k), t, b)
	}
	t, b := r.Summaries("")
	row("all", t, b)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "cases where tailroot ranks the root cause below BARO: %d of %d (%v)\n", r.Worse(), len(r.Cases), r.Elapsed.Round(time.Millisecond))
	return err
}
