package kernel

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/tailroot/tailroot/agent/collect"
	"github.com/tailroot/tailroot/agent/evidence"
	"github.com/tailroot/tailroot/agent/procinfo"
	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/blockio"
	"github.com/tailroot/tailroot/bpf/cuda"
	"github.com/tailroot/tailroot/internal/privtest"
)

// requireRoot skips unless the test can load BPF programs.
func requireRoot(t *testing.T) {
	t.Helper()
	privtest.RequireBPF(t)
}

func series(ss []collect.Series, name string, match ...string) []collect.Series {
	var out []collect.Series
	for _, s := range ss {
		if s.Labels.Get(model.MetricNameLabel) != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(match); i += 2 {
			if s.Labels.Get(match[i]) != match[i+1] {
				ok = false
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// schedRunDelay reads the kernel's own run-queue wait total of a process
// (the second field of /proc/PID/schedstat, ns; its main thread is the
// whole process for a single-threaded sh).
func schedRunDelay(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	ns, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return float64(ns) / 1e9
}

// TestContentionAndBlockIO runs three shell loops pinned to one CPU under a
// distinctive command name (two spin, one writes to /dev/null through the
// echo builtin, making write system calls) and writes 4 MiB with fsync,
// then checks the series against the kernel's own accounting.
func TestContentionAndBlockIO(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	sh := filepath.Join(dir, "trspin")
	b, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sh, b, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{
		RunQueue: true, PerCgroup: true, BlockIO: true, PageFault: true, Syscalls: true,
		Selector:       procinfo.Selector{Comm: []*regexp.Regexp{regexp.MustCompile("^(?:trspin)$")}},
		RescanInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range c.Status() {
		if !s.Loaded {
			t.Fatalf("probe %s did not load: %v", s.Name, s.Err)
		}
	}
	var pids []int
	for _, script := range []string{"while :; do :; done", "while :; do :; done", "while :; do echo x > /dev/null; done"} {
		cmd := exec.Command(sh, "-c", script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		var set unix.CPUSet
		set.Set(0)
		if err := unix.SchedSetaffinity(cmd.Process.Pid, &set); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, cmd.Process.Pid)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := c.Collect(context.Background(), time.Now(), nil); err != nil { // rescan: watch
		t.Fatal(err)
	}
	before := make([]float64, len(pids))
	for i, pid := range pids {
		before[i] = schedRunDelay(t, pid)
	}

	// Block IO on the disk under the test's directory.
	f, err := os.Create(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 4<<20))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	time.Sleep(time.Second)

	after := make([]float64, len(pids))
	for i, pid := range pids {
		after[i] = schedRunDelay(t, pid)
	}
	ss, err := c.Collect(context.Background(), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, pid := range pids {
		p := strconv.Itoa(pid)
		rq := series(ss, MetricProcRunQueue, "pid", p, "comm", "trspin")
		if len(rq) != 1 {
			t.Fatalf("pid %d: %d run-queue series", pid, len(rq))
		}
		h := rq[0].Histograms[0].H
		// The histogram counts waits from Watch on; schedstat's run_delay
		// over the same window is the reference. Both include one wait in
		// progress at either edge, hence the slack.
		want := after[i] - before[i]
		t.Logf("pid %d: %d waits, %.3f s in histogram, %.3f s in schedstat", pid, h.Count, h.Sum, want)
		if h.Count == 0 || math.Abs(h.Sum-want) > 0.2*want+0.05 {
			t.Errorf("pid %d: run-queue sum %.4f s, schedstat delta %.4f s", pid, h.Sum, want)
		}
		if off := series(ss, MetricOffCPU, "pid", p); len(off) != 1 || off[0].Histograms[0].H.Count == 0 {
			t.Errorf("pid %d: no off-CPU time", pid)
		}
		if pf := series(ss, MetricPageFaults, "pid", p); len(pf) != 1 || pf[0].Samples[0].V == 0 {
			t.Errorf("pid %d: page faults %v (exec after Load must fault)", pid, pf)
		}
	}
	if w := series(ss, MetricSyscallLatency, "pid", strconv.Itoa(pids[2]), "syscall", "write"); len(w) != 1 || w[0].Histograms[0].H.Count == 0 {
		t.Errorf("echo loop: no write system calls: %v", w)
	}
	if n := len(series(ss, MetricSyscallLatency, "pid", strconv.Itoa(pids[0]))); n != 0 {
		t.Errorf("pure spinner made %d kinds of system calls", n)
	}
	if len(series(ss, MetricRunQueue)) == 0 {
		t.Error("no per-cgroup run-queue series")
	}
	if w := series(ss, MetricWatchedProcs); len(w) != 1 || w[0].Samples[0].V != 3 {
		t.Errorf("watched processes %v, want 3", w)
	}

	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	disk, err := blockio.WholeDisk(blockio.DevFromStat(st.Dev))
	if err != nil {
		t.Skipf("test directory is not on a block device (%v); block IO not checked", err)
	}
	lat := series(ss, MetricBlockLatency, "dev", disk.String())
	wr := series(ss, MetricBlockCompleted, "dev", disk.String(), "op", "write")
	by := series(ss, MetricBlockBytes, "dev", disk.String())
	if len(lat) != 1 || lat[0].Histograms[0].H.Count == 0 || len(wr) != 1 || wr[0].Samples[0].V == 0 || len(by) != 1 || by[0].Samples[0].V < 4<<20 {
		t.Fatalf("disk %s: latency %v, writes %v, bytes %v", disk, lat, wr, by)
	}
	if name := lat[0].Labels.Get("device"); name == "" {
		t.Errorf("disk %s has no device name label", disk)
	}
}

// TestCUDAUprobes attaches to the stand-in CUDA runtime of bpf/testdata
// through process selection, and checks histogram counts and the events
// handed to the evidence timeline against the caller's own log of its calls.
func TestCUDAUprobes(t *testing.T) {
	requireRoot(t)
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found")
	}
	dir := t.TempDir()
	src := "../../bpf/testdata"
	lib := filepath.Join(dir, "libcudart.so.12")
	caller := filepath.Join(dir, "cudacaller")
	for _, args := range [][]string{
		{"-O2", "-shared", "-fPIC", "-o", lib, src + "/fakecuda.c"},
		{"-O2", "-o", caller, src + "/cudacaller.c", "-ldl"},
	} {
		if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	const rounds = 4
	cmd := exec.Command(caller, lib, "calls", strconv.Itoa(rounds))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("caller did not start: %q", out.Text())
	}
	pid := cmd.Process.Pid

	tl := evidence.NewTimeline(3, 8)
	clock, err := bpf.NewClock()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	events := map[string]int{}
	c, err := Open(Options{
		CUDA: true, Selector: procinfo.Selector{PIDs: []int{pid}}, RescanInterval: time.Hour,
		OnCUDACall: func(p uint32, ev *cuda.Event) {
			mu.Lock()
			events[ev.Symbol.String()]++
			mu.Unlock()
			tl.Add(p, evidence.CallFromEvent(ev, clock))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Collect(context.Background(), time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte("go\n"))
	calls := map[string]int{}
	var slowest float64
	for out.Scan() {
		f := strings.Fields(out.Text())
		calls[f[0]]++
		d, _ := strconv.ParseFloat(f[3], 64)
		slowest = max(slowest, d/1e9)
	}
	cmd.Wait()
	total := 0
	for _, n := range calls {
		total += n
	}
	if total != 8*rounds { // fakecuda has 8 of the 9 probed functions
		t.Fatalf("caller made %d calls: %v", total, calls)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := 0
		for _, v := range events {
			n += v
		}
		mu.Unlock()
		if n >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ss, err := c.Collect(context.Background(), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for sym, n := range calls {
		if events[sym] != n {
			t.Errorf("%s: %d events, caller made %d calls", sym, events[sym], n)
		}
		h := series(ss, MetricCUDACall, "pid", strconv.Itoa(pid), "symbol", sym)
		if len(h) != 1 || h[0].Histograms[0].H.Count != uint64(n) {
			t.Errorf("%s: histogram %v, want count %d", sym, h, n)
		}
	}
	items, _ := tl.Drain(time.Now(), "test")
	if len(items) != 1 || len(items[0].Calls) != 3 || items[0].Seen != uint64(total) {
		t.Fatalf("timeline %+v", items)
	}
	// The slowest call the probe saw lasted at least the longest sleep the
	// fake library makes (a 5 ms synchronisation) and no longer than the
	// caller's own slowest timing, which also counts the probe's overhead
	// and scheduling (both grow on a loaded machine, so no tighter bound).
	if items[0].Latency < 0.005 || items[0].Latency > slowest+1e-3 {
		t.Errorf("timeline latency %.6f s, want between 0.005 s and the caller's slowest %.6f s + 1 ms", items[0].Latency, slowest)
	}
}

// TestGILUprobes attaches the GIL probe to a Python process picked by pid
// and checks that the sleeper thread's GIL reacquisitions show up.
func TestGILUprobes(t *testing.T) {
	requireRoot(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	cmd := exec.Command(py, "testdata/gil_spin.py", "0.6")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("python did not start: %q", out.Text())
	}
	pid := cmd.Process.Pid
	c, err := Open(Options{GIL: true, Selector: procinfo.Selector{PIDs: []int{pid}}, RescanInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Collect(context.Background(), time.Now(), nil)
	c.mu.Lock()
	attached := c.procs[pid] != nil && c.procs[pid].gil != nil
	c.mu.Unlock()
	if !attached {
		t.Skipf("%s exposes no GIL function (probe errors %v)", py, c.ProbeErrors())
	}
	stdin.Write([]byte("go\n"))
	if !out.Scan() {
		t.Fatal("python printed no result")
	}
	iters, _ := strconv.Atoi(out.Text())
	ss, err := c.Collect(context.Background(), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := series(ss, MetricGILWait, "pid", strconv.Itoa(pid))
	if len(g) != 1 {
		t.Fatalf("GIL series %v", g)
	}
	// Each sleeper iteration returns from time.sleep by taking the GIL back.
	if n := g[0].Histograms[0].H.Count; n < uint64(iters) {
		t.Errorf("%d GIL waits, sleeper iterated %d times", n, iters)
	}
	t.Logf("mode %s: %d waits for %d sleeper iterations", g[0].Labels.Get("mode"), g[0].Histograms[0].H.Count, iters)
}
