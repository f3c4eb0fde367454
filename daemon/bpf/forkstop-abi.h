/* SPDX-License-Identifier: MIT */
/*
 * What the fork stopper (forkstop.bpf.c) and ptd (daemon/forkstop.c)
 * share: the processes whose children are stopped (a hash map ptd fills,
 * keyed by the process id in ptd's PID namespace, the value a cookie ptd
 * chooses: its session's id), the counts, and the event written for each
 * child stopped.  Fixed-width fields only (two compilers).
 */
#ifndef PTD_DAEMON_BPF_FORKSTOP_ABI_H
#define PTD_DAEMON_BPF_FORKSTOP_ABI_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define PTD_FORKSTOP_FOLLOWED 4096	/* processes followed at once */
#define PTD_FORKSTOP_PENDING 16384	/* children forked, not yet run */

/* Counted by the programs: children stopped (a stop sent and an event
 * written), and children of a followed process let go untraced (the
 * pending map or the ring buffer was full, the signal could not be sent,
 * or the child's PID namespace is not ptd's). */
struct ptd_forkstop_count {
	__u64 stopped;
	__u64 missed;
};

/* What ptd keeps for each process followed (the `followed` map's value):
 * its cookie, and the children of it the programs let go untraced (as
 * `missed` above, counted here too where the process is known), so that
 * its session can say how many it lost. */
struct ptd_forkstop_follow {
	__u64 cookie;
	__u64 missed;
};

struct ptd_forkstop_event {
	__u64 cookie;			/* the parent's, as ptd set it */
	__u32 parent;			/* the process that forked */
	__u32 pid;			/* the child, stopped */
	__u64 ktime_ns;			/* bpf_ktime_get_ns at the stop */
};

#endif
