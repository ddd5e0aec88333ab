package ingest

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
)

// FuzzDecodeV1 is a differential test of the view decoder against the
// generated gogo decoder. The view decoder never accepts a body gogo
// rejects; whatever gogo accepts is decoded identically — either from the
// body itself or, where gogo tolerates a non-canonical encoding that the
// protobuf spec forbids (an overflowing 10-byte varint), from gogo's
// canonical re-encoding of it.
func FuzzDecodeV1(f *testing.F) {
	now := time.Now().UnixMilli()
	full := &prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{
			{
				Labels:    []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "a", Value: "b"}},
				Samples:   []prompb.Sample{{Value: 1.5, Timestamp: now}, {Value: math.NaN(), Timestamp: now + 1}},
				Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "x"}}, Value: 2, Timestamp: now}},
			},
			{
				Labels:     []prompb.Label{{Name: "__name__", Value: "h"}},
				Histograms: []prompb.Histogram{prompb.FromIntHistogram(now, &histogram.Histogram{Count: 3, Sum: 2, ZeroCount: 1, ZeroThreshold: 1e-9, PositiveSpans: []histogram.Span{{Offset: 1, Length: 1}}, PositiveBuckets: []int64{2}})},
			},
			{},
		},
		Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "m", Help: "h", Unit: "s"}},
	}
	b, _ := full.Marshal()
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00})
	f.Add([]byte{0x0a, 0x04, 0x0a, 0x02, 0x0a, 0x00})
	f.Add([]byte{0x12, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) {
		var want prompb.WriteRequest
		gogoErr := want.Unmarshal(body)
		var got v1Request
		err := got.decode(body)
		if err == nil && gogoErr != nil {
			t.Fatalf("view decoder accepted a body gogo rejects (%v): %x", gogoErr, body)
		}
		if gogoErr != nil {
			return
		}
		if err != nil {
			// Unknown fields are kept verbatim by gogo; drop them from the
			// messages the view decoder parses itself.
			want.XXX_unrecognized = nil
			for i := range want.Timeseries {
				ts := &want.Timeseries[i]
				ts.XXX_unrecognized = nil
				for j := range ts.Labels {
					ts.Labels[j].XXX_unrecognized = nil
				}
				for j := range ts.Samples {
					ts.Samples[j].XXX_unrecognized = nil
				}
			}
			canon, merr := want.Marshal()
			if merr != nil {
				t.Fatal(merr)
			}
			if err := got.decode(canon); err != nil {
				t.Fatalf("view decoder rejects gogo's canonical encoding %x of %x: %v", canon, body, err)
			}
		}
		if len(got.series) != len(want.Timeseries) {
			t.Fatalf("%d series, gogo %d", len(got.series), len(want.Timeseries))
		}
		for i, ws := range want.Timeseries {
			s := got.series[i]
			pairs := got.pairs[s.pairs.from:s.pairs.to]
			if len(pairs) != len(ws.Labels) {
				t.Fatalf("series %d: %d labels, gogo %d", i, len(pairs), len(ws.Labels))
			}
			for j, l := range ws.Labels {
				if string(pairs[j][0]) != l.Name || string(pairs[j][1]) != l.Value {
					t.Fatalf("series %d label %d: %q=%q, gogo %q=%q", i, j, pairs[j][0], pairs[j][1], l.Name, l.Value)
				}
			}
			smp := got.samples[s.samples.from:s.samples.to]
			if len(smp) != len(ws.Samples) {
				t.Fatalf("series %d: %d samples, gogo %d", i, len(smp), len(ws.Samples))
			}
			for j, w := range ws.Samples {
				if smp[j].Timestamp != w.Timestamp || math.Float64bits(smp[j].Value) != math.Float64bits(w.Value) {
					t.Fatalf("series %d sample %d: %+v, gogo %+v", i, j, smp[j], w)
				}
			}
			if h := got.hists[s.hists.from:s.hists.to]; !(len(h) == 0 && len(ws.Histograms) == 0) && !reflect.DeepEqual(h, ws.Histograms) {
				t.Fatalf("series %d histograms differ", i)
			}
			if e := got.exs[s.exs.from:s.exs.to]; !(len(e) == 0 && len(ws.Exemplars) == 0) && !reflect.DeepEqual(e, ws.Exemplars) {
				t.Fatalf("series %d exemplars differ", i)
			}
		}
		if !(len(got.metadata) == 0 && len(want.Metadata) == 0) && !reflect.DeepEqual(got.metadata, want.Metadata) {
			t.Fatalf("metadata differ: %+v vs %+v", got.metadata, want.Metadata)
		}
	})
}

// TestDecodeV1ReusesBuffers: a pooled request decodes a second, smaller body
// without traces of the first.
func TestDecodeV1ReusesBuffers(t *testing.T) {
	now := time.Now().UnixMilli()
	var r v1Request
	big, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series1("a", "1", now, 1), series1("b", "2", now, 2)}}).Marshal()
	small, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series1("c", "3", now, 3)}}).Marshal()
	if err := r.decode(big); err != nil {
		t.Fatal(err)
	}
	if err := r.decode(small); err != nil {
		t.Fatal(err)
	}
	if len(r.series) != 1 || len(r.pairs) != 2 || len(r.samples) != 1 || r.samples[0].Value != 3 || string(r.pairs[0][1]) != "c" {
		t.Fatalf("after reuse: %+v", r)
	}
}
