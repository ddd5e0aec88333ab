package requests

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// TestLoadTrace checks the embedded traces against the counts their README
// states and spot-checks the first rows against the published files.
func TestLoadTrace(t *testing.T) {
	for _, c := range []struct {
		name      string
		n         int
		first     Arrival
		maxOffset time.Duration
	}{
		// azure-llm-2023-code.csv row 1: 2023-11-16 18:17:03.9799600,4808,10.
		{"azure-code", 8819, Arrival{Offset: 0, PromptTokens: 4808, OutputTokens: 10}, 70 * time.Minute},
		// azure-llm-2023-conv.csv row 1: 2023-11-16 18:15:46.6805900,374,44.
		{"azure-conv", 19366, Arrival{Offset: 0, PromptTokens: 374, OutputTokens: 44}, 70 * time.Minute},
		// mooncake row 1: timestamp 0, input 6758, output 500, 14 blocks.
		{"mooncake", 12031, Arrival{Offset: 0, PromptTokens: 6758, OutputTokens: 500}, 70 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			arr, err := LoadTrace(c.name)
			if err != nil {
				t.Fatal(err)
			}
			if len(arr) != c.n {
				t.Fatalf("%d arrivals, want %d", len(arr), c.n)
			}
			a := arr[0]
			if a.Offset != c.first.Offset || a.PromptTokens != c.first.PromptTokens || a.OutputTokens != c.first.OutputTokens {
				t.Errorf("first arrival %+v, want %+v", a, c.first)
			}
			if c.name == "mooncake" && len(a.Blocks) != 14 {
				t.Errorf("first mooncake request has %d blocks, want 14", len(a.Blocks))
			}
			if !slices.IsSortedFunc(arr, func(x, y Arrival) int { return int(x.Offset - y.Offset) }) {
				t.Error("arrivals not sorted")
			}
			if last := arr[len(arr)-1].Offset; last <= 50*time.Minute || last > c.maxOffset {
				t.Errorf("trace spans %v, want about an hour", last)
			}
		})
	}
	// Row 2 of the code trace is 0.052 s after row 1
	// (18:17:04.0319600 − 18:17:03.9799600).
	arr, err := LoadTrace("azure-code")
	if err != nil {
		t.Fatal(err)
	}
	if arr[1].Offset != 52*time.Millisecond {
		t.Errorf("second arrival at %v, want 52ms", arr[1].Offset)
	}
	if _, err := LoadTrace("nope"); err == nil {
		t.Error("unknown trace accepted")
	}
}

// TestSimulateInvariants checks the lifecycle order, the token count and
// that the measured stages never exceed end-to-end, on every trace.
func TestSimulateInvariants(t *testing.T) {
	for _, tr := range Traces {
		reqs, err := Simulate(Options{Trace: tr, Limit: 1500, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) != 1500 {
			t.Fatalf("%s: %d requests", tr, len(reqs))
		}
		ids := map[string]bool{}
		for i, r := range reqs {
			if ids[r.ID] {
				t.Fatalf("%s: duplicate id %s", tr, r.ID)
			}
			ids[r.ID] = true
			chain := []int64{r.Arrival, r.Queued, r.Scheduled, r.FirstToken, r.LastToken, r.Finished}
			if !slices.IsSorted(chain) || r.Scheduled == 0 {
				t.Fatalf("%s request %d: lifecycle out of order %v", tr, i, chain)
			}
			if len(r.TokenTimes) != r.OutputTokens || r.TokenTimes[0] != r.FirstToken || r.TokenTimes[len(r.TokenTimes)-1] != r.LastToken || !slices.IsSorted(r.TokenTimes) {
				t.Fatalf("%s request %d: %d token times for %d tokens", tr, i, len(r.TokenTimes), r.OutputTokens)
			}
			e2e := float64(r.Finished-r.Arrival) / 1e9
			measured := float64(r.Scheduled-r.Queued)/1e9 + float64(r.FirstToken-r.Scheduled)/1e9 +
				float64(r.LastToken-r.FirstToken)/1e9 + r.Tokenize + r.Detokenize + r.Network
			if measured > e2e {
				t.Fatalf("%s request %d: stages %v exceed e2e %v", tr, i, measured, e2e)
			}
			if r.PromptEntropy <= 0 || r.PromptEntropy > math.Log2(float64(min(r.PromptTokens, maxSyntheticPrompt)))+1e-9 {
				t.Fatalf("%s request %d: entropy %v for %d tokens", tr, i, r.PromptEntropy, r.PromptTokens)
			}
		}
		if i := slices.IndexFunc(reqs, func(r Request) bool { return r.Instance != reqs[0].Instance }); i < 0 {
			t.Errorf("%s: every request went to %s", tr, reqs[0].Instance)
		}
	}
}

// TestSimulateDeterministic: the same options give the same requests;
// another seed gives other ids.
func TestSimulateDeterministic(t *testing.T) {
	o := Options{Trace: "mooncake", Limit: 300, Seed: 9}
	a, err := Simulate(o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Simulate(o)
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Finished != b[i].Finished || !slices.Equal(a[i].TokenTimes, b[i].TokenTimes) || a[i].PromptEntropy != b[i].PromptEntropy {
			t.Fatalf("request %d differs between identical runs", i)
		}
	}
	o.Seed = 10
	c, _ := Simulate(o)
	if c[0].ID == a[0].ID {
		t.Error("another seed gave the same id")
	}
	// The prefix cache works on the Mooncake trace: some prompt is served
	// partly from cache.
	if !slices.ContainsFunc(a, func(r Request) bool { return r.CachedTokens > 0 }) {
		t.Error("no Mooncake request hit the prefix cache")
	}
}

// TestQueueGrowsWithLoad: replaying the same trace three times faster
// raises the P99 queue time, which is what a tail breakdown must show.
func TestQueueGrowsWithLoad(t *testing.T) {
	p99Queue := func(speed float64) float64 {
		reqs, err := Simulate(Options{Trace: "azure-code", Limit: 3000, Speedup: speed, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		q := make([]float64, len(reqs))
		for i, r := range reqs {
			q[i] = float64(r.Scheduled - r.Queued)
		}
		slices.Sort(q)
		return q[len(q)*99/100]
	}
	if slow, fast := p99Queue(1), p99Queue(3); !(fast > 1.5*slow) {
		t.Errorf("P99 queue %v ns at 1x, %v ns at 3x: want it to grow with load", slow, fast)
	}
}

// TestAppendNDJSON checks one line field by field against the request it
// encodes, in both token modes.
func TestAppendNDJSON(t *testing.T) {
	r := Request{
		ID: "chatcmpl-1", TraceID: [16]byte{1, 2, 3}, Model: "m", Instance: "vllm-0", Job: "vllm",
		Arrival: 1_700_000_000_000_000_001, Queued: 1_700_000_000_010_000_000, Scheduled: 1_700_000_000_110_000_000,
		FirstToken: 1_700_000_000_410_000_000, LastToken: 1_700_000_000_500_000_000, Finished: 1_700_000_000_520_000_000,
		TokenTimes: []int64{1_700_000_000_410_000_000, 1_700_000_000_430_000_000, 1_700_000_000_500_000_000},
		Tokenize:   0.004, Detokenize: 0.001, Network: 0.002, PromptTokens: 4, OutputTokens: 3, PromptEntropy: 1.5,
	}
	var v map[string]any
	line := r.AppendNDJSON(nil, LineOptions{})
	if !bytes.HasSuffix(line, []byte("}\n")) || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("not one line: %q", line)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if got := v["arrival"].(json.Number).String(); got != "1700000000.000000001" {
		t.Errorf("arrival %s, want 1700000000.000000001", got)
	}
	if got := v["trace_id"]; got != "01020300000000000000000000000000" {
		t.Errorf("trace_id %v", got)
	}
	itl := v["itl"].([]any)
	if len(itl) != 2 || itl[0].(json.Number).String() != "0.02" || itl[1].(json.Number).String() != "0.07" {
		t.Errorf("itl %v, want [0.02 0.07]", itl)
	}
	if v["prompt_entropy"].(json.Number).String() != "1.5" || v["output_tokens"].(json.Number).String() != "3" {
		t.Errorf("entropy %v, output tokens %v", v["prompt_entropy"], v["output_tokens"])
	}
	line = r.AppendNDJSON(nil, LineOptions{TokenTimes: true})
	v = nil
	if err := json.Unmarshal(line, &v); err != nil {
		t.Fatal(err)
	}
	if tt := v["token_times"].([]any); len(tt) != 3 {
		t.Errorf("token_times %v", tt)
	}
	if _, ok := v["itl"]; ok {
		t.Error("itl sent with token_times")
	}
}

// TestAppendSpans checks the span vLLM would emit for a request.
func TestAppendSpans(t *testing.T) {
	reqs, err := Simulate(Options{Trace: "azure-conv", Limit: 50, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	td := ptrace.NewTraces()
	AppendSpans(td, reqs)
	if td.SpanCount() != 50 {
		t.Fatalf("%d spans", td.SpanCount())
	}
	rs := td.ResourceSpans().At(0)
	sp := rs.ScopeSpans().At(0).Spans().At(0)
	r := reqs[0]
	if r.Instance != mustStr(t, rs.Resource().Attributes().AsRaw(), "service.instance.id") {
		t.Fatalf("first resource is not the first request's instance")
	}
	a := sp.Attributes().AsRaw()
	if sp.Name() != "llm_request" || sp.Kind() != ptrace.SpanKindServer || int64(sp.StartTimestamp()) != r.Arrival || int64(sp.EndTimestamp()) != r.Finished {
		t.Errorf("span %s kind %v [%d, %d]", sp.Name(), sp.Kind(), sp.StartTimestamp(), sp.EndTimestamp())
	}
	if a[attrQueue] != float64(r.Scheduled-r.Queued)/1e9 || a[attrTTFT] != float64(r.FirstToken-r.Arrival)/1e9 ||
		a[attrDecode] != float64(r.LastToken-r.FirstToken)/1e9 || a[attrRequestID] != r.ID || a[attrOutputTokens] != int64(r.OutputTokens) {
		t.Errorf("attributes %v for request %+v", a, r)
	}
	if [16]byte(sp.TraceID()) != r.TraceID {
		t.Error("trace id not kept")
	}
}

func mustStr(t *testing.T, m map[string]any, k string) string {
	t.Helper()
	s, ok := m[k].(string)
	if !ok {
		t.Fatalf("attribute %s missing in %v", k, m)
	}
	return s
}
