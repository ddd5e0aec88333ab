package fast_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/tailroot/tailroot/query/fast"
)

// TestAppendsWhileReading reads the head's chunks, the one being appended
// to included, while another goroutine appends to every series: a query
// over a range that ends before the new samples must keep upstream's
// answer, and (under -race) the decoder must not read what the appender
// writes.
func TestAppendsWhileReading(t *testing.T) {
	db, err := tsdb.Open(t.TempDir(), nil, nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const nSeries = 40
	t0 := diffStart.UnixMilli()
	var lsets []labels.Labels
	for i := 0; i < nSeries; i++ {
		lsets = append(lsets, labels.FromStrings("__name__", "req_total", "instance", fmt.Sprint(i), "job", fmt.Sprint(i%3)))
	}
	appendAt := func(ts int64) {
		app := db.AppenderV2(context.Background())
		for i, ls := range lsets {
			if _, err := app.Append(0, ls, 0, ts, float64((ts-t0)/1000*int64(i+1)), nil, nil, storage.AOptions{}); err != nil {
				t.Error(err)
			}
		}
		if err := app.Commit(); err != nil {
			t.Error(err)
		}
	}
	// 40 minutes: the last of each series' chunks is still open.
	for ts := t0; ts <= t0+40*60_000; ts += 15_000 {
		appendAt(ts)
	}
	const qs = `sum by (job) (rate(req_total[2m]))`
	start, end := diffStart.Add(5*time.Minute), diffStart.Add(39*time.Minute)
	want := upstreamRange(t, db, qs, start, end, 15*time.Second)
	plan := mustCompile(t, qs)
	var (
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ts := t0 + 41*60_000; ; ts += 15_000 {
			select {
			case <-stop:
				return
			default:
			}
			appendAt(ts)
			// Slowly enough that the open chunk the query reads takes
			// a good part of the queries to fill.
			time.Sleep(5 * time.Millisecond)
		}
	}()
	opts := fast.DefaultOptions()
	opts.Workers = 2
	for i := 0; i < 30; i++ {
		got, _, err := plan.Range(context.Background(), db, opts, start, end, 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffValues(want.Value, got, false); d != "" {
			t.Fatalf("query %d while appending: %s", i, d)
		}
	}
	close(stop)
	wg.Wait()
}

// TestCompactionWhileReading queries while the head is persisted into
// blocks one range after another: every answer, whether the blocks were
// read one by one or (while the block list changed) through the merge,
// must stay upstream's answer from before, and (under -race) the block
// readers must not be used after they close.
func TestCompactionWhileReading(t *testing.T) {
	db, err := tsdb.Open(t.TempDir(), nil, nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := diffStart.UnixMilli()
	app := db.AppenderV2(context.Background())
	for ts := t0; ts <= t0+3*3600_000; ts += 15_000 {
		for i := 0; i < 30; i++ {
			ls := labels.FromStrings("__name__", "req_total", "instance", fmt.Sprint(i), "job", fmt.Sprint(i%3))
			if _, err := app.Append(0, ls, 0, ts, float64((ts-t0)/1000*int64(i+1))+0.5, nil, nil, storage.AOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	const qs = `sum by (job) (rate(req_total[5m]))`
	start, end := diffStart.Add(10*time.Minute), diffStart.Add(3*time.Hour)
	want := upstreamRange(t, db, qs, start, end, time.Minute)
	plan := mustCompile(t, qs)
	done := make(chan error, 1)
	go func() {
		// Six 20-minute blocks, written while the queries run.
		for k := int64(0); k < 6; k++ {
			mint, maxt := t0+k*20*60_000, t0+(k+1)*20*60_000-1
			if err := db.CompactHead(tsdb.NewRangeHead(db.Head(), mint, maxt)); err != nil {
				done <- err
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		done <- nil
	}()
	opts := fast.DefaultOptions()
	opts.Workers = 2
	for i := 0; ; i++ {
		got, _, err := plan.Range(context.Background(), db, opts, start, end, time.Minute)
		if err != nil && !errors.Is(err, fast.ErrFallback) {
			t.Fatal(err)
		}
		if err == nil {
			if d := diffValues(want.Value, got, false); d != "" {
				t.Fatalf("query %d while compacting: %s", i, d)
			}
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if n := len(db.Blocks()); n != 6 {
				t.Fatalf("%d blocks, want 6", n)
			}
			used, err := fast.BlockWalkUsed(db, start.UnixMilli(), end.UnixMilli(), labels.MustNewMatcher(labels.MatchEqual, "__name__", "req_total"))
			if err != nil || !used {
				t.Fatalf("after compaction: blocks read one by one %v (%v), want true", used, err)
			}
			got, _, err := plan.Range(context.Background(), db, opts, start, end, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if d := diffValues(want.Value, got, false); d != "" {
				t.Fatalf("after compaction: %s", d)
			}
			return
		default:
		}
	}
}

// upstreamRange is the upstream engine's answer to the range query qs
// over q, the reference the concurrent tests compare against.
func upstreamRange(t *testing.T, q storage.Queryable, qs string, start, end time.Time, step time.Duration) *promql.Result {
	t.Helper()
	ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	qry, err := ng.NewRangeQuery(context.Background(), q, nil, qs, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(qry.Close)
	want := qry.Exec(context.Background())
	if want.Err != nil {
		t.Fatal(want.Err)
	}
	return want
}
