//go:build amd64 && !purego

package fast

import "golang.org/x/sys/cpu"

// kahanFold is kahanFoldGo, four steps at a time where the CPU has AVX2.
// The Go loop decides per step which of two compensations to add, by the
// larger magnitude, and the branch follows the data; with four lanes the
// two are blended instead. Each lane runs the Go loop's IEEE additions on
// the same operands, so the sums are the same bit for bit; a group of four
// where a step to add holds a NaN or an infinity (in the value, the sum or
// the compensation) is left to the Go loop, which calls kahansum.Inc there
// (TestKahanFoldAsm, FuzzKahanFoldAsm). The purego build tag leaves it out.
func kahanFold(has []bool, v []float64, seen []bool, val, c []float64) {
	n := len(has)
	v, seen, val, c = v[:n], seen[:n], val[:n], c[:n]
	i := 0
	if useKahanAsm {
		for {
			i = kahanFoldAsm(has, v, seen, val, c, i)
			if i+4 > n {
				break
			}
			kahanFoldGo(has[i:i+4], v[i:i+4], seen[i:i+4], val[i:i+4], c[i:i+4])
			i += 4
		}
	}
	kahanFoldGo(has[i:], v[i:], seen[i:], val[i:], c[i:])
}

// useKahanAsm: the CPU runs kahanFoldAsm's instructions.
var useKahanAsm = cpu.X86.HasAVX2

// kahanFoldAsm folds the groups of four steps from i on, while each group
// it meets is finite where it adds, and returns where it stopped: at the
// first group it left (one with a NaN or an infinity to add), or at the
// last whole group's end. All slices are as long as has.
//
//go:noescape
func kahanFoldAsm(has []bool, v []float64, seen []bool, val, c []float64, i int) int
