// Package bpf holds tailroot-agent's eBPF programs (tracepoints, tp_btf and
// uprobes, CO-RE against the kernel's BTF) and the pure Go that decodes what
// they report.
//
// One subdirectory per program; each loads with Load(Options) and detaches
// with Close:
//
//	runqlat    scheduler run-queue delay per cgroup and watched process, off-CPU time
//	blockio    block request latency per disk, in-flight requests
//	pagefault  user page faults per process
//	syscalls   system call latency per watched process and syscall
//	cuda       CUDA runtime/driver API call latency and events (uprobes)
//	gil        CPython GIL wait time (uprobes)
//
// This package is the shared, privilege-free part:
//
//   - Hist: the latency histogram every program fills. Its buckets are the
//     buckets of a Prometheus native histogram with schema 0 in seconds,
//     computed exactly from integer nanoseconds in the kernel, so
//     Hist.Native converts without re-bucketing.
//   - Clock: the one place CLOCK_MONOTONIC (bpf_ktime_get_ns) becomes wall
//     time.
//   - CgroupResolver and ParseCgroupPath: cgroup id -> cgroup v2 path ->
//     container id, runtime, pod UID and QoS class.
//   - ParseMaps and MappedFiles: /proc/PID/maps, to find the libraries to
//     put uprobes on.
//
// Invariants: histogram counts are cumulative from program load (LRU maps
// may evict an entry, which restarts its counts); every timestamp from the
// kernel is CLOCK_MONOTONIC nanoseconds.
package bpf
