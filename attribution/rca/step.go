package rca

import (
	"fmt"
	"math"
	"slices"

	"github.com/tailroot/tailroot/attribution/causal"
)

// An incident is a change that arrives as a step and persists; load that
// wanders (an AR process with a correlation time of minutes) moves a
// latency as much over an hour without ever stepping. The least-squares
// split and its z statistic cannot tell the two apart: a slow wander is a
// mean shift for every split. What tells them apart is the local jump at
// the split — the mean of the stepWindow points after it minus the mean
// of the stepWindow points before — against the same difference taken at
// every other place of the window, which is what the wander alone makes.
const (
	// stepWindow is the half-width of the local jump: five minutes at
	// 15 s, longer than a 1-minute rate window and a fault's ramp.
	stepWindow = 20
	// minStepJump is how far, in robust standard deviations (1.4826 ×
	// MAD) of the window's other local jumps, the jump at a split must
	// stand out to count as a step: the pointwise 5 % point, rounded.
	minStepJump = 2
	// minStepZ is the bar for a root cause's own split: the 95 % point of
	// the largest split of pure noise, as for the target (MinTargetZ).
	minStepZ = 3
)

// stepped reports whether a change at k of the target (by shift) is a
// step — the target's local jump at k stands out the same way (localJump ≥ minStepJump) — or is
// carried by one: the root cause's own least-squares split is clear
// (|z| ≥ minStepZ) and its local jump there stands out. Otherwise it
// describes what wandered. On the values, not ranks: ranks squeeze a
// large step into the range of the wander around it.
//
// load says the root cause is an arrival rate (the graph's load node),
// more load is the harm and the target's change is clear on its own (not
// corroborated): then a persistent rise of its split (z ≥
// loadStepZ) counts as the step whatever its local jump, because a mild
// surge is about as large as the jumps of the load's own five-minute wander
// but, unlike the wander, holds (loadstep.go).
func stepped(target []float64, k int, shift float64, cause []float64, load bool) (bool, string) {
	tj := localJump(target, k)
	if math.IsNaN(tj) || tj*shift > 0 && math.Abs(tj) >= minStepJump {
		return true, ""
	}
	c, err := Onset(causal.Series{Name: "cause", Values: cause}, MethodMeanShift, 0)
	if err != nil {
		return true, ""
	}
	if load && c.Z >= loadStepZ {
		return true, ""
	}
	// The jump is taken where the cause stepped: its split on ranks, its
	// split on values (ranks squeeze a large step, so their split can land
	// tens of points away from it), or the target's change, whichever
	// stands out most the same way.
	cj := localJump(cause, c.At)
	vk, _ := newCumsum(cause).bestSplit(0, len(cause), 2, len(cause)-2)
	for _, at := range []int{k, vk} {
		if kj := localJump(cause, at); kj*c.Z > 0 && math.Abs(kj) > math.Abs(cj) {
			cj = kj
		}
	}
	if math.IsNaN(cj) || (math.Abs(c.Z) >= minStepZ && cj*c.Z > 0 && math.Abs(cj) >= minStepJump) {
		return true, ""
	}
	return false, fmt.Sprintf("neither it (local jump %.2f) nor its first root cause (split z = %.2f, local jump %.2f) stepped", tj, c.Z, cj)
}

// localJump is the jump of x at k (mean of the w points from k on minus
// the mean of the w before, w = stepWindow or less near the ends) in
// robust standard deviations of the same jump at every place of the window
// more than w from k. NaN when fewer than 4 points lie on a side (too
// short to judge, which counts as a step); ±Inf when the other jumps are
// all equal (a constant series that stepped). When more than half of them
// are equal the MAD is 0 and their root-mean-square deviation from the
// median stands in.
func localJump(x []float64, k int) float64 {
	n := len(x)
	w := min(stepWindow, k, n-k)
	if w < 4 {
		return math.NaN()
	}
	cs := newCumsum(x)
	jump := func(i int) float64 { return cs.mean(i, i+w) - cs.mean(i-w, i) }
	var others []float64
	for i := w; i+w <= n; i++ {
		if i < k-w || i > k+w {
			others = append(others, jump(i))
		}
	}
	if len(others) < 2*w {
		return math.NaN()
	}
	slices.Sort(others)
	med := quantileSorted(others, 0.5)
	for i, v := range others {
		others[i] = math.Abs(v - med)
	}
	slices.Sort(others)
	sd := 1.4826 * quantileSorted(others, 0.5)
	if !(sd > 0) {
		// Over half the jumps equal (a queue that is mostly empty): the
		// MAD says nothing, the standard deviation still does.
		ss := 0.0
		for _, v := range others {
			ss += v * v
		}
		sd = math.Sqrt(ss / float64(len(others)))
	}
	d := jump(k) - med
	if !(sd > 0) {
		if d == 0 {
			return 0
		}
		return math.Copysign(math.Inf(1), d)
	}
	return d / sd
}
