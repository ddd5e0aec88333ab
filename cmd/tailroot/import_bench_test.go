package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"
)

// BenchmarkImport measures tailroot import end to end against the real
// push handler and records pipeline (DeriveInterval 5 s, as serve runs):
// validating, listing stored ids, sorting and pushing batches of 5,000.
// One op imports 20,000 new records; records/s is what docs/benchmarks.md
// reports next to the 1 M-record run of the binary.
func BenchmarkImport(b *testing.B) {
	srv, _, _ := importServer(b)
	const n = 20000
	t0 := time.Now().Add(-20 * time.Minute).UnixMilli()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		im := &importer{server: srv.URL, batch: 5000, dedup: true, client: srv.Client(), out: io.Discard, bar: newProgressBar(io.Discard, false)}
		for k := range n {
			a := t0 + int64(i*n+k)/20
			js := fmt.Appendf(nil, `{"request_id":"b%d-%d","labels":{"model_name":"m%d"},"arrival":%d.%03d,"first_token":%d.%03d,"last_token":%d.%03d,"output_tokens":64}`,
				i, k, k%3, a/1000, a%1000, (a+120)/1000, (a+120)%1000, (a+900+int64(k%700))/1000, (a+900+int64(k%700))%1000)
			im.emitLine(fmt.Sprintf("bench:%d", k), js)
		}
		sum, err := im.run(context.Background())
		if err != nil || sum.Accepted != n {
			b.Fatalf("%+v %v", sum, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}
