// Package rw encodes the agent's series as Prometheus remote write 2.0
// requests (io.prometheus.write.v2.Request, snappy-compressed) and decodes
// them back.
//
// In: []collect.Series. Out: the request body, ready to POST with
// ContentType. Decode is the inverse, used by tests and to inspect a
// queue; it rejects malformed bodies with an error naming the bad field.
package rw

import (
	"errors"
	"fmt"

	"github.com/prometheus/common/model"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/tailroot/tailroot/agent/collect"
)

// ContentType is the Content-Type of a remote write 2.0 request.
const ContentType = "application/x-protobuf;proto=io.prometheus.write.v2.Request"

// Version is the X-Prometheus-Remote-Write-Version header value.
const Version = "2.0.0"

// Encoder builds remote write 2.0 bodies, keeping its buffers between
// calls. It is not safe for concurrent use.
type Encoder struct {
	symbols writev2.SymbolsTable
	series  []writev2.TimeSeries
	refs    []uint32
	samples []writev2.Sample
	pb      []byte
}

// Encode returns the snappy-compressed request holding series, appended to
// dst[:0]. Series without samples are left out. Type, help and unit travel
// on every series through the symbol table, as 2.0 prescribes.
func (e *Encoder) Encode(dst []byte, series []collect.Series) ([]byte, error) {
	if e.symbols.Symbols() == nil {
		e.symbols = writev2.NewSymbolTable()
	}
	e.symbols.Reset()
	e.series, e.refs, e.samples = e.series[:0], e.refs[:0], e.samples[:0]
	nref, nsamp := 0, 0
	for i := range series {
		nref += 2 * series[i].Labels.Len()
		nsamp += len(series[i].Samples)
	}
	// Size the backing arrays once so slices carved from them stay valid.
	if cap(e.refs) < nref {
		e.refs = make([]uint32, 0, nref)
	}
	if cap(e.samples) < nsamp {
		e.samples = make([]writev2.Sample, 0, nsamp)
	}
	for i := range series {
		s := &series[i]
		if s.Len() == 0 {
			continue
		}
		if s.Labels.Get(model.MetricNameLabel) == "" {
			return nil, fmt.Errorf("encode series %d: no __name__ label in %s", i, s.Labels)
		}
		// SymbolizeLabels appends to buf[:0]; e.refs has room for all
		// series, so each series' refs land in place after the previous.
		start := len(e.refs)
		refs := e.symbols.SymbolizeLabels(s.Labels, e.refs[start:])
		e.refs = e.refs[:start+len(refs)]
		ts := writev2.TimeSeries{
			LabelsRefs: refs[:len(refs):len(refs)],
			Metadata: writev2.Metadata{
				Type:    writev2.FromMetadataType(s.Meta.Type),
				HelpRef: e.symbols.Symbolize(s.Meta.Help),
				UnitRef: e.symbols.Symbolize(s.Meta.Unit),
			},
		}
		if len(s.Samples) > 0 {
			start := len(e.samples)
			for _, x := range s.Samples {
				e.samples = append(e.samples, writev2.Sample{Timestamp: x.T, Value: x.V})
			}
			ts.Samples = e.samples[start:len(e.samples):len(e.samples)]
		}
		if len(s.Histograms) > 0 {
			ts.Histograms = make([]writev2.Histogram, len(s.Histograms))
			for j, h := range s.Histograms {
				ts.Histograms[j] = writev2.FromIntHistogram(0, h.T, h.H)
			}
		}
		e.series = append(e.series, ts)
	}
	req := writev2.Request{Symbols: e.symbols.Symbols(), Timeseries: e.series}
	pb, err := req.OptimizedMarshal(e.pb)
	if err != nil {
		return nil, fmt.Errorf("encode remote write 2.0: %w", err)
	}
	e.pb = pb
	for i := range e.series {
		e.series[i] = writev2.TimeSeries{}
	}
	return snappy.Encode(dst[:cap(dst)], pb), nil
}

// Decode parses a snappy-compressed remote write 2.0 body into series.
// Float histograms are not produced by the agent and are rejected.
func Decode(body []byte) ([]collect.Series, error) {
	pb, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, fmt.Errorf("decode snappy: %w", err)
	}
	var req writev2.Request
	if err := req.Unmarshal(pb); err != nil {
		return nil, fmt.Errorf("decode remote write 2.0: %w", err)
	}
	if len(req.Symbols) > 0 && req.Symbols[0] != "" {
		return nil, errors.New("decode remote write 2.0: symbols[0] is not the empty string")
	}
	var b labels.ScratchBuilder
	out := make([]collect.Series, 0, len(req.Timeseries))
	for i, ts := range req.Timeseries {
		ls, err := ts.ToLabels(&b, req.Symbols)
		if err != nil {
			return nil, fmt.Errorf("timeseries %d labels: %w", i, err)
		}
		md, err := ts.ToMetadata(req.Symbols)
		if err != nil {
			return nil, fmt.Errorf("timeseries %d metadata: %w", i, err)
		}
		s := collect.Series{Labels: ls, Meta: md}
		for _, x := range ts.Samples {
			s.Samples = append(s.Samples, collect.Sample{T: x.Timestamp, V: x.Value})
		}
		for j, h := range ts.Histograms {
			if h.IsFloatHistogram() {
				return nil, fmt.Errorf("timeseries %d histogram %d: float histogram", i, j)
			}
			ih := h.ToIntHistogram()
			if err := ih.Validate(); err != nil {
				return nil, fmt.Errorf("timeseries %d histogram %d: %w", i, j, err)
			}
			s.Histograms = append(s.Histograms, collect.HistogramSample{T: h.Timestamp, H: ih})
		}
		out = append(out, s)
	}
	return out, nil
}
