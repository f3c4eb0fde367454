/* SPDX-License-Identifier: MIT */
/*
 * The turn: units of work (a thread's trace, a part of one) decoded by
 * workers at once and handed on to one consumer in their order.  The
 * parallel decoder's parts (decode/parallel.h) and the threads decoded at
 * once (decode/threadpar.h) are both run this way.
 *
 * Workers take units in order (ptd_turn_take), never more than @nslots
 * ahead of the current unit, the one whose records the consumer gets
 * now.  A worker whose unit is not current queues its records in chunks
 * (decode/chunks.h) on the unit (ptd_turn_queue), and waits while the
 * units hold their budget of chunks.  The worker of the current unit has
 * the turn: it hands on what its unit queued (ptd_turn_drain), then its
 * records as it makes them; once the unit is done it passes the turn on
 * (ptd_turn_pass), handing on, itself, the units after it that are done
 * already, until one is still being decoded (whose worker takes the turn
 * when it next looks, ptd_turn_came, or when its decode returns,
 * ptd_turn_finish).  So the consumer is called by one thread at a time,
 * in the units' order, the turn passed under @mx.  The caller's thread
 * waits (ptd_turn_wait) until every unit was handed on or everything
 * stopped (ptd_turn_stop_locked).
 *
 * @mx guards the units' queues and done flags, the chunks' free list and
 * @next; @current and @cancel are written under it and read without it
 * at every record (a cache line of their own).  What a worker writes of
 * its unit before ptd_turn_finish is seen by whoever hands the unit on
 * after it.
 */
#ifndef PTD_DECODE_TURN_H
#define PTD_DECODE_TURN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "decode/chunks.h"

struct ptd_turn_unit {
	struct ptd_chunkq q;	/* queued, not yet handed on */
	bool done;		/* its decode returned (all of it queued) */
};

struct ptd_turn {
	size_t n;		/* units */
	size_t nslots;		/* taken at most: @current and after */
	size_t budget;		/* chunks held at most (a worker waits) */
	struct ptd_turn_unit *u;
	/* Read at every record, written a few times a unit: a cache line
	 * of their own, not the lock's.  The unit with the turn (n: all
	 * handed on). */
	_Alignas(64) atomic_size_t current;
	atomic_bool cancel;	/* stopped, or every unit handed on */
	_Alignas(64) pthread_mutex_t mx;
	pthread_cond_t cv;	/* any change of what @mx guards */
	pthread_cond_t end;	/* @cancel set: the caller's thread waits */
	struct ptd_chunks ch;	/* the units' queued records */
	size_t next;		/* the next unit a worker takes */
};

/* @n units, @workers workers taking at most @nslots at once: the chunks
 * held are bounded by @nslots units' worth (PTD_CHUNKS_A_PART each) with
 * the chunks the workers fill.  -ENOMEM, or 0. */
int ptd_turn_init(struct ptd_turn *t, size_t n, size_t workers,
		  size_t nslots);
/* Everything freed, the chunks still queued too. */
void ptd_turn_fini(struct ptd_turn *t);

/* A worker's next unit, once it is at most nslots - 1 ahead of the
 * current one; SIZE_MAX: none is left, or everything stopped. */
size_t ptd_turn_take(struct ptd_turn *t);

static inline bool ptd_turn_cancelled(const struct ptd_turn *t)
{
	return atomic_load_explicit(&t->cancel, memory_order_relaxed);
}

/* Whether unit @i has the turn (what was handed on before is seen). */
static inline bool ptd_turn_came(const struct ptd_turn *t, size_t i)
{
	return atomic_load_explicit(&t->current, memory_order_acquire) == i;
}

/* An empty chunk to fill (NULL: out of memory). */
static inline struct ptd_chunk *ptd_turn_chunk(struct ptd_turn *t)
{
	return ptd_chunks_get(&t->ch, &t->mx);
}

/* Queue unit @i's full chunk @k, then wait while the units hold their
 * budget, or until the turn comes to @i.  False: everything stopped. */
bool ptd_turn_queue(struct ptd_turn *t, size_t i, struct ptd_chunk *k);

/* Unit @i's decode returned: its last chunk @k (NULL or empty: none;
 * with @turn, what it gathered was handed on) queued and the unit done.
 * Returns whether it has the turn now (and nothing stopped): then the
 * caller hands on what it queued and passes the turn. */
bool ptd_turn_finish(struct ptd_turn *t, size_t i, struct ptd_chunk *k,
		     bool turn);

/* Hand on what unit @i queued (the turn's holder), chunk by chunk, to
 * @give.  False where @give was (it stopped there). */
bool ptd_turn_drain(struct ptd_turn *t, size_t i,
		    bool (*give)(void *ctx, struct ptd_chunk *k), void *ctx);

/* Unit @i, which has the turn, was handed on: the turn goes to @i + 1
 * (after the last, everything is done: the caller's thread wakes).
 * Returns true where unit @i + 1 is done already: the caller hands it on
 * (ptd_turn_drain) and passes the turn again. */
bool ptd_turn_pass(struct ptd_turn *t, size_t i);

/* Everything stops: the workers stop at their next look, the caller's
 * thread wakes.  @mx held (the caller records why under it). */
void ptd_turn_stop_locked(struct ptd_turn *t);

/* The caller's thread: until every unit was handed on or it stopped. */
void ptd_turn_wait(struct ptd_turn *t);

#endif
