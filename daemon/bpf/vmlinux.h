/* SPDX-License-Identifier: MIT */
/*
 * The few kernel types daemon/bpf/ programs read, for CO-RE: each struct
 * names only the fields used, and preserve_access_index makes clang record
 * every access as a relocation that libbpf resolves at load time against
 * the running kernel's BTF (/sys/kernel/btf/vmlinux) -- offsets and sizes
 * here are never used as they are.
 *
 * Committed rather than generated with `bpftool btf dump file
 * /sys/kernel/btf/vmlinux format c` at build time: the build then needs no
 * BTF on the build machine (a container, a chroot, debootstrap's root in
 * tests/systemd/), nor the same kernel as the one ptd runs on, and the
 * header is the short list of what the programs depend on instead of
 * 150,000 generated lines.  A field added here must exist in the
 * kernels ptd supports (or be read with bpf_core_field_exists).
 */
#ifndef PTD_BPF_VMLINUX_H
#define PTD_BPF_VMLINUX_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u32 u32;
typedef __u64 u64;
typedef int pid_t;
typedef unsigned int uid_t;
typedef unsigned int gid_t;
typedef unsigned int dev_t;
typedef _Bool bool;

enum {
	false = 0,
	true = 1,
};

#pragma clang attribute push (__attribute__((preserve_access_index)), apply_to = record)

typedef struct {
	uid_t val;
} kuid_t;

typedef struct {
	gid_t val;
} kgid_t;

struct cred {
	kuid_t uid;
	kgid_t gid;
	kuid_t suid;
	kgid_t sgid;
	kuid_t euid;
	kgid_t egid;
	kuid_t fsuid;
	kgid_t fsgid;
};

struct super_block {
	dev_t s_dev;
};

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
};

struct file {
	struct inode *f_inode;
};

struct linux_binprm {
	struct file *file;
};

struct task_struct {
	pid_t pid;
	pid_t tgid;
	const struct cred *cred;
	char comm[16];
};

#pragma clang attribute pop

/* A uprobe program's context: the registers as the kernel saved them on
 * x86-64, with the user-space API's names (asm/ptrace.h), which
 * libbpf's bpf_tracing.h uses.  Read directly, not relocated: a uprobe's
 * context is checked against this exact layout, the kernel's since x86-64
 * Linux began. */
struct pt_regs {
	unsigned long r15, r14, r13, r12, rbp, rbx;
	unsigned long r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi;
	unsigned long orig_rax, rip, cs, eflags, rsp, ss;
};

/* bpf_get_ns_current_pid_tgid's answer (include/uapi/linux/bpf.h), filled
 * by the helper with this layout: part of the helper's ABI. */
struct bpf_pidns_info {
	__u32 pid;
	__u32 tgid;
};

/* The map types and flags used (include/uapi/linux/bpf.h). */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_RINGBUF = 27,
};

#endif
