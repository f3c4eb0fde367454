/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU perf buffers -> time-ordered merge -> splitter -> per-thread
 * streams.  See cpufeed.h for the ordering rule.
 */
#include "decode/cpufeed.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/codesnap.h"
#include "perf/sideband.h"
#include "perf/time.h"


enum item_kind { IT_AUX, IT_REC, IT_LOSS };

/* One thing read from a CPU's buffer, waiting for the merge. */
struct item {
	uint64_t time;
	bool timed;		/* time known (its record was read) */
	enum item_kind kind;
	uint64_t aux_offset;	/* IT_AUX */
	struct ptd_perf_loss loss;	/* IT_LOSS */
	size_t len;		/* IT_AUX bytes, IT_REC record size */
	uint8_t *data;
};

/* A CPU's queue: items [head, n) of v, in the order read. */
struct cpuq {
	struct ptd_cpufeed *f;
	unsigned cpu;
	struct ptd_perf_reader *reader;	/* large: on the heap */
	struct item *v;
	size_t head, n, cap;
	size_t untimed;		/* first item whose time is not known */
	uint64_t last_time;	/* of the last timed record */
};

/* A thread followed: begun, not ended (an ended one leaves f->th, which
 * every AUX chunk searches). */
struct fthread {
	pid_t tid;
	struct ptd_stream *stream;	/* NULL: ignored */
	uint64_t bytes;			/* trace bytes routed to it */
};

struct ptd_cpufeed {
	struct ptd_cpufeed_opts o;
	struct ptd_cpufeed_ops ops;
	struct cpuq *q;
	struct ptd_percpu *pc;
	uint64_t seen_max;	/* largest time read by the previous rounds */
	uint64_t round_max;	/* ... including this one */
	struct ptd_timeline hist;	/* the process's image since its exec */
	struct fthread *th;
	size_t nth, capth;
	struct ptd_cpufeed_stats st;
	struct ptd_diag *diag;	/* during a round */
	/* the TSC -> perf time conversion of CPU 0's header page (every
	 * CPU's page holds the same clock) */
	struct ptd_perf_clock clock;
	bool has_clock;
	/* a snapshot being reassembled from CODE chunks */
	struct ptd_codesnap cs;
};

/* ---- the queues ------------------------------------------------------ */

static int q_push(struct cpuq *q, const struct item *it, const void *bytes)
{
	struct item *e;

	if (q->head > 0 && q->head == q->n) {
		q->head = q->n = q->untimed = 0;
	} else if (q->head > 64 && q->head * 2 > q->n) {
		memmove(q->v, q->v + q->head, (q->n - q->head) * sizeof(*q->v));
		q->n -= q->head;
		q->untimed -= q->head;
		q->head = 0;
	}
	if (q->n == q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 64;
		struct item *v = realloc(q->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		q->v = v;
		q->cap = cap;
	}
	e = &q->v[q->n];
	*e = *it;
	e->data = NULL;
	if (it->len && bytes) {
		e->data = malloc(it->len);
		if (!e->data)
			return -ENOMEM;
		memcpy(e->data, bytes, it->len);
		q->f->st.queued += it->len;
	}
	q->n++;
	return 0;
}

static void item_drop(struct ptd_cpufeed *f, struct item *it)
{
	if (it->data)
		f->st.queued -= it->len;
	free(it->data);
	it->data = NULL;
}

/* Give the untimed items (and the record that follows them) @t, raised
 * to the CPU's last time so a queue stays sorted. */
static uint64_t q_stamp(struct cpuq *q, uint64_t t, bool has_time)
{
	if (!has_time || t < q->last_time)
		t = q->last_time;
	for (size_t i = q->untimed; i < q->n; i++) {
		q->v[i].time = t;
		q->v[i].timed = true;
	}
	q->untimed = q->n;
	q->last_time = t;
	if (t > q->f->round_max)
		q->f->round_max = t;
	return t;
}

static int rd_aux(void *ctx, uint64_t off, const void *bytes, size_t len)
{
	struct cpuq *q = ctx;
	struct item it = { .kind = IT_AUX, .aux_offset = off, .len = len };

	return q_push(q, &it, bytes);
}

static int rd_loss(void *ctx, const struct ptd_perf_loss *l)
{
	struct cpuq *q = ctx;
	struct item it = { .kind = IT_LOSS, .loss = *l };

	return q_push(q, &it, NULL);
}

static int rd_record(void *ctx, const struct perf_event_header *hdr)
{
	struct cpuq *q = ctx;
	struct ptd_cpufeed *f = q->f;
	struct item it = { .kind = IT_REC, .len = hdr->size };
	struct ptd_perf_event e;
	struct ptd_diag d;
	bool has_time;

	f->st.records++;
	has_time = ptd_perf_event_parse(hdr, f->o.sample_type,
					f->o.sample_id_all, &e, &d) == 0 &&
		   !e.other && (e.sid.mask & PTD_PERF_SID_TIME);
	(void)q_stamp(q, has_time ? e.sid.time : 0, has_time);
	it.time = q->last_time;
	it.timed = true;
	if (q_push(q, &it, hdr) < 0)
		return -ENOMEM;
	q->untimed = q->n;
	return 0;
}

static const struct ptd_perf_reader_ops rd_ops = {
	.record = rd_record,
	.aux = rd_aux,
	.loss = rd_loss,
};

/* ---- threads and the image ------------------------------------------- */

static struct fthread *thread_find(struct ptd_cpufeed *f, pid_t tid)
{
	for (size_t i = f->nth; i-- > 0;)
		if (f->th[i].tid == tid)
			return &f->th[i];
	return NULL;
}

/* @t is followed no more (the order of the rest kept). */
static void thread_drop(struct ptd_cpufeed *f, struct fthread *t)
{
	size_t i = (size_t)(t - f->th);

	memmove(t, t + 1, (f->nth - i - 1) * sizeof(*t));
	f->nth--;
}

static int image_apply(struct ptd_cpufeed *f, const struct ptd_tl_event *ev)
{
	int64_t seq;
	int r;

	if (ev->op == PTD_TL_EXEC) {
		/* what came before is gone for threads seen later */
		ptd_timeline_fini(&f->hist);
		ptd_timeline_init(&f->hist);
	}
	seq = ptd_timeline_add(&f->hist, ev);
	if (seq < 0)
		return (int)seq;
	f->st.image_events++;
	for (size_t i = 0; i < f->nth; i++) {
		struct fthread *t = &f->th[i];

		if (f->ops.observe_image)
			f->ops.observe_image(f->ops.ctx, t->tid, t->bytes, ev);
		if (!t->stream)
			continue;
		r = ptd_stream_add_event(t->stream, ev);
		if (r < 0)
			return ptd_diagf(f->diag, r, "thread %d: adding an "
					 "image change: %s", (int)t->tid,
					 ptd_strerror(r));
	}
	return 0;
}

static int sk_thread_seen(void *ctx, uint32_t pid, uint32_t tid)
{
	struct ptd_cpufeed *f = ctx;
	struct ptd_stream *stream = NULL;
	struct fthread *t;
	int r;

	if (f->nth == f->capth) {
		size_t cap = f->capth ? 2 * f->capth : 16;
		struct fthread *v = realloc(f->th, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		f->th = v;
		f->capth = cap;
	}
	/* an earlier thread of that number ended (its EXIT not seen): a new
	 * one reuses it */
	if ((t = thread_find(f, (pid_t)tid)))
		thread_drop(f, t);
	r = f->ops.thread_new(f->ops.ctx, (pid_t)pid, (pid_t)tid, &stream);
	if (r < 0)
		return r;
	t = &f->th[f->nth++];
	t->tid = (pid_t)tid;
	t->stream = stream;
	t->bytes = 0;
	f->st.threads++;
	if (stream)
		(void)ptd_stream_set_clock(stream, f->has_clock ? &f->clock
							       : NULL, NULL);
	/* the thread starts with the process's image as it is */
	for (size_t i = 0; i < f->hist.n; i++) {
		if (f->ops.observe_image)
			f->ops.observe_image(f->ops.ctx, t->tid, 0,
					     &f->hist.ev[i]);
		if (stream &&
		    (r = ptd_stream_add_event(stream, &f->hist.ev[i])) < 0)
			return r;
	}
	return 0;
}

static int sk_bytes(void *ctx, uint32_t tid, const uint8_t *data, size_t len)
{
	struct ptd_cpufeed *f = ctx;
	struct fthread *t = thread_find(f, (pid_t)tid);
	int r;

	if (!t)
		return 0;
	if (f->ops.observe_bytes)
		f->ops.observe_bytes(f->ops.ctx, t->tid, data, len);
	t->bytes += len;
	if (!t->stream)
		return 0;
	r = ptd_stream_append(t->stream, data, len);
	if (r < 0)
		return ptd_diagf(f->diag, r, "thread %d: appending %zu trace "
				 "bytes: %s", (int)tid, len, ptd_strerror(r));
	f->st.aux_bytes += len;
	return 0;
}

static int sk_lost(void *ctx, uint32_t tid, uint64_t bytes)
{
	struct ptd_cpufeed *f = ctx;
	struct fthread *t = thread_find(f, (pid_t)tid);
	int r;

	if (!bytes)
		bytes = 1;	/* unknown: still a gap */
	f->st.lost_bytes += bytes;
	if (!t || !t->stream)
		return 0;
	f->st.losses++;
	r = ptd_stream_lost(t->stream, bytes);
	if (r < 0)
		return ptd_diagf(f->diag, r, "thread %d: a loss of %llu "
				 "bytes: %s", (int)tid,
				 (unsigned long long)bytes, ptd_strerror(r));
	return 0;
}

static int on_code(struct ptd_cpufeed *f, const struct ptd_perf_code *c)
{
	struct ptd_tl_event ev;
	int r = ptd_codesnap_add(&f->cs, c, f->o.snapfiles, &ev,
				 &f->st.bad_records, f->diag);

	return r > 0 ? image_apply(f, &ev) : r;
}

static int sk_record(void *ctx, uint32_t tid, const struct ptd_perf_event *e)
{
	struct ptd_cpufeed *f = ctx;
	struct ptd_tl_event ev = { 0 };
	struct ptd_diag d;
	struct fthread *t;
	int r;

	switch (e->type) {
	case PTD_PERF_RECORD_CODE:
		return on_code(f, &e->u.code);
	case PERF_RECORD_EXIT:
		t = thread_find(f, (pid_t)e->u.task.tid);
		if (!t)
			return 0;
		thread_drop(f, t);
		return f->ops.thread_end ? f->ops.thread_end(
						   f->ops.ctx,
						   (pid_t)e->u.task.tid)
					 : 0;
	case PERF_RECORD_FORK:
		return 0;	/* the splitter follows threads */
	default:
		break;
	}
	(void)tid;
	r = ptd_perf_event_to_tl(e, &ev, &d);
	if (r < 0) {
		f->st.bad_records++;
		return 0;
	}
	/* r == PTD_PERF_TL_NONFILE without CODE records (the hardware
	 * path): the decoder reads such code from the live process. */
	return r == 1 ? image_apply(f, &ev) : 0;
}

/* ---- rounds ---------------------------------------------------------- */

/* As decode/feed.h: the page's clock to every live stream, read at each
 * round (the kernel may update it); a page that kept changing while read
 * keeps the last clock, a page without one leaves records TSC-only. */
static void update_clock(struct ptd_cpufeed *f)
{
	struct ptd_perf_clock c;
	int r = ptd_perf_clock_from_page(f->q[0].reader->buf->meta, &c, NULL);

	if (r == -EAGAIN)
		return;
	f->has_clock = r == 0;
	if (r == 0)
		f->clock = c;
	for (size_t i = 0; i < f->nth; i++)
		if (f->th[i].stream)
			(void)ptd_stream_set_clock(f->th[i].stream,
						   f->has_clock ? &f->clock
								: NULL, NULL);
}

static int apply_item(struct ptd_cpufeed *f, unsigned cpu, struct item *it)
{
	switch (it->kind) {
	case IT_AUX:
		return ptd_percpu_aux(f->pc, cpu, it->aux_offset, it->data,
				      it->len);
	case IT_REC:
		return ptd_percpu_record(f->pc, cpu,
					 (const struct perf_event_header *)
						 it->data);
	case IT_LOSS:
		return ptd_percpu_loss(f->pc, cpu, &it->loss);
	}
	return -EINVAL;
}

/* Apply, in (time, cpu) order, every timed item up to @w. */
static int merge(struct ptd_cpufeed *f, uint64_t w)
{
	for (;;) {
		struct cpuq *best = NULL;
		struct item it;
		int r;

		for (unsigned c = 0; c < f->o.ncpus; c++) {
			struct cpuq *q = &f->q[c];
			const struct item *h;

			if (q->head == q->n)
				continue;
			h = &q->v[q->head];
			if (!h->timed || h->time > w)
				continue;
			if (!best || h->time < best->v[best->head].time)
				best = q;
		}
		if (!best)
			return 0;
		it = best->v[best->head++];
		r = apply_item(f, best->cpu, &it);
		item_drop(f, &it);
		if (r < 0)
			return r;
	}
}

int ptd_cpufeed_round(struct ptd_cpufeed *f, bool final,
		      struct ptd_diag *diag)
{
	uint64_t w;
	int r = 0;

	if (!f)
		return -EINVAL;
	f->diag = diag;
	f->st.rounds++;
	update_clock(f);
	for (unsigned c = 0; r >= 0 && c < f->o.ncpus; c++) {
		r = ptd_perf_reader_drain(f->q[c].reader, &rd_ops, &f->q[c]);
		if (r == -ENOMEM)
			r = ptd_diagf(diag, r, "cpu %u: out of memory queueing "
				      "records", c);
	}
	if (r < 0)
		goto out;
	w = f->seen_max;
	if (f->st.queued > PTD_CPUFEED_MAX_QUEUED) {
		f->st.queue_overflows++;
		w = UINT64_MAX;
	}
	if (final) {
		w = UINT64_MAX;
		for (unsigned c = 0; c < f->o.ncpus; c++)
			(void)q_stamp(&f->q[c], 0, false);
	}
	r = merge(f, w);
	if (r < 0 && !diag->msg[0])
		ptd_diagf(diag, r, "splitting the per-CPU trace: %s",
			  ptd_strerror(r));
	f->seen_max = f->round_max;
out:
	f->diag = NULL;
	return r < 0 ? r : 0;
}

int ptd_cpufeed_image(struct ptd_cpufeed *f, const struct ptd_tl_event *ev)
{
	struct ptd_diag d;
	int r;

	if (!f || !ev)
		return -EINVAL;
	f->diag = &d;
	r = image_apply(f, ev);
	f->diag = NULL;
	return r;
}

/* ---- life ------------------------------------------------------------ */

int ptd_cpufeed_new(const struct ptd_cpufeed_opts *o,
		    const struct ptd_cpufeed_ops *ops, struct ptd_cpufeed **ret)
{
	struct ptd_percpu_opts po = { 0 };
	struct ptd_percpu_sink sink = { sk_bytes, sk_record, sk_lost,
					sk_thread_seen, NULL };
	struct ptd_cpufeed *f;
	int r;

	if (!o || !ops || !ret || !ops->thread_new || !o->bufs ||
	    !o->snapfiles || o->ncpus == 0 ||
	    o->ncpus > PTD_PERCPU_MAX_CPUS || o->pid <= 0 ||
	    !o->sample_id_all || !(o->sample_type & PERF_SAMPLE_TID))
		return -EINVAL;
	for (unsigned c = 0; c < o->ncpus; c++)
		if (!o->bufs[c])
			return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->o = *o;
	f->o.bufs = NULL;	/* the readers hold them */
	f->ops = *ops;
	ptd_timeline_init(&f->hist);
	f->q = calloc(o->ncpus, sizeof(*f->q));
	if (!f->q)
		goto nomem;
	for (unsigned c = 0; c < o->ncpus; c++) {
		struct cpuq *q = &f->q[c];

		q->f = f;
		q->cpu = c;
		q->reader = malloc(sizeof(*q->reader));
		if (!q->reader)
			goto nomem;
		ptd_perf_reader_init(q->reader, o->bufs[c]);
	}
	po.ncpus = o->ncpus;
	po.pid = o->pid;
	po.sample_type = o->sample_type;
	po.sample_id_all = o->sample_id_all;
	sink.ctx = f;
	r = ptd_percpu_new(&po, &sink, &f->pc);
	if (r < 0) {
		ptd_cpufeed_free(f);
		return r;
	}
	*ret = f;
	return 0;
nomem:
	ptd_cpufeed_free(f);
	return -ENOMEM;
}

void ptd_cpufeed_free(struct ptd_cpufeed *f)
{
	if (!f)
		return;
	for (unsigned c = 0; f->q && c < f->o.ncpus; c++) {
		struct cpuq *q = &f->q[c];

		for (size_t i = q->head; i < q->n; i++)
			free(q->v[i].data);
		free(q->v);
		free(q->reader);
	}
	free(f->q);
	ptd_percpu_free(f->pc);
	ptd_timeline_fini(&f->hist);
	free(f->th);
	ptd_codesnap_fini(&f->cs);
	free(f);
}

void ptd_cpufeed_get_stats(const struct ptd_cpufeed *f,
			   struct ptd_cpufeed_stats *ret)
{
	*ret = f->st;
	ret->threads_live = f->nth;
	ptd_percpu_get_stats(f->pc, &ret->split);
}
