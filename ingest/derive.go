package ingest

import (
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/internal/nativehist"
	"github.com/tailroot/tailroot/tsdb/records"
)

// Names of the series derived from request records (docs/stages.md).
const (
	// SeriesE2E is a native histogram of end-to-end seconds.
	SeriesE2E = "tailroot_request_e2e_seconds"
	// SeriesStage is a native histogram of stage seconds, label stage.
	SeriesStage = "tailroot_request_stage_seconds"
	// SeriesTailStageSum is a counter: the stage seconds of requests whose
	// end-to-end time fell in bucket e2e_bucket, labels stage and e2e_bucket.
	SeriesTailStageSum = "tailroot_tail_stage_seconds_sum"
	// SeriesTailRequests is a counter: the requests whose end-to-end time
	// fell in bucket e2e_bucket.
	SeriesTailRequests = "tailroot_tail_requests_total"
	// SeriesTokenLatency is a native histogram of token latencies by
	// token position, labels kind ("ttft" or "itl") and position_bucket.
	SeriesTokenLatency = "tailroot_token_latency_seconds"
	// SeriesPromptEntropy is a native histogram of prompt entropy in bits.
	SeriesPromptEntropy = "tailroot_prompt_entropy_bits"

	// LabelStage names the canonical stage of a stage series.
	LabelStage = "stage"
	// LabelE2EBucket is the inclusive upper bound of the end-to-end bucket
	// of a tail series, formatted like le ("0.5", "+Inf").
	LabelE2EBucket = "e2e_bucket"
	// LabelKind tells TTFT from inter-token latency.
	LabelKind = "kind"
	// LabelPositionBucket is the inclusive upper bound of the token
	// position bucket (1-based output token index): "1", "2", "4", …,
	// "4096", "+Inf".
	LabelPositionBucket = "position_bucket"
	// LabelOverflow marks the series that collect requests whose label set
	// arrived after RecordsOptions.MaxSeriesLabelSets was reached.
	LabelOverflow = "tailroot_overflow"
)

// DefaultSeriesLabels are the request labels that become labels of the
// derived series unless configured otherwise. Every other request label
// stays on the record only, so a per-user or per-prompt label cannot
// multiply the series count.
var DefaultSeriesLabels = []string{"instance", "job", "model_name"}

// Native histograms of the derived series use schema 3 (8 buckets per
// doubling, 9% wide), which refines the schema-2 bounds of
// attribution.DefaultGrid, so a tail bucket is a union of e2e histogram
// buckets. The zero bucket is client_golang's default.
const (
	derivedSchema        = 3
	derivedZeroThreshold = nativehist.ZeroThreshold
)

var derivedBuckets = nativehist.MustSchema(derivedSchema)

// nhist is a derived series' native histogram (nativehist.Dense, whose
// fields are checkpointed) with what appending it needs.
type nhist struct {
	nativehist.Dense

	dirty    bool
	touched  bool  // changed by the slot being written (derive_stamp.go)
	needZero bool  // absent from the TSDB after a crash: write 0 before its value
	lastT    int64 // stamp of its last sample written by this process, 0 if none
	ser      seriesRef
	ex       exCand
}

func (h *nhist) observe(v float64) {
	h.dirty = true
	h.Observe(derivedBuckets, v, 1)
}

// histogram returns the value as Prometheus stores it.
func (h *nhist) histogram() *histogram.Histogram { return h.Histogram(derivedBuckets) }

// exCand is the exemplar a series carries at its next append: the largest
// observation since the last one, so a tail can be followed to its trace.
type exCand struct {
	set       bool
	v         float64
	traceID   records.TraceID
	requestID string
}

func (e *exCand) offer(v float64, r *records.Record) {
	if r.TraceID.IsZero() && r.RequestID == "" {
		return
	}
	if !e.set || v > e.v {
		*e = exCand{set: true, v: v, traceID: r.TraceID, requestID: r.RequestID}
	}
}

// exemplars renders the candidate; Prometheus caps exemplar labels at 128
// runes, so a long request id is left out.
func (e *exCand) exemplars(ts int64) []exemplar.Exemplar {
	if !e.set {
		return nil
	}
	b := labels.NewScratchBuilder(2)
	n := 0
	if !e.traceID.IsZero() {
		b.Add("trace_id", hex.EncodeToString(e.traceID[:]))
		n += len("trace_id") + 32
	}
	if e.requestID != "" && n+len("request_id")+utf8.RuneCountInString(e.requestID) <= exemplar.ExemplarMaxLabelSetLength {
		b.Add("request_id", e.requestID)
	}
	b.Sort()
	ls := b.Labels()
	if ls.IsEmpty() {
		return nil
	}
	return []exemplar.Exemplar{{Labels: ls, Value: e.v, Ts: ts, HasTs: true}}
}

// tailCell is the accumulator of one end-to-end bucket: stage sums and a
// request count, as in attribution.Accumulators.
type tailCell struct {
	Sum   [records.NumStages]float64 `json:"s"`
	Count float64                    `json:"n"`

	dirty    bool
	touched  bool
	needZero bool
	lastT    int64
	ser      [records.NumStages + 1]seriesRef // stage sums, then the count
	ex       exCand
}

// Token positions are bucketed as attribution.TokenPositionBucket says
// (powers of two, (2^(k−1), 2^k]); the label is the bucket's inclusive
// upper bound.
const numPositionBuckets = attribution.NumTokenPositionBuckets

func positionBound(k int) string {
	return strconv.FormatFloat(attribution.TokenPositionBound(k), 'f', -1, 64)
}

const (
	tokenTTFT = 0
	tokenITL  = 1
)

var tokenKinds = [2]string{"ttft", "itl"}

// labelState holds every derived series of one projected label set.
type labelState struct {
	Labels  labels.Labels                 `json:"labels"`
	E2E     nhist                         `json:"e2e"`
	Stage   [records.NumStages]nhist      `json:"stage"`
	Tail    map[int]*tailCell             `json:"tail"`
	Tokens  [2][numPositionBuckets]*nhist `json:"tokens"`
	Entropy nhist                         `json:"entropy"`
	// Clock is the newest stamp written to any series of the set: every
	// later sample of the set is stamped after it, so each series only
	// grows in time (derive_stamp.go).
	Clock int64 `json:"clock,omitempty"`
}

// seriesRef caches a derived series' labels and storage reference.
type seriesRef struct {
	ls  labels.Labels
	ref storage.SeriesRef
}

// deriver keeps the cumulative state of every derived series. It is not
// safe for concurrent use: the records pipeline's worker owns it.
type deriver struct {
	grid    attribution.Grid
	bounds  []string // e2e_bucket label values, one per grid bucket
	allow   []string // sorted request labels kept on series
	maxSets int

	states   map[string]*labelState
	order    []*labelState
	overflow *labelState
	key      []byte
	sb       labels.ScratchBuilder

	// Stamping (derive_stamp.go), in milliseconds.
	res     int64 // slot width: a request is stamped at the end of its end time's slot
	maxAge  int64 // oldest stamp accepted, as an age behind now
	refresh int64 // re-append series unchanged for this long

	pending   []Item             // stored, not yet folded (flush folds them)
	touched   []touchedSeries    // series changed by the slot being written
	restamped [numRestamp]uint64 // requests not stamped at their own slot, by reason; Records drains it
}

func newDeriver(grid attribution.Grid, allow []string, maxSets int) *deriver {
	allow = slices.Clone(allow)
	slices.Sort(allow)
	allow = slices.Compact(allow)
	d := &deriver{
		grid: grid, allow: allow, maxSets: maxSets, states: map[string]*labelState{}, sb: labels.NewScratchBuilder(8),
		res: defaultDeriveResolution, maxAge: defaultBackfillWindow, refresh: defaultRefresh,
	}
	for _, u := range grid.Upper() {
		d.bounds = append(d.bounds, formatBound(u))
	}
	d.bounds = append(d.bounds, "+Inf")
	return d
}

// formatBound renders a bucket bound the way Prometheus renders le on the
// wire: the shortest decimal that parses back to the same float64.
func formatBound(u float64) string {
	if math.IsInf(u, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(u, 'g', -1, 64)
}

// stateFor returns the state of r's projected label set, creating it (or
// falling back to the overflow set) on first sight.
func (d *deriver) stateFor(ls labels.Labels) *labelState {
	d.key = d.key[:0]
	for _, name := range d.allow {
		if v := ls.Get(name); v != "" {
			d.key = append(d.key, name...)
			d.key = append(d.key, 0xff)
			d.key = append(d.key, v...)
			d.key = append(d.key, 0xff)
		}
	}
	if st, ok := d.states[string(d.key)]; ok {
		return st
	}
	if len(d.states) >= d.maxSets {
		if d.overflow == nil {
			d.overflow = d.addState(string([]byte{0xfe}), labels.FromStrings(LabelOverflow, "true"))
		}
		return d.overflow
	}
	d.sb.Reset()
	for _, name := range d.allow {
		if v := ls.Get(name); v != "" {
			d.sb.Add(name, v)
		}
	}
	return d.addState(string(d.key), d.sb.Labels())
}

func (d *deriver) addState(key string, ls labels.Labels) *labelState {
	st := &labelState{Labels: ls, Tail: map[int]*tailCell{}}
	d.states[key] = st
	d.order = append(d.order, st)
	return st
}

// add folds one request into the state without writing samples: recovery
// uses it, and the flush's slot writer through addAt.
func (d *deriver) add(it *Item) { d.addAt(it, d.stateFor(it.Record.Labels), nil) }

// addAt folds one request into st. Stages must be ≥ 0 (Records.Append
// checks), so every counter only grows. With w set, every series the
// request changes is first handed to w.touch, which writes its zero or
// previous value just before the slot when the series needs one.
func (d *deriver) addAt(it *Item, st *labelState, w *slotWriter) {
	r := &it.Record
	obs := func(h *nhist, family string, v float64, ex bool) {
		if w != nil && !h.touched {
			w.touchHist(st, h, family)
		}
		h.observe(v)
		if ex {
			h.ex.offer(v, r)
		}
	}
	obs(&st.E2E, SeriesE2E, r.E2E, true)
	for j := range st.Stage {
		obs(&st.Stage[j], SeriesStage, r.Stages[j], true)
	}
	b := d.grid.Bucket(r.E2E)
	c := st.Tail[b]
	if c == nil {
		c = &tailCell{}
		st.Tail[b] = c
	}
	if w != nil && !c.touched {
		w.touchCell(st, c)
	}
	c.dirty = true
	c.Count++
	for j, v := range r.Stages {
		c.Sum[j] += v
	}
	c.ex.offer(r.E2E, r)
	if it.HasTTFT {
		obs(st.token(tokenTTFT, 0), SeriesTokenLatency, r.TTFT, false)
	}
	gaps := it.Gaps
	if gaps == nil {
		gaps = r.ITL.Values
	}
	for k, g := range gaps {
		// Gap k separates tokens k+1 and k+2 (1-based): it is token k+2's
		// latency.
		obs(st.token(tokenITL, attribution.TokenPositionBucket(k+2)), SeriesTokenLatency, g, false)
	}
	if it.HasEntropy {
		obs(&st.Entropy, SeriesPromptEntropy, r.PromptEntropy, false)
	}
}

func (st *labelState) token(kind, pos int) *nhist {
	h := st.Tokens[kind][pos]
	if h == nil {
		h = &nhist{}
		st.Tokens[kind][pos] = h
	}
	return h
}

var (
	mdHistogramSeconds = metadata.Metadata{Type: model.MetricTypeHistogram, Unit: "seconds"}
	mdCounterSeconds   = metadata.Metadata{Type: model.MetricTypeCounter, Unit: "seconds"}
	mdCounter          = metadata.Metadata{Type: model.MetricTypeCounter}
	mdHistogramBits    = metadata.Metadata{Type: model.MetricTypeHistogram, Unit: "bits"}
)

// derivedMetadata is what /api/v1/metadata reports for the derived families.
var derivedMetadata = map[string]metadata.Metadata{
	SeriesE2E:           withHelp(mdHistogramSeconds, "End-to-end latency of inference requests, derived from request records."),
	SeriesStage:         withHelp(mdHistogramSeconds, "Per-stage latency of inference requests (queue, tokenize, prefill, decode, detokenize, network, other); stages of a request add up to its end-to-end latency."),
	SeriesTailStageSum:  withHelp(mdCounterSeconds, "Stage seconds summed over requests whose end-to-end latency fell in bucket e2e_bucket (tail accumulator)."),
	SeriesTailRequests:  withHelp(mdCounter, "Requests whose end-to-end latency fell in bucket e2e_bucket (tail accumulator)."),
	SeriesTokenLatency:  withHelp(mdHistogramSeconds, "Token latency by output token position: time to first token (kind=ttft) and inter-token latency (kind=itl)."),
	SeriesPromptEntropy: withHelp(mdHistogramBits, "Shannon entropy of the prompt's token distribution, bits."),
}

func withHelp(m metadata.Metadata, help string) metadata.Metadata {
	m.Help = help
	return m
}

// ensureLabels builds the series labels of st's series the first time they
// are flushed.
func (d *deriver) ensureLabels(st *labelState) {
	build := func(ser *seriesRef, name string, kv ...string) {
		if !ser.ls.IsEmpty() {
			return
		}
		b := labels.NewBuilder(st.Labels)
		b.Set(model.MetricNameLabel, name)
		for i := 0; i+1 < len(kv); i += 2 {
			b.Set(kv[i], kv[i+1])
		}
		ser.ls = b.Labels()
	}
	build(&st.E2E.ser, SeriesE2E)
	for j := range st.Stage {
		build(&st.Stage[j].ser, SeriesStage, LabelStage, records.Stage(j).String())
	}
	build(&st.Entropy.ser, SeriesPromptEntropy)
	for kind := range st.Tokens {
		for k, h := range st.Tokens[kind] {
			if h != nil {
				build(&h.ser, SeriesTokenLatency, LabelKind, tokenKinds[kind], LabelPositionBucket, positionBound(k))
			}
		}
	}
	for b, c := range st.Tail {
		for j := range c.ser {
			if j < records.NumStages {
				build(&c.ser[j], SeriesTailStageSum, LabelStage, records.Stage(j).String(), LabelE2EBucket, d.bounds[b])
			} else {
				build(&c.ser[j], SeriesTailRequests, LabelE2EBucket, d.bounds[b])
			}
		}
	}
}

// markAllDirty makes the next flush write every series; used after the
// state is loaded from a checkpoint.
func (d *deriver) markAllDirty() {
	for _, st := range d.order {
		st.E2E.dirty = st.E2E.Count > 0
		for j := range st.Stage {
			st.Stage[j].dirty = st.Stage[j].Count > 0
		}
		st.Entropy.dirty = st.Entropy.Count > 0
		for kind := range st.Tokens {
			for _, h := range st.Tokens[kind] {
				if h != nil {
					h.dirty = true
				}
			}
		}
		for _, c := range st.Tail {
			c.dirty = true
		}
	}
}

func sortedKeys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Accumulators returns the tail accumulators of every label set matching
// keep (nil keeps all), merged, in the form attribution.TailMeanAccumulators
// takes. Tests and the in-process simulator compare them with records.
func (d *deriver) accumulators(keep func(labels.Labels) bool) *attribution.Accumulators {
	names := make([]string, records.NumStages)
	for j := range names {
		names[j] = records.Stage(j).String()
	}
	acc := attribution.NewAccumulators(d.grid, names)
	for _, st := range d.order {
		if keep != nil && !keep(st.Labels) {
			continue
		}
		for b, c := range st.Tail {
			acc.Count[b] += c.Count
			for j := range c.Sum {
				acc.Sum[j][b] += c.Sum[j]
			}
		}
	}
	return acc
}
