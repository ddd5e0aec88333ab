package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

func smallIncident(t *testing.T) *Incident {
	t.Helper()
	inc, err := Scenario{Fault: FaultNoisyIO, Seed: 2, Length: 10 * time.Minute, FaultAt: 5 * time.Minute}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return inc
}

// TestWriteOpenMetricsParses reads the output back with Prometheus'
// OpenMetrics parser: every float sample of every series comes back with
// its timestamp and value, and the file ends with # EOF.
func TestWriteOpenMetricsParses(t *testing.T) {
	inc := smallIncident(t)
	var buf bytes.Buffer
	if err := inc.WriteOpenMetrics(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(buf.Bytes(), []byte("# EOF\n")) {
		t.Fatal("output does not end with # EOF")
	}
	want := map[string][]Sample{}
	for _, s := range inc.Series {
		want[s.Labels.String()] = s.Samples
	}
	got := map[string][]Sample{}
	p := textparse.NewOpenMetricsParser(buf.Bytes(), labels.NewSymbolTable())
	types := 0
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		switch e {
		case textparse.EntryType:
			types++
		case textparse.EntrySeries:
			_, ts, v := p.Series()
			if ts == nil {
				t.Fatal("sample without a timestamp")
			}
			var ls labels.Labels
			p.Labels(&ls)
			got[ls.String()] = append(got[ls.String()], Sample{T: *ts, V: v})
		}
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %d series, wrote %d", len(got), len(want))
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Fatalf("%s: parsed %d samples differing from the %d written", k, len(got[k]), len(w))
		}
	}
	if types == 0 {
		t.Error("no # TYPE lines")
	}
}

// TestIncidentPush sends an incident to a remote-write receiver: every
// sample arrives once.
func TestIncidentPush(t *testing.T) {
	inc := smallIncident(t)
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checkHeaders(t, r, ProtoMsgV2)
		body, _ := io.ReadAll(r.Body)
		d := decodeV2(t, body)
		mu.Lock()
		for _, s := range d.series {
			seen[s.Labels.String()] += len(s.Samples)
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	st, err := inc.Push(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, s := range inc.Series {
		want += len(s.Samples) + len(s.Histograms)
	}
	if st.Accepted != want || st.Rejected != 0 {
		t.Fatalf("push stats %+v, want %d accepted", st, want)
	}
	if len(seen) != len(inc.Series) {
		t.Fatalf("receiver saw %d series, want %d", len(seen), len(inc.Series))
	}
	for _, s := range inc.Series {
		if seen[s.Labels.String()] != len(inc.Times) {
			t.Fatalf("%s: %d samples arrived, want %d", s.Labels, seen[s.Labels.String()], len(inc.Times))
		}
	}
	if _, err := inc.Push(context.Background(), ""); err == nil {
		t.Error("push to an empty URL accepted")
	}
}

func TestScenarioDeterministicAndTruthJSON(t *testing.T) {
	a, b := smallIncident(t), smallIncident(t)
	if !reflect.DeepEqual(a.Series, b.Series) || !reflect.DeepEqual(a.Truth, b.Truth) {
		t.Fatal("the same scenario generated twice differs")
	}
	js, err := json.Marshal(a.Truth)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"fault":"noisy_io"`, `"instance":"llama-3-1-8b-instruct-0:8000"`, `"step_seconds":15`,
		`"start":"2025-03-04T12:35:00Z"`, `"root_cause":{"metric":"tailroot_block_io_latency_seconds","node":"block_io"`,
		`"query":"sum(rate(tailroot_block_io_latency_seconds_sum{instance=\"llama-3-1-8b-instruct-0:8000\"}[30s]))`,
	} {
		if !strings.Contains(string(js), want) {
			t.Errorf("truth JSON lacks %s:\n%s", want, js)
		}
	}
}

// TestCovariateSeriesInvariants: the agent's histograms are cumulative,
// _count equals the +Inf bucket, and every counter-like series never
// decreases; the agent and DCGM series carry the server's instance.
func TestCovariateSeriesInvariants(t *testing.T) {
	inc := smallIncident(t)
	type hkey struct{ name, inst string }
	inf := map[hkey][]float64{}
	count := map[hkey][]float64{}
	agent, dcgm := 0, 0
	for _, s := range inc.Series {
		name := s.Labels.Get(model.MetricNameLabel)
		switch s.Labels.Get("job") {
		case "tailroot-agent":
			agent++
		case "dcgm-exporter":
			dcgm++
			if s.Labels.Get("gpu") != "0" {
				t.Errorf("%s: no gpu label", s.Labels)
			}
		default:
			continue
		}
		if s.Labels.Get("instance") == "" || s.Labels.Get("model_name") == "" {
			t.Errorf("%s: no instance or model_name", s.Labels)
		}
		cumulative := strings.HasSuffix(name, "_bucket") || strings.HasSuffix(name, "_sum") ||
			strings.HasSuffix(name, "_count") || strings.HasSuffix(name, "_total")
		for i := 1; cumulative && i < len(s.Samples); i++ {
			if s.Samples[i].V < s.Samples[i-1].V {
				t.Fatalf("%s fell at sample %d", s.Labels, i)
			}
		}
		k := hkey{strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), s.Labels.Get("instance")}
		vals := make([]float64, len(s.Samples))
		for i, x := range s.Samples {
			vals[i] = x.V
		}
		switch {
		case strings.HasSuffix(name, "_bucket") && s.Labels.Get("le") == "+Inf":
			inf[k] = vals
		case strings.HasSuffix(name, "_count"):
			count[k] = vals
		}
	}
	// Per instance: 4 histograms of 23 bounds + +Inf + _sum + _count, a
	// counter; 5 DCGM gauges.
	if agent != 2*(4*(len(agentBuckets)+3)+1) || dcgm != 2*5 {
		t.Errorf("%d agent and %d DCGM series, want %d and 10", agent, dcgm, 2*(4*(len(agentBuckets)+3)+1))
	}
	if len(count) != 8 {
		t.Fatalf("%d agent histograms, want 8", len(count))
	}
	for k, c := range count {
		if !reflect.DeepEqual(c, inf[k]) {
			t.Errorf("%v: _count differs from the +Inf bucket", k)
		}
		if c[len(c)-1] == 0 {
			t.Errorf("%v: no observations", k)
		}
	}
}

// TestSignalsDerivation checks Signals against the raw series by hand for
// one step: a rate is Δ/15 s summed over finished_reason, a mean
// Δ_sum/Δ_count, and the frontend residual TTFT − queue − prefill.
func TestSignalsDerivation(t *testing.T) {
	inc := smallIncident(t)
	const j = 12 // signal j covers steps j → j+1
	inst := inc.Truth.Instance
	raw := func(name string, extra ...string) (d float64) {
		for _, s := range inc.Series {
			if s.Labels.Get(model.MetricNameLabel) != name || s.Labels.Get("instance") != inst {
				continue
			}
			match := true
			for i := 0; i+1 < len(extra); i += 2 {
				match = match && s.Labels.Get(extra[i]) == extra[i+1]
			}
			if match {
				d += s.Samples[j+1].V - s.Samples[j].V
			}
		}
		return d
	}
	sig := map[string]float64{}
	for _, s := range inc.Signals() {
		if strings.Contains(s.Name, strconv.Quote(inst)) {
			sig[s.Metric] = s.Values[j]
		}
	}
	succ := (raw("vllm:request_success_total", "finished_reason", "stop") + raw("vllm:request_success_total", "finished_reason", "length") +
		raw("vllm:request_success_total", "finished_reason", "abort")) / 15
	if sig["vllm:request_success_total"] != succ {
		t.Errorf("success rate %v, by hand %v", sig["vllm:request_success_total"], succ)
	}
	mean := func(m string) float64 { return raw(m+"_sum") / raw(m+"_count") }
	for _, m := range []string{"vllm:request_queue_time_seconds", "tailroot_block_io_latency_seconds"} {
		if sig[m] != mean(m) {
			t.Errorf("%s mean %v, by hand %v", m, sig[m], mean(m))
		}
	}
	front := mean("vllm:time_to_first_token_seconds") - mean("vllm:request_queue_time_seconds") - mean("vllm:request_prefill_time_seconds")
	if sig[FrontendResidual] != front {
		t.Errorf("frontend residual %v, by hand %v", sig[FrontendResidual], front)
	}
	if len(sig) != len(signalDefs)+1 {
		t.Errorf("%d signals per instance, want %d", len(sig), len(signalDefs)+1)
	}
}
