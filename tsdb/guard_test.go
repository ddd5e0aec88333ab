package tsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/wlog"

	"github.com/tailroot/tailroot/internal/diskfull"
)

// ledger records, per unique sample value, whether its commit was
// acknowledged or failed.
type ledger struct {
	mu     sync.Mutex
	acked  map[int64]sampleKey
	failed map[int64]bool
}

type sampleKey struct {
	series string
	t      int64
}

func (l *ledger) record(ok bool, ids []int64, keys []sampleKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, id := range ids {
		if ok {
			l.acked[id] = keys[i]
		} else {
			l.failed[id] = true
		}
	}
}

// writeBatch appends n float samples, one per series of writer w, plus one
// out-of-order sample, each with a unique value, and commits them.
func writeBatch(db *DB, w, n int, t int64, next *atomic.Int64, l *ledger) error {
	app := db.AppenderV2(context.Background())
	ids := make([]int64, 0, n+1)
	keys := make([]sampleKey, 0, n+1)
	var err error
	add := func(ls labels.Labels, ts int64) {
		if err != nil {
			return
		}
		id := next.Add(1)
		if _, err = app.Append(0, ls, 0, ts, float64(id), nil, nil, storage.AOptions{}); err == nil {
			ids, keys = append(ids, id), append(keys, sampleKey{ls.String(), ts})
		}
	}
	for s := range n {
		add(labels.FromStrings("__name__", "g", "w", fmt.Sprint(w), "s", fmt.Sprint(s)), t)
	}
	// The first sample of "o" is 1e6 ms ahead of t: this one is out of order.
	add(labels.FromStrings("__name__", "o", "w", fmt.Sprint(w)), t)
	if err != nil {
		_ = app.Rollback()
		l.record(false, ids, keys)
		return err
	}
	err = app.Commit()
	l.record(err == nil, ids, keys)
	return err
}

// readAll returns every sample value of g and o with its series and time.
func readAll(t *testing.T, q storage.Queryable) map[int64]sampleKey {
	t.Helper()
	qr, err := q.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer qr.Close()
	got := map[int64]sampleKey{}
	ss := qr.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", "g|o"))
	for ss.Next() {
		s := ss.At()
		it := s.Iterator(nil)
		for it.Next() != 0 {
			ts, v := it.At()
			got[int64(v)] = sampleKey{s.Labels().String(), ts}
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	if ss.Err() != nil {
		t.Fatal(ss.Err())
	}
	return got
}

func checkLedger(t *testing.T, what string, got map[int64]sampleKey, l *ledger) {
	t.Helper()
	lost, wrong, resurrected := 0, 0, 0
	var examples []string
	for id, k := range l.acked {
		g, ok := got[id]
		switch {
		case !ok:
			lost++
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("%d %s@%d", id, k.series, k.t))
			}
		case g != k:
			wrong++
		}
	}
	for id := range l.failed {
		if _, ok := got[id]; ok {
			resurrected++
		}
	}
	if lost+wrong+resurrected > 0 {
		t.Errorf("%s: %d of %d acknowledged samples lost (e.g. %v), %d at the wrong series or time, %d of %d samples of failed commits present",
			what, lost, len(l.acked), examples, wrong, resurrected, len(l.failed))
	}
}

// TestWriteFailureKeepsAcknowledged fills the disk under four writers at a
// random moment, frees it, and checks that writes were refused until the
// TSDB reopened, that they resumed by themselves, and that a copy of the
// directory taken as a crash would leave it (no Close) replays every
// acknowledged sample and none of a failed commit. Without the free-space
// check commits meet ENOSPC in the WAL; with it most are refused before.
func TestWriteFailureKeepsAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		minFree int64
	}{{"wal-enospc", -1}, {"wal-enospc-again", -1}, {"min-free", 4 << 20}} {
		seed := uint64(time.Now().UnixNano())
		t.Run(tc.name, func(t *testing.T) {
			t.Logf("seed %d", seed)
			testWriteFailure(t, rand.New(rand.NewPCG(seed, 16)), tc.minFree)
		})
	}
}

func testWriteFailure(t *testing.T, rng *rand.Rand, minFree int64) {
	dir := diskfull.Mount(t, 24<<20)
	opts := DefaultOptions()
	opts.MinFreeBytes = minFree
	opts.Dir = dir
	opts.RecoverInterval = 20 * time.Millisecond
	opts.ProbeBytes = 256 << 10
	db, err := Open(opts, slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	l := &ledger{acked: map[int64]sampleKey{}, failed: map[int64]bool{}}
	var next atomic.Int64
	t0 := time.Now().UnixMilli()
	for w := range 4 {
		// The first sample of "o" is ahead of all others of its series.
		app := db.AppenderV2(context.Background())
		id := next.Add(1)
		ls := labels.FromStrings("__name__", "o", "w", fmt.Sprint(w))
		if _, err := app.Append(0, ls, 0, t0+1_000_000, float64(id), nil, nil, storage.AOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
		l.record(true, []int64{id}, []sampleKey{{ls.String(), t0 + 1_000_000}})
	}

	var (
		phase   atomic.Int32 // 0 before the fill, 1 while full, 2 after recovery
		refused atomic.Int64
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		after   atomic.Int64 // batches acknowledged after recovery
	)
	for w := range 4 {
		wg.Add(1)
		sizes := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
		go func() {
			defer wg.Done()
			for i := int64(1); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Batch sizes from 1 to 3000 series make records that fit in
				// a page and records that span several.
				err := writeBatch(db, w, 1+sizes.IntN(3000), t0+i, &next, l)
				switch {
				case err == nil && phase.Load() == 2:
					after.Add(1)
				case errors.Is(err, ErrUnavailable):
					refused.Add(1)
					time.Sleep(time.Millisecond)
				case err != nil:
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
	ballast, err := diskfull.Fill(dir)
	if err != nil {
		t.Fatal(err)
	}
	phase.Store(1)
	deadline := time.Now().Add(20 * time.Second)
	for db.Ready() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if db.Ready() == nil {
		t.Fatalf("the disk is full (ballast %d bytes) but writes are still accepted", ballast.Size())
	}
	time.Sleep(time.Duration(50+rng.IntN(300)) * time.Millisecond)
	if db.Ready() == nil {
		t.Fatal("writes accepted again while the disk is still full")
	}
	if err := ballast.Free(); err != nil {
		t.Fatal(err)
	}
	for db.Ready() != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := db.Ready(); err != nil {
		t.Fatalf("writes not resumed 20 s after the disk was freed: %v", err)
	}
	phase.Store(2)
	for after.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if after.Load() < 20 {
		t.Fatalf("only %d batches acknowledged after recovery", after.Load())
	}
	if refused.Load() == 0 {
		t.Fatal("no write was refused while the disk was full")
	}
	t.Logf("%d samples acknowledged, %d in failed commits, %d batches refused, %d acknowledged after recovery",
		len(l.acked), len(l.failed), refused.Load(), after.Load())

	checkLedger(t, "live", readAll(t, db), l)

	// The directory as a kill -9 leaves it: everything written so far is in
	// the page cache, nothing is flushed by Close.
	crashed := filepath.Join(t.TempDir(), "crashed")
	if out, err := exec.Command("cp", "-a", dir, crashed).CombinedOutput(); err != nil {
		t.Fatalf("copy data dir: %v\n%s", err, out)
	}
	_ = os.Remove(filepath.Join(crashed, "lock"))
	copts := opts
	copts.Dir = crashed
	cdb, err := Open(copts, slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	checkLedger(t, "after a crash", readAll(t, cdb), l)
}

// tlogWriter sends log lines to the test log.
type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func TestRefTags(t *testing.T) {
	for _, tc := range []struct {
		ref       storage.SeriesRef
		gen, read uint64
		want      storage.SeriesRef
	}{
		{ref: 42, gen: 0, read: 0, want: 42},
		{ref: 42, gen: 3, read: 3, want: 42},
		{ref: 42, gen: 0, read: 1, want: 0}, // a ref from before a reopen is dropped
		{ref: 42, gen: 2, read: 1, want: 0},
		{ref: 0, gen: 5, read: 5, want: 0},
	} {
		if got := untagRef(tagRef(tc.ref, tc.gen), tc.read); got != tc.want {
			t.Errorf("ref %d of generation %d read in generation %d: got %d, want %d", tc.ref, tc.gen, tc.read, got, tc.want)
		}
	}
}

// TestReopenWaitsForQueriers: after a failed write the reopen waits for an
// open querier (reads stay valid), refuses new ones meanwhile, reports
// itself unhealthy once DrainTimeout has passed, and reopens as soon as the
// querier is closed.
func TestReopenWaitsForQueriers(t *testing.T) {
	dir := diskfull.Mount(t, 16<<20)
	opts := DefaultOptions()
	opts.Dir = dir
	opts.MinFreeBytes = -1
	opts.RecoverInterval = 10 * time.Millisecond
	opts.DrainTimeout = 100 * time.Millisecond
	opts.ProbeBytes = 64 << 10
	db, err := Open(opts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := &ledger{acked: map[int64]sampleKey{}, failed: map[int64]bool{}}
	var next atomic.Int64
	t0 := time.Now().UnixMilli()
	if err := writeBatch(db, 0, 10, t0, &next, l); err != nil {
		t.Fatal(err)
	}
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	ballast, err := diskfull.Fill(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); db.Ready() == nil && i < 10000; i++ {
		if err := writeBatch(db, 0, 3000, t0+i, &next, l); err != nil && !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
	}
	if db.Ready() == nil {
		t.Fatal("no write failed on a full disk")
	}
	if err := ballast.Free(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if db.Ready() == nil {
		t.Fatal("reopened while a querier was open")
	}
	if db.Healthy() == nil {
		t.Fatal("healthy although the reopen has waited longer than DrainTimeout")
	}
	if _, err := db.Querier(0, 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("new querier during the drain: %v, want ErrUnavailable", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for db.Ready() != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := errors.Join(db.Ready(), db.Healthy()); err != nil {
		t.Fatalf("not reopened after the querier closed: %v", err)
	}
	checkLedger(t, "after the reopen", readAll(t, db), l)
}

// TestAdvanceAfterTruncation: when head truncation has removed the
// recorded segment and the next one (the WBL cuts past it after an
// out-of-order compaction), the position follows the log's newest segment
// instead of failing writes with "stat wal segment".
func TestAdvanceAfterTruncation(t *testing.T) {
	dir := t.TempDir()
	write := func(i, n int) {
		if err := os.WriteFile(wlog.SegmentName(dir, i), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(3, 10)
	p, err := currentPos(dir)
	if err != nil || p.seg != 3 || p.off != 10 {
		t.Fatalf("position %+v, %v", p, err)
	}
	if err := os.Remove(wlog.SegmentName(dir, 3)); err != nil {
		t.Fatal(err)
	}
	write(6, 7)
	if err := p.advance(); err != nil || p.seg != 6 || p.off != 7 {
		t.Errorf("after truncation: position %+v, %v; want segment 6 at 7", p, err)
	}
}
