package rca_test

import (
	"fmt"
	"testing"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/sim"
)

// benchCandidates returns n candidates over two hours at 15 s (479 points)
// from a simulated fleet of eight instances with a GPU throttle on one, and
// the target.
func benchCandidates(b *testing.B, n int) (causal.Series, []rca.Candidate) {
	b.Helper()
	o := sim.Options{InstancesPerModel: 8}
	inc, err := sim.Scenario{Fault: sim.FaultGPUThrottle, Instance: 3, Seed: 5, Options: o}.Generate()
	if err != nil {
		b.Fatal(err)
	}
	var cands []rca.Candidate
	for _, s := range inc.Signals() {
		cands = append(cands, rca.Candidate{
			Name: s.Name, Metric: s.Metric, Node: s.Node,
			Labels: map[string]string{"instance": s.Instance}, Values: s.Values,
		})
	}
	if len(cands) < n {
		b.Fatalf("%d candidates, want %d", len(cands), n)
	}
	t := inc.Target()
	return causal.Series{Name: t.Name, Values: t.Values}, cands[:n]
}

// BenchmarkRank ranks 200 candidate series of two hours at 15 s, change
// point detection included.
func BenchmarkRank(b *testing.B) {
	for _, n := range []int{50, 200} {
		b.Run(fmt.Sprintf("candidates=%d", n), func(b *testing.B) {
			target, cands := benchCandidates(b, n)
			var sink *rca.Result
			b.ReportAllocs()
			for b.Loop() {
				r, err := rca.Rank(target, cands, rca.Options{})
				if err != nil {
					b.Fatal(err)
				}
				sink = r
			}
			_ = sink
		})
	}
}
