/* SPDX-License-Identifier: MIT */
/*
 * Decoding one thread's PT stream while it is still growing.
 *
 * In a live session a thread's trace arrives in pieces (perf AUX buffers)
 * and its records must reach subscribers while the program runs.  libipt
 * decodes a fixed buffer and stops at the first instruction that needs a
 * packet not there yet, so each round re-decodes from an anchor:
 *
 *  - The anchor A is a PSB (or the start of the stream); `done` records of
 *    a decode starting at A have been delivered.  A round builds the image
 *    as it stood at A, decodes [A, end) in "more may follow" mode
 *    (decoder.h, args.more: nothing whose content later trace could change
 *    is delivered), skips the first `done` records and delivers the rest.
 *  - Then the anchor moves to P, one of the last PSBs after A whose PSB+
 *    is complete and has a FUP (tracing on: no state from before the PSB
 *    matters): [P, end) is decoded the same way and its records counted.
 *    Both decodes stop at the same place, the end of the trace (the
 *    anchor does not move while either is held back at an error whose
 *    resync point has not arrived: it stopped before the end, and code
 *    that repeats can make its last records look like those of a decode
 *    in another state); when their last 32 records agree they are in the
 *    same state, so A = P, done = that count, and the bytes before P are
 *    dropped.  Otherwise A stays (exact, slower).  With
 *    opts.check_anchor every record after the first instruction/block of
 *    the decode at P is compared (tests, debugging).
 *  - Known limit: a corrupt byte after P can send a decode through P down
 *    a wrong path that pops a return-stack entry pushed before P (libipt
 *    takes a TNT bit at a RET as a compressed return, whatever the trace
 *    was recorded with); a decode from P then differs from it after that
 *    error.  Intact trace is unaffected: returns are compressed only
 *    against calls since the last PSB.
 *  - A final round decodes [A, end) with end-of-stream behaviour.
 *
 * The records are exactly those of one decode of the whole stream, in the
 * same order, with stream offsets (event.offset, error.offset) counted from
 * the thread's first appended byte.  A loss (ptd_stream_lost) ends a
 * segment: what is before is decoded as a whole stream, an error record
 * (context "lost") says how many bytes were lost where, and decoding resumes
 * at the next PSB after the gap.
 *
 * Thread safety: none; one owner (ptd_stream_decode_locked: the section
 * cache shared by the streams of threads decoded at once).
 */
#ifndef PTD_DECODE_STREAM_H
#define PTD_DECODE_STREAM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aspace/iscache.h"
#include "aspace/timeline.h"
#include "decode/decoder.h"
#include "decode/insncache.h"

/* Default for ptd_stream_opts.max_buffered. */
#define PTD_STREAM_DEFAULT_MAX_BUFFERED (64u << 20)
/* Losses or overflows waiting for a decode round, at most. */
#define PTD_STREAM_MAX_SEGMENTS 64u

struct ptd_stream;

struct ptd_stream_opts {
	struct ptd_decode_opts decode;
	pid_t pid, tid;
	struct ptd_iscache *iscache;	/* must outlive the stream */
	struct ptd_insncache *icache;	/* block path; shared, may be NULL */
	/* Snapshot files of events are relative to it (copied; NULL: the
	 * current directory). */
	const char *dir;
	/* Trace bytes kept past the anchor; an append beyond it ends the
	 * segment with an error record (code -PTD_ELIMIT, context
	 * "overflow") and decoding resumes at the next PSB.  0: the
	 * default. */
	size_t max_buffered;
	/* Test/debug: compare the records of the decode at a new anchor with
	 * the tail of the decode at the old one before moving; a mismatch
	 * keeps the anchor and is counted (stats.anchor_mismatches). */
	bool check_anchor;
};

struct ptd_stream_stats {
	uint64_t appended;	/* trace bytes appended */
	uint64_t lost;		/* trace bytes reported lost */
	uint64_t decoded_to;	/* stream end at the last round */
	uint64_t anchor;	/* anchor of the open segment */
	uint64_t buffered;	/* trace bytes held in memory */
	uint64_t delivered;	/* records delivered */
	uint64_t rounds;	/* decode rounds (one per segment and call) */
	uint64_t decoded_bytes;	/* bytes handed to the decoder, all decodes */
	uint64_t redecoded;	/* of those, bytes decoded before: the cost */
	uint64_t anchor_moves;
	/* Rounds whose decode released fewer records than were delivered
	 * already (on the block path, libipt's block cache may join the
	 * last blocks of an earlier round into the one held back now). */
	uint64_t short_rounds;
	uint64_t anchor_mismatches;	/* check_anchor found a difference */
	uint64_t overflows;	/* segments ended by max_buffered */
	uint64_t segments;	/* segments started (1 + losses + overflows) */
	/* decode.jobs > 1, a decode not waiting for more trace (the last):
	 * ptd_decode_stats.parts and serial_parts, summed */
	uint64_t parts, serial_parts;
	const char *serial_why;	/* the first serial_why (static) */
};

/* Start a stream for thread @o->tid.  The options are copied (dir too).
 * Returns 0 and *ret, or -EINVAL (NULL @o/@ret/@o->iscache, tid <= 0, bad
 * decode options), -ENOMEM. */
int ptd_stream_new(const struct ptd_stream_opts *o, struct ptd_stream **ret);

/* Free; accepts NULL. */
void ptd_stream_free(struct ptd_stream *s);

/* Append @len trace bytes at the end of the stream (copied).
 * Returns 0, or -EINVAL (NULL @s, NULL @data with @len, the stream was
 * decoded final), -PTD_ELIMIT (too many segments wait for a decode round:
 * PTD_STREAM_MAX_SEGMENTS), -ENOMEM. */
int ptd_stream_append(struct ptd_stream *s, const uint8_t *data, size_t len);

/* An image change at the current end of the stream (the bytes appended so
 * far); @ev->pos is ignored, the rest is copied.  Snapshot files are read
 * when a decode applies the event.
 * Returns 0, or -EINVAL (NULL argument, decoded final), -ENOMEM. */
int ptd_stream_add_event(struct ptd_stream *s, const struct ptd_tl_event *ev);

/* @bytes trace bytes were lost at the current end: the next bytes start a
 * new segment, decoded from its first PSB.  The next round decodes what is
 * before as a whole stream and then delivers an error record (code
 * -PTD_ETRUNC, context "lost", offset = the current end, skipped = @bytes).
 * Stream offsets count appended bytes only.
 * Returns 0, or -EINVAL (NULL @s, @bytes 0, decoded final), -PTD_ELIMIT
 * (PTD_STREAM_MAX_SEGMENTS segments wait), -ENOMEM. */
int ptd_stream_lost(struct ptd_stream *s, uint64_t bytes);

/* One round: deliver to @fn every record that is now certain; with @final
 * (the stream has ended) everything.  After a final round the stream takes
 * no more input.  @fn returns 0 to go on; non-zero stops the round: the
 * records @fn was given count as delivered (the next round goes on after
 * them) and its value is returned (-ECANCELED for a positive one).
 * With PTD_REC_CALL in the options' want, the thread's call stack
 * (decode/calls.h) is kept across rounds from the records delivered: its
 * decodes make insn and event records, which reach @fn only if wanted.
 * With PTD_REC_FIRST_EXEC / PTD_REC_COUNTERS, the records delivered are
 * counted across rounds (decode/counters.h) into the options'
 * decode.counters, or a table of the stream's own whose counters records
 * (decode.counters_top of each kind) follow the final round's records;
 * each delivered instruction is looked up in the table (the stream's
 * decodes resolve no slots).  With PTD_REC_TRACE, the table's hot traces
 * (decode/traces.h, decode.trace_threshold) are built across rounds the
 * same way.
 * Returns the number of records delivered (capped at INT_MAX; with call
 * records, the decoded records counted, wanted or not), the stopping
 * value of @fn, or -EINVAL (NULL @s or @fn), -ENOMEM, or another negative
 * error from the decoder. */
int ptd_stream_decode(struct ptd_stream *s, bool final, ptd_record_fn fn,
		      void *ctx);

/* ptd_stream_decode for streams whose section cache (opts.iscache) is
 * shared with decodes on other threads (decode/threadpar.h): everything
 * the round does to it -- images made, changed and freed, the decodes
 * themselves (ptd_decode_thread_args.lock) -- holds @lock (NULL: as
 * ptd_stream_decode).  The stream itself still has one owner at a time;
 * opts.icache must then be NULL or the stream's alone (the decoders make
 * their own). */
int ptd_stream_decode_locked(struct ptd_stream *s, bool final,
			     pthread_mutex_t *lock, ptd_record_fn fn,
			     void *ctx);

/* The table the stream counts into (first_exec or counters asked for),
 * to take the counts at any time (ptd_counters_emit); NULL: none. */
struct ptd_counters;
struct ptd_counters *ptd_stream_counters(const struct ptd_stream *s);

/* The clock for the times on records (decoder.h has_clock/has_wallref):
 * @clock replaces the options' clock (NULL: none, records carry the TSC
 * only); @wallref, when not NULL, replaces their wall-clock reference.
 * Records delivered from then on use them; set it before the first decode
 * (ptd_feed_new does, from the buffer's header page).
 * Returns 0, or -EINVAL (NULL @s; @clock with time_mult 0 or
 * time_shift >= 32). */
int ptd_stream_set_clock(struct ptd_stream *s,
			 const struct ptd_perf_clock *clock,
			 const struct ptd_perf_wallref *wallref);

/* Copy the counters into *ret. */
void ptd_stream_get_stats(const struct ptd_stream *s,
			  struct ptd_stream_stats *ret);

#endif
