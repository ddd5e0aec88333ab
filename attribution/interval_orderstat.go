package attribution

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mathext"
)

// The distribution-free order-statistic interval. For a continuous F with
// p-quantile ξ, x_(i) (1-based) lies at or below ξ exactly when at least i
// of the n values do, so with B ~ Binomial(n, p)
//
//	P(x_(r) ≤ ξ < x_(s)) = P(r ≤ B < s) = 1 − P(B < r) − P(B ≥ s)
//
// whatever F is. Choosing r as large and s as small as keep each tail at
// most α/2 = (1 − level)/2 gives an interval that covers ξ with
// probability at least level for every n, every p and every continuous F
// (and at least level for a discontinuous F too: ties only widen the
// closed interval). The tails are
//
//	P(B ≥ s) = I_p(s, n − s + 1),   P(B < r) = I_{1−p}(n − r + 1, r)
//
// (I the regularized incomplete beta), each evaluated directly so that
// neither is read as 1 minus a number near 1. Both ends exist only when
// p^n ≤ α/2 and (1 − p)^n ≤ α/2; below that n the data cannot bound the
// quantile on that side at this level, and the interval is refused
// (OrderStatMinN says how many values it needs).

// OrderStatRanks returns the 0-based ranks lo < hi of the order-statistic
// interval [x_(lo), x_(hi)] for the p-quantile at level from n values, and
// its exact coverage 1 − P(B ≤ lo) − P(B ≥ hi+1) ≥ level under any
// continuous distribution. The ranks depend on n, p and level only, so a
// sample held in pieces needs just those two order statistics. It returns
// an *InvalidMethodError when n is too small for an upper or lower end.
func OrderStatRanks(n int, p, level float64) (lo, hi int, coverage float64, err error) {
	if err := checkCIArgs("quantile ci", n, p, level); err != nil {
		return 0, 0, 0, err
	}
	half := (1 - level) / 2
	if p == 0 || p == 1 || math.Pow(p, float64(n)) > half || math.Pow(1-p, float64(n)) > half {
		return 0, 0, 0, &InvalidMethodError{
			Method: CIOrderStatistic, P: p, N: n, Level: level, MinN: OrderStatMinN(p, level),
			Reason: "the binomial ranks of the interval fall outside the sample",
		}
	}
	// upper(s) = P(B ≥ s) falls as s grows; the smallest s with upper(s) ≤ half.
	upper := func(s int) float64 { return mathext.RegIncBeta(float64(s), float64(n-s+1), p) }
	s := searchInts(1, n, func(s int) bool { return upper(s) <= half })
	// below(r) = P(B < r) grows with r; the largest r with below(r) ≤ half.
	below := func(r int) float64 { return mathext.RegIncBeta(float64(n-r+1), float64(r), 1-p) }
	r := searchInts(1, n, func(r int) bool { return below(r) > half }) - 1
	if r < 1 || s > n || r >= s {
		return 0, 0, 0, fmt.Errorf("BUG: order-statistic ranks r=%d s=%d for n=%d p=%v level=%v", r, s, n, p, level)
	}
	return r - 1, s - 1, 1 - below(r) - upper(s), nil
}

// searchInts returns the smallest i in [lo, hi] with f(i) true, f monotone
// (false then true), or hi+1 when there is none.
func searchInts(lo, hi int, f func(int) bool) int {
	for lo <= hi {
		mid := lo + (hi-lo)/2
		if f(mid) {
			hi = mid - 1
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// OrderStatMinN is the smallest n for which the order-statistic interval at
// p and level has both ends: max(p, 1 − p)^n ≤ (1 − level)/2. It is 0 for
// p = 0 or 1, which no finite sample bounds.
func OrderStatMinN(p, level float64) int {
	q := math.Max(p, 1-p)
	if !(q < 1) {
		return 0
	}
	n := int(math.Ceil(math.Log((1-level)/2) / math.Log(q)))
	for n > 1 && math.Pow(q, float64(n-1)) <= (1-level)/2 {
		n--
	}
	for math.Pow(q, float64(n)) > (1-level)/2 {
		n++
	}
	return max(n, 2)
}

// orderStatCI is the order-statistic interval over order statistics: it
// reads the two interval ranks and the one or two ranks of the type-7
// estimate. SE is the half-width divided by z_{(1+level)/2}, the standard
// error a normal interval of the same width would have (the interval itself
// is not symmetric about the estimate).
func orderStatCI(y OrderStats, p, level float64) (Interval, error) {
	n := y.Len()
	lo, hi, _, err := OrderStatRanks(n, p, level)
	if err != nil {
		return Interval{}, err
	}
	iv := Interval{Method: CIOrderStatistic, P: p, Level: level, Estimate: atRankStats(y, float64(n-1)*p)}
	iv.Lower, iv.Upper = y.At(lo), y.At(hi)
	iv.SE = (iv.Upper - iv.Lower) / (2 * mathext.NormalQuantile((1+level)/2))
	return iv, nil
}

// OrderStatRanksFor returns every 0-based rank the order-statistic
// interval reads from n values, ascending and distinct: its two ends and
// the ranks of the type-7 estimate.
func OrderStatRanksFor(n int, p, level float64) ([]int, error) {
	lo, hi, _, err := OrderStatRanks(n, p, level)
	if err != nil {
		return nil, err
	}
	h := float64(n-1) * p
	l := min(int(h), n-1)
	ranks := []int{lo, l, hi}
	if h > float64(l) && l < n-1 {
		ranks = append(ranks, l+1)
	}
	slices.Sort(ranks)
	return slices.Compact(ranks), nil
}

// OrderStatDiff combines the order-statistic intervals of two independent
// samples, each at level √level, into the interval of the difference of
// their quantiles at level (see QuantileDiffCI).
func OrderStatDiff(a, b Interval, level float64) Interval {
	iv := Interval{
		Method: CIOrderStatistic, P: a.P, Level: level, Estimate: a.Estimate - b.Estimate,
		Lower: a.Lower - b.Upper, Upper: a.Upper - b.Lower,
	}
	iv.SE = (iv.Upper - iv.Lower) / (2 * mathext.NormalQuantile((1+level)/2))
	return iv
}
