package plugin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// The attribution endpoints are specified in CONTRACT.md; these tests run a
// fake server that answers exactly the examples written there, so the
// plugin's side of the contract is pinned down before the server has it.

const breakdownAnswer = `{
  "method": "tail_mean_records", "kind": "exact", "quantile": 0.99,
  "quantile_seconds": 2.31, "target_seconds": 2.74, "residual_seconds": 0,
  "window": {"start": 1700000100, "end": 1700003700}, "requests": 18234,
  "stages": [
    {"stage": "queue",   "contribution_seconds": 1.10, "share": 0.4015, "lower_seconds": null, "upper_seconds": null},
    {"stage": "prefill", "contribution_seconds": 0.84, "share": 0.3066},
    {"stage": "decode",  "contribution_seconds": 0.80, "share": 0.2919}
  ],
  "heat": {"stages": ["queue", "prefill", "decode"], "rows": [
    {"band": "P50-P90", "from_seconds": 0.81, "to_seconds": 1.62, "requests": 7200, "mean_seconds": 1.12,
     "stage_means": [0.10, 0.32, 0.70], "top_stage": "decode", "top_share": 0.625, "top_factor": "gpu_sm_clock_throttle"},
    {"band": "≥P99", "from_seconds": 2.31, "to_seconds": null, "requests": 183, "mean_seconds": 2.74,
     "stage_means": [1.10, 0.84, 0.80], "top_stage": "queue", "top_share": 0.4015}
  ]},
  "tokens": {"position_edges": [0, 1, 16], "latency_edges": [0, 0.01, 0.05],
             "counts": [[120, 30], [80, 90]]}
}`

const rootCauseAnswer = `{
  "change_at": 1700001800,
  "ranking": [
    {"candidate": "node_schedstat_runqueue_seconds{instance=\"gpu-3\"}", "score": 8.4, "p_adjusted": 0.0004, "lag": 2, "stage": "queue"},
    {"candidate": "DCGM_FI_DEV_SM_CLOCK{gpu=\"3\"}", "score": 3.2, "p_adjusted": null, "lag": 0, "stage": "decode"}
  ],
  "graph": {
    "nodes": [
      {"id": "ttft", "title": "P99 TTFT", "kind": "target", "score": null},
      {"id": "queue", "title": "queue", "kind": "stage", "score": 3.1},
      {"id": "runqueue", "title": "run-queue delay", "kind": "kernel", "score": 8.4}
    ],
    "edges": [
      {"source": "runqueue", "target": "queue", "weight": 0.71, "lag": 2, "p_adjusted": 0.0004},
      {"source": "queue", "target": "ttft", "weight": 0.93, "lag": 0, "p_adjusted": 0.00001}
    ]
  }
}`

const causalAnswer = `{
  "method": "backdoor", "effect": 0.042, "lower": 0.031, "upper": 0.053, "level": 0.95,
  "p": 0.00012, "lag": 1, "n": 240,
  "counterfactual": {"timestamps": [1700000100, 1700000115], "observed": [1.2, 1.3], "counterfactual": [1.1, null]}
}`

const abAnswer = `{"quantile": 0.99, "a": 2.31, "b": 1.87, "diff": -0.44, "lower": -0.61, "upper": -0.27,
  "level": 0.95, "method": "bootstrap", "a_requests": 9120, "b_requests": 9114}`

// fakeAttribution serves the contract's examples and records each request.
type fakeAttribution struct {
	mu      sync.Mutex
	reqs    []*http.Request
	answers map[string]string // path → data JSON; "status:NNN:body" for an error
}

func (f *fakeAttribution) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	a, ok := f.answers[r.URL.Path]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if rest, isErr := strings.CutPrefix(a, "status:"); isErr {
		code, body, _ := strings.Cut(rest, ":")
		n := 0
		for _, c := range code {
			n = n*10 + int(c-'0')
		}
		w.WriteHeader(n)
		_, _ = w.Write([]byte(body))
		return
	}
	_, _ = w.Write([]byte(`{"status":"success","data":` + a + `,"warnings":["window holds few requests"]}`))
}

func (f *fakeAttribution) last() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

func newFake(t *testing.T) (*fakeAttribution, *Datasource) {
	t.Helper()
	f := &fakeAttribution{answers: map[string]string{
		"/api/v1/attribution/breakdown": breakdownAnswer,
		"/api/v1/attribution/rootcause": rootCauseAnswer,
		"/api/v1/attribution/causal":    causalAnswer,
		"/api/v1/attribution/ab":        abAnswer,
	}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	ds := newTestDatasource(t, backend.DataSourceInstanceSettings{
		Type: ID, URL: srv.URL, BasicAuthEnabled: true, BasicAuthUser: "grafana",
		JSONData:                []byte(`{"httpHeaderName1": "X-Scope-OrgID"}`),
		DecryptedSecureJSONData: map[string]string{"basicAuthPassword": "pw", "httpHeaderValue1": "tenant-7"},
	})
	return f, ds
}

var attrRange = backend.TimeRange{From: T0, To: T0.Add(time.Hour)}

func TestAttributionGolden(t *testing.T) {
	fake, ds := newFake(t)
	for _, c := range []struct {
		name   string
		model  map[string]any
		params url.Values // expected, besides start and end
		check  func(t *testing.T, fr data.Frames)
	}{
		{
			name:   "breakdown_stages",
			model:  map[string]any{"queryType": "breakdown", "metric": "ttft", "selector": `{model_name="llama-8b"}`, "quantile": 0.99},
			params: url.Values{"metric": {"ttft"}, "selector": {`{model_name="llama-8b"}`}, "quantile": {"0.99"}},
			check: func(t *testing.T, fr data.Frames) {
				f := fr[0]
				if len(f.Fields) != 4 || f.Fields[0].Name != "quantity" || f.Fields[1].Name != "queue" {
					t.Fatalf("fields %v", f.Fields)
				}
				if s, _ := f.Fields[0].ConcreteAt(0); s != "P99 tail_mean_records" {
					t.Errorf("quantity %v", s)
				}
				if v, _ := f.Fields[3].FloatAt(0); v != 0.80 {
					t.Errorf("decode %v", v)
				}
				if f.Meta.Custom.(map[string]any)["kind"] != "exact" {
					t.Errorf("custom %v", f.Meta.Custom)
				}
			},
		},
		{
			name:   "breakdown_shapley",
			model:  map[string]any{"queryType": "breakdown", "method": "shapley", "baseline": "1d"},
			params: url.Values{"method": {"shapley"}, "baseline_start": {"1699913700"}, "baseline_end": {"1699917300"}},
		},
		{
			name:   "breakdown_heat",
			model:  map[string]any{"queryType": "breakdown", "view": "heat"},
			params: url.Values{"view": {"heat"}},
			check: func(t *testing.T, fr data.Frames) {
				f := fr[0]
				if f.Rows() != 2 || f.Fields[len(f.Fields)-1].Name != "mean decode" {
					t.Fatalf("rows %d, last field %s", f.Rows(), f.Fields[len(f.Fields)-1].Name)
				}
				if v, ok := f.Fields[2].ConcreteAt(1); ok {
					t.Errorf("null to_seconds became %v", v)
				}
			},
		},
		{
			name:   "breakdown_tokens",
			model:  map[string]any{"queryType": "breakdown", "view": "tokens"},
			params: url.Values{"view": {"tokens"}},
			check: func(t *testing.T, fr data.Frames) {
				// Cells row by row: (0-1, 0-0.01)=120, (0-1, 0.01-0.05)=30, (1-16, …)=80, 90.
				if got := floatsOf(t, fr[0].Fields[4]); len(got) != 4 || got[0] != 120 || got[1] != 30 || got[2] != 80 || got[3] != 90 {
					t.Errorf("counts %v", got)
				}
				if got := floatsOf(t, fr[0].Fields[0]); got[2] != 1 {
					t.Errorf("xMin %v", got)
				}
			},
		},
		{
			name:   "rootcause_ranking",
			model:  map[string]any{"queryType": "rootcause", "target": "p99_ttft", "candidates": `{__name__=~"node_.*"}`, "alpha": 0.01, "maxLag": 5, "changeAt": "2023-11-14T22:45:00Z"},
			params: url.Values{"target": {"p99_ttft"}, "candidates": {`{__name__=~"node_.*"}`}, "alpha": {"0.01"}, "max_lag": {"5"}, "change_at": {"1700001900"}, "step": {"15"}},
			check: func(t *testing.T, fr data.Frames) {
				if fr[0].Rows() != 2 {
					t.Fatalf("rows %d", fr[0].Rows())
				}
				if _, ok := fr[0].Fields[3].ConcreteAt(1); ok {
					t.Errorf("null p_adjusted is not null")
				}
			},
		},
		{
			name:   "rootcause_graph",
			model:  map[string]any{"queryType": "rootcause", "target": "p99_ttft", "view": "graph"},
			params: url.Values{"target": {"p99_ttft"}, "step": {"15"}},
			check: func(t *testing.T, fr data.Frames) {
				if len(fr) != 2 || fr[0].Name != "nodes" || fr[1].Name != "edges" {
					t.Fatalf("frames %v", fr)
				}
				if fr[0].Meta.PreferredVisualization != data.VisTypeNodeGraph {
					t.Errorf("nodes vis %q", fr[0].Meta.PreferredVisualization)
				}
				// Each node's arcs add up to 1 (the Node Graph panel's rule).
				for i := 0; i < fr[0].Rows(); i++ {
					sum := 0.0
					for _, f := range fr[0].Fields {
						if strings.HasPrefix(f.Name, "arc__") {
							v, _ := f.FloatAt(i)
							sum += v
						}
					}
					if sum != 1 {
						t.Errorf("node %d arcs sum to %v", i, sum)
					}
				}
			},
		},
		{
			name:   "causal",
			model:  map[string]any{"queryType": "causal", "outcome": "p99", "treatment": "runqueue", "confounders": []string{"load", " ", "gpu_util"}, "level": 0.9},
			params: url.Values{"outcome": {"p99"}, "treatment": {"runqueue"}, "confounder": {"load", "gpu_util"}, "level": {"0.9"}, "step": {"15"}},
			check: func(t *testing.T, fr data.Frames) {
				if len(fr) != 2 || fr[1].Name != "counterfactual" || fr[1].Rows() != 2 {
					t.Fatalf("frames %v", fr)
				}
			},
		},
		{
			name:   "ab",
			model:  map[string]any{"queryType": "ab", "a": `{instance="a"}`, "b": `{instance="b"}`, "ciMethod": "delta"},
			params: url.Values{"a": {`{instance="a"}`}, "b": {`{instance="b"}`}, "ci_method": {"delta"}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			dq := dataQuery("A", c.model, attrRange)
			dq.Interval = 15 * time.Second
			r := query(t, ds, dq)
			if r.Error != nil {
				t.Fatal(r.Error)
			}
			req := fake.last()
			got := req.URL.Query()
			want := url.Values{"start": {"1700000100"}, "end": {"1700003700"}}
			for k, v := range c.params {
				want[k] = v
			}
			if got.Encode() != want.Encode() {
				t.Errorf("params\n got %s\nwant %s", got.Encode(), want.Encode())
			}
			if u, p, ok := req.BasicAuth(); !ok || u != "grafana" || p != "pw" {
				t.Errorf("basic auth %q %q %v", u, p, ok)
			}
			if h := req.Header.Get("X-Scope-OrgID"); h != "tenant-7" {
				t.Errorf("custom header %q", h)
			}
			if n := r.Frames[0].Meta.Notices; len(n) == 0 || n[len(n)-1].Text != "window holds few requests" {
				t.Errorf("server warning not shown: %v", n)
			}
			if c.check != nil {
				c.check(t, r.Frames)
			}
			checkGolden(t, c.name, r)
		})
	}
}

// TestAttributionBadAnswers: an answer that breaks the contract, or an
// error answer, is this RefID's error and names what is wrong.
func TestAttributionBadAnswers(t *testing.T) {
	for _, c := range []struct {
		name, path, answer string
		model              map[string]any
		status             backend.Status
		contains           string
	}{
		{"unknown kind", "breakdown", `{"method":"x","kind":"approx","stages":[]}`, map[string]any{"queryType": "breakdown"}, backend.StatusBadGateway, `kind "approx"`},
		{"missing method", "breakdown", `{"kind":"exact","stages":[]}`, map[string]any{"queryType": "breakdown"}, backend.StatusBadGateway, "method is empty"},
		{"repeated stage", "breakdown", `{"method":"euler","kind":"estimate","stages":[{"stage":"queue"},{"stage":"queue"}]}`, map[string]any{"queryType": "breakdown"}, backend.StatusBadGateway, `stage "queue" repeated`},
		{"heat missing", "breakdown", `{"method":"euler","kind":"estimate","stages":[]}`, map[string]any{"queryType": "breakdown", "view": "heat"}, backend.StatusBadGateway, "no heat member"},
		{"token shape", "breakdown", `{"method":"euler","kind":"estimate","tokens":{"position_edges":[0,1],"latency_edges":[0,1,2],"counts":[[1]]}}`, map[string]any{"queryType": "breakdown", "view": "tokens"}, backend.StatusBadGateway, "counts[0] has 1 cells for 2"},
		{"dangling edge", "rootcause", `{"ranking":[],"graph":{"nodes":[{"id":"a"}],"edges":[{"source":"a","target":"b"}]}}`, map[string]any{"queryType": "rootcause", "target": "x", "view": "graph"}, backend.StatusBadGateway, `"a" -> "b"`},
		{"no effect", "causal", `{"method":"granger","effect":null}`, map[string]any{"queryType": "causal", "outcome": "a", "treatment": "b"}, backend.StatusBadGateway, "effect is missing"},
		{"wrong type", "ab", `{"a":"fast"}`, map[string]any{"queryType": "ab", "a": "{}", "b": "{}"}, backend.StatusBadGateway, "ab answer"},
		{"server 400", "ab", `status:400:{"status":"error","errorType":"bad_data","error":"selector a: unexpected }"}`, map[string]any{"queryType": "ab", "a": "{", "b": "{}"}, backend.StatusBadRequest, "selector a: unexpected }"},
		{"server 500", "causal", `status:500:boom`, map[string]any{"queryType": "causal", "outcome": "a", "treatment": "b"}, backend.StatusInternal, "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake, ds := newFake(t)
			fake.answers["/api/v1/attribution/"+c.path] = c.answer
			r := query(t, ds, dataQuery("A", c.model, attrRange))
			if r.Error == nil || !strings.Contains(r.Error.Error(), c.contains) {
				t.Fatalf("error %v, want it to contain %q", r.Error, c.contains)
			}
			if r.Status != c.status || r.ErrorSource != backend.ErrorSourceDownstream {
				t.Errorf("status %d source %q, want %d downstream", r.Status, r.ErrorSource, c.status)
			}
		})
	}
}

// TestAttributionBadQueries: mistakes in the query are caught before any
// request, as downstream 400s naming the field.
func TestAttributionBadQueries(t *testing.T) {
	fake, ds := newFake(t)
	for _, c := range []struct {
		model    map[string]any
		contains string
	}{
		{map[string]any{"queryType": "breakdown", "quantile": 99}, "quantile 99"},
		{map[string]any{"queryType": "breakdown", "method": "median"}, `method "median"`},
		{map[string]any{"queryType": "breakdown", "view": "pie"}, `view "pie"`},
		{map[string]any{"queryType": "breakdown", "method": "shapley"}, "needs a baseline"},
		{map[string]any{"queryType": "breakdown", "method": "shapley", "baseline": "yesterday"}, `baseline "yesterday"`},
		{map[string]any{"queryType": "rootcause"}, "needs a target"},
		{map[string]any{"queryType": "rootcause", "target": "x", "changeAt": "noon"}, `changeAt "noon"`},
		{map[string]any{"queryType": "rootcause", "target": "x", "maxLag": -1}, "maxLag -1"},
		{map[string]any{"queryType": "causal", "outcome": "x"}, "outcome and a treatment"},
		{map[string]any{"queryType": "causal", "outcome": "x", "treatment": "y", "method": "iv"}, `method "iv"`},
		{map[string]any{"queryType": "ab", "a": "x"}, "two selectors"},
		{map[string]any{"queryType": "ab", "a": "x", "b": "y", "level": 1.5}, "level 1.5"},
		{map[string]any{"queryType": "ab", "a": "x", "b": "y", "ciMethod": "jackknife"}, `ciMethod "jackknife"`},
	} {
		before := len(fake.reqs)
		raw, _ := json.Marshal(c.model)
		r := query(t, ds, backend.DataQuery{RefID: "A", JSON: raw, TimeRange: attrRange, Interval: 15 * time.Second})
		if r.Error == nil || !strings.Contains(r.Error.Error(), c.contains) || r.Status != backend.StatusBadRequest || r.ErrorSource != backend.ErrorSourceDownstream {
			t.Errorf("%v: error %v status %d source %q, want 400 downstream containing %q", c.model, r.Error, r.Status, r.ErrorSource, c.contains)
		}
		if len(fake.reqs) != before {
			t.Errorf("%v: a bad query reached the server", c.model)
		}
	}
}
