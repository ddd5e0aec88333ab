package causal

import (
	"errors"
	"testing"
)

func TestPercentileSorted(t *testing.T) {
	// numpy.percentile([1, 2, 3, 4], q) with linear interpolation:
	// h = 3q: q=.25 → 1 + .75·1 = 1.75; q=.5 → 2.5; q=.75 → 3.25.
	s := []float64{1, 2, 3, 4}
	for q, want := range map[float64]float64{0: 1, 0.25: 1.75, 0.5: 2.5, 0.75: 3.25, 1: 4} {
		checkNear(t, "percentile", percentileSorted(s, q), want, 1e-15)
	}
}

// By hand, change point at index 5:
//
//	"latency": before 1 2 3 4 5 → median 3, Q25 2, Q75 4, IQR 2;
//	           after 3 9 −5 → |z| = 0, 3, 4 → score 4 at index 7;
//	           signed max (x − 3)/2 = 3 at index 6.
//	"flat":    before 2 2 2 2 2 → IQR 0 → scale 1; after 2 2.5 2 → 0.5 at 6.
//	"drop":    before 5 6 7 8 9 (median 7, IQR 2); after 7 7 1 → |z| 3 at 7,
//	           signed max 0 at 5.
func TestRobustScoresHandWorked(t *testing.T) {
	cands := []Series{
		ser("flat", 2, 2, 2, 2, 2, 2, 2.5, 2),
		ser("latency", 1, 2, 3, 4, 5, 3, 9, -5),
		ser("drop", 5, 6, 7, 8, 9, 7, 7, 1),
	}
	got, err := RobustScores(cands, 5, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []RobustScore{
		{Name: "latency", Score: 4, At: 7, Median: 3, IQR: 2},
		{Name: "drop", Score: 3, At: 7, Median: 7, IQR: 2},
		{Name: "flat", Score: 0.5, At: 6, Median: 2, IQR: 1},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rank %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	signed, err := RobustScores(cands, 5, true)
	if err != nil {
		t.Fatal(err)
	}
	wantSigned := []RobustScore{
		{Name: "latency", Score: 3, At: 6, Median: 3, IQR: 2},
		{Name: "flat", Score: 0.5, At: 6, Median: 2, IQR: 1},
		{Name: "drop", Score: 0, At: 5, Median: 7, IQR: 2},
	}
	for i := range wantSigned {
		if signed[i] != wantSigned[i] {
			t.Errorf("signed rank %d = %+v, want %+v", i, signed[i], wantSigned[i])
		}
	}
}

func TestBAROFindsCulprit(t *testing.T) {
	r := rng(30)
	n := 480
	target := noise(r, n, 1)
	var cands []Series
	for i := range 20 {
		cands = append(cands, Series{Name: "noise" + string(rune('a'+i)), Values: noise(r, n, 3)})
	}
	culprit := noise(r, n, 1)
	for i := 300; i < n; i++ {
		culprit[i] += 6
		target[i] += 4
	}
	cands = append(cands, Series{Name: "kv_cache_evictions", Values: culprit})
	res, err := BARO(Series{Name: "p99", Values: target}, cands, BAROOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if abs(res.ChangePoint-300) > 2 {
		t.Errorf("change point %d, want 300±2", res.ChangePoint)
	}
	if res.Ranking[0].Name != "kv_cache_evictions" {
		t.Errorf("top candidate %q, want kv_cache_evictions (ranking %+v)", res.Ranking[0].Name, res.Ranking[:3])
	}
	// A given change point skips detection.
	given, err := BARO(Series{Name: "p99", Values: target}, cands, BAROOptions{ChangePoint: 300})
	if err != nil || given.Detection != nil || given.ChangePoint != 300 {
		t.Errorf("given change point: %v %+v", err, given)
	}
}

func TestRobustScoresErrors(t *testing.T) {
	a := ser("a", 1, 2, 3, 4)
	if _, err := RobustScores([]Series{a}, 0, false); !errors.Is(err, ErrArgument) {
		t.Errorf("cp 0: %v", err)
	}
	if _, err := RobustScores([]Series{a}, 4, false); !errors.Is(err, ErrArgument) {
		t.Errorf("cp n: %v", err)
	}
	if _, err := RobustScores([]Series{a, ser("b", 1, 2)}, 1, false); !errors.Is(err, ErrLength) {
		t.Errorf("length: %v", err)
	}
	if _, err := RobustScores([]Series{ser("a", 1)}, 1, false); !errors.Is(err, ErrTooShort) {
		t.Errorf("short: %v", err)
	}
	if _, err := BARO(ser("p99", 1, 2, 3), []Series{ser("a", 1, 2)}, BAROOptions{}); !errors.Is(err, ErrLength) {
		t.Errorf("baro length: %v", err)
	}
}
