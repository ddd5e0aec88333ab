package evidence

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"
)

// TestMigrateV1 opens testdata/v1, written by the version 1 format before
// the store moved onto wlog: every item comes back, the old files are
// gone, and new items append beside them.
func TestMigrateV1(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, "testdata/v1", dir)
	now := t0.Add(2 * time.Hour)
	s := openStore(t, dir, &now, 0)
	want := v1FixtureItems()
	checkItems(t, s, want)
	if st := s.Stats(); st.Partitions != 2 || st.Items != 4 || st.CorruptBytes != 0 {
		t.Fatalf("stats %+v, want 4 items in 2 partitions", st)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.log")); len(m) != 0 {
		t.Fatalf("version 1 files left: %v", m)
	}
	extra := stackItem("node-c", 103, "x", t0.Add(3*time.Second), 0.3)
	if err := s.Append([]Item{extra}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openStore(t, dir, &now, 0)
	defer s.Close()
	checkItems(t, s, []Item{want[0], want[1], extra, want[2], want[3]})
}

// TestMigrateV1Interrupted: a conversion cut before its rename leaves a
// temporary directory (redone), after it a directory and the old file
// (the file is removed). A torn version 1 tail converts what precedes it.
func TestMigrateV1Interrupted(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	want := v1FixtureItems()
	first := filepath.Join("testdata/v1", partFileV1(t0.UnixNano()))

	dir := t.TempDir()
	copyDir(t, "testdata/v1", dir)
	os.MkdirAll(filepath.Join(dir, partName(t0.UnixNano())+tmpSuffix), 0o755)
	os.WriteFile(filepath.Join(dir, partName(t0.UnixNano())+tmpSuffix, "00000000"), []byte("half"), 0o644)
	s := openStore(t, dir, &now, 0)
	checkItems(t, s, want)
	s.Close()
	// As if the crash came after the rename: the old file is back.
	b, _ := os.ReadFile(first)
	os.WriteFile(filepath.Join(dir, partFileV1(t0.UnixNano())), b, 0o644)
	s = openStore(t, dir, &now, 0)
	checkItems(t, s, want)
	s.Close()
	if m, _ := filepath.Glob(filepath.Join(dir, "evidence-*.*")); len(m) != 0 {
		t.Fatalf("left over: %v", m)
	}

	// Torn: the first partition's file loses its last 5 bytes (the
	// timeline's record), 3 items remain and the rest of it is counted.
	dir = t.TempDir()
	copyDir(t, "testdata/v1", dir)
	os.WriteFile(filepath.Join(dir, partFileV1(t0.UnixNano())), b[:len(b)-5], 0o644)
	s = openStore(t, dir, &now, 0)
	defer s.Close()
	checkItems(t, s, []Item{want[0], want[1], want[3]})
	js, _ := json.Marshal(want[2])
	rec := len(appendRecord(nil, headerOf(&want[2]), js))
	if st := s.Stats(); st.CorruptBytes != int64(rec-5) {
		t.Fatalf("corrupt bytes %d, want %d (the torn record)", st.CorruptBytes, rec-5)
	}
}

// TestPagesAndSegments stores items larger than a page in segments of two
// pages: records are split into fragments and cut into new segments, and
// every item reads back, before and after a restart.
func TestPagesAndSegments(t *testing.T) {
	defer func(n int) { segmentBytes = n }(segmentBytes)
	segmentBytes = 2 * wlogPageSize
	dir := t.TempDir()
	now := t0.Add(time.Hour)
	s := openStore(t, dir, &now, 0)
	var want []Item
	for i := range 40 {
		it := stackItem("n", uint32(i+1), strings.Repeat("c", 1+i*997%(40<<10)), t0.Add(time.Duration(i)*time.Second), float64(i)/100)
		want = append(want, it)
		if err := s.Append([]Item{it}); err != nil {
			t.Fatal(err)
		}
		if i%7 == 3 {
			// Several per call too.
			more := []Item{stackItem("m", uint32(i+1), "short", t0.Add(time.Duration(i)*time.Second+time.Millisecond), 0), stackItem("m", uint32(i+1), strings.Repeat("d", 20000), t0.Add(time.Duration(i)*time.Second+2*time.Millisecond), 0)}
			want = append(want, more...)
			if err := s.Append(more); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkItems(t, s, want)
	s.Close()
	first, last, err := wlog.Segments(filepath.Join(dir, partName(t0.UnixNano())))
	if err != nil || last-first < 5 {
		t.Fatalf("segments %d..%d (%v): want many", first, last, err)
	}
	s = openStore(t, dir, &now, 0)
	defer s.Close()
	checkItems(t, s, want)
	if st := s.Stats(); st.CorruptBytes != 0 || st.Items != len(want) {
		t.Fatalf("stats %+v", st)
	}
}

func checkItems(t *testing.T, s *Store, want []Item) {
	t.Helper()
	r, err := s.Select(Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Items) != len(want) {
		t.Fatalf("%d items, want %d", len(r.Items), len(want))
	}
	for i, raw := range r.Items {
		if string(raw) != mustJSON(t, want[i]) {
			t.Fatalf("item %d:\n got %.200s\nwant %.200s", i, raw, mustJSON(t, want[i]))
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzReadRecordAt feeds readRecordAt arbitrary segment bytes: it must
// not panic, and what it returns must be a payload wlog's reader reads
// from the same bytes.
func FuzzReadRecordAt(f *testing.F) {
	dir := f.TempDir()
	w, err := wlog.NewSize(nil, nil, dir, 2*wlogPageSize, compression.None)
	if err != nil {
		f.Fatal(err)
	}
	w.Log([]byte("short"), bytes.Repeat([]byte("x"), wlogPageSize+100), []byte("after"))
	w.Close()
	seg, _ := os.ReadFile(wlog.SegmentName(dir, 0))
	f.Add(seg, int64(0), 5)
	f.Add(seg, int64(12), 0)
	f.Add(seg[:wlogPageSize+50], int64(12), wlogPageSize+100)
	f.Add([]byte{1, 0, 3, 0, 0, 0, 0, 'a', 'b', 'c'}, int64(0), 3)
	f.Fuzz(func(t *testing.T, b []byte, off int64, hint int) {
		if off < 0 || off > int64(len(b)) || hint < 0 || hint > 1<<20 {
			return
		}
		got, end, err := readRecordAt(bytes.NewReader(b), off, int64(len(b)), hint, nil)
		if err != nil {
			return
		}
		if end <= off || end > int64(len(b)) {
			t.Fatalf("end %d outside (%d, %d]", end, off, len(b))
		}
		// Started at a page boundary, wlog's reader must agree on the
		// first record.
		if off == 0 {
			r := wlog.NewReader(bytes.NewReader(b))
			if !r.Next() || !bytes.Equal(r.Record(), got) {
				t.Fatalf("wlog reader disagrees: %v", r.Err())
			}
		}
	})
}

// TestConcurrentAppendSelect appends from several goroutines across
// segment cuts while others read back; run with -race. Every item appended
// is read back whole at the end.
func TestConcurrentAppendSelect(t *testing.T) {
	defer func(n int) { segmentBytes = n }(segmentBytes)
	segmentBytes = 2 * wlogPageSize
	now := t0.Add(time.Hour)
	s := openStore(t, t.TempDir(), &now, 0)
	defer s.Close()
	const writers, perWriter = 4, 25
	done := make(chan error, writers+2)
	for w := range writers {
		go func() {
			for i := range perWriter {
				it := stackItem("n", uint32(w*1000+i+1), strings.Repeat("w", 3000), t0.Add(time.Duration(w*perWriter+i)*time.Second), 0.1)
				if err := s.Append([]Item{it}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 2 {
		go func() {
			for range 50 {
				r, err := s.Select(Query{})
				if err != nil {
					done <- err
					return
				}
				for _, raw := range r.Items {
					var it Item
					if err := json.Unmarshal(raw, &it); err != nil {
						done <- err
						return
					}
				}
			}
			done <- nil
		}()
	}
	for range writers + 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Select(Query{})
	if err != nil || len(r.Items) != writers*perWriter {
		t.Fatalf("%d items (%v), want %d", len(r.Items), err, writers*perWriter)
	}
	for i, it := range decodeItems(t, r) {
		w, k := i/perWriter, i%perWriter
		if it.PID != uint32(w*1000+k+1) {
			t.Fatalf("item %d: pid %d, want %d", i, it.PID, w*1000+k+1)
		}
	}
}

// TestIdleWritersClose: a partition two partitions old loses its writer
// at the next retention pass; a late item still lands and reads back.
func TestIdleWritersClose(t *testing.T) {
	now := t0.Add(30 * time.Minute)
	s := openStore(t, t.TempDir(), &now, 0)
	defer s.Close()
	old := stackItem("n", 1, "a", t0.Add(time.Minute), 0.1)
	if err := s.Append([]Item{old}); err != nil {
		t.Fatal(err)
	}
	p := s.parts[t0.UnixNano()]
	if p.w == nil {
		t.Fatal("no writer after an append")
	}
	now = t0.Add(2*time.Hour + time.Minute)
	cur := stackItem("n", 2, "b", t0.Add(2*time.Hour), 0.1)
	if err := s.Append([]Item{cur}); err != nil {
		t.Fatal(err)
	}
	if p.w != nil {
		t.Fatal("the 12:00 partition kept its writer at 14:01")
	}
	if s.parts[t0.Add(2*time.Hour).UnixNano()].w == nil {
		t.Fatal("the current partition lost its writer")
	}
	late := stackItem("n", 3, "c", t0.Add(2*time.Minute), 0.1)
	if err := s.Append([]Item{late}); err != nil {
		t.Fatal(err)
	}
	checkItems(t, s, []Item{old, late, cur})
}

// TestReadBackChecksCRC: a byte flipped under an open store is caught when
// the item is read back, not returned.
func TestReadBackChecksCRC(t *testing.T) {
	dir := t.TempDir()
	now := t0.Add(time.Hour)
	s := openStore(t, dir, &now, 0)
	defer s.Close()
	if err := s.Append([]Item{stackItem("n", 1, strings.Repeat("a", 40000), t0, 0.1), stackItem("n", 2, "b", t0.Add(time.Second), 0.1)}); err != nil {
		t.Fatal(err)
	}
	checkItems(t, s, []Item{stackItem("n", 1, strings.Repeat("a", 40000), t0, 0.1), stackItem("n", 2, "b", t0.Add(time.Second), 0.1)})
	path := partFile(t, dir)
	b, _ := os.ReadFile(path)
	for _, at := range []int{100, len(b) - 10} { // in the split record, in the one after
		c := bytes.Clone(b)
		c[at] ^= 0x20
		os.WriteFile(path, c, 0o644)
		if r, err := s.Select(Query{}); err == nil {
			t.Fatalf("flipped byte %d: no error, %d items", at, len(r.Items))
		}
	}
}
