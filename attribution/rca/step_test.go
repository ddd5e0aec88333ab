package rca

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tailroot/tailroot/attribution/causal"
)

// TestLocalJumpExact checks localJump on series whose jumps are known: a
// ramp jumps by the same w·slope everywhere (no step: 0), a step on the
// ramp stands out infinitely (every other jump equal), and a short
// window is NaN.
func TestLocalJumpExact(t *testing.T) {
	n, k := 200, 120
	ramp, step := make([]float64, n), make([]float64, n)
	for i := range n {
		ramp[i] = float64(i) // integer sums: every jump is exactly 20
		step[i] = ramp[i]
		if i >= k {
			step[i] += 100
		}
	}
	if j := localJump(ramp, k); j != 0 {
		t.Errorf("ramp: local jump %g, want 0", j)
	}
	if j := localJump(step, k); !math.IsInf(j, 1) {
		t.Errorf("step on a ramp: local jump %g, want +Inf", j)
	}
	if j := localJump(step, n-3); !math.IsNaN(j) {
		t.Errorf("3 points after: local jump %g, want NaN", j)
	}
}

// TestSteppedWanderVersusStep: a latency that follows slowly wandering
// load (AR(1), correlation time 20 steps, as the fleet suite's load), and
// a root-cause series that wanders with it, make a mean shift that the
// split's z calls clear (|z| ≥ 3) in about half the windows without any
// step; the step check must turn at least a third of those away (it is a
// partial filter: a split searched over wander lands where the wander
// jumped most, and 13 of 21 still pass). With a step of three wander standard
// deviations in the cause (and a tenth of it in the target) it must count
// nearly every window as a step.
func TestSteppedWanderVersusStep(t *testing.T) {
	const n, reps = 480, 40
	phi := math.Exp(-1.0 / 20)
	clear, wander, steps := 0, 0, 0
	for rep := range reps {
		r := rand.New(rand.NewPCG(uint64(rep), 7))
		gen := func(h float64) (target, cause []float64, k int) {
			k = 200 + r.IntN(160)
			target, cause = make([]float64, n), make([]float64, n)
			x := r.NormFloat64()
			for i := range n {
				x = phi*x + math.Sqrt(1-phi*phi)*r.NormFloat64()
				s := 0.0
				if i >= k {
					s = h
				}
				cause[i] = x + s + 0.3*r.NormFloat64()
				target[i] = 10 + 0.5*(x+0.1*s) + 0.5*r.NormFloat64()
			}
			return target, cause, k
		}
		tg, c, _ := gen(0)
		ch, err := OnsetDirected(causal.Series{Name: "target", Values: tg}, MethodMeanShift, 0, DirectionUp)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Z >= 3 {
			clear++
			if ok, _ := stepped(tg, ch.At, ch.Shift, c, false); ok {
				wander++
			}
		}
		tg, c, k := gen(3)
		if ok, _ := stepped(tg, k, 1, c, false); ok {
			steps++
		}
	}
	t.Logf("wander only: %d of %d windows rise with z ≥ 3, %d of them count as a step; with a 3-sd step: %d of %d", clear, reps, wander, steps, reps)
	if clear < reps/2 {
		t.Errorf("wander made %d of %d clear rises, want at least %d (the case the check is for)", clear, reps, reps/2)
	}
	if wander > 2*clear/3 {
		t.Errorf("%d of %d clear rises of wander alone count as a step, want at most %d", wander, clear, 2*clear/3)
	}
	if steps < reps*9/10 {
		t.Errorf("%d of %d windows with a 3-sd step count as a step, want at least %d", steps, reps, reps*9/10)
	}
}

// TestOwnSplitTwoSteps checks the causal checks' reading of a series
// that moves twice: 0 before 200, 1 from 200, 6 from 440 (n = 480). On
// values the larger late jump wins (SSE gain 36.7·5.45² = 1091 at 440
// against 116.7·1.71² = 343 at 200); on ranks the long-held level does
// (average ranks 100.5, 320.5, 460.5: gain 116.7·240² at 200 against
// 36.7·240² at 440). Asked about a change near 200, the series did move
// there; near 440 too; elsewhere its value split stands.
func TestOwnSplitTwoSteps(t *testing.T) {
	const n = 480
	x := make([]float64, n)
	for i := range n {
		switch {
		case i >= 440:
			x[i] = 6
		case i >= 200:
			x[i] = 1
		}
	}
	if k, _ := newCumsum(x).bestSplit(0, n, 2, n-2); k != 440 {
		t.Fatalf("value split %d, want 440", k)
	}
	for _, tc := range []struct{ lo, hi, want int }{{190, 210, 200}, {0, 204, 200}, {430, 450, 440}, {300, 320, 440}} {
		if k := ownSplit(x, tc.lo, tc.hi, 0); k != tc.want {
			t.Errorf("ownSplit in [%d, %d] = %d, want %d", tc.lo, tc.hi, k, tc.want)
		}
	}
}
