// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Triggers: one program, attached by ptd (daemon/trigger.c) as a uprobe
 * to each trigger's instruction with the traced process's tgid and the
 * trigger's id in its cookie (trigger-abi.h).  The kernel installs the
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

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} hits SEC(".maps");

/* Hits of the right process lost because the ring buffer was full. */
__u64 missed = 0;

SEC("uprobe")
int BPF_KPROBE(ptd_on_trigger)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct ptd_trigger_hit *h;

	if ((__u32)(pid_tgid >> 32) != (__u32)(cookie >> 32))
		return 0;
	h = bpf_ringbuf_reserve(&hits, sizeof(*h), 0);
	if (!h) {
		__sync_fetch_and_add(&missed, 1);
		return 0;
	}
	h->id = (__u32)cookie;
	h->pid = (__u32)(pid_tgid >> 32);
	h->tid = (__u32)pid_tgid;
	h->pad = 0;
	h->ip = PT_REGS_IP(ctx);
	h->ktime_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(h, 0);
	return 0;
}
