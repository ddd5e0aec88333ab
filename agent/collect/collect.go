// Package collect defines what the agent's collectors produce: series of
// float samples and native histograms with their metadata, and the
// Collector interface the agent schedules.
//
// In: nothing (collectors read the kernel, NVML, HTTP endpoints). Out:
// []Series appended to a caller-owned slice. Invariants: within one
// Series, sample timestamps increase; a Series' Labels are sorted and
// never mutated after Collect returns; histograms are not shared with the
// collector after return.
package collect

import (
	"context"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
)

// Sample is a float sample; T is milliseconds since the Unix epoch.
type Sample struct {
	T int64
	V float64
}

// HistogramSample is a native histogram sample; T is milliseconds since the
// Unix epoch.
type HistogramSample struct {
	T int64
	H *histogram.Histogram
}

// Series is one labelled series with the samples of one collection (or of
// several, once batched).
type Series struct {
	Labels     labels.Labels
	Meta       metadata.Metadata
	Samples    []Sample
	Histograms []HistogramSample
}

// Len returns the number of samples and histograms in s.
func (s *Series) Len() int { return len(s.Samples) + len(s.Histograms) }

// Collector produces series on demand. The agent calls Collect from one
// goroutine at the collector's interval.
//
// Collect appends to dst and returns it. The caller owns the returned
// slice and the Samples and Histograms slices in it until the next call;
// it copies what it keeps. Labels and *histogram.Histogram values are
// never modified after return, so the caller may keep them. A collector
// that failed partly returns what it has together with the error.
type Collector interface {
	Name() string
	Collect(ctx context.Context, now time.Time, dst []Series) ([]Series, error)
}

// Runner is implemented by collectors with background work (a sampler
// faster than the collection interval, an event reader). The agent runs
// Run in its own goroutine until ctx is done, before the first Collect.
type Runner interface {
	Run(ctx context.Context) error
}

// Millis converts t to remote-write milliseconds.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// Meta is shorthand for metadata of a metric family.
func Meta(typ model.MetricType, unit, help string) metadata.Metadata {
	return metadata.Metadata{Type: typ, Unit: unit, Help: help}
}
