// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The exec watcher: on every exec on the machine (the sched_process_exec
 * tracepoint, in the context of the process that exec'd, after the new
 * program is loaded and before it runs a user-space instruction), match
 * the watch rules (watch-abi.h: the file, the command name or the
 * cgroup); on a match, stop the process with a
 * SIGSTOP, delivered as it returns to user space, so before its first
 * user-space instruction (the dynamic loader's entry, or the program's for
 * a static one), and tell ptd through the ring buffer: ptd seizes the
 * stopped process, starts a session and lets it run on (daemon/watch.c).
 *
 * The stop is sent only when the event could be reserved, so no process
 * is stopped without ptd hearing of it.  The first matching rule (lowest
 * slot) takes the process.  A rule of a user other than root matches only
 * that user's processes with no set-user-ID or set-group-ID change in the
 * exec: a process the user could send a SIGSTOP to (kill(2)'s rule) and,
 * ptd checks again before it traces, ptrace.
 *
 * GPL-compatible licence: bpf_send_signal_thread is GPL-only.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "watch-abi.h"
#include "pidns.bpf.h"

#define SIGSTOP 19

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* ptd's own process (its id in ptd's PID namespace): never matched (set
 * before load). */
const volatile __u32 ptd_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PTD_WATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct ptd_watch_slot);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PTD_WATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct ptd_watch_count);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static bool comm_equal(const char *a, const char *b)
{
	for (int i = 0; i < PTD_WATCH_COMM_LEN; i++) {
		if (a[i] != b[i])
			return false;
		if (!a[i])
			return true;
	}
	return true;
}

/* Is the current task in cgroup @cgid (v2) or below it?  Ids are global
 * and levels counted from the real root, so a ptd inside a cgroup
 * namespace matches the same processes. */
static bool in_cgroup(__u64 cgid)
{
	for (int level = 0; level < PTD_WATCH_CGROUP_DEPTH; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);

		if (!id)		/* below the task's own cgroup */
			return false;
		if (id == cgid)
			return true;
	}
	return false;
}

struct exec_ctx {
	__u64 ino;
	__u32 dev;
	__u32 uid, euid, suid, fsuid;
	__u32 gid, egid, sgid, fsgid;
	char comm[PTD_WATCH_COMM_LEN];
};

static bool slot_matches(const struct ptd_watch_slot *r,
			 const struct exec_ctx *x)
{
	switch (r->kind) {
	case PTD_WATCH_EXE:
		if (r->ino != x->ino || r->dev != x->dev)
			return false;
		break;
	case PTD_WATCH_COMM:
		if (!comm_equal(r->comm, x->comm))
			return false;
		break;
	case PTD_WATCH_CGROUP:
		if (!in_cgroup(r->cgid))
			return false;
		break;
	default:
		return false;
	}
	if (r->has_uid && x->uid != r->uid)
		return false;
	if (r->owner_root)
		return true;
	return x->uid == r->owner && x->euid == r->owner &&
	       x->suid == r->owner && x->fsuid == r->owner &&
	       x->egid == x->gid && x->sgid == x->gid && x->fsgid == x->gid;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(ptd_on_exec, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	struct exec_ctx x = {};
	const struct cred *cred;
	struct ptd_watch_event *ev;
	struct ptd_watch_count *cnt;
	__u32 tgid, tid;

	/* (the tracepoint runs in the exec'ing task: p is current) */
	if (!ptd_current_ids(&tgid, &tid) || tgid == ptd_tgid)
		return 0;
	x.ino = BPF_CORE_READ(bprm, file, f_inode, i_ino);
	x.dev = BPF_CORE_READ(bprm, file, f_inode, i_sb, s_dev);
	cred = BPF_CORE_READ(p, cred);
	x.uid = BPF_CORE_READ(cred, uid.val);
	x.euid = BPF_CORE_READ(cred, euid.val);
	x.suid = BPF_CORE_READ(cred, suid.val);
	x.fsuid = BPF_CORE_READ(cred, fsuid.val);
	x.gid = BPF_CORE_READ(cred, gid.val);
	x.egid = BPF_CORE_READ(cred, egid.val);
	x.sgid = BPF_CORE_READ(cred, sgid.val);
	x.fsgid = BPF_CORE_READ(cred, fsgid.val);
	BPF_CORE_READ_STR_INTO(&x.comm, p, comm);

	for (__u32 i = 0; i < PTD_WATCH_SLOTS; i++) {
		__u32 key = i;
		struct ptd_watch_slot *r = bpf_map_lookup_elem(&rules, &key);

		if (!r || !slot_matches(r, &x))
			continue;
		cnt = bpf_map_lookup_elem(&counts, &key);
		ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
		if (!ev) {
			if (cnt)
				__sync_fetch_and_add(&cnt->missed, 1);
			return 0;
		}
		if (bpf_send_signal_thread(SIGSTOP) < 0) {
			bpf_ringbuf_discard(ev, 0);
			if (cnt)
				__sync_fetch_and_add(&cnt->missed, 1);
			return 0;
		}
		ev->slot = i;
		ev->id = r->id;
		ev->pid = tgid;
		ev->uid = x.uid;
		ev->ktime_ns = bpf_ktime_get_ns();
		__builtin_memcpy(ev->comm, x.comm, sizeof(ev->comm));
		bpf_ringbuf_submit(ev, 0);
		if (cnt)
			__sync_fetch_and_add(&cnt->matched, 1);
		return 0;
	}
	return 0;
}
