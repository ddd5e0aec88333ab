package tailfn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/tsdb/records"
)

// ClusterOptions tunes a Cluster.
type ClusterOptions struct {
	// Fanout is the number of thresholds per searched rank per round of
	// the distributed selection: each round narrows the key interval
	// (Fanout+1)-fold. Zero or negative means 255 (at most 8 rounds).
	Fanout int
	// FetchLimit ends a search early: once the key interval of a rank
	// holds at most this many values over all nodes, the next round
	// fetches them instead of splitting further. Zero means 64; negative
	// disables it (pure splitting).
	FetchLimit int
	// MaxCIValues caps the order statistics a bootstrap or Maritz–Jarrett
	// quantile_ci fetches (their exact span grows as √n); past it the
	// interval is answered with the order-statistic method and an info
	// annotation. Zero means 256; negative means no cap.
	MaxCIValues int
	// PartialResponse is the default for queries that do not pass
	// partial_response: answer from the nodes that respond, with a
	// warning, instead of failing when a peer is down.
	PartialResponse bool
}

// DefaultClusterOptions returns the documented defaults.
func DefaultClusterOptions() ClusterOptions {
	return ClusterOptions{Fanout: 255, FetchLimit: 64, MaxCIValues: 256}
}

// Cluster is a RecordSource whose record functions tail_mean, tail_excess,
// tail_euler, tail_heat, quantile_ci, quantile_diff_ci and tail_shapley run over the records
// of this server and of its peers, exactly as over one server holding all
// of them (docs/distributed-tails.md), as do Decompose and QuantileDiff,
// for the attribution endpoints. Select and the other functions read the
// local records only.
type Cluster struct {
	local  RecordSource
	shards []Shard // shards[0] is the local one
	opts   ClusterOptions
}

// NewCluster returns a cluster of the local records (read in process
// through a LocalShard with shard options) and peers.
func NewCluster(local RecordSource, peers []Shard, opts ClusterOptions, shard ShardOptions) *Cluster {
	if opts.Fanout <= 0 {
		opts.Fanout = 255
	}
	if opts.FetchLimit == 0 {
		opts.FetchLimit = 64
	}
	switch {
	case opts.MaxCIValues == 0:
		opts.MaxCIValues = 256
	case opts.MaxCIValues < 0:
		opts.MaxCIValues = math.MaxInt
	}
	shards := append([]Shard{NewLocalShard(local, shard)}, peers...)
	return &Cluster{local: local, shards: shards, opts: opts}
}

// Select reads the local records.
func (c *Cluster) Select(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) records.RecordIterator {
	return c.local.Select(ctx, mint, maxt, ms...)
}

// Local returns the local record source.
func (c *Cluster) Local() RecordSource { return c.local }

// Shards returns the nodes a query reads, the local one first.
func (c *Cluster) Shards() []Shard { return c.shards }

type partialKey struct{}

// WithPartialResponse returns ctx carrying the query's partial_response
// choice, which overrides ClusterOptions.PartialResponse.
func WithPartialResponse(ctx context.Context, partial bool) context.Context {
	return context.WithValue(ctx, partialKey{}, partial)
}

// PartialResponseFrom returns the partial_response choice ctx carries, or
// def when it carries none.
func PartialResponseFrom(ctx context.Context, def bool) bool {
	if v, ok := ctx.Value(partialKey{}).(bool); ok {
		return v
	}
	return def
}

// PeerError is a round that a peer did not answer.
type PeerError struct {
	Peer string
	Err  error
}

func (e *PeerError) Error() string { return fmt.Sprintf("peer %s: %v", e.Peer, e.Err) }
func (e *PeerError) Unwrap() error { return e.Err }

// run evaluates f over the cluster. When a peer fails and the query
// accepts partial responses, f runs again without it and annos gets a
// warning naming every peer left out; otherwise the error names the peer
// and is a storage error (HTTP 500), never a number over fewer nodes.
//
// f adds its own annotations to the set it is given; only the last
// attempt's are kept.
func (c *Cluster) run(ctx context.Context, fn string, annos *annotations.Annotations, f func(s *attempt, annos *annotations.Annotations) error) error {
	var mine annotations.Annotations
	nodes, err := c.runOn(ctx, fn, func(s *attempt) error {
		mine = nil
		return f(s, &mine)
	})
	annos.Merge(mine)
	var pe *PeerError
	if err != nil && errors.As(err, &pe) && ctx.Err() == nil {
		return promql.ErrStorage{Err: err}
	}
	if err == nil && len(nodes.LeftOut) > 0 {
		annos.Add(fmt.Errorf("%w: %s", annotations.PromQLWarning, nodes.warning(fn)))
	}
	return err
}

// Nodes says which nodes of a cluster an answer covers.
type Nodes struct {
	// Answered is the number of nodes the answer covers, Of the number
	// the cluster has (this server and its peers).
	Answered, Of int
	// LeftOut names each peer a partial response left out, with its error.
	LeftOut []string
}

// Partial reports whether the answer covers fewer nodes than the cluster has.
func (n Nodes) Partial() bool { return len(n.LeftOut) > 0 }

// warning is the partial-response warning of fn.
func (n Nodes) warning(fn string) string {
	return fmt.Sprintf("%s: partial response: the result covers %d of %d nodes; left out: %s", fn, n.Answered, n.Of, strings.Join(n.LeftOut, "; "))
}

// runOn is run without annotations: it returns the nodes the answer
// covers. A peer that fails is left out when the query accepts partial
// responses (PartialResponseFrom), else its *PeerError is returned,
// wrapped with fn and how to answer from the other nodes.
func (c *Cluster) runOn(ctx context.Context, fn string, f func(s *attempt) error) (Nodes, error) {
	shards := c.shards
	partial := PartialResponseFrom(ctx, c.opts.PartialResponse)
	var down []string
	retries := 0
	for {
		s := &attempt{ctx: ctx, id: queryID(), shards: shards, fanout: c.opts.Fanout, fetchLimit: c.opts.FetchLimit}
		err := f(s)
		// A node whose records changed under a snapshot it lost is not
		// down: the evaluation starts over on fresh snapshots, twice at most.
		if errors.Is(err, ErrSnapshotChanged) && retries < 2 && ctx.Err() == nil {
			retries++
			continue
		}
		var pe *PeerError
		if err != nil && errors.As(err, &pe) && ctx.Err() == nil {
			if !partial {
				return Nodes{}, fmt.Errorf("%s: %w; pass partial_response=true to answer from the other nodes", fn, err)
			}
			down = append(down, pe.Error())
			shards = slices.DeleteFunc(slices.Clone(shards), func(sh Shard) bool { return sh.Name() == pe.Peer })
			continue
		}
		return Nodes{Answered: len(shards), Of: len(c.shards), LeftOut: down}, err
	}
}

func queryID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// attempt is one evaluation over a fixed set of shards (run makes another
// when it leaves a peer out or starts over).
type attempt struct {
	ctx        context.Context
	id         string
	shards     []Shard
	fanout     int
	fetchLimit int
}

// view is one window and field of an attempt.
type view struct {
	s     *attempt
	w     Window
	field string
	// records is the record set of every round (ShardRequest.Records);
	// skipped is what it left out, from the last stageColumns.
	records string
	skipped int
	// expect holds each shard's count from the summary round.
	expect []int
	sum    *clusterSummary
	// atCount and belowCount hold #{v' ≤ v} and #{v' < v} for the values
	// of At rounds.
	atCount, belowCount map[float64]int
}

func (s *attempt) view(w Window, field string) *view {
	return &view{s: s, w: w, field: field}
}

// recordsView is view over one record set of the window
// (ShardRequest.Records).
func (s *attempt) recordsView(w Window, field, records string) *view {
	return &view{s: s, w: w, field: field, records: records}
}

// stageNames are the stages the view's records are decomposed into.
func (v *view) stageNames() []string {
	if v.records == RecordsTTFT {
		return TTFTStageNames
	}
	return StageNames
}

// round sends every shard its request (build fills the primitives) in
// parallel and returns the responses in shard order.
func (v *view) round(build func(req *ShardRequest)) ([]*ShardResponse, error) {
	out := make([]*ShardResponse, len(v.s.shards))
	errs := make([]error, len(v.s.shards))
	var wg sync.WaitGroup
	for i, sh := range v.s.shards {
		req := &ShardRequest{Query: v.s.id, Selector: selectorString(v.w.Matchers), Mint: v.w.Mint, Maxt: v.w.Maxt, Field: v.field, Records: v.records}
		if v.expect != nil {
			req.Expect = &v.expect[i]
		}
		build(req)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := sh.Stats(v.s.ctx, req)
			if err == nil && resp.Records != v.records {
				err = fmt.Errorf("answered about records %q when asked about %q: a node that does not know the request's records field (an older version?) cannot take part", resp.Records, v.records)
			}
			if err == nil && v.expect != nil && resp.N != v.expect[i] {
				err = fmt.Errorf("%w: %d records, %d in the summary", ErrSnapshotChanged, resp.N, v.expect[i])
			}
			if _, local := sh.(*LocalShard); err != nil && !local {
				if pe := (*PeerError)(nil); !errors.As(err, &pe) {
					err = &PeerError{Peer: sh.Name(), Err: err}
				}
			}
			out[i], errs[i] = resp, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// clusterSummary is the summary round added up.
type clusterSummary struct {
	n          int
	min, max   float64
	sum        float64
	stages     []float64
	s          float64
	clamped    int
	clampedMax float64
	// skipped counts the records the view's record set left out.
	skipped int
}

// summary runs the summary round once per view.
func (v *view) summary() (*clusterSummary, error) {
	if v.sum != nil {
		return v.sum, nil
	}
	resps, err := v.round(func(r *ShardRequest) { r.Summary = true })
	if err != nil {
		return nil, err
	}
	cs := &clusterSummary{min: math.Inf(1), max: math.Inf(-1)}
	v.expect = make([]int, len(resps))
	for i, r := range resps {
		if r.Summary == nil {
			return nil, fmt.Errorf("shard %s: summary missing from its answer", v.s.shards[i].Name())
		}
		v.expect[i] = r.N
		cs.clamped += r.Clamped
		cs.clampedMax = math.Max(cs.clampedMax, r.ClampedMax)
		cs.skipped += r.Skipped
		if cs.stages == nil {
			cs.stages = make([]float64, len(r.Summary.Stages))
		}
		if len(r.Summary.Stages) != len(cs.stages) {
			return nil, fmt.Errorf("shard %s: %d stages, want %d", v.s.shards[i].Name(), len(r.Summary.Stages), len(cs.stages))
		}
		cs.s += r.Summary.S
		cs.sum += r.Summary.Sum
		for j, x := range r.Summary.Stages {
			cs.stages[j] += x
		}
		if r.N > 0 {
			cs.n += r.N
			cs.min = math.Min(cs.min, r.Summary.Min)
			cs.max = math.Max(cs.max, r.Summary.Max)
		}
	}
	v.sum = cs
	return cs, nil
}

// selectRanks returns the order statistics x_(k) (0-based over every
// shard) of the view's field for each k in ks, by the key-space search of
// docs/distributed-tails.md: every round sends each unresolved rank's key
// interval to every shard and keeps the part whose summed count crosses
// k+1. Once an interval holds at most FetchLimit values over all shards,
// the next round fetches them and reads x_(k) off their merged order.
func (v *view) selectRanks(ks []int) ([]float64, error) {
	cs, err := v.summary()
	if err != nil {
		return nil, err
	}
	// [lo, hi] holds x_(k); below counts the values with keys under lo
	// and count those in [lo, hi], over every shard.
	type search struct {
		lo, hi       uint64
		below, count int
		done         bool
		val          float64
	}
	st := make([]search, len(ks))
	for i, k := range ks {
		if k < 0 || k >= cs.n {
			return nil, fmt.Errorf("BUG: rank %d of %d values", k, cs.n)
		}
		st[i] = search{lo: orderKey(cs.min), hi: orderKey(cs.max), count: cs.n}
	}
	for {
		// One split or fetch per unresolved rank; ranks sharing an
		// interval share it.
		var splits []KeySplit
		var fetch []Range
		split := make([]int, len(ks))
		fetched := make([]int, len(ks))
		for i := range st {
			s := &st[i]
			split[i], fetched[i] = -1, -1
			if !s.done && s.lo == s.hi {
				s.done, s.val = true, keyValue(s.lo)
			}
			if s.done {
				continue
			}
			if s.count <= v.s.fetchLimit {
				rg := Range{Lo: keyValue(s.lo), Hi: keyValue(s.hi)}
				if fetched[i] = slices.Index(fetch, rg); fetched[i] < 0 {
					fetched[i] = len(fetch)
					fetch = append(fetch, rg)
				}
				continue
			}
			sp := KeySplit{Lo: s.lo, Hi: s.hi, Fanout: v.s.fanout}
			if split[i] = slices.Index(splits, sp); split[i] < 0 {
				split[i] = len(splits)
				splits = append(splits, sp)
			}
		}
		if len(splits) == 0 && len(fetch) == 0 {
			break
		}
		resps, err := v.round(func(r *ShardRequest) { r.Splits, r.Fetch = splits, fetch })
		if err != nil {
			return nil, err
		}
		// cum[j][t] = #{v : key(v) ≤ threshold t of split j}, rest[j] the
		// count above the last threshold up to hi, over every shard.
		cum := make([][]int, len(splits))
		rest := make([]int, len(splits))
		for j, sp := range splits {
			cum[j] = make([]int, len(SplitKeys(sp.Lo, sp.Hi, sp.Fanout)))
		}
		vals := make([][]float64, len(fetch))
		for si, r := range resps {
			if len(r.Splits) != len(splits) || len(r.Fetched) != len(fetch) {
				return nil, fmt.Errorf("shard %s: %d split and %d fetch answers for %d and %d", v.s.shards[si].Name(), len(r.Splits), len(r.Fetched), len(splits), len(fetch))
			}
			for j, sc := range r.Splits {
				if len(sc.In) != len(cum[j]) {
					return nil, fmt.Errorf("shard %s: %d counts for %d thresholds", v.s.shards[si].Name(), len(sc.In), len(cum[j]))
				}
				c := sc.Below
				for t, in := range sc.In {
					c += in
					cum[j][t] += c
				}
				rest[j] += sc.Rest
			}
			for j, x := range r.Fetched {
				vals[j] = append(vals[j], x...)
			}
		}
		for j := range vals {
			slices.Sort(vals[j])
		}
		for i := range st {
			s := &st[i]
			if j := fetched[i]; j >= 0 {
				if len(vals[j]) != s.count {
					return nil, fmt.Errorf("%w: %d values fetched in [%v, %v], %d counted", ErrSnapshotChanged, len(vals[j]), keyValue(s.lo), keyValue(s.hi), s.count)
				}
				s.done, s.val = true, vals[j][ks[i]-s.below]
				continue
			}
			j := split[i]
			if j < 0 {
				continue
			}
			sp := splits[j]
			ts := SplitKeys(sp.Lo, sp.Hi, sp.Fanout)
			need := ks[i] + 1
			// The first threshold whose count reaches need, or len(ts).
			t := 0
			for t < len(ts) && cum[j][t] < need {
				t++
			}
			atHi := cum[j][len(ts)-1] + rest[j]
			switch {
			case t == len(ts):
				s.lo, s.below, s.count = ts[len(ts)-1]+1, cum[j][len(ts)-1], atHi-cum[j][len(ts)-1]
			case t == 0:
				s.hi, s.count = ts[0], cum[j][0]-s.below
			default:
				s.lo, s.hi, s.below, s.count = ts[t-1]+1, ts[t], cum[j][t-1], cum[j][t]-cum[j][t-1]
			}
			if s.lo > s.hi || s.count <= 0 || s.below > ks[i] {
				return nil, fmt.Errorf("BUG: selection of rank %d lost it: keys [%d, %d], %d below, %d inside", ks[i], s.lo, s.hi, s.below, s.count)
			}
		}
	}
	out := make([]float64, len(ks))
	for i, s := range st {
		out[i] = s.val
	}
	return out, nil
}

// quantiles returns the type-7 quantiles of the view's field at levels
// ps, computed with attribution's expressions on the same operands:
// x_(l) + f·(x_(l+1) − x_(l)).
func (v *view) quantiles(ps []float64) ([]float64, error) {
	cs, err := v.summary()
	if err != nil {
		return nil, err
	}
	n := cs.n
	type pos struct {
		lo   int
		f    float64
		next bool
	}
	poss := make([]pos, len(ps))
	var ranks []int
	for i, p := range ps {
		h := float64(n-1) * p
		lo := min(int(h), n-1)
		f := h - float64(lo)
		poss[i] = pos{lo, f, f != 0 && lo != n-1}
		ranks = append(ranks, lo)
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	vals, err := v.selectRanks(ranks)
	if err != nil {
		return nil, err
	}
	valueOf := func(k int) float64 { i, _ := slices.BinarySearch(ranks, k); return vals[i] }
	var at []float64
	for _, ps := range poss {
		if ps.next {
			at = append(at, valueOf(ps.lo))
		}
	}
	var next map[float64]float64
	if len(at) > 0 {
		slices.Sort(at)
		at = slices.Compact(at)
		if next, err = v.successors(at); err != nil {
			return nil, err
		}
	}
	out := make([]float64, len(ps))
	for i, ps := range poss {
		x := valueOf(ps.lo)
		if !ps.next {
			out[i] = x
			continue
		}
		// x_(l+1) is x_(l) itself when it repeats, else the next value up.
		nx := next[x]
		if c := v.atCount[x]; c >= ps.lo+2 {
			nx = x
		}
		out[i] = x + ps.f*(nx-x)
	}
	return out, nil
}

// successors runs an At round over values and returns min{v' > v} per
// value, recording #{v' ≤ v} in atCount and #{v' < v} in belowCount.
func (v *view) successors(vals []float64) (map[float64]float64, error) {
	resps, err := v.round(func(r *ShardRequest) { r.At = vals })
	if err != nil {
		return nil, err
	}
	if v.atCount == nil {
		v.atCount, v.belowCount = map[float64]int{}, map[float64]int{}
	}
	next := map[float64]float64{}
	for i, x := range vals {
		nx := math.Inf(1)
		v.atCount[x], v.belowCount[x] = 0, 0
		for si, r := range resps {
			if len(r.At) != len(vals) {
				return nil, fmt.Errorf("shard %s: %d answers for %d values", v.s.shards[si].Name(), len(r.At), len(vals))
			}
			a := r.At[i]
			v.atCount[x] += a.AtOrBelow
			v.belowCount[x] += a.Below
			if a.Next != nil {
				nx = math.Min(nx, *a.Next)
			}
		}
		next[x] = nx
	}
	return next, nil
}

// sums runs a Sums round and adds the shards' answers per range.
func (v *view) sums(rs []Range) ([]SumResult, error) {
	resps, err := v.round(func(r *ShardRequest) { r.Sums = rs })
	if err != nil {
		return nil, err
	}
	return addSums(v.s.shards, resps, len(rs))
}

func addSums(shards []Shard, resps []*ShardResponse, nr int) ([]SumResult, error) {
	out := make([]SumResult, nr)
	for si, r := range resps {
		if len(r.Sums) != nr {
			return nil, fmt.Errorf("shard %s: %d sums for %d ranges", shards[si].Name(), len(r.Sums), nr)
		}
		for i, x := range r.Sums {
			if out[i].Stages == nil {
				out[i].Stages = make([]float64, len(x.Stages))
			}
			if len(x.Stages) != len(out[i].Stages) {
				return nil, fmt.Errorf("shard %s: %d stages, want %d", shards[si].Name(), len(x.Stages), len(out[i].Stages))
			}
			out[i].Count += x.Count
			out[i].S += x.S
			for j, s := range x.Stages {
				out[i].Stages[j] += s
			}
		}
	}
	return out, nil
}
