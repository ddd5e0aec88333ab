package tsdb

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

func TestMaxBlockDuration(t *testing.T) {
	const h = int64(time.Hour / time.Millisecond)
	for _, tc := range []struct {
		name                string
		configured          time.Duration
		retention, minBlock int64
		want                int64
	}{
		{"10% of 15d retention", 0, 360 * h, 2 * h, 36 * h},
		{"capped at 31d", 0, 10 * 365 * 24 * h, 2 * h, 31 * 24 * h},
		{"no retention means 31d", 0, 0, 2 * h, 31 * 24 * h},
		{"configured equal to min: compaction off", 2 * time.Hour, 360 * h, 2 * h, 2 * h},
		{"configured below min is raised", time.Hour, 360 * h, 2 * h, 2 * h},
		{"short retention below min block", 0, 10 * h, 2 * h, 2 * h},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := maxBlockDuration(tc.configured, tc.retention, tc.minBlock); got != tc.want {
				t.Fatalf("got %dh, want %dh", got/h, tc.want/h)
			}
		})
	}
}

// TestEqualBlockDurationsKeepBlocksUncompacted writes 20 hours of samples in
// order, as a backfill does: the head cuts 2h blocks and, with min == max
// block duration, none of them is merged further (what a Thanos sidecar
// needs). It also checks the lowest-timestamp gauge the sidecar reads.
func TestEqualBlockDurationsKeepBlocksUncompacted(t *testing.T) {
	o := DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	o.MinBlockDuration = 2 * time.Hour
	o.MaxBlockDuration = 2 * time.Hour
	reg := prometheus.NewRegistry()
	db, err := Open(o, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	start := time.Now().Add(-20 * time.Hour).Truncate(time.Hour).UnixMilli()
	ls := labels.FromStrings("__name__", "x_total", "job", "a")
	const step = int64(60_000)
	for ts := start; ts < start+20*3600_000; ts += 3600_000 {
		app := db.AppenderV2(context.Background())
		for t2 := ts; t2 < ts+3600_000; t2 += step {
			if _, err := app.Append(0, ls, 0, t2, float64(t2-start), nil, nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	metas, _ := db.BlockMetas()
	if len(metas) < 8 {
		t.Fatalf("%d blocks after 20h of samples, want at least 8", len(metas))
	}
	for _, m := range metas {
		if m.Compaction.Level != 1 || m.MaxTime-m.MinTime > 2*3600_000 {
			t.Errorf("block %s: level %d, span %v; want level 1 and at most 2h", m.ULID, m.Compaction.Level, time.Duration(m.MaxTime-m.MinTime)*time.Millisecond)
		}
	}
	want := float64(metas[0].MinTime / 1000)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(
		"# HELP prometheus_tsdb_lowest_timestamp_seconds Lowest timestamp value stored in the database.\n"+
			"# TYPE prometheus_tsdb_lowest_timestamp_seconds gauge\n"+
			"prometheus_tsdb_lowest_timestamp_seconds "+strconvF(want)+"\n"),
		"prometheus_tsdb_lowest_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
	if metas[0].MinTime != start {
		t.Fatalf("oldest block starts at %d, want the first sample %d", metas[0].MinTime, start)
	}
}

func strconvF(f float64) string { return strconv.FormatFloat(f, 'e', -1, 64) }
