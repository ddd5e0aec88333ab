package causal

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// BenjaminiHochberg returns the Benjamini–Hochberg adjusted p-values
// (Benjamini & Hochberg 1995, step-up), in the input order. With the m
// p-values sorted ascending, p_(1) ≤ … ≤ p_(m),
//
//	q_(i) = min_{j ≥ i} min(1, m·p_(j)/j)
//
// — the running minimum from the largest p-value down makes the adjusted
// values monotone in the raw ones, as R's p.adjust(method = "BH") and
// statsmodels' multipletests(method='fdr_bh'). Rejecting every hypothesis
// with q ≤ α controls the false discovery rate at α for independent (or
// positively dependent) tests.
//
// Errors: ErrNaN for a NaN, ErrArgument for a value outside [0, 1].
func BenjaminiHochberg(p []float64) ([]float64, error) {
	m := len(p)
	idx := make([]int, m)
	for i, v := range p {
		if math.IsNaN(v) {
			return nil, fmt.Errorf("benjamini-hochberg: p-value at index %d is NaN: %w", i, ErrNaN)
		}
		if v < 0 || v > 1 {
			return nil, fmt.Errorf("benjamini-hochberg: p-value %v at index %d outside [0, 1]: %w", v, i, ErrArgument)
		}
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(p[a], p[b]) })
	q := make([]float64, m)
	run := 1.0
	for r := m - 1; r >= 0; r-- {
		i := idx[r]
		// (m/i)·p rather than m·p/i: for i = m the factor is exactly 1,
		// so the largest p-value is never adjusted below itself by rounding.
		run = min(run, float64(m)/float64(r+1)*p[i])
		q[i] = run
	}
	return q, nil
}

// Reject marks the hypotheses whose adjusted p-value is at most alpha.
func Reject(adjusted []float64, alpha float64) []bool {
	out := make([]bool, len(adjusted))
	for i, q := range adjusted {
		out[i] = q <= alpha
	}
	return out
}
