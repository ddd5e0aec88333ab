package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"

	"github.com/tailroot/tailroot/api"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb/records"
)

// TestAttributeCommand runs `tailroot attribute` against the real report
// handler over ten requests with S = 1..10 s (hand-worked in
// query/tailfn/testdata/records.test: at p = 0.8 the tail {9, 10} has
// queue 5 s, prefill 1 s, decode 3.5 s, tail mean 9.5 s, P80 8.2 s).
func TestAttributeCommand(t *testing.T) {
	opts := records.DefaultOptions()
	opts.Dir = t.TempDir()
	store, err := records.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var recs []records.Record
	ls := labels.FromStrings("model_name", "x")
	for i := 1; i <= 10; i++ {
		r := records.Record{Time: int64(i) * 10_000, Labels: ls, RequestID: fmt.Sprint(i)}
		switch i {
		case 9:
			r.Stages[records.StageQueue], r.Stages[records.StagePrefill], r.Stages[records.StageDecode] = 4, 1, 4
		case 10:
			r.Stages[records.StageQueue], r.Stages[records.StagePrefill], r.Stages[records.StageDecode] = 6, 1, 3
		default:
			r.Stages[records.StagePrefill], r.Stages[records.StageDecode] = 0.5, float64(i)-0.5
		}
		r.E2E = r.Sum()
		recs = append(recs, r)
	}
	if err := store.Append(recs); err != nil {
		t.Fatal(err)
	}
	reg := query.NewRegistry()
	if err := tailfn.Register(reg, store); err != nil {
		t.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	r := mux.NewRouter()
	api.NewAttribution(ng, promqltest.LoadedStorage(t, ""), store, api.AttributionOptions{Now: func() time.Time { return time.Unix(300, 0) }}).Register(r)
	srv := httptest.NewServer(r)
	defer srv.Close()

	args := []string{"--server", srv.URL, "--selector", `{model_name="x"}`, "--window", "5m", "--end", "300", "--quantile", "0.8"}
	var out bytes.Buffer
	if err := runAttribute(&out, args); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"method tail_mean_records (exact); P80 = 8200.0 ms",
		"stages add up to E[S | S ≥ P80], the mean latency of the tail = 9500.0 ms",
		"   queue           5000.0  52.6%",
		" prefill           1000.0  10.5%",
		"  decode           3500.0  36.8%",
		"≥P99         1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}

	out.Reset()
	if err := runAttribute(&out, append(args, "--json")); err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("--json output %q: %v", out.String(), err)
	}
	if rep["p99_breakdown_ms"].(map[string]any)["queue"] != 5000.0 {
		t.Errorf("--json breakdown %v", rep["p99_breakdown_ms"])
	}

	if err := runAttribute(&out, []string{"--server", srv.URL, "--quantile", "1"}); err == nil || !strings.Contains(err.Error(), "--quantile 1") {
		t.Errorf("bad quantile: %v", err)
	}
	if err := runAttribute(&out, []string{"--server", srv.URL, "--end", "300", "--selector", `{model_name="none"}`}); err == nil || !strings.Contains(err.Error(), "no requests in window") {
		t.Errorf("empty window: %v", err)
	}
}
