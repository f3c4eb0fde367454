/* SPDX-License-Identifier: MIT */
/*
 * Exact execution counts and first executions (Simics' add_counter and
 * cached-instruction callback), kept over a decode.
 *
 * The table has one slot per distinct instruction: (isid, gen, ip, mode,
 * size, bytes).  An isid names one immutable section, and gen which
 * mapping of it ran the instruction (aspace/image.h, ptd_image_gen), so
 * new code at an address is a new slot: another file mapped there, and
 * the same file mapped there again (a dlopen after a dlclose, a program
 * exec'd again), which libipt gives the same isid; code no section covers
 * (isid 0: the vDSO read live, JIT, anonymous memory) is told apart by its
 * bytes, so a JIT rewrite is a new slot too.  Slots are never removed: the
 * table outlives the instruction cache's clears.
 *
 * Per execution, a count is one increment: the instruction cache resolves
 * each instruction's slot once, as it decodes it (insncache.h,
 * ptd_insncache_set_counters), and the block path's insn records carry it
 * (ptd_rec_insn.cslot).  Records without it (the instruction path, the
 * stitched records of a parallel decode) are looked up in the table's
 * hash.  A slot's first count is its instruction's first execution: a
 * first_exec record, given right before the instruction's insn record.
 *
 * Blocks and functions are derived when the counts are taken
 * (ptd_counters_emit): a block is a straight run of adjacent instructions
 * of one section and mode executed equally often, each but the last one
 * that falls through (iclass "other"); a function sums the counts of the
 * instructions its symbol covers (by module, without symbols).
 *
 * One table is used by one thread at a time.
 */
#ifndef PTD_DECODE_COUNTERS_H
#define PTD_DECODE_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record/record.h"

struct ptd_counters;

/* Default and upper bound of distinct instructions a table holds. */
#define PTD_COUNTERS_DEFAULT_MAX (1u << 22)
#define PTD_COUNTERS_MAX_MAX (1u << 28)


typedef int (*ptd_counters_fn)(void *ctx, const struct ptd_record *rec);

/* Allocate an empty table of at most @max_entries distinct instructions
 * (0: PTD_COUNTERS_DEFAULT_MAX; more than PTD_COUNTERS_MAX_MAX: that)
 * into *@ret.  Returns 0 or -ENOMEM (*@ret NULL), -EINVAL if @ret is
 * NULL. */
int ptd_counters_new(size_t max_entries, struct ptd_counters **ret);
void ptd_counters_free(struct ptd_counters *t);

/* Called on the table's thread before it takes @bytes more memory for
 * its entries and index (the names it copies are not counted); a
 * non-zero return refuses them: the table then stays the size it is,
 * new instructions uncounted (the total's "uncounted"), as when full.
 * ptd charges a session's table to its user's memory limit so.  Its
 * trace builder (ptd_counters_enable_traces) asks the same function
 * (ptd_traces_set_grow).  NULL @fn: no check (the default). */
typedef int (*ptd_counters_grow_fn)(void *ctx, uint64_t bytes);
void ptd_counters_set_grow(struct ptd_counters *t, ptd_counters_grow_fn fn,
			   void *ctx);

/* The slot of the instruction @in describes (its ip, isid, gen, mode,
 * size, raw; the rest -- iclass, module, offset, symbol -- is kept from the
 * first time), added if new.  Returns the slot (> 0), or 0 when the table
 * is full or memory runs out (its executions are then uncounted). */
uint32_t ptd_counters_slot(struct ptd_counters *t,
			   const struct ptd_rec_insn *in);

/* Count one execution of slot @slot (from ptd_counters_slot of this
 * table).  Returns true if it is the first. */
bool ptd_counters_hit(struct ptd_counters *t, uint32_t slot);

/* Build hot traces (decode/traces.h) from the executions this table
 * counts, heads hot at @threshold (0: the default), unless it already
 * does.  Returns 0, -EINVAL (a threshold out of range), -ENOMEM. */
int ptd_counters_enable_traces(struct ptd_counters *t, uint32_t threshold);
/* The table's trace builder, or NULL. */
struct ptd_traces *ptd_counters_traces(const struct ptd_counters *t);

/* Take insn record @r (others are ignored): count it (through its cslot,
 * else looked up); if it is its instruction's first execution and @want
 * has PTD_REC_FIRST_EXEC, give a first_exec record to @fn; with
 * PTD_REC_TRACE and traces enabled, feed it to the trace builder, whose
 * records (after the first_exec) go to @fn too.  A PTD_REC_IMAGE record
 * goes to the trace builder only (code gone: traces withdrawn).  Returns
 * 0 or @fn's non-zero value. */
int ptd_counters_feed(struct ptd_counters *t, const struct ptd_record *r,
		      unsigned want, ptd_counters_fn fn, void *ctx);

/* The count of the instruction @in describes (0: never executed). */
uint64_t ptd_counters_get(const struct ptd_counters *t,
			  const struct ptd_rec_insn *in);

/* Executions counted, distinct instructions, and executions not counted
 * (the table was full). */
void ptd_counters_totals(const struct ptd_counters *t, uint64_t *ret_execs,
			 uint64_t *ret_distinct, uint64_t *ret_uncounted);

/* The distinct instructions of the table, in the order they were first
 * seen: @i below ptd_counters_nentries.  Returns the instruction (module
 * and sym copies owned by the table; json_body, flags and cslot cleared)
 * and its count in *@ret_count (may be NULL), or NULL past the end.  For
 * views that walk every instruction (views/coverage.h). */
size_t ptd_counters_nentries(const struct ptd_counters *t);
const struct ptd_rec_insn *ptd_counters_entry(const struct ptd_counters *t,
					      size_t i, uint64_t *ret_count);

/*
 * The counts as they are now, as counters records to @fn: one "total",
 * then the @top most executed instructions, blocks and functions (each
 * kind ranked from 1, most executed first, ties by address / name; @top
 * 0: all), with @pid and @tid (0: the counts are of more than one).
 * May be called at any time; the table is unchanged.  Returns 0,
 * -ENOMEM, or @fn's non-zero value.
 */
int ptd_counters_emit(const struct ptd_counters *t, uint32_t top, pid_t pid,
		      pid_t tid, ptd_counters_fn fn, void *ctx);

#endif
