package attribution

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// tail returns q = P_p(S) (type 7) and the indices of requests with S ≥ q,
// in request order. The set is never empty: it holds the maximum.
func tail(total []float64, p float64) (float64, []int) {
	q := Quantile(total, p)
	// About n·(1−p) requests qualify; ties at q can add more.
	idx := make([]int, 0, int(float64(len(total))*(1-p))+2)
	for r, s := range total {
		if s >= q {
			idx = append(idx, r)
		}
	}
	return q, idx
}

// meansOver returns, for each stage, the mean over the requests in idx, and
// the mean of S over them.
func meansOver(reqs Requests, idx []int) ([]float64, float64) {
	m := float64(len(idx))
	out := make([]float64, len(reqs.cols))
	for j, col := range reqs.cols {
		s := 0.0
		for _, r := range idx {
			s += col[r]
		}
		out[j] = s / m
	}
	s := 0.0
	for _, r := range idx {
		s += reqs.total[r]
	}
	return out, s / m
}

// TailMean computes the tail-mean allocation, the default decomposition:
//
//	E[S | S ≥ q] = Σ_i E[X_i | S ≥ q],  q = P_p(S) (type 7),
//
// where each conditional mean is the plain average over the requests with
// S ≥ q (ties at q included). Because S = Σ_i X_i per request, the stage
// means add up to the tail mean exactly; Residual only carries rounding.
// Kind is KindExact. Cost: O(n) selection for q plus one pass over S and
// O(k·|tail|) gathers.
func TailMean(reqs Requests, p float64) (Breakdown, error) {
	if err := checkP("tail mean", p); err != nil {
		return Breakdown{}, err
	}
	if reqs.Len() == 0 {
		return Breakdown{}, fmt.Errorf("tail mean: %w", ErrEmpty)
	}
	q, idx := tail(reqs.total, p)
	contrib, target := meansOver(reqs, idx)
	return Breakdown{
		Method:   MethodTailMeanRecords,
		Kind:     KindExact,
		P:        p,
		Quantile: q,
		Target:   target,
		Stages:   reqs.stages,
		Contrib:  contrib,
		Residual: target - sum(contrib),
		Count:    float64(len(idx)),
	}.noBounds(), nil
}

// Excess computes which stages grow in the tail:
//
//	Contrib_i = E[X_i | S ≥ q] − E[X_i],  Target = E[S | S ≥ q] − E[S],
//
// with q = P_p(S) (type 7) and plain averages over the tail set and over all
// requests. The contributions add up to Target exactly (up to rounding).
// A stage with a large tail mean but zero excess is slow everywhere, not
// specifically in the tail. Kind is KindExact; Count is the tail size.
func Excess(reqs Requests, p float64) (Breakdown, error) {
	if err := checkP("excess", p); err != nil {
		return Breakdown{}, err
	}
	n := reqs.Len()
	if n == 0 {
		return Breakdown{}, fmt.Errorf("excess: %w", ErrEmpty)
	}
	q, idx := tail(reqs.total, p)
	tailMeans, tailS := meansOver(reqs, idx)
	contrib := make([]float64, len(tailMeans))
	for j, col := range reqs.cols {
		contrib[j] = tailMeans[j] - sum(col)/float64(n)
	}
	target := tailS - sum(reqs.total)/float64(n)
	return Breakdown{
		Method:   MethodExcess,
		Kind:     KindExact,
		P:        p,
		Quantile: q,
		Target:   target,
		Stages:   reqs.stages,
		Contrib:  contrib,
		Residual: target - sum(contrib),
		Count:    float64(len(idx)),
	}.noBounds(), nil
}

// WindowKernel weighs requests by their rank distance from the quantile
// rank in Euler.
type WindowKernel uint8

// Window kernels, with u = (r − h)/W for rank r, quantile rank h and
// half-width W.
const (
	// WindowBox gives weight 1 to ranks with |u| ≤ 1.
	WindowBox WindowKernel = iota
	// WindowEpanechnikov gives weight 1 − u² to ranks with |u| < 1.
	WindowEpanechnikov
)

// EulerOptions tunes Euler. The zero value is the documented default.
type EulerOptions struct {
	// HalfWidth W is the window half-width in ranks. Zero or negative
	// selects max(5, 0.1·n·min(p, 1−p)): a tenth of the tail's size, so the
	// window stays local to q while averaging enough requests (±1000 ranks
	// at n = 10⁶, p = 0.99). Values in (0, 1) are rejected: they can leave
	// the window empty.
	HalfWidth float64
	// Kernel selects the rank weights; zero is WindowBox.
	Kernel WindowKernel
	// Rescale multiplies every contribution by q / Σ_i Contrib_i so they add
	// up to q exactly. Off by default: the unscaled local means are the
	// estimate, and Residual reports how far they are from q either way.
	Rescale bool
}

// Euler estimates the Euler (marginal) allocation of the quantile
//
//	q = Σ_i E[X_i | S = q],
//
// which holds for a smooth joint density because P_p is homogeneous of
// degree one in the stages. With finitely many requests the event S = q has
// no mass, so each conditional mean is a kernel-weighted average over the
// requests whose rank r in S (ascending, ties broken by request index) lies
// near the quantile rank h = (n−1)·p:
//
//	Contrib_i = Σ_r w(r) X_i,r / Σ_r w(r),   w from opts.Kernel and W.
//
// Target is q (type 7). Residual = q − Σ_i Contrib_i before any rescaling:
// the gap between q and the kernel-weighted mean S of the window, which
// shrinks as the window narrows and the data near q grow dense. Windows
// are clipped at ranks 0 and n−1, so near p = 1 the window is one-sided
// and biased low. Kind is KindEstimate; Count is the number of requests
// with positive weight.
func Euler(reqs Requests, p float64, opts EulerOptions) (Breakdown, error) {
	if err := checkP("euler", p); err != nil {
		return Breakdown{}, err
	}
	n := reqs.Len()
	if n == 0 {
		return Breakdown{}, fmt.Errorf("euler: %w", ErrEmpty)
	}
	w := opts.HalfWidth
	switch {
	case w <= 0:
		w = math.Max(5, 0.1*float64(n)*math.Min(p, 1-p))
	case w < 1 || math.IsInf(w, 1) || math.IsNaN(w):
		return Breakdown{}, fmt.Errorf("euler: half-width %v: need ≥ 1 rank", opts.HalfWidth)
	}
	if opts.Kernel > WindowEpanechnikov {
		return Breakdown{}, fmt.Errorf("euler: unknown kernel %d", opts.Kernel)
	}
	h := float64(n-1) * p
	a := max(int(math.Ceil(h-w)), 0)
	b := min(int(math.Floor(h+w)), n-1)

	// Values at ranks a and b by selection, then the requests between them
	// sorted by (S, index) so each gets its exact rank.
	buf := slices.Clone(reqs.total)
	nthElement(buf, a)
	va := buf[a]
	nthElement(buf[a:], b-a)
	vb := buf[b]
	below := 0
	var cand []int
	for r, s := range reqs.total {
		switch {
		case s < va:
			below++
		case s <= vb:
			cand = append(cand, r)
		}
	}
	tot := reqs.total
	slices.SortFunc(cand, func(x, y int) int {
		if c := cmp.Compare(tot[x], tot[y]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	// cand[t] has rank below+t; ranks a..b are cand[a-below : b-below+1].
	win := cand[a-below : b-below+1]

	lo := int(h)
	q := tot[win[lo-a]]
	if f := h - float64(lo); f > 0 && lo < n-1 {
		q += f * (tot[win[lo+1-a]] - q)
	}

	contrib := make([]float64, reqs.K())
	wsum, count := 0.0, 0
	for t, r := range win {
		wt := 1.0
		if opts.Kernel == WindowEpanechnikov {
			u := (float64(a+t) - h) / w
			wt = 1 - u*u
			if wt <= 0 {
				continue
			}
		}
		wsum += wt
		count++
		for j, col := range reqs.cols {
			contrib[j] += wt * col[r]
		}
	}
	for j := range contrib {
		contrib[j] /= wsum
	}
	raw := sum(contrib)
	if opts.Rescale && raw > 0 {
		for j := range contrib {
			contrib[j] *= q / raw
		}
	}
	return Breakdown{
		Method:   MethodEuler,
		Kind:     KindEstimate,
		P:        p,
		Quantile: q,
		Target:   q,
		Stages:   reqs.stages,
		Contrib:  contrib,
		Residual: q - raw,
		Count:    float64(count),
	}.noBounds(), nil
}

// noBounds marks the bound fields of a breakdown that has none.
func (b Breakdown) noBounds() Breakdown {
	nan := math.NaN()
	b.TargetLower, b.TargetUpper = nan, nan
	b.QuantileLower, b.QuantileUpper = nan, nan
	return b
}

func sum(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s
}
