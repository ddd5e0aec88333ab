/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Minimal kernel type subset for tailroot's BPF programs.
 *
 * This replaces a full `bpftool btf dump file /sys/kernel/btf/vmlinux format c`
 * (2.8 MB, specific to one kernel build). Every struct that a program reads a
 * field of is declared with preserve_access_index, so clang emits CO-RE
 * relocations and libbpf-compatible loaders (cilium/ebpf) patch the field
 * offsets against the running kernel's BTF at load time. Only the fields the
 * programs use are listed; their order and offsets here do not matter.
 *
 * struct pt_regs is the exception: uprobe programs read it as their context,
 * and context accesses must use the real x86-64 layout (an ABI), so it is
 * declared in full and without preserve_access_index.
 *
 * Defining __VMLINUX_H__ makes bpf_tracing.h use kernel pt_regs field names
 * (di, si, ...).
 */
#ifndef __VMLINUX_H__
#define __VMLINUX_H__

typedef signed char __s8;
typedef unsigned char __u8;
typedef short int __s16;
typedef short unsigned int __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long int __s64;
typedef long long unsigned int __u64;
typedef __s8 s8;
typedef __u8 u8;
typedef __s16 s16;
typedef __u16 u16;
typedef __s32 s32;
typedef __u32 u32;
typedef __s64 s64;
typedef __u64 u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum {
	false = 0,
	true = 1,
};
typedef int pid_t;
typedef u64 sector_t;
typedef u8 blk_status_t;

/* UAPI constants (include/uapi/linux/bpf.h); stable by ABI. */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_STACK_TRACE = 7,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

enum {
	BPF_F_NO_PREALLOC = 1,              /* map_flags; required by local storage maps */
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1, /* bpf_task_storage_get flags */
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

/* x86-64 struct pt_regs (arch/x86/include/asm/ptrace.h), full layout. */
struct pt_regs {
	long unsigned int r15;
	long unsigned int r14;
	long unsigned int r13;
	long unsigned int r12;
	long unsigned int bp;
	long unsigned int bx;
	long unsigned int r11;
	long unsigned int r10;
	long unsigned int r9;
	long unsigned int r8;
	long unsigned int ax;
	long unsigned int cx;
	long unsigned int dx;
	long unsigned int si;
	long unsigned int di;
	long unsigned int orig_ax;
	long unsigned int ip;
	long unsigned int cs;
	long unsigned int flags;
	long unsigned int sp;
	long unsigned int ss;
};

struct kernfs_node {
	u64 id; /* inode number of the cgroup directory == cgroup id */
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup *dfl_cgrp; /* the task's cgroup in the v2 (default) hierarchy */
} __attribute__((preserve_access_index));

struct task_struct {
	unsigned int __state; /* 0 == TASK_RUNNING (kernel >= 5.14) */
	pid_t pid;            /* thread id */
	pid_t tgid;           /* process id */
	struct css_set *cgroups;
	char comm[16]; /* thread name (TASK_COMM_LEN) */
} __attribute__((preserve_access_index));

/* Kernels before 5.14 named the state field "state". */
struct task_struct___pre514 {
	long int state;
} __attribute__((preserve_access_index));

struct gendisk {
	int major;
	int first_minor;
} __attribute__((preserve_access_index));

struct request_queue {
	struct gendisk *disk; /* kernel >= 5.15 */
} __attribute__((preserve_access_index));

struct request {
	struct request_queue *q;
	unsigned int cmd_flags; /* REQ_OP_* in the low 8 bits */
	unsigned int __data_len; /* bytes */
	sector_t __sector;       /* 512-byte sectors */
} __attribute__((preserve_access_index));

/* Kernels before 5.15 kept the disk on the request. */
struct request___pre515 {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

#endif /* __VMLINUX_H__ */
