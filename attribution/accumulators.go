package attribution

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Grid is a fixed set of end-to-end latency buckets. Upper bounds are
// inclusive, as in Prometheus' le: bucket 0 is [0, u_0], bucket b is
// (u_{b−1}, u_b], and a last overflow bucket (u_{G−1}, +∞) catches the
// rest, so a grid with G bounds has G+1 buckets.
//
// The grid must be the same wherever accumulators are built and merged:
// sums only add across instances and time when the buckets coincide.
type Grid struct {
	upper []float64
}

// NewGrid validates upper bounds: finite, ≥ 0, strictly increasing, at
// least one. The slice is copied.
func NewGrid(upper []float64) (Grid, error) {
	if len(upper) == 0 {
		return Grid{}, fmt.Errorf("new grid: no bounds")
	}
	for i, u := range upper {
		if !(u >= 0) || math.IsInf(u, 1) {
			return Grid{}, fmt.Errorf("new grid: bound %d: value %v is not finite and non-negative", i, u)
		}
		if i > 0 && u <= upper[i-1] {
			return Grid{}, fmt.Errorf("new grid: bound %d: value %v not above %v", i, u, upper[i-1])
		}
	}
	return Grid{upper: slices.Clone(upper)}, nil
}

// ExpGrid returns the exponential grid u_j = base·growth^j, j = 0..n−1:
// every finite bucket above the first is the same relative width
// (growth−1), which bounds the error of TailMeanAccumulators relative to
// latency rather than in absolute terms.
func ExpGrid(base, growth float64, n int) (Grid, error) {
	if !(base > 0) || math.IsInf(base, 1) || !(growth > 1) || math.IsInf(growth, 1) || n < 1 {
		return Grid{}, fmt.Errorf("exp grid: base %v, growth %v, n %d: need base > 0, growth > 1, n ≥ 1", base, growth, n)
	}
	u := make([]float64, n)
	for j := range u {
		u[j] = base * math.Pow(growth, float64(j))
	}
	return NewGrid(u)
}

// DefaultGrid returns the grid tailroot stores accumulators on: bounds
// 2^(j/4) seconds for j = −40..48, i.e. 89 bounds from 2^−10 s (0.98 ms) to
// 2^12 s (4096 s), four buckets per doubling (each 19% wide). They are the
// bucket boundaries of Prometheus native histograms with schema 2, so an
// accumulator bucket lines up with a native-histogram bucket of S.
func DefaultGrid() Grid {
	u := make([]float64, 0, 89)
	for j := -40; j <= 48; j++ {
		u = append(u, math.Exp2(float64(j)/4))
	}
	return Grid{upper: u}
}

// Upper returns the upper bounds (shared; do not modify).
func (g Grid) Upper() []float64 { return g.upper }

// Buckets returns the number of buckets, len(Upper())+1.
func (g Grid) Buckets() int { return len(g.upper) + 1 }

// Bucket returns the bucket holding v ≥ 0.
func (g Grid) Bucket(v float64) int {
	return sort.SearchFloat64s(g.upper, v)
}

// Edges returns bucket b's lower and upper edge; the overflow bucket's upper
// edge is +Inf.
func (g Grid) Edges(b int) (lo, hi float64) {
	if b > 0 {
		lo = g.upper[b-1]
	}
	if b < len(g.upper) {
		return lo, g.upper[b]
	}
	return lo, math.Inf(1)
}

// Accumulators are per-bucket stage sums on an end-to-end grid: for every
// request with end-to-end time S in bucket b, Count[b] += 1 and
// Sum[j][b] += X_j. They merge by addition across instances and time, which
// is what lets a tail breakdown outlive the request records. Counts are
// float64 because they arrive as series samples.
type Accumulators struct {
	Grid   Grid
	Stages []string
	Count  []float64   // Count[b], len Grid.Buckets()
	Sum    [][]float64 // Sum[j][b], stage j in Stages order
}

// NewAccumulators returns empty accumulators for the stages on grid.
func NewAccumulators(grid Grid, stages []string) *Accumulators {
	a := &Accumulators{Grid: grid, Stages: stages, Count: make([]float64, grid.Buckets()), Sum: make([][]float64, len(stages))}
	for j := range a.Sum {
		a.Sum[j] = make([]float64, grid.Buckets())
	}
	return a
}

// Add records one request's stage vector (len(x) == len(Stages), values
// finite and ≥ 0); S is their sum in stage order.
func (a *Accumulators) Add(x []float64) error {
	if len(x) != len(a.Stages) {
		return fmt.Errorf("accumulate: %w: %d values for %d stages", ErrStages, len(x), len(a.Stages))
	}
	s := 0.0
	for j, v := range x {
		if !(v >= 0) || math.IsInf(v, 1) {
			return fmt.Errorf("accumulate: stage %q: value %v is not finite and non-negative", a.Stages[j], v)
		}
		s += v
	}
	b := a.Grid.Bucket(s)
	a.Count[b]++
	for j, v := range x {
		a.Sum[j][b] += v
	}
	return nil
}

// Merge adds o into a. Grids and stages must be identical.
func (a *Accumulators) Merge(o *Accumulators) error {
	if !slices.Equal(a.Grid.upper, o.Grid.upper) {
		return fmt.Errorf("merge accumulators: grids differ")
	}
	if !slices.Equal(a.Stages, o.Stages) {
		return fmt.Errorf("merge accumulators: %w: %q vs %q", ErrStages, a.Stages, o.Stages)
	}
	for b, c := range o.Count {
		a.Count[b] += c
	}
	for j := range a.Sum {
		for b, s := range o.Sum[j] {
			a.Sum[j][b] += s
		}
	}
	return nil
}

// Accumulate builds accumulators from request records, bucketing each
// request by the S that Requests computed.
func Accumulate(reqs Requests, grid Grid) *Accumulators {
	a := NewAccumulators(grid, reqs.stages)
	buckets := make([]int, reqs.Len())
	for r, s := range reqs.total {
		b := grid.Bucket(s)
		buckets[r] = b
		a.Count[b]++
	}
	for j, col := range reqs.cols {
		sums := a.Sum[j]
		for r, x := range col {
			sums[buckets[r]] += x
		}
	}
	return a
}

// TailMeanAccumulators estimates the tail-mean allocation
// E[X_i | S ≥ q] (TailMean) from accumulators alone, and brackets the value
// TailMean would return on the underlying records.
//
// Let n = Σ_b Count[b], h = (n−1)·p and c = ⌈h⌉. On the records, the
// requests of 0-based rank ≥ c in S are in the tail S ≥ q, and the only
// others are ties with S = q = S_(c). Let b* be the bucket holding rank c
// (the first with cumulative count > c), N_a and A_i the count and stage-i
// sum of the buckets above b*, C and B_i those of b*, and
// a = (cumulative count through b*) − c, the requests of b* that are
// certainly in the tail. The tail takes m ∈ [a, C] requests from b*, whose
// stage-i sum P_i lies in [0, B_i], so
//
//	E[X_i | S ≥ q] ∈ [A_i / (N_a + C),  (A_i + B_i) / (N_a + a)].
//
// The estimate assumes no ties (m = a) and that the tail part of b*
// carries b*'s stage mix pro rata: (A_i + (a/C)·B_i) / (N_a + a); the
// estimates add up to the estimated tail mean. Target bounds use the bucket
// edges [lo, hi] of b* as well: the m partial requests have mean S in
// [lo, min(hi, Σ_i B_i / m)], extremised over m ∈ [a, C]. The width of every
// bracket is set by the partially included bucket alone, so a finer grid
// (or a p whose rank falls near a bucket edge) narrows it.
//
// Quantile is q estimated by spacing b*'s requests evenly over the bucket;
// QuantileLower/Upper are the lower edge of the bucket of rank ⌊h⌋ and the
// upper edge of b* (+Inf for the overflow bucket). The bounds are exact guarantees when counts are
// integers (raw accumulators); counts changed by rate() or increase()
// extrapolation make them approximate. Kind is KindEstimate.
func TailMeanAccumulators(acc *Accumulators, p float64) (Breakdown, error) {
	if err := checkP("tail mean accumulators", p); err != nil {
		return Breakdown{}, err
	}
	if acc == nil {
		return Breakdown{}, fmt.Errorf("tail mean accumulators: %w: nil accumulators", ErrEmpty)
	}
	nb := acc.Grid.Buckets()
	if len(acc.Count) != nb || len(acc.Sum) != len(acc.Stages) {
		return Breakdown{}, fmt.Errorf("tail mean accumulators: %w: %d counts for %d buckets, %d sums for %d stages",
			ErrStages, len(acc.Count), nb, len(acc.Sum), len(acc.Stages))
	}
	n := 0.0
	for b, c := range acc.Count {
		if !(c >= 0) || math.IsInf(c, 1) {
			return Breakdown{}, fmt.Errorf("tail mean accumulators: count of bucket %d: %v is not finite and non-negative", b, c)
		}
		n += c
	}
	for j, s := range acc.Sum {
		if len(s) != nb {
			return Breakdown{}, fmt.Errorf("tail mean accumulators: stage %q has %d sums for %d buckets", acc.Stages[j], len(s), nb)
		}
	}
	if n < 1 {
		return Breakdown{}, fmt.Errorf("tail mean accumulators: %w: total count %v", ErrEmpty, n)
	}
	h := (n - 1) * p
	c := math.Ceil(h)

	// b*: first bucket whose cumulative count exceeds c (rank c is 0-based).
	star, cum := nb-1, 0.0
	for b, cnt := range acc.Count {
		cum += cnt
		if cum > c {
			star = b
			break
		}
	}
	cStar := acc.Count[star]
	a := cum - c // requests of b* with rank ≥ c
	na := 0.0
	for b := star + 1; b < nb; b++ {
		na += acc.Count[b]
	}

	k := len(acc.Stages)
	contrib := make([]float64, k)
	lower := make([]float64, k)
	upper := make([]float64, k)
	above, partial := 0.0, 0.0 // Σ_i A_i and Σ_i B_i: S summed over the buckets
	for j, sums := range acc.Sum {
		aj := 0.0
		for b := star + 1; b < nb; b++ {
			aj += sums[b]
		}
		bj := sums[star]
		contrib[j] = (aj + a/cStar*bj) / (na + a)
		lower[j] = aj / (na + cStar)
		upper[j] = (aj + bj) / (na + a)
		above += aj
		partial += bj
	}
	target := sum(contrib)

	// Tail-mean bracket: the m partial requests have mean S in
	// [lo, min(hi, partial/m)]; the lower end is monotone in m, the upper
	// one peaks where m·hi = partial, so check that point too.
	lo, hi := acc.Grid.Edges(star)
	tl, tu := math.Inf(1), math.Inf(-1)
	ms := []float64{a, cStar}
	if hi > 0 && !math.IsInf(hi, 1) {
		ms = append(ms, math.Min(math.Max(partial/hi, a), cStar))
	}
	for _, m := range ms {
		l := (above + m*lo) / (na + m)
		u := (above + math.Min(m*hi, partial)) / (na + m)
		tl, tu = math.Min(tl, l), math.Max(tu, u)
	}

	// q interpolates ranks ⌊h⌋ and ⌊h⌋+1 ≤ c: it lies between the lower
	// edge of the bucket holding rank ⌊h⌋ and the upper edge of b*. The
	// estimate spaces b*'s requests evenly (the j-th of C at fraction
	// (j+½)/C) or, when rank ⌊h⌋ sits in an earlier bucket, takes the edge
	// between them; in the overflow bucket it is the last finite bound, as
	// Prometheus' histogram_quantile does.
	before := cum - cStar
	bl, cb := star, 0.0
	for b, cnt := range acc.Count {
		cb += cnt
		if cb > math.Floor(h) {
			bl = b
			break
		}
	}
	ql, _ := acc.Grid.Edges(bl)
	q := lo
	if bl == star && !math.IsInf(hi, 1) {
		frac := math.Min(math.Max((h-before+0.5)/cStar, 0), 1)
		q = lo + frac*(hi-lo)
	}

	return Breakdown{
		Method:        MethodTailMeanAccumulators,
		Kind:          KindEstimate,
		P:             p,
		Quantile:      q,
		Target:        target,
		Stages:        acc.Stages,
		Contrib:       contrib,
		Residual:      0,
		Count:         na + a,
		Lower:         lower,
		Upper:         upper,
		TargetLower:   tl,
		TargetUpper:   tu,
		QuantileLower: ql,
		QuantileUpper: hi,
	}, nil
}
