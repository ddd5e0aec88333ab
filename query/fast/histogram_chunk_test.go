package fast

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// histChunkFrom builds an integer histogram chunk with the chunk encoder
// from a seed: exponential schemas (with and without a zero threshold and
// negative buckets) or custom bounds, buckets that appear (the appender
// recodes the chunk), counts small and large (every varbit width),
// irregular times, and stale markers at the end. Counts never go down,
// so the appender keeps one chunk.
func histChunkFrom(seed uint64, n int) chunkenc.Chunk {
	r := rand.New(rand.NewPCG(seed, 5))
	var c chunkenc.Chunk = chunkenc.NewHistogramChunk()
	app, err := c.Appender()
	if err != nil {
		panic(err)
	}
	h := &histogram.Histogram{Schema: int32(r.IntN(13)) - 4}
	switch r.IntN(4) {
	case 0:
		h.ZeroThreshold = []float64{1e-3, 1e-128, 0.1234, math.Ldexp(0.5, -100)}[r.IntN(4)]
	case 1:
		h.Schema = histogram.CustomBucketsSchema
		h.CustomValues = []float64{0.001, 0.5, 1, 2.75, 1e9, 12.3456789}[:1+r.IntN(6)]
	}
	width := r.IntN(13) // none: only the count, the zero bucket and the sum
	if width > 0 {
		h.PositiveSpans = []histogram.Span{{Offset: int32(r.IntN(20)) - 10, Length: uint32(width)}}
	}
	h.PositiveBuckets = make([]int64, width)
	if h.Schema != histogram.CustomBucketsSchema && r.IntN(2) == 0 {
		h.NegativeSpans = []histogram.Span{{Offset: 1, Length: 2}, {Offset: 3, Length: 1}}
		h.NegativeBuckets = make([]int64, 3)
	}
	abs := make([]int64, width)
	nabs := make([]int64, len(h.NegativeBuckets))
	big := []int64{1, 10, 1000, 1 << 20, 1 << 40}[r.IntN(5)]
	t := r.Int64N(1<<40) - 1<<39
	step := []int64{1, 15_000, 60_000, 1 << 20}[r.IntN(4)]
	staleFrom := n - r.IntN(3)
	for i := 0; i < n; i++ {
		switch r.IntN(8) {
		case 0:
			t += 1 + r.Int64N(1<<30)
		case 1:
			t += step + r.Int64N(5000)
		default:
			t += step
		}
		if i >= staleFrom {
			s := &histogram.Histogram{Sum: math.Float64frombits(value.StaleNaN)}
			c2, _, app2, err := app.AppendHistogram(nil, 0, t, s, false)
			if err != nil || c2 != nil {
				break
			}
			app = app2
			continue
		}
		if i > 0 && r.IntN(20) == 0 && h.Schema != histogram.CustomBucketsSchema && len(h.PositiveSpans) == 1 && width > 0 {
			// A bucket appears: the appender recodes the chunk.
			h.PositiveSpans = append(h.PositiveSpans, histogram.Span{Offset: 2, Length: 1})
			h.PositiveBuckets = append(h.PositiveBuckets, 0)
			abs = append(abs, 0)
		}
		for k := range abs {
			if r.IntN(3) > 0 {
				abs[k] += r.Int64N(big)
			}
		}
		for k := range nabs {
			nabs[k] += r.Int64N(3)
		}
		var cnt, prev int64
		for k, v := range abs {
			h.PositiveBuckets[k] = v - prev
			prev = v
			cnt += v
		}
		prev = 0
		for k, v := range nabs {
			h.NegativeBuckets[k] = v - prev
			prev = v
			cnt += v
		}
		if h.ZeroThreshold > 0 {
			h.ZeroCount += uint64(r.IntN(4))
		}
		h.Count = uint64(cnt) + h.ZeroCount
		switch r.IntN(4) {
		case 0:
			h.Sum = math.Float64frombits(r.Uint64() &^ (1 << 62))
		case 1:
		default:
			h.Sum += r.Float64() * 100
		}
		c2, _, app2, err := app.AppendHistogram(nil, 0, t, h.Copy(), false)
		if err != nil {
			panic(err)
		}
		if c2 != nil {
			if c2.NumSamples() != c.NumSamples()+1 {
				break // cut, not recoded: keep the chunk so far
			}
			c = c2
		}
		app = app2
	}
	return c
}

// iterSamples is what decodeHistChunk must keep: the chunk iterator's
// samples in some window of f, without stale markers.
func iterSamples(c chunkenc.Chunk, f *sampleFilter, steps int) ([]histogram.FloatHistogram, []int64, []bool) {
	var (
		out   []histogram.FloatHistogram
		ts    []int64
		first []bool
	)
	it := c.Iterator(nil)
	for i := 0; it.Next() == chunkenc.ValHistogram; i++ {
		// Into a histogram, as the engine's range selectors read: with
		// nil the iterator converts the integer sums instead, which
		// rounds otherwise past 2^53.
		t, fh := it.AtFloatHistogram(&histogram.FloatHistogram{})
		in := false
		for k := 0; k < steps; k++ {
			ts := f.start + int64(k)*f.interval
			if ts-f.width < t && t <= ts {
				in = true
				break
			}
		}
		if in && !value.IsStaleNaN(fh.Sum) {
			out, ts, first = append(out, *fh.Copy()), append(ts, t), append(first, i == 0)
		}
	}
	return out, ts, first
}

// checkHistDecode compares the decoder with the chunk iterator, bitwise,
// told the chunk's last time (where it may stop early) and not told it.
func checkHistDecode(t *testing.T, c chunkenc.Chunk, f *sampleFilter, steps int) {
	t.Helper()
	maxt := int64(math.MinInt64)
	for it := c.Iterator(nil); it.Next() != chunkenc.ValNone; {
		maxt = it.AtT()
	}
	checkHistDecodeTo(t, c, f, steps, maxt)
	checkHistDecodeTo(t, c, f, steps, math.MaxInt64)
}

func checkHistDecodeTo(t *testing.T, c chunkenc.Chunk, f *sampleFilter, steps int, maxt int64) {
	t.Helper()
	want, ts, first := iterSamples(c, f, steps)
	var s histSeries
	if err := s.decodeHistChunk(c.Bytes(), f, maxt); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(s.samples) != len(want) {
		t.Fatalf("%d samples, want %d", len(s.samples), len(want))
	}
	for i, w := range want {
		g := s.samples[i]
		l := s.layouts[g.layout]
		pos := s.vals[g.off : int(g.off)+l.npos]
		neg := s.vals[int(g.off)+l.npos : int(g.off)+l.nbuckets]
		switch {
		case g.t != ts[i] || g.first != first[i]:
			t.Fatalf("sample %d: t %d first %v, want %d %v", i, g.t, g.first, ts[i], first[i])
		case !floatsEqual([]float64{g.count, g.zero, g.sum}, []float64{w.Count, w.ZeroCount, w.Sum}):
			t.Fatalf("sample %d: count, zero, sum %v %v %v, want %v %v %v", i, g.count, g.zero, g.sum, w.Count, w.ZeroCount, w.Sum)
		case l.schema != w.Schema || math.Float64bits(l.zeroThreshold) != math.Float64bits(w.ZeroThreshold) ||
			!slices.Equal(l.pos, w.PositiveSpans) || !slices.Equal(l.neg, w.NegativeSpans) || !floatsEqual(l.custom, w.CustomValues):
			t.Fatalf("sample %d: layout %+v, want %+v", i, l, w)
		case !floatsEqual(pos, w.PositiveBuckets) || !floatsEqual(neg, w.NegativeBuckets):
			t.Fatalf("sample %d: buckets %v %v, want %v %v", i, pos, neg, w.PositiveBuckets, w.NegativeBuckets)
		}
	}
	// Through the iterator, the same samples.
	var si histSeries
	if err := si.iterHistChunk(c.Iterator(nil), f); err != nil {
		t.Fatalf("iterator: %v", err)
	}
	if len(si.samples) != len(s.samples) {
		t.Fatalf("iterator: %d samples, want %d", len(si.samples), len(s.samples))
	}
	for i := range si.samples {
		a, b := si.samples[i], s.samples[i]
		la, lb := si.layouts[a.layout], s.layouts[b.layout]
		if a.t != b.t || a.first != b.first || !floatsEqual([]float64{a.count, a.zero, a.sum}, []float64{b.count, b.zero, b.sum}) ||
			!la.same(&lb) || !floatsEqual(si.vals[a.off:int(a.off)+la.nbuckets], s.vals[b.off:int(b.off)+lb.nbuckets]) {
			t.Fatalf("iterator: sample %d differs", i)
		}
	}
}

func TestDecodeHistChunk(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		c := histChunkFrom(seed, int(seed%150))
		checkHistDecode(t, c, &sampleFilter{start: -1 << 50, end: 1 << 50, interval: 1 << 50, width: 1 << 52}, 3)
		it := c.Iterator(nil)
		if it.Next() == chunkenc.ValNone {
			continue
		}
		t0 := it.AtT()
		r := rand.New(rand.NewPCG(seed, 9))
		f := &sampleFilter{start: t0 + r.Int64N(600_000) - 300_000, interval: 1 + r.Int64N(300_000), width: 1 + r.Int64N(400_000)}
		steps := 1 + r.IntN(200)
		f.end = f.start + int64(steps-1)*f.interval
		checkHistDecode(t, c, f, steps)
	}
}

// TestDecodeHistChunkStops puts a step's window just before, at and
// just after the chunk's last sample, where the decoder told the chunk's
// last time stops early or must not.
func TestDecodeHistChunkStops(t *testing.T) {
	c := benchHistChunk() // no stale marker
	maxt := int64(math.MinInt64)
	for it := c.Iterator(nil); it.Next() != chunkenc.ValNone; {
		maxt = it.AtT()
	}
	for _, width := range []int64{1, 15_000, 60_000} {
		for delta := int64(-2); delta <= 2; delta++ {
			// The second step's window (s1-width, s1] holds the last
			// sample where delta < 1 and s1 is not before it.
			s1 := maxt + width - 1 + delta
			const interval = 300_000
			f := &sampleFilter{start: s1 - interval, end: s1 + interval, interval: interval, width: width}
			checkHistDecode(t, c, f, 3)
			want, _, _ := iterSamples(c, f, 3)
			var s histSeries
			if err := s.decodeHistChunk(c.Bytes(), f, maxt); err != nil {
				t.Fatal(err)
			}
			if n := len(s.samples); n != len(want) || (delta < 1 && s1 >= maxt) != (n > 0 && s.samples[n-1].t == maxt) {
				t.Fatalf("width %d, delta %d: %d samples, want %d", width, delta, n, len(want))
			}
		}
	}
}

// TestDecodeHistChunkRefuses checks that the decoder refuses what the
// leaf must not take from chunks: a gauge chunk, and counts that go down
// inside a chunk (no TSDB appender writes one).
func TestDecodeHistChunkRefuses(t *testing.T) {
	all := &sampleFilter{start: -1 << 50, end: 1 << 50, interval: 1 << 50, width: 1 << 52}
	g := chunkenc.NewHistogramChunk()
	app, _ := g.Appender()
	h := &histogram.Histogram{CounterResetHint: histogram.GaugeType, Count: 3, PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{3}}
	if _, _, _, err := app.AppendHistogram(nil, 0, 1000, h, false); err != nil {
		t.Fatal(err)
	}
	var s histSeries
	if err := s.decodeHistChunk(g.Bytes(), all, math.MaxInt64); err != errHistChunk {
		t.Fatalf("gauge chunk: %v, want errHistChunk", err)
	}
	// A gauge chunk takes falling counts: its bytes, with the header
	// of a counter chunk, are a chunk whose counts go down.
	h2 := h.Copy()
	h2.Count, h2.PositiveBuckets[0] = 1, 1
	if _, _, _, err := app.AppendHistogram(nil, 0, 2000, h2, false); err != nil {
		t.Fatal(err)
	}
	b := slices.Clone(g.Bytes())
	b[2] &^= chunkenc.CounterResetHeaderMask
	if err := s.decodeHistChunk(b, all, math.MaxInt64); err != errHistChunk {
		t.Fatalf("falling counts: %v, want errHistChunk", err)
	}
	c, err := chunkenc.FromData(chunkenc.EncHistogram, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.iterHistChunk(c.Iterator(nil), all); err != errHistChunk {
		t.Fatalf("falling counts through the iterator: %v, want errHistChunk", err)
	}
}

// TestDecodeHistChunkBigCounts: bucket counts past 2^53 come out as the
// engine's range selectors read them (AtFloatHistogram into a histogram
// sums the bucket deltas as floats), not as the integer sums converted,
// which round otherwise.
func TestDecodeHistChunkBigCounts(t *testing.T) {
	all := &sampleFilter{start: 1 << 60, end: 1 << 60, interval: 1, width: 1 << 62}
	c := chunkenc.NewHistogramChunk()
	app, _ := c.Appender()
	const big = 1 << 54
	for i := range int64(4) {
		// Absolute counts big+3i+1, big+5i+3 and 2 big+7i+1: the float
		// sums of the deltas round away from the converted integer sums.
		h := &histogram.Histogram{
			Schema: 0, PositiveSpans: []histogram.Span{{Length: 3}},
			PositiveBuckets: []int64{big + 3*i + 1, 2*i + 2, big - 5*i - 2 + 7*i},
		}
		var abs int64
		for _, d := range h.PositiveBuckets {
			abs += d
			h.Count += uint64(abs)
		}
		if _, _, _, err := app.AppendHistogram(nil, 0, 1000*(i+1), h, false); err != nil {
			t.Fatal(err)
		}
	}
	// The two conversions differ here, or the test shows nothing.
	it := c.Iterator(nil)
	differ := false
	for it.Next() != chunkenc.ValNone {
		_, a := it.AtFloatHistogram(nil)
		a = a.Copy()
		_, b := it.AtFloatHistogram(&histogram.FloatHistogram{})
		differ = differ || !floatsEqual(a.PositiveBuckets, b.PositiveBuckets)
	}
	if !differ {
		t.Fatal("the iterator's two conversions agree on these counts")
	}
	checkHistDecode(t, c, all, 1)
}

// FuzzHistChunkDecode checks the decoder against the chunk encoder and
// iterator on generated chunks and window sets, and that arbitrary bytes
// never make it panic or read out of bounds (where the iterator reads
// them without error, the decoder refuses them or yields the same).
func FuzzHistChunkDecode(f *testing.F) {
	f.Add(uint64(1), uint8(120), int64(0), int64(15_000), int64(60_000), []byte{0, 2, 0, 0, 2, 1, 2, 3})
	f.Add(uint64(7), uint8(3), int64(-5000), int64(1), int64(1), []byte{})
	f.Add(uint64(9), uint8(0), int64(100), int64(300_000), int64(60_000), []byte{0, 200, 0x40, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	c := histChunkFrom(3, 50)
	f.Add(uint64(3), uint8(50), int64(0), int64(60_000), int64(60_000), slices.Clone(c.Bytes()))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, startOff, interval, width int64, raw []byte) {
		if interval <= 0 || width <= 0 || interval > 1<<40 || width > 1<<40 || startOff > 1<<40 || startOff < -1<<40 || n > 200 {
			return
		}
		c := histChunkFrom(seed, int(n))
		it := c.Iterator(nil)
		t0 := int64(0)
		if it.Next() != chunkenc.ValNone {
			t0 = it.AtT()
		}
		steps := 1 + int(seed%100)
		fl := &sampleFilter{start: t0 + startOff, interval: interval, width: width}
		fl.end = fl.start + int64(steps-1)*interval
		checkHistDecode(t, c, fl, steps)

		all := &sampleFilter{start: 1 << 60, end: 1 << 60, interval: 1, width: 1 << 62} // one window, over every time
		var s histSeries
		err := s.decodeHistChunk(raw, all, math.MaxInt64)
		if err != nil || len(raw) < 3 {
			return
		}
		rc, err := chunkenc.FromData(chunkenc.EncHistogram, raw)
		if err != nil {
			return
		}
		want, ts, _ := iterSamples(rc, all, 1)
		rit := rc.Iterator(nil)
		read := 0
		for rit.Next() != chunkenc.ValNone {
			read++
		}
		if rit.Err() != nil || read != int(binary.BigEndian.Uint16(raw)) {
			return
		}
		if len(want) != len(s.samples) {
			t.Fatalf("arbitrary bytes: %d samples, iterator %d", len(s.samples), len(want))
		}
		for i, w := range want {
			g := s.samples[i]
			l := s.layouts[g.layout]
			if g.t != ts[i] || !floatsEqual([]float64{g.count, g.zero, g.sum}, []float64{w.Count, w.ZeroCount, w.Sum}) ||
				!floatsEqual(s.vals[g.off:int(g.off)+l.npos], w.PositiveBuckets) {
				t.Fatalf("arbitrary bytes: sample %d differs", i)
			}
		}
	})
}

// benchHistChunk is a chunk of the dashboard benchmark's shape: 120
// samples at 15 s of 48 buckets that grow by a few observations each.
func benchHistChunk() chunkenc.Chunk {
	r := rand.New(rand.NewPCG(15, 51))
	c := chunkenc.NewHistogramChunk()
	app, _ := c.Appender()
	h := &histogram.Histogram{Schema: 3, ZeroThreshold: 1e-4, PositiveSpans: []histogram.Span{{Offset: -40, Length: 48}}, PositiveBuckets: make([]int64, 48)}
	abs := make([]int64, 48)
	for i := range 120 {
		for range r.IntN(20) {
			k := min(47, int(r.ExpFloat64()*0.3*40))
			abs[k]++
			h.Count++
			h.Sum += r.Float64()
		}
		prev := int64(0)
		for k, v := range abs {
			h.PositiveBuckets[k], prev = v-prev, v
		}
		if _, _, _, err := app.AppendHistogram(nil, 0, int64(i)*15_000, h.Copy(), false); err != nil {
			panic(err)
		}
	}
	return c
}

// BenchmarkDecodeHistChunk decodes one such chunk, every sample kept, with
// decodeHistChunk and with the chunk iterator (Next and AtFloatHistogram
// into one reused histogram, as the sample path reads).
func BenchmarkDecodeHistChunk(b *testing.B) {
	c := benchHistChunk()
	all := &sampleFilter{start: 1 << 60, end: 1 << 60, interval: 1, width: 1 << 62}
	b.Run("decoder=fast", func(b *testing.B) {
		b.ReportAllocs()
		var s histSeries
		for b.Loop() {
			s.reset()
			if err := s.decodeHistChunk(c.Bytes(), all, math.MaxInt64); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*120), "ns/sample")
	})
	b.Run("decoder=iterator", func(b *testing.B) {
		b.ReportAllocs()
		it := c.Iterator(nil)
		fh := &histogram.FloatHistogram{}
		for b.Loop() {
			it = c.Iterator(it)
			for it.Next() != chunkenc.ValNone {
				_, fh = it.AtFloatHistogram(fh)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*120), "ns/sample")
	})
}
