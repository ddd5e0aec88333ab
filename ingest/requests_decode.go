package ingest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/internal/validation"
	"github.com/tailroot/tailroot/tsdb/records"
)

// Item is one request on its way into the record store and the derived
// series: the record itself plus what the record cannot hold.
type Item struct {
	Record records.Record
	// Gaps are every inter-token gap in token order when the source had
	// them; Record.ITL keeps at most records.MaxITLValues verbatim, so the
	// per-position token series need the full list. nil means unknown.
	Gaps []float64
	// HasTTFT and HasEntropy say whether Record.TTFT and
	// Record.PromptEntropy were measured: zero is a valid measurement (a
	// prompt of one repeated token has entropy 0), so it cannot mean absent.
	HasTTFT, HasEntropy bool
}

// RequestLimits bound one pushed request line. Zero means the default noted
// on each field.
type RequestLimits struct {
	// MaxLabels is the most labels a request may carry. Zero means 32.
	MaxLabels int
	// MaxLabelValueLength is the longest label value in bytes. Zero means
	// 1024.
	MaxLabelValueLength int
	// MaxLabelNameLength is the longest label name in bytes. Zero means
	// 1024.
	MaxLabelNameLength int
	// MaxTokens bounds token_times, itl and prompt_token_ids. Zero means
	// 1<<20, above the context length of any served model.
	MaxTokens int
}

func (l RequestLimits) withDefaults() RequestLimits {
	if l.MaxLabels <= 0 {
		l.MaxLabels = 32
	}
	if l.MaxLabelValueLength <= 0 {
		l.MaxLabelValueLength = 1024
	}
	if l.MaxTokens <= 0 {
		l.MaxTokens = 1 << 20
	}
	if l.MaxLabelNameLength <= 0 {
		l.MaxLabelNameLength = 1024
	}
	return l
}

// rules are the label rules every ingest path shares, with these limits.
func (l RequestLimits) rules() validation.Rules {
	return validation.Rules{MaxLabels: l.MaxLabels, MaxLabelNameLength: l.MaxLabelNameLength, MaxLabelValueLength: l.MaxLabelValueLength}
}

// stageTolerance is how far, relative to the end-to-end time, measured
// stages may overshoot it and still be taken as rounding (the end-to-end
// time is then raised to their sum and other is 0). Above it the request is
// inconsistent and rejected. It matches attribution.NewRequestsResidual.
const stageTolerance = 1e-9

// Errors of request decoding, wrapped with the field and value.
var (
	// ErrBadRequestLine is matched by every error about one pushed request:
	// the line is rejected, the others of the body are kept.
	ErrBadRequestLine = errors.New("bad request line")
)

// jsonTime is a timestamp as pushed: a JSON number of Unix seconds (decimal
// digits are read exactly, to the nanosecond) or an RFC 3339 string. It
// holds Unix nanoseconds.
type jsonTime struct{ ns int64 }

func (t *jsonTime) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Errorf("timestamp %q is not RFC 3339", s)
		}
		t.ns = tm.UnixNano()
		return nil
	}
	ns, err := parseUnixSeconds(string(b))
	if err != nil {
		return err
	}
	t.ns = ns
	return nil
}

// parseUnixSeconds reads a JSON number of seconds into nanoseconds. Plain
// decimals are converted digit by digit (a float64 of 1.7e9 s resolves only
// ≈0.2 µs); exponent forms go through float64.
func parseUnixSeconds(s string) (int64, error) {
	bad := fmt.Errorf("timestamp %s is not a number of Unix seconds", s)
	if strings.ContainsAny(s, "eE") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.Abs(f) > 9e9 {
			return 0, bad
		}
		return int64(math.Round(f * 1e9)), nil
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	ip, fp, _ := strings.Cut(s, ".")
	// The JSON decoder has already checked the number's syntax.
	sec, err := strconv.ParseInt(ip, 10, 64)
	if err != nil || sec > 9e9 {
		return 0, bad
	}
	var frac int64
	if fp != "" {
		if len(fp) > 9 {
			fp = fp[:9] // sub-nanosecond digits are dropped
		}
		f, err := strconv.ParseInt(fp+strings.Repeat("0", 9-len(fp)), 10, 64)
		if err != nil || f < 0 {
			return 0, bad
		}
		frac = f
	}
	ns := sec*1e9 + frac
	if neg {
		ns = -ns
	}
	return ns, nil
}

// requestLine is one line of POST /api/v1/requests (docs/requests.schema.json).
type requestLine struct {
	RequestID      string             `json:"request_id"`
	TraceID        string             `json:"trace_id"`
	Labels         map[string]string  `json:"labels"`
	Arrival        *jsonTime          `json:"arrival"`
	Queued         *jsonTime          `json:"queued"`
	Scheduled      *jsonTime          `json:"scheduled"`
	FirstToken     *jsonTime          `json:"first_token"`
	LastToken      *jsonTime          `json:"last_token"`
	Finished       *jsonTime          `json:"finished"`
	TokenTimes     []jsonTime         `json:"token_times"`
	ITL            []float64          `json:"itl"`
	PromptTokens   *uint32            `json:"prompt_tokens"`
	OutputTokens   *uint32            `json:"output_tokens"`
	Stages         map[string]float64 `json:"stages"`
	PromptTokenIDs []int64            `json:"prompt_token_ids"`
	PromptEntropy  *float64           `json:"prompt_entropy"`
}

// DecodeRequestLine parses one NDJSON line of the push API into an Item.
// The error wraps ErrBadRequestLine and names the field and value.
func DecodeRequestLine(line []byte, lim RequestLimits) (Item, error) {
	lim = lim.withDefaults()
	var rl requestLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rl); err != nil {
		return Item{}, fmt.Errorf("%w: %v", ErrBadRequestLine, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Item{}, fmt.Errorf("%w: more than one JSON value on the line", ErrBadRequestLine)
	}
	it, err := rl.item(lim)
	if err != nil {
		return Item{}, fmt.Errorf("%w: %v", ErrBadRequestLine, err)
	}
	return it, nil
}

// stageIndex maps the names a push may set explicitly; other is the
// residual and cannot be set.
var stageIndex = map[string]records.Stage{
	"queue": records.StageQueue, "tokenize": records.StageTokenize, "prefill": records.StagePrefill,
	"decode": records.StageDecode, "detokenize": records.StageDetokenize, "network": records.StageNetwork,
}

func (rl *requestLine) item(lim RequestLimits) (Item, error) {
	var it Item
	r := &it.Record
	if err := setIDs(r, rl.RequestID, rl.TraceID); err != nil {
		return it, err
	}
	ls, err := buildLabels(rl.Labels, lim)
	if err != nil {
		return it, err
	}
	r.Labels = ls

	if rl.Arrival == nil {
		return it, errors.New("arrival is missing")
	}
	if len(rl.TokenTimes) > 0 && len(rl.ITL) > 0 {
		return it, errors.New("both token_times and itl are set; send one")
	}
	if n := max(len(rl.TokenTimes), len(rl.ITL), len(rl.PromptTokenIDs)); n > lim.MaxTokens {
		return it, fmt.Errorf("%d tokens, over the limit of %d", n, lim.MaxTokens)
	}
	first, last := rl.FirstToken, rl.LastToken
	if n := len(rl.TokenTimes); n > 0 {
		switch {
		case first == nil:
			first = &rl.TokenTimes[0]
		case first.ns != rl.TokenTimes[0].ns:
			return it, fmt.Errorf("first_token %s differs from token_times[0] %s", fmtNS(first.ns), fmtNS(rl.TokenTimes[0].ns))
		}
		switch {
		case last == nil:
			last = &rl.TokenTimes[n-1]
		case last.ns != rl.TokenTimes[n-1].ns:
			return it, fmt.Errorf("last_token %s differs from the last of token_times %s", fmtNS(last.ns), fmtNS(rl.TokenTimes[n-1].ns))
		}
	}
	// The lifecycle, in the order the timestamps must come.
	chain := []struct {
		name string
		t    *jsonTime
	}{
		{"arrival", rl.Arrival},
		{"queued", rl.Queued},
		{"scheduled", rl.Scheduled},
		{"first_token", first},
		{"last_token", last},
		{"finished", rl.Finished},
	}
	prev := -1
	for i, c := range chain {
		if c.t == nil {
			continue
		}
		if c.t.ns < 0 {
			return it, fmt.Errorf("negative timestamp: %s = %s", c.name, fmtNS(c.t.ns))
		}
		if prev >= 0 && c.t.ns < chain[prev].t.ns {
			return it, fmt.Errorf("non-monotonic timestamps: %s %s is before %s %s",
				c.name, fmtNS(c.t.ns), chain[prev].name, fmtNS(chain[prev].t.ns))
		}
		prev = i
	}
	for i := 1; i < len(rl.TokenTimes); i++ {
		if rl.TokenTimes[i].ns < rl.TokenTimes[i-1].ns {
			return it, fmt.Errorf("non-monotonic timestamps: token_times[%d] %s is before token_times[%d] %s",
				i, fmtNS(rl.TokenTimes[i].ns), i-1, fmtNS(rl.TokenTimes[i-1].ns))
		}
	}
	end := rl.Finished
	if end == nil {
		end = last
	}
	if end == nil {
		return it, errors.New("no end time: set finished, last_token or token_times")
	}

	arrival := rl.Arrival.ns
	r.Time = arrival / 1e6
	r.E2E = secondsBetween(arrival, end.ns)
	if rl.Scheduled != nil {
		from := arrival
		if rl.Queued != nil {
			from = rl.Queued.ns
		}
		r.Stages[records.StageQueue] = secondsBetween(from, rl.Scheduled.ns)
		if first != nil {
			r.Stages[records.StagePrefill] = secondsBetween(rl.Scheduled.ns, first.ns)
		}
	}
	if first != nil {
		it.HasTTFT = true
		r.TTFT = secondsBetween(arrival, first.ns)
		if last != nil {
			r.Stages[records.StageDecode] = secondsBetween(first.ns, last.ns)
		}
	}
	names := make([]string, 0, len(rl.Stages))
	for name := range rl.Stages {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v := rl.Stages[name]
		st, ok := stageIndex[name]
		if !ok {
			if name == "other" {
				return it, errors.New(`stages.other cannot be set: it is the residual end-to-end − Σ stages`)
			}
			return it, fmt.Errorf("stages.%s: unknown stage (want queue, tokenize, prefill, decode, detokenize or network)", name)
		}
		if !(v >= 0) || math.IsInf(v, 1) {
			return it, fmt.Errorf("stages.%s = %v is not a finite duration ≥ 0", name, v)
		}
		r.Stages[st] = v
	}
	if err := settleStages(r); err != nil {
		return it, err
	}

	switch {
	case len(rl.TokenTimes) > 1:
		it.Gaps = make([]float64, len(rl.TokenTimes)-1)
		for i := range it.Gaps {
			it.Gaps[i] = secondsBetween(rl.TokenTimes[i].ns, rl.TokenTimes[i+1].ns)
		}
	case len(rl.ITL) > 0:
		for i, g := range rl.ITL {
			if !(g >= 0) || math.IsInf(g, 1) {
				return it, fmt.Errorf("itl[%d] = %v is not a finite duration ≥ 0", i, g)
			}
		}
		it.Gaps = slices.Clone(rl.ITL)
	}
	if len(it.Gaps) > 0 {
		r.ITL = records.SummarizeITL(it.Gaps)
	}

	switch {
	case rl.OutputTokens != nil:
		r.OutputTokens = *rl.OutputTokens
	case len(rl.TokenTimes) > 0:
		r.OutputTokens = uint32(len(rl.TokenTimes))
	case len(rl.ITL) > 0:
		r.OutputTokens = uint32(len(rl.ITL) + 1)
	}
	if rl.PromptTokens != nil {
		r.PromptTokens = *rl.PromptTokens
		if len(rl.PromptTokenIDs) > 0 && int(r.PromptTokens) != len(rl.PromptTokenIDs) {
			return it, fmt.Errorf("prompt_tokens %d but %d prompt_token_ids", r.PromptTokens, len(rl.PromptTokenIDs))
		}
	} else {
		r.PromptTokens = uint32(len(rl.PromptTokenIDs))
	}
	switch {
	case rl.PromptEntropy != nil && len(rl.PromptTokenIDs) > 0:
		return it, errors.New("both prompt_entropy and prompt_token_ids are set; send one")
	case rl.PromptEntropy != nil:
		if v := *rl.PromptEntropy; !(v >= 0) || math.IsInf(v, 1) {
			return it, fmt.Errorf("prompt_entropy = %v is not finite and ≥ 0", v)
		}
		r.PromptEntropy, it.HasEntropy = *rl.PromptEntropy, true
	case len(rl.PromptTokenIDs) > 0:
		r.PromptEntropy, it.HasEntropy = PromptEntropy(rl.PromptTokenIDs), true
	}
	if err := r.Validate(); err != nil {
		return it, err
	}
	return it, nil
}

// settleStages checks the measured stages against the end-to-end time and
// sets other to the residual. An overshoot within stageTolerance is
// rounding: the end-to-end time becomes the stage sum and other 0, so every
// stage of an ingested record is ≥ 0 and the tail counters never decrease.
func settleStages(r *records.Record) error {
	var s float64
	for _, v := range r.Stages[:records.StageOther] {
		s += v
	}
	if s > r.E2E {
		if s-r.E2E > stageTolerance*math.Max(r.E2E, 1e-9) {
			return fmt.Errorf("stages sum to %vs, more than end-to-end %vs", s, r.E2E)
		}
		r.E2E = s
	}
	r.Stages[records.StageOther] = 0
	if err := r.FillOther(); err != nil {
		return err
	}
	if r.Stages[records.StageOther] < 0 {
		return fmt.Errorf("stages sum to %vs, more than end-to-end %vs", s, r.E2E)
	}
	return nil
}

func setIDs(r *records.Record, requestID, traceID string) error {
	if requestID == "" && traceID == "" {
		return errors.New("missing ids: set request_id or trace_id")
	}
	if len(requestID) > 1024 || !utf8.ValidString(requestID) {
		return fmt.Errorf("request_id of %d bytes is longer than 1024 or not UTF-8", len(requestID))
	}
	r.RequestID = requestID
	if traceID != "" {
		id, err := parseTraceID(traceID)
		if err != nil {
			return err
		}
		r.TraceID = id
	}
	return nil
}

func parseTraceID(s string) (records.TraceID, error) {
	var id records.TraceID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("trace_id %q is not 32 hex digits", s)
	}
	copy(id[:], b)
	if id.IsZero() {
		return id, fmt.Errorf("trace_id %q is all zero, which W3C reserves for no trace", s)
	}
	return id, nil
}

// buildLabels validates pushed labels. An empty value means "no label", as
// in Prometheus, and is dropped.
func buildLabels(m map[string]string, lim RequestLimits) (labels.Labels, error) {
	b := labels.NewScratchBuilder(len(m))
	n := 0
	rules := lim.rules()
	if err := rules.Count(len(m)); err != nil {
		return labels.EmptyLabels(), err
	}
	for name, value := range m {
		if value == "" {
			continue
		}
		if err := rules.Label(name, value); err != nil {
			return labels.EmptyLabels(), err
		}
		if strings.HasPrefix(name, "__") {
			return labels.EmptyLabels(), fmt.Errorf("label name %q: names starting with __ are reserved", name)
		}
		b.Add(name, value)
		n++
	}
	b.Sort()
	return b.Labels(), nil
}

// PromptEntropy is the Shannon entropy, in bits, of the empirical
// distribution of token ids in a prompt: H = −Σ_t p_t·log₂ p_t, with p_t the
// share of the prompt that is token t. A prompt of one repeated token has
// H = 0; n distinct tokens have H = log₂ n. An empty prompt returns 0.
func PromptEntropy(ids []int64) float64 {
	if len(ids) == 0 {
		return 0
	}
	s := slices.Clone(ids)
	slices.Sort(s)
	n := float64(len(s))
	var h float64
	for i := 0; i < len(s); {
		j := i + 1
		for j < len(s) && s[j] == s[i] {
			j++
		}
		p := float64(j-i) / n
		h -= p * math.Log2(p)
		i = j
	}
	return math.Max(h, 0) // −0 for a single token
}

// secondsBetween converts a nanosecond interval to seconds. Intervals below
// 2^53 ns (104 days) convert exactly before the division.
func secondsBetween(from, to int64) float64 { return float64(to-from) / 1e9 }

func fmtNS(ns int64) string {
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}
