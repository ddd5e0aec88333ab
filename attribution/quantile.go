package attribution

import (
	"math"
	"math/bits"
	"slices"
)

// Quantile definition used everywhere in this package for samples:
// Hyndman & Fan (1996) type 7, the default of R's quantile() and numpy's
// percentile(). For a sample of n values with order statistics
// x_(0) ≤ … ≤ x_(n−1) (0-based),
//
//	h = (n−1)·p,  l = ⌊h⌋,  P_p = x_(l) + (h − l)·(x_(l+1) − x_(l)),
//
// with P_p = x_(n−1) when l = n−1. P_0 is the minimum and P_1 the maximum.
// Histogram quantiles (which have no order statistics) use the inverse of
// the piecewise-uniform CDF instead; see Histogram.

// Quantile returns the type-7 quantile P_p of x (see the package
// definition) in O(n) time without modifying x. It returns NaN for an empty
// x or p outside [0, 1].
func Quantile(x []float64, p float64) float64 {
	if len(x) == 0 || !(p >= 0 && p <= 1) {
		return math.NaN()
	}
	buf := slices.Clone(x)
	return selectQuantile(buf, p)
}

// quantileSorted is the type-7 quantile of an ascending slice.
func quantileSorted(x []float64, p float64) float64 {
	return atRank(x, float64(len(x)-1)*p)
}

// atRank interpolates an ascending slice at the fractional 0-based rank h:
// x_(⌊h⌋) + (h − ⌊h⌋)·(x_(⌊h⌋+1) − x_(⌊h⌋)).
func atRank(x []float64, h float64) float64 {
	n := len(x)
	lo := int(h)
	if lo >= n-1 {
		return x[n-1]
	}
	f := h - float64(lo)
	if f == 0 {
		return x[lo]
	}
	return x[lo] + f*(x[lo+1]-x[lo])
}

// selectQuantile returns the type-7 quantile of buf in expected O(n),
// reordering buf.
func selectQuantile(buf []float64, p float64) float64 {
	return selectQuantiles(buf, []float64{p})[0]
}

// selectQuantiles returns type-7 quantiles of buf at the ascending levels
// ps, reordering buf. Each level costs one selection on the part of buf not
// yet ordered plus one scan for the next order statistic.
func selectQuantiles(buf []float64, ps []float64) []float64 {
	out := make([]float64, len(ps))
	n := len(buf)
	start := 0
	for i, p := range ps {
		h := float64(n-1) * p
		lo := int(h)
		if lo > n-1 {
			lo = n - 1
		}
		nthElement(buf[start:], lo-start)
		start = lo
		v := buf[lo]
		f := h - float64(lo)
		if f == 0 || lo == n-1 {
			out[i] = v
			continue
		}
		next := buf[lo+1]
		for _, w := range buf[lo+2:] {
			if w < next {
				next = w
			}
		}
		out[i] = v + f*(next-v)
	}
	return out
}

// nthElement reorders x so that x[k] holds the value it would hold if x
// were sorted, with x[:k] ≤ x[k] ≤ x[k+1:]. It is quickselect (Hoare
// partition around a median of three) in expected O(n); after 2·log2(n)
// rounds without converging it sorts the remaining range, so adversarial
// inputs cost O(n log n), not O(n²). x must hold no NaN.
func nthElement(x []float64, k int) {
	lo, hi := 0, len(x)-1
	budget := 2 * bits.Len(uint(len(x)))
	for hi > lo {
		if hi-lo < 24 || budget == 0 {
			slices.Sort(x[lo : hi+1])
			return
		}
		budget--
		mid := lo + (hi-lo)/2
		if x[mid] < x[lo] {
			x[mid], x[lo] = x[lo], x[mid]
		}
		if x[hi] < x[lo] {
			x[hi], x[lo] = x[lo], x[hi]
		}
		if x[hi] < x[mid] {
			x[hi], x[mid] = x[mid], x[hi]
		}
		pivot := x[mid]
		i, j := lo, hi
		for i <= j {
			for x[i] < pivot {
				i++
			}
			for x[j] > pivot {
				j--
			}
			if i <= j {
				x[i], x[j] = x[j], x[i]
				i++
				j--
			}
		}
		// Now x[lo..j] ≤ pivot ≤ x[i..hi] and x[j+1..i−1] == pivot.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}
