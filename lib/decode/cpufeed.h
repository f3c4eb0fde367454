/* SPDX-License-Identifier: MIT */
/*
 * Feeding per-CPU perf buffers into per-thread stream decoders.
 *
 * In per-CPU mode (perf's default: one intel_pt event per CPU with
 * inherit=1, or the software source's per-CPU mode, swpt/livesink.h) every
 * CPU's buffer interleaves the threads that ran there.  A cpufeed drains N
 * such buffers (the shared reader, perf/ring.h) in rounds, merges their
 * records across CPUs by time, and passes the merged sequence through the
 * splitter (perf/percpu.h), which routes AUX bytes, records and losses to
 * the thread they belong to.  Each thread's bytes go to its ptd_stream;
 * image changes (MMAP2 of file code, COMM exec, ptd UNMAP, ptd CODE chunks
 * reassembled into a snapshot file) are the process's: they are applied to
 * every live thread stream of the process at that point of the merged
 * sequence, and kept so that a thread seen later starts with the image as
 * it is (a COMM exec forgets what came before).  Losses become gaps in the
 * stream of the thread they belonged to (an error record, then decoding
 * resumes at the next PSB).  PERF_RECORD_EXIT of a thread ends its stream.
 *
 * ORDERING RULE (what is implemented):
 *  - An item is a record, the AUX bytes of a PERF_RECORD_AUX, or a loss
 *    the reader reported.  Its time is its record's sample time
 *    (sample_id_all, PERF_SAMPLE_TIME); an item without one (an AUX record
 *    without trailer, a loss) takes the time of the last timed record
 *    before it on its CPU; AUX bytes and the losses before an AUX record
 *    take that record's time.  Times never go back within a CPU (an earlier
 *    one is raised to the CPU's last): each CPU's order is kept as read.
 *  - Across CPUs items are merged by (time, CPU number, order read).
 *  - Round rule (perf's FINISHED_ROUND): after round k has read every
 *    buffer, items up to the largest time read by round k-1 are merged and
 *    applied; anything read later was written after that round's read of
 *    its buffer, hence after every item read by round k-1.  A final round
 *    applies everything.
 *  - So the merge is exact when every cross-CPU dependency has a timed
 *    record between its two sides: a migrating thread's bytes on the old
 *    CPU end before its SWITCH OUT there, its bytes on the new CPU follow
 *    a SWITCH IN (or a timed AUX record) there; an image change is ordered
 *    against a concurrent thread's bytes only by those bytes' AUX record
 *    time (hardware) or by the switch records the software source writes
 *    around every image change (swpt/livesink.h).
 *
 * Time: the TSC -> perf time conversion of CPU 0's header page (the
 * kernel's, or the software source's calibrated one; every CPU's page has
 * the same) is given to every stream (ptd_stream_set_clock) when it is
 * made and at each round, as decode/feed.h does.
 *
 * Threads: ops->thread_new is called once per thread of the process (from
 * the splitter's thread_seen) and gives the stream its records go to (or
 * none: that thread is ignored); the process's image so far is added to it
 * at once.  ops->thread_end is called after the thread's EXIT record; the
 * feed does not touch that stream again.  Streams are the caller's.
 *
 * Not thread-safe: one owner (the session's decode thread).
 */
#ifndef PTD_DECODE_CPUFEED_H
#define PTD_DECODE_CPUFEED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aspace/timeline.h"
#include "common/diag.h"
#include "decode/codesnap.h"
#include "decode/stream.h"
#include "perf/percpu.h"
#include "perf/ring.h"

/* Items waiting for the round rule, at most (bytes of copies): a buffer
 * whose records never get older than the watermark cannot grow the queue
 * without bound; past it, everything read is applied at once. */
#define PTD_CPUFEED_MAX_QUEUED (256u << 20)

struct ptd_cpufeed_ops {
	/* First sight of thread @tid of process @pid: set *ret_stream (not
	 * owned by the feed; NULL: ignore the thread) and return 0, or a
	 * negative error that aborts the drain. */
	int (*thread_new)(void *ctx, pid_t pid, pid_t tid,
			  struct ptd_stream **ret_stream);
	/* @tid's EXIT was applied: its stream is complete (may be NULL). */
	int (*thread_end)(void *ctx, pid_t tid);
	/* Observers (tests, statistics; may be NULL), called whether or not
	 * the thread has a stream: @len trace bytes of @tid about to be
	 * appended; an image change given to @tid when its stream held @at
	 * bytes (the replay for a new thread included, at 0). */
	void (*observe_bytes)(void *ctx, pid_t tid, const uint8_t *data,
			      size_t len);
	void (*observe_image)(void *ctx, pid_t tid, uint64_t at,
			      const struct ptd_tl_event *ev);
	void *ctx;
};

struct ptd_cpufeed_opts {
	unsigned ncpus;			/* 1..PTD_PERCPU_MAX_CPUS */
	struct ptd_perf_buf **bufs;	/* ncpus buffers, not owned; must
					 * outlive the feed */
	pid_t pid;			/* the process traced */
	uint64_t sample_type;		/* every buffer's record layout: */
	bool sample_id_all;		/* needs sample_id_all + TID (+TIME) */
	/* Code snapshots (ptd CODE) go to these files (not owned; their
	 * directory the streams' dir). */
	struct ptd_codesnap_files *snapfiles;
};

struct ptd_cpufeed_stats {
	uint64_t rounds;
	uint64_t records;	/* records read, all CPUs */
	uint64_t aux_bytes;	/* trace bytes given to streams */
	uint64_t image_events;	/* image changes of the process */
	uint64_t lost_bytes;	/* trace bytes lost (unknown counts as 1) */
	uint64_t losses;	/* loss reports given to streams */
	uint64_t threads;	/* thread_new calls */
	uint64_t threads_live;	/* of those, not ended (EXIT not read) */
	uint64_t bad_records;	/* malformed records / CODE chunks skipped */
	uint64_t queued;	/* bytes waiting for the round rule now */
	uint64_t queue_overflows;	/* PTD_CPUFEED_MAX_QUEUED reached */
	struct ptd_percpu_stats split;	/* the splitter's */
};

struct ptd_cpufeed;

/* Returns 0 and *ret, or -EINVAL (NULL argument, ncpus 0 or above
 * PTD_PERCPU_MAX_CPUS, a NULL buffer, pid <= 0, no sample_id_all or no
 * PERF_SAMPLE_TID in @o->sample_type, no thread_new), -ENOMEM. */
int ptd_cpufeed_new(const struct ptd_cpufeed_opts *o,
		    const struct ptd_cpufeed_ops *ops, struct ptd_cpufeed **ret);
/* NULL is fine. */
void ptd_cpufeed_free(struct ptd_cpufeed *f);

/* An image change known from outside the buffers (the image at attach,
 * read from /proc): applied to every live thread now and kept for later
 * ones.  Returns 0, or -EINVAL (NULL), -ENOMEM. */
int ptd_cpufeed_image(struct ptd_cpufeed *f, const struct ptd_tl_event *ev);

/* One round: read every buffer, apply what the round rule allows (with
 * @final: everything).  Returns 0, or a negative error with a message in
 * @diag (a stream refused bytes or an event, a snapshot file could not be
 * written, ops returned an error).  Malformed records are skipped and
 * counted, not errors. */
int ptd_cpufeed_round(struct ptd_cpufeed *f, bool final,
		      struct ptd_diag *diag);

void ptd_cpufeed_get_stats(const struct ptd_cpufeed *f,
			   struct ptd_cpufeed_stats *ret);

#endif
