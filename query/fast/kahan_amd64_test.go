//go:build amd64 && !purego

package fast

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// kahanOrdinary are finite values of every size whose sums stay finite:
// zeros of both signs, subnormals, magnitudes far apart.
var kahanOrdinary = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 3, 1e16, -1e16, 1e100, -1e100, 1e-16, 5e-324, -1e-310,
}

// kahanValues are the kinds of value the fold meets: the ordinary ones,
// the largest finite ones (whose sums overflow), infinities and NaNs with
// payloads.
var kahanValues = append(slices.Clone(kahanOrdinary),
	math.MaxFloat64, -math.MaxFloat64, math.MaxFloat64/2, math.Inf(1), math.Inf(-1),
	math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff4000000000abc),
)

// checkKahanAsm folds the columns vs (one has and v each) into one sum
// with kahanFold and with kahanFoldGo and fails unless sums,
// compensations and seen agree bit for bit after every column.
func checkKahanAsm(t *testing.T, has [][]bool, vs [][]float64, seen0 []bool, val0, c0 []float64) {
	t.Helper()
	n := len(seen0)
	seenA, valA, cA := append([]bool(nil), seen0...), append([]float64(nil), val0...), append([]float64(nil), c0...)
	seenB, valB, cB := append([]bool(nil), seen0...), append([]float64(nil), val0...), append([]float64(nil), c0...)
	for k := range vs {
		kahanFold(has[k], vs[k], seenA, valA, cA)
		kahanFoldGo(has[k], vs[k], seenB, valB, cB)
		for i := range n {
			if seenA[i] != seenB[i] || math.Float64bits(valA[i]) != math.Float64bits(valB[i]) || math.Float64bits(cA[i]) != math.Float64bits(cB[i]) {
				t.Fatalf("column %d, step %d of %d: kahanFold (%#x, %#x, %v), kahanFoldGo (%#x, %#x, %v)", k, i, n,
					math.Float64bits(valA[i]), math.Float64bits(cA[i]), seenA[i], math.Float64bits(valB[i]), math.Float64bits(cB[i]), seenB[i])
			}
		}
	}
}

// TestKahanFoldAsm checks the assembly against the Go loop on random
// columns: lengths around the groups of four, steps with and without a
// value, seen and not, and mostly ordinary values with, in some columns,
// the special ones the Go loop must take over.
func TestKahanFoldAsm(t *testing.T) {
	if !useKahanAsm {
		t.Skip("no AVX2: kahanFold is kahanFoldGo")
	}
	r := rand.New(rand.NewPCG(4, 40))
	for round := range 2000 {
		n := r.IntN(70)
		special := round%3 == 0
		pick := func() float64 {
			if special && r.IntN(8) == 0 {
				return kahanValues[r.IntN(len(kahanValues))]
			}
			switch r.IntN(3) {
			case 0:
				return r.NormFloat64()
			case 1:
				return r.Float64() * math.Pow(10, float64(r.IntN(40)-20))
			default:
				return kahanOrdinary[r.IntN(len(kahanOrdinary))]
			}
		}
		seen, val, c := make([]bool, n), make([]float64, n), make([]float64, n)
		for i := range n {
			if seen[i] = r.IntN(4) != 0; seen[i] {
				val[i], c[i] = pick(), pick()*1e-17
			}
		}
		cols := 1 + r.IntN(6)
		has, vs := make([][]bool, cols), make([][]float64, cols)
		for k := range cols {
			has[k], vs[k] = make([]bool, n), make([]float64, n)
			dense := r.IntN(2) == 0
			for i := range n {
				has[k][i] = dense || r.IntN(3) != 0
				vs[k][i] = pick()
			}
		}
		checkKahanAsm(t, has, vs, seen, val, c)
	}
}

// FuzzKahanFoldAsm checks the assembly against the Go loop on columns
// built from arbitrary bytes: each step of two columns takes a byte of
// flags (has for each column, seen, a compensation) and three 8-byte bit
// patterns (sum, first value, second value).
func FuzzKahanFoldAsm(f *testing.F) {
	if !useKahanAsm {
		f.Skip("no AVX2: kahanFold is kahanFoldGo")
	}
	seed := make([]byte, 0, 8*25)
	for i := range 8 {
		seed = append(seed, byte(i*37))
		for _, x := range []float64{float64(i) * 1.5, 1e16, -float64(i)} {
			seed = binary.LittleEndian.AppendUint64(seed, math.Float64bits(x))
		}
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		n := len(b) / 25
		seen, val, c := make([]bool, n), make([]float64, n), make([]float64, n)
		has := [][]bool{make([]bool, n), make([]bool, n)}
		vs := [][]float64{make([]float64, n), make([]float64, n)}
		for i := range n {
			p := b[i*25:]
			has[0][i], has[1][i], seen[i] = p[0]&1 != 0, p[0]&2 != 0, p[0]&4 != 0
			val[i] = math.Float64frombits(binary.LittleEndian.Uint64(p[1:]))
			vs[0][i] = math.Float64frombits(binary.LittleEndian.Uint64(p[9:]))
			vs[1][i] = math.Float64frombits(binary.LittleEndian.Uint64(p[17:]))
			if p[0]&8 != 0 {
				c[i] = vs[1][i] * 1e-17
			}
		}
		checkKahanAsm(t, has, vs, seen, val, c)
	})
}
