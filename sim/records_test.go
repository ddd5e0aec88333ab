package sim

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// The records are the requests the histograms observed: per instance, as
// many records as the e2e histogram's _count, and their e2e, TTFT, queue,
// prefill and decode sums equal the histograms' _sum; keeping them leaves
// every series as it was.
func TestRecordsAreTheObservedRequests(t *testing.T) {
	o := DefaultOptions()
	o.URL = ""
	o.Covariates = true
	o.Faults = []Fault{{Kind: FaultGPUThrottle, Instance: 0, Start: time.Date(2025, 3, 4, 12, 10, 0, 0, time.UTC)}}
	withRecords := o
	withRecords.Records = true
	a, b := mustNew(t, o), mustNew(t, withRecords)
	t0 := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	var recs []Record
	var last []Series
	for i := range 80 {
		ts := t0.Add(time.Duration(i) * o.Interval)
		sa, sb := a.Step(ts), b.Step(ts)
		if !reflect.DeepEqual(sa, sb) {
			t.Fatalf("step %d: keeping records changed the series", i)
		}
		if a.TakeRecords() != nil {
			t.Fatal("records kept without Options.Records")
		}
		got := b.TakeRecords()
		for _, r := range got {
			if r.Arrival.After(ts) || !r.Arrival.After(ts.Add(-o.Interval)) {
				t.Fatalf("record at %v outside its step (%v]", r.Arrival, ts)
			}
		}
		recs = append(recs, got...)
		last = sb
	}
	type key struct{ inst, what string }
	sums := map[key]float64{}
	seen := map[string]uint64{}
	for _, r := range recs {
		if r.Seq != seen[r.Instance] {
			t.Fatalf("%s: record Seq %d, want %d", r.Instance, r.Seq, seen[r.Instance])
		}
		seen[r.Instance]++
		sums[key{r.Instance, "vllm:e2e_request_latency_seconds_count"}]++
		sums[key{r.Instance, "vllm:e2e_request_latency_seconds_sum"}] += r.E2E()
		sums[key{r.Instance, "vllm:time_to_first_token_seconds_sum"}] += r.TTFT()
		sums[key{r.Instance, "vllm:request_queue_time_seconds_sum"}] += r.Queue
		sums[key{r.Instance, "vllm:request_prefill_time_seconds_sum"}] += r.Prefill
		sums[key{r.Instance, "vllm:request_decode_time_seconds_sum"}] += r.Decode
		sums[key{r.Instance, "vllm:prompt_tokens_total"}] += float64(r.PromptTokens)
	}
	checked := 0
	for _, s := range last {
		k := key{s.Labels.Get(labelInstance), s.Labels.Get(model.MetricNameLabel)}
		want, ok := sums[k]
		if !ok || s.Labels.Get(labelJob) != "vllm" {
			continue
		}
		if got := s.Samples[0].V; math.Abs(got-want) > 1e-9*math.Max(1, want) {
			t.Errorf("%s %s: series %v, records %v", k.inst, k.what, got, want)
		}
		checked++
	}
	if checked != 6*7 {
		t.Fatalf("checked %d series, want 42 (6 instances × 7)", checked)
	}
	for _, r := range recs[:3] {
		if !strings.HasSuffix(r.Instance, ":8000") || r.Model == "" || r.Job != "vllm" {
			t.Fatalf("record labels %q %q %q", r.Model, r.Instance, r.Job)
		}
	}
}

// Run with Resume sends the steps after it and no earlier, and reports
// each acknowledged step through Sent; records follow their series.
func TestRunResumesAfterCursor(t *testing.T) {
	const interval = 20 * time.Millisecond
	var mu sync.Mutex
	var minT int64 = math.MaxInt64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := decodeV2(t, body)
		mu.Lock()
		for _, s := range d.series {
			for _, x := range s.Samples {
				minT = min(minT, x.T)
			}
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resume := time.Now().Add(-10 * interval).Truncate(interval)
	var sent []time.Time
	var recs int
	o := Options{
		URL: srv.URL, Interval: interval, Models: []Model{queueModel(200)}, InstancesPerModel: 1,
		Backfill: time.Hour, Resume: resume, Logger: slog.New(slog.DiscardHandler), Records: true,
		RecordSink: func(_ context.Context, r []Record) error {
			mu.Lock()
			recs += len(r)
			mu.Unlock()
			return nil
		},
		Sent: func(ts time.Time) {
			mu.Lock()
			sent = append(sent, ts)
			if len(sent) >= 5 {
				cancel()
			}
			mu.Unlock()
		},
	}
	if err := mustNew(t, o).Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := resume.Add(interval).UnixMilli(); minT != want {
		t.Fatalf("first sample at %d, want %d (the step after the cursor; Backfill ignored)", minT, want)
	}
	if len(sent) < 5 || !sent[0].After(resume) {
		t.Fatalf("Sent got %v", sent)
	}
	for i := 1; i < len(sent); i++ {
		if !sent[i].After(sent[i-1]) {
			t.Fatalf("Sent went back: %v", sent)
		}
	}
	if recs == 0 {
		t.Fatal("no records reached the sink")
	}
}

// Push counts what a refusing server did not take and fails.
func TestPushCountsRefusedSamples(t *testing.T) {
	inc := smallIncident(t)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n%2 == 0 {
			http.Error(w, "out of bounds", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	inc.sim.opts.Logger = slog.New(slog.DiscardHandler)
	st, err := inc.Push(context.Background(), srv.URL)
	total := 0
	for _, s := range inc.Series {
		total += len(s.Samples) + len(s.Histograms)
	}
	if err == nil || st.Rejected == 0 || st.Accepted == 0 || st.Accepted+st.Rejected != total {
		t.Fatalf("push into a half-refusing server: %+v, %v (total %d)", st, err, total)
	}
}

// Scenario labels land on every series and in the truth's query; the
// instance prefix renames every instance.
func TestScenarioLabelsAndPrefix(t *testing.T) {
	sc := Scenario{
		Fault: FaultGPUThrottle, Seed: 3, Length: 30 * time.Minute,
		Labels: map[string]string{"cluster": "sim-x"}, InstancePrefix: "sim-x/",
	}
	inc, err := sc.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range inc.Series {
		if s.Labels.Get("cluster") != "sim-x" || !strings.HasPrefix(s.Labels.Get(labelInstance), "sim-x/") {
			t.Fatalf("series %s lacks the scenario's labels", s.Labels)
		}
	}
	if !strings.Contains(inc.Truth.RootCause.Query, `cluster="sim-x"`) || !strings.HasPrefix(inc.Truth.Instance, "sim-x/") {
		t.Fatalf("truth %+v", inc.Truth.RootCause)
	}
	for _, sig := range inc.Signals() {
		if len(sig.Values) == 0 || !strings.Contains(sig.Query, `cluster="sim-x"`) {
			t.Fatalf("signal %s: %d values, query %s", sig.Name, len(sig.Values), sig.Query)
		}
	}
	if _, err := (Scenario{Labels: map[string]string{"instance": "x"}}).Generate(); err == nil {
		t.Fatal("a label the series carry was accepted")
	}
}
