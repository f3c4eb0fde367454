/* SPDX-License-Identifier: MIT */
/*
 * The views' common ground: each thread's stack of functions, kept from
 * its insn and call records (decode/calls.h) in delivery order, turned
 * into nested slices (a callback opens and closes them) and into exact
 * instruction counts by stack (a tree of stacks; views/flamegraph.h draws
 * it, views/perfetto.h writes the slices).
 *
 * A thread's stack is a base frame (the code where its trace began, depth
 * 0) and one frame per call on the call records' stack.  A frame is named
 * by the function running in it: the symbol of its latest instruction
 * (the name without +0xOFF), or, where an instruction has no symbol, the
 * hex address where unnamed code was entered in that frame.  So a frame
 * below the top is named by the function of its call site, as an
 * unwinder would name it; a tail call, a jump into another function and a
 * return landing at depth 0 rename the top frame: its slice closes and one
 * named by the new function opens at the same depth.  Each instruction is
 * counted once, in the stack of names it ran in.
 *
 * call pushes a frame, return pops its "frames", stack_reset and every
 * error record (a perf.data trace cut at a loss starts its next piece
 * from an empty stack) close every frame; the records' depths are
 * followed, so the slices nest whatever the records say: a call record
 * whose depth is not one above the stack pops or pushes frames (unnamed
 * ones, "[unknown]") first.  Frames deeper than PTD_STACKS_MAX_DEPTH are
 * not kept: their instructions count in the deepest kept frame, named by
 * it.  At a thread's end (ptd_stacks_thread_end, ptd_stacks_finish) every
 * frame closes.
 *
 * Time (the slices' timestamps): unless set (ptd_stacks_set_clock), the
 * first insn record decides for the whole trace: perf time in ns where it has one (record.h has_time), else
 * the TSC, else the thread's instruction count (each thread from 0).  A
 * boundary is stamped with the time of the latest instruction (in
 * instruction counts: the number of instructions before it, so a slice
 * lasts as many units as instructions ran in it and below it); records
 * without the chosen clock keep the thread's last time; a thread's times
 * never decrease.
 */
#ifndef PTD_VIEWS_STACKS_H
#define PTD_VIEWS_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "record/record.h"

#define PTD_STACKS_MAX_DEPTH 4096u
/* Longer function names are cut to this many bytes. */
#define PTD_STACKS_MAX_NAME 1024u

enum ptd_stacks_clock {
	PTD_STACKS_CLOCK_NONE,	/* no insn record yet */
	PTD_STACKS_CLOCK_TIME,	/* perf time, ns */
	PTD_STACKS_CLOCK_TSC,	/* TSC ticks */
	PTD_STACKS_CLOCK_INSNS,	/* instructions since the thread's start */
};

/* "time", "tsc", "insns" ("none"). */
const char *ptd_stacks_clock_name(enum ptd_stacks_clock c);

/* What the slices do; any member may be NULL.  A non-zero return stops
 * the feed and is returned by it. */
struct ptd_stacks_ops {
	/* A thread's first record. */
	int (*thread)(void *ctx, pid_t pid, pid_t tid);
	/* A slice opens at @depth (0: the base frame) named @name. */
	int (*open)(void *ctx, pid_t pid, pid_t tid, uint32_t depth,
		    const char *name, uint64_t ts);
	/* The slice at @depth closes (always the deepest open one). */
	int (*close)(void *ctx, pid_t pid, pid_t tid, uint32_t depth,
		     uint64_t ts);
	/* The stack was reset (stack_reset or an error record), after its
	 * slices closed: @reason as the record says. */
	int (*reset)(void *ctx, pid_t pid, pid_t tid, const char *reason,
		     uint64_t ts);
	void *ctx;
};

struct ptd_stacks;

/* A node of the tree of stacks: one per distinct stack of names (the path
 * from the root "all" to it).  @self: instructions that ran with exactly
 * this stack; @total: in it and every stack above it (after
 * ptd_stacks_finish).  Children are listed by name (strcmp order). */
struct ptd_stack_node {
	const char *name;
	uint64_t self, total;
	uint32_t parent;	/* index; the root's is itself (0) */
	uint32_t child;		/* first child, 0: none */
	uint32_t next;		/* next sibling, 0: none */
	uint32_t depth;		/* root 0, a base frame 1 */
};

/* Allocate into *@ret.  @ops: copied; NULL: no slices (counts only).
 * Returns 0 or -ENOMEM. */
int ptd_stacks_new(const struct ptd_stacks_ops *ops, struct ptd_stacks **ret);
void ptd_stacks_free(struct ptd_stacks *s);

/* Take the next record (ptd_record_fn; any kind: insn, call and error
 * records are used, the others ignored).  Returns 0, -ENOMEM, or an op's
 * non-zero value. */
int ptd_stacks_feed(void *s, const struct ptd_record *r);

/* Thread @tid's trace ended: close its frames (its next record starts a
 * new base).  Returns 0 or an op's value. */
int ptd_stacks_thread_end(struct ptd_stacks *s, pid_t tid);

/* Every thread ends; the tree's totals and child lists are made.  Call
 * once, after the last record. */
int ptd_stacks_finish(struct ptd_stacks *s);

/* Use @c for the time axis instead of letting the first insn record
 * decide (before the first record; PTD_STACKS_CLOCK_NONE: decide). */
void ptd_stacks_set_clock(struct ptd_stacks *s, enum ptd_stacks_clock c);
enum ptd_stacks_clock ptd_stacks_clock(const struct ptd_stacks *s);
/* Instructions fed, stacks reset (stack_reset and error records). */
uint64_t ptd_stacks_insns(const struct ptd_stacks *s);
uint64_t ptd_stacks_resets(const struct ptd_stacks *s);

/* The tree after ptd_stacks_finish: node 0 is the root ("all"); @i below
 * ptd_stacks_nnodes. */
size_t ptd_stacks_nnodes(const struct ptd_stacks *s);
const struct ptd_stack_node *ptd_stacks_node(const struct ptd_stacks *s,
					     uint32_t i);

#endif
