package attribution

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/dsp/fourier"
)

// Histogram is one stage's latency histogram, the only input when request
// records and accumulators are unavailable (a scraped vLLM or Triton
// histogram). Counts are per bucket, not cumulative; FromCumulative
// converts Prometheus' cumulative le buckets.
//
// Bucket b spans (Upper[b−1], Upper[b]], bucket 0 spans [0, Upper[0]];
// the last upper bound may be +Inf. Where a value inside a bucket is needed,
// the bucket's observations are modelled as spread uniformly over it (the
// interpolation Prometheus' histogram_quantile uses), a zero-width bucket
// [0, 0] as an atom at 0, and the +Inf bucket as an atom at the last finite
// bound. Quantiles of a histogram are those of this model: the smallest x
// with F(x) ≥ p, with F the model CDF. They are estimates; functions that
// promise bounds use bucket edges instead.
type Histogram struct {
	Upper  []float64
	Counts []float64
	// Sum of the observations, NaN when unknown.
	Sum float64
}

// FromCumulative builds a Histogram from cumulative counts (Prometheus'
// _bucket{le=…} series). Counts must not decrease.
func FromCumulative(upper, cumulative []float64, sum float64) (Histogram, error) {
	if len(upper) != len(cumulative) {
		return Histogram{}, fmt.Errorf("from cumulative: %d bounds, %d counts", len(upper), len(cumulative))
	}
	counts := make([]float64, len(cumulative))
	prev := 0.0
	for b, c := range cumulative {
		if c < prev {
			return Histogram{}, fmt.Errorf("from cumulative: bucket le=%v: count %v below previous %v", upper[b], c, prev)
		}
		counts[b] = c - prev
		prev = c
	}
	h := Histogram{Upper: upper, Counts: counts, Sum: sum}
	if err := h.validate(); err != nil {
		return Histogram{}, fmt.Errorf("from cumulative: %w", err)
	}
	return h, nil
}

// validate checks bounds, counts and sum, and that some count is positive.
func (h Histogram) validate() error {
	if len(h.Upper) == 0 || len(h.Upper) != len(h.Counts) {
		return fmt.Errorf("histogram: %d bounds, %d counts", len(h.Upper), len(h.Counts))
	}
	n := 0.0
	for b, u := range h.Upper {
		if !(u >= 0) || (math.IsInf(u, 1) && b != len(h.Upper)-1) {
			return fmt.Errorf("histogram: bound %d: %v must be ≥ 0 and finite except the last", b, u)
		}
		if b > 0 && u <= h.Upper[b-1] {
			return fmt.Errorf("histogram: bound %d: %v not above %v", b, u, h.Upper[b-1])
		}
		c := h.Counts[b]
		if !(c >= 0) || math.IsInf(c, 1) {
			return fmt.Errorf("histogram: bucket le=%v: count %v is not finite and non-negative", u, c)
		}
		n += c
	}
	if !(n > 0) {
		return fmt.Errorf("histogram: %w", ErrEmpty)
	}
	if !math.IsNaN(h.Sum) && (h.Sum < 0 || math.IsInf(h.Sum, 0)) {
		return fmt.Errorf("histogram: sum %v is not finite and non-negative", h.Sum)
	}
	return nil
}

func (h Histogram) total() float64 { return sum(h.Counts) }

// edges returns bucket b's lower and upper edge.
func (h Histogram) edges(b int) (lo, hi float64) {
	if b > 0 {
		lo = h.Upper[b-1]
	}
	return lo, h.Upper[b]
}

// quantile returns the model quantile: the smallest x with F(x) ≥ p
// (for p = 1, the top of the highest non-empty bucket).
func (h Histogram) quantile(p float64) float64 {
	t := p * h.total()
	cum, top := 0.0, 0.0
	for b, c := range h.Counts {
		if c == 0 {
			continue
		}
		lo, hi := h.edges(b)
		if math.IsInf(hi, 1) || hi == lo {
			hi = lo // an atom
		}
		if cum+c >= t {
			f := math.Min(math.Max((t-cum)/c, 0), 1)
			return lo + f*(hi-lo)
		}
		cum += c
		top = hi
	}
	return top // t above the total by rounding
}

// checkHists validates names against histograms.
func checkHists(name string, stages []string, hists []Histogram) error {
	if len(hists) == 0 || len(stages) != len(hists) {
		return fmt.Errorf("%s: %w: %d names for %d histograms", name, ErrStages, len(stages), len(hists))
	}
	for j, h := range hists {
		if err := h.validate(); err != nil {
			return fmt.Errorf("%s: stage %q: %w", name, stages[j], err)
		}
	}
	return nil
}

// HistogramMeans returns per-stage means, which add up to E[S] for any
// dependence between stages (linearity of expectation), provided the
// histograms count the same requests. With a known Sum the stage mean is
// Sum/n and exact. Without it the mean is estimated from bucket midpoints
// (the +Inf bucket at its lower edge) and bracketed by the lower and upper
// edges, Σ_b c_b·lo_b / n ≤ mean ≤ Σ_b c_b·hi_b / n (+Inf when the overflow
// bucket is used). Kind is KindExact when every stage has a Sum, otherwise
// KindEstimate; Lower/Upper and TargetLower/TargetUpper always bracket.
func HistogramMeans(stages []string, hists []Histogram) (Breakdown, error) {
	if err := checkHists("histogram means", stages, hists); err != nil {
		return Breakdown{}, err
	}
	k := len(hists)
	b := Breakdown{
		Method: MethodMean, Kind: KindExact, P: math.NaN(), Quantile: math.NaN(),
		Stages: stages, Contrib: make([]float64, k), Lower: make([]float64, k), Upper: make([]float64, k),
		QuantileLower: math.NaN(), QuantileUpper: math.NaN(),
	}
	for j, h := range hists {
		n := h.total()
		b.Count = math.Max(b.Count, n)
		if !math.IsNaN(h.Sum) {
			m := h.Sum / n
			b.Contrib[j], b.Lower[j], b.Upper[j] = m, m, m
			continue
		}
		b.Kind = KindEstimate
		var mid, lo, hi float64
		for i, c := range h.Counts {
			if c == 0 {
				continue
			}
			l, u := h.edges(i)
			lo += c * l
			hi += c * u
			if math.IsInf(u, 1) {
				mid += c * l
			} else {
				mid += c * (l + u) / 2
			}
		}
		b.Contrib[j], b.Lower[j], b.Upper[j] = mid/n, lo/n, hi/n
	}
	b.Target = sum(b.Contrib)
	b.TargetLower, b.TargetUpper = sum(b.Lower), sum(b.Upper)
	return b, nil
}

// ComonotonicBound returns an upper bound on both P_p(S) and E[S | S ≥ q]
// (q = P_p(S), type 7) from per-stage histograms alone, valid for any
// dependence between stages:
//
//	P_p(S) ≤ E[S | S ≥ q] ≤ Σ_i U_i,
//
// where, with n requests, t = n − ⌈(n−1)·p⌉ and U_i an upper bound on the
// mean of the t largest values of stage i. Why: the t requests of rank
// ≥ ⌈(n−1)p⌉ in S are in the tail and the only others are ties at q, which
// can only lower its mean, so E[S | S ≥ q] ≤ mean of the t largest S; that
// is Σ_i (mean of stage i over those t requests) ≤ Σ_i (mean of the t
// largest X_i). The sum is attained when stages are comonotonic, hence the
// name; it is the expected shortfall of the comonotonic sum.
//
// U_i is the smaller of (a) the top t observations at their buckets' upper
// edges, and (b) when Sum is known, (Sum − the other n − t observations at
// their buckets' lower edges) / t; (a) is +Inf when the +Inf bucket holds
// any of the top t. The guarantee needs the histograms to count the same
// requests. Kind is KindBound (upper); PerStage holds U_i.
//
// Counts that are not all integers come from rate() or increase(): they
// are the request counts N_b times an unknown factor 1/c, so n and t above
// are not the population's. The tail's share of the requests,
// f(N) = (N − ⌈(N−1)·p⌉)/N, is then bounded from below over every
// population size N ≥ 1 (minTailFraction, a little under 1 − p), and the
// bound takes the top t = f_min·n of each histogram, the last bucket
// partially. The mean of the top share f of a sample only grows as f
// shrinks, and so does the sum over stages of those means, so the bound
// holds whatever c was.
//
// Note Σ_i q_i(p) (ComonotonicQuantile) is not a bound: P_p is not
// subadditive, and independent stages with rare large values can have a
// P_p(S) well above it.
func ComonotonicBound(stages []string, hists []Histogram, p float64) (Estimate, error) {
	if err := checkP("comonotonic bound", p); err != nil {
		return Estimate{}, err
	}
	if err := checkHists("comonotonic bound", stages, hists); err != nil {
		return Estimate{}, err
	}
	integral := true
	for _, h := range hists {
		for _, c := range h.Counts {
			integral = integral && c == math.Trunc(c)
		}
	}
	share := math.NaN()
	if !integral {
		share = minTailFraction(p)
	}
	per := make([]float64, len(hists))
	for j, h := range hists {
		n := h.total()
		t := n - math.Ceil((n-1)*p)
		if !integral {
			t = n * share
		}
		if t <= 0 {
			// p = 1 on scaled counts: the bound is the largest value.
			per[j] = topEdge(h)
			continue
		}
		// (a) top t at upper edges.
		rem, top := t, 0.0
		for b := len(h.Counts) - 1; b >= 0 && rem > 0; b-- {
			take := math.Min(h.Counts[b], rem)
			if take == 0 {
				continue
			}
			_, hi := h.edges(b)
			top += take * hi
			rem -= take
		}
		u := top / t
		// (b) from the sum: the bottom n − t at lower edges.
		if !math.IsNaN(h.Sum) {
			rem, bottom := n-t, 0.0
			for b := 0; b < len(h.Counts) && rem > 0; b++ {
				take := math.Min(h.Counts[b], rem)
				lo, _ := h.edges(b)
				bottom += take * lo
				rem -= take
			}
			u = math.Min(u, (h.Sum-bottom)/t)
		}
		per[j] = u
	}
	v := sum(per)
	return Estimate{
		Method: MethodComonotonicBound, Kind: KindBound, P: p,
		Value: v, Lower: math.NaN(), Upper: v, Stages: stages, PerStage: per,
	}, nil
}

// minTailFraction returns min over N ≥ 1 of (N − ⌈(N−1)·p⌉)/N, the
// smallest share of a population of N requests in the tail S ≥ P_p(S)
// (type 7). It is at least max(1/N, (1−p)·(N−1)/N), since at least one
// request is in the tail and ⌈x⌉ < x + 1; the second term grows with N, so
// the search stops once it passes the minimum found. That floor is never
// below (1−p)/(2−p), which is returned instead when the search would be
// long (p above 1 − 2·10⁻⁶). For p = 0.99 the minimum is 0.01 (N = 100);
// it can be below 1 − p (p = 0.3: 2/3 at N = 3). The result may be up to
// 10⁻⁴ relative below the minimum, never above it.
func minTailFraction(p float64) float64 {
	if p >= 1 {
		return 0
	}
	if (2-p)/(1-p) > 1e6 {
		return (1 - p) / (2 - p)
	}
	// Stop once the floor is within δ of the minimum found, and return the
	// minimum less δ: still a lower bound, 10⁻⁴ relative below the exact one.
	const delta = 1e-4
	best := 1.0
	for n := 1.0; (1-p)*(n-1)/n < best*(1-delta); n++ {
		best = math.Min(best, (n-math.Ceil((n-1)*p))/n)
	}
	return best * (1 - delta)
}

// topEdge is the upper edge of h's highest non-empty bucket.
func topEdge(h Histogram) float64 {
	for b := len(h.Counts) - 1; b >= 0; b-- {
		if h.Counts[b] > 0 {
			_, hi := h.edges(b)
			return hi
		}
	}
	return 0
}

// ComonotonicQuantile returns Σ_i q_i(p), the stages' histogram quantiles
// summed: P_p(S) if all stages were comonotonic (every slow request slow in
// every stage at the same rank). It is an estimate under that assumption,
// not a bound on P_p(S) (see ComonotonicBound). Kind is KindEstimate;
// PerStage holds q_i(p).
func ComonotonicQuantile(stages []string, hists []Histogram, p float64) (Estimate, error) {
	if err := checkP("comonotonic quantile", p); err != nil {
		return Estimate{}, err
	}
	if err := checkHists("comonotonic quantile", stages, hists); err != nil {
		return Estimate{}, err
	}
	per := make([]float64, len(hists))
	for j, h := range hists {
		per[j] = h.quantile(p)
	}
	return Estimate{
		Method: MethodComonotonicQuantile, Kind: KindEstimate, P: p,
		Value: sum(per), Lower: math.NaN(), Upper: math.NaN(), Stages: stages, PerStage: per,
	}, nil
}

// ConvolutionOptions tunes IndependenceEstimate.
type ConvolutionOptions struct {
	// Cells is the number of lattice cells covering [0, U]. Zero or negative
	// selects 1<<14. Time is O(k·Cells·log Cells).
	Cells int
}

// IndependenceEstimate estimates P_p(S) assuming stages are independent, by
// convolving the stages' histogram models (see Histogram).
//
// Range: by the union bound, P_p(S) ≤ U = Σ_i q_i(1 − (1−p)/k) under any
// dependence, so only [0, U] matters; mass above U is dropped. Lattice:
// Δ = U/(Cells−1); stage i's model mass on [cΔ, (c+1)Δ) is placed at cΔ,
// the k lattice distributions are convolved (FFT, gonum dsp/fourier) and
// truncated to Cells cells after each step. The lattice sum T satisfies
// T ≤ S < T + kΔ, so with Q_T the smallest lattice point whose CDF reaches
// p, the model quantile lies in [Q_T, Q_T + kΔ] and the estimate
// Q_T + kΔ/2 is within kΔ/2 of it: resolution kΔ/2 = k·U/(2·(Cells−1)),
// about 2·10⁻⁴·U for k = 7 at the default Cells. The remaining error is the
// histogram model's (bucket width) and the independence assumption's,
// neither of which this function can bound. Kind is KindEstimate.
func IndependenceEstimate(stages []string, hists []Histogram, p float64, opts ConvolutionOptions) (Estimate, error) {
	if err := checkP("independence estimate", p); err != nil {
		return Estimate{}, err
	}
	if err := checkHists("independence estimate", stages, hists); err != nil {
		return Estimate{}, err
	}
	cells := opts.Cells
	if cells <= 0 {
		cells = 1 << 14
	}
	if cells < 2 {
		return Estimate{}, fmt.Errorf("independence estimate: cells %d: need ≥ 2", opts.Cells)
	}
	k := len(hists)
	out := Estimate{
		Method: MethodIndependenceEstimate, Kind: KindEstimate, P: p,
		Lower: math.NaN(), Upper: math.NaN(), Stages: stages,
	}
	u := 0.0
	for _, h := range hists {
		u += h.quantile(1 - (1-p)/float64(k))
	}
	if u == 0 {
		return out, nil
	}
	delta := u / float64(cells-1)

	size := 1
	for size < 2*cells {
		size <<= 1
	}
	fft := fourier.NewFFT(size)
	acc := latticeMass(hists[0], delta, cells)
	pad := make([]float64, size)
	ca := make([]complex128, size/2+1)
	cb := make([]complex128, size/2+1)
	for _, h := range hists[1:] {
		copy(pad, acc)
		clear(pad[cells:])
		fft.Coefficients(ca, pad)
		copy(pad, latticeMass(h, delta, cells))
		clear(pad[cells:])
		fft.Coefficients(cb, pad)
		for i := range ca {
			ca[i] *= cb[i]
		}
		fft.Sequence(pad, ca)
		for c := range acc {
			acc[c] = math.Max(pad[c]/float64(size), 0)
		}
	}
	cum := 0.0
	j := -1
	for c, m := range acc {
		cum += m
		if cum >= p-1e-12 {
			j = c
			break
		}
	}
	if j < 0 {
		return Estimate{}, fmt.Errorf("BUG: independence estimate: lattice mass %v below p=%v within union bound %v", cum, p, u)
	}
	out.Value = float64(j)*delta + float64(k)*delta/2
	return out, nil
}

// latticeMass returns the model probability of h on each cell
// [cΔ, (c+1)Δ), c < cells.
func latticeMass(h Histogram, delta float64, cells int) []float64 {
	m := make([]float64, cells)
	n := h.total()
	limit := delta * float64(cells)
	for b, cnt := range h.Counts {
		if cnt == 0 {
			continue
		}
		mass := cnt / n
		lo, hi := h.edges(b)
		if math.IsInf(hi, 1) || hi == lo {
			if x := math.Min(lo, hi); x < limit {
				m[min(int(x/delta), cells-1)] += mass
			}
			continue
		}
		w := hi - lo
		for c := int(lo / delta); c < cells; c++ {
			a := math.Max(lo, float64(c)*delta)
			e := math.Min(hi, float64(c+1)*delta)
			if e > a {
				m[c] += mass * (e - a) / w
			}
			if float64(c+1)*delta >= hi {
				break
			}
		}
	}
	return m
}
