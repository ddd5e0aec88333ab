package remote

import (
	"testing"

	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"google.golang.org/protobuf/proto"

	"github.com/tailroot/tailroot/query/remote/storepb"
)

// FuzzSeriesFromPB feeds arbitrary bytes, as a StoreAPI endpoint could
// send them, through the protobuf decoder and seriesFromPB, and iterates
// what it accepts: no input may panic, and an accepted series' samples
// must come out in time order.
func FuzzSeriesFromPB(f *testing.F) {
	seed := func(s *storepb.Series) {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	c := chunkenc.NewXORChunk()
	app, _ := c.Appender()
	app.Append(0, 1000, 1)
	app.Append(0, 2000, 2.5)
	seed(&storepb.Series{
		Labels: []*storepb.Label{{Name: "__name__", Value: "x"}},
		Chunks: []*storepb.AggrChunk{{MinTime: 1000, MaxTime: 2000, Raw: &storepb.Chunk{Type: storepb.Chunk_XOR, Data: c.Bytes()}}},
	})
	hc := chunkenc.NewHistogramChunk()
	seed(&storepb.Series{
		Labels: []*storepb.Label{{Name: "__name__", Value: "h"}},
		Chunks: []*storepb.AggrChunk{{Raw: &storepb.Chunk{Type: storepb.Chunk_HISTOGRAM, Data: hc.Bytes()}}},
	})
	seed(&storepb.Series{
		Labels: []*storepb.Label{{Name: "__name__", Value: "d"}},
		Chunks: []*storepb.AggrChunk{{
			MinTime: 1000, MaxTime: 2000,
			Count:   &storepb.Chunk{Type: storepb.Chunk_XOR, Data: c.Bytes()},
			Sum:     &storepb.Chunk{Type: storepb.Chunk_XOR, Data: c.Bytes()},
			Min:     &storepb.Chunk{Type: storepb.Chunk_XOR, Data: c.Bytes()},
			Counter: &storepb.Chunk{Type: storepb.Chunk_XOR, Data: c.Bytes()},
		}},
	})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var ps storepb.Series
		if err := proto.Unmarshal(b, &ps); err != nil {
			return
		}
		// The length picks how aggregate chunks are read.
		s, err := seriesFromPB(&ps, aggrsForFunc([]string{"", "rate", "min_over_time"}[len(b)%3]))
		if err != nil {
			return
		}
		it := s.Iterator(nil)
		last := int64(-1 << 63)
		for n := 0; n < 1<<16; n++ {
			vt := it.Next()
			if vt == chunkenc.ValNone {
				break
			}
			ts := it.AtT()
			if ts < last {
				t.Fatalf("samples out of order: %d after %d", ts, last)
			}
			last = ts
		}
	})
}
