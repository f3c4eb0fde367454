/* SPDX-License-Identifier: MIT */
/*
 * What every trace source shares: the dispatch to its module, the
 * decoders it feeds (a stream per thread, per-thread or per-CPU buffers),
 * the address filter and the snapshots.
 */
#include "source/source-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aspace/iscache.h"
#include "aspace/maps.h"
#include "decode/counters.h"
#include "decode/insncache.h"
#include "decode/threadpar.h"
#include "swpt/livesink.h"

#define ICACHE_ENTRIES (1u << 20)

const char *ptd_source_name(enum ptd_source_kind k)
{
	switch (k) {
	case PTD_SOURCE_AUTO:
		return "auto";
	case PTD_SOURCE_INTEL_PT:
		return "intel_pt";
	case PTD_SOURCE_SOFTWARE:
		return "software";
	}
	return "?";
}

int ptd_source_parse(const char *name)
{
	if (!name)
		return -PTD_EFORMAT;
	if (!strcmp(name, "auto"))
		return PTD_SOURCE_AUTO;
	if (!strcmp(name, "intel_pt"))
		return PTD_SOURCE_INTEL_PT;
	if (!strcmp(name, "software"))
		return PTD_SOURCE_SOFTWARE;
	return -PTD_EFORMAT;
}

/* ---- for the modules ------------------------------------------------- */

void ptd_source_init(struct ptd_source *s, const struct ptd_source_ops *ops,
		     const struct ptd_source_params *p)
{
	s->ops = ops;
	s->p = *p;
	ptd_timeline_init(&s->hist);
	ptd_codesnap_files_init(&s->snapfiles, s->p.dir);
}

int ptd_source_record(void *ctx, const struct ptd_record *rec)
{
	struct ptd_source *s = ctx;

	return s->p.host.record(s->p.host.ctx, rec);
}

int ptd_source_charge(struct ptd_source *s, pid_t tid)
{
	return s->p.host.charge ? s->p.host.charge(s->p.host.ctx, tid) : 1;
}

void ptd_source_uncharge(struct ptd_source *s, pid_t tid)
{
	if (s->p.host.uncharge)
		s->p.host.uncharge(s->p.host.ctx, tid);
}

int ptd_source_recheck(struct ptd_source *s, struct ptd_diag *diag)
{
	if (!s->p.host.recheck)
		return 0;
	return s->p.host.recheck(s->p.host.ctx, s->p.pid, diag);
}

void ptd_source_wake(struct ptd_source *s)
{
	uint64_t one = 1;
	ssize_t n = write(s->p.wake_fd, &one, sizeof(one));

	(void)n;
}

/* The stream options of thread @tid's decoders. */
void ptd_source_stream_opts(const struct ptd_source *s, pid_t tid,
			    struct ptd_stream_opts *so)
{
	memset(so, 0, sizeof(*so));
	so->decode.path = PTD_PATH_BLOCK;
	/* block records are offline only; counts and first executions
	 * where the session keeps a table (its counters records are the
	 * host's to take: the streams give none of their own) */
	so->decode.want = PTD_REC_ALL & ~(PTD_REC_BIT(PTD_REC_BLOCK) |
					  PTD_COUNTERS_KINDS);
	if (s->p.counters) {
		so->decode.want |= PTD_COUNTERS_KINDS;
		so->decode.counters = s->p.counters;
	}
	so->decode.json_bodies = true;
	if (s->ops->decode_opts)
		s->ops->decode_opts(s, &so->decode);
	else	/* the packets come from libipt's encoder, not a CPU with
		 * errata */
		so->decode.cpu.vendor = pcv_unknown;
	so->pid = s->p.pid;
	so->tid = tid;
	so->max_buffered = s->p.max_buffered;
	so->iscache = s->iscache;
	so->icache = s->icache;
	so->dir = s->p.dir;
	/* (the perf clock comes from each buffer's header page: the feed) */
	so->decode.has_wallref = s->has_wallref;
	so->decode.wallref = s->wallref;
	so->decode.addr_filter = s->fcfg;
	so->decode.symbols = s->p.symbols;
	if (s->p.jobs > 1 && !s->p.snapshot && !s->p.counters) {
		/* threads decoded at once (ptd_source_threads_step): the
		 * instruction path, whose records do not depend on the
		 * order the threads go in (threadpar.h), and no cache
		 * shared by decoders on other threads */
		so->decode.path = PTD_PATH_INSN;
		so->icache = NULL;
	}
}

struct ptd_source_thread *ptd_source_thread_slot(struct ptd_source *s)
{
	struct ptd_source_thread *v, *d;

	v = realloc(s->dt, (s->ndt + 1) * sizeof(*v));
	if (!v)
		return NULL;
	s->dt = v;
	d = &s->dt[s->ndt];
	memset(d, 0, sizeof(*d));
	d->fd = -1;
	return d;
}

/* Thread @d, ended, gives back its buffer, feed, stream and charge.
 * Returns 0, or -EBUSY: its producer is still finishing it (next
 * round). */
static int thread_let_go(struct ptd_source *s, struct ptd_source_thread *d)
{
	/* the feed first: it reads the buffer */
	ptd_feed_free(d->feed);
	d->feed = NULL;
	if (s->ops->thread_release && s->ops->thread_release(s, d) < 0)
		return -EBUSY;
	ptd_stream_free(d->stream);
	d->stream = NULL;
	ptd_source_uncharge(s, d->tid);
	d->released = true;
	return 0;
}

static void snapshot_threads_retire(struct ptd_source *s);

void ptd_source_threads_retire(struct ptd_source *s)
{
	size_t k = 0;

	if (s->p.snapshot) {
		snapshot_threads_retire(s);
		return;
	}
	for (size_t i = 0; i < s->ndt; i++) {
		struct ptd_source_thread *d = &s->dt[i];

		if (!d->done || thread_let_go(s, d) < 0)
			s->dt[k++] = *d;
	}
	s->ndt = k;
}

/* Drain thread @d's buffer into its stream; *@ret_last: its decode is
 * the final one. */
static int thread_drain(struct ptd_source *s, struct ptd_source_thread *d,
			bool final, bool *ret_last, struct ptd_diag *diag)
{
	struct ptd_feed_stats before, after;
	int r;

	ptd_feed_get_stats(d->feed, &before);
	r = ptd_feed_drain(d->feed, diag);
	if (r < 0)
		return r;
	ptd_feed_get_stats(d->feed, &after);
	atomic_fetch_add(&s->trace_bytes, after.aux_bytes - before.aux_bytes);
	atomic_fetch_add(&s->lost_bytes, after.lost_bytes - before.lost_bytes);
	*ret_last = final || ptd_feed_ended(d->feed);
	return 0;
}

/* Decode thread @d's round, its records to @fn(@ctx) (with @lock: on a
 * worker, threadpar.h). */
static int thread_decode(struct ptd_source_thread *d, pthread_mutex_t *lock,
			 ptd_record_fn fn, void *ctx, struct ptd_diag *diag)
{
	int r = ptd_stream_decode_locked(d->stream, d->last, lock, fn, ctx);

	if (r < 0)
		return ptd_diagf(diag, r, "thread %d: decoding: %s",
				 (int)d->tid, ptd_strerror(r));
	if (d->last)
		d->done = true;
	return 0;
}

/* The threads of a round decoded at once: unit i is the i-th to go. */
struct round_units {
	struct ptd_source *s;
	struct ptd_source_thread **v;
	int err;		/* the first unit's error */
	struct ptd_diag diag;	/* its message */
};

static int unit_decode(void *ctx, size_t i, const struct ptd_decode_opts *o,
		       pthread_mutex_t *lock, ptd_record_fn fn, void *fctx,
		       struct ptd_decode_stats *st, struct ptd_diag *diag)
{
	struct round_units *u = ctx;

	(void)o;	/* the stream's own */
	(void)st;	/* the stream counts its own */
	return thread_decode(u->v[i], lock, fn, fctx, diag);
}

static void unit_done(void *ctx, size_t i, int err,
		      const struct ptd_decode_stats *st,
		      const struct ptd_diag *diag)
{
	struct round_units *u = ctx;

	(void)i;
	if (st->at_once)
		atomic_fetch_add(&u->s->at_once, 1);
	if (err < 0 && !u->err) {
		u->err = err;
		u->diag = *diag;
	}
}

/* The @n threads to go decoded at once, if threadpar.h says it fits.
 * Returns 1 if so, 0 if they are still to decode, or a unit's negative
 * error (its message in @diag). */
static int round_at_once(struct ptd_source *s, size_t n,
			 struct ptd_diag *diag)
{
	struct ptd_threadpar_ops ops = { NULL, unit_decode, unit_done, NULL };
	struct round_units u = { s, NULL, 0, { "" } };
	struct ptd_stream_opts so;
	uint64_t *bytes;
	size_t k = 0;
	int ran = 0, r;

	u.v = calloc(n, sizeof(*u.v));
	bytes = calloc(n, sizeof(*bytes));
	if (!u.v || !bytes) {
		free(u.v);
		free(bytes);
		return 0;	/* one after another, then */
	}
	for (size_t i = 0; i < s->ndt && k < n; i++)
		if (s->dt[i].go) {
			struct ptd_stream_stats st;

			ptd_stream_get_stats(s->dt[i].stream, &st);
			u.v[k] = &s->dt[i];
			bytes[k++] = st.buffered;
		}
	ptd_source_stream_opts(s, 0, &so);
	so.decode.jobs = s->p.jobs;
	if (ptd_threadpar_fits(&so.decode, bytes, n)) {
		ops.ctx = &u;
		r = ptd_threadpar_run(&so.decode, n, true, &ops,
				      ptd_source_record, s);
		ran = r != -EINVAL && r != -ENOMEM;
	}
	free(u.v);
	free(bytes);
	if (ran && u.err < 0) {
		*diag = u.diag;
		return u.err;
	}
	return ran;
}

int ptd_source_threads_step(struct ptd_source *s, bool final,
			    struct ptd_diag *diag)
{
	size_t n = 0;
	int ran = 0, r;

	for (size_t i = 0; i < s->ndt; i++) {
		struct ptd_source_thread *d = &s->dt[i];

		d->go = false;
		if (d->done || !d->feed)
			continue;
		if ((r = thread_drain(s, d, final, &d->last, diag)) < 0)
			return r;
		if (s->p.snapshot)	/* decoded at snapshots */
			d->done = d->last;
		else
			d->go = true, n++;
	}
	if (s->p.jobs > 1 && n > 1 && (ran = round_at_once(s, n, diag)) < 0)
		return ran;
	for (size_t i = 0; !ran && i < s->ndt; i++)
		if (s->dt[i].go &&
		    (r = thread_decode(&s->dt[i], NULL, ptd_source_record, s,
				       diag)) < 0)
			return r;
	ptd_source_threads_retire(s);
	return 0;
}

/* ---- per-CPU mode: per-CPU buffers through decode/cpufeed.h ---------- */

/* A thread of the process appeared in the merged trace: its stream. */
static int pc_thread_new(void *ctx, pid_t pid, pid_t tid,
			 struct ptd_stream **ret_stream)
{
	struct ptd_source *s = ctx;
	bool hw = s->ops->kind == PTD_SOURCE_INTEL_PT;
	struct ptd_stream_opts so;
	struct ptd_source_thread *d;
	int r;

	(void)pid;
	/* intel_pt: the hardware traces it (inherit); without the memory
	 * for its decoder it is not decoded (the software source refused it
	 * before it wrote a byte) */
	if (hw && (r = ptd_source_charge(s, tid)) <= 0) {
		*ret_stream = NULL;
		return r;
	}
	if (!(d = ptd_source_thread_slot(s)))
		return -ENOMEM;
	d->tid = tid;
	ptd_source_stream_opts(s, tid, &so);
	r = ptd_stream_new(&so, &d->stream);
	if (r < 0)
		return r;
	s->ndt++;
	if (hw) {
		atomic_fetch_add(&s->threads, 1);
		atomic_fetch_add(&s->live, 1);
	}
	*ret_stream = d->stream;
	return 0;
}

static int pc_thread_end(void *ctx, pid_t tid)
{
	struct ptd_source *s = ctx;

	for (size_t i = s->ndt; i-- > 0;)
		if (s->dt[i].tid == tid && !s->dt[i].ended) {
			s->dt[i].ended = true;
			break;
		}
	if (tid == s->p.pid)
		s->leader_exited = true;
	return 0;
}

int ptd_source_cpufeed_new(struct ptd_source *s, struct ptd_perf_buf **bufs,
			   unsigned n, uint64_t sample_type,
			   struct ptd_diag *diag)
{
	struct ptd_cpufeed_opts fo = { 0 };
	struct ptd_cpufeed_ops ops = { pc_thread_new, pc_thread_end, NULL, NULL,
				       s };
	int r;

	fo.ncpus = n;
	fo.bufs = bufs;
	fo.pid = s->p.pid;
	fo.sample_type = sample_type;
	fo.sample_id_all = true;
	fo.snapfiles = &s->snapfiles;
	r = ptd_cpufeed_new(&fo, &ops, &s->cf);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot set up the per-CPU decoder "
				 "(%u buffers): %s", n, ptd_strerror(r));
	s->ncpus = n;
	return 0;
}

/* Read every CPU's buffer, then decode what each thread got; a thread
 * whose EXIT was read (or every thread, @final) is decoded to its end. */
int ptd_source_cpufeed_round(struct ptd_source *s, bool final,
			     struct ptd_diag *diag)
{
	struct ptd_cpufeed_stats st;
	int r = ptd_cpufeed_round(s->cf, final, diag);

	if (r < 0)
		return r;
	ptd_cpufeed_get_stats(s->cf, &st);
	atomic_fetch_add(&s->trace_bytes, st.aux_bytes - s->cf_last.aux_bytes);
	atomic_fetch_add(&s->lost_bytes, st.lost_bytes - s->cf_last.lost_bytes);
	s->cf_last = st;
	for (size_t i = 0; i < s->ndt; i++) {
		struct ptd_source_thread *d = &s->dt[i];
		bool last = final || d->ended;

		if (d->done)
			continue;
		r = ptd_stream_decode(d->stream, last, ptd_source_record, s);
		if (r < 0)
			return ptd_diagf(diag, r, "thread %d: decoding: %s",
					 (int)d->tid, ptd_strerror(r));
		if (last) {
			d->done = true;
			if (s->ops->kind == PTD_SOURCE_INTEL_PT)
				atomic_fetch_sub(&s->live, 1);
		}
	}
	ptd_source_threads_retire(s);
	return 0;
}

/* ---- the interface --------------------------------------------------- */

int ptd_source_set_filter(struct ptd_source *s, const char *text,
			  struct ptd_diag *diag)
{
	uint32_t cap = PTD_ADDRFILTER_MAX;
	struct ptd_maps maps;
	unsigned pending;
	char root[64];
	int r;

	if (!text)
		return 0;
	if (!(s->filter_text = strdup(text)))
		return -ENOMEM;
	if (s->ops->filter_cap && (r = s->ops->filter_cap(s, &cap, diag)) < 0)
		return r;
	r = ptd_addrfilter_parse(s->filter_text, cap, &s->filter, diag);
	if (r < 0)
		return r;
	r = ptd_maps_read_pid("/proc", s->p.pid, &maps, diag);
	if (r < 0)
		return r;
	/* A range in a file the process does not map yet is pending until
	 * it does (the source resolves it again then, as the kernel does
	 * for intel_pt); the decoders' copy keeps it pending, which only
	 * libipt's erratum workarounds would read. */
	(void)snprintf(root, sizeof(root), "/proc/%d/root", (int)s->p.pid);
	r = ptd_addrfilter_resolve(&s->filter, &maps, root, &s->fcfg,
				   &pending, diag);
	ptd_maps_fini(&maps);
	/* A range in a file that does not exist, or that the process's
	 * mapping does not hold: the request is at fault (bad_request),
	 * not the daemon. */
	if (r == -PTD_ENOIMAGE)
		r = -PTD_EFORMAT;
	if (r < 0 || !s->ops->filter_ready)
		return r;
	return s->ops->filter_ready(s, diag);
}

const char *ptd_source_filter(const struct ptd_source *s)
{
	return s ? s->filter_text : NULL;
}

int ptd_source_uprobe(struct ptd_source *s, bool add,
		      const struct ptd_swpt_uprobe *u)
{
	return s && s->ops->uprobe ? s->ops->uprobe(s, add, u) : 0;
}

int ptd_source_start(struct ptd_source *s, struct ptd_diag *diag)
{
	(void)ptd_iscache_new(&s->iscache);
	(void)ptd_insncache_new(ICACHE_ENTRIES, &s->icache);
	if (!s->iscache || !s->icache)
		return -ENOMEM;
	/* a file renamed over a mapped one is refused, the code read from
	 * the process instead (aspace/iscache.h) */
	ptd_iscache_check_identity(s->iscache, true, s->p.pid);
	if (s->p.snapshot && !s->snap_reader &&
	    !(s->snap_reader = malloc(sizeof(*s->snap_reader))))
		return -ENOMEM;
	return s->ops->start(s, diag);
}

bool ptd_source_ending(struct ptd_source *s)
{
	return s->ops->ending(s);
}

int ptd_source_drain(struct ptd_source *s, bool final, struct ptd_diag *diag)
{
	return s->ops->drain(s, final, diag);
}

unsigned ptd_source_poll_ms(const struct ptd_source *s)
{
	return s->ops->poll_ms;
}

void ptd_source_stop(struct ptd_source *s)
{
	if (s && s->ops->stop)
		s->ops->stop(s);
}

void ptd_source_kick(struct ptd_source *s)
{
	if (s->ops->kick)
		s->ops->kick(s);
}

void ptd_source_cancel(struct ptd_source *s, struct ptd_diag *diag)
{
	s->ops->cancel(s, diag);
}

void ptd_source_result(struct ptd_source *s, struct ptd_source_result *ret)
{
	memset(ret, 0, sizeof(*ret));
	s->ops->result(s, ret);
}

void ptd_source_get_stats(struct ptd_source *s, struct ptd_source_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	s->ops->stats(s, ret);
	ret->ncpus = s->ncpus;
	ret->trace_bytes = atomic_load(&s->trace_bytes);
	ret->threads_at_once = atomic_load(&s->at_once);
	ret->lost_bytes = atomic_load(&s->lost_bytes);
	ret->overwritten_bytes = atomic_load(&s->overwritten);
	ret->kept_threads = atomic_load(&s->kept_threads);
	ret->kept_bytes = atomic_load(&s->kept_bytes);
	ret->dropped_threads = atomic_load(&s->dropped_threads);
	ret->dropped_bytes = atomic_load(&s->dropped_bytes);
	ret->identity_mismatches =
		s->iscache ? ptd_iscache_identity_mismatches(s->iscache) : 0;
}

void ptd_source_free(struct ptd_source *s)
{
	if (!s)
		return;
	if (s->ops->join)
		s->ops->join(s);
	for (size_t i = 0; i < s->ndt; i++) {
		ptd_feed_free(s->dt[i].feed);
		ptd_stream_free(s->dt[i].stream);
		if (s->dt[i].fd >= 0)
			(void)close(s->dt[i].fd);
		ptd_perf_buf_fini(&s->dt[i].hwbuf);
		if (s->dt[i].tl)
			ptd_timeline_fini(s->dt[i].tl);
		free(s->dt[i].tl);
		if (!s->dt[i].snap_kept)
			free(s->dt[i].snap);
		free(s->dt[i].kept);
	}
	ptd_cpufeed_free(s->cf);
	s->ops->destroy(s);
	free(s->dt);
	free(s->snap_reader);
	ptd_timeline_fini(&s->hist);
	ptd_codesnap_files_fini(&s->snapfiles);
	ptd_insncache_free(s->icache);
	ptd_iscache_free(s->iscache);
	free(s->filter_text);
	ptd_addrfilter_fini(&s->filter);
	free(s);
}

/* ---- snapshots ------------------------------------------------------- */

static const uint8_t psb[16] = { 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
				 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
				 0x02, 0x82, 0x02, 0x82 };

/* Offset of the first PSB in @p (@n bytes), or @n if there is none. */
static size_t first_psb(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + sizeof(psb) <= n; i++)
		if (p[i] == psb[0] && !memcmp(p + i, psb, sizeof(psb)))
			return i;
	return n;
}

static int snap_aux(void *ctx, uint64_t off, const void *bytes, size_t len)
{
	struct ptd_source_thread *d = ctx;

	(void)off;
	memcpy(d->snap + d->nsnap, bytes, len);
	d->nsnap += len;
	return 0;
}

static int snap_loss(void *ctx, const struct ptd_perf_loss *l)
{
	struct ptd_source_thread *d = ctx;

	if (l->kind == PTD_PERF_LOSS_OVERWRITTEN)
		d->snap_over += l->bytes;
	return 0;
}

static struct ptd_perf_buf *thread_buf(struct ptd_source_thread *d)
{
	return d->lt ? &d->lt->buf : &d->hwbuf;
}

static const struct ptd_perf_reader_ops snap_ops = { NULL, snap_aux,
						      snap_loss };

/* Read @d's window -- the newest bytes of its AUX area, what a snapshot
 * takes -- into d->snap (d->nsnap bytes, d->snap_over overwritten since
 * its previous snapshot).  Returns its aux_head, or a negative errno
 * with a message in @diag. */
static int64_t window_read(struct ptd_source *s, struct ptd_source_thread *d,
			   struct ptd_diag *diag)
{
	struct ptd_perf_buf *b = thread_buf(d);
	int64_t n;

	d->snap = malloc(b->aux_size);
	if (!d->snap)
		return -ENOMEM;
	d->nsnap = 0;
	d->snap_over = 0;
	ptd_perf_reader_init(s->snap_reader, b);
	s->snap_reader->snap_head = d->snap_head;
	n = ptd_perf_reader_snapshot(s->snap_reader, &snap_ops, d);
	if (n < 0) {
		free(d->snap);
		d->snap = NULL;
		return ptd_diagf(diag, (int)n, "thread %d: reading its AUX "
				 "area: %s", (int)d->tid,
				 ptd_strerror((int)n));
	}
	return (int64_t)s->snap_reader->snap_head;
}

/* A kept window a snapshot has read all of (everything its thread
 * wrote is in one). */
static bool kept_read(const struct ptd_source_thread *d)
{
	return d->kept && d->snap_head == d->kept_head;
}

/* @d's kept window goes (its bytes given back); @dropped: unread by any
 * snapshot, counted so. */
static void kept_free(struct ptd_source *s, struct ptd_source_thread *d,
		      bool dropped)
{
	if (!d->kept)
		return;
	if (d->kept_charged) {
		atomic_fetch_sub(&s->kept_threads, 1);
		atomic_fetch_sub(&s->kept_bytes, d->nkept);
		if (s->p.host.unkeep)
			s->p.host.unkeep(s->p.host.ctx, d->nkept);
	}
	if (dropped) {
		atomic_fetch_add(&s->dropped_threads, 1);
		atomic_fetch_add(&s->dropped_bytes, d->nkept);
	}
	free(d->kept);
	d->kept = NULL;
	d->nkept = 0;
	d->kept_charged = false;
}

/* Ended thread @d's window copied, to outlive its buffer (the snapshot
 * reader reads it as a snapshot would: nothing moves in an ended
 * thread's buffer).  A window that cannot be read is dropped. */
static void window_keep(struct ptd_source *s, struct ptd_source_thread *d)
{
	struct ptd_perf_buf *b = thread_buf(d);
	struct ptd_diag diag = { "" };
	uint64_t written;
	int64_t head;

	d->copied = true;
	if (!b->meta || !b->aux_size)
		return;
	written = __atomic_load_n(&b->meta->aux_head, __ATOMIC_ACQUIRE);
	d->kept_has_clock = ptd_perf_clock_from_page(b->meta, &d->kept_clock,
						     NULL) == 0;
	head = window_read(s, d, &diag);
	/* a copy of its own size: the read's buffer has the AUX area's,
	 * which malloc may map on its own -- shrunk in place, each copy
	 * would keep a mapping (a page, and one of the process's limited
	 * count) */
	if (head >= 0 && d->nsnap && (d->kept = malloc(d->nsnap))) {
		memcpy(d->kept, d->snap, d->nsnap);
		d->nkept = d->nsnap;
		d->kept_head = (uint64_t)head;
		d->kept_over = d->snap_over;
	} else if (head < 0 || d->nsnap) {	/* (no memory for it) */
		atomic_fetch_add(&s->dropped_threads, 1);
		atomic_fetch_add(&s->dropped_bytes,
				 written < b->aux_size ? written : b->aux_size);
	}
	free(d->snap);
	d->snap = NULL;
	d->nsnap = 0;
	d->snap_over = 0;
}

/* Charge @d's kept window (host.keep); refused, kept windows a snapshot
 * has read make room, earliest thread first; still refused, it is
 * dropped. */
static void kept_charge(struct ptd_source *s, struct ptd_source_thread *d)
{
	int r;

	if (!d->kept || d->kept_charged)
		return;
	r = s->p.host.keep ? s->p.host.keep(s->p.host.ctx, d->nkept) : 0;
	for (size_t i = 0; r < 0 && i < s->ndt; i++)
		if (&s->dt[i] != d && s->dt[i].kept_charged &&
		    kept_read(&s->dt[i])) {
			kept_free(s, &s->dt[i], false);
			r = s->p.host.keep(s->p.host.ctx, d->nkept);
		}
	if (r < 0) {
		kept_free(s, d, true);
		return;
	}
	d->kept_charged = true;
	atomic_fetch_add(&s->kept_threads, 1);
	atomic_fetch_add(&s->kept_bytes, d->nkept);
}

/* Leave s->dt: an ended thread, released, with no window kept. */
static void thread_forget(struct ptd_source_thread *d)
{
	if (d->tl)
		ptd_timeline_fini(d->tl);
	free(d->tl);
	d->tl = NULL;
}

/* ptd_source_threads_retire, snapshot mode (decode thread, no snapshot
 * being taken). */
static void snapshot_threads_retire(struct ptd_source *s)
{
	size_t k = 0;

	for (size_t i = 0; i < s->ndt; i++) {
		struct ptd_source_thread *d = &s->dt[i];

		if (d->done && !d->copied)
			window_keep(s, d);
		if (d->done && !d->released && thread_let_go(s, d) == 0)
			kept_charge(s, d);
	}
	for (size_t i = 0; i < s->ndt; i++) {
		struct ptd_source_thread *d = &s->dt[i];

		if (d->released && !d->kept)
			thread_forget(d);
		else
			s->dt[k++] = *d;
	}
	s->ndt = k;
}

/* At a snapshot's start: kept windows an earlier snapshot read go,
 * but the one of the thread whose trigger this snapshot is. */
static void kept_forget_read(struct ptd_source *s)
{
	size_t k = 0;

	for (size_t i = 0; i < s->ndt; i++) {
		struct ptd_source_thread *d = &s->dt[i];

		if (d->released && kept_read(d) &&
		    !(s->snap_upto_tid && d->tid == s->snap_upto_tid)) {
			kept_free(s, d, false);
			thread_forget(d);
		} else {
			s->dt[k++] = *d;
		}
	}
	s->ndt = k;
}

/* @d's snapshot listed in @in. */
static void snap_list(struct ptd_snapshot_info *in,
		      const struct ptd_source_thread *d)
{
	if (in->nlisted < PTD_SNAPSHOT_MAX_THREADS) {
		struct ptd_snapshot_thread *t = &in->th[in->nlisted++];

		t->tid = d->tid;
		t->end = d->snap_head;
		t->bytes = d->nsnap;
		t->overwritten = d->snap_over;
	}
	in->nthreads++;
	in->bytes += d->nsnap;
	in->overwritten += d->snap_over;
}

/* Read the sideband so far and the newest AUX bytes of every thread that
 * wrote some since its previous snapshot (and of a trigger's thread,
 * whether or not).  The producers are paused: nothing moves in the
 * buffers meanwhile. */
static int snapshot_read_all(struct ptd_source *s,
			     struct ptd_snapshot_info *in,
			     struct ptd_diag *diag)
{
	int r = 0;

	kept_forget_read(s);
	for (size_t i = 0; r == 0 && i < s->ndt; i++) {
		struct ptd_source_thread *d = &s->dt[i];
		struct ptd_perf_buf *b = thread_buf(d);
		bool upto = s->snap_upto_tid && d->tid == s->snap_upto_tid;
		int64_t head;

		if (d->copied) {	/* ended: its kept window */
			if (!d->kept || (kept_read(d) && !upto))
				continue;
			d->snap = d->kept;
			d->snap_kept = true;
			d->nsnap = d->nkept;
			d->snap_over = d->kept_over;
			d->kept_over = 0;
			d->snap_head = d->kept_head;
			d->in_snap = true;
			snap_list(in, d);
			continue;
		}
		if (!d->feed || !b->meta || !b->aux_size)
			continue;
		if (!d->done && (r = ptd_feed_drain(d->feed, diag)) < 0)
			break;
		r = 0;
		/* nothing new -- but a trigger's snapshot always holds the
		 * thread that hit it: the snapshot before may have been taken
		 * after the hit and read all it ran since, and this one is
		 * the hit's */
		if (__atomic_load_n(&b->meta->aux_head, __ATOMIC_ACQUIRE) ==
			    d->snap_head && !upto)
			continue;
		if ((head = window_read(s, d, diag)) < 0)
			return (int)head;
		d->snap_head = (uint64_t)head;
		d->in_snap = true;
		snap_list(in, d);
	}
	return r;
}

int ptd_source_snapshot_read(struct ptd_source *s,
			     struct ptd_snapshot_info *in,
			     struct ptd_diag *diag)
{
	int r;

	s->snap_upto_tid = in->upto_tid;
	s->snap_upto_ns = in->upto_ns;
	r = s->ops->pause(s);
	if (r == 0)
		r = snapshot_read_all(s, in, diag);
	s->ops->resume(s);
	return r;
}

struct snap_ctx {
	struct ptd_source *s;
	struct ptd_snapshot_thread *t;
};

static int snap_deliver(void *ctx, const struct ptd_record *rec)
{
	struct snap_ctx *c = ctx;

	c->t->records++;
	if (rec->type == PTD_REC_INSN)
		c->t->insns++;
	return ptd_source_record(c->s, rec);
}

/* Decode one thread's snapshot bytes from their first PSB with a fresh
 * decoder, its image being every change seen so far. */
static int snapshot_decode(struct ptd_source *s, struct ptd_source_thread *d,
			   struct ptd_snapshot_thread *t,
			   struct ptd_diag *diag)
{
	const struct ptd_timeline *tl = d->tl ? d->tl : &s->hist;
	struct snap_ctx c = { s, t };
	struct ptd_stream_opts so;
	struct ptd_stream *st = NULL;
	size_t at = first_psb(d->snap, d->nsnap), done = at;
	/* the thread's trace offset of the window's first PSB */
	uint64_t base = d->snap_head - d->nsnap + at;
	int r;

	t->tid = d->tid;
	t->end = d->snap_head;
	t->bytes = d->nsnap;
	t->overwritten = d->snap_over;
	t->parts = t->serial_parts = 0;
	t->serial_why = NULL;
	if (d->snap_over) {
		struct ptd_record rec;

		memset(&rec, 0, sizeof(rec));
		rec.type = PTD_REC_ERROR;
		rec.pid = s->p.pid;
		rec.tid = d->tid;
		rec.u.error.code = -PTD_ETRUNC;
		rec.u.error.ptd_code = true;
		rec.u.error.context = "overwritten";
		rec.u.error.skipped = d->snap_over;
		(void)snap_deliver(&c, &rec);
	}
	ptd_source_stream_opts(s, d->tid, &so);
	if (d->copied) {	/* its buffer is gone */
		so.decode.has_clock = d->kept_has_clock;
		so.decode.clock = d->kept_clock;
	} else {
		so.decode.has_clock = ptd_perf_clock_from_page(
			thread_buf(d)->meta, &so.decode.clock, NULL) == 0;
	}
	so.max_buffered = d->nsnap + 4096;
	if (s->p.jobs > 1) {
		/* a whole trace, decoded at once: cut at its PSBs */
		so.decode.jobs = s->p.jobs;
		so.decode.path = PTD_PATH_INSN;
	}
	r = ptd_stream_new(&so, &st);
	/* Each image change where it came, as far as the thread's trace
	 * says (feed.h, hooks.positions): at the window's first PSB if it
	 * came before, else among its bytes, so that the trace before an
	 * exec or an unmap in the window is decoded with the image it ran
	 * in.  A change without a position (intel_pt's shared history)
	 * applies at the start. */
	for (size_t i = 0; r == 0 && i < tl->n; i++) {
		int64_t pos = ptd_tl_event_pos(&tl->ev[i], d->tid);

		if (pos > 0 && (uint64_t)pos > base) {
			uint64_t upto = (uint64_t)pos - base;

			upto = upto < d->nsnap - at ? at + upto : d->nsnap;
			if (upto > done) {
				r = ptd_stream_append(st, d->snap + done,
						      upto - done);
				done = upto;
			}
		}
		if (r == 0)
			r = ptd_stream_add_event(st, &tl->ev[i]);
	}
	if (r == 0 && done < d->nsnap)
		r = ptd_stream_append(st, d->snap + done, d->nsnap - done);
	if (r == 0) {
		struct ptd_stream_stats ss;

		r = ptd_stream_decode(st, true, snap_deliver, &c);
		r = r < 0 ? r : 0;
		ptd_stream_get_stats(st, &ss);
		t->parts = ss.parts;
		t->serial_parts = ss.serial_parts;
		t->serial_why = ss.serial_why;
	}
	ptd_stream_free(st);
	if (r < 0)
		return ptd_diagf(diag, r, "thread %d: decoding its snapshot: "
				 "%s", (int)d->tid, ptd_strerror(r));
	return 0;
}

void ptd_source_snapshot_decode(struct ptd_source *s,
				struct ptd_snapshot_info *in, int r)
{
	struct ptd_diag diag = { "" };
	unsigned k = 0;

	for (size_t i = 0; i < s->ndt; i++) {
		struct ptd_source_thread *d = &s->dt[i];
		struct ptd_snapshot_thread spare, *t;

		if (!d->in_snap)
			continue;
		t = k < PTD_SNAPSHOT_MAX_THREADS ? &in->th[k] : &spare;
		memset(t, 0, sizeof(*t));
		k++;
		if (r == 0 && (r = snapshot_decode(s, d, t, &diag)) < 0) {
			in->err = r;
			snprintf(in->message, sizeof(in->message), "%s",
				 diag.msg);
		}
		in->records += t->records;
		in->insns += t->insns;
		in->parts += t->parts;
		in->serial_parts += t->serial_parts;
		if (!in->serial_why)
			in->serial_why = t->serial_why;
		atomic_fetch_add(&s->trace_bytes, d->nsnap);
		atomic_fetch_add(&s->overwritten, d->snap_over);
		if (!d->snap_kept)
			free(d->snap);
		d->snap_kept = false;
		d->snap = NULL;
		d->nsnap = 0;
		d->in_snap = false;
	}
}
