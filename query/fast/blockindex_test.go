package fast

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/index"
)

// TestSeriesIndex checks the cached-symbol series reader against the
// block's index reader on every series of a block with more symbols than
// the cache has slots (so that slots are shared and replaced).
func TestSeriesIndex(t *testing.T) {
	b, ir := seriesIndexBlock(t, 3000)
	si, err := openSeriesIndex(b.Dir())
	if err != nil || si == nil {
		t.Fatalf("open: %v, %v", si, err)
	}
	defer si.close()
	if n := compareSeriesIndex(t, ir, si); n != 3000 {
		t.Fatalf("%d series, want 3000", n)
	}
	var (
		bl labels.ScratchBuilder
		cs []chunks.Meta
	)
	if err := si.series(storage.SeriesRef(len(si.bs)), &bl, &cs); err == nil {
		t.Fatal("a reference past the index: no error")
	}
}

// seriesIndexBlock is the block of seriesIndexDB(t, n) and its index
// reader, closed when the test ends.
func seriesIndexBlock(t *testing.T, n int) (*tsdb.Block, tsdb.IndexReader) {
	t.Helper()
	b := seriesIndexDB(t, n).Blocks()[0]
	ir, err := b.Index()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ir.Close() })
	return b, ir
}

// seriesIndexDB is a TSDB with one block of n series.
func seriesIndexDB(t testing.TB, n int) *tsdb.DB {
	t.Helper()
	db, err := tsdb.Open(t.TempDir(), nil, nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	app := db.Appender(context.Background())
	for i := 0; i < n; i++ {
		ls := labels.FromStrings("__name__", fmt.Sprintf("m%d", i%7), "instance", fmt.Sprintf("10.0.%d.%d:9000", i/256, i%256),
			"le", fmt.Sprint(i%13), "stage", []string{"prefill", "decode", "queue"}[i%3])
		for ts := int64(0); ts < 3; ts++ {
			if _, err := app.Append(0, ls, ts*15_000, float64(i+int(ts))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.CompactHead(tsdb.NewRangeHead(db.Head(), 0, 60_000)); err != nil {
		t.Fatal(err)
	}
	return db
}

// compareSeriesIndex reads every series of ir through ir and si and
// fails where they differ; it returns how many there were.
func compareSeriesIndex(t testing.TB, ir tsdb.IndexReader, si *seriesIndex) int {
	t.Helper()
	k, v := index.AllPostingsKey()
	p, err := ir.Postings(context.Background(), k, v)
	if err != nil {
		return 0 // a corrupt index (FuzzSeriesIndex)
	}
	var (
		b1, b2 labels.ScratchBuilder
		c1, c2 []chunks.Meta
		n      int
	)
	for ; p.Next(); n++ {
		err1 := ir.Series(p.At(), &b1, &c1)
		err2 := si.series(p.At(), &b2, &c2)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("series %d: error %v, reader %v", p.At(), err2, err1)
		}
		if err1 != nil {
			continue
		}
		if l1, l2 := b1.Labels(), b2.Labels(); !labels.Equal(l1, l2) {
			t.Fatalf("series %d: %s, reader %s", p.At(), l2, l1)
		}
		if !slices.Equal(c1, c2) {
			t.Fatalf("series %d: chunks %v, reader %v", p.At(), c2, c1)
		}
	}
	return n
}

// FuzzSeriesIndex flips bytes of a block's index file: opening it and
// reading every series never panics, and a series the index reader reads
// without error reads the same through the cache.
func FuzzSeriesIndex(f *testing.F) {
	f.Add(uint32(0), byte(1), uint64(7))
	f.Add(uint32(5000), byte(0x80), uint64(1))
	f.Add(uint32(100), byte(0xff), uint64(123456))
	db := seriesIndexDB(f, 300)
	orig, err := os.ReadFile(filepath.Join(db.Blocks()[0].Dir(), "index"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, at uint32, flip byte, ref uint64) {
		raw := slices.Clone(orig)
		raw[int(at)%len(raw)] ^= flip
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "index"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		si, err := openSeriesIndex(dir)
		if err != nil || si == nil {
			return
		}
		defer si.close()
		var (
			b  labels.ScratchBuilder
			cs []chunks.Meta
		)
		_ = si.series(storage.SeriesRef(ref), &b, &cs)
		ir, err := index.NewFileReader(filepath.Join(dir, "index"), index.DecodePostingsRaw)
		if err != nil {
			return
		}
		defer ir.Close()
		compareSeriesIndex(t, ir, si)
	})
}
