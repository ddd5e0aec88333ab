package fast

import (
	"fmt"
	"math"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/kahansum"
)

type fpoint struct {
	t int64
	f float64
}

// worker holds one goroutine's reusable buffers.
type worker struct {
	buf    []fpoint // the series being computed
	resets []int
}

// window returns the selector's data range [mint, maxt] as upstream
// computes it for the querier and the hints.
func (ev *evaluator) window(l *leaf) (mint, maxt int64) {
	if l.fn == "" {
		return ev.start - ev.opts.LookbackDelta.Milliseconds() + 1, ev.end
	}
	return ev.start - l.rng.Milliseconds() + 1, ev.end
}

func (ev *evaluator) runLeaf(l *leaf, s sink) error {
	mint, maxt := ev.window(l)
	querier, err := ev.q.Querier(mint, maxt)
	if err != nil {
		return err
	}
	defer querier.Close()
	step := ev.interval
	if ev.instant {
		step = 0
	}
	hints := &storage.SelectHints{
		Start: mint, End: maxt, Step: step, Range: l.rng.Milliseconds(),
		Func: l.hintFunc, By: l.hintBy, Grouping: l.hintGrp,
	}
	set := querier.Select(ev.ctx, false, hints, l.vs.LabelMatchers...)
	var series []storage.Series
	for set.Next() {
		series = append(series, set.At())
	}
	if err := set.Err(); err != nil {
		return err
	}
	if ws := set.Warnings(); len(ws) > 0 {
		ev.mu.Lock()
		ev.annos.Merge(ws)
		ev.mu.Unlock()
	}
	if err := ev.checkContext(); err != nil {
		return err
	}
	// Upstream holds every point of a range function's result at once; a
	// query that could come near its limit is left to upstream to refuse.
	if len(series)*ev.steps > ev.opts.MaxSamples/2 {
		return ErrFallback
	}

	workers := make([]worker, ev.opts.Workers)
	batch := min(ev.opts.BatchSeries, len(series))
	cols := make([]column, batch)
	vals := make([]float64, batch*ev.steps)
	has := make([]bool, batch*ev.steps)
	for i := range cols {
		cols[i].v = vals[i*ev.steps : (i+1)*ev.steps]
		cols[i].has = has[i*ev.steps : (i+1)*ev.steps]
		cols[i].dropName = l.dropName
	}
	var (
		rd        reader
		nonEmpty  = make([]bool, batch)
		out       = make([]*column, 0, batch)
		anyOutput bool
	)
	for b := 0; b < len(series); b += batch {
		n := min(batch, len(series)-b)
		// Chunks are read by one goroutine: a querier's chunk reader is
		// not safe for concurrent use (the head keeps a per-reader cache
		// of a series' chunks for range queries).
		if err := rd.read(ev, l, series[b:b+n]); err != nil {
			return err
		}
		err := parallel(ev.opts.Workers, n, func(w, lo, hi int) error {
			wk := &workers[w]
			for i := lo; i < hi; i++ {
				c := &cols[i]
				c.lset = series[b+i].Labels()
				nonEmpty[i] = wk.compute(ev, l, rd.samples(i), c)
			}
			return nil
		})
		if err != nil {
			return err
		}
		out = out[:0]
		for i := 0; i < n; i++ {
			if nonEmpty[i] {
				out = append(out, &cols[i])
			}
		}
		anyOutput = anyOutput || len(out) > 0
		if err := s.batch(out); err != nil {
			return err
		}
	}
	if anyOutput && (l.fn == "rate" || l.fn == "increase") {
		name := l.vs.Name
		if name == "" {
			for _, m := range l.vs.LabelMatchers {
				if m.Name == labels.MetricName {
					name = m.Value
				}
			}
		}
		if !strings.HasSuffix(name, "_total") && !strings.HasSuffix(name, "_sum") &&
			!strings.HasSuffix(name, "_count") && !strings.HasSuffix(name, "_bucket") {
			ev.addAnno(annotations.NewPossibleNonCounterInfo(name, l.argPos))
		}
	}
	return nil
}

// reader holds the samples of one batch of series, read in order.
type reader struct {
	it   chunkenc.Iterator
	buf  []fpoint
	offs []int // series i's samples are buf[offs[i]:offs[i+1]]
}

func (rd *reader) samples(i int) []fpoint { return rd.buf[rd.offs[i]:rd.offs[i+1]] }

// read decodes the samples of series inside the leaf's window, without
// stale markers for range functions. It returns ErrFallback on what only
// upstream evaluates: a histogram sample, or a start timestamp where
// rate, increase or irate would use it.
func (rd *reader) read(ev *evaluator, l *leaf, series []storage.Series) error {
	mint, maxt := ev.window(l)
	instant := l.fn == ""
	usesST := l.fn == "rate" || l.fn == "increase" || l.fn == "irate"
	rd.buf = rd.buf[:0]
	rd.offs = append(rd.offs[:0], 0)
	for i, s := range series {
		if i%64 == 0 {
			if err := ev.checkContext(); err != nil {
				return err
			}
		}
		rd.it = s.Iterator(rd.it)
		for vt := rd.it.Next(); vt != chunkenc.ValNone; vt = rd.it.Next() {
			if vt != chunkenc.ValFloat {
				return ErrFallback
			}
			t, f := rd.it.At()
			if t < mint || t > maxt {
				continue
			}
			if usesST && rd.it.AtST() != 0 {
				return ErrFallback
			}
			if !instant && value.IsStaleNaN(f) {
				continue
			}
			rd.buf = append(rd.buf, fpoint{t, f})
		}
		if err := rd.it.Err(); err != nil {
			return fmt.Errorf("read %s: %w", s.Labels(), err)
		}
		rd.offs = append(rd.offs, len(rd.buf))
	}
	return nil
}

// compute fills c with the leaf's value at every step from one series'
// samples and reports whether any step has a value.
func (wk *worker) compute(ev *evaluator, l *leaf, buf []fpoint, c *column) bool {
	clear(c.has)
	if len(buf) == 0 {
		return false
	}
	wk.buf = buf
	if l.fn == "" {
		return wk.instantSteps(ev, c)
	}
	return wk.rangeSteps(ev, l, c)
}

func (wk *worker) instantSteps(ev *evaluator, c *column) bool {
	buf, lb := wk.buf, ev.opts.LookbackDelta.Milliseconds()
	any := false
	j := 0
	ts := ev.start
	for i := 0; i < ev.steps; i, ts = i+1, ts+ev.interval {
		for j < len(buf) && buf[j].t <= ts {
			j++
		}
		if j == 0 {
			continue
		}
		p := buf[j-1]
		if p.t <= ts-lb || value.IsStaleNaN(p.f) {
			continue
		}
		c.v[i], c.has[i] = p.f, true
		any = true
	}
	return any
}

func (wk *worker) rangeSteps(ev *evaluator, l *leaf, c *column) bool {
	buf, rng := wk.buf, l.rng.Milliseconds()
	isCounter := l.fn == "rate" || l.fn == "increase"
	if isCounter {
		// Positions where the counter went down, in order: rate adds the
		// value before each one inside the window, as upstream does.
		wk.resets = wk.resets[:0]
		for i := 1; i < len(buf); i++ {
			if buf[i].f < buf[i-1].f {
				wk.resets = append(wk.resets, i)
			}
		}
	}
	any := false
	lo, hi, r := 0, 0, 0
	ts := ev.start
	for i := 0; i < ev.steps; i, ts = i+1, ts+ev.interval {
		for lo < len(buf) && buf[lo].t <= ts-rng {
			lo++
		}
		for hi < len(buf) && buf[hi].t <= ts {
			hi++
		}
		if hi <= lo {
			continue
		}
		w := buf[lo:hi]
		var (
			v  float64
			ok = true
		)
		switch l.fn {
		case "rate", "increase", "delta":
			if isCounter {
				for r < len(wk.resets) && wk.resets[r] <= lo {
					r++
				}
				v, ok = extrapolatedRate(w, wk.resets[r:], lo, hi, ts, l, isCounter, l.fn == "rate")
			} else {
				v, ok = extrapolatedRate(w, nil, lo, hi, ts, l, false, false)
			}
		case "irate":
			v, ok = irate(w)
		case "sum_over_time":
			var sum, cc float64
			for _, p := range w {
				sum, cc = kahansum.Inc(p.f, sum, cc)
			}
			if math.IsInf(sum, 0) {
				v = sum
			} else {
				v = sum + cc
			}
		case "avg_over_time":
			v = avgOverTime(w)
		case "min_over_time":
			v = w[0].f
			for _, p := range w {
				if p.f < v || math.IsNaN(v) {
					v = p.f
				}
			}
		case "max_over_time":
			v = w[0].f
			for _, p := range w {
				if p.f > v || math.IsNaN(v) {
					v = p.f
				}
			}
		case "count_over_time":
			v = float64(len(w))
		case "last_over_time":
			v = w[len(w)-1].f
		default:
			panic("BUG: fast: unknown range function " + l.fn)
		}
		if ok {
			c.v[i], c.has[i] = v, true
			any = true
		}
	}
	return any
}

// extrapolatedRate is upstream's rate/increase/delta for float samples
// without start timestamps, with the same arithmetic in the same order.
// resets holds the positions (in the series buffer) of counter resets from
// the window's second sample on; only those below hi count.
func extrapolatedRate(w []fpoint, resets []int, lo, hi int, ts int64, l *leaf, isCounter, isRate bool) (float64, bool) {
	n := len(w) - 1
	if n == 0 {
		return 0, false
	}
	rangeStart, rangeEnd := ts-l.rng.Milliseconds(), ts
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
	durationToStart := float64(firstT-rangeStart) / 1000
	durationToEnd := float64(rangeEnd-lastT) / 1000
	sampledInterval := float64(lastT-firstT) / 1000
	averageDurationBetweenSamples := sampledInterval / float64(n)
	extrapolationThreshold := averageDurationBetweenSamples * 1.1
	if durationToStart >= extrapolationThreshold {
		durationToStart = averageDurationBetweenSamples / 2
	}
	if isCounter {
		durationToZero := durationToStart
		if result > 0 && w[0].f >= 0 {
			durationToZero = sampledInterval * (w[0].f / result)
		}
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
		factor /= l.rng.Seconds()
	}
	return result * factor, true
}

// irate is upstream's instantValue for two float samples without start
// timestamps.
func irate(w []fpoint) (float64, bool) {
	if len(w) < 2 {
		return 0, false
	}
	p0, p1 := w[len(w)-2], w[len(w)-1]
	sampledInterval := p1.t - p0.t
	if sampledInterval == 0 {
		return 0, false
	}
	v := p1.f
	if !(p1.f < p0.f) {
		v = p1.f - p0.f
	}
	return v / (float64(sampledInterval) / 1000), true
}

// avgOverTime is upstream's float avg_over_time: a Kahan sum that turns
// into an incremental mean if the sum would overflow.
func avgOverTime(w []fpoint) float64 {
	var (
		sum, count      = w[0].f, 1.
		mean, kahanC    float64
		incrementalMean bool
	)
	for i, p := range w[1:] {
		count = float64(i + 2)
		if !incrementalMean {
			newSum, newC := kahansum.Inc(p.f, sum, kahanC)
			if !math.IsInf(newSum, 0) {
				sum, kahanC = newSum, newC
				continue
			}
			incrementalMean = true
			mean = sum / (count - 1)
			kahanC /= count - 1
		}
		q := (count - 1) / count
		mean, kahanC = kahansum.Inc(p.f/count, q*mean, q*kahanC)
	}
	if incrementalMean {
		return mean + kahanC
	}
	return sum/count + kahanC/count
}
