package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/sim"
	"github.com/tailroot/tailroot/tsdb"
)

// rcFixture is a TSDB holding one simulated incident, and the handler over
// it.
type rcFixture struct {
	inc     *sim.Incident
	handler http.Handler
}

func newRCFixture(t *testing.T, fault sim.FaultKind) *rcFixture {
	t.Helper()
	inc, err := sim.Scenario{Fault: fault, Instance: 1, Seed: 21}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	app := db.AppenderV2(context.Background())
	for _, s := range inc.Series {
		for _, x := range s.Samples {
			if _, err := app.Append(0, s.Labels, 0, x.T, x.V, nil, nil, storage.AOptions{}); err != nil {
				t.Fatalf("append %s: %v", s.Labels, err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), query.NewRegistry(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	return &rcFixture{inc: inc, handler: NewRootCauseHandler(ng, db, RootCauseOptions{Candidates: DefaultRootCauseCandidates()})}
}

// rcAnswer mirrors the contract's rootcause answer.
type rcAnswer struct {
	Status    string   `json:"status"`
	ErrorType string   `json:"errorType"`
	Error     string   `json:"error"`
	Warnings  []string `json:"warnings"`
	Data      struct {
		ChangeAt      *float64 `json:"change_at"`
		Verdict       string   `json:"verdict"`
		VerdictReason string   `json:"verdict_reason"`
		VerdictWhy    string   `json:"verdict_why"`
		Direction     string   `json:"direction"`
		Ranking       []struct {
			Candidate string   `json:"candidate"`
			Score     *float64 `json:"score"`
			PAdjusted *float64 `json:"p_adjusted"`
			Lag       *int     `json:"lag"`
			Stage     string   `json:"stage"`
			Rank      int      `json:"rank"`
			Node      string   `json:"node"`
			Anomalous bool     `json:"anomalous"`
		} `json:"ranking"`
		Baseline []struct {
			Candidate string `json:"candidate"`
		} `json:"baseline"`
		Graph struct {
			Nodes []struct {
				ID    string   `json:"id"`
				Kind  string   `json:"kind"`
				Score *float64 `json:"score"`
			} `json:"nodes"`
			Edges []struct {
				Source string   `json:"source"`
				Target string   `json:"target"`
				Weight *float64 `json:"weight"`
			} `json:"edges"`
		} `json:"graph"`
	} `json:"data"`
}

func (f *rcFixture) do(t *testing.T, method string, form url.Values) (int, rcAnswer) {
	t.Helper()
	var req *http.Request
	if method == http.MethodPost {
		req = httptest.NewRequest(method, "/api/v1/attribution/rootcause", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, "/api/v1/attribution/rootcause?"+form.Encode(), nil)
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	var a rcAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	return rec.Code, a
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64) }

// TestRootCauseEndpoint posts the incident's symptom (the model's mean TTFT)
// with the default candidate set and expects the throttled GPU's SM clock
// on top, explained stages below it, and a graph the plugin can draw.
func TestRootCauseEndpoint(t *testing.T) {
	f := newRCFixture(t, sim.FaultGPUThrottle)
	tr := f.inc.Truth
	form := url.Values{
		"target": {f.inc.ModelMean("vllm:time_to_first_token_seconds").Query},
		"start":  {unix(tr.WindowStart.Add(time.Minute))},
		"end":    {unix(tr.WindowEnd)},
		"step":   {"15s"},
	}
	code, a := f.do(t, http.MethodPost, form)
	if code != http.StatusOK || a.Status != "success" {
		t.Fatalf("status %d %s: %s", code, a.Status, a.Error)
	}
	rk := a.Data.Ranking
	if len(rk) != 52 {
		t.Errorf("%d candidates ranked, want 26 per instance × 2", len(rk))
	}
	if rk[0].Candidate != tr.RootCause.Signal || rk[0].Node != "gpu_clock" || !rk[0].Anomalous || rk[0].Rank != 1 {
		t.Fatalf("first %+v, want %s", rk[0], tr.RootCause.Signal)
	}
	if rk[0].Stage != "prefill" && rk[0].Stage != "decode" {
		t.Errorf("the SM clock acts on stage %q, want prefill or decode", rk[0].Stage)
	}
	if rk[0].Score == nil || rk[0].PAdjusted == nil || *rk[0].PAdjusted > 0.05 {
		t.Errorf("score %v p_adjusted %v", rk[0].Score, rk[0].PAdjusted)
	}
	if a.Data.ChangeAt == nil || *a.Data.ChangeAt < float64(tr.Start.Unix()-60) || *a.Data.ChangeAt > float64(tr.Start.Unix()+60) {
		t.Errorf("change_at %v, fault started at %d", a.Data.ChangeAt, tr.Start.Unix())
	}
	if len(a.Data.Baseline) != len(rk) || a.Data.Baseline[0].Candidate == tr.RootCause.Signal {
		t.Errorf("baseline: %d entries, first %q (plain BARO ranks an effect first here)", len(a.Data.Baseline), a.Data.Baseline[0].Candidate)
	}
	nodes := map[string]string{}
	for _, n := range a.Data.Graph.Nodes {
		nodes[n.ID] = n.Kind
	}
	if nodes["target"] != "target" || nodes["gpu_clock"] != "gpu" || nodes["runqueue"] != "kernel" || nodes["queue"] != "stage" || nodes["batch"] != "serving" {
		t.Errorf("node kinds %v", nodes)
	}
	toTarget := false
	for _, e := range a.Data.Graph.Edges {
		if nodes[e.Source] == "" || nodes[e.Target] == "" {
			t.Errorf("edge %s → %s names a missing node", e.Source, e.Target)
		}
		if e.Target == "target" && e.Source == "ttft" {
			toTarget = true
		}
	}
	if !toTarget {
		t.Error("no edge from the target's node (ttft) to the target")
	}

	// GET with an explicit selector as the candidates and a given change.
	form.Set("candidates", `{__name__=~"DCGM_FI_DEV_SM_CLOCK|vllm:num_requests_running", instance="`+tr.Instance+`"}`)
	form.Set("change_at", unix(tr.Start))
	form.Set("max_lag", "0")
	code, a = f.do(t, http.MethodGet, form)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, a.Error)
	}
	if len(a.Data.Ranking) != 2 || a.Data.Ranking[0].Node != "gpu_clock" || a.Data.Ranking[0].Lag != nil {
		t.Errorf("selector candidates: %+v", a.Data.Ranking)
	}
	if got := *a.Data.ChangeAt; got != float64(tr.Start.Unix()) {
		t.Errorf("change_at %v, want the given %d", got, tr.Start.Unix())
	}

	// Candidates that select nothing: 200 with empty lists, not null.
	form.Set("candidates", "no_such_metric")
	req := httptest.NewRequest(http.MethodGet, "/api/v1/attribution/rootcause?"+form.Encode(), nil)
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"ranking":[]`) || !strings.Contains(rec.Body.String(), `"baseline":[]`) {
		t.Errorf("no candidates: %d %s", rec.Code, rec.Body.String()[:min(300, rec.Body.Len())])
	}
}

func TestRootCauseBadRequests(t *testing.T) {
	f := newRCFixture(t, sim.FaultLoadSurge)
	tr := f.inc.Truth
	ok := func() url.Values {
		return url.Values{
			"target": {f.inc.ModelMean("vllm:e2e_request_latency_seconds").Query},
			"start":  {unix(tr.WindowStart.Add(time.Minute))},
			"end":    {unix(tr.WindowEnd)},
		}
	}
	with := func(k, v string) url.Values {
		f := ok()
		if v == "" {
			f.Del(k)
		} else {
			f.Set(k, v)
		}
		return f
	}
	for _, c := range []struct {
		name   string
		form   url.Values
		code   int
		typ    string
		substr string
	}{
		{"no target", with("target", ""), 400, "bad_data", "parameter target is required"},
		{"no start", with("start", ""), 400, "bad_data", "parameter start is required"},
		{"bad end", with("end", "tomorrow"), 400, "bad_data", `parameter end "tomorrow"`},
		{"end before start", with("end", unix(tr.WindowStart)), 400, "bad_data", "is not after start"},
		{"bad step", with("step", "fast"), 400, "bad_data", `parameter step "fast"`},
		{"too many points", with("step", "0.1"), 400, "bad_data", "over the limit of 11000"},
		{"unparsable target", with("target", "sum(rate(x[1m])"), 400, "bad_data", "target"},
		{"target with many series", with("target", "vllm:num_requests_running"), 400, "bad_data", "want 1"},
		{"unparsable candidates", with("candidates", "{"), 400, "bad_data", "candidates"},
		{"change_at outside", with("change_at", unix(tr.WindowEnd.Add(time.Hour))), 400, "bad_data", "outside [start, end)"},
		{"alpha", with("alpha", "1.5"), 400, "bad_data", "parameter alpha"},
		{"max_lag", with("max_lag", "1000"), 400, "bad_data", "parameter max_lag"},
		{"direction", with("direction", "sideways"), 400, "bad_data", `parameter direction "sideways"`},
		{"direction label", with("target", `label_replace(`+f.inc.ModelMean("vllm:e2e_request_latency_seconds").Query+`, "direction", "left", "", "")`), 400, "bad_data", "target label direction"},
		{"group", with("group", "instance,\xff"), 400, "bad_data", "not a label name"},
		{"window too short to rank", with("start", unix(tr.WindowEnd.Add(-time.Minute))), 400, "bad_data", "too few observations"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, a := f.do(t, http.MethodGet, c.form)
			if code != c.code || a.Status != "error" || a.ErrorType != c.typ || !strings.Contains(a.Error, c.substr) {
				t.Fatalf("got %d %s/%s %q, want %d %s containing %q", code, a.Status, a.ErrorType, a.Error, c.code, c.typ, c.substr)
			}
		})
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/api/v1/attribution/rootcause", nil))
	if rec.Code != http.StatusMethodNotAllowed || !strings.Contains(rec.Body.String(), `"errorType":"bad_data"`) {
		t.Errorf("DELETE: %d %s", rec.Code, rec.Body.String())
	}
}

// FuzzRootCauseParams feeds arbitrary parameter values to the request
// parser: it never panics, and it either accepts the request with a window
// and step inside the limits or answers bad_data.
func FuzzRootCauseParams(f *testing.F) {
	for _, s := range [][6]string{
		{"up", "1700000000", "1700003600", "15s", "", ""},
		{"sum(rate(x[1m]))", "2025-03-04T12:00:00Z", "2025-03-04T14:00:00Z", "60", "1700001800.5", "0.1"},
		{"", "NaN", "+Inf", "-1", "abc", "2"},
		{"x", "1e300", "1e301", "1e-9", "", "1e-400"},
		{"x", "0", "1", "0.0001", "0.5", "0"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	h := NewRootCauseHandler(nil, nil, RootCauseOptions{}).(*rootCause)
	f.Fuzz(func(t *testing.T, target, start, end, step, changeAt, alpha string) {
		form := url.Values{"target": {target}, "start": {start}, "end": {end}, "step": {step}, "change_at": {changeAt}, "alpha": {alpha}}
		req := httptest.NewRequest(http.MethodGet, "/api/v1/attribution/rootcause?"+form.Encode(), nil)
		r, aerr := h.parse(req)
		if aerr != nil {
			if aerr.code != http.StatusBadRequest || aerr.typ != "bad_data" || aerr.Error() == "" {
				t.Fatalf("parse error %d %s %q", aerr.code, aerr.typ, aerr.Error())
			}
			return
		}
		if r.target == "" || !r.end.After(r.start) || r.step <= 0 || !(r.alpha > 0 && r.alpha < 1) {
			t.Fatalf("accepted a bad request: %+v", r)
		}
		if n := int64(r.end.Sub(r.start)/r.step) + 1; n > int64(h.opts.MaxPoints) || n < 1 {
			t.Fatalf("accepted %d points", n)
		}
		if r.changeAt != nil && (r.changeAt.Before(r.start) || !r.changeAt.Before(r.end)) {
			t.Fatalf("accepted change_at %v outside [%v, %v)", r.changeAt, r.start, r.end)
		}
	})
}
