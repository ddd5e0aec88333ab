package tsdb

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// TestFullHeadChunksLeaveTheHeap writes two hours of 15 s samples for 40
// series in one commit, as a remote-write backlog does, and checks that
// the full head chunks are written to the head chunk files within the
// loop's interval (the Prometheus DB alone waits a minute), with every
// sample still readable; with the loop off, none is written in that time.
func TestFullHeadChunksLeaveTheHeap(t *testing.T) {
	const nSeries, nSamples = 40, 480
	for _, tc := range []struct {
		name     string
		interval time.Duration
		want     bool
	}{
		{"loop", 20 * time.Millisecond, true},
		{"off", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Dir = t.TempDir()
			o.NoLockfile = true
			o.HeadMMapInterval = tc.interval
			reg := prometheus.NewRegistry()
			db, err := Open(o, nil, reg)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()

			start := time.Now().Add(-2 * time.Hour).UnixMilli()
			app := db.AppenderV2(context.Background())
			for i := range nSeries {
				ls := labels.FromStrings("__name__", "x_total", "i", strconv.Itoa(i))
				for j := range nSamples {
					if _, err := app.Append(0, ls, 0, start+int64(j)*15_000, float64(j), nil, nil, storage.AOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}

			mmapped := func() float64 {
				mfs, err := reg.Gather()
				if err != nil {
					t.Fatal(err)
				}
				for _, mf := range mfs {
					if mf.GetName() == "prometheus_tsdb_mmap_chunks_total" {
						return mf.GetMetric()[0].GetCounter().GetValue()
					}
				}
				t.Fatal("prometheus_tsdb_mmap_chunks_total is not registered")
				return 0
			}
			// 480 samples are four chunks of 120: three full ones per series.
			const full = 3 * nSeries
			deadline := time.Now().Add(2 * time.Second)
			if !tc.want {
				deadline = time.Now().Add(300 * time.Millisecond)
			}
			for mmapped() < full && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			got := mmapped()
			if tc.want && got < full {
				t.Fatalf("%v chunks written to the head chunk files, want at least %d", got, full)
			}
			if !tc.want && got != 0 {
				t.Fatalf("%v chunks written with the loop off, want none before the DB's own minute", got)
			}

			q, err := db.Querier(start, start+nSamples*15_000)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "x_total"))
			var series int
			var it chunkenc.Iterator
			for ss.Next() {
				series++
				it = ss.At().Iterator(it)
				var n int
				for it.Next() != chunkenc.ValNone {
					if _, v := it.At(); v != float64(n) {
						t.Fatalf("series %s sample %d is %v", ss.At().Labels(), n, v)
					}
					n++
				}
				if n != nSamples {
					t.Fatalf("series %s: %d samples, want %d", ss.At().Labels(), n, nSamples)
				}
			}
			if err := ss.Err(); err != nil || series != nSeries {
				t.Fatalf("%d series (%v), want %d", series, err, nSeries)
			}
		})
	}
}
