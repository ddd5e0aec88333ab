package tsdb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/internal/tenant"
)

// The tenant wrappers confine a storage to the tenant of each call's
// context, as prom-label-proxy confines a Prometheus: every series of a
// tenant carries the tenant label (tenant.Tenant.Label = ID), stamped on
// write; every read gets the matcher Label="ID" added and the label
// stripped from what it returns, so a tenant sees its series with the
// labels it wrote and nothing else, whatever selectors it sends.
//
// A selector's own matchers on the tenant label are judged against that
// view, where the label does not exist: one that matches the empty value
// (tenant_id="", tenant_id=~".*", tenant_id!="B") is dropped, any other
// (tenant_id="B", tenant_id=~".+") selects nothing. No matcher can widen
// the enforced one, because the enforced one is always there.

// ErrNoTenant is returned by a tenant-confined read whose context carries
// no tenant: with tenancy on every API request has one, so this is a
// wiring bug, and it fails closed.
var ErrNoTenant = errors.New("tenancy: the request carries no tenant")

// TenantQueryable confines q to the tenant of each Select's context.
func TenantQueryable(q storage.Queryable) storage.Queryable { return tenantQueryable{q} }

type tenantQueryable struct{ q storage.Queryable }

func (tq tenantQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := tq.q.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return tenantQuerier{q}, nil
}

// ChunkQueryable confines the chunks of q where q serves them, directly
// or (the global view) while it says so: the fast PromQL path reads chunks
// through it (fast.ChunkSource) with the tenant matcher added as for
// samples.
func (tq tenantQueryable) ChunkQueryable() (storage.ChunkQueryable, bool) {
	var c storage.ChunkQueryable
	switch q := tq.q.(type) {
	case interface {
		ChunkQueryable() (storage.ChunkQueryable, bool)
	}:
		cq, ok := q.ChunkQueryable()
		if !ok {
			return nil, false
		}
		c = cq
	case storage.ChunkQueryable:
		c = q
	default:
		return nil, false
	}
	return tenantChunkQueryable{c}, true
}

type tenantChunkQueryable struct{ c storage.ChunkQueryable }

// OverlapTSDB hands the fast PromQL path the TSDB under a tenant's chunks
// (fast.OverlapSource) only to see whether they come from sources that
// overlap in time, where it reads sample iterators rather than chunks;
// reads still go through the confining querier. It returns nil where the
// chunks are no leased TSDB's.
func (tq tenantChunkQueryable) OverlapTSDB() (*ptsdb.DB, func(), error) {
	switch c := tq.c.(type) {
	case *DB:
		return c.LeaseTSDB()
	case *ptsdb.DB:
		return c, func() {}, nil
	}
	return nil, func() {}, nil
}

func (tq tenantChunkQueryable) ChunkQuerier(mint, maxt int64) (storage.ChunkQuerier, error) {
	q, err := tq.c.ChunkQuerier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return tenantChunkQuerier{q}, nil
}

// TenantSampleAndChunkQueryable is TenantQueryable for queriers and chunk
// queriers (the Prometheus API's remote read streams chunks).
func TenantSampleAndChunkQueryable(q storage.SampleAndChunkQueryable) storage.SampleAndChunkQueryable {
	return tenantSampleAndChunk{tenantQueryable{q}, q}
}

type tenantSampleAndChunk struct {
	tenantQueryable
	c storage.ChunkQueryable
}

func (tq tenantSampleAndChunk) ChunkQuerier(mint, maxt int64) (storage.ChunkQuerier, error) {
	return tenantChunkQueryable{tq.c}.ChunkQuerier(mint, maxt)
}

// tenantLabels implements the label half of a confined querier.
type tenantLabels struct{ q storage.LabelQuerier }

func (l tenantLabels) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	t := tenant.FromContext(ctx)
	if t == nil {
		return nil, nil, ErrNoTenant
	}
	if name == t.Label {
		return nil, nil, nil
	}
	ms, ok := t.Matchers(ms)
	if !ok {
		return nil, nil, nil
	}
	return l.q.LabelValues(ctx, name, hints, ms...)
}

func (l tenantLabels) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	t := tenant.FromContext(ctx)
	if t == nil {
		return nil, nil, ErrNoTenant
	}
	ms, ok := t.Matchers(ms)
	if !ok {
		return nil, nil, nil
	}
	names, ws, err := l.q.LabelNames(ctx, hints, ms...)
	return slices.DeleteFunc(names, func(n string) bool { return n == t.Label }), ws, err
}

func (l tenantLabels) Close() error { return l.q.Close() }

type tenantQuerier struct{ q storage.Querier }

func (q tenantQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return tenantLabels{q.q}.LabelValues(ctx, name, hints, ms...)
}

func (q tenantQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return tenantLabels{q.q}.LabelNames(ctx, hints, ms...)
}

func (q tenantQuerier) Close() error { return q.q.Close() }

func (q tenantQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	t := tenant.FromContext(ctx)
	if t == nil {
		return storage.ErrSeriesSet(ErrNoTenant)
	}
	ms, ok := t.Matchers(ms)
	if !ok {
		return storage.EmptySeriesSet()
	}
	set := q.q.Select(ctx, sortSeries, hints, ms...)
	if !sortSeries {
		return &strippedSet{set: set, label: t.Label}
	}
	return sortedStripped(set, t.Label)
}

// sortedStripped strips label from every series of set and sorts them
// again: dropping a label all of them share can change their order
// ({a="1",t="A"} sorts after {a="1",b="x",t="A"}, but {a="1"} before
// {a="1",b="x"}), and merging queriers rely on sorted sets.
func sortedStripped(set storage.SeriesSet, label string) storage.SeriesSet {
	var all []storage.Series
	for set.Next() {
		s := set.At()
		all = append(all, strippedSeries{s, dropLabel(s.Labels(), label)})
	}
	if err := set.Err(); err != nil {
		return storage.ErrSeriesSet(err)
	}
	slices.SortFunc(all, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &listSet{all: all, ws: set.Warnings()}
}

type strippedSeries struct {
	storage.Series
	ls labels.Labels
}

func (s strippedSeries) Labels() labels.Labels { return s.ls }

type strippedSet struct {
	set   storage.SeriesSet
	label string
}

func (s *strippedSet) Next() bool { return s.set.Next() }
func (s *strippedSet) At() storage.Series {
	in := s.set.At()
	return strippedSeries{in, dropLabel(in.Labels(), s.label)}
}
func (s *strippedSet) Err() error                        { return s.set.Err() }
func (s *strippedSet) Warnings() annotations.Annotations { return s.set.Warnings() }

type listSet struct {
	all []storage.Series
	i   int
	ws  annotations.Annotations
}

func (s *listSet) Next() bool {
	if s.i >= len(s.all) {
		return false
	}
	s.i++
	return true
}
func (s *listSet) At() storage.Series                { return s.all[s.i-1] }
func (s *listSet) Err() error                        { return nil }
func (s *listSet) Warnings() annotations.Annotations { return s.ws }

type tenantChunkQuerier struct{ q storage.ChunkQuerier }

func (q tenantChunkQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return tenantLabels{q.q}.LabelValues(ctx, name, hints, ms...)
}

func (q tenantChunkQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return tenantLabels{q.q}.LabelNames(ctx, hints, ms...)
}

func (q tenantChunkQuerier) Close() error { return q.q.Close() }

func (q tenantChunkQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.ChunkSeriesSet {
	t := tenant.FromContext(ctx)
	if t == nil {
		return storage.ErrChunkSeriesSet(ErrNoTenant)
	}
	ms, ok := t.Matchers(ms)
	if !ok {
		return storage.EmptyChunkSeriesSet()
	}
	set := q.q.Select(ctx, sortSeries, hints, ms...)
	var all []storage.ChunkSeries
	for set.Next() {
		s := set.At()
		all = append(all, strippedChunkSeries{s, dropLabel(s.Labels(), t.Label)})
	}
	if err := set.Err(); err != nil {
		return storage.ErrChunkSeriesSet(err)
	}
	if sortSeries {
		slices.SortFunc(all, func(a, b storage.ChunkSeries) int { return labels.Compare(a.Labels(), b.Labels()) })
	}
	return &chunkListSet{all: all, ws: set.Warnings()}
}

type strippedChunkSeries struct {
	storage.ChunkSeries
	ls labels.Labels
}

func (s strippedChunkSeries) Labels() labels.Labels { return s.ls }

type chunkListSet struct {
	all []storage.ChunkSeries
	i   int
	ws  annotations.Annotations
}

func (s *chunkListSet) Next() bool {
	if s.i >= len(s.all) {
		return false
	}
	s.i++
	return true
}
func (s *chunkListSet) At() storage.ChunkSeries           { return s.all[s.i-1] }
func (s *chunkListSet) Err() error                        { return nil }
func (s *chunkListSet) Warnings() annotations.Annotations { return s.ws }

// TenantExemplarQueryable confines exemplar queries to the tenant of the
// context ExemplarQuerier is called with.
func TenantExemplarQueryable(eq storage.ExemplarQueryable) storage.ExemplarQueryable {
	return tenantExemplars{eq}
}

type tenantExemplars struct{ eq storage.ExemplarQueryable }

func (e tenantExemplars) ExemplarQuerier(ctx context.Context) (storage.ExemplarQuerier, error) {
	t := tenant.FromContext(ctx)
	if t == nil {
		return nil, ErrNoTenant
	}
	q, err := e.eq.ExemplarQuerier(ctx)
	if err != nil {
		return nil, err
	}
	return tenantExemplarQuerier{q, t}, nil
}

type tenantExemplarQuerier struct {
	q storage.ExemplarQuerier
	t *tenant.Tenant
}

func (q tenantExemplarQuerier) Select(start, end int64, sets ...[]*labels.Matcher) ([]exemplar.QueryResult, error) {
	if len(sets) == 0 {
		sets = [][]*labels.Matcher{nil}
	}
	confined := make([][]*labels.Matcher, 0, len(sets))
	for _, ms := range sets {
		if c, ok := q.t.Matchers(ms); ok {
			confined = append(confined, c)
		}
	}
	if len(confined) == 0 {
		return nil, nil
	}
	res, err := q.q.Select(start, end, confined...)
	for i := range res {
		res[i].SeriesLabels = dropLabel(res[i].SeriesLabels, q.t.Label)
	}
	return res, err
}

// TenantAppendable stamps the tenant of each appender's context on every
// series appended through it, replacing any value of the tenant label the
// writer sent, and enforces the tenant's active-series and samples/s
// limits (refusals are *tenant.LimitError). A context without a tenant
// (tenancy off, series derived from request records, which carry the
// label already) appends unchanged.
func TenantAppendable(a storage.AppendableV2) storage.AppendableV2 { return tenantAppendable{a} }

type tenantAppendable struct{ a storage.AppendableV2 }

func (ta tenantAppendable) AppenderV2(ctx context.Context) storage.AppenderV2 {
	app := ta.a.AppenderV2(ctx)
	t := tenant.FromContext(ctx)
	if t == nil {
		return app
	}
	ex, _ := app.(storage.ExemplarAppenderV2)
	return &tenantAppender{app: app, ex: ex, t: t, b: labels.NewBuilder(labels.EmptyLabels()), series: t.Series()}
}

type tenantAppender struct {
	app     storage.AppenderV2
	ex      storage.ExemplarAppenderV2
	t       *tenant.Tenant
	b       *labels.Builder
	series  *tenant.SeriesBatch
	samples int
}

func (a *tenantAppender) stamp(ls labels.Labels) labels.Labels {
	a.b.Reset(ls)
	a.b.Set(a.t.Label, a.t.ID)
	return a.b.Labels()
}

// Append stamps ls. The caller's ref is dropped: a writer's series cache
// is keyed by the labels it sent, which two tenants can share, so a ref
// would name another tenant's series; the head looks the series up by its
// stamped labels instead.
func (a *tenantAppender) Append(_ storage.SeriesRef, ls labels.Labels, st, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts storage.AOptions) (storage.SeriesRef, error) {
	ls = a.stamp(ls)
	if err := a.series.Add(ls.Hash()); err != nil {
		return 0, err
	}
	ref, err := a.app.Append(0, ls, st, t, v, h, fh, opts)
	if err == nil {
		a.samples++
	}
	return ref, err
}

// AppendExemplars stamps ls and drops ref, as Append does.
func (a *tenantAppender) AppendExemplars(_ storage.SeriesRef, ls labels.Labels, exs []exemplar.Exemplar) (storage.SeriesRef, error) {
	if a.ex == nil {
		return 0, fmt.Errorf("exemplars: %w", storage.ErrNotFound)
	}
	return a.ex.AppendExemplars(0, a.stamp(ls), exs)
}

// Commit admits the appender's samples under the tenant's samples/s
// limit as a whole, or rolls everything back.
func (a *tenantAppender) Commit() error {
	if err := a.t.AllowSamples(a.samples); err != nil {
		_ = a.app.Rollback()
		a.series.Rollback()
		return err
	}
	if err := a.app.Commit(); err != nil {
		a.series.Rollback()
		return err
	}
	a.series.Commit()
	return nil
}

func (a *tenantAppender) Rollback() error {
	a.series.Rollback()
	return a.app.Rollback()
}

// dropLabel returns ls without the label name; ls itself when it has none.
func dropLabel(ls labels.Labels, name string) labels.Labels {
	if !ls.Has(name) {
		return ls
	}
	return labels.NewBuilder(ls).Del(name).Labels()
}
