package attribution

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalidMethod is returned (wrapped in an *InvalidMethodError) when an
// interval method is asked for at a quantile level p and sample size n
// where it does not reach its nominal coverage, or, for the
// order-statistic interval, where it does not exist.
var ErrInvalidMethod = errors.New("interval method not valid here")

// InvalidMethodError names the method, p, n and level that were refused,
// and the smallest n at which the method would be accepted at this p (0
// when none is).
type InvalidMethodError struct {
	Method   CIMethod
	P, Level float64
	N, MinN  int
	Reason   string
}

func (e *InvalidMethodError) Error() string {
	s := fmt.Sprintf("method %s is not valid at p=%v with n=%d (level %v): %s", e.Method, e.P, e.N, e.Level, e.Reason)
	if e.MinN > 0 {
		s += fmt.Sprintf("; it needs n ≥ %d at this p", e.MinN)
	}
	if e.Method != CIOrderStatistic {
		s += "; use method order_statistic"
	}
	return s
}

// Is maps the error onto ErrInvalidMethod.
func (e *InvalidMethodError) Is(target error) bool { return target == ErrInvalidMethod }

// CheckCIMethod returns an *InvalidMethodError when method m is refused at
// p with n values at level, nil when it may be used. See ciValidity for
// the rule and docs/functions.md for the coverage table it comes from.
func CheckCIMethod(m CIMethod, n int, p, level float64) error {
	if m == CIOrderStatistic {
		_, _, _, err := OrderStatRanks(n, p, level)
		return err
	}
	minN, reason := ciValidity(m, p)
	if minN < 0 || n < minN {
		if minN < 0 {
			minN = 0
		}
		return &InvalidMethodError{Method: m, P: p, Level: level, N: n, MinN: minN, Reason: reason}
	}
	return nil
}

// Tail counts below which the asymptotic methods are refused: the
// expected number of values beyond the quantile on its thinner side,
// n·min(p, 1 − p), must reach these. They come from the coverage table in
// docs/functions.md (1000 repetitions per cell, exponential, lognormal and
// Pareto data; TestIntervalCoverageTable): with fewer values in the tail
// the sample quantile's distribution is still skewed and discrete, and
// the bootstrap and Maritz–Jarrett cover 85–93 % at 95 % nominal (e.g.
// p = 0.9 with n = 1000: 93.0 %), the delta method's kernel density at the
// quantile is biased and it covers 35–93 % (p = 0.99 with n = 10000: 91.3 %
// on lognormal data). At and above them every cell of the table covers
// within Monte Carlo error of nominal.
const (
	minTailBootstrap = 200  // bootstrap and Maritz–Jarrett
	minTailDelta     = 1000 // delta method
)

// ciValidity returns the smallest n at which method m reaches nominal
// coverage at p (−1: at no n), and why it falls short below it. The rule
// was calibrated at level 0.95 and is applied at every level.
func ciValidity(m CIMethod, p float64) (minN int, reason string) {
	tail := math.Min(p, 1-p)
	need := 0
	switch m {
	case CIBootstrap, CIMaritzJarrett:
		need = minTailBootstrap
	case CIDeltaKDE:
		need = minTailDelta
	default:
		return -1, "unknown method"
	}
	if !(tail > 0) {
		return -1, "no finite sample has values beyond the quantile"
	}
	minN = int(math.Ceil(float64(need)/tail - 1e-9))
	return minN, fmt.Sprintf("with n·min(p, 1−p) below %d it covers less than nominal (docs/functions.md, coverage table)", need)
}
