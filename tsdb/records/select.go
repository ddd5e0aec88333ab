package records

import (
	"context"
	"errors"
	"os"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
)

// RecordIterator streams records in time order, in the style of Prometheus'
// chunkenc.Iterator: call Next until it returns false, then check Err.
//
// At returns the current record. It shares no memory with the store and
// stays valid after later Next calls, so a caller may keep it. Close
// releases the iterator; it is safe to call more than once.
type RecordIterator interface {
	Next() bool
	At() Record
	Err() error
	Close() error
}

// Select returns the records with mint ≤ Time ≤ maxt whose labels match all
// matchers, ordered by time (records with equal times keep append order
// within a partition). It reads sealed segments and the WAL-backed head.
//
// The set of files is fixed when Select is called; data appended later is
// not seen. Decoding happens one partition at a time, so memory is bounded
// by the matching records of one partition. A segment removed by retention
// while the iterator runs is skipped: its records are past retention.
func (s *Store) Select(ctx context.Context, mint, maxt int64, matchers ...*labels.Matcher) RecordIterator {
	it := &storeIterator{ctx: ctx, mint: mint, maxt: maxt, matchers: matchers, i: -1}
	it.parts, it.err = s.snapshot(mint, maxt)
	return it
}

// snapshot lists, per partition in time order, the segments that overlap
// [mint, maxt] and the head records held at this moment. Both stay valid
// without the lock: segments are immutable and the head is a prefix of an
// append-only slice.
func (s *Store) snapshot(mint, maxt int64) ([]partSnap, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	var parts []partSnap
	for _, p := range s.sortedParts() {
		if p.start+s.dur <= mint || p.start > maxt {
			continue
		}
		snap := partSnap{}
		for _, m := range p.segs {
			if m.maxT >= mint && m.minT <= maxt {
				snap.segs = append(snap.segs, m)
			}
		}
		if p.head != nil {
			snap.head = p.head.recs[:len(p.head.recs):len(p.head.recs)]
		}
		if len(snap.segs) > 0 || len(snap.head) > 0 {
			parts = append(parts, snap)
		}
	}
	return parts, nil
}

type partSnap struct {
	segs []segmentMeta
	head []Record // prefix of an append-only slice; read-only here
}

type storeIterator struct {
	ctx        context.Context
	mint, maxt int64
	matchers   []*labels.Matcher
	parts      []partSnap
	cur        []Record
	i          int
	err        error
	closed     bool
}

func (it *storeIterator) Next() bool {
	for {
		if it.err != nil || it.closed {
			return false
		}
		if it.i+1 < len(it.cur) {
			it.i++
			if it.i%1024 == 0 {
				if err := it.ctx.Err(); err != nil {
					it.err = err
					return false
				}
			}
			return true
		}
		if len(it.parts) == 0 {
			it.cur = nil
			return false
		}
		if err := it.ctx.Err(); err != nil {
			it.err = err
			return false
		}
		it.cur, it.err = it.load(it.parts[0])
		it.parts = it.parts[1:]
		it.i = -1
	}
}

func (it *storeIterator) At() Record { return it.cur[it.i] }

func (it *storeIterator) Err() error { return it.err }

func (it *storeIterator) Close() error {
	it.closed, it.cur, it.parts = true, nil, nil
	return nil
}

func (it *storeIterator) matches(ls labels.Labels) bool {
	for _, m := range it.matchers {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

// load decodes the matching records of one partition and sorts them by time.
// Segments come first in seq order, then the head, so a stable sort keeps
// append order among equal times.
func (it *storeIterator) load(p partSnap) ([]Record, error) {
	var out []Record
	for _, m := range p.segs {
		data, err := os.ReadFile(m.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c, _, _, err := decodeSegment(data, zstdDecoder(), maxRawBody)
		if err != nil {
			return nil, &CorruptionError{File: m.path, Reason: err.Error()}
		}
		setOK := make([]bool, len(c.sets))
		for i, ls := range c.sets {
			setOK[i] = it.matches(ls)
		}
		keep := func(k int) bool {
			t := c.times[k]
			return t >= it.mint && t <= it.maxt && setOK[c.setIDs[k]]
		}
		m := 0
		for k := range c.n {
			if keep(k) {
				m++
			}
		}
		out = slices.Grow(out, m)
		for k := range c.n {
			if keep(k) {
				out = append(out, c.row(k))
			}
		}
	}
	for i := range p.head {
		r := &p.head[i]
		if r.Time >= it.mint && r.Time <= it.maxt && it.matches(r.Labels) {
			out = append(out, r.clone())
		}
	}
	slices.SortStableFunc(out, func(a, b Record) int { return cmpInt64(a.Time, b.Time) })
	return out, nil
}
