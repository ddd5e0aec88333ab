//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * CUDA API call latency with uprobes and uretprobes on libcudart/libcuda.
 *
 * One entry and one return program serve every symbol; each attachment
 * carries a BPF cookie (Go: cookie()) saying which symbol it is and where
 * that symbol's stream argument lives:
 *
 *   bits 0..7   symbol id (Go: Symbol)
 *   bits 8..15  stream argument slot: 0 none, 1..6 integer argument
 *               register (rdi, rsi, rdx, rcx, r8, r9), n >= 7 the
 *               (n-6)th stack argument (x86-64 System V: at entry rsp
 *               points at the return address, stack argument k at
 *               rsp + 8k)
 *
 * On return the call's duration goes into a per-(process, symbol)
 * histogram and an event goes to the ring buffer.
 *
 * x86-64 only (argument registers); built with __TARGET_ARCH_x86.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "hist.h"

struct call_key {
	u32 tid; /* thread id */
	u32 sym; /* symbol id */
};

struct call {
	u64 ts;     /* ns, CLOCK_MONOTONIC at entry */
	u64 stream; /* stream argument value (pointer) */
	u32 flags;  /* EVENT_HAS_STREAM */
	u32 _pad;
};

/* Calls in progress. Keyed by symbol too: the runtime API calls the
 * driver API from inside, and both may be probed. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct call_key);
	__type(value, struct call);
} calls SEC(".maps");

#define EVENT_HAS_STREAM 1

struct event {
	u32 pid;         /* process id */
	u32 tid;         /* thread id */
	u32 sym;         /* symbol id (Go: Symbol) */
	u32 flags;       /* bit 0: stream is the call's stream argument */
	u64 start_ns;    /* ns, CLOCK_MONOTONIC at entry */
	u64 duration_ns; /* ns, entry to return */
	u64 stream;      /* cudaStream_t / CUstream value; 0 is the legacy default stream */
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024); /* bytes; set from Options.RingBufferBytes */
} events SEC(".maps");

struct hist_key {
	u32 pid; /* process id */
	u32 sym; /* symbol id */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* set from Options.MaxHists */
	__type(key, struct hist_key);
	__type(value, struct hist); /* call duration, ns */
} hists SEC(".maps");

/* Events lost because the ring buffer was full (count). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} dropped SEC(".maps");

static __always_inline u64 arg_slot(struct pt_regs *ctx, u32 slot)
{
	/* Constant-offset context reads only: the verifier rejects a context
	 * access at a computed offset, which a switch compiles into. */
	u64 regs[8] = {ctx->di, ctx->si, ctx->dx, ctx->cx, ctx->r8, ctx->r9, 0, 0};
	u64 v = 0;

	if (slot >= 1 && slot <= 6)
		return regs[(slot - 1) & 7];
	if (slot > 6 && slot < 16)
		bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP(ctx) + 8 * (slot - 6)));
	return v;
}

SEC("uprobe")
int BPF_KPROBE(cuda_enter)
{
	u64 cookie = bpf_get_attach_cookie(ctx);
	u32 slot = (cookie >> 8) & 0xff;
	struct call_key key = {
		.tid = (u32)bpf_get_current_pid_tgid(),
		.sym = cookie & 0xff,
	};
	struct call c = {};

	if (slot) {
		c.stream = arg_slot(ctx, slot);
		c.flags = EVENT_HAS_STREAM;
	}
	c.ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&calls, &key, &c, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(cuda_exit)
{
	u64 now = bpf_ktime_get_ns();
	u64 cookie = bpf_get_attach_cookie(ctx);
	u64 pid_tgid = bpf_get_current_pid_tgid();
	struct call_key key = {
		.tid = (u32)pid_tgid,
		.sym = cookie & 0xff,
	};
	struct hist_key hk = {
		.pid = pid_tgid >> 32,
		.sym = key.sym,
	};
	struct call *c = bpf_map_lookup_elem(&calls, &key);
	struct event *e;
	u64 start, stream, delta;
	u32 flags, zero = 0;
	u64 *drops;

	if (!c)
		return 0; /* entered before attach */
	start = c->ts;
	stream = c->stream;
	flags = c->flags;
	bpf_map_delete_elem(&calls, &key);
	delta = now - start;
	hist_add(&hists, &hk, delta);

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		drops = bpf_map_lookup_elem(&dropped, &zero);
		if (drops)
			__sync_fetch_and_add(drops, 1);
		return 0;
	}
	e->pid = hk.pid;
	e->tid = key.tid;
	e->sym = key.sym;
	e->flags = flags;
	e->start_ns = start;
	e->duration_ns = delta;
	e->stream = stream;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
