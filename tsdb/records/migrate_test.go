package records

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenMigratesV1WAL opens a directory written by the version 1 store
// (testdata/legacy-v1: one sealed segment, partition 0's second WAL
// generation and partition 1's WAL with a torn last entry). Every record
// those files hold must be there, the version 1 WAL files gone (sealed into
// segments), and a reopen must find the same.
func TestOpenMigratesV1WAL(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "legacy-v1"))); err != nil {
		t.Fatal(err)
	}
	// The records the fixture was written with, drawn again from the same
	// generator: 5 sealed in partition 0, then 4 more in partition 0 and
	// 3 in partition 1 left in WALs, then one torn entry.
	rng := rand.New(rand.NewPCG(71, 72))
	var want []Record
	for i := range 5 {
		want = append(want, randRecord(rng, t0+int64(i)*1000, 4))
	}
	for i := range 4 {
		want = append(want, randRecord(rng, t0+10_000+int64(i)*1000, 3))
	}
	for i := range 3 {
		want = append(want, randRecord(rng, t0+tenMin+int64(i)*1000, 2))
	}
	for round := range 2 {
		s := openTest(t, dir, nil)
		requireSameRecords(t, selectAll(t, s, 0, 1<<62), sortedByTime(want))
		if w := files(t, dir, "wal"); len(w) != 0 {
			t.Fatalf("round %d: version 1 WAL files left: %v", round, w)
		}
		if got := files(t, dir, "seg"); len(got) != 3 {
			t.Fatalf("round %d: segments %v, want the old one and one per migrated WAL", round, got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// New appends go to the new log and survive a crash.
	s := openTest(t, dir, nil)
	more := randRecord(rng, t0+20_000, 2)
	if err := s.Append([]Record{more}); err != nil {
		t.Fatal(err)
	}
	crash(s)
	s = openTest(t, dir, nil)
	defer s.Close()
	requireSameRecords(t, selectAll(t, s, 0, 1<<62), sortedByTime(append(want, more)))
}
