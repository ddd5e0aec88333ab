package queue

import (
	"context"
	"os"
	"testing"

	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"
)

// BenchmarkAppendNextAck measures one record's round trip through the
// queue (append, read, cursor write) for a 64 KiB record, the size of a
// typical one-second batch.
func BenchmarkAppendNextAck(b *testing.B) {
	for _, p := range []FsyncPolicy{FsyncNever, FsyncAlways} {
		b.Run(p.String(), func(b *testing.B) {
			q, err := Open(b.TempDir(), Options{Fsync: p})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			rec := make([]byte, 64<<10)
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				if err := q.Append(rec); err != nil {
					b.Fatal(err)
				}
				r, err := q.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := q.Ack(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWlogRoundTrip is the same round trip on prometheus tsdb/wlog,
// the log the server's record store uses, for the evaluation in doc.go:
// Log a 64 KiB record, fsync the segment (wlog itself syncs only when it
// cuts one), and read it back with a LiveReader tailing the segment. The
// read position would still need a cursor file of its own, as the queue
// has, which this leaves out.
func BenchmarkWlogRoundTrip(b *testing.B) {
	dir := b.TempDir()
	w, err := wlog.NewSize(nil, nil, dir, 16<<20, compression.None)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	rec := make([]byte, 64<<10)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	var (
		seg = -1
		f   *os.File
		r   *wlog.LiveReader
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for b.Loop() {
		if err := w.Log(rec); err != nil {
			b.Fatal(err)
		}
		k, _, err := w.LastSegmentAndOffset()
		if err != nil {
			b.Fatal(err)
		}
		if k != seg {
			if f != nil {
				f.Close()
			}
			if f, err = os.Open(wlog.SegmentName(dir, k)); err != nil {
				b.Fatal(err)
			}
			seg, r = k, wlog.NewLiveReader(nil, nil, f)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if !r.Next() || len(r.Record()) != len(rec) {
			b.Fatalf("read back: %v", r.Err())
		}
	}
}
