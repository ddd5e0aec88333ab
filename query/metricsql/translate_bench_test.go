package metricsql

import "testing"

var benchSink string

// BenchmarkTranslate measures the cost Translate adds in front of the
// engine, verification parse included.
func BenchmarkTranslate(b *testing.B) {
	queries := map[string]string{
		"rate_no_window": `sum(rate(http_requests_total{job="api"})) by (instance)`,
		"with_templates": `WITH (r(m) = rate(m[5m]), e = r(errors_total{code=~"5.."})) e / on(job) group_left r(requests_total)`,
		"or_filters":     `histogram_quantile(0.99, sum(rate(latency_bucket{model="a" or stage="prefill"}[1m])) by (le))`,
		"zscore":         `zscore(vllm:time_to_first_token_seconds_sum) by (model)`,
	}
	opts := Options{EnableExperimentalFunctions: true}
	for name, q := range queries {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, err := Translate(q, opts)
				if err != nil {
					b.Fatal(err)
				}
				benchSink = s
			}
		})
	}
}
