package records

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/tsdb/wlog"
)

// crash abandons s the way a dying process does: file descriptors go away,
// nothing is synced or sealed, the directory lock is released. The page
// cache keeps what was written, as it does when a process is killed.
func crash(s *Store) {
	close(s.stop)
	s.bg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.wal != nil {
		s.wal.abandon()
	}
	_ = s.unlock()
}

// lastSegment returns the path of the newest WAL segment that holds data.
func lastSegment(t testing.TB, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, walDirName, "*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	for i := len(m) - 1; i >= 0; i-- {
		if fileSize(t, m[i]) > 0 {
			return m[i]
		}
	}
	t.Fatal("no WAL segment holds data")
	return ""
}

// wlogFragment frames payload as one whole (full) wlog record, as
// tsdb/wlog writes one that fits its page: type 1, length u16 BE, crc32c
// u32 BE, payload.
func wlogFragment(payload []byte) []byte {
	b := []byte{1, byte(len(payload) >> 8), byte(len(payload))}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(payload, castagnoli))
	return append(b, payload...)
}

// recordOffsets lists where each record of a segment starts, read with
// tsdb/wlog's own reader.
func recordOffsets(t testing.TB, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := wlog.NewReader(f)
	var offs []int64
	var at int64
	for r.Next() {
		offs = append(offs, at)
		at = r.Offset()
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return offs
}

// TestCrashTornTail appends acknowledged batches, then leaves a partly
// written record at the end of the WAL — a write torn by a crash — at every
// kind of cut point. Reopening must keep every acknowledged record, drop
// the torn record and truncate the segment back to the last whole record.
func TestCrashTornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	var acked []Record
	for i := range 30 {
		b := []Record{randRecord(rng, t0+int64(i)*100, 30), randRecord(rng, t0+int64(i)*100+7, 3)}
		if err := s.Append(b); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, b...)
	}
	crash(s)
	walPath := lastSegment(t, dir)
	goodSize := fileSize(t, walPath)

	inflight := []Record{randRecord(rng, t0+5000, 20)}
	entry := wlogFragment((&logBatch{Seq: 31, Gen: 1, PartStart: t0, PartDur: partDur.Milliseconds(), Records: inflight}).Marshal(nil))
	for _, cut := range []int{1, 3, 7, 8, len(entry) / 2, len(entry) - 4, len(entry) - 1} {
		t.Run(fmt.Sprintf("cut at %d of %d", cut, len(entry)), func(t *testing.T) {
			f, err := os.OpenFile(walPath, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(entry[:cut]); err != nil {
				t.Fatal(err)
			}
			f.Close()
			s := openTest(t, dir, nil)
			defer crash(s)
			requireSameRecords(t, selectAll(t, s, 0, 1<<62), sortedByTime(acked))
			if got := fileSize(t, walPath); got != goodSize {
				t.Fatalf("wal segment is %d bytes after open, want the torn tail cut back to %d", got, goodSize)
			}
		})
	}

	// After recovery the store appends and stays durable across another
	// crash.
	s = openTest(t, dir, nil)
	more := []Record{randRecord(rng, t0+9000, 5)}
	if err := s.Append(more); err != nil {
		t.Fatal(err)
	}
	crash(s)
	s = openTest(t, dir, nil)
	defer s.Close()
	requireSameRecords(t, selectAll(t, s, 0, 1<<62), sortedByTime(append(acked, more...)))
}

// TestCrashCorruptMiddle flips a byte inside an acknowledged record that
// has records after it: Open must refuse, naming the file and the record's
// offset, rather than silently drop what follows. The flips hit the
// length, the checksum, the payload and its last byte (wlog's type byte
// has three bits no reader looks at, so a flip there is no corruption).
func TestCrashCorruptMiddle(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	for i := range 10 {
		if err := s.Append([]Record{randRecord(rng, t0+int64(i), 10)}); err != nil {
			t.Fatal(err)
		}
	}
	crash(s)
	walPath := lastSegment(t, dir)
	offsets := recordOffsets(t, walPath)
	if len(offsets) != 10 {
		t.Fatalf("%d records in %s, want 10", len(offsets), walPath)
	}
	data, err := os.ReadFile(walPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{offsets[4] + 1, offsets[4] + 5, offsets[4] + 30, offsets[5] - 1} {
		bad := append([]byte(nil), data...)
		bad[at] ^= 0x40
		if err := os.WriteFile(walPath, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(Options{Dir: dir, PartitionDuration: partDur})
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.File != walPath || ce.Offset != offsets[4] {
			t.Fatalf("flip at %d: Open = %v, want corruption of %s at offset %d", at, err, walPath, offsets[4])
		}
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

const crashChildEnv = "TAILROOT_RECORDS_CRASH_CHILD"

// childBatch is batch i of the child's stream, reproducible from i alone.
// Times advance 40 ms a batch over 2 s partitions, so a run crosses many
// partitions and seals by time and by size while it is killed.
func childBatch(i int) []Record {
	rng := rand.New(rand.NewPCG(uint64(i), 99))
	b := make([]Record, 1+i%4)
	for j := range b {
		b[j] = randRecord(rng, t0+int64(i)*40+int64(j), rng.IntN(90))
		b[j].RequestID = fmt.Sprintf("b%06d-%d", i, j)
	}
	return b
}

func childOptions(dir string, round int) Options {
	o := DefaultOptions()
	o.Dir = dir
	o.PartitionDuration = 2 * time.Second
	o.MaxSegmentBytes = 48 << 10
	o.SyncEveryWrite = round%2 == 1
	return o
}

// runCrashChild appends batches from the given index until it is killed,
// printing "acked N" after Append of batch N returned.
func runCrashChild(spec string) {
	var dir string
	var from, round int
	if _, err := fmt.Sscanf(spec, "%d %d %s", &from, &round, &dir); err != nil {
		fmt.Println("bad spec:", err)
		os.Exit(2)
	}
	s, err := Open(childOptions(dir, round))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	for i := from; ; i++ {
		if err := s.Append(childBatch(i)); err != nil {
			fmt.Println("append:", err)
			os.Exit(2)
		}
		fmt.Printf("acked %d\n", i)
	}
}

// TestCrashKill9 runs the test binary as a child that appends in a loop and
// reports each acknowledged batch on stdout, kills it with SIGKILL, reopens
// the directory and checks that every acknowledged batch is there whole and
// that nothing beyond the one in-flight batch is. Three rounds on the same
// directory, alternating group commit and SyncEveryWrite.
func TestCrashKill9(t *testing.T) {
	if spec := os.Getenv(crashChildEnv); spec != "" {
		runCrashChild(spec)
		return
	}
	if testing.Short() {
		t.Skip("spawns and kills child processes")
	}
	dir := t.TempDir()
	next := 0
	maybe := map[int]bool{} // batches in flight when a child was killed
	for round := range 3 {
		target := 60 + 70*round
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill9$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %s", crashChildEnv, next, round, dir))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lastAcked, killed := next-1, false
		timer := time.AfterFunc(20*time.Second, func() { _ = cmd.Process.Kill() })
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			n, ok := strings.CutPrefix(line, "acked ")
			if !ok {
				t.Fatalf("child said %q", line)
			}
			v, err := strconv.Atoi(n)
			if err != nil || v != lastAcked+1 {
				t.Fatalf("child acked %q after %d", n, lastAcked)
			}
			lastAcked = v
			if !killed && lastAcked-next >= target {
				killed = true
				if err := cmd.Process.Kill(); err != nil { // SIGKILL
					t.Fatal(err)
				}
			}
		}
		timer.Stop()
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: child stopped after batch %d without being killed", round, lastAcked)
		}

		s, err := Open(childOptions(dir, round))
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		got := map[string]Record{}
		for _, r := range selectAll(t, s, 0, 1<<62) {
			got[r.RequestID] = r
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		want, upper := 0, 0
		for i := 0; i <= lastAcked+1; i++ {
			b := childBatch(i)
			if maybe[i] || i == lastAcked+1 {
				// In flight when a child died: absent, whole, or (for a
				// batch spanning partitions) partly there.
				for _, r := range b {
					if g, ok := got[r.RequestID]; ok && diffRecord(g, r) != "" {
						t.Fatalf("round %d: in-flight record %s differs: %s", round, r.RequestID, diffRecord(g, r))
					}
				}
				upper += len(b)
				continue
			}
			for _, r := range b {
				g, ok := got[r.RequestID]
				if !ok {
					t.Fatalf("round %d: acknowledged record %s (batch %d of %d) lost", round, r.RequestID, i, lastAcked)
				}
				if d := diffRecord(g, r); d != "" {
					t.Fatalf("round %d: record %s: %s", round, r.RequestID, d)
				}
				want++
			}
		}
		if len(got) < want || len(got) > want+upper {
			t.Fatalf("round %d: %d records stored, want %d acknowledged plus at most %d in flight", round, len(got), want, upper)
		}
		t.Logf("round %d: killed after %d acknowledged batches; %d records recovered, %d of them in flight",
			round, lastAcked+1, len(got), len(got)-want)
		maybe[lastAcked+1] = true
		next = lastAcked + 2 // the in-flight batch's ids are not reused
	}
}
