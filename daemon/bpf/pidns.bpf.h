/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Process ids as ptd names them (daemon/bpfload.h, struct ptd_bpf_pidns),
 * for the programs of daemon/bpf/: the kernel's global ids when ptd runs
 * in the initial PID namespace; else the ids in ptd's own namespace,
 * given to the program before load (its dev and inode).
 */
#ifndef PTD_BPF_PIDNS_H
#define PTD_BPF_PIDNS_H

/* Set before load: ptd's PID namespace, when it is not the initial one. */
const volatile __u32 pidns_translate = 0;
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;

/* The current thread's process and thread id as ptd sees them into
 * *@tgid and *@tid; false where ptd cannot see it: its PID namespace is
 * not ptd's (bpf_get_ns_current_pid_tgid matches the task's own
 * namespace only: a container inside ptd's is out of sight). */
static __always_inline bool ptd_current_ids(__u32 *tgid, __u32 *tid)
{
	struct bpf_pidns_info ns = {};
	__u64 v;

	if (!pidns_translate) {
		v = bpf_get_current_pid_tgid();
		*tgid = (__u32)(v >> 32);
		*tid = (__u32)v;
		return true;
	}
	if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns,
					sizeof(ns)) < 0)
		return false;
	*tgid = ns.tgid;
	*tid = ns.pid;
	return true;
}

#endif
