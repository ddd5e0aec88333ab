package wlogcut

import (
	"fmt"
	"os"
	"testing"

	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"
)

// TestCut writes records over three segments with wlog, cuts back to the
// end of the fifth record, and reads back exactly the first five.
func TestCut(t *testing.T) {
	dir := t.TempDir()
	w, err := wlog.NewSize(nil, nil, dir, 3*32<<10, compression.None)
	if err != nil {
		t.Fatal(err)
	}
	var seg, off int
	for i := range 12 {
		rec := fmt.Appendf(make([]byte, 0, 20<<10), "record %d ", i)
		rec = append(rec, make([]byte, 20<<10)...)
		if err := w.Log(rec); err != nil {
			t.Fatal(err)
		}
		if i == 4 {
			if seg, off, err = w.LastSegmentAndOffset(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, last, _ := wlog.Segments(dir); last <= seg {
		t.Fatalf("the records fill segments up to %d, the cut is in %d: nothing later to remove", last, seg)
	}
	if err := Cut(dir, seg, int64(off)); err != nil {
		t.Fatal(err)
	}
	if _, last, _ := wlog.Segments(dir); last != seg {
		t.Fatalf("last segment after the cut is %d, want %d", last, seg)
	}
	if fi, err := os.Stat(wlog.SegmentName(dir, seg)); err != nil || fi.Size() != int64(off) {
		t.Fatalf("segment %d after the cut: %v, %v; want %d bytes", seg, fi, err, off)
	}
	sr, err := wlog.NewSegmentsReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	r := wlog.NewReader(sr)
	n := 0
	for r.Next() {
		if want := fmt.Sprintf("record %d ", n); string(r.Record()[:len(want)]) != want {
			t.Fatalf("record %d reads %q", n, r.Record()[:len(want)])
		}
		n++
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("read %d records after the cut, want 5", n)
	}
	// A missing directory has nothing to cut.
	if err := Cut(dir+"/missing", 0, 0); err != nil {
		t.Fatal(err)
	}
}
