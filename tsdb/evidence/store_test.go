package evidence

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSpan(t *testing.T) {
	// Hand-computed spans.
	st := stackItem("n", 1, "a", t0, 0.5)
	if from, to := st.Span(); !from.Equal(t0) || !to.Equal(t0.Add(500*time.Millisecond)) {
		t.Errorf("stack span %v..%v, want t0..t0+500ms", from, to)
	}
	st.Start = time.Time{}
	if from, to := st.Span(); !from.Equal(st.Time) || !to.Equal(st.Time) {
		t.Errorf("stack without start: %v..%v, want the instant %v", from, to, st.Time)
	}
	// Calls at +3 s and +1 s, 10 ms each: first start +1 s, last end +3.01 s.
	tl := timelineItem("n", 2, t0, 3*time.Second, time.Second)
	if from, to := tl.Span(); !from.Equal(t0.Add(time.Second)) || !to.Equal(t0.Add(3010*time.Millisecond)) {
		t.Errorf("timeline span %v..%v, want t0+1s..t0+3.01s", from, to)
	}
}

func TestRoundTripAndFilters(t *testing.T) {
	now := t0.Add(time.Hour)
	s := openStore(t, t.TempDir(), &now, 0)
	defer s.Close()
	items := []Item{
		stackItem("node-a", 100, "slowpath", t0.Add(1*time.Second), 0.050),
		stackItem("node-a", 101, "python3", t0.Add(2*time.Second), 0.200),
		stackItem("node-b", 100, "slowpath", t0.Add(3*time.Second), 0.120),
		timelineItem("node-a", 100, t0.Add(4*time.Second), time.Second, 2*time.Second),
		// Another partition (1 h partitions).
		stackItem("node-a", 100, "slowpath", t0.Add(90*time.Minute), 0.070),
	}
	items[1].Probe = "syscalls"
	items[1].Detail = "futex"
	if err := s.Append(items); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Items != 5 || st.Partitions != 2 {
		t.Fatalf("stats %+v, want 5 items in 2 partitions", st)
	}

	all, err := s.Select(Query{})
	if err != nil {
		t.Fatal(err)
	}
	if all.Matched != 5 || len(all.Items) != 5 {
		t.Fatalf("all: %d matched, %d items", all.Matched, len(all.Items))
	}
	// Time order by span start: 0, 1, 2, 3 (first call at +5 s), 4; each
	// the canonical JSON of what was appended.
	for i, raw := range all.Items {
		if string(raw) != mustJSON(t, items[i]) {
			t.Errorf("item %d:\n got %s\nwant %s", i, raw, mustJSON(t, items[i]))
		}
	}

	cases := []struct {
		name string
		q    Query
		want []int // indexes into items, in result order
	}{
		{"window overlaps event 0 only", Query{Start: t0.Add(1040 * time.Millisecond), End: t0.Add(1060 * time.Millisecond)}, []int{0}},
		{"window just after event 0 ends", Query{Start: t0.Add(1051 * time.Millisecond), End: t0.Add(1999 * time.Millisecond)}, nil},
		{"kind", Query{Kind: KindCUDATimeline}, []int{3}},
		{"node", Query{Node: "node-b"}, []int{2}},
		{"pid", Query{PID: 101}, []int{1}},
		{"comm", Query{Comm: "slowpath", Node: "node-a"}, []int{0, 4}},
		{"probe", Query{Probe: "syscalls"}, []int{1}},
		{"slowest stacks", Query{Kind: KindStack, Slowest: true}, []int{1, 2, 4, 0}},
		{"slowest 2", Query{Kind: KindStack, Slowest: true, Limit: 2}, []int{1, 2}},
		{"first partition only", Query{End: t0.Add(time.Hour - 1)}, []int{0, 1, 2, 3}},
		{"timeline by its calls", Query{Start: t0.Add(5 * time.Second), End: t0.Add(5 * time.Second)}, []int{3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := s.Select(c.q)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Items) != len(c.want) {
				t.Fatalf("%d items, want %d", len(r.Items), len(c.want))
			}
			for i, w := range c.want {
				if string(r.Items[i]) != mustJSON(t, items[w]) {
					t.Errorf("result %d is not item %d: %s", i, w, r.Items[i])
				}
			}
			if c.q.Limit == 0 && r.Matched != len(c.want) {
				t.Errorf("matched %d, want %d", r.Matched, len(c.want))
			}
		})
	}
	if r, _ := s.Select(Query{Kind: KindStack, Limit: 2}); r.Matched != 4 {
		t.Errorf("matched before limit %d, want 4", r.Matched)
	}
}

func TestRestartKeepsItems(t *testing.T) {
	dir := t.TempDir()
	now := t0.Add(time.Hour)
	s := openStore(t, dir, &now, 0)
	a := []Item{stackItem("n", 1, "a", t0, 0.1), timelineItem("n", 2, t0, time.Second)}
	if err := s.Append(a); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(a); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	s = openStore(t, dir, &now, 0)
	b := stackItem("n", 3, "c", t0.Add(30*time.Second), 0.3)
	if err := s.Append([]Item{b}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, &now, 0)
	defer s.Close()
	got := decodeItems(t, must(s.Select(Query{})))
	want := []Item{a[0], a[1], b}
	if len(got) != 3 {
		t.Fatalf("%d items after two restarts, want 3", len(got))
	}
	for i := range want {
		if mustJSON(t, got[i]) != mustJSON(t, want[i]) {
			t.Errorf("item %d: %s, want %s", i, mustJSON(t, got[i]), mustJSON(t, want[i]))
		}
	}
	if _, err := Open(Options{Dir: dir}); err == nil {
		t.Fatal("second Open of a locked directory succeeded")
	}
}

func must(r Result, err error) Result {
	if err != nil {
		panic(err)
	}
	return r
}

// partFile returns the single wlog segment of the single partition of dir.
func partFile(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "evidence-*", "0*"))
	if len(m) != 1 {
		t.Fatalf("partition segments %v, want 1", m)
	}
	return m[0]
}

func TestTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	now := t0.Add(time.Hour)
	s := openStore(t, dir, &now, 0)
	if err := s.Append([]Item{stackItem("n", 1, "a", t0, 0.1)}); err != nil {
		t.Fatal(err)
	}
	good := s.Stats().Bytes
	if err := s.Append([]Item{stackItem("n", 2, "b", t0.Add(time.Second), 0.2)}); err != nil {
		t.Fatal(err)
	}
	full := s.Stats().Bytes
	s.Close()
	// A crash halfway through the second record's write.
	path := partFile(t, dir)
	cut := good + (full-good)/2
	if err := os.Truncate(path, cut); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, &now, 0)
	defer s.Close()
	st := s.Stats()
	if st.Items != 1 || st.Bytes != good || st.CorruptBytes != cut-good {
		t.Fatalf("stats %+v, want 1 item, %d bytes, %d corrupt bytes", st, good, cut-good)
	}
	if fi, _ := os.Stat(path); fi.Size() != good {
		t.Fatalf("file is %d bytes, want cut back to %d", fi.Size(), good)
	}
	// Appends continue after the cut.
	if err := s.Append([]Item{stackItem("n", 3, "c", t0.Add(2*time.Second), 0.3)}); err != nil {
		t.Fatal(err)
	}
	got := decodeItems(t, must(s.Select(Query{})))
	if len(got) != 2 || got[0].PID != 1 || got[1].PID != 3 {
		t.Fatalf("items %+v, want pids 1 and 3", got)
	}
}

func TestCorruptRecordCutsRest(t *testing.T) {
	dir := t.TempDir()
	now := t0.Add(time.Hour)
	s := openStore(t, dir, &now, 0)
	for i := range 3 {
		if err := s.Append([]Item{stackItem("n", uint32(i+1), "a", t0.Add(time.Duration(i)*time.Second), 0.1)}); err != nil {
			t.Fatal(err)
		}
	}
	full := s.Stats().Bytes
	s.Close()
	path := partFile(t, dir)
	b, _ := os.ReadFile(path)
	// Flip a byte inside the second record's JSON: its checksum fails; the
	// records after it cannot be trusted to be framed right and are cut
	// too. Record sizes are equal here (same shapes, one-digit pids), and
	// the three share the segment's first page.
	rec := full / 3
	b[rec+rec-10] ^= 0xff
	os.WriteFile(path, b, 0o644)
	s = openStore(t, dir, &now, 0)
	defer s.Close()
	st := s.Stats()
	if st.Items != 1 || st.CorruptBytes != 2*rec {
		t.Fatalf("stats %+v, want 1 item and %d corrupt bytes", st, 2*rec)
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, partFileV1(0)), []byte("NOTMAGIC and more"), 0o644)
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "not an evidence file") {
		t.Fatalf("foreign file: %v", err)
	}
	// A version 1 file cut inside its magic (crash right after creation)
	// becomes an empty partition.
	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, partFileV1(0)), []byte("TREV"), 0o644)
	os.WriteFile(filepath.Join(dir, "unrelated.txt"), []byte("x"), 0o644)
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := s.Stats(); st.Partitions != 1 || st.Items != 0 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := Open(Options{}); err == nil {
		t.Fatal("empty Dir accepted")
	}
	if _, err := Open(Options{Dir: t.TempDir(), Retention: -time.Second}); err == nil {
		t.Fatal("negative retention accepted")
	}
}

func TestRetention(t *testing.T) {
	dir := t.TempDir()
	now := t0.Add(time.Minute)
	s := openStore(t, dir, &now, 3*time.Hour)
	old := stackItem("n", 1, "a", t0.Add(10*time.Minute), 0.5)    // partition 12:00
	mid := stackItem("n", 2, "b", t0.Add(70*time.Minute), 0.5)    // partition 13:00
	newer := stackItem("n", 3, "c", t0.Add(150*time.Minute), 0.5) // partition 14:00
	if err := s.Append([]Item{old, mid, newer}); err != nil {
		t.Fatal(err)
	}
	// 15:30: the cutoff is 12:30. old ended at 12:10:00.5: gone from
	// queries; its partition [12:00, 13:00) ends after the cutoff, so the
	// file stays until 16:00.
	now = t0.Add(210 * time.Minute)
	got := decodeItems(t, must(s.Select(Query{})))
	if len(got) != 2 || got[0].PID != 2 {
		t.Fatalf("at 15:30: %d items (first pid %d), want mid and newer", len(got), got[0].PID)
	}
	if n, err := s.ApplyRetention(now); err != nil || n != 0 {
		t.Fatalf("ApplyRetention at 15:30: %d, %v; want 0", n, err)
	}
	// 16:00: cutoff 13:00, the 12:00 partition is complete and expired.
	now = t0.Add(240 * time.Minute)
	if n, err := s.ApplyRetention(now); err != nil || n != 1 {
		t.Fatalf("ApplyRetention at 16:00: %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, partName(t0.UnixNano()))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("12:00 partition file still there: %v", err)
	}
	if st := s.Stats(); st.Partitions != 2 || st.Items != 2 {
		t.Fatalf("stats %+v", st)
	}
	s.Close()
	// Reopening at 17:20 (cutoff 14:20) applies retention on open: the
	// 13:00 partition goes, the 14:00 one stays.
	now = t0.Add(320 * time.Minute)
	s = openStore(t, dir, &now, 3*time.Hour)
	defer s.Close()
	if st := s.Stats(); st.Partitions != 1 || st.Items != 1 {
		t.Fatalf("after reopen: stats %+v, want the 14:00 partition only", st)
	}
}
