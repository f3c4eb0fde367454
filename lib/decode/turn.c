/* SPDX-License-Identifier: MIT */
/* The turn (decode/turn.h). */
#include "decode/turn.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int ptd_turn_init(struct ptd_turn *t, size_t n, size_t workers,
		  size_t nslots)
{
	memset(t, 0, sizeof(*t));
	t->u = calloc(n ? n : 1, sizeof(*t->u));
	if (!t->u)
		return -ENOMEM;
	t->n = n;
	t->nslots = nslots;
	/* with the chunk each worker fills: PTD_DECODE_HELD(workers) */
	t->budget = nslots * PTD_CHUNKS_A_PART - workers;
	atomic_init(&t->current, 0);
	atomic_init(&t->cancel, false);
	(void)pthread_mutex_init(&t->mx, NULL);
	(void)pthread_cond_init(&t->cv, NULL);
	(void)pthread_cond_init(&t->end, NULL);
	return 0;
}

void ptd_turn_fini(struct ptd_turn *t)
{
	if (!t->u)
		return;
	for (size_t i = 0; i < t->n; i++)
		ptd_chunkq_free(&t->u[i].q);
	ptd_chunks_fini(&t->ch);
	free(t->u);
	t->u = NULL;
	(void)pthread_cond_destroy(&t->cv);
	(void)pthread_cond_destroy(&t->end);
	(void)pthread_mutex_destroy(&t->mx);
}

size_t ptd_turn_take(struct ptd_turn *t)
{
	size_t i = SIZE_MAX;

	(void)pthread_mutex_lock(&t->mx);
	while (!atomic_load(&t->cancel) && t->next < t->n &&
	       t->next >= atomic_load(&t->current) + t->nslots)
		(void)pthread_cond_wait(&t->cv, &t->mx);
	if (!atomic_load(&t->cancel) && t->next < t->n)
		i = t->next++;
	(void)pthread_mutex_unlock(&t->mx);
	return i;
}

bool ptd_turn_queue(struct ptd_turn *t, size_t i, struct ptd_chunk *k)
{
	bool go;

	(void)pthread_mutex_lock(&t->mx);
	ptd_chunks_add(&t->ch, &t->u[i].q, k);
	(void)pthread_cond_broadcast(&t->cv);
	while (!atomic_load(&t->cancel) && t->ch.held >= t->budget &&
	       atomic_load(&t->current) != i)
		(void)pthread_cond_wait(&t->cv, &t->mx);
	go = !atomic_load(&t->cancel);
	(void)pthread_mutex_unlock(&t->mx);
	return go;
}

bool ptd_turn_finish(struct ptd_turn *t, size_t i, struct ptd_chunk *k,
		     bool turn)
{
	bool now;

	(void)pthread_mutex_lock(&t->mx);
	if (k && k->n && !turn)
		ptd_chunks_add(&t->ch, &t->u[i].q, k);
	else if (k)
		ptd_chunks_put(&t->ch, k);
	t->u[i].done = true;
	now = atomic_load(&t->current) == i && !atomic_load(&t->cancel);
	(void)pthread_cond_broadcast(&t->cv);
	(void)pthread_mutex_unlock(&t->mx);
	return now;
}

bool ptd_turn_drain(struct ptd_turn *t, size_t i,
		    bool (*give)(void *ctx, struct ptd_chunk *k), void *ctx)
{
	return ptd_chunks_drain(&t->ch, &t->u[i].q, &t->mx, &t->cv, give,
				ctx);
}

bool ptd_turn_pass(struct ptd_turn *t, size_t i)
{
	bool done;

	(void)pthread_mutex_lock(&t->mx);
	atomic_store(&t->current, ++i);
	if (i == t->n) {
		atomic_store(&t->cancel, true);
		(void)pthread_cond_signal(&t->end);
	}
	(void)pthread_cond_broadcast(&t->cv);
	/* not done: its worker takes the turn */
	done = i < t->n && t->u[i].done;
	(void)pthread_mutex_unlock(&t->mx);
	return done;
}

void ptd_turn_stop_locked(struct ptd_turn *t)
{
	atomic_store(&t->cancel, true);
	(void)pthread_cond_broadcast(&t->cv);
	(void)pthread_cond_signal(&t->end);
}

void ptd_turn_wait(struct ptd_turn *t)
{
	(void)pthread_mutex_lock(&t->mx);
	while (!atomic_load(&t->cancel))
		(void)pthread_cond_wait(&t->end, &t->mx);
	(void)pthread_mutex_unlock(&t->mx);
}
