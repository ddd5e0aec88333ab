package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/query/causalfn"
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
	// Candidates are evaluated when a request names none. nil = discover
	// them from what is stored in the window (causalfn.Discover).
	Candidates []CandidateQuery
	// Metadata gives metric families' types for discovery (a
	// *tsdb.MetadataStore); nil = read types from names.
	Metadata MetadataGetter
}

// MetadataGetter is the metadata store's lookup (tsdb.MetadataStore.Get).
type MetadataGetter interface {
	Get(metric string, limit, limitPerMetric int) map[string][]metadata.Metadata
}

// CandidateQuery is a PromQL expression whose series are root-cause
// candidates (causalfn.CandidateQuery).
type CandidateQuery = causalfn.CandidateQuery

// DefaultRootCauseCandidates is a fixed candidate set (the default before
// candidates were discovered from what is stored): per instance, the vLLM,
// tailroot-agent and dcgm-exporter series the
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
// discovered from the stored metric families, causalfn.Discover); start, end (Unix seconds or RFC 3339,
// required); step (duration or seconds, default 15s); change_at (Unix
// seconds; detected when absent); alpha (false discovery rate, default
// 0.05); max_lag (steps searched for each candidate's lead over the target
// by prewhitened cross-correlation, 0–100, default 10); group (comma-
// separated labels linking candidates of one server; default: join by host,
// rca.JoinHosts); direction (up, down or both: the target's harmful
// direction; default the target's direction label, else inferred from its
// name, unit and help, causalfn.TargetDirection).
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
	direction  rca.Direction
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
		req.candidates = h.opts.Candidates // nil: discovered in run
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
	if s := f.Get("direction"); s != "" {
		if req.direction, err = rca.ParseDirection(s); err != nil {
			return nil, rcBadData("parameter direction %q: want up (a rise is the incident: latency, errors, queues), down (a fall: throughput) or both", s)
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

// load evaluates expr on the request grid (causalfn.LoadRange) and maps its
// errors onto the API's.
func (h *rootCause) load(ctx context.Context, req *rcRequest, what, expr string) ([]causalfn.Input, *rcError) {
	in, err := causalfn.LoadRange(ctx, h.engine, h.q, what, expr, req.start, req.end, req.step)
	if err == nil {
		return in, nil
	}
	var qe *causalfn.QueryError
	if errors.As(err, &qe) {
		switch qe.Kind {
		case causalfn.KindBadData:
			return nil, &rcError{http.StatusBadRequest, "bad_data", err}
		case causalfn.KindTimeout, causalfn.KindCanceled:
			return nil, &rcError{http.StatusServiceUnavailable, qe.Kind, err}
		}
	}
	return nil, &rcError{http.StatusUnprocessableEntity, "execution", err}
}

// run loads the target and the candidates and ranks them with
// causalfn.RootCause, the implementation root_cause uses.
func (h *rootCause) run(ctx context.Context, req *rcRequest) (*rcData, []string, *rcError) {
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	tm, aerr := h.load(ctx, req, "target", req.target)
	if aerr != nil {
		return nil, nil, aerr
	}
	if len(tm) != 1 {
		return nil, nil, rcBadData("target %q has %d series in the window, want 1: aggregate it, e.g. max(…) or histogram_quantile(0.99, sum by (le) (…))", req.target, len(tm))
	}
	var warnings []string
	queries := req.candidates
	if queries == nil {
		do := causalfn.DiscoverOptions{}
		if md := h.opts.Metadata; md != nil {
			do.Types = func(fam string) string {
				for _, m := range md.Get(fam, 1, 1)[fam] {
					return string(m.Type)
				}
				return ""
			}
		}
		var notes []string
		var err error
		if queries, notes, err = causalfn.Discover(ctx, h.q, req.start, req.end, do); err != nil {
			return nil, nil, &rcError{http.StatusUnprocessableEntity, "execution", err}
		}
		warnings = append(warnings, notes...)
	}
	var cands []causalfn.Input
	for _, cq := range queries {
		m, aerr := h.load(ctx, req, "candidates", cq.Query)
		if aerr != nil {
			return nil, nil, aerr
		}
		for _, in := range m {
			if cq.Metric != "" {
				in.Family = cq.Metric
			}
			in.Node = cq.Node
			cands = append(cands, in)
		}
	}
	opts := causalfn.RootCauseOptions{Rank: rca.Options{Alpha: req.alpha, GroupLabels: req.group, Direction: req.direction}, MaxLag: req.maxLag, KeepFirstDuplicate: true}
	if md := h.opts.Metadata; md != nil && req.direction == "" {
		// The family's unit and help text help infer the harmful direction
		// of a target whose name says nothing.
		if fam := causalfn.FamilyOf(req.target); fam != "" {
			for _, m := range md.Get(fam, 1, 1)[fam] {
				opts.TargetUnit, opts.TargetHelp = m.Unit, m.Help
			}
		}
	}
	if req.changeAt != nil {
		opts.ChangeAt = req.changeAt.UnixMilli()
	}
	res, err := causalfn.RootCause(tm[0], cands, opts)
	if err != nil {
		return nil, nil, rcBadData("rank: %v", err)
	}
	return h.response(req, res), append(warnings, res.Warnings...), nil
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
	ChangeAt          rcNum `json:"change_at"`
	ChangeProbability rcNum `json:"change_probability"`
	// Verdict is "incident", "no incident" or "unexplained" (rca.Result);
	// ChangeLow and ChangeHigh bound the change time's 95 % set and
	// ChangeMethod names the method that found it.
	Verdict string `json:"verdict"`
	// VerdictReason says why, in words, and VerdictWhy in one word
	// (rca.Result.Why: root_cause's reason label); Direction is the
	// harmful direction used (the direction parameter, the target's
	// direction label, or inferred from its name and metadata).
	VerdictReason string     `json:"verdict_reason"`
	VerdictWhy    string     `json:"verdict_why"`
	Direction     string     `json:"direction"`
	ChangeLow     rcNum      `json:"change_low"`
	ChangeHigh    rcNum      `json:"change_high"`
	ChangeMethod  string     `json:"change_method"`
	Points        int        `json:"points"`
	Ranking       []rcRanked `json:"ranking"`
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

func (h *rootCause) response(req *rcRequest, res *causalfn.RootCauseResult) *rcData {
	ts := func(k int) rcNum { return rcNum(float64(res.T[k]) / 1000) }
	d := &rcData{
		ChangeAt:          ts(res.ChangePoint),
		ChangeProbability: rcNum(res.ChangeProb),
		Verdict:           res.Verdict,
		VerdictReason:     res.VerdictReason,
		VerdictWhy:        res.Why,
		Direction:         string(res.Direction),
		ChangeLow:         ts(res.Change.Low),
		ChangeHigh:        ts(res.Change.High),
		ChangeMethod:      res.Change.Method,
		Points:            len(res.Target.Values),
		// Empty lists, not null, when nothing was ranked.
		Ranking:  []rcRanked{},
		Baseline: []rcBaro{},
	}
	sum := causalfn.Summarize(res, h.graph, causalfn.GroupKey(req.group), causalfn.FamilyOf(req.target))
	for i := range res.Ranking {
		r := &res.Ranking[i]
		it := rcRanked{
			Candidate: r.Name, Score: rcNum(r.Score), PAdjusted: rcNum(r.QValue), Rank: r.Rank,
			Node: r.Node, Family: r.Family, BAROScore: rcNum(r.BARO), Shift: rcNum(r.Shift), PValue: rcNum(r.PValue),
			Anomalous: r.Anomalous, ExplainedBy: r.Explained, Parents: r.Parents, Labels: r.Labels,
			Stage: sum.Stage[r.Name],
			Host:  r.Join.Host, JoinedBy: r.Join.How, Precedes: r.Precedes, Informative: r.Informative,
			GrangerQ: rcNum(r.GrangerQ), Bypassed: r.Bypassed, Reason: r.Reason,
		}
		if lag, ok := res.Lag[r.Name]; ok {
			it.Lag = &lag
		}
		d.Ranking = append(d.Ranking, it)
	}
	for i, b := range res.Baseline {
		d.Baseline = append(d.Baseline, rcBaro{Candidate: b.Name, Score: rcNum(b.Score), Rank: i + 1})
	}
	for _, n := range sum.Nodes {
		kind := rcKinds[n.Family]
		if n.ID == "target" {
			kind = "target"
		}
		d.Graph.Nodes = append(d.Graph.Nodes, rcNode{ID: n.ID, Title: n.Title, Kind: kind, Score: rcNum(n.Score), Candidates: n.Candidates})
	}
	for _, e := range sum.Edges {
		d.Graph.Edges = append(d.Graph.Edges, rcEdge{Source: e.Source, Target: e.Target, Weight: rcNum(e.Weight), PAdjusted: rcNum(math.NaN())})
	}
	return d
}
