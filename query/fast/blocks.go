package fast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/index"
	"github.com/prometheus/prometheus/tsdb/tombstones"
	"github.com/prometheus/prometheus/util/annotations"
)

// TSDBSource is implemented by a chunk queryable that is a Prometheus TSDB
// held open for the caller (tailroot's tsdb.DB, which may reopen its TSDB
// after a failed write): LeaseTSDB returns the TSDB and a release that ends
// the hold. The evaluator then reads the persisted blocks one by one
// (blockWalk) instead of through the TSDB's merging chunk querier.
type TSDBSource interface {
	LeaseTSDB() (*tsdb.DB, func(), error)
}

// OverlapSource is implemented by a chunk queryable that confines what a
// TSDB serves and so is no TSDBSource (a tenant's view, whose chunks must
// come through its own querier): OverlapTSDB returns the TSDB underneath,
// and a release of its hold, only for the evaluator to see whether the
// data in range comes from sources that overlap in time
// (overlapsInRange); nothing is read from it.
type OverlapSource interface {
	OverlapTSDB() (*tsdb.DB, func(), error)
}

// colChunk is one chunk of a column's series: loaded (Chunk set: a head
// chunk the head's chunk querier loaded, or any chunk of the merged read),
// or a chunk its worker loads through cr, which is safe for concurrent use
// (a block's reader, or the head's read alone, openHeadWalk).
type colChunk struct {
	chunks.Meta
	cr   tsdb.ChunkReader
	bc   *blockChunks // the block's chunk bytes, read in place; nil: through cr
	from int64        // samples before it are dropped (a head chunk that began before the blocks ended)
}

// blockWalk reads a selection from a TSDB whose persisted blocks do not
// overlap in time, block by block, and joins each series' chunks in time
// order itself: the TSDB's own chunk querier would merge every series of
// every block through a heap of series sets and, per series, a heap of
// chunk iterators (storage.NewMergeChunkQuerier, compactChunkIterator) that
// can only pass non-overlapping chunks through unchanged, and it would copy
// each block's chunk metas per series. Here a block's series are read
// straight from its index into reused buffers (through a cache of the
// symbols they refer to, seriesIndex), its chunks are loaded by the
// workers that decode them (a block's chunk reader is safe for concurrent
// use; the head's chunk querier's is not, so with blocks the head's chunks
// are loaded here as before), and the join is a linear scan over at most
// a few dozen parts. The head alone, with no block in the range, is read
// as one more part whose chunks the workers load too (openHeadWalk).
//
// Where the blocks overlap (out-of-order or vertically compacted data not
// yet compacted away), where the head's in-order or out-of-order data
// reaches back into the blocks' time, or where the block list changed while
// the walk was opened, openBlockWalk declines and the merged read is used.
// A series whose joined chunks are not strictly ordered in time (chunks that
// overlap inside a block) makes the query fall back to upstream. Deleted
// ranges (tombstones) are applied to the decoded samples, as the TSDB's
// deleting iterator drops them.
type blockWalk struct {
	blocks  []*blockPart
	head    storage.ChunkSeriesSet
	headQ   storage.ChunkQuerier
	hasHead bool // head has a current series
	hlset   labels.Labels
	hit     chunks.Iterator
	last    labels.Labels // the last series walked, to check the order
	release func()
	mint    int64
	maxt    int64
	cut     int64 // where the blocks end and the head begins
	// headOnly: blocks is the head alone (openHeadWalk), in the head's
	// series order rather than in label order.
	headOnly bool
}

// blockPart is one persisted block's readers and its place in the walk.
type blockPart struct {
	minT, maxT int64 // the block's range, [minT, maxT)
	ir         tsdb.IndexReader
	si         *seriesIndex // the series entries with cached symbols; nil: read through ir
	cr         tsdb.ChunkReader
	bc         *blockChunks // its chunks in place; nil: read through cr
	tr         tombstones.Reader
	p          index.Postings
	builder    labels.ScratchBuilder
	lset       labels.Labels // current series, aliasing builder's buffer
	chks       []chunks.Meta // its chunks
	dels       tombstones.Intervals
	ok         bool // has a current series
}

// tsdbOf returns the Prometheus TSDB behind q, if any, and the release of
// its hold.
func tsdbOf(q storage.ChunkQueryable) (*tsdb.DB, func(), bool, error) {
	switch s := q.(type) {
	case *tsdb.DB:
		return s, func() {}, true, nil
	case TSDBSource:
		db, release, err := s.LeaseTSDB()
		if err != nil {
			return nil, nil, false, err
		}
		return db, release, true, nil
	}
	return nil, nil, false, nil
}

// openBlockWalk opens the walk of ms over [mint, maxt], or returns nil
// where it does not apply (see blockWalk): the caller then reads through
// the merged chunk querier.
func openBlockWalk(ctx context.Context, q storage.ChunkQueryable, hints *storage.SelectHints, ms []*labels.Matcher) (*blockWalk, error) {
	mint, maxt := hints.Start, hints.End
	db, release, ok, err := tsdbOf(q)
	if err != nil || !ok {
		return nil, err
	}
	all := db.Blocks()
	sel, overlap := blocksIn(all, mint, maxt)
	if overlap {
		release()
		return nil, nil // overlapping blocks: the merge dedups them
	}
	if len(sel) == 0 {
		return openHeadWalk(ctx, db, all, release, mint, maxt, ms)
	}
	cut := sel[len(sel)-1].MaxTime()
	h := db.Head()
	if (h.MinOOOTime() < cut && h.MaxOOOTime() >= mint) || (h.MinTime() < cut && h.MaxTime() >= mint) {
		// The head holds data of the blocks' time (out-of-order samples,
		// or a head not yet truncated after a compaction).
		release()
		return nil, nil
	}
	w := &blockWalk{release: release, mint: mint, maxt: maxt, cut: cut}
	for _, b := range sel {
		p := &blockPart{minT: b.MinTime(), maxT: b.MaxTime()}
		w.blocks = append(w.blocks, p)
		if p.ir, err = b.Index(); err != nil {
			return w.fail(err)
		}
		// The index reader stays open: it holds the block against deletion
		// and answers the postings.
		if p.si, err = openSeriesIndex(b.Dir()); err != nil {
			p.si = nil // read through the block's reader
		}
		if p.cr, err = b.Chunks(); err != nil {
			return w.fail(err)
		}
		if p.bc, err = openBlockChunks(b.Dir()); err != nil {
			p.bc = nil // read through the block's reader
		}
		if p.tr, err = b.Tombstones(); err != nil {
			return w.fail(err)
		}
		// Copies: PostingsForMatchers may reorder its matchers.
		if p.p, err = tsdb.PostingsForMatchers(ctx, p.ir, slices.Clone(ms)...); err != nil {
			return w.fail(fmt.Errorf("select block %s: %w", b.Meta().ULID, err))
		}
	}
	if maxt >= cut {
		if w.headQ, err = db.ChunkQuerier(cut, maxt); err != nil {
			return w.fail(err)
		}
		w.head = w.headQ.Select(ctx, true, hints, slices.Clone(ms)...)
	}
	// A compaction or retention that replaced blocks after the first look
	// may have moved the head's data into a block not selected: the list
	// must be the one the walk was planned on.
	if again := db.Blocks(); len(again) != len(all) || !slicesEqualPtr(again, all) {
		return w.fail(nil)
	}
	for _, p := range w.blocks {
		if err := w.advanceBlock(p); err != nil {
			return w.fail(err)
		}
	}
	if err := w.advanceHead(); err != nil {
		return w.fail(err)
	}
	return w, nil
}

// openHeadWalk opens the walk of ms over [mint, maxt] where no block
// meets it: the head alone, read as a block is (its index for postings,
// series and chunk metas, its tombstones), so that the workers load its
// chunks, not the walker. The head's chunk querier loads each chunk as its
// iterator reaches it, in the one goroutine that walks; with the full
// chunks written to the head chunk files, every load is a checksum and a
// copy (ChunkDiskMapper.Chunk), and on a 2-hour head of 51,200 series that
// walker, not the decoding, set the pace. One chunk reader serves all
// workers: without the range-query cache (which only the chunk querier
// turns on) the head's chunk reader keeps no state of its own, and its one
// isolation state is what the chunk querier would hold. Series come in
// the postings' order, the head's series order, as the unsorted chunk
// querier gives them (upstream selects unsorted where one querier answers,
// and the order of a sum's terms decides its last bits). Where the head
// is being truncated, or the blocks changed after all was listed, it
// declines (nil) and the chunk querier is used.
func openHeadWalk(ctx context.Context, db *tsdb.DB, all []*tsdb.Block, release func(), mint, maxt int64, ms []*labels.Matcher) (*blockWalk, error) {
	h := db.Head()
	if maxt < h.MinTime() {
		release()
		return nil, nil // nothing in the head: the chunk querier says so
	}
	rh := tsdb.NewRangeHead(h, mint, maxt)
	w := &blockWalk{release: release, mint: mint, maxt: maxt, cut: math.MinInt64, headOnly: true}
	p := &blockPart{minT: math.MinInt64, maxT: math.MaxInt64}
	w.blocks = []*blockPart{p}
	var err error
	if p.cr, err = rh.Chunks(); err != nil {
		return w.fail(err)
	}
	// Taking the chunk reader registered its isolation state, which a
	// truncation that starts from now on waits for; one already running
	// may be moving this range into a block.
	if shouldClose, getNew, _ := h.IsQuerierCollidingWithTruncation(mint, maxt); shouldClose || getNew {
		return w.fail(nil)
	}
	if again := db.Blocks(); len(again) != len(all) || !slicesEqualPtr(again, all) {
		return w.fail(nil)
	}
	if p.ir, err = rh.Index(); err != nil {
		return w.fail(err)
	}
	if p.tr, err = rh.Tombstones(); err != nil {
		return w.fail(err)
	}
	if p.p, err = tsdb.PostingsForMatchers(ctx, p.ir, slices.Clone(ms)...); err != nil {
		return w.fail(fmt.Errorf("select head: %w", err))
	}
	if err := w.advanceBlock(p); err != nil {
		return w.fail(err)
	}
	return w, nil
}

// overlapsInRange reports whether the TSDB behind q holds data in
// [mint, maxt] from sources that overlap in time: blocks that overlap each
// other, or out-of-order samples in the head. The merge that joins them
// keeps one of two samples with the same time, and which one depends on
// how its iterators are walked: upstream's seeks can keep another than the
// merged chunk querier does. Storage that is no TSDB (nor an OverlapSource)
// reports false.
func overlapsInRange(q storage.ChunkQueryable, mint, maxt int64) (bool, error) {
	db, release, ok, err := tsdbOf(q)
	if s, isSource := q.(OverlapSource); isSource && !ok && err == nil {
		db, release, err = s.OverlapTSDB()
		ok = err == nil && db != nil
	}
	if err != nil || !ok {
		return false, err
	}
	defer release()
	h := db.Head()
	if h.MinOOOTime() <= maxt && h.MaxOOOTime() >= mint {
		return true, nil
	}
	_, overlap := blocksIn(db.Blocks(), mint, maxt)
	return overlap, nil
}

// blocksIn returns the blocks of all (in the TSDB's order, by minimum
// time) that meet [mint, maxt], and whether two of them overlap in time:
// in that order two blocks overlap only if two neighbours do (one that
// reaches past a later block's start reaches past its successor's too).
func blocksIn(all []*tsdb.Block, mint, maxt int64) (sel []*tsdb.Block, overlap bool) {
	for _, b := range all {
		if !b.OverlapsClosedInterval(mint, maxt) {
			continue
		}
		if n := len(sel); n > 0 && sel[n-1].MaxTime() > b.MinTime() {
			overlap = true
		}
		sel = append(sel, b)
	}
	return sel, overlap
}

func slicesEqualPtr(a, b []*tsdb.Block) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// advanceBlock moves p to its next series with chunks in [mint, maxt] not
// wholly deleted.
func (w *blockWalk) advanceBlock(p *blockPart) error {
	p.ok = false
	for p.p.Next() {
		ref := p.p.At()
		var err error
		if p.si != nil {
			err = p.si.series(ref, &p.builder, &p.chks)
		} else {
			err = p.ir.Series(ref, &p.builder, &p.chks)
		}
		if err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue // stale postings
			}
			return fmt.Errorf("read series %d: %w", ref, err)
		}
		dels, err := p.tr.Get(ref)
		if err != nil {
			return fmt.Errorf("read tombstones: %w", err)
		}
		kept := p.chks[:0]
		for _, c := range p.chks {
			if c.MaxTime < w.mint || c.MinTime > w.maxt {
				continue
			}
			if len(dels) > 0 && (tombstones.Interval{Mint: c.MinTime, Maxt: c.MaxTime}).IsSubrange(dels) {
				continue
			}
			kept = append(kept, c)
		}
		p.chks = kept
		if len(kept) == 0 {
			continue
		}
		p.dels = dels
		if w.headOnly {
			// The head's index assigns the series' own labels, which
			// never change: no copy (and Overwrite only takes Adds).
			p.lset = p.builder.Labels()
		} else {
			p.builder.Overwrite(&p.lset)
		}
		p.ok = true
		return nil
	}
	return p.p.Err()
}

func (w *blockWalk) advanceHead() error {
	w.hasHead = false
	if w.head == nil || !w.head.Next() {
		return nil
	}
	w.hasHead = true
	w.hlset = w.head.At().Labels()
	return nil
}

// next fills lset, the chunks and the deleted ranges of the next series in
// label order, or reports false at the end.
func (w *blockWalk) next(chks []colChunk, dels []tombstones.Interval) (labels.Labels, []colChunk, []tombstones.Interval, bool, error) {
	var (
		min   labels.Labels
		found bool
	)
	for _, p := range w.blocks {
		if p.ok && (!found || labels.Compare(p.lset, min) < 0) {
			min, found = p.lset, true
		}
	}
	if w.hasHead && (!found || labels.Compare(w.hlset, min) < 0) {
		min, found = w.hlset, true
	}
	if !found {
		return labels.Labels{}, chks, dels, false, w.err()
	}
	// A series from the head keeps the head's labels; one from a block
	// only gets a copy (min aliases the block's buffer); the head read
	// alone gives the series' own.
	fromHead := w.hasHead && labels.Equal(w.hlset, min)
	switch {
	case fromHead:
		min = w.hlset
	case !w.headOnly:
		min = min.Copy()
	}
	if !w.headOnly { // the head alone keeps its own series order
		if !w.last.IsEmpty() && labels.Compare(w.last, min) >= 0 {
			return labels.Labels{}, chks, dels, false, ErrFallback // a part out of label order
		}
		w.last = min
	}
	lastT := int64(math.MinInt64)
	for _, p := range w.blocks {
		if !p.ok || !labels.Equal(p.lset, min) {
			continue
		}
		for _, c := range p.chks {
			if c.MinTime <= lastT {
				return labels.Labels{}, chks, dels, false, ErrFallback
			}
			lastT = c.MaxTime
			chks = append(chks, colChunk{Meta: c, cr: p.cr, bc: p.bc, from: math.MinInt64})
		}
		for _, d := range p.dels {
			// A block's tombstones only delete its own samples.
			d.Mint, d.Maxt = max(d.Mint, p.minT), min64(d.Maxt, p.maxT-1)
			if d.Mint <= d.Maxt {
				dels = append(dels, d)
			}
		}
		if err := w.advanceBlock(p); err != nil {
			return labels.Labels{}, chks, dels, false, err
		}
	}
	if fromHead {
		w.hit = w.head.At().Iterator(w.hit)
		for w.hit.Next() {
			c := w.hit.At()
			// A head chunk cut before the head was truncated at a
			// block's end can begin before it: its samples there are
			// the ones compacted into the block (appends before the
			// head's minimum are refused, out-of-order ones were ruled
			// out above), which the merge would take once; they are
			// dropped here, unless the block deleted some of them.
			if c.MaxTime < w.cut {
				continue
			}
			if c.MinTime < w.cut && deletedIn(dels, c.MinTime, w.cut-1) {
				// Samples the block's tombstones delete there but the
				// head's do not (the head deletes from its minimum on):
				// the merge brings them back; only upstream knows how.
				return labels.Labels{}, chks, dels, false, ErrFallback
			}
			if max(c.MinTime, w.cut) <= lastT {
				return labels.Labels{}, chks, dels, false, ErrFallback
			}
			lastT = c.MaxTime
			chks = append(chks, colChunk{Meta: c, from: w.cut})
		}
		if err := w.hit.Err(); err != nil {
			return labels.Labels{}, chks, dels, false, fmt.Errorf("read %s: %w", min, err)
		}
		if err := w.advanceHead(); err != nil {
			return labels.Labels{}, chks, dels, false, err
		}
	}
	return min, chks, dels, true, nil
}

func min64(a, b int64) int64 { return min(a, b) }

// deletedIn reports whether one of dels meets [mint, maxt].
func deletedIn(dels []tombstones.Interval, mint, maxt int64) bool {
	for _, d := range dels {
		if d.Mint <= maxt && mint <= d.Maxt {
			return true
		}
	}
	return false
}

func (w *blockWalk) err() error {
	for _, p := range w.blocks {
		if p.p != nil {
			if err := p.p.Err(); err != nil {
				return err
			}
		}
	}
	if w.head != nil {
		return w.head.Err()
	}
	return nil
}

func (w *blockWalk) warnings() annotations.Annotations {
	if w.head != nil {
		return w.head.Warnings()
	}
	return nil
}

// fail ends a walk that could not be opened: nil and err, or nil and no
// error (the caller reads through the chunk querier instead) where err is
// nil or the TSDB is closing.
func (w *blockWalk) fail(err error) (*blockWalk, error) {
	w.close()
	if errors.Is(err, tsdb.ErrClosing) {
		return nil, nil
	}
	return nil, err
}

// close ends every reader; the workers must be done with the chunks.
func (w *blockWalk) close() {
	for _, p := range w.blocks {
		if p.si != nil {
			_ = p.si.close()
		}
		if p.bc != nil {
			p.bc.close()
		}
		for _, c := range []interface{ Close() error }{p.ir, p.cr, p.tr} {
			if c != nil {
				_ = c.Close()
			}
		}
	}
	if w.headQ != nil {
		_ = w.headQ.Close()
	}
	w.blocks, w.headQ = nil, nil
	if w.release != nil {
		w.release()
		w.release = nil
	}
}

// dropDeleted removes from buf the samples in dels (sorted, as a
// series' tombstones are kept, per block in time order).
func dropDeleted(buf []fpoint, dels []tombstones.Interval) []fpoint {
	if len(dels) == 0 {
		return buf
	}
	out := buf[:0]
	for _, p := range buf {
		deleted := false
		for _, d := range dels {
			if d.InBounds(p.t) {
				deleted = true
				break
			}
		}
		if !deleted {
			out = append(out, p)
		}
	}
	return out
}

// walkBlocks is walkChunks for a blockWalk: the next batch of series,
// their labels into cols and, into metas and dels, the chunks some window
// meets and the deleted ranges.
func (ev *evaluator) walkBlocks(w *blockWalk, f *sampleFilter, cols []column, metas [][]colChunk, dels [][]tombstones.Interval) (int, error) {
	n := 0
	for i := range cols {
		if i%64 == 0 {
			if err := ev.checkContext(); err != nil {
				return 0, err
			}
		}
		lset, ms, ds, ok, err := w.next(metas[i][:0], dels[i][:0])
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		if lset.Has(model.MetricTypeLabel) || lset.Has(model.MetricUnitLabel) {
			// Type and unit labels change how upstream groups.
			return 0, ErrFallback
		}
		kept := ms[:0]
		for _, m := range ms {
			if f.overlaps(m.MinTime, m.MaxTime) {
				kept = append(kept, m)
			}
		}
		cols[i].lset = lset
		metas[i], dels[i] = kept, ds
		n++
	}
	return n, nil
}

// dropBefore removes the samples before t from buf[from:].
func dropBefore(buf []fpoint, from int, t int64) []fpoint {
	i := from
	for i < len(buf) && buf[i].t < t {
		i++
	}
	return append(buf[:from], buf[i:]...)
}
