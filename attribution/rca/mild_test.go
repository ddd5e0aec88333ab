package rca

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tailroot/tailroot/attribution/causal"
)

// mildIncident is a window where one host's request rate steps by step
// (relative) at index at, with slow wander and white noise, and the target
// (an aggregate latency) follows the rate weakly under noise of its own.
func mildIncident(seed uint64, n, at int, step float64) (target causal.Series, rate, other Candidate) {
	r := rand.New(rand.NewPCG(seed, 12))
	rv, ov, tv := make([]float64, n), make([]float64, n), make([]float64, n)
	wander := 0.0
	for i := range n {
		wander = 0.95*wander + 0.03*math.Sqrt(1-0.95*0.95)*r.NormFloat64()
		f := 1.0
		if i >= at {
			f += step
		}
		rv[i] = 7 * math.Exp(wander) * f * (1 + 0.03*r.NormFloat64())
		ov[i] = 1e6 * math.Exp(0.1*r.NormFloat64())
		tv[i] = 0.08*(1+0.6*(rv[i]/7-1)) + 0.016*r.NormFloat64()
	}
	return causal.Series{Name: "ttft", Values: tv},
		Candidate{Name: "rate", Metric: "vllm:request_success_total", Labels: map[string]string{"instance": "gpu-1:8000"}, Values: rv},
		Candidate{Name: "other", Metric: "backup_uploaded_bytes_total", Labels: map[string]string{"instance": "gpu-1:9256"}, Values: ov}
}

// TestRankMildSustainedShift: over 40 windows a rate steps by 8 % (about
// 1.4–2 IQR of its noise) and moves the target by about 5 %, often under
// |z| = 3 on its own; in 40 more nothing steps. The sustained-step and
// corroboration rules must answer "incident" with the rate first in more
// windows than the target's own |z| ≥ 3 allows (measured: 24 against 18),
// and the fault-free windows must rarely be called incidents (measured: 2
// of 40, both the rate's slow wander).
func TestRankMildSustainedShift(t *testing.T) {
	n, at := 480, 300
	const seeds = 40
	hits, clearHits, corroborated, falseAlarms := 0, 0, 0, 0
	for seed := uint64(1); seed <= seeds; seed++ {
		tgt, rate, other := mildIncident(seed, n, at, 0.08)
		own, err := Onset(tgt, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Rank(tgt, []Candidate{other, rate}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict == VerdictIncident && res.Ranking[0].Name == "rate" {
			hits++
			if math.Abs(own.Z) >= 3 {
				clearHits++
			} else {
				corroborated++
				if res.Change.Low > at+4 || res.Change.High < at-4 {
					t.Errorf("seed %d: change set [%d, %d] misses %d", seed, res.Change.Low, res.Change.High, at)
				}
			}
		}
		tgt, rate, other = mildIncident(seed, n, at, 0)
		if res, err = Rank(tgt, []Candidate{other, rate}, Options{}); err != nil {
			t.Fatal(err)
		}
		if res.Verdict == VerdictIncident {
			falseAlarms++
			t.Logf("fault-free seed %d: incident, %s first: %s", seed, res.Ranking[0].Name, res.Ranking[0].Reason)
		}
	}
	t.Logf("rate first with verdict incident: %d of %d (%d with the target's |z| ≥ 3, %d corroborated); fault-free windows called incidents: %d of %d",
		hits, seeds, clearHits, corroborated, falseAlarms, seeds)
	if corroborated < 4 {
		t.Errorf("corroborated incidents %d, want ≥ 4", corroborated)
	}
	if falseAlarms > 4 {
		t.Errorf("fault-free windows called incidents: %d of %d, want ≤ 4", falseAlarms, seeds)
	}
}
