package forward_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/wlog"

	"github.com/tailroot/tailroot/internal/rwtest"
)

// TestOutageBoundIsWALTruncation measures the outage a queue survives: with
// the receiver down, each 2h of (time-compressed) samples is followed by a
// head compaction, which truncates the WAL as the TSDB's background loop
// would. The first compactions keep every segment the stalled watcher still
// needs and nothing is lost; the compaction that deletes the segment after
// the one the watcher is reading makes it start over at the newest segment,
// and the samples in between are never sent.
func TestOutageBoundIsWALTruncation(t *testing.T) {
	db, f, _ := setup(t)
	rec := rwtest.New("")
	rec.Down.Store(true)
	srv := httptest.NewServer(rec)
	defer srv.Close()
	c := loadConfig(t, `remote_write:
  - url: `+srv.URL+`
    queue_config: {capacity: 10, max_shards: 1, max_samples_per_send: 10, batch_send_deadline: 50ms, min_backoff: 10ms, max_backoff: 50ms}
`)
	if err := f.ApplyConfig(c); err != nil {
		t.Fatal(err)
	}
	ls := labels.FromStrings("__name__", "bound", "i", "0")
	const step = int64(time.Minute / time.Millisecond)
	const block = int64(2 * time.Hour / time.Millisecond)
	// Future timestamps (the watcher sends what is stamped after its start),
	// aligned so that every 2h of samples is one block.
	t0 := (time.Now().Add(time.Hour).UnixMilli()/block + 1) * block
	var ref storage.SeriesRef
	type phase struct {
		from, to int64
		segs     [2]int
	}
	var phases []phase
	for k := 0; k < 5; k++ {
		from := t0 + int64(k)*block
		for ts := from; ts < from+block; ts += step {
			app := db.AppenderV2(context.Background())
			var err error
			if ref, err = app.Append(ref, ls, 0, ts, float64(ts), nil, nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Compact(context.Background()); err != nil {
			t.Fatal(err)
		}
		first, last, err := wlog.Segments(filepath.Join(db.Dir(), "wal"))
		if err != nil {
			t.Fatal(err)
		}
		phases = append(phases, phase{from: from, to: from + block, segs: [2]int{first, last}})
		time.Sleep(200 * time.Millisecond) // let the watcher notice
	}
	rec.Down.Store(false)
	// Wait until nothing more arrives.
	for prev, stable := -1, 0; stable < 15; time.Sleep(200 * time.Millisecond) {
		if n := rec.Count(); n == prev {
			stable++
		} else {
			prev, stable = n, 0
		}
	}
	acks, _ := rec.Acks()
	var got []int64
	for k := range acks {
		got = append(got, k.T)
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	per := make([]int, len(phases))
	for _, ts := range got {
		per[(ts-t0)/block]++
	}
	for k, p := range phases {
		t.Logf("2h of samples #%d: WAL segments %d..%d after its compaction; %d of %d forwarded", k, p.segs[0], p.segs[1], per[k], block/step)
	}
	// Segments rotate only at compactions here (little data): #0 and #1 are
	// in segment 0, which the stalled watcher holds open; #2 is in segment
	// 1, deleted by the last compaction (the lower two thirds of 0..3), so
	// the watcher restarts at the newest segment and #2..#4 are skipped.
	// This is the bound docs/scale-out.md states; a Prometheus whose
	// truncation waits for its queues would fail here, and the docs must
	// then be updated.
	want := []int{120, 120, 0, 0, 0}
	if p := phases[len(phases)-1]; p.segs[0] != 2 {
		t.Fatalf("BUG: the last compaction left segments %d..%d, expected 2..4", p.segs[0], p.segs[1])
	}
	for k := range want {
		if per[k] != want[k] {
			t.Fatalf("forwarded per 2h of outage %v, want %v", per, want)
		}
	}
}
