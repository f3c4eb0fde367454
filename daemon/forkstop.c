/* SPDX-License-Identifier: MIT */
/*
 * The fork stopper (forkstop.h): libbpf and the skeleton bpftool
 * generated from daemon/bpf/forkstop.bpf.c at build time.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/bpfload.h"
#include "daemon/forkstop.h"

#ifdef PTD_HAVE_BPF

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* (as watch.c: the skeleton's string literal and casts are bpftool's) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverlength-strings"
#pragma GCC diagnostic ignored "-Wcast-qual"
#include "forkstop.skel.h"
#pragma GCC diagnostic pop

struct ptd_forkstop {
	struct forkstop_bpf *skel;
	/* sched_process_fork, from the load on; sys_exit, while some
	 * process is followed (forkstop.bpf.c says why) */
	struct bpf_link *fork_link, *child_link;
	unsigned nfollowed;
	struct ring_buffer *rb;
	void (*fn)(void *ctx, const struct ptd_forkstop_event *ev);
	void *ctx;
};

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

static int on_event(void *ctx, void *data, size_t len);

int ptd_forkstop_new(const char *what, uint32_t ring_bytes,
		     struct ptd_forkstop **ret, struct ptd_diag *diag)
{
	struct ptd_bpf_pidns ns;
	struct ptd_forkstop *f;
	int r;

	*ret = NULL;
	r = ptd_bpf_check(what, &ns, diag);
	if (r < 0)
		return r;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	(void)libbpf_set_print(quiet);
	f->skel = forkstop_bpf__open();
	if (!f->skel) {
		r = -errno;
		(void)ptd_diagf(diag, r, "cannot open the BPF program: %s",
				strerror(-r));
		goto err;
	}
	f->skel->rodata->pidns_translate = !ns.initial;
	f->skel->rodata->pidns_dev = ns.dev;
	f->skel->rodata->pidns_ino = ns.ino;
	r = ring_bytes ? bpf_map__set_max_entries(f->skel->maps.events,
						   ring_bytes)
		       : 0;
	if (r == 0)
		r = forkstop_bpf__load(f->skel);
	if (r == 0) {
		f->fork_link = bpf_program__attach(f->skel->progs.ptd_on_fork);
		if (!f->fork_link)
			r = -errno;
	}
	if (r == -EPERM || r == -EACCES) {
		(void)ptd_bpf_refusal(r, what, diag);
		goto err;
	}
	if (r < 0) {
		(void)ptd_diagf(diag, r, "cannot load the BPF fork stopper "
				"(sched_process_fork, sys_exit): "
				"%s (%s need it)", strerror(-r), what);
		goto err;
	}
	r = ptd_bpf_ringbuf(bpf_map__fd(f->skel->maps.events), on_event, f,
			    &f->rb, diag);
	if (r < 0)
		goto err;
	*ret = f;
	return 0;
err:
	ptd_forkstop_free(f, NULL, NULL);
	return r;
}

static void cont(void *ctx, const struct ptd_forkstop_event *ev)
{
	(void)kill((pid_t)ev->pid, SIGCONT);
}

void ptd_forkstop_free(struct ptd_forkstop *f,
		       void (*fn)(void *ctx,
				  const struct ptd_forkstop_event *ev),
		       void *ctx)
{
	if (!f)
		return;
	/* no child is stopped once the programs are gone: those stopped
	 * before are in the ring buffer */
	bpf_link__destroy(f->child_link);
	bpf_link__destroy(f->fork_link);
	if (f->rb)
		(void)ptd_forkstop_drain(f, fn ? fn : cont, ctx);
	ring_buffer__free(f->rb);
	forkstop_bpf__destroy(f->skel);
	free(f);
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct ptd_forkstop *f = ctx;
	struct ptd_forkstop_event ev;

	if (len < sizeof(ev))
		return 0;
	memcpy(&ev, data, sizeof(ev));
	f->fn(f->ctx, &ev);
	return 0;
}

int ptd_forkstop_fd(const struct ptd_forkstop *f)
{
	return f->rb ? ring_buffer__epoll_fd(f->rb) : -1;
}

/* No process followed: children forked before sys_exit went and not yet
 * run are forgotten (their pids may name other processes later). */
static void pending_clear(struct ptd_forkstop *f)
{
	int fd = bpf_map__fd(f->skel->maps.pending);
	__u32 key;

	while (bpf_map_get_next_key(fd, NULL, &key) == 0)
		if (bpf_map_delete_elem(fd, &key) < 0)
			break;
}

int ptd_forkstop_follow(struct ptd_forkstop *f, pid_t pid, uint64_t cookie)
{
	int fd = bpf_map__fd(f->skel->maps.followed);
	__u32 key = (__u32)pid;
	struct ptd_forkstop_follow v = { .cookie = cookie };
	int r;

	if (pid <= 0)
		return -EINVAL;
	if (bpf_map_update_elem(fd, &key, &v, BPF_NOEXIST) < 0)
		return -errno;
	if (f->nfollowed++ > 0)
		return 0;
	f->child_link = bpf_program__attach(f->skel->progs.ptd_on_child);
	if (f->child_link)
		return 0;
	r = -errno;
	(void)bpf_map_delete_elem(fd, &key);
	f->nfollowed--;
	return r;
}

int ptd_forkstop_missed(const struct ptd_forkstop *f, pid_t pid,
			uint64_t cookie, uint64_t *ret)
{
	int fd = bpf_map__fd(f->skel->maps.followed);
	__u32 key = (__u32)pid;
	struct ptd_forkstop_follow v;

	if (bpf_map_lookup_elem(fd, &key, &v) < 0 || v.cookie != cookie)
		return -ENOENT;
	*ret = v.missed;
	return 0;
}

int ptd_forkstop_unfollow(struct ptd_forkstop *f, pid_t pid,
			  uint64_t cookie, uint64_t *ret_missed)
{
	int fd = bpf_map__fd(f->skel->maps.followed);
	__u32 key = (__u32)pid;
	uint64_t missed;
	int r = ptd_forkstop_missed(f, pid, cookie, &missed);

	if (r < 0)
		return r;
	if (bpf_map_delete_elem(fd, &key) < 0)
		return -errno;
	/* (a miss counted between the lookup and the delete is not seen:
	 * at most the children forked in that instant) */
	if (ret_missed)
		*ret_missed = missed;
	if (--f->nfollowed == 0) {
		bpf_link__destroy(f->child_link);
		f->child_link = NULL;
		pending_clear(f);
	}
	return 0;
}

int ptd_forkstop_counts(const struct ptd_forkstop *f,
			struct ptd_forkstop_count *ret)
{
	__u32 key = 0;

	memset(ret, 0, sizeof(*ret));
	if (bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.counts), &key,
				ret) < 0)
		return -errno;
	return 0;
}

int ptd_forkstop_drain(struct ptd_forkstop *f,
		       void (*fn)(void *ctx,
				  const struct ptd_forkstop_event *ev),
		       void *ctx)
{
	if (!f->rb)
		return 0;
	f->fn = fn;
	f->ctx = ctx;
	return ring_buffer__consume(f->rb);
}

#else /* !PTD_HAVE_BPF */

int ptd_forkstop_new(const char *what, uint32_t ring_bytes,
		     struct ptd_forkstop **ret, struct ptd_diag *diag)
{
	*ret = NULL;
	return ptd_diagf(diag, -PTD_EUNSUPPORTED,
			 "this ptd was built without its BPF programs (clang "
			 "or bpftool was missing at build time, or "
			 "-Dbpf=disabled): %s need them", what);
}

void ptd_forkstop_free(struct ptd_forkstop *f,
		       void (*fn)(void *ctx,
				  const struct ptd_forkstop_event *ev),
		       void *ctx)
{
}

int ptd_forkstop_fd(const struct ptd_forkstop *f)
{
	return -1;
}

int ptd_forkstop_follow(struct ptd_forkstop *f, pid_t pid, uint64_t cookie)
{
	return -ENOSYS;
}

int ptd_forkstop_unfollow(struct ptd_forkstop *f, pid_t pid,
			  uint64_t cookie, uint64_t *ret_missed)
{
	return -ENOSYS;
}

int ptd_forkstop_missed(const struct ptd_forkstop *f, pid_t pid,
			uint64_t cookie, uint64_t *ret)
{
	return -ENOSYS;
}

int ptd_forkstop_counts(const struct ptd_forkstop *f,
			struct ptd_forkstop_count *ret)
{
	return -ENOSYS;
}

int ptd_forkstop_drain(struct ptd_forkstop *f,
		       void (*fn)(void *ctx,
				  const struct ptd_forkstop_event *ev),
		       void *ctx)
{
	return -ENOSYS;
}

#endif
