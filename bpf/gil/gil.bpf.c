//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * CPython GIL wait time: a uprobe and a uretprobe on the function that
 * acquires the GIL. The Go loader attaches them to take_gil (static, found
 * in the ELF symbol table) when the interpreter has it, otherwise to the
 * exported PyEval_RestoreThread and PyEval_AcquireThread, which call it.
 * The time from entry to return is one wait, recorded per process.
 *
 * Architecture independent: no argument or register is read.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "hist.h"

/* Thread -> CLOCK_MONOTONIC ns it started waiting. LRU: take_gil does not
 * return to a thread that exits during interpreter finalisation. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);   /* thread id */
	__type(value, u64); /* ns, CLOCK_MONOTONIC */
} waiting SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);  /* set from Options.MaxPIDs */
	__type(key, u32);           /* process id */
	__type(value, struct hist); /* GIL wait, ns */
} waits SEC(".maps");

SEC("uprobe")
int gil_enter(void *ctx)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u64 now = bpf_ktime_get_ns();

	bpf_map_update_elem(&waiting, &tid, &now, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int gil_exit(void *ctx)
{
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tid = (u32)pid_tgid, pid = pid_tgid >> 32;
	u64 *since = bpf_map_lookup_elem(&waiting, &tid);
	u64 delta;

	if (!since)
		return 0;
	delta = bpf_ktime_get_ns() - *since;
	bpf_map_delete_elem(&waiting, &tid);
	hist_add(&waits, &pid, delta);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
