package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb/records"
)

// decomposeReq is one decomposition to compute.
type decomposeReq struct {
	win      tailfn.Window
	base     tailfn.Window // shapley only
	metric   string        // e2e or ttft
	p        float64
	method   string // auto, tail_mean, euler, excess, shapley
	heat     bool
	visit    func(*records.Record)
	selector string
}

// decomposition is a breakdown with what the handlers show around it.
type decomposition struct {
	b        attribution.Breakdown
	requests int // requests in the window (summed counts for accumulators)
	heat     *attribution.Heat
	clamped  int
	warnings []string
}

var decomposeMethods = []string{"auto", "tail_mean", "euler", "excess", "shapley"}

// decompose computes req from records, or for method auto on e2e without
// records, from the series (fromSeries: tail accumulators, then stage
// histograms).
func (a *Attribution) decompose(ctx context.Context, req decomposeReq) (decomposition, error) {
	if !slices.Contains(decomposeMethods, req.method) {
		return decomposition{}, badData("parameter method=%q: want one of %s", req.method, strings.Join(decomposeMethods, ", "))
	}
	if req.metric != "e2e" && req.metric != "ttft" {
		return decomposition{}, badData("parameter metric=%q: want e2e or ttft", req.metric)
	}
	var d decomposition
	reqs, clamped, err := a.requests(ctx, req.win, req.metric, req.visit, &d.warnings)
	if err != nil {
		return d, err
	}
	d.clamped = clamped
	if reqs.Len() == 0 {
		if req.method == "auto" && req.metric == "e2e" {
			return a.fromSeries(ctx, req)
		}
		return d, errNoRequests
	}
	d.requests = reqs.Len()
	switch req.method {
	case "auto", "tail_mean":
		d.b, err = attribution.TailMean(reqs, req.p)
	case "euler":
		d.b, err = attribution.Euler(reqs, req.p, attribution.EulerOptions{})
	case "excess":
		d.b, err = attribution.Excess(reqs, req.p)
	case "shapley":
		base, _, berr := a.requests(ctx, req.base, req.metric, nil, &d.warnings)
		if berr != nil {
			return d, berr
		}
		if base.Len() == 0 {
			return d, &apiError{http.StatusUnprocessableEntity, "execution", fmt.Errorf("no requests in baseline window")}
		}
		var res attribution.ShapleyResult
		res, err = attribution.Shapley(reqs, base, req.p)
		d.b = res.Breakdown
	}
	if err != nil {
		return d, &apiError{http.StatusUnprocessableEntity, "execution", err}
	}
	if req.heat {
		h, err := attribution.HeatTable(reqs, nil)
		if err != nil {
			return d, &apiError{http.StatusUnprocessableEntity, "execution", err}
		}
		d.heat = &h
	}
	return d, nil
}

// requests loads the window's records as end-to-end or TTFT stages.
func (a *Attribution) requests(ctx context.Context, w tailfn.Window, metric string, visit func(*records.Record), warnings *[]string) (attribution.Requests, int, error) {
	if a.src == nil {
		return attribution.Requests{}, 0, nil
	}
	pop, err := tailfn.Load(ctx, a.src, w, visit)
	if err != nil {
		return attribution.Requests{}, 0, err
	}
	if pop.Clamped > 0 {
		*warnings = append(*warnings, fmt.Sprintf("%d requests had overlapping stages (negative other, down to -%gs); other was set to 0", pop.Clamped, pop.ClampedMax))
	}
	if metric == "e2e" {
		return pop.Requests, pop.Clamped, nil
	}
	reqs, skipped, err := pop.TTFTRequests()
	if err != nil {
		return attribution.Requests{}, 0, err
	}
	if skipped > 0 {
		*warnings = append(*warnings, fmt.Sprintf("%d requests without a TTFT, or with queue+tokenize+prefill above it, were left out", skipped))
	}
	return reqs, pop.Clamped, nil
}

// fromAccumulators evaluates tail_mean_from_accumulators over the
// accumulator series of the window through the engine.
func (a *Attribution) fromAccumulators(ctx context.Context, req decomposeReq) (decomposition, error) {
	sel := func(name string) string {
		vs := &parser.VectorSelector{Name: name, LabelMatchers: append([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, name)}, req.win.Matchers...)}
		return vs.String()
	}
	rng := fmt.Sprintf("%dms", req.win.Maxt-req.win.Mint+1)
	// anchored: the difference of the counters at the window's ends,
	// without extrapolation, which is exact over the derived series (their
	// zero and previous-value samples, docs/stages.md).
	qs := fmt.Sprintf(`tail_mean_from_accumulators(%v, sum by (stage, e2e_bucket) (increase(%s[%s] anchored)), sum by (e2e_bucket) (increase(%s[%s] anchored)), "all")`,
		req.p, sel(a.opts.AccumulatorSums), rng, sel(a.opts.AccumulatorCounts), rng)
	q, err := a.engine.NewInstantQuery(ctx, a.q, nil, qs, time.UnixMilli(req.win.Maxt))
	if err != nil {
		// Without the functions registered there is no fallback.
		return decomposition{}, errNoRequests
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return decomposition{}, res.Err
	}
	vec, _ := res.Value.(promql.Vector)
	b, n, ok := breakdownFromRows(vec)
	if !ok {
		return decomposition{}, errNoRequests
	}
	d := decomposition{b: b, requests: int(math.Round(n))}
	d.warnings = append(d.warnings, "no request records in the window: the breakdown is estimated from tail accumulators (bounds per stage)")
	return d, nil
}

// breakdownFromRows rebuilds a breakdown from the "all" rows of
// tail_mean_from_accumulators (one group).
func breakdownFromRows(vec promql.Vector) (attribution.Breakdown, float64, bool) {
	b := attribution.Breakdown{Method: attribution.MethodTailMeanAccumulators, Kind: attribution.KindEstimate}
	idx := map[string]int{}
	var n float64
	for _, s := range vec {
		st, stat := s.Metric.Get(tailfn.LabelStage), s.Metric.Get(tailfn.LabelStatistic)
		if st == tailfn.StageE2E {
			switch stat {
			case "target":
				b.Target = s.F
			case "quantile":
				b.Quantile = s.F
			case "count":
				b.Count = s.F
			case "requests":
				n = s.F
			case "lower":
				b.TargetLower = s.F
			case "upper":
				b.TargetUpper = s.F
			}
			continue
		}
		j, ok := idx[st]
		if !ok {
			j = len(b.Stages)
			idx[st] = j
			b.Stages = append(b.Stages, st)
			b.Contrib = append(b.Contrib, math.NaN())
			b.Lower = append(b.Lower, math.NaN())
			b.Upper = append(b.Upper, math.NaN())
		}
		switch stat {
		case "contribution":
			b.Contrib[j] = s.F
		case "lower":
			b.Lower[j] = s.F
		case "upper":
			b.Upper[j] = s.F
		}
	}
	// Canonical stage order, as records give it.
	order := make([]int, len(b.Stages))
	for i := range order {
		order[i] = i
	}
	rank := func(s string) int {
		if i := slices.Index(tailfn.StageNames, s); i >= 0 {
			return i
		}
		return len(tailfn.StageNames)
	}
	slices.SortStableFunc(order, func(x, y int) int { return rank(b.Stages[x]) - rank(b.Stages[y]) })
	permute := func(v []float64) []float64 {
		out := make([]float64, len(v))
		for i, o := range order {
			out[i] = v[o]
		}
		return out
	}
	stages := make([]string, len(order))
	for i, o := range order {
		stages[i] = b.Stages[o]
	}
	b.Stages, b.Contrib, b.Lower, b.Upper = stages, permute(b.Contrib), permute(b.Lower), permute(b.Upper)
	return b, n, len(b.Stages) > 0 && n > 0
}

// breakdownStage is one stage of a breakdown response.
type breakdownStage struct {
	Stage               string `json:"stage"`
	ContributionSeconds num    `json:"contribution_seconds"`
	Share               num    `json:"share"`
	LowerSeconds        *num   `json:"lower_seconds"`
	UpperSeconds        *num   `json:"upper_seconds"`
}

type heatRow struct {
	Band        string `json:"band"`
	FromSeconds num    `json:"from_seconds"`
	ToSeconds   num    `json:"to_seconds"`
	Requests    int    `json:"requests"`
	MeanSeconds num    `json:"mean_seconds"`
	StageMeans  []num  `json:"stage_means"`
	TopStage    string `json:"top_stage"`
	TopShare    num    `json:"top_share"`
}

type heatData struct {
	Stages []string  `json:"stages"`
	Rows   []heatRow `json:"rows"`
}

type tokensData struct {
	PositionEdges []float64   `json:"position_edges"`
	LatencyEdges  []float64   `json:"latency_edges"`
	Counts        [][]float64 `json:"counts"`
}

type breakdownData struct {
	Method          string           `json:"method"`
	Kind            string           `json:"kind"`
	Metric          string           `json:"metric"`
	Quantile        float64          `json:"quantile"`
	QuantileSeconds num              `json:"quantile_seconds"`
	TargetSeconds   num              `json:"target_seconds"`
	ResidualSeconds num              `json:"residual_seconds"`
	Window          windowSeconds    `json:"window"`
	Requests        int              `json:"requests"`
	Stages          []breakdownStage `json:"stages"`
	Heat            *heatData        `json:"heat,omitempty"`
	Tokens          *tokensData      `json:"tokens,omitempty"`
}

type windowSeconds struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

func stagesOf(b attribution.Breakdown) []breakdownStage {
	out := make([]breakdownStage, len(b.Stages))
	for j, st := range b.Stages {
		share := math.NaN()
		if b.Target != 0 {
			share = b.Contrib[j] / b.Target
		}
		row := breakdownStage{Stage: st, ContributionSeconds: num(b.Contrib[j]), Share: num(share)}
		if b.Lower != nil && !math.IsNaN(b.Lower[j]) {
			lo, hi := num(b.Lower[j]), num(b.Upper[j])
			row.LowerSeconds, row.UpperSeconds = &lo, &hi
		}
		out[j] = row
	}
	return out
}

func heatOf(h *attribution.Heat) *heatData {
	if h == nil {
		return nil
	}
	out := &heatData{Stages: h.Stages, Rows: make([]heatRow, len(h.Rows))}
	for i, r := range h.Rows {
		means := make([]num, len(r.StageMean))
		for j, m := range r.StageMean {
			means[j] = num(m)
		}
		out.Rows[i] = heatRow{
			Band: r.Band.String(), FromSeconds: num(r.From), ToSeconds: num(r.To), Requests: r.Count,
			MeanSeconds: num(r.MeanS), StageMeans: means, TopStage: r.TopStage, TopShare: num(r.TopShare),
		}
	}
	return out
}

// Token heat map edges: output position (token index of the gap's later
// token) and inter-token latency in seconds.
var (
	tokenPositionEdges = []float64{0, 1, 2, 4, 8, 16, 32, 64}
	tokenLatencyEdges  = []float64{0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 10}
)

// tokenCounter counts inter-token gaps by position and latency from the
// records that kept their gaps (records.MaxITLValues or fewer tokens).
type tokenCounter struct {
	counts           [][]float64
	summaryOnly, out int
}

func newTokenCounter() *tokenCounter {
	c := &tokenCounter{counts: make([][]float64, len(tokenPositionEdges)-1)}
	for i := range c.counts {
		c.counts[i] = make([]float64, len(tokenLatencyEdges)-1)
	}
	return c
}

func (c *tokenCounter) add(r *records.Record) {
	if r.ITL.Count > 0 && r.ITL.Values == nil {
		c.summaryOnly++
		return
	}
	for k, v := range r.ITL.Values {
		i := bucketOf(tokenPositionEdges, float64(k+1))
		j := bucketOf(tokenLatencyEdges, v)
		if i < 0 || j < 0 {
			c.out++
			continue
		}
		c.counts[i][j]++
	}
}

// bucketOf returns i with edges[i] ≤ v < edges[i+1], or −1.
func bucketOf(edges []float64, v float64) int {
	for i := 0; i+1 < len(edges); i++ {
		if v >= edges[i] && v < edges[i+1] {
			return i
		}
	}
	return -1
}

// breakdown serves GET /api/v1/attribution/breakdown (grafana-plugin/CONTRACT.md).
func (a *Attribution) breakdown(w http.ResponseWriter, r *http.Request) {
	data, warnings, err := a.breakdownData(r)
	if err != nil {
		writeAttributionError(w, err)
		return
	}
	writeAttributionData(w, data, warnings)
}

func (a *Attribution) breakdownData(r *http.Request) (*breakdownData, []string, error) {
	ms, sel, err := a.selectorParam(r, "selector", false)
	if err != nil {
		return nil, nil, err
	}
	p, err := levelParam(r, "quantile", attribution.DefaultP)
	if err != nil {
		return nil, nil, err
	}
	start, err := timeParam(r, "start", time.Time{}, true)
	if err != nil {
		return nil, nil, err
	}
	end, err := timeParam(r, "end", time.Time{}, true)
	if err != nil {
		return nil, nil, err
	}
	win, err := window(ms, start, end)
	if err != nil {
		return nil, nil, err
	}
	req := decomposeReq{win: win, metric: or(r.FormValue("metric"), "e2e"), p: p, method: or(r.FormValue("method"), "auto"), selector: sel}
	if req.method == "shapley" {
		bs, err := timeParam(r, "baseline_start", time.Time{}, true)
		if err != nil {
			return nil, nil, err
		}
		be, err := timeParam(r, "baseline_end", time.Time{}, true)
		if err != nil {
			return nil, nil, err
		}
		if req.base, err = window(ms, bs, be); err != nil {
			return nil, nil, err
		}
	}
	view := or(r.FormValue("view"), "stages")
	var tokens *tokenCounter
	switch view {
	case "stages":
	case "heat":
		req.heat = true
	case "tokens":
		tokens = newTokenCounter()
		req.visit = tokens.add
	default:
		return nil, nil, badData("parameter view=%q: want stages, heat or tokens", view)
	}
	d, err := a.decompose(r.Context(), req)
	if err != nil {
		return nil, nil, err
	}
	out := &breakdownData{
		Method: d.b.Method.String(), Kind: d.b.Kind.String(), Metric: req.metric, Quantile: p,
		QuantileSeconds: num(d.b.Quantile), TargetSeconds: num(d.b.Target), ResidualSeconds: num(d.b.Residual),
		Window: windowSeconds{unixSeconds(start), unixSeconds(end)}, Requests: d.requests,
		Stages: stagesOf(d.b), Heat: heatOf(d.heat),
	}
	if tokens != nil {
		out.Tokens = &tokensData{PositionEdges: tokenPositionEdges, LatencyEdges: tokenLatencyEdges, Counts: tokens.counts}
		if tokens.summaryOnly > 0 {
			d.warnings = append(d.warnings, fmt.Sprintf("%d requests kept only an inter-token latency summary (more than %d tokens) and are not in the token heat map", tokens.summaryOnly, records.MaxITLValues))
		}
		if tokens.out > 0 {
			d.warnings = append(d.warnings, fmt.Sprintf("%d inter-token gaps fell outside the heat map's edges", tokens.out))
		}
	}
	return out, d.warnings, nil
}

type abData struct {
	Quantile  float64 `json:"quantile"`
	A         num     `json:"a"`
	B         num     `json:"b"`
	Diff      num     `json:"diff"`
	Lower     num     `json:"lower"`
	Upper     num     `json:"upper"`
	Level     float64 `json:"level"`
	Method    string  `json:"method"`
	Metric    string  `json:"metric"`
	ARequests int     `json:"a_requests"`
	BRequests int     `json:"b_requests"`
}

// ab serves GET /api/v1/attribution/ab: P_p(b) − P_p(a) with its interval.
func (a *Attribution) ab(w http.ResponseWriter, r *http.Request) {
	data, err := a.abData(r)
	if err != nil {
		writeAttributionError(w, err)
		return
	}
	writeAttributionData(w, data, nil)
}

func (a *Attribution) abData(r *http.Request) (*abData, error) {
	ma, _, err := a.selectorParam(r, "a", true)
	if err != nil {
		return nil, err
	}
	mb, _, err := a.selectorParam(r, "b", true)
	if err != nil {
		return nil, err
	}
	p, err := levelParam(r, "quantile", attribution.DefaultP)
	if err != nil {
		return nil, err
	}
	level, err := levelParam(r, "level", 0.95)
	if err != nil {
		return nil, err
	}
	method, err := tailfn.ParseCIMethod(or(r.FormValue("ci_method"), tailfn.DefaultCIMethod))
	if err != nil {
		return nil, badData("parameter ci_method: %v", err)
	}
	metric := or(r.FormValue("metric"), "e2e")
	if metric != "e2e" && metric != "ttft" {
		return nil, badData("parameter metric=%q: want e2e or ttft", metric)
	}
	start, err := timeParam(r, "start", time.Time{}, true)
	if err != nil {
		return nil, err
	}
	end, err := timeParam(r, "end", time.Time{}, true)
	if err != nil {
		return nil, err
	}
	values := func(ms []*labels.Matcher) ([]float64, error) {
		win, err := window(ms, start, end)
		if err != nil {
			return nil, err
		}
		if a.src == nil {
			return nil, nil
		}
		pop, err := tailfn.Load(r.Context(), a.src, win, nil)
		if err != nil {
			return nil, err
		}
		x, _ := pop.Field(metric)
		if metric == "ttft" {
			x = slices.DeleteFunc(slices.Clone(x), func(v float64) bool { return !(v > 0) })
		}
		return x, nil
	}
	xa, err := values(ma)
	if err != nil {
		return nil, err
	}
	xb, err := values(mb)
	if err != nil {
		return nil, err
	}
	if len(xa) == 0 || len(xb) == 0 {
		return nil, errNoRequests
	}
	iv, err := attribution.QuantileDiffCI(xb, xa, p, level, attribution.CIOptions{Method: method, Seed: tailfn.BootstrapSeed})
	if errors.Is(err, attribution.ErrInvalidMethod) {
		// A method below its nominal coverage at this p and n is refused,
		// never answered: the error names method, p and n.
		return nil, badData("parameter ci_method: %v", err)
	}
	if err != nil {
		return nil, &apiError{http.StatusUnprocessableEntity, "execution", err}
	}
	return &abData{
		Quantile: p, A: num(attribution.Quantile(xa, p)), B: num(attribution.Quantile(xb, p)),
		Diff: num(iv.Estimate), Lower: num(iv.Lower), Upper: num(iv.Upper), Level: level,
		Method: iv.Method.String(), Metric: metric, ARequests: len(xa), BRequests: len(xb),
	}, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
