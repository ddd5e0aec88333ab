package queue

import (
	"context"
	"testing"
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
