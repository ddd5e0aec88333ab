package records

import (
	"context"
	"encoding/hex"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// Benchmarks of the append path on realistic records (7 stages, 3–5 labels,
// 200 inter-token gaps summarised), 100 records per Append, against the
// naive alternative: one series per request per field in an embedded
// Prometheus TSDB. Each reports records/s and bytes per record on disk,
// twice: as written (WAL) and after sealing (segments here, a compacted
// block for Prometheus).
//
// Durability differs: here Append returns after fsync; Prometheus' WAL
// syncs only when a 128 MiB WAL segment is cut, so its records/s is an
// upper bound of what it would do with the same guarantee.

const benchBatch = 100

var benchCache []Record

// benchRecords returns n distinct records 5 ms apart (200 requests/s)
// starting at t0. Every record has its own draws: repeating records would
// let zstd find them and flatter the bytes per record.
func benchRecords(n int) []Record {
	if len(benchCache) < n {
		rng := rand.New(rand.NewPCG(71, uint64(len(benchCache))))
		for i := len(benchCache); i < n; i++ {
			benchCache = append(benchCache, randRecord(rng, t0+int64(i)*5, 200))
		}
	}
	return benchCache[:n]
}

func dirBytes(b *testing.B, dir string, skip func(rel string) bool) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if skip != nil && skip(rel) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func BenchmarkAppend(b *testing.B) {
	b.Run("records/group-commit", func(b *testing.B) { benchRecordsStore(b, false, 1) })
	b.Run("records/sync-every-write", func(b *testing.B) { benchRecordsStore(b, true, 1) })
	b.Run("records/group-commit-8-writers", func(b *testing.B) { benchRecordsStore(b, false, 8) })
	b.Run("prometheus-tsdb/series-per-field", benchPrometheus)
}

// benchRecordsStore appends b.N records in batches from the given number of
// goroutines, then seals them (timed separately as seal-ns/record).
func benchRecordsStore(b *testing.B, syncEvery bool, writers int) {
	recs := benchRecords(b.N)
	o := DefaultOptions()
	o.Dir = b.TempDir()
	o.SyncEveryWrite = syncEvery
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				lo := int(next.Add(benchBatch)) - benchBatch
				if lo >= len(recs) {
					return
				}
				if err := s.Append(recs[lo:min(lo+benchBatch, len(recs))]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	walBytes := float64(s.Stats().BytesOnDisk)
	sealStart := time.Now()
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
	seal := time.Since(sealStart)
	st := s.Stats()
	if st.Records != int64(b.N) {
		b.Fatalf("stored %d records, appended %d", st.Records, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(walBytes/float64(b.N), "wal-B/record")
	b.ReportMetric(float64(st.BytesOnDisk)/float64(b.N), "sealed-B/record")
	b.ReportMetric(float64(seal.Nanoseconds())/float64(b.N), "seal-ns/record")
}

// naiveFields are the per-request values stored as one series each.
var naiveFields = func() []string {
	f := []string{}
	for st := range Stage(NumStages) {
		f = append(f, "stage_"+st.String())
	}
	return append(f, "e2e", "ttft", "prompt_tokens", "output_tokens", "prompt_entropy",
		"itl_count", "itl_sum", "itl_min", "itl_max", "itl_p50", "itl_p90", "itl_p99")
}()

func naiveValues(r *Record, dst []float64) []float64 {
	dst = append(dst[:0], r.Stages[:]...)
	it := &r.ITL
	return append(dst, r.E2E, r.TTFT, float64(r.PromptTokens), float64(r.OutputTokens), r.PromptEntropy,
		float64(it.Count), it.Sum, it.Min, it.Max, it.P50, it.P90, it.P99)
}

func benchPrometheus(b *testing.B) {
	recs := benchRecords(b.N)
	dir := b.TempDir()
	db, err := tsdb.Open(dir, nil, nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var vals []float64
	lb := labels.NewBuilder(labels.EmptyLabels())
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for lo := 0; lo < len(recs); lo += benchBatch {
		app := db.AppenderV2(ctx)
		for i := lo; i < min(lo+benchBatch, len(recs)); i++ {
			r := &recs[i]
			vals = naiveValues(r, vals)
			lb.Reset(r.Labels)
			lb.Set("request_id", r.RequestID)
			if !r.TraceID.IsZero() {
				lb.Set("trace_id", hex.EncodeToString(r.TraceID[:]))
			}
			for f, name := range naiveFields {
				lb.Set(model.MetricNameLabel, "tailroot_request_"+name)
				if _, err := app.Append(0, lb.Labels(), 0, r.Time, vals[f], nil, nil, storage.AppendV2Options{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	walBytes := dirBytes(b, filepath.Join(dir, "wal"), nil)
	head := db.Head()
	sealStart := time.Now()
	if err := db.CompactHead(tsdb.NewRangeHead(head, head.MinTime(), head.MaxTime())); err != nil {
		b.Fatal(err)
	}
	seal := time.Since(sealStart)
	// Blocks only: skip the WAL, the head chunks and top-level files.
	blockBytes := dirBytes(b, dir, func(rel string) bool {
		return filepath.Dir(rel) == "." || strings.HasPrefix(rel, "wal"+string(filepath.Separator)) ||
			strings.HasPrefix(rel, "chunks_head"+string(filepath.Separator))
	})
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(walBytes)/float64(b.N), "wal-B/record")
	b.ReportMetric(float64(blockBytes)/float64(b.N), "sealed-B/record")
	b.ReportMetric(float64(seal.Nanoseconds())/float64(b.N), "seal-ns/record")
}

// BenchmarkSelect streams 50,000 sealed records (one partition) back, all of
// them and one model's third, and reports records/s read.
func BenchmarkSelect(b *testing.B) {
	const n = 50000
	o := DefaultOptions()
	o.Dir = b.TempDir()
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := benchRecords(n)
	for lo := 0; lo < n; lo += 5000 {
		if err := s.Append(recs[lo : lo+5000]); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ms   []*labels.Matcher
	}{
		{"all", nil},
		{"one-model", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "model", testModels[0])}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			read := 0
			for b.Loop() {
				it := s.Select(context.Background(), 0, 1<<62, c.ms...)
				for it.Next() {
					read++
				}
				if err := it.Err(); err != nil {
					b.Fatal(err)
				}
				it.Close()
			}
			b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
