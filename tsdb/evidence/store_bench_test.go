package evidence

import (
	"encoding/json"
	"testing"
	"time"
)

var sinkResult Result

// BenchmarkAppend stores one agent interval's worth of stacks (32 items of
// 3 frames) per operation, fsync included.
func BenchmarkAppend(b *testing.B) {
	now := t0.Add(time.Hour)
	s := openStore(b, b.TempDir(), &now, 0)
	defer s.Close()
	items := make([]Item, 32)
	for i := range items {
		items[i] = stackItem("n", uint32(i+1), "python3", t0.Add(time.Duration(i)*time.Millisecond), 0.01)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Append(items); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelectSlowest asks for a report's 20 slowest stacks of a 5-minute
// window among 100 000 stored over an hour.
func BenchmarkSelectSlowest(b *testing.B) {
	now := t0.Add(time.Hour)
	s := openStore(b, b.TempDir(), &now, 0)
	defer s.Close()
	items := make([]Item, 1000)
	for batch := range 100 {
		for i := range items {
			at := t0.Add(time.Duration(batch*1000+i) * 36 * time.Millisecond)
			items[i] = stackItem("n", uint32(i+1), "python3", at, float64(i%97)/1000)
		}
		if err := s.Append(items); err != nil {
			b.Fatal(err)
		}
	}
	q := Query{Start: t0.Add(30 * time.Minute), End: t0.Add(35 * time.Minute), Kind: KindStack, Slowest: true, Limit: 20}
	b.ReportAllocs()
	for b.Loop() {
		r, err := s.Select(q)
		if err != nil || len(r.Items) != 20 {
			b.Fatal(err, len(r.Items))
		}
		sinkResult = r
	}
}

// BenchmarkParseBatch decodes and checks a batch of 32 stacks.
func BenchmarkParseBatch(b *testing.B) {
	items := make([]Item, 32)
	for i := range items {
		items[i] = stackItem("n", uint32(i+1), "python3", t0, 0.01)
	}
	body, _ := json.Marshal(map[string]any{"node": "n", "evidence": items})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		good, _, err := ParseBatch(body, Limits{})
		if err != nil || len(good) != 32 {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadBack reads back every item of a 1-minute window (about
// 1 700 of 100 000 stored over an hour): the cost of finding each item in
// its file and checking its checksum.
func BenchmarkReadBack(b *testing.B) {
	now := t0.Add(time.Hour)
	s := openStore(b, b.TempDir(), &now, 0)
	defer s.Close()
	items := make([]Item, 1000)
	for batch := range 100 {
		for i := range items {
			at := t0.Add(time.Duration(batch*1000+i) * 36 * time.Millisecond)
			items[i] = stackItem("n", uint32(i+1), "python3", at, float64(i%97)/1000)
		}
		if err := s.Append(items); err != nil {
			b.Fatal(err)
		}
	}
	q := Query{Start: t0.Add(30 * time.Minute), End: t0.Add(31 * time.Minute)}
	b.ReportAllocs()
	for b.Loop() {
		r, err := s.Select(q)
		if err != nil || len(r.Items) < 1600 {
			b.Fatal(err, len(r.Items))
		}
		sinkResult = r
	}
}
