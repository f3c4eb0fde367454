/* SPDX-License-Identifier: MIT */
/*
 * Feeding one perf buffer into one thread's stream decoder.
 *
 * A perf buffer of one traced thread (intel_pt in per-thread mode, or the
 * software source's, swpt/livesink.h) is drained with the shared reader
 * (perf/ring.h): AUX bytes are appended to the thread's ptd_stream;
 * sideband records become image changes at the stream position where they
 * appear (perf/sideband.h: MMAP2 of file code, COMM exec, ptd UNMAP, and
 * ptd CODE chunks reassembled into a snapshot file); losses the reader
 * reports become gaps in the stream (decoding resumes at the next PSB) and
 * are counted; PERF_RECORD_EXIT of the thread ends it.
 *
 * Time: the TSC -> perf time conversion of the buffer's header page
 * (time_zero/time_mult/time_shift when cap_user_time_zero is set: the
 * kernel's, or the software source's calibrated one) is given to the stream
 * (ptd_stream_set_clock) when the feed is made and at each drain, so its
 * records with a TSC carry perf time (and wall-clock time if the stream's
 * options have a wall-clock reference).  A page without one: TSC only.
 */
#ifndef PTD_DECODE_FEED_H
#define PTD_DECODE_FEED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "aspace/timeline.h"
#include "common/diag.h"
#include "decode/codesnap.h"
#include "decode/stream.h"
#include "perf/ring.h"

struct ptd_feed_stats {
	uint64_t records;	/* sideband records read */
	uint64_t aux_bytes;	/* trace bytes appended */
	uint64_t image_events;	/* image changes given to the stream */
	uint64_t lost_bytes;	/* trace bytes lost (exact counts) */
	uint64_t truncations;	/* AUX chunks cut short: an unknown
				 * amount lost after each (counted as 1
				 * byte in lost_bytes) */
	uint64_t lost_records;	/* sideband records lost */
	uint64_t bad_records;	/* malformed records skipped */
};

struct ptd_feed;

/* Feed @buf (not owned) of thread @tid into @stream (not owned).  Code
 * snapshots go to @snapfiles (not owned; shared by every feed of a
 * session, its directory the stream's dir).  @sample_type /
 * @sample_id_all: the sideband records' layout.
 * Returns 0 or -ENOMEM / -EINVAL. */
int ptd_feed_new(struct ptd_perf_buf *buf, pid_t tid,
		 struct ptd_stream *stream,
		 struct ptd_codesnap_files *snapfiles, uint64_t sample_type,
		 bool sample_id_all, struct ptd_feed **ret);
void ptd_feed_free(struct ptd_feed *f);

/* Per-thread intel_pt events see only their own thread's sideband, so a
 * session shares image changes between its threads' streams, and follows
 * new threads from FORK records.  NULL members keep the default (the
 * change goes to this feed's stream; task records only end the feed).
 *
 * @positions (with @image): each image change handed over carries, as
 * its position for the feed's thread (ptd_tl_event_pos), where in the
 * thread's trace it happened, at most: the buffer's aux_head as it was
 * before the drain before the one that read it (that drain's data_head
 * was read before the record was written, so the change came after the
 * trace published then).  For a snapshot-mode buffer, whose AUX area
 * announces no bytes (the kernel writes no PERF_RECORD_AUX for an
 * overwriting buffer) and is read only at snapshots: the trace before
 * that position needs the image from before the change. */
struct ptd_perf_event;
struct ptd_feed_hooks {
	int (*image)(void *ctx, pid_t tid, const struct ptd_tl_event *ev);
	int (*task)(void *ctx, const struct ptd_perf_event *e);
	void *ctx;
	bool positions;
};
void ptd_feed_set_hooks(struct ptd_feed *f, const struct ptd_feed_hooks *h);

/* Drain what the buffer holds into the stream (the caller then decodes).
 * Returns records read (>= 0), or a negative error with a message in
 * @diag (a snapshot file could not be written; the stream's own errors).
 * Malformed records are skipped and counted, not errors. */
int ptd_feed_drain(struct ptd_feed *f, struct ptd_diag *diag);

/* The thread's PERF_RECORD_EXIT was read: nothing more will come. */
bool ptd_feed_ended(const struct ptd_feed *f);

void ptd_feed_get_stats(const struct ptd_feed *f, struct ptd_feed_stats *ret);

#endif
