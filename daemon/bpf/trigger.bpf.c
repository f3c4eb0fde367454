// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Triggers: one program, attached by ptd (daemon/trigger.c) as a uprobe
 * to each trigger's instruction (another as a kernel tracepoint, for a
 * tracepoint trigger) with the traced process's tgid (as ptd sees it:
 * pidns.bpf.h) and the trigger's id in its cookie (trigger-abi.h).  The kernel installs the
 * uprobe only in that process (the perf event names it), but every
 * thread of every process that maps the file may run into one: a hit is
 * reported only when the thread that hit it belongs to the cookie's
 * process -- every thread of it, whichever hit it.  The hit goes to ptd
 * through the ring buffer; ptd's control loop polls it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "trigger-abi.h"
#include "pidns.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} hits SEC(".maps");

/* Hits of the right process lost because the ring buffer was full. */
__u64 missed = 0;

/* Report a hit of trigger @cookie at user-space @ip, if the current
 * thread belongs to the cookie's process. */
static __always_inline int report(__u64 cookie, __u64 ip)
{
	struct ptd_trigger_hit *h;
	__u32 tgid, tid;

	if (!ptd_current_ids(&tgid, &tid) || tgid != (__u32)(cookie >> 32))
		return 0;
	h = bpf_ringbuf_reserve(&hits, sizeof(*h), 0);
	if (!h) {
		__sync_fetch_and_add(&missed, 1);
		return 0;
	}
	h->id = (__u32)cookie;
	h->pid = tgid;
	h->tid = tid;
	h->pad = 0;
	h->ip = ip;
	h->ktime_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(h, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(ptd_on_trigger)
{
	return report(bpf_get_attach_cookie(ctx), PT_REGS_IP(ctx));
}

/* A tracepoint trigger (attached by name at run time): where the thread
 * is in user space -- its saved user registers (for a syscall's
 * tracepoints, the instruction after the syscall). */
SEC("tracepoint")
int ptd_on_tracepoint(void *ctx)
{
	struct pt_regs *regs;
	__u64 ip = 0;

	/* the kernel's pt_regs has vmlinux.h's layout (see there) */
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (regs && bpf_probe_read_kernel(&ip, sizeof(ip), &regs->rip) < 0)
		ip = 0;
	return report(bpf_get_attach_cookie(ctx), ip);
}
