package sim

import (
	"fmt"

	"github.com/prometheus/common/model"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// Encode builds a remote-write request of version protoMsg (ProtoMsgV1 or
// ProtoMsgV2) holding series and returns its snappy-compressed protobuf
// body, ready to POST.
//
// Remote write 1.0 carries one metadata entry per metric family; 2.0 carries
// type, help and unit on every series through the symbol table.
func Encode(protoMsg string, series []Series) ([]byte, error) {
	var e encoder
	return e.encode(protoMsg, series)
}

// encoder keeps its buffers between requests; the returned body is valid
// until the next call.
type encoder struct {
	symbols writev2.SymbolsTable
	v2      []writev2.TimeSeries
	v1      []prompb.TimeSeries
	// Backing arrays the series of one request slice into.
	refs      []uint32
	samplesV2 []writev2.Sample
	labelsV1  []prompb.Label
	samplesV1 []prompb.Sample
	pb        []byte
	body      []byte
}

// carve returns n elements of *buf, growing it for the whole request on
// first need; earlier slices stay valid because a grown buffer is new.
func carve[T any](buf *[]T, n, hint int) []T {
	if cap(*buf)-len(*buf) < n {
		*buf = make([]T, 0, max(2*cap(*buf), hint, n))
	}
	out := (*buf)[len(*buf) : len(*buf)+n : len(*buf)+n]
	*buf = (*buf)[:len(*buf)+n]
	return out
}

func (e *encoder) encode(protoMsg string, series []Series) ([]byte, error) {
	var err error
	switch protoMsg {
	case ProtoMsgV1:
		e.pb, err = e.marshalV1(series)
	case ProtoMsgV2:
		e.pb, err = e.marshalV2(series)
	default:
		return nil, fmt.Errorf("encode: unknown proto message %q", protoMsg)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", protoMsg, err)
	}
	e.body = snappy.Encode(e.body[:cap(e.body)], e.pb)
	return e.body, nil
}

func (e *encoder) marshalV1(series []Series) ([]byte, error) {
	req := prompb.WriteRequest{Timeseries: e.v1[:0]}
	seen := make(map[string]bool)
	e.labelsV1, e.samplesV1 = e.labelsV1[:0], e.samplesV1[:0]
	for i := range series {
		s := &series[i]
		ts := prompb.TimeSeries{Labels: prompb.FromLabels(s.Labels, carve(&e.labelsV1, s.Labels.Len(), 8*len(series))[:0])}
		if len(s.Samples) > 0 {
			ts.Samples = carve(&e.samplesV1, len(s.Samples), len(series))
			for j, x := range s.Samples {
				ts.Samples[j] = prompb.Sample{Timestamp: x.T, Value: x.V}
			}
		}
		if len(s.Histograms) > 0 {
			ts.Histograms = make([]prompb.Histogram, len(s.Histograms))
			for j, h := range s.Histograms {
				ts.Histograms[j] = prompb.FromIntHistogram(h.T, h.H)
			}
		}
		req.Timeseries = append(req.Timeseries, ts)

		fam := familyName(s.Labels.Get(model.MetricNameLabel), s.Metadata)
		if !seen[fam] {
			seen[fam] = true
			req.Metadata = append(req.Metadata, prompb.MetricMetadata{
				Type:             prompb.FromMetadataType(s.Metadata.Type),
				MetricFamilyName: fam,
				Help:             s.Metadata.Help,
				Unit:             s.Metadata.Unit,
			})
		}
	}
	e.v1 = req.Timeseries[:0]
	size := req.Size()
	if cap(e.pb) < size {
		e.pb = make([]byte, size)
	}
	n, err := req.MarshalToSizedBuffer(e.pb[:size])
	if err != nil {
		return nil, err
	}
	return e.pb[size-n : size], nil
}

func (e *encoder) marshalV2(series []Series) ([]byte, error) {
	if e.symbols.Symbols() == nil {
		e.symbols = writev2.NewSymbolTable()
	}
	e.symbols.Reset()
	req := writev2.Request{Timeseries: e.v2[:0]}
	e.refs, e.samplesV2 = e.refs[:0], e.samplesV2[:0]
	for i := range series {
		s := &series[i]
		ts := writev2.TimeSeries{
			LabelsRefs: e.symbols.SymbolizeLabels(s.Labels, carve(&e.refs, 2*s.Labels.Len(), 16*len(series))),
			Metadata: writev2.Metadata{
				Type:    writev2.FromMetadataType(s.Metadata.Type),
				HelpRef: e.symbols.Symbolize(s.Metadata.Help),
				UnitRef: e.symbols.Symbolize(s.Metadata.Unit),
			},
		}
		if len(s.Samples) > 0 {
			ts.Samples = carve(&e.samplesV2, len(s.Samples), len(series))
			for j, x := range s.Samples {
				ts.Samples[j] = writev2.Sample{Timestamp: x.T, Value: x.V}
			}
		}
		if len(s.Histograms) > 0 {
			ts.Histograms = make([]writev2.Histogram, len(s.Histograms))
			for j, h := range s.Histograms {
				ts.Histograms[j] = writev2.FromIntHistogram(0, h.T, h.H)
			}
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	req.Symbols = e.symbols.Symbols()
	e.v2 = req.Timeseries[:0]
	return req.OptimizedMarshal(e.pb)
}
