package attribution

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat/distuv"
)

// CIMethod selects how QuantileCI and QuantileDiffCI build an interval.
type CIMethod uint8

// Interval methods. The zero value selects CIBootstrap.
const (
	// CIBootstrap is the percentile bootstrap: the interval is the
	// ((1−level)/2, (1+level)/2) type-7 quantiles of B bootstrap
	// replicates of the type-7 sample quantile. Replicates are drawn
	// without materialising resamples: a resample's r-th order statistic
	// (1-based) is x_(⌊n·U_(r)⌋) with U_(r) ~ Beta(r, n−r+1) the r-th of n
	// uniform order statistics, and U_(r+1) = U_(r) + (1−U_(r))·(1 −
	// V^(1/(n−r))) with V uniform. This has exactly the distribution of
	// resampling with replacement, at O(1) per replicate after one sort.
	CIBootstrap CIMethod = iota
	// CIMaritzJarrett is est ± z·se with the Maritz–Jarrett (1978) standard
	// error: with m = ⌊n·p + ½⌋ (1-based), a = m−1, b = n−m, weights
	// W_i = I_{i/n}(a, b) − I_{(i−1)/n}(a, b) (I the regularized incomplete
	// beta, shape parameters a and b), C_k = Σ_i W_i·x_(i)^k and
	// se = √(C_2 − C_1²), as scipy.stats.mstats.mjci computes it (and
	// Wilcox's mjse). The centre est is the type-7 quantile, not x_(m); the
	// two differ by O(1/n). Needs 2 ≤ m ≤ n−1.
	CIMaritzJarrett
	// CIDeltaKDE is est ± z·se with the delta-method (asymptotic) standard
	// error se = √(p(1−p)/n) / f̂(est), f̂ a Gaussian kernel density estimate
	// with Silverman's bandwidth 0.9·min(sd, IQR/1.349)·n^(−1/5).
	CIDeltaKDE
	// CIOrderStatistic is the distribution-free interval [x_(r), x_(s)]
	// with exact binomial ranks (see OrderStatRanks): coverage at least
	// level for every n, p and continuous distribution, where it exists.
	// It is the default of quantile_ci, quantile_diff_ci and
	// /api/v1/attribution/ab; the estimate is the type-7 quantile.
	CIOrderStatistic
)

// String returns "bootstrap", "maritz_jarrett", "delta_kde" or
// "order_statistic".
func (m CIMethod) String() string {
	switch m {
	case CIBootstrap:
		return "bootstrap"
	case CIMaritzJarrett:
		return "maritz_jarrett"
	case CIDeltaKDE:
		return "delta_kde"
	case CIOrderStatistic:
		return "order_statistic"
	}
	return fmt.Sprintf("ci_method(%d)", uint8(m))
}

// MarshalText implements encoding.TextMarshaler with String.
func (m CIMethod) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// CIOptions tunes the interval functions.
type CIOptions struct {
	Method CIMethod
	// Resamples is the number of bootstrap replicates B; zero or negative
	// selects 2000.
	Resamples int
	// Seed seeds the bootstrap's PCG generator: the same data, options and
	// seed give the same interval.
	Seed uint64
}

// Interval is a confidence interval for a quantile or a quantile difference.
type Interval struct {
	Method CIMethod
	P      float64
	Level  float64
	// Estimate is the type-7 sample quantile (or difference of two).
	Estimate     float64
	Lower, Upper float64
	// SE is the standard error the interval used, or for the bootstrap the
	// standard deviation of the replicates.
	SE float64
}

// QuantileCI returns a level confidence interval (e.g. 0.95) for the
// p-quantile of the population x was drawn from; see CIMethod for the
// methods. x needs at least two finite values; it is not modified.
func QuantileCI(x []float64, p, level float64, opts CIOptions) (Interval, error) {
	y, err := checkCI("quantile ci", x, p, level)
	if err != nil {
		return Interval{}, err
	}
	if err := CheckCIMethod(opts.Method, len(y), p, level); err != nil {
		return Interval{}, fmt.Errorf("quantile ci: %w", err)
	}
	return quantileCISorted(y, p, level, opts)
}

// quantileCISorted is QuantileCI on an ascending sample without the
// validity check (the coverage simulation measures refused methods too).
func quantileCISorted(y []float64, p, level float64, opts CIOptions) (Interval, error) {
	if opts.Method == CIDeltaKDE {
		iv := Interval{Method: opts.Method, P: p, Level: level, Estimate: quantileSorted(y, p)}
		var err error
		if iv.SE, err = deltaKDE(y, p, iv.Estimate); err != nil {
			return Interval{}, fmt.Errorf("quantile ci: %w", err)
		}
		return iv.normal(), nil
	}
	return quantileCIOrdered(sortedStats(y), p, level, opts)
}

// OrderStats is a sample seen through its order statistics: At(r) is the
// value of 0-based rank r of Len values. An implementation may hold only
// some ranks (see QuantileCIRanks) and panic on others.
type OrderStats interface {
	Len() int
	At(rank int) float64
}

type sortedStats []float64

func (s sortedStats) Len() int            { return len(s) }
func (s sortedStats) At(rank int) float64 { return s[rank] }

// QuantileCIRanks returns the closed range [lo, hi] of 0-based ranks that
// QuantileCIOrdered reads for a sample of n values with these arguments;
// only the bootstrap and Maritz–Jarrett read order statistics alone (the
// delta method needs the whole sample, see DeltaCI). The bootstrap's ranks
// are drawn from its seeded generator, which depends on n, p and opts but
// never on the values, so they are known before any value is. A caller
// holding the sample in pieces (on several servers) fetches just those
// ranks and gets QuantileCI's interval bit for bit.
func QuantileCIRanks(n int, p, level float64, opts CIOptions) (lo, hi int, err error) {
	if err := checkCIArgs("quantile ci", n, p, level); err != nil {
		return 0, 0, err
	}
	if err := CheckCIMethod(opts.Method, n, p, level); err != nil {
		return 0, 0, fmt.Errorf("quantile ci: %w", err)
	}
	r := &rankRange{lo: n, hi: -1}
	if _, err := quantileCIOrdered(r.stats(n), p, level, opts); err != nil {
		return 0, 0, err
	}
	return r.lo, r.hi, nil
}

// rankRange records the ranks an OrderStats is asked for, answering 0.
type rankRange struct{ lo, hi int }

type rankRecorder struct {
	n int
	r *rankRange
}

func (r *rankRange) stats(n int) OrderStats { return rankRecorder{n: n, r: r} }

func (s rankRecorder) Len() int { return s.n }
func (s rankRecorder) At(rank int) float64 {
	s.r.lo, s.r.hi = min(s.r.lo, rank), max(s.r.hi, rank)
	return 0
}

// QuantileCIOrdered is QuantileCI over order statistics for the bootstrap
// and Maritz–Jarrett: given the values of the ranks QuantileCIRanks names,
// it returns QuantileCI's interval bit for bit. CIDeltaKDE is refused
// (use DeltaCI).
func QuantileCIOrdered(y OrderStats, p, level float64, opts CIOptions) (Interval, error) {
	if err := checkCIArgs("quantile ci", y.Len(), p, level); err != nil {
		return Interval{}, err
	}
	if err := CheckCIMethod(opts.Method, y.Len(), p, level); err != nil {
		return Interval{}, fmt.Errorf("quantile ci: %w", err)
	}
	return quantileCIOrdered(y, p, level, opts)
}

func quantileCIOrdered(y OrderStats, p, level float64, opts CIOptions) (Interval, error) {
	iv := Interval{Method: opts.Method, P: p, Level: level, Estimate: atRankStats(y, float64(y.Len()-1)*p)}
	var err error
	switch opts.Method {
	case CIBootstrap:
		rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
		reps := make([]float64, resamples(opts))
		for i := range reps {
			reps[i] = bootQuantile(y, p, rng)
		}
		iv.Lower, iv.Upper, iv.SE = percentile(reps, level)
		return iv, nil
	case CIMaritzJarrett:
		iv.SE, err = maritzJarrett(y, p)
	case CIOrderStatistic:
		if iv, err = orderStatCI(y, p, level); err == nil {
			return iv, nil
		}
	case CIDeltaKDE:
		err = fmt.Errorf("the delta method needs the whole sample, not order statistics")
	default:
		err = fmt.Errorf("unknown method %d", opts.Method)
	}
	if err != nil {
		return Interval{}, fmt.Errorf("quantile ci: %w", err)
	}
	return iv.normal(), nil
}

// normal sets Lower and Upper to Estimate ∓ z·SE.
func (iv Interval) normal() Interval {
	z := mathext.NormalQuantile((1 + iv.Level) / 2)
	iv.Lower, iv.Upper = iv.Estimate-z*iv.SE, iv.Estimate+z*iv.SE
	return iv
}

// atRankStats is atRank over order statistics.
func atRankStats(y OrderStats, h float64) float64 {
	n := y.Len()
	lo := int(h)
	if lo >= n-1 {
		return y.At(n - 1)
	}
	v := y.At(lo)
	f := h - float64(lo)
	if f == 0 {
		return v
	}
	return v + f*(y.At(lo+1)-v)
}

// DeltaSummary is what the delta-method interval reads from a sample of N
// values, as sums that a sample held in pieces can add up: SS = Σ (x −
// mean)², IQR = P_.75 − P_.25 and Estimate = P_p (type 7), and KernelSum(q,
// bw) = Σ exp(−((x − q)/bw)²/2) over the x in [q − 10·bw, q + 10·bw).
type DeltaSummary struct {
	N         int
	SS, IQR   float64
	Estimate  float64
	KernelSum func(q, bw float64) (float64, error)
}

// DeltaBandwidth is Silverman's bandwidth 0.9·min(sd, IQR/1.349)·n^(−1/5)
// with sd = √(SS/(n−1)) (sd alone when the IQR is 0).
func DeltaBandwidth(n int, ss, iqr float64) float64 {
	nf := float64(n)
	sd := math.Sqrt(ss / (nf - 1))
	spread := sd
	if iqr > 0 {
		spread = math.Min(sd, iqr/1.349)
	}
	return 0.9 * spread * math.Pow(nf, -0.2)
}

// DeltaCI is QuantileCI with CIDeltaKDE from a DeltaSummary: equal to it
// up to the order in which the sums were added.
func DeltaCI(s DeltaSummary, p, level float64) (Interval, error) {
	if err := checkCIArgs("quantile ci", s.N, p, level); err != nil {
		return Interval{}, err
	}
	if err := CheckCIMethod(CIDeltaKDE, s.N, p, level); err != nil {
		return Interval{}, fmt.Errorf("quantile ci: %w", err)
	}
	iv := Interval{Method: CIDeltaKDE, P: p, Level: level, Estimate: s.Estimate}
	var err error
	if iv.SE, err = deltaSE(s, p); err != nil {
		return Interval{}, fmt.Errorf("quantile ci: %w", err)
	}
	return iv.normal(), nil
}

// QuantileDiffCI returns a level confidence interval for P_p(A) − P_p(B),
// a and b independent samples (two label sets, two versions). Bootstrap:
// independent replicates of each quantile, differenced, percentile
// interval. Maritz–Jarrett and delta: est ± z·√(se_a² + se_b²).
// Order statistic: [L_a − U_b, U_a − L_b] from the two order-statistic
// intervals at level √level each; both cover with probability at least
// √level·√level = level (the samples are independent), and when both do
// the difference lies in that range, so it too is distribution-free.
// Each sample must pass CheckCIMethod (at √level for the order statistic).
func QuantileDiffCI(a, b []float64, p, level float64, opts CIOptions) (Interval, error) {
	ya, err := checkCI("quantile diff ci: a", a, p, level)
	if err != nil {
		return Interval{}, err
	}
	yb, err := checkCI("quantile diff ci: b", b, p, level)
	if err != nil {
		return Interval{}, err
	}
	each := level
	if opts.Method == CIOrderStatistic {
		each = math.Sqrt(level)
	}
	if err := CheckCIMethod(opts.Method, len(ya), p, each); err != nil {
		return Interval{}, fmt.Errorf("quantile diff ci: a: %w", err)
	}
	if err := CheckCIMethod(opts.Method, len(yb), p, each); err != nil {
		return Interval{}, fmt.Errorf("quantile diff ci: b: %w", err)
	}
	return quantileDiffCISorted(ya, yb, p, level, opts)
}

// quantileDiffCISorted is QuantileDiffCI on ascending samples without the
// validity check.
func quantileDiffCISorted(ya, yb []float64, p, level float64, opts CIOptions) (Interval, error) {
	if opts.Method == CIDeltaKDE {
		qa, qb := quantileSorted(ya, p), quantileSorted(yb, p)
		sa, err := deltaKDE(ya, p, qa)
		if err == nil {
			var sb float64
			if sb, err = deltaKDE(yb, p, qb); err == nil {
				return NormalDiff(Interval{Method: CIDeltaKDE, P: p, Estimate: qa, SE: sa}, Interval{Estimate: qb, SE: sb}, level), nil
			}
		}
		return Interval{}, fmt.Errorf("quantile diff ci: %w", err)
	}
	return quantileDiffCIOrdered(sortedStats(ya), sortedStats(yb), p, level, opts)
}

// QuantileDiffCIOrdered is QuantileDiffCI over order statistics for the
// bootstrap, Maritz–Jarrett and the order statistic: given the values of
// the ranks QuantileDiffCIRanks names for each sample, it returns
// QuantileDiffCI's interval bit for bit. CIDeltaKDE is refused (combine
// two DeltaCI with NormalDiff).
func QuantileDiffCIOrdered(ya, yb OrderStats, p, level float64, opts CIOptions) (Interval, error) {
	if err := checkDiffArgs(ya.Len(), yb.Len(), p, level, opts.Method); err != nil {
		return Interval{}, err
	}
	return quantileDiffCIOrdered(ya, yb, p, level, opts)
}

// QuantileDiffCIRanks returns, for samples of na and nb values, the closed
// 0-based rank ranges QuantileDiffCIOrdered reads from each.
func QuantileDiffCIRanks(na, nb int, p, level float64, opts CIOptions) (a, b [2]int, err error) {
	if err := checkDiffArgs(na, nb, p, level, opts.Method); err != nil {
		return a, b, err
	}
	ra, rb := &rankRange{lo: na, hi: -1}, &rankRange{lo: nb, hi: -1}
	if _, err := quantileDiffCIOrdered(ra.stats(na), rb.stats(nb), p, level, opts); err != nil {
		return a, b, err
	}
	return [2]int{ra.lo, ra.hi}, [2]int{rb.lo, rb.hi}, nil
}

// CheckDiffCI is the argument and validity check QuantileDiffCI applies
// to samples of na and nb values, with the same errors.
func CheckDiffCI(na, nb int, p, level float64, m CIMethod) error {
	return checkDiffArgs(na, nb, p, level, m)
}

// QuantileOrdered is the type-7 p-quantile read from order statistics
// (ranks ⌊(n−1)p⌋ and the next one).
func QuantileOrdered(y OrderStats, p float64) float64 { return atRankStats(y, float64(y.Len()-1)*p) }

// checkDiffArgs is the argument and validity check of QuantileDiffCI for
// samples of na and nb values.
func checkDiffArgs(na, nb int, p, level float64, m CIMethod) error {
	if err := checkCIArgs("quantile diff ci: a", na, p, level); err != nil {
		return err
	}
	if err := checkCIArgs("quantile diff ci: b", nb, p, level); err != nil {
		return err
	}
	each := level
	if m == CIOrderStatistic {
		each = math.Sqrt(level)
	}
	if err := CheckCIMethod(m, na, p, each); err != nil {
		return fmt.Errorf("quantile diff ci: a: %w", err)
	}
	if err := CheckCIMethod(m, nb, p, each); err != nil {
		return fmt.Errorf("quantile diff ci: b: %w", err)
	}
	return nil
}

func quantileDiffCIOrdered(ya, yb OrderStats, p, level float64, opts CIOptions) (Interval, error) {
	qa := atRankStats(ya, float64(ya.Len()-1)*p)
	qb := atRankStats(yb, float64(yb.Len()-1)*p)
	iv := Interval{Method: opts.Method, P: p, Level: level, Estimate: qa - qb}
	var sa, sb float64
	var err error
	switch opts.Method {
	case CIOrderStatistic:
		each := math.Sqrt(level)
		ia, err := orderStatCI(ya, p, each)
		if err != nil {
			return Interval{}, fmt.Errorf("quantile diff ci: a: %w", err)
		}
		ib, err := orderStatCI(yb, p, each)
		if err != nil {
			return Interval{}, fmt.Errorf("quantile diff ci: b: %w", err)
		}
		return OrderStatDiff(ia, ib, level), nil
	case CIBootstrap:
		rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
		reps := make([]float64, resamples(opts))
		for i := range reps {
			reps[i] = bootQuantile(ya, p, rng) - bootQuantile(yb, p, rng)
		}
		iv.Lower, iv.Upper, iv.SE = percentile(reps, level)
		return iv, nil
	case CIMaritzJarrett:
		if sa, err = maritzJarrett(ya, p); err == nil {
			sb, err = maritzJarrett(yb, p)
		}
	case CIDeltaKDE:
		err = fmt.Errorf("the delta method needs the whole sample, not order statistics")
	default:
		err = fmt.Errorf("unknown method %d", opts.Method)
	}
	if err != nil {
		return Interval{}, fmt.Errorf("quantile diff ci: %w", err)
	}
	return NormalDiff(Interval{Method: opts.Method, P: p, Estimate: qa, SE: sa}, Interval{Estimate: qb, SE: sb}, level), nil
}

// NormalDiff is the normal interval of a.Estimate − b.Estimate with
// standard error √(a.SE² + b.SE²), the difference interval of
// Maritz–Jarrett and the delta method (method and p taken from a).
func NormalDiff(a, b Interval, level float64) Interval {
	iv := Interval{Method: a.Method, P: a.P, Level: level, Estimate: a.Estimate - b.Estimate, SE: math.Hypot(a.SE, b.SE)}
	z := mathext.NormalQuantile((1 + level) / 2)
	iv.Lower, iv.Upper = iv.Estimate-z*iv.SE, iv.Estimate+z*iv.SE
	return iv
}

func resamples(o CIOptions) int {
	if o.Resamples > 0 {
		return o.Resamples
	}
	return 2000
}

// checkCI validates inputs and returns x sorted (a copy).
func checkCI(name string, x []float64, p, level float64) ([]float64, error) {
	if err := checkCIArgs(name, len(x), p, level); err != nil {
		return nil, err
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: value %d is %v", name, i, v)
		}
	}
	y := slices.Clone(x)
	slices.Sort(y)
	return y, nil
}

// checkCIArgs validates the level arguments and the sample size n.
func checkCIArgs(name string, n int, p, level float64) error {
	if err := checkP(name, p); err != nil {
		return err
	}
	if !(level > 0 && level < 1) {
		return fmt.Errorf("%s: level %v outside (0, 1)", name, level)
	}
	if n < 2 {
		return fmt.Errorf("%s: %w: need at least 2 values, have %d", name, ErrEmpty, n)
	}
	return nil
}

// bootQuantile draws one bootstrap replicate of the type-7 quantile of the
// ascending sample y (see CIBootstrap).
func bootQuantile(y OrderStats, p float64, rng *rand.Rand) float64 {
	n := y.Len()
	h := float64(n-1) * p
	lo := int(h) // 0-based rank; the (lo+1)-th order statistic
	if lo > n-1 {
		lo = n - 1
	}
	u := distuv.Beta{Alpha: float64(lo + 1), Beta: float64(n - lo), Src: rng}.Rand()
	i := min(int(float64(n)*u), n-1)
	v := y.At(i)
	f := h - float64(lo)
	if f == 0 || lo == n-1 {
		return v
	}
	// Next uniform order statistic: the minimum of n−lo−1 uniforms on (u, 1).
	u2 := u + (1-u)*(1-math.Pow(rng.Float64(), 1/float64(n-lo-1)))
	i2 := min(int(float64(n)*u2), n-1)
	return v + f*(y.At(i2)-v)
}

// percentile returns the equal-tailed level interval of replicates and
// their standard deviation. It sorts reps.
func percentile(reps []float64, level float64) (lo, hi, sd float64) {
	slices.Sort(reps)
	mean := sum(reps) / float64(len(reps))
	ss := 0.0
	for _, r := range reps {
		ss += (r - mean) * (r - mean)
	}
	sd = math.Sqrt(ss / float64(len(reps)-1))
	return quantileSorted(reps, (1-level)/2), quantileSorted(reps, (1+level)/2), sd
}

// maritzJarrett returns the Maritz–Jarrett standard error of the
// p-quantile of the ascending sample y (see CIMaritzJarrett). Weights
// outside the range where the beta CDF moves by more than 1e-18 are
// skipped, so the cost is O(√n) incomplete-beta evaluations, not O(n).
func maritzJarrett(y OrderStats, p float64) (float64, error) {
	n := y.Len()
	m := int(math.Floor(float64(n)*p + 0.5))
	if m < 2 || m > n-1 {
		return 0, fmt.Errorf("maritz-jarrett: n=%d too small for p=%v (m=%d outside [2, n−1])", n, p, m)
	}
	a, b := float64(m-1), float64(n-m)
	cdf := func(i int) float64 { return mathext.RegIncBeta(a, b, float64(i)/float64(n)) }
	// Walk out from the mode until the CDF is flat.
	centre := m - 1
	lo := centre
	for lo > 0 && cdf(lo) > 1e-18 {
		lo--
	}
	// The upper tail is read as I_{1−x}(b, a) = 1 − I_x(a, b): 1 − cdf
	// itself cannot fall below the float64 spacing near 1 (1.1e-16), and
	// the walk would run on to n, reading every order statistic above m.
	upper := func(i int) float64 { return mathext.RegIncBeta(b, a, 1-float64(i)/float64(n)) }
	hi := centre
	for hi < n && upper(hi) > 1e-18 {
		hi++
	}
	// Weight of y[i] (0-based) is cdf(i+1) − cdf(i) for i in [lo, hi).
	c := y.At(centre)
	var c1, c2 float64
	prev := cdf(lo)
	for i := lo; i < hi; i++ {
		next := cdf(i + 1)
		w := next - prev
		d := y.At(i) - c
		c1 += w * d
		c2 += w * d * d
		prev = next
	}
	v := c2 - c1*c1
	return math.Sqrt(math.Max(v, 0)), nil
}

// deltaKDE returns √(p(1−p)/n) / f̂(q) with a Gaussian KDE at q using
// Silverman's bandwidth (see CIDeltaKDE). y is ascending.
func deltaKDE(y []float64, p, q float64) (float64, error) {
	n := float64(len(y))
	mean := sum(y) / n
	ss := 0.0
	for _, v := range y {
		ss += (v - mean) * (v - mean)
	}
	s := DeltaSummary{
		N: len(y), SS: ss, Estimate: q,
		IQR: quantileSorted(y, 0.75) - quantileSorted(y, 0.25),
		KernelSum: func(q, bw float64) (float64, error) {
			// Only points within 10 bandwidths of q contribute measurably.
			from, _ := slices.BinarySearch(y, q-10*bw)
			to, _ := slices.BinarySearch(y, q+10*bw)
			return KernelSum(y[from:to], q, bw), nil
		},
	}
	return deltaSE(s, p)
}

// KernelSum is Σ exp(−((v − q)/bw)²/2) over x: the unnormalised Gaussian
// kernel density at q, the part of DeltaSummary.KernelSum one piece of a
// sample contributes (the caller picks the values in range).
func KernelSum(x []float64, q, bw float64) float64 {
	dens := 0.0
	for _, v := range x {
		u := (v - q) / bw
		dens += math.Exp(-u * u / 2)
	}
	return dens
}

// deltaSE is the delta-method standard error from a summary.
func deltaSE(s DeltaSummary, p float64) (float64, error) {
	bw := DeltaBandwidth(s.N, s.SS, s.IQR)
	if !(bw > 0) {
		return 0, fmt.Errorf("delta kde: sample has no spread")
	}
	n := float64(s.N)
	k, err := s.KernelSum(s.Estimate, bw)
	if err != nil {
		return 0, fmt.Errorf("delta kde: %w", err)
	}
	dens := k / (n * bw * math.Sqrt(2*math.Pi))
	if !(dens > 0) {
		return 0, fmt.Errorf("delta kde: density estimate at %v is zero", s.Estimate)
	}
	return math.Sqrt(p*(1-p)/n) / dens, nil
}
