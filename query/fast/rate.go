package fast

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
// time-only part of the extrapolation are computed, in one loop without
// a call on the common path.
func (wk *worker) counterSteps(ev *evaluator, l *leaf, c *column, isRate bool) bool {
	buf, rr := wk.buf, rangeOf(l)
	// Positions where the counter went down, in order: rate adds the
	// value before each one inside the window, as upstream does.
	resets := wk.resets[:0]
	for i := 1; i < len(buf); i++ {
		if buf[i].f < buf[i-1].f {
			resets = append(resets, i)
		}
	}
	wk.resets = resets
	rc := &wk.rc
	vals, has := c.v[:ev.steps], c.has[:ev.steps]
	any := false
	lo, hi, r := 0, 0, 0
	for i, ts := 0, ev.start; i < len(vals); i, ts = i+1, ts+ev.interval {
		for lo < len(buf) && buf[lo].t <= ts-rr.ms {
			lo++
		}
		for hi < len(buf) && buf[hi].t <= ts {
			hi++
		}
		if hi-lo < 2 {
			continue
		}
		first, last := buf[lo], buf[hi-1]
		result := last.f - first.f
		for r < len(resets) && resets[r] <= lo {
			r++
		}
		for _, pos := range resets[r:] {
			if pos >= hi {
				break
			}
			result += buf[pos-1].f
		}
		n := hi - lo - 1
		toStart, toEnd, sampled := first.t-(ts-rr.ms), ts-last.t, last.t-first.t
		if !rc.valid || rc.toStart != toStart || rc.toEnd != toEnd || rc.sampled != sampled || rc.n != n {
			rc.fill(toStart, toEnd, sampled, n, rr, isRate)
		}
		factor := rc.factor
		if result > 0 && first.f >= 0 && !rc.clampFree(first.f, result) {
			factor = rc.counterFactor(first.f, result, rr, isRate)
		}
		vals[i], has[i] = result*factor, true
		any = true
	}
	return any
}
