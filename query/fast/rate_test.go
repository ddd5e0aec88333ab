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
			got, gok := rc.extrapolatedRate(w, nil, 0, len(w), ts, rangeOf(l), isCounter, fn == "rate")
			var fresh rateCache
			want, wok := fresh.extrapolatedRate(w, nil, 0, len(w), ts, rangeOf(l), isCounter, fn == "rate")
			if gok != wok || math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%s %v: cached %v, afresh %v", fn, w, got, want)
			}
		}
	}
}

// TestClampFree checks the division-free test against the division it
// replaces: wherever it says the zero clamp cannot apply, upstream's
// durationToZero is indeed not below durationToStart, over magnitudes
// from subnormal to huge and values on both sides of the boundary.
func TestClampFree(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 1))
	mag := func() float64 { return math.Ldexp(1+r.Float64(), r.IntN(2000)-1000) }
	skipped := 0
	for i := 0; i < 1_000_000; i++ {
		si := float64(1+r.Int64N(1<<40)) / 1000
		ds := float64(r.Int64N(1<<20)) / 1000
		if r.IntN(4) == 0 {
			ds = si / float64(1+r.IntN(100)) / 2
		}
		result := mag()
		if r.IntN(8) == 0 {
			result = math.Float64frombits(r.Uint64() >> 1) // any positive float, NaN or Inf
		}
		var first float64
		switch r.IntN(3) {
		case 0:
			first = mag()
		case 1:
			// A few units in the last place from where the clamp starts
			// to apply, and from the bound.
			first = ulps(result*ds/si, r.IntN(17)-8)
		default:
			first = ulps(result*2*ds/si, r.IntN(17)-8)
		}
		rc := rateCache{durToStart: ds, sampInt: si, zeroBound: 2 * ds / si}
		if !rc.clampFree(first, result) {
			continue
		}
		skipped++
		if dz := si * (first / result); dz < ds {
			t.Fatalf("clampFree(%g, %g) with durToStart %g, sampInt %g: but durationToZero %g is below", first, result, ds, si, dz)
		}
	}
	if skipped < 100_000 {
		t.Fatalf("only %d of 1e6 cases skip the division", skipped)
	}
}

// ulps returns x moved by k units in the last place.
func ulps(x float64, k int) float64 {
	for ; k > 0; k-- {
		x = math.Nextafter(x, math.Inf(1))
	}
	for ; k < 0; k++ {
		x = math.Nextafter(x, math.Inf(-1))
	}
	return x
}

// TestCounterSteps checks counterSteps, which keeps rate's state across
// steps and skips the zero clamp's division where it cannot apply,
// against upstream's formula written out plainly for each step's window
// (refCounterRate), over counters with resets, jitter, gaps and values
// near zero.
func TestCounterSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for iter := 0; iter < 300; iter++ {
		fn := []string{"rate", "increase"}[iter%2]
		l := &leaf{fn: fn, rng: time.Duration(1+r.IntN(6)) * 30 * time.Second}
		var buf []fpoint
		tt, v := int64(1_000_000), float64(r.IntN(3))*float64(r.IntN(1000))
		for i := 0; i < 400; i++ {
			tt += 15_000
			if r.IntN(10) == 0 {
				tt += r.Int64N(60_000) - 5_000
			}
			if r.IntN(40) == 0 {
				tt += 600_000
			}
			v += float64(r.IntN(20))
			if r.IntN(50) == 0 {
				v = float64(r.IntN(3))
			}
			buf = append(buf, fpoint{tt, v})
		}
		ev := &evaluator{start: 1_000_000 + r.Int64N(120_000), interval: int64(1+r.IntN(60)) * 5000}
		ev.steps = int((tt-ev.start)/ev.interval) + 2
		wk := &worker{buf: buf}
		c := &column{v: make([]float64, ev.steps), has: make([]bool, ev.steps)}
		wk.counterSteps(ev, l, c, fn == "rate")
		rr := rangeOf(l)
		for i := 0; i < ev.steps; i++ {
			ts := ev.start + int64(i)*ev.interval
			lo, hi := 0, 0
			for lo < len(buf) && buf[lo].t <= ts-rr.ms {
				lo++
			}
			for hi < len(buf) && buf[hi].t <= ts {
				hi++
			}
			want, wok := refCounterRate(buf[lo:hi], ts, l.rng, fn == "rate")
			if c.has[i] != wok || (wok && math.Float64bits(c.v[i]) != math.Float64bits(want)) {
				t.Fatalf("%s step %d: %v (%v), afresh %v (%v)", fn, i, c.v[i], c.has[i], want, wok)
			}
		}
	}
}

// refCounterRate is upstream's extrapolatedRate for a counter's float
// samples w in the window ending at ts, step by step as upstream writes it.
func refCounterRate(w []fpoint, ts int64, rng time.Duration, isRate bool) (float64, bool) {
	if len(w) < 2 {
		return 0, false
	}
	rangeStart, rangeEnd := ts-rng.Milliseconds(), ts
	first, last := w[0], w[len(w)-1]
	result := last.f - first.f
	prev := first.f
	for _, p := range w[1:] {
		if p.f < prev {
			result += prev
		}
		prev = p.f
	}
	durationToStart := float64(first.t-rangeStart) / 1000
	durationToEnd := float64(rangeEnd-last.t) / 1000
	sampledInterval := float64(last.t-first.t) / 1000
	averageDurationBetweenSamples := sampledInterval / float64(len(w)-1)
	extrapolationThreshold := averageDurationBetweenSamples * 1.1
	if durationToStart >= extrapolationThreshold {
		durationToStart = averageDurationBetweenSamples / 2
	}
	if result > 0 && first.f >= 0 {
		durationToZero := sampledInterval * (first.f / result)
		if durationToZero < durationToStart {
			durationToStart = durationToZero
		}
	}
	if durationToEnd >= extrapolationThreshold {
		durationToEnd = averageDurationBetweenSamples / 2
	}
	factor := 1.0
	if sampledInterval != 0 {
		factor = (sampledInterval + durationToStart + durationToEnd) / sampledInterval
	}
	if isRate {
		factor /= rng.Seconds()
	}
	return result * factor, true
}

// BenchmarkCounterSteps is the rate step loop alone on the dashboard's
// shapes: a counter scraped every 15 s, rate over 1 m at 15 s steps for
// 1 h (241 steps, 245 samples) and over 5 m at 5 m steps for 24 h (289
// steps, 5,781 samples), a reset in one series of eight.
func BenchmarkCounterSteps(b *testing.B) {
	for _, sh := range []struct {
		name          string
		interval, rng time.Duration
		steps         int
	}{
		{"rate_1m_at_15s_1h", 15 * time.Second, time.Minute, 241},
		{"rate_5m_at_5m_24h", 5 * time.Minute, 5 * time.Minute, 289},
	} {
		b.Run(sh.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(7, 7))
			ev := &evaluator{start: 86_400_000, interval: sh.interval.Milliseconds(), steps: sh.steps}
			l := &leaf{fn: "rate", rng: sh.rng}
			end := ev.start + int64(sh.steps-1)*ev.interval
			var bufs [][]fpoint
			for s := 0; s < 8; s++ {
				var buf []fpoint
				v := float64(r.IntN(1000))
				for tt := ev.start - sh.rng.Milliseconds() + 15_000; tt <= end; tt += 15_000 {
					v += float64(r.IntN(5))
					if s == 0 && tt == ev.start+1_800_000 {
						v = 1
					}
					buf = append(buf, fpoint{tt, v})
				}
				bufs = append(bufs, buf)
			}
			wk := &worker{}
			c := &column{v: make([]float64, ev.steps), has: make([]bool, ev.steps)}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				wk.buf = bufs[i%len(bufs)]
				wk.counterSteps(ev, l, c, true)
			}
		})
	}
}

// TestSeek checks that seek's guess changes nothing: it returns what
// advance returns from the same position, for every guess, over times in
// order with jitter and gaps.
func TestSeek(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for iter := 0; iter < 2000; iter++ {
		var buf []fpoint
		tt := int64(0)
		for i := r.IntN(40); i > 0; i-- {
			tt += 1 + r.Int64N(20)
			buf = append(buf, fpoint{t: tt})
		}
		for k := 0; k < 20; k++ {
			at := r.Int64N(tt+10) - 5
			j := uint(r.IntN(len(buf) + 1))
			d := uint(r.IntN(len(buf) + 2))
			if got, want := seek(buf, j, d, at), advance(buf, j, at); got != want {
				t.Fatalf("seek(%v, %d, %d, %d) = %d, advance %d", buf, j, d, at, got, want)
			}
		}
	}
}
