package records

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
)

// Stage indexes Record.Stages. The order is the canonical stage order of
// DESIGN.md and the column order of the segment format; do not reorder.
type Stage int

// The canonical stages. StageOther is the residual that makes the stages add
// up to the end-to-end time.
const (
	StageQueue Stage = iota
	StageTokenize
	StagePrefill
	StageDecode
	StageDetokenize
	StageNetwork
	StageOther
	NumStages = 7
)

var stageNames = [NumStages]string{"queue", "tokenize", "prefill", "decode", "detokenize", "network", "other"}

// String returns the canonical stage name ("queue", …, "other").
func (s Stage) String() string {
	if s < 0 || s >= NumStages {
		return fmt.Sprintf("stage(%d)", int(s))
	}
	return stageNames[s]
}

// MaxITLValues is how many inter-token gaps a record keeps verbatim. Longer
// generations keep only the summary: a 2,000-token answer would otherwise
// cost 16 kB per request, more than the rest of the record fifty times over.
const MaxITLValues = 64

// ITL holds a request's inter-token latencies (the gaps between consecutive
// output tokens, seconds). The summary is always set; Values holds every gap
// in token order when the source had them and Count ≤ MaxITLValues, and is
// nil otherwise. SummarizeITL builds one from raw gaps.
type ITL struct {
	Count                        uint32
	Sum, Min, Max, P50, P90, P99 float64
	Values                       []float64
}

// TraceID is a W3C trace id. The zero value means "no trace".
type TraceID [16]byte

// IsZero reports whether the trace id is absent.
func (t TraceID) IsZero() bool { return t == TraceID{} }

// Record is one inference request. Times are Unix milliseconds, like
// Prometheus sample timestamps, so records and series share an axis;
// durations are seconds as float64, stored bit-exactly.
type Record struct {
	// Time is the arrival time of the request, Unix milliseconds, ≥ 0.
	Time int64
	// Labels identify where the request ran (model, instance, …). Names are
	// unique and non-empty, values non-empty.
	Labels    labels.Labels
	TraceID   TraceID
	RequestID string
	// Stages are the per-stage durations in seconds, indexed by Stage. They
	// sum to E2E exactly (see Sum); Stages[StageOther] is the residual and
	// is the only stage that may be negative (measured stages overlapped).
	Stages        [NumStages]float64
	E2E           float64
	PromptTokens  uint32
	OutputTokens  uint32
	TTFT          float64
	ITL           ITL
	PromptEntropy float64 // bits
}

// Sum adds the stages left to right, queue first. Validate requires
// Sum() == E2E bit for bit, which is what makes a tail breakdown add up.
func (r *Record) Sum() float64 {
	var s float64
	for _, v := range r.Stages {
		s += v
	}
	return s
}

// FillOther sets Stages[StageOther] to the residual E2E − Σ(other stages),
// nudged by at most a few ulps so that Sum() == E2E holds exactly in float64.
//
// Sometimes no residual reaches E2E exactly: when the stage sum has bits
// below the unit in the last place of E2E that make s + other fall exactly
// halfway between two floats, round-half-to-even lands on a neighbour of
// E2E for every candidate (e.g. s = 0.07023599999999999, E2E = 0.331907).
// Then E2E itself moves to the nearest sum the stages can reach — one ulp,
// about 1e-17 s for a one-second request — so the invariant still holds.
// It fails only for non-finite inputs.
func (r *Record) FillOther() error {
	var s float64
	for _, v := range r.Stages[:StageOther] {
		s += v
	}
	if math.IsInf(s, 0) || math.IsNaN(s) || math.IsInf(r.E2E, 0) || math.IsNaN(r.E2E) {
		return fmt.Errorf("fill other: %w: stage sum %v, e2e %v", ErrInvalidRecord, s, r.E2E)
	}
	// Round-off in E2E − s can leave s + other one ulp away from E2E; the
	// sum is monotone in other, so stepping other towards the target fixes
	// it. Bounded: with other ≤ E2E in magnitude each step moves the sum by
	// at most one ulp of E2E.
	o := r.E2E - s
	for range 64 {
		got := s + o
		switch {
		case got == r.E2E:
			r.Stages[StageOther] = o
			return nil
		case got < r.E2E:
			o = math.Nextafter(o, math.Inf(1))
		default:
			o = math.Nextafter(o, math.Inf(-1))
		}
	}
	o = r.E2E - s
	e2e := s + o
	if math.IsInf(e2e, 0) || math.Abs(e2e-r.E2E) > 2*(math.Nextafter(math.Abs(r.E2E), math.Inf(1))-math.Abs(r.E2E)) {
		return fmt.Errorf("fill other: %w: no residual makes stages sum %v equal e2e %v", ErrInvalidRecord, s, r.E2E)
	}
	r.E2E, r.Stages[StageOther] = e2e, o
	return nil
}

// SummarizeITL summarises inter-token gaps (seconds, token order). It keeps a
// copy of the gaps when there are at most MaxITLValues of them. Quantiles
// interpolate linearly between order statistics (Hyndman–Fan type 7, the
// NumPy default), so values 1…10 give P50 5.5, P90 9.1, P99 9.91.
func SummarizeITL(gaps []float64) ITL {
	it := ITL{Count: uint32(len(gaps))}
	if len(gaps) == 0 {
		return it
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	for _, v := range gaps {
		it.Sum += v
	}
	it.Min, it.Max = sorted[0], sorted[len(sorted)-1]
	it.P50 = quantile7(sorted, 0.50)
	it.P90 = quantile7(sorted, 0.90)
	it.P99 = quantile7(sorted, 0.99)
	if len(gaps) <= MaxITLValues {
		it.Values = slices.Clone(gaps)
	}
	return it
}

// quantile7 is the type-7 quantile of sorted x. The result is clamped to the
// upper order statistic so rounding cannot push it past the next value.
func quantile7(x []float64, p float64) float64 {
	h := float64(len(x)-1) * p
	k := int(h)
	if k >= len(x)-1 {
		return x[len(x)-1]
	}
	q := x[k] + (h-float64(k))*(x[k+1]-x[k])
	return min(max(q, x[k]), x[k+1])
}

// Sentinel errors. Wrapped errors name the field and value.
var (
	// ErrInvalidRecord is returned by Validate, and by Append for a batch
	// holding a record that breaks an invariant; nothing of the batch is
	// written.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrCorrupt is matched by *CorruptionError: a WAL or segment failed its
	// checksum or does not decode.
	ErrCorrupt = errors.New("corrupt records file")
	// ErrClosed is returned by operations on a closed Store.
	ErrClosed = errors.New("records store closed")
	// ErrOutOfRetention is returned by Append for a record whose partition
	// was already removed by retention.
	ErrOutOfRetention = errors.New("record older than retention")
)

// CorruptionError names the file and byte offset where decoding failed.
type CorruptionError struct {
	File   string
	Offset int64
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("corrupt records file %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is maps a CorruptionError onto ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// Limits on one record, so a WAL entry stays bounded.
const (
	maxRequestIDLen = 1 << 10
	maxLabelBytes   = 1 << 16
)

// Validate checks the invariants listed in docs/format/records.md. The error
// wraps ErrInvalidRecord and names the offending field and value.
func (r *Record) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRecord}, args...)...)
	}
	if r.Time < 0 {
		return bad("time %d before 1970", r.Time)
	}
	if err := validateLabels(r.Labels); err != nil {
		return bad("%v", err)
	}
	if len(r.RequestID) > maxRequestIDLen {
		return bad("request id of %d bytes exceeds %d", len(r.RequestID), maxRequestIDLen)
	}
	for i, v := range r.Stages {
		if math.IsNaN(v) || math.IsInf(v, 0) || (v < 0 && Stage(i) != StageOther) {
			return bad("stage %s = %v", Stage(i), v)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"e2e", r.E2E},
		{"ttft", r.TTFT},
		{"prompt entropy", r.PromptEntropy},
		{"itl sum", r.ITL.Sum},
		{"itl min", r.ITL.Min},
		{"itl max", r.ITL.Max},
		{"itl p50", r.ITL.P50},
		{"itl p90", r.ITL.P90},
		{"itl p99", r.ITL.P99},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return bad("%s = %v", f.name, f.v)
		}
	}
	if s := r.Sum(); s != r.E2E {
		return bad("stages sum to %v, e2e is %v (call FillOther)", s, r.E2E)
	}
	it := &r.ITL
	if len(it.Values) > 0 {
		if len(it.Values) != int(it.Count) || len(it.Values) > MaxITLValues {
			return bad("itl has %d values for count %d (at most %d kept)", len(it.Values), it.Count, MaxITLValues)
		}
		for i, v := range it.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return bad("itl value %d = %v", i, v)
			}
		}
	}
	if it.Count == 0 && (it.Sum != 0 || it.Min != 0 || it.Max != 0 || it.P50 != 0 || it.P90 != 0 || it.P99 != 0) {
		return bad("itl summary set for zero gaps")
	}
	if !(it.Min <= it.P50 && it.P50 <= it.P90 && it.P90 <= it.P99 && it.P99 <= it.Max) {
		return bad("itl quantiles out of order: min %v p50 %v p90 %v p99 %v max %v", it.Min, it.P50, it.P90, it.P99, it.Max)
	}
	return nil
}

// validateLabels enforces what the decoders enforce: strictly ascending,
// non-empty names, non-empty values (an empty value means "no label" in
// Prometheus and would not survive a round trip through a matcher).
func validateLabels(ls labels.Labels) error {
	var prev string
	first := true
	size := 0
	var err error
	ls.Range(func(l labels.Label) {
		if err != nil {
			return
		}
		size += len(l.Name) + len(l.Value)
		switch {
		case l.Name == "":
			err = fmt.Errorf("empty label name (value %q)", l.Value)
		case l.Value == "":
			err = fmt.Errorf("label %q has an empty value", l.Name)
		case !first && l.Name <= prev:
			err = fmt.Errorf("label %q not after %q: names must be sorted and unique", l.Name, prev)
		}
		prev, first = l.Name, false
	})
	if err == nil && size > maxLabelBytes {
		err = fmt.Errorf("labels of %d bytes exceed %d", size, maxLabelBytes)
	}
	return err
}

// clone returns a copy that shares nothing mutable with r.
func (r *Record) clone() Record {
	c := *r
	if len(r.ITL.Values) > 0 {
		c.ITL.Values = slices.Clone(r.ITL.Values)
	} else {
		c.ITL.Values = nil
	}
	return c
}
