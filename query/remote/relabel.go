package remote

import (
	"context"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// relabel shows a querier's series with external labels added (a series'
// own label wins) and replica labels dropped, re-sorted and with equal
// label sets merged. With nothing to add or drop it is the querier itself.
type relabel struct {
	storage.Querier
	ext     labels.Labels
	replica []string
	merge   storage.VerticalSeriesMergeFunc
}

func newRelabel(q storage.Querier, ext labels.Labels, replica []string, merge storage.VerticalSeriesMergeFunc) storage.Querier {
	if ext.IsEmpty() && len(replica) == 0 {
		return q
	}
	return &relabel{Querier: q, ext: ext, replica: replica, merge: merge}
}

// filter answers matchers on external label names from the external value:
// a matcher the value satisfies is dropped (the stored series lack the
// label), one it does not satisfy means nothing here can match — the rule
// of Prometheus' remote read handler.
func (r *relabel) filter(ms []*labels.Matcher) ([]*labels.Matcher, bool) {
	if r.ext.IsEmpty() {
		return ms, true
	}
	out := make([]*labels.Matcher, 0, len(ms))
	for _, m := range ms {
		if v := r.ext.Get(m.Name); v != "" {
			if !m.Matches(v) {
				return nil, false
			}
			continue
		}
		out = append(out, m)
	}
	return out, true
}

func (r *relabel) labels(ls labels.Labels) labels.Labels {
	b := labels.NewBuilder(ls)
	r.ext.Range(func(l labels.Label) {
		if !ls.Has(l.Name) {
			b.Set(l.Name, l.Value)
		}
	})
	b.Del(r.replica...)
	return b.Labels()
}

func (r *relabel) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	fms, ok := r.filter(ms)
	if !ok {
		return storage.EmptySeriesSet()
	}
	if len(fms) == 0 {
		// Every matcher was on an external label: select everything here.
		fms = []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, model.MetricNameLabel, ".+")}
	}
	set := r.Querier.Select(ctx, true, hints, fms...)
	var out []storage.Series
	for set.Next() {
		s := set.At()
		out = append(out, relabeledSeries{Series: s, lset: r.labels(s.Labels())})
	}
	if err := set.Err(); err != nil {
		return storage.ErrSeriesSet(err)
	}
	return &sliceSet{series: sortAndMerge(out, r.merge), warnings: set.Warnings()}
}

func (r *relabel) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	if slices.Contains(r.replica, name) {
		return nil, nil, nil
	}
	fms, ok := r.filter(ms)
	if !ok {
		return nil, nil, nil
	}
	vals, a, err := r.Querier.LabelValues(ctx, name, hints, fms...)
	if err != nil {
		return nil, a, err
	}
	if v := r.ext.Get(name); v != "" && !slices.Contains(vals, v) {
		// Local series without their own value show the external one.
		vals = append(vals, v)
		slices.Sort(vals)
	}
	return vals, a, nil
}

func (r *relabel) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	fms, ok := r.filter(ms)
	if !ok {
		return nil, nil, nil
	}
	names, a, err := r.Querier.LabelNames(ctx, hints, fms...)
	if err != nil {
		return nil, a, err
	}
	r.ext.Range(func(l labels.Label) {
		if !slices.Contains(names, l.Name) {
			names = append(names, l.Name)
		}
	})
	names = slices.DeleteFunc(names, func(n string) bool { return slices.Contains(r.replica, n) })
	slices.Sort(names)
	return names, a, nil
}
