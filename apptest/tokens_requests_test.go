package apptest

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/ingest"
	"github.com/tailroot/tailroot/sim/requests"
	"github.com/tailroot/tailroot/tsdb/records"
)

// TestTokensPushBadLines: a push with bad lines is answered 400 naming
// each bad line and why; the good lines are stored.
func TestTokensPushBadLines(t *testing.T) {
	app := startTokens(t, t.TempDir())
	base := time.Now().Add(-time.Minute).Unix()
	ts := func(off float64) string { return strconv.FormatFloat(float64(base)+off, 'f', 3, 64) }
	lines := []string{
		`{"request_id":"good-1","labels":{"model_name":"m"},"arrival":` + ts(0) + `,"scheduled":` + ts(0.1) + `,"first_token":` + ts(0.3) + `,"last_token":` + ts(1) + `}`,
		`{"request_id":"neg","arrival":-5,"finished":` + ts(1) + `}`,
		`{"request_id":"order","arrival":` + ts(0) + `,"scheduled":` + ts(0.5) + `,"first_token":` + ts(0.2) + `,"finished":` + ts(1) + `}`,
		`{"request_id":"over","arrival":` + ts(0) + `,"finished":` + ts(1) + `,"stages":{"network":1.5}}`,
		`{"arrival":` + ts(0) + `,"finished":` + ts(1) + `}`,
		`{"request_id":"good-2","labels":{"model_name":"m"},"arrival":` + ts(2) + `,"finished":` + ts(2.5) + `,"stages":{"tokenize":0.01}}`,
	}
	code, body := postBody(t, app, "/api/v1/requests", "application/x-ndjson", []byte(strings.Join(lines, "\n")), nil)
	if code != http.StatusBadRequest {
		t.Fatalf("%d %s", code, body)
	}
	var env struct {
		Status, ErrorType, Error string
		Data                     ingest.PushResult
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		line int
		why  string
	}{{2, "negative timestamp"}, {3, "non-monotonic timestamps"}, {4, "more than end-to-end"}, {5, "missing ids"}}
	if env.Data.Accepted != 2 || env.Data.RejectedCount != 4 || len(env.Data.Rejected) != 4 {
		t.Fatalf("result %+v", env.Data)
	}
	for i, w := range want {
		if r := env.Data.Rejected[i]; r.Line != w.line || !strings.Contains(r.Error, w.why) {
			t.Errorf("rejection %d: %+v, want line %d (%s)", i, r, w.line, w.why)
		}
	}
	recs := getRecords(t, app)
	if len(recs) != 2 || recs[0].RequestID != "good-1" || recs[1].RequestID != "good-2" {
		t.Fatalf("stored %+v", recs)
	}
	// good-1: queue 0.1 (no queued timestamp: from arrival), prefill 0.2,
	// decode 0.7, e2e 1 (end = last token).
	if r := recs[0]; r.E2E != 1 || r.Stages.Queue != 0.1 || r.Stages.Prefill != 0.2 || r.Stages.Decode != 0.7 || r.TTFT != 0.3 {
		t.Errorf("good-1 %+v", r)
	}
}

// TestTokensTailBound replays simulated traffic (Azure code trace, twice
// its speed) into the running binary, half as NDJSON and half as vLLM
// spans, then computes E[stage | e2e ≥ P99] from the records (GET
// /api/v1/requests) and from the tail series alone (query API): the
// records' value must lie in the bracket the grid implies (see
// ingest.TestTailAccumulatorsBoundSimulated for the bound).
func TestTokensTailBound(t *testing.T) {
	app := startTokens(t, t.TempDir())
	reqs, err := requests.Simulate(requests.Options{Trace: "azure-code", Limit: 3000, Speedup: 2, Seed: 4, Start: time.Now().Add(-2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	s := &requests.Sender{URL: app.URL, BatchSize: 300}
	ctx := context.Background()
	if err := s.PushNDJSON(ctx, reqs[:1500]); err != nil {
		t.Fatal(err)
	}
	if err := s.PushSpans(ctx, reqs[1500:]); err != nil {
		t.Fatal(err)
	}
	recs := getRecords(t, app)
	if len(recs) != len(reqs) {
		t.Fatalf("%d records, want %d", len(recs), len(reqs))
	}
	names := make([]string, records.NumStages)
	cols := make([][]float64, records.NumStages)
	for j := range names {
		names[j] = records.Stage(j).String()
	}
	for _, r := range recs {
		for j, v := range r.Stages.Array() {
			cols[j] = append(cols[j], v)
		}
	}
	rq, err := attribution.NewRequests(names, cols)
	if err != nil {
		t.Fatal(err)
	}
	exact, err := attribution.TailMean(rq, 0.99)
	if err != nil {
		t.Fatal(err)
	}

	grid := attribution.DefaultGrid()
	acc := attribution.NewAccumulators(grid, names)
	at := time.Now()
	bucket := func(v string) int {
		if v == "+Inf" {
			return grid.Buckets() - 1
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatal(err)
		}
		b, ok := slices.BinarySearch(grid.Upper(), f)
		if !ok {
			t.Fatalf("e2e_bucket %q not on the grid", v)
		}
		return b
	}
	// The requests are two hours old: their derived samples lie at the
	// edge of the backfill window, not within the lookback of now.
	for _, smp := range app.InstantVector(t, `sum by (e2e_bucket) (last_over_time(tailroot_tail_requests_total[3h]))`, at) {
		acc.Count[bucket(smp.Metric["e2e_bucket"])] += floatOf(t, smp)
	}
	for _, smp := range app.InstantVector(t, `sum by (stage, e2e_bucket) (last_over_time(tailroot_tail_stage_seconds_sum[3h]))`, at) {
		acc.Sum[slices.Index(names, smp.Metric["stage"])][bucket(smp.Metric["e2e_bucket"])] += floatOf(t, smp)
	}
	est, err := attribution.TailMeanAccumulators(acc, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	for j, name := range names {
		if x := exact.Contrib[j]; x < est.Lower[j]-1e-9 || x > est.Upper[j]+1e-9 {
			t.Errorf("E[%s | e2e ≥ P99] = %v from records, outside [%v, %v] from series", name, x, est.Lower[j], est.Upper[j])
		}
	}
	if exact.Target < est.TargetLower-1e-9 || exact.Target > est.TargetUpper+1e-9 {
		t.Errorf("tail mean %v from records outside [%v, %v] from series", exact.Target, est.TargetLower, est.TargetUpper)
	}
	t.Logf("E[e2e | e2e ≥ P99]: records %.4f, series %.4f in [%.4f, %.4f]", exact.Target, est.Target, est.TargetLower, est.TargetUpper)
}
