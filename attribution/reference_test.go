package attribution

// Naive reference implementations: sort, loop, enumerate. They are slow and
// obviously follow the doc-comment formulas; the fast paths are compared
// against them on random inputs.

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// refTotals sums stages per request in stage order.
func refTotals(cols [][]float64) []float64 {
	s := make([]float64, len(cols[0]))
	for r := range s {
		for j := range cols {
			s[r] += cols[j][r]
		}
	}
	return s
}

// refQuantile is type 7 on a fully sorted copy.
func refQuantile(x []float64, p float64) float64 {
	y := append([]float64(nil), x...)
	sort.Float64s(y)
	h := float64(len(y)-1) * p
	lo := int(math.Floor(h))
	if lo >= len(y)-1 {
		return y[len(y)-1]
	}
	return y[lo] + (h-float64(lo))*(y[lo+1]-y[lo])
}

// refTailMean loops over requests with S ≥ q.
func refTailMean(cols [][]float64, p float64) (q, target float64, contrib []float64) {
	s := refTotals(cols)
	q = refQuantile(s, p)
	contrib = make([]float64, len(cols))
	n := 0
	for r := range s {
		if s[r] >= q {
			n++
			target += s[r]
			for j := range cols {
				contrib[j] += cols[j][r]
			}
		}
	}
	for j := range contrib {
		contrib[j] /= float64(n)
	}
	return q, target / float64(n), contrib
}

// refEuler ranks requests by a stable sort of S and averages a window.
func refEuler(cols [][]float64, p, w float64, kernel WindowKernel) []float64 {
	s := refTotals(cols)
	order := make([]int, len(s))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return s[order[a]] < s[order[b]] })
	h := float64(len(s)-1) * p
	out := make([]float64, len(cols))
	ws := 0.0
	for rank, r := range order {
		d := math.Abs(float64(rank)-h) / w
		var wt float64
		switch {
		case kernel == WindowBox && d <= 1:
			wt = 1
		case kernel == WindowEpanechnikov && d < 1:
			wt = 1 - d*d
		default:
			continue
		}
		ws += wt
		for j := range cols {
			out[j] += wt * cols[j][r]
		}
	}
	for j := range out {
		out[j] /= ws
	}
	return out
}

// refRevert maps each value to the baseline's type-7 quantile at its
// mid-rank level, counting ranks by brute force.
func refRevert(cur, base []float64) []float64 {
	n, m := len(cur), len(base)
	b := append([]float64(nil), base...)
	sort.Float64s(b)
	out := make([]float64, n)
	for r, x := range cur {
		less, leq := 0, 0
		for _, y := range cur {
			if y < x {
				less++
			}
			if y <= x {
				leq++
			}
		}
		mid := float64(less+leq-1) / 2 // (first + last) / 2
		level := 0.5
		if n > 1 {
			level = mid / float64(n-1)
		}
		out[r] = refQuantile(b, level)
		_ = m
	}
	return out
}

// refShapley averages marginal contributions over all k! orderings.
func refShapley(now, base [][]float64, p float64) []float64 {
	k := len(now)
	qNow := refQuantile(refTotals(now), p)
	qBase := refQuantile(refTotals(base), p)
	rev := make([][]float64, k)
	for j := range rev {
		rev[j] = refRevert(now[j], base[j])
	}
	v := func(t map[int]bool) float64 {
		if len(t) == k {
			return qNow - qBase
		}
		cols := make([][]float64, k)
		for j := range cols {
			cols[j] = now[j]
			if t[j] {
				cols[j] = rev[j]
			}
		}
		return qNow - refQuantile(refTotals(cols), p)
	}
	phi := make([]float64, k)
	perm := make([]int, k)
	for i := range perm {
		perm[i] = i
	}
	count := 0
	var walk func(int)
	walk = func(i int) {
		if i == k {
			count++
			t := map[int]bool{}
			for _, j := range perm {
				before := v(t)
				t[j] = true
				phi[j] += v(t) - before
			}
			return
		}
		for x := i; x < k; x++ {
			perm[i], perm[x] = perm[x], perm[i]
			walk(i + 1)
			perm[i], perm[x] = perm[x], perm[i]
		}
	}
	walk(0)
	for j := range phi {
		phi[j] /= float64(count)
	}
	return phi
}

// randCols draws n requests × k stages from one of several shapes: heavy
// tails, shared slow-down factors (dependence), quantised values (ties) and
// zeros.
func randCols(rng *rand.Rand, n, k int) [][]float64 {
	shape := rng.IntN(4)
	cols := make([][]float64, k)
	for j := range cols {
		cols[j] = make([]float64, n)
	}
	for r := 0; r < n; r++ {
		shared := rng.ExpFloat64()
		for j := range cols {
			var v float64
			switch shape {
			case 0: // independent exponentials with different scales
				v = rng.ExpFloat64() * float64(j+1)
			case 1: // log-normal with a common factor
				v = math.Exp(rng.NormFloat64() + 0.8*shared)
			case 2: // millisecond-quantised, many ties and zeros
				v = math.Floor(rng.ExpFloat64()*3) / 1000
			default: // Pareto tail on one stage, others light
				v = rng.ExpFloat64()
				if j == 0 {
					v = math.Pow(1-rng.Float64(), -1/1.5) - 1
				}
			}
			cols[j][r] = v
		}
	}
	return cols
}

func mustRequests(t testing.TB, stages []string, cols [][]float64) Requests {
	t.Helper()
	r, err := NewRequests(stages, cols)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func stageNames(k int) []string {
	names := []string{"queue", "tokenize", "prefill", "decode", "detokenize", "network", "other", "s7", "s8", "s9", "s10", "s11", "s12", "s13"}
	return names[:k]
}

func approx(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
