package tailfn

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tailroot/tailroot/attribution"
)

// ShardOptions tunes a LocalShard.
type ShardOptions struct {
	// SnapshotTTL is how long a window's columns are kept for the rounds
	// of one query after its last use: long enough for the gap between two
	// rounds, short so that finished queries release memory. Zero or
	// negative means 15 s.
	SnapshotTTL time.Duration
	// MaxSnapshots bounds the windows kept at once (the oldest goes
	// first); zero or negative means 8.
	MaxSnapshots int
	// Parser parses request selectors; nil means parser.NewParser with
	// default options.
	Parser parser.Parser
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultShardOptions returns the documented defaults.
func DefaultShardOptions() ShardOptions {
	return ShardOptions{SnapshotTTL: 15 * time.Second, MaxSnapshots: 8}
}

// LocalShard answers the distributed tail protocol over a RecordSource:
// the records of this server. The HTTP endpoint /api/v1/records/shard and
// the coordinator's own node both call it, so a peer and the querying
// server compute every primitive with the same code.
type LocalShard struct {
	src  RecordSource
	opts ShardOptions

	mu    sync.Mutex
	snaps map[string]*snapshot
}

// NewLocalShard returns a shard over src.
func NewLocalShard(src RecordSource, opts ShardOptions) *LocalShard {
	if opts.SnapshotTTL <= 0 {
		opts.SnapshotTTL = 15 * time.Second
	}
	if opts.MaxSnapshots <= 0 {
		opts.MaxSnapshots = 8
	}
	if opts.Parser == nil {
		opts.Parser = parser.NewParser(parser.Options{})
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &LocalShard{src: src, opts: opts, snaps: map[string]*snapshot{}}
}

// Name is "local".
func (s *LocalShard) Name() string { return "local" }

// snapshot is one window's records, loaded once per query.
type snapshot struct {
	once sync.Once
	err  error
	pop  Population
	// skipped counts the records the request's Records left out.
	skipped int
	used    time.Time

	mu     sync.Mutex
	sorted map[string][]float64
}

// sortedField returns the ascending values of a field, computed once.
func (sn *snapshot) sortedField(field string) ([]float64, error) {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if v, ok := sn.sorted[field]; ok {
		return v, nil
	}
	x, err := sn.pop.Field(field)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadShardRequest, err)
	}
	y := slices.Clone(x)
	for _, v := range y {
		if math.IsNaN(v) {
			return nil, fmt.Errorf("field %s holds NaN", field)
		}
	}
	slices.Sort(y)
	if sn.sorted == nil {
		sn.sorted = map[string][]float64{}
	}
	sn.sorted[field] = y
	return y, nil
}

// window returns the snapshot of req's window, loading it if this query
// has none (first round, or expired).
func (s *LocalShard) window(ctx context.Context, req *ShardRequest) (*snapshot, error) {
	var ms []*labels.Matcher
	if req.Selector != "" && req.Selector != "{}" {
		var err error
		if ms, err = s.opts.Parser.ParseMetricSelector(req.Selector); err != nil {
			return nil, fmt.Errorf("%w: selector %q: %w", ErrBadShardRequest, req.Selector, err)
		}
	}
	if req.Mint > req.Maxt {
		return nil, fmt.Errorf("%w: mint %d after maxt %d", ErrBadShardRequest, req.Mint, req.Maxt)
	}
	switch req.Records {
	case "", RecordsTTFT, RecordsWithTTFT:
	default:
		return nil, fmt.Errorf("%w: records %q: want empty, %q or %q", ErrBadShardRequest, req.Records, RecordsTTFT, RecordsWithTTFT)
	}
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%s", req.Query, req.Selector, req.Mint, req.Maxt, req.Records)
	now := s.opts.Now()
	s.mu.Lock()
	for k, sn := range s.snaps {
		if now.Sub(sn.used) > s.opts.SnapshotTTL {
			delete(s.snaps, k)
		}
	}
	sn, ok := s.snaps[key]
	if !ok {
		for len(s.snaps) >= s.opts.MaxSnapshots {
			oldest := ""
			for k, o := range s.snaps {
				if oldest == "" || o.used.Before(s.snaps[oldest].used) {
					oldest = k
				}
			}
			delete(s.snaps, oldest)
		}
		sn = &snapshot{}
		s.snaps[key] = sn
	}
	sn.used = now
	s.mu.Unlock()
	sn.once.Do(func() {
		sn.pop, sn.err = load(ctx, s.src, Window{Matchers: ms, Mint: req.Mint, Maxt: req.Maxt}, nil, true)
		if sn.err != nil {
			return
		}
		n := sn.pop.Requests.Len()
		switch req.Records {
		case RecordsTTFT:
			sn.pop, sn.skipped, sn.err = sn.pop.TTFTPopulation()
		case RecordsWithTTFT:
			sn.pop, sn.err = sn.pop.WithTTFT()
			sn.skipped = n - sn.pop.Requests.Len()
		}
	})
	if sn.err != nil {
		s.mu.Lock()
		if s.snaps[key] == sn {
			delete(s.snaps, key)
		}
		s.mu.Unlock()
		return nil, sn.err
	}
	if req.Expect != nil && *req.Expect != sn.pop.Requests.Len() {
		return nil, fmt.Errorf("%w: %d records in the window, %d when the query began", ErrSnapshotChanged, sn.pop.Requests.Len(), *req.Expect)
	}
	return sn, nil
}

// Stats answers one round.
func (s *LocalShard) Stats(ctx context.Context, req *ShardRequest) (*ShardResponse, error) {
	field := req.Field
	if field == "" {
		field = "e2e"
	}
	if err := CheckField(field); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadShardRequest, err)
	}
	sn, err := s.window(ctx, req)
	if err != nil {
		return nil, err
	}
	reqs := sn.pop.Requests
	n := reqs.Len()
	out := &ShardResponse{N: n, Records: req.Records, Skipped: sn.skipped, Clamped: sn.pop.Clamped, ClampedMax: sn.pop.ClampedMax}
	needSorted := req.Summary || len(req.Splits) > 0 || len(req.Fetch) > 0 || len(req.At) > 0 || req.Values != nil || req.Moment != nil || req.Kernel != nil
	var y []float64
	if needSorted {
		if y, err = sn.sortedField(field); err != nil {
			return nil, err
		}
	}
	total := reqs.Total()
	if req.Summary {
		sum := &ShardSummary{Stages: make([]float64, reqs.K())}
		if n > 0 {
			sum.Min, sum.Max = y[0], y[n-1]
		}
		x, _ := sn.pop.Field(field)
		for _, v := range x {
			sum.Sum += v
		}
		for j := range reqs.K() {
			for _, v := range reqs.Stage(j) {
				sum.Stages[j] += v
			}
		}
		for _, v := range total {
			sum.S += v
		}
		out.Summary = sum
	}
	for _, sp := range req.Splits {
		// #{v : key(v) ≤ k} by binary search on the sorted values.
		upTo := func(k uint64) int { return sort.Search(n, func(r int) bool { return orderKey(y[r]) > k }) }
		sc := SplitCounts{In: []int{}}
		if sp.Lo > 0 {
			sc.Below = upTo(sp.Lo - 1)
		}
		prev := sc.Below
		for _, t := range SplitKeys(sp.Lo, sp.Hi, sp.Fanout) {
			c := upTo(t)
			sc.In = append(sc.In, c-prev)
			prev = c
		}
		sc.Rest = upTo(sp.Hi) - prev
		out.Splits = append(out.Splits, sc)
	}
	for _, rg := range req.Fetch {
		out.Fetched = append(out.Fetched, valuesIn(y, rg))
	}
	for _, v := range req.At {
		a := AtResult{
			Below:     sort.Search(n, func(r int) bool { return y[r] >= v }),
			AtOrBelow: sort.Search(n, func(r int) bool { return y[r] > v }),
		}
		if a.AtOrBelow < n {
			next := y[a.AtOrBelow]
			a.Next = &next
		}
		out.At = append(out.At, a)
	}
	for _, rg := range req.Sums {
		res := SumResult{Stages: make([]float64, reqs.K())}
		for r, v := range total {
			if !rg.Contains(v) {
				continue
			}
			res.Count++
			res.S += v
			for j := range res.Stages {
				res.Stages[j] += reqs.Stage(j)[r]
			}
		}
		out.Sums = append(out.Sums, res)
	}
	for _, v := range req.Ties {
		ties := []TieRecord{}
		for r, s := range total {
			if s != v {
				continue
			}
			tr := TieRecord{Time: sn.pop.Time[r], Stages: make([]float64, reqs.K())}
			for j := range tr.Stages {
				tr.Stages[j] = reqs.Stage(j)[r]
			}
			ties = append(ties, tr)
		}
		out.Ties = append(out.Ties, ties)
	}
	if rg := req.Values; rg != nil {
		out.Values = &ValuesResult{Below: sort.SearchFloat64s(y, rg.Lo), V: valuesIn(y, *rg)}
	}
	if c := req.Moment; c != nil {
		for _, v := range y {
			out.Moment += (v - *c) * (v - *c)
		}
	}
	if k := req.Kernel; k != nil {
		from := sort.SearchFloat64s(y, k.Q-10*k.BW)
		to := sort.SearchFloat64s(y, k.Q+10*k.BW)
		out.Kernel = attribution.KernelSum(y[from:to], k.Q, k.BW)
	}
	if req.Columns {
		out.Columns = make([][]float64, reqs.K())
		for j := range out.Columns {
			out.Columns[j] = slices.Clone(reqs.Stage(j))
			if out.Columns[j] == nil {
				out.Columns[j] = []float64{}
			}
		}
	}
	return out, nil
}

// valuesIn returns a copy of the values of the ascending y that lie in rg.
func valuesIn(y []float64, rg Range) []float64 {
	from := sort.Search(len(y), func(r int) bool { return y[r] > rg.Lo || y[r] == rg.Lo && !rg.LoOpen })
	to := from
	for to < len(y) && rg.Contains(y[to]) {
		to++
	}
	return append([]float64{}, y[from:to]...)
}
