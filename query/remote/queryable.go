package remote

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// Store is one remote source of series.
type Store interface {
	// Name identifies the store in annotations and logs: its address, or
	// the remote_read entry's name.
	Name() string
	storage.Queryable
}

// Options configures the global view. The zero value is not useful; start
// from DefaultOptions.
type Options struct {
	// ExternalLabels returns the local server's external labels in force
	// (global.external_labels), added to local series. Nil means none.
	ExternalLabels func() labels.Labels
	// Stores returns the remote stores in force; it is called once per
	// querier, so a configuration reload takes effect at the next query.
	// Nil means none.
	Stores func() []Store
	// ReplicaLabels are dropped from every series, local and remote, so that
	// replicas merge into one series. Empty means no deduplication beyond
	// identical label sets.
	ReplicaLabels []string
	// PartialResponse answers a query from the stores that answered when
	// others failed (with a warning naming each failure); false fails the
	// query. A request overrides it with WithPartialResponse.
	PartialResponse bool
	// Registerer, when set, receives per-store metrics:
	// tailroot_remote_store_requests_total{store, call, outcome} and
	// tailroot_remote_store_request_duration_seconds{store, call}.
	Registerer prometheus.Registerer
}

// storeMetrics count what each store was asked and how it answered, so an
// operator sees a store that fails or slows down without reading
// annotations.
type storeMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	m := &storeMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_remote_store_requests_total",
			Help: "Requests of global queries to each remote store, by call (select, label_names, label_values) and outcome (answered, failed).",
		}, []string{"store", "call", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                        "tailroot_remote_store_request_duration_seconds",
			Help:                        "Time until a remote store's whole answer to a request of a global query was read.",
			NativeHistogramBucketFactor: 1.1,
			Buckets:                     prometheus.DefBuckets,
		}, []string{"store", "call"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration)
	}
	return m
}

func (m *storeMetrics) observe(store, call string, start time.Time, err error) {
	outcome := "answered"
	if err != nil {
		outcome = "failed"
	}
	m.requests.WithLabelValues(store, call, outcome).Inc()
	m.duration.WithLabelValues(store, call).Observe(time.Since(start).Seconds())
}

// DefaultOptions has partial response on, as Thanos Query has by default.
func DefaultOptions() Options { return Options{PartialResponse: true} }

type partialKey struct{}

// WithPartialResponse overrides Options.PartialResponse for queries run
// with ctx.
func WithPartialResponse(ctx context.Context, allow bool) context.Context {
	return context.WithValue(ctx, partialKey{}, allow)
}

func partialAllowed(ctx context.Context, def bool) bool {
	if v, ok := ctx.Value(partialKey{}).(bool); ok {
		return v
	}
	return def
}

// Queryable is the local storage merged with the remote stores.
type Queryable struct {
	local   storage.Queryable
	opts    Options
	metrics *storeMetrics
}

// New returns the global view over local (nil for a node without local
// data) and the stores of opts.
func New(local storage.Queryable, opts Options) *Queryable {
	return &Queryable{local: local, opts: opts, metrics: newStoreMetrics(opts.Registerer)}
}

// ChunkQueryable returns the local storage for reading chunks while no
// remote store is in force (the view is then the local TSDB as it is, see
// Querier), and false otherwise: the stores answer in samples, merged. The
// fast PromQL path asks it (fast.ChunkSource) so that a single node's
// queries decode chunks themselves, as they do on the TSDB directly.
func (g *Queryable) ChunkQueryable() (storage.ChunkQueryable, bool) {
	if g.local == nil || (g.opts.Stores != nil && len(g.opts.Stores()) > 0) {
		return nil, false
	}
	c, ok := g.local.(storage.ChunkQueryable)
	return c, ok
}

// Querier implements storage.Queryable.
func (g *Queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	var stores []Store
	if g.opts.Stores != nil {
		stores = g.opts.Stores()
	}
	if len(stores) == 0 && g.local != nil {
		// No remote store in force: the local TSDB as it is, without
		// external labels, exactly as a single node answers.
		return g.local.Querier(mint, maxt)
	}
	var ext labels.Labels
	if g.opts.ExternalLabels != nil {
		ext = g.opts.ExternalLabels()
	}
	// Replicas (series equal once replica labels are dropped) merge as
	// Thanos merges them; without replica labels, equal series are the
	// same data seen twice (or a store's history and the local recent
	// part), and their union is right.
	merge := storage.ChainedSeriesMerge
	if len(g.opts.ReplicaLabels) > 0 {
		merge = penaltyMerge
	}
	qs := make([]storage.Querier, 0, len(stores)+1)
	if g.local != nil {
		lq, err := g.local.Querier(mint, maxt)
		if err != nil {
			return nil, fmt.Errorf("local querier: %w", err)
		}
		qs = append(qs, newRelabel(lq, ext, g.opts.ReplicaLabels, merge))
	}
	for _, s := range stores {
		sq := &storeQuerier{name: s.Name(), partial: g.opts.PartialResponse, metrics: g.metrics}
		sq.q, sq.openErr = s.Querier(mint, maxt)
		qs = append(qs, newRelabel(sq, labels.EmptyLabels(), g.opts.ReplicaLabels, merge))
	}
	// Every source is a primary: storeQuerier itself turns a failure into a
	// warning or an error as partial response says, which a secondary
	// querier could not (it always downgrades errors to warnings).
	return storage.NewMergeQuerier(qs, nil, merge), nil
}

// storeQuerier reads one remote store whole and reports it by name:
// answered (info), failed (warning, or error without partial response).
type storeQuerier struct {
	name    string
	q       storage.Querier
	openErr error
	partial bool
	metrics *storeMetrics
}

func (s *storeQuerier) fail(ctx context.Context, err error) (annotations.Annotations, error) {
	if partialAllowed(ctx, s.partial) {
		var a annotations.Annotations
		a.Add(fmt.Errorf("%w: store %s failed, the answer is partial: %v", annotations.PromQLWarning, s.name, err))
		return a, nil
	}
	return nil, fmt.Errorf("store %s: %w", s.name, err)
}

func (s *storeQuerier) answered(a annotations.Annotations) annotations.Annotations {
	a.Add(fmt.Errorf("%w: store %s answered", annotations.PromQLInfo, s.name))
	return a
}

func (s *storeQuerier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	if s.openErr != nil {
		s.metrics.observe(s.name, "select", time.Now(), s.openErr)
		a, err := s.fail(ctx, s.openErr)
		if err != nil {
			return storage.ErrSeriesSet(err)
		}
		return &sliceSet{warnings: a}
	}
	start := time.Now()
	set := s.q.Select(ctx, true, hints, ms...)
	var out []storage.Series
	for set.Next() {
		out = append(out, set.At())
	}
	warn := set.Warnings()
	s.metrics.observe(s.name, "select", start, set.Err())
	if err := set.Err(); err != nil {
		a, ferr := s.fail(ctx, err)
		if ferr != nil {
			return storage.ErrSeriesSet(ferr)
		}
		return &sliceSet{warnings: a.Merge(warn)}
	}
	return &sliceSet{series: out, warnings: s.answered(warn)}
}

func (s *storeQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	if s.openErr != nil {
		a, err := s.fail(ctx, s.openErr)
		return nil, a, err
	}
	start := time.Now()
	v, a, err := s.q.LabelValues(ctx, name, hints, ms...)
	s.metrics.observe(s.name, "label_values", start, err)
	if err != nil {
		a2, ferr := s.fail(ctx, err)
		return nil, a2.Merge(a), ferr
	}
	return v, s.answered(a), nil
}

func (s *storeQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	if s.openErr != nil {
		a, err := s.fail(ctx, s.openErr)
		return nil, a, err
	}
	start := time.Now()
	v, a, err := s.q.LabelNames(ctx, hints, ms...)
	s.metrics.observe(s.name, "label_names", start, err)
	if err != nil {
		a2, ferr := s.fail(ctx, err)
		return nil, a2.Merge(a), ferr
	}
	return v, s.answered(a), nil
}

func (s *storeQuerier) Close() error {
	if s.q == nil {
		return nil
	}
	return s.q.Close()
}

// sliceSet is a SeriesSet over series held in memory, sorted by labels.
type sliceSet struct {
	series   []storage.Series
	i        int
	warnings annotations.Annotations
}

func (s *sliceSet) Next() bool {
	if s.i >= len(s.series) {
		return false
	}
	s.i++
	return true
}

func (s *sliceSet) At() storage.Series                { return s.series[s.i-1] }
func (*sliceSet) Err() error                          { return nil }
func (s *sliceSet) Warnings() annotations.Annotations { return s.warnings }

// relabeledSeries is a series shown under other labels.
type relabeledSeries struct {
	storage.Series
	lset labels.Labels
}

func (s relabeledSeries) Labels() labels.Labels { return s.lset }

// sortAndMerge sorts series by labels and merges those with equal label
// sets with merge.
func sortAndMerge(ss []storage.Series, merge storage.VerticalSeriesMergeFunc) []storage.Series {
	slices.SortStableFunc(ss, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	out := ss[:0]
	for i := 0; i < len(ss); {
		j := i + 1
		for j < len(ss) && labels.Equal(ss[i].Labels(), ss[j].Labels()) {
			j++
		}
		if j == i+1 {
			out = append(out, ss[i])
		} else {
			// Clone: the merged series keeps its slice, and out reuses ss.
			out = append(out, merge(slices.Clone(ss[i:j])...))
		}
		i = j
	}
	return out
}

// LocalOnly reports whether queries read only the local storage now: no
// remote store is in force, so the answer is the local TSDB's, exactly.
// The results cache is told about local writes only, and caches only then.
func (g *Queryable) LocalOnly() bool {
	return g.opts.Stores == nil || len(g.opts.Stores()) == 0
}
