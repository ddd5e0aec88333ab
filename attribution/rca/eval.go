package rca

import "fmt"

// Case is one evaluated incident: a ranking (names, most likely first) and
// the names that count as the true root cause.
type Case struct {
	Ranking []string
	Truth   []string
}

// RankOf returns the 1-based position of the first true root cause in the
// ranking, or 0 when none is ranked.
func (c Case) RankOf() int {
	for i, n := range c.Ranking {
		for _, t := range c.Truth {
			if n == t {
				return i + 1
			}
		}
	}
	return 0
}

// AccuracyAt is AC@k as RCAEval (Pham et al., "RCAEval: A Benchmark for Root
// Cause Analysis of Microservice Systems with Telemetry Data", WWW 2025)
// defines it for a single root cause per case: the fraction of cases whose
// true root cause is among the first k of the ranking.
func AccuracyAt(cases []Case, k int) float64 {
	if len(cases) == 0 || k < 1 {
		return 0
	}
	hit := 0
	for _, c := range cases {
		if r := c.RankOf(); r > 0 && r <= k {
			hit++
		}
	}
	return float64(hit) / float64(len(cases))
}

// AvgAt is Avg@k = (1/k)·Σ_{j=1}^{k} AC@j.
func AvgAt(cases []Case, k int) float64 {
	if k < 1 {
		return 0
	}
	s := 0.0
	for j := 1; j <= k; j++ {
		s += AccuracyAt(cases, j)
	}
	return s / float64(k)
}

// Summary holds the headline numbers of an evaluation.
type Summary struct {
	Cases          int
	AC1, AC3, Avg5 float64
}

// Summarize computes AC@1, AC@3 and Avg@5.
func Summarize(cases []Case) Summary {
	return Summary{Cases: len(cases), AC1: AccuracyAt(cases, 1), AC3: AccuracyAt(cases, 3), Avg5: AvgAt(cases, 5)}
}

func (s Summary) String() string {
	return fmt.Sprintf("cases=%d AC@1=%.3f AC@3=%.3f Avg@5=%.3f", s.Cases, s.AC1, s.AC3, s.Avg5)
}
