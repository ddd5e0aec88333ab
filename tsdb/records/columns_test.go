package records

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// randColumnStore fills a store with records over six 10-minute partitions
// in the ways that make reading hard: arrival jitter, late records into
// sealed partitions, small segments (several generations per partition,
// overlapping in time), explicit flushes, and open WALs left at the end.
// It returns every record appended.
func randColumnStore(t testing.TB, rng *rand.Rand, dir string) (*Store, []Record) {
	s := openTest(t, dir, func(o *Options) { o.MaxSegmentBytes = 48 << 10 })
	var all []Record
	span := 6 * tenMin
	now := t0
	for len(all) < 3000 {
		batch := make([]Record, 1+rng.IntN(40))
		for i := range batch {
			var at int64
			switch {
			case rng.IntN(10) == 0: // late: anywhere since t0
				at = t0 + rng.Int64N(now-t0+1)
			default:
				at = max(t0, now-rng.Int64N(30_000))
			}
			batch[i] = randRecord(rng, at, []int{0, 1, 5, 64, 200}[rng.IntN(5)])
			now = min(now+rng.Int64N(2_600), t0+span-1)
		}
		if err := s.Append(batch); err != nil {
			t.Fatalf("append: %v", err)
		}
		all = append(all, batch...)
		if rng.IntN(25) == 0 {
			if err := s.Flush(); err != nil {
				t.Fatalf("flush: %v", err)
			}
		}
	}
	st := s.Stats()
	if st.HeadRecords == 0 || st.Segments < 8 || st.Partitions < 6 {
		t.Fatalf("store not mixed enough: %+v", st)
	}
	return s, all
}

// testMatchers are matchers of all four kinds, on labels every record has
// and on labels only some have (where the absent value is "").
var testMatchers = []*labels.Matcher{
	labels.MustNewMatcher(labels.MatchEqual, "model", testModels[1]),
	labels.MustNewMatcher(labels.MatchNotEqual, "model", testModels[0]),
	labels.MustNewMatcher(labels.MatchRegexp, "instance", "gpu-[0-3]"),
	labels.MustNewMatcher(labels.MatchNotRegexp, "instance", "gpu-1|gpu-6"),
	labels.MustNewMatcher(labels.MatchNotEqual, "tenant", "t1"),
	labels.MustNewMatcher(labels.MatchEqual, "tenant", ""),
	labels.MustNewMatcher(labels.MatchRegexp, "route", ".+"),
	labels.MustNewMatcher(labels.MatchNotRegexp, "route", "/v1/completions"),
	labels.MustNewMatcher(labels.MatchEqual, "job", "other"),
}

// randQuery draws a query range, often with ends on record times so that
// the closed-interval boundaries are exercised.
func randQuery(rng *rand.Rand, all []Record) (mint, maxt int64, ms []*labels.Matcher) {
	switch rng.IntN(6) {
	case 0:
		mint, maxt = math.MinInt64, math.MaxInt64
	case 1: // exactly one partition
		p := t0 + rng.Int64N(6)*tenMin
		mint, maxt = p, p+tenMin-1
	case 2, 3:
		mint, maxt = all[rng.IntN(len(all))].Time, all[rng.IntN(len(all))].Time
		if mint > maxt {
			mint, maxt = maxt, mint
		}
	default:
		mint = t0 - 60_000 + rng.Int64N(6*tenMin+120_000)
		maxt = mint + rng.Int64N(3*tenMin)
	}
	for range rng.IntN(3) {
		ms = append(ms, testMatchers[rng.IntN(len(testMatchers))])
	}
	return mint, maxt, ms
}

// requireColumnsEqual checks b against recs (the records Select returned,
// in its order) bit for bit, column by column, and that exactly the
// requested columns are present.
func requireColumnsEqual(t testing.TB, b *ColumnBatch, recs []Record, want Columns) {
	t.Helper()
	if b.Len != len(recs) {
		t.Fatalf("batch has %d rows, Select returned %d", b.Len, len(recs))
	}
	f64 := func(name string, col []float64, c Columns, get func(r *Record) float64) {
		t.Helper()
		if want&c == 0 {
			if col != nil {
				t.Fatalf("%s: not requested but present", name)
			}
			return
		}
		if col == nil || len(col) != len(recs) {
			t.Fatalf("%s: %d values for %d rows (nil: %t)", name, len(col), len(recs), col == nil)
		}
		for i := range recs {
			if g, w := math.Float64bits(col[i]), math.Float64bits(get(&recs[i])); g != w {
				t.Fatalf("%s row %d (request %q): bits %#x, want %#x", name, i, recs[i].RequestID, g, w)
			}
		}
	}
	u32 := func(name string, col []uint32, c Columns, get func(r *Record) uint32) {
		t.Helper()
		if want&c == 0 {
			if col != nil {
				t.Fatalf("%s: not requested but present", name)
			}
			return
		}
		if col == nil || len(col) != len(recs) {
			t.Fatalf("%s: %d values for %d rows", name, len(col), len(recs))
		}
		for i := range recs {
			if col[i] != get(&recs[i]) {
				t.Fatalf("%s row %d: %d, want %d", name, i, col[i], get(&recs[i]))
			}
		}
	}
	for st := range Stage(NumStages) {
		f64("stage "+st.String(), b.Stages[st], ColumnStage(st), func(r *Record) float64 { return r.Stages[st] })
	}
	f64("e2e", b.E2E, ColumnE2E, func(r *Record) float64 { return r.E2E })
	f64("ttft", b.TTFT, ColumnTTFT, func(r *Record) float64 { return r.TTFT })
	f64("entropy", b.PromptEntropy, ColumnPromptEntropy, func(r *Record) float64 { return r.PromptEntropy })
	u32("prompt tokens", b.PromptTokens, ColumnPromptTokens, func(r *Record) uint32 { return r.PromptTokens })
	u32("output tokens", b.OutputTokens, ColumnOutputTokens, func(r *Record) uint32 { return r.OutputTokens })
	if want&ColumnTime == 0 {
		if b.Time != nil {
			t.Fatal("time: not requested but present")
		}
	} else {
		if b.Time == nil || len(b.Time) != len(recs) {
			t.Fatalf("time: %d values for %d rows", len(b.Time), len(recs))
		}
		for i := range recs {
			if b.Time[i] != recs[i].Time {
				t.Fatalf("time row %d: %d, want %d", i, b.Time[i], recs[i].Time)
			}
		}
	}
	if want&ColumnLabelSet == 0 {
		if b.LabelSet != nil || b.LabelSets != nil {
			t.Fatal("label sets: not requested but present")
		}
		return
	}
	if b.LabelSet == nil || len(b.LabelSet) != len(recs) || b.LabelSets == nil {
		t.Fatalf("label set: %d ids for %d rows", len(b.LabelSet), len(recs))
	}
	used := make([]bool, len(b.LabelSets))
	for i := range recs {
		if int(b.LabelSet[i]) >= len(b.LabelSets) {
			t.Fatalf("row %d: label set %d of %d", i, b.LabelSet[i], len(b.LabelSets))
		}
		used[b.LabelSet[i]] = true
		if !labels.Equal(b.Labels(i), recs[i].Labels) {
			t.Fatalf("row %d: labels %s, want %s", i, b.Labels(i), recs[i].Labels)
		}
	}
	seen := map[string]bool{}
	for i, ls := range b.LabelSets {
		if seen[ls.String()] || !used[i] {
			t.Fatalf("label set %d %s: duplicate (%t) or unused (%t)", i, ls, seen[ls.String()], !used[i])
		}
		seen[ls.String()] = true
	}
}

// TestSelectColumnsMatchesSelect is the differential test: on random
// stores with sealed segments, open WALs and late records, SelectColumns
// returns the rows Select returns, in the same order, bit for bit, for
// random time ranges, matchers of every kind and random column sets; and
// again after a reopen, which replays the WALs.
func TestSelectColumnsMatchesSelect(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	dir := t.TempDir()
	s, all := randColumnStore(t, rng, dir)
	ctx := context.Background()
	check := func(t *testing.T, s *Store, queries int) {
		merged := 0
		for range queries {
			mint, maxt, ms := randQuery(rng, all)
			want := ColumnAll
			if rng.IntN(2) == 0 {
				want = Columns(rng.Uint32()) & ColumnAll
			}
			recs := selectAll(t, s, mint, maxt, ms...)
			if len(recs) != len(bruteForce(all, mint, maxt, ms...)) {
				t.Fatalf("Select disagrees with the brute-force count")
			}
			b, err := s.SelectColumns(ctx, mint, maxt, want, ms...)
			if err != nil {
				t.Fatalf("select columns [%d, %d] %v: %v", mint, maxt, ms, err)
			}
			requireColumnsEqual(t, b, recs, want)
			if !slices.IsSortedFunc(recs, func(a, b Record) int { return cmpInt64(a.Time, b.Time) }) {
				t.Fatal("Select returned rows out of time order")
			}
			if len(recs) > 0 {
				merged++
			}
		}
		if merged < queries/2 {
			t.Fatalf("only %d of %d queries returned rows", merged, queries)
		}
	}
	t.Run("open", func(t *testing.T) { check(t, s, 300) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, func(o *Options) { o.MaxSegmentBytes = 48 << 10 })
	defer s.Close()
	t.Run("reopened", func(t *testing.T) { check(t, s, 100) })
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Run("all sealed", func(t *testing.T) { check(t, s, 100) })
}

// TestSelectColumnsMergesOverlappingRuns builds one partition whose
// generations overlap in time with equal timestamps across them, so the
// batch order depends on the merge keeping append order among equal times.
func TestSelectColumnsMergesOverlappingRuns(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	// Generation i holds times t0+{0, 10, 20, …} shifted by i·5 ms, so
	// runs interleave and every other time is shared by two runs; the
	// request id says which generation and row a record came from.
	for gen := range 3 {
		var batch []Record
		for k := range 40 {
			r := randRecord(rng, t0+int64(gen*5+k*10), 0)
			r.RequestID = fmt.Sprintf("g%d-%02d", gen, k)
			batch = append(batch, r)
		}
		if err := s.Append(batch); err != nil {
			t.Fatal(err)
		}
		if gen < 2 {
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := s.Stats(); st.Segments != 2 || st.HeadRecords != 40 {
		t.Fatalf("want 2 segments and a head of 40, got %+v", st)
	}
	recs := selectAll(t, s, 0, math.MaxInt64)
	// Hand-derived order at the start: t0+0 (g0-00), t0+5 (g1-00),
	// t0+10 (g0-01, then g2-00: same time, earlier generation first),
	// t0+15 (g1-01), t0+20 (g0-02, g2-01).
	wantIDs := []string{"g0-00", "g1-00", "g0-01", "g2-00", "g1-01", "g0-02", "g2-01"}
	for i, id := range wantIDs {
		if recs[i].RequestID != id {
			t.Fatalf("Select row %d is %s, want %s", i, recs[i].RequestID, id)
		}
	}
	b, err := s.SelectColumns(context.Background(), 0, math.MaxInt64, ColumnAll)
	if err != nil {
		t.Fatal(err)
	}
	requireColumnsEqual(t, b, recs, ColumnAll)
}

func TestSelectColumnsEdges(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	rng := rand.New(rand.NewPCG(5, 6))
	var batch []Record
	for k := range 100 {
		batch = append(batch, randRecord(rng, t0+int64(k)*1000, 3))
	}
	if err := s.Append(batch); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("unknown column bits", func(t *testing.T) {
		if _, err := s.SelectColumns(ctx, 0, math.MaxInt64, ColumnAll+1); err == nil {
			t.Fatal("want an error for an unknown column bit")
		}
	})
	t.Run("empty range keeps requested columns non-nil", func(t *testing.T) {
		b, err := s.SelectColumns(ctx, t0+500, t0+999, ColumnTTFT|ColumnLabelSet)
		if err != nil {
			t.Fatal(err)
		}
		if b.Len != 0 || b.TTFT == nil || b.LabelSet == nil || b.LabelSets == nil || b.E2E != nil {
			t.Fatalf("got %+v", b)
		}
	})
	t.Run("no columns counts rows", func(t *testing.T) {
		// Rows t0, t0+1000, …, t0+10000 lie in [t0, t0+10000]: 11 rows.
		b, err := s.SelectColumns(ctx, t0, t0+10_000, 0)
		if err != nil || b.Len != 11 {
			t.Fatalf("got %d rows, %v; want 11", b.Len, err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.SelectColumns(c, 0, math.MaxInt64, ColumnAll); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})
	t.Run("corrupt segment", func(t *testing.T) {
		segs := files(t, s.opts.Dir, "seg")
		if len(segs) != 1 {
			t.Fatalf("want one segment, have %v", segs)
		}
		path := filepath.Join(s.opts.Dir, segs[0])
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 1
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = s.SelectColumns(ctx, 0, math.MaxInt64, ColumnE2E)
		var ce *CorruptionError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.File != path {
			t.Fatalf("got %v, want a corruption error naming %s", err, path)
		}
	})
	t.Run("closed", func(t *testing.T) {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SelectColumns(ctx, 0, math.MaxInt64, ColumnAll); !errors.Is(err, ErrClosed) {
			t.Fatalf("got %v, want ErrClosed", err)
		}
	})
}

func TestColumnStage(t *testing.T) {
	var all Columns
	for st := range Stage(NumStages) {
		c := ColumnStage(st)
		if c == 0 || c&(c-1) != 0 || all&c != 0 {
			t.Fatalf("stage %s: column %#x is not a new single bit", st, c)
		}
		all |= c
	}
	if all != ColumnStages || ColumnStage(-1) != 0 || ColumnStage(NumStages) != 0 {
		t.Fatalf("stage columns %#x, ColumnStages %#x", all, ColumnStages)
	}
	// 7 field bits and 7 stage bits: ColumnAll is the low 14 bits.
	if ColumnAll != 1<<14-1 {
		t.Fatalf("ColumnAll = %#x, want %#x", ColumnAll, 1<<14-1)
	}
}

func TestMergeRuns(t *testing.T) {
	// Runs [1 3 5] [2 3 4] [0 3]. Stable order by time, ties to the
	// earlier run: 0 (idx 6), 1 (0), 2 (3), 3 (1), 3 (4), 3 (7), 4 (5),
	// 5 (2).
	times := []int64{1, 3, 5, 2, 3, 4, 0, 3}
	got := mergeRuns(times, []int{0, 3, 6, 8})
	if want := []int32{6, 0, 3, 1, 4, 7, 5, 2}; !slices.Equal(got, want) {
		t.Fatalf("mergeRuns = %v, want %v", got, want)
	}
	// Against the stable sort on random runs, empty ones included.
	rng := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		var times []int64
		runs := []int{0}
		for range rng.IntN(9) {
			r := make([]int64, rng.IntN(6))
			for i := range r {
				r[i] = rng.Int64N(8)
			}
			slices.Sort(r)
			times = append(times, r...)
			runs = append(runs, len(times))
		}
		if len(runs) == 1 {
			runs = append(runs, 0)
		}
		idx := make([]int32, len(times))
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortStableFunc(idx, func(a, b int32) int { return cmpInt64(times[a], times[b]) })
		if got := mergeRuns(times, runs); !slices.Equal(got, idx) {
			t.Fatalf("times %v runs %v: mergeRuns %v, stable sort %v", times, runs, got, idx)
		}
	}
}

// selectBody runs the segment path of SelectColumns on one raw body.
func selectBody(raw []byte, h *segmentHeader, mint, maxt int64, want Columns, ms []*labels.Matcher) (*ColumnBatch, error) {
	q := newColumnQuery(context.Background(), mint, maxt, want, ms, nil)
	j := colJob{seg: &segmentMeta{path: "body"}, needTime: want&ColumnTime != 0, bound: int(h.Count)}
	q.bound = j.bound
	p, err := q.prepareBody(raw, h, j.needTime)
	if err != nil {
		return nil, err
	}
	q.gather(&j, p)
	if q.err != nil {
		return nil, q.err
	}
	return q.finish(), nil
}

// bodyRows is the reference for selectBody: every row of the full decoder
// that passes the range and matchers.
func bodyRows(c *segCols, mint, maxt int64, ms []*labels.Matcher) []Record {
	var out []Record
	for k := range c.n {
		r := c.row(k)
		if r.Time >= mint && r.Time <= maxt && matchesAll(ms, r.Labels) {
			out = append(out, r)
		}
	}
	return out
}

// TestSelectColumnsBodyBits reads segments of arbitrary float bit patterns
// (negative zero, subnormals, huge values) through the column path.
func TestSelectColumnsBodyBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range 40 {
		seg := randSegment(rng, 1+rng.IntN(300), true)
		raw, h, _, err := decompressSegment(seg.Marshal(nil), zstdDecoder(), maxRawBody, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := decodeBody(raw, &h)
		if err != nil {
			t.Fatal(err)
		}
		mint, maxt, ms := h.MinT+rng.Int64N(h.MaxT-h.MinT+1), h.MaxT-rng.Int64N(h.MaxT-h.MinT+1), []*labels.Matcher(nil)
		if i%3 == 0 {
			mint, maxt = math.MinInt64, math.MaxInt64
		}
		if i%2 == 0 {
			ms = []*labels.Matcher{testMatchers[rng.IntN(len(testMatchers))]}
		}
		want := Columns(rng.Uint32()) & ColumnAll
		b, err := selectBody(raw, &h, mint, maxt, want, ms)
		if err != nil {
			t.Fatal(err)
		}
		requireColumnsEqual(t, b, bodyRows(c, mint, maxt, ms), want)
	}
}

// TestUnshuffleRange checks the word-wise transpose against the byte-wise
// gather of shuffledAt for every start and length around the 8-row blocks.
func TestUnshuffleRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, m := range []int{1, 7, 8, 9, 16, 17, 40} {
		vals := make([]float64, m)
		for i := range vals {
			vals[i] = math.Float64frombits(rng.Uint64())
		}
		planes := appendShuffled(nil, vals)
		for lo := range m {
			for n := 0; lo+n <= m; n++ {
				dst := make([]float64, n)
				unshuffleRange(dst, planes, m, lo)
				for i := range dst {
					if g, w := math.Float64bits(dst[i]), math.Float64bits(shuffledAt(planes, m, lo+i)); g != w {
						t.Fatalf("m=%d lo=%d n=%d row %d: %#x, want %#x", m, lo, n, i, g, w)
					}
				}
			}
		}
	}
}

func TestBufCap(t *testing.T) {
	// Powers of two stay; above, steps are 1/16 of the next power of two
	// (4097 → 8192/16 = 512-byte steps → 4608);
	// 53,517,708 and 53,628,821 (the bodies of two sealed 64 MiB WALs)
	// both round up to 54,525,952 = 13 × 4 MiB.
	for _, c := range []struct{ n, want int }{
		{1, 4096},
		{4096, 4096},
		{4097, 9 * 512},
		{1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 1<<17},
		{53_517_708, 13 << 22},
		{53_628_821, 13 << 22},
	} {
		if got := bufCap(c.n); got != c.want {
			t.Errorf("bufCap(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestSelectColumnsConcurrent reads while another goroutine appends and
// seals: every read sees a consistent snapshot, at least every record whose
// Append returned before it started and at most those whose Append had
// begun before it ended, in time order.
func TestSelectColumnsConcurrent(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.MaxSegmentBytes = 32 << 10 })
	defer s.Close()
	rng := rand.New(rand.NewPCG(13, 14))
	var begun, appended atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := range 60 {
			batch := make([]Record, 50)
			for k := range batch {
				batch[k] = randRecord(rng, t0+int64(i*50+k)*500, 3)
			}
			begun.Add(int64(len(batch)))
			if err := s.Append(batch); err != nil {
				t.Error(err)
				return
			}
			appended.Add(int64(len(batch)))
			if i%7 == 0 {
				if err := s.Flush(); err != nil {
					t.Error(err)
					return
				}
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	defer func() { close(stop); <-done }()
	ctx := context.Background()
	for reads := 0; ; reads++ {
		finished := false
		select {
		case <-done:
			finished = true
		default:
		}
		lo := appended.Load()
		b, err := s.SelectColumns(ctx, 0, math.MaxInt64, ColumnTime|ColumnE2E)
		hi := begun.Load()
		if err != nil {
			t.Fatal(err)
		}
		if int64(b.Len) < lo || int64(b.Len) > hi || !slices.IsSorted(b.Time) {
			t.Fatalf("read %d rows (sorted: %t) while %d…%d were appended", b.Len, slices.IsSorted(b.Time), lo, hi)
		}
		if finished {
			if b.Len != 3000 || reads < 2 {
				t.Fatalf("last read has %d rows after %d reads, want 3000", b.Len, reads)
			}
			return
		}
	}
}

// TestSelectColumnsSkipsRemovedSegment: a segment deleted by retention
// between the snapshot and its read is skipped, as Select skips it.
func TestSelectColumnsSkipsRemovedSegment(t *testing.T) {
	q := newColumnQuery(context.Background(), 0, math.MaxInt64, ColumnAll, nil, nil)
	p, err := q.prepare(&colJob{seg: &segmentMeta{path: filepath.Join(t.TempDir(), "0-000001.seg")}})
	if p != nil || err != nil {
		t.Fatalf("prepare of a missing segment = %v, %v; want nothing", p, err)
	}
}
