package records

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestAppendAcrossPartitionsFailsWhole writes a batch spanning two
// partitions whose second WAL cannot be created (a directory sits where
// its file would be renamed to; that stops root too). The batch is
// refused, and nothing of it is kept: not in Select, and not after a
// reopen, although the first partition's write had succeeded.
func TestAppendAcrossPartitionsFailsWhole(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	first := randRecord(rng, t0, 3)
	if err := s.Append([]Record{first}); err != nil {
		t.Fatal(err)
	}
	second := t0 + tenMin
	block := filepath.Join(dir, fileName(second, 1, "wal"))
	if err := os.MkdirAll(filepath.Join(block, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	batch := []Record{randRecord(rng, t0+1, 3), randRecord(rng, t0+2, 3), randRecord(rng, second+5, 3)}
	if err := s.Append(batch); err == nil {
		t.Fatal("append with an uncreatable WAL succeeded")
	}
	requireSameRecords(t, selectAll(t, s, 0, t0+10*tenMin), []Record{first})
	if err := s.Failed(); err != nil {
		t.Fatalf("store failed after a write error it undid: %v", err)
	}

	// Once the obstacle is gone the same batch is stored whole.
	if err := os.RemoveAll(block); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(batch); err != nil {
		t.Fatal(err)
	}
	want := append([]Record{first}, batch...)
	requireSameRecords(t, selectAll(t, s, 0, t0+10*tenMin), want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, nil)
	defer s.Close()
	requireSameRecords(t, selectAll(t, s, 0, t0+10*tenMin), want)
}
