package attribution

import (
	"errors"
	"fmt"
	"math"
)

// Errors returned by the functions of this package. Each is wrapped with
// context naming the function and the offending field or value.
var (
	// ErrEmpty is returned when a sample, request set or histogram holds no
	// observations, so no statistic is defined.
	ErrEmpty = errors.New("no observations")
	// ErrStages is returned when stage names or counts disagree between two
	// inputs that must describe the same stages (now vs baseline, records vs
	// accumulators, names vs histograms).
	ErrStages = errors.New("stages do not match")
	// ErrTooManyStages is returned by Shapley when exact enumeration over
	// 2^k coalitions would exceed MaxShapleyStages stages.
	ErrTooManyStages = errors.New("too many stages")
)

// DefaultP is the quantile level used when a caller has no reason to pick
// another one: the P99 the rest of tailroot reports.
const DefaultP = 0.99

// Requests is a columnar set of per-request stage durations: column j holds
// stage j for every request, so a pass over one stage reads contiguous
// memory. The end-to-end time S of request r is Σ_j X[j][r], computed once at
// construction in stage order, which is what makes every decomposition add
// up exactly.
//
// Requests is immutable after construction. The slices it returns and the
// columns passed to NewRequests are shared, not copied: callers must not
// modify them afterwards.
type Requests struct {
	stages []string
	cols   [][]float64
	total  []float64
}

// NewRequests validates columnar stage durations and computes S per request.
// cols[j][r] is stage j of request r; stages[j] names column j. It requires
// at least one stage, unique non-empty names, columns of equal length, and
// values that are finite and ≥ 0 (latencies). Zero requests are accepted:
// the statistics then return ErrEmpty.
func NewRequests(stages []string, cols [][]float64) (Requests, error) {
	if len(stages) == 0 {
		return Requests{}, fmt.Errorf("new requests: %w: need at least one stage", ErrStages)
	}
	if len(stages) != len(cols) {
		return Requests{}, fmt.Errorf("new requests: %w: %d names for %d columns", ErrStages, len(stages), len(cols))
	}
	seen := make(map[string]bool, len(stages))
	for j, name := range stages {
		if name == "" {
			return Requests{}, fmt.Errorf("new requests: stage %d has an empty name", j)
		}
		if seen[name] {
			return Requests{}, fmt.Errorf("new requests: stage %q appears twice", name)
		}
		seen[name] = true
	}
	n := len(cols[0])
	for j, col := range cols {
		if len(col) != n {
			return Requests{}, fmt.Errorf("new requests: stage %q has %d values, stage %q has %d", stages[j], len(col), stages[0], n)
		}
		for r, v := range col {
			if !(v >= 0) || math.IsInf(v, 1) {
				return Requests{}, fmt.Errorf("new requests: stage %q request %d: value %v is not finite and non-negative", stages[j], r, v)
			}
		}
	}
	total := make([]float64, n)
	for _, col := range cols {
		for r, v := range col {
			total[r] += v
		}
	}
	for r, s := range total {
		if math.IsInf(s, 1) {
			return Requests{}, fmt.Errorf("new requests: request %d: stage sum overflows", r)
		}
	}
	return Requests{stages: stages, cols: cols, total: total}, nil
}

// residualTolerance is how far, relative to the end-to-end time, measured
// stages may overshoot it before NewRequestsResidual calls the record
// inconsistent rather than rounded.
const residualTolerance = 1e-9

// NewRequestsResidual builds Requests from measured stages plus a measured
// end-to-end time per request, adding a stage named residual that holds
// total[r] − Σ_j cols[j][r] (time no instrumented stage accounts for), so
// that the stages add up to the end-to-end time. A residual below zero by
// more than 1e-9·max(total[r], 1) means the stages overlap or the total is
// wrong, and is an error naming the request; smaller negatives are rounding
// and are set to zero.
func NewRequestsResidual(stages []string, cols [][]float64, total []float64, residual string) (Requests, error) {
	if len(stages) != len(cols) {
		return Requests{}, fmt.Errorf("new requests: %w: %d names for %d columns", ErrStages, len(stages), len(cols))
	}
	res := make([]float64, len(total))
	for r, t := range total {
		if !(t >= 0) || math.IsInf(t, 1) {
			return Requests{}, fmt.Errorf("new requests: total of request %d: value %v is not finite and non-negative", r, t)
		}
		sum := 0.0
		for j, col := range cols {
			if len(col) != len(total) {
				return Requests{}, fmt.Errorf("new requests: stage %q has %d values, total has %d", stages[j], len(col), len(total))
			}
			sum += col[r]
		}
		d := t - sum
		if d < 0 {
			if d < -residualTolerance*math.Max(t, 1) {
				return Requests{}, fmt.Errorf("new requests: request %d: stages sum to %v, above total %v", r, sum, t)
			}
			d = 0
		}
		res[r] = d
	}
	names := append(append(make([]string, 0, len(stages)+1), stages...), residual)
	all := append(append(make([][]float64, 0, len(cols)+1), cols...), res)
	return NewRequests(names, all)
}

// Len returns the number of requests.
func (r Requests) Len() int { return len(r.total) }

// K returns the number of stages.
func (r Requests) K() int { return len(r.stages) }

// Stages returns the stage names (shared; do not modify).
func (r Requests) Stages() []string { return r.stages }

// Stage returns the column of stage j (shared; do not modify).
func (r Requests) Stage(j int) []float64 { return r.cols[j] }

// Total returns S per request (shared; do not modify).
func (r Requests) Total() []float64 { return r.total }

// checkP validates a quantile level.
func checkP(name string, p float64) error {
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("%s: p=%v outside [0, 1]", name, p)
	}
	return nil
}
