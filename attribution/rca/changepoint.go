package rca

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/tailroot/tailroot/attribution/causal"
)

// Change-point methods Onset can use.
const (
	// MethodMeanShift is the least-squares split into two constant means
	// (the maximum-likelihood break date of one level shift in Gaussian
	// noise).
	MethodMeanShift = "mean_shift"
	// MethodBinSeg is binary segmentation with the least-squares split and
	// a BIC-type penalty; the onset is the earliest segment boundary whose
	// shift is at least half the largest.
	MethodBinSeg = "binseg"
	// MethodPELT is the optimal partition under the same penalty (Killick,
	// Fearnhead and Eckley, JASA 2012), onset chosen as for MethodBinSeg.
	MethodPELT = "pelt"
	// MethodFirstShift is MethodMeanShift followed leftwards: while the
	// points before the split hold a least-squares split of their own, in
	// the same direction, with |z| ≥ 3 and at least a quarter of the main
	// shift, the onset moves there. An incident that builds up (a queue
	// that grows, then spills) has its largest split at the spill; its
	// root cause moved at the first one.
	MethodFirstShift = "first_shift"
	// MethodBOCPD is ChangePoint: Bayesian online change-point detection
	// (Adams and MacKay 2007), the earliest index with at least 0.9 times
	// the largest change probability.
	MethodBOCPD = "bocpd"
)

// ChangeMethods lists the methods, the default first.
func ChangeMethods() []string {
	return []string{MethodMeanShift, MethodFirstShift, MethodBinSeg, MethodPELT, MethodBOCPD}
}

// Change is an estimated change point with its uncertainty.
type Change struct {
	// At is the first index of the changed regime.
	At int
	// Low and High bound a 95 % confidence set for At (indices, inclusive):
	// for the least-squares methods the break dates whose likelihood ratio
	// against At stays under Hansen's (2000) critical value 7.35, i.e.
	// {k : (SSE(k) − SSE(At)) / σ̂²_LR ≤ 7.35}, with σ̂²_LR the residual
	// variance inflated for AR(1) autocorrelation by (1 + ρ)/(1 − ρ); for
	// BOCPD the indices around At whose change probability is at least
	// a tenth of At's.
	Low, High int
	// Shift is mean(x[At:]) − mean(x[:At]); Z is Shift over its
	// autocorrelation-corrected standard error.
	Shift, Z float64
	// Prob is BOCPD's change probability at At (NaN for other methods).
	Prob   float64
	Method string
}

// Onset estimates where target changed with method ("" = MethodMeanShift),
// keeping at least minBefore points before the change (0 = max(8, n/5))
// and 3 after it. Errors: ErrNaN, ErrTooShort, ErrArgument for an unknown
// method.
func Onset(target causal.Series, method string, minBefore int) (Change, error) {
	return OnsetDirected(target, method, minBefore, DirectionBoth)
}

// OnsetDirected is Onset looking for a change in direction dir only: the
// least-squares methods (mean_shift, first_shift) split where the mean
// moves the harmful way, the best such split, so a larger improvement
// elsewhere in the window (a latency that falls) cannot hide a smaller
// degradation. When no split moves that way, or for the other methods,
// it is Onset. DirectionBoth or "" is Onset.
func OnsetDirected(target causal.Series, method string, minBefore int, dir Direction) (Change, error) {
	sign := dir.sign()
	x := target.Values
	n := len(x)
	lo := pointsBefore(n, minBefore)
	if lo > n-3 {
		return Change{}, fmt.Errorf("onset: target %q has %d points, need %d before a change and 3 after: %w", target.Name, n, lo, causal.ErrTooShort)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Change{}, fmt.Errorf("onset: target %q: value %v at index %d: %w", target.Name, v, i, causal.ErrNaN)
		}
	}
	// The least-squares methods split the ranks of x, not x: latency
	// targets have spikes (a queue that spills for a minute) whose squares
	// would otherwise decide where the split goes; on ranks the split is
	// the one with the largest Wilcoxon–Mann–Whitney-type mean difference.
	raw := x
	x = ranks(x)
	cs := newCumsum(x)
	var c Change
	switch method {
	case "", MethodMeanShift:
		k := cs.directedSplit(n, lo, n-3, sign)
		c = Change{At: k, Method: MethodMeanShift}
	case MethodFirstShift:
		k := cs.directedSplit(n, lo, n-3, sign)
		main, _ := cs.shiftZ(x, k)
		for k-lo >= 6 {
			pre := newCumsum(x[:k])
			k2, _ := pre.bestSplit(0, k, lo, k-3)
			if k2 < 0 {
				break
			}
			sh, z := pre.shiftZ(x[:k], k2)
			if math.Abs(z) < 3 || sh*main <= 0 || math.Abs(sh) < math.Abs(main)/4 {
				break
			}
			k = k2
		}
		c = Change{At: k, Method: MethodFirstShift}
	case MethodBinSeg, MethodPELT:
		var bounds []int
		if method == MethodBinSeg {
			bounds = cs.binseg(penalty(x))
		} else {
			bounds = cs.pelt(penalty(x))
		}
		c = Change{At: cs.onsetOf(bounds, lo, n-3), Method: method}
	case MethodBOCPD:
		k, p, err := ChangePoint(target, Options{MinBefore: lo})
		if err != nil {
			return Change{}, fmt.Errorf("onset: %w", err)
		}
		det, err := causal.BOCPD(target, causal.BOCPDOptions{})
		if err != nil {
			return Change{}, fmt.Errorf("onset: %w", err)
		}
		c = Change{At: k, Prob: p, Method: MethodBOCPD, Low: k, High: k}
		for c.Low > lo && det.ChangeProb[c.Low-1] >= 0.1*p {
			c.Low--
		}
		for c.High < n-3 && det.ChangeProb[c.High+1] >= 0.1*p {
			c.High++
		}
	default:
		return Change{}, fmt.Errorf("onset: method %q: want one of %v: %w", method, ChangeMethods(), causal.ErrArgument)
	}
	_, c.Z = cs.shiftZ(x, c.At)
	c.Shift, _ = newCumsum(raw).shiftZ(raw, c.At)
	if c.Method != MethodBOCPD {
		c.Prob = math.NaN()
		c.Low, c.High = cs.confidence(x, c.At, lo, n-3)
	}
	return c, nil
}

const minBefore8 = 8

// pointsBefore is the least number of points a change among n keeps
// before it: minBefore, or where that is 0 or less, max(8, n/5).
func pointsBefore(n, minBefore int) int {
	if minBefore <= 0 {
		return max(minBefore8, n/5)
	}
	return minBefore
}

// ranks returns the ranks of x (1..n, ties averaged).
func ranks(x []float64) []float64 {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(x[a], x[b]) })
	out := make([]float64, len(x))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && x[idx[j+1]] == x[idx[i]] {
			j++
		}
		r := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			out[idx[k]] = r
		}
		i = j + 1
	}
	return out
}

// cumsum holds prefix sums of x and x² for O(1) segment costs.
type cumsum struct {
	s, s2 []float64
}

func newCumsum(x []float64) *cumsum {
	c := &cumsum{s: make([]float64, len(x)+1), s2: make([]float64, len(x)+1)}
	for i, v := range x {
		c.s[i+1] = c.s[i] + v
		c.s2[i+1] = c.s2[i] + v*v
	}
	return c
}

// cost is the sum of squared deviations of x[a:b] from its mean.
func (c *cumsum) cost(a, b int) float64 {
	if b <= a {
		return 0
	}
	s := c.s[b] - c.s[a]
	return math.Max(0, c.s2[b]-c.s2[a]-s*s/float64(b-a))
}

func (c *cumsum) mean(a, b int) float64 { return (c.s[b] - c.s[a]) / float64(b-a) }

// bestSplit is the k in [lo, hi] minimising cost(a, k) + cost(k, b), and
// that cost; ties go to the earlier k.
func (c *cumsum) bestSplit(a, b, lo, hi int) (int, float64) {
	best, bc := -1, math.Inf(1)
	for k := max(lo, a+1); k <= min(hi, b-1); k++ {
		if v := c.cost(a, k) + c.cost(k, b); v < bc {
			best, bc = k, v
		}
	}
	return best, bc
}

// directedSplit is bestSplit over [lo, hi] of x[0:n] among the splits
// whose mean shift has the sign of sign (any when sign is 0); the
// unrestricted split when none has.
func (c *cumsum) directedSplit(n, lo, hi int, sign float64) int {
	if sign == 0 {
		k, _ := c.bestSplit(0, n, lo, hi)
		return k
	}
	best, bc := -1, math.Inf(1)
	for k := max(lo, 1); k <= min(hi, n-1); k++ {
		if (c.mean(k, n)-c.mean(0, k))*sign <= 0 {
			continue
		}
		if v := c.cost(0, k) + c.cost(k, n); v < bc {
			best, bc = k, v
		}
	}
	if best < 0 {
		best, _ = c.bestSplit(0, n, lo, hi)
	}
	return best
}

// penalty is the BIC-type penalty 2·σ̂²·ln n for one more change point,
// with σ̂² from the median absolute successive difference (robust to the
// shifts themselves) and inflated for AR(1) autocorrelation.
func penalty(x []float64) float64 {
	d := make([]float64, 0, len(x)-1)
	for i := 1; i < len(x); i++ {
		d = append(d, math.Abs(x[i]-x[i-1]))
	}
	slices.Sort(d)
	sd := quantileSorted(d, 0.5) / (0.6745 * math.Sqrt2)
	if !(sd > 0) {
		sd = 1e-12
	}
	return 2 * sd * sd * arInflation(x) * math.Log(float64(len(x)))
}

// arInflation is (1 + ρ)/(1 − ρ), the long-run variance factor of AR(1)
// noise with coefficient ρ. Before any split is known, ρ is estimated from
// x's successive differences, which level shifts barely touch: for AR(1)
// noise corr(Δx_t, Δx_{t−1}) = −(1 − ρ)/2, so ρ = 1 + 2·corr, clamped to
// [0, 0.95].
func arInflation(x []float64) float64 {
	if len(x) < 4 {
		return 1
	}
	d := make([]float64, len(x)-1)
	for i := range d {
		d[i] = x[i+1] - x[i]
	}
	r, ok := Correlation(d[1:], d[:len(d)-1])
	if !ok {
		return 1
	}
	rho := math.Min(0.95, math.Max(0, 1+2*r))
	return (1 + rho) / (1 - rho)
}

// binseg splits recursively while a split lowers the cost by more than pen.
func (c *cumsum) binseg(pen float64) []int {
	var out []int
	var rec func(a, b int)
	rec = func(a, b int) {
		if b-a < 4 {
			return
		}
		k, v := c.bestSplit(a, b, a+2, b-2)
		if k < 0 || c.cost(a, b)-v <= pen {
			return
		}
		out = append(out, k)
		rec(a, k)
		rec(k, b)
	}
	rec(0, len(c.s)-1)
	slices.Sort(out)
	return out
}

// pelt is the optimal partition minimising Σ cost + pen·(changes), with
// segments of at least two points, by PELT's pruned dynamic programme.
func (c *cumsum) pelt(pen float64) []int {
	n := len(c.s) - 1
	f := make([]float64, n+1)
	last := make([]int, n+1)
	f[0] = -pen
	cands := []int{0}
	for t := 2; t <= n; t++ {
		f[t] = math.Inf(1)
		for _, s := range cands {
			if t-s < 2 {
				continue
			}
			if v := f[s] + c.cost(s, t) + pen; v < f[t] {
				f[t], last[t] = v, s
			}
		}
		keep := cands[:0]
		for _, s := range cands {
			if t-s < 2 || f[s]+c.cost(s, t) <= f[t] {
				keep = append(keep, s)
			}
		}
		cands = append(keep, t-1)
		if t == 2 {
			f[1] = math.Inf(1)
		}
	}
	var out []int
	for t := n; t > 0; t = last[t] {
		if last[t] > 0 {
			out = append(out, last[t])
		}
		if last[t] == 0 {
			break
		}
	}
	slices.Sort(out)
	return out
}

// onsetOf picks the onset among segment boundaries in [lo, hi]: the
// earliest whose mean shift (next segment's mean less the previous one's)
// is at least half the largest in absolute value; with no boundary there,
// the least-squares split.
func (c *cumsum) onsetOf(bounds []int, lo, hi int) int {
	n := len(c.s) - 1
	edges := append(append([]int{0}, bounds...), n)
	type cand struct {
		k     int
		shift float64
	}
	var cs []cand
	big := 0.0
	for i := 1; i+1 < len(edges); i++ {
		k := edges[i]
		if k < lo || k > hi {
			continue
		}
		sh := math.Abs(c.mean(k, edges[i+1]) - c.mean(edges[i-1], k))
		cs = append(cs, cand{k, sh})
		big = math.Max(big, sh)
	}
	for _, x := range cs {
		if x.shift >= big/2 {
			return x.k
		}
	}
	k, _ := c.bestSplit(0, n, lo, hi)
	return k
}

// shiftZ is the mean shift at k and its z statistic, the standard error
// from the two-mean fit's residual variance inflated for AR(1) noise.
func (c *cumsum) shiftZ(x []float64, k int) (shift, z float64) {
	n := len(x)
	shift = c.mean(k, n) - c.mean(0, k)
	s2 := (c.cost(0, k) + c.cost(k, n)) / float64(n-2) * residInflation(x, c, k)
	se := math.Sqrt(s2 * (1/float64(k) + 1/float64(n-k)))
	if !(se > 0) {
		if shift == 0 {
			return 0, 0
		}
		return shift, math.Inf(1)
	}
	return shift, shift / se
}

// residInflation is (1 + ρ)/(1 − ρ) for the lag-1 autocorrelation ρ of the
// residuals of the two-mean fit at k, clamped to [0, 0.95].
func residInflation(x []float64, c *cumsum, k int) float64 {
	n := len(x)
	e := make([]float64, n)
	m0, m1 := c.mean(0, k), c.mean(k, n)
	for i, v := range x {
		if i < k {
			e[i] = v - m0
		} else {
			e[i] = v - m1
		}
	}
	r, ok := Correlation(e[1:], e[:n-1])
	if !ok {
		return 1
	}
	rho := math.Min(0.95, math.Max(0, r))
	return (1 + rho) / (1 - rho)
}

// confidence is the likelihood-ratio confidence set of the break date k
// (see Change.Low), restricted to [lo, hi].
func (c *cumsum) confidence(x []float64, k, lo, hi int) (int, int) {
	n := len(x)
	best := c.cost(0, k) + c.cost(k, n)
	s2 := best / float64(n-2) * residInflation(x, c, k)
	if !(s2 > 0) {
		return k, k
	}
	const crit = 7.35 // Hansen (2000), 95 %
	a, b := k, k
	for a > lo && (c.cost(0, a-1)+c.cost(a-1, n)-best)/s2 <= crit {
		a--
	}
	for b < hi && (c.cost(0, b+1)+c.cost(b+1, n)-best)/s2 <= crit {
		b++
	}
	return a, b
}
