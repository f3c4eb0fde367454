// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The fork stopper: every child process (fork, vfork, clone without
 * CLONE_THREAD) of a process ptd follows is stopped with a SIGSTOP before
 * its first user-space instruction, and reported to ptd through the ring
 * buffer (daemon/forkstop.c), which starts a session on it as on a watch
 * rule's match and continues it once traced.  For the intel_pt source,
 * whose per-thread events do not follow a fork.
 *
 * Two programs, because bpf_send_signal_thread signals only the current
 * thread, and the fork is seen in the parent:
 *  - sched_process_fork (in the parent, after the child is made and
 *    before it is woken): a child of a followed process is remembered in
 *    `pending` by its global pid;
 *  - sys_exit (in the child, returning 0 from the fork: the first thing
 *    it does in user space's direction, ret_from_fork ->
 *    syscall_exit_to_user_mode, whose syscall work runs the tracepoint
 *    before the signals are taken; copy_process gave the child its
 *    parent's tracepoint flag): a pending child is stopped and reported.
 *
 * fexit of schedule_tail would see the child without a syscall
 * tracepoint, but needs the kernel's ftrace trampolines, which not every
 * kernel has (6.18 here: fentry/fexit programs are refused).  The
 * syscall tracepoint, once attached, makes every syscall on the machine
 * take the slow exit path and run this program (a compare for all but
 * those that return 0, a hash lookup for those): ptd attaches it only
 * while it follows some process (daemon/forkstop.c).
 *
 * The stop is sent only when the event could be reserved, so no process
 * is stopped without ptd hearing of it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "forkstop-abi.h"
#include "pidns.bpf.h"

#define SIGSTOP 19

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* followed process (ptd's namespace) -> its cookie and misses */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PTD_FORKSTOP_FOLLOWED);
	__type(key, __u32);
	__type(value, struct ptd_forkstop_follow);
} followed SEC(".maps");

struct pending {
	__u64 cookie;
	__u32 parent;
	__u32 pad;
};

/* child (global pid) -> what its report says, until it runs */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PTD_FORKSTOP_PENDING);
	__type(key, __u32);
	__type(value, struct pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ptd_forkstop_count);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* A child of @parent (cookie @cookie) let go untraced: counted for the
 * process too while it is still followed with that cookie. */
static void missed(__u32 parent, __u64 cookie)
{
	struct ptd_forkstop_follow *fw = bpf_map_lookup_elem(&followed,
							     &parent);

	if (fw && fw->cookie == cookie)
		__sync_fetch_and_add(&fw->missed, 1);
}

static void count(bool stopped)
{
	__u32 key = 0;
	struct ptd_forkstop_count *c = bpf_map_lookup_elem(&counts, &key);

	if (!c)
		return;
	if (stopped)
		__sync_fetch_and_add(&c->stopped, 1);
	else
		__sync_fetch_and_add(&c->missed, 1);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(ptd_on_fork, struct task_struct *parent,
	     struct task_struct *child)
{
	struct ptd_forkstop_follow *fw;
	struct pending p = {};
	__u32 tgid, tid, key;

	/* (runs in the parent: current) */
	if (!ptd_current_ids(&tgid, &tid))
		return 0;
	fw = bpf_map_lookup_elem(&followed, &tgid);
	if (!fw)
		return 0;
	key = BPF_CORE_READ(child, pid);
	if (key != (__u32)BPF_CORE_READ(child, tgid))
		return 0;		/* a thread: its process's session's */
	p.cookie = fw->cookie;
	p.parent = tgid;
	if (bpf_map_update_elem(&pending, &key, &p, 0 /* BPF_ANY */) < 0) {
		__sync_fetch_and_add(&fw->missed, 1);
		count(false);
	}
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(ptd_on_child, struct pt_regs *regs, long ret)
{
	struct ptd_forkstop_event *ev;
	struct pending *pp, p;
	__u32 key, tgid, tid;

	if (ret != 0)		/* (a child returns 0 from its fork) */
		return 0;
	key = (__u32)bpf_get_current_pid_tgid();
	pp = bpf_map_lookup_elem(&pending, &key);
	if (!pp)
		return 0;
	p = *pp;
	(void)bpf_map_delete_elem(&pending, &key);
	if (!ptd_current_ids(&tgid, &tid)) {
		missed(p.parent, p.cookie);
		count(false);
		return 0;
	}
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		missed(p.parent, p.cookie);
		count(false);
		return 0;
	}
	if (bpf_send_signal_thread(SIGSTOP) < 0) {
		bpf_ringbuf_discard(ev, 0);
		missed(p.parent, p.cookie);
		count(false);
		return 0;
	}
	ev->cookie = p.cookie;
	ev->parent = p.parent;
	ev->pid = tgid;
	ev->ktime_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(ev, 0);
	count(true);
	return 0;
}
