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
//     its jump no longer stands out (long_prompts 27).
func TestFleetCauseFirst(t *testing.T) {
	for _, tc := range []struct {
		class fleet.Class
		seed  uint64
	}{{fleet.MildThrottle, 27}, {fleet.MildLoadSurge, 27}, {fleet.PageFaults, 162}, {fleet.LongPrompts, 27}, {fleet.NoFault, 148}, {fleet.NoFault, 157}} {
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
