package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// decoded is a request body turned back into Series.
type decoded struct {
	series []Series
	// v1 only: family metadata, keyed by family name.
	families map[string]metadata.Metadata
}

func decodeV1(t testing.TB, body []byte) decoded {
	t.Helper()
	pb, err := snappy.Decode(nil, body)
	if err != nil {
		t.Fatalf("snappy: %v", err)
	}
	var req prompb.WriteRequest
	if err := req.Unmarshal(pb); err != nil {
		t.Fatalf("unmarshal v1: %v", err)
	}
	d := decoded{families: map[string]metadata.Metadata{}}
	var b labels.ScratchBuilder
	for _, ts := range req.Timeseries {
		s := Series{Labels: ts.ToLabels(&b, nil)}
		for _, x := range ts.Samples {
			s.Samples = append(s.Samples, Sample{T: x.Timestamp, V: x.Value})
		}
		for _, h := range ts.Histograms {
			s.Histograms = append(s.Histograms, HistogramSample{T: h.Timestamp, H: h.ToIntHistogram()})
		}
		d.series = append(d.series, s)
	}
	for _, m := range req.Metadata {
		d.families[m.MetricFamilyName] = metadata.Metadata{
			Type: model.MetricType(map[prompb.MetricMetadata_MetricType]string{
				prompb.MetricMetadata_COUNTER: "counter", prompb.MetricMetadata_GAUGE: "gauge",
				prompb.MetricMetadata_HISTOGRAM: "histogram",
			}[m.Type]),
			Help: m.Help, Unit: m.Unit,
		}
	}
	return d
}

func decodeV2(t testing.TB, body []byte) decoded {
	t.Helper()
	pb, err := snappy.Decode(nil, body)
	if err != nil {
		t.Fatalf("snappy: %v", err)
	}
	var req writev2.Request
	if err := req.Unmarshal(pb); err != nil {
		t.Fatalf("unmarshal v2: %v", err)
	}
	var d decoded
	var b labels.ScratchBuilder
	for _, ts := range req.Timeseries {
		ls, err := ts.ToLabels(&b, req.Symbols)
		if err != nil {
			t.Fatalf("labels: %v", err)
		}
		md, err := ts.ToMetadata(req.Symbols)
		if err != nil {
			t.Fatalf("metadata: %v", err)
		}
		s := Series{Labels: ls, Metadata: md}
		for _, x := range ts.Samples {
			s.Samples = append(s.Samples, Sample{T: x.Timestamp, V: x.Value})
		}
		for _, h := range ts.Histograms {
			s.Histograms = append(s.Histograms, HistogramSample{T: h.Timestamp, H: h.ToIntHistogram()})
		}
		d.series = append(d.series, s)
	}
	return d
}

// sameSeries reports the first difference between want and got, ignoring
// metadata when checkMeta is false.
func sameSeries(want, got []Series, checkMeta bool) error {
	if len(want) != len(got) {
		return fmt.Errorf("%d series, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if !labels.Equal(w.Labels, g.Labels) {
			return fmt.Errorf("series %d: labels %s, want %s", i, g.Labels, w.Labels)
		}
		if checkMeta && w.Metadata != g.Metadata {
			return fmt.Errorf("%s: metadata %+v, want %+v", w.Labels, g.Metadata, w.Metadata)
		}
		if len(w.Samples) != len(g.Samples) || len(w.Histograms) != len(g.Histograms) {
			return fmt.Errorf("%s: %d+%d samples, want %d+%d", w.Labels, len(g.Samples), len(g.Histograms), len(w.Samples), len(w.Histograms))
		}
		for j := range w.Samples {
			// Bit-exact: remote write carries float64 unchanged.
			if w.Samples[j] != g.Samples[j] {
				return fmt.Errorf("%s: sample %d = %v, want %v", w.Labels, j, g.Samples[j], w.Samples[j])
			}
		}
		for j := range w.Histograms {
			if w.Histograms[j].T != g.Histograms[j].T || !w.Histograms[j].H.Equals(g.Histograms[j].H) {
				return fmt.Errorf("%s: histogram %d = %v, want %v", w.Labels, j, g.Histograms[j], w.Histograms[j])
			}
		}
	}
	return nil
}

// threeSteps returns three merged steps of the default fleet with native
// histograms.
func threeSteps(t testing.TB) []Series {
	o := DefaultOptions()
	o.NativeHistograms = true
	s := mustNew(t, o)
	var acc []Series
	for i := range 3 {
		acc = merge(acc, s.Step(t0.Add(14*time.Hour+time.Duration(i)*o.Interval)))
	}
	return acc
}

func TestEncodeRoundTripV2(t *testing.T) {
	series := threeSteps(t)
	body, err := Encode(ProtoMsgV2, series)
	if err != nil {
		t.Fatal(err)
	}
	d := decodeV2(t, body)
	if err := sameSeries(series, d.series, true); err != nil {
		t.Fatal(err)
	}
	// Spot-check metadata against vLLM's declarations.
	for _, s := range d.series {
		switch s.Labels.Get(model.MetricNameLabel) {
		case "vllm:time_to_first_token_seconds_bucket", "vllm:time_to_first_token_seconds":
			if s.Metadata.Type != model.MetricTypeHistogram || s.Metadata.Unit != "seconds" ||
				s.Metadata.Help != "Histogram of time to first token in seconds." {
				t.Fatalf("%s: metadata %+v", s.Labels, s.Metadata)
			}
		case "vllm:generation_tokens_total":
			if s.Metadata.Type != model.MetricTypeCounter || s.Metadata.Unit != "" {
				t.Fatalf("%s: metadata %+v", s.Labels, s.Metadata)
			}
		}
	}
}

func TestEncodeRoundTripV1(t *testing.T) {
	series := threeSteps(t)
	body, err := Encode(ProtoMsgV1, series)
	if err != nil {
		t.Fatal(err)
	}
	d := decodeV1(t, body)
	if err := sameSeries(series, d.series, false); err != nil {
		t.Fatal(err)
	}
	want := map[string]metadata.Metadata{
		"vllm:prompt_tokens":               {Type: model.MetricTypeCounter, Help: "Number of prefill tokens processed."},
		"vllm:num_requests_waiting":        {Type: model.MetricTypeGauge, Help: "Number of requests waiting to be processed."},
		"vllm:e2e_request_latency_seconds": {Type: model.MetricTypeHistogram, Help: "Histogram of e2e request latency in seconds.", Unit: "seconds"},
		"vllm:iteration_tokens_total":      {Type: model.MetricTypeHistogram, Help: "Histogram of number of tokens per engine_step."},
	}
	for fam, md := range want {
		if got := d.families[fam]; got != md {
			t.Errorf("metadata %s = %+v, want %+v", fam, got, md)
		}
	}
	// 3 gauge + 6 counter + 12 histogram families.
	if len(d.families) != 21 {
		t.Errorf("%d metadata entries, want 21: %v", len(d.families), d.families)
	}
}

func TestEncodeUnknownProto(t *testing.T) {
	if _, err := Encode("io.prometheus.write.v3.Request", nil); err == nil {
		t.Fatal("Encode accepted an unknown message")
	}
}

func TestBatches(t *testing.T) {
	series := threeSteps(t)
	total := 0
	for _, s := range series {
		total += len(s.Samples) + len(s.Histograms)
	}
	bs := batches(series, 1000)
	if want := (total + 999) / 1000; len(bs) != want {
		t.Fatalf("%d batches, want %d", len(bs), want)
	}
	// Concatenating the batches gives back every sample, in order.
	var flat []Series
	for i, b := range bs {
		n := 0
		for _, s := range b {
			n += len(s.Samples) + len(s.Histograms)
			if k := len(flat); k > 0 && labels.Equal(flat[k-1].Labels, s.Labels) {
				flat[k-1].Samples = append(flat[k-1].Samples, s.Samples...)
				flat[k-1].Histograms = append(flat[k-1].Histograms, s.Histograms...)
				continue
			}
			flat = append(flat, Series{
				Labels: s.Labels, Metadata: s.Metadata,
				Samples: append([]Sample(nil), s.Samples...), Histograms: append([]HistogramSample(nil), s.Histograms...),
			})
		}
		if n > 1000 || (i < len(bs)-1 && n != 1000) {
			t.Fatalf("batch %d has %d samples", i, n)
		}
	}
	if err := sameSeries(series, flat, true); err != nil {
		t.Fatal(err)
	}
}

// FuzzStepEncode drives the simulator with arbitrary seeds, steps and
// options and checks that what it encodes decodes back unchanged.
func FuzzStepEncode(f *testing.F) {
	f.Add(uint64(1), uint16(15000), uint8(2), uint8(0), false)
	f.Add(uint64(42), uint16(1), uint8(5), uint8(7), true)
	f.Add(uint64(0), uint16(60000), uint8(1), uint8(255), true)
	f.Fuzz(func(t *testing.T, seed uint64, intervalMs uint16, steps, flags uint8, v1 bool) {
		m := DefaultModels()[0]
		m.MeanRPS = float64(flags%16) + 0.5
		m.PromptSigma = float64(flags/16) / 8
		o := Options{
			Models:            []Model{m},
			InstancesPerModel: 1,
			Seed:              seed,
			Interval:          time.Duration(max(intervalMs, 1)) * time.Millisecond,
			NativeHistograms:  flags&1 == 1,
			DeprecatedMetrics: flags&2 == 2,
			Noise:             float64(flags%4) / 4,
		}
		s := mustNew(t, o)
		var acc []Series
		for i := range int(steps%8) + 1 {
			acc = merge(acc, s.Step(t0.Add(time.Duration(i)*o.Interval)))
		}
		proto, decode := ProtoMsgV2, decodeV2
		if v1 {
			proto, decode = ProtoMsgV1, decodeV1
		}
		body, err := Encode(proto, acc)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameSeries(acc, decode(t, body).series, !v1); err != nil {
			t.Fatal(err)
		}
	})
}
