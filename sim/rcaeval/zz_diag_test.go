package rcaeval

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/tailroot/tailroot/attribution/rca"
	"github.com/tailroot/tailroot/sim/fleet"
)

func TestZZDiag(t *testing.T) {
	c := os.Getenv("DIAG_CLASS")
	if c == "" {
		t.Skip()
	}
	s, _ := strconv.Atoi(os.Getenv("DIAG_SEED"))
	inc, err := fleet.Generate(fleet.Class(c), uint64(s))
	if err != nil {
		t.Fatal(err)
	}
	target, rc := fleetInputs(inc)
	res, err := rca.Rank(target, rc, rca.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("truth %+v\nverdict %s: %s\nchange %+v\n", inc.Truth, res.Verdict, res.VerdictReason, res.Change)
	for i, r := range res.Ranking {
		if i >= 8 {
			break
		}
		fmt.Printf("%d %s node=%s shift=%.2f score=%.1f p=%.2g anom=%v expl=%q prec=%v inf=%v\n   %s\n", r.Rank, r.Name, r.Node, r.Shift, r.Score, r.PValue, r.Anomalous, r.Explained, r.Precedes, r.Informative, r.Reason)
	}
	for _, r := range res.Ranking[:6] {
		for _, cd := range rc {
			if cd.Name == r.Name {
				ok, w := rca.ZZStepped(target.Values, res.Change.At, res.Change.Shift, cd.Values)
				fmt.Printf("stepped %s tj=%.2f: %v %s\n", r.Name[:50], rca.ZZJump(target.Values, res.Change.At), ok, w)
			}
		}
	}
	for _, b := range res.Baseline[:3] {
		fmt.Printf("baro %s %.1f\n", b.Name, b.Score)
	}
}
