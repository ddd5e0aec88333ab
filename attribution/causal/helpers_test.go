package causal

import (
	"math"
	"math/rand/v2"
	"testing"
)

// near reports whether got is within tol of want, relative to |want| when
// |want| > 1 and absolute otherwise.
func near(got, want, tol float64) bool {
	if math.IsNaN(got) || math.IsNaN(want) {
		return false
	}
	return math.Abs(got-want) <= tol*max(1, math.Abs(want))
}

func checkNear(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if !near(got, want, tol) {
		t.Errorf("%s = %.15g, want %.15g (tol %g)", what, got, want, tol)
	}
}

func ser(name string, v ...float64) Series { return Series{Name: name, Values: v} }

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

func noise(r *rand.Rand, n int, sd float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = sd * r.NormFloat64()
	}
	return v
}

// ar1 returns x_t = phi·x_{t−1} + ε_t.
func ar1(r *rand.Rand, n int, phi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()
		if i > 0 {
			v[i] += phi * v[i-1]
		}
	}
	return v
}
