package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/query/causalfn"
	"github.com/tailroot/tailroot/query/qlimit"
)

// RootCauseOptions configures the root-cause endpoint. Zero values select
// the defaults.
type RootCauseOptions struct {
	// DefaultStep is the step when a request gives none. 0 = 15s.
	DefaultStep time.Duration
	// MaxPoints bounds (end − start)/step + 1, as Prometheus bounds the
	// points of a range query. 0 = 11000.
	MaxPoints int
	// Timeout bounds the queries of one request. 0 = 2m.
	Timeout time.Duration
	// Candidates are evaluated when a request names none. nil =
	// DefaultRootCauseCandidates().
	Candidates []CandidateQuery
}

// CandidateQuery is a PromQL expression whose series are root-cause
// candidates. Metric names what the series measure when the expression
// drops the metric name (rate, sum); Node, when set, overrides the
// candidate's graph node (see rca.NodeFor).
type CandidateQuery struct {
	Metric, Node, Query string
}

// DefaultRootCauseCandidates is the candidate set for requests without one:
// per instance, the vLLM, tailroot-agent and dcgm-exporter series the
// serving graph knows, as rates (counters), means (histograms: rate of
// _sum over rate of _count) or values (gauges) over 1m windows, and the
// frontend residual (TTFT minus queue and prefill time).
func DefaultRootCauseCandidates() []CandidateQuery {
	rate := func(m string) CandidateQuery {
		return CandidateQuery{Metric: m, Query: fmt.Sprintf("sum by (instance) (rate(%s[1m]))", m)}
	}
	mean := func(m string) CandidateQuery {
		return CandidateQuery{Metric: m, Query: rcMeanQuery(m)}
	}
	gauge := func(m string) CandidateQuery {
		return CandidateQuery{Metric: m, Query: fmt.Sprintf("avg by (instance) (%s)", m)}
	}
	return []CandidateQuery{
		rate("vllm:request_success_total"),
		mean("vllm:request_prompt_tokens"), mean("vllm:request_generation_tokens"),
		rate("vllm:prompt_tokens_total"), rate("vllm:generation_tokens_total"),
		gauge("vllm:num_requests_running"), gauge("vllm:num_requests_waiting"),
		gauge("vllm:kv_cache_usage_perc"), rate("vllm:num_preemptions_total"),
		mean("vllm:request_queue_time_seconds"), mean("vllm:request_prefill_time_seconds"),
		mean("vllm:request_decode_time_seconds"), mean("vllm:inter_token_latency_seconds"),
		mean("vllm:time_to_first_token_seconds"), mean("vllm:e2e_request_latency_seconds"),
		{
			Metric: "frontend_residual_seconds", Node: "tokenize",
			Query: rcMeanQuery("vllm:time_to_first_token_seconds") + " - (" + rcMeanQuery("vllm:request_queue_time_seconds") +
				") - (" + rcMeanQuery("vllm:request_prefill_time_seconds") + ")",
		},
		mean("tailroot_runqueue_delay_seconds"), mean("tailroot_gil_wait_seconds"),
		mean("tailroot_block_io_latency_seconds"), mean("tailroot_cuda_call_seconds"),
		rate("tailroot_page_faults_total"),
		gauge("DCGM_FI_DEV_SM_CLOCK"), gauge("DCGM_FI_DEV_MEM_CLOCK"), gauge("DCGM_FI_DEV_GPU_UTIL"),
		gauge("DCGM_FI_DEV_POWER_USAGE"), gauge("DCGM_FI_DEV_FB_USED"),
	}
}

func rcMeanQuery(m string) string {
	return fmt.Sprintf("sum by (instance) (rate(%s_sum[1m])) / sum by (instance) (rate(%s_count[1m]))", m, m)
}

// NewRootCauseHandler serves GET and POST /api/v1/attribution/rootcause
// (grafana-plugin/CONTRACT.md): it evaluates the target and the candidate
// expressions as range queries with engine over q, ranks the candidates
// (rca.Rank) and answers with the ranking and the serving graph in the
// Prometheus envelope.
//
// Parameters: target (one series, required); candidates (repeatable; each
// an expression whose series are candidates, a selector included; default
// DefaultRootCauseCandidates); start, end (Unix seconds or RFC 3339,
// required); step (duration or seconds, default 15s); change_at (Unix
// seconds; detected when absent); alpha (false discovery rate, default
// 0.05); max_lag (steps searched for each candidate's lead over the target
// by prewhitened cross-correlation, 0–100, default 10); group (comma-
// separated labels linking candidates of one server; default: join by host,
// rca.JoinHosts).
//
// Bad parameters, unparsable expressions and windows too short to rank are
// 400 {"errorType":"bad_data"}; a failing query is 422 "execution", a
// timeout 503 "timeout".
func NewRootCauseHandler(engine promql.QueryEngine, q storage.Queryable, opts RootCauseOptions) http.Handler {
	if opts.DefaultStep <= 0 {
		opts.DefaultStep = 15 * time.Second
	}
	if opts.MaxPoints <= 0 {
		opts.MaxPoints = 11000
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Candidates == nil {
		opts.Candidates = DefaultRootCauseCandidates()
	}
	return &rootCause{engine: engine, q: q, opts: opts, graph: rca.ServingGraph()}
}

type rootCause struct {
	engine promql.QueryEngine
	q      storage.Queryable
	opts   RootCauseOptions
	graph  *rca.Graph
}

// rcError is an error with its HTTP status and Prometheus error type.
type rcError struct {
	code int
	typ  string
	err  error
}

func (e *rcError) Error() string { return e.err.Error() }

func rcBadData(format string, a ...any) *rcError {
	return &rcError{http.StatusBadRequest, "bad_data", fmt.Errorf(format, a...)}
}

// rcRequest is a parsed request.
type rcRequest struct {
	target     string
	candidates []CandidateQuery
	start, end time.Time
	step       time.Duration
	changeAt   *time.Time
	alpha      float64
	maxLag     int
	group      []string
}

func (h *rootCause) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "bad_data", "method "+r.Method+" not allowed: use GET or POST")
		return
	}
	req, aerr := h.parse(r)
	if aerr == nil {
		var data *rcData
		var warnings []string
		data, warnings, aerr = h.run(r.Context(), req)
		if aerr == nil {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(struct {
				Status   string   `json:"status"`
				Data     *rcData  `json:"data"`
				Warnings []string `json:"warnings,omitempty"`
			}{"success", data, warnings})
			return
		}
	}
	writeError(w, aerr.code, aerr.typ, aerr.Error())
}

func (h *rootCause) parse(r *http.Request) (*rcRequest, *rcError) {
	if err := r.ParseForm(); err != nil {
		return nil, rcBadData("parse form: %v", err)
	}
	f := r.Form
	req := &rcRequest{target: strings.TrimSpace(f.Get("target")), step: h.opts.DefaultStep, alpha: 0.05, maxLag: 10}
	if req.target == "" {
		return nil, rcBadData("parameter target is required: a PromQL expression with one series, e.g. histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))")
	}
	for _, c := range f["candidates"] {
		if c = strings.TrimSpace(c); c != "" {
			req.candidates = append(req.candidates, CandidateQuery{Query: c})
		}
	}
	if len(req.candidates) == 0 {
		req.candidates = h.opts.Candidates
	}
	var err error
	if req.start, err = rcParseTime(f.Get("start"), "start"); err != nil {
		return nil, rcBadData("%v", err)
	}
	if req.end, err = rcParseTime(f.Get("end"), "end"); err != nil {
		return nil, rcBadData("%v", err)
	}
	if !req.end.After(req.start) {
		return nil, rcBadData("end %s is not after start %s", req.end.Format(time.RFC3339), req.start.Format(time.RFC3339))
	}
	if s := f.Get("step"); s != "" {
		if req.step, err = rcParseDuration(s); err != nil || req.step <= 0 {
			return nil, rcBadData("parameter step %q: want a positive duration such as 15s or a number of seconds", s)
		}
	}
	if n := int64(req.end.Sub(req.start)/req.step) + 1; n > int64(h.opts.MaxPoints) {
		return nil, rcBadData("start, end and step give %d points, over the limit of %d: raise the step or narrow the window", n, h.opts.MaxPoints)
	}
	if s := f.Get("change_at"); s != "" {
		t, err := rcParseTime(s, "change_at")
		if err != nil {
			return nil, rcBadData("%v", err)
		}
		if t.Before(req.start) || !t.Before(req.end) {
			return nil, rcBadData("parameter change_at %s is outside [start, end)", s)
		}
		req.changeAt = &t
	}
	if s := f.Get("alpha"); s != "" {
		if req.alpha, err = strconv.ParseFloat(s, 64); err != nil || !(req.alpha > 0 && req.alpha < 1) {
			return nil, rcBadData("parameter alpha %q: want a number in (0, 1)", s)
		}
	}
	if s := f.Get("max_lag"); s != "" {
		if req.maxLag, err = strconv.Atoi(s); err != nil || req.maxLag < 0 || req.maxLag > 100 {
			return nil, rcBadData("parameter max_lag %q: want an integer in [0, 100]", s)
		}
	}
	if s := f.Get("group"); s != "" {
		req.group = nil
		for _, g := range strings.Split(s, ",") {
			if g = strings.TrimSpace(g); g != "" {
				if !utf8.ValidString(g) {
					return nil, rcBadData("parameter group: %q is not a label name", g)
				}
				req.group = append(req.group, g)
			}
		}
	}
	return req, nil
}

// rcParseTime accepts Unix seconds (fractional) or RFC 3339, as the
// Prometheus API does.
func rcParseTime(s, name string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("parameter %s is required", name)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		// ±1e11 s is ±3000 years: beyond it time arithmetic overflows.
		if !(math.Abs(f) <= 1e11) {
			return time.Time{}, fmt.Errorf("parameter %s %q is out of range", name, s)
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("parameter %s %q: want Unix seconds or RFC 3339", name, s)
}

func rcParseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f > float64(math.MaxInt64/int64(time.Second)) {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := model.ParseDuration(s)
	return time.Duration(d), err
}

// rcGrid is one series sampled on the request's step grid (NaN where absent).
type rcGrid struct {
	labels labels.Labels
	metric string
	node   string
	id     string
	vals   []float64
}

// rangeQuery evaluates expr over the request grid.
func (h *rootCause) rangeQuery(ctx context.Context, req *rcRequest, what, expr string) (promql.Matrix, *rcError) {
	qry, err := h.engine.NewRangeQuery(ctx, h.q, nil, expr, req.start, req.end, req.step)
	if err != nil {
		return nil, rcBadData("%s %q: %v", what, expr, err)
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		var cancel promql.ErrQueryCanceled
		var timeout promql.ErrQueryTimeout
		switch {
		case errors.As(res.Err, &timeout) || errors.Is(res.Err, context.DeadlineExceeded):
			return nil, &rcError{http.StatusServiceUnavailable, "timeout", fmt.Errorf("%s: %w", what, res.Err)}
		case errors.As(res.Err, &cancel) || errors.Is(res.Err, context.Canceled):
			return nil, &rcError{http.StatusServiceUnavailable, "canceled", fmt.Errorf("%s: %w", what, res.Err)}
		}
		return nil, &rcError{http.StatusUnprocessableEntity, "execution", fmt.Errorf("%s %q: %w", what, expr, res.Err)}
	}
	m, ok := res.Value.(promql.Matrix)
	if !ok {
		return nil, rcBadData("%s %q is a %s, want an instant vector or scalar expression", what, expr, res.Value.Type())
	}
	// The result is only valid until Close: copy what is kept.
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		if len(s.Histograms) > 0 {
			return nil, rcBadData("%s %q: series %s holds native histograms; pass floats (histogram_quantile, histogram_avg)", what, expr, s.Metric)
		}
		out[i] = promql.Series{Metric: s.Metric, Floats: slices.Clone(s.Floats)}
	}
	return out, nil
}

func (h *rootCause) toGrid(req *rcRequest, s promql.Series, metric, node string) rcGrid {
	n := int(req.end.Sub(req.start)/req.step) + 1
	g := rcGrid{labels: s.Metric, metric: metric, node: node, vals: make([]float64, n)}
	if name := s.Metric.Get(model.MetricNameLabel); name != "" {
		g.metric = name
	}
	for i := range g.vals {
		g.vals[i] = math.NaN()
	}
	start, st := req.start.UnixMilli(), req.step.Milliseconds()
	for _, p := range s.Floats {
		if k := (p.T - start) / st; (p.T-start)%st == 0 && k >= 0 && int(k) < n {
			g.vals[k] = p.F
		}
	}
	rest := s.Metric.DropReserved(rcIsMetricName)
	if rest.IsEmpty() {
		g.id = g.metric + "{}"
	} else {
		g.id = g.metric + rest.String()
	}
	return g
}

// rcIsMetricName selects the metric name label for DropReserved.
func rcIsMetricName(n string) bool { return n == model.MetricNameLabel }

// rcFamily is the metric family expr selects when it selects one
// (histogram suffixes removed), else "".
func rcFamily(expr string) string {
	p := qlimit.Parser{Parser: parser.NewParser(parser.Options{EnableExperimentalFunctions: true}), Limits: qlimit.DefaultLimits()}
	e, err := p.ParseExpr(expr)
	if err != nil {
		return ""
	}
	return causalfn.Family(e)
}

// rcMinCoverage is the share of the target's points a candidate needs.
const rcMinCoverage = 0.5

func (h *rootCause) run(ctx context.Context, req *rcRequest) (*rcData, []string, *rcError) {
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	var warnings []string
	tm, aerr := h.rangeQuery(ctx, req, "target", req.target)
	if aerr != nil {
		return nil, nil, aerr
	}
	if len(tm) != 1 {
		return nil, nil, rcBadData("target %q has %d series in the window, want 1: aggregate it, e.g. max(…) or histogram_quantile(0.99, sum by (le) (…))", req.target, len(tm))
	}
	target := h.toGrid(req, tm[0], rcFamily(req.target), "")
	var cands []rcGrid
	seen := map[string]bool{}
	for _, cq := range req.candidates {
		m, aerr := h.rangeQuery(ctx, req, "candidates", cq.Query)
		if aerr != nil {
			return nil, nil, aerr
		}
		metric := cq.Metric
		if metric == "" {
			metric = rcFamily(cq.Query)
		}
		for _, s := range m {
			g := h.toGrid(req, s, metric, cq.Node)
			if seen[g.id] {
				warnings = append(warnings, fmt.Sprintf("candidate %s appears in more than one candidates expression; the first is used", g.id))
				continue
			}
			seen[g.id] = true
			cands = append(cands, g)
		}
	}

	// The grid: the target's finite points, less those a kept candidate
	// lacks.
	var keep []int
	for i, v := range target.vals {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			keep = append(keep, i)
		}
	}
	var kept []rcGrid
	for _, c := range cands {
		have := 0
		for _, i := range keep {
			if v := c.vals[i]; !math.IsNaN(v) && !math.IsInf(v, 0) {
				have++
			}
		}
		if float64(have) < rcMinCoverage*float64(len(keep)) {
			warnings = append(warnings, fmt.Sprintf("candidate %s left out: values at %d of the target's %d points", c.id, have, len(keep)))
			continue
		}
		kept = append(kept, c)
	}
	var idx []int
	for _, i := range keep {
		ok := true
		for _, c := range kept {
			if v := c.vals[i]; math.IsNaN(v) || math.IsInf(v, 0) {
				ok = false
				break
			}
		}
		if ok {
			idx = append(idx, i)
		}
	}
	if lost := len(keep) - len(idx); lost > 0 {
		warnings = append(warnings, fmt.Sprintf("%d of the target's %d points left out where a candidate has no value", lost, len(keep)))
	}
	pick := func(v []float64) []float64 {
		out := make([]float64, len(idx))
		for k, i := range idx {
			out[k] = v[i]
		}
		return out
	}
	ts := func(k int) time.Time { return req.start.Add(time.Duration(idx[k]) * req.step) }
	ro := rca.Options{Alpha: req.alpha, GroupLabels: req.group}
	if req.changeAt != nil {
		k, _ := slices.BinarySearchFunc(idx, *req.changeAt, func(i int, t time.Time) int {
			return req.start.Add(time.Duration(i) * req.step).Compare(t)
		})
		if k >= len(idx) {
			return nil, nil, rcBadData("parameter change_at: no aligned point at or after it")
		}
		ro.ChangePoint = max(k, 1)
	}
	tv := causal.Series{Name: target.id, Values: pick(target.vals)}
	rc := make([]rca.Candidate, len(kept))
	for i, c := range kept {
		rc[i] = rca.Candidate{Name: c.id, Metric: c.metric, Node: c.node, Labels: c.labels.Map(), Values: pick(c.vals)}
	}
	res, err := rca.Rank(tv, rc, ro)
	if err != nil {
		return nil, nil, rcBadData("rank: %v", err)
	}
	return h.response(req, res, tv, rc, ts), warnings, nil
}

// rcNum is a JSON number that encodes NaN and ±Inf as null.
type rcNum float64

func (n rcNum) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// rcData is the answer's data member (grafana-plugin/CONTRACT.md,
// plus the fields after stage).
type rcData struct {
	// ChangeAt is the change point, Unix seconds; ChangeProbability its
	// BOCPD probability (null when given by change_at).
	ChangeAt          rcNum      `json:"change_at"`
	ChangeProbability rcNum      `json:"change_probability"`
	// Verdict is "incident", "no incident" or "unexplained" (rca.Result);
	// ChangeLow and ChangeHigh bound the change time's 95 % set and
	// ChangeMethod names the method that found it.
	Verdict      string `json:"verdict"`
	ChangeLow    rcNum  `json:"change_low"`
	ChangeHigh   rcNum  `json:"change_high"`
	ChangeMethod string `json:"change_method"`
	Points            int        `json:"points"`
	Ranking           []rcRanked `json:"ranking"`
	// Baseline is plain BARO at the same change point, for comparison.
	Baseline []rcBaro `json:"baseline"`
	Graph    rcGraph  `json:"graph"`
}

// rcRanked is one candidate, in rank order: root causes the graph cannot
// explain by an anomaly upstream first (rca.Rank), so score is not
// monotone down the list.
type rcRanked struct {
	Candidate string `json:"candidate"`
	// Score is the RHT score (robust z-score of the candidate's residual
	// given its graph parents, after the change point).
	Score rcNum `json:"score"`
	// PAdjusted is the Benjamini–Hochberg q-value of the shift test.
	PAdjusted rcNum `json:"p_adjusted"`
	// Lag is the candidate's lead over the target in steps (prewhitened
	// cross-correlation, positive: the candidate moves first); null when
	// max_lag is 0 or the test failed.
	Lag *int `json:"lag"`
	// Stage is the canonical stage the candidate acts on in this incident.
	Stage       string            `json:"stage"`
	Rank        int               `json:"rank"`
	Node        string            `json:"node"`
	Family      string            `json:"family"`
	BAROScore   rcNum             `json:"baro_score"`
	Shift       rcNum             `json:"shift"`
	PValue      rcNum             `json:"p_value"`
	Anomalous   bool              `json:"anomalous"`
	ExplainedBy string            `json:"explained_by,omitempty"`
	Parents     []string          `json:"parents,omitempty"`
	Labels      map[string]string `json:"labels"`
	// Host and JoinedBy say how the candidate was tied to a machine;
	// Precedes, Informative, GrangerQ and Bypassed are the causal checks
	// (rca.Ranked) and Reason says in words why the row ranks where it does.
	Host        string `json:"host"`
	JoinedBy    string `json:"joined_by"`
	Precedes    bool   `json:"precedes"`
	Informative bool   `json:"informative"`
	GrangerQ    rcNum  `json:"granger_q"`
	Bypassed    bool   `json:"bypassed"`
	Reason      string `json:"reason"`
}

type rcBaro struct {
	Candidate string `json:"candidate"`
	Score     rcNum  `json:"score"`
	Rank      int    `json:"rank"`
}

type rcGraph struct {
	Nodes []rcNode `json:"nodes"`
	Edges []rcEdge `json:"edges"`
}

type rcNode struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Kind is the contract's: target, stage, kernel, gpu or serving.
	Kind string `json:"kind"`
	// Score is the largest RHT score of the node's candidates.
	Score rcNum `json:"score"`
	// Candidates counts the candidates mapped to the node.
	Candidates int `json:"candidates"`
}

type rcEdge struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// Weight is |Pearson r| over the window between the two nodes'
	// highest-scoring candidates (within the top candidate's group).
	Weight    rcNum `json:"weight"`
	Lag       *int  `json:"lag"`
	PAdjusted rcNum `json:"p_adjusted"`
}

// rcKinds maps node families to the contract's node kinds.
var rcKinds = map[string]string{
	rca.FamilyStage: "stage", rca.FamilyHost: "kernel", rca.FamilyGPU: "gpu",
	rca.FamilyWorkload: "serving", rca.FamilyEngine: "serving",
}

// rcStages are the nodes that are tailroot stages.
var rcStages = map[string]bool{"queue": true, "tokenize": true, "prefill": true, "decode": true}

func (h *rootCause) response(req *rcRequest, res *rca.Result, target causal.Series, cands []rca.Candidate, ts func(int) time.Time) *rcData {
	byName := map[string]int{}
	for i, c := range cands {
		byName[c.Name] = i
	}
	d := &rcData{
		ChangeAt:          rcNum(float64(ts(res.ChangePoint).UnixMilli()) / 1000),
		ChangeProbability: rcNum(res.ChangeProb),
		Verdict:           res.Verdict,
		ChangeLow:         rcNum(float64(ts(res.Change.Low).UnixMilli()) / 1000),
		ChangeHigh:        rcNum(float64(ts(res.Change.High).UnixMilli()) / 1000),
		ChangeMethod:      res.Change.Method,
		Points:            len(target.Values),
		// Empty lists, not null, when nothing was ranked.
		Ranking:  []rcRanked{},
		Baseline: []rcBaro{},
	}
	group := func(r *rca.Ranked) string {
		if req.group == nil {
			return r.Join.Host
		}
		var b strings.Builder
		for _, g := range req.group {
			b.WriteString(r.Labels[g])
			b.WriteByte(0)
		}
		return b.String()
	}
	// best[node][group] is the highest-scoring candidate of node in group.
	best := map[string]map[string]*rca.Ranked{}
	for i := range res.Ranking {
		r := &res.Ranking[i]
		if r.Node == "" {
			continue
		}
		if best[r.Node] == nil {
			best[r.Node] = map[string]*rca.Ranked{}
		}
		if b := best[r.Node][group(r)]; b == nil || r.Score > b.Score {
			best[r.Node][group(r)] = r
		}
	}
	for i := range res.Ranking {
		r := &res.Ranking[i]
		it := rcRanked{
			Candidate: r.Name, Score: rcNum(r.Score), PAdjusted: rcNum(r.QValue), Rank: r.Rank,
			Node: r.Node, Family: r.Family, BAROScore: rcNum(r.BARO), Shift: rcNum(r.Shift), PValue: rcNum(r.PValue),
			Anomalous: r.Anomalous, ExplainedBy: r.Explained, Parents: r.Parents, Labels: r.Labels,
			Stage: h.stageOf(r, func(node string) *rca.Ranked { return best[node][group(r)] }),
			Host: r.Join.Host, JoinedBy: r.Join.How, Precedes: r.Precedes, Informative: r.Informative,
			GrangerQ: rcNum(r.GrangerQ), Bypassed: r.Bypassed, Reason: r.Reason,
		}
		if req.maxLag > 0 {
			x := causal.Series{Name: r.Name, Values: cands[byName[r.Name]].Values}
			if cc, err := causal.PrewhitenedCCF(x, target, req.maxLag, -1); err == nil {
				lag := cc.BestLag
				it.Lag = &lag
			}
		}
		d.Ranking = append(d.Ranking, it)
	}
	for i, b := range res.Baseline {
		d.Baseline = append(d.Baseline, rcBaro{Candidate: b.Name, Score: rcNum(b.Score), Rank: i + 1})
	}

	// The graph: every serving-graph node, the target, and the edges, with
	// the candidates of the top-ranked candidate's group.
	topGroup := ""
	if len(res.Ranking) > 0 {
		topGroup = group(&res.Ranking[0])
	}
	rep := func(node string) *rca.Ranked {
		if r := best[node][topGroup]; r != nil {
			return r
		}
		var out *rca.Ranked
		for _, r := range best[node] {
			if out == nil || r.Score > out.Score {
				out = r
			}
		}
		return out
	}
	counts := map[string]int{}
	for _, c := range res.Ranking {
		counts[c.Node]++
	}
	d.Graph.Nodes = append(d.Graph.Nodes, rcNode{ID: "target", Title: target.Name, Kind: "target", Score: rcNum(math.NaN())})
	for _, n := range h.graph.Nodes {
		score := math.NaN()
		if r := rep(n.Name); r != nil {
			score = r.Score
		}
		d.Graph.Nodes = append(d.Graph.Nodes, rcNode{ID: n.Name, Title: n.Title, Kind: rcKinds[n.Family], Score: rcNum(score), Candidates: counts[n.Name]})
	}
	for _, e := range h.graph.Edges {
		w := math.NaN()
		a, b := rep(e.From), rep(e.To)
		if a != nil && b != nil {
			if r, ok := rca.Correlation(cands[byName[a.Name]].Values, cands[byName[b.Name]].Values); ok {
				w = math.Abs(r)
			}
		}
		d.Graph.Edges = append(d.Graph.Edges, rcEdge{Source: e.From, Target: e.To, Weight: rcNum(w), PAdjusted: rcNum(math.NaN())})
	}
	if n, ok := rca.NodeFor(rcFamily(req.target), nil); ok {
		d.Graph.Edges = append(d.Graph.Edges, rcEdge{Source: n, Target: "target", Weight: rcNum(1), PAdjusted: rcNum(math.NaN())})
	}
	return d
}

// stageOf is the canonical stage candidate r acts on: its own node if that
// is one, else among the nearest stages downstream of it (direct children
// first, then grandchildren, …) the one whose candidate in r's group scores
// highest, else "".
func (h *rootCause) stageOf(r *rca.Ranked, inGroup func(string) *rca.Ranked) string {
	if rcStages[r.Node] {
		return r.Node
	}
	if r.Node == "" {
		return ""
	}
	seen := map[string]bool{r.Node: true}
	level := []string{r.Node}
	for len(level) > 0 {
		var next []string
		stage, score := "", math.Inf(-1)
		for _, n := range level {
			for _, c := range h.graph.Children(n) {
				if seen[c] {
					continue
				}
				seen[c] = true
				next = append(next, c)
				if !rcStages[c] {
					continue
				}
				s := math.Inf(-1)
				if x := inGroup(c); x != nil {
					s = x.Score
				}
				if stage == "" || s > score {
					stage, score = c, s
				}
			}
		}
		if stage != "" {
			return stage
		}
		level = next
	}
	return ""
}
