package rca

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tailroot/tailroot/attribution/causal"
)

// TestRankRootCauseThatExplainsFirst: a GPU clock drops and slows the
// decode time, which moves the target; a network burst (mapped to the
// network node, with no frontend stage candidate to show it did nothing)
// jumps ×20 at the same moment. Both pass the checks and nothing upstream
// explains either; the burst shifts far more, but only the clock explains
// another anomaly (the decode time), so it ranks first.
func TestRankRootCauseThatExplainsFirst(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	n, at := 480, 300
	clock, decode, burst, target := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		clock[i] = 1980 - math.Abs(25*r.NormFloat64())
		burst[i] = 3e6 * math.Exp(0.1*r.NormFloat64())
		if i >= at {
			clock[i] -= 500
			burst[i] *= 20
		}
		decode[i] = 2.4*1980/clock[i] + 0.02*r.NormFloat64()
		target[i] = 0.08 + 0.02*decode[i] + 0.001*r.NormFloat64()
	}
	cands := []Candidate{
		{Name: "burst", Metric: "node_network_transmit_bytes_total", Labels: map[string]string{"instance": "gpu-1:9100"}, Values: burst},
		{Name: "clock", Metric: "DCGM_FI_DEV_SM_CLOCK", Labels: map[string]string{"Hostname": "gpu-1"}, Values: clock},
		{Name: "decode", Metric: "vllm:request_decode_time_seconds", Labels: map[string]string{"instance": "gpu-1:8000"}, Values: decode},
	}
	res, err := Rank(causal.Series{Name: "vllm:e2e_request_latency_seconds", Values: target}, cands, Options{})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Ranked{}
	for _, x := range res.Ranking {
		by[x.Name] = x
	}
	b, c := by["burst"], by["clock"]
	if !b.Anomalous || b.Bypassed || b.Explained != "" || b.Shift <= c.Shift {
		t.Fatalf("the burst must be an unexplained, not bypassed anomaly shifting more than the clock: %+v", b)
	}
	if res.Verdict != VerdictIncident || res.Ranking[0].Name != "clock" || by["decode"].Explained != "clock" {
		t.Errorf("verdict %s, ranking %v, decode explained by %q; burst: %s", res.Verdict, names(res.Ranking), by["decode"].Explained, b.Reason)
	}
}

// TestRankMildSurgeNotBypassed: a request rate steps by 15 % and the
// queue time follows by a sustained 1–2 IQR, under the 2-IQR floor. The
// queue moved all the same (a sustained step at the change), so the rate
// is not bypassed: it ranks first and explains the queue, instead of the
// queue ranking first as an unexplained root cause.
func TestRankMildSurgeNotBypassed(t *testing.T) {
	n, at := 480, 300
	for seed := uint64(1); seed <= 5; seed++ {
		r := rand.New(rand.NewPCG(seed, 21))
		rate, queue, target := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range n {
			f := 1.0
			if i >= at {
				f = 1.15
			}
			rate[i] = 7 * f * (1 + 0.05*r.NormFloat64())
			queue[i] = 0.03*(rate[i]/7)*(rate[i]/7) + 0.006*r.NormFloat64()
			target[i] = 0.05 + queue[i] + 0.002*r.NormFloat64()
		}
		cands := []Candidate{
			{Name: "queue", Metric: "vllm:request_queue_time_seconds", Labels: map[string]string{"instance": "gpu-1:8000"}, Values: queue},
			{Name: "rate", Metric: "vllm:request_success_total", Labels: map[string]string{"instance": "gpu-1:8000"}, Values: rate},
		}
		res, err := Rank(causal.Series{Name: "vllm:time_to_first_token_seconds", Values: target}, cands, Options{})
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]Ranked{}
		for _, x := range res.Ranking {
			by[x.Name] = x
		}
		q := by["queue"]
		st := newStats(n, res.ChangePoint)
		_, _, raw := st.robust(queue, 0)
		if raw >= 2 || raw < 1 {
			t.Fatalf("seed %d: the queue's own shift is %.2f IQR, want the 1–2 the test is about", seed, raw)
		}
		if res.Verdict != VerdictIncident || res.Ranking[0].Name != "rate" || by["rate"].Bypassed || q.Explained != "rate" {
			t.Errorf("seed %d: verdict %s, ranking %v, rate bypassed %v, queue explained by %q: %s", seed, res.Verdict, names(res.Ranking), by["rate"].Bypassed, q.Explained, by["rate"].Reason)
		}
	}
}
