/* SPDX-License-Identifier: MIT */
/*
 * Records compared field for field (record/diff.c).
 */
#ifndef PTD_RECORD_DIFF_H
#define PTD_RECORD_DIFF_H

#include "record/record.h"

/* Compare two records over every field (module names by content; event
 * variants through their JSON form).  Returns the name of the first field
 * that differs ("u.insn.flags", ...) or NULL if they are equal.  With
 * PTD_DIFF_IGNORE_TIME, has_tsc/tsc and the times derived from them
 * (has_time/time, has_wall/wall) are not compared (the block path times a
 * whole block, the insn path each instruction). */
#define PTD_DIFF_IGNORE_TIME 0x1u
const char *ptd_record_diff(const struct ptd_record *a,
			    const struct ptd_record *b, unsigned flags);

#endif
