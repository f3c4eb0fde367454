/* SPDX-License-Identifier: MIT */
/*
 * The threads of a trace decoded at once (ptd_decode_opts.jobs > 1),
 * giving the records of the serial decode, thread after thread.
 *
 * decode/parallel.h splits one thread's trace at its PSBs; a thread too
 * short for that (fewer parts than jobs) would leave the other cores idle,
 * and a process of many short threads is decoded one thread at a time.
 * Here a reader (a capture, a perf.data file) hands over its threads as
 * units, decoded each serially on one of jobs workers: the current unit's
 * worker hands its records to the consumer as it makes them (no copy, as
 * the serial decode does), then says the unit is done and passes the turn
 * to the next; the other workers decode the next units meanwhile,
 * keeping their records until the turn comes to them.  At most jobs + 2
 * units are taken and not yet done, and the workers keep at most
 * PTD_DECODE_HELD(jobs) records between them (a worker waits there), as
 * the parts of parallel.h do: one unit decoded ahead may use
 * all of it (a thread of 180k records 1.4x faster on 2 vCPUs than with a
 * part's worth each, which had it wait after 32k).  The consumer and
 * ops.done are called by the worker with the turn: by one thread at a
 * time, in the serial order, each call ordered after the one before (the
 * turn passes under a lock), but not on the caller's thread.
 *
 * The records are exactly the serial decode's when each unit's records do
 * not depend on the units decoded before it: ptd_threadpar_fits says
 * when that is so (the instruction path, no counters table shared by the
 * threads) and when it pays (more than one unit, most of the trace in
 * threads too short to be split at their PSBs on their own).
 */
#ifndef PTD_DECODE_THREADPAR_H
#define PTD_DECODE_THREADPAR_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "decode/decoder.h"
#include "decode/parallel.h"

struct ptd_threadpar_ops {
	/* Optional: add to the section cache the units share every section
	 * unit @i's decode can add (its image as it starts, and every
	 * timeline event of the unit applied).  Called for each unit in
	 * order, on the caller's thread, before any unit is decoded, when
	 * there is more than one: a section's isid (in every insn record) is
	 * given in the order sections are first added, which units decoded
	 * at once would interleave; added here first, in the same order
	 * however the units are decoded, every later add finds its
	 * section.  Returns 0, or a negative error: the units are then
	 * decoded one after another. */
	int (*sections)(void *ctx, size_t i);
	/* Decode unit @i to its end with @o, its records to @fn(@fctx) in
	 * order, its statistics in @st, a failure's message in @diag;
	 * returns as ptd_decode_thread.  On a worker (@lock non-NULL),
	 * everything it does to the section cache the units share -- images
	 * made, changed or freed, the decode itself
	 * (ptd_decode_thread_args.lock) -- holds @lock.  @o: those given to
	 * ptd_threadpar_run, on a worker with the thread decoded serially
	 * (jobs 0: the workers are the jobs) and its records one by one (no
	 * runs, no runs of addresses: those are the consumer's; handing the
	 * worker runs measured no faster, one more copy). */
	int (*decode)(void *ctx, size_t i, const struct ptd_decode_opts *o,
		      pthread_mutex_t *lock, ptd_record_fn fn, void *fctx,
		      struct ptd_decode_stats *st, struct ptd_diag *diag);
	/* Unit @i's records were all handed on: @err is 0 or the negative
	 * error that ended it early.  Called as the consumer is (above). */
	void (*done)(void *ctx, size_t i, int err,
		     const struct ptd_decode_stats *st,
		     const struct ptd_diag *diag);
	void *ctx;
};

/* Whether ptd_threadpar_run decodes @n units, with @bytes[i] bytes of
 * trace each, at once under @o: jobs > 1, n > 1, the instruction path (on
 * the block path where libipt ends a block depends on its block cache,
 * kept in the sections every thread's decoder shares and so warmed in the
 * order the threads are decoded: the serial decode's records after the
 * first thread depend on it), no counts or first executions (one table
 * over all threads, in the serial order), no o->part_bytes (parts asked
 * for: parallel.h), and more than half the trace in units too short to
 * keep the workers busy on their own: fewer than jobs parts of
 * PTD_DECODE_PART_MAX_BYTES.  (Otherwise the long ones are split at their
 * PSBs, parallel.h.  A dynamically linked program's main thread is seldom
 * short -- the loader's start alone is some 9 KiB of trace --, its other
 * threads often are.) */
bool ptd_threadpar_fits(const struct ptd_decode_opts *o,
			const uint64_t *bytes, size_t n);

/* Decode units 0..@n-1 and hand their records to @fn(@fctx) (in runs to
 * @o->batch where @fn is @o->batch_of), unit after unit, calling
 * ops->done after each unit's records; on @o->jobs workers where
 * ptd_threadpar_fits (@fits), else one unit after another on this thread.
 * @fn (or @o->batch) returning a positive value stops it: no later record,
 * no later done, that value returned; a negative one ends the unit as a
 * serial decode's would (its decode returns it): done gets it as the
 * unit's error, and the next unit follows.  Returns 0, the positive
 * value, -EINVAL or -ENOMEM. */
int ptd_threadpar_run(const struct ptd_decode_opts *o, size_t n, bool fits,
		      const struct ptd_threadpar_ops *ops, ptd_record_fn fn,
		      void *fctx);

#endif
