//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Run-queue delay and off-CPU time.
 *
 * A thread becomes runnable at sched_wakeup / sched_wakeup_new, or when it
 * is preempted at sched_switch while still runnable; it gets the CPU at the
 * sched_switch that switches it in. The time between the two is its
 * run-queue delay, recorded per cgroup (v2 id of the thread switched in) for
 * every thread, and per process for watched processes.
 *
 * For watched processes the time from switch-out to the next switch-in of
 * each thread (off-CPU time: blocked plus run-queue wait) is recorded too.
 *
 * Slow events (include/slow.h): for watched threads, the user and kernel
 * stacks are taken at switch-out (the tracepoint runs in the context of the
 * thread being switched out, so they are where it stopped: the blocking
 * call, or the code it was preempted in). At switch-in an off-CPU time or a
 * run-queue delay of at least slow_min_ns is sent with those stacks.
 *
 * All three attach as tp_btf (BTF-typed raw tracepoints): no tracefs needed,
 * typed arguments, and no perf-event tracepoint overhead.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "hist.h"
#include "slow.h"

#define TASK_RUNNING 0

/* Thread id -> CLOCK_MONOTONIC ns it became runnable. LRU: threads that
 * exit while runnable would otherwise leave entries behind. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);   /* thread id */
	__type(value, u64); /* ns, CLOCK_MONOTONIC */
} runnable_since SEC(".maps");

/* A watched thread's last switch-out. */
struct switched_out {
	u64 ts;         /* ns, CLOCK_MONOTONIC */
	s32 user_stack; /* id in stacks, or -errno; -1 when capture is off */
	s32 kern_stack; /* id in stacks, or -errno; -1 when capture is off */
};

/* Thread id -> its last switch-out (watched only). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32); /* thread id */
	__type(value, struct switched_out);
} offcpu_since SEC(".maps");

/* Processes to watch, written from user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024); /* set from Options.MaxPIDs */
	__type(key, u32);          /* process id (tgid) */
	__type(value, u8);         /* unused, 1 */
} watched SEC(".maps");

/* Run-queue delay per cgroup. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);  /* set from Options.MaxCgroups */
	__type(key, u64);           /* cgroup v2 id (inode of its directory) */
	__type(value, struct hist); /* delay, ns */
} cgroup_runq SEC(".maps");

/* Run-queue delay per watched process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);  /* set from Options.MaxPIDs */
	__type(key, u32);           /* process id (tgid) */
	__type(value, struct hist); /* delay, ns */
} pid_runq SEC(".maps");

/* Off-CPU time per watched process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);  /* set from Options.MaxPIDs */
	__type(key, u32);           /* process id (tgid) */
	__type(value, struct hist); /* off-CPU time, ns */
} pid_offcpu SEC(".maps");

static __always_inline bool is_watched(u32 tgid)
{
	return bpf_map_lookup_elem(&watched, &tgid) != NULL;
}

static __always_inline long task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

static __always_inline int mark_runnable(struct task_struct *p)
{
	u32 tid = BPF_CORE_READ(p, pid);
	u64 now;

	if (tid == 0)
		return 0;
	now = bpf_ktime_get_ns();
	/* NOEXIST: a wakeup of a task already waiting on a run queue (a
	 * signal sent to a preempted task, say) fires the tracepoint again;
	 * its wait began at the first mark. Marks are deleted at switch-in,
	 * and every runnable task is switched in before it can block or exit,
	 * so an existing mark is never stale. */
	bpf_map_update_elem(&runnable_since, &tid, &now, BPF_NOEXIST);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	return mark_runnable(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	return mark_runnable(p);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	u32 prev_tid = BPF_CORE_READ(prev, pid);
	u32 prev_tgid = BPF_CORE_READ(prev, tgid);
	u32 next_tid = BPF_CORE_READ(next, pid);
	u32 next_tgid = BPF_CORE_READ(next, tgid);
	u64 now = bpf_ktime_get_ns();
	u64 *since, cgid, runq_start = 0, runq_delay = 0;
	struct switched_out out, *so;
	bool next_watched;

	if (prev_tid != 0) {
		/* Preempted, or yielded while runnable: back on the run queue. */
		if (preempt || task_state(prev) == TASK_RUNNING)
			bpf_map_update_elem(&runnable_since, &prev_tid, &now, BPF_ANY);
		if (is_watched(prev_tgid)) {
			out.ts = now;
			out.user_stack = -1;
			out.kern_stack = -1;
			if (slow_on()) {
				/* current is prev here: its stacks. */
				out.user_stack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
				out.kern_stack = bpf_get_stackid(ctx, &stacks, 0);
			}
			bpf_map_update_elem(&offcpu_since, &prev_tid, &out, BPF_ANY);
		}
	}

	if (next_tid == 0)
		return 0; /* the idle task */
	next_watched = is_watched(next_tgid);

	since = bpf_map_lookup_elem(&runnable_since, &next_tid);
	if (since) {
		u64 delta = now - *since;

		runq_start = *since;
		bpf_map_delete_elem(&runnable_since, &next_tid);
		if ((s64)delta >= 0) {
			runq_delay = delta;
			cgid = BPF_CORE_READ(next, cgroups, dfl_cgrp, kn, id);
			hist_add(&cgroup_runq, &cgid, delta);
			if (next_watched)
				hist_add(&pid_runq, &next_tgid, delta);
		}
	}

	if (next_watched) {
		so = bpf_map_lookup_elem(&offcpu_since, &next_tid);
		if (so) {
			u64 delta = now - so->ts;

			out = *so;
			bpf_map_delete_elem(&offcpu_since, &next_tid);
			if ((s64)delta >= 0) {
				hist_add(&pid_offcpu, &next_tgid, delta);
				if (slow_on()) {
					slow_submit(SLOW_OFFCPU, next_tgid, next_tid, out.ts, delta,
						    out.user_stack, out.kern_stack, 0, next);
					/* The wait for a CPU ended the off-CPU time;
					 * the stacks are still where the thread stopped. */
					if (runq_delay)
						slow_submit(SLOW_RUNQUEUE, next_tgid, next_tid, runq_start,
							    runq_delay, out.user_stack, out.kern_stack, 0, next);
				}
			}
		}
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
