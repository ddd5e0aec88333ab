package records

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tailroot/tailroot/internal/diskfull"
)

// TestFailedWriteStoresNothing fills a tmpfs so that the WAL write of a
// batch spanning two 2 h partitions fails part way (the filesystem has room
// for about one and a half wlog pages of it), and checks that the refused
// batch leaves nothing behind: not in Select, not after Recover, not after a
// restart; and that the same batch, appended again once the disk has room,
// is stored exactly once.
func TestFailedWriteStoresNothing(t *testing.T) {
	mnt := diskfull.Mount(t, 4<<20)
	dir := filepath.Join(mnt, "records")
	const hour = int64(time.Hour / time.Millisecond)
	base := t0 - t0%(2*hour) + 2*hour // a partition start
	opts := func(o *Options) { o.PartitionDuration = 2 * time.Hour }
	rng := rand.New(rand.NewPCG(16, 17))
	s := openTest(t, dir, opts)
	defer func() { _ = s.Close() }()

	// Acknowledged before the fault: these must survive everything.
	var before []Record
	for i := range 20 {
		before = append(before, randRecord(rng, base+int64(i)*1000, 4))
	}
	if err := s.Append(before); err != nil {
		t.Fatal(err)
	}
	// 400 records of a few hundred bytes each: several wlog pages. The
	// first 10 go to the partition at base, one WAL record that fits the
	// first page whole; the rest to the next partition, one WAL record over
	// several pages that the full disk tears. Without the cut, reloading
	// would drop the torn record and bring back the whole one.
	var batch []Record
	for i := range 400 {
		at := base + 2*hour - 10*1000 + int64(i)*1000
		batch = append(batch, randRecord(rng, at, 20))
	}
	if batch[0].Time/(2*hour) == batch[len(batch)-1].Time/(2*hour) {
		t.Fatal("test batch does not span two partitions")
	}
	all := sortedByTime(append(append([]Record(nil), before...), batch...))
	wantBefore := sortedByTime(before)
	check := func(stage string, s *Store, want []Record) {
		t.Helper()
		got := selectAll(t, s, base-hour, base+4*hour)
		if len(got) != len(want) {
			t.Fatalf("%s: select returned %d records, want %d", stage, len(got), len(want))
		}
		requireSameRecords(t, got, want)
		if n := s.Stats().Records; n != int64(len(want)) {
			t.Fatalf("%s: stats count %d records, want %d", stage, n, len(want))
		}
	}

	// Leave 48 KiB free: the write gets one wlog page and a half into the
	// file, then ENOSPC.
	gap := filepath.Join(mnt, "gap")
	if err := os.WriteFile(gap, make([]byte, 48<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	ballast, err := diskfull.Fill(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gap); err != nil {
		t.Fatal(err)
	}
	walBefore := walBytes(t, dir)
	err = s.Append(batch)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if s.Failed() == nil {
		t.Fatal("store accepts appends after a failed write")
	}
	if err := s.Append(before[:1]); err == nil {
		t.Fatal("append after a failed write succeeded without Recover")
	}
	if got := walBytes(t, dir); got != walBefore {
		t.Fatalf("WAL holds %d bytes after the refused batch, %d before it", got, walBefore)
	}
	check("after the failed write", s, wantBefore)

	// Still full: Recover reloads the cut log (reading needs no space).
	if err := s.Recover(); err != nil {
		t.Logf("recover on the full disk: %v", err)
	} else {
		check("after recover on the full disk", s, wantBefore)
	}
	if err := ballast.Free(); err != nil {
		t.Fatal(err)
	}
	if err := s.Recover(); err != nil {
		t.Fatalf("recover: %v", err)
	}
	check("after recover", s, wantBefore)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, opts)
	check("after reopen", s, wantBefore)

	// The client retries the refused batch: stored once.
	if err := s.Append(batch); err != nil {
		t.Fatalf("append after the disk has room: %v", err)
	}
	check("after the retry", s, all)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, opts)
	check("after the retry and a reopen", s, all)
}

// walBytes is the total size of the WAL segment files under dir.
func walBytes(t testing.TB, dir string) int64 {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, walDirName, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range m {
		n += fileSize(t, p)
	}
	return n
}

// TestFailureRefusesUnsyncedWrites covers group commit: a batch written but
// not yet synced when another write or sync fails is refused too, and cut
// off with it, while a batch synced before stays.
func TestFailureRefusesUnsyncedWrites(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(18, 19))
	s := openTest(t, dir, nil)
	defer func() { _ = s.Close() }()
	synced := []Record{randRecord(rng, t0, 3), randRecord(rng, t0+1, 3)}
	if err := s.Append(synced); err != nil {
		t.Fatal(err)
	}
	pending := []Record{randRecord(rng, t0+2, 3), randRecord(rng, t0+tenMin, 3)}
	parts, err := s.frame(pending, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	wseq, _, err := s.appendLocked(pending, parts)
	if err != nil || wseq == 0 {
		s.mu.Unlock()
		t.Fatalf("write: seq %d, %v", wseq, err)
	}
	l := s.wal
	s.fail(errors.New("injected: another batch's write failed"))
	s.mu.Unlock()
	if err := l.syncTo(wseq); err == nil {
		t.Fatal("a write not synced before the failure was acknowledged")
	}
	if err := s.Recover(); err != nil {
		t.Fatal(err)
	}
	requireSameRecords(t, selectAll(t, s, t0-tenMin, t0+2*tenMin), synced)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, nil)
	requireSameRecords(t, selectAll(t, s, t0-tenMin, t0+2*tenMin), synced)
	if err := s.Append(pending); err != nil {
		t.Fatal(err)
	}
	requireSameRecords(t, selectAll(t, s, t0-tenMin, t0+2*tenMin), sortedByTime(append(synced, pending...)))
}
