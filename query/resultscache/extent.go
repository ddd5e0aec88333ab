package resultscache

import (
	"slices"
	"sort"
	"unsafe"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
)

// extent is the answer of one query over the steps start, start+step, …,
// end (milliseconds, inclusive, on the query's step grid): every series
// with at least one point there, with its points in time order. Extents
// are immutable once built: crops share point arrays, and histograms are
// copies no engine reuses.
type extent struct {
	start, end int64 // first and last step
	step       int64
	series     []series // sorted by labels
	bytes      int64
	noStore    bool // evaluated with annotations: answered, not kept
}

type series struct {
	metric labels.Labels
	floats []promql.FPoint
	hists  []promql.HPoint
}

// empty reports an extent without steps (a crop outside its range); one
// with steps and no series is an answer: nothing there.
func (x *extent) empty() bool { return x.start > x.end }

// fromMatrix copies m, a range query's answer over [start, end], into an
// extent; histograms are deep-copied, because the engine hands their
// memory to the next query once the result is closed.
func fromMatrix(m promql.Matrix, start, end, step int64) *extent {
	x := &extent{start: start, end: end, step: step, series: make([]series, 0, len(m))}
	for _, s := range m {
		if len(s.Floats) == 0 && len(s.Histograms) == 0 {
			continue
		}
		ns := series{metric: s.Metric}
		if len(s.Floats) > 0 {
			ns.floats = slices.Clone(s.Floats)
		}
		if len(s.Histograms) > 0 {
			ns.hists = make([]promql.HPoint, len(s.Histograms))
			for i, p := range s.Histograms {
				ns.hists[i] = promql.HPoint{T: p.T, H: p.H.Copy()}
			}
		}
		x.series = append(x.series, ns)
	}
	sort.Slice(x.series, func(i, j int) bool { return labels.Compare(x.series[i].metric, x.series[j].metric) < 0 })
	x.bytes = x.size()
	return x
}

// crop returns the steps of x in [from, to], sharing x's arrays; from and
// to need not be steps.
func (x *extent) crop(from, to int64) *extent {
	from, to = max(from, x.start), min(to, x.end)
	// Onto the grid: the first step ≥ from, the last ≤ to.
	from = x.start - floorDiv(x.start-from, x.step)*x.step
	to = x.start + floorDiv(to-x.start, x.step)*x.step
	out := &extent{start: from, end: to, step: x.step}
	for _, s := range x.series {
		f := cropPoints(s.floats, from, to, func(p promql.FPoint) int64 { return p.T })
		h := cropPoints(s.hists, from, to, func(p promql.HPoint) int64 { return p.T })
		if len(f) == 0 && len(h) == 0 {
			continue
		}
		out.series = append(out.series, series{metric: s.metric, floats: f, hists: h})
	}
	out.bytes = out.size()
	return out
}

func cropPoints[P any](ps []P, from, to int64, t func(P) int64) []P {
	i := sort.Search(len(ps), func(i int) bool { return t(ps[i]) >= from })
	j := sort.Search(len(ps), func(i int) bool { return t(ps[i]) > to })
	if i >= j {
		return nil
	}
	return ps[i:j:j]
}

// concat joins contiguous extents (each one's start is the previous one's
// end + step) into one covering them all. Point arrays are copied, so the
// result does not pin the parts' larger arrays.
func concat(parts []*extent, step int64) *extent {
	slices.SortFunc(parts, func(a, b *extent) int { return cmpInt(a.start, b.start) })
	if len(parts) == 1 {
		return parts[0]
	}
	for i := 1; i < len(parts); i++ {
		if parts[i].start != parts[i-1].end+step {
			panic("BUG: resultscache: concat of extents that do not touch")
		}
	}
	out := &extent{start: parts[0].start, end: parts[len(parts)-1].end, step: step}
	idx := map[uint64][]int{} // labels hash → indexes into out.series
	for _, x := range parts {
		for _, s := range x.series {
			h := s.metric.Hash()
			at := -1
			for _, i := range idx[h] {
				if labels.Equal(out.series[i].metric, s.metric) {
					at = i
					break
				}
			}
			if at < 0 {
				at = len(out.series)
				idx[h] = append(idx[h], at)
				out.series = append(out.series, series{metric: s.metric})
			}
			o := &out.series[at]
			o.floats = append(o.floats, s.floats...)
			o.hists = append(o.hists, s.hists...)
		}
	}
	sort.Slice(out.series, func(i, j int) bool { return labels.Compare(out.series[i].metric, out.series[j].metric) < 0 })
	out.bytes = out.size()
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// size estimates the memory x holds: labels, points and histograms. It is
// an estimate (shared arrays are counted once per extent that holds them)
// and errs on the large side.
func (x *extent) size() int64 {
	n := int64(unsafe.Sizeof(*x))
	for _, s := range x.series {
		n += int64(unsafe.Sizeof(s)) + int64(s.metric.ByteSize())
		n += int64(len(s.floats)) * int64(unsafe.Sizeof(promql.FPoint{}))
		n += int64(len(s.hists)) * int64(unsafe.Sizeof(promql.HPoint{}))
		for _, p := range s.hists {
			n += histSize(p.H)
		}
	}
	return n
}

func histSize(h *histogram.FloatHistogram) int64 {
	if h == nil {
		return 0
	}
	return int64(unsafe.Sizeof(*h)) +
		8*int64(len(h.PositiveBuckets)+len(h.NegativeBuckets)+len(h.CustomValues)) +
		8*int64(len(h.PositiveSpans)+len(h.NegativeSpans))
}

// appendTo appends x's points in [from, to] to the series of m, keyed by
// labels through idx; new series are added at the end.
func (x *extent) appendTo(m promql.Matrix, idx map[uint64][]int, from, to int64) promql.Matrix {
	for _, s := range x.series {
		f := cropPoints(s.floats, from, to, func(p promql.FPoint) int64 { return p.T })
		h := cropPoints(s.hists, from, to, func(p promql.HPoint) int64 { return p.T })
		if len(f) == 0 && len(h) == 0 {
			continue
		}
		hash := s.metric.Hash()
		at := -1
		for _, i := range idx[hash] {
			if labels.Equal(m[i].Metric, s.metric) {
				at = i
				break
			}
		}
		if at < 0 {
			at = len(m)
			idx[hash] = append(idx[hash], at)
			m = append(m, promql.Series{Metric: s.metric})
		}
		m[at].Floats = append(m[at].Floats, f...)
		m[at].Histograms = append(m[at].Histograms, h...)
	}
	return m
}

// matrix returns x's series as a Matrix sharing x's arrays.
func (x *extent) matrix() promql.Matrix {
	m := make(promql.Matrix, len(x.series))
	for i, s := range x.series {
		m[i] = promql.Series{Metric: s.metric, Floats: s.floats, Histograms: s.hists}
	}
	return m
}

// estimate is size for a Matrix, without building the extent.
func estimate(m promql.Matrix) int64 {
	var n int64
	for _, s := range m {
		n += int64(unsafe.Sizeof(series{})) + int64(s.Metric.ByteSize())
		n += int64(len(s.Floats)) * int64(unsafe.Sizeof(promql.FPoint{}))
		n += int64(len(s.Histograms)) * int64(unsafe.Sizeof(promql.HPoint{}))
		for _, p := range s.Histograms {
			n += histSize(p.H)
		}
	}
	return n
}
