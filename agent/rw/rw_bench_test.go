package rw

import (
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/agent/collect"
)

var sinkBody []byte

// BenchmarkEncode encodes a 1000-series batch of 10 samples each, about
// one second of 100 ms GPU samples on an 8-GPU node plus kernel series.
func BenchmarkEncode(b *testing.B) {
	ss := make([]collect.Series, 1000)
	for i := range ss {
		ss[i].Labels = labels.FromStrings("__name__", "DCGM_FI_DEV_GPU_UTIL", "gpu", strconv.Itoa(i%8), "i", strconv.Itoa(i))
		for j := range 10 {
			ss[i].Samples = append(ss[i].Samples, collect.Sample{T: int64(j * 100), V: float64(j)})
		}
	}
	var e Encoder
	b.ReportAllocs()
	for b.Loop() {
		var err error
		sinkBody, err = e.Encode(sinkBody, ss)
		if err != nil {
			b.Fatal(err)
		}
	}
}
