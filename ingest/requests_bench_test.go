package ingest

import (
	"context"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	ptsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/tailroot/tailroot/sim/requests"
)

const benchBatch = 1000

var (
	benchMu    sync.Mutex
	benchItems []Item
	benchSeed  uint64
)

// benchRequests returns at least n distinct simulated requests (the Azure
// conversation trace, replayed with a new seed as often as needed),
// decoded from their NDJSON lines, arriving over the last hours. Distinct
// requests matter: repeated ones would flatter compression.
func benchRequests(b *testing.B, n int) []Item {
	benchMu.Lock()
	defer benchMu.Unlock()
	for len(benchItems) < n {
		reqs, err := requests.Simulate(requests.Options{Trace: "azure-conv", Seed: 5 + benchSeed, Start: time.Now().Add(-3 * time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		benchSeed++
		var line []byte
		for i := range reqs {
			line = reqs[i].AppendNDJSON(line[:0], requests.LineOptions{})
			it, err := DecodeRequestLine(line, RequestLimits{})
			if err != nil {
				b.Fatal(err)
			}
			benchItems = append(benchItems, it)
		}
	}
	return benchItems[:n]
}

func dirSize(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkRecordsIngest stores simulated requests through the pipeline in
// batches of 1000 (journal and record-store fsync each, derived series
// flushed every batch) and reports records/s and the bytes per record the
// store and the derived state take once sealed.
func BenchmarkRecordsIngest(b *testing.B) {
	items := benchRequests(b, b.N*benchBatch)
	db := openTestDB(b)
	dir := b.TempDir()
	p := openTestRecords(b, db, testRecordsOptions(dir))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := range b.N {
		lo := i * benchBatch
		if err := p.Append(ctx, "bench", items[lo:lo+benchBatch]); err != nil {
			b.Fatal(err)
		}
		n += benchBatch
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
	if err := p.Store().Flush(); err != nil {
		b.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(dirSize(b, dir))/float64(n), "disk-bytes/record")
}

// BenchmarkRecordsIngestLive is BenchmarkRecordsIngest with requests
// ending in the last minutes, 100 per second, so each batch of 1000 spans
// ten 1 s slots and every changed series is appended once per slot (with
// its zero or previous-value sample where it needs one), as on a live
// server.
func BenchmarkRecordsIngestLive(b *testing.B) {
	src := benchRequests(b, b.N*benchBatch)
	items := make([]Item, len(src))
	copy(items, src)
	start := time.Now().Add(-10 * time.Minute).UnixMilli()
	for i := range items {
		items[i].Record.Time = start + int64(i)*10 - int64(items[i].Record.E2E*1000)
	}
	db := openTestDB(b)
	p := openTestRecords(b, db, testRecordsOptions(b.TempDir()))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		lo := i * benchBatch
		if err := p.Append(ctx, "bench", items[lo:lo+benchBatch]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkNaiveSeriesPerRequest is the alternative the record store
// replaces: each request becomes eight TSDB series of one sample (its e2e
// and seven stages, labelled with its request id), in batches of 1000 per
// commit. Bytes per record are those of the TSDB block the head compacts
// into, plus the WAL left beside it.
func BenchmarkNaiveSeriesPerRequest(b *testing.B) {
	items := benchRequests(b, b.N*benchBatch)
	db := openTestDB(b)
	ctx := context.Background()
	names := []string{"e2e", "queue", "tokenize", "prefill", "decode", "detokenize", "network", "other"}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	sb := labels.NewScratchBuilder(8)
	for i := range b.N {
		lo := i * benchBatch
		app := db.AppenderV2(ctx)
		for k := lo; k < lo+benchBatch; k++ {
			r := &items[k].Record
			id := r.RequestID
			for j, name := range names {
				v := r.E2E
				if j > 0 {
					v = r.Stages[j-1]
				}
				sb.Reset()
				sb.Add(model.MetricNameLabel, "request_stage_seconds")
				sb.Add("request_id", id)
				sb.Add("stage", name)
				r.Labels.Range(func(l labels.Label) { sb.Add(l.Name, l.Value) })
				sb.Sort()
				if _, err := app.Append(0, sb.Labels(), 0, r.Time, v, nil, nil, storage.AOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
		n += benchBatch
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
	head := db.Head()
	if err := db.CompactHead(ptsdb.NewRangeHead(head, head.MinTime(), head.MaxTime())); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(dirSize(b, db.Dir()))/float64(n), "disk-bytes/record")
}

// BenchmarkDecodeRequestLine measures the NDJSON decoder alone.
func BenchmarkDecodeRequestLine(b *testing.B) {
	reqs, err := requests.Simulate(requests.Options{Trace: "azure-conv", Limit: 100, Seed: 5})
	if err != nil {
		b.Fatal(err)
	}
	line := reqs[7].AppendNDJSON(nil, requests.LineOptions{TokenTimes: true})
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequestLine(line, RequestLimits{}); err != nil {
			b.Fatal(err)
		}
	}
}
