// Package validation holds the label and timestamp rules that every ingest
// path applies: remote write 1.0 and 2.0, OTLP metrics and traces, request
// records, and the label-like fields of evidence (node, comm, probe, …,
// with the evidence store's own length). One set of rules, one set of numbers (the serve flags
// --ingest.max-labels-per-series, --ingest.max-label-name-length,
// --ingest.max-label-value-length), so a series or record refused on one
// path is refused on every other, with the same words.
//
// In: label names and values, label sets, wire timestamps. Out: nil, or an
// error naming the label, what is wrong and the limit. Pure: no state.
package validation

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"
)

// Rules bound labels. Zero or negative in a field means that limit is off.
type Rules struct {
	// MaxLabels is the most labels one series or record may have.
	MaxLabels int
	// MaxLabelNameLength is the longest label name, in bytes.
	MaxLabelNameLength int
	// MaxLabelValueLength is the longest label value, in bytes.
	MaxLabelValueLength int
}

// DefaultRules returns the rules of `tailroot serve`: Mimir's name length,
// and room for the label counts and values real exporters send (target
// labels, pod names, URLs).
func DefaultRules() Rules {
	return Rules{MaxLabels: 64, MaxLabelNameLength: 1024, MaxLabelValueLength: 4096}
}

// Count checks the number of labels.
func (r Rules) Count(n int) error {
	if r.MaxLabels > 0 && n > r.MaxLabels {
		return fmt.Errorf("%d labels, over the limit ingest.max-labels-per-series=%d", n, r.MaxLabels)
	}
	return nil
}

// Label checks one label: a non-empty UTF-8 name and a UTF-8 value, each
// within its length. The value is not quoted in the error when it is long.
func (r Rules) Label(name, value string) error {
	switch {
	case name == "":
		return errors.New("empty label name")
	case r.MaxLabelNameLength > 0 && len(name) > r.MaxLabelNameLength:
		return fmt.Errorf("label name %.64q… is %d bytes, over the limit ingest.max-label-name-length=%d", name, len(name), r.MaxLabelNameLength)
	case !utf8.ValidString(name):
		return fmt.Errorf("label name %q is not valid UTF-8", name)
	case r.MaxLabelValueLength > 0 && len(value) > r.MaxLabelValueLength:
		return fmt.Errorf("label %q value is %d bytes, over the limit ingest.max-label-value-length=%d", name, len(value), r.MaxLabelValueLength)
	case !utf8.ValidString(value):
		return fmt.Errorf("label %q value %q is not valid UTF-8", name, value)
	}
	return nil
}

// Labels checks a built label set: its size, each label, and that no name
// repeats.
func (r Rules) Labels(ls labels.Labels) error {
	if err := r.Count(ls.Len()); err != nil {
		return err
	}
	var err error
	ls.Range(func(l labels.Label) {
		if err == nil {
			err = r.Label(l.Name, l.Value)
		}
	})
	if err != nil {
		return err
	}
	if dup, ok := ls.HasDuplicateLabelNames(); ok {
		return fmt.Errorf("duplicate label name %q", dup)
	}
	return nil
}

// ErrTimestampRange is matched by every timestamp refused for being outside
// what a signed 64-bit count of nanoseconds holds.
var ErrTimestampRange = errors.New("timestamp out of range")

// UnixNano converts an OTLP timestamp (unsigned nanoseconds since the
// epoch) to signed nanoseconds. One beyond math.MaxInt64 (the year 2262)
// is refused: converted as is it wraps negative, to 1677 or, in
// milliseconds, to 1915, and is then acknowledged and deleted by retention.
func UnixNano(ns uint64) (int64, error) {
	if ns > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %d ns since the epoch is after %s", ErrTimestampRange, ns, time.Unix(0, math.MaxInt64).UTC().Format(time.RFC3339))
	}
	return int64(ns), nil
}
