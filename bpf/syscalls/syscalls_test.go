package syscalls

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }

// TestKnownSyscalls makes n nanosleep(100µs), getpid and failing close
// calls from this process and checks counts, error counts, and that the
// nanosleep latencies are bounded by the kernel's promise (never shorter
// than requested). TestExactCountsChildProcess checks exact counts.
func TestKnownSyscalls(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := Load(DefaultOptions())
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()
	pid := os.Getpid()
	if err := p.Watch(pid); err != nil {
		t.Fatal(err)
	}
	defer p.Forget(pid)

	const n = 200
	sleep := unix.NsecToTimespec(int64(100 * time.Microsecond))
	start := time.Now()
	// n whole sleeps: one a signal interrupts (the Go runtime preempts
	// with SIGURG) returns early with EINTR and is slept again in full, so
	// it adds one call and at most one short one, as the runtime's own
	// usleeps do, and the checks below allow for those.
	for done := 0; done < n; {
		switch err := unix.Nanosleep(&sleep, nil); err {
		case nil:
			done++
		case unix.EINTR:
		default:
			t.Fatal(err)
		}
	}
	loop := time.Since(start)
	for range 1000 {
		unix.Getpid()
	}
	for range 50 {
		if err := unix.Close(-1); err != unix.EBADF {
			t.Fatalf("close(-1) = %v, want EBADF", err)
		}
	}
	if err := p.Unwatch(pid); err != nil {
		t.Fatal(err)
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}

	ns := st[Key{PID: uint32(pid), Nr: unix.SYS_NANOSLEEP}]
	gp := st[Key{PID: uint32(pid), Nr: unix.SYS_GETPID}]
	cl := st[Key{PID: uint32(pid), Nr: unix.SYS_CLOSE}]
	t.Logf("nanosleep: %d calls, mean %.1f µs (loop %v); getpid: %d calls, mean %.0f ns; close: %d calls, %d errors",
		ns.Latency.Count(), float64(ns.Latency.SumNs)/float64(max(ns.Latency.Count(), 1))/1e3, loop,
		gp.Latency.Count(), float64(gp.Latency.SumNs)/float64(max(gp.Latency.Count(), 1)), cl.Latency.Count(), cl.Errors)

	// The Go runtime may add nanosleeps (usleep) of its own: >= n.
	if ns.Latency.Count() < n {
		t.Fatalf("nanosleep count %d, want >= %d", ns.Latency.Count(), n)
	}
	if gp.Latency.Count() < 1000 {
		t.Fatalf("getpid count %d, want >= 1000", gp.Latency.Count())
	}
	if cl.Errors < 50 || cl.Latency.Count() < 50 {
		t.Fatalf("close: %d calls %d errors, want >= 50 each", cl.Latency.Count(), cl.Errors)
	}
	// nanosleep(100µs) never returns early: nothing in buckets whose upper
	// bound is below 100µs (slot 17 ends at 2^-13 s = 122 µs, slot 16 at
	// 61 µs).
	var early uint64
	for s := 0; s <= 16; s++ {
		early += ns.Latency.Slots[s]
	}
	if early > ns.Latency.Count()-n { // only runtime usleeps can be shorter
		t.Fatalf("%d nanosleeps shorter than 61 µs", early)
	}
	if ns.Latency.SumNs < n*uint64(100*time.Microsecond) {
		t.Fatalf("nanosleep total %d ns < %d x 100 µs", ns.Latency.SumNs, n)
	}
	// getpid is a few hundred ns; allow for a slow VM but not for ms.
	if mean := float64(gp.Latency.SumNs) / float64(gp.Latency.Count()); mean > 50e3 {
		t.Fatalf("getpid mean %.0f ns, implausible", mean)
	}

	// Unwatched: no further counting.
	for range 100 {
		unix.Getpid()
	}
	st2, _ := p.Stats()
	if g := st2[Key{PID: uint32(pid), Nr: unix.SYS_GETPID}]; g.Latency.Count() != gp.Latency.Count() {
		t.Fatalf("getpid counted after Unwatch: %d -> %d", gp.Latency.Count(), g.Latency.Count())
	}
	if err := p.Forget(pid); err != nil {
		t.Fatal(err)
	}
	st3, _ := p.Stats()
	for k := range st3 {
		if k.PID == uint32(pid) {
			t.Fatalf("entry %+v left after Forget", k)
		}
	}
}

func TestStatsUnmarshal(t *testing.T) {
	b := make([]byte, StatsSize)
	binary.LittleEndian.PutUint64(b[8*10:], 3)        // slot 10
	binary.LittleEndian.PutUint64(b[8*64:], 2500)     // sum_ns
	binary.LittleEndian.PutUint64(b[StatsSize-8:], 1) // errors
	var s Stats
	if err := s.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if s.Latency.Slots[10] != 3 || s.Latency.SumNs != 2500 || s.Errors != 1 || s.Latency.Count() != 3 {
		t.Fatalf("got %+v", s)
	}
	if err := s.UnmarshalBinary(b[:StatsSize-1]); err == nil {
		t.Fatal("short input accepted")
	}
}

func FuzzStatsUnmarshal(f *testing.F) {
	f.Add(make([]byte, StatsSize))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Stats
		err := s.UnmarshalBinary(b)
		if (err == nil) != (len(b) == StatsSize) {
			t.Fatalf("len %d: err %v", len(b), err)
		}
		if err == nil && s.Errors != binary.LittleEndian.Uint64(b[StatsSize-8:]) {
			t.Fatal("errors field misread")
		}
	})
}

// TestExactCountsChildProcess watches a single-threaded C process that
// makes exactly n nanosleep and n getpid calls (testdata/sysloop.c): the
// counts must be exact, and the nanosleep latencies must sum to no more
// than the loop's own wall time and no less than n x the requested sleep.
func TestExactCountsChildProcess(t *testing.T) {
	testutil.RequireRoot(t)
	bin := testutil.BuildC(t, t.TempDir(), "sysloop", []string{"sysloop.c"})
	p, err := Load(DefaultOptions())
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()

	const n, us = 100, 200
	cmd := exec.Command(bin, strconv.Itoa(n), strconv.Itoa(us))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	defer p.Forget(pid)
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("child did not start: %q", out.Text())
	}
	if err := p.Watch(pid); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "go")
	if !out.Scan() {
		t.Fatal("child printed no wall time")
	}
	wall, err := strconv.ParseUint(out.Text(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	ns := st[Key{PID: uint32(pid), Nr: unix.SYS_NANOSLEEP}]
	gp := st[Key{PID: uint32(pid), Nr: unix.SYS_GETPID}]
	t.Logf("child: nanosleep %d calls sum %.2f ms (loop wall %.2f ms); getpid %d calls", ns.Latency.Count(),
		float64(ns.Latency.SumNs)/1e6, float64(wall)/1e6, gp.Latency.Count())
	if ns.Latency.Count() != n || gp.Latency.Count() != n {
		t.Fatalf("counts nanosleep %d getpid %d, want exactly %d each", ns.Latency.Count(), gp.Latency.Count(), n)
	}
	if ns.Latency.SumNs > wall || ns.Latency.SumNs < n*us*1000 {
		t.Fatalf("nanosleep sum %d ns outside [%d, loop wall %d]", ns.Latency.SumNs, n*us*1000, wall)
	}
}
