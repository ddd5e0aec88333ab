package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/tsdb/records"
)

// Source answers record queries from the local store and, for partitions
// the store no longer holds, from the exported history. It implements the
// Select and SelectColumns of query/tailfn's ColumnSource, so every record
// function (tail_mean, tail_heat, …) sees windows past local retention.
//
// A record partition is read locally if the store holds it when the query
// starts, from history otherwise, and each segment from exactly one place
// (historyParts). Retention waits for export (Exporter.Held), so a
// partition the store dropped is complete in history, and the results are
// the records the store returned before retention, in the same order and
// bit for bit. A retention pass that
// removes a partition while a query over it is running can make that one
// query miss the partition; it never counts a record twice.
type Source struct {
	local *records.Store
	hist  *Reader
	opts  SourceOptions
}

// SourceOptions configure a Source. Every field says what zero means.
type SourceOptions struct {
	// Retention is the local store's Options.Retention. Retention removes
	// only partitions that end at or before now − Retention, so a window
	// starting at or after that is answered from the store alone: no
	// bucket listing per query, and recent data does not depend on the
	// bucket being reachable. 0 consults the history on every query.
	Retention time.Duration
	// Now is the clock for Retention; nil means time.Now.
	Now func() time.Time
}

// NewSource combines a store with the history it exports.
func NewSource(local *records.Store, hist *Reader, opts SourceOptions) *Source {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Source{local: local, hist: hist, opts: opts}
}

// localOnly reports whether retention can have removed no partition that
// overlaps a window starting at mint.
func (s *Source) localOnly(mint int64) bool {
	return s.opts.Retention > 0 && mint >= s.opts.Now().Add(-s.opts.Retention).UnixMilli()
}

// Store returns the local store.
func (s *Source) Store() *records.Store { return s.local }

// historyParts lists the exported segments of [mint, maxt] to read from
// history, by partition: those of every partition the store does not hold,
// and, of a partition it holds, the segments it does not hold itself. The
// second case arises when a late record recreates a partition retention
// had removed (possible after a restart, before the first retention pass);
// the partition's exported records are then still read.
func (s *Source) historyParts(ctx context.Context, mint, maxt int64) ([]histPart, error) {
	if s.localOnly(mint) {
		return nil, nil
	}
	held, err := s.local.HeldPartitions(mint, maxt)
	if err != nil {
		return nil, err
	}
	refs, err := s.local.Segments()
	if err != nil {
		return nil, err
	}
	type segKey struct {
		start, minT, maxT int64
		seq, n            int
	}
	local := map[segKey]bool{}
	for _, r := range refs {
		local[segKey{r.PartitionStart, r.MinTime, r.MaxTime, r.Seq, r.Records}] = true
	}
	return s.hist.partitions(ctx, mint, maxt, func(m manifest) bool {
		if _, ok := slices.BinarySearch(held, m.PartStart); !ok {
			return false
		}
		return local[segKey{m.PartStart, m.MinTime, m.MaxTime, m.Seq, m.Records}]
	})
}

// Select returns the records of [mint, maxt] matching ms in time order,
// local and historic partitions merged.
func (s *Source) Select(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) records.RecordIterator {
	parts, err := s.historyParts(ctx, mint, maxt)
	if err != nil {
		return &errIterator{err: err}
	}
	local := s.local.Select(ctx, mint, maxt, ms...)
	if len(parts) == 0 {
		return local
	}
	return &mergeIterator{
		local: local,
		hist:  &histIterator{ctx: ctx, r: s.hist, parts: parts, mint: mint, maxt: maxt, ms: ms, i: -1},
	}
}

// SelectColumns is records.Store.SelectColumns over local and historic
// partitions: the records Select returns, in the same order.
func (s *Source) SelectColumns(ctx context.Context, mint, maxt int64, want records.Columns, ms ...*labels.Matcher) (*records.ColumnBatch, error) {
	parts, err := s.historyParts(ctx, mint, maxt)
	if err != nil {
		return nil, fmt.Errorf("select columns: %w", err)
	}
	if len(parts) == 0 {
		return s.local.SelectColumns(ctx, mint, maxt, want, ms...)
	}
	var old []records.Record
	for _, p := range parts {
		recs, err := s.hist.load(ctx, p, mint, maxt, ms)
		if err != nil {
			return nil, fmt.Errorf("select columns: %w", err)
		}
		old = append(old, recs...)
	}
	local, err := s.local.SelectColumns(ctx, mint, maxt, want|records.ColumnTime, ms...)
	if err != nil {
		return nil, err
	}
	b := mergeColumns(local, old, want|records.ColumnTime)
	if want&records.ColumnTime == 0 {
		b.Time = nil
	}
	return b, nil
}

// mergeColumns merges a batch with records from other partitions, both in
// time order, into a batch of the columns in want (which includes the
// time). Partitions do not overlap in time, so the order is unambiguous.
func mergeColumns(a *records.ColumnBatch, recs []records.Record, want records.Columns) *records.ColumnBatch {
	n := a.Len + len(recs)
	out := &records.ColumnBatch{Len: n}
	has := func(c records.Columns) bool { return want&c != 0 }
	alloc := func(c records.Columns) []float64 {
		if has(c) {
			return make([]float64, 0, n)
		}
		return nil
	}
	for st := range records.NumStages {
		out.Stages[st] = alloc(records.ColumnStage(records.Stage(st)))
	}
	out.E2E, out.TTFT, out.PromptEntropy = alloc(records.ColumnE2E), alloc(records.ColumnTTFT), alloc(records.ColumnPromptEntropy)
	out.Time = make([]int64, 0, n)
	if has(records.ColumnPromptTokens) {
		out.PromptTokens = make([]uint32, 0, n)
	}
	if has(records.ColumnOutputTokens) {
		out.OutputTokens = make([]uint32, 0, n)
	}
	sets := map[string]uint32{}
	setID := func(ls labels.Labels) uint32 {
		k := ls.String()
		id, ok := sets[k]
		if !ok {
			id = uint32(len(out.LabelSets))
			sets[k] = id
			out.LabelSets = append(out.LabelSets, ls)
		}
		return id
	}
	if has(records.ColumnLabelSet) {
		out.LabelSet = make([]uint32, 0, n)
	}
	fromBatch := func(i int) {
		out.Time = append(out.Time, a.Time[i])
		if out.LabelSet != nil {
			out.LabelSet = append(out.LabelSet, setID(a.Labels(i)))
		}
		for st := range out.Stages {
			if out.Stages[st] != nil {
				out.Stages[st] = append(out.Stages[st], a.Stages[st][i])
			}
		}
		if out.E2E != nil {
			out.E2E = append(out.E2E, a.E2E[i])
		}
		if out.TTFT != nil {
			out.TTFT = append(out.TTFT, a.TTFT[i])
		}
		if out.PromptEntropy != nil {
			out.PromptEntropy = append(out.PromptEntropy, a.PromptEntropy[i])
		}
		if out.PromptTokens != nil {
			out.PromptTokens = append(out.PromptTokens, a.PromptTokens[i])
		}
		if out.OutputTokens != nil {
			out.OutputTokens = append(out.OutputTokens, a.OutputTokens[i])
		}
	}
	fromRecord := func(r *records.Record) {
		out.Time = append(out.Time, r.Time)
		if out.LabelSet != nil {
			out.LabelSet = append(out.LabelSet, setID(r.Labels))
		}
		for st := range out.Stages {
			if out.Stages[st] != nil {
				out.Stages[st] = append(out.Stages[st], r.Stages[st])
			}
		}
		if out.E2E != nil {
			out.E2E = append(out.E2E, r.E2E)
		}
		if out.TTFT != nil {
			out.TTFT = append(out.TTFT, r.TTFT)
		}
		if out.PromptEntropy != nil {
			out.PromptEntropy = append(out.PromptEntropy, r.PromptEntropy)
		}
		if out.PromptTokens != nil {
			out.PromptTokens = append(out.PromptTokens, r.PromptTokens)
		}
		if out.OutputTokens != nil {
			out.OutputTokens = append(out.OutputTokens, r.OutputTokens)
		}
	}
	i, j := 0, 0
	for i < a.Len || j < len(recs) {
		if j == len(recs) || i < a.Len && a.Time[i] <= recs[j].Time {
			fromBatch(i)
			i++
		} else {
			fromRecord(&recs[j])
			j++
		}
	}
	return out
}

// histIterator streams historic partitions one at a time.
type histIterator struct {
	ctx        context.Context
	r          *Reader
	parts      []histPart
	mint, maxt int64
	ms         []*labels.Matcher
	cur        []records.Record
	i          int
	err        error
}

func (it *histIterator) Next() bool {
	for it.err == nil {
		if it.i+1 < len(it.cur) {
			it.i++
			return true
		}
		if len(it.parts) == 0 {
			it.cur = nil
			return false
		}
		it.cur, it.err = it.r.load(it.ctx, it.parts[0], it.mint, it.maxt, it.ms)
		it.parts, it.i = it.parts[1:], -1
	}
	return false
}

// mergeIterator merges the local and historic streams by time.
type mergeIterator struct {
	local, hist       records.RecordIterator
	lok, hok, started bool
	cur               records.Record
	err               error
}

func (it *mergeIterator) Next() bool {
	if it.err != nil {
		return false
	}
	if !it.started {
		it.started = true
		it.lok, it.hok = it.local.Next(), it.hist.Next()
	}
	if err := it.errs(); err != nil {
		it.err = err
		return false
	}
	switch {
	case it.lok && (!it.hok || it.local.At().Time <= it.hist.At().Time):
		it.cur = it.local.At()
		it.lok = it.local.Next()
	case it.hok:
		it.cur = it.hist.At()
		it.hok = it.hist.Next()
	default:
		return false
	}
	return true
}

func (it *mergeIterator) errs() error {
	if err := it.local.Err(); err != nil {
		return err
	}
	return it.hist.Err()
}

func (it *mergeIterator) At() records.Record { return it.cur }

func (it *mergeIterator) Err() error {
	if it.err != nil {
		return it.err
	}
	return it.errs()
}

func (it *mergeIterator) Close() error {
	return errors.Join(it.local.Close(), it.hist.Close())
}

func (it *histIterator) At() records.Record { return it.cur[it.i] }
func (it *histIterator) Err() error         { return it.err }
func (it *histIterator) Close() error {
	it.cur, it.parts = nil, nil
	return nil
}

type errIterator struct{ err error }

func (it *errIterator) Next() bool         { return false }
func (it *errIterator) At() records.Record { return records.Record{} }
func (it *errIterator) Err() error         { return it.err }
func (it *errIterator) Close() error       { return nil }
