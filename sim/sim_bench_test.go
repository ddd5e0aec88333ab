package sim

import (
	"testing"
	"time"
)

// BenchmarkStepEncode measures one step of the default fleet (6 instances,
// ~1670 series) plus its remote-write encoding, as Run does every Interval.
func BenchmarkStepEncode(b *testing.B) {
	for _, c := range []struct {
		name   string
		proto  string
		native bool
	}{
		{"rw2", ProtoMsgV2, false},
		{"rw2-native", ProtoMsgV2, true},
		{"rw1", ProtoMsgV1, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := DefaultOptions()
			o.NativeHistograms = c.native
			s := mustNew(b, o)
			var enc encoder
			var bytes int
			ts := t0.Add(14 * time.Hour)
			b.ReportAllocs()
			for b.Loop() {
				ts = ts.Add(o.Interval)
				body, err := enc.encode(c.proto, s.Step(ts))
				if err != nil {
					b.Fatal(err)
				}
				bytes = len(body)
			}
			b.ReportMetric(float64(s.NumSeries())*float64(b.N)/b.Elapsed().Seconds(), "series/s")
			b.ReportMetric(float64(bytes), "body-bytes")
		})
	}
}

// BenchmarkStep isolates the simulation (peak-hour traffic, ~660 requests a
// step) from the encoding.
func BenchmarkStep(b *testing.B) {
	o := DefaultOptions()
	s := mustNew(b, o)
	ts := t0.Add(14 * time.Hour)
	var sink []Series
	b.ReportAllocs()
	for b.Loop() {
		ts = ts.Add(o.Interval)
		sink = s.Step(ts)
	}
	b.ReportMetric(float64(s.NumSeries())*float64(b.N)/b.Elapsed().Seconds(), "series/s")
	_ = sink
}
