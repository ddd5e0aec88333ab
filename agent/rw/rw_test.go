package rw

import (
	"math"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"

	"github.com/tailroot/tailroot/agent/collect"
)

func testSeries() []collect.Series {
	h := &histogram.Histogram{
		Count: 5, Sum: 0.75, Schema: 0, ZeroThreshold: math.Ldexp(1, -128),
		PositiveSpans:   []histogram.Span{{Offset: -3, Length: 2}},
		PositiveBuckets: []int64{2, 1}, // counts 2, 3
	}
	return []collect.Series{
		{
			Labels:  labels.FromStrings("__name__", "up", "job", "vllm", "instance", "a:8000"),
			Meta:    collect.Meta(model.MetricTypeGauge, "", "target up"),
			Samples: []collect.Sample{{T: 1000, V: 1}, {T: 2000, V: math.Float64frombits(value.StaleNaN)}},
		},
		{Labels: labels.FromStrings("__name__", "empty")},
		{
			Labels:     labels.FromStrings("__name__", "tailroot_runqueue_delay_seconds", "cgroup", "/a"),
			Meta:       collect.Meta(model.MetricTypeHistogram, "seconds", "run-queue delay"),
			Histograms: []collect.HistogramSample{{T: 1500, H: h}},
		},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	var e Encoder
	in := testSeries()
	body, err := e.Encode(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	// The series without samples is left out.
	if len(out) != 2 {
		t.Fatalf("%d series, want 2", len(out))
	}
	a, b := out[0], out[1]
	if !labels.Equal(a.Labels, in[0].Labels) || a.Meta != in[0].Meta || len(a.Samples) != 2 ||
		a.Samples[0] != (collect.Sample{T: 1000, V: 1}) || a.Samples[1].T != 2000 || !value.IsStaleNaN(a.Samples[1].V) {
		t.Errorf("series 0: %+v", a)
	}
	if !labels.Equal(b.Labels, in[2].Labels) || b.Meta != in[2].Meta || len(b.Histograms) != 1 {
		t.Fatalf("series 1: %+v", b)
	}
	got := b.Histograms[0]
	if got.T != 1500 || !got.H.Equals(in[2].Histograms[0].H) {
		t.Errorf("histogram %v, want %v", got.H, in[2].Histograms[0].H)
	}
	// The encoder reuses its buffers; a second, different request must not
	// see the first one's symbols.
	body2, err := e.Encode(body[:0:0], in[:1])
	if err != nil {
		t.Fatal(err)
	}
	out2, err := Decode(body2)
	if err != nil || len(out2) != 1 || !labels.Equal(out2[0].Labels, in[0].Labels) {
		t.Fatalf("second request: %v %+v", err, out2)
	}
}

func TestEncodeRejectsNameless(t *testing.T) {
	var e Encoder
	_, err := e.Encode(nil, []collect.Series{{Labels: labels.FromStrings("job", "x"), Samples: []collect.Sample{{T: 1, V: 1}}}})
	if err == nil {
		t.Fatal("series without __name__ accepted")
	}
}

func TestDecodeErrors(t *testing.T) {
	if _, err := Decode([]byte("not snappy")); err == nil {
		t.Fatal("garbage accepted")
	}
}

func FuzzDecode(f *testing.F) {
	var e Encoder
	body, _ := e.Encode(nil, testSeries())
	f.Add(body)
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ss, err := Decode(b)
		if err != nil {
			return
		}
		var e Encoder
		if _, err := e.Encode(nil, ss); err != nil && len(ss) > 0 {
			// Decoded series without a name cannot be re-encoded; that is
			// the only accepted failure.
			for _, s := range ss {
				if s.Labels.Get("__name__") == "" {
					return
				}
			}
			t.Fatalf("re-encode: %v", err)
		}
	})
}
