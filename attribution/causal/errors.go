package causal

import (
	"errors"
	"fmt"
	"math"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// these (test with errors.Is); the message around it names the series, index
// or length at fault.
var (
	// ErrTooShort is returned when a series has fewer usable observations
	// than the model has parameters plus one (so no residual degree of
	// freedom is left), or fewer than a window or lag range needs.
	ErrTooShort = errors.New("too few observations")

	// ErrSingular is returned when a design matrix is rank deficient: a
	// regressor is constant (collinear with the intercept) or a linear
	// combination of earlier ones, or a series has zero variance where a
	// correlation needs it. The message names the series.
	ErrSingular = errors.New("singular design")

	// ErrNaN is returned when an input value is NaN or ±Inf. The message
	// names the series and the index.
	ErrNaN = errors.New("non-finite value")

	// ErrLength is returned when series that must be aligned point by point
	// have different lengths. The message names both series and lengths.
	ErrLength = errors.New("length mismatch")

	// ErrArgument is returned for an invalid parameter that is not a data
	// problem: a negative lag, a p-value outside [0, 1], a window outside
	// the series.
	ErrArgument = errors.New("invalid argument")
)

// Series is a named, regularly sampled sequence. Name appears in errors and
// results only; Values is never modified by this package.
type Series struct {
	Name   string
	Values []float64
}

// checkFinite returns ErrNaN naming the first non-finite value of s.
func checkFinite(s Series) error {
	for i, v := range s.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("series %q: value %v at index %d: %w", s.Name, v, i, ErrNaN)
		}
	}
	return nil
}

// checkAligned checks that every series is finite and has the length of the
// first one.
func checkAligned(ss ...Series) error {
	for i, s := range ss {
		if err := checkFinite(s); err != nil {
			return err
		}
		if i > 0 && len(s.Values) != len(ss[0].Values) {
			return fmt.Errorf("series %q has %d points but series %q has %d: %w",
				ss[0].Name, len(ss[0].Values), s.Name, len(s.Values), ErrLength)
		}
	}
	return nil
}
