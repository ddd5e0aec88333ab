package query

import (
	"context"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// overlay is an in-memory set of float series that a planned query's
// results are written into, so the upstream engine can read them back as
// ordinary series and compose them with the rest of the expression.
type overlay struct {
	series map[string]*overlaySeries // by labels.String()
}

type overlaySeries struct {
	lset    labels.Labels
	samples []chunks.Sample
}

func newOverlay() *overlay { return &overlay{series: map[string]*overlaySeries{}} }

func (o *overlay) add(lset labels.Labels, t int64, v float64) {
	k := lset.String()
	s := o.series[k]
	if s == nil {
		s = &overlaySeries{lset: lset}
		o.series[k] = s
	}
	s.samples = append(s.samples, fsample{t: t, f: v})
}

// queryable merges the overlay over q.
func (o *overlay) queryable(q storage.Queryable) storage.Queryable {
	return storage.QueryableFunc(func(mint, maxt int64) (storage.Querier, error) {
		base, err := q.Querier(mint, maxt)
		if err != nil {
			return nil, err
		}
		return storage.NewMergeQuerier([]storage.Querier{base, &overlayQuerier{o: o, mint: mint, maxt: maxt}}, nil, storage.ChainedSeriesMerge), nil
	})
}

type overlayQuerier struct {
	o          *overlay
	mint, maxt int64
}

func (q *overlayQuerier) Select(_ context.Context, sortSeries bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for _, s := range q.o.series {
		if matchAll(s.lset, ms) {
			out = append(out, storage.NewListSeries(s.lset, s.samples))
		}
	}
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &listSet{series: out, i: -1}
}

func matchAll(ls labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (q *overlayQuerier) LabelValues(_ context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	var vs []string
	for _, s := range q.o.series {
		if matchAll(s.lset, ms) {
			if v := s.lset.Get(name); v != "" {
				vs = append(vs, v)
			}
		}
	}
	slices.Sort(vs)
	return slices.Compact(vs), nil, nil
}

func (q *overlayQuerier) LabelNames(_ context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	var ns []string
	for _, s := range q.o.series {
		if matchAll(s.lset, ms) {
			s.lset.Range(func(l labels.Label) { ns = append(ns, l.Name) })
		}
	}
	slices.Sort(ns)
	return slices.Compact(ns), nil, nil
}

func (q *overlayQuerier) Close() error { return nil }

type listSet struct {
	series []storage.Series
	i      int
}

func (l *listSet) Next() bool                        { l.i++; return l.i < len(l.series) }
func (l *listSet) At() storage.Series                { return l.series[l.i] }
func (l *listSet) Err() error                        { return nil }
func (l *listSet) Warnings() annotations.Annotations { return nil }

type fsample struct {
	t int64
	f float64
}

func (s fsample) T() int64                      { return s.t }
func (s fsample) ST() int64                     { return 0 }
func (s fsample) F() float64                    { return s.f }
func (s fsample) H() *histogram.Histogram       { return nil }
func (s fsample) FH() *histogram.FloatHistogram { return nil }
func (s fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fsample) Copy() chunks.Sample           { return s }
