package remote

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"google.golang.org/grpc"

	"github.com/tailroot/tailroot/query/remote/storepb"
)

// namedStore is a Store over any Queryable.
type namedStore struct {
	name string
	storage.Queryable
}

func (s namedStore) Name() string { return s.name }

// failingStore fails every Select with err.
type failingStore struct{ err error }

func (failingStore) Name() string { return "broken:1" }
func (f failingStore) Querier(int64, int64) (storage.Querier, error) {
	return storage.NoopQuerier(), f.err
}

type sample struct {
	t int64
	f float64
}

// selectAll returns every series matching ms as labels → samples.
func selectAll(t *testing.T, ctx context.Context, q storage.Queryable, ms ...*labels.Matcher) (map[string][]sample, annotations.Annotations, error) {
	t.Helper()
	qr, err := q.Querier(0, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	defer qr.Close()
	set := qr.Select(ctx, true, nil, ms...)
	out := map[string][]sample{}
	var prev labels.Labels
	for set.Next() {
		s := set.At()
		if !prev.IsEmpty() && labels.Compare(prev, s.Labels()) >= 0 {
			t.Errorf("series not sorted: %s after %s", s.Labels(), prev)
		}
		prev = s.Labels()
		it := s.Iterator(nil)
		var got []sample
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			got = append(got, sample{ts, v})
		}
		out[s.Labels().String()] = got
	}
	return out, set.Warnings(), set.Err()
}

func metric(name string) *labels.Matcher {
	return labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, name)
}

func TestMergeExternalLabelsAndReplicas(t *testing.T) {
	// Local: x on cluster a (external label), one series with its own
	// cluster label. Remote: x from cluster b in two replicas that scrape at
	// the same times but miss different samples, deduplicated as Thanos
	// does (TestPenaltyDedup has the rule).
	local := promqltest.LoadedStorage(t, `
load 1m
	x{instance="i"} 1 2 3
	x{instance="own", cluster="z"} 7 7 7
`)
	remote := promqltest.LoadedStorage(t, `
load 1m
	x{instance="i", cluster="b", replica="r1"} 10 _ 30 40
	x{instance="i", cluster="b", replica="r2"} _ 20 30 _
`)
	opts := DefaultOptions()
	opts.ExternalLabels = func() labels.Labels { return labels.FromStrings("cluster", "a") }
	opts.Stores = func() []Store { return []Store{namedStore{"remote:1", remote}} }
	opts.ReplicaLabels = []string{"replica"}
	g := New(local, opts)

	got, warns, err := selectAll(t, context.Background(), g, metric("x"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]sample{
		`{__name__="x", cluster="a", instance="i"}`: {{0, 1}, {60000, 2}, {120000, 3}},
		// Penalty dedup: r1 at 0; r1's next (120 s) is later than r2's
		// (60 s), so r2 at 60 s, and r1 must skip 2·60 s past it — beyond
		// its last sample at 180 s; r2 at 120 s.
		`{__name__="x", cluster="b", instance="i"}`:   {{0, 10}, {60000, 20}, {120000, 30}},
		`{__name__="x", cluster="z", instance="own"}`: {{0, 7}, {60000, 7}, {120000, 7}},
	}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("%s: %v, want %v", k, got[k], w)
		}
	}
	if !hasAnno(warns, annotations.PromQLInfo, "store remote:1 answered") {
		t.Errorf("no info naming the store: %v", warns)
	}

	// A matcher on the external label is answered from its value.
	got, _, _ = selectAll(t, context.Background(), g, metric("x"), labels.MustNewMatcher(labels.MatchEqual, "cluster", "b"))
	if len(got) != 1 || got[`{__name__="x", cluster="b", instance="i"}`] == nil {
		t.Errorf(`cluster="b": %v`, got)
	}
	got, _, _ = selectAll(t, context.Background(), g, metric("x"), labels.MustNewMatcher(labels.MatchRegexp, "cluster", "a|z"))
	if len(got) != 2 {
		t.Errorf(`cluster=~"a|z": %v, want the local series`, got)
	}

	// Label names and values include the external label, not the replica.
	q, _ := g.Querier(0, 1<<40)
	names, _, err := q.LabelNames(context.Background(), nil)
	if err != nil || !slices.Equal(names, []string{"__name__", "cluster", "instance"}) {
		t.Errorf("label names %v %v", names, err)
	}
	vals, _, err := q.LabelValues(context.Background(), "cluster", nil)
	if err != nil || !slices.Equal(vals, []string{"a", "b", "z"}) {
		t.Errorf("cluster values %v %v", vals, err)
	}
	vals, _, _ = q.LabelValues(context.Background(), "replica", nil)
	if len(vals) != 0 {
		t.Errorf("replica values %v, want none", vals)
	}
}

func TestNoStoresIsTheLocalTSDB(t *testing.T) {
	local := promqltest.LoadedStorage(t, "load 1m\n\tx{instance=\"i\"} 1 2\n")
	opts := DefaultOptions()
	opts.ExternalLabels = func() labels.Labels { return labels.FromStrings("cluster", "a") }
	got, warns, err := selectAll(t, context.Background(), New(local, opts), metric("x"))
	if err != nil || len(warns) != 0 || got[`{__name__="x", instance="i"}`] == nil {
		t.Errorf("without stores the local series must be unchanged: %v %v %v", got, warns, err)
	}
}

func TestPartialResponse(t *testing.T) {
	local := promqltest.LoadedStorage(t, "load 1m\n\tx{instance=\"i\"} 1 2\n")
	opts := DefaultOptions()
	opts.Stores = func() []Store { return []Store{failingStore{errors.New("connection refused")}} }
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	g := New(local, opts)
	defer func() {
		if n := testutil.ToFloat64(g.metrics.requests.WithLabelValues("broken:1", "select", "failed")); n != 2 {
			t.Errorf("failed selects counted %v, want 2", n)
		}
	}()

	got, warns, err := selectAll(t, context.Background(), g, metric("x"))
	if err != nil || len(got) != 1 {
		t.Fatalf("partial: %v %v", got, err)
	}
	if !hasAnno(warns, annotations.PromQLWarning, "store broken:1 failed, the answer is partial: connection refused") {
		t.Errorf("warnings %v do not name the failed store", warns)
	}
	_, _, err = selectAll(t, WithPartialResponse(context.Background(), false), g, metric("x"))
	if err == nil || !strings.Contains(err.Error(), "store broken:1: connection refused") {
		t.Errorf("without partial response: %v, want the store's error", err)
	}
	opts.PartialResponse = false
	opts.Registerer = nil
	_, _, err = selectAll(t, context.Background(), New(local, opts), metric("x"))
	if err == nil {
		t.Error("PartialResponse false: no error")
	}
}

func hasAnno(a annotations.Annotations, kind error, text string) bool {
	for _, e := range a {
		if errors.Is(e, kind) && strings.Contains(e.Error(), text) {
			return true
		}
	}
	return false
}

// fakeStore is a StoreAPI server answering from fixed series and
// recording the last request.
type fakeStore struct {
	storepb.UnimplementedStoreServer
	series []*storepb.Series
	last   *storepb.SeriesRequest
	warn   string
}

func (f *fakeStore) Series(r *storepb.SeriesRequest, srv grpc.ServerStreamingServer[storepb.SeriesResponse]) error {
	f.last = r
	if f.warn != "" {
		if err := srv.Send(&storepb.SeriesResponse{Result: &storepb.SeriesResponse_Warning{Warning: f.warn}}); err != nil {
			return err
		}
	}
	for _, s := range f.series {
		if err := srv.Send(&storepb.SeriesResponse{Result: &storepb.SeriesResponse_Series{Series: s}}); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeStore) LabelNames(context.Context, *storepb.LabelNamesRequest) (*storepb.LabelNamesResponse, error) {
	return &storepb.LabelNamesResponse{Names: []string{"__name__", "cluster"}}, nil
}

func xorChunk(t *testing.T, ss ...sample) *storepb.AggrChunk {
	t.Helper()
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		app.Append(0, s.t, s.f)
	}
	return &storepb.AggrChunk{MinTime: ss[0].t, MaxTime: ss[len(ss)-1].t, Raw: &storepb.Chunk{Type: storepb.Chunk_XOR, Data: c.Bytes()}}
}

func histChunk(t *testing.T, ts int64, h *histogram.Histogram) *storepb.AggrChunk {
	t.Helper()
	c := chunkenc.NewHistogramChunk()
	app, err := c.Appender()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := app.AppendHistogram(nil, 0, ts, h, false); err != nil {
		t.Fatal(err)
	}
	return &storepb.AggrChunk{MinTime: ts, MaxTime: ts, Raw: &storepb.Chunk{Type: storepb.Chunk_HISTOGRAM, Data: c.Bytes()}}
}

func serveFake(t *testing.T, f *fakeStore) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	storepb.RegisterStoreServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func TestStoreAPIClient(t *testing.T) {
	h := &histogram.Histogram{
		Count: 5, ZeroCount: 1, Sum: 7.5, ZeroThreshold: 0.001,
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{1, 2},
	}
	f := &fakeStore{warn: "store s3 slow", series: []*storepb.Series{
		// Unsorted labels and chunks that overlap at t=2000, as a Thanos
		// Query over a sidecar and a store holding the same block sends.
		{
			Labels: []*storepb.Label{{Name: "__name__", Value: "x"}, {Name: "cluster", Value: "b"}},
			Chunks: []*storepb.AggrChunk{xorChunk(t, sample{1000, 1}, sample{2000, 2}), xorChunk(t, sample{2000, 2}, sample{3000, 3})},
		},
		{
			Labels: []*storepb.Label{{Name: "cluster", Value: "a"}, {Name: "__name__", Value: "x"}},
			Chunks: []*storepb.AggrChunk{xorChunk(t, sample{1000, 5})},
		},
		{
			Labels: []*storepb.Label{{Name: "__name__", Value: "h"}, {Name: "cluster", Value: "a"}},
			Chunks: []*storepb.AggrChunk{histChunk(t, 4000, h)},
		},
	}}
	addr := serveFake(t, f)
	s, err := NewStoreAPI(StoreAPIOptions{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	got, warns, err := selectAll(t, context.Background(), s, labels.MustNewMatcher(labels.MatchRegexp, model.MetricNameLabel, "x|y"))
	if err != nil {
		t.Fatal(err)
	}
	if w := got[`{__name__="x", cluster="b"}`]; !slices.Equal(w, []sample{{1000, 1}, {2000, 2}, {3000, 3}}) {
		t.Errorf("overlapping chunks: %v", w)
	}
	if w := got[`{__name__="x", cluster="a"}`]; !slices.Equal(w, []sample{{1000, 5}}) {
		t.Errorf("second series: %v", w)
	}
	if !hasAnno(warns, annotations.PromQLWarning, "store "+addr+": store s3 slow") {
		t.Errorf("the endpoint's warning is not passed on: %v", warns)
	}
	if r := f.last; len(r.Matchers) != 1 || r.Matchers[0].Type != storepb.LabelMatcher_RE || r.Matchers[0].Value != "x|y" ||
		r.PartialResponseStrategy != storepb.PartialResponseStrategy_WARN || r.MaxTime != 1<<40 {
		t.Errorf("request %v", r)
	}

	// Native histogram chunks decode as histograms.
	q, _ := s.Querier(0, 1<<40)
	set := q.Select(context.Background(), true, nil, metric("h"))
	if !set.Next() {
		t.Fatalf("no histogram series: %v", set.Err())
	}
	it := set.At().Iterator(nil)
	if it.Next() != chunkenc.ValHistogram {
		t.Fatal("not a histogram sample")
	}
	if ts, gh := it.AtHistogram(nil); ts != 4000 || !gh.Equals(h) {
		t.Errorf("histogram at %d: %v, want %v", ts, gh, h)
	}

	// Without partial response the endpoint is asked to abort too.
	_, _, _ = selectAll(t, WithPartialResponse(context.Background(), false), s, metric("x"))
	if f.last.PartialResponseStrategy != storepb.PartialResponseStrategy_ABORT {
		t.Errorf("strategy %v, want ABORT", f.last.PartialResponseStrategy)
	}

	names, _, err := q.LabelNames(context.Background(), nil)
	if err != nil || !slices.Equal(names, []string{"__name__", "cluster"}) {
		t.Errorf("label names %v %v", names, err)
	}
}

func TestStoreAPIDown(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	_ = ln.Close()
	s, err := NewStoreAPI(StoreAPIOptions{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	local := promqltest.LoadedStorage(t, "load 1m\n\tx{instance=\"i\"} 1 2\n")
	opts := DefaultOptions()
	opts.Stores = func() []Store { return []Store{s} }
	got, warns, err := selectAll(t, context.Background(), New(local, opts), metric("x"))
	if err != nil || len(got) != 1 {
		t.Fatalf("%v %v", got, err)
	}
	if !hasAnno(warns, annotations.PromQLWarning, "store "+addr+" failed") {
		t.Errorf("warnings %v", warns)
	}
}

func TestSeriesFromPBRejects(t *testing.T) {
	for name, s := range map[string]*storepb.Series{
		"no labels":     {},
		"empty name":    {Labels: []*storepb.Label{{Name: "", Value: "v"}}},
		"no sum":        {Labels: []*storepb.Label{{Name: "a", Value: "v"}}, Chunks: []*storepb.AggrChunk{{MinTime: 1, MaxTime: 2, Count: &storepb.Chunk{}}}},
		"bad encoding":  {Labels: []*storepb.Label{{Name: "a", Value: "v"}}, Chunks: []*storepb.AggrChunk{{MinTime: 1, MaxTime: 2, Raw: &storepb.Chunk{Type: 9}}}},
		"short chunk":   {Labels: []*storepb.Label{{Name: "a", Value: "v"}}, Chunks: []*storepb.AggrChunk{{MinTime: 1, MaxTime: 2, Raw: &storepb.Chunk{Data: []byte{0}}}}},
		"out of order":  {Labels: []*storepb.Label{{Name: "a", Value: "v"}}, Chunks: []*storepb.AggrChunk{xorChunk(t, sample{5, 1}, sample{3, 2})}},
		"inverted time": {Labels: []*storepb.Label{{Name: "a", Value: "v"}}, Chunks: []*storepb.AggrChunk{{MinTime: 3, MaxTime: 2, Raw: &storepb.Chunk{}}}},
	} {
		if _, err := seriesFromPB(s, aggrsForFunc("")); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestStoreAPIOutOfOrder: a store whose chunk decodes to samples going
// back in time (chunkenc decodes any deltas) breaks the protocol; its
// whole response is rejected with an error naming it, or a warning under
// partial response, and no sample of it reaches the answer.
func TestStoreAPIOutOfOrder(t *testing.T) {
	bad := xorChunk(t, sample{1000, 1}, sample{3000, 3}, sample{2000, 2})
	f := &fakeStore{series: []*storepb.Series{
		{Labels: []*storepb.Label{{Name: "__name__", Value: "x"}, {Name: "cluster", Value: "ok"}}, Chunks: []*storepb.AggrChunk{xorChunk(t, sample{1000, 7})}},
		{Labels: []*storepb.Label{{Name: "__name__", Value: "x"}, {Name: "cluster", Value: "bad"}}, Chunks: []*storepb.AggrChunk{bad}},
	}}
	addr := serveFake(t, f)
	s, err := NewStoreAPI(StoreAPIOptions{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	local := promqltest.LoadedStorage(t, "load 1m\n\tx{instance=\"i\"} 1 2\n")
	opts := DefaultOptions()
	opts.Stores = func() []Store { return []Store{s} }
	g := New(local, opts)

	_, _, err = selectAll(t, WithPartialResponse(context.Background(), false), g, metric("x"))
	if err == nil || !strings.Contains(err.Error(), "store "+addr+": ") || !strings.Contains(err.Error(), "samples out of order: 2000 after 3000") {
		t.Errorf("without partial response: %v, want the store's out-of-order error", err)
	}
	got, warns, err := selectAll(t, context.Background(), g, metric("x"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[`{__name__="x", instance="i"}`] == nil {
		t.Errorf("partial answer %v, want only the local series", got)
	}
	if !hasAnno(warns, annotations.PromQLWarning, "store "+addr+" failed, the answer is partial") {
		t.Errorf("warnings %v do not name the store", warns)
	}
}

func TestPenaltyDedup(t *testing.T) {
	// r1 scrapes at 0, 15, 30, 45 s, misses 60–90 s, then 105, 120, 135;
	// r2 at 5, 20, …, 140. Thanos' penalty rule (worked by hand): r1 at 0
	// (r2 skipped 5 s), 15, 30, 45 (r2 skipped 2·15 s each time); at 45.001
	// r1's next is 105 and r2's (seek 75.001) is 80, so r2 from 80, r1 now
	// skipped 2·(80−45) = 70 s, past its end: 95, 110, 125, 140 from r2.
	local := promqltest.LoadedStorage(t, "load 1m\n\tx{instance=\"other\"} 1\n")
	remote := promqltest.LoadedStorage(t, `
load 5s
	x{instance="i", replica="r1"} 0 _ _ 1 _ _ 2 _ _ 3 _ _ _ _ _ _ _ _ _ _ _ 4 _ _ 5 _ _ 6
	x{instance="i", replica="r2"} _ 10 _ _ 11 _ _ 12 _ _ 13 _ _ 14 _ _ 15 _ _ 16 _ _ 17 _ _ 18 _ _ 19
`)
	opts := DefaultOptions()
	opts.Stores = func() []Store { return []Store{namedStore{"remote:1", remote}} }
	opts.ReplicaLabels = []string{"replica"}
	got, _, err := selectAll(t, context.Background(), New(local, opts), metric("x"))
	if err != nil {
		t.Fatal(err)
	}
	want := []sample{{0, 0}, {15000, 1}, {30000, 2}, {45000, 3}, {80000, 15}, {95000, 16}, {110000, 17}, {125000, 18}, {140000, 19}}
	if g := got[`{__name__="x", instance="i"}`]; !slices.Equal(g, want) {
		t.Errorf("deduplicated %v\nwant         %v", g, want)
	}
}

func TestPenaltyDedupHistograms(t *testing.T) {
	remote := promqltest.LoadedStorage(t, `
load 15s
	h{replica="r1"} {{count:1 sum:1}} {{count:2 sum:2}} _ _
	h{replica="r2"} {{count:1 sum:1}} {{count:2 sum:2}} {{count:3 sum:3}} {{count:4 sum:4}} {{count:5 sum:5}} {{count:6 sum:6}}
`)
	opts := DefaultOptions()
	opts.Stores = func() []Store { return []Store{namedStore{"remote:1", remote}} }
	opts.ReplicaLabels = []string{"replica"}
	q, _ := New(nil, opts).Querier(0, 1<<40)
	set := q.Select(context.Background(), true, nil, metric("h"))
	if !set.Next() {
		t.Fatalf("no series: %v", set.Err())
	}
	it := set.At().Iterator(nil)
	var counts []float64
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		_, fh := it.AtFloatHistogram(nil)
		counts = append(counts, fh.Count)
	}
	// r1 at 0 and 15 s, r2 skipped 2·15 s past 15 s each time: when r1
	// ends, r2 resumes after 45 s — its samples at 60 and 75 s.
	if !slices.Equal(counts, []float64{1, 2, 5, 6}) {
		t.Errorf("counts %v, want 1 2 5 6 (r1, then r2 past the penalty)", counts)
	}
	if set.Next() {
		t.Errorf("a second series: %s", set.At().Labels())
	}
}

// Integer histograms (what remote write and the TSDB store) read as float
// histograms after the merge, as the engine reads them.
func TestPenaltyDedupIntegerHistograms(t *testing.T) {
	h := &histogram.Histogram{Count: 3, ZeroCount: 1, Sum: 2, ZeroThreshold: 0.001, PositiveSpans: []histogram.Span{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{2}}
	a := storage.NewListSeries(labels.FromStrings("__name__", "h"), []chunks.Sample{dedupSample{t: 1000, h: h, vt: chunkenc.ValHistogram}})
	b := storage.NewListSeries(labels.FromStrings("__name__", "h"), []chunks.Sample{dedupSample{t: 1000, h: h, vt: chunkenc.ValHistogram}})
	it := penaltyMerge(a, b).Iterator(nil)
	if it.Next() != chunkenc.ValHistogram {
		t.Fatal("not a histogram")
	}
	if _, fh := it.AtFloatHistogram(nil); fh == nil || fh.Count != 3 {
		t.Errorf("float histogram %v", fh)
	}
	if _, ih := it.AtHistogram(nil); ih == nil || ih.Count != 3 {
		t.Errorf("histogram %v", ih)
	}
}

func TestPenaltyDedupResetHint(t *testing.T) {
	h := func(c uint64) *histogram.Histogram {
		return &histogram.Histogram{Count: c, Sum: 1, CounterResetHint: histogram.NotCounterReset}
	}
	a := storage.NewListSeries(labels.FromStrings("__name__", "h"), []chunks.Sample{dedupSample{t: 0, h: h(5), vt: chunkenc.ValHistogram}})
	b := storage.NewListSeries(labels.FromStrings("__name__", "h"), []chunks.Sample{dedupSample{t: 60000, h: h(2), vt: chunkenc.ValHistogram}})
	it := penaltyMerge(a, b).Iterator(nil)
	var hints []histogram.CounterResetHint
	for it.Next() != chunkenc.ValNone {
		_, got := it.AtHistogram(nil)
		hints = append(hints, got.CounterResetHint)
	}
	// Replica b's 2 after replica a's 5 may be a reset: its hint must not
	// claim otherwise.
	if !slices.Equal(hints, []histogram.CounterResetHint{histogram.NotCounterReset, histogram.UnknownCounterReset}) {
		t.Errorf("hints %v", hints)
	}
}

// TestChunksOnlyWithoutStores: the global view serves the local TSDB's
// chunks (to the fast PromQL path) while no store is in force, and none
// once one is: the stores' samples must be merged.
func TestChunksOnlyWithoutStores(t *testing.T) {
	local := promqltest.LoadedStorage(t, "load 1m\n\tx{instance=\"i\"} 1 2\n")
	var stores []Store
	opts := DefaultOptions()
	opts.Stores = func() []Store { return stores }
	g := New(local, opts)
	c, ok := g.ChunkQueryable()
	if !ok || c != storage.ChunkQueryable(local) {
		t.Fatalf("without stores: %v %v, want the local TSDB", c, ok)
	}
	stores = []Store{failingStore{errors.New("down")}}
	if _, ok := g.ChunkQueryable(); ok {
		t.Error("with a store in force the view claims the local chunks")
	}
	if _, ok := New(nil, DefaultOptions()).ChunkQueryable(); ok {
		t.Error("a view without local storage claims chunks")
	}
	if _, ok := New(sampleOnly{local}, DefaultOptions()).ChunkQueryable(); ok {
		t.Error("a view over a sample-only storage claims chunks")
	}
}

type sampleOnly struct{ q storage.Queryable }

func (s sampleOnly) Querier(mint, maxt int64) (storage.Querier, error) {
	return s.q.Querier(mint, maxt)
}
