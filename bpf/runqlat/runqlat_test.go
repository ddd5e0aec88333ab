package runqlat

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }

// runDelay reads the kernel's own run-queue wait total for a process
// (second field of /proc/PID/schedstat, ns), an independent reference.
func runDelay(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		t.Skipf("no schedstat (CONFIG_SCHED_INFO off?): %v", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		t.Fatalf("schedstat %q: want 3 fields", b)
	}
	v, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		t.Fatalf("schedstat %q: %v", b, err)
	}
	return v
}

// newCgroup makes a fresh cgroup v2 directory, or returns "" with the
// reason when the hierarchy is absent or read-only.
func newCgroup(t *testing.T) (dir, why string) {
	root, err := bpf.Cgroup2Mount()
	if err != nil {
		return "", err.Error()
	}
	dir = filepath.Join(root, fmt.Sprintf("tailroot-runqlat-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Sprintf("cannot create a cgroup under %s: %v", root, err)
	}
	t.Cleanup(func() {
		// The children are dead by now; the kernel may need a moment to
		// drop them from the cgroup.
		for range 50 {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("cgroup %s left behind", dir)
	})
	return dir, ""
}

// TestRunQueueContention pins more CPU-bound processes than there are CPUs
// (all onto one CPU) and checks the histograms against the kernel's own
// per-process run-queue accounting.
func TestRunQueueContention(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := Load(DefaultOptions())
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()

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

	cg, why := newCgroup(t)
	if cg == "" {
		t.Logf("per-cgroup check skipped: %s", why)
	}

	const n = 3 // three spinners on one CPU: each waits ~2/3 of the time
	var kids []*exec.Cmd
	defer func() {
		for _, k := range kids {
			_ = k.Process.Kill()
			_ = k.Wait()
		}
	}()
	for range n {
		k := exec.Command("/bin/sh", "-c", "while :; do :; done")
		// Stopped until watched and pinned, so all of its waits are seen.
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
		if cg != "" {
			if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
				t.Fatalf("move %d into %s: %v", pid, cg, err)
			}
		}
		if err := p.Watch(pid); err != nil {
			t.Fatal(err)
		}
	}
	before := map[int]uint64{}
	for _, k := range kids {
		before[k.Process.Pid] = runDelay(t, k.Process.Pid)
	}
	for _, k := range kids {
		_ = unix.Kill(k.Process.Pid, unix.SIGCONT)
	}
	time.Sleep(600 * time.Millisecond)
	for _, k := range kids {
		_ = unix.Kill(k.Process.Pid, unix.SIGSTOP)
	}
	for _, k := range kids { // let the stops land
		testutil.WaitStopped(t, k.Process.Pid)
	}

	runq, err := p.PIDRunQueue()
	if err != nil {
		t.Fatal(err)
	}
	offcpu, err := p.PIDOffCPU()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		pid := k.Process.Pid
		kernel := runDelay(t, pid) - before[pid]
		h, ho := runq[uint32(pid)], offcpu[uint32(pid)]
		t.Logf("pid %d: %d run-queue waits, sum %.1f ms (schedstat %.1f ms), >1ms: %d; off-CPU sum %.1f ms in %d",
			pid, h.Count(), float64(h.SumNs)/1e6, float64(kernel)/1e6, h.CountAbove(0.001), float64(ho.SumNs)/1e6, ho.Count())
		if h.Count() == 0 || h.SumNs == 0 {
			t.Fatalf("pid %d: no run-queue delay recorded", pid)
		}
		// With three spinners on one CPU each waits about 400 of 600 ms; the
		// scheduler's slices are ~1-4 ms, so many waits exceed 0.5 ms.
		if h.CountAbove(0.0005) == 0 {
			t.Fatalf("pid %d: no wait above 0.5 ms under 3x contention: %+v", pid, h.Slots)
		}
		// Same quantity as the kernel's sched_info run_delay; allow the
		// waits in flight at SIGCONT/SIGSTOP time to differ.
		if d := float64(h.SumNs) - float64(kernel); d > 0.1*float64(kernel)+5e6 || d < -0.1*float64(kernel)-5e6 {
			t.Fatalf("pid %d: BPF run-queue sum %d ns vs schedstat %d ns: differ by more than 10%%+5ms", pid, h.SumNs, kernel)
		}
		// A spinner leaves the CPU only when preempted, and the same
		// sched_switch stamps both its off-CPU start and its run-queue
		// start, so its off-CPU intervals are its run-queue waits, less the
		// first after SIGCONT (its switch-out, the stop, came before Watch).
		// On a loaded machine a spinner can also be switched out by the
		// signals that start and stop it, so allow a couple of intervals
		// and 10%+5 ms of difference rather than requiring equality.
		if d := int64(h.Count()) - int64(ho.Count()); d < -2 || d > 3 {
			t.Fatalf("pid %d: %d run-queue waits vs %d off-CPU intervals", pid, h.Count(), ho.Count())
		}
		if d := float64(ho.SumNs) - float64(h.SumNs); d > 0.1*float64(h.SumNs)+5e6 || d < -0.1*float64(h.SumNs)-5e6 {
			t.Fatalf("pid %d: off-CPU sum %d ns vs run-queue sum %d ns differ by more than 10%%+5ms", pid, ho.SumNs, h.SumNs)
		}
	}

	if cg != "" {
		id, err := bpf.CgroupID(cg)
		if err != nil {
			t.Fatal(err)
		}
		cgs, err := p.CgroupRunQueue()
		if err != nil {
			t.Fatal(err)
		}
		h := cgs[id]
		var kidsSum uint64
		for _, k := range kids {
			hk := runq[uint32(k.Process.Pid)]
			kidsSum += hk.SumNs
		}
		t.Logf("cgroup %s (id %d): %d waits, sum %.1f ms", cg, id, h.Count(), float64(h.SumNs)/1e6)
		if h.Count() == 0 || float64(h.SumNs) < 0.9*float64(kidsSum) {
			t.Fatalf("cgroup %d: %d waits sum %d ns, want >= 0.9 x the members' %d ns", id, h.Count(), h.SumNs, kidsSum)
		}
		r, err := bpf.NewCgroupResolver("")
		if err != nil {
			t.Fatal(err)
		}
		if path, err := r.Path(id); err != nil || path != "/"+filepath.Base(cg) {
			t.Fatalf("resolver: %q, %v; want /%s", path, err, filepath.Base(cg))
		}
	}

	// Unwatch drops the per-process state.
	pid := kids[0].Process.Pid
	if err := p.Unwatch(pid); err != nil {
		t.Fatal(err)
	}
	runq, _ = p.PIDRunQueue()
	if _, ok := runq[uint32(pid)]; ok {
		t.Fatalf("pid %d still has a histogram after Unwatch", pid)
	}
}

func TestWatchRejectsBadPID(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := Load(Options{MaxPIDs: 2, MaxCgroups: 16})
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()
	for _, pid := range []int{0, -1, 1 << 23} {
		if err := p.Watch(pid); err == nil {
			t.Errorf("Watch(%d) accepted", pid)
		}
	}
	// MaxPIDs is the map size: a third process does not fit.
	if err := p.Watch(1); err != nil {
		t.Fatal(err)
	}
	if err := p.Watch(2); err != nil {
		t.Fatal(err)
	}
	if err := p.Watch(3); err == nil {
		t.Error("third Watch accepted with MaxPIDs 2")
	}
}
