/* SPDX-License-Identifier: MIT */
/*
 * Slices (views/stacks.h) as the Chrome JSON trace-event format that
 * Perfetto's UI and chrome://tracing open (doc/views.md):
 *
 *   {"displayTimeUnit":"ns","traceEvents":[
 *   {"ph":"M","name":"process_name","pid":1,"tid":1,"args":{"name":"pid 1"}},
 *   {"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"tid 1"}},
 *   {"ph":"B","pid":1,"tid":1,"ts":0,"name":"_start"},
 *   {"ph":"E","pid":1,"tid":1,"ts":1830},
 *   {"ph":"i","s":"t","pid":1,"tid":1,"ts":1830,"name":"stack_reset",
 *    "args":{"reason":"decode"}},
 *   ...],
 *   "otherData":{"generator":"ptd","time_axis":"insns",...}}
 *
 * One event a line, each thread's B and E in nesting order.  "ts" is in
 * microseconds as the format has it: perf time (ns) / 1000 with three
 * decimals, or, for the other axes, one unit of the axis (a TSC tick, an
 * instruction) per microsecond; "otherData" says which.
 */
#ifndef PTD_VIEWS_PERFETTO_H
#define PTD_VIEWS_PERFETTO_H

#include <stdio.h>

#include "views/stacks.h"

struct ptd_perfetto;

/* A writer to @f (left open) into *@ret; its slice callbacks into @ops,
 * for ptd_stacks_new.  Writes the head at once.  Returns 0, -ENOMEM, or
 * -EIO when @f fails. */
int ptd_perfetto_new(FILE *f, struct ptd_stacks_ops *ops,
		     struct ptd_perfetto **ret);
/* The stacks it writes the slices of (for their clock); before the
 * first record. */
void ptd_perfetto_set_stacks(struct ptd_perfetto *p,
			     const struct ptd_stacks *s);
/* After ptd_stacks_finish: the end, with "otherData" (@input: the trace's
 * path, @source: its kind).  Returns 0, or -EIO if anything written to
 * the file failed. */
int ptd_perfetto_finish(struct ptd_perfetto *p, const char *input,
			const char *source);
void ptd_perfetto_free(struct ptd_perfetto *p);

#endif
