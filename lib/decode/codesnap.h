/* SPDX-License-Identifier: MIT */
/*
 * Non-file code that arrives in the sideband as ptd CODE chunks
 * (perf/sideband.h, PTD_PERF_RECORD_CODE: the software source's snapshot
 * of a vDSO or JIT region as first executed), reassembled into a snapshot
 * file and the timeline event that maps it.  One reassembler per buffer
 * reader (decode/feed.c per thread, decode/cpufeed.c per process).
 *
 * Chunks come in order, each right after the last, all naming the same
 * region; a chunk that does not (or a region of 0 or more than
 * PTD_CODESNAP_MAX bytes) is malformed: it is counted and the snapshot
 * being built is dropped.
 */
#ifndef PTD_DECODE_CODESNAP_H
#define PTD_DECODE_CODESNAP_H

#include <stdatomic.h>
#include <stdint.h>

#include "aspace/timeline.h"
#include "common/diag.h"
#include "perf/sideband.h"

#define PTD_CODESNAP_MAX (256ull << 20)	/* bytes of one snapshot */

struct ptd_codesnap {
	uint8_t *code;		/* NULL: none being built */
	uint64_t vaddr, len, have;
	char name[256];
	char file[64];		/* the last snapshot written */
};

/* Add chunk @c.  When it completes the region, the bytes are written to
 * @snapdir/snap-SEQ.bin (SEQ from *@snapseq) and *@ev is set to the
 * PTD_TL_SNAPSHOT event mapping them (its strings live in @cs until the
 * next call); returns 1.  Returns 0 while more is to come, or for a
 * malformed chunk (*@bad incremented).  Returns -ENOMEM, or the write's
 * error with the file named in @diag. */
int ptd_codesnap_add(struct ptd_codesnap *cs, const struct ptd_perf_code *c,
		     const char *snapdir, atomic_uint *snapseq,
		     struct ptd_tl_event *ev, uint64_t *bad,
		     struct ptd_diag *diag);

/* Drop what is being built. */
void ptd_codesnap_fini(struct ptd_codesnap *cs);

#endif
