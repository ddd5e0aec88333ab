/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Latency histograms shared by every tailroot BPF program.
 *
 * Buckets are the buckets of a Prometheus native histogram with schema 0
 * over SECONDS, computed exactly from integer nanoseconds, so user space
 * copies counts without re-bucketing (bpf/hist.go, Hist.Native):
 *
 *   slot 0        value == 0 ns                 (native zero bucket)
 *   slot s, 1..63 value in (2^(s-31), 2^(s-30)] s (native bucket index s-30)
 *
 * so slot 1 holds 1 ns, slot 30 holds (0.5 s, 1 s], slot 63 holds
 * (2^32 s, 2^33 s] and, folded in, anything above 2^33 s (272 years; a
 * monotonic-clock difference never gets there).
 *
 * Why not plain floor(log2(ns)): a power of two nanoseconds is not a power of
 * two seconds (1e9 is not a power of two), and native buckets are
 * upper-inclusive while floor(log2) buckets are lower-inclusive, so that
 * layout cannot be mapped onto native buckets without guessing.
 *
 * Derivation of hist_slot: let k = floor(log2(v)), v in [2^k, 2^(k+1)).
 * The native index is j = ceil(log2(v / 1e9)). Since 2^k <= v < 2^(k+1) and
 * 1e9 = 2^29 * 1.8626..., j is k-29 when v <= 1e9 * 2^(k-29) and k-28
 * otherwise; slot = j + 30 is k+1 or k+2. The comparison is done in exact
 * integer arithmetic: for k >= 29 as v <= 1e9 << (k-29) (< 2^64 because
 * 1e9 < 2^30 and k-29 <= 34), for k < 29 as v << (29-k) <= 1e9 (< 2^30).
 */
#ifndef TAILROOT_HIST_H
#define TAILROOT_HIST_H

#define HIST_SLOTS 64
#define NS_PER_SEC 1000000000ULL

struct hist {
	u64 slots[HIST_SLOTS]; /* events per bucket (count); layout above */
	u64 sum_ns;            /* ns: sum of all recorded values */
};

/* floor(log2(v)) for v > 0; branch-light, verifier friendly. */
static __always_inline u32 log2_u64(u64 v)
{
	u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5;
	v >>= shift;
	r = shift;
	shift = (v > 0xFFFF) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xFF) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xF) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline u32 hist_slot(u64 v)
{
	u32 k, s;
	bool le;

	if (v == 0)
		return 0;
	k = log2_u64(v);
	if (k >= 29)
		le = v <= (NS_PER_SEC << (k - 29));
	else
		le = (v << (29 - k)) <= NS_PER_SEC;
	s = le ? k + 1 : k + 2;
	if (s > HIST_SLOTS - 1)
		s = HIST_SLOTS - 1;
	return s;
}

/* Zero value used to create histogram entries (too big for the stack). */
const volatile struct hist zero_hist = {};

/* hist_record records v (ns) in h; updates are atomic per field. */
static __always_inline void hist_record(struct hist *h, u64 v)
{
	u32 s = hist_slot(v) & (HIST_SLOTS - 1);

	__sync_fetch_and_add(&h->slots[s], 1);
	__sync_fetch_and_add(&h->sum_ns, v);
}

/*
 * hist_add records v (ns) in the histogram stored under key in map, whose
 * values must be exactly struct hist. Entries are created on first use.
 */
static __always_inline void hist_add(void *map, const void *key, u64 v)
{
	struct hist *h;

	h = bpf_map_lookup_elem(map, key);
	if (!h) {
		bpf_map_update_elem(map, key, (const void *)&zero_hist, BPF_NOEXIST);
		h = bpf_map_lookup_elem(map, key);
		if (!h)
			return;
	}
	hist_record(h, v);
}

#endif /* TAILROOT_HIST_H */
