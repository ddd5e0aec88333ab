package forward_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/internal/rwtest"
)

// BenchmarkCommit is an ingest commit of 100 samples into the TSDB with no
// forwarding, forwarding to a receiver that is up, and forwarding to one
// that answers 503 throughout (its queue full, the watcher waiting): the
// commit's cost must not depend on the receiver.
func BenchmarkCommit(b *testing.B) {
	for _, mode := range []string{"no_forwarding", "receiver_up", "receiver_down"} {
		b.Run(mode, func(b *testing.B) {
			// No drain and a short flush at the end: only the commits are measured.
			db, f, _ := setupWith(b, 100*time.Millisecond, -1)
			if mode != "no_forwarding" {
				rec := rwtest.New("")
				rec.Down.Store(mode == "receiver_down")
				srv := httptest.NewServer(rec)
				defer srv.Close()
				c := loadConfig(b, fmt.Sprintf("remote_write:\n  - url: %s\n    queue_config: {capacity: 1000, max_shards: 1, min_backoff: 10ms, max_backoff: 100ms}\n", srv.URL))
				if err := f.ApplyConfig(c); err != nil {
					b.Fatal(err)
				}
			}
			series := make([]labels.Labels, 100)
			for i := range series {
				series[i] = labels.FromStrings("__name__", "bench_series", "i", strconv.Itoa(i))
			}
			refs := make([]storage.SeriesRef, len(series))
			t0 := time.Now().Add(time.Second).UnixMilli()
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				app := db.AppenderV2(context.Background())
				for i, ls := range series {
					ref, err := app.Append(refs[i], ls, 0, t0+int64(n), float64(n), nil, nil, storage.AOptions{})
					if err != nil {
						b.Fatal(err)
					}
					refs[i] = ref
				}
				if err := app.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
