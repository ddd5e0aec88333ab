package attribution

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// The coverage study behind CheckCIMethod: for every interval method, its
// difference interval, p ∈ {0.5, 0.9, 0.99}, n ∈ {200, 1000, 10000} and
// three distributions with analytic quantiles, the share of repetitions
// whose 95 % interval holds the true quantile (or difference). `make test`
// runs a reduced count; TAILROOT_CI_COVERAGE_REPS=1000 (make ci-coverage)
// runs the full table, prints it in docs/functions.md's layout, and holds
// the same assertions at the tighter tolerance.

// covDist is a distribution given by its quantile function read through
// the upper tail: from e = −ln(1 − u), an Exp(1) draw, so that the sorted
// exponentials of Rényi's representation give a sorted sample.
type covDist struct {
	name string
	// fromExp maps an Exp(1) value to the distribution's, increasing.
	fromExp func(e float64) float64
	// quantile is the analytic p-quantile.
	quantile func(p float64) float64
}

var covDists = []covDist{
	{"exponential(1)", func(e float64) float64 { return e }, func(p float64) float64 { return -math.Log1p(-p) }},
	{
		"lognormal(0, 1)",
		// u = 1 − exp(−e); Φ⁻¹(u) = −Φ⁻¹(exp(−e)) stays accurate near u = 1.
		func(e float64) float64 { return math.Exp(-distuv.UnitNormal.Quantile(math.Exp(-e))) },
		func(p float64) float64 { return math.Exp(distuv.UnitNormal.Quantile(p)) },
	},
	{
		"pareto(α=2.5)",
		// F⁻¹(u) = (1 − u)^(−1/α) = exp(e/α).
		func(e float64) float64 { return math.Exp(e / 2.5) },
		func(p float64) float64 { return math.Pow(1-p, -1/2.5) },
	},
}

// sortedDraw fills x with an ascending iid sample of d.
func sortedDraw(rng *rand.Rand, x []float64, d covDist) {
	sortedExp(rng, x, 1)
	for i, e := range x {
		x[i] = d.fromExp(e)
	}
}

var covMethods = []CIMethod{CIBootstrap, CIMaritzJarrett, CIDeltaKDE, CIOrderStatistic}

// covCell is one cell of the table.
type covCell struct {
	method   CIMethod
	diff     bool
	p        float64
	n        int
	dist     string
	cover    int
	failed   int // intervals the method could not compute
	reps     int
	refused  bool
	widthSum float64
}

func (c covCell) rate() float64 { return float64(c.cover) / float64(c.reps) }

// runCoverage simulates reps repetitions of every method at one (dist, p,
// n), on the same samples for all methods: a for the quantile; a scaled by
// 1.5 and an independent b for the difference, whose truth is 0.5·P_p.
func runCoverage(d covDist, p float64, n, reps int, seed uint64) []covCell {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	a, a15, b := make([]float64, n), make([]float64, n), make([]float64, n)
	truth := d.quantile(p)
	cells := make([]covCell, 0, 2*len(covMethods))
	for _, diff := range []bool{false, true} {
		for _, m := range covMethods {
			each := 0.95
			if diff && m == CIOrderStatistic {
				each = math.Sqrt(0.95)
			}
			cells = append(cells, covCell{
				method: m, diff: diff, p: p, n: n, dist: d.name, reps: reps,
				refused: CheckCIMethod(m, n, p, each) != nil,
			})
		}
	}
	for rep := range reps {
		sortedDraw(rng, a, d)
		sortedDraw(rng, b, d)
		for j, v := range a {
			a15[j] = 1.5 * v
		}
		for i := range cells {
			c := &cells[i]
			if c.method == CIOrderStatistic && c.refused {
				continue // no interval exists
			}
			opts := CIOptions{Method: c.method, Seed: uint64(rep)}
			var iv Interval
			var err error
			want := truth
			if c.diff {
				iv, err = quantileDiffCISorted(a15, b, p, 0.95, opts)
				want = 0.5 * truth
			} else {
				iv, err = quantileCISorted(a, p, 0.95, opts)
			}
			if err != nil {
				c.failed++
				continue
			}
			if iv.Lower <= want && want <= iv.Upper {
				c.cover++
			}
			c.widthSum += (iv.Upper - iv.Lower) / want
		}
	}
	return cells
}

func TestOrderStatRanksByHand(t *testing.T) {
	// n = 20, p = 0.5: the textbook median interval (x_(6), x_(15)), 1-based,
	// coverage 1 − 2·P(B ≤ 5) = 1 − 2·0.020695 = 0.958611.
	lo, hi, cov, err := OrderStatRanks(20, 0.5, 0.95)
	if err != nil || lo != 5 || hi != 14 || math.Abs(cov-0.958611) > 1e-6 {
		t.Fatalf("ranks %d %d coverage %v err %v, want 5 14 0.958611", lo, hi, cov, err)
	}
	// Brute force over binomial probabilities summed from the pmf.
	for _, c := range []struct {
		n int
		p float64
	}{{50, 0.9}, {400, 0.99}, {1000, 0.99}, {3000, 0.5}, {10000, 0.999}} {
		pmf := func(k int) float64 {
			lg := func(x float64) float64 { v, _ := math.Lgamma(x); return v }
			n := float64(c.n)
			return math.Exp(lg(n+1) - lg(float64(k)+1) - lg(n-float64(k)+1) + float64(k)*math.Log(c.p) + (n-float64(k))*math.Log1p(-c.p))
		}
		cdf := make([]float64, c.n+2) // cdf[k] = P(B < k)
		for k := 0; k <= c.n; k++ {
			cdf[k+1] = cdf[k] + pmf(k)
		}
		tail := func(k int) float64 { return 1 - cdf[k] } // P(B ≥ k)
		// 1-based r: the largest with P(B < r) ≤ 0.025; s: the smallest with P(B ≥ s) ≤ 0.025.
		r, s := 0, c.n+1
		for k := 1; k <= c.n; k++ {
			if cdf[k] <= 0.025 {
				r = k
			}
		}
		for k := c.n; k >= 1; k-- {
			if tail(k) <= 0.025 {
				s = k
			}
		}
		lo, hi, cov, err := OrderStatRanks(c.n, c.p, 0.95)
		if err != nil {
			t.Fatalf("n=%d p=%v: %v", c.n, c.p, err)
		}
		if lo != r-1 || hi != s-1 {
			t.Errorf("n=%d p=%v: ranks %d %d, brute force %d %d", c.n, c.p, lo, hi, r-1, s-1)
		}
		if want := 1 - cdf[r] - tail(s); math.Abs(cov-want) > 1e-9 || cov < 0.95 {
			t.Errorf("n=%d p=%v: coverage %v, brute force %v", c.n, c.p, cov, want)
		}
	}
	// p = 0.99 with n = 200: 0.99^200 = 0.134 > 0.025, so no upper end.
	_, _, _, err = OrderStatRanks(200, 0.99, 0.95)
	var ie *InvalidMethodError
	if !asInvalid(err, &ie) || ie.MinN != OrderStatMinN(0.99, 0.95) || ie.MinN != 368 {
		t.Fatalf("n=200 p=0.99: %v, want refusal naming n ≥ 368", err)
	}
	for _, s := range []string{"order_statistic", "p=0.99", "n=200", "n ≥ 368"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
	if _, _, _, err := OrderStatRanks(368, 0.99, 0.95); err != nil {
		t.Errorf("n=368: %v", err)
	}
}

func asInvalid(err error, ie **InvalidMethodError) bool {
	e, ok := err.(*InvalidMethodError)
	if ok {
		*ie = e
	}
	return ok
}

// TestIntervalCoverageTable: every method that CheckCIMethod accepts at a
// (p, n) must cover at least nominal there, up to Monte Carlo error (2.5
// binomial standard errors below 0.95), on every distribution; the
// order-statistic interval wherever it exists. The reduced run (make test)
// uses 200 repetitions at n = 200 and 1000; the full table 1000 at all n.
func TestIntervalCoverageTable(t *testing.T) {
	if testing.Short() {
		t.Skip("coverage simulation")
	}
	reps, ns := 200, []int{200, 1000}
	if s := os.Getenv("TAILROOT_CI_COVERAGE_REPS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 10 {
			t.Fatalf("TAILROOT_CI_COVERAGE_REPS=%q: want an integer ≥ 10", s)
		}
		reps, ns = v, []int{200, 1000, 10000}
	}
	tol := 2.5 * math.Sqrt(0.95*0.05/float64(reps))
	var all []covCell
	for di, d := range covDists {
		for _, p := range []float64{0.5, 0.9, 0.99} {
			for _, n := range ns {
				cells := runCoverage(d, p, n, reps, uint64(1000+di))
				all = append(all, cells...)
				for _, c := range cells {
					if c.refused {
						continue
					}
					if c.failed > 0 || c.rate() < 0.95-tol {
						t.Errorf("%s %s p=%v n=%d: accepted but covers %.3f (%d failed), want ≥ %.3f",
							methodName(c), c.dist, p, n, c.rate(), c.failed, 0.95-tol)
					}
				}
			}
		}
	}
	t.Logf("coverage at 95 %% nominal, %d repetitions (refused cells in parentheses):\n%s", reps, coverageTable(all, ns))
}

func methodName(c covCell) string {
	if c.diff {
		return "diff " + c.method.String()
	}
	return c.method.String()
}

// coverageTable formats cells as a markdown table: a row per method and
// p, a column per distribution and n.
func coverageTable(cells []covCell, ns []int) string {
	var b strings.Builder
	b.WriteString("| method | p |")
	for _, d := range covDists {
		for _, n := range ns {
			fmt.Fprintf(&b, " %s n=%d |", strings.SplitN(d.name, "(", 2)[0], n)
		}
	}
	b.WriteString("\n|---|---|")
	for range len(covDists) * len(ns) {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, diff := range []bool{false, true} {
		for _, m := range covMethods {
			for _, p := range []float64{0.5, 0.9, 0.99} {
				name := methodName(covCell{method: m, diff: diff})
				fmt.Fprintf(&b, "| %s | %v |", name, p)
				for _, d := range covDists {
					for _, n := range ns {
						for _, c := range cells {
							if c.method != m || c.diff != diff || c.p != p || c.n != n || c.dist != d.name {
								continue
							}
							switch {
							case c.method == CIOrderStatistic && c.refused:
								b.WriteString(" none |")
							case c.refused:
								fmt.Fprintf(&b, " (%.1f) |", 100*c.rate())
							default:
								fmt.Fprintf(&b, " %.1f |", 100*c.rate())
							}
						}
					}
				}
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// TestOrderStatRanksTight: wherever the interval exists, its exact
// coverage is at least the level, each tail it leaves out is at most
// (1 − level)/2, and neither end can move inwards without a tail passing
// that bound (the ranks are the tightest with the guarantee). The tails
// are recomputed here with gonum's binomial CDF.
func TestOrderStatRanksTight(t *testing.T) {
	for _, level := range []float64{0.8, 0.9, 0.95, 0.99} {
		for _, p := range []float64{0.01, 0.1, 0.5, 0.75, 0.9, 0.99, 0.999} {
			for _, n := range []int{2, 7, 40, 99, 368, 1000, 4321, 20000} {
				lo, hi, cov, err := OrderStatRanks(n, p, level)
				if n < OrderStatMinN(p, level) {
					if err == nil {
						t.Errorf("n=%d p=%v level=%v: ranks %d %d below the minimum n %d", n, p, level, lo, hi, OrderStatMinN(p, level))
					}
					continue
				}
				if err != nil {
					t.Fatalf("n=%d p=%v level=%v: %v", n, p, level, err)
				}
				b := distuv.Binomial{N: float64(n), P: p}
				half := (1 - level) / 2
				// 1-based r = lo+1 and s = hi+1: P(B < r) = CDF(lo), P(B ≥ s) = 1 − CDF(hi).
				below, above := b.CDF(float64(lo)), 1-b.CDF(float64(hi))
				if below > half+1e-12 || above > half+1e-12 || cov < level-1e-12 {
					t.Errorf("n=%d p=%v level=%v: tails %v %v, coverage %v", n, p, level, below, above, cov)
				}
				if math.Abs(cov-(1-below-above)) > 1e-9 {
					t.Errorf("n=%d p=%v level=%v: coverage %v, gonum %v", n, p, level, cov, 1-below-above)
				}
				if lo+1 < hi && b.CDF(float64(lo+1)) <= half-1e-9 {
					t.Errorf("n=%d p=%v level=%v: lower rank %d could move up", n, p, level, lo)
				}
				if hi-1 > lo && 1-b.CDF(float64(hi-1)) <= half-1e-9 {
					t.Errorf("n=%d p=%v level=%v: upper rank %d could move down", n, p, level, hi)
				}
			}
		}
	}
}
