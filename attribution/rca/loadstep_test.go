package rca

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tailroot/tailroot/attribution/causal"
)

// TestLoadSteps checks the load-step proposals on a synthetic request
// rate: independent noise (sd 1) with a step of 3 at k, and a target that
// rises by 0.3 of its noise there. The rate's step is proposed, within a
// few points of k, for a latency target (up) and for either direction,
// never for a throughput target (down, where more load is no harm), and
// not at all when the rate does not step, when the target fell there, or
// when the candidate is not an arrival rate.
func TestLoadSteps(t *testing.T) {
	const n, k = 480, 300
	r := rand.New(rand.NewPCG(5, 9))
	rate, flat, target := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		rate[i], flat[i], target[i] = 100+r.NormFloat64(), 100+r.NormFloat64(), 1+0.1*r.NormFloat64()
		if i >= k {
			rate[i] += 3
			target[i] += 0.03
		}
	}
	tg := causal.Series{Name: "ttft_seconds", Values: target}
	cand := func(metric string, v []float64) []Candidate {
		return []Candidate{{Name: metric, Metric: metric, Labels: map[string]string{"instance": "a:8000"}, Values: v}}
	}
	for _, dir := range []Direction{DirectionUp, DirectionBoth} {
		got := loadSteps(tg, cand("vllm:request_success_total", rate), Options{}, dir)
		if len(got) != 1 || math.Abs(float64(got[0].At-k)) > 5 || !strings.HasPrefix(got[0].Method, loadStepMethod) {
			t.Fatalf("direction %s: proposals %+v, want one within 5 of %d", dir, got, k)
		}
	}
	if got := loadSteps(tg, cand("vllm:request_success_total", rate), Options{}, DirectionDown); len(got) != 0 {
		t.Errorf("direction down: proposals %+v, want none", got)
	}
	if got := loadSteps(tg, cand("vllm:request_success_total", flat), Options{}, DirectionUp); len(got) != 0 {
		t.Errorf("a rate without a step: proposals %+v, want none", got)
	}
	fell := make([]float64, n)
	for i, v := range target {
		fell[i] = 2 - v
	}
	if got := loadSteps(causal.Series{Name: "ttft_seconds", Values: fell}, cand("vllm:request_success_total", rate), Options{}, DirectionUp); len(got) != 0 {
		t.Errorf("a target that fell: proposals %+v, want none", got)
	}
	if got := loadSteps(tg, cand("DCGM_FI_DEV_POWER_USAGE", rate), Options{}, DirectionUp); len(got) != 0 {
		t.Errorf("not an arrival rate: proposals %+v, want none", got)
	}
}
