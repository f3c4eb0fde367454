/* SPDX-License-Identifier: MIT */
/*
 * The threads of a trace decoded at once (decode/threadpar.h).
 *
 * Threads: the caller's thread starts min(jobs, n) workers and waits for
 * them.  The threads are the units of a turn (decode/turn.h): a worker
 * takes the next unit (at most nslots at once) and decodes it; a unit
 * ahead of the current one is held in chunks, within PTD_DECODE_HELD
 * records with the chunks being filled.  The worker of the current unit
 * has the turn: it hands the unit's queued chunks to the consumer, then
 * each record as it is made (no copy: the serial decode's cost), and
 * once the decode returned says the unit is done (ops.done) and passes
 * the turn on, handing on the units after it that are done.  So the
 * consumer and ops.done are called by one thread at a time, in order.
 *
 * The turn's mutex guards @rc too.  The section cache's @lock (the
 * units' decodes) is never taken while it is held.
 */
#include "decode/threadpar.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "decode/chunks.h"
#include "decode/turn.h"

_Static_assert(PTD_CHUNKS_A_PART >= 2, "a budget of at least a chunk a worker");

/* Written by its worker before its unit of the turn is done. */
struct unit {
	int err;			/* its decode's error (or 0) */
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
	size_t n;
	pthread_mutex_t lock;	/* the section cache (threadpar.h) */
	struct ptd_turn t;	/* a unit a thread */
	int rc;			/* the consumer's stop (> 0; t.mx) */
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
	(void)pthread_mutex_lock(&p->t.mx);
	if (!p->rc)
		p->rc = rc;
	ptd_turn_stop_locked(&p->t);
	(void)pthread_mutex_unlock(&p->t.mx);
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

/* Hand on what unit @i has queued (the turn's holder). */
static bool drain(struct tp *p, size_t i)
{
	struct drain_ctx d = { p, &p->u[i] };

	return ptd_turn_drain(&p->t, i, give_chunk, &d);
}

/* Unit @i, which has the turn, was decoded and all handed on: say so and
 * pass the turn on, handing on the units after it that are done. */
static void pass_turn(struct tp *p, size_t i)
{
	for (;;) {
		struct unit *u = &p->u[i];

		u->st.at_once = true;
		p->ops->done(p->ops->ctx, i, u->rc ? u->rc : u->err, &u->st,
			     &u->diag);
		if (!ptd_turn_pass(&p->t, i++) || !drain(p, i))
			return;
	}
}

/* The turn came to @w's unit, still being decoded: hand on what it
 * queued and what it is filling; from now on its records go straight to
 * the consumer. */
static bool take_turn(struct wctx *w)
{
	w->turn = true;
	if (!drain(w->p, w->i))
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
	struct ptd_chunk *c = w->c;

	w->c = NULL;
	return ptd_turn_queue(&w->p->t, w->i, c);
}

static int unit_record(void *ctx, const struct ptd_record *rec)
{
	struct wctx *w = ctx;
	struct tp *p = w->p;

	if (ptd_turn_cancelled(&p->t) || w->u->rc)
		return 1;
	if (!w->turn && ptd_turn_came(&p->t, w->i) &&
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
	if (!w->c && !(w->c = ptd_turn_chunk(&p->t))) {
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
	int r;

	memset(&st, 0, sizeof(st));
	r = p->ops->decode(p->ops->ctx, i, &p->wo, &p->lock, unit_record, &w,
			   &st, &diag);
	if (w.nomem)
		r = -ENOMEM;	/* the unit ends there, as a serial one */
	/* what it gathered with the turn */
	if (w.turn && w.nrun && !ptd_turn_cancelled(&p->t))
		(void)give(p, w.u, w.run, w.nrun);
	w.u->err = r < 0 ? r : 0;
	w.u->st = st;
	w.u->diag = diag;
	/* the turn came (or had come) to it: whatever it still queued, then
	 * the units after it */
	if (ptd_turn_finish(&p->t, i, w.c, w.turn) && drain(p, i))
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
		size_t i = ptd_turn_take(&p->t);

		if (i == SIZE_MAX)
			break;
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
	ptd_turn_fini(&p->t);
	free(p->u);
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
	/* PTD_DECODE_HELD chunks held at most */
	p.u = calloc(n, sizeof(*p.u));
	if (!p.u || ptd_turn_init(&p.t, n, nth, nth + 2) < 0) {
		free(p.u);
		return -ENOMEM;
	}
	(void)pthread_mutex_init(&p.lock, NULL);
	for (k = 0; k < nth; k++)
		if (pthread_create(&th[k], NULL, worker, &p) != 0)
			break;
	nth = k;
	if (!nth) {
		/* No worker: this thread decodes them all. */
		tp_fini(&p);
		return run_serial(o, n, ops, fn, fctx);
	}
	/* until every unit was handed on, or the consumer stopped it (the
	 * wait's lock orders rc) */
	ptd_turn_wait(&p.t);
	rc = p.rc;
	for (size_t i = 0; i < nth; i++)
		(void)pthread_join(th[i], NULL);
	tp_fini(&p);
	return rc;
}
