// Package testutil holds what the BPF program tests share: the root check,
// the leaked-file-descriptor check of TestMain, building the C helpers
// in ../../testdata, and waiting for a signalled child to stop.
package testutil

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tailroot/tailroot/internal/privtest"
)

// RequireRoot skips tb unless it may load BPF programs (see
// privtest.RequireBPF).
func RequireRoot(tb testing.TB) {
	tb.Helper()
	privtest.RequireBPF(tb)
}

// openFDs lists this process's open descriptors with what they point to.
func openFDs() (map[string]string, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	fds := make(map[string]string, len(ents))
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue // the ReadDir descriptor itself, closed by now
		}
		fds[e.Name()] = target
	}
	return fds, nil
}

// MainWithLeakCheck runs the tests and then fails the binary when a file
// descriptor opened during them is still open: a program, map, link or
// ring buffer someone forgot to Close. The Go runtime's poller descriptors
// are created before the first snapshot so they do not count.
func MainWithLeakCheck(m *testing.M) {
	// Create the runtime's epoll and wakeup descriptors now.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	before, err := openFDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fd leak check:", err)
		os.Exit(2)
	}
	code := m.Run()
	// No runtime.GC here: cilium/ebpf closes unreachable descriptors from
	// finalizers, which would hide a missing Close.
	after, err := openFDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fd leak check:", err)
		os.Exit(2)
	}
	var leaked []string
	for fd, target := range after {
		if before[fd] != target {
			leaked = append(leaked, fd+" -> "+target)
		}
	}
	if len(leaked) > 0 {
		slices.Sort(leaked)
		fmt.Fprintf(os.Stderr, "FAIL: %d file descriptors leaked by tests:\n", len(leaked))
		for _, l := range leaked {
			fmt.Fprintln(os.Stderr, "  ", l)
		}
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// TestdataDir returns the absolute path of bpf/testdata.
func TestdataDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// BuildC compiles C sources from bpf/testdata with gcc into dir/out. extra
// holds further gcc arguments (-shared -fPIC, -ldl, ...). It skips tb when
// gcc is missing.
func BuildC(tb testing.TB, dir, out string, sources []string, extra ...string) string {
	tb.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		tb.Skip("gcc not found; it builds the C test programs in bpf/testdata")
	}
	dst := filepath.Join(dir, out)
	args := []string{"-O2", "-g", "-Wall", "-Werror", "-o", dst}
	for _, s := range sources {
		args = append(args, filepath.Join(TestdataDir(), s))
	}
	args = append(args, extra...)
	cmd := exec.Command(gcc, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("gcc %v: %v\n%s", args, err, b)
	}
	return dst
}

// SlowPath is a running testdata/slowpath.c: a process whose function
// slow_path_sleep sleeps in a nanosleep system call made from inside it.
type SlowPath struct {
	Cmd *exec.Cmd
	// Start and End bound slow_path_sleep at run time: the address the
	// program prints and the symbol size from its ELF symbol table.
	Start, End uint64
	stdin      io.WriteCloser
}

// StartSlowPath builds testdata/slowpath.c with frame pointers and starts
// it for n calls of ms milliseconds each (n == 0: until killed). The calls
// begin at Go; the process is killed when the test ends. It skips tb when
// not on x86-64 (the program writes the system call out) or without gcc.
func StartSlowPath(tb testing.TB, n, ms int) *SlowPath {
	tb.Helper()
	if runtime.GOARCH != "amd64" {
		tb.Skip("testdata/slowpath.c makes its system call in x86-64 assembly")
	}
	exe := BuildC(tb, tb.TempDir(), "slowpath", []string{"slowpath.c"}, "-fno-omit-frame-pointer")
	f, err := elf.Open(exe)
	if err != nil {
		tb.Fatal(err)
	}
	syms, err := f.Symbols()
	f.Close()
	if err != nil {
		tb.Fatal(err)
	}
	var size uint64
	for _, s := range syms {
		if s.Name == "slow_path_sleep" {
			size = s.Size
		}
	}
	if size == 0 {
		tb.Fatal("slowpath: no slow_path_sleep in .symtab")
	}
	p := &SlowPath{Cmd: exec.Command(exe, strconv.Itoa(n), strconv.Itoa(ms))}
	p.stdin, _ = p.Cmd.StdinPipe()
	out, _ := p.Cmd.StdoutPipe()
	if err := p.Cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Cmd.Process.Kill(); p.Cmd.Wait() })
	var addr uint64
	if _, err := fmt.Fscanf(out, "%x\n", &addr); err != nil {
		tb.Fatalf("slowpath: read address: %v", err)
	}
	p.Start, p.End = addr, addr+size
	return p
}

// Go starts the calls.
func (p *SlowPath) Go() { p.stdin.Close() }

// Contains reports whether some address of a stack lies in slow_path_sleep.
func (p *SlowPath) Contains(stack []uint64) bool {
	for _, a := range stack {
		if a >= p.Start && a < p.End {
			return true
		}
	}
	return false
}

// WaitStopped waits until the process pid is in the stopped state (T in
// /proc/pid/stat), which a SIGSTOP reaches only once the process has run
// to take it. On a loaded machine a child just forked can wait on the run
// queue for a long time before its first run: a test that watched it
// before that run would count the wait, and a reading of the kernel's
// own counters taken after it would not.
func WaitStopped(tb testing.TB, pid int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			tb.Fatalf("pid %d: %v", pid, err)
		}
		// The state follows the command name, which is in parentheses
		// and may itself hold spaces or parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pid %d did not stop within 10 s: %s", pid, b)
		}
		time.Sleep(time.Millisecond)
	}
}
