package tailfn

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/common/model"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query"
)

// LabelE2EBucket is the label of tail-accumulator series holding the
// upper bound (seconds, as Prometheus formats le, "+Inf" for the overflow
// bucket) of the end-to-end bucket the stage sums belong to.
const LabelE2EBucket = "e2e_bucket"

// group is the series of one output group: the input labels other than
// the ones a function consumes.
type group struct {
	labels labels.Labels
	items  []promql.Sample
}

// groupBy splits v by its labels without drop (and the metric name), in
// order of first appearance.
func groupBy(v promql.Vector, drop ...string) []*group {
	drop = append(drop, model.MetricNameLabel)
	idx := map[string]*group{}
	var out []*group
	for _, s := range v {
		ls := labels.NewBuilder(s.Metric).Del(drop...).Labels()
		k := ls.String()
		g := idx[k]
		if g == nil {
			g = &group{labels: ls}
			idx[k] = g
			out = append(out, g)
		}
		g.items = append(g.items, s)
	}
	return out
}

// stageOrder sorts stage names canonically: known stages in record order,
// then others alphabetically.
func stageOrder(names []string) []string {
	rank := func(s string) int {
		if i := slices.Index(StageNames, s); i >= 0 {
			return i
		}
		return len(StageNames)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return slices.Compact(names)
}

// parseBound parses an e2e_bucket or le label value.
func parseBound(name, v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 {
		return 0, fmt.Errorf("label %s=%q is not a non-negative bound", name, v)
	}
	return f, nil
}

// accumulatorGrid builds the grid of the bounds seen: DefaultGrid when
// every finite bound is one of its bounds (so a bucket missing from the
// input, an empty one, keeps its true edges), otherwise the bounds seen.
// A grid from the bounds seen merges a missing bucket into the next one;
// TailMeanAccumulators' brackets stay valid, only wider.
func accumulatorGrid(bounds []float64) (attribution.Grid, error) {
	finite := slices.DeleteFunc(slices.Clone(bounds), func(b float64) bool { return math.IsInf(b, 1) })
	slices.Sort(finite)
	finite = slices.Compact(finite)
	def := attribution.DefaultGrid()
	onDefault := true
	for _, b := range finite {
		if _, ok := slices.BinarySearch(def.Upper(), b); !ok {
			onDefault = false
			break
		}
	}
	if onDefault && len(finite) > 0 {
		return def, nil
	}
	if len(finite) == 0 {
		// Only the overflow bucket: one bound at 0 leaves every request in
		// (0, +Inf).
		return attribution.NewGrid([]float64{0})
	}
	return attribution.NewGrid(finite)
}

// tailMeanFromAccumulators implements
// tail_mean_from_accumulators(p, sums, counts [, statistic]).
func tailMeanFromAccumulators(ctx context.Context, c *query.Call, _ RecordSource) (promql.Vector, annotations.Annotations, error) {
	p, err := levelArg(ctx, c, 0, "p")
	if err != nil {
		return nil, nil, err
	}
	sel, err := statisticArg(c, 3, "contribution", append(breakdownStats, "lower", "upper"))
	if err != nil {
		return nil, nil, err
	}
	sums, err := c.Vector(ctx, 1)
	if err != nil {
		return nil, nil, err
	}
	counts, err := c.Vector(ctx, 2)
	if err != nil {
		return nil, nil, err
	}
	groups, annos, err := TailMeanFromAccumulators(sums, counts, p)
	if err != nil {
		return nil, annos, err
	}
	o := newRows(c)
	for _, g := range groups {
		o.base = g.Labels
		emitBreakdown(o, g.Breakdown, accKinds, sel, g.Requests)
	}
	return o.vec, annos, nil
}

// GroupBreakdown is the breakdown of one output group of a function over
// series: the input labels other than those the function consumes.
type GroupBreakdown struct {
	Labels    labels.Labels
	Breakdown attribution.Breakdown
	// Requests is the number of requests the group's counts hold (not an
	// integer when the counts come from increase()).
	Requests float64
}

// TailMeanFromAccumulators is tail_mean_from_accumulators over evaluated
// vectors: sums holds the stage sums (labels stage and e2e_bucket), counts
// the request counts (label e2e_bucket); a group is the labels besides
// those. A group whose sums have no counts, or whose accumulators hold no
// requests, is left out with a warning; a malformed series is an error.
// The PromQL function and the attribution endpoints both call it.
func TailMeanFromAccumulators(sums, counts promql.Vector, p float64) ([]GroupBreakdown, annotations.Annotations, error) {
	const fn = "tail_mean_from_accumulators"
	countGroups := map[string]*group{}
	for _, g := range groupBy(counts, LabelE2EBucket) {
		countGroups[g.labels.String()] = g
	}
	var annos annotations.Annotations
	var out []GroupBreakdown
	for _, g := range groupBy(sums, LabelStage, LabelE2EBucket) {
		cg := countGroups[g.labels.String()]
		if cg == nil {
			annos.Add(fmt.Errorf("%w: %s: stage sums %s have no counts with the same labels", annotations.PromQLWarning, fn, g.labels))
			continue
		}
		acc, err := buildAccumulators(g, cg)
		if err != nil {
			return nil, annos, fmt.Errorf("%s: %w", fn, err)
		}
		b, err := attribution.TailMeanAccumulators(acc, p)
		if err != nil {
			annos.Add(fmt.Errorf("%w: %s: %s: %v", annotations.PromQLWarning, fn, g.labels, err))
			continue
		}
		n := 0.0
		for _, v := range acc.Count {
			n += v
		}
		out = append(out, GroupBreakdown{Labels: g.labels, Breakdown: b, Requests: n})
	}
	return out, annos, nil
}

// buildAccumulators turns the sums and counts of one group into
// accumulators on their grid.
func buildAccumulators(sums, counts *group) (*attribution.Accumulators, error) {
	var bounds []float64
	var stages []string
	parse := func(s promql.Sample, what string) (float64, error) {
		if s.H != nil {
			return 0, fmt.Errorf("%s %s is a histogram, want a float series", what, s.Metric)
		}
		return parseBound(LabelE2EBucket, s.Metric.Get(LabelE2EBucket))
	}
	for _, s := range sums.items {
		b, err := parse(s, "stage sum")
		if err != nil {
			return nil, err
		}
		st := s.Metric.Get(LabelStage)
		if st == "" {
			return nil, fmt.Errorf("stage sum %s has no %s label", s.Metric, LabelStage)
		}
		bounds = append(bounds, b)
		stages = append(stages, st)
	}
	for _, s := range counts.items {
		b, err := parse(s, "count")
		if err != nil {
			return nil, err
		}
		bounds = append(bounds, b)
	}
	grid, err := accumulatorGrid(bounds)
	if err != nil {
		return nil, err
	}
	stages = stageOrder(stages)
	acc := attribution.NewAccumulators(grid, stages)
	for _, s := range counts.items {
		b, _ := parseBound(LabelE2EBucket, s.Metric.Get(LabelE2EBucket))
		acc.Count[grid.Bucket(b)] += s.F
	}
	for _, s := range sums.items {
		b, _ := parseBound(LabelE2EBucket, s.Metric.Get(LabelE2EBucket))
		j := slices.Index(stages, s.Metric.Get(LabelStage))
		acc.Sum[j][grid.Bucket(b)] += s.F
	}
	return acc, nil
}

// StageHistograms is the per-stage histograms of one group, in canonical
// stage order (see StageHistogramGroups).
type StageHistograms struct {
	Labels labels.Labels
	Stages []string
	Hists  []attribution.Histogram
}

// histogramArgs evaluates the histogram argument at i and, when present,
// the sums argument at i+1, and groups them.
func histogramArgs(ctx context.Context, c *query.Call, i int, annos *annotations.Annotations) ([]StageHistograms, error) {
	v, err := c.Vector(ctx, i)
	if err != nil {
		return nil, err
	}
	var sv promql.Vector
	if i+1 < len(c.Args) {
		if sv, err = c.Vector(ctx, i+1); err != nil {
			return nil, err
		}
	}
	groups, sumsBad, err := stageHistogramGroups(v, sv, annos, c.Func.Name)
	switch {
	case err != nil && sumsBad:
		return nil, argError(c, i+1, "sums", err)
	case err != nil:
		return nil, argError(c, i, "histograms", err)
	}
	return groups, nil
}

// StageHistogramGroups converts an evaluated vector of stage histograms
// (label stage; native histograms, or classic buckets with label le) to
// the attribution model, one group per labels besides stage and le. sums
// (may be empty) gives the sum of a classic-bucket stage, with the same
// labels. The histogram functions and the attribution endpoints both call
// it.
func StageHistogramGroups(v, sums promql.Vector) ([]StageHistograms, annotations.Annotations, error) {
	var annos annotations.Annotations
	groups, _, err := stageHistogramGroups(v, sums, &annos, "stage histograms")
	return groups, annos, err
}

// stageHistogramGroups is StageHistogramGroups; sumsBad says the error is
// in sums.
func stageHistogramGroups(v, sv promql.Vector, annos *annotations.Annotations, fn string) (_ []StageHistograms, sumsBad bool, _ error) {
	sums := map[string]float64{}
	for _, s := range sv {
		if s.H != nil {
			return nil, true, fmt.Errorf("%s is a histogram, want float sums", s.Metric)
		}
		sums[labels.NewBuilder(s.Metric).Del(model.MetricNameLabel).Labels().String()] = s.F
	}
	var out []StageHistograms
	for _, g := range groupBy(v, LabelStage, "le") {
		byStage := map[string][]promql.Sample{}
		var names []string
		for _, s := range g.items {
			st := s.Metric.Get(LabelStage)
			if st == "" {
				return nil, false, fmt.Errorf("%s has no %s label: add one, e.g. with label_replace", s.Metric, LabelStage)
			}
			byStage[st] = append(byStage[st], s)
			names = append(names, st)
		}
		sh := StageHistograms{Labels: g.labels, Stages: stageOrder(names)}
		for _, st := range sh.Stages {
			sumKey := labels.NewBuilder(g.labels).Set(LabelStage, st).Labels().String()
			sum, ok := sums[sumKey]
			if !ok {
				sum = math.NaN()
			}
			h, err := stageHistogram(byStage[st], sum, annos, fn)
			if err != nil {
				return nil, false, fmt.Errorf("stage %q of %s: %w", st, g.labels, err)
			}
			sh.Hists = append(sh.Hists, h)
		}
		out = append(out, sh)
	}
	return out, false, nil
}

// stageHistogram converts one stage's samples, a native histogram or
// classic le buckets, to the attribution model. sum (NaN when unknown)
// applies to classic buckets; a native histogram carries its own.
func stageHistogram(items []promql.Sample, sum float64, annos *annotations.Annotations, fn string) (attribution.Histogram, error) {
	if items[0].H != nil {
		if len(items) > 1 {
			return attribution.Histogram{}, fmt.Errorf("%d native histograms, want one", len(items))
		}
		return NativeHistogram(items[0].H)
	}
	type bucket struct{ le, c float64 }
	bs := make([]bucket, 0, len(items))
	for _, s := range items {
		if s.H != nil {
			return attribution.Histogram{}, fmt.Errorf("mixes native and classic histograms")
		}
		le, err := parseBound("le", s.Metric.Get("le"))
		if err != nil {
			return attribution.Histogram{}, err
		}
		bs = append(bs, bucket{le, s.F})
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	upper := make([]float64, len(bs))
	cum := make([]float64, len(bs))
	fixed := false
	for j, b := range bs {
		if j > 0 && b.le == bs[j-1].le {
			return attribution.Histogram{}, fmt.Errorf("bucket le=%v appears twice", b.le)
		}
		upper[j], cum[j] = b.le, b.c
		// rate() of each bucket on its own can leave cumulative counts a
		// hair out of order; lift them, as histogram_quantile does.
		if j > 0 && cum[j] < cum[j-1] {
			cum[j], fixed = cum[j-1], true
		}
	}
	if fixed {
		annos.Add(fmt.Errorf("%w: %s: classic bucket counts decreased with le and were made monotonic", annotations.PromQLInfo, fn))
	}
	return attribution.FromCumulative(upper, cum, sum)
}

// NativeHistogram converts a native histogram of non-negative latencies to
// the attribution model: the zero bucket becomes [0, threshold], each
// positive bucket keeps its edges, gaps between sparse buckets become empty
// buckets, and a custom-bucket histogram's first bucket starts at 0.
// Observations below zero are an error; the Sum is kept.
func NativeHistogram(h *histogram.FloatHistogram) (attribution.Histogram, error) {
	for it := h.NegativeBucketIterator(); it.Next(); {
		if b := it.At(); b.Count > 0 {
			return attribution.Histogram{}, fmt.Errorf("native histogram has %v observations in negative bucket [%v, %v]", b.Count, b.Lower, b.Upper)
		}
	}
	var up, cnt []float64
	if h.ZeroCount > 0 || h.ZeroThreshold > 0 {
		up, cnt = append(up, h.ZeroThreshold), append(cnt, h.ZeroCount)
	}
	for it := h.PositiveBucketIterator(); it.Next(); {
		b := it.At()
		lo := math.Max(b.Lower, 0)
		last := 0.0
		if len(up) > 0 {
			last = up[len(up)-1]
		}
		if b.Upper <= last {
			if b.Count > 0 {
				return attribution.Histogram{}, fmt.Errorf("native bucket (%v, %v] overlaps the zero bucket [0, %v]", b.Lower, b.Upper, last)
			}
			continue
		}
		if lo > last || (len(up) == 0 && lo > 0) {
			up, cnt = append(up, lo), append(cnt, 0)
		}
		up, cnt = append(up, b.Upper), append(cnt, b.Count)
	}
	if len(up) == 0 {
		return attribution.Histogram{}, fmt.Errorf("native histogram: %w", attribution.ErrEmpty)
	}
	out := attribution.Histogram{Upper: up, Counts: cnt, Sum: h.Sum}
	return out, nil
}

// histogramFn runs compute on each group's histograms.
func histogramFn(ctx context.Context, c *query.Call, withP bool, compute func(o *rows, sh StageHistograms, p float64) error) (promql.Vector, annotations.Annotations, error) {
	p, i := math.NaN(), 0
	if withP {
		var err error
		if p, err = levelArg(ctx, c, 0, "p"); err != nil {
			return nil, nil, err
		}
		i = 1
	}
	var annos annotations.Annotations
	groups, err := histogramArgs(ctx, c, i, &annos)
	if err != nil {
		return nil, annos, err
	}
	o := newRows(c)
	for _, sh := range groups {
		o.base = sh.Labels
		if err := compute(o, sh, p); err != nil {
			annos.Add(fmt.Errorf("%w: %s: %s: %v", annotations.PromQLWarning, c.Func.Name, sh.Labels, err))
		}
	}
	return o.vec, annos, nil
}

// histogramStageMeans implements histogram_stage_means(histograms [, sums]).
func histogramStageMeans(ctx context.Context, c *query.Call, _ RecordSource) (promql.Vector, annotations.Annotations, error) {
	return histogramFn(ctx, c, false, func(o *rows, sh StageHistograms, _ float64) error {
		b, err := attribution.HistogramMeans(sh.Stages, sh.Hists)
		if err != nil {
			return err
		}
		for j, st := range sh.Stages {
			k := attribution.KindExact
			if math.IsNaN(sh.Hists[j].Sum) {
				k = attribution.KindEstimate
			}
			o.stat(b.Contrib[j], st, b.Method.String(), k, "mean")
		}
		return nil
	})
}

// histogramComonotonicBound implements
// histogram_comonotonic_bound(p, histograms [, sums]).
func histogramComonotonicBound(ctx context.Context, c *query.Call, _ RecordSource) (promql.Vector, annotations.Annotations, error) {
	return histogramFn(ctx, c, true, func(o *rows, sh StageHistograms, p float64) error {
		e, err := attribution.ComonotonicBound(sh.Stages, sh.Hists, p)
		if err != nil {
			return err
		}
		for j, st := range sh.Stages {
			o.stat(e.PerStage[j], st, e.Method.String(), e.Kind, "upper")
		}
		return nil
	})
}

// histogramComonotonicQuantile implements
// histogram_comonotonic_quantile(p, histograms).
func histogramComonotonicQuantile(ctx context.Context, c *query.Call, _ RecordSource) (promql.Vector, annotations.Annotations, error) {
	return histogramFn(ctx, c, true, func(o *rows, sh StageHistograms, p float64) error {
		e, err := attribution.ComonotonicQuantile(sh.Stages, sh.Hists, p)
		if err != nil {
			return err
		}
		for j, st := range sh.Stages {
			o.stat(e.PerStage[j], st, e.Method.String(), e.Kind, "quantile")
		}
		return nil
	})
}

// histogramIndependenceQuantile implements
// histogram_independence_quantile(p, histograms).
func histogramIndependenceQuantile(ctx context.Context, c *query.Call, _ RecordSource) (promql.Vector, annotations.Annotations, error) {
	return histogramFn(ctx, c, true, func(o *rows, sh StageHistograms, p float64) error {
		e, err := attribution.IndependenceEstimate(sh.Stages, sh.Hists, p, attribution.ConvolutionOptions{})
		if err != nil {
			return err
		}
		o.stat(e.Value, StageE2E, e.Method.String(), e.Kind, "quantile")
		return nil
	})
}
