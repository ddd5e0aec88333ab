package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tailroot/tailroot/agent"
	"github.com/tailroot/tailroot/agent/config"
	"github.com/tailroot/tailroot/agent/evidence"
	"github.com/tailroot/tailroot/apptest"
	"github.com/tailroot/tailroot/bpf/blockio"
	"github.com/tailroot/tailroot/internal/privtest"
)

// TestKernelSeriesReachServer runs the agent with its real eBPF probes
// while the test makes CPU contention (three shell loops pinned to one
// CPU under a distinctive name) and fsync'd writes, pushes to a real
// tailroot and reads the series back over the query API.
func TestKernelSeriesReachServer(t *testing.T) {
	needServer(t)
	privtest.RequireBPF(t)
	app := apptest.Start(t, t.TempDir())
	dir := t.TempDir()
	sh := filepath.Join(dir, "trload")
	b, _ := os.ReadFile("/bin/sh")
	os.WriteFile(sh, b, 0o755)

	cfg, err := config.Parse([]byte(fmt.Sprintf(`
node: ebpf-test
listen: ""
server: {url: %q}
queue: {dir: %q, flush_interval: 200ms, min_backoff: 50ms, max_backoff: 200ms}
gpu: {enabled: false}
processes:
  comm: [trload]
  rescan_interval: 200ms
ebpf:
  interval: 500ms
  cuda: {enabled: false}
  gil: {enabled: false}
`, app.URL, t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	for range 3 {
		cmd := exec.Command(sh, "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		var set unix.CPUSet
		set.Set(0)
		unix.SchedSetaffinity(cmd.Process.Pid, &set)
	}
	f, err := os.Create(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		f.Write(make([]byte, 1<<20))
		f.Sync()
		time.Sleep(200 * time.Millisecond)
	}
	f.Close()
	time.Sleep(1500 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Whatever the last flush queued is shipped by a second, short run.
	a2, err := agent.New(agent.Options{Config: withoutEBPF(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- a2.Run(ctx2) }()
	waitFor(t, 10*time.Second, func() bool { return a2.QueueStats().Pending == 0 })
	cancel2()
	<-done

	at := time.Now()
	v := app.InstantVector(t, `histogram_count(last_over_time(tailroot_process_runqueue_delay_seconds{comm="trload",node="ebpf-test"}[1h]))`, at)
	if len(v) != 3 {
		t.Fatalf("run-queue series of %d processes, want 3: %+v", len(v), v)
	}
	for _, s := range v {
		if s.Value[1] == "0" {
			t.Errorf("process %s waited on no run queue", s.Metric["pid"])
		}
	}
	if n := app.Scalar(t, `count(last_over_time(tailroot_runqueue_delay_seconds[1h]))`, at); n < 1 {
		t.Errorf("no per-cgroup run-queue series")
	}
	var st unix.Stat_t
	unix.Stat(dir, &st)
	disk, err := blockio.WholeDisk(blockio.DevFromStat(st.Dev))
	if err != nil {
		t.Skipf("test directory not on a block device (%v): block IO not checked", err)
	}
	q := fmt.Sprintf(`max_over_time(tailroot_block_io_completed_total{dev=%q,op="write"}[1h])`, disk.String())
	if w := app.Scalar(t, q, at); w < 4 {
		t.Errorf("%s = %v, want at least the 4 fsync'd writes", q, w)
	}
	q = fmt.Sprintf(`histogram_count(last_over_time(tailroot_block_io_latency_seconds{dev=%q}[1h]))`, disk.String())
	if n := app.Scalar(t, q, at); n < 4 {
		t.Errorf("%s = %v, want at least 4", q, n)
	}
}

func withoutEBPF(c config.Config) config.Config {
	off := false
	c.EBPF.Enabled = &off
	return c
}

// TestCUDAEvidencePushed runs the agent with CUDA uprobes on the stand-in
// runtime of bpf/testdata and an evidence endpoint, and checks the
// timeline it posts against the caller's own log of its calls.
func TestCUDAEvidencePushed(t *testing.T) {
	privtest.RequireBPF(t)
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found")
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libcudart.so.12")
	caller := filepath.Join(dir, "cudacaller")
	for _, args := range [][]string{
		{"-O2", "-shared", "-fPIC", "-o", lib, "../bpf/testdata/fakecuda.c"},
		{"-O2", "-o", caller, "../bpf/testdata/cudacaller.c", "-ldl"},
	} {
		if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	var mu sync.Mutex
	var got []evidence.Batch
	ev := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b evidence.Batch
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer ev.Close()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer sink.Close()

	cmd := exec.Command(caller, lib, "calls", "3")
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
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
node: cuda-node
listen: ""
server: {url: %q}
queue: {dir: %q, flush_interval: 200ms}
gpu: {enabled: false}
processes: {pids: [%d], rescan_interval: 100ms}
ebpf:
  interval: 200ms
  runqueue: {enabled: false}
  blockio: {enabled: false}
  pagefault: {enabled: false}
  syscalls: {enabled: false}
  gil: {enabled: false}
evidence: {url: %q, interval: 300ms, top_n: 4}
`, sink.URL, t.TempDir(), cmd.Process.Pid, ev.URL)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(500 * time.Millisecond) // first collection attaches the uprobes
	stdin.Write([]byte("go\n"))
	var calls int
	var slowest float64
	for out.Scan() {
		var name string
		var tid, start, dur int64
		fmt.Sscan(out.Text(), &name, &tid, &start, &dur)
		calls++
		slowest = max(slowest, float64(dur)/1e9)
	}
	// The calls may span several evidence intervals: wait for all.
	waitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		var n uint64
		for _, b := range got {
			for _, e := range b.Evidence {
				n += e.Seen
			}
		}
		return n >= uint64(calls)
	})
	mu.Lock()
	defer mu.Unlock()
	var seen uint64
	var latency float64
	for _, b := range got {
		for _, e := range b.Evidence {
			if b.Node != "cuda-node" || e.Kind != evidence.KindCUDATimeline || e.PID != uint32(cmd.Process.Pid) || e.Comm != "cudacaller" || len(e.Calls) > 4 {
				t.Errorf("evidence %+v", e)
			}
			seen += e.Seen
			latency = max(latency, e.Latency)
		}
	}
	if seen != uint64(calls) {
		t.Errorf("evidence saw %d calls, the caller made %d", seen, calls)
	}
	// The probe times the call inside the library; the caller's own timing
	// adds the probe's overhead and scheduling, which grow on a loaded
	// machine. So: at least the longest sleep the fake library makes (5 ms),
	// at most the caller's slowest plus 1 ms.
	if latency < 0.005 || latency > slowest+1e-3 {
		t.Errorf("slowest call in evidence %.6f s, want between 0.005 s and the caller's slowest %.6f s + 1 ms", latency, slowest)
	}
}
