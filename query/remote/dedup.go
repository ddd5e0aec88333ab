package remote

import (
	"math"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// penaltyMerge merges replicas of one series the way Thanos Query
// deduplicates them: follow one replica, and switch to another only where
// the first has a gap. After taking a sample at t from one replica, the
// other may only be used from t + 2·(t − previous t) on (5 s after the
// first sample), so two replicas scraping at different offsets do not
// interleave into a doubled sampling rate. Ties go to the first series.
// Thanos' extra adjustment of counter resets across replicas for rate()
// is not done.
//
// The merged samples are produced when the series is iterated and held in
// a list; the replicas of a remote store are in memory already.
func penaltyMerge(series ...storage.Series) storage.Series {
	if len(series) == 1 {
		return series[0]
	}
	return &storage.SeriesEntry{
		Lset: series[0].Labels(),
		SampleIteratorFn: func(chunkenc.Iterator) chunkenc.Iterator {
			it := series[0].Iterator(nil)
			for _, s := range series[1:] {
				merged, err := penaltyMergeTwo(it, s.Iterator(nil))
				if err != nil {
					return newErrIterator(err)
				}
				it = storage.NewListSeriesIterator(merged)
			}
			return it
		},
	}
}

// initialPenalty is how long the other replica is skipped after the first
// sample, before a sampling interval is known (Thanos' constant, in ms).
const initialPenalty = 5000

// penaltyMergeTwo is Thanos' dedup of two replicas a and b (a preferred).
func penaltyMergeTwo(a, b chunkenc.Iterator) (chunks.SampleSlice, error) {
	var (
		out        chunks.SampleSlice
		av, bv     = a.Next(), b.Next()
		penA, penB int64
		lastT      int64 = math.MinInt64
		prev       chunkenc.Iterator
	)
	penalty := func(t int64) int64 {
		if lastT == math.MinInt64 {
			return initialPenalty
		}
		return 2 * (t - lastT)
	}
	for {
		if lastT != math.MinInt64 {
			if av != chunkenc.ValNone {
				av = a.Seek(lastT + 1 + penA)
			}
			if bv != chunkenc.ValNone {
				bv = b.Seek(lastT + 1 + penB)
			}
		}
		var (
			it chunkenc.Iterator
			v  chunkenc.ValueType
		)
		switch {
		case av == chunkenc.ValNone && bv == chunkenc.ValNone:
			if err := a.Err(); err != nil {
				return nil, err
			}
			return out, b.Err()
		case av == chunkenc.ValNone:
			it, v, penB = b, bv, 0
		case bv == chunkenc.ValNone:
			it, v, penA = a, av, 0
		case a.AtT() <= b.AtT():
			it, v, penA, penB = a, av, 0, penalty(a.AtT())
		default:
			it, v, penA, penB = b, bv, penalty(b.AtT()), 0
		}
		lastT = it.AtT()
		smp := sampleAt(it, v)
		if it != prev && prev != nil {
			// A histogram's counter-reset hint is relative to the previous
			// sample of its own replica; after a switch it is not known
			// (the prometheus module's chain merge does the same).
			smp = unknownReset(smp)
		}
		prev = it
		out = append(out, smp)
	}
}

func unknownReset(s dedupSample) dedupSample {
	if s.h != nil && s.h.CounterResetHint != histogram.GaugeType {
		s.h.CounterResetHint = histogram.UnknownCounterReset
	}
	if s.fh != nil && s.fh.CounterResetHint != histogram.GaugeType {
		s.fh.CounterResetHint = histogram.UnknownCounterReset
	}
	return s
}

// sampleAt copies the iterator's current sample (iterators reuse their
// histograms).
func sampleAt(it chunkenc.Iterator, v chunkenc.ValueType) dedupSample {
	s := dedupSample{st: it.AtST(), vt: v}
	switch v {
	case chunkenc.ValFloat:
		s.t, s.f = it.At()
	case chunkenc.ValHistogram:
		s.t, s.h = it.AtHistogram(nil)
	case chunkenc.ValFloatHistogram:
		s.t, s.fh = it.AtFloatHistogram(nil)
	}
	return s
}

type dedupSample struct {
	t, st int64
	f     float64
	h     *histogram.Histogram
	fh    *histogram.FloatHistogram
	vt    chunkenc.ValueType
}

func (s dedupSample) T() int64                { return s.t }
func (s dedupSample) ST() int64               { return s.st }
func (s dedupSample) F() float64              { return s.f }
func (s dedupSample) H() *histogram.Histogram { return s.h }

// FH is the float histogram, converted from an integer one: iterators
// read either kind with AtFloatHistogram.
func (s dedupSample) FH() *histogram.FloatHistogram {
	if s.fh == nil && s.h != nil {
		return s.h.ToFloat(nil)
	}
	return s.fh
}
func (s dedupSample) Type() chunkenc.ValueType { return s.vt }

func (s dedupSample) Copy() chunks.Sample {
	c := s
	if s.h != nil {
		c.h = s.h.Copy()
	}
	if s.fh != nil {
		c.fh = s.fh.Copy()
	}
	return c
}

// errIterator is an empty iterator that reports err. (It embeds one
// rather than declaring Seek, which go vet mistakes for io.Seeker's.)
type errIterator struct {
	chunkenc.Iterator
	err error
}

func newErrIterator(err error) errIterator {
	return errIterator{Iterator: storage.NewListSeriesIterator(chunks.SampleSlice(nil)), err: err}
}

func (e errIterator) Err() error { return e.err }
