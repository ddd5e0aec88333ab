package collect

import (
	"slices"

	"github.com/prometheus/prometheus/model/labels"
)

// Batch merges series from many collections into one list with one entry
// per label set, so a request carries each series once with all its
// samples. It is not safe for concurrent use.
type Batch struct {
	series  []Series
	index   map[uint64][]int // labels hash -> positions in series
	samples int
	extra   labels.Labels
	b       labels.Builder
}

// NewBatch returns an empty batch. extra labels are added to every series
// that lacks them (external labels such as node or cluster).
func NewBatch(extra labels.Labels) *Batch {
	return &Batch{index: map[uint64][]int{}, extra: extra}
}

// Add copies the samples of ss into the batch. Labels and histograms are
// kept by reference (they are immutable by the Collector contract).
func (b *Batch) Add(ss []Series) {
	for i := range ss {
		s := &ss[i]
		if s.Len() == 0 {
			continue
		}
		ls := b.withExtra(s.Labels)
		h := ls.Hash()
		pos := -1
		for _, p := range b.index[h] {
			if labels.Equal(b.series[p].Labels, ls) {
				pos = p
				break
			}
		}
		if pos < 0 {
			pos = len(b.series)
			b.series = append(b.series, Series{Labels: ls, Meta: s.Meta})
			b.index[h] = append(b.index[h], pos)
		}
		dst := &b.series[pos]
		dst.Samples = append(dst.Samples, s.Samples...)
		dst.Histograms = append(dst.Histograms, s.Histograms...)
		b.samples += s.Len()
	}
}

func (b *Batch) withExtra(ls labels.Labels) labels.Labels {
	if b.extra.IsEmpty() {
		return ls
	}
	missing := false
	b.extra.Range(func(l labels.Label) {
		if !ls.Has(l.Name) {
			missing = true
		}
	})
	if !missing {
		return ls
	}
	b.b.Reset(ls)
	b.extra.Range(func(l labels.Label) {
		if !ls.Has(l.Name) {
			b.b.Set(l.Name, l.Value)
		}
	})
	return b.b.Labels()
}

// Samples returns the number of samples and histograms in the batch.
func (b *Batch) Samples() int { return b.samples }

// Series returns the merged series, each with its samples in time order
// (collections of one series arrive in time order; a stable sort keeps it
// so if two collectors ever emit the same series). The slice is valid
// until Reset.
func (b *Batch) Series() []Series {
	for i := range b.series {
		s := &b.series[i]
		slices.SortStableFunc(s.Samples, func(x, y Sample) int { return cmpInt(x.T, y.T) })
		slices.SortStableFunc(s.Histograms, func(x, y HistogramSample) int { return cmpInt(x.T, y.T) })
	}
	return b.series
}

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	for i := range b.series {
		b.series[i] = Series{}
	}
	b.series = b.series[:0]
	clear(b.index)
	b.samples = 0
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
