package syscalls

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

// TestSlowSyscallStack watches testdata/slowpath.c (50 ms nanosleeps made
// from inside slow_path_sleep) and checks its slow events: every nanosleep
// is one, at least 50 ms long, carrying the system call number, a user
// stack through slow_path_sleep (bounds from the program's printed address
// and ELF symbol size) and no kernel stack. The program's other calls
// (write, exit) are faster than the threshold and absent.
func TestSlowSyscallStack(t *testing.T) {
	testutil.RequireRoot(t)
	opts := DefaultOptions()
	opts.SlowEvents = 20 * time.Millisecond
	p, err := Load(opts)
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()
	r := p.Slow()
	if r == nil {
		t.Fatal("Slow() is nil with SlowEvents set")
	}

	const calls, ms = 5, 50
	sp := testutil.StartSlowPath(t, calls, ms)
	pid := sp.Cmd.Process.Pid
	if err := p.Watch(pid); err != nil {
		t.Fatal(err)
	}
	defer p.Forget(pid)
	begin := bpf.MonotonicNs()
	sp.Go()

	r.SetDeadline(time.Now().Add(calls*ms*time.Millisecond + 2*time.Second))
	n := 0
	var ev bpf.SlowEvent
	for n < calls {
		if err := r.Read(&ev); errors.Is(err, os.ErrDeadlineExceeded) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if ev.PID != uint32(pid) {
			continue
		}
		n++
		u, err := r.Stack(ev.UserStack, nil)
		if err != nil {
			t.Fatalf("user stack %d: %v", ev.UserStack, err)
		}
		t.Logf("call %d: nr %d, %.2f ms, user stack %x", n, ev.Detail, float64(ev.Duration)/1e6, u)
		if ev.Kind != bpf.SlowSyscall || ev.Detail != unix.SYS_NANOSLEEP {
			t.Errorf("event kind %v nr %d, want syscalls nr %d", ev.Kind, ev.Detail, unix.SYS_NANOSLEEP)
		}
		if ev.Duration < ms*1e6 || ev.Start < begin || ev.Start+ev.Duration > bpf.MonotonicNs() {
			t.Errorf("event [%d, +%d ns]: want >= %d ms inside the test's window from %d", ev.Start, ev.Duration, ms, begin)
		}
		if ev.Comm != "slowpath" || ev.TID != uint32(pid) {
			t.Errorf("comm %q tid %d, want slowpath %d", ev.Comm, ev.TID, pid)
		}
		if !sp.Contains(u) {
			t.Errorf("user stack %x does not pass through slow_path_sleep [%#x, %#x)", u, sp.Start, sp.End)
		}
		if ev.KernelStack != bpf.NoStack {
			t.Errorf("kernel stack id %d, want NoStack", ev.KernelStack)
		}
	}
	if n != calls {
		t.Fatalf("%d slow calls of pid %d, want %d", n, pid, calls)
	}
}
