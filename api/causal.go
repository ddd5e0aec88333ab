package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query/causalfn"
)

// NewCausalHandler serves GET/POST /api/v1/attribution/causal: the effect
// of a treatment series on an outcome series over a window
// (grafana-plugin/CONTRACT.md).
//
// Parameters: outcome, treatment (PromQL, one series each), confounder
// (repeatable), method = backdoor | granger | ccf, max_lag (steps, 10),
// level (0.95), start, end, step (15s). The expressions are evaluated as
// range queries on the start/end/step grid and analysed by causalfn.Effect;
// only steps where every series has a value are used, and the answer says
// how many (n).
//
//   - backdoor: OLS outcome ~ 1 + treatment + confounders with Newey–West
//     errors (causal.BackdoorEffect); effect is the treatment coefficient,
//     lower/upper effect ∓ z_{(1+level)/2}·se, p its two-sided p-value; the
//     counterfactual is the outcome had the treatment stayed at its mean
//     over the first quarter of the window (causalfn.BaselineShare).
//   - granger: the F-test at the lag AIC picks (causalfn.GrangerBest, as
//     granger() does, with the confounders as conditioning series);
//     effect is F, lower/upper null. Like ccf it needs aligned points
//     without a hole (422 naming the gap otherwise).
//   - ccf: prewhitened lagged correlation (causal.PrewhitenedCCF); effect is
//     the correlation at the best lag with its Fisher interval (95% only:
//     another level is refused).
func NewCausalHandler(engine promql.QueryEngine, q storage.Queryable) http.Handler {
	return &causalHandler{rc: &rootCause{engine: engine, q: q}}
}

type causalHandler struct{ rc *rootCause }

type causalRequest struct {
	outcome, treatment string
	confounders        []string
	method             string
	maxLag             int
	level              float64
	grid               rcRequest
}

type causalData struct {
	Method         string                `json:"method"`
	Effect         rcNum                 `json:"effect"`
	Lower          *rcNum                `json:"lower"`
	Upper          *rcNum                `json:"upper"`
	Level          float64               `json:"level"`
	P              rcNum                 `json:"p"`
	Lag            int                   `json:"lag"`
	N              int                   `json:"n"`
	Counterfactual *causalCounterfactual `json:"counterfactual,omitempty"`
}

type causalCounterfactual struct {
	Timestamps     []int64 `json:"timestamps"`
	Observed       []rcNum `json:"observed"`
	Counterfactual []rcNum `json:"counterfactual"`
}

func (h *causalHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "bad_data", "method "+r.Method+" not allowed: use GET or POST")
		return
	}
	req, aerr := parseCausal(r)
	if aerr == nil {
		var data *causalData
		data, aerr = h.run(r.Context(), req)
		if aerr == nil {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(struct {
				Status string      `json:"status"`
				Data   *causalData `json:"data"`
			}{"success", data})
			return
		}
	}
	writeError(w, aerr.code, aerr.typ, aerr.Error())
}

func parseCausal(r *http.Request) (*causalRequest, *rcError) {
	if err := r.ParseForm(); err != nil {
		return nil, rcBadData("parse form: %v", err)
	}
	req := &causalRequest{
		outcome:     r.Form.Get("outcome"),
		treatment:   r.Form.Get("treatment"),
		confounders: r.Form["confounder"],
		method:      r.Form.Get("method"),
		maxLag:      10,
		level:       0.95,
	}
	if req.outcome == "" || req.treatment == "" {
		return nil, rcBadData("outcome and treatment are required PromQL expressions")
	}
	switch req.method {
	case "":
		req.method = "backdoor"
	case "backdoor", "granger", "ccf":
	default:
		return nil, rcBadData("method %q: want backdoor, granger or ccf", req.method)
	}
	if v := r.Form.Get("max_lag"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return nil, rcBadData("max_lag %q: want an integer in [1, 100]", v)
		}
		req.maxLag = n
	}
	if v := r.Form.Get("level"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f < 1) {
			return nil, rcBadData("level %q: want a number in (0, 1)", v)
		}
		req.level = f
	}
	if req.method == "ccf" && math.Abs(req.level-0.95) > 1e-12 {
		return nil, rcBadData("level %g: the ccf interval is the 95%% Fisher interval only", req.level)
	}
	start, err := rcParseTime(r.Form.Get("start"), "start")
	if err != nil {
		return nil, rcBadData("%v", err)
	}
	end, err := rcParseTime(r.Form.Get("end"), "end")
	if err != nil {
		return nil, rcBadData("%v", err)
	}
	if !end.After(start) {
		return nil, rcBadData("end %s is not after start %s", end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	step := 15 * time.Second
	if v := r.Form.Get("step"); v != "" {
		if step, err = rcParseDuration(v); err != nil || step <= 0 {
			return nil, rcBadData("step %q: want a positive duration or number of seconds", v)
		}
	}
	if n := end.Sub(start) / step; n > 11000 {
		return nil, rcBadData("window of %d steps is over the limit of 11000: raise step", n)
	}
	req.grid = rcRequest{start: start, end: end, step: step}
	return req, nil
}

// one evaluates expr on the grid and requires exactly one series.
func (h *causalHandler) one(ctx context.Context, req *causalRequest, what, expr string) (causalfn.Input, *rcError) {
	m, aerr := h.rc.load(ctx, &req.grid, what, expr)
	if aerr != nil {
		return causalfn.Input{}, aerr
	}
	if len(m) != 1 {
		return causalfn.Input{}, &rcError{http.StatusUnprocessableEntity, "execution", fmt.Errorf("%s %q returned %d series, want exactly one (aggregate it, e.g. avg(...))", what, expr, len(m))}
	}
	return m[0], nil
}

// run loads the series and runs causalfn.Effect, the implementation the
// PromQL functions share: alignment on common points, lagged methods
// refused across holes, Granger's lag by AIC.
func (h *causalHandler) run(ctx context.Context, req *causalRequest) (*causalData, *rcError) {
	er := causalfn.EffectRequest{Method: req.method, MaxLag: req.maxLag, Level: req.level}
	var aerr *rcError
	if er.Outcome, aerr = h.one(ctx, req, "outcome", req.outcome); aerr != nil {
		return nil, aerr
	}
	if er.Treatment, aerr = h.one(ctx, req, "treatment", req.treatment); aerr != nil {
		return nil, aerr
	}
	for i, c := range req.confounders {
		z, aerr := h.one(ctx, req, fmt.Sprintf("confounder %d", i+1), c)
		if aerr != nil {
			return nil, aerr
		}
		er.Confounders = append(er.Confounders, z)
	}
	e, err := causalfn.Effect(er)
	if err != nil {
		return nil, &rcError{http.StatusUnprocessableEntity, "execution", fmt.Errorf("%s: %w", req.method, err)}
	}
	d := &causalData{Method: req.method, Level: req.level, N: e.N, Effect: rcNum(e.Effect), P: rcNum(e.P), Lag: e.Lag}
	if e.Lower != nil {
		lo, hi := rcNum(*e.Lower), rcNum(*e.Upper)
		d.Lower, d.Upper = &lo, &hi
	}
	if e.Counterfactual != nil {
		c := &causalCounterfactual{Timestamps: make([]int64, len(e.T)), Observed: make([]rcNum, len(e.T)), Counterfactual: make([]rcNum, len(e.T))}
		for i, t := range e.T {
			c.Timestamps[i] = t / 1000
			c.Observed[i] = rcNum(e.Observed[i])
			c.Counterfactual[i] = rcNum(e.Counterfactual[i])
		}
		d.Counterfactual = c
	}
	return d, nil
}
