package fleet

import (
	"math"
	"testing"
)

// ttft is the mean TTFT of host over scrapes [a, b) from the _sum/_count
// counters.
func ttft(inc *Incident, host string, a, b int) float64 {
	var sum, cnt []Sample
	for _, s := range inc.Series {
		if s.Labels["instance"] != host+":8000" {
			continue
		}
		switch s.Labels["__name__"] {
		case "vllm:time_to_first_token_seconds_sum":
			sum = s.Samples
		case "vllm:time_to_first_token_seconds_count":
			cnt = s.Samples
		}
	}
	return (sum[b-1].V - sum[a].V) / (cnt[b-1].V - cnt[a].V)
}

// TestClassesMoveTTFT checks the size of each fault on the faulty host's
// mean TTFT (after vs before the onset) and that counters never decrease.
func TestClassesMoveTTFT(t *testing.T) {
	for _, c := range Classes() {
		for seed := uint64(1); seed <= 2; seed++ {
			inc, err := Generate(c, seed)
			if err != nil {
				t.Fatal(err)
			}
			n := len(inc.Series[0].Samples)
			if n != 480 {
				t.Fatalf("%d scrapes, want 480", n)
			}
			for _, s := range inc.Series {
				if len(s.Samples) != n {
					t.Fatalf("%v: %d samples", s.Labels, len(s.Samples))
				}
			}
			host, k := Hosts[0], n/2
			if inc.Truth.Fault {
				host = inc.Truth.Host
				k = int(inc.Truth.Onset.Sub(inc.Start) / inc.Step)
			}
			before, after := ttft(inc, host, 0, k), ttft(inc, host, k+4, n)
			t.Logf("%s/%d: host %s onset %d TTFT %.4f → %.4f (%+.1f%%), %d series", c, seed, host, k, before, after, 100*(after/before-1), len(inc.Series))
			if rel := math.Abs(after/before - 1); c == NoFault && rel > 0.05 || c != NoFault && rel < 0.04 {
				t.Errorf("%s/%d: TTFT moves %.1f%%", c, seed, 100*rel)
			}
		}
	}
	if _, err := Generate("disk_full", 1); err == nil {
		t.Error("unknown class accepted")
	}
}
