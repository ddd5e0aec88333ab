package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tailroot/tailroot/internal/validation"
)

// Kinds of evidence.
const (
	KindCUDATimeline = "cuda_timeline"
	KindStack        = "stack"
)

// Item is one evidence item of the JSON contract (agent/EVIDENCE.md).
type Item struct {
	Kind        string    `json:"kind"`
	Time        time.Time `json:"time"` // end of the interval the item covers
	Node        string    `json:"node"`
	PID         uint32    `json:"pid"`
	TID         uint32    `json:"tid,omitempty"`
	Comm        string    `json:"comm,omitempty"`
	ContainerID string    `json:"container_id,omitempty"`
	PodUID      string    `json:"pod_uid,omitempty"`
	Probe       string    `json:"probe,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	Start       time.Time `json:"start,omitzero"` // stack: when the event began
	Latency     float64   `json:"latency"`        // seconds
	Frames      []Frame   `json:"frames"`         // innermost first
	Calls       []Call    `json:"calls,omitempty"`
	Seen        uint64    `json:"seen,omitempty"`
}

// Frame is one stack frame.
type Frame struct {
	Address  string `json:"address"`
	Module   string `json:"module,omitempty"`
	Function string `json:"function,omitempty"`
	Offset   uint64 `json:"offset,omitempty"`
}

// Call is one CUDA API call of a timeline.
type Call struct {
	TID      uint32    `json:"tid"`
	Symbol   string    `json:"symbol"`
	Start    time.Time `json:"start"`
	Duration float64   `json:"duration"` // seconds
	Stream   string    `json:"stream,omitempty"`
}

// Span is the time an item covers: a stack its event, [Start, Start +
// Latency] (the instant Time when Start is absent); a timeline its calls,
// first start to last end (the instant Time without calls). Queries match
// items whose span overlaps their window.
func (it *Item) Span() (from, to time.Time) {
	switch {
	case it.Kind == KindStack && !it.Start.IsZero():
		return it.Start, it.Start.Add(seconds(it.Latency))
	case it.Kind == KindCUDATimeline && len(it.Calls) > 0:
		from, to = it.Calls[0].Start, it.Calls[0].Start
		for _, c := range it.Calls {
			if c.Start.Before(from) {
				from = c.Start
			}
			if end := c.Start.Add(seconds(c.Duration)); end.After(to) {
				to = end
			}
		}
		return from, to
	}
	return it.Time, it.Time
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Limits bound what ParseBatch accepts. Zero fields take the defaults of
// DefaultLimits.
type Limits struct {
	MaxItems  int // items per batch; 0 means 10000
	MaxFrames int // frames per item; 0 means 512
	MaxCalls  int // calls per item; 0 means 4096
	MaxString int // bytes of any string field; 0 means 1024
	// MaxLatency is the longest latency or call duration; 0 means 1 day.
	MaxLatency time.Duration
	// MinTime and MaxTime bound item spans: an item ending before MinTime
	// (past retention) or starting after MaxTime (clock skew) is rejected.
	// Zero means no bound.
	MinTime, MaxTime time.Time
}

// DefaultLimits returns the limits used for zero fields.
func DefaultLimits() Limits {
	return Limits{MaxItems: 10000, MaxFrames: 512, MaxCalls: 4096, MaxString: 1024, MaxLatency: 24 * time.Hour}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxItems <= 0 {
		l.MaxItems = d.MaxItems
	}
	if l.MaxFrames <= 0 {
		l.MaxFrames = d.MaxFrames
	}
	if l.MaxCalls <= 0 {
		l.MaxCalls = d.MaxCalls
	}
	if l.MaxString <= 0 {
		l.MaxString = d.MaxString
	}
	if l.MaxLatency <= 0 {
		l.MaxLatency = d.MaxLatency
	}
	return l
}

// Errors of ParseBatch.
var (
	// ErrMalformed: the body is not a batch (not JSON, no evidence array,
	// too many items); nothing in it is accepted.
	ErrMalformed = errors.New("malformed evidence batch")
	// ErrBadItem: an item breaks the contract; the other items are good.
	ErrBadItem = errors.New("bad evidence item")
)

// ItemError names one rejected item by its index in the batch.
type ItemError struct {
	Index int
	Err   error
}

func (e *ItemError) Error() string { return fmt.Sprintf("evidence[%d]: %v", e.Index, e.Err) }

// Unwrap returns the cause.
func (e *ItemError) Unwrap() error { return e.Err }

// Is makes every ItemError match ErrBadItem.
func (e *ItemError) Is(target error) bool { return target == ErrBadItem }

// ParseBatch decodes a POST body {"node": …, "evidence": [item, …]} and
// checks every item. It returns the good items and one *ItemError per bad
// one, in batch order; an error matching ErrMalformed means the body as a
// whole was refused. Items without a node take the batch's. Unknown fields
// are ignored, so agents may add some.
func ParseBatch(body []byte, lim Limits) (good []Item, bad []error, err error) {
	lim = lim.withDefaults()
	var b struct {
		Node     string            `json:"node"`
		Evidence []json.RawMessage `json:"evidence"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, nil, fmt.Errorf("%w: data after the batch object", ErrMalformed)
	}
	if b.Evidence == nil {
		return nil, nil, fmt.Errorf("%w: no \"evidence\" array", ErrMalformed)
	}
	if len(b.Evidence) > lim.MaxItems {
		return nil, nil, fmt.Errorf("%w: %d items, more than the limit %d", ErrMalformed, len(b.Evidence), lim.MaxItems)
	}
	if len(b.Node) > lim.MaxString {
		return nil, nil, fmt.Errorf("%w: node: %d bytes, more than the limit %d", ErrMalformed, len(b.Node), lim.MaxString)
	}
	for i, raw := range b.Evidence {
		var it Item
		if err := json.Unmarshal(raw, &it); err != nil {
			bad = append(bad, &ItemError{i, err})
			continue
		}
		if it.Node == "" {
			it.Node = b.Node
		}
		if err := it.Validate(lim); err != nil {
			bad = append(bad, &ItemError{i, err})
			continue
		}
		good = append(good, it)
	}
	return good, bad, nil
}

// Validate checks an item against the contract and lim (zero fields of lim
// take the defaults), naming the first bad field and its value.
func (it *Item) Validate(lim Limits) error {
	lim = lim.withDefaults()
	switch it.Kind {
	case KindStack:
		if len(it.Calls) > 0 {
			return fmt.Errorf("calls: a stack has none, got %d", len(it.Calls))
		}
	case KindCUDATimeline:
	case "":
		return errors.New("kind: missing")
	default:
		return fmt.Errorf("kind: %q is not %q or %q", clip(it.Kind), KindStack, KindCUDATimeline)
	}
	if it.Time.IsZero() {
		return errors.New("time: missing")
	}
	if err := checkTime("time", it.Time); err != nil {
		return err
	}
	if err := checkTime("start", it.Start); err != nil {
		return err
	}
	if it.Node == "" {
		return errors.New("node: missing")
	}
	if it.PID == 0 {
		return errors.New("pid: missing or 0")
	}
	// The label-like fields (queried as node=, comm=, probe=) follow the
	// label rules every ingest path shares, with MaxString as the length.
	rules := validation.Rules{MaxLabelValueLength: lim.MaxString}
	for name, v := range map[string]string{
		"node": it.Node, "comm": it.Comm, "container_id": it.ContainerID, "pod_uid": it.PodUID,
		"probe": it.Probe, "detail": it.Detail,
	} {
		if len(v) > lim.MaxString {
			return fmt.Errorf("%s: %d bytes, more than the limit %d", name, len(v), lim.MaxString)
		}
		if err := rules.Label(name, v); err != nil {
			return err
		}
	}
	if err := checkSeconds("latency", it.Latency, lim); err != nil {
		return err
	}
	if len(it.Frames) > lim.MaxFrames {
		return fmt.Errorf("frames: %d, more than the limit %d", len(it.Frames), lim.MaxFrames)
	}
	for j, f := range it.Frames {
		if !isHexAddress(f.Address) {
			return fmt.Errorf("frames[%d].address: %q is not 0x and 1 to 16 hexadecimal digits", j, clip(f.Address))
		}
		if len(f.Module) > lim.MaxString || len(f.Function) > lim.MaxString {
			return fmt.Errorf("frames[%d]: module or function longer than the limit %d", j, lim.MaxString)
		}
	}
	if len(it.Calls) > lim.MaxCalls {
		return fmt.Errorf("calls: %d, more than the limit %d", len(it.Calls), lim.MaxCalls)
	}
	for j, c := range it.Calls {
		switch {
		case c.Symbol == "":
			return fmt.Errorf("calls[%d].symbol: missing", j)
		case len(c.Symbol) > lim.MaxString:
			return fmt.Errorf("calls[%d].symbol: %d bytes, more than the limit %d", j, len(c.Symbol), lim.MaxString)
		case c.Start.IsZero():
			return fmt.Errorf("calls[%d].start: missing", j)
		case checkTime("", c.Start) != nil:
			return fmt.Errorf("calls[%d].%w", j, checkTime("start", c.Start))
		case c.Stream != "" && !isHexAddress(c.Stream):
			return fmt.Errorf("calls[%d].stream: %q is not 0x and 1 to 16 hexadecimal digits", j, clip(c.Stream))
		}
		if err := checkSeconds(fmt.Sprintf("calls[%d].duration", j), c.Duration, lim); err != nil {
			return err
		}
	}
	from, to := it.Span()
	if !lim.MinTime.IsZero() && to.Before(lim.MinTime) {
		return fmt.Errorf("time: span ends %s, before the oldest time kept %s (retention)", to.UTC().Format(time.RFC3339Nano), lim.MinTime.UTC().Format(time.RFC3339))
	}
	if !lim.MaxTime.IsZero() && from.After(lim.MaxTime) {
		return fmt.Errorf("time: span starts %s, after %s (clock skew?)", from.UTC().Format(time.RFC3339Nano), lim.MaxTime.UTC().Format(time.RFC3339))
	}
	return nil
}

// Times are kept as Unix nanoseconds, which cover 1678 to 2262; anything
// before 1970 or from 2200 on is a broken clock, not evidence.
var minItemTime, maxItemTime = time.Unix(0, 0), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

func checkTime(name string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if t.Before(minItemTime) || !t.Before(maxItemTime) {
		return fmt.Errorf("%s: %s is not between 1970 and 2200", name, t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

func checkSeconds(name string, v float64, lim Limits) error {
	if math.IsNaN(v) || v < 0 || v > lim.MaxLatency.Seconds() {
		return fmt.Errorf("%s: %v s is not between 0 and %v", name, v, lim.MaxLatency.Seconds())
	}
	return nil
}

// isHexAddress accepts "0x" and 1 to 16 hexadecimal digits.
func isHexAddress(s string) bool {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) == 0 || len(h) > 16 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// clip shortens a bad value for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
