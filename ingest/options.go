package ingest

import (
	"time"

	"github.com/tailroot/tailroot/internal/validation"
)

// Options bounds what one write request may carry. Zero means "no limit"
// for every count limit; DefaultOptions gives the limits tailroot serves with.
type Options struct {
	// MaxBodyBytes caps the compressed request body; larger bodies get 413.
	// Zero means 32 MiB, the remote-write receiver limit Prometheus uses.
	MaxBodyBytes int64
	// MaxDecodedBytes caps the snappy-decoded body; larger bodies get 413.
	// Zero means 4 × MaxBodyBytes.
	MaxDecodedBytes int64
	// MaxSeriesPerRequest rejects a request with more series with 413.
	// Zero means no limit.
	MaxSeriesPerRequest int
	// MaxLabelsPerSeries rejects a series with more labels (the series is
	// reported; the rest of the request is kept). Zero means no limit.
	MaxLabelsPerSeries int
	// MaxLabelValueLength rejects series with a longer label value. Zero
	// means no limit.
	MaxLabelValueLength int
	// MaxLabelNameLength rejects series with a longer label name. Zero
	// means no limit.
	MaxLabelNameLength int
	// MaxFutureSkew rejects samples further than this ahead of the server
	// clock. Zero means 10 minutes, as in Prometheus.
	MaxFutureSkew time.Duration
	// SeriesCacheSize is how many label sets the handler remembers with their
	// storage references, so that a known series skips label building,
	// validation and the head's hash lookup. Zero disables the cache.
	SeriesCacheSize int
}

// DefaultOptions returns the limits tailroot serves with.
func DefaultOptions() Options {
	return Options{
		MaxBodyBytes:        32 << 20,
		MaxSeriesPerRequest: 0,
		MaxLabelsPerSeries:  64,
		MaxLabelValueLength: 4096,
		MaxLabelNameLength:  1024,
		MaxFutureSkew:       10 * time.Minute,
		SeriesCacheSize:     1 << 20,
	}
}

// Rules are the label rules of Options, which every ingest path shares
// (see internal/validation).
func (o Options) Rules() validation.Rules {
	return validation.Rules{
		MaxLabels:           o.MaxLabelsPerSeries,
		MaxLabelNameLength:  o.MaxLabelNameLength,
		MaxLabelValueLength: o.MaxLabelValueLength,
	}
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 32 << 20
	}
	if o.MaxDecodedBytes <= 0 {
		o.MaxDecodedBytes = 4 * o.MaxBodyBytes
	}
	if o.MaxFutureSkew <= 0 {
		o.MaxFutureSkew = 10 * time.Minute
	}
	return o
}
