//go:build amd64 && !purego

package fast

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// checkAsm compares decodeXORAsm with decodeXOR on one chunk's bytes and
// one window span: where the assembly does not give up, the same points,
// end position and odd flag, bit for bit; where it does, decodeXOR must
// meet a 64-bit delta of deltas or a corrupt header (bad).
func checkAsm(t *testing.T, data []byte, lo, hi int64) (gaveUp bool) {
	t.Helper()
	var h xorHeader // what appendXOR hands the loop
	if err := h.parse(data); err != nil || h.n < 2 {
		return false
	}
	want := make([]fpoint, h.n-1)
	wEnd, wOdd, wBad := decodeXOR(want, h.body, h.pos, h.t, h.tDelta, h.vbits, lo, hi)
	got := make([]fpoint, h.n-1)
	gEnd, gOdd, gave := decodeXORAsm(got, h.body, h.pos, h.t, h.tDelta, h.vbits, lo, hi)
	if gave {
		return true
	}
	if wBad {
		t.Fatalf("assembly decoded a chunk decodeXOR finds corrupt: % x", data)
	}
	if gEnd != wEnd || gOdd != wOdd {
		t.Fatalf("end, odd = %d, %v; want %d, %v (% x)", gEnd, gOdd, wEnd, wOdd, data)
	}
	for i := range want {
		if got[i].t != want[i].t || math.Float64bits(got[i].f) != math.Float64bits(want[i].f) {
			t.Fatalf("point %d = %d %x, want %d %x (% x)", i, got[i].t, math.Float64bits(got[i].f), want[i].t, math.Float64bits(want[i].f), data)
		}
	}
	return false
}

func TestDecodeXORAsm(t *testing.T) {
	for seed := uint64(0); seed < 3000; seed++ {
		c := xorChunkFrom(seed, 2+int(seed%200))
		r := rand.New(rand.NewPCG(seed, 11))
		lo := int64(r.Uint64()>>1) - 1<<62
		checkAsm(t, c.Bytes(), lo, lo+int64(r.Uint64()>>2))
		checkAsm(t, c.Bytes(), math.MinInt64/2, math.MaxInt64/2)
		// Counters of a regular scrape, the common case: never given up.
		// and with jittered scrapes (deltas of deltas of 14, 17 and 20
		// bits) and gauges of 52 meaningful bits.
		c = counterChunk(r, 2+r.IntN(200), []int64{0, 2_500, 30_000, 200_000}[seed%4], seed%3 == 0)
		if checkAsm(t, c.Bytes(), math.MinInt64/2, math.MaxInt64/2) {
			t.Fatalf("seed %d: gave up on a counter chunk", seed)
		}
		// Arbitrary bytes, and chunks cut short.
		raw := make([]byte, r.IntN(64))
		for i := range raw {
			raw[i] = byte(r.Uint32())
		}
		checkAsm(t, raw, 0, 1<<40)
		b := c.Bytes()
		checkAsm(t, b[:len(b)-r.IntN(len(b)/2+1)], 0, 1<<60)
	}
}

// FuzzDecodeXORAsm compares the assembly with decodeXOR on arbitrary bytes.
func FuzzDecodeXORAsm(f *testing.F) {
	f.Add([]byte{0, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xa0, 0x55}, int64(0), int64(100))
	f.Add(xorChunkFrom(5, 120).Bytes(), int64(-1<<40), int64(1<<40))
	f.Fuzz(func(t *testing.T, data []byte, lo, hi int64) {
		if len(data) > 1<<16 {
			return
		}
		checkAsm(t, data, lo, hi)
	})
}

// counterChunk is a counter scraped every 15 s (± jitter ms) that grows by
// a Poisson-like count a scrape, as a histogram bucket does, or a gauge of
// random fractions.
func counterChunk(r *rand.Rand, n int, jitter int64, gauge bool) *chunkenc.XORChunk {
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		panic(err)
	}
	v := float64(r.IntN(100_000))
	lam := 30 * r.Float64()
	for i := 0; i < n; i++ {
		v += math.Max(0, math.Round(lam+math.Sqrt(lam)*r.NormFloat64()))
		if gauge {
			v = r.Float64()
		}
		ts := 1_760_000_000_000 + int64(i)*15_000
		if jitter > 0 {
			ts += r.Int64N(jitter) - jitter/2
		}
		app.Append(0, ts, v)
	}
	return c
}
