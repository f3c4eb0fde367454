/* SPDX-License-Identifier: MIT */
/*
 * What the exec watcher (watch.bpf.c) and ptd (daemon/watch.c) share: the
 * rules the BPF program matches every exec against (an array map, slot =
 * index) and the event it writes to the ring buffer for each match.
 * Fixed-width fields only: both sides are compiled for x86-64 but by
 * different compilers (clang -target bpf, the C compiler).
 */
#ifndef PTD_DAEMON_BPF_WATCH_ABI_H
#define PTD_DAEMON_BPF_WATCH_ABI_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define PTD_WATCH_SLOTS 64		/* rules on the machine, all users */
#define PTD_WATCH_COMM_LEN 16		/* TASK_COMM_LEN */

enum {
	PTD_WATCH_FREE = 0,
	PTD_WATCH_EXE = 1,		/* the executed file: dev + inode */
	PTD_WATCH_COMM = 2,		/* the new comm (the file's name) */
	PTD_WATCH_CGROUP = 3,		/* the process is in this cgroup v2 or
					 * one below it (at most
					 * PTD_WATCH_CGROUP_DEPTH levels from
					 * the root) */
};

#define PTD_WATCH_CGROUP_DEPTH 32

struct ptd_watch_slot {
	__u32 kind;			/* PTD_WATCH_* */
	__u32 id;			/* the rule's id (ptd's numbering) */
	__u64 ino;			/* EXE: the file's inode */
	__u32 dev;			/* EXE: its s_dev, kernel encoding
					 * (major << 20 | minor) */
	__u32 owner_root;		/* the owner is root: any process */
	__u32 owner;			/* else: the process's real, effective,
					 * saved and fs uid are all this, and
					 * its gids all equal (no set-user-ID
					 * or set-group-ID exec) */
	__u32 has_uid;			/* only a process whose real uid is */
	__u32 uid;			/* this */
	__u32 pad;
	char comm[PTD_WATCH_COMM_LEN];	/* COMM: NUL-padded */
	__u64 cgid;			/* CGROUP: its id (the inode of its
					 * directory) */
};

/* Per slot, counted by the program: execs matched (a stop sent and an
 * event written), and matches let go because the ring buffer was full
 * or the signal could not be sent (the process runs on, untraced). */
struct ptd_watch_count {
	__u64 matched;
	__u64 missed;
};

struct ptd_watch_event {
	__u32 slot;
	__u32 id;
	__u32 pid;
	__u32 uid;
	__u64 ktime_ns;			/* bpf_ktime_get_ns at the exec */
	char comm[PTD_WATCH_COMM_LEN];
};

#endif
