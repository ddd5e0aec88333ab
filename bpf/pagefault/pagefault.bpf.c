//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * User-mode page faults per process (x86 exceptions:page_fault_user,
 * attached as tp_btf). Every process gets a count; watched processes get
 * the count split by the x86 error code bits.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* x86 page fault error code bits (arch/x86/include/asm/trap_pf.h). */
#define X86_PF_PROT (1UL << 0)  /* page was present: protection fault */
#define X86_PF_WRITE (1UL << 1) /* write access */
#define X86_PF_INSTR (1UL << 4) /* instruction fetch */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384); /* set from Options.MaxProcesses */
	__type(key, u32);           /* process id (tgid) */
	__type(value, u64);         /* user page faults (count) */
} faults SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024); /* set from Options.MaxPIDs */
	__type(key, u32);          /* process id (tgid) */
	__type(value, u8);         /* unused, 1 */
} watched SEC(".maps");

struct fault_stats {
	u64 total;   /* user page faults (count) */
	u64 write;   /* faults on a write access (count) */
	u64 instr;   /* faults on an instruction fetch (count) */
	u64 prot;    /* faults on a present page: protection, CoW (count) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024); /* set from Options.MaxPIDs */
	__type(key, u32);          /* process id (tgid) */
	__type(value, struct fault_stats);
} watched_faults SEC(".maps");

const volatile struct fault_stats zero_stats = {};

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	u64 one = 1, *n;
	struct fault_stats *s;

	n = bpf_map_lookup_elem(&faults, &tgid);
	if (n) {
		__sync_fetch_and_add(n, 1);
	} else if (bpf_map_update_elem(&faults, &tgid, &one, BPF_NOEXIST) != 0) {
		/* Another CPU created the entry first. */
		n = bpf_map_lookup_elem(&faults, &tgid);
		if (n)
			__sync_fetch_and_add(n, 1);
	}

	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	s = bpf_map_lookup_elem(&watched_faults, &tgid);
	if (!s) {
		bpf_map_update_elem(&watched_faults, &tgid, (const void *)&zero_stats, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&watched_faults, &tgid);
		if (!s)
			return 0;
	}
	__sync_fetch_and_add(&s->total, 1);
	if (error_code & X86_PF_WRITE)
		__sync_fetch_and_add(&s->write, 1);
	if (error_code & X86_PF_INSTR)
		__sync_fetch_and_add(&s->instr, 1);
	if (error_code & X86_PF_PROT)
		__sync_fetch_and_add(&s->prot, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
