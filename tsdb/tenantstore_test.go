package tsdb

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/internal/tenant"
)

func openTenantDB(t testing.TB) *DB {
	t.Helper()
	o := DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	db, err := Open(o, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func tenantCtx(r *tenant.Resolver, id string) context.Context {
	return tenant.NewContext(context.Background(), r.Tenant(id))
}

// appendAs writes one float sample per label set as tenant id.
func appendAs(t *testing.T, a storage.AppendableV2, ctx context.Context, ts int64, v float64, sets ...labels.Labels) error {
	t.Helper()
	app := a.AppenderV2(ctx)
	for _, ls := range sets {
		if _, err := app.Append(0, ls, 0, ts, v, nil, nil, storage.AOptions{}); err != nil {
			_ = app.Rollback()
			return err
		}
	}
	return app.Commit()
}

type seriesValue struct {
	ls string
	v  float64
}

func selectAll(t *testing.T, q storage.Queryable, ctx context.Context, sorted bool, ms ...*labels.Matcher) ([]seriesValue, error) {
	t.Helper()
	qr, err := q.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer qr.Close()
	set := qr.Select(ctx, sorted, nil, ms...)
	var out []seriesValue
	for set.Next() {
		s := set.At()
		it := s.Iterator(nil)
		it.Next()
		_, v := it.At()
		out = append(out, seriesValue{s.Labels().String(), v})
	}
	return out, set.Err()
}

func TestTenantAppendableStampsAndQueryableConfines(t *testing.T) {
	db := openTenantDB(t)
	res := tenant.NewResolver(tenant.DefaultOptions())
	a, b := tenantCtx(res, "A"), tenantCtx(res, "B")
	app := TenantAppendable(db)
	// A sends a tenant_id of its own: it is replaced.
	if err := appendAs(t, app, a, 1000, 1, labels.FromStrings("__name__", "m", "job", "a", "tenant_id", "B"), labels.FromStrings("__name__", "m", "job", "a2")); err != nil {
		t.Fatal(err)
	}
	if err := appendAs(t, app, b, 1000, 2, labels.FromStrings("__name__", "m", "job", "b")); err != nil {
		t.Fatal(err)
	}

	// Raw: every series carries its writer's tenant.
	raw, err := selectAll(t, db, context.Background(), true, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	if err != nil {
		t.Fatal(err)
	}
	want := []seriesValue{{`{__name__="m", job="a", tenant_id="A"}`, 1}, {`{__name__="m", job="a2", tenant_id="A"}`, 1}, {`{__name__="m", job="b", tenant_id="B"}`, 2}}
	if !slices.Equal(raw, want) {
		t.Fatalf("stored %v, want %v", raw, want)
	}

	q := TenantQueryable(db)
	name := labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")
	aOnly := []seriesValue{{`{__name__="m", job="a"}`, 1}, {`{__name__="m", job="a2"}`, 1}}
	for _, tc := range []struct {
		name string
		ms   []*labels.Matcher
		want []seriesValue
	}{
		{"all names", []*labels.Matcher{name}, aOnly},
		{`tenant_id="B"`, []*labels.Matcher{name, labels.MustNewMatcher(labels.MatchEqual, "tenant_id", "B")}, nil},
		{`tenant_id="A" (not a label A sees)`, []*labels.Matcher{name, labels.MustNewMatcher(labels.MatchEqual, "tenant_id", "A")}, nil},
		{`tenant_id=~".*"`, []*labels.Matcher{name, labels.MustNewMatcher(labels.MatchRegexp, "tenant_id", ".*")}, aOnly},
		{`tenant_id=~".+"`, []*labels.Matcher{name, labels.MustNewMatcher(labels.MatchRegexp, "tenant_id", ".+")}, nil},
		{`tenant_id!="A"`, []*labels.Matcher{name, labels.MustNewMatcher(labels.MatchNotEqual, "tenant_id", "A")}, aOnly},
		{`tenant_id!~"A"`, []*labels.Matcher{name, labels.MustNewMatcher(labels.MatchNotRegexp, "tenant_id", "A")}, aOnly},
		{`job="b"`, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "job", "b")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, sorted := range []bool{true, false} {
				got, err := selectAll(t, q, a, sorted, tc.ms...)
				if err != nil {
					t.Fatal(err)
				}
				if sorted && !slices.Equal(got, tc.want) || !sorted && !sameSet(got, tc.want) {
					t.Errorf("sorted=%v: got %v, want %v", sorted, got, tc.want)
				}
			}
		})
	}

	qr, _ := q.Querier(math.MinInt64, math.MaxInt64)
	defer qr.Close()
	names, _, err := qr.LabelNames(a, nil)
	if err != nil || !slices.Equal(names, []string{"__name__", "job"}) {
		t.Errorf("label names %v %v, want [__name__ job]", names, err)
	}
	vals, _, err := qr.LabelValues(a, "job", nil)
	if err != nil || !slices.Equal(vals, []string{"a", "a2"}) {
		t.Errorf("job values %v %v, want [a a2]", vals, err)
	}
	vals, _, err = qr.LabelValues(a, "tenant_id", nil)
	if err != nil || len(vals) != 0 {
		t.Errorf("tenant_id values %v %v, want none", vals, err)
	}
	// Without a tenant in the context, reads fail closed.
	if _, err := selectAll(t, q, context.Background(), true, name); !errors.Is(err, ErrNoTenant) {
		t.Errorf("select without tenant: %v, want ErrNoTenant", err)
	}
	if _, _, err := qr.LabelNames(context.Background(), nil); !errors.Is(err, ErrNoTenant) {
		t.Errorf("label names without tenant: %v, want ErrNoTenant", err)
	}
}

func sameSet(a, b []seriesValue) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	cmp := func(x, y seriesValue) int {
		if x.ls < y.ls {
			return -1
		}
		if x.ls > y.ls {
			return 1
		}
		return 0
	}
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}

// Stripping the tenant label can reorder series; sorted selects sort again.
func TestTenantQueryableSortsAfterStripping(t *testing.T) {
	db := openTenantDB(t)
	res := tenant.NewResolver(tenant.DefaultOptions())
	a := tenantCtx(res, "A")
	if err := appendAs(t, TenantAppendable(db), a, 1000, 1,
		labels.FromStrings("__name__", "m", "a", "1"),
		labels.FromStrings("__name__", "m", "a", "1", "b", "x")); err != nil {
		t.Fatal(err)
	}
	got, err := selectAll(t, TenantQueryable(db), a, true, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	if err != nil {
		t.Fatal(err)
	}
	want := []seriesValue{{`{__name__="m", a="1"}`, 1}, {`{__name__="m", a="1", b="x"}`, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (sorted by the labels the tenant sees)", got, want)
	}
}

// recordingQuerier records what a confined querier passes down.
type recordingQuerier struct {
	storage.Querier
	hints *storage.SelectHints
	ms    []*labels.Matcher
}

func (r *recordingQuerier) Select(_ context.Context, _ bool, h *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	r.hints, r.ms = h, ms
	return storage.EmptySeriesSet()
}
func (*recordingQuerier) Close() error { return nil }
func (r *recordingQuerier) LabelNames(_ context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	r.ms = ms
	return []string{"job", "tenant_id"}, nil, nil
}

func TestTenantQueryableKeepsHintsAndAddsMatcher(t *testing.T) {
	rec := &recordingQuerier{}
	q := TenantQueryable(storage.QueryableFunc(func(int64, int64) (storage.Querier, error) { return rec, nil }))
	res := tenant.NewResolver(tenant.Options{Label: "org"})
	ctx := tenantCtx(res, "acme")
	qr, _ := q.Querier(0, 1)
	hints := &storage.SelectHints{Start: 1, End: 2, Step: 30, Func: "rate", Grouping: []string{"job"}, By: true, Range: 300}
	qr.Select(ctx, false, hints, labels.MustNewMatcher(labels.MatchEqual, "job", "x"))
	if rec.hints != hints {
		t.Errorf("hints %+v not passed through", rec.hints)
	}
	want := []string{`job="x"`, `org="acme"`}
	var got []string
	for _, m := range rec.ms {
		got = append(got, m.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("matchers %v, want %v", got, want)
	}
	names, _, _ := qr.LabelNames(ctx, nil)
	if !slices.Equal(names, []string{"job", "tenant_id"}) {
		// org is the tenant label here; tenant_id is an ordinary label.
		t.Errorf("names %v", names)
	}
	if len(rec.ms) != 1 || rec.ms[0].String() != `org="acme"` {
		t.Errorf("label names matchers %v, want [org=\"acme\"]", rec.ms)
	}
}

func TestTenantExemplarsAndChunks(t *testing.T) {
	db := openTenantDB(t)
	res := tenant.NewResolver(tenant.DefaultOptions())
	a, b := tenantCtx(res, "A"), tenantCtx(res, "B")
	for i, ctx := range []context.Context{a, b} {
		app := TenantAppendable(db).AppenderV2(ctx)
		ls := labels.FromStrings("__name__", "h", "job", "j")
		ref, err := app.Append(0, ls, 0, 1000, float64(i), nil, nil, storage.AOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ex := app.(storage.ExemplarAppenderV2)
		if _, err := ex.AppendExemplars(ref, ls, []exemplar.Exemplar{{Labels: labels.FromStrings("trace_id", string(rune('a'+i))), Value: float64(i), Ts: 1000, HasTs: true}}); err != nil {
			t.Fatal(err)
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	eq, err := TenantExemplarQueryable(db).ExemplarQuerier(a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := eq.Select(0, 2000, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "h")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].SeriesLabels.String() != `{__name__="h", job="j"}` || len(got[0].Exemplars) != 1 || got[0].Exemplars[0].Labels.Get("trace_id") != "a" {
		t.Fatalf("A's exemplars: %+v", got)
	}
	if _, err := TenantExemplarQueryable(db).ExemplarQuerier(context.Background()); !errors.Is(err, ErrNoTenant) {
		t.Errorf("exemplars without tenant: %v", err)
	}

	cq, _ := TenantSampleAndChunkQueryable(db).ChunkQuerier(0, 2000)
	defer cq.Close()
	set := cq.Select(b, true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "h"))
	var n int
	for set.Next() {
		n++
		if s := set.At().Labels().String(); s != `{__name__="h", job="j"}` {
			t.Errorf("B's chunk series %s", s)
		}
	}
	if n != 1 || set.Err() != nil {
		t.Errorf("B's chunk series: %d, %v; want 1", n, set.Err())
	}
}

func TestTenantAppendableLimits(t *testing.T) {
	db := openTenantDB(t)
	cfg, err := tenant.ParseConfig([]byte("limits:\n  max_active_series: 2\n  samples_per_second: 5\noverrides:\n  B:\n    max_active_series: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := tenant.DefaultOptions()
	o.Config = cfg
	res := tenant.NewResolver(o)
	a, b := tenantCtx(res, "A"), tenantCtx(res, "B")
	app := TenantAppendable(db)
	s := func(job string) labels.Labels { return labels.FromStrings("__name__", "m", "job", job) }

	if err := appendAs(t, app, a, 1000, 1, s("1"), s("2")); err != nil {
		t.Fatal(err)
	}
	// A third series is refused at Append, naming the limit.
	err = appendAs(t, app, a, 2000, 1, s("1"), s("3"))
	var le *tenant.LimitError
	if !errors.As(err, &le) || le.Limit != "max_active_series" || le.Value != 2 {
		t.Fatalf("third series: %v, want max_active_series=2", err)
	}
	// Samples/s: 5 per second, burst 5; two were used, four more are too many.
	err = appendAs(t, app, a, 3000, 1, s("1"), s("2"), s("1"), s("2"))
	if !errors.As(err, &le) || le.Limit != "samples_per_second" || le.RetryAfterSeconds() < 1 {
		t.Fatalf("over the rate: %v, want samples_per_second", err)
	}
	// Nothing of a refused write is stored.
	got, _ := selectAll(t, TenantQueryable(db), a, true, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	if len(got) != 2 {
		t.Errorf("A has %v, want the 2 series of the first write", got)
	}
	// B has its own limits: its override lifts the series limit.
	if err := appendAs(t, app, b, 1000, 1, s("1"), s("2"), s("3")); err != nil {
		t.Errorf("B: %v", err)
	}
}

// TestTenantQueryableServesConfinedChunks: the tenant view of a queryable
// hands the fast PromQL path chunks confined as its samples are, and says
// "no chunks" over a storage that serves none.
func TestTenantQueryableServesConfinedChunks(t *testing.T) {
	db := openTenantDB(t)
	res := tenant.NewResolver(tenant.DefaultOptions())
	a, b := tenantCtx(res, "A"), tenantCtx(res, "B")
	for i, ctx := range []context.Context{a, b} {
		app := TenantAppendable(db).AppenderV2(ctx)
		if _, err := app.Append(0, labels.FromStrings("__name__", "c", "job", "j"), 0, 1000, float64(10+i), nil, nil, storage.AOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	type chunkSource interface {
		ChunkQueryable() (storage.ChunkQueryable, bool)
	}
	src, ok := TenantQueryable(db).(chunkSource)
	if !ok {
		t.Fatal("the tenant view has no ChunkQueryable")
	}
	c, ok := src.ChunkQueryable()
	if !ok {
		t.Fatal("the tenant view of the TSDB serves no chunks")
	}
	cq, err := c.ChunkQuerier(0, 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	set := cq.Select(b, true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "c"))
	var got []float64
	for set.Next() {
		if s := set.At().Labels().String(); s != `{__name__="c", job="j"}` {
			t.Errorf("B's chunk series %s", s)
		}
		it := set.At().Iterator(nil)
		for it.Next() {
			it2 := it.At().Chunk.Iterator(nil)
			for it2.Next() != chunkenc.ValNone {
				_, v := it2.At()
				got = append(got, v)
			}
		}
	}
	if set.Err() != nil || !slices.Equal(got, []float64{11}) {
		t.Errorf("B's chunk samples %v (%v), want [11]", got, set.Err())
	}
	if _, err := func() (int, error) {
		q, _ := c.ChunkQuerier(0, 2000)
		defer q.Close()
		s := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "c"))
		for s.Next() {
		}
		return 0, s.Err()
	}(); !errors.Is(err, ErrNoTenant) {
		t.Errorf("chunks without a tenant: %v, want ErrNoTenant", err)
	}

	if _, ok := TenantQueryable(sampleOnly{db}).(chunkSource).ChunkQueryable(); ok {
		t.Error("the tenant view of a sample-only storage claims chunks")
	}
}

// sampleOnly hides a storage's chunks.
type sampleOnly struct{ q storage.Queryable }

func (s sampleOnly) Querier(mint, maxt int64) (storage.Querier, error) {
	return s.q.Querier(mint, maxt)
}
