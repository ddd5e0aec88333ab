package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/internal/httpapi"
	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb/records"
)

// decompose checks the request's method and metric (parameters), runs
// tailfn.Decompose, or over the cluster Cluster.Decompose (parameters
// local and partial_response), and gives its errors their HTTP status: no
// requests and a statistic that cannot answer are 422, a peer that does
// not answer 502, a failure to load or evaluate 500.
func (a *Attribution) decompose(r *http.Request, req tailfn.DecomposeRequest) (tailfn.Decomposition, error) {
	if !slices.Contains(tailfn.DecomposeMethods, req.Method) {
		return tailfn.Decomposition{}, httpapi.BadData("parameter method=%q: want one of %s", req.Method, strings.Join(tailfn.DecomposeMethods, ", "))
	}
	if req.Metric != "e2e" && req.Metric != "ttft" {
		return tailfn.Decomposition{}, httpapi.BadData("parameter metric=%q: want e2e or ttft", req.Metric)
	}
	cl, ctx, err := a.nodesOf(r)
	if err != nil {
		return tailfn.Decomposition{}, err
	}
	var d tailfn.Decomposition
	if cl != nil {
		d, err = cl.Decompose(ctx, a.fallback, req)
	} else {
		d, err = tailfn.Decompose(ctx, a.src, a.fallback, req)
		d.Nodes = a.localNodes()
	}
	if err := peerFailure(err); err != nil {
		return d, err
	}
	if errors.Is(err, tailfn.ErrNoRequests) || errors.Is(err, tailfn.ErrUnanswerable) {
		return d, httpapi.Unprocessable(err)
	}
	return d, err
}

// breakdownStage is one stage of a breakdown response.
type breakdownStage struct {
	Stage               string          `json:"stage"`
	ContributionSeconds httpapi.Number  `json:"contribution_seconds"`
	Share               httpapi.Number  `json:"share"`
	LowerSeconds        *httpapi.Number `json:"lower_seconds"`
	UpperSeconds        *httpapi.Number `json:"upper_seconds"`
}

type heatRow struct {
	Band        string           `json:"band"`
	FromSeconds httpapi.Number   `json:"from_seconds"`
	ToSeconds   httpapi.Number   `json:"to_seconds"`
	Requests    int              `json:"requests"`
	MeanSeconds httpapi.Number   `json:"mean_seconds"`
	StageMeans  []httpapi.Number `json:"stage_means"`
	TopStage    string           `json:"top_stage"`
	TopShare    httpapi.Number   `json:"top_share"`
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
	QuantileSeconds httpapi.Number   `json:"quantile_seconds"`
	TargetSeconds   httpapi.Number   `json:"target_seconds"`
	ResidualSeconds httpapi.Number   `json:"residual_seconds"`
	Window          windowSeconds    `json:"window"`
	Requests        int              `json:"requests"`
	Stages          []breakdownStage `json:"stages"`
	Heat            *heatData        `json:"heat,omitempty"`
	Tokens          *tokensData      `json:"tokens,omitempty"`
	Nodes           nodesData        `json:"nodes"`
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
		row := breakdownStage{Stage: st, ContributionSeconds: httpapi.Number(b.Contrib[j]), Share: httpapi.Number(share)}
		if b.Lower != nil && !math.IsNaN(b.Lower[j]) {
			lo, hi := httpapi.Number(b.Lower[j]), httpapi.Number(b.Upper[j])
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
		means := make([]httpapi.Number, len(r.StageMean))
		for j, m := range r.StageMean {
			means[j] = httpapi.Number(m)
		}
		out.Rows[i] = heatRow{
			Band: r.Band.String(), FromSeconds: httpapi.Number(r.From), ToSeconds: httpapi.Number(r.To), Requests: r.Count,
			MeanSeconds: httpapi.Number(r.MeanS), StageMeans: means, TopStage: r.TopStage, TopShare: httpapi.Number(r.TopShare),
		}
	}
	return out
}

// breakdown serves GET /api/v1/attribution/breakdown (grafana-plugin/CONTRACT.md).
func (a *Attribution) breakdown(w http.ResponseWriter, r *http.Request) {
	data, warnings, err := a.breakdownData(r)
	if err != nil {
		httpapi.WriteErr(w, err)
		return
	}
	httpapi.WriteData(w, data, warnings...)
}

func (a *Attribution) breakdownData(r *http.Request) (*breakdownData, []string, error) {
	ms, _, err := a.selectorParam(r, "selector", false)
	if err != nil {
		return nil, nil, err
	}
	p, err := levelParam(r, "quantile", attribution.DefaultP)
	if err != nil {
		return nil, nil, err
	}
	start, err := httpapi.TimeParam(r, "start", time.Time{}, true)
	if err != nil {
		return nil, nil, err
	}
	end, err := httpapi.TimeParam(r, "end", time.Time{}, true)
	if err != nil {
		return nil, nil, err
	}
	win, err := window(ms, start, end)
	if err != nil {
		return nil, nil, err
	}
	req := tailfn.DecomposeRequest{Window: win, Metric: or(r.FormValue("metric"), "e2e"), P: p, Method: or(r.FormValue("method"), "auto")}
	if req.Method == "shapley" {
		if req.Baseline, err = baselineParam(r, ms, win); err != nil {
			return nil, nil, err
		}
	}
	view := or(r.FormValue("view"), "stages")
	var tokens *tailfn.TokenHeat
	switch view {
	case "stages":
	case "heat":
		req.Heat = true
	case "tokens":
		tokens = tailfn.NewTokenHeat()
		req.Visit = tokens.Visit
	default:
		return nil, nil, httpapi.BadData("parameter view=%q: want stages, heat or tokens", view)
	}
	d, err := a.decompose(r, req)
	if err != nil {
		return nil, nil, err
	}
	out := &breakdownData{
		Method: d.Breakdown.Method.String(), Kind: d.Breakdown.Kind.String(), Metric: req.Metric, Quantile: p,
		QuantileSeconds: httpapi.Number(d.Breakdown.Quantile), TargetSeconds: httpapi.Number(d.Breakdown.Target), ResidualSeconds: httpapi.Number(d.Breakdown.Residual),
		Window: windowSeconds{unixSeconds(start), unixSeconds(end)}, Requests: d.Requests,
		Stages: stagesOf(d.Breakdown), Heat: heatOf(d.Heat), Nodes: nodesJSON(d.Nodes),
	}
	if tokens != nil {
		out.Tokens = &tokensData{PositionEdges: tokens.PositionEdges, LatencyEdges: tailfn.TokenLatencyEdges, Counts: tokens.Counts}
		if tokens.SummaryOnly > 0 {
			d.Warnings = append(d.Warnings, fmt.Sprintf("%d requests kept only an inter-token latency summary (more than %d tokens) and are not in the token heat map", tokens.SummaryOnly, records.MaxITLValues))
		}
		if tokens.Outside > 0 {
			d.Warnings = append(d.Warnings, fmt.Sprintf("%d inter-token gaps fell outside the heat map's edges", tokens.Outside))
		}
	}
	return out, d.Warnings, nil
}

type abData struct {
	Quantile  float64        `json:"quantile"`
	A         httpapi.Number `json:"a"`
	B         httpapi.Number `json:"b"`
	Diff      httpapi.Number `json:"diff"`
	Lower     httpapi.Number `json:"lower"`
	Upper     httpapi.Number `json:"upper"`
	Level     float64        `json:"level"`
	Method    string         `json:"method"`
	Metric    string         `json:"metric"`
	ARequests int            `json:"a_requests"`
	BRequests int            `json:"b_requests"`
	Nodes     nodesData      `json:"nodes"`
}

// ab serves GET /api/v1/attribution/ab: P_p(b) − P_p(a) with its interval.
func (a *Attribution) ab(w http.ResponseWriter, r *http.Request) {
	data, warnings, err := a.abData(r)
	if err != nil {
		httpapi.WriteErr(w, err)
		return
	}
	httpapi.WriteData(w, data, warnings...)
}

func (a *Attribution) abData(r *http.Request) (*abData, []string, error) {
	ma, _, err := a.selectorParam(r, "a", true)
	if err != nil {
		return nil, nil, err
	}
	mb, _, err := a.selectorParam(r, "b", true)
	if err != nil {
		return nil, nil, err
	}
	p, err := levelParam(r, "quantile", attribution.DefaultP)
	if err != nil {
		return nil, nil, err
	}
	level, err := levelParam(r, "level", 0.95)
	if err != nil {
		return nil, nil, err
	}
	method, err := tailfn.ParseCIMethod(or(r.FormValue("ci_method"), tailfn.DefaultCIMethod))
	if err != nil {
		return nil, nil, httpapi.BadData("parameter ci_method: %v", err)
	}
	metric := or(r.FormValue("metric"), "e2e")
	if metric != "e2e" && metric != "ttft" {
		return nil, nil, httpapi.BadData("parameter metric=%q: want e2e or ttft", metric)
	}
	start, err := httpapi.TimeParam(r, "start", time.Time{}, true)
	if err != nil {
		return nil, nil, err
	}
	end, err := httpapi.TimeParam(r, "end", time.Time{}, true)
	if err != nil {
		return nil, nil, err
	}
	wa, err := window(ma, start, end)
	if err != nil {
		return nil, nil, err
	}
	wb, err := window(mb, start, end)
	if err != nil {
		return nil, nil, err
	}
	cl, ctx, err := a.nodesOf(r)
	if err != nil {
		return nil, nil, err
	}
	opts := attribution.CIOptions{Method: method, Seed: tailfn.BootstrapSeed}
	var warnings []string
	if cl != nil {
		qd, err := cl.QuantileDiff(ctx, wa, wb, metric, p, level, opts)
		if err := peerFailure(err); err != nil {
			return nil, nil, err
		}
		switch {
		case errors.Is(err, tailfn.ErrNoRequests):
			return nil, nil, errNoRequests
		case errors.Is(err, attribution.ErrInvalidMethod):
			return nil, nil, httpapi.BadData("parameter ci_method: %v", err)
		case errors.Is(err, tailfn.ErrUnanswerable):
			return nil, nil, httpapi.Unprocessable(err)
		case err != nil:
			return nil, nil, err
		}
		iv := qd.Interval
		return &abData{
			Quantile: p, A: httpapi.Number(qd.A), B: httpapi.Number(qd.B),
			Diff: httpapi.Number(iv.Estimate), Lower: httpapi.Number(iv.Lower), Upper: httpapi.Number(iv.Upper), Level: level,
			Method: iv.Method.String(), Metric: metric, ARequests: qd.NA, BRequests: qd.NB, Nodes: nodesJSON(qd.Nodes),
		}, append(warnings, qd.Warnings...), nil
	}
	values := func(win tailfn.Window) ([]float64, error) {
		if a.src == nil {
			return nil, nil
		}
		pop, err := tailfn.Load(ctx, a.src, win, nil)
		if err != nil {
			return nil, err
		}
		if metric == "ttft" {
			// The requests that have one, as over the peers.
			if pop, err = pop.WithTTFT(); err != nil {
				return nil, err
			}
		}
		x, _ := pop.Field(metric)
		return x, nil
	}
	xa, err := values(wa)
	if err != nil {
		return nil, nil, err
	}
	xb, err := values(wb)
	if err != nil {
		return nil, nil, err
	}
	if len(xa) == 0 || len(xb) == 0 {
		return nil, nil, errNoRequests
	}
	iv, err := attribution.QuantileDiffCI(xb, xa, p, level, opts)
	if errors.Is(err, attribution.ErrInvalidMethod) {
		// A method below its nominal coverage at this p and n is refused,
		// never answered: the error names method, p and n.
		return nil, nil, httpapi.BadData("parameter ci_method: %v", err)
	}
	if err != nil {
		return nil, nil, httpapi.Unprocessable(err)
	}
	return &abData{
		Quantile: p, A: httpapi.Number(attribution.Quantile(xa, p)), B: httpapi.Number(attribution.Quantile(xb, p)),
		Diff: httpapi.Number(iv.Estimate), Lower: httpapi.Number(iv.Lower), Upper: httpapi.Number(iv.Upper), Level: level,
		Method: iv.Method.String(), Metric: metric, ARequests: len(xa), BRequests: len(xb), Nodes: nodesJSON(a.localNodes()),
	}, warnings, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
