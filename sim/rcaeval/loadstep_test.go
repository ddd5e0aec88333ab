package rcaeval

import (
	"testing"

	"github.com/tailroot/tailroot/attribution/causal"
	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/sim/fleet"
)

// TestFleetLoadStep checks the load-step rule (attribution/rca
// loadstep.go) on mild surges of the development seeds that were missed
// without it: a 15 % surge on one host whose fleet TTFT moved too little
// to stand alone (103, 133: "too small"), and one whose TTFT changed
// clearly but whose request rate's local jump stayed inside the load's
// wander (104, 120: "wandered"). Each must now rank the surging host's
// arrival rate first. Fault-free windows 100–119 must stay "no incident":
// the rule must not call load wander a step.
func TestFleetLoadStep(t *testing.T) {
	for _, tc := range []struct {
		seed uint64
		why  string
	}{{103, rca.WhyLoadStep}, {133, rca.WhyLoadStep}, {104, rca.WhyChanged}, {120, rca.WhyChanged}} {
		inc, target, rc, res := rankFleet(t, fleet.MildLoadSurge, tc.seed)
		fc, err := scoreFleetCase(inc, fleet.MildLoadSurge, tc.seed, target, rc, res)
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != rca.VerdictIncident || res.Why != tc.why || fc.TailrootRank != 1 {
			t.Errorf("mild surge seed %d: verdict %q (%s), cause at rank %d, want incident (%s) at rank 1: %s",
				tc.seed, res.Verdict, res.Why, fc.TailrootRank, tc.why, res.VerdictReason)
		}
	}
	for seed := uint64(100); seed < 120; seed++ {
		_, _, _, res := rankFleet(t, fleet.NoFault, seed)
		if res.Verdict != rca.VerdictNoIncident {
			t.Errorf("fault-free seed %d: verdict %q (%s): %s", seed, res.Verdict, res.Why, res.VerdictReason)
		}
	}
}

// rankFleet generates one fleet case and ranks it with the default options.
func rankFleet(t *testing.T, class fleet.Class, seed uint64) (*fleet.Incident, causal.Series, []rca.Candidate, *rca.Result) {
	t.Helper()
	return rankFleetOpts(t, class, seed, rca.Options{})
}

// rankFleetOpts is rankFleet with the ranking's options ro.
func rankFleetOpts(t *testing.T, class fleet.Class, seed uint64, ro rca.Options) (*fleet.Incident, causal.Series, []rca.Candidate, *rca.Result) {
	t.Helper()
	inc, err := fleet.Generate(class, seed)
	if err != nil {
		t.Fatal(err)
	}
	target, rc := fleetInputs(inc)
	res, err := rca.Rank(target, rc, ro)
	if err != nil {
		t.Fatal(err)
	}
	return inc, target, rc, res
}
