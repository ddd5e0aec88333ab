package history

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tailroot/tailroot/tsdb/records"
)

var sinkBatch *records.ColumnBatch

// BenchmarkEncodeFile measures the Parquet encoding of one hour file of
// 10,000 records (the exporter's work per file, without the write).
func BenchmarkEncodeFile(b *testing.B) {
	rng := rand.New(rand.NewPCG(31, 32))
	recs := genRecords(rng, 10000, t0, time.Hour)
	meta := fileMeta{Node: "n", Segment: "x", PartStart: t0, PartDur: 7_200_000}
	b.ReportAllocs()
	var size int
	for b.Loop() {
		data, err := encodeFile(recs, meta)
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.ReportMetric(float64(len(recs)*b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(size)/float64(len(recs)), "bytes/record")
}

// BenchmarkHistorySelectColumns measures SelectColumns of the stage and
// TTFT columns (what tail_mean reads) over 6 hours that exist only in a
// directory history: 20,000 records in 6 partitions × 2 segments.
func BenchmarkHistorySelectColumns(b *testing.B) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(33, 34))
	var exp *Exporter
	s := openStore(b, b.TempDir(), time.Hour, func(ref records.SegmentRef) bool { return exp == nil || exp.Held(ref) })
	recs := genRecords(rng, 20000, t0, 6*time.Hour)
	for _, half := range [][]records.Record{recs[:10000], recs[10000:]} {
		if err := s.Append(half); err != nil {
			b.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	bkt, _ := NewDirBucket(b.TempDir())
	exp, _ = NewExporter(s, bkt, ExportOptions{Node: "n"})
	if _, err := exp.ExportPending(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.ApplyRetention(time.UnixMilli(t0 + 48*hour)); err != nil {
		b.Fatal(err)
	}
	rd, _ := NewReader(bkt, "n")
	src := NewSource(s, rd, SourceOptions{})
	b.ReportAllocs()
	for b.Loop() {
		bt, err := src.SelectColumns(ctx, t0, t0+6*hour, records.ColumnStages|records.ColumnTTFT)
		if err != nil || bt.Len != len(recs) {
			b.Fatalf("%v, %d rows", err, bt.Len)
		}
		sinkBatch = bt
	}
	b.ReportMetric(float64(len(recs)*b.N)/b.Elapsed().Seconds(), "records/s")
}
