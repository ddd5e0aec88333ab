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
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/tailroot/tailroot/attribution/causal"
)

// NewCausalHandler serves GET/POST /api/v1/attribution/causal: the effect
// of a treatment series on an outcome series over a window
// (grafana-plugin/CONTRACT.md).
//
// Parameters: outcome, treatment (PromQL, one series each), confounder
// (repeatable), method = backdoor | granger | ccf, max_lag (steps, 10),
// level (0.95), start, end, step (15s). The expressions are evaluated as
// range queries on the start/end/step grid; only steps where every series
// has a value are used, and the answer says how many (n).
//
//   - backdoor: OLS outcome ~ 1 + treatment + confounders with Newey–West
//     errors (causal.BackdoorEffect); effect is the treatment coefficient,
//     lower/upper effect ∓ z_{(1+level)/2}·se, p its two-sided p-value; the
//     counterfactual is the outcome had the treatment stayed at its mean
//     over the first quarter of the window (causal.Counterfactual).
//   - granger: the F-test at the lag BIC picks (causal.Granger with the
//     confounders as conditioning series); effect is F, lower/upper null.
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
func (h *causalHandler) one(ctx context.Context, req *causalRequest, what, expr string) (map[int64]float64, *rcError) {
	m, aerr := h.rc.rangeQuery(ctx, &req.grid, what, expr)
	if aerr != nil {
		return nil, aerr
	}
	if len(m) != 1 {
		return nil, &rcError{http.StatusUnprocessableEntity, "execution", fmt.Errorf("%s %q returned %d series, want exactly one (aggregate it, e.g. avg(...))", what, expr, len(m))}
	}
	out := make(map[int64]float64, len(m[0].Floats))
	for _, p := range m[0].Floats {
		out[p.T] = p.F
	}
	return out, nil
}

func (h *causalHandler) run(ctx context.Context, req *causalRequest) (*causalData, *rcError) {
	y, aerr := h.one(ctx, req, "outcome", req.outcome)
	if aerr != nil {
		return nil, aerr
	}
	x, aerr := h.one(ctx, req, "treatment", req.treatment)
	if aerr != nil {
		return nil, aerr
	}
	zs := make([]map[int64]float64, len(req.confounders))
	for i, c := range req.confounders {
		if zs[i], aerr = h.one(ctx, req, fmt.Sprintf("confounder %d", i+1), c); aerr != nil {
			return nil, aerr
		}
	}
	// Align on the steps where every series has a value.
	var ts []int64
	for t := req.grid.start; !t.After(req.grid.end); t = t.Add(req.grid.step) {
		ms := t.UnixMilli()
		_, okY := y[ms]
		_, okX := x[ms]
		ok := okY && okX
		for _, z := range zs {
			_, okZ := z[ms]
			ok = ok && okZ
		}
		if ok {
			ts = append(ts, ms)
		}
	}
	col := func(name string, m map[int64]float64) causal.Series {
		s := causal.Series{Name: name, Values: make([]float64, len(ts))}
		for i, t := range ts {
			s.Values[i] = m[t]
		}
		return s
	}
	outcome, treatment := col(req.outcome, y), col(req.treatment, x)
	conf := make([]causal.Series, len(zs))
	for i, z := range zs {
		conf[i] = col(req.confounders[i], z)
	}
	exec := func(err error) *rcError {
		return &rcError{http.StatusUnprocessableEntity, "execution", fmt.Errorf("%s on %d aligned steps: %w", req.method, len(ts), err)}
	}
	d := &causalData{Method: req.method, Level: req.level, N: len(ts)}
	switch req.method {
	case "backdoor":
		e, err := causal.BackdoorEffect(outcome, treatment, conf, -1)
		if err != nil {
			return nil, exec(err)
		}
		z := distuv.UnitNormal.Quantile((1 + req.level) / 2)
		lo, hi := rcNum(e.Coef-z*e.StdErr), rcNum(e.Coef+z*e.StdErr)
		d.Effect, d.Lower, d.Upper, d.P = rcNum(e.Coef), &lo, &hi, rcNum(e.PValue)
		base := causal.Window{Start: 0, End: max(len(ts)/4, 2)}
		cf, err := causal.Counterfactual(outcome, treatment, conf, causal.Window{Start: 0, End: len(ts)}, causal.Baseline{Window: base})
		if err == nil {
			c := &causalCounterfactual{Timestamps: make([]int64, len(ts)), Observed: make([]rcNum, len(ts)), Counterfactual: make([]rcNum, len(ts))}
			for i, t := range ts {
				c.Timestamps[i] = t / 1000
				c.Observed[i] = rcNum(outcome.Values[i])
				c.Counterfactual[i] = rcNum(cf.Series[i])
			}
			d.Counterfactual = c
		}
	case "granger":
		g, err := causal.Granger(outcome, treatment, conf, req.maxLag)
		if err != nil {
			return nil, exec(err)
		}
		best := g.Tests[g.BestBIC-1]
		d.Effect, d.P, d.Lag = rcNum(best.F), rcNum(best.PValue), best.Lag
	case "ccf":
		c, err := causal.PrewhitenedCCF(treatment, outcome, req.maxLag, causal.DefaultAROrder(len(ts)))
		if err != nil {
			return nil, exec(err)
		}
		lo, hi := rcNum(c.Lower), rcNum(c.Upper)
		d.Effect, d.Lower, d.Upper, d.Lag = rcNum(c.BestCorr), &lo, &hi, c.BestLag
		// Two-sided p-value of r at the best lag from the Fisher transform,
		// on the same N as the interval.
		n := 0
		for i, l := range c.Lags {
			if l == c.BestLag {
				n = c.N[i]
			}
		}
		if n > 3 {
			zr := math.Atanh(c.BestCorr) * math.Sqrt(float64(n-3))
			d.P = rcNum(2 * distuv.UnitNormal.Survival(math.Abs(zr)))
		} else {
			d.P = rcNum(math.NaN())
		}
	}
	return d, nil
}
