package rca

import (
	"math"
	"testing"
)

func TestAccuracy(t *testing.T) {
	// Truth at rank 1, 2, 4 and absent. By hand:
	//   AC@1 = 1/4, AC@2 = 2/4, AC@3 = 2/4, AC@4 = 3/4, AC@5 = 3/4,
	//   Avg@5 = (0.25 + 0.5 + 0.5 + 0.75 + 0.75)/5 = 0.55.
	cases := []Case{
		{Ranking: []string{"x", "a", "b"}, Truth: []string{"x"}},
		{Ranking: []string{"a", "x", "b"}, Truth: []string{"x"}},
		{Ranking: []string{"a", "b", "c", "x", "d"}, Truth: []string{"x"}},
		{Ranking: []string{"a", "b"}, Truth: []string{"x"}},
	}
	for k, want := range map[int]float64{1: 0.25, 2: 0.5, 3: 0.5, 4: 0.75, 5: 0.75} {
		if got := AccuracyAt(cases, k); got != want {
			t.Errorf("AC@%d = %v, want %v", k, got, want)
		}
	}
	if got := AvgAt(cases, 5); math.Abs(got-0.55) > 1e-15 {
		t.Errorf("Avg@5 = %v, want 0.55", got)
	}
	s := Summarize(cases)
	if s.Cases != 4 || s.AC1 != 0.25 || s.AC3 != 0.5 || math.Abs(s.Avg5-0.55) > 1e-15 {
		t.Errorf("Summarize = %+v", s)
	}
	// Several names may count as the truth; the first one ranked counts.
	if r := (Case{Ranking: []string{"a", "y", "x"}, Truth: []string{"x", "y"}}).RankOf(); r != 2 {
		t.Errorf("RankOf = %d, want 2", r)
	}
	if AccuracyAt(nil, 1) != 0 || AvgAt(cases, 0) != 0 {
		t.Error("empty or k = 0 should give 0")
	}
}
