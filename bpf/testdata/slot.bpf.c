// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test-only program: runs include/hist.h under BPF_PROG_TEST_RUN so the
 * kernel-side bucketing is checked against the Go reference (bpf.Slot).
 * Never attached; its section name only selects the raw tracepoint
 * program type, whose test run passes args[0] in from user space.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "hist.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, u32);          /* always 0 */
	__type(value, struct hist); /* every value passed in */
} test_hist SEC(".maps");

/* Returns hist_slot(args[0]) and adds args[0] to test_hist[0]. */
SEC("raw_tp/sys_enter")
int slot_of(u64 *ctx)
{
	u64 v = ctx[0];
	u32 key = 0;

	hist_add(&test_hist, &key, v);
	return hist_slot(v);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
