package causal

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// RobustScore is one candidate's BARO score.
type RobustScore struct {
	Name string
	// Score = max_{t ≥ cp} |x_t − Median| / IQR (signed: max of
	// (x_t − Median)/IQR), At the index t attaining it (first on ties).
	Score float64
	At    int
	// Median and IQR = Q75 − Q25 of the points before the change point
	// (numpy's linear percentiles). IQR is the scale actually used: a raw IQR
	// below 10·ε (machine epsilon) is replaced by 1, as scikit-learn's
	// RobustScaler does, so a metric that was flat before the change is
	// scored by its absolute departure.
	Median, IQR float64
}

// RobustScores scores every candidate by how far it moves after the change
// point, in units of its own pre-change spread (BARO's RobustScorer, Pham et
// al., "BARO: Robust Root Cause Analysis for Microservices via Multivariate
// Bayesian Online Change Point Detection", FSE 2024):
//
//	before = x[0:cp], after = x[cp:n]
//	score  = max_{t ∈ after} |x_t − median(before)| / IQR(before)
//
// The absolute value makes drops count as much as rises; signed = true takes
// the plain maximum of (x_t − median)/IQR as the BARO reference code does, so
// only rises rank. The result is sorted by Score, highest first; ties keep
// the input order.
//
// Errors: ErrNaN, ErrLength (all candidates must have one length),
// ErrTooShort for fewer than 2 points, ErrArgument unless 1 ≤ cp ≤ n−1.
func RobustScores(candidates []Series, cp int, signed bool) ([]RobustScore, error) {
	if len(candidates) == 0 {
		return nil, nil
	}
	if err := checkAligned(candidates...); err != nil {
		return nil, fmt.Errorf("robust scores: %w", err)
	}
	n := len(candidates[0].Values)
	if n < 2 {
		return nil, fmt.Errorf("robust scores: %d points, need 2: %w", n, ErrTooShort)
	}
	if cp < 1 || cp > n-1 {
		return nil, fmt.Errorf("robust scores: change point %d outside [1, %d]: %w", cp, n-1, ErrArgument)
	}
	out := make([]RobustScore, len(candidates))
	scratch := make([]float64, cp)
	for i, c := range candidates {
		copy(scratch, c.Values[:cp])
		slices.Sort(scratch)
		med := percentileSorted(scratch, 0.5)
		iqr := percentileSorted(scratch, 0.75) - percentileSorted(scratch, 0.25)
		if iqr < 10*epsilon {
			iqr = 1
		}
		s := RobustScore{Name: c.Name, Median: med, IQR: iqr, Score: math.Inf(-1), At: cp}
		for t := cp; t < n; t++ {
			z := (c.Values[t] - med) / iqr
			if !signed {
				z = math.Abs(z)
			}
			if z > s.Score {
				s.Score, s.At = z, t
			}
		}
		out[i] = s
	}
	slices.SortStableFunc(out, func(a, b RobustScore) int { return cmp.Compare(b.Score, a.Score) })
	return out, nil
}

// epsilon is the float64 machine epsilon, 2⁻⁵².
const epsilon = 0x1p-52

// BAROOptions configures BARO.
type BAROOptions struct {
	// Detect configures the change point detection on the target.
	Detect BOCPDOptions
	// ChangePoint > 0 skips detection and splits at this index.
	ChangePoint int
	// Signed selects signed scores; see RobustScores.
	Signed bool
}

// BAROResult is a root-cause ranking.
type BAROResult struct {
	// ChangePoint is the first index of the anomalous window.
	ChangePoint int
	// Detection is the change point run on the target (nil when the change
	// point was given).
	Detection *BOCPDResult
	// Ranking is RobustScores over the candidates, most suspicious first.
	Ranking []RobustScore
}

// BARO ranks root-cause candidates for a change in target (for example the
// P99 latency series): it takes the most likely change point of target from
// BOCPD (BOCPDResult.Best, whatever its probability — the caller asked for a
// ranking because something changed) unless opts.ChangePoint gives one, then
// scores the candidates with RobustScores. BARO proper runs a multivariate
// BOCPD over all metrics; detecting on the one target that defines the
// incident is cheaper and avoids a noisy candidate moving the split.
//
// Errors: those of BOCPD and RobustScores; ErrLength when a candidate's
// length differs from target's; ErrTooShort when target has fewer than 2
// points.
func BARO(target Series, candidates []Series, opts BAROOptions) (*BAROResult, error) {
	all := append([]Series{target}, candidates...)
	if err := checkAligned(all...); err != nil {
		return nil, fmt.Errorf("baro: %w", err)
	}
	if len(target.Values) < 2 {
		return nil, fmt.Errorf("baro: target %q has %d points, need 2: %w", target.Name, len(target.Values), ErrTooShort)
	}
	res := &BAROResult{ChangePoint: opts.ChangePoint}
	if res.ChangePoint <= 0 {
		det, err := BOCPD(target, opts.Detect)
		if err != nil {
			return nil, fmt.Errorf("baro: %w", err)
		}
		res.Detection = det
		res.ChangePoint = max(det.Best, 1)
	}
	rank, err := RobustScores(candidates, res.ChangePoint, opts.Signed)
	if err != nil {
		return nil, fmt.Errorf("baro: %w", err)
	}
	res.Ranking = rank
	return res, nil
}
