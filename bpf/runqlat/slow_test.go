package runqlat

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

// TestSlowPathOffCPUStacks watches testdata/slowpath.c, whose
// slow_path_sleep sleeps 50 ms per call in a nanosleep made from inside it,
// and checks the off-CPU slow events: each at least the 50 ms the kernel
// promises, starting inside the test's own CLOCK_MONOTONIC window, with a
// user stack through slow_path_sleep (its bounds from the program's printed
// address and its ELF symbol size, not from this package) and a kernel
// stack of kernel addresses.
func TestSlowPathOffCPUStacks(t *testing.T) {
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

	const calls, ms = 6, 50
	sp := testutil.StartSlowPath(t, calls, ms)
	pid := sp.Cmd.Process.Pid
	if err := p.Watch(pid); err != nil {
		t.Fatal(err)
	}
	begin := bpf.MonotonicNs()
	sp.Go()

	var got []bpf.SlowEvent
	var stacks [][2][]uint64
	deadline := time.Now().Add(calls*ms*time.Millisecond + 2*time.Second)
	r.SetDeadline(deadline)
	var ev bpf.SlowEvent
	for len(got) < calls-1 {
		if err := r.Read(&ev); errors.Is(err, os.ErrDeadlineExceeded) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if ev.PID != uint32(pid) || ev.Kind != bpf.SlowOffCPU {
			continue
		}
		u, err := r.Stack(ev.UserStack, nil)
		if err != nil {
			t.Fatalf("user stack %d: %v", ev.UserStack, err)
		}
		k, err := r.Stack(ev.KernelStack, nil)
		if err != nil {
			t.Fatalf("kernel stack %d: %v", ev.KernelStack, err)
		}
		got = append(got, ev)
		stacks = append(stacks, [2][]uint64{u, k})
	}
	end := bpf.MonotonicNs()
	// The first call's switch-out may precede nothing: all calls are
	// watched, but allow one to be cut by the read deadline.
	if len(got) < calls-1 {
		t.Fatalf("%d off-CPU events of pid %d, want >= %d", len(got), pid, calls-1)
	}
	for i, ev := range got {
		u, k := stacks[i][0], stacks[i][1]
		t.Logf("event %d: %.2f ms, comm %q, user %d frames, kernel %d frames", i, float64(ev.Duration)/1e6, ev.Comm, len(u), len(k))
		if ev.Duration < ms*1e6 || ev.Duration > ms*1e6+1e9 {
			t.Errorf("event %d: duration %d ns, want >= %d ms (and not a second more)", i, ev.Duration, ms)
		}
		if ev.Start < begin || ev.Start+ev.Duration > end {
			t.Errorf("event %d: [%d, +%d] outside the test's monotonic window [%d, %d]", i, ev.Start, ev.Duration, begin, end)
		}
		if ev.Comm != "slowpath" || ev.TID != uint32(pid) {
			t.Errorf("event %d: comm %q tid %d, want slowpath %d", i, ev.Comm, ev.TID, pid)
		}
		if !sp.Contains(u) {
			t.Errorf("event %d: user stack %x does not pass through slow_path_sleep [%#x, %#x)", i, u, sp.Start, sp.End)
		}
		if len(k) == 0 {
			t.Errorf("event %d: empty kernel stack (id %d)", i, ev.KernelStack)
		}
		for _, a := range k {
			if a < 0xffff800000000000 {
				t.Errorf("event %d: kernel frame %#x is a user address", i, a)
			}
		}
	}
	n, err := r.ClearStacks()
	if err != nil || n == 0 {
		t.Fatalf("ClearStacks: %d, %v; want the stacks read above", n, err)
	}
	if _, err := r.Stack(got[0].UserStack, nil); !errors.Is(err, bpf.ErrStackGone) {
		t.Fatalf("stack after ClearStacks: %v, want ErrStackGone", err)
	}
	if d, err := r.Dropped(); err != nil || d != 0 {
		t.Fatalf("dropped %d, %v", d, err)
	}
}

// TestSlowEventsOff checks that without SlowEvents there is no reader.
func TestSlowEventsOff(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := Load(DefaultOptions())
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()
	if p.Slow() != nil {
		t.Fatal("Slow() is not nil with SlowEvents unset")
	}
}

// TestSlowRunQueueEvents pins three spinners to one CPU and sends every
// wait of at least 2^-10 s (976 563 ns, so exactly the waits the histogram
// buckets above 2^-10 s hold) as a slow event. Checked against the
// program's own histograms and against each other: per spinner, the
// run-queue events are the histogram's count above 2^-10 s (less at most
// two waits begun before Watch); every run-queue wait ends an off-CPU
// time at the same switch-in, at least as long; a spinner leaves the CPU
// only when preempted, where one switch stamps both starts, so the two are
// equal except for the wait that follows SIGCONT (stopped, then woken); the
// stacks are where it was preempted: a user stack and a kernel one.
func TestSlowRunQueueEvents(t *testing.T) {
	testutil.RequireRoot(t)
	opts := DefaultOptions()
	opts.SlowEvents = 976563 * time.Nanosecond
	opts.RingBufferBytes = 1 << 20
	p, err := Load(opts)
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()
	r := p.Slow()

	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	cpu := 0
	for !allowed.IsSet(cpu) {
		cpu++
	}
	var one unix.CPUSet
	one.Set(cpu)
	var kids []*exec.Cmd
	defer func() {
		for _, k := range kids {
			_ = k.Process.Kill()
			_ = k.Wait()
		}
	}()
	pids := map[uint32]bool{}
	for range 3 {
		k := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := k.Start(); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, k)
		pid := k.Process.Pid
		if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// Stopped, so its first run (and the wait before it) is over.
		testutil.WaitStopped(t, pid)
		if err := unix.SchedSetaffinity(pid, &one); err != nil {
			t.Fatal(err)
		}
		if err := p.Watch(pid); err != nil {
			t.Fatal(err)
		}
		pids[uint32(pid)] = true
	}

	type key struct {
		pid             uint32
		start, duration uint64
	}
	runq := map[uint32][]key{}
	offcpu := map[[2]uint64]uint64{} // (pid, end) → duration
	stacked := map[uint32]int{}
	// The reader stops at a deadline set before it starts: a deadline set
	// while Read blocks does not wake it.
	r.SetDeadline(time.Now().Add(900 * time.Millisecond))
	done := make(chan error, 1)
	go func() {
		var ev bpf.SlowEvent
		for {
			if err := r.Read(&ev); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					err = nil
				}
				done <- err
				return
			}
			if !pids[ev.PID] {
				continue
			}
			k := key{ev.PID, ev.Start, ev.Duration}
			switch ev.Kind {
			case bpf.SlowRunQueue:
				runq[ev.PID] = append(runq[ev.PID], k)
				u, err1 := r.Stack(ev.UserStack, nil)
				kst, err2 := r.Stack(ev.KernelStack, nil)
				if err1 == nil && err2 == nil && len(u) > 0 && len(kst) > 0 {
					stacked[ev.PID]++
				}
			case bpf.SlowOffCPU:
				offcpu[[2]uint64{uint64(ev.PID), ev.Start + ev.Duration}] = ev.Duration
			}
		}
	}()
	for _, k := range kids {
		_ = unix.Kill(k.Process.Pid, unix.SIGCONT)
	}
	time.Sleep(600 * time.Millisecond)
	for _, k := range kids {
		_ = unix.Kill(k.Process.Pid, unix.SIGSTOP)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	hists, err := p.PIDRunQueue()
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := r.Dropped(); d != 0 {
		t.Fatalf("%d events dropped", d)
	}
	for pid := range pids {
		h := hists[pid]
		want := h.CountAbove(1.0 / 1024)
		got := uint64(len(runq[pid]))
		t.Logf("pid %d: %d run-queue events, histogram %d waits above 2^-10 s (of %d); %d with both stacks", pid, got, want, h.Count(), stacked[pid])
		if got > want || want-got > 2 || got == 0 {
			t.Errorf("pid %d: %d run-queue events, histogram holds %d waits above 2^-10 s", pid, got, want)
		}
		unequal := 0
		for _, k := range runq[pid] {
			if k.duration < 976563 {
				t.Errorf("pid %d: event of %d ns below the threshold", pid, k.duration)
			}
			off, ok := offcpu[[2]uint64{uint64(pid), k.start + k.duration}]
			if !ok || off < k.duration {
				t.Errorf("pid %d: run-queue wait %+v ends no off-CPU time at least as long (%d, %v)", pid, k, off, ok)
			}
			if off != k.duration {
				unequal++
			}
		}
		if unequal > 1 {
			t.Errorf("pid %d: %d run-queue waits differ from their off-CPU time; only the one after SIGCONT may", pid, unequal)
		}
		if stacked[pid] < len(runq[pid])*9/10 {
			t.Errorf("pid %d: only %d of %d run-queue events with user and kernel stacks", pid, stacked[pid], len(runq[pid]))
		}
	}
}
