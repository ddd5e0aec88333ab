package fast

import (
	"context"
	"fmt"
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
	opts := tsdb.DefaultOptions()
	db, err := tsdb.Open(t.TempDir(), nil, nil, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	app := db.Appender(context.Background())
	for i := 0; i < 3000; i++ {
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
	b := db.Blocks()[0]
	ir, err := b.Index()
	if err != nil {
		t.Fatal(err)
	}
	defer ir.Close()
	si, err := openSeriesIndex(b.Dir())
	if err != nil || si == nil {
		t.Fatalf("open: %v, %v", si, err)
	}
	defer si.close()
	k, v := index.AllPostingsKey()
	p, err := ir.Postings(context.Background(), k, v)
	if err != nil {
		t.Fatal(err)
	}
	var (
		b1, b2 labels.ScratchBuilder
		c1, c2 []chunks.Meta
		n      int
	)
	for ; p.Next(); n++ {
		if err := ir.Series(p.At(), &b1, &c1); err != nil {
			t.Fatal(err)
		}
		if err := si.series(p.At(), &b2, &c2); err != nil {
			t.Fatal(err)
		}
		if l1, l2 := b1.Labels(), b2.Labels(); !labels.Equal(l1, l2) {
			t.Fatalf("series %d: %s, reader %s", p.At(), l2, l1)
		}
		if !slices.Equal(c1, c2) {
			t.Fatalf("series %d: chunks %v, reader %v", p.At(), c2, c1)
		}
	}
	if n != 3000 {
		t.Fatalf("%d series, want 3000", n)
	}
	if err := si.series(storage.SeriesRef(len(si.bs)), &b2, &c2); err == nil {
		t.Fatal("a reference past the index: no error")
	}
}
