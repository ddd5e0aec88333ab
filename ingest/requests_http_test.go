package ingest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/mux"
	"github.com/klauspost/compress/gzip"

	"github.com/tailroot/tailroot/internal/httpapi"
)

func pushRequests(t *testing.T, h http.Handler, body string, hdr map[string]string) (*httptest.ResponseRecorder, httpapi.Response, PushResult) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/requests", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-ndjson")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var env struct {
		httpapi.Response
		Data PushResult `json:"data"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &env)
	return w, env.Response, env.Data
}

const lineB = `{"request_id":"r2","labels":{"model_name":"mistral"},"arrival":"2023-11-14T22:13:21Z",` +
	`"first_token":"2023-11-14T22:13:21.25Z","last_token":"2023-11-14T22:13:22Z","itl":[0.5,0.25],"prompt_entropy":3.5}`

// TestPushPartial: the good lines of a body are stored, the bad ones are
// listed by line number and reason with 400.
func TestPushPartial(t *testing.T) {
	db := openTestDB(t)
	p := openTestRecords(t, db, testRecordsOptions(t.TempDir()))
	r := mux.NewRouter()
	p.Register(r)
	body := strings.Join([]string{
		lineA,
		`{"arrival":1700000000,"finished":1700000001}`,
		``,
		lineB,
		`{"request_id":"x","arrival":1700000010,"queued":1700000012,"scheduled":1700000011,"finished":1700000020}`,
	}, "\n")
	w, env, res := pushRequests(t, r, body, nil)
	if w.Code != http.StatusBadRequest || env.Status != "error" || env.ErrorType != "bad_data" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if res.Accepted != 2 || res.RejectedCount != 2 || len(res.Rejected) != 2 ||
		res.Rejected[0].Line != 2 || !strings.Contains(res.Rejected[0].Error, "missing ids") ||
		res.Rejected[1].Line != 5 || !strings.Contains(res.Rejected[1].Error, "non-monotonic timestamps: scheduled") {
		t.Errorf("result %+v", res)
	}
	if !strings.Contains(env.Error, "2 of 4 requests rejected (the other 2 were stored): line 2: ") {
		t.Errorf("error %q", env.Error)
	}
	if n := len(selectAllRecords(t, p.Store())); n != 2 {
		t.Fatalf("%d records stored, want 2", n)
	}

	// gzip, all good.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(lineA + "\n"))
	_ = zw.Close()
	if w, _, res := pushRequests(t, r, gz.String(), map[string]string{"Content-Encoding": "gzip"}); w.Code != http.StatusOK || res.Accepted != 1 {
		t.Fatalf("gzip push: %d %s", w.Code, w.Body)
	}

	for _, c := range []struct {
		name string
		hdr  map[string]string
		body string
		code int
	}{
		{"content type", map[string]string{"Content-Type": "text/xml"}, lineA, http.StatusUnsupportedMediaType},
		{"text/plain: a cross-site browser POST", map[string]string{"Content-Type": "text/plain"}, lineA, http.StatusUnsupportedMediaType},
		{"no content type", map[string]string{"Content-Type": ""}, lineA, http.StatusUnsupportedMediaType},
		{"encoding", map[string]string{"Content-Encoding": "snappy"}, lineA, http.StatusUnsupportedMediaType},
		{"bad gzip", map[string]string{"Content-Encoding": "gzip"}, "not gzip", http.StatusBadRequest},
	} {
		if w, _, _ := pushRequests(t, r, c.body, c.hdr); w.Code != c.code {
			t.Errorf("%s: %d, want %d", c.name, w.Code, c.code)
		}
	}

	o := testRecordsOptions(t.TempDir())
	o.MaxRecordsPerRequest = 1
	o.MaxBodyBytes = 2000
	small := openTestRecords(t, openTestDB(t), o)
	if w, _, _ := pushRequests(t, http.HandlerFunc(small.ServePush), lineA+"\n"+lineB, nil); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("2 lines over a limit of 1: %d", w.Code)
	}
	if w, _, _ := pushRequests(t, http.HandlerFunc(small.ServePush), strings.Repeat(" ", 2001), nil); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("2001 bytes over a limit of 2000: %d", w.Code)
	}
	if n := small.Store().Stats().Records; n != 0 {
		t.Errorf("refused pushes stored %d records", n)
	}
}

func TestQueryRequests(t *testing.T) {
	db := openTestDB(t)
	p := openTestRecords(t, db, testRecordsOptions(t.TempDir()))
	r := mux.NewRouter()
	p.Register(r)
	if w, _, _ := pushRequests(t, r, lineA+"\n"+lineB, nil); w.Code != http.StatusOK {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	get := func(params url.Values, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/requests?"+params.Encode(), nil)
		if len(hdr) == 2 {
			req.Header.Set(hdr[0], hdr[1])
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		return w
	}
	decode := func(w *httptest.ResponseRecorder) (httpapi.Response, []RecordJSON) {
		t.Helper()
		var env struct {
			httpapi.Response
			Data []RecordJSON `json:"data"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
			t.Fatalf("%s: %v", w.Body, err)
		}
		return env.Response, env.Data
	}

	w := get(url.Values{"match[]": {`{model_name="llama"}`}})
	env, recs := decode(w)
	if w.Code != http.StatusOK || env.Status != "success" || len(recs) != 1 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	a := recs[0]
	if a.Time != 1700000000500 || a.RequestID != "r1" || a.TraceID != "0af7651916cd43dd8448eb211c80319c" || a.E2E != 0.52 ||
		a.TTFT != 0.41 || a.Stages.Queue != 0.1 || a.Stages.Prefill != 0.3 || a.Stages.Network != 0.003 ||
		a.PromptEntropy != 1 || a.Labels["instance"] != "a:1" || a.ITL == nil || len(a.ITL.Values) != 3 || a.ITL.Values[2] != 0.04 {
		t.Errorf("record %+v", a)
	}
	var sum float64
	for _, v := range a.Stages.Array() {
		sum += v
	}
	if sum != a.E2E {
		t.Errorf("stages sum to %v after the JSON round trip, e2e %v", sum, a.E2E)
	}

	// Both, in time order; OR over match[].
	_, recs = decode(get(url.Values{"match[]": {`{model_name="llama"}`, `{model_name="mistral"}`}}))
	if len(recs) != 2 || recs[0].RequestID != "r1" || recs[1].RequestID != "r2" {
		t.Errorf("OR of two selectors: %+v", recs)
	}
	// Time range: lineB arrived at 1700000001 s.
	_, recs = decode(get(url.Values{"start": {"1700000000.6"}, "end": {"2023-11-14T22:13:30Z"}}))
	if len(recs) != 1 || recs[0].RequestID != "r2" {
		t.Errorf("start 1700000000.6: %+v", recs)
	}
	// Limit with a warning.
	env, recs = decode(get(url.Values{"limit": {"1"}}))
	if len(recs) != 1 || len(env.Warnings) != 1 || !strings.Contains(env.Warnings[0], "truncated to 1") {
		t.Errorf("limit 1: %d records, warnings %q", len(recs), env.Warnings)
	}
	// NDJSON.
	w = get(url.Values{}, "Accept", "application/x-ndjson")
	if ct := w.Header().Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(w.Body)
	n := 0
	for sc.Scan() {
		var rj RecordJSON
		if err := json.Unmarshal(sc.Bytes(), &rj); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d NDJSON lines, want 2", n)
	}
	for _, q := range []url.Values{{"match[]": {"{"}}, {"limit": {"-1"}}, {"start": {"yesterday"}}, {"start": {"10"}, "end": {"5"}}} {
		if w := get(q); w.Code != http.StatusBadRequest {
			t.Errorf("%v: %d, want 400", q, w.Code)
		}
	}
}
