//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Block IO latency: issue to completion of each request, per disk.
 *
 * block_rq_issue and block_rq_complete attach as tp_btf, which hands the
 * programs the struct request itself. A request is keyed by its address
 * (unique while in flight) instead of the classic tracepoint's (dev,
 * sector), which collides for flushes and other zero-sector requests.
 *
 * The disk is the whole disk (gendisk major:first_minor), as in the
 * tracepoints' dev field; a partition's requests count for its disk.
 * A request completed in several parts fires block_rq_complete once per
 * part; the first one ends its latency and only that one is counted.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "hist.h"

/* Kernel dev_t encoding (include/linux/kdev_t.h). */
#define MINORBITS 20
#define MKDEV(ma, mi) (((u32)(ma) << MINORBITS) | (u32)(mi))

#define REQ_OP_MASK 0xff
#define REQ_OP_READ 0
#define REQ_OP_WRITE 1
#define REQ_OP_FLUSH 2
#define REQ_OP_DISCARD 3

struct issued {
	u64 ts;  /* ns, CLOCK_MONOTONIC, at block_rq_issue */
	u32 dev; /* kernel dev_t of the disk: major << 20 | minor */
	u32 op;  /* REQ_OP_* at issue */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u64); /* struct request address */
	__type(value, struct issued);
} inflight_reqs SEC(".maps");

/* Per-disk counters. */
struct disk_stats {
	struct hist lat;  /* issue to completion, ns */
	u64 read_ops;     /* completed REQ_OP_READ requests (count) */
	u64 write_ops;    /* completed REQ_OP_WRITE requests (count) */
	u64 other_ops;    /* completed flush, discard, ... requests (count) */
	u64 bytes;        /* bytes completed (first completion of a request) */
	u64 errors;       /* completions with a non-zero blk_status_t (count) */
	s64 inflight;     /* issued minus completed requests right now (count) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256); /* set from Options.MaxDisks */
	__type(key, u32);         /* kernel dev_t of the disk */
	__type(value, struct disk_stats);
} disks SEC(".maps");

const volatile struct disk_stats zero_disk = {};

static __always_inline struct disk_stats *disk(u32 dev)
{
	struct disk_stats *d = bpf_map_lookup_elem(&disks, &dev);

	if (d)
		return d;
	bpf_map_update_elem(&disks, &dev, (const void *)&zero_disk, BPF_NOEXIST);
	return bpf_map_lookup_elem(&disks, &dev);
}

static __always_inline u32 request_dev(struct request *rq)
{
	struct gendisk *gd = NULL;

	if (bpf_core_field_exists(rq->q->disk))
		gd = BPF_CORE_READ(rq, q, disk);
	else
		gd = BPF_CORE_READ((struct request___pre515 *)rq, rq_disk);
	if (!gd)
		return 0;
	return MKDEV(BPF_CORE_READ(gd, major), BPF_CORE_READ(gd, first_minor));
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	u64 key = (u64)rq;
	struct issued v = {
		.ts = bpf_ktime_get_ns(),
		.dev = request_dev(rq),
		.op = BPF_CORE_READ(rq, cmd_flags) & REQ_OP_MASK,
	};
	struct disk_stats *d;

	/* A requeued request is issued again: restart its clock only. */
	if (bpf_map_update_elem(&inflight_reqs, &key, &v, BPF_NOEXIST) != 0) {
		bpf_map_update_elem(&inflight_reqs, &key, &v, BPF_EXIST);
		return 0;
	}
	d = disk(v.dev);
	if (d)
		__sync_fetch_and_add(&d->inflight, 1);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	u64 key = (u64)rq;
	struct issued *v = bpf_map_lookup_elem(&inflight_reqs, &key);
	struct disk_stats *d;
	u64 now = bpf_ktime_get_ns(), delta;
	u32 dev, op;

	if (!v)
		return 0; /* issued before the program was attached, or a later part */
	delta = now - v->ts;
	dev = v->dev;
	op = v->op;
	bpf_map_delete_elem(&inflight_reqs, &key);

	d = disk(dev);
	if (!d)
		return 0;
	__sync_fetch_and_add(&d->inflight, -1);
	if ((s64)delta >= 0)
		hist_record(&d->lat, delta);
	if (op == REQ_OP_READ)
		__sync_fetch_and_add(&d->read_ops, 1);
	else if (op == REQ_OP_WRITE)
		__sync_fetch_and_add(&d->write_ops, 1);
	else
		__sync_fetch_and_add(&d->other_ops, 1);
	__sync_fetch_and_add(&d->bytes, nr_bytes);
	if (error)
		__sync_fetch_and_add(&d->errors, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
