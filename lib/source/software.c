/* SPDX-License-Identifier: MIT */
/*
 * The software source: swpt/tracer.c attaches to the process and
 * single-steps it on a thread of its own, writing what the hardware
 * would into swpt/livesink.c's perf buffers (one per thread, or per
 * virtual CPU), which the decode thread drains like intel_pt's.
 */
#include "source/source-int.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "perf/sideband.h"
#include "swpt/livesink.h"
#include "aspace/iscache.h"
#include "swpt/tracer.h"

struct software {
	struct ptd_source base;
	struct ptd_livesink *ls;
	struct ptd_swpt_out out;	/* the livesink's, checked at exec */
	atomic_int cancel;		/* livesink: give up waiting */
	bool exec_refused;		/* ended at a privileged exec */
	/* the one clock its buffers publish, and its capture keeps with
	 * the wall-clock reference */
	bool has_clock;
	struct ptd_perf_clock clock;
	/* branch mode's breakpoints: a decoder that reads code from the
	 * process (a file renamed over a mapped one) reads past them */
	struct ptd_swpt_patches *patches;
	/* threads not traced (the tracer thread only) */
	pid_t *untraced;
	size_t nuntraced;
	uint64_t next_seq;		/* the livesink's threads listed */

	/* the tracer thread.  state: 0 attaching, 1 tracing, -1 failed */
	pthread_t src;
	bool src_started;
	pid_t src_tid;			/* written before src_done */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int state;
	/* its results (written before src_done) */
	atomic_bool src_done;
	int src_err;
	struct ptd_swpt_result res;
	struct ptd_diag src_diag;
};

static struct software *sw_of(struct ptd_source *s)
{
	return (struct software *)s;
}

/* ---- the tracer's output, through the livesink ---- */

/* Whether @pid is still @uid's to trace: /proc/PID/mem belongs to the
 * effective uid of a dumpable process and to root otherwise (the kernel's
 * task_dump_owner), so a set-user-ID or set-group-ID exec shows there. */
static bool still_owned(pid_t pid, uid_t uid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	return stat(path, &st) == 0 && st.st_uid == uid;
}

/* Is @tid one of the threads not traced? */
static size_t untraced_find(const struct software *w, pid_t tid)
{
	for (size_t i = 0; i < w->nuntraced; i++)
		if (w->untraced[i] == tid)
			return i;
	return SIZE_MAX;
}

static int out_thread_begin(void *ctx, pid_t tid)
{
	struct software *w = ctx;
	const struct ptd_swpt_out *o = ptd_livesink_out(w->ls);
	int r = ptd_source_charge(&w->base, tid);
	pid_t *v;

	if (r > 0)
		return o->thread_begin(o->ctx, tid);
	if (r < 0)
		return r;
	/* not traced: its PT bytes go nowhere, the buffers are not made */
	v = realloc(w->untraced, (w->nuntraced + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	w->untraced = v;
	w->untraced[w->nuntraced++] = tid;
	ptd_source_wake(&w->base);
	return 0;
}

static int out_pt(void *ctx, pid_t tid, const uint8_t *data, size_t len)
{
	struct software *w = ctx;
	const struct ptd_swpt_out *o = ptd_livesink_out(w->ls);

	if (w->nuntraced && untraced_find(w, tid) != SIZE_MAX)
		return 0;
	return o->pt(o->ctx, tid, data, len);
}

static int out_image(void *ctx, const struct ptd_tl_event *ev,
		     const uint8_t *code, size_t ncode)
{
	struct software *w = ctx;
	const struct ptd_swpt_out *o = ptd_livesink_out(w->ls);

	if (ev->op == PTD_TL_EXEC && w->base.p.uid != 0 &&
	    !still_owned(w->base.p.pid, w->base.p.uid)) {
		w->exec_refused = true;
		return -EPERM;
	}
	return o->image(o->ctx, ev, code, ncode);
}

static int out_thread_end(void *ctx, pid_t tid)
{
	struct software *w = ctx;
	const struct ptd_swpt_out *o = ptd_livesink_out(w->ls);
	size_t i = w->nuntraced ? untraced_find(w, tid) : SIZE_MAX;

	if (i != SIZE_MAX) {	/* (a later thread may reuse the tid) */
		w->untraced[i] = w->untraced[--w->nuntraced];
		return 0;
	}
	return o->thread_end(o->ctx, tid);
}

static bool out_flush_wanted(void *ctx, pid_t *tid, int64_t *after_ns)
{
	struct software *w = ctx;
	const struct ptd_swpt_out *o = ptd_livesink_out(w->ls);

	return o->flush_wanted && o->flush_wanted(o->ctx, tid, after_ns);
}

static void out_flushed(void *ctx)
{
	struct software *w = ctx;
	const struct ptd_swpt_out *o = ptd_livesink_out(w->ls);

	o->flushed(o->ctx);
}

/* ---- the tracer thread ---- */

static void set_state(struct software *w, int state)
{
	(void)pthread_mutex_lock(&w->lock);
	if (w->state == 0)
		w->state = state;
	(void)pthread_cond_broadcast(&w->cond);
	(void)pthread_mutex_unlock(&w->lock);
}

static void on_started(void *ctx)
{
	set_state(ctx, 1);
}

/* Every thread of the process is seized and stopped: may it still be
 * traced? */
static int on_seized(void *ctx, struct ptd_diag *diag)
{
	return ptd_source_recheck(ctx, diag);
}

/* A child process, stopped: the host's to trace or continue. */
static void on_child(void *ctx, pid_t pid)
{
	struct ptd_source *s = ctx;

	s->p.host.child(s->p.host.ctx, pid);
}

static void *tracer_main(void *arg)
{
	struct software *w = arg;
	struct ptd_source *s = &w->base;
	struct ptd_swpt_options so;
	sigset_t set;

	(void)pthread_setname_np(pthread_self(), "ptd-swpt");
	(void)sigemptyset(&set);
	(void)sigaddset(&set, s->p.signo);
	(void)pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	memset(&so, 0, sizeof(so));
	so.gen.tsc = s->p.tsc;
	so.gen.psb_period = 4096;	/* the stream decoder's anchors */
	so.outdir = s->p.capture_dir;
	w->out.thread_begin = out_thread_begin;
	w->out.pt = out_pt;
	w->out.image = out_image;
	w->out.thread_end = out_thread_end;
	w->out.flush_wanted = out_flush_wanted;
	w->out.flushed = out_flushed;
	w->out.ctx = w;
	so.out = &w->out;
	so.max_insns = s->p.max_insns;
	so.patches = w->patches;
	so.step = s->p.single_step ? PTD_SWPT_STEP_SINGLE : PTD_SWPT_STEP_BRANCH;
	so.stop = s->p.stop;
	so.started = on_started;
	so.started_ctx = w;
	so.pidfd = s->p.pidfd;
	so.seized = on_seized;
	so.seized_ctx = s;
	if (s->p.host.child) {
		so.child = on_child;
		so.child_ctx = s;
	}
	w->src_tid = gettid();
	so.quiet_target = false;
	so.filter = s->filter_text ? &s->filter : NULL;
	so.filter_text = s->filter_text;
	so.clock = w->has_clock ? &w->clock : NULL;
	so.wallref = s->has_wallref ? &s->wallref : NULL;
	w->src_err = ptd_swpt_attach(s->p.pid, &so, &w->res, &w->src_diag);
	set_state(w, w->src_err < 0 ? -1 : 1);
	atomic_store(&w->src_done, true);
	ptd_source_wake(s);
	return NULL;
}

/* Attached (state 1) or failed (-1).  Waiting, a stop asked for gets the
 * tracer out of its waitpid (it may wait for a thread that cannot stop
 * yet: one in vfork()), again every 100 ms in case the signal came before
 * it waited. */
static int wait_attached(struct software *w)
{
	struct timespec until;
	int state;

	(void)pthread_mutex_lock(&w->lock);
	while (w->state == 0) {
		if (!atomic_load(w->base.p.stop)) {
			(void)pthread_cond_wait(&w->cond, &w->lock);
			continue;
		}
		(void)pthread_kill(w->src, w->base.p.signo);
		(void)clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 100 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		(void)pthread_cond_timedwait(&w->cond, &w->lock, &until);
	}
	state = w->state;
	(void)pthread_mutex_unlock(&w->lock);
	return state;
}

/* ---- the decode side ---- */

/* Snapshot mode: a thread's image changes are kept (in stream order) for
 * the snapshots' decoders. */
static int sw_snap_image(void *ctx, pid_t tid, const struct ptd_tl_event *ev)
{
	int64_t r = ptd_timeline_add(ctx, ev);

	(void)tid;
	return r < 0 ? (int)r : 0;
}

static int thread_add(struct ptd_source *s, struct ptd_livesink_thread *lt)
{
	struct ptd_stream_opts so;
	struct ptd_source_thread *d = ptd_source_thread_slot(s);
	int r;

	if (!d)
		return -ENOMEM;
	d->lt = lt;
	d->tid = lt->tid;
	ptd_source_stream_opts(s, lt->tid, &so);
	if (s->p.snapshot) {
		d->tl = malloc(sizeof(*d->tl));
		if (!d->tl)
			return -ENOMEM;
		ptd_timeline_init(d->tl);
	}
	/* (snapshot mode: the feed's stream only takes what the feed
	 * gives it; the image goes to d->tl) */
	r = ptd_stream_new(&so, &d->stream);
	if (r == 0)
		r = ptd_feed_new(&lt->buf, lt->tid, d->stream, &s->snapfiles,
				 PTD_SIDEBAND_SAMPLE_TYPE, true,
				 &d->feed);
	if (r < 0) {
		ptd_stream_free(d->stream);
		free(d->tl);
		return r;
	}
	if (d->tl) {
		/* (with where each change came in the trace: a snapshot
		 * applies it there) */
		struct ptd_feed_hooks h = { sw_snap_image, NULL, d->tl, true };

		ptd_feed_set_hooks(d->feed, &h);
	}
	s->ndt++;
	return 0;
}

/* The threads the livesink made since the last call get decoders. */
static int threads_add(struct ptd_source *s)
{
	struct software *w = sw_of(s);
	struct ptd_livesink_thread *lt[64];
	size_t n;
	int r;

	while ((n = ptd_livesink_threads(w->ls, w->next_seq, lt, 64)) > 0)
		for (size_t i = 0; i < n; i++) {
			w->next_seq = lt[i]->seq + 1;
			if ((r = thread_add(s, lt[i])) < 0)
				return r;
		}
	return 0;
}

/* Full mode, @d decoded to its end: its buffer goes (once its producer
 * is through with it). */
static int sw_thread_release(struct ptd_source *s,
			     struct ptd_source_thread *d)
{
	int r = d->lt ? ptd_livesink_release(sw_of(s)->ls, d->lt) : 0;

	if (r == 0)
		d->lt = NULL;
	return r;
}

/* ---- the operations ---- */

static int sw_start(struct ptd_source *s, struct ptd_diag *diag)
{
	struct software *w = sw_of(s);
	int r;

	/* perf time is CLOCK_MONOTONIC (livesink.h); one clock for every
	 * buffer and the capture */
	w->has_clock = ptd_perf_clock_calibrate(&w->clock, NULL) == 0;
	s->has_wallref = ptd_perf_wallref_sample(NULL, CLOCK_MONOTONIC,
						 &s->wallref) == 0;
	r = ptd_swpt_patches_new(&w->patches);
	if (r < 0)
		return r;
	ptd_iscache_set_live_reader(s->iscache, ptd_swpt_patches_read,
				    w->patches);
	r = ptd_livesink_new(s->p.pid, s->p.data_size, s->p.aux_size,
			     s->p.wake_fd, &w->cancel, &w->ls);
	if (r == 0 && w->has_clock)
		r = ptd_livesink_set_clock(w->ls, &w->clock);
	if (r == 0 && s->p.snapshot)
		r = ptd_livesink_set_overwrite(w->ls, true);
	if (r == 0 && s->p.per_cpu)
		r = ptd_livesink_set_cpus(w->ls, PTD_SOURCE_SW_CPUS,
					  PTD_SOURCE_SW_MIGRATE);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot set up the trace buffers "
				 "(data %zu, aux %zu bytes): %s",
				 s->p.data_size, s->p.aux_size,
				 ptd_strerror(r));
	if (s->p.per_cpu) {
		struct ptd_perf_buf *bufs[PTD_SOURCE_SW_CPUS];
		size_t n = ptd_livesink_cpus(w->ls, bufs, PTD_SOURCE_SW_CPUS);

		r = ptd_source_cpufeed_new(s, bufs, (unsigned)n,
					   PTD_SIDEBAND_SAMPLE_TYPE, diag);
		if (r < 0)
			return r;
	}
	r = -pthread_create(&w->src, NULL, tracer_main, w);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot start the source thread: %s",
				 strerror(-r));
	w->src_started = true;
	if (wait_attached(w) > 0)
		return 0;
	/* Refused or cancelled: the tracer let go of the threads it could;
	 * one that never stopped is let go as the tracer thread exits. */
	(void)pthread_join(w->src, NULL);
	w->src_started = false;
	(void)ptd_swpt_wait_released(s->p.pid, w->src_tid);
	r = w->src_err;
	return ptd_diagf(diag, r, "%s", w->src_diag.msg[0] ? w->src_diag.msg
							  : ptd_strerror(r));
}

static bool sw_ending(struct ptd_source *s)
{
	return atomic_load(&sw_of(s)->src_done);
}

static int sw_drain(struct ptd_source *s, bool final, struct ptd_diag *diag)
{
	int r;

	if (s->cf)
		return ptd_source_cpufeed_round(s, final, diag);
	if ((r = threads_add(s)) < 0)
		return r;
	return ptd_source_threads_step(s, final, diag);
}

/* The start, if it waits for the attach. */
static void sw_stop(struct ptd_source *s)
{
	struct software *w = sw_of(s);

	(void)pthread_mutex_lock(&w->lock);
	(void)pthread_cond_broadcast(&w->cond);
	(void)pthread_mutex_unlock(&w->lock);
}

/* Get the tracer out of waitpid. */
static void sw_kick(struct ptd_source *s)
{
	(void)pthread_kill(sw_of(s)->src, s->p.signo);
}

/* Stop the tracer, keep it from waiting on a full ring, wait for it. */
static void sw_cancel(struct ptd_source *s, struct ptd_diag *diag)
{
	struct software *w = sw_of(s);
	struct pollfd p = { s->p.wake_fd, POLLIN, 0 };

	(void)diag;
	atomic_store(s->p.stop, 1);
	atomic_store(&w->cancel, 1);
	while (!atomic_load(&w->src_done)) {
		(void)pthread_kill(w->src, s->p.signo);
		(void)poll(&p, 1, 10);
	}
}

static void sw_result(struct ptd_source *s, struct ptd_source_result *ret)
{
	struct software *w = sw_of(s);

	ret->err = w->src_err;
	ret->diag = w->src_diag;
	ret->exec_refused = w->exec_refused;
	ret->exited = w->res.exited;
	ret->exit_code = w->res.exit_code;
	ret->exit_signal = w->res.exit_signal;
}

static void sw_stats(struct ptd_source *s, struct ptd_source_stats *ret)
{
	struct ptd_livesink_stats st;

	ptd_livesink_get_stats(sw_of(s)->ls, &st);
	ret->threads = (unsigned)st.threads;
	ret->threads_live = st.live;
	ret->migrated = st.migrated;
	ret->aux_written = st.aux_written;
}

static void kick_tracer(void *ctx)
{
	struct ptd_source *s = ctx;

	(void)pthread_kill(sw_of(s)->src, s->p.signo);
}

/* Beyond the tracer's own bound (tracer-stops.c, FLUSH_WAIT_NS: 2 s): the
 * flush normally comes as soon as the hit thread is scheduled. */
#define SNAP_FLUSH_WAIT_MS 2500u

static int sw_pause(struct ptd_source *s)
{
	struct software *w = sw_of(s);

	/* the threads' batched bytes first: the snapshot holds the trace
	 * up to where each thread stands (a trigger's hit included) */
	if (w->src_started)
		(void)ptd_livesink_flush(w->ls, s->snap_upto_tid,
					 s->snap_upto_ns, kick_tracer, s,
					 SNAP_FLUSH_WAIT_MS);
	ptd_livesink_pause(w->ls);
	/* no thread can begin while paused: the list is complete */
	return threads_add(s);
}

static void sw_resume(struct ptd_source *s)
{
	ptd_livesink_resume(sw_of(s)->ls);
}

static void sw_join(struct ptd_source *s)
{
	struct software *w = sw_of(s);

	if (w->src_started)
		(void)pthread_join(w->src, NULL);
	w->src_started = false;
}

static void sw_destroy(struct ptd_source *s)
{
	struct software *w = sw_of(s);

	free(w->untraced);
	ptd_iscache_set_live_reader(s->iscache, NULL, NULL);
	ptd_swpt_patches_free(w->patches);
	ptd_livesink_free(w->ls);
	(void)pthread_mutex_destroy(&w->lock);
	(void)pthread_cond_destroy(&w->cond);
}

static int sw_uprobe(struct ptd_source *s, bool add,
		     const struct ptd_swpt_uprobe *u)
{
	struct software *w = sw_of(s);

	if (!w->patches)
		return -ENOENT;
	if (!add) {
		ptd_swpt_patches_uprobe_remove(w->patches, u);
		return 0;
	}
	return ptd_swpt_patches_uprobe_add(w->patches, u);
}

static const struct ptd_source_ops software_ops = {
	.kind = PTD_SOURCE_SOFTWARE,
	.poll_ms = 100,
	.start = sw_start,
	.ending = sw_ending,
	.drain = sw_drain,
	.stop = sw_stop,
	.kick = sw_kick,
	.cancel = sw_cancel,
	.result = sw_result,
	.stats = sw_stats,
	.pause = sw_pause,
	.resume = sw_resume,
	.join = sw_join,
	.thread_release = sw_thread_release,
	.destroy = sw_destroy,
	.uprobe = sw_uprobe,
};

int ptd_source_software_new(const struct ptd_source_params *p,
			    struct ptd_source **ret, struct ptd_diag *diag)
{
	struct software *w;

	(void)diag;
	if (!p || !ret || !p->host.record || !p->stop)
		return -EINVAL;
	if (!(w = calloc(1, sizeof(*w))))
		return -ENOMEM;
	ptd_source_init(&w->base, &software_ops, p);
	(void)pthread_mutex_init(&w->lock, NULL);
	(void)pthread_cond_init(&w->cond, NULL);
	*ret = &w->base;
	return 0;
}
