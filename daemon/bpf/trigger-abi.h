/* SPDX-License-Identifier: MIT */
/*
 * What the trigger program (trigger.bpf.c) and ptd (daemon/trigger.c)
 * share: the attach cookie of each uprobe ptd attaches it to, and the hit
 * it writes to the ring buffer.  Fixed-width fields only (see
 * watch-abi.h).
 */
#ifndef PTD_DAEMON_BPF_TRIGGER_ABI_H
#define PTD_DAEMON_BPF_TRIGGER_ABI_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define PTD_TRIGGERS_MAX 256		/* triggers on the machine, all users */

/* The cookie of a trigger's uprobe: the traced process (its tgid, as the
 * kernel's initial pid namespace numbers it) in the high 32 bits, the
 * trigger's id in the low ones.  A hit of any other process is not
 * reported. */
#define PTD_TRIGGER_COOKIE(tgid, id) \
	(((__u64)(__u32)(tgid) << 32) | (__u32)(id))

struct ptd_trigger_hit {
	__u32 id;			/* the trigger's */
	__u32 pid;			/* tgid */
	__u32 tid;			/* the thread that hit it */
	__u32 pad;
	__u64 ip;			/* where (the probed instruction) */
	__u64 ktime_ns;			/* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
};

#endif
