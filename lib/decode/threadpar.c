/* SPDX-License-Identifier: MIT */
/*
 * The threads of a trace decoded at once (decode/threadpar.h).
 *
 * Threads: the caller's thread starts min(jobs, n) workers, then hands on
 * unit after unit.  A worker takes the next unit (never more than nslots
 * ahead of the unit being handed on), decodes it into chunks of records
 * and queues each full chunk on the unit; it waits while the unit holds
 * AHEAD_CHUNKS - 1 of them (queued or being handed on).  The caller's thread takes the current unit's
 * chunks as they come, hands their records on and gives the chunks back
 * to a free list.  @mx guards every unit's queue, the free list and the
 * counters below; the section cache's @lock (the units' decodes) is never
 * taken while @mx is held.
 */
#include "decode/threadpar.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_RECORDS 2048u
#define AHEAD_CHUNKS (PTD_THREADPAR_AHEAD / CHUNK_RECORDS)

struct chunk {
	struct chunk *next;
	size_t n;
	struct ptd_record v[CHUNK_RECORDS];
};

struct unit {
	struct chunk *head, *tail;	/* queued, not yet handed on */
	size_t nheld;			/* chunks queued or being handed on */
	bool done;			/* its decode returned */
	atomic_bool stop;		/* the consumer refused its records */
	int err;
	struct ptd_decode_stats st;
	struct ptd_diag diag;
};

struct tp {
	const struct ptd_decode_opts *o;
	const struct ptd_threadpar_ops *ops;
	struct unit *u;
	size_t n, nslots;
	pthread_mutex_t lock;	/* the section cache (threadpar.h) */
	pthread_mutex_t mx;
	pthread_cond_t cv;	/* any change of what @mx guards */
	struct chunk *free;
	size_t next;		/* the next unit a worker takes */
	size_t current;		/* the unit being handed on */
	atomic_bool cancel;
};

/* A worker's unit being decoded. */
struct wctx {
	struct tp *p;
	struct unit *u;
	struct chunk *c;	/* being filled (NULL: none yet) */
	bool nomem;
};

static struct chunk *chunk_get(struct tp *p)
{
	struct chunk *c;

	(void)pthread_mutex_lock(&p->mx);
	c = p->free;
	if (c)
		p->free = c->next;
	(void)pthread_mutex_unlock(&p->mx);
	if (!c)
		c = malloc(sizeof(*c));
	if (c) {
		c->next = NULL;
		c->n = 0;
	}
	return c;
}

/* Queue @w's chunk on its unit; wait until the unit holds fewer than
 * AHEAD_CHUNKS - 1, so that with the one it fills next its records not
 * yet handed on are at most PTD_THREADPAR_AHEAD.  Returns false when the
 * decode is cancelled. */
static bool chunk_queue(struct wctx *w)
{
	struct tp *p = w->p;
	struct unit *u = w->u;
	bool go;

	(void)pthread_mutex_lock(&p->mx);
	if (u->tail)
		u->tail->next = w->c;
	else
		u->head = w->c;
	u->tail = w->c;
	u->nheld++;
	w->c = NULL;
	(void)pthread_cond_broadcast(&p->cv);
	while (u->nheld + 1 >= AHEAD_CHUNKS && !atomic_load(&p->cancel))
		(void)pthread_cond_wait(&p->cv, &p->mx);
	go = !atomic_load(&p->cancel);
	(void)pthread_mutex_unlock(&p->mx);
	return go;
}

static int unit_record(void *ctx, const struct ptd_record *rec)
{
	struct wctx *w = ctx;

	if (atomic_load_explicit(&w->p->cancel, memory_order_relaxed) ||
	    atomic_load_explicit(&w->u->stop, memory_order_relaxed))
		return 1;
	if (!w->c && !(w->c = chunk_get(w->p))) {
		w->nomem = true;
		return 1;
	}
	w->c->v[w->c->n++] = *rec;
	if (w->c->n == CHUNK_RECORDS && !chunk_queue(w))
		return 1;
	return 0;
}

void ptd_threadpar_opts(struct ptd_decode_opts *o)
{
	if (!o)
		return;
	o->batch = NULL;
	o->batch_of = NULL;
	o->ips = NULL;
	o->ips_gate = NULL;
	o->jobs = 0;
}

static void *worker(void *arg)
{
	struct tp *p = arg;

	(void)pthread_setname_np(pthread_self(), "ptd-thread");
	for (;;) {
		struct wctx w = { p, NULL, NULL, false };
		struct ptd_decode_stats st;
		struct ptd_diag diag = { "" };
		size_t i;
		int r;

		(void)pthread_mutex_lock(&p->mx);
		while (!atomic_load(&p->cancel) && p->next < p->n &&
		       p->next >= p->current + p->nslots)
			(void)pthread_cond_wait(&p->cv, &p->mx);
		if (atomic_load(&p->cancel) || p->next >= p->n) {
			(void)pthread_mutex_unlock(&p->mx);
			return NULL;
		}
		i = p->next++;
		(void)pthread_mutex_unlock(&p->mx);

		w.u = &p->u[i];
		memset(&st, 0, sizeof(st));
		r = p->ops->decode(p->ops->ctx, i, &p->lock, unit_record, &w,
				   &st, &diag);
		if (w.nomem)
			r = -ENOMEM;
		(void)pthread_mutex_lock(&p->mx);
		if (w.c && w.c->n) {
			if (w.u->tail)
				w.u->tail->next = w.c;
			else
				w.u->head = w.c;
			w.u->tail = w.c;
			w.u->nheld++;
		} else if (w.c) {
			w.c->next = p->free;
			p->free = w.c;
		}
		w.u->err = r < 0 ? r : 0;
		w.u->st = st;
		w.u->diag = diag;
		w.u->done = true;
		(void)pthread_cond_broadcast(&p->cv);
		(void)pthread_mutex_unlock(&p->mx);
	}
}

bool ptd_threadpar_fits(const struct ptd_decode_opts *o,
			const uint64_t *bytes, size_t n)
{
	uint64_t all = 0, short_ = 0;

	if (!o || !bytes || o->jobs <= 1 || n <= 1 ||
	    o->path != PTD_PATH_INSN || (o->want & PTD_COUNTERS_KINDS) ||
	    o->part_bytes)
		return false;
	/* (a capture's sizes are its manifest's word: saturated) */
	for (size_t i = 0; i < n; i++) {
		uint64_t b = bytes[i] < UINT32_MAX ? bytes[i] : UINT32_MAX;

		all = all + b < all ? UINT64_MAX : all + b;
		if (b < (uint64_t)o->jobs * PTD_DECODE_PART_MAX_BYTES)
			short_ += b;
	}
	return short_ > all - short_;
}

/* One unit after another on this thread. */
static int run_serial(size_t n, const struct ptd_threadpar_ops *ops,
		      ptd_record_fn fn, void *fctx)
{
	for (size_t i = 0; i < n; i++) {
		struct ptd_decode_stats st;
		struct ptd_diag diag = { "" };
		int r;

		memset(&st, 0, sizeof(st));
		r = ops->decode(ops->ctx, i, NULL, fn, fctx, &st, &diag);
		if (r > 0)
			return r;
		ops->done(ops->ctx, i, r, &st, &diag);
	}
	return 0;
}

/* Hand unit @i's records on as they come.  Returns 0 once the unit is
 * done and all handed on, or the consumer's non-zero value: positive
 * stops the whole decode; negative (as the serial decode takes it) ends
 * the unit with that error once its decode returned, its records left
 * dropped. */
static int hand_on(struct tp *p, size_t i, ptd_record_fn fn, void *fctx,
		   bool batch)
{
	struct unit *u = &p->u[i];
	int rc = 0;

	for (;;) {
		struct chunk *c;

		(void)pthread_mutex_lock(&p->mx);
		while (!u->head && !u->done)
			(void)pthread_cond_wait(&p->cv, &p->mx);
		c = u->head;
		if (c) {
			u->head = c->next;
			if (!u->head)
				u->tail = NULL;
		}
		(void)pthread_mutex_unlock(&p->mx);
		if (!c)
			return rc;	/* done, every chunk handed on */
		if (rc < 0)
			;		/* dropped */
		else if (batch)
			rc = p->o->batch(fctx, c->v, c->n);
		for (size_t k = 0; !batch && k < c->n && !rc; k++)
			rc = fn(fctx, &c->v[k]);
		if (rc < 0)
			atomic_store(&u->stop, true);
		(void)pthread_mutex_lock(&p->mx);
		c->next = p->free;
		p->free = c;
		u->nheld--;
		(void)pthread_cond_broadcast(&p->cv);
		(void)pthread_mutex_unlock(&p->mx);
		if (rc > 0)
			return rc;
	}
}

static void tp_fini(struct tp *p)
{
	for (size_t i = 0; p->u && i < p->n; i++) {
		struct chunk *c = p->u[i].head, *next;

		for (; c; c = next) {
			next = c->next;
			free(c);
		}
	}
	while (p->free) {
		struct chunk *next = p->free->next;

		free(p->free);
		p->free = next;
	}
	free(p->u);
}

int ptd_threadpar_run(const struct ptd_decode_opts *o, size_t n, bool fits,
		      const struct ptd_threadpar_ops *ops, ptd_record_fn fn,
		      void *fctx)
{
	pthread_t th[PTD_DECODE_MAX_JOBS];
	size_t nth, k;
	struct tp p;
	int rc = 0;

	if (!o || !ops || !ops->decode || !ops->done || !fn ||
	    o->jobs > PTD_DECODE_MAX_JOBS)
		return -EINVAL;
	for (k = 0; ops->sections && n > 1 && k < n; k++)
		ops->sections(ops->ctx, k);
	if (!fits)
		return run_serial(n, ops, fn, fctx);
	memset(&p, 0, sizeof(p));
	p.o = o;
	p.ops = ops;
	p.n = n;
	nth = o->jobs < n ? o->jobs : n;
	p.nslots = nth + 2;
	p.u = calloc(n, sizeof(*p.u));
	if (!p.u)
		return -ENOMEM;
	atomic_init(&p.cancel, false);
	(void)pthread_mutex_init(&p.lock, NULL);
	(void)pthread_mutex_init(&p.mx, NULL);
	(void)pthread_cond_init(&p.cv, NULL);
	for (k = 0; k < nth; k++)
		if (pthread_create(&th[k], NULL, worker, &p) != 0)
			break;
	nth = k;
	if (!nth) {
		/* No worker: this thread decodes them all. */
		tp_fini(&p);
		(void)pthread_cond_destroy(&p.cv);
		(void)pthread_mutex_destroy(&p.mx);
		(void)pthread_mutex_destroy(&p.lock);
		return run_serial(n, ops, fn, fctx);
	}
	for (k = 0; k < n; k++) {
		struct unit *u = &p.u[k];

		rc = hand_on(&p, k, fn, fctx,
			     o->batch && fn == o->batch_of);
		if (rc > 0)
			break;
		ops->done(ops->ctx, k, rc < 0 ? rc : u->err, &u->st,
			  &u->diag);
		rc = 0;
		(void)pthread_mutex_lock(&p.mx);
		p.current = k + 1;
		(void)pthread_cond_broadcast(&p.cv);
		(void)pthread_mutex_unlock(&p.mx);
	}
	(void)pthread_mutex_lock(&p.mx);
	atomic_store(&p.cancel, true);
	(void)pthread_cond_broadcast(&p.cv);
	(void)pthread_mutex_unlock(&p.mx);
	for (size_t i = 0; i < nth; i++)
		(void)pthread_join(th[i], NULL);
	(void)pthread_cond_destroy(&p.cv);
	(void)pthread_mutex_destroy(&p.mx);
	(void)pthread_mutex_destroy(&p.lock);
	tp_fini(&p);
	return rc;
}
