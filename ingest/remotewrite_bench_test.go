package ingest

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage/remote"
)

// benchSeries is a realistic scrape: 2000 series of 10 vLLM-like families,
// 8 labels each.
func benchSeries(ms int64) []prompb.TimeSeries {
	out := make([]prompb.TimeSeries, 0, 2000)
	for f := range 10 {
		for s := range 200 {
			out = append(out, prompb.TimeSeries{
				Labels: []prompb.Label{
					{Name: "__name__", Value: fmt.Sprintf("vllm:family_%d_bucket", f)},
					{Name: "engine", Value: "0"},
					{Name: "instance", Value: fmt.Sprintf("10.0.%d.%d:8000", s/50, s%50)},
					{Name: "job", Value: "vllm"},
					{Name: "le", Value: fmt.Sprintf("%d", s%20)},
					{Name: "model_name", Value: "meta-llama/Llama-3.1-8B-Instruct"},
					{Name: "namespace", Value: "inference"},
					{Name: "pod", Value: fmt.Sprintf("vllm-%d", s/20)},
				},
				Samples: []prompb.Sample{{Timestamp: ms, Value: float64(ms % 1000)}},
			})
		}
	}
	return out
}

// BenchmarkRemoteWrite compares tailroot's handler with Prometheus' own
// remote.NewWriteHandler, each over a fresh tsdb.DB with the same options,
// on identical bodies: one 2000-series scrape per request, same series every
// request with a new timestamp (the steady state of a fleet of senders).
// Compare with: go test -run '^$' -bench RemoteWrite -count 6 ./ingest | go tool benchstat -col /impl -
func BenchmarkRemoteWrite(b *testing.B) {
	for _, version := range []string{"v1", "v2"} {
		for _, impl := range []string{"tailroot", "upstream"} {
			b.Run(fmt.Sprintf("proto=%s/impl=%s", version, impl), func(b *testing.B) {
				db := openDB(b)
				var h http.Handler
				ct := ctV1
				msgs := remoteapi.MessageTypes{remoteapi.WriteV1MessageType, remoteapi.WriteV2MessageType}
				if version == "v2" {
					ct = ctV2
				}
				if impl == "tailroot" {
					h = NewRemoteWrite(db, db.Metadata, DefaultOptions(), nil, prometheus.NewRegistry())
				} else {
					h = remote.NewWriteHandler(slog.New(slog.DiscardHandler), prometheus.NewRegistry(), db, msgs, false, false)
				}
				// Timestamps advance 100 ms a request from two hours ago, so
				// any b.N stays in the past and in order.
				start := time.Now().Add(-2 * time.Hour).UnixMilli()
				body := func(i int) []byte {
					ts := benchSeries(start + int64(i)*100)
					var raw []byte
					var err error
					if version == "v1" {
						raw, err = (&prompb.WriteRequest{Timeseries: ts}).Marshal()
					} else {
						raw, err = toV2(ts).Marshal()
					}
					if err != nil {
						b.Fatal(err)
					}
					return snappy.Encode(nil, raw)
				}
				// Create the series first: the benchmark measures the steady state.
				if rec := postBench(h, ct, body(0)); rec.Code/100 != 2 {
					b.Fatalf("warm-up: %d %s", rec.Code, rec.Body)
				}
				bodies := make([][]byte, 64)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if i%len(bodies) == 0 {
						b.StopTimer()
						for k := range bodies {
							bodies[k] = body(i + k + 1)
						}
						b.StartTimer()
					}
					rec := postBench(h, ct, bodies[i%len(bodies)])
					if rec.Code/100 != 2 {
						b.Fatalf("%d %s", rec.Code, rec.Body)
					}
				}
				b.ReportMetric(float64(2000*b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

func postBench(h http.Handler, ct string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Content-Encoding", "snappy")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
