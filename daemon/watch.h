/* SPDX-License-Identifier: MIT */
/*
 * The exec watcher: the BPF program of daemon/bpf/watch.bpf.c, loaded
 * through its libbpf skeleton, attached to the sched_process_exec
 * tracepoint, with its rule slots and its ring buffer of matches.  The
 * control loop (server/watch.c) owns one, loaded on the first watch
 * request; nothing else of ptd needs BPF.
 */
#ifndef PTD_DAEMON_WATCH_H
#define PTD_DAEMON_WATCH_H

#include <stdbool.h>

#include "common/diag.h"
#include "daemon/bpf/watch-abi.h"

struct ptd_watcher;

/* Whether this ptd was built with the BPF programs. */
bool ptd_watcher_built(void);

/* Load the program and attach it.  Returns 0, or with a message in @diag
 * saying why BPF cannot be used here: -PTD_EUNSUPPORTED (built without
 * BPF, or the kernel has no BTF at /sys/kernel/btf/vmlinux), -EPERM (no
 * CAP_BPF/CAP_PERFMON, or the kernel's lockdown forbids it: the message
 * says which), -errno. */
int ptd_watcher_new(struct ptd_watcher **ret, struct ptd_diag *diag);
/* Detach the program, hand the matches still queued to @fn (if any: each
 * such process is stopped and must be traced or continued), free. */
void ptd_watcher_free(struct ptd_watcher *w,
		      void (*fn)(void *ctx, const struct ptd_watch_event *ev),
		      void *ctx);

/* The ring buffer's epoll fd: readable when matches wait. */
int ptd_watcher_fd(const struct ptd_watcher *w);

/* Set slot @slot (< PTD_WATCH_SLOTS) to @rule (its counts zeroed), or
 * free it (@rule NULL).  Returns 0 or -errno. */
int ptd_watcher_set(struct ptd_watcher *w, unsigned slot,
		    const struct ptd_watch_slot *rule);

/* Slot @slot's counts. */
int ptd_watcher_counts(const struct ptd_watcher *w, unsigned slot,
		       struct ptd_watch_count *ret);

/* Hand every match waiting to @fn (in the order they came).  Returns how
 * many, or -errno. */
int ptd_watcher_drain(struct ptd_watcher *w,
		      void (*fn)(void *ctx, const struct ptd_watch_event *ev),
		      void *ctx);

#endif
