// Package testutil holds what the BPF program tests share: the root check,
// the leaked-file-descriptor check of TestMain, and building the C helpers
// in ../../testdata.
package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/cilium/ebpf/rlimit"
)

// RequireRoot skips t unless the test runs as root, which loading BPF
// programs needs. CI runs these tests as root on a kernel with BTF, so there
// they load and attach for real.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("loading BPF programs needs root (CAP_BPF and CAP_PERFMON); run the tests as root")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		tb.Skipf("kernel has no BTF (/sys/kernel/btf/vmlinux: %v); the programs are CO-RE and need it", err)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		tb.Fatalf("remove memlock rlimit: %v", err)
	}
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
