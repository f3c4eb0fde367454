/* SPDX-License-Identifier: MIT */
/* Records decoded ahead, held in chunks (decode/chunks.h). */
#include "decode/chunks.h"

#include <stdlib.h>

struct ptd_chunk *ptd_chunks_get(struct ptd_chunks *c, pthread_mutex_t *mx)
{
	struct ptd_chunk *k;

	(void)pthread_mutex_lock(mx);
	k = c->free;
	if (k)
		c->free = k->next;
	(void)pthread_mutex_unlock(mx);
	if (!k)
		k = malloc(sizeof(*k));
	if (k) {
		k->next = NULL;
		k->n = 0;
	}
	return k;
}

void ptd_chunks_add(struct ptd_chunks *c, struct ptd_chunkq *q,
		    struct ptd_chunk *k)
{
	k->next = NULL;
	if (q->tail)
		q->tail->next = k;
	else
		q->head = k;
	q->tail = k;
	q->n++;
	c->held++;
	c->held_records += k->n;
	c->queued += k->n;
	if (c->held_records > c->held_max)
		c->held_max = c->held_records;
}

struct ptd_chunk *ptd_chunks_pop(struct ptd_chunkq *q)
{
	struct ptd_chunk *k = q->head;

	if (k) {
		q->head = k->next;
		if (!q->head)
			q->tail = NULL;
		q->n--;
		k->next = NULL;
	}
	return k;
}

void ptd_chunks_put(struct ptd_chunks *c, struct ptd_chunk *k)
{
	k->next = c->free;
	c->free = k;
}

void ptd_chunks_release(struct ptd_chunks *c, struct ptd_chunk *k)
{
	c->held--;
	c->held_records -= k->n;
	ptd_chunks_put(c, k);
}

bool ptd_chunks_drain(struct ptd_chunks *c, struct ptd_chunkq *q,
		      pthread_mutex_t *mx, pthread_cond_t *cv,
		      bool (*give)(void *ctx, struct ptd_chunk *k), void *ctx)
{
	for (;;) {
		struct ptd_chunk *k;
		bool go;

		(void)pthread_mutex_lock(mx);
		k = ptd_chunks_pop(q);
		(void)pthread_mutex_unlock(mx);
		if (!k)
			return true;
		go = give(ctx, k);
		(void)pthread_mutex_lock(mx);
		ptd_chunks_release(c, k);
		(void)pthread_cond_broadcast(cv);
		(void)pthread_mutex_unlock(mx);
		if (!go)
			return false;
	}
}

static void free_list(struct ptd_chunk *k)
{
	while (k) {
		struct ptd_chunk *next = k->next;

		free(k);
		k = next;
	}
}

void ptd_chunkq_free(struct ptd_chunkq *q)
{
	free_list(q->head);
	q->head = q->tail = NULL;
	q->n = 0;
}

void ptd_chunks_fini(struct ptd_chunks *c)
{
	free_list(c->free);
	c->free = NULL;
}
