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
)

// String returns "bootstrap", "maritz_jarrett" or "delta_kde".
func (m CIMethod) String() string {
	switch m {
	case CIBootstrap:
		return "bootstrap"
	case CIMaritzJarrett:
		return "maritz_jarrett"
	case CIDeltaKDE:
		return "delta_kde"
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
	iv := Interval{Method: opts.Method, P: p, Level: level, Estimate: quantileSorted(y, p)}
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
	case CIDeltaKDE:
		iv.SE, err = deltaKDE(y, p, iv.Estimate)
	default:
		err = fmt.Errorf("unknown method %d", opts.Method)
	}
	if err != nil {
		return Interval{}, fmt.Errorf("quantile ci: %w", err)
	}
	z := mathext.NormalQuantile((1 + level) / 2)
	iv.Lower, iv.Upper = iv.Estimate-z*iv.SE, iv.Estimate+z*iv.SE
	return iv, nil
}

// QuantileDiffCI returns a level confidence interval for P_p(A) − P_p(B),
// a and b independent samples (two label sets, two versions). Bootstrap:
// independent replicates of each quantile, differenced, percentile
// interval. Maritz–Jarrett and delta: est ± z·√(se_a² + se_b²).
func QuantileDiffCI(a, b []float64, p, level float64, opts CIOptions) (Interval, error) {
	ya, err := checkCI("quantile diff ci: a", a, p, level)
	if err != nil {
		return Interval{}, err
	}
	yb, err := checkCI("quantile diff ci: b", b, p, level)
	if err != nil {
		return Interval{}, err
	}
	qa, qb := quantileSorted(ya, p), quantileSorted(yb, p)
	iv := Interval{Method: opts.Method, P: p, Level: level, Estimate: qa - qb}
	var sa, sb float64
	switch opts.Method {
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
		if sa, err = deltaKDE(ya, p, qa); err == nil {
			sb, err = deltaKDE(yb, p, qb)
		}
	default:
		err = fmt.Errorf("unknown method %d", opts.Method)
	}
	if err != nil {
		return Interval{}, fmt.Errorf("quantile diff ci: %w", err)
	}
	iv.SE = math.Hypot(sa, sb)
	z := mathext.NormalQuantile((1 + level) / 2)
	iv.Lower, iv.Upper = iv.Estimate-z*iv.SE, iv.Estimate+z*iv.SE
	return iv, nil
}

func resamples(o CIOptions) int {
	if o.Resamples > 0 {
		return o.Resamples
	}
	return 2000
}

// checkCI validates inputs and returns x sorted (a copy).
func checkCI(name string, x []float64, p, level float64) ([]float64, error) {
	if err := checkP(name, p); err != nil {
		return nil, err
	}
	if !(level > 0 && level < 1) {
		return nil, fmt.Errorf("%s: level %v outside (0, 1)", name, level)
	}
	if len(x) < 2 {
		return nil, fmt.Errorf("%s: %w: need at least 2 values, have %d", name, ErrEmpty, len(x))
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

// bootQuantile draws one bootstrap replicate of the type-7 quantile of the
// ascending sample y (see CIBootstrap).
func bootQuantile(y []float64, p float64, rng *rand.Rand) float64 {
	n := len(y)
	h := float64(n-1) * p
	lo := int(h) // 0-based rank; the (lo+1)-th order statistic
	if lo > n-1 {
		lo = n - 1
	}
	u := distuv.Beta{Alpha: float64(lo + 1), Beta: float64(n - lo), Src: rng}.Rand()
	i := min(int(float64(n)*u), n-1)
	v := y[i]
	f := h - float64(lo)
	if f == 0 || lo == n-1 {
		return v
	}
	// Next uniform order statistic: the minimum of n−lo−1 uniforms on (u, 1).
	u2 := u + (1-u)*(1-math.Pow(rng.Float64(), 1/float64(n-lo-1)))
	i2 := min(int(float64(n)*u2), n-1)
	return v + f*(y[i2]-v)
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
func maritzJarrett(y []float64, p float64) (float64, error) {
	n := len(y)
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
	hi := centre
	for hi < n && 1-cdf(hi) > 1e-18 {
		hi++
	}
	// Weight of y[i] (0-based) is cdf(i+1) − cdf(i) for i in [lo, hi).
	c := y[centre]
	var c1, c2 float64
	prev := cdf(lo)
	for i := lo; i < hi; i++ {
		next := cdf(i + 1)
		w := next - prev
		d := y[i] - c
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
	sd := math.Sqrt(ss / (n - 1))
	iqr := quantileSorted(y, 0.75) - quantileSorted(y, 0.25)
	spread := sd
	if iqr > 0 {
		spread = math.Min(sd, iqr/1.349)
	}
	bw := 0.9 * spread * math.Pow(n, -0.2)
	if !(bw > 0) {
		return 0, fmt.Errorf("delta kde: sample has no spread")
	}
	// Only points within 10 bandwidths of q contribute measurably.
	from, _ := slices.BinarySearch(y, q-10*bw)
	to, _ := slices.BinarySearch(y, q+10*bw)
	dens := 0.0
	for _, v := range y[from:to] {
		u := (v - q) / bw
		dens += math.Exp(-u * u / 2)
	}
	dens /= n * bw * math.Sqrt(2*math.Pi)
	if !(dens > 0) {
		return 0, fmt.Errorf("delta kde: density estimate at %v is zero", q)
	}
	return math.Sqrt(p*(1-p)/n) / dens, nil
}
