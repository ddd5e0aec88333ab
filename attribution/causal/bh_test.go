package causal

import (
	"errors"
	"math"
	"testing"
)

// Benjamini & Hochberg (1995), "Controlling the False Discovery Rate",
// JRSS B 57(1), section 4.1: fifteen p-values from a study of myocardial
// infarction treatment. At q* = 0.05 the step-up procedure rejects the four
// smallest (0.0095 ≤ 4/15·0.05 = 0.01333, while 0.0201 > 5/15·0.05 and no
// larger i satisfies p_(i) ≤ i/15·0.05); Bonferroni would reject three.
//
// Adjusted values by hand, q_(i) = min_{j≥i} 15·p_(j)/j:
//
//	15·p/i: .0015 .003 .0095 .035625 .0603 .0695 .063857 .0645 .0765 .486
//	        .581182 .714875 .753231 .813214 1
//	running minimum from the top changes q_(6) = .063857 (< .0695).
func TestBenjaminiHochbergPaperExample(t *testing.T) {
	p := []float64{0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.000}
	want := []float64{
		0.0015, 0.003, 0.0095, 15 * 0.0095 / 4, 15 * 0.0201 / 5, 15 * 0.0298 / 7, 15 * 0.0298 / 7,
		15 * 0.0344 / 8, 15 * 0.0459 / 9, 15 * 0.3240 / 10, 15 * 0.4262 / 11, 15 * 0.5719 / 12,
		15 * 0.6528 / 13, 15 * 0.7590 / 14, 1,
	}
	// Shuffle the input order to check the result comes back aligned.
	perm := []int{7, 2, 14, 0, 9, 4, 12, 1, 5, 11, 3, 13, 6, 10, 8}
	in := make([]float64, len(p))
	for i, j := range perm {
		in[i] = p[j]
	}
	q, err := BenjaminiHochberg(in)
	if err != nil {
		t.Fatal(err)
	}
	rej := Reject(q, 0.05)
	n := 0
	for i, j := range perm {
		checkNear(t, "adjusted", q[i], want[j], 1e-15)
		if rej[i] != (j < 4) {
			t.Errorf("p = %g: rejected %v", p[j], rej[i])
		}
		if rej[i] {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d rejections, want 4", n)
	}
}

func TestBenjaminiHochbergEdges(t *testing.T) {
	// Ties and a single p-value: q = min(1, m·p/i) with the running minimum.
	q, err := BenjaminiHochberg([]float64{0.02, 0.02, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	// sorted .02 .02 .5: 3·.02/1 = .06, 3·.02/2 = .03, 3·.5/3 = .5 → .03 .03 .5
	for i, w := range []float64{0.03, 0.03, 0.5} {
		checkNear(t, "tied", q[i], w, 1e-15)
	}
	if q, _ := BenjaminiHochberg(nil); len(q) != 0 {
		t.Errorf("empty input gave %v", q)
	}
	if _, err := BenjaminiHochberg([]float64{0.1, math.NaN()}); !errors.Is(err, ErrNaN) {
		t.Errorf("nan: %v", err)
	}
	if _, err := BenjaminiHochberg([]float64{0.1, 1.5}); !errors.Is(err, ErrArgument) {
		t.Errorf("out of range: %v", err)
	}
}

// FuzzBenjaminiHochberg checks the invariants on arbitrary inputs: q ≥ p,
// q ≤ 1, and q is monotone in p.
func FuzzBenjaminiHochberg(f *testing.F) {
	f.Add([]byte{1, 200, 30, 30, 255, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := make([]float64, len(b))
		for i, v := range b {
			p[i] = float64(v) / 255
		}
		q, err := BenjaminiHochberg(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p {
			if q[i] < p[i] || q[i] > 1 {
				t.Fatalf("p %g → q %g", p[i], q[i])
			}
			for j := range p {
				if p[i] < p[j] && q[i] > q[j] {
					t.Fatalf("not monotone: p %g → %g, p %g → %g", p[i], q[i], p[j], q[j])
				}
			}
		}
	})
}
