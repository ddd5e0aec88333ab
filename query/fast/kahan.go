package fast

import (
	"math"

	"github.com/prometheus/prometheus/util/kahansum"
)

// kahanFoldGo adds v[i] into the Kahan sum (val[i], c[i]) for each step i
// where has[i], starting the sum at v[i] where seen[i] is false: the sum
// fold's inner loop over one column. Each step is kahansum.Inc, bit for
// bit, written out in the loop: Inc is over the inliner's budget, and its
// out-of-line call was about a fifth of a classic histogram query's CPU.
// Over finite inputs the loop runs Inc's float additions on the same
// operands; an IEEE addition of finite numbers has one correctly rounded
// result whatever order the compiler gives its operands, and there are
// no multiplications to fuse, so the two cannot differ. Where the value,
// the sum or the compensation is a NaN or an infinity it calls Inc
// itself: which NaN payload an addition of two NaNs yields depends on the
// operand order the compiler picks, and an earlier inlined copy differed
// there. FuzzKahanFold checks it against Inc over arbitrary bit patterns.
// On amd64 with AVX2, kahanFold runs four steps at a time in assembly and
// this loop over the rest (kahan_amd64.go).
func kahanFoldGo(has []bool, v []float64, seen []bool, val, c []float64) {
	v, seen, val, c = v[:len(has)], seen[:len(has)], val[:len(has)], c[:len(has)]
	for i, h := range has {
		if !h {
			continue
		}
		x := v[i]
		if !seen[i] {
			seen[i], val[i], c[i] = true, x, 0
			continue
		}
		s, cc := val[i], c[i]
		if !(finite(x) && finite(s) && finite(cc)) {
			val[i], c[i] = kahansum.Inc(x, s, cc)
			continue
		}
		t := s + x
		switch {
		case t > math.MaxFloat64 || t < -math.MaxFloat64:
			cc = 0
		case math.Abs(s) >= math.Abs(x):
			cc += (s - t) + x
		default:
			cc += (x - t) + s
		}
		val[i], c[i] = t, cc
	}
}

// finite reports that f is neither a NaN nor an infinity.
func finite(f float64) bool { return math.Abs(f) <= math.MaxFloat64 }
