//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * System call latency for watched processes: raw_syscalls sys_enter to
 * sys_exit of each thread, per (process, syscall number).
 *
 * Both tracepoints fire for every system call on the machine, so the first
 * thing each program does is the watched-process lookup; the benchmark in
 * syscalls_bench_test.go measures what that costs unwatched processes.
 *
 * Slow events (include/slow.h): a call of a watched thread lasting at least
 * slow_min_ns is sent with the thread's user stack, taken at sys_exit (the
 * user registers are those of the call site until the return to user
 * space). The kernel stack at sys_exit is only the exit path, so none is
 * taken.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "hist.h"
#include "slow.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024); /* set from Options.MaxPIDs */
	__type(key, u32);          /* process id (tgid) */
	__type(value, u8);         /* unused, 1 */
} watched SEC(".maps");

struct entered {
	u64 ts; /* ns, CLOCK_MONOTONIC, at sys_enter */
	s64 nr; /* syscall number */
};

/* Per-thread system call in progress, in task local storage: cheaper than
 * a hash map on both tracepoints, and freed with the thread (exit and
 * exit_group never reach sys_exit). ts == 0: none in progress. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct entered);
} in_syscall SEC(".maps");

struct sys_key {
	u32 tgid; /* process id */
	u32 nr;   /* syscall number */
};

/* Per (process, syscall). */
struct sys_stats {
	struct hist lat; /* sys_enter to sys_exit, ns */
	u64 errors;      /* returns in [-4095, -1] (count) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* set from Options.MaxEntries */
	__type(key, struct sys_key);
	__type(value, struct sys_stats);
} syscalls SEC(".maps");

const volatile struct sys_stats zero_stats = {};

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct entered *e;

	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	e = bpf_task_storage_get(&in_syscall, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!e)
		return 0;
	e->nr = id;
	e->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	struct entered *e;
	struct sys_stats *s;
	struct sys_key key;
	u64 delta, start, pid_tgid;
	s64 nr;

	/* Only watched threads have storage: one cheap lookup for the rest. */
	e = bpf_task_storage_get(&in_syscall, bpf_get_current_task_btf(), 0, 0);
	if (!e || e->ts == 0)
		return 0;
	start = e->ts;
	delta = bpf_ktime_get_ns() - start;
	nr = e->nr;
	e->ts = 0;
	if (nr < 0)
		return 0; /* -1: no system call (ptrace, seccomp skip) */
	pid_tgid = bpf_get_current_pid_tgid();
	key.tgid = pid_tgid >> 32;
	key.nr = (u32)nr;

	s = bpf_map_lookup_elem(&syscalls, &key);
	if (!s) {
		bpf_map_update_elem(&syscalls, &key, (const void *)&zero_stats, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&syscalls, &key);
		if (!s)
			return 0;
	}
	hist_record(&s->lat, delta);
	if (ret < 0 && ret >= -4095)
		__sync_fetch_and_add(&s->errors, 1);
	if (slow_on() && delta >= slow_min_ns)
		slow_submit(SLOW_SYSCALL, key.tgid, (u32)pid_tgid, start, delta,
			    bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK), -1, key.nr, NULL);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
