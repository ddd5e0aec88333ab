package ingest

import (
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/tsdb/records"
)

// TestDerivedSeriesWorked pushes lineA (worked through in
// requests_decode_test.go) and reads every derived series back from the
// TSDB with the values computed by hand there:
//
//   - e2e 0.52 lies in schema-3 bucket −7 = (2^(−8/8), 2^(−7/8)] =
//     (0.5, 0.5453]; the tail grid bucket is (2^(−4/4), 2^(−3/4)] =
//     (0.5, 0.5946035575013605], so e2e_bucket="0.5946035575013605";
//   - TTFT 0.41 is token 1 (position_bucket "1"); gap 0.02 is token 2
//     (bucket "2"); gaps 0.03 and 0.04 are tokens 3 and 4 (bucket "4");
//   - entropy 1 bit is in schema-3 bucket 0 = (2^(−1/8), 1].
func TestDerivedSeriesWorked(t *testing.T) {
	db := openTestDB(t)
	p := openTestRecords(t, db, testRecordsOptions(t.TempDir()))
	it, err := DecodeRequestLine([]byte(lineA), RequestLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Append(context.Background(), "test", []Item{it}); err != nil {
		t.Fatal(err)
	}
	sel := []string{"instance", "a:1", "model_name", "llama"}

	e2e := one(t, db, SeriesE2E, sel...).h
	wantE2E := &histogram.Histogram{
		Schema: 3, ZeroThreshold: derivedZeroThreshold, Count: 1, Sum: 0.52,
		PositiveSpans: []histogram.Span{{Offset: -7, Length: 1}}, PositiveBuckets: []int64{1},
	}
	if e2e == nil || !e2e.Equals(wantE2E) {
		t.Errorf("e2e histogram %v, want %v", e2e, wantE2E)
	}
	stageWant := map[string]float64{"queue": 0.1, "tokenize": 0.004, "prefill": 0.3, "decode": 0.09, "detokenize": 0, "network": 0.003, "other": 0.023}
	for st, v := range stageWant {
		h := one(t, db, SeriesStage, append(sel, LabelStage, st)...).h
		if h == nil || h.Count != 1 || !approxEq(h.Sum, v, 1e-15) {
			t.Errorf("stage %s histogram %v, want one observation of %v", st, h, v)
		}
		if v == 0 && h.ZeroCount != 1 {
			t.Errorf("stage %s: zero bucket %d, want 1", st, h.ZeroCount)
		}
		sum := one(t, db, SeriesTailStageSum, append(sel, LabelStage, st, LabelE2EBucket, "0.5946035575013605")...)
		if !approxEq(sum.f, v, 1e-15) {
			t.Errorf("tail sum %s = %v, want %v", st, sum.f, v)
		}
	}
	if c := one(t, db, SeriesTailRequests, append(sel, LabelE2EBucket, "0.5946035575013605")...); c.f != 1 {
		t.Errorf("tail count %v, want 1", c.f)
	}
	for _, c := range []struct {
		kind, pos string
		n         uint64
		sum       float64
	}{{"ttft", "1", 1, 0.41}, {"itl", "2", 1, 0.02}, {"itl", "4", 2, 0.07}} {
		h := one(t, db, SeriesTokenLatency, append(sel, LabelKind, c.kind, LabelPositionBucket, c.pos)...).h
		if h == nil || h.Count != c.n || !approxEq(h.Sum, c.sum, 1e-15) {
			t.Errorf("token %s/%s: %v, want count %d sum %v", c.kind, c.pos, h, c.n, c.sum)
		}
	}
	if n := len(lastSamples(t, db, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, SeriesTokenLatency))); n != 3 {
		t.Errorf("%d token latency series, want 3", n)
	}
	ent := one(t, db, SeriesPromptEntropy, sel...).h
	wantEnt := &histogram.Histogram{
		Schema: 3, ZeroThreshold: derivedZeroThreshold, Count: 1, Sum: 1,
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{1},
	}
	if ent == nil || !ent.Equals(wantEnt) {
		t.Errorf("entropy histogram %v, want %v", ent, wantEnt)
	}

	// The e2e histogram carries the request's trace and request id.
	exs := exemplarsOf(t, db, SeriesE2E)
	if len(exs) != 1 || exs[0].Value != 0.52 || exs[0].Labels.Get("trace_id") != "0af7651916cd43dd8448eb211c80319c" || exs[0].Labels.Get("request_id") != "r1" {
		t.Errorf("e2e exemplars %v", exs)
	}
	// Only the allow-listed labels reach series; the record keeps all.
	if md := db.Metadata.Get(SeriesTailRequests, 0, 0); len(md[SeriesTailRequests]) != 1 {
		t.Errorf("metadata of %s: %v", SeriesTailRequests, md)
	}
}

// TestDerivedCumulativeAcrossRestart: counters add up across requests, a
// clean restart and a crash (kill without checkpoint), and each record is
// counted exactly once.
func TestDerivedCumulativeAcrossRestart(t *testing.T) {
	db := openTestDB(t)
	dir := t.TempDir()
	o := testRecordsOptions(dir)
	ls := labels.FromStrings("model_name", "m", "user", "u1")
	tailCount := func() float64 {
		var n float64
		for _, s := range lastSamples(t, db, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, SeriesTailRequests)) {
			n += s.f
		}
		return n
	}
	appendN := func(p *Records, n int, base int64) {
		items := make([]Item, n)
		for i := range items {
			items[i] = testItem(t, testNow+base+int64(i), "req", ls, [records.NumStages]float64{0.1 * float64(i+1), 0, 0.2, 0.3})
		}
		if err := p.Append(context.Background(), "test", items); err != nil {
			t.Fatal(err)
		}
	}
	p, err := NewRecords(db, nil, o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendN(p, 3, 0)
	appendN(p, 2, 100)
	if got := tailCount(); got != 5 {
		t.Fatalf("tail count %v after 5 requests", got)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p, err = NewRecords(db, nil, o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendN(p, 4, 200)
	if got := tailCount(); got != 9 {
		t.Fatalf("tail count %v after restart and 4 more, want 9", got)
	}
	crash(t, p)
	p, err = NewRecords(db, nil, o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	appendN(p, 1, 300)
	if got := tailCount(); got != 10 {
		t.Fatalf("tail count %v after crash and 1 more, want 10", got)
	}
	if n := len(selectAllRecords(t, p.Store())); n != 10 {
		t.Fatalf("%d records stored, want 10", n)
	}
	// The user label is not on the series (not allow-listed).
	for _, s := range lastSamples(t, db, labels.MustNewMatcher(labels.MatchRegexp, model.MetricNameLabel, "tailroot_.*")) {
		if s.ls.Has("user") {
			t.Fatalf("series %s carries a label outside the allow-list", s.ls)
		}
	}
}

// TestRecoveryFromWAL covers the crash points between the store's WAL
// write and the acknowledgement. The state must count a batch exactly when
// its records are in the store:
//
//	A: a batch torn in the WAL by the crash → not stored, not counted;
//	B: a batch in the WAL, crash before the state was checkpointed →
//	   counted, with its item meta (TTFT flag and gaps) as live;
//	C: a group cut into two appends, only the first reached the WAL →
//	   its records only.
func TestRecoveryFromWAL(t *testing.T) {
	dir := t.TempDir()
	o := testRecordsOptions(dir).withDefaults()
	ls := labels.FromStrings("model_name", "m")
	mk := func(n int, base int64, prefill float64) []Item {
		out := make([]Item, n)
		for i := range out {
			out[i] = testItem(t, testNow+base+int64(i), "r", ls, [records.NumStages]float64{0, 0, prefill})
			out[i].HasTTFT = true
			out[i].Record.TTFT = prefill
			out[i].Gaps = []float64{0.01, 0.02}
		}
		return out
	}
	store, err := records.Open(o.Store)
	if err != nil {
		t.Fatal(err)
	}
	write := func(items []Item) {
		t.Helper()
		b, _ := splitAppends(items, 1<<20, 1<<20, nil, nil)
		if len(b) != 1 {
			t.Fatalf("%d appends", len(b))
		}
		if _, err := store.AppendBatch(b[0].recs, b[0].meta); err != nil {
			t.Fatal(err)
		}
	}
	write(mk(2, 0, 1))  // B
	write(mk(3, 10, 2)) // C, first append
	walDir := filepath.Join(o.Store.Dir, "wal")
	seg := newestSegment(t, walDir)
	before := fileSizeOf(t, seg)
	write(mk(1, 20, 4)) // C, second append: torn below
	torn := fileSizeOf(t, seg)
	write(mk(7, 30, 8)) // A: torn below
	_ = store.Close()
	// The crash kept only part of C's second append: cut inside it.
	if err := os.Truncate(seg, before+(torn-before)/2); err != nil {
		t.Fatal(err)
	}

	db := openTestDB(t)
	p := openTestRecords(t, db, testRecordsOptions(dir))
	acc, err := p.Accumulators(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var n, prefill float64
	for b := range acc.Count {
		n += acc.Count[b]
		prefill += acc.Sum[records.StagePrefill][b]
	}
	// B: 2 requests × 1 s, C: 3 × 2 s; A and C's second append are absent.
	if n != 5 || prefill != 2*1+3*2 {
		t.Errorf("recovered %v requests with %v s of prefill, want 5 and 8", n, prefill)
	}
	if got := len(selectAllRecords(t, p.Store())); got != 5 {
		t.Errorf("%d records stored, want 5", got)
	}
	// The replayed items kept their meta: 5 TTFT observations at position
	// 1 and 2 gaps each at positions 2 and 3.
	ttft, itl := tokenCounts(p)
	if ttft != 5 || itl != 10 {
		t.Errorf("token latency observations: %v TTFT, %v ITL; want 5 and 10", ttft, itl)
	}
	// The replay was folded into a checkpoint: a clean restart does not
	// count it again.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p = openTestRecords(t, db, testRecordsOptions(dir))
	acc, _ = p.Accumulators(context.Background(), nil)
	n = 0
	for _, c := range acc.Count {
		n += c
	}
	if n != 5 {
		t.Errorf("%v requests after a clean restart, want 5", n)
	}
	// A later append continues the sequence and the counts.
	if err := p.Append(context.Background(), "test", mk(1, 40, 16)); err != nil {
		t.Fatal(err)
	}
	acc, _ = p.Accumulators(context.Background(), nil)
	n = 0
	for _, c := range acc.Count {
		n += c
	}
	if n != 6 {
		t.Errorf("%v requests after one more, want 6", n)
	}
}

// TestMigratesV1Journal opens testdata/legacy-v1, written by the version 1
// pipeline: a version 1 checkpoint counting 5 requests (3 with 1 s of
// prefill, 2 with 2 s) sealed in a segment, a version 1 store WAL with 4
// more (4 s each) and a journal holding their entry plus one of 7 (8 s
// each) that never reached the store. Exactly the 9 stored requests must
// be counted, once, across a restart and a crash, and the journal must go.
func TestMigratesV1Journal(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "legacy-v1"))); err != nil {
		t.Fatal(err)
	}
	db := openTestDB(t)
	count := func(p *Records) (n, prefill float64) {
		t.Helper()
		acc, err := p.Accumulators(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for b := range acc.Count {
			n += acc.Count[b]
			prefill += acc.Sum[records.StagePrefill][b]
		}
		return n, prefill
	}
	p := openTestRecordsNoCleanup(t, db, testRecordsOptions(dir))
	if n, pf := count(p); n != 9 || pf != 3*1+2*2+4*4 {
		t.Fatalf("migrated state counts %v requests, %v s of prefill; want 9 and 23", n, pf)
	}
	if got := len(selectAllRecords(t, p.Store())); got != 9 {
		t.Fatalf("%d records stored, want 9", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "derived", journalFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("version 1 journal after migration: %v", err)
	}
	if _, _, v, err := loadCheckpoint(filepath.Join(dir, "derived"), attribution.DefaultGrid(), DefaultSeriesLabels, 10000); err != nil || v != checkpointVersion {
		t.Fatalf("checkpoint version %d (%v), want %d", v, err, checkpointVersion)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p = openTestRecordsNoCleanup(t, db, testRecordsOptions(dir))
	if n, _ := count(p); n != 9 {
		t.Fatalf("%v requests after a restart, want 9", n)
	}
	if err := p.Append(context.Background(), "test", []Item{testItem(t, 1_767_225_600_000+500, "r", labels.FromStrings("model_name", "m"), [records.NumStages]float64{0, 0, 1})}); err != nil {
		t.Fatal(err)
	}
	crash(t, p)
	p = openTestRecords(t, db, testRecordsOptions(dir))
	if n, _ := count(p); n != 10 {
		t.Fatalf("%v requests after one more and a crash, want 10", n)
	}
}

// TestJournalV1TornTail: reading a version 1 journal cut anywhere keeps
// the whole entries before the cut.
func TestJournalV1TornTail(t *testing.T) {
	it := testItem(t, testNow, "r", labels.FromStrings("a", "b"), [records.NumStages]float64{1})
	it.Gaps = []float64{0.5, 0.25}
	it.HasTTFT = true
	frame := func(e *journalEntry) []byte {
		b := e.marshal(make([]byte, journalFrameHeader))
		putFrameHeader(b)
		return b
	}
	first := frame(&journalEntry{Seq: 1, NBefore: 0, Chunks: [][]Item{{it}}})
	data := append(append([]byte(nil), first...), frame(&journalEntry{Seq: 2, NBefore: 1, Chunks: [][]Item{{it}}})...)
	good, full := int64(len(first)), int64(len(data))
	for _, cut := range []int64{good + 1, good + 7, good + 8, full - 1} {
		entries, n := decodeJournal(data[:cut])
		if len(entries) != 1 || entries[0].Seq != 1 || int64(n) != good {
			t.Fatalf("cut at %d: %d entries, prefix %d; want 1 entry and prefix %d", cut, len(entries), n, good)
		}
		got := entries[0].Chunks[0][0]
		if got.Record.E2E != 1 || !got.HasTTFT || len(got.Gaps) != 2 || got.Gaps[1] != 0.25 {
			t.Fatalf("entry decoded as %+v", got)
		}
	}
}

// TestSplitAppends: appends keep item order, stay under the limit (an item
// larger than it goes alone), and carry each item's meta.
func TestSplitAppends(t *testing.T) {
	ls := labels.FromStrings("k", "v")
	items := make([]Item, 5000)
	for i := range items {
		items[i] = testItem(t, int64(10+i), string(make([]byte, 200)), ls, [records.NumStages]float64{1})
		items[i].HasEntropy = i%2 == 0
		if i%3 == 0 {
			items[i].Gaps = []float64{float64(i)}
		}
	}
	items[77].Record.RequestID = string(make([]byte, 70_000))
	const limit = 64 << 10
	bs, _ := splitAppends(items, limit, limit, nil, nil)
	if len(bs) < 10 {
		t.Fatalf("5000 items of ~250 bytes in %d append(s) of %d bytes", len(bs), limit)
	}
	k := 0
	for _, b := range bs {
		if b.bytes > limit && len(b.items) != 1 {
			t.Fatalf("append of %d items and %d bytes over %d", len(b.items), b.bytes, limit)
		}
		if len(b.recs) != len(b.items) || len(b.meta) != len(b.items) {
			t.Fatalf("append with %d items, %d records, %d meta", len(b.items), len(b.recs), len(b.meta))
		}
		for i := range b.items {
			if b.recs[i].Time != items[k].Record.Time {
				t.Fatalf("item %d out of order", k)
			}
			var back Item
			if err := unmarshalItemMeta(b.meta[i], &back); err != nil {
				t.Fatal(err)
			}
			if back.HasEntropy != items[k].HasEntropy || back.HasTTFT || len(back.Gaps) != len(items[k].Gaps) || (back.Gaps != nil && back.Gaps[0] != float64(k)) {
				t.Fatalf("item %d meta decoded as %+v", k, back)
			}
			k++
		}
	}
	if k != len(items) {
		t.Fatalf("%d of %d items in the appends", k, len(items))
	}
}

func newestSegment(t testing.TB, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no WAL segments in %s: %v", dir, err)
	}
	slices.Sort(m)
	for i := len(m) - 1; i >= 0; i-- {
		if fileSizeOf(t, m[i]) > 0 {
			return m[i]
		}
	}
	t.Fatalf("no WAL segment in %s holds data", dir)
	return ""
}

func fileSizeOf(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// tokenCounts returns the observations in the TTFT and ITL token latency
// histograms of the state.
func tokenCounts(p *Records) (ttft, itl float64) {
	_ = p.do(context.Background(), func() {
		p.flushSeries(false)
		for _, st := range p.d.order {
			for k := range st.Tokens {
				for _, h := range st.Tokens[k] {
					if h == nil {
						continue
					}
					if k == 0 {
						ttft += float64(h.Count)
					} else {
						itl += float64(h.Count)
					}
				}
			}
		}
	})
	return ttft, itl
}

// TestOverflowLabelSets: past MaxSeriesLabelSets, new label sets are
// counted under tailroot_overflow="true".
func TestOverflowLabelSets(t *testing.T) {
	db := openTestDB(t)
	o := testRecordsOptions(t.TempDir())
	o.MaxSeriesLabelSets = 2
	p := openTestRecords(t, db, o)
	var items []Item
	for i, m := range []string{"a", "b", "c", "d"} {
		items = append(items, testItem(t, testNow+int64(i), "r", labels.FromStrings("model_name", m), [records.NumStages]float64{1}))
	}
	if err := p.Append(context.Background(), "test", items); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range lastSamples(t, db, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, SeriesTailRequests)) {
		got[s.ls.Get("model_name")+"/"+s.ls.Get(LabelOverflow)] += s.f
	}
	if len(got) != 3 || got["a/"] != 1 || got["b/"] != 1 || got["/true"] != 2 {
		t.Errorf("tail counts by model/overflow %v, want a:1 b:1 overflow:2", got)
	}
}

// TestAppendRefusesOverlap: a record whose stages exceed e2e (other < 0)
// cannot feed monotone counters and is refused before anything is written.
func TestAppendRefusesOverlap(t *testing.T) {
	db := openTestDB(t)
	p := openTestRecords(t, db, testRecordsOptions(t.TempDir()))
	it := testItem(t, testNow, "r", labels.FromStrings("a", "b"), [records.NumStages]float64{1, 0, 0, 0, 0, 0, -0.5})
	if err := p.Append(context.Background(), "test", []Item{it}); err == nil {
		t.Fatal("overlapping stages accepted")
	}
	if n := p.Store().Stats().Records; n != 0 {
		t.Fatalf("%d records stored", n)
	}
}

// TestExemplarLabelsFit: a long request id is left out of the exemplar so
// the label set stays within Prometheus' 128 runes.
func TestExemplarLabelsFit(t *testing.T) {
	var e exCand
	r := records.Record{RequestID: strings.Repeat("x", 100), TraceID: records.TraceID{1}}
	e.offer(1, &r)
	exs := e.exemplars(5)
	if len(exs) != 1 || exs[0].Labels.Has("request_id") || exs[0].Labels.Get("trace_id") != hex.EncodeToString(r.TraceID[:]) {
		t.Errorf("exemplar %v", exs)
	}
}

// TestAccumulatorsMatchAttribution: the deriver's tail cells equal
// attribution.Accumulate on the same stage vectors, bucket for bucket.
func TestAccumulatorsMatchAttribution(t *testing.T) {
	d := newDeriver(attribution.DefaultGrid(), DefaultSeriesLabels, 10)
	var cols [records.NumStages][]float64
	for i := range 500 {
		x := float64(i)
		it := testItem(t, 0, "r", labels.FromStrings("model_name", "m"), [records.NumStages]float64{
			math.Mod(x*0.37, 2), 0.001 * x, math.Mod(x*0.11, 1), 0.5 + math.Mod(x*0.07, 3),
		})
		d.add(&it)
		for j := range cols {
			cols[j] = append(cols[j], it.Record.Stages[j])
		}
	}
	names := make([]string, records.NumStages)
	for j := range names {
		names[j] = records.Stage(j).String()
	}
	reqs, err := attribution.NewRequests(names, cols[:])
	if err != nil {
		t.Fatal(err)
	}
	want := attribution.Accumulate(reqs, attribution.DefaultGrid())
	got := d.accumulators(nil)
	for b := range want.Count {
		if got.Count[b] != want.Count[b] {
			t.Fatalf("bucket %d: count %v, want %v", b, got.Count[b], want.Count[b])
		}
		for j := range want.Sum {
			if !approxEq(got.Sum[j][b], want.Sum[j][b], 1e-9) {
				t.Fatalf("bucket %d stage %s: sum %v, want %v", b, names[j], got.Sum[j][b], want.Sum[j][b])
			}
		}
	}
}

// TestSplitAppendsKeepsSubmissionsWhole: with submission ends, every cut
// falls between submissions (a failed append then refuses whole
// submissions and stores no part of one), appends still stay near the
// limit, and only a submission past hard is cut inside.
func TestSplitAppendsKeepsSubmissionsWhole(t *testing.T) {
	ls := labels.FromStrings("k", "v")
	var items []Item
	var ends []int
	// Submissions of 1 to 400 items of ~270 bytes, one of 1,500 (past
	// the limit, under hard) and one of 6,000 (past hard).
	sizes := []int{3, 400, 1, 1500, 50, 6000, 7, 250, 120}
	for _, n := range sizes {
		for range n {
			items = append(items, testItem(t, int64(10+len(items)), string(make([]byte, 200)), ls, [records.NumStages]float64{1}))
		}
		ends = append(ends, len(items))
	}
	const limit, hard = 64 << 10, 512 << 10
	bs, _ := splitAppends(items, limit, hard, ends, nil)
	at, cutInside := 0, 0
	for _, b := range bs {
		at += len(b.items)
		if b.bytes > hard+1024 {
			t.Errorf("append of %d bytes over hard %d", b.bytes, hard)
		}
		if _, ok := slices.BinarySearch(ends, at); !ok {
			cutInside++
			// Only the 6,000-item submission (items 1954..7954) may be cut.
			if at <= 1954 || at >= 7954 {
				t.Errorf("append ends at item %d, inside a submission of at most hard bytes", at)
			}
		}
	}
	if at != len(items) {
		t.Fatalf("%d of %d items in the appends", at, len(items))
	}
	if cutInside == 0 {
		t.Error("the submission past hard was not cut")
	}
	if len(bs) < 8 {
		t.Errorf("%d appends: small submissions were not grouped up to the limit", len(bs))
	}
	// Without ends, the same items are cut at the limit.
	free, _ := splitAppends(items, limit, hard, nil, nil)
	for _, b := range free {
		if b.bytes > limit && len(b.items) != 1 {
			t.Fatalf("without ends: append of %d items and %d bytes over %d", len(b.items), b.bytes, limit)
		}
	}
}
