package rca

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tailroot/tailroot/attribution/causal"
)

func TestHarmfulDirection(t *testing.T) {
	for _, c := range []struct {
		metric, unit, help string
		want               Direction
	}{
		{"vllm:time_to_first_token_seconds", "", "", DirectionUp},
		{"vllm:time_to_first_token_seconds_bucket", "", "", DirectionUp},
		{"vllm:time_per_output_token_seconds", "", "", DirectionUp},
		{"vllm:inter_token_latency_seconds", "", "", DirectionUp},
		{"vllm:e2e_request_latency_seconds", "", "", DirectionUp},
		{"vllm:num_requests_waiting", "", "", DirectionUp},
		{"vllm:kv_cache_usage_perc", "", "", DirectionUp},
		{"node_pressure_cpu_waiting_seconds_total", "", "", DirectionUp},
		{"vllm:request_failure_total", "", "", DirectionUp},
		{"http_request_errors_total", "", "", DirectionUp},
		{"vllm:num_preemptions_total", "", "", DirectionUp},
		{"vllm:generation_tokens_total", "", "", DirectionDown},
		{"vllm:request_success_total", "", "", DirectionDown},
		{"tgi_batch_throughput", "", "", DirectionDown},
		{"output_tokens_per_second", "", "", DirectionDown},
		{"DCGM_FI_DEV_SM_CLOCK", "", "", DirectionBoth},
		{"DCGM_FI_DEV_GPU_TEMP", "", "", DirectionBoth},
		{"{}", "", "", DirectionBoth},
		// Metadata decides where the name says nothing.
		{"job_p99", "seconds", "", DirectionUp},
		{"gen_rate", "", "Generated tokens per second.", DirectionDown},
		{"x", "", "Time spent waiting.", DirectionUp},
	} {
		if got := HarmfulDirection(c.metric, c.unit, c.help); got != c.want {
			t.Errorf("HarmfulDirection(%q, %q, %q) = %q, want %q", c.metric, c.unit, c.help, got, c.want)
		}
	}
	for _, s := range []string{"", "up", "DOWN", " both "} {
		if _, err := ParseDirection(s); err != nil {
			t.Errorf("ParseDirection(%q): %v", s, err)
		}
	}
	if _, err := ParseDirection("sideways"); err == nil || !strings.Contains(err.Error(), "sideways") {
		t.Errorf("ParseDirection(sideways): %v", err)
	}
}

// TestRankDirection: a latency target that falls at a clock's step (the
// GPU got faster) is "no incident" with a reason that says it improved;
// the same data with DirectionBoth, or named as a throughput (a fall is
// the harm), is an incident with the clock first. A rise elsewhere in
// the window, smaller than the fall, is found by the directed split.
func TestRankDirection(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	n, at := 480, 300
	clock, target := make([]float64, n), make([]float64, n)
	for i := range n {
		clock[i] = 1500 - math.Abs(25*r.NormFloat64())
		if i >= at {
			clock[i] += 400 // faster: latency falls
		}
		target[i] = 0.05*1980/clock[i] + 0.0005*r.NormFloat64()
	}
	cands := []Candidate{{Name: "clock", Metric: "DCGM_FI_DEV_SM_CLOCK", Labels: map[string]string{"Hostname": "gpu-1"}, Values: clock}}
	for _, c := range []struct {
		name string
		dir  Direction
		want string
	}{
		{"vllm:time_to_first_token_seconds", "", VerdictNoIncident},
		{"vllm:time_to_first_token_seconds", DirectionUp, VerdictNoIncident},
		{"vllm:time_to_first_token_seconds", DirectionBoth, VerdictIncident},
		{"vllm:time_to_first_token_seconds", DirectionDown, VerdictIncident},
		{"output_tokens_per_second", "", VerdictIncident},
	} {
		res, err := Rank(causal.Series{Name: c.name, Values: target}, cands, Options{Direction: c.dir})
		if err != nil {
			t.Fatal(err)
		}
		wantDir := c.dir
		if wantDir == "" {
			wantDir = HarmfulDirection(c.name, "", "")
		}
		if res.Verdict != c.want || res.Direction != wantDir {
			t.Errorf("%s direction %q: verdict %q (%s) direction %q, want %q", c.name, c.dir, res.Verdict, res.VerdictReason, res.Direction, c.want)
		}
		if res.Verdict == VerdictNoIncident && (res.Why != WhyImproved || !strings.Contains(res.VerdictReason, "improved")) {
			t.Errorf("%s direction %q: reason %q does not say the target improved", c.name, c.dir, res.VerdictReason)
		}
		if res.Verdict == VerdictIncident && (res.Ranking[0].Name != "clock" || res.Why != WhyChanged || !strings.Contains(res.VerdictReason, "fell")) {
			t.Errorf("%s direction %q: %s first, reason %q", c.name, c.dir, res.Ranking[0].Name, res.VerdictReason)
		}
	}
	if _, err := Rank(causal.Series{Name: "x", Values: target}, cands, Options{Direction: "sideways"}); err == nil {
		t.Error("direction sideways: no error")
	}

	// A fall of 6 noise sd at index 150, then a rise of 5 at 300: the
	// undirected split takes the fall, the directed one the rise.
	x := make([]float64, n)
	for i := range x {
		x[i] = 10 + r.NormFloat64()
		if i >= 150 {
			x[i] -= 6
		}
		if i >= 300 {
			x[i] += 5
		}
	}
	s := causal.Series{Name: "x", Values: x}
	both, _ := Onset(s, "", 0)
	up, _ := OnsetDirected(s, "", 0, DirectionUp)
	if both.Shift >= 0 || both.At < 140 || both.At > 160 || up.Shift <= 0 || up.At < 290 || up.At > 310 {
		t.Errorf("undirected split at %d shift %v; directed up at %d shift %v, want near 150 (fall) and 300 (rise)", both.At, both.Shift, up.At, up.Shift)
	}
}
