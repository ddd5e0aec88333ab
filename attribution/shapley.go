package attribution

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
)

// MaxShapleyStages is the most stages Shapley enumerates exactly: 2^12 =
// 4096 coalitions, each costing one O(n) quantile.
const MaxShapleyStages = 12

// ShapleyResult is a Shapley breakdown plus the two baseline figures that
// explain it.
type ShapleyResult struct {
	// Breakdown has Method MethodShapley, Kind KindExact, Quantile
	// P_p(now) and Target P_p(now) − P_p(baseline).
	Breakdown
	// Baseline is P_p(S) of the baseline requests.
	Baseline float64
	// AllReverted is P_p of the counterfactual with every stage mapped to
	// the baseline. It differs from Baseline when the dependence between
	// stages (which requests are slow in several stages at once) changed;
	// AllReverted − Baseline is that dependence effect, and each stage's
	// value carries 1/k of it (see Shapley).
	AllReverted float64
}

// Shapley attributes the change of the p-quantile between a baseline window
// and now to stages, by counterfactuals.
//
// Counterfactual. For a coalition T of stages, every stage j ∈ T of every
// current request is replaced by the baseline's value at the same rank:
// with n current requests, m baseline requests, b_j the baseline's stage-j
// values sorted, and x at 0-based positions first..last among the sorted
// current stage-j values (ties share the mid-rank),
//
//	x ↦ atRank(b_j, h),  h = (first+last)/2 · (m−1)/(n−1)
//
// (h = (m−1)/2 when n = 1), i.e. the baseline's type-7 quantile at the
// level (first+last)/2/(n−1), which is x's own type-7 level in the current
// window. The map is monotone, so each request keeps its rank within the
// stage and the joint ranks of the stages (their dependence) are those of
// now. Stages outside T keep their current values; S_T is the per-request
// sum.
//
// Game. v(T) = P_p(S_now) − P_p(S_T) for T ≠ all stages, v(∅) = 0, and
// v(all) = P_p(S_now) − P_p(S_baseline), the baseline itself rather than
// the all-reverted counterfactual, so that the values add up to the change
// the operator sees. Shapley values by exact enumeration:
//
//	φ_j = Σ_{T ⊆ N∖{j}} |T|!·(k−|T|−1)!/k! · (v(T ∪ {j}) − v(T)),
//
// and Σ_j φ_j = v(all) = P_p(now) − P_p(baseline) (efficiency, to
// rounding). Properties that hold: symmetry (two stages with identical
// columns now and in the baseline get equal values); a stage whose current
// and baseline columns are equal as multisets with n = m maps to itself, so
// its marginal contribution is exactly zero for every T ≠ all, and its
// value is exactly (AllReverted − Baseline)/k, the share of the dependence
// effect that v(all) gives every stage. It is zero when the baseline equals
// now up to per-stage monotone maps.
//
// Stage names must match in order. Cost: O(k·(n log n + m log m)) for the
// maps plus O(2^k·k·n) for the coalitions; k > MaxShapleyStages returns
// ErrTooManyStages.
func Shapley(now, baseline Requests, p float64) (ShapleyResult, error) {
	if err := checkP("shapley", p); err != nil {
		return ShapleyResult{}, err
	}
	if !slices.Equal(now.stages, baseline.stages) {
		return ShapleyResult{}, fmt.Errorf("shapley: %w: now %q, baseline %q", ErrStages, now.stages, baseline.stages)
	}
	k := now.K()
	if k > MaxShapleyStages {
		return ShapleyResult{}, fmt.Errorf("shapley: %w: %d > %d", ErrTooManyStages, k, MaxShapleyStages)
	}
	n, m := now.Len(), baseline.Len()
	if n == 0 || m == 0 {
		return ShapleyResult{}, fmt.Errorf("shapley: %w: now has %d requests, baseline %d", ErrEmpty, n, m)
	}

	rev := make([][]float64, k)
	for j := range k {
		rev[j] = revertColumn(now.cols[j], baseline.cols[j])
	}

	qNow := Quantile(now.total, p)
	qBase := Quantile(baseline.total, p)
	full := 1<<k - 1
	v := make([]float64, full+1)

	// Each S_T is summed afresh in stage order, so a stage whose reverted
	// column equals its current one leaves S_T bit-identical and its
	// marginal contributions are exactly zero.
	st := make([]float64, n)
	allRev := 0.0
	for t := 1; t <= full; t++ {
		coalitionTotal(st, now.cols, rev, t)
		qt := selectQuantile(st, p)
		if t == full {
			allRev = qt
			v[t] = qNow - qBase
		} else {
			v[t] = qNow - qt
		}
	}

	fact := make([]float64, k+1)
	fact[0] = 1
	for i := 1; i <= k; i++ {
		fact[i] = fact[i-1] * float64(i)
	}
	phi := make([]float64, k)
	for j := range k {
		bit := 1 << j
		for t := 0; t <= full; t++ {
			if t&bit != 0 {
				continue
			}
			s := bits.OnesCount(uint(t))
			wt := fact[s] * fact[k-s-1] / fact[k]
			phi[j] += wt * (v[t|bit] - v[t])
		}
	}
	target := qNow - qBase
	b := Breakdown{
		Method:   MethodShapley,
		Kind:     KindExact,
		P:        p,
		Quantile: qNow,
		Target:   target,
		Stages:   now.stages,
		Contrib:  phi,
		Residual: target - sum(phi),
		Count:    float64(n),
	}.noBounds()
	return ShapleyResult{Breakdown: b, Baseline: qBase, AllReverted: allRev}, nil
}

// coalitionTotal writes S_T into st: per request, the sum in stage order of
// rev[j] for stages j in the bit set t and cols[j] for the others.
func coalitionTotal(st []float64, cols, rev [][]float64, t int) {
	clear(st)
	for j, col := range cols {
		if t&(1<<j) != 0 {
			col = rev[j]
		}
		for r, x := range col {
			st[r] += x
		}
	}
}

// revertColumn maps each current value to the baseline's type-7 quantile at
// the current value's mid-rank level (see Shapley).
func revertColumn(cur, base []float64) []float64 {
	n, m := len(cur), len(base)
	b := slices.Clone(base)
	slices.Sort(b)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(cur[x], cur[y]) })
	out := make([]float64, n)
	for first := 0; first < n; {
		last := first
		for last+1 < n && cur[order[last+1]] == cur[order[first]] {
			last++
		}
		var h float64
		switch {
		case n == 1:
			h = float64(m-1) / 2
		case n == m:
			// Exact: a stage equal to its baseline maps to itself.
			h = float64(first+last) / 2
		default:
			h = float64(first+last) / 2 * float64(m-1) / float64(n-1)
		}
		val := atRank(b, h)
		for _, r := range order[first : last+1] {
			out[r] = val
		}
		first = last + 1
	}
	return out
}
