package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tailroot/tailroot/agent"
	"github.com/tailroot/tailroot/agent/config"
	"github.com/tailroot/tailroot/apptest"
	"github.com/tailroot/tailroot/internal/privtest"
)

// slowPath is a running bpf/testdata/slowpath.c: slow_path_sleep sleeps
// 50 ms per call in a nanosleep it makes itself, over and over.
type slowPath struct {
	exe   string
	pid   int
	start uint64 // slow_path_sleep's run-time address, as the program prints it
}

func startSlowPath(t *testing.T) *slowPath {
	t.Helper()
	privtest.RequireBPF(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("slowpath.c writes its system call in x86-64 assembly")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found")
	}
	sp := &slowPath{exe: filepath.Join(t.TempDir(), "slowpath")}
	if out, err := exec.Command(gcc, "-O2", "-g", "-fno-omit-frame-pointer", "-o", sp.exe, "../bpf/testdata/slowpath.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd := exec.Command(sp.exe, "0", "50") // until killed; stdin at EOF: starts at once
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := fmt.Fscanf(out, "%x\n", &sp.start); err != nil {
		t.Fatalf("slowpath address: %v", err)
	}
	sp.pid = cmd.Process.Pid
	return sp
}

// runAgent runs the agent with the run-queue and syscall probes on the
// slowpath process, pushing to serverURL, until the test ends.
func runAgent(t *testing.T, serverURL string) {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
node: stack-node
listen: ""
server: {url: %q}
queue: {dir: %q, flush_interval: 200ms, min_backoff: 50ms, max_backoff: 200ms}
gpu: {enabled: false}
processes: {comm: [slowpath], rescan_interval: 100ms}
ebpf:
  interval: 300ms
  blockio: {enabled: false}
  pagefault: {enabled: false}
  cuda: {enabled: false}
  gil: {enabled: false}
evidence: {interval: 500ms, top_n: 4, stack_min_latency: 20ms}
`, serverURL, t.TempDir())))
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
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
}

type stackItem struct {
	Kind    string    `json:"kind"`
	Node    string    `json:"node"`
	PID     int       `json:"pid"`
	TID     int       `json:"tid"`
	Comm    string    `json:"comm"`
	Probe   string    `json:"probe"`
	Detail  string    `json:"detail"`
	Start   time.Time `json:"start"`
	Latency float64   `json:"latency"`
	Frames  []struct {
		Address  string `json:"address"`
		Module   string `json:"module"`
		Function string `json:"function"`
		Offset   uint64 `json:"offset"`
	} `json:"frames"`
}

// getStacks reads the slowpath process's stacks in [from, to] over the
// evidence API.
func getStacks(t *testing.T, base string, pid int, from, to time.Time) []stackItem {
	t.Helper()
	q := url.Values{
		"kind": {"stack"}, "pid": {fmt.Sprint(pid)},
		"start": {from.UTC().Format(time.RFC3339Nano)}, "end": {to.UTC().Format(time.RFC3339Nano)},
	}
	resp, err := http.Get(base + "/api/v1/evidence?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Status string      `json:"status"`
		Data   []stackItem `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil || resp.StatusCode != http.StatusOK || env.Status != "success" {
		t.Fatalf("GET evidence: %d %s (%v)", resp.StatusCode, b, err)
	}
	return env.Data
}

// hasKernelFrames reports whether a stack item has a kernel frame.
func hasKernelFrames(it stackItem) bool {
	for _, f := range it.Frames {
		if f.Module == "[kernel]" {
			return true
		}
	}
	return false
}

// checkSlowPathStacks waits until the server returns, for the test's time
// window, an off-CPU and a syscall stack of the slowpath process through
// slow_path_sleep, and checks them: latency at least the 50 ms sleep,
// times inside the window, the user frame in the built executable at the
// address range the program printed, kernel frames symbolized.
func checkSlowPathStacks(t *testing.T, base string, sp *slowPath, since time.Time) {
	t.Helper()
	found := map[string]stackItem{}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		for _, it := range getStacks(t, base, sp.pid, since, time.Now()) {
			for _, f := range it.Frames {
				if f.Function == "slow_path_sleep" {
					// A stack whose kernel half the probe could not
					// record (a stack-map collision under load) is kept
					// only until one with kernel frames arrives.
					if prev, ok := found[it.Probe]; !ok || !hasKernelFrames(prev) || hasKernelFrames(it) {
						found[it.Probe] = it
					}
				}
			}
		}
		// Both probes seen; an off-CPU stack without its kernel frames
		// waits a little for a complete one.
		if len(found) == 2 && (hasKernelFrames(found["offcpu"]) || time.Until(deadline) < 5*time.Second) {
			break
		}
	}
	until := time.Now()
	for _, probe := range []string{"offcpu", "syscalls"} {
		it, ok := found[probe]
		if !ok {
			t.Errorf("no %s stack through slow_path_sleep for pid %d within 20 s (found %v)", probe, sp.pid, found)
			continue
		}
		var fs []string
		for _, f := range it.Frames {
			fs = append(fs, fmt.Sprintf("%s %s+%#x (%s)", f.Address, f.Function, f.Offset, f.Module))
		}
		t.Logf("%s: %.1f ms, detail %q, frames:\n  %s", probe, it.Latency*1e3, it.Detail, strings.Join(fs, "\n  "))
		if it.Node != "stack-node" || it.Comm != "slowpath" || it.TID != sp.pid || it.Latency < 0.050 || it.Latency > 1 {
			t.Errorf("%s: node %q comm %q tid %d latency %v; want stack-node, slowpath, %d, >= 50 ms", probe, it.Node, it.Comm, it.TID, it.Latency, sp.pid)
		}
		if it.Start.Before(since) || it.Start.After(until) {
			t.Errorf("%s: start %v outside the test's window [%v, %v]", probe, it.Start, since, until)
		}
		var user, kernel int
		sched := false
		for _, f := range it.Frames {
			if f.Module == "[kernel]" {
				if user > 0 {
					t.Errorf("%s: kernel frame after user frames", probe)
				}
				if f.Function != "" {
					kernel++
				}
				sched = sched || f.Function == "schedule" || f.Function == "__schedule"
				continue
			}
			user++
			if f.Function == "slow_path_sleep" {
				var a uint64
				fmt.Sscanf(f.Address, "0x%x", &a)
				if f.Module != sp.exe || a-f.Offset != sp.start {
					t.Errorf("%s: slow_path_sleep frame %s+%#x in %s; the program printed %#x in %s", probe, f.Address, f.Offset, f.Module, sp.start, sp.exe)
				}
			}
		}
		switch probe {
		case "offcpu":
			if kernel == 0 || !sched {
				t.Errorf("offcpu: %d symbolized kernel frames, none of them schedule: a sleep switches out there", kernel)
			}
		case "syscalls":
			if it.Detail != "nanosleep" || kernel != 0 {
				t.Errorf("syscalls: detail %q, %d kernel frames; want nanosleep and none", it.Detail, kernel)
			}
		}
	}
	// Nothing of this process before the test began.
	if old := getStacks(t, base, sp.pid, since.Add(-time.Hour), since.Add(-time.Second)); len(old) != 0 {
		t.Errorf("%d stacks before the test's window", len(old))
	}
}

// TestSlowPathStacksReachBinary: the real probes catch slowpath sleeping
// in slow_path_sleep, the agent symbolizes and pushes the stacks to the
// tailroot binary, and its evidence API returns them for the window, also
// after a restart.
func TestSlowPathStacksReachBinary(t *testing.T) {
	needServer(t)
	sp := startSlowPath(t)
	app := apptest.Start(t, t.TempDir())
	resp, err := http.Post(app.URL+"/api/v1/evidence", "application/json", strings.NewReader(`{"node":"probe","evidence":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		t.Fatalf("the tailroot binary answers POST /api/v1/evidence with %s", resp.Status)
	}
	since := time.Now()
	runAgent(t, app.URL)
	checkSlowPathStacks(t, app.URL, sp, since)
	// Acknowledged evidence survives a restart of the server.
	until := time.Now()
	before := len(getStacks(t, app.URL, sp.pid, since, until))
	app.Restart(t)
	if after := len(getStacks(t, app.URL, sp.pid, since, until)); after < before || before == 0 {
		t.Errorf("%d stacks for the window before the restart, %d after", before, after)
	}
}
