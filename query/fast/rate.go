package fast

import "math"

// rateRange is a range selector's width in the two units the
// extrapolation uses, converted once per series instead of once per step
// (time.Duration.Milliseconds is an integer division).
type rateRange struct {
	ms  int64
	sec float64 // as upstream computes it: time.Duration.Seconds
}

func rangeOf(l *leaf) rateRange { return rateRange{ms: l.rng.Milliseconds(), sec: l.rng.Seconds()} }

// rateCache keeps the time-only part of the last extrapolation: the
// durations to the window's ends (after the threshold test), the sampled
// interval and the factor they give. They depend only on the sample
// times relative to the window and the sample count, which repeat step
// after step for regular scrapes; the same inputs give the same floats,
// so reusing them changes no bit of the result.
type rateCache struct {
	valid                         bool
	toStart, toEnd, sampled       int64 // the key: ms from the window's start, to its end, between first and last
	n                             int
	durToStart, durToEnd, sampInt float64
	factor                        float64 // without the counter's zero clamp
	// zeroBound is 2·durToStart/sampInt: a counter whose first value is
	// above zeroBound times the window's increase would have been zero
	// further back than the window's start, so the zero clamp cannot
	// apply (see clampFree) and its division is skipped.
	zeroBound float64
}

// fill computes the time-only part for a window whose first sample is
// toStart ms after its start and whose last is toEnd ms before its end,
// sampled ms apart, with n+1 samples, as upstream does.
func (rc *rateCache) fill(toStart, toEnd, sampled int64, n int, rr rateRange, isRate bool) {
	durationToStart := float64(toStart) / 1000
	durationToEnd := float64(toEnd) / 1000
	sampledInterval := float64(sampled) / 1000
	averageDurationBetweenSamples := sampledInterval / float64(n)
	extrapolationThreshold := averageDurationBetweenSamples * 1.1
	if durationToStart >= extrapolationThreshold {
		durationToStart = averageDurationBetweenSamples / 2
	}
	if durationToEnd >= extrapolationThreshold {
		durationToEnd = averageDurationBetweenSamples / 2
	}
	*rc = rateCache{
		valid: true, toStart: toStart, toEnd: toEnd, sampled: sampled, n: n,
		durToStart: durationToStart, durToEnd: durationToEnd, sampInt: sampledInterval,
		factor:    extrapolationFactor(sampledInterval, durationToStart, durationToEnd, rr, isRate),
		zeroBound: 2 * durationToStart / sampledInterval,
	}
}

// clampFree reports, without a division, that upstream's zero clamp
// leaves the factor alone: that sampInt·(first/result), rounded, is not
// below durToStart. It holds when first > result·zeroBound (each of the
// four roundings between the two loses less than a factor 1+2⁻⁵², far
// from the factor 2 of zeroBound) for a normal, positive result and a
// non-negative durToStart; NaNs and infinities fail the comparison and go
// the exact way. It may say false where the clamp does not apply; the
// caller then computes it.
func (rc *rateCache) clampFree(first, result float64) bool {
	return result >= 0x1p-900 && first > result*rc.zeroBound
}

// extrapolatedRate is upstream's rate/increase/delta for float samples
// without start timestamps, with the same arithmetic in the same order.
// resets holds the positions (in the series buffer) of counter resets from
// the window's second sample on; only those below hi count.
func (rc *rateCache) extrapolatedRate(w []fpoint, resets []int, lo, hi int, ts int64, rr rateRange, isCounter, isRate bool) (float64, bool) {
	n := len(w) - 1
	if n == 0 {
		return 0, false
	}
	rangeStart, rangeEnd := ts-rr.ms, ts
	firstT, lastT := w[0].t, w[n].t
	result := w[n].f - w[0].f
	if isCounter {
		for _, pos := range resets {
			if pos >= hi {
				break
			}
			result += w[pos-lo-1].f
		}
	}
	toStart, toEnd, sampled := firstT-rangeStart, rangeEnd-lastT, lastT-firstT
	if !rc.valid || rc.toStart != toStart || rc.toEnd != toEnd || rc.sampled != sampled || rc.n != n {
		rc.fill(toStart, toEnd, sampled, n, rr, isRate)
	}
	factor := rc.factor
	if isCounter {
		factor = rc.counterFactor(w[0].f, result, rr, isRate)
	}
	return result * factor, true
}

// counterFactor is the factor with upstream's clamp of the start towards
// where the counter would have been zero (before the end's threshold
// test, which does not depend on it).
func (rc *rateCache) counterFactor(first, result float64, rr rateRange, isRate bool) float64 {
	if result > 0 && first >= 0 && !rc.clampFree(first, result) {
		if durationToZero := rc.sampInt * (first / result); durationToZero < rc.durToStart {
			return extrapolationFactor(rc.sampInt, durationToZero, rc.durToEnd, rr, isRate)
		}
	}
	return rc.factor
}

// extrapolationFactor is upstream's factor from the sampled interval and
// the durations to extrapolate at both ends.
func extrapolationFactor(sampledInterval, durationToStart, durationToEnd float64, rr rateRange, isRate bool) float64 {
	factor := 1.0
	if sampledInterval != 0 {
		factor = (sampledInterval + durationToStart + durationToEnd) / sampledInterval
	}
	if isRate {
		factor /= rr.sec
	}
	return factor
}

// counterSteps is rangeSteps for rate and increase: per step, only the
// window's ends, the resets inside it and (for irregular samples) the
// time-only part of the extrapolation are computed. The common step runs
// in counterLoop.common, without a call; a step that is not common is
// computed in full here, and the loop resumes after it.
func (wk *worker) counterSteps(ev *evaluator, l *leaf, c *column, isRate bool) bool {
	buf, rr := wk.buf, rangeOf(l)
	// Positions where the counter went down, in order: rate adds the
	// value before each one inside the window, as upstream does.
	resets := wk.resets[:0]
	if len(buf) > 0 {
		prev := buf[0].f
		for i, p := range buf[1:] {
			if p.f < prev {
				resets = append(resets, i+1)
			}
			prev = p.f
		}
	}
	wk.resets = resets
	rc := &wk.rc
	cl := counterLoop{
		buf: buf, vals: c.v[:ev.steps], has: c.has[:ev.steps],
		start: ev.start, interval: ev.interval, rms: rr.ms,
		nextReset: math.MaxUint, kN: -1,
	}
	if len(resets) > 0 {
		cl.nextReset = uint(resets[0])
	}
	any, r := false, 0
	for i := 0; ; i++ {
		var some bool
		i, some = cl.common(i)
		any = any || some
		if i == len(cl.vals) {
			return any
		}
		// The step common stopped at, lo and hi already its own.
		ts, lo, hi := cl.start+int64(i)*cl.interval, cl.lo, cl.hi
		first, last := buf[lo], buf[hi-1]
		result := last.f - first.f
		for r < len(resets) && uint(resets[r]) <= lo {
			r++
		}
		cl.nextReset = math.MaxUint
		if r < len(resets) {
			cl.nextReset = uint(resets[r])
		}
		for _, pos := range resets[r:] {
			if uint(pos) >= hi {
				break
			}
			result += buf[pos-1].f
		}
		nw := int(hi - lo - 1)
		toStart, toEnd := first.t-(ts-cl.rms), ts-last.t
		if toStart != cl.kStart || toEnd != cl.kEnd || nw != cl.kN {
			rc.fill(toStart, toEnd, last.t-first.t, nw, rr, isRate)
			cl.kStart, cl.kEnd, cl.kN = toStart, toEnd, nw
			cl.factor, cl.zeroBound = rc.factor, rc.zeroBound
		}
		factor := cl.factor
		if result > 0 && first.f >= 0 && !rc.clampFree(first.f, result) {
			factor = rc.counterFactor(first.f, result, rr, isRate)
		}
		cl.vals[i], cl.has[i] = result*factor, true
		any = true
	}
}

// counterLoop is counterSteps' state between steps: the series, the
// output column, the window's bounds as positions in the series, the
// next reset's position, and the rate cache's key and factor. The key
// leaves out the sampled interval, which the window's width and its two
// ends determine (sampled = width - toStart - toEnd); it starts empty for
// each series (kN = -1: no window has fewer than one interval), so the
// cache never outlives a change of range or function, at the cost of one
// fill a series.
type counterLoop struct {
	buf                  []fpoint
	vals                 []float64
	has                  []bool
	start, interval, rms int64
	lo, hi               uint // the window of the last step: buf[lo:hi]
	d                    uint // how far hi moved at that step
	nextReset            uint // position of the first reset after lo, or MaxUint
	kStart, kEnd         int64
	kN                   int
	factor, zeroBound    float64
}

// common computes steps from i on while they are common — no reset
// inside the window, the cached time-only part still good, the zero
// clamp provably out of reach — and returns the first step that is not
// (or len(vals)) and whether it gave any value. It makes no call, and
// holds the state in locals: with a call anywhere in the loop, the
// compiler kept each of them on the stack, a load or a store at every
// use.
func (cl *counterLoop) common(i int) (int, bool) {
	buf, vals, has := cl.buf, cl.vals, cl.has
	has = has[:len(vals)]
	interval, rms := cl.interval, cl.rms
	ts := cl.start + int64(i)*interval
	lo, hi, nextReset := cl.lo, cl.hi, cl.nextReset
	// The key against the step's time: first.t-ts and hi-lo.
	kFirst, kEnd, kW := cl.kStart-rms, cl.kEnd, uint(cl.kN+1)
	factor, zeroBound := cl.factor, cl.zeroBound
	d := cl.d
	any := false
	for ; i < len(vals); i, ts = i+1, ts+interval {
		nhi := seek(buf, hi, d, ts)
		lo, d, hi = seek(buf, lo, d, ts-rms), nhi-hi, nhi
		if hi < lo+2 {
			continue
		}
		if nextReset < hi {
			break
		}
		first, last := buf[lo], buf[hi-1]
		if first.t-ts != kFirst || ts-last.t != kEnd || hi-lo != kW {
			break
		}
		result := last.f - first.f
		// The clamp's test, then clampFree's.
		if result > 0 && first.f >= 0 && !(result >= 0x1p-900 && first.f > result*zeroBound) {
			break
		}
		vals[i], has[i] = result*factor, true
		any = true
	}
	cl.lo, cl.hi, cl.d = lo, hi, d
	return i, any
}

// seek is advance trying j+d first, where d is how far the bound moved
// at the step before: on a regular scrape both bounds of a window move by
// the same count each step (twenty samples for 5-minute steps at 15 s),
// which two loads confirm instead of a scan over them (for a move of one
// the scan is as short). The guess g is the answer exactly when the
// sample before it is not after t and its own is (buf is in time order).
func seek(buf []fpoint, j, d uint, t int64) uint {
	if g := j + d; d > 1 && g < uint(len(buf)) && buf[g-1].t <= t && buf[g].t > t {
		return g
	}
	return advance(buf, j, t)
}

// advance returns the first position from j on whose sample is after t
// (len(buf) if none).
func advance(buf []fpoint, j uint, t int64) uint {
	for j < uint(len(buf)) && buf[j].t <= t {
		j++
	}
	return j
}
