package tailfn

import (
	"context"
	"errors"
	"math"
	"math/bits"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
)

// The messages of the distributed tail protocol (docs/distributed-tails.md).
// One ShardRequest is one round to one node: it names the window and asks
// for any number of primitives at once; the ShardResponse answers each one
// that was asked, over that node's records only. They travel as JSON;
// float64 values keep their bits (Go writes the shortest form that parses
// back to the same value).

// ShardRequest asks one node for statistics of the records of one window.
type ShardRequest struct {
	// Query identifies the distributed evaluation: a node keeps the
	// window's columns under it so that every round sees the same records.
	Query string `json:"query"`
	// Selector holds the records matchers as a PromQL selector ({a="b"});
	// Mint and Maxt bound record times (Unix ms, inclusive).
	Selector   string `json:"selector"`
	Mint, Maxt int64
	// Expect, when set, is the number of records the node reported for
	// this window in the summary round; a node that has to reload the
	// window and counts differently refuses with ErrSnapshotChanged.
	Expect *int `json:"expect,omitempty"`
	// Records says which records of the window, as which stages, the
	// round is about: "" all of them with their end-to-end stages;
	// RecordsTTFT their time to first token as queue, tokenize, prefill
	// and other, records without one (or whose stages exceed it) left
	// out (Population.TTFTPopulation); RecordsWithTTFT those with a TTFT,
	// end-to-end stages. A node answers with the same value in
	// ShardResponse.Records, so one that does not know the field (and
	// would answer about every record) is detected, not believed.
	Records string `json:"records,omitempty"`
	// Field is the per-request value Summary, Counts, At, Values, Moment
	// and Kernel are about: "e2e" (the stage sum S, the default), "ttft" or
	// a stage name.
	Field string `json:"field,omitempty"`

	// Summary asks for count, min, max and sum of Field, and the sums of
	// every stage and of S.
	Summary bool `json:"summary,omitempty"`
	// Splits are key intervals of the distributed selection (see
	// orderKey and SplitKeys): the answer counts the values per part.
	Splits []KeySplit `json:"splits,omitempty"`
	// At asks, per value v, for #{v' < v}, #{v' ≤ v} and min{v' > v}.
	At []float64 `json:"at,omitempty"`
	// Sums asks, per range of S, for the count and the sums of every
	// stage and of S over the requests whose S lies in it.
	Sums []Range `json:"sums,omitempty"`
	// Fetch asks, per range, for the ascending values of Field in it.
	Fetch []Range `json:"fetch,omitempty"`
	// Ties asks, per value v, for the time and stages of every request
	// with S = v, in the node's record order.
	Ties []float64 `json:"ties,omitempty"`
	// Values asks for #{v < Lo} and the ascending values of Field in the
	// range.
	Values *Range `json:"values,omitempty"`
	// Moment asks for Σ (v − c)² over Field.
	Moment *float64 `json:"moment,omitempty"`
	// Kernel asks for Σ exp(−((v − Q)/BW)²/2) over the v in
	// [Q − 10·BW, Q + 10·BW).
	Kernel *KernelQuery `json:"kernel,omitempty"`
	// Columns asks for the stage columns themselves (tail_shapley).
	Columns bool `json:"columns,omitempty"`
}

// The record sets of ShardRequest.Records.
const (
	RecordsTTFT     = "ttft"
	RecordsWithTTFT = "with_ttft"
)

// Range is an interval of values: [Lo, Hi], each end open when LoOpen or
// HiOpen, and unbounded above when NoHi.
type Range struct {
	Lo     float64 `json:"lo"`
	LoOpen bool    `json:"lo_open,omitempty"`
	Hi     float64 `json:"hi,omitempty"`
	HiOpen bool    `json:"hi_open,omitempty"`
	NoHi   bool    `json:"no_hi,omitempty"`
}

// Contains reports whether v lies in r.
func (r Range) Contains(v float64) bool {
	if v < r.Lo || r.LoOpen && v == r.Lo {
		return false
	}
	if r.NoHi {
		return true
	}
	return v < r.Hi || !r.HiOpen && v == r.Hi
}

// KeySplit is the key interval [Lo, Hi] of one searched rank, cut at the
// thresholds SplitKeys(Lo, Hi, Fanout). Both ends compute the thresholds,
// so they never travel.
type KeySplit struct {
	Lo     uint64 `json:"lo"`
	Hi     uint64 `json:"hi"`
	Fanout int    `json:"fanout"`
}

// SplitCounts answers a KeySplit: Below = #{v : key(v) < Lo} and, for
// thresholds t_0 < … < t_m, In[i] = #{v : t_{i−1} < key(v) ≤ t_i} with
// t_{−1} = Lo − 1, and Rest = #{v : t_m < key(v) ≤ Hi}. The counts per
// part are small and mostly zero after the first round, so they compress
// well.
type SplitCounts struct {
	Below int   `json:"below"`
	In    []int `json:"in"`
	Rest  int   `json:"rest"`
}

// SplitKeys returns the thresholds that cut the key interval [lo, hi]
// (lo < hi) into at most fanout+1 parts: every key of [lo, hi) when the
// interval is narrower than that, else fanout keys lo + ⌊(hi−lo)·i/(fanout+1)⌋,
// i = 1…fanout, which increase strictly.
func SplitKeys(lo, hi uint64, fanout int) []uint64 {
	if hi <= lo || fanout <= 0 {
		return nil
	}
	T := uint64(fanout)
	width := hi - lo
	var out []uint64
	if width <= T {
		out = make([]uint64, 0, width)
		for k := lo; k < hi; k++ {
			out = append(out, k)
		}
		return out
	}
	out = make([]uint64, 0, fanout)
	for j := uint64(1); j <= T; j++ {
		h, l := bits.Mul64(width, j)
		q, _ := bits.Div64(h, l, T+1)
		out = append(out, lo+q)
	}
	return out
}

// KernelQuery is the centre and bandwidth of a kernel sum.
type KernelQuery struct {
	Q  float64 `json:"q"`
	BW float64 `json:"bw"`
}

// ShardResponse answers a ShardRequest; a field is set only when asked.
type ShardResponse struct {
	// N is the number of records of the window on this node (those of
	// ShardRequest.Records).
	N int `json:"n"`
	// Records echoes ShardRequest.Records.
	Records string `json:"records,omitempty"`
	// Skipped counts the window's records ShardRequest.Records left out.
	Skipped int `json:"skipped,omitempty"`
	// Clamped and ClampedMax are Population's.
	Clamped    int     `json:"clamped,omitempty"`
	ClampedMax float64 `json:"clamped_max,omitempty"`

	Summary *ShardSummary `json:"summary,omitempty"`
	Splits  []SplitCounts `json:"splits,omitempty"`
	Fetched [][]float64   `json:"fetched,omitempty"`
	At      []AtResult    `json:"at,omitempty"`
	Sums    []SumResult   `json:"sums,omitempty"`
	Ties    [][]TieRecord `json:"ties,omitempty"`
	Values  *ValuesResult `json:"values,omitempty"`
	Moment  float64       `json:"moment,omitempty"`
	Kernel  float64       `json:"kernel,omitempty"`
	Columns [][]float64   `json:"columns,omitempty"`
}

// ShardSummary is the summary of one node's window. Min and Max are of
// Field and meaningless when the response's N is 0.
type ShardSummary struct {
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Sum    float64   `json:"sum"`
	Stages []float64 `json:"stages"`
	S      float64   `json:"s"`
}

// AtResult answers one At value. Next is nil when no value is above.
type AtResult struct {
	Below     int      `json:"below"`
	AtOrBelow int      `json:"at_or_below"`
	Next      *float64 `json:"next,omitempty"`
}

// SumResult answers one Sums range.
type SumResult struct {
	Count  int       `json:"count"`
	Stages []float64 `json:"stages"`
	S      float64   `json:"s"`
}

// TieRecord is one request whose S equals a Ties value.
type TieRecord struct {
	Time   int64     `json:"time"`
	Stages []float64 `json:"stages"`
}

// ValuesResult answers Values.
type ValuesResult struct {
	Below int       `json:"below"`
	V     []float64 `json:"v"`
}

// Shard answers the protocol's rounds over one node's records: a
// LocalShard in process, or a peer over HTTP (PeerShard). Stats must not
// keep req after returning; the response is the caller's.
type Shard interface {
	// Name identifies the node in errors and warnings.
	Name() string
	Stats(ctx context.Context, req *ShardRequest) (*ShardResponse, error)
}

// Errors of the protocol.
var (
	// ErrSnapshotChanged is returned by a node whose snapshot of a window
	// expired between two rounds and whose records changed meanwhile.
	ErrSnapshotChanged = errors.New("records changed during the query")
	// ErrBadShardRequest is returned for a request that names an unknown
	// field or a selector that does not parse.
	ErrBadShardRequest = errors.New("bad shard request")
)

// orderKey maps a float64 to a uint64 with the same order: the sign bit
// set for v ≥ 0 and every bit flipped for v < 0. −0 maps as +0, so that
// keys compare as the values do. v must not be NaN.
func orderKey(v float64) uint64 {
	if v == 0 {
		v = 0
	}
	b := math.Float64bits(v)
	if b>>63 == 0 {
		return b | 1<<63
	}
	return ^b
}

// keyValue inverts orderKey.
func keyValue(k uint64) float64 {
	if k>>63 == 1 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

// selectorString renders matchers as a selector that
// parser.ParseMetricSelector reads back.
func selectorString(ms []*labels.Matcher) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return "{" + strings.Join(parts, ",") + "}"
}
