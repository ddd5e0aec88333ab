package metricsql

import (
	"errors"
	"fmt"
)

// ErrUnsupported is matched (errors.Is) by every *UnsupportedError: the query
// is valid MetricsQL but uses a construct with no exact PromQL equivalent.
var ErrUnsupported = errors.New("metricsql: construct has no PromQL equivalent")

// UnsupportedError names a MetricsQL construct that Translate refuses, and
// why. It is returned instead of a translation that would silently change
// the query's meaning.
type UnsupportedError struct {
	// Construct is the offending piece of the query as written in MetricsQL
	// (or as emitted in PromQL when the target parser rejects it), e.g.
	// "keep_metric_names" or "now()".
	Construct string
	// Reason says what is missing on the PromQL side.
	Reason string
}

func (e *UnsupportedError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("metricsql: unsupported construct %q", e.Construct)
	}
	return fmt.Sprintf("metricsql: unsupported construct %q: %s", e.Construct, e.Reason)
}

// Is maps every UnsupportedError onto ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

func unsupported(construct, reason string) error {
	return &UnsupportedError{Construct: construct, Reason: reason}
}

func unsupportedf(construct, format string, args ...any) error {
	return &UnsupportedError{Construct: construct, Reason: fmt.Sprintf(format, args...)}
}
