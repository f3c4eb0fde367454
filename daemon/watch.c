/* SPDX-License-Identifier: MIT */
/*
 * The exec watcher (watch.h): libbpf and the skeleton bpftool generated
 * from daemon/bpf/watch.bpf.c at build time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/bpfload.h"
#include "daemon/watch.h"

#ifdef PTD_HAVE_BPF

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* bpftool's skeleton holds the program as one long string literal and
 * casts away const: not ours to fix. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverlength-strings"
#pragma GCC diagnostic ignored "-Wcast-qual"
#include "watch.skel.h"
#pragma GCC diagnostic pop

struct ptd_watcher {
	struct watch_bpf *skel;
	struct ring_buffer *rb;
	void (*fn)(void *ctx, const struct ptd_watch_event *ev);
	void *ctx;
};

bool ptd_watcher_built(void)
{
	return true;
}

/* libbpf's messages are not ours to print (the daemon logs through
 * log.h; a refusal's reason is in the diag). */
static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

static int on_event(void *ctx, void *data, size_t len);

int ptd_watcher_new(struct ptd_watcher **ret, struct ptd_diag *diag)
{
	struct ptd_bpf_pidns ns;
	struct ptd_watcher *w;
	int r;

	*ret = NULL;
	r = ptd_bpf_check("watch rules", &ns, diag);
	if (r < 0)
		return r;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	(void)libbpf_set_print(quiet);
	w->skel = watch_bpf__open();
	if (!w->skel) {
		r = -errno;
		(void)ptd_diagf(diag, r, "cannot open the BPF program: %s",
				strerror(-r));
		goto err;
	}
	w->skel->rodata->ptd_tgid = (__u32)getpid();
	w->skel->rodata->pidns_translate = !ns.initial;
	w->skel->rodata->pidns_dev = ns.dev;
	w->skel->rodata->pidns_ino = ns.ino;
	r = watch_bpf__load(w->skel);
	if (r == 0)
		r = watch_bpf__attach(w->skel);
	if (r == -EPERM || r == -EACCES) {
		(void)ptd_bpf_refusal(r, "watch rules", diag);
		goto err;
	}
	if (r < 0) {
		(void)ptd_diagf(diag, r, "cannot load the BPF program onto "
				"the sched_process_exec tracepoint: %s",
				strerror(-r));
		goto err;
	}
	r = ptd_bpf_ringbuf(bpf_map__fd(w->skel->maps.events), on_event, w,
			    &w->rb, diag);
	if (r < 0)
		goto err;
	*ret = w;
	return 0;
err:
	ptd_watcher_free(w, NULL, NULL);
	return r;
}

void ptd_watcher_free(struct ptd_watcher *w,
		      void (*fn)(void *ctx, const struct ptd_watch_event *ev),
		      void *ctx)
{
	if (!w)
		return;
	/* no process is stopped once the program is detached: those
	 * stopped before are in the ring buffer, for @fn */
	watch_bpf__detach(w->skel);
	if (w->rb && fn)
		(void)ptd_watcher_drain(w, fn, ctx);
	ring_buffer__free(w->rb);
	watch_bpf__destroy(w->skel);
	free(w);
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct ptd_watcher *w = ctx;
	struct ptd_watch_event ev;

	if (len < sizeof(ev))
		return 0;
	memcpy(&ev, data, sizeof(ev));
	w->fn(w->ctx, &ev);
	return 0;
}

int ptd_watcher_fd(const struct ptd_watcher *w)
{
	return w->rb ? ring_buffer__epoll_fd(w->rb) : -1;
}

int ptd_watcher_set(struct ptd_watcher *w, unsigned slot,
		    const struct ptd_watch_slot *rule)
{
	struct ptd_watch_slot none = { 0 };
	struct ptd_watch_count zero = { 0 };
	__u32 key = slot;

	if (slot >= PTD_WATCH_SLOTS)
		return -EINVAL;
	/* counts first: a match of the new rule counts from zero */
	if (rule && bpf_map_update_elem(bpf_map__fd(w->skel->maps.counts),
					&key, &zero, BPF_ANY) < 0)
		return -errno;
	if (bpf_map_update_elem(bpf_map__fd(w->skel->maps.rules), &key,
				rule ? rule : &none, BPF_ANY) < 0)
		return -errno;
	return 0;
}

int ptd_watcher_counts(const struct ptd_watcher *w, unsigned slot,
		       struct ptd_watch_count *ret)
{
	__u32 key = slot;

	memset(ret, 0, sizeof(*ret));
	if (slot >= PTD_WATCH_SLOTS)
		return -EINVAL;
	if (bpf_map_lookup_elem(bpf_map__fd(w->skel->maps.counts), &key,
				ret) < 0)
		return -errno;
	return 0;
}

int ptd_watcher_drain(struct ptd_watcher *w,
		      void (*fn)(void *ctx, const struct ptd_watch_event *ev),
		      void *ctx)
{
	if (!w->rb)
		return 0;
	w->fn = fn;
	w->ctx = ctx;
	return ring_buffer__consume(w->rb);
}

#else /* !PTD_HAVE_BPF */

bool ptd_watcher_built(void)
{
	return false;
}

int ptd_watcher_new(struct ptd_watcher **ret, struct ptd_diag *diag)
{
	*ret = NULL;
	return ptd_diagf(diag, -PTD_EUNSUPPORTED,
			 "this ptd was built without its BPF programs (clang "
			 "or bpftool was missing at build time, or "
			 "-Dbpf=disabled): watch rules need them");
}

void ptd_watcher_free(struct ptd_watcher *w,
		      void (*fn)(void *ctx, const struct ptd_watch_event *ev),
		      void *ctx)
{
}

int ptd_watcher_fd(const struct ptd_watcher *w)
{
	return -1;
}

int ptd_watcher_set(struct ptd_watcher *w, unsigned slot,
		    const struct ptd_watch_slot *rule)
{
	return -ENOSYS;
}

int ptd_watcher_counts(const struct ptd_watcher *w, unsigned slot,
		       struct ptd_watch_count *ret)
{
	return -ENOSYS;
}

int ptd_watcher_drain(struct ptd_watcher *w,
		      void (*fn)(void *ctx, const struct ptd_watch_event *ev),
		      void *ctx)
{
	return -ENOSYS;
}

#endif
