package causalfn

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/query"
)

// series is one input series: its labels and its float points, oldest
// first. NaN values are kept here and treated as missing by align.
type series struct {
	labels labels.Labels
	// family is the metric the series' argument selects when the series
	// itself has no name (rate(x[1m]) drops it); "" if unknown.
	family string
	t      []int64
	v      []float64
}

// isMetricName selects the metric name label for DropReserved.
func isMetricName(n string) bool { return n == model.MetricNameLabel }

// name is the series' metric name, or its argument's family.
func (s *series) name() string {
	if n := s.labels.Get(model.MetricNameLabel); n != "" {
		return n
	}
	return s.family
}

// id is how results and errors name the series: metric{labels}.
func (s *series) id() string {
	rest := s.labels.DropReserved(isMetricName)
	if rest.IsEmpty() {
		return s.name() + "{}"
	}
	return s.name() + rest.String()
}

// arg describes one argument for error messages.
type arg struct {
	index int    // 0-based
	role  string // "outcome", "candidates", …
}

func (a arg) String() string { return fmt.Sprintf("argument %d (%s)", a.index+1, a.role) }

// matrixArg evaluates argument a of c into series, sorted by labels. A
// series holding native histograms is an error: the functions need floats.
func matrixArg(ctx context.Context, c *query.Call, a arg) ([]series, error) {
	m, err := c.Matrix(ctx, a.index)
	if err != nil {
		return nil, err
	}
	fam := Family(c.Args[a.index])
	out := make([]series, 0, len(m))
	for _, s := range m {
		if len(s.Histograms) > 0 {
			return nil, fmt.Errorf("%s: %s: series %s holds native histograms; pass floats, e.g. histogram_quantile(0.99, …) or histogram_avg(…)",
				c.Func.Name, a, s.Metric)
		}
		x := series{labels: s.Metric, family: fam, t: make([]int64, len(s.Floats)), v: make([]float64, len(s.Floats))}
		for i, p := range s.Floats {
			x.t[i], x.v[i] = p.T, p.F
		}
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b series) int { return labels.Compare(a.labels, b.labels) })
	return out, nil
}

// oneArg evaluates argument a, which must hold exactly one series.
func oneArg(ctx context.Context, c *query.Call, a arg) (series, error) {
	ss, err := matrixArg(ctx, c, a)
	if err != nil {
		return series{}, err
	}
	switch len(ss) {
	case 0:
		return series{}, fmt.Errorf("%s: %s selects no series in the window", c.Func.Name, a)
	case 1:
		return ss[0], nil
	}
	return series{}, fmt.Errorf("%s: %s has %d series, want 1: aggregate it, e.g. avg(…) or sum by () (…)", c.Func.Name, a, len(ss))
}

// scalarArg evaluates argument a as an integer in [lo, hi].
func intArg(ctx context.Context, c *query.Call, a arg, lo, hi int) (int, error) {
	v, err := c.Scalar(ctx, a.index)
	if err != nil {
		return 0, err
	}
	if v != math.Trunc(v) || v < float64(lo) || v > float64(hi) {
		return 0, fmt.Errorf("%s: %s must be an integer in [%d, %d], got %v", c.Func.Name, a, lo, hi, v)
	}
	return int(v), nil
}

// Family returns the metric family an expression selects when it selects
// exactly one (histogram _bucket/_sum/_count suffixes removed, so
// rate(x_sum[1m]) / rate(x_count[1m]) is family x), else "".
func Family(e parser.Expr) string {
	names := map[string]bool{}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			names[""] = true
			return nil
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok {
				name = b
				break
			}
		}
		names[name] = true
		return nil
	})
	if len(names) != 1 {
		return ""
	}
	for n := range names {
		return n
	}
	return ""
}

// align returns the timestamps at which every series has a finite value,
// and each series' values there. Series from one subquery share its step
// grid, so this keeps their common points; a point that is missing or NaN
// in any series is dropped from all.
func align(ss ...*series) (ts []int64, vals [][]float64) {
	if len(ss) == 0 {
		return nil, nil
	}
	pos := make([]int, len(ss))
	vals = make([][]float64, len(ss))
	for _, t := range ss[0].t {
		ok := true
		for k, s := range ss {
			for pos[k] < len(s.t) && s.t[pos[k]] < t {
				pos[k]++
			}
			if pos[k] >= len(s.t) || s.t[pos[k]] != t || math.IsNaN(s.v[pos[k]]) || math.IsInf(s.v[pos[k]], 0) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		ts = append(ts, t)
		for k, s := range ss {
			vals[k] = append(vals[k], s.v[pos[k]])
		}
	}
	return ts, vals
}

// gridStep is the most common spacing of ts (the subquery step), 0 for
// fewer than two points.
func gridStep(ts []int64) int64 {
	count := map[int64]int{}
	var best int64
	for i := 1; i < len(ts); i++ {
		d := ts[i] - ts[i-1]
		count[d]++
		if count[d] > count[best] || (count[d] == count[best] && d < best) {
			best = d
		}
	}
	return best
}

// contiguous checks that aligned timestamps have no hole: lagged models
// (Granger, cross-correlation) pair x_{t−k} with y_t by position, and a
// dropped point would pair the wrong times.
func contiguous(ts []int64, step int64) error {
	for i := 1; i < len(ts); i++ {
		if d := ts[i] - ts[i-1]; d > step+step/2 {
			return fmt.Errorf("no value at %s (a gap of %ds in a %ds grid); lagged tests need gap-free series: fill the gap (e.g. `or vector(0)`) or narrow the window",
				formatTime(ts[i-1]+step), d/1000, step/1000)
		}
	}
	return nil
}

func formatTime(ms int64) string {
	return fmt.Sprintf("%.3f", float64(ms)/1000)
}

// result builds a function's output vector at one evaluation time.
type result struct {
	t   int64
	vec promql.Vector
}

// add appends one statistic of series s: s's labels without the metric
// name, plus candidate = s.id() and the given label pairs.
func (r *result) add(s *series, f float64, pairs ...string) {
	b := labels.NewBuilder(s.labels)
	b.Del(model.MetricNameLabel)
	b.Set("candidate", s.id())
	for i := 0; i+1 < len(pairs); i += 2 {
		b.Set(pairs[i], pairs[i+1])
	}
	r.vec = append(r.vec, promql.Sample{Metric: b.Labels(), T: r.t, F: f})
}

// skipper collects per-candidate failures: a candidate that cannot be
// tested is left out with a warning, unless every candidate fails, when the
// first failure is the error.
type skipper struct {
	fn    string
	annos annotations.Annotations
	first error
	ok    int
}

func (k *skipper) fail(s *series, err error) {
	if k.first == nil {
		k.first = fmt.Errorf("%s: candidate %s: %w", k.fn, s.id(), err)
	}
	if k.annos == nil {
		k.annos = annotations.Annotations{}
	}
	k.annos.Add(fmt.Errorf("%w: %s: candidate %s left out: %v", annotations.PromQLWarning, k.fn, s.id(), err))
}

// done returns the warnings, or the error when no candidate succeeded.
func (k *skipper) done(n int) (annotations.Annotations, error) {
	if n > 0 && k.ok == 0 && k.first != nil {
		return nil, k.first
	}
	return k.annos, nil
}

// sortStats orders results by candidate, then statistic, for stable output.
func sortStats(v promql.Vector) {
	slices.SortFunc(v, func(a, b promql.Sample) int {
		return cmp.Compare(a.Metric.String(), b.Metric.String())
	})
}
