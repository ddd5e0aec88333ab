package rwtest

import (
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// FuzzDecode: any body, under either content type, decodes or fails
// cleanly, and a decoded 1.0 request keeps one entry per sample key.
func FuzzDecode(f *testing.F) {
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "a"}, {Name: "i", Value: "1"}},
		Samples: []prompb.Sample{{Timestamp: 1, Value: 2}, {Timestamp: 3, Value: 4}},
	}}}
	raw, err := req.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snappy.Encode(nil, raw), false)
	f.Add(snappy.Encode(nil, raw), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, body []byte, v2 bool) {
		ct := "application/x-protobuf"
		if v2 {
			ct += ";proto=io.prometheus.write.v2.Request"
		}
		d, err := decode(ct, body)
		if err != nil {
			return
		}
		for _, k := range d.order {
			if _, ok := d.samples[k]; !ok {
				t.Fatalf("sample %v in order but not in samples", k)
			}
		}
	})
}
