package fast

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRateCache checks that reusing the time-only part of the
// extrapolation gives bitwise what computing it afresh gives, over windows
// that share their ends' offsets but not their sample counts or values.
func TestRateCache(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, fn := range []string{"rate", "increase", "delta"} {
		l := &leaf{fn: fn, rng: time.Minute}
		isCounter := fn != "delta"
		var rc rateCache
		for i := 0; i < 20000; i++ {
			// Samples on a 10 s grid inside a 60 s window, the first and
			// last fixed, some in between missing.
			ts := int64(1_000_000 + r.IntN(5)*1000)
			first := ts - int64(30_000+r.IntN(3)*10_000) + int64(r.IntN(2))*1000
			var w []fpoint
			v := float64(r.IntN(3)) * 1e3
			if r.IntN(4) == 0 {
				v = -v
			}
			for tt := first; tt <= ts; tt += 10_000 {
				if tt != first && tt+10_000 <= ts && r.IntN(3) == 0 {
					continue
				}
				v += float64(r.IntN(50))
				w = append(w, fpoint{tt, v})
			}
			got, gok := rc.extrapolatedRate(w, nil, 0, len(w), ts, l, isCounter, fn == "rate")
			var fresh rateCache
			want, wok := fresh.extrapolatedRate(w, nil, 0, len(w), ts, l, isCounter, fn == "rate")
			if gok != wok || math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%s %v: cached %v, afresh %v", fn, w, got, want)
			}
		}
	}
}
