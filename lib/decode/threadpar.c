/* SPDX-License-Identifier: MIT */
/*
 * The threads of a trace decoded at once (decode/threadpar.h).
 *
 * Threads: the caller's thread starts min(jobs, n) workers and waits for
 * them.  A worker takes the next unit (never more than nslots ahead of the
 * current one, the unit whose records the consumer gets now) and decodes
 * it.  While its unit is not current, it queues the records in chunks on
 * the unit, and waits while the units hold their budget of chunks
 * between them (PTD_DECODE_HELD, with the chunks being filled).  The
 * worker of the current unit has the turn: it hands the unit's queued
 * chunks to the consumer, then each record as it is made (no copy: the
 * serial decode's cost), and once the decode returned says the unit is
 * done and passes the turn on -- handing on, itself, the units after it
 * that are done already, until one is still being decoded (whose worker
 * takes the turn at its next record, or when its decode returns) or none
 * is left.  So the consumer and ops.done are called by one thread at a
 * time, the turn passed under @mx (which orders their calls), never by
 * two at once.
 *
 * @mx guards the units' queues and done flags, the free list, @next and
 * @rc; @current is written under it (read without it by a worker checking
 * whether the turn came).  The section cache's @lock (the units' decodes)
 * is never taken while @mx is held.
 */
#include "decode/threadpar.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "decode/chunks.h"

_Static_assert(PTD_CHUNKS_A_PART >= 2, "a budget of at least a chunk a worker");

struct unit {
	struct ptd_chunkq q;		/* queued, not yet handed on */
	bool done;			/* its decode returned */
	int err;			/* ... with this error (or 0) */
	/* the consumer's negative value: the rest of it dropped */
	int rc;
	struct ptd_decode_stats st;
	struct ptd_diag diag;
};

struct tp {
	const struct ptd_decode_opts *o;
	struct ptd_decode_opts wo;	/* a worker's decode (ops.decode) */
	const struct ptd_threadpar_ops *ops;
	ptd_record_fn fn;
	void *fctx;
	bool batch;		/* the consumer takes runs (o->batch) */
	struct unit *u;
	size_t n, nslots;
	pthread_mutex_t lock;	/* the section cache (threadpar.h) */
	pthread_mutex_t mx;
	pthread_cond_t cv;	/* any change of what @mx guards */
	pthread_cond_t end;	/* @cancel set: the caller's thread waits */
	struct ptd_chunks ch;	/* the units' queued records */
	size_t next;		/* the next unit a worker takes */
	size_t budget;		/* chunks held at most (a worker waits) */
	atomic_size_t current;	/* the unit with the turn; n: all done */
	int rc;			/* the consumer's stop (positive) */
	atomic_bool cancel;	/* stopped (or every unit done) */
};

/* A worker's unit being decoded. */
struct wctx {
	struct tp *p;
	size_t i;
	struct unit *u;
	struct ptd_chunk *c;	/* being filled (NULL: none yet) */
	bool nomem;
	bool turn;		/* its records go to the consumer as made */
	struct ptd_record *run;	/* ... gathered for o->batch (or NULL) */
	size_t nrun;
};

/* Everything stops: the consumer's positive value, or out of memory. */
static void stop_all(struct tp *p, int rc)
{
	(void)pthread_mutex_lock(&p->mx);
	if (!p->rc)
		p->rc = rc;
	atomic_store(&p->cancel, true);
	(void)pthread_cond_broadcast(&p->cv);
	(void)pthread_cond_signal(&p->end);
	(void)pthread_mutex_unlock(&p->mx);
}

/* Hand @n records of unit @u to the consumer (the turn's holder).
 * Returns false when everything stops; a negative value of the consumer
 * ends the unit: the rest of its records are dropped. */
static bool give(struct tp *p, struct unit *u, const struct ptd_record *v,
		 size_t n)
{
	int rc = 0;

	if (u->rc || !n)
		return true;
	if (p->batch)
		rc = p->o->batch(p->fctx, v, n);
	for (size_t k = 0; !p->batch && k < n && !rc; k++)
		rc = p->fn(p->fctx, &v[k]);
	if (rc < 0)
		u->rc = rc;
	if (rc > 0) {
		stop_all(p, rc);
		return false;
	}
	return true;
}

struct drain_ctx {
	struct tp *p;
	struct unit *u;
};

static bool give_chunk(void *ctx, struct ptd_chunk *c)
{
	struct drain_ctx *d = ctx;

	return give(d->p, d->u, c->v, c->n);
}

/* Hand on what unit @u has queued (the turn's holder). */
static bool drain(struct tp *p, struct unit *u)
{
	struct drain_ctx d = { p, u };

	return ptd_chunks_drain(&p->ch, &u->q, &p->mx, &p->cv, give_chunk,
				&d);
}

/* Unit @i, which has the turn, was decoded and all handed on: say so and
 * pass the turn on, handing on the units after it that are done. */
static void pass_turn(struct tp *p, size_t i)
{
	for (;;) {
		struct unit *u = &p->u[i];
		bool done;

		u->st.at_once = true;
		p->ops->done(p->ops->ctx, i, u->rc ? u->rc : u->err, &u->st,
			     &u->diag);
		(void)pthread_mutex_lock(&p->mx);
		atomic_store(&p->current, ++i);
		if (i == p->n) {
			atomic_store(&p->cancel, true);
			(void)pthread_cond_signal(&p->end);
		}
		(void)pthread_cond_broadcast(&p->cv);
		done = i < p->n && p->u[i].done;
		(void)pthread_mutex_unlock(&p->mx);
		/* not done: its worker takes the turn */
		if (!done || !drain(p, &p->u[i]))
			return;
	}
}

/* The turn came to @w's unit, still being decoded: hand on what it
 * queued and what it is filling; from now on its records go straight to
 * the consumer. */
static bool take_turn(struct wctx *w)
{
	w->turn = true;
	if (!drain(w->p, w->u))
		return false;
	if (w->c) {
		bool go = give(w->p, w->u, w->c->v, w->c->n);

		w->c->n = 0;
		if (!go)
			return false;
	}
	return true;
}

/* Queue @w's chunk on its unit; wait while the units hold the budget of
 * chunks, or until the turn comes to it.  Returns false when the decode
 * is cancelled. */
static bool chunk_queue(struct wctx *w)
{
	struct tp *p = w->p;
	struct unit *u = w->u;
	bool go;

	(void)pthread_mutex_lock(&p->mx);
	ptd_chunks_add(&p->ch, &u->q, w->c);
	w->c = NULL;
	(void)pthread_cond_broadcast(&p->cv);
	while (p->ch.held >= p->budget && !atomic_load(&p->cancel) &&
	       atomic_load(&p->current) != w->i)
		(void)pthread_cond_wait(&p->cv, &p->mx);
	go = !atomic_load(&p->cancel);
	(void)pthread_mutex_unlock(&p->mx);
	return go;
}

static int unit_record(void *ctx, const struct ptd_record *rec)
{
	struct wctx *w = ctx;
	struct tp *p = w->p;

	if (atomic_load_explicit(&p->cancel, memory_order_relaxed) ||
	    w->u->rc)
		return 1;
	if (!w->turn &&
	    atomic_load_explicit(&p->current, memory_order_acquire) == w->i &&
	    !take_turn(w))
		return 1;
	if (w->turn && !w->run)
		return give(p, w->u, rec, 1) && !w->u->rc ? 0 : 1;
	if (w->turn) {
		w->run[w->nrun++] = *rec;
		if (w->nrun == PTD_CHUNK_RUN) {
			w->nrun = 0;
			if (!give(p, w->u, w->run, PTD_CHUNK_RUN))
				return 1;
		}
		return w->u->rc ? 1 : 0;
	}
	if (!w->c && !(w->c = ptd_chunks_get(&p->ch, &p->mx))) {
		w->nomem = true;
		return 1;
	}
	w->c->v[w->c->n++] = *rec;
	if (w->c->n == PTD_CHUNK_RECORDS && !chunk_queue(w))
		return 1;
	return 0;
}

/* Decode unit @i on this worker (@run: PTD_CHUNK_RUN for o->batch). */
static void run_unit(struct tp *p, size_t i, struct ptd_record *run)
{
	struct wctx w = { p, i, &p->u[i], NULL, false, false, run, 0 };
	struct ptd_decode_stats st;
	struct ptd_diag diag = { "" };
	bool turn;
	int r;

	memset(&st, 0, sizeof(st));
	r = p->ops->decode(p->ops->ctx, i, &p->wo, &p->lock, unit_record, &w,
			   &st, &diag);
	if (w.nomem)
		r = -ENOMEM;	/* the unit ends there, as a serial one */
	/* what it gathered with the turn */
	if (w.turn && w.nrun && !atomic_load(&p->cancel))
		(void)give(p, w.u, w.run, w.nrun);
	(void)pthread_mutex_lock(&p->mx);
	if (w.c && w.c->n && !w.turn)
		ptd_chunks_add(&p->ch, &w.u->q, w.c);
	else if (w.c)
		ptd_chunks_put(&p->ch, w.c);
	w.u->err = r < 0 ? r : 0;
	w.u->st = st;
	w.u->diag = diag;
	w.u->done = true;
	turn = atomic_load(&p->current) == i && !atomic_load(&p->cancel);
	(void)pthread_cond_broadcast(&p->cv);
	(void)pthread_mutex_unlock(&p->mx);
	/* the turn came (or had come) to it: whatever it still queued, then
	 * the units after it */
	if (turn && drain(p, w.u))
		pass_turn(p, i);
}

static void *worker(void *arg)
{
	struct tp *p = arg;
	struct ptd_record *run = NULL;

	(void)pthread_setname_np(pthread_self(), "ptd-thread");
	if (p->batch && !(run = malloc(PTD_CHUNK_RUN * sizeof(*run)))) {
		stop_all(p, -ENOMEM);
		return NULL;
	}
	for (;;) {
		size_t i;

		(void)pthread_mutex_lock(&p->mx);
		while (!atomic_load(&p->cancel) && p->next < p->n &&
		       p->next >= atomic_load(&p->current) + p->nslots)
			(void)pthread_cond_wait(&p->cv, &p->mx);
		if (atomic_load(&p->cancel) || p->next >= p->n) {
			(void)pthread_mutex_unlock(&p->mx);
			break;
		}
		i = p->next++;
		(void)pthread_mutex_unlock(&p->mx);
		run_unit(p, i, run);
	}
	free(run);
	return NULL;
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
static int run_serial(const struct ptd_decode_opts *o, size_t n,
		      const struct ptd_threadpar_ops *ops, ptd_record_fn fn,
		      void *fctx)
{
	for (size_t i = 0; i < n; i++) {
		struct ptd_decode_stats st;
		struct ptd_diag diag = { "" };
		int r;

		memset(&st, 0, sizeof(st));
		r = ops->decode(ops->ctx, i, o, NULL, fn, fctx, &st, &diag);
		if (r > 0)
			return r;
		ops->done(ops->ctx, i, r, &st, &diag);
	}
	return 0;
}

static void tp_fini(struct tp *p)
{
	for (size_t i = 0; p->u && i < p->n; i++)
		ptd_chunkq_free(&p->u[i].q);
	ptd_chunks_fini(&p->ch);
	free(p->u);
	(void)pthread_cond_destroy(&p->cv);
	(void)pthread_cond_destroy(&p->end);
	(void)pthread_mutex_destroy(&p->mx);
	(void)pthread_mutex_destroy(&p->lock);
}

int ptd_threadpar_run(const struct ptd_decode_opts *o, size_t n, bool fits,
		      const struct ptd_threadpar_ops *ops, ptd_record_fn fn,
		      void *fctx)
{
	pthread_t th[PTD_DECODE_MAX_JOBS];
	size_t nth, k;
	struct tp p;
	int rc;

	if (!o || !ops || !ops->decode || !ops->done || !fn ||
	    o->jobs > PTD_DECODE_MAX_JOBS)
		return -EINVAL;
	for (k = 0; ops->sections && n > 1 && k < n; k++)
		if (ops->sections(ops->ctx, k) < 0)
			fits = false;
	if (!fits)
		return run_serial(o, n, ops, fn, fctx);
	memset(&p, 0, sizeof(p));
	p.o = o;
	p.wo = *o;
	p.wo.batch = NULL;
	p.wo.batch_of = NULL;
	p.wo.ips = NULL;
	p.wo.ips_gate = NULL;
	p.wo.jobs = 0;
	p.ops = ops;
	p.fn = fn;
	p.fctx = fctx;
	p.batch = o->batch && fn == o->batch_of;
	p.n = n;
	nth = o->jobs < n ? o->jobs : n;
	p.nslots = nth + 2;
	/* with the chunk each worker fills: PTD_DECODE_HELD */
	p.budget = p.nslots * PTD_CHUNKS_A_PART - nth;
	p.u = calloc(n, sizeof(*p.u));
	if (!p.u)
		return -ENOMEM;
	atomic_init(&p.current, 0);
	atomic_init(&p.cancel, false);
	(void)pthread_mutex_init(&p.lock, NULL);
	(void)pthread_mutex_init(&p.mx, NULL);
	(void)pthread_cond_init(&p.cv, NULL);
	(void)pthread_cond_init(&p.end, NULL);
	for (k = 0; k < nth; k++)
		if (pthread_create(&th[k], NULL, worker, &p) != 0)
			break;
	nth = k;
	if (!nth) {
		/* No worker: this thread decodes them all. */
		tp_fini(&p);
		return run_serial(o, n, ops, fn, fctx);
	}
	/* until every unit was handed on, or the consumer stopped it */
	(void)pthread_mutex_lock(&p.mx);
	while (!atomic_load(&p.cancel))
		(void)pthread_cond_wait(&p.end, &p.mx);
	rc = p.rc;
	(void)pthread_mutex_unlock(&p.mx);
	for (size_t i = 0; i < nth; i++)
		(void)pthread_join(th[i], NULL);
	tp_fini(&p);
	return rc;
}
