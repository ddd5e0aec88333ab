package api

import (
	"fmt"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	v1 "github.com/prometheus/prometheus/web/api/v1"
)

// BenchmarkEncodeMatrix measures what the API's JSON encoding of a range
// query's answer costs next to evaluating it: the upstream codec (jsoniter
// with Prometheus' own appending encoders for series and points), on the
// shapes of the end-to-end dashboard queries (a handful of series × 241
// steps) and on a wide panel (1,000 series). ns per point is what to set
// against an evaluation's CPU time per query.
func BenchmarkEncodeMatrix(b *testing.B) {
	for _, series := range []int{4, 1000} {
		const steps = 241
		m := make(promql.Matrix, series)
		for i := range m {
			m[i].Metric = labels.FromStrings("model", fmt.Sprintf("llama-3.1-%db-instruct", i), "stage", "decode")
			m[i].Floats = make([]promql.FPoint, steps)
			for j := range m[i].Floats {
				// Values with full-precision decimals, as quantiles have.
				m[i].Floats[j] = promql.FPoint{T: 1796136375000 + int64(j)*15000, F: 9.178602519290378 + float64(i*j)/7}
			}
		}
		resp := &v1.Response{Status: "success", Data: &v1.QueryData{ResultType: parser.ValueTypeMatrix, Result: m}}
		b.Run(fmt.Sprintf("series=%d", series), func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				out, err := v1.JSONCodec{}.Encode(resp)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(series*steps), "ns/point")
			b.ReportMetric(float64(n), "bytes")
		})
	}
}
