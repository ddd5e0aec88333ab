package rca

import (
	"fmt"
	"math"
	"strings"

	"github.com/tailroot/tailroot/attribution/causal"
)

// A mild load surge on one host of a fleet barely moves the fleet's
// latency (a 15 % surge on one of two hosts moves the mean TTFT by 1–4 %,
// pointwise |z| 0.3–1.7), but the surge itself is plain in the arrival
// rate: an exogenous input the service does not move. The rule SREs use
// — "the request rate stepped, and latency went up after it" — is the
// load-step rule here:
//
//   - a candidate on the graph's load node (an arrival rate) rose with a
//     persistent least-squares split (|z| ≥ loadStepZ, stricter than
//     the target's 3: here it is the evidence) and a clear local jump
//     there against its own wander (localJump ≥ loadStepJump, stricter
//     than minStepJump: the load's five-minute means wander by about as
//     much as a mild surge, and only a jump above most of its wander's
//     counts);
//   - the target moved the harmful way at that split (pointwise shift
//     statistic ≥ loadStepTargetZ, one-sided: modest evidence, which the
//     input's step backs);
//   - ranked at that split, the load candidate is the first root cause
//     (it passes the causal checks, in particular a stage it acts on
//     moved, and nothing upstream explains it).
//
// Then the answer is VerdictIncident with Why WhyLoadStep. And when the
// target's own change is clear but its local jump is not, an arrival
// rate as the first root cause with a persistent split (|z| ≥ loadStepZ)
// counts as the step (stepped): wander moves a rate slowly, a surge holds.
// The bars were set on the development seeds (fleet 100–179, where no
// fault-free window reaches them) and judged on held-out seeds
// (docs/causal.md).
const (
	loadStepZ       = 4
	loadStepJump    = 2.5
	loadStepTargetZ = 0.5
)

// loadStepMethod prefixes Change.Method of a change time the load-step
// rule proposed.
const loadStepMethod = "load step of "

// isLoadNode reports whether node is the graph's arrival-rate node.
func isLoadNode(node string) bool { return node == "load" }

// loadSteps proposes the change times of arrival-rate candidates that
// rose persistently and clearly (see the rule above), strongest own split
// first, each as a Change of the target at that split. dir is the
// target's harmful direction: only a direction in which more load is the
// harm (up, or both) takes part.
func loadSteps(target causal.Series, cands []Candidate, opts Options, dir Direction) []Change {
	if dir == DirectionDown {
		return nil // a throughput target rises with load: a surge is no harm
	}
	at := newTargetSplits(target.Values)
	var props []proposal
	for _, c := range cands {
		node := c.graphNode()
		if !isLoadNode(node) {
			continue
		}
		own, err := Onset(causal.Series{Name: c.Name, Values: c.Values}, MethodMeanShift, opts.MinBefore)
		if err != nil || own.Z < loadStepZ {
			continue
		}
		if j := localJump(c.Values, own.At); !(j >= loadStepJump) {
			continue
		}
		z, _, shift := at.split(own.At)
		if !dir.harmful(shift) || math.Abs(z) < loadStepTargetZ || z*shift < 0 {
			continue
		}
		props = append(props, proposal{Change{At: own.At, Low: own.Low, High: own.High, Shift: shift, Z: z, Prob: math.NaN(), Method: loadStepMethod + c.Name}, own.Z})
	}
	strongestFirst(props)
	out := make([]Change, len(props))
	for i, p := range props {
		out[i] = p.ch
	}
	return out
}

// loadStepVerdict turns a ranking at a load-step change time into an
// incident when its first root cause (tier 0) is the arrival rate that
// proposed it, and reports whether it did.
func loadStepVerdict(res *Result, first *Ranked, tier int, cause []float64, pre float64, dir Direction, minBefore int) bool {
	name, ok := strings.CutPrefix(res.Change.Method, loadStepMethod)
	if !ok || tier != 0 || first.Name != name || !isLoadNode(first.Node) {
		return false
	}
	own, err := Onset(causal.Series{Name: name, Values: cause}, MethodMeanShift, minBefore)
	if err != nil {
		return false
	}
	res.Verdict, res.Why = VerdictIncident, WhyLoadStep
	res.VerdictReason = changeWords(res.Change, pre, dir) + fmt.Sprintf(
		", too small to stand alone, but the arrival rate %s stepped there (split z = %.2f, local jump %.2f): the load stepped",
		name, own.Z, localJump(cause, res.Change.At))
	return true
}
