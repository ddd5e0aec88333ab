package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb/evidence"
)

// The evidence tests run at server time 300 s after the epoch (the
// attribution records' window) unless they say otherwise.
var evidenceNow = time.Unix(300, 0).UTC()

func evStack(pid int, comm string, startSec, latency float64, fn string) string {
	start := time.Unix(0, int64(startSec*1e9)).UTC().Format(time.RFC3339Nano)
	return fmt.Sprintf(`{"kind":"stack","time":"1970-01-01T00:05:00Z","node":"gpu-node-7","pid":%d,"tid":%d,"comm":%q,"probe":"offcpu",
"start":%q,"latency":%g,"frames":[{"address":"0xffffffff81a0b2c3","module":"[kernel]","function":"schedule","offset":51},
{"address":"0x55d0c0ffee10","module":"/opt/slowpath","function":%q,"offset":29}]}`, pid, pid, comm, start, latency, fn)
}

func evTimeline(pid int, startSec float64) string {
	start := time.Unix(0, int64(startSec*1e9)).UTC().Format(time.RFC3339Nano)
	return fmt.Sprintf(`{"kind":"cuda_timeline","time":"1970-01-01T00:05:00Z","node":"gpu-node-7","pid":%d,"probe":"cuda","latency":0.0123,"frames":[],
"calls":[{"tid":%d,"symbol":"cudaDeviceSynchronize","start":%q,"duration":0.0123}],"seen":10}`, pid, pid+1, start)
}

func evBatch(items ...string) string {
	return `{"node":"gpu-node-7","evidence":[` + strings.Join(items, ",") + `]}`
}

type evidenceEnv struct {
	srv   *httptest.Server
	store *evidence.Store
	api   *Evidence
	reg   *prometheus.Registry
}

func newEvidenceEnv(t testing.TB, retention time.Duration, opts EvidenceOptions) *evidenceEnv {
	t.Helper()
	now := func() time.Time { return evidenceNow }
	st, err := evidence.Open(evidence.Options{Dir: t.TempDir(), Retention: retention, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg := prometheus.NewRegistry()
	opts.Now, opts.Registerer = now, reg
	ev := NewEvidence(st, opts)
	r := mux.NewRouter()
	ev.Register(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &evidenceEnv{srv: srv, store: st, api: ev, reg: reg}
}

func (e *evidenceEnv) post(t *testing.T, body, contentType string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(e.srv.URL+"/api/v1/evidence", contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env map[string]any
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("POST answer %q: %v", b, err)
	}
	return resp.StatusCode, env
}

func (e *evidenceEnv) get(t *testing.T, params url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(e.srv.URL + "/api/v1/evidence?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env map[string]any
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("GET answer %q: %v", b, err)
	}
	return resp.StatusCode, env
}

func pids(t *testing.T, env map[string]any) []float64 {
	t.Helper()
	var out []float64
	for _, it := range env["data"].([]any) {
		out = append(out, it.(map[string]any)["pid"].(float64))
	}
	return out
}

func TestEvidencePushAndQuery(t *testing.T) {
	e := newEvidenceEnv(t, 0, EvidenceOptions{})
	code, env := e.post(t, evBatch(
		evStack(101, "slowpath", 100, 0.05, "slow_path_sleep"),
		evStack(102, "python3", 200, 0.20, "take_gil"),
		evTimeline(103, 150),
	), "application/json")
	if code != http.StatusOK || env["status"] != "success" {
		t.Fatalf("POST: %d %v", code, env)
	}
	if d := env["data"].(map[string]any); d["stored"] != 3.0 || d["rejected"] != 0.0 {
		t.Fatalf("POST data %v", d)
	}
	if got := testutil.ToFloat64(e.api.items.WithLabelValues("stored")); got != 3 {
		t.Errorf("stored counter %v, want 3", got)
	}
	for _, c := range []struct {
		name   string
		params url.Values
		want   []float64
	}{
		{"default window: the hour before now", url.Values{}, []float64{101, 103, 102}},
		{"window holds pid 101's event", url.Values{"start": {"100.01"}, "end": {"100.02"}}, []float64{101}},
		{"window after it ended", url.Values{"start": {"100.051"}, "end": {"149"}}, nil},
		{"RFC 3339 window", url.Values{"start": {"1970-01-01T00:02:30Z"}, "end": {"1970-01-01T00:02:30.005Z"}}, []float64{103}},
		{"kind", url.Values{"kind": {"stack"}}, []float64{101, 102}},
		{"comm", url.Values{"comm": {"python3"}}, []float64{102}},
		{"pid", url.Values{"pid": {"101"}}, []float64{101}},
		{"node", url.Values{"node": {"other"}}, nil},
		{"probe", url.Values{"probe": {"cuda"}}, []float64{103}},
		{"slowest first", url.Values{"order": {"latency"}, "kind": {"stack"}}, []float64{102, 101}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, env := e.get(t, c.params)
			if code != http.StatusOK || env["status"] != "success" {
				t.Fatalf("GET: %d %v", code, env)
			}
			got := pids(t, env)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("pids %v, want %v", got, c.want)
			}
		})
	}
	// The stored JSON is the item as pushed.
	_, env = e.get(t, url.Values{"pid": {"101"}})
	st := env["data"].([]any)[0].(map[string]any)
	fr := st["frames"].([]any)[1].(map[string]any)
	if fr["function"] != "slow_path_sleep" || fr["offset"] != 29.0 || st["start"] != "1970-01-01T00:01:40Z" || st["latency"] != 0.05 {
		t.Errorf("stored item %v", st)
	}
	// A limit below the matches warns.
	_, env = e.get(t, url.Values{"limit": {"1"}, "order": {"latency"}})
	if w := fmt.Sprint(env["warnings"]); !strings.Contains(w, "1 of 3 matching evidence items returned (limit 1)") || fmt.Sprint(pids(t, env)) != "[102]" {
		t.Errorf("limit 1: %v", env)
	}
	for _, c := range []struct {
		params url.Values
		text   string
	}{
		{url.Values{"kind": {"flame"}}, `kind="flame"`},
		{url.Values{"pid": {"abc"}}, `pid="abc"`},
		{url.Values{"pid": {"0"}}, `pid="0"`},
		{url.Values{"limit": {"0"}}, `limit="0": want 1 to 10000`},
		{url.Values{"limit": {"10001"}}, `limit="10001"`},
		{url.Values{"order": {"random"}}, `order="random"`},
		{url.Values{"start": {"200"}, "end": {"100"}}, "is before start"},
		{url.Values{"start": {"yesterday"}}, `start="yesterday"`},
	} {
		code, env := e.get(t, c.params)
		if code != http.StatusBadRequest || env["errorType"] != "bad_data" || !strings.Contains(fmt.Sprint(env["error"]), c.text) {
			t.Errorf("%v: %d %v, want 400 saying %q", c.params, code, env, c.text)
		}
	}
}

func TestEvidencePushRejectsNamingItems(t *testing.T) {
	// Retention 200 s at server time 300 s: spans ending before 100 s are
	// refused.
	e := newEvidenceEnv(t, 200*time.Second, EvidenceOptions{MaxBodyBytes: 4096})
	badAddr := strings.Replace(evStack(201, "x", 150, 0.1, "f"), `"0x55d0c0ffee10"`, `"main+0x10"`, 1)
	code, env := e.post(t, evBatch(
		evStack(200, "good", 150, 0.1, "f"),
		badAddr,
		evStack(202, "old", 50, 0.1, "f"),
		`{"kind":"stack"}`,
	), "application/json")
	msg := fmt.Sprint(env["error"])
	if code != http.StatusBadRequest || env["errorType"] != "bad_data" {
		t.Fatalf("POST: %d %v", code, env)
	}
	for _, want := range []string{
		"3 of 4 evidence items rejected (1 stored)",
		`evidence[1]: frames[1].address: "main+0x10" is not 0x`,
		"evidence[2]: time: span ends 1970-01-01T00:00:50.1Z, before the oldest time kept 1970-01-01T00:01:40Z",
		"evidence[3]: time: missing",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if d := env["data"].(map[string]any); d["stored"] != 1.0 || d["rejected"] != 3.0 {
		t.Errorf("data %v", d)
	}
	// The good item was kept.
	if _, env := e.get(t, url.Values{}); fmt.Sprint(pids(t, env)) != "[200]" {
		t.Errorf("stored after a partly bad batch: %v", env["data"])
	}
	if got := testutil.ToFloat64(e.api.items.WithLabelValues("rejected")); got != 3 {
		t.Errorf("rejected counter %v, want 3", got)
	}

	for _, c := range []struct {
		name, body, ctype string
		code              int
		text              string
	}{
		{"not JSON", "evidence", "application/json", 400, "malformed evidence batch"},
		{"no array", `{"node":"n"}`, "application/json", 400, `no "evidence" array`},
		{"too large", evBatch(strings.Repeat(evStack(1, "a", 150, 0.1, "f")+",", 40) + evStack(1, "a", 150, 0.1, "f")), "application/json", 413, "over 4096 bytes"},
		{"wrong type", evBatch(), "text/plain", 415, `Content-Type "text/plain"`},
		{"no type: a cross-site browser POST", evBatch(), "", 415, `Content-Type "": want application/json`},
		{"from the future", evBatch(evStack(1, "a", 300+3601, 0.1, "f")), "application/json", 400, "after 1970-01-01T01:05:00Z"},
	} {
		code, env := e.post(t, c.body, c.ctype)
		if code != c.code || env["status"] != "error" || !strings.Contains(fmt.Sprint(env["error"]), c.text) {
			t.Errorf("%s: %d %v, want %d saying %q", c.name, code, env, c.code, c.text)
		}
	}
	if st := e.store.Stats(); st.Items != 1 {
		t.Errorf("store holds %d items after refused batches, want 1", st.Items)
	}
}

// TestEvidenceSurvivesRestart reopens the store under a new handler: what
// was acknowledged is served again.
func TestEvidenceSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	now := func() time.Time { return evidenceNow }
	open := func() (*evidence.Store, *httptest.Server) {
		st, err := evidence.Open(evidence.Options{Dir: dir, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		r := mux.NewRouter()
		NewEvidence(st, EvidenceOptions{Now: now}).Register(r)
		return st, httptest.NewServer(r)
	}
	st, srv := open()
	resp, err := http.Post(srv.URL+"/api/v1/evidence", "application/json", strings.NewReader(evBatch(evStack(7, "a", 100, 0.3, "slow_path_sleep"))))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %v %v", resp, err)
	}
	resp.Body.Close()
	srv.Close()
	st.Close()
	st, srv = open()
	defer st.Close()
	defer srv.Close()
	e := &evidenceEnv{srv: srv}
	if _, env := e.get(t, url.Values{}); fmt.Sprint(pids(t, env)) != "[7]" {
		t.Fatalf("after restart: %v", env)
	}
}

type failingEvidence struct{}

func (failingEvidence) WindowEvidence(context.Context, time.Time, time.Time, int) ([]json.RawMessage, []json.RawMessage, error) {
	return nil, nil, errors.New("disk on fire")
}

// TestReportKernelFactors fills a report's kernel_factors from pushed
// evidence: the stacks and timelines overlapping the report window
// (0, 300 s], slowest first, in the schema's item shape.
func TestReportKernelFactors(t *testing.T) {
	e := newEvidenceEnv(t, 0, EvidenceOptions{})
	code, env := e.post(t, evBatch(
		evStack(1, "slowpath", 100, 0.05, "slow_path_sleep"),
		evStack(2, "python3", 200, 0.25, "take_gil"),
		evStack(3, "late", 299.99, 0.5, "f"), // begins in the window, ends after it
		evTimeline(4, 10),
	), "application/json")
	if code != http.StatusOK {
		t.Fatalf("POST: %d %v", code, env)
	}
	// After the window's end: not listed, however slow.
	if code, env := e.post(t, evBatch(evStack(5, "after", 350, 0.9, "f")), "application/json"); code != http.StatusOK {
		t.Fatalf("POST: %d %v", code, env)
	}

	report := func(src EvidenceSource) map[string]any {
		store := attributionRecords(t)
		ng, err := query.New(query.DefaultOptions(), query.NewRegistry(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ng.Close() })
		a := NewAttribution(ng, promqltest.LoadedStorage(t, ""), RecordsWithEvidence(store, src), AttributionOptions{
			Now: func() time.Time { return evidenceNow }, KernelVersion: func() string { return "test" },
		})
		r := mux.NewRouter()
		a.Register(r)
		srv := httptest.NewServer(r)
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/api/v1/attribution/report?" + url.Values{"selector": {`{model_name="m"}`}, "end": {"300"}, "window": {"5m"}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("report: %d %s", resp.StatusCode, b)
		}
		var env map[string]any
		json.Unmarshal(b, &env)
		rep := env["data"].(map[string]any)
		validateReportSchema(t, rep)
		return rep
	}

	rep := report(e.api)
	kf := rep["kernel_factors"].(map[string]any)
	var got []string
	for _, it := range kf["ebpf_stack_trace"].([]any) {
		m := it.(map[string]any)
		got = append(got, fmt.Sprint(m["pid"], " ", m["frames"].([]any)[1].(map[string]any)["function"]))
	}
	if want := "[3 f 2 take_gil 1 slow_path_sleep]"; fmt.Sprint(got) != want {
		t.Errorf("ebpf_stack_trace %v, want %s (slowest first, pid 5 after the window)", got, want)
	}
	tl := kf["cuda_kernel_timeline"].([]any)
	if len(tl) != 1 || tl[0].(map[string]any)["pid"] != 4.0 {
		t.Errorf("cuda_kernel_timeline %v", tl)
	}

	rep = report(failingEvidence{})
	kf = rep["kernel_factors"].(map[string]any)
	if len(kf["ebpf_stack_trace"].([]any)) != 0 || !strings.Contains(fmt.Sprint(rep["warnings"]), "kernel_factors: evidence unavailable: disk on fire") {
		t.Errorf("failing source: kernel_factors %v warnings %v", kf, rep["warnings"])
	}
}

func validateReportSchema(t *testing.T, report any) {
	t.Helper()
	c := jsonschema.NewCompiler()
	f, err := os.Open("../docs/attribution-report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("report.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("report.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(report)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(inst); err != nil {
		t.Errorf("report does not follow docs/attribution-report.schema.json: %v", err)
	}
}

// FuzzEvidencePush posts arbitrary bodies: the answer is 200, 400 or 413,
// never a server error, and the store holds exactly what was reported
// stored.
func FuzzEvidencePush(f *testing.F) {
	f.Add([]byte(evBatch(evStack(1, "a", 100, 0.1, "f"), evTimeline(2, 100))))
	f.Add([]byte(evBatch(`{"kind":"stack","pid":1}`)))
	f.Add([]byte(`{"evidence":[]}`))
	f.Add([]byte(`[`))
	e := newEvidenceEnv(f, 0, EvidenceOptions{MaxBodyBytes: 1 << 16})
	h := mux.NewRouter()
	e.api.Register(h)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := e.store.Stats().Items
		req := httptest.NewRequest(http.MethodPost, "/api/v1/evidence", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var env struct {
			Status string         `json:"status"`
			Data   map[string]int `json:"data"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatalf("answer %q is not JSON: %v", rec.Body.Bytes(), err)
		}
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
		}
		if got := e.store.Stats().Items - before; got != env.Data["stored"] {
			t.Fatalf("store grew by %d, answer says %d stored", got, env.Data["stored"])
		}
	})
}
