package causal

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestKSStatisticHandWorked(t *testing.T) {
	// a = 1 2 3 4, b = 3 4 5 6 7. At v = 1..5: F_a = .25 .5 .75 1 1,
	// F_b = 0 0 .2 .4 .6; gaps .25 .5 .55 .6 .4 → D = 0.6.
	checkNear(t, "D", KSStatistic([]float64{4, 2, 1, 3}, []float64{7, 3, 5, 4, 6}), 0.6, 1e-15)
	// Ties: a = 1 1 2, b = 1 2 2. At v = 1: 2/3 vs 1/3; at v = 2: 1 vs 1.
	checkNear(t, "D ties", KSStatistic([]float64{1, 1, 2}, []float64{1, 2, 2}), 1.0/3, 1e-15)
	checkNear(t, "D identical", KSStatistic([]float64{1, 2, 3}, []float64{3, 2, 1}), 0, 0)
	checkNear(t, "D disjoint", KSStatistic([]float64{1, 2}, []float64{5, 6, 7}), 1, 0)
}

func TestKSTest(t *testing.T) {
	a := ser("a", 4, 2, 1, 3)
	b := ser("b", 7, 3, 5, 4, 6)
	d, p, err := KSTest(a, b)
	if err != nil {
		t.Fatal(err)
	}
	// en = 4·5/9 = 2.22 → n = 2; D = 0.6 ≥ 1/2 → 2·P(D_2⁺ ≥ 0.6), and
	// n·D = 1.2 ≥ n − 1 so P = 2(1 − 0.6)² = 0.32.
	checkNear(t, "D", d, 0.6, 1e-15)
	checkNear(t, "p", p, 0.32, 1e-15)
	// Five against five: en = 2.5 rounds half to even, to 2 (numpy), not 3.
	// D = 0.6 (F_a(3) = .6, F_b(3) = 0); at n = 2 the p-value is
	// 2(1 − 0.6)² = 0.32, at n = 3 it would be 0.144 (see
	// TestKSTwoSidedSFClosedForms).
	d, p, err = KSTest(ser("a", 1, 2, 3, 4, 5), ser("b", 4, 5, 6, 7, 8))
	if err != nil {
		t.Fatal(err)
	}
	checkNear(t, "D 5v5", d, 0.6, 1e-15)
	checkNear(t, "p 5v5", p, 0.32, 1e-15)
	if _, _, err := KSTest(ser("a", 1), ser("b", 2)); !errors.Is(err, ErrTooShort) {
		t.Errorf("1 vs 1: %v", err)
	}
	if _, _, err := KSTest(ser("a"), ser("b", 2)); !errors.Is(err, ErrTooShort) {
		t.Errorf("empty: %v", err)
	}
}

func TestPSIHandWorked(t *testing.T) {
	ref := ser("ref", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	// Two bins split at the median 5.5: ref .5/.5; cur has 3 of 8 below.
	// PSI = (.375−.5)·ln(.375/.5) + (.625−.5)·ln(.625/.5) = 0.0638532…
	psi, err := PSI(ref, ser("cur", 1, 2, 3, 7, 8, 9, 10, 11), 2)
	if err != nil {
		t.Fatal(err)
	}
	checkNear(t, "psi", psi, -0.125*math.Log(0.75)+0.125*math.Log(1.25), 1e-15)
	// Empty upper bin: its 0 is floored at 1e-4.
	psi, err = PSI(ref, ser("cur", 1, 2, 3), 2)
	if err != nil {
		t.Fatal(err)
	}
	checkNear(t, "psi empty bin", psi, 0.5*math.Log(2)+(1e-4-0.5)*math.Log(1e-4/0.5), 1e-14)
	// Same distribution: 0.
	psi, _ = PSI(ref, ref, 0)
	checkNear(t, "psi same", psi, 0, 0)
	// Ties collapse bins: ref 1 1 1 1 2 with 4 bins has quartiles 1 1 1,
	// so one edge and bins (−∞, 1], (1, ∞): ref .8/.2, cur 2 2 1 → 1/3, 2/3.
	psi, _ = PSI(ser("ref", 1, 1, 1, 1, 2), ser("cur", 2, 2, 1), 4)
	want := (1.0/3-0.8)*math.Log((1.0/3)/0.8) + (2.0/3-0.2)*math.Log((2.0/3)/0.2)
	checkNear(t, "psi ties", psi, want, 1e-15)
}

func TestRankDrift(t *testing.T) {
	r := rng(40)
	n := 400
	steady := noise(r, n, 1)
	shifted := noise(r, n, 1)
	wider := noise(r, n, 1)
	for i := 200; i < n; i++ {
		shifted[i] += 2
		wider[i] *= 3
	}
	series := []Series{ser("steady", steady...), ser("wider", wider...), ser("shifted", shifted...)}
	got, err := RankDrift(series, Window{0, 200}, Window{200, 400}, 10)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{got[0].Name, got[1].Name, got[2].Name}
	if !slices.Equal(names, []string{"shifted", "wider", "steady"}) {
		t.Errorf("order %v (%+v)", names, got)
	}
	for _, g := range got {
		var s Series
		for _, c := range series {
			if c.Name == g.Name {
				s = c
			}
		}
		d, p, err := KSTest(ser("r", s.Values[:200]...), ser("c", s.Values[200:]...))
		if err != nil {
			t.Fatal(err)
		}
		checkNear(t, "ks", g.KS, d, 0)
		checkNear(t, "ks p", g.KSPValue, p, 0)
		psi, _ := PSI(ser("r", s.Values[:200]...), ser("c", s.Values[200:]...), 10)
		checkNear(t, "psi", g.PSI, psi, 1e-15)
	}
	if got[2].KSPValue < 0.05 || got[0].KSPValue > 1e-10 || got[0].PSI < 0.25 {
		t.Errorf("p-values %g %g, psi %g", got[0].KSPValue, got[2].KSPValue, got[0].PSI)
	}
	if _, err := RankDrift(series, Window{0, 200}, Window{300, 500}, 10); !errors.Is(err, ErrArgument) {
		t.Errorf("window: %v", err)
	}
}

// FuzzKSStatistic compares the merge walk with the definition evaluated
// at every pooled value by counting.
func FuzzKSStatistic(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4}, []byte{3, 4, 5, 6, 7})
	f.Add([]byte{1, 1, 2}, []byte{1, 2, 2})
	f.Add([]byte{9}, []byte{})
	f.Fuzz(func(t *testing.T, ab, bb []byte) {
		if len(ab) == 0 || len(bb) == 0 {
			return
		}
		a, b := make([]float64, len(ab)), make([]float64, len(bb))
		for i, v := range ab {
			a[i] = float64(v % 16)
		}
		for i, v := range bb {
			b[i] = float64(v % 16)
		}
		cdf := func(s []float64, v float64) float64 {
			c := 0
			for _, x := range s {
				if x <= v {
					c++
				}
			}
			return float64(c) / float64(len(s))
		}
		want := 0.0
		for _, v := range append(append([]float64{}, a...), b...) {
			want = max(want, math.Abs(cdf(a, v)-cdf(b, v)))
		}
		if got := KSStatistic(a, b); math.Abs(got-want) > 1e-15 {
			t.Fatalf("D = %g, brute force %g", got, want)
		}
	})
}
