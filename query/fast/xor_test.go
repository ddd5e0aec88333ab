package fast

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// xorChunkFrom builds an XOR chunk with the chunk encoder from a seed:
// regular and jittered timestamps, repeated, slowly and wildly changing
// values, NaN and stale markers.
func xorChunkFrom(seed uint64, n int) *chunkenc.XORChunk {
	r := rand.New(rand.NewPCG(seed, 3))
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		panic(err)
	}
	t := r.Int64N(1<<40) - 1<<39
	v := r.NormFloat64() * 1000
	step := []int64{1, 15_000, 60_000, 1 << 20}[r.IntN(4)]
	for i := 0; i < n; i++ {
		switch r.IntN(8) {
		case 0:
			t += r.Int64N(1 << 30)
		case 1:
			t += step + r.Int64N(5000) - 2500
		default:
			t += step
		}
		switch r.IntN(10) {
		case 0:
			v = math.Float64frombits(r.Uint64())
		case 1:
			v = math.Float64frombits(value.StaleNaN)
		case 2, 3:
		default:
			v += float64(r.IntN(100))
		}
		app.Append(0, t, v)
	}
	return c
}

// wantSamples is what appendXOR must return: the chunk iterator's samples
// that lie in some window of f, found by walking the steps.
func wantSamples(c chunkenc.Chunk, f *sampleFilter, steps int) []fpoint {
	var out []fpoint
	it := c.Iterator(nil)
	for it.Next() == chunkenc.ValFloat {
		t, v := it.At()
		in := false
		for i := 0; i < steps; i++ {
			ts := f.start + int64(i)*f.interval
			if ts-f.width < t && t <= ts {
				in = true
				break
			}
		}
		if in && !(f.dropStale && value.IsStaleNaN(v)) {
			out = append(out, fpoint{t, v})
		}
	}
	return out
}

func checkDecode(t *testing.T, c *chunkenc.XORChunk, f *sampleFilter, steps int) {
	t.Helper()
	want := wantSamples(c, f, steps)
	got, err := appendXOR(nil, c.Bytes(), f)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d samples, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].t != want[i].t || math.Float64bits(got[i].f) != math.Float64bits(want[i].f) {
			t.Fatalf("sample %d = %v (%x), want %v (%x)", i, got[i], math.Float64bits(got[i].f), want[i], math.Float64bits(want[i].f))
		}
	}
	// The chunk-level test agrees with the samples: a chunk it skips
	// holds none that a window keeps.
	it := c.Iterator(nil)
	mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
	for it.Next() == chunkenc.ValFloat {
		mint, maxt = min(mint, it.AtT()), max(maxt, it.AtT())
	}
	if c.NumSamples() > 0 && !f.overlaps(mint, maxt) && len(want) > 0 {
		t.Fatalf("overlaps(%d, %d) is false but %d samples are in windows", mint, maxt, len(want))
	}
}

func TestAppendXOR(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		c := xorChunkFrom(seed, int(seed%130))
		// Everything.
		checkDecode(t, c, &sampleFilter{start: -1 << 50, end: 1 << 50, interval: 1 << 50, width: 1 << 52}, 3)
		// Windows around the chunk's own time range.
		it := c.Iterator(nil)
		if it.Next() == chunkenc.ValNone {
			continue
		}
		t0 := it.AtT()
		r := rand.New(rand.NewPCG(seed, 9))
		f := &sampleFilter{
			start: t0 + r.Int64N(600_000) - 300_000, interval: 1 + r.Int64N(300_000),
			width: 1 + r.Int64N(400_000), dropStale: r.IntN(2) == 0,
		}
		steps := 1 + r.IntN(200)
		f.end = f.start + int64(steps-1)*f.interval
		checkDecode(t, c, f, steps)
		// Steps and windows on the scrape grid, as dashboards ask for
		// them: samples fall exactly on windows' ends and starts.
		const grid = 15_000
		g := &sampleFilter{
			start: t0 + int64(r.IntN(20)-5)*grid, interval: int64(1+r.IntN(20)) * grid,
			dropStale: r.IntN(2) == 0,
		}
		g.width = int64(1+r.IntN(int(2*g.interval/grid))) * grid
		steps = 1 + r.IntN(100)
		g.end = g.start + int64(steps-1)*g.interval
		checkDecode(t, c, g, steps)
	}
}

// FuzzXORDecode checks the decoder against the chunk encoder and
// iterator on generated chunks and window sets, and that arbitrary bytes
// never make it panic or read out of bounds.
func FuzzXORDecode(f *testing.F) {
	f.Add(uint64(1), uint8(120), int64(0), int64(15_000), int64(60_000), []byte{0, 2, 1, 2, 3})
	f.Add(uint64(7), uint8(3), int64(-5000), int64(1), int64(1), []byte{})
	f.Add(uint64(9), uint8(0), int64(100), int64(300_000), int64(60_000), []byte{0, 200, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, startOff, interval, width int64, raw []byte) {
		if interval <= 0 || width <= 0 || interval > 1<<40 || width > 1<<40 || startOff > 1<<40 || startOff < -1<<40 || n > 200 {
			return
		}
		c := xorChunkFrom(seed, int(n))
		it := c.Iterator(nil)
		t0 := int64(0)
		if it.Next() != chunkenc.ValNone {
			t0 = it.AtT()
		}
		steps := 1 + int(seed%100)
		fl := &sampleFilter{start: t0 + startOff, interval: interval, width: width, dropStale: seed%2 == 0}
		fl.end = fl.start + int64(steps-1)*interval
		checkDecode(t, c, fl, steps)

		// Arbitrary bytes: an error or samples, never a panic; where the
		// chunk iterator reads them without error, the same samples.
		all := &sampleFilter{start: -1 << 60, end: 1 << 60, interval: 1, width: 1 << 58}
		got, err := appendXOR(nil, raw, all)
		if err != nil || len(raw) < 2 {
			return
		}
		var want []fpoint
		rit := chunkenc.NewXORChunk().Iterator(nil)
		if xc, err := chunkenc.FromData(chunkenc.EncXOR, raw); err == nil {
			rit = xc.Iterator(nil)
		}
		for rit.Next() == chunkenc.ValFloat {
			t, v := rit.At()
			if t > all.start-all.width && t <= all.end {
				want = append(want, fpoint{t, v})
			}
		}
		if rit.Err() != nil || int(binary.BigEndian.Uint16(raw)) != countAll(raw) {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%d samples, iterator %d", len(got), len(want))
		}
		for i := range want {
			if got[i].t != want[i].t || math.Float64bits(got[i].f) != math.Float64bits(want[i].f) {
				t.Fatalf("sample %d = %v, iterator %v", i, got[i], want[i])
			}
		}
	})
}

// countAll is how many samples the chunk iterator reads from raw.
func countAll(raw []byte) int {
	xc, err := chunkenc.FromData(chunkenc.EncXOR, raw)
	if err != nil {
		return -1
	}
	it := xc.Iterator(nil)
	n := 0
	for it.Next() != chunkenc.ValNone {
		n++
	}
	return n
}

// BenchmarkDecodeXOR compares appendXOR, keeping every sample or those of
// windows with gaps between them, with the chunk iterator on a 120-sample
// chunk of a counter scraped every 15 s.
func BenchmarkDecodeXOR(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	c := chunkenc.NewXORChunk()
	app, _ := c.Appender()
	v := 0.0
	for i := int64(0); i < 120; i++ {
		v += float64(r.IntN(4000))
		app.Append(0, 1_760_000_000_000+i*15_000, v)
	}
	all := &sampleFilter{start: 0, end: 1 << 50, interval: 1 << 50, width: 1 << 52}
	b.Run("decoder=appendXOR", func(b *testing.B) {
		b.ReportAllocs()
		var buf []fpoint
		for b.Loop() {
			buf, _ = appendXOR(buf[:0], c.Bytes(), all)
		}
	})
	// A low bucket's counter: unchanged about every other scrape.
	sparse := chunkenc.NewXORChunk()
	sapp, _ := sparse.Appender()
	v = 0
	for i := int64(0); i < 120; i++ {
		v += float64(r.IntN(2) * r.IntN(3))
		sapp.Append(0, 1_760_000_000_000+i*15_000, v)
	}
	b.Run("decoder=appendXOR/counter=sparse", func(b *testing.B) {
		b.ReportAllocs()
		var buf []fpoint
		for b.Loop() {
			buf, _ = appendXOR(buf[:0], sparse.Bytes(), all)
		}
	})
	// A counter that grows by the same amount each scrape: the value's
	// header is the same at every sample.
	steady := chunkenc.NewXORChunk()
	stapp, _ := steady.Appender()
	for i := int64(0); i < 120; i++ {
		stapp.Append(0, 1_760_000_000_000+i*15_000, float64(1000+8*i))
	}
	b.Run("decoder=appendXOR/counter=steady", func(b *testing.B) {
		b.ReportAllocs()
		var buf []fpoint
		for b.Loop() {
			buf, _ = appendXOR(buf[:0], steady.Bytes(), all)
		}
	})
	// A 1-minute rate every 5 minutes: the windows keep a fifth.
	gaps := &sampleFilter{start: 1_760_000_000_000, interval: 300_000, width: 60_000, dropStale: true}
	gaps.end = gaps.start + 24*gaps.interval
	b.Run("decoder=appendXOR/windows=1m_every_5m", func(b *testing.B) {
		b.ReportAllocs()
		var buf []fpoint
		for b.Loop() {
			buf, _ = appendXOR(buf[:0], c.Bytes(), gaps)
		}
	})
	b.Run("decoder=iterator", func(b *testing.B) {
		b.ReportAllocs()
		var (
			buf []fpoint
			it  chunkenc.Iterator
		)
		for b.Loop() {
			buf = buf[:0]
			it = c.Iterator(it)
			for it.Next() == chunkenc.ValFloat {
				t, v := it.At()
				buf = append(buf, fpoint{t, v})
			}
		}
	})
}
