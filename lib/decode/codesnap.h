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

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "aspace/timeline.h"
#include "common/diag.h"
#include "perf/sideband.h"

#define PTD_CODESNAP_MAX (256ull << 20)	/* bytes of one snapshot */

/* A session's snapshot files, shared by all its readers: written into
 * @dir (which must exist) as snap-N.bin, N counted from 0 -- and each
 * content once: bytes equal to a file's already written are given that
 * file (the software source gives every new thread of a process the same
 * vDSO; a file per thread would fill the directory as threads come and
 * go).  Every call is thread-safe. */
struct ptd_codesnap_files {
	const char *dir;		/* not owned */
	pthread_mutex_t lock;
	unsigned next;			/* the next N */
	struct ptd_codesnap_file *v;	/* written: length, hash, N */
	size_t n, cap;
	uint64_t shared;		/* puts given an existing file */
};

void ptd_codesnap_files_init(struct ptd_codesnap_files *f, const char *dir);
void ptd_codesnap_files_fini(struct ptd_codesnap_files *f);

/* The file holding @data (@len > 0 bytes): one written before with
 * exactly these bytes, or a new one; its name (relative to f->dir) in
 * @file.  Returns 0, -ENOMEM, or the write's error with the path in
 * @diag. */
int ptd_codesnap_files_put(struct ptd_codesnap_files *f, const uint8_t *data,
			   size_t len, char file[64], struct ptd_diag *diag);

struct ptd_codesnap {
	uint8_t *code;		/* NULL: none being built */
	uint64_t vaddr, len, have;
	char name[256];
	char file[64];		/* the last snapshot written */
};

/* Add chunk @c.  When it completes the region, the bytes go to a file of
 * @files (ptd_codesnap_files_put) and *@ev is set to the PTD_TL_SNAPSHOT
 * event mapping them (its strings live in @cs until the next call);
 * returns 1.  Returns 0 while more is to come, or for a malformed chunk
 * (*@bad incremented).  Returns -ENOMEM, or the write's error with the
 * file named in @diag. */
int ptd_codesnap_add(struct ptd_codesnap *cs, const struct ptd_perf_code *c,
		     struct ptd_codesnap_files *files,
		     struct ptd_tl_event *ev, uint64_t *bad,
		     struct ptd_diag *diag);

/* Drop what is being built. */
void ptd_codesnap_fini(struct ptd_codesnap *cs);

#endif
