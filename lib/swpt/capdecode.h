/* SPDX-License-Identifier: MIT */
/*
 * Decoding a software-source capture, and proving it against its ground
 * truth.
 *
 * ptd_capture_decode_thread decodes one thread of a capture the way a live
 * session would: an image built from the timeline as it stood when the
 * thread started, changed as the decoder passes each event's position.
 * (Not to be confused with daemon/replay.h: a saved trace of any kind
 * decoded by ptd as a session.)
 *
 * ptd_capture_verify is the test oracle as a feature (`ptctl verify`): for
 * every thread it decodes on the instruction path and on the block path,
 * checks that the IP sequence of each equals the ground truth, and that both
 * paths give identical insn records, field for field.
 */
#ifndef PTD_SWPT_CAPDECODE_H
#define PTD_SWPT_CAPDECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aspace/iscache.h"
#include "common/diag.h"
#include "decode/decoder.h"
#include "swpt/capture.h"

/* One thread of a capture, ready to decode: its PT bytes, its image as it
 * stood when the thread started, and the cursor that moves the image along
 * the timeline. */
struct ptd_capture_stream {
	uint8_t *pt;
	size_t len;
	struct ptd_image *img;
	struct ptd_tl_cursor cursor;
	struct ptd_decode_thread_args args;	/* filled for ptd_decode_thread */
};

/* Open thread @idx of @c with sections in @ic.  Returns 0 or a negative
 * error (message in @diag); close with ptd_capture_stream_close either way. */
int ptd_capture_stream_open(const struct ptd_capture *c, size_t idx,
		    struct ptd_iscache *ic, struct ptd_capture_stream *rs,
		    struct ptd_diag *diag);
void ptd_capture_stream_close(struct ptd_capture_stream *rs);

/* Decode thread @idx of @c with @o, delivering records to @fn.  @ic is the
 * shared section cache (NULL: a private one), used under @lock where other
 * threads use it too (NULL: none do; decode/threadpar.h); @icache the insn
 * cache for the block path (NULL: a private one).  The PT bytes are read
 * from the capture.
 * The decoder's address filter is o->addr_filter, or if that is all zero
 * the capture's (c->addr_filter).
 * Returns what ptd_decode_thread returns, or a negative error reading the
 * capture or building the thread's first image (message in @diag). */
int ptd_capture_decode_thread(const struct ptd_capture *c, size_t idx,
		      const struct ptd_decode_opts *o, struct ptd_iscache *ic,
		      struct ptd_insncache *icache, pthread_mutex_t *lock,
		      ptd_record_fn fn, void *ctx,
		      struct ptd_decode_stats *stats, struct ptd_diag *diag);

struct ptd_verify_thread {
	pid_t tid;
	uint64_t truth;		/* IPs in the ground truth */
	uint64_t insn_path;	/* insn records from pt_insn_next */
	uint64_t block_path;	/* insn records from the block path */
	uint64_t errors;	/* error records (either path) */
	bool ok;
	/* first problem, if any:  "block path differs from insn path at
	 * record 1234: flags 0x4 vs 0x0" */
	char why[256];
};

struct ptd_verify_report {
	struct ptd_verify_thread *threads;
	size_t nthreads;
	bool ok;		/* every thread ok */
};

/* Verify every thread of @c.  Returns 0 when the verification ran (see
 * report->ok for its verdict), or a negative error if it could not run. */
int ptd_capture_verify(const struct ptd_capture *c,
		      struct ptd_verify_report *report, struct ptd_diag *diag);
void ptd_verify_report_fini(struct ptd_verify_report *r);

#endif
