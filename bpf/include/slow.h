/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Slow events with stacks, shared by the programs that capture them
 * (runqlat: off-CPU and run-queue waits; syscalls: slow system calls).
 *
 * A program includes this header once; it declares three maps:
 *
 *   stacks        BPF_MAP_TYPE_STACK_TRACE: stack id -> up to
 *                 SLOW_STACK_DEPTH return addresses, innermost first,
 *                 zero-padded (bpf_get_stackid deduplicates equal stacks)
 *   slow_events   ring buffer of struct slow_event
 *   slow_dropped  events lost to a full ring buffer (count)
 *
 * and one constant, slow_min_ns, written by the loader: events shorter
 * than it are not sent. SLOW_OFF (all ones) turns capture off entirely,
 * including the stack walks.
 *
 * User space (bpf.SlowReader) reads the ring buffer, looks up the stacks
 * of the events it keeps, and empties the stack map now and then: entries
 * are never removed by the kernel, and a full map (or a hash collision with
 * a different stack) makes bpf_get_stackid return -EEXIST / -ENOMEM, which
 * the event carries instead of an id.
 *
 * User stacks are walked by frame pointers (the kernel's perf callchain
 * code): a function compiled without them, or a frameless leaf between the
 * kernel entry and its caller, hides its caller.
 */
#ifndef TAILROOT_SLOW_H
#define TAILROOT_SLOW_H

#include <bpf/bpf_core_read.h>

#define SLOW_STACK_DEPTH 64 /* frames kept per stack */
#define SLOW_OFF (~0ULL)

/* kinds (Go: bpf.SlowKind) */
#define SLOW_OFFCPU 1   /* switch-out to switch-in of a watched thread */
#define SLOW_RUNQUEUE 2 /* runnable to running of a watched thread */
#define SLOW_SYSCALL 3  /* sys_enter to sys_exit; detail is the syscall number */

#define BPF_F_USER_STACK (1ULL << 8) /* bpf_get_stackid flag (UAPI) */

struct slow_event {
	u32 pid;         /* process id (tgid) */
	u32 tid;         /* thread id */
	u64 start_ns;    /* ns, CLOCK_MONOTONIC: switch-out, runnable, or sys_enter */
	u64 duration_ns; /* ns */
	s32 user_stack;  /* id in stacks, or -errno (-EFAULT: no user stack; -1: not captured) */
	s32 kern_stack;  /* id in stacks, or -errno (-1: not captured) */
	u32 kind;        /* SLOW_* */
	u32 detail;      /* SLOW_SYSCALL: syscall number; else 0 */
	char comm[16];   /* thread name (task->comm) at the end of the event */
};

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 4096); /* set from Options.MaxStacks */
	__uint(key_size, sizeof(u32));
	__uint(value_size, SLOW_STACK_DEPTH * sizeof(u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024); /* bytes; set from Options.RingBufferBytes */
} slow_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64); /* events lost to a full ring buffer (count) */
} slow_dropped SEC(".maps");

/* Minimum duration of a sent event (ns); SLOW_OFF disables capture. */
const volatile u64 slow_min_ns = SLOW_OFF;

static __always_inline bool slow_on(void)
{
	return slow_min_ns != SLOW_OFF;
}

/* slow_submit sends one event when it lasted at least slow_min_ns. comm is
 * that of task t, or of the current task when t is NULL. */
static __always_inline void slow_submit(u32 kind, u32 pid, u32 tid, u64 start, u64 duration,
					s32 ustack, s32 kstack, u32 detail, struct task_struct *t)
{
	struct slow_event *e;
	u32 zero = 0;
	u64 *drops;

	if (duration < slow_min_ns)
		return;
	e = bpf_ringbuf_reserve(&slow_events, sizeof(*e), 0);
	if (!e) {
		drops = bpf_map_lookup_elem(&slow_dropped, &zero);
		if (drops)
			__sync_fetch_and_add(drops, 1);
		return;
	}
	e->pid = pid;
	e->tid = tid;
	e->start_ns = start;
	e->duration_ns = duration;
	e->user_stack = ustack;
	e->kern_stack = kstack;
	e->kind = kind;
	e->detail = detail;
	if (t)
		BPF_CORE_READ_STR_INTO(&e->comm, t, comm);
	else
		bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

#endif /* TAILROOT_SLOW_H */
