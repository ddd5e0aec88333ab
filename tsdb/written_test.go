package tsdb

import (
	"context"
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"
)

// TestWriteListener: every successful commit reports its lowest sample
// time, through either appender interface; a rollback or an empty commit
// reports nothing; a delete reports its mint.
func TestWriteListener(t *testing.T) {
	o := DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	db, err := Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got []int64
	db.SetWriteListener(func(minT int64) { got = append(got, minT) })
	ctx := context.Background()
	ls := labels.FromStrings("__name__", "x")

	app := db.AppenderV2(ctx)
	for _, ts := range []int64{5_000, 2_000, 9_000} {
		if _, err := app.Append(0, ls, 0, ts, 1, nil, nil, storage.AOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	app = db.AppenderV2(ctx)
	if _, err := app.Append(0, ls, 0, 10_000, 1, nil, nil, storage.AOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := app.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := db.AppenderV2(ctx).Commit(); err != nil {
		t.Fatal(err)
	}
	v1 := db.Appender(ctx)
	if _, err := v1.Append(0, ls, 12_000, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := v1.AppendHistogram(0, labels.FromStrings("__name__", "h"), 11_000, tsdbutil.GenerateTestHistogram(1), nil); err != nil {
		t.Fatal(err)
	}
	if err := v1.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(ctx, 3_000, math.MaxInt64, labels.MustNewMatcher(labels.MatchEqual, "__name__", "x")); err != nil {
		t.Fatal(err)
	}
	want := []int64{2_000, 11_000, 3_000}
	if len(got) != len(want) {
		t.Fatalf("listener got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("listener got %v, want %v", got, want)
		}
	}
}
