package causal

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// KSStatistic is the two-sample Kolmogorov–Smirnov statistic
//
//	D = sup_v |F_a(v) − F_b(v)|,  F_s(v) = #{i : s_i ≤ v} / len(s),
//
// evaluated at every pooled value (the empirical CDFs are right-continuous
// step functions, so the supremum is attained there; ties are handled by
// counting every equal value before comparing). a and b are not modified.
func KSStatistic(a, b []float64) float64 {
	sa, sb := slices.Clone(a), slices.Clone(b)
	slices.Sort(sa)
	slices.Sort(sb)
	return ksSorted(sa, sb)
}

func ksSorted(sa, sb []float64) float64 {
	na, nb := float64(len(sa)), float64(len(sb))
	i, j, d := 0, 0, 0.0
	for i < len(sa) && j < len(sb) {
		v := min(sa[i], sb[j])
		for i < len(sa) && sa[i] <= v {
			i++
		}
		for j < len(sb) && sb[j] <= v {
			j++
		}
		d = max(d, math.Abs(float64(i)/na-float64(j)/nb))
	}
	// Once one sample is exhausted its CDF is 1 and the gap only shrinks.
	return d
}

// KSTest is the two-sample Kolmogorov–Smirnov test with the asymptotic
// two-sided p-value of scipy.stats.ks_2samp(a, b, mode='asymp'):
//
//	en = n_a·n_b/(n_a + n_b),  p = kstwo.sf(D, round(en))
//
// where kstwo is the distribution of the one-sample two-sided statistic D_n
// (see ksTwoSidedSF) and round is round-half-to-even, as numpy's. Older
// texts (and scipy before 1.5) use the limiting Kolmogorov distribution
// Q(√en·D) instead; kstwo at n = round(en) is closer for small samples and
// agrees for large ones.
//
// Errors: ErrNaN; ErrTooShort when a sample is empty or round(en) = 0 (two
// samples of one point each).
func KSTest(a, b Series) (d, p float64, err error) {
	for _, s := range []Series{a, b} {
		if err := checkFinite(s); err != nil {
			return 0, 0, fmt.Errorf("ks test: %w", err)
		}
		if len(s.Values) == 0 {
			return 0, 0, fmt.Errorf("ks test: series %q is empty: %w", s.Name, ErrTooShort)
		}
	}
	na, nb := float64(len(a.Values)), float64(len(b.Values))
	en := math.RoundToEven(na * nb / (na + nb))
	if en < 1 {
		return 0, 0, fmt.Errorf("ks test: samples of %d and %d points: %w", len(a.Values), len(b.Values), ErrTooShort)
	}
	d = KSStatistic(a.Values, b.Values)
	return d, ksTwoSidedSF(int(en), d), nil
}

// psiEpsilon is the floor applied to bin proportions before taking logs, so
// an empty bin contributes a large but finite term (a common PSI
// convention; the proportions are not renormalised after flooring).
const psiEpsilon = 1e-4

// PSI is the population stability index of cur against ref:
//
//	PSI = Σ_i (c_i − r_i)·ln(c_i / r_i)
//
// where r_i and c_i are the fractions of ref and cur in bin i, each floored
// at psiEpsilon = 1e-4. The bins are quantile bins of ref: interior edges
// e_j = percentile(ref, j/B) for j = 1..B−1 (numpy's linear percentile),
// duplicates merged (so a ref with many ties gets fewer bins), and bin i
// holds the values in (e_i, e_{i+1}] with e_0 = −∞ and e_B = +∞. bins ≤ 0
// selects B = 10. By the usual reading, PSI < 0.1 is stable, 0.1–0.25 a
// moderate shift and > 0.25 a large one.
//
// Errors: ErrNaN; ErrTooShort for an empty window.
func PSI(ref, cur Series, bins int) (float64, error) {
	for _, s := range []Series{ref, cur} {
		if err := checkFinite(s); err != nil {
			return 0, fmt.Errorf("psi: %w", err)
		}
		if len(s.Values) == 0 {
			return 0, fmt.Errorf("psi: series %q is empty: %w", s.Name, ErrTooShort)
		}
	}
	sr := slices.Clone(ref.Values)
	slices.Sort(sr)
	return psiSorted(sr, cur.Values, bins), nil
}

func psiSorted(sr, cur []float64, bins int) float64 {
	if bins <= 0 {
		bins = 10
	}
	edges := make([]float64, 0, bins-1)
	for j := 1; j < bins; j++ {
		e := percentileSorted(sr, float64(j)/float64(bins))
		if len(edges) == 0 || e > edges[len(edges)-1] {
			edges = append(edges, e)
		}
	}
	rc := make([]float64, len(edges)+1)
	cc := make([]float64, len(edges)+1)
	for _, v := range sr {
		rc[sort.SearchFloat64s(edges, v)]++
	}
	for _, v := range cur {
		cc[sort.SearchFloat64s(edges, v)]++
	}
	psi := 0.0
	for i := range rc {
		r := max(rc[i]/float64(len(sr)), psiEpsilon)
		c := max(cc[i]/float64(len(cur)), psiEpsilon)
		psi += (c - r) * math.Log(c/r)
	}
	return psi
}

// Drift compares one series between a reference and a current window.
type Drift struct {
	Name string
	// KS is the two-sample KS statistic D and KSPValue its p-value (KSTest).
	KS, KSPValue float64
	// PSI of the current window against the reference (PSI).
	PSI float64
}

// RankDrift compares each series' cur window with its ref window and ranks
// the series by KS statistic, largest first (ties by PSI, then input order).
// The KS statistic ranks better than its p-value, which saturates at 0 for
// any clear shift in long windows. bins is passed to PSI.
//
// Errors: ErrNaN, ErrLength (the series share one time grid), ErrArgument
// for a window outside the series, ErrTooShort when round(en) = 0.
func RankDrift(series []Series, ref, cur Window, bins int) ([]Drift, error) {
	if len(series) == 0 {
		return nil, nil
	}
	if err := checkAligned(series...); err != nil {
		return nil, fmt.Errorf("drift: %w", err)
	}
	n := len(series[0].Values)
	if err := ref.check(n, "reference"); err != nil {
		return nil, fmt.Errorf("drift: %w", err)
	}
	if err := cur.check(n, "current"); err != nil {
		return nil, fmt.Errorf("drift: %w", err)
	}
	na, nb := float64(ref.End-ref.Start), float64(cur.End-cur.Start)
	en := math.RoundToEven(na * nb / (na + nb))
	if en < 1 {
		return nil, fmt.Errorf("drift: windows of %v and %v points: %w", na, nb, ErrTooShort)
	}
	out := make([]Drift, len(series))
	sa := make([]float64, ref.End-ref.Start)
	sb := make([]float64, cur.End-cur.Start)
	for i, s := range series {
		copy(sa, s.Values[ref.Start:ref.End])
		copy(sb, s.Values[cur.Start:cur.End])
		slices.Sort(sa)
		slices.Sort(sb)
		d := ksSorted(sa, sb)
		out[i] = Drift{
			Name: s.Name, KS: d, KSPValue: ksTwoSidedSF(int(en), d),
			PSI: psiSorted(sa, sb, bins),
		}
	}
	slices.SortStableFunc(out, func(a, b Drift) int {
		if a.KS != b.KS {
			return cmpDesc(a.KS, b.KS)
		}
		return cmpDesc(a.PSI, b.PSI)
	})
	return out, nil
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
