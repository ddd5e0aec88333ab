package records

import (
	"context"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

const (
	t0      = int64(1_700_000_400_000) // a multiple of 10 min
	tenMin  = int64(600_000)
	partDur = 10 * time.Minute
)

func openTest(t testing.TB, dir string, mod func(o *Options)) *Store {
	t.Helper()
	o := DefaultOptions()
	o.Dir = dir
	o.PartitionDuration = partDur
	if mod != nil {
		mod(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func selectAll(t testing.TB, s *Store, mint, maxt int64, ms ...*labels.Matcher) []Record {
	t.Helper()
	it := s.Select(context.Background(), mint, maxt, ms...)
	defer it.Close()
	var out []Record
	for it.Next() {
		out = append(out, it.At())
	}
	if err := it.Err(); err != nil {
		t.Fatalf("select: %v", err)
	}
	return out
}

func bruteForce(all []Record, mint, maxt int64, ms ...*labels.Matcher) []Record {
	var out []Record
	for _, r := range all {
		ok := r.Time >= mint && r.Time <= maxt
		for _, m := range ms {
			ok = ok && m.Matches(r.Labels.Get(m.Name))
		}
		if ok {
			out = append(out, r)
		}
	}
	return sortedByTime(out)
}

// heads names the store's open WAL generations as "<start>-<seq>.wal".
func heads(s *Store) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, p := range s.parts {
		if p.head != nil {
			out = append(out, fileName(p.start, p.head.seq, "wal"))
		}
	}
	slices.Sort(out)
	return out
}

func files(t testing.TB, dir, ext string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*."+ext))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// TestSelectMatchesBruteForce appends records across six partitions, out of
// order and with late arrivals, through seals by size and time, a Flush and
// a reopen, then checks random queries against a filter over the appended
// records: same records, same order (time, then append order).
func TestSelectMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	dir := t.TempDir()
	opt := func(o *Options) { o.MaxSegmentBytes = 128 << 10 }
	s := openTest(t, dir, opt)
	var all []Record
	const n = 6000
	for i := 0; i < n; {
		var batch []Record
		for range 1 + rng.IntN(40) {
			ts := t0 + int64(i)*6*tenMin/n + rng.Int64N(2000) - 1000
			if rng.IntN(20) == 0 { // late: up to 25 minutes old
				ts -= rng.Int64N(25 * 60_000)
			}
			batch = append(batch, randRecord(rng, max(ts, t0), rng.IntN(100)))
			i++
		}
		if err := s.Append(batch); err != nil {
			t.Fatal(err)
		}
		all = append(all, batch...)
		switch i / 40 {
		case n / 40 / 3:
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		case n / 40 * 2 / 3:
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTest(t, dir, opt)
		}
	}
	defer s.Close()
	st := s.Stats()
	if st.Records != int64(len(all)) || st.Segments < 6 || st.HeadRecords == 0 || st.HeadRecords == st.Records {
		t.Fatalf("stats %+v: want %d records across sealed segments and a head", st, len(all))
	}
	requireSameRecords(t, selectAll(t, s, 0, 1<<62), sortedByTime(all))

	mk := func(ty labels.MatchType, name, v string) *labels.Matcher { return labels.MustNewMatcher(ty, name, v) }
	pool := []*labels.Matcher{
		mk(labels.MatchEqual, "model", "mistral-7b"),
		mk(labels.MatchNotEqual, "instance", "gpu-3"),
		mk(labels.MatchRegexp, "model", "llama.*|qwen.*"),
		mk(labels.MatchNotRegexp, "instance", "gpu-[0-3]"),
		mk(labels.MatchEqual, "route", ""), // label absent
		mk(labels.MatchRegexp, "tenant", ".+"),
		mk(labels.MatchNotEqual, "job", "vllm"), // matches nothing
		mk(labels.MatchEqual, "instance", "gpu-9"),
	}
	for q := range 300 {
		mint := t0 - 1000 + rng.Int64N(6*tenMin+2000)
		maxt := mint + rng.Int64N(3*tenMin) - tenMin/4 // sometimes maxt < mint
		var ms []*labels.Matcher
		for _, m := range pool {
			if rng.IntN(5) == 0 {
				ms = append(ms, m)
			}
		}
		got := selectAll(t, s, mint, maxt, ms...)
		want := bruteForce(all, mint, maxt, ms...)
		if len(got) != len(want) {
			t.Fatalf("query %d [%d, %d] %v: %d records, want %d", q, mint, maxt, ms, len(got), len(want))
		}
		requireSameRecords(t, got, want)
	}
}

func TestAppendRejectsInvalidBatchWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	s := openTest(t, t.TempDir(), nil)
	defer s.Close()
	good := randRecord(rng, t0, 3)
	bad := randRecord(rng, t0+1, 3)
	bad.E2E += 1 // stages no longer add up
	err := s.Append([]Record{good, bad})
	if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), "record 1") {
		t.Fatalf("Append = %v, want ErrInvalidRecord naming record 1", err)
	}
	if st := s.Stats(); st.Records != 0 || st.WALBytes != 0 {
		t.Fatalf("stats after refused batch: %+v", st)
	}
	s2 := openTest(t, t.TempDir(), func(o *Options) { o.MaxSegmentBytes = 4096 })
	defer s2.Close()
	var big []Record
	for range 40 {
		big = append(big, randRecord(rng, t0, 50))
	}
	if err := s2.Append(big); err == nil || !strings.Contains(err.Error(), "MaxSegmentBytes") {
		t.Fatalf("oversized batch: %v", err)
	}
}

func TestSealOnPartitionCloseAndLateRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	defer s.Close()
	app := func(ts int64) Record {
		t.Helper()
		r := randRecord(rng, ts, 4)
		if err := s.Append([]Record{r}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	p0 := app(t0 + 5)
	app(t0 + tenMin + 1) // partition 1; partition 0 not yet due
	app(t0 + tenMin + tenMin/2 - 1)
	if got := files(t, dir, "seg"); len(got) != 0 {
		t.Fatalf("sealed early: %v", got)
	}
	app(t0 + tenMin + tenMin/2) // end of partition 0 + grace: due
	want0 := filepathSeg(t0, 1)
	if got := files(t, dir, "seg"); !slices.Equal(got, []string{want0}) {
		t.Fatalf("segments %v, want [%s]", got, want0)
	}
	if got := heads(s); len(got) != 1 || !strings.HasPrefix(got[0], itoa(t0+tenMin)+"-") {
		t.Fatalf("wals %v, want only partition 1", got)
	}
	// A late record for partition 0 opens generation 2 of it, not a
	// neighbour's WAL.
	late := app(t0 + 3)
	if got := heads(s); !slices.Contains(got, itoa(t0)+"-000002.wal") {
		t.Fatalf("late record: wals %v", got)
	}
	got := selectAll(t, s, t0, t0+tenMin-1)
	requireSameRecords(t, got, []Record{late, p0})
	// Crossing the next boundary seals both partitions 0 (gen 2) and 1.
	app(t0 + 2*tenMin + tenMin/2)
	wantSegs := []string{filepathSeg(t0, 1), filepathSeg(t0, 2), filepathSeg(t0+tenMin, 1)}
	if got := files(t, dir, "seg"); !slices.Equal(got, wantSegs) {
		t.Fatalf("segments %v, want %v", got, wantSegs)
	}
	requireSameRecords(t, selectAll(t, s, t0, t0+tenMin-1), []Record{late, p0})
}

func filepathSeg(start int64, seq int) string { return fileName(start, seq, "seg") }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestSealOnSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 38))
	dir := t.TempDir()
	s := openTest(t, dir, func(o *Options) { o.MaxSegmentBytes = 32 << 10 })
	defer s.Close()
	var all []Record
	for i := range 600 {
		r := randRecord(rng, t0+int64(i), 20)
		if err := s.Append([]Record{r}); err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	st := s.Stats()
	if st.Segments < 3 || st.WALBytes >= 32<<10 || st.Partitions != 1 {
		t.Fatalf("stats %+v: want several size-sealed segments in one partition", st)
	}
	requireSameRecords(t, selectAll(t, s, 0, 1<<62), all)
}

func TestRetention(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 40))
	dir := t.TempDir()
	s := openTest(t, dir, func(o *Options) { o.Retention = 30 * time.Minute })
	defer s.Close()
	var all []Record
	for i := range 60 { // one record a minute for an hour: partitions 0–5
		r := randRecord(rng, t0+int64(i)*60_000, 2)
		if err := s.Append([]Record{r}); err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	// now − 30 min = t0 + 30 min + 1 ms: partitions 0, 1, 2 end at or
	// before it and go; partition 3 ends at t0 + 40 min and stays.
	now := time.UnixMilli(t0 + 60*60_000 + 1)
	if err := s.ApplyRetention(now); err != nil {
		t.Fatal(err)
	}
	requireSameRecords(t, selectAll(t, s, 0, 1<<62), all[30:])
	for _, f := range append(files(t, dir, "seg"), heads(s)...) {
		start, _, _, _ := parseFileName(f)
		if start < t0+3*tenMin {
			t.Fatalf("file %s of a removed partition remains", f)
		}
	}
	if st := s.Stats(); st.Partitions != 3 || st.Records != 30 {
		t.Fatalf("stats %+v", st)
	}
	if err := s.Append([]Record{randRecord(rng, t0+25*60_000, 1)}); !errors.Is(err, ErrOutOfRetention) {
		t.Fatalf("append into removed partition: %v", err)
	}
	if err := s.Append([]Record{randRecord(rng, t0+30*60_000, 1)}); err != nil {
		t.Fatalf("append into kept partition: %v", err)
	}
}

func TestRetentionLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.Retention = 24 * time.Hour // records from 2023 are long past it
		o.RetentionCheckInterval = 10 * time.Millisecond
	})
	defer s.Close()
	if err := s.Append([]Record{randRecord(rng, t0, 1), randRecord(rng, t0+3*tenMin, 1)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Records != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("background retention did not run: %+v", s.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConcurrentAppend(t *testing.T) {
	for _, every := range []bool{false, true} {
		t.Run(map[bool]string{false: "group commit", true: "sync every write"}[every], func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir, func(o *Options) { o.SyncEveryWrite = every; o.MaxSegmentBytes = 64 << 10 })
			var mu sync.Mutex
			var all []Record
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(43, uint64(g)))
					for i := range 40 {
						b := []Record{randRecord(rng, t0+int64(i)*1000+int64(g), 10), randRecord(rng, t0+int64(i)*20_000, 10)}
						if err := s.Append(b); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						all = append(all, b...)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTest(t, dir, nil)
			defer s.Close()
			got := selectAll(t, s, 0, 1<<62)
			byID := map[string]Record{}
			for _, r := range got {
				byID[r.RequestID] = r
			}
			if len(got) != len(all) || len(byID) != len(all) {
				t.Fatalf("%d records (%d ids), want %d", len(got), len(byID), len(all))
			}
			for _, r := range all {
				if d := diffRecord(byID[r.RequestID], r); d != "" {
					t.Fatalf("%s: %s", r.RequestID, d)
				}
			}
			if !slices.IsSortedFunc(got, func(a, b Record) int { return cmpInt64(a.Time, b.Time) }) {
				t.Fatal("select not ordered by time")
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	if err := s.Append([]Record{randRecord(rand.New(rand.NewPCG(1, 1)), t0, 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir, PartitionDuration: partDur}); err == nil || !strings.Contains(err.Error(), "held by another process") {
		t.Fatalf("second open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append([]Record{randRecord(rand.New(rand.NewPCG(1, 1)), t0, 1)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if it := s.Select(context.Background(), 0, 1); it.Next() || !errors.Is(it.Err(), ErrClosed) {
		t.Fatalf("select after close: %v", it.Err())
	}
	if _, err := Open(Options{Dir: dir, PartitionDuration: time.Hour}); err == nil || !strings.Contains(err.Error(), "PartitionDuration changed") {
		t.Fatalf("open with another partition duration: %v", err)
	}
	for _, o := range []Options{
		{},
		{Dir: dir, PartitionDuration: time.Microsecond},
		{Dir: dir, Retention: -1},
		{Dir: dir, MaxSegmentBytes: 1 << 40},
		{Dir: dir, RetentionCheckInterval: -1},
	} {
		if _, err := Open(o); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}

func TestSelectContextCanceled(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	defer s.Close()
	if err := s.Append([]Record{randRecord(rand.New(rand.NewPCG(2, 2)), t0, 1)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	it := s.Select(ctx, 0, 1<<62)
	if it.Next() || !errors.Is(it.Err(), context.Canceled) {
		t.Fatalf("canceled select: next, err %v", it.Err())
	}
}

func TestOpenRemovesLeftovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	r := randRecord(rng, t0, 3)
	if err := s.Append([]Record{r}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// The sealed batch is still in the WAL (its log segment is the newest
	// one), as after a crash between the seal and the log's truncation;
	// and a half-written temporary file.
	if n := len(recordOffsets(t, lastSegment(t, dir))); n != 1 {
		t.Fatalf("%d records in the WAL after the seal, want the sealed batch still there", n)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.seg.tmp"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, nil)
	defer s.Close()
	if w, tmp := heads(s), files(t, dir, "tmp"); len(w) != 0 || len(tmp) != 0 {
		t.Fatalf("left over: wal %v tmp %v", w, tmp)
	}
	requireSameRecords(t, selectAll(t, s, 0, 1<<62), []Record{r})
}

// TestSelectDuringAppend reads while a writer appends across partition
// seals and size seals; run under -race it checks the head snapshot
// sharing. Every read must be time-ordered and see a growing prefix.
func TestSelectDuringAppend(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.MaxSegmentBytes = 32 << 10 })
	defer s.Close()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(47, 48))
		for i := range 300 {
			b := []Record{randRecord(rng, t0+int64(i)*10_000, 5), randRecord(rng, t0+int64(i)*10_000+1, 5)}
			if err := s.Append(b); err != nil {
				t.Error(err)
				return
			}
		}
	})
	last := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		got := selectAll(t, s, 0, 1<<62)
		if len(got) < last {
			t.Fatalf("select saw %d records after seeing %d", len(got), last)
		}
		if !slices.IsSortedFunc(got, func(a, b Record) int { return cmpInt64(a.Time, b.Time) }) {
			t.Fatal("select not ordered by time")
		}
		last = len(got)
	}
	wg.Wait()
	if last != 600 {
		t.Fatalf("final select saw %d records, want 600", last)
	}
}

// TestRetentionHold: a partition past retention is sealed and kept while
// the hold says so, for every one of its segments, and removed once the
// hold lets go.
func TestRetentionHold(t *testing.T) {
	held := map[string]bool{}
	var asked []string
	o := DefaultOptions()
	o.Dir = t.TempDir()
	o.Retention = time.Hour
	o.RetentionHold = func(ref SegmentRef) bool {
		asked = append(asked, ref.Name)
		return held[ref.Name]
	}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := Record{Time: 1000, Labels: labels.FromStrings("model", "m"), Stages: [NumStages]float64{0.5}, E2E: 0.5}
	if err := s.Append([]Record{r}); err != nil {
		t.Fatal(err)
	}
	held["0-000001.seg"] = true
	now := time.UnixMilli(10 * 3600 * 1000)
	if err := s.ApplyRetention(now); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Records != 1 || st.HeadRecords != 0 || st.Segments != 1 || len(asked) != 1 || asked[0] != "0-000001.seg" {
		t.Fatalf("held: stats %+v, asked %v; want the WAL sealed into 0-000001.seg and kept", st, asked)
	}
	refs, err := s.Segments()
	if err != nil || len(refs) != 1 || refs[0].Records != 1 || refs[0].MinTime != 1000 || refs[0].PartitionStart != 0 {
		t.Fatalf("segments %+v, %v", refs, err)
	}
	seg, crc, err := ReadSegmentFile(refs[0].Path)
	if err != nil || len(seg.Records) != 1 || seg.Records[0].E2E != 0.5 {
		t.Fatalf("read segment: %+v, %v", seg, err)
	}
	data, _ := os.ReadFile(refs[0].Path)
	if got, err := SegmentChecksum(refs[0].Path); err != nil || got != crc || crc != crc32.Checksum(data[:len(data)-4], castagnoli) {
		t.Fatalf("segment checksum %#x, %v; ReadSegmentFile says %#x", got, err, crc)
	}
	if ps, _ := s.HeldPartitions(0, 1<<40); len(ps) != 1 || ps[0] != 0 {
		t.Fatalf("held partitions %v", ps)
	}
	held["0-000001.seg"] = false
	if err := s.ApplyRetention(now); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Records != 0 || st.Partitions != 0 {
		t.Fatalf("released: stats %+v", st)
	}
	if ps, _ := s.HeldPartitions(0, 1<<40); len(ps) != 0 {
		t.Fatalf("held partitions after removal %v", ps)
	}
}
