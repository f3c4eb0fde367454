/* SPDX-License-Identifier: MIT */
/*
 * Records decoded ahead of their consumer, held in chunks: queued by the
 * worker that made them, taken in order by whoever hands them on, counted
 * against a budget the workers wait at.  The parallel decoder's parts
 * (decode/parallel.h) and the threads decoded at once (decode/threadpar.h)
 * hold their records this way.
 *
 * Not locked itself: the caller holds its own mutex around every call but
 * ptd_chunks_get (which takes @mx for the free list and allocates outside
 * it) and ptd_chunks_fini.
 */
#ifndef PTD_DECODE_CHUNKS_H
#define PTD_DECODE_CHUNKS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "decode/parallel.h"
#include "record/record.h"

#define PTD_CHUNK_RECORDS 2048u
/* Records the worker with the turn gathers for a consumer that takes runs
 * (opts.batch) before it hands them on: few enough to stay in its
 * caches. */
#define PTD_CHUNK_RUN 256u
_Static_assert(PTD_CHUNK_RUN <= PTD_CHUNK_RECORDS, "a run in a chunk");
/* The chunks a part's worth of records takes (PTD_DECODE_PART_RECORDS):
 * the unit of both decoders' budgets. */
#define PTD_CHUNKS_A_PART (PTD_DECODE_PART_RECORDS / PTD_CHUNK_RECORDS)

struct ptd_chunk {
	struct ptd_chunk *next;
	size_t n;
	struct ptd_record v[PTD_CHUNK_RECORDS];
};

/* One part's or thread's chunks, in order. */
struct ptd_chunkq {
	struct ptd_chunk *head, *tail;
	size_t n;		/* chunks queued */
};

struct ptd_chunks {
	struct ptd_chunk *free;
	size_t held;		/* chunks queued on every queue */
	uint64_t held_records;	/* ... their records */
	uint64_t held_max;	/* the most records queued at once */
	uint64_t queued;	/* records ever queued */
};

/* An empty chunk, from the free list (@mx held for it) or allocated;
 * NULL when out of memory. */
struct ptd_chunk *ptd_chunks_get(struct ptd_chunks *c, pthread_mutex_t *mx);
/* Queue @k on @q: it is held from now on. */
void ptd_chunks_add(struct ptd_chunks *c, struct ptd_chunkq *q,
		    struct ptd_chunk *k);
/* The first chunk of @q taken off it (NULL: none), still held until
 * ptd_chunks_release. */
struct ptd_chunk *ptd_chunks_pop(struct ptd_chunkq *q);
/* @k, taken with ptd_chunks_pop, handed on: no longer held, free again. */
void ptd_chunks_release(struct ptd_chunks *c, struct ptd_chunk *k);
/* Hand on what @q holds, chunk by chunk in order, to @give(@ctx, @k);
 * each chunk is released after (@mx held for the queue and the release,
 * @cv broadcast: room again).  Returns false where @give did (stopping
 * there). */
bool ptd_chunks_drain(struct ptd_chunks *c, struct ptd_chunkq *q,
		      pthread_mutex_t *mx, pthread_cond_t *cv,
		      bool (*give)(void *ctx, struct ptd_chunk *k), void *ctx);
/* @k, never queued, free again. */
void ptd_chunks_put(struct ptd_chunks *c, struct ptd_chunk *k);
/* Free what @q still holds (held is not kept up to date). */
void ptd_chunkq_free(struct ptd_chunkq *q);
/* Free the free list. */
void ptd_chunks_fini(struct ptd_chunks *c);

#endif
