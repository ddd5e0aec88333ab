// Package fast evaluates the PromQL shapes dashboards send — range
// functions over one metric, aggregations of them, histogram_quantile over
// aggregated classic buckets or native histograms, arithmetic and
// comparisons with number literals — in one pass over each series'
// samples, with series sharded across goroutines and aggregations folded
// per step batch.
//
// In: a parsed expression (Compile says whether this package can take it),
// a storage.Queryable, and an instant or a range of steps. Out: the
// promql.Matrix or promql.Vector the upstream engine would return, with the
// same annotations that matter (possible non-counter, invalid quantile, bad
// bucket label).
//
// Invariants:
//   - Answers are bitwise identical to the upstream engine's. Every float is
//     computed with upstream's formula and order of operations: the same
//     extrapolation arithmetic for rate/increase/delta, Kahan sums added in
//     series order per step (the fold is parallel over steps, never over
//     series, so the order of additions is the upstream one; kahan.go runs
//     kahansum.Inc's additions inline over finite inputs, on amd64 with
//     AVX2 four steps to a vector in kahan_amd64.s, and calls Inc itself
//     wherever a NaN or an infinity could make the payload depend on
//     operand order), and
//     promql.BucketQuantile itself for classic histograms. Native
//     histograms (histogram.go, histogram_dense.go): rate and increase
//     follow upstream's histogramRate (counter reset hints, schema
//     reduction, custom buckets, its annotations) and sums its KahanAdd;
//     where a window's histograms share one bucket layout, and where a
//     sum's inputs share a schema and zero threshold, the same float
//     operations run bucket by bucket on dense arrays instead of through
//     span merging, and Compact(0) gives upstream's layout; then
//     promql.HistogramQuantile. Counter reset hints: the chunk iterator
//     hands out a chunk's first sample as unknown and the others as no
//     reset, and a merge of blocks or a seek turns hints to unknown; since
//     within one chunk counts never go down (the appender cuts a chunk on
//     a reset) DetectReset finds no reset between two samples of a chunk
//     whatever the hint, so a leaf reading chunks sees upstream's resets
//     with the hint unknown on each chunk's first sample only (and checks
//     that counts do not go down between the samples a window holds); a
//     leaf reading sample iterators calls Next and Seek as upstream's
//     buffered iterator does.
//   - Whatever this package is not sure to answer exactly it refuses:
//     Compile rejects offsets, @, subqueries, anchored or smoothed
//     selectors, selectors without a metric name, other functions and
//     vector-vector operations; evaluation returns ErrFallback when it meets
//     a native histogram sample anywhere but under rate or increase below
//     only sums up to a count, histogram_quantile or
//     histogram_count/sum/avg (ErrHistogram), a gauge histogram under
//     histogram_count/sum/avg (upstream reads those selectors without
//     buckets and finds resets from the counts alone), floats and
//     histograms in one selection, custom bucket bounds a subtraction or
//     sum would reconcile, a sum of histograms of different schemas or
//     zero thresholds, a start timestamp on a
//     counter (stored only with the TSDB's start-timestamp storage on),
//     series with __type__/__unit__ labels, classic buckets histogram_quantile
//     had to force monotonic (ErrForcedMonotonicity: upstream's annotation
//     then reports a merge-dependent sample count the API prints), a
//     selection that changed between
//     the workers' reads, or a query whose upstream sample accounting could
//     reach MaxSamples (or times near the ends of an int64). The caller
//     then runs the upstream engine, which
//     stays the reference (a differential test over generated queries
//     checks the two against each other).
//   - Series are sharded over Workers goroutines. Over chunks, one walker
//     selects, walks the index once and loads the chunks of half a batch
//     (a querier's chunk reader is not goroutine-safe) while the workers
//     decode and evaluate the previous half, taking pieces of 32 series in
//     turn (a worker slowed by a busy core takes fewer). Over sample iterators,
//     each worker reads through its own querier, walking the same
//     selection in the same order, which a hash of the labels checks batch
//     by batch.
//   - Reading: where the storage serves chunks (storage.ChunkQueryable, as
//     the TSDB does, or a ChunkSource that says so for this evaluation, as
//     the server's global view does while no remote store is in force) and
//     is a Prometheus TSDB (directly, or a TSDBSource such as tailroot's
//     tsdb.DB) whose persisted blocks in the range do not overlap each
//     other nor the head's data, the walker reads each block's index
//     itself and joins a series' chunks across blocks and the head in time
//     order (blocks.go), without the TSDB's merge of every series of every
//     block; the workers load the block chunks they decode, in place from a
//     second mapping of the block's segment files (blockchunks.go). With no
//     block in the range the head alone is read the same way, its index by
//     the walker and its chunks by the workers through one chunk reader
//     (openHeadWalk), in its series order. Overlapping
//     blocks, out-of-order data in the head within the blocks' time, or a
//     block list that changed while the read was opened take the merged
//     chunk querier instead; chunks of one series that overlap anyway, and
//     block deletions of samples a head chunk also holds, hand the query
//     back. Where the sources overlap in time within the range (overlapping
//     blocks, out-of-order samples in the head), chunks are not read at
//     all: of two samples at one time a merge keeps the one its walk meets
//     first, and the chunk queriers' Next-only walk can meet another than
//     upstream's seeks (TestDuplicateTimesAcrossSources), so floats and
//     native histograms are read through sample iterators there, walked
//     as upstream walks them. A tenant's view (tsdb.TenantQueryable) is no TSDBSource: its
//     chunks come through its confining querier; it is an OverlapSource,
//     so the overlap check above sees the TSDB underneath. A chunk no step's window meets is not decoded, XOR
//     chunks whose samples are all visible (persisted ones, and head
//     chunks the head's isolation does not cut) are decoded by this
//     package's own loop (xor.go, checked against the chunk iterator by
//     FuzzXORDecode; on amd64 written out in assembly, xor_amd64.s, checked
//     against the Go loop by FuzzDecodeXORAsm, which the purego build tag
//     leaves out) from the chunk's bytes where they lie, keeping, as it
//     decodes, only the samples some window holds (the others are written
//     over by the next) before any step sees them; other chunks go through their own
//     iterators, and storage without chunks through sample iterators,
//     walked with upstream's Next and Seek calls (a merge of overlapping
//     sources keeps, of two samples at one time, the one its walk meets). A
//     leaf that meets native histograms before its first output starts
//     over as a histogram leaf (runHistLeaf). Over chunks, each worker
//     selects through its own chunk querier; integer histogram chunks are
//     decoded by this package's own loop (histogram_chunk.go, checked
//     against the chunk iterator by FuzzHistChunkDecode) into the int64
//     state the iterator keeps, and only the samples some window holds
//     are converted to floats, into one flat array per series, without a
//     FloatHistogram per sample; a chunk whose last time is before the
//     last step is decoded only up to the last window that can hold one
//     of its samples. Chunks that overlap, gauge or float
//     histogram chunks and counts that go down within a chunk make the
//     leaf start over on sample iterators (or hand the query back once it
//     has given output), which decode each sample into a reused
//     FloatHistogram.
//   - Per step, rate and increase (rate.go) compute only what the window's
//     ends, its resets and, when the sample times shift against the
//     window, the time-only part of the extrapolation need; the zero
//     clamp's division is skipped where a multiplication proves it cannot
//     apply (TestClampFree). Steps with no reset in the window, the cached
//     time-only part and no clamp run in a loop without calls, so that
//     its state stays in registers; the others are computed in full
//     outside it (TestCounterSteps checks both against upstream's formula).
//   - Memory is bounded by a batch of series at a time: one series' samples
//     per worker and one column of step values per series of the batch,
//     plus the aggregated output; samples are never all materialised.
//     Histogram leaves take batches of 32 series, a FloatHistogram per
//     step each, reused from batch to batch.
//   - Context cancellation and the deadline stop every worker between series
//     and return promql.ErrQueryCanceled / ErrQueryTimeout as upstream does.
package fast
