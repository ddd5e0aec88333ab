package api

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/klauspost/compress/gzip"

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
		resp := dashboardAnswer(series, steps, 0)
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

// dashboardAnswer is a range query's answer of series × steps points,
// each value with full-precision decimals, as quantiles and rates have;
// jitter > 0 adds noise of that relative size (real rates vary from step
// to step, which is what makes an answer compress less).
func dashboardAnswer(series, steps int, jitter float64) *v1.Response {
	rng := rand.New(rand.NewPCG(1, 2))
	m := make(promql.Matrix, series)
	for i := range m {
		m[i].Metric = labels.FromStrings("model", fmt.Sprintf("llama-3.1-%db-instruct", i), "stage", "decode")
		m[i].Floats = make([]promql.FPoint, steps)
		for j := range m[i].Floats {
			f := 9.178602519290378 + float64(i*j)/7
			m[i].Floats[j] = promql.FPoint{T: 1796136375000 + int64(j)*15000, F: f * (1 + jitter*rng.NormFloat64())}
		}
	}
	return &v1.Response{Status: "success", Data: &v1.QueryData{ResultType: parser.ValueTypeMatrix, Result: m}}
}

// BenchmarkResponseGzip is what the root handler's gzip costs on the
// dashboards' answers, at the level the server uses (1) and at the
// library's default (5): the CPU per answer, and the compressed size as a
// share of the JSON (ratio).
func BenchmarkResponseGzip(b *testing.B) {
	for _, series := range []int{5, 1000} {
		body, err := v1.JSONCodec{}.Encode(dashboardAnswer(series, 241, 0.05))
		if err != nil {
			b.Fatal(err)
		}
		answer := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		})
		for _, level := range []int{responseGzipLevel, gzip.DefaultCompression} {
			h := gzipWrapper(level)(answer)
			b.Run(fmt.Sprintf("series=%d/level=%d", series, level), func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, "/api/v1/query_range", nil)
				req.Header.Set("Accept-Encoding", "gzip")
				b.ReportAllocs()
				var n int
				for b.Loop() {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Header().Get("Content-Encoding") != "gzip" {
						b.Fatalf("not compressed: %v", rec.Header())
					}
					n = rec.Body.Len()
				}
				b.ReportMetric(float64(n)/float64(len(body)), "ratio")
			})
		}
	}
}
