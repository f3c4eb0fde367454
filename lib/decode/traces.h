/* SPDX-License-Identifier: MIT */
/*
 * Hot traces, as DynamoRIO builds them (its "next executing tail"), from
 * the executed instructions in their serial order.
 *
 * A block is a run of instructions entered after a control transfer (or
 * where the flow is not sequential: a gap in the trace) and ended by one
 * (any iclass but "other").  A block is a trace head when it is entered
 * by a backward jump or call (the target at or below the first address
 * of the block the jump ends) or by leaving a trace.  Each execution of
 * a head counts; the one that brings its count to the threshold starts
 * recording: that block and the blocks executed after it are the trace,
 * which ends before a block entered by a backward transfer, before a
 * block that is a trace head or has a trace, or after PTD_TRACES_MAX_BBS
 * blocks.  The trace record is given when it ends; a trace still being
 * recorded when the decode ends is not formed.
 *
 * Traces are per thread, as in DynamoRIO's thread-private mode: each
 * thread has its own heads, counts and traces (so a thread's traces do
 * not depend on the order in which a trace's threads are decoded).
 *
 * Code is told apart by the counter table's slot (decode/counters.h): an
 * instruction run for the first time (a new slot) over any byte of a
 * formed trace's blocks means the code there changed (a new mapping, a
 * JIT rewrite): every trace of that process covering it is withdrawn, a
 * trace_withdrawn record, and a trace may form again on the new code,
 * whose heads count afresh.  Code that goes away withdraws the traces
 * over it at once, with no new code run there: a PTD_REC_IMAGE record
 * (an unmap, an exec, as the thread's decode applied it) withdraws that
 * thread's traces over the range (its own only: another thread's traces
 * may, in the order threads are decoded, be of code mapped there after
 * the change, and every thread's decode passes the change itself).
 *
 * One object is used by one thread at a time.
 */
#ifndef PTD_DECODE_TRACES_H
#define PTD_DECODE_TRACES_H

#include <stdbool.h>
#include <stdint.h>

#include "record/record.h"

struct ptd_traces;

/* DynamoRIO's defaults (core/optionsx.h): -trace_threshold 50 executions
 * of a head, -max_trace_bbs 128 blocks. */
#define PTD_TRACES_DEFAULT_THRESHOLD 50u
#define PTD_TRACES_MAX_THRESHOLD (1u << 30)
#define PTD_TRACES_MAX_BBS 128u
/* Bounds of what one object holds: heads (distinct block starts per
 * thread, all threads together), traces formed, threads. */
#define PTD_TRACES_MAX_HEADS (1u << 22)
#define PTD_TRACES_MAX_TRACES (1u << 20)
#define PTD_TRACES_MAX_THREADS 65536u

typedef int (*ptd_traces_fn)(void *ctx, const struct ptd_record *rec);

/* A builder whose heads turn hot at @threshold executions (0: the
 * default; 1..PTD_TRACES_MAX_THRESHOLD) into *@ret.  Returns 0, -EINVAL
 * (@ret NULL, @threshold too large), -ENOMEM. */
int ptd_traces_new(uint32_t threshold, struct ptd_traces **ret);
void ptd_traces_free(struct ptd_traces *t);

/* Take the execution of instruction @r (an insn record; a PTD_REC_IMAGE
 * record withdraws as said above; others are ignored) whose code is
 * counter slot @slot (0: unknown, taken as code that never matches),
 * @first if it is the slot's first execution.
 * trace and trace_withdrawn records go to @fn, right away.  Returns 0 or
 * @fn's non-zero value. */
int ptd_traces_feed(struct ptd_traces *t, const struct ptd_record *r,
		    uint32_t slot, bool first, ptd_traces_fn fn, void *ctx);

/* Called on the builder's thread before it takes @bytes more memory (its
 * tables, each thread's room for one recording, each trace's blocks); a
 * non-zero return refuses them, and the builder then stays the size it
 * is: heads, recordings and traces that would need more are dropped
 * (counted in ptd_traces_totals).  ptd charges it to the session's user's
 * memory limit so, as the counter table (decode/counters.h).  NULL @fn:
 * no check (the default). */
typedef int (*ptd_traces_grow_fn)(void *ctx, uint64_t bytes);
void ptd_traces_set_grow(struct ptd_traces *t, ptd_traces_grow_fn fn,
			 void *ctx);

/* Traces formed, withdrawn, and heads or traces not kept because a bound
 * was reached (or memory: a refusal by the grow function, an allocation
 * that failed). */
void ptd_traces_totals(const struct ptd_traces *t, uint64_t *ret_formed,
		       uint64_t *ret_withdrawn, uint64_t *ret_dropped);

#endif
