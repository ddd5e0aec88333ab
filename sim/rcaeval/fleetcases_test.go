package rcaeval

import (
	"testing"

	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/sim/fleet"
)

// TestFleetCauseFirst pins fleet incidents of the development seeds that
// a rule of the ranking fixed, each of which failed without it:
//
//   - an upstream that moved is anomalous (rank.go): the running batch of
//     the faulty host, a cleaner reading of a mild throttle or surge than
//     the clock or the request rate, ranked first while its cause stayed
//     under the anomaly bar (mild_throttle 27, mild_load_surge 27), and it
//     corroborated a wander of a fault-free window (no_fault 148; 157 with
//     the next rule alone);
//   - a proposed change time is the one the causal checks ask "before or
//     with" of (checkCauses): a page-fault storm late in the window was
//     "too late" against the target's own split at an earlier wander, which
//     had been rejected (page_fault_storm 162);
//   - a cause's local jump is also taken at its split on values (stepped):
//     ranks put the split of a prompt-length step ×1.8 23 points late, where
//     its jump no longer stands out (long_prompts 27);
//   - a candidate's own change time is its split on values or, when that
//     lies past the change, on ranks (ownSplit): the surging host's
//     request rate, whose load wandered up again later, split on values
//     45 steps after the surge and ranked "too late" below the running
//     batch it drives (mild_load_surge 26, and 131 behind the GPU
//     utilisation);
//   - an arrival rate under a running batch that moved needs only its
//     family's false discovery rate to count as an upstream that moved
//     (littlesLaw): the surging host's request rate (shift 1.65 IQR,
//     q = 0.018, p = 0.0018 against the Bonferroni 0.05/82) ranked 14th
//     under the batch it drives (mild_load_surge 40).
func TestFleetCauseFirst(t *testing.T) {
	for _, tc := range []struct {
		class fleet.Class
		seed  uint64
	}{{fleet.MildThrottle, 27}, {fleet.MildLoadSurge, 27}, {fleet.PageFaults, 162}, {fleet.LongPrompts, 27}, {fleet.MildLoadSurge, 26}, {fleet.MildLoadSurge, 131}, {fleet.MildLoadSurge, 40}, {fleet.NoFault, 148}, {fleet.NoFault, 157}} {
		inc, target, rc, res := rankFleet(t, tc.class, tc.seed)
		fc, err := scoreFleetCase(inc, tc.class, tc.seed, target, rc, res)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !inc.Truth.Fault && res.Verdict != rca.VerdictNoIncident:
			t.Errorf("%s seed %d: verdict %q (%s), want no incident: %s", tc.class, tc.seed, res.Verdict, res.Why, res.VerdictReason)
		case inc.Truth.Fault && fc.TailrootRank != 1:
			t.Errorf("%s seed %d: verdict %q, cause at rank %d (first %s), want 1: %s", tc.class, tc.seed, res.Verdict, fc.TailrootRank, fc.TailrootTop, res.VerdictReason)
		}
	}
}
