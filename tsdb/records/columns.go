package records

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"
)

// Columns is a set of record fields for SelectColumns, combined with |.
type Columns uint32

// The columns SelectColumns can decode. Stage columns are ColumnStage(s).
const (
	ColumnTime          Columns = 1 << iota // Record.Time → ColumnBatch.Time
	ColumnLabelSet                          // Record.Labels → ColumnBatch.LabelSet and LabelSets
	ColumnE2E                               // Record.E2E
	ColumnTTFT                              // Record.TTFT
	ColumnPromptTokens                      // Record.PromptTokens
	ColumnOutputTokens                      // Record.OutputTokens
	ColumnPromptEntropy                     // Record.PromptEntropy
	columnStage0                            // first of NumStages stage bits

	// ColumnStages is every stage duration.
	ColumnStages = columnStage0 * (1<<NumStages - 1)
	// ColumnAll is every column SelectColumns knows.
	ColumnAll = columnStage0<<NumStages - 1
)

// ColumnStage is the column of stage s's durations (Record.Stages[s]); 0
// for a stage outside [0, NumStages).
func ColumnStage(s Stage) Columns {
	if s < 0 || s >= NumStages {
		return 0
	}
	return columnStage0 << s
}

// ColumnBatch holds selected records column by column: row i of every
// requested column belongs to the same record. Columns that were not
// requested are nil, requested ones have Len values. A batch shares no
// memory with the store; the caller owns it and may modify it.
type ColumnBatch struct {
	Len  int
	Time []int64
	// LabelSet[i] indexes LabelSets: the labels of row i. LabelSets holds
	// each distinct label set of the rows once, so grouping by labels is
	// grouping by id.
	LabelSet  []uint32
	LabelSets []labels.Labels
	// Stages[s] is requested with ColumnStage(s).
	Stages        [NumStages][]float64
	E2E           []float64
	TTFT          []float64
	PromptEntropy []float64
	PromptTokens  []uint32
	OutputTokens  []uint32
}

// Labels returns the labels of row i; the batch must hold ColumnLabelSet.
func (b *ColumnBatch) Labels(i int) labels.Labels { return b.LabelSets[b.LabelSet[i]] }

// SelectColumns returns the requested columns of the records with
// mint ≤ Time ≤ maxt whose labels match all matchers: the records Select
// returns, in the same order (time, then append order within a partition),
// with the same values bit for bit.
//
// It is Select for callers that aggregate: it decodes only the requested
// columns of each sealed segment, straight from their byte-shuffled planes
// into the batch, evaluates matchers once per label set of a segment, and
// decompresses up to maxColumnWorkers segments at once. Records still in
// the WAL (open partitions) are read from memory. The set of files is fixed
// when it is called, as for Select; a segment removed by retention
// meanwhile is skipped. Memory is the batch plus one decompressed segment
// per worker.
//
// Reading a segment verifies its checksum and the structure of every column
// it decodes; columns it does not need are located but not parsed.
func (s *Store) SelectColumns(ctx context.Context, mint, maxt int64, want Columns, ms ...*labels.Matcher) (*ColumnBatch, error) {
	if bad := want &^ ColumnAll; bad != 0 {
		return nil, fmt.Errorf("select columns: unknown column bits %#x", uint32(bad))
	}
	parts, err := s.snapshot(mint, maxt)
	if err != nil {
		return nil, fmt.Errorf("select columns: %w", err)
	}
	q := newColumnQuery(ctx, mint, maxt, want, ms, parts)
	if err := q.run(); err != nil {
		return nil, fmt.Errorf("select columns: %w", err)
	}
	return q.finish(), nil
}

// columnQuery is one SelectColumns call. Jobs (one per segment or head
// snapshot, in output order) are prepared concurrently — read, decompress,
// locate columns, choose rows — and gathered into the batch one at a time
// in job order, so a job's rows land right after its predecessor's. The
// fields from out on are touched only by the job holding the turn.
type columnQuery struct {
	ctx        context.Context
	mint, maxt int64
	want       Columns
	matchers   []*labels.Matcher
	jobs       []colJob
	parts      []colPart
	keepTime   bool // the batch holds times: asked for, or needed to merge
	failed     atomic.Bool

	out   ColumnBatch
	rows  int // capacity of every column of out
	seen  int // upper bound of the rows of the jobs gathered so far
	bound int // upper bound of the rows of all jobs
	sets  labelSetTable
	err   error
}

// maxColumnWorkers bounds the segments SelectColumns holds decompressed at
// once (each is tens of MiB). Gathering is serial and takes about a third
// of a segment's time, so more workers would mostly wait for their turn.
const maxColumnWorkers = 4

// colPart is a partition's run of jobs. Its segments and head each come out
// sorted by time; when their time ranges overlap, the runs are merged after
// gathering (merge), which needs their times.
type colPart struct {
	first, end int // jobs[first:end]
	merge      bool
}

// colJob is one sealed segment (seg != nil) or head snapshot to read.
type colJob struct {
	seg      *segmentMeta
	head     []Record
	needTime bool
	bound    int // at most this many rows
	start    int // first row in the batch; set when gathered
	count    int
}

func newColumnQuery(ctx context.Context, mint, maxt int64, want Columns, ms []*labels.Matcher, parts []partSnap) *columnQuery {
	q := &columnQuery{ctx: ctx, mint: mint, maxt: maxt, want: want, matchers: ms}
	q.sets.ids = map[string]uint32{}
	for _, p := range parts {
		cp := colPart{first: len(q.jobs)}
		// The concatenation of the sources is in time order when each
		// starts no earlier than every source before it ends (equal
		// times already come in append order); otherwise merge.
		prevMax := int64(0)
		for i := range p.segs {
			m := &p.segs[i]
			if i > 0 && m.minT < prevMax {
				cp.merge = true
			}
			prevMax = max(prevMax, m.maxT)
			q.jobs = append(q.jobs, colJob{seg: m, bound: m.count})
		}
		if len(p.head) > 0 {
			first := p.head[0].Time
			for i := range p.head {
				first = min(first, p.head[i].Time)
			}
			if len(p.segs) > 0 && first < prevMax {
				cp.merge = true
			}
			q.jobs = append(q.jobs, colJob{head: p.head, bound: len(p.head)})
		}
		cp.end = len(q.jobs)
		q.keepTime = q.keepTime || cp.merge
		for j := cp.first; j < cp.end; j++ {
			q.jobs[j].needTime = cp.merge || want&ColumnTime != 0
			q.bound += q.jobs[j].bound
		}
		q.parts = append(q.parts, cp)
	}
	q.keepTime = q.keepTime || want&ColumnTime != 0
	return q
}

// run prepares and gathers every job, then merges overlapping runs.
func (q *columnQuery) run() error {
	if len(q.jobs) == 0 {
		return q.ctx.Err()
	}
	turns := make([]chan struct{}, len(q.jobs)+1)
	for i := range turns {
		turns[i] = make(chan struct{})
	}
	close(turns[0])
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), maxColumnWorkers, len(q.jobs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(q.jobs) {
					return
				}
				j := &q.jobs[i]
				p, err := q.prepare(j)
				<-turns[i]
				if err != nil && q.err == nil {
					q.err = err
					q.failed.Store(true)
				}
				if q.err == nil {
					q.gather(j, p)
				}
				p.release()
				close(turns[i+1])
			}
		})
	}
	wg.Wait()
	if q.err != nil {
		return q.err
	}
	for _, p := range q.parts {
		if p.merge {
			q.mergePart(p)
		}
	}
	return nil
}

// prepare does the part of a job that needs no batch: for a segment, read,
// verify, decompress, locate the columns and pick the rows.
func (q *columnQuery) prepare(j *colJob) (*colPrep, error) {
	if q.failed.Load() {
		return nil, nil
	}
	if err := q.ctx.Err(); err != nil {
		return nil, err
	}
	if j.seg == nil {
		return q.prepareHead(j), nil
	}
	file := getBuf(&filePool, 0)
	data, err := readFileInto(j.seg.path, file)
	if errors.Is(err, os.ErrNotExist) {
		putBuf(&filePool, file)
		return nil, nil // removed by retention since the snapshot
	}
	if err != nil {
		putBuf(&filePool, file)
		return nil, err
	}
	rawLen := 0
	if h, err := readSegmentHeader(data); err == nil && h.RawLen <= maxRawBody {
		rawLen = int(h.RawLen) // else decompressSegment reports the error
	}
	raw := getBuf(&rawPool, rawLen)
	body, h, _, err := decompressSegment(data, zstdColumnDecoder(), maxRawBody, *raw)
	putBuf(&filePool, file)
	if err != nil {
		putBuf(&rawPool, raw)
		return nil, &CorruptionError{File: j.seg.path, Reason: err.Error()}
	}
	*raw = body
	p, err := q.prepareBody(body, &h, j.needTime)
	if err != nil {
		putBuf(&rawPool, raw)
		return nil, &CorruptionError{File: j.seg.path, Reason: "segment: " + err.Error()}
	}
	p.raw = raw
	return p, nil
}

// gather appends the prepared rows of j to the batch. Called in job order
// by the job holding the turn.
func (q *columnQuery) gather(j *colJob, p *colPrep) {
	j.start = q.out.Len
	if err := q.ctx.Err(); err != nil {
		q.err = err
		return
	}
	q.seen += j.bound
	if p == nil || p.count == 0 {
		return
	}
	j.count = p.count
	q.reserve(p.count)
	var err error
	if j.seg != nil {
		err = q.gatherSegment(j.start, p)
	} else {
		q.gatherHead(j.start, j.head, p.headRows)
	}
	if err != nil {
		q.err = &CorruptionError{File: j.seg.path, Reason: "segment: " + err.Error()}
	}
}

// reserve extends every kept column by n rows. When a column must grow,
// its new capacity extrapolates the fraction of rows kept so far to the
// rows still to read, so a selection that keeps a steady share of every
// segment allocates its columns about once.
func (q *columnQuery) reserve(n int) {
	need := q.out.Len + n
	if need > q.rows {
		est := need
		if q.seen > 0 {
			est = int(float64(need) * float64(q.bound) / float64(q.seen))
			est += est / 16
		}
		q.rows = max(need, est, q.rows+q.rows/4)
		q.resize(need)
	}
	q.out.Len = need
	q.setLen(need)
}

// resize reallocates every kept column with capacity q.rows and length n.
func (q *columnQuery) resize(n int) {
	o := &q.out
	if q.keepTime {
		o.Time = regrow(o.Time, n, q.rows)
	}
	if q.want&ColumnLabelSet != 0 {
		o.LabelSet = regrow(o.LabelSet, n, q.rows)
	}
	for st := range Stage(NumStages) {
		if q.want&ColumnStage(st) != 0 {
			o.Stages[st] = regrow(o.Stages[st], n, q.rows)
		}
	}
	for _, f := range q.floatOuts() {
		*f.dst = regrow(*f.dst, n, q.rows)
	}
	if q.want&ColumnPromptTokens != 0 {
		o.PromptTokens = regrow(o.PromptTokens, n, q.rows)
	}
	if q.want&ColumnOutputTokens != 0 {
		o.OutputTokens = regrow(o.OutputTokens, n, q.rows)
	}
}

func (q *columnQuery) setLen(n int) {
	o := &q.out
	if q.keepTime {
		o.Time = o.Time[:n]
	}
	if q.want&ColumnLabelSet != 0 {
		o.LabelSet = o.LabelSet[:n]
	}
	for st := range Stage(NumStages) {
		if q.want&ColumnStage(st) != 0 {
			o.Stages[st] = o.Stages[st][:n]
		}
	}
	for _, f := range q.floatOuts() {
		*f.dst = (*f.dst)[:n]
	}
	if q.want&ColumnPromptTokens != 0 {
		o.PromptTokens = o.PromptTokens[:n]
	}
	if q.want&ColumnOutputTokens != 0 {
		o.OutputTokens = o.OutputTokens[:n]
	}
}

// floatOut pairs a requested non-stage float column with its segment
// column number.
type floatOut struct {
	dst *[]float64
	col int
	get func(r *Record) float64
}

func (q *columnQuery) floatOuts() []floatOut {
	var fs []floatOut
	o := &q.out
	if q.want&ColumnE2E != 0 {
		fs = append(fs, floatOut{&o.E2E, colE2E, func(r *Record) float64 { return r.E2E }})
	}
	if q.want&ColumnTTFT != 0 {
		fs = append(fs, floatOut{&o.TTFT, colTTFT, func(r *Record) float64 { return r.TTFT }})
	}
	if q.want&ColumnPromptEntropy != 0 {
		fs = append(fs, floatOut{&o.PromptEntropy, colEntropy, func(r *Record) float64 { return r.PromptEntropy }})
	}
	return fs
}

func regrow[T any](s []T, n, capacity int) []T {
	t := make([]T, n, capacity)
	copy(t, s)
	return t
}

// mergePart orders the rows of a partition whose runs overlap in time: a
// stable merge of the runs (segments in seq order, then the head), which
// is the stable time sort Select applies to the same rows.
func (q *columnQuery) mergePart(p colPart) {
	lo := q.jobs[p.first].start
	hi := q.jobs[p.end-1].start + q.jobs[p.end-1].count
	runs := make([]int, 0, p.end-p.first+1)
	for j := p.first; j < p.end; j++ {
		runs = append(runs, q.jobs[j].start-lo)
	}
	runs = append(runs, hi-lo)
	perm := mergeRuns(q.out.Time[lo:hi], runs)
	a, b := 0, len(perm)
	for a < b && perm[a] == int32(a) {
		a++
	}
	for b > a && perm[b-1] == int32(b-1) {
		b--
	}
	if a == b {
		return
	}
	perm = perm[a:b]
	o := &q.out
	if q.keepTime {
		permute(o.Time[lo:hi], perm, a)
	}
	if o.LabelSet != nil {
		permute(o.LabelSet[lo:hi], perm, a)
	}
	for st := range o.Stages {
		if o.Stages[st] != nil {
			permute(o.Stages[st][lo:hi], perm, a)
		}
	}
	for _, f := range q.floatOuts() {
		permute((*f.dst)[lo:hi], perm, a)
	}
	if o.PromptTokens != nil {
		permute(o.PromptTokens[lo:hi], perm, a)
	}
	if o.OutputTokens != nil {
		permute(o.OutputTokens[lo:hi], perm, a)
	}
}

// permute sets s[a+i] = old s[perm[i]] for every i.
func permute[T any](s []T, perm []int32, a int) {
	tmp := make([]T, len(perm))
	for i, k := range perm {
		tmp[i] = s[k]
	}
	copy(s[a:], tmp)
}

// mergeRuns returns the stable sort order of times, which consists of
// sorted runs starting at runs[0] = 0, runs[1], … and ending at
// runs[len-1] = len(times): merged pairwise, ties taken from the earlier run.
func mergeRuns(times []int64, runs []int) []int32 {
	perm := make([]int32, len(times))
	for i := range perm {
		perm[i] = int32(i)
	}
	tmp := make([]int32, len(times))
	for len(runs) > 2 {
		next := runs[:0:0]
		for r := 0; r+1 < len(runs); r += 2 {
			lo, mid := runs[r], runs[r+1]
			next = append(next, lo)
			if r+2 >= len(runs) { // odd run out
				copy(tmp[lo:mid], perm[lo:mid])
				continue
			}
			hi := runs[r+2]
			i, j, k := lo, mid, lo
			for i < mid && j < hi {
				if times[perm[j]] < times[perm[i]] {
					tmp[k] = perm[j]
					j++
				} else {
					tmp[k] = perm[i]
					i++
				}
				k++
			}
			k += copy(tmp[k:], perm[i:mid])
			copy(tmp[k:], perm[j:hi])
		}
		next = append(next, len(times))
		runs = next
		perm, tmp = tmp, perm
	}
	return perm
}

// finish drops internal columns, trims capacity that a poor estimate left
// unused, and makes every requested column non-nil.
func (q *columnQuery) finish() *ColumnBatch {
	o := &q.out
	if q.rows > o.Len+o.Len/4+1024 || q.rows == 0 {
		q.rows = o.Len
		q.resize(o.Len)
	}
	if q.want&ColumnTime == 0 {
		o.Time = nil
	}
	o.LabelSets = q.sets.sets
	if q.want&ColumnLabelSet != 0 && o.LabelSets == nil {
		o.LabelSets = []labels.Labels{}
	}
	return o
}

// Buffers for segment files and decompressed bodies, reused across
// segments and calls: a body is tens of MiB, and a fresh one costs page
// faults that take longer than decompressing into it.
var filePool, rawPool sync.Pool

func getBuf(p *sync.Pool, n int) *[]byte {
	if v, ok := p.Get().(*[]byte); ok && cap(*v) >= n {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, bufCap(n))
	return &b
}

// bufCap rounds n up to a multiple of 1/16 of the next power of two, so
// that a buffer sized for one segment also fits segments slightly larger
// (sealed generations have nearly equal sizes) at ≤ 6.25% waste.
func bufCap(n int) int {
	if n <= 4096 {
		return 4096
	}
	step := 1 << (bits.Len(uint(n-1)) - 4)
	return (n + step - 1) / step * step
}

func putBuf(p *sync.Pool, b *[]byte) {
	if b != nil {
		p.Put(b)
	}
}
