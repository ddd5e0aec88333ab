// Package privtest is the one check that a test may load eBPF programs:
// the bpf/ program tests and the agent's end-to-end probe tests share it,
// so every privileged test skips for the same reasons with the same words.
//
// In: the test. Out: a skip (not root, or a kernel without BTF, which the
// CO-RE programs need) or a failure (the memlock rlimit cannot be lifted);
// otherwise nothing, and the process may load programs. CI runs as root on
// a kernel with BTF, so there these tests load and attach for real.
package privtest

import (
	"os"
	"testing"

	"github.com/cilium/ebpf/rlimit"
)

// RequireBPF skips tb unless the process is root on a kernel with BTF, and
// lifts the memlock rlimit that kernels before 5.11 charge BPF maps to.
func RequireBPF(tb testing.TB) {
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
