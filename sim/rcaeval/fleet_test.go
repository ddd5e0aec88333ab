package rcaeval

import (
	"context"
	"strings"
	"testing"
)

// TestFleetSuite runs the independent incidents (sim/fleet) and checks
// what the ranking achieves there today: better than plain BARO overall,
// "no incident" in at least 90 % of fault-free windows, the least-squares
// change time more accurate than BOCPD's and its 95 % set covering the
// onset in at least 90 % of fault cases. The AC@1 ≥ 0.9 target is
// not met yet (docs/causal.md has the table); the test logs the misses.
func TestFleetSuite(t *testing.T) {
	seeds := 5
	if testing.Short() {
		seeds = 2
	}
	rep, err := RunFleet(context.Background(), FleetOptions{Seeds: seeds})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
	tr, baro, _ := rep.Summaries("")
	if tr.AC1 <= baro.AC1 || tr.Avg5 <= baro.Avg5 {
		t.Errorf("tailroot %v not above BARO %v", tr, baro)
	}
	if share, n := rep.NoIncident(); n == 0 || share < 0.9 {
		t.Errorf("no incident in %.2f of %d fault-free windows, want ≥ 0.9", share, n)
	}
	med, _, cov := rep.OnsetErrors()
	if med["mean_shift"] > med["bocpd"] || med["mean_shift"] > 2 {
		t.Errorf("median change-time error: mean_shift %.2f min, bocpd %.2f", med["mean_shift"], med["bocpd"])
	}
	if cov < 0.9 {
		t.Errorf("least-squares 95%% set covers %.2f of onsets", cov)
	}
	for _, c := range rep.Cases {
		if c.Truth.Fault && c.TailrootRank != 1 {
			t.Logf("miss %s/%d verdict %q rank %d (BARO %d) top %s", c.Class, c.Seed, c.Verdict, c.TailrootRank, c.BARORank, c.TailrootTop)
		}
		if !c.Truth.Fault {
			t.Logf("no fault %d verdict %q top %s", c.Seed, c.Verdict, c.TailrootTop)
		}
	}
}
