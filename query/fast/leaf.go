package fast

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/tombstones"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/kahansum"
)

type fpoint struct {
	t int64
	f float64
}

// worker holds one goroutine's reusable buffers.
type worker struct {
	buf    []fpoint // the series being computed
	resets []int
	rc     rateCache
	// maxBuf is the most samples buf held for a range function: no
	// window holds more (upstream counts a window's samples against
	// MaxSamples while it evaluates it).
	maxBuf int
}

// window returns the selector's data range [mint, maxt] as upstream
// computes it for the querier and the hints.
func (ev *evaluator) window(l *leaf) (mint, maxt int64) {
	if l.fn == "" {
		return ev.start - ev.opts.LookbackDelta.Milliseconds() + 1, ev.end
	}
	return ev.start - l.rng.Milliseconds() + 1, ev.end
}

// selectHints returns the selector's data range and the hints upstream
// gives the querier for it.
func (ev *evaluator) selectHints(l *leaf) (mint, maxt int64, hints *storage.SelectHints) {
	mint, maxt = ev.window(l)
	step := ev.interval
	if ev.instant {
		step = 0
	}
	return mint, maxt, &storage.SelectHints{
		Start: mint, End: maxt, Step: step, Range: l.rng.Milliseconds(),
		Func: l.hintFunc, By: l.hintBy, Grouping: l.hintGrp,
	}
}

// shard is one worker's view of a leaf: its own querier (a querier's
// chunk reader is not safe for concurrent use — the head keeps a
// per-reader cache of a series' chunks for range queries), its own series
// set over the same selection, and its buffers. Where the storage serves
// chunks (storage.ChunkQueryable, as the TSDB does, or a ChunkSource) the shard reads them
// and decodes them itself (cset); otherwise it iterates samples (set).
type shard struct {
	querier  storage.Querier
	cquerier storage.ChunkQuerier
	seriesWalk
	cset storage.ChunkSeriesSet
	bw   *blockWalk // where the blocks are read one by one instead of cset
	it   chunkenc.Iterator
	cit  chunks.Iterator
	worker
}

// seriesWalk is a worker's walk of a selection through its own sample
// querier (walkBatch).
type seriesWalk struct {
	set  storage.SeriesSet
	hash uint64 // of the labels of the batch it walked
	n    int    // series it walked in the batch
}

func (sh *shard) err() error {
	if sh.bw != nil {
		return sh.bw.err()
	}
	if sh.cset != nil {
		return sh.cset.Err()
	}
	return sh.set.Err()
}

func (sh *shard) warnings() annotations.Annotations {
	if sh.bw != nil {
		return sh.bw.warnings()
	}
	if sh.cset != nil {
		return sh.cset.Warnings()
	}
	return sh.set.Warnings()
}

func (sh *shard) close() {
	if sh.querier != nil {
		_ = sh.querier.Close()
	}
	if sh.cquerier != nil {
		_ = sh.cquerier.Close()
	}
}

func (ev *evaluator) runLeaf(l *leaf, s sink) error {
	mint, maxt, hints := ev.selectHints(l)
	// One shard per worker: its decoding buffers and, for storage that
	// serves no chunks, its own querier (sampleBatches).
	shards := make([]shard, ev.opts.Workers)
	defer func() {
		for i := range shards {
			shards[i].close()
		}
	}()
	cq, chunked := chunkQueryable(ev.q)
	// walker, where the storage serves chunks, walks the index and loads
	// the chunks; the workers decode them.
	var walker *shard
	if chunked {
		overlap, err := overlapsInRange(cq, mint, maxt)
		if err != nil {
			return err
		}
		// Of two samples at one time from sources that overlap in time
		// (overlapping blocks, out-of-order samples in the head), a
		// merge keeps the one its walk meets first, and the chunk
		// queriers' Next-only walk can meet another than upstream's
		// seeks: there the workers read sample iterators, walked as
		// upstream walks them (readSamples).
		chunked = !overlap
	}
	if chunked {
		// The decoder drops what lies outside the windows itself;
		// trimming would re-encode every chunk across mint or maxt.
		hints.DisableTrimming = true
		bw, err := openBlockWalk(ev.ctx, cq, hints, l.vs.LabelMatchers)
		if err != nil {
			return err
		}
		if bw != nil {
			walker = &shard{bw: bw}
			defer bw.close()
		} else {
			q, err := cq.ChunkQuerier(mint, maxt)
			if err != nil {
				return err
			}
			walker = &shard{cquerier: q}
			defer walker.close()
			walker.cset = q.Select(ev.ctx, false, hints, slices.Clone(l.vs.LabelMatchers)...)
		}
	}
	err := parallel(len(shards), len(shards), func(w, _, _ int) error {
		if chunked {
			return nil
		}
		// Copies each: the TSDB sorts the matchers it is given in place.
		h := *hints
		ms := slices.Clone(l.vs.LabelMatchers)
		q, err := ev.q.Querier(mint, maxt)
		if err != nil {
			return err
		}
		shards[w].querier = q
		shards[w].set = q.Select(ev.ctx, false, &h, ms...)
		return nil
	})
	if err != nil {
		return err
	}

	var (
		out       []*column
		anyOutput bool
		total     int
	)
	// emit hands the first n columns of a batch to the sink.
	emit := func(cols []column, nonEmpty []bool, n int) error {
		total += n
		// Upstream holds every point of a range function's result at
		// once, and the samples of the window it evaluates; a query
		// that could come near its limit is left to upstream to refuse.
		maxWin := 0
		for w := range shards {
			maxWin = max(maxWin, shards[w].maxBuf)
		}
		if total*ev.steps+maxWin > ev.opts.MaxSamples/2 {
			return ErrFallback
		}
		out = out[:0]
		for i := 0; i < n; i++ {
			if nonEmpty[i] {
				out = append(out, &cols[i])
			}
		}
		anyOutput = anyOutput || len(out) > 0
		return s.batch(out)
	}
	if chunked {
		err = ev.pipeChunks(l, walker, shards, emit)
	} else {
		err = ev.sampleBatches(l, shards, emit)
	}
	if err != nil {
		if errors.Is(err, ErrHistogram) && total == 0 {
			return errHistogramFirst
		}
		return err
	}
	for w := range shards {
		if shards[w].set == nil {
			continue
		}
		if err := shards[w].err(); err != nil {
			return err
		}
	}
	warnings := &shards[0]
	if walker != nil {
		if err := walker.err(); err != nil {
			return err
		}
		warnings = walker
	}
	ev.mu.Lock()
	ev.annos.Merge(warnings.warnings())
	ev.mu.Unlock()
	if err := ev.checkContext(); err != nil {
		return err
	}
	if anyOutput && (l.fn == "rate" || l.fn == "increase") {
		name := metricName(l.vs)
		if !strings.HasSuffix(name, "_total") && !strings.HasSuffix(name, "_sum") &&
			!strings.HasSuffix(name, "_count") && !strings.HasSuffix(name, "_bucket") {
			ev.addAnno(annotations.NewPossibleNonCounterInfo(name, l.argPos))
		}
	}
	return nil
}

// pieceSeries is how many series a worker takes at a time from a part.
const pieceSeries = 32

// pipeChunks evaluates the walker's series in batches of half
// BatchSeries: while the workers decode one and the sink takes it, the
// walker loads the next, so walking the index and loading chunks (one
// goroutine: a chunk querier's reader is not safe for concurrent use)
// overlaps the decoding instead of leaving the cores idle; where the
// chunk reader is (blocks, the head read alone: blockWalk), the workers
// load the chunks and the walker only reads the index. Two halves hold as
// many columns as one batch.
func (ev *evaluator) pipeChunks(l *leaf, walker *shard, shards []shard, emit func([]column, []bool, int) error) error {
	half := max(1, ev.opts.BatchSeries/2)
	bufs := getBuffers(2 * half * ev.steps)
	defer putBuffers(bufs)
	mb := getMetaBuffers(2 * half)
	defer putMetaBuffers(mb)
	f := ev.filter(l)
	type part struct {
		cols     []column
		metas    [][]colChunk            // the chunks to decode, per column
		dels     [][]tombstones.Interval // deleted ranges, per column
		nonEmpty []bool
		want, n  int // series asked of the walker, and walked
		err      error
	}
	var parts [2]part
	for k := range parts {
		p := &parts[k]
		p.cols = ev.columns(l, bufs, k*half, half)
		p.metas, p.dels = mb.metas[k*half:(k+1)*half], mb.dels[k*half:(k+1)*half]
		p.nonEmpty = make([]bool, half)
	}
	walk := func(p *part, want int) {
		defer func() {
			if r := recover(); r != nil {
				p.err = fmt.Errorf("fast: %v", r)
			}
		}()
		p.want = want
		if walker.bw != nil {
			p.n, p.err = ev.walkBlocks(walker.bw, &f, p.cols[:want], p.metas[:want], p.dels[:want])
		} else {
			p.n, p.err = ev.walkChunks(l, walker, &f, p.cols[:want], p.metas[:want], p.dels[:want])
		}
	}
	// The first part is one piece, so that the workers start after one
	// piece's walk rather than half a batch's (the walk alone, on one
	// core); each part after asks for twice as many up to half a batch,
	// which the walker loads while the workers decode the one before
	// (walking a series costs a fraction of decoding it).
	cur, nxt := &parts[0], &parts[1]
	walk(cur, min(half, pieceSeries))
	for {
		if cur.err != nil {
			return cur.err
		}
		more := cur.n == cur.want
		var wg sync.WaitGroup
		if more {
			wg.Add(1)
			go func(want int) {
				defer wg.Done()
				walk(nxt, want)
			}(min(half, 2*cur.want))
		}
		// Pieces of 32 series, taken in turn: each column's result is
		// its own, so who decodes it does not matter.
		err := pieces(len(shards), cur.n, pieceSeries, func(w, lo, hi int) error {
			sh := &shards[w]
			for i := lo; i < hi; i++ {
				if (i-lo)%64 == 0 {
					if err := ev.checkContext(); err != nil {
						return err
					}
				}
				ok, err := sh.evalChunks(ev, l, &f, cur.metas[i], cur.dels[i], &cur.cols[i])
				if err != nil {
					return err
				}
				cur.nonEmpty[i] = ok
			}
			return nil
		})
		if err == nil {
			err = emit(cur.cols, cur.nonEmpty, cur.n)
		}
		// The walker must be done before its querier closes.
		wg.Wait()
		if err != nil || !more {
			return err
		}
		cur, nxt = nxt, cur
	}
}

// sampleBatches evaluates the series of storage that serves no chunks:
// every worker selects the same series and walks all of them in the same
// order, evaluating every W-th; a hash of the labels each walked proves,
// batch by batch, that all saw the same series in the same order (a
// series created in between would break it: the query is then handed
// back).
func (ev *evaluator) sampleBatches(l *leaf, shards []shard, emit func([]column, []bool, int) error) error {
	batch := ev.opts.BatchSeries
	bufs := getBuffers(batch * ev.steps)
	defer putBuffers(bufs)
	cols := ev.columns(l, bufs, 0, batch)
	nonEmpty := make([]bool, batch)
	walks := make([]*seriesWalk, len(shards))
	for w := range shards {
		walks[w] = &shards[w].seriesWalk
	}
	for {
		n, err := ev.walkBatch(walks, cols, nonEmpty, func(w int, c *column) (bool, error) {
			return shards[w].evalSeries(ev, l, c)
		})
		if err != nil {
			return err
		}
		if err := emit(cols, nonEmpty, n); err != nil {
			return err
		}
		if n < batch {
			return nil
		}
	}
}

// walkBatch walks the next batch (up to len(cols) series) of every
// shard's set at once, each worker evaluating every W-th series into its
// column with eval and marking in nonEmpty whether it has output. It
// returns how many series the batch held, or ErrFallback where the
// workers did not see the same series in the same order, or a series
// carries type and unit labels (they change how upstream groups).
func (ev *evaluator) walkBatch(walks []*seriesWalk, cols []column, nonEmpty []bool, eval func(w int, c *column) (bool, error)) (int, error) {
	workers := len(walks)
	err := parallel(workers, workers, func(w, _, _ int) error {
		sh := walks[w]
		sh.hash, sh.n = 0, 0
		for i := range cols {
			if !sh.set.Next() {
				break
			}
			sh.n++
			lset := sh.set.At().Labels()
			if lset.Has(model.MetricTypeLabel) || lset.Has(model.MetricUnitLabel) {
				return ErrFallback
			}
			sh.hash = sh.hash*31 + lset.Hash()
			if i%workers != w {
				continue
			}
			if i/workers%64 == 0 {
				if err := ev.checkContext(); err != nil {
					return err
				}
			}
			c := &cols[i]
			c.lset = lset
			ok, err := eval(w, c)
			if err != nil {
				return err
			}
			nonEmpty[i] = ok
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := walks[0].n
	for _, sw := range walks {
		if sw.n != n || sw.hash != walks[0].hash {
			return 0, ErrFallback
		}
	}
	return n, nil
}

// columns returns n columns of the leaf's step values, the from-th to
// the (from+n−1)-th of bufs.
func (ev *evaluator) columns(l *leaf, bufs *buffers, from, n int) []column {
	cols := make([]column, n)
	for i := range cols {
		off := (from + i) * ev.steps
		cols[i].v = bufs.vals[off : off+ev.steps]
		cols[i].has = bufs.has[off : off+ev.steps]
		cols[i].dropName = l.dropName
	}
	return cols
}

// buffers are a leaf's step columns, pooled across queries.
type buffers struct {
	vals []float64
	has  []bool
}

var bufferPool sync.Pool

func getBuffers(n int) *buffers {
	b, _ := bufferPool.Get().(*buffers)
	if b == nil || cap(b.vals) < n {
		return &buffers{vals: make([]float64, n), has: make([]bool, n)}
	}
	b.vals, b.has = b.vals[:n], b.has[:n]
	return b
}

func putBuffers(b *buffers) { bufferPool.Put(b) }

// metaBuffers are the chunk lists and deleted ranges of a leaf's columns,
// pooled across queries: a series over 24 h of 2 h blocks has some fifty
// chunks, and growing each list anew per query was most of a query's
// allocations.
type metaBuffers struct {
	metas [][]colChunk
	dels  [][]tombstones.Interval
}

var metaPool sync.Pool

func getMetaBuffers(n int) *metaBuffers {
	b, _ := metaPool.Get().(*metaBuffers)
	if b == nil || len(b.metas) < n {
		return &metaBuffers{metas: make([][]colChunk, n), dels: make([][]tombstones.Interval, n)}
	}
	return b
}

func putMetaBuffers(b *metaBuffers) {
	for i := range b.metas {
		// Drop the chunks' references, keep the room.
		clear(b.metas[i][:cap(b.metas[i])])
		b.metas[i] = b.metas[i][:0]
		b.dels[i] = b.dels[i][:0]
	}
	metaPool.Put(b)
}

// evalSeries reads the shard's current series once, keeping the samples
// some step's window holds (without stale markers for range functions),
// and computes its value at every step. It reports whether any step has a
// value, and returns ErrFallback on what only upstream evaluates: a
// histogram sample, or a start timestamp where rate, increase or irate
// would use it.
func (sh *shard) evalSeries(ev *evaluator, l *leaf, c *column) (bool, error) {
	if err := sh.readSamples(ev, l); err != nil {
		return false, err
	}
	return sh.steps(ev, l, c), nil
}

// evalChunks is evalSeries for the chunks a walker loaded.
func (sh *shard) evalChunks(ev *evaluator, l *leaf, f *sampleFilter, metas []colChunk, dels []tombstones.Interval, c *column) (bool, error) {
	if err := sh.decodeChunks(l, f, metas, c.lset); err != nil {
		return false, err
	}
	sh.buf = dropDeleted(sh.buf, dels)
	return sh.steps(ev, l, c), nil
}

// steps computes the column from buf.
func (sh *shard) steps(ev *evaluator, l *leaf, c *column) bool {
	clear(c.has)
	if l.fn != "" {
		sh.maxBuf = max(sh.maxBuf, len(sh.buf))
	}
	if len(sh.buf) == 0 {
		return false
	}
	if l.fn == "" {
		return sh.instantSteps(ev, c)
	}
	return sh.rangeSteps(ev, l, c)
}

func (ev *evaluator) filter(l *leaf) sampleFilter {
	f := sampleFilter{
		start: ev.start, end: ev.start + int64(ev.steps-1)*ev.interval, interval: ev.interval,
		width: l.rng.Milliseconds(), dropStale: l.fn != "",
	}
	if l.fn == "" {
		f.width = ev.opts.LookbackDelta.Milliseconds()
	}
	return f
}

// walkChunks reads the next batch of series from the walker's set: their
// labels into cols and, into metas, the chunks some window meets (the
// chunk querier loads a chunk as its iterator reaches it, through a chunk
// reader only one goroutine may use). It returns how many series it read.
func (ev *evaluator) walkChunks(l *leaf, sh *shard, f *sampleFilter, cols []column, metas [][]colChunk, dels [][]tombstones.Interval) (int, error) {
	n := 0
	for i := range cols {
		if !sh.cset.Next() {
			break
		}
		n++
		if i%64 == 0 {
			if err := ev.checkContext(); err != nil {
				return 0, err
			}
		}
		series := sh.cset.At()
		lset := series.Labels()
		if lset.Has(model.MetricTypeLabel) || lset.Has(model.MetricUnitLabel) {
			// Type and unit labels change how upstream groups.
			return 0, ErrFallback
		}
		cols[i].lset = lset
		ms := metas[i][:0]
		dels[i] = nil
		sh.cit = series.Iterator(sh.cit)
		for sh.cit.Next() {
			m := sh.cit.At()
			if !f.overlaps(m.MinTime, m.MaxTime) {
				continue
			}
			if enc := m.Chunk.Encoding(); enc != chunkenc.EncXOR && enc != chunkenc.EncXOR2 {
				return 0, ErrHistogram
			}
			ms = append(ms, colChunk{Meta: m})
		}
		if err := sh.cit.Err(); err != nil {
			return 0, fmt.Errorf("read %s: %w", lset, err)
		}
		metas[i] = ms
	}
	return n, nil
}

// decodeChunks fills buf from a series' chunks: XOR chunks whose samples
// are all visible are decoded by appendXOR, the rest (a head chunk whose
// last samples isolation hides, other encodings) through their own
// iterators.
func (sh *shard) decodeChunks(l *leaf, f *sampleFilter, metas []colChunk, lset labels.Labels) error {
	usesST := l.fn == "rate" || l.fn == "increase" || l.fn == "irate"
	buf := sh.buf[:0]
	defer func() { sh.buf = buf }()
	for _, cm := range metas {
		m := cm.Meta
		// A persisted chunk is loaded here, by the worker: an XOR chunk
		// read in place is decoded from its bytes, any other is loaded
		// through the block's reader.
		var xorData []byte
		inPlace := false
		if cm.bc != nil {
			enc, data, err := cm.bc.chunk(m.Ref)
			if err != nil {
				return fmt.Errorf("read %s: %w", lset, err)
			}
			xorData, inPlace = data, enc == chunkenc.EncXOR
		}
		if !inPlace && cm.cr != nil {
			var (
				chk  chunkenc.Chunk
				iter chunkenc.Iterable
				err  error
			)
			if wc, ok := cm.cr.(tsdb.ChunkReaderWithCopy); ok {
				// The head's: the chunk still appended to comes as a
				// copy (the chunk querier asks the same), with its time
				// so far.
				var maxt int64
				if chk, iter, maxt, err = wc.ChunkOrIterableWithCopy(m); chk != nil {
					m.MaxTime = maxt
				}
			} else {
				chk, iter, err = cm.cr.ChunkOrIterable(m)
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", lset, err)
			}
			if iter != nil {
				return ErrFallback
			}
			m.Chunk = chk
		}
		from := len(buf)
		var err error
		if inPlace {
			buf, err = appendXOR(buf, xorData, f)
		} else {
			buf, err = sh.decodeChunk(f, m, buf, usesST)
		}
		if err != nil {
			if errors.Is(err, ErrHistogram) || errors.Is(err, ErrFallback) {
				return err
			}
			return fmt.Errorf("read %s: %w", lset, err)
		}
		if cm.from > m.MinTime {
			buf = dropBefore(buf, from, cm.from)
		}
	}
	return nil
}

// decodeChunk appends a chunk's samples some window holds to buf: an XOR
// chunk whose samples are all visible by appendXOR, any other (a head
// chunk whose last samples isolation hides, other encodings) through its
// own iterator.
func (sh *shard) decodeChunk(f *sampleFilter, m chunks.Meta, buf []fpoint, usesST bool) ([]fpoint, error) {
	enc := m.Chunk.Encoding()
	whole := false
	if _, ok := m.Chunk.(*chunkenc.XORChunk); ok {
		// A persisted chunk (or one a merge re-encoded): immutable.
		whole = true
	} else if enc == chunkenc.EncXOR {
		// A head chunk: the chunk querier hands out a copy of the
		// one still appended to, but the head's isolation may hide
		// its last samples; its iterator says so by being other
		// than the XOR chunk's own.
		sh.it = m.Chunk.Iterator(sh.it)
		whole = reflect.TypeOf(sh.it) == xorIteratorType
	} else {
		sh.it = m.Chunk.Iterator(sh.it)
	}
	if whole {
		return appendXOR(buf, m.Chunk.Bytes(), f)
	}
	checkST := usesST && enc != chunkenc.EncXOR
	next := f.firstStep(m.MinTime)
	for vt := sh.it.Next(); vt != chunkenc.ValNone; vt = sh.it.Next() {
		if vt != chunkenc.ValFloat {
			return buf, ErrHistogram
		}
		t, v := sh.it.At()
		if t > f.end {
			continue
		}
		if t > next || t <= next-f.interval {
			next = f.firstStep(t)
		}
		if t <= next-f.width {
			continue
		}
		if checkST && sh.it.AtST() != 0 {
			return buf, ErrFallback
		}
		if f.dropStale && value.IsStaleNaN(v) {
			continue
		}
		buf = append(buf, fpoint{t, v})
	}
	return buf, sh.it.Err()
}

// xorIteratorType is the type of an XOR chunk's own iterator.
var xorIteratorType = reflect.TypeOf(chunkenc.NewXORChunk().Iterator(nil))

// readSamples fills buf from a sample iterator, for storage that serves
// no chunks, calling its Next and Seek as upstream's iterators do for this
// query's steps: a MemoizedSeriesIterator over the lookback for an instant
// selector, a BufferedSeriesIterator as histShard.read describes for a
// range function. A merge of sources that overlap in time keeps, of two
// samples at one time, the one its walk meets first, so only the same
// walk reads the same samples.
func (sh *shard) readSamples(ev *evaluator, l *leaf) error {
	mint, maxt := ev.window(l)
	instant := l.fn == ""
	usesST := l.fn == "rate" || l.fn == "increase" || l.fn == "irate"
	s := sh.set.At()
	sh.it = s.Iterator(sh.it)
	buf := sh.buf[:0]
	var (
		vt       = sh.it.Next()
		lastTime = int64(math.MinInt64) // where the iterator is
		lastRead = int64(math.MinInt64) // the last sample taken
		err      error
	)
	// take looks at the sample the iterator is on, once.
	take := func() error {
		t := sh.it.AtT()
		if t <= lastRead {
			return nil
		}
		lastRead = t
		if t < mint || t > maxt {
			return nil
		}
		if vt != chunkenc.ValFloat {
			return ErrHistogram
		}
		if usesST && sh.it.AtST() != 0 {
			return ErrFallback
		}
		_, f := sh.it.At()
		if !instant && value.IsStaleNaN(f) {
			return nil
		}
		buf = append(buf, fpoint{t, f})
		return nil
	}
	// next moves on one sample and takes it.
	next := func() bool {
		if vt = sh.it.Next(); vt == chunkenc.ValNone {
			return false
		}
		lastTime = sh.it.AtT()
		err = take()
		return err == nil
	}
	// seek moves to t0 and takes the sample there.
	seek := func(t0 int64) bool {
		if vt = sh.it.Seek(t0); vt == chunkenc.ValNone {
			return false
		}
		lastTime = sh.it.AtT()
		err = take()
		return err == nil
	}
	rng := l.rng.Milliseconds()
	stepRange := min(rng, ev.interval)
	if ev.instant {
		stepRange = rng
	}
	ts := ev.start
steps:
	for k := 0; k < ev.steps && vt != chunkenc.ValNone; k, ts = k+1, ts+ev.interval {
		if instant {
			// MemoizedSeriesIterator.Seek(ts).
			if t0 := ts - ev.opts.LookbackDelta.Milliseconds(); t0 > lastTime {
				if !seek(t0) {
					break
				}
			}
			for lastTime < ts {
				if !next() {
					break steps
				}
			}
			continue
		}
		delta := stepRange
		if k == 0 {
			delta = rng
		}
		if t0 := ts - delta; t0 > lastTime {
			if !seek(t0) {
				break
			}
		}
		for lastTime < ts {
			if !next() {
				break steps
			}
		}
	}
	sh.buf = buf
	if err != nil {
		return err
	}
	if err := sh.it.Err(); err != nil {
		return fmt.Errorf("read %s: %w", s.Labels(), err)
	}
	return nil
}

func (wk *worker) instantSteps(ev *evaluator, c *column) bool {
	buf, lb := wk.buf, ev.opts.LookbackDelta.Milliseconds()
	any := false
	j := 0
	ts := ev.start
	for i := 0; i < ev.steps; i, ts = i+1, ts+ev.interval {
		for j < len(buf) && buf[j].t <= ts {
			j++
		}
		if j == 0 {
			continue
		}
		p := buf[j-1]
		if p.t <= ts-lb || value.IsStaleNaN(p.f) {
			continue
		}
		c.v[i], c.has[i] = p.f, true
		any = true
	}
	return any
}

func (wk *worker) rangeSteps(ev *evaluator, l *leaf, c *column) bool {
	if l.fn == "rate" || l.fn == "increase" {
		return wk.counterSteps(ev, l, c, l.fn == "rate")
	}
	buf, rng := wk.buf, l.rng.Milliseconds()
	rr := rangeOf(l)
	kind := rangeFuncKinds[l.fn]
	any := false
	lo, hi := 0, 0
	ts := ev.start
	for i := 0; i < ev.steps; i, ts = i+1, ts+ev.interval {
		for lo < len(buf) && buf[lo].t <= ts-rng {
			lo++
		}
		for hi < len(buf) && buf[hi].t <= ts {
			hi++
		}
		if hi <= lo {
			continue
		}
		w := buf[lo:hi]
		var (
			v  float64
			ok = true
		)
		switch kind {
		case fnRate:
			// delta: rate and increase went to counterSteps.
			v, ok = wk.rc.extrapolatedRate(w, nil, lo, hi, ts, rr, false, false)
		case fnIrate:
			v, ok = irate(w)
		case fnSum:
			var sum, cc float64
			for _, p := range w {
				sum, cc = kahansum.Inc(p.f, sum, cc)
			}
			if math.IsInf(sum, 0) {
				v = sum
			} else {
				v = sum + cc
			}
		case fnAvg:
			v = avgOverTime(w)
		case fnMin:
			v = w[0].f
			for _, p := range w {
				if p.f < v || math.IsNaN(v) {
					v = p.f
				}
			}
		case fnMax:
			v = w[0].f
			for _, p := range w {
				if p.f > v || math.IsNaN(v) {
					v = p.f
				}
			}
		case fnCount:
			v = float64(len(w))
		case fnLast:
			v = w[len(w)-1].f
		default:
			panic("BUG: fast: unknown range function " + l.fn)
		}
		if ok {
			c.v[i], c.has[i] = v, true
			any = true
		}
	}
	return any
}

// Range function kinds, so that the per-step switch compares integers.
const (
	fnNone = iota
	fnRate // rate, increase, delta
	fnIrate
	fnSum
	fnAvg
	fnMin
	fnMax
	fnCount
	fnLast
)

var rangeFuncKinds = map[string]int{
	"rate": fnRate, "increase": fnRate, "delta": fnRate, "irate": fnIrate,
	"sum_over_time": fnSum, "avg_over_time": fnAvg, "min_over_time": fnMin,
	"max_over_time": fnMax, "count_over_time": fnCount, "last_over_time": fnLast,
}

// irate is upstream's instantValue for two float samples without start
// timestamps.
func irate(w []fpoint) (float64, bool) {
	if len(w) < 2 {
		return 0, false
	}
	p0, p1 := w[len(w)-2], w[len(w)-1]
	sampledInterval := p1.t - p0.t
	if sampledInterval == 0 {
		return 0, false
	}
	v := p1.f
	if !(p1.f < p0.f) {
		v = p1.f - p0.f
	}
	return v / (float64(sampledInterval) / 1000), true
}

// avgOverTime is upstream's float avg_over_time: a Kahan sum that turns
// into an incremental mean if the sum would overflow.
func avgOverTime(w []fpoint) float64 {
	var (
		sum, count      = w[0].f, 1.
		mean, kahanC    float64
		incrementalMean bool
	)
	for i, p := range w[1:] {
		count = float64(i + 2)
		if !incrementalMean {
			newSum, newC := kahansum.Inc(p.f, sum, kahanC)
			if !math.IsInf(newSum, 0) {
				sum, kahanC = newSum, newC
				continue
			}
			incrementalMean = true
			mean = sum / (count - 1)
			kahanC /= count - 1
		}
		q := (count - 1) / count
		mean, kahanC = kahansum.Inc(p.f/count, q*mean, q*kahanC)
	}
	if incrementalMean {
		return mean + kahanC
	}
	return sum/count + kahanC/count
}
