package tsdb

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"
)

// BenchmarkCommitParallel measures commits of 100 float samples (one per
// series) from parallel writers: through DB, which serialises commits and
// records the WAL's end after each, and straight into the Prometheus DB,
// the reference without that guard.
func BenchmarkCommitParallel(b *testing.B) {
	series := make([]labels.Labels, 100)
	for i := range series {
		series[i] = labels.FromStrings("__name__", "bench", "i", fmt.Sprint(i))
	}
	run := func(b *testing.B, app storage.AppendableV2) {
		var writer atomic.Int64
		t0 := time.Now().UnixMilli()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			w := fmt.Sprint(writer.Add(1))
			ls := make([]labels.Labels, len(series))
			for i := range series {
				ls[i] = labels.NewBuilder(series[i]).Set("w", w).Labels()
			}
			refs := make([]storage.SeriesRef, len(ls))
			for ts := t0; pb.Next(); ts++ {
				a := app.AppenderV2(context.Background())
				for i := range ls {
					ref, err := a.Append(refs[i], ls[i], 0, ts, float64(ts), nil, nil, storage.AOptions{})
					if err != nil {
						b.Fatal(err)
					}
					refs[i] = ref
				}
				if err := a.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.ReportMetric(float64(b.N*len(series))/b.Elapsed().Seconds(), "samples/s")
	}
	b.Run("guarded", func(b *testing.B) {
		opts := DefaultOptions()
		opts.Dir = b.TempDir()
		db, err := Open(opts, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		run(b, db)
	})
	b.Run("prometheus", func(b *testing.B) {
		po := ptsdb.DefaultOptions()
		po.OutOfOrderTimeWindow = DefaultOptions().OutOfOrderWindow.Milliseconds()
		db, err := ptsdb.Open(b.TempDir(), nil, nil, po, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		run(b, db)
	})
}
