package remote

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tailroot/tailroot/query/remote/storepb"
)

func TestAggrsForFunc(t *testing.T) {
	avg := []storepb.Aggr{storepb.Aggr_COUNT, storepb.Aggr_SUM}
	for f, want := range map[string][]storepb.Aggr{
		"min_over_time":   {storepb.Aggr_MIN},
		"min":             {storepb.Aggr_MIN},
		"max_over_time":   {storepb.Aggr_MAX},
		"count_over_time": {storepb.Aggr_COUNT},
		"count":           {storepb.Aggr_COUNT},
		"sum_over_time":   {storepb.Aggr_SUM},
		"rate":            {storepb.Aggr_COUNTER},
		"increase":        {storepb.Aggr_COUNTER},
		"irate":           {storepb.Aggr_COUNTER},
		"resets":          {storepb.Aggr_COUNTER},
		"sum":             avg, // a plain sum wants the samples
		"avg_over_time":   avg,
		"delta":           avg,
		"":                avg,
	} {
		if got := aggrsForFunc(f); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", f, got, want)
		}
	}
}

func TestMaxResolutionWindow(t *testing.T) {
	bg := context.Background()
	h := func(f string, step, rng int64) *storage.SelectHints {
		return &storage.SelectHints{Func: f, Step: step, Range: rng}
	}
	for _, c := range []struct {
		name  string
		ctx   context.Context
		def   time.Duration
		hints *storage.SelectHints
		want  int64
	}{
		{"raw by default", bg, 0, h("", 60000, 0), 0},
		{"server default", bg, time.Hour, h("", 60000, 0), 3600000},
		{"request overrides", WithMaxSourceResolution(bg, 5*time.Minute), time.Hour, h("", 60000, 0), 300000},
		{"request asks raw", WithMaxSourceResolution(bg, 0), time.Hour, h("", 60000, 0), 0},
		{"auto: a fifth of the step", WithMaxSourceResolution(bg, AutoResolution), 0, h("", 3600000, 0), 720000},
		{"auto without hints", WithMaxSourceResolution(bg, AutoResolution), 0, nil, 0},
		{"rate: half its window", bg, time.Hour, h("rate", 60000, 3600000), 1800000},
		{"rate over a long window", bg, time.Hour, h("rate", 60000, 7*86400000), 3600000},
		{"max_over_time is not capped", bg, time.Hour, h("max_over_time", 60000, 60000), 3600000},
	} {
		if got := maxResolutionWindow(c.ctx, c.def, c.hints); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	for in, want := range map[string]time.Duration{"auto": AutoResolution, "0s": 0, "5m": 5 * time.Minute, "1h": time.Hour} {
		if got, err := ParseMaxSourceResolution(in); err != nil || got != want {
			t.Errorf("ParseMaxSourceResolution(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "5", "-5m", "soon"} {
		if _, err := ParseMaxSourceResolution(in); err == nil {
			t.Errorf("ParseMaxSourceResolution(%q) accepted", in)
		}
	}
}

func xorData(t *testing.T, ss ...sample) *storepb.Chunk {
	t.Helper()
	return xorChunk(t, ss...).Raw
}

// counterChunks is a raw counter with a reset inside the first chunk and
// one between the chunks, downsampled as Thanos does: per chunk, the first
// raw value, each 100 ms window's reset-adjusted value at the window's last
// sample, and the last raw value again at the last timestamp.
func counterChunks(t *testing.T) (raw [][]sample, chks []*storepb.AggrChunk) {
	raw = [][]sample{
		{{0, 5}, {40, 7}, {90, 9}, {140, 2}, {190, 4}},
		{{300, 1}, {350, 3}, {390, 6}},
	}
	chks = []*storepb.AggrChunk{
		{MinTime: 0, MaxTime: 190, Counter: xorData(t, sample{0, 5}, sample{90, 9}, sample{190, 13}, sample{190, 4})},
		{MinTime: 300, MaxTime: 390, Counter: xorData(t, sample{300, 1}, sample{390, 6}, sample{390, 6})},
	}
	return raw, chks
}

func TestCounterSamples(t *testing.T) {
	raw, chks := counterChunks(t)
	// The reset-adjusted raw counter, computed sample by sample.
	adjusted := map[int64]float64{}
	var prev, total float64
	first := true
	for _, c := range raw {
		for _, s := range c {
			switch {
			case first:
				total, first = s.f, false
			case s.f >= prev:
				total += s.f - prev
			default:
				total += s.f
			}
			prev = s.f
			adjusted[s.t] = total
		}
	}
	ps := &storepb.Series{Labels: []*storepb.Label{{Name: "__name__", Value: "c"}}, Chunks: chks}
	s, err := seriesFromPB(ps, aggrsForFunc("rate"))
	if err != nil {
		t.Fatal(err)
	}
	var got []sample
	it := s.Iterator(nil)
	for it.Next() == chunkenc.ValFloat {
		ts, v := it.At()
		got = append(got, sample{ts, v})
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	want := []sample{{0, adjusted[0]}, {90, adjusted[90]}, {190, adjusted[190]}, {300, adjusted[300]}, {390, adjusted[390]}}
	if !slices.Equal(got, want) {
		t.Errorf("counter: %v, want the adjusted raw counter at the window ends %v", got, want)
	}
	// Seek lands on the same values as Next.
	it = s.Iterator(nil)
	if it.Seek(300) != chunkenc.ValFloat {
		t.Fatal("seek 300: no sample")
	}
	if ts, v := it.At(); ts != 300 || v != adjusted[300] {
		t.Errorf("seek 300: (%d, %v), want (300, %v)", ts, v, adjusted[300])
	}
}

func TestAverageSamples(t *testing.T) {
	ps := &storepb.Series{Labels: []*storepb.Label{{Name: "__name__", Value: "g"}}, Chunks: []*storepb.AggrChunk{{
		MinTime: 100, MaxTime: 200,
		Count: xorData(t, sample{100, 4}, sample{200, 3}),
		Sum:   xorData(t, sample{100, 10}, sample{200, 9}),
		Min:   xorData(t, sample{100, 1}, sample{200, 2}),
	}}}
	for f, want := range map[string][]sample{
		"":              {{100, 10.0 / 4}, {200, 9.0 / 3}},
		"min_over_time": {{100, 1}, {200, 2}},
		"count":         {{100, 4}, {200, 3}},
	} {
		s, err := seriesFromPB(ps, aggrsForFunc(f))
		if err != nil {
			t.Fatalf("%q: %v", f, err)
		}
		var got []sample
		it := s.Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			got = append(got, sample{ts, v})
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", f, got, want)
		}
	}
	if _, err := seriesFromPB(ps, aggrsForFunc("max_over_time")); err == nil {
		t.Error("a chunk without the max aggregate was read")
	}
	ps.Chunks[0].Sum = xorData(t, sample{100, 10}, sample{300, 9})
	if _, err := seriesFromPB(ps, aggrsForFunc("")); err == nil {
		t.Error("misaligned count and sum were averaged")
	}
}

// TestStoreAPIDownsampled checks what the client asks a StoreAPI endpoint
// for and how it reads the downsampled answer.
func TestStoreAPIDownsampled(t *testing.T) {
	_, chks := counterChunks(t)
	f := &fakeStore{series: []*storepb.Series{{Labels: []*storepb.Label{{Name: "__name__", Value: "c"}}, Chunks: chks}}}
	s, err := NewStoreAPI(StoreAPIOptions{Address: serveFake(t, f), MaxSourceResolution: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, _ := s.Querier(0, 1000)
	sel := func(ctx context.Context, hints *storage.SelectHints) (int, error) {
		set := q.Select(ctx, true, hints, metric("c"))
		n := 0
		for set.Next() {
			it := set.At().Iterator(nil)
			for it.Next() != chunkenc.ValNone {
				n++
			}
			if err := it.Err(); err != nil {
				return n, err
			}
		}
		return n, set.Err()
	}
	n, err := sel(context.Background(), &storage.SelectHints{Func: "increase", Step: 60000, Range: 7 * 86400000})
	if err != nil || n != 5 {
		t.Errorf("increase over downsampled counters: %d samples, %v; want 5", n, err)
	}
	if r := f.last; r.MaxResolutionWindow != 3600000 || !slices.Equal(r.Aggregates, []storepb.Aggr{storepb.Aggr_COUNTER}) {
		t.Errorf("request: window %d, aggregates %v", r.MaxResolutionWindow, r.Aggregates)
	}
	// Raw data asked for, aggregate chunks answered: the store's error.
	if _, err := sel(WithMaxSourceResolution(context.Background(), 0), &storage.SelectHints{Func: "rate", Range: 3600000}); err == nil {
		t.Error("aggregate chunks read as raw")
	}
	if r := f.last; r.MaxResolutionWindow != 0 || len(r.Aggregates) != 0 {
		t.Errorf("raw request: window %d, aggregates %v", r.MaxResolutionWindow, r.Aggregates)
	}
}
