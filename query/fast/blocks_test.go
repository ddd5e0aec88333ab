package fast_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/tailroot/tailroot/query/fast"
)

// openBlocksDB spreads the differential data over three blocks and the
// head, with series that live in some blocks only, deletions inside a
// block and across a block and the head, and head chunks that began
// before the last block ended. Layouts: "blocks" as described, "ooo-head"
// adds out-of-order samples in the blocks' time (one series new, one
// interleaved with a persisted series' samples) to the head, "ooo-block"
// compacts those into a block overlapping the others.
func openBlocksDB(t *testing.T, layout string) *tsdb.DB {
	t.Helper()
	var window int64
	if layout != "blocks" {
		window = (3 * time.Hour).Milliseconds()
	}
	at := func(d time.Duration) int64 { return diffStart.Add(d).UnixMilli() }
	early := labels.FromStrings("__name__", "req_total", "job", "api", "instance", "10.9.0.1:9000", "code", "500")
	late := labels.FromStrings("__name__", "req_total", "job", "api", "instance", "10.9.0.2:9000", "code", "500")
	var ve, vl float64
	// seed 1: all in the head until persisted here.
	db := openDiffDBWith(t, 1, window, func(ts int64, add func(labels.Labels, int64, float64, *histogram.Histogram)) {
		if (ts-at(0))%15_000 != 0 {
			return
		}
		if ts <= at(30*time.Minute) {
			ve += 7
			add(early, ts, ve, nil)
		}
		if ts >= at(50*time.Minute) {
			vl += 5
			add(late, ts, vl, nil)
		}
	})
	write := func(ls labels.Labels, from, to time.Duration, off time.Duration, v float64) {
		t.Helper()
		app := db.AppenderV2(context.Background())
		for ts := from; ts <= to; ts += 15 * time.Second {
			v += 7
			if _, err := app.Append(0, ls, 0, at(ts+off), v, nil, nil, storage.AOptions{}); err != nil {
				t.Fatalf("append %s: %v", ls, err)
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range [][2]time.Duration{{0, 20 * time.Minute}, {20 * time.Minute, 40 * time.Minute}, {40 * time.Minute, 70 * time.Minute}} {
		if err := db.CompactHead(tsdb.NewRangeHead(db.Head(), at(r[0]), at(r[1])-1)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(db.Blocks()); n != 3 {
		t.Fatalf("%d blocks, want 3", n)
	}
	ctx := context.Background()
	if layout != "blocks" {
		// Out of order: a new series in the first block's time, and
		// samples between a persisted series' own.
		write(labels.FromStrings("__name__", "req_total", "job", "gpu", "instance", "10.9.0.3:9000", "code", "500"), 5*time.Minute, 15*time.Minute, 0, 10)
		write(early, 10*time.Minute, 25*time.Minute, 7*time.Second, 50)
		if layout == "ooo-block" {
			if err := db.CompactOOOHead(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return db
	}
	if err := db.Delete(ctx, at(25*time.Minute), at(30*time.Minute), labels.MustNewMatcher(labels.MatchEqual, "job", "db")); err != nil {
		t.Fatal(err)
	}
	// Across two blocks, and in the head only (a deletion across the last
	// block and a head chunk begun before its end is upstream's alone:
	// the merge brings the block's deleted samples back from the head).
	if err := db.Delete(ctx, at(15*time.Minute), at(22*time.Minute), labels.MustNewMatcher(labels.MatchEqual, "__name__", "req_total"), labels.MustNewMatcher(labels.MatchEqual, "job", "gpu")); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(ctx, at(75*time.Minute), at(85*time.Minute), labels.MustNewMatcher(labels.MatchEqual, "job", "api")); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestDifferentialBlocks is the differential over data in several blocks
// and the head: the blocks read one by one where they do not overlap, and
// through the merge where out-of-order data makes them (or the head)
// overlap; both give upstream's answers.
func TestDifferentialBlocks(t *testing.T) {
	for _, layout := range []string{"blocks", "ooo-head", "ooo-block"} {
		t.Run(layout, func(t *testing.T) {
			db := openBlocksDB(t, layout)
			used, err := fast.BlockWalkUsed(db, diffStart.UnixMilli(), diffStart.Add(2*time.Hour).UnixMilli(),
				labels.MustNewMatcher(labels.MatchEqual, "__name__", "req_total"))
			if err != nil {
				t.Fatal(err)
			}
			if want := layout == "blocks"; used != want {
				t.Errorf("blocks read one by one: %v, want %v", used, want)
			}
			runDifferentialOn(t, db, false, 11, 150, genQuery)
		})
	}
}
