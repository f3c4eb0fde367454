/* SPDX-License-Identifier: MIT */
/*
 * Fan-out: a session's records to its subscribers' bounded queues.
 *
 * Two sides, two threads:
 *  - the session's decode thread calls ptd_fanout_record for every record
 *    (or ptd_fanout_records for a run of them: a replay's, decoder.h's
 *    opts.batch) and ptd_fanout_end once at the end.  These never block on a client
 *    (a paced producer waits before, in ptd_fanout_wait_room): each
 *    record is matched against every subscriber's filter, rendered to JSON
 *    once per distinct field set (filter.h, spec.fields) among those that
 *    want it -- not once per subscriber -- and appended to each matching
 *    subscriber's in-memory queue.  A record that does not fit in a full queue is
 *    dropped and counted; the subscriber gets a `lost` record with the
 *    counts before the next record it does get (and before `bye`).
 *  - the control loop subscribes/unsubscribes clients and writes the queues
 *    out (ptd_subscriber_peek / ptd_subscriber_consume).
 *
 * One mutex per fan-out guards the subscriber list and the queues.  The
 * decode thread matches and renders without it, against its own roster of
 * the subscribers (refreshed when the list changes; a subscriber that
 * joins while a record is being rendered starts with the next one), and
 * stages each rendered line (or binary record) per subscriber, also
 * without it: the staged records are queued a batch at a time, under one
 * lock (32 KiB of them, or before anything else is queued: a line, the
 * end, a flush, a wait, a roster change), as if one by one -- matched,
 * then sent or lost, in their order.  The loop holds it while it swaps a
 * queue out (O(1)) or counts written bytes, and writes the bytes it took
 * without it.
 *
 * Each subscriber has two buffers: the queue the decode thread appends to,
 * and the one the loop is writing from; they are swapped when the loop has
 * written everything it took.  The queue limit (queue_size) counts the
 * bytes of both that are not yet written, so a subscriber holds at most
 * queue_size bytes of records (plus one lost and one bye line), and at most
 * two buffers of that capacity.
 *
 * A producer with no live source to protect (a replay, a snapshot's
 * decode) may ask for lossless delivery instead -- it is paced: before
 * each record it waits in ptd_fanout_wait_room until every subscriber has
 * room.  The wait is woken, never polled: by the loop when it takes bytes
 * from a queue (consume), when a subscriber leaves, and by
 * ptd_fanout_cancel_waits.  A subscriber that takes nothing for the
 * stall limit while it holds the producer back is no longer waited for:
 * PTD_STALL_DROP (replays) drops its records, counted, until it takes
 * bytes again; PTD_STALL_CUT (snapshots) cuts it off: its records are
 * counted lost until ptd_fanout_cut_end ends its stream with a lost
 * record and a bye of reason "stalled", while the others go on.
 *
 * Binary subscribers (filter.h, spec.binary): insn records of a
 * fixed-width field set are encoded once per field set, and staged as
 * the JSON lines are.  A paced producer's wait takes no lock while the
 * room it saw last, less what it queued and staged since, still covers
 * it.
 *
 * Runs: consecutive fixed-width records, and a JSON subscriber's
 * consecutive insn lines, are one stage entry each, queued with one copy
 * where all fit (else one by one, as they would have been).  Where every
 * subscriber takes its records by kind and insn records in a fixed width
 * of some bytes, ptd_fanout_records fans a run of insn records out
 * whole: encoded once per field set, staged once per subscriber.  Where
 * every subscriber takes its records by kind and insn records as JSON
 * lines, a run of insn records is rendered line after line straight into
 * the stage of each field set's first subscriber, and copied once to
 * that set's others (ptd_fanout_run_records counts the records of runs).
 *
 * Counters: every record that passes a subscriber's filter is `matched`
 * and then either `sent` (queued, in stream order, for the socket) or
 * `lost` (dropped, reported by a lost record): sent + lost == matched at
 * all times.
 */
#ifndef PTD_DAEMON_FANOUT_H
#define PTD_DAEMON_FANOUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/filter.h"
#include "daemon/session.h"
#include "record/record.h"

/* The stream protocol version in hello records. */
#define PTD_STREAM_VERSION 1

struct ptd_fanout;
struct ptd_subscriber;

/* Called (from the decode thread, without the fan-out lock) when a queue
 * that the loop had emptied gets data again, and after the end.  It must
 * not call back into the fan-out (write an eventfd). */
typedef void (*ptd_fanout_wake_fn)(void *ctx);

/* A fan-out for session @session_id (named in hello and bye records) of
 * process @pid, into *@ret.  Returns 0, or -ENOMEM (*@ret NULL). */
int ptd_fanout_new(uint64_t session_id, pid_t pid, ptd_fanout_wake_fn wake,
		   void *wake_ctx, struct ptd_fanout **ret);
/* Free @f and the subscribers still in it.  The decode thread must be done
 * with it (the session's `ended` was called or the session never started).
 * NULL is fine. */
void ptd_fanout_free(struct ptd_fanout *f);

/* The records a subscriber's decode thread holds before it queues them
 * under the lock a batch at a time (fanout.c: its stage). */
#define PTD_FANOUT_STAGE_BYTES (32u << 10)

/* The memory one subscriber with a queue limit of @queue_size may hold:
 * its two buffers and its stage (what ptd charges to its owner). */
static inline uint64_t ptd_fanout_sub_bytes(size_t queue_size)
{
	return 2 * (uint64_t)queue_size + PTD_FANOUT_STAGE_BYTES;
}

/* Add a subscriber with filter @filter (copied) and a queue limit of
 * @queue_size bytes; its stream starts with a hello record (and holds the
 * bye at once if the session has already ended).  With
 * filter->spec.binary its stream is binary frames (record/binframe.h):
 * insn records of a fixed-width field set are encoded once per fan-out
 * (as a field set's JSON line is rendered once) and appended to the open
 * records frame of its queue; every other line (hello, event and error
 * records, lost, markers) goes in a json frame, and bye in the end frame.
 * Returns 0 with *ret_sub, or:
 *  -PTD_ELIMIT  @f already has @max_subscribers subscribers
 *  -EINVAL      @queue_size is smaller than PTD_JSON_MAX_RECORD
 *  -ENOMEM */
int ptd_fanout_subscribe(struct ptd_fanout *f, const struct ptd_filter *filter,
			 size_t queue_size, unsigned max_subscribers,
			 struct ptd_subscriber **ret_sub);
/* The same, for the stream of watch rule @rule (> 0), which merges the
 * sessions the rule starts: the subscriber's hello is a session_start
 * record, its bye a session_end (same keys as bye), and its records and
 * lost records carry ,"session":N right after their type (and insn and
 * block records their pid, whatever fields it chose). */
int ptd_fanout_subscribe_tagged(struct ptd_fanout *f,
				const struct ptd_filter *filter,
				size_t queue_size, unsigned max_subscribers,
				uint64_t rule, struct ptd_subscriber **ret_sub);
/* Remove @s from @f and free it (queued data is discarded).  NULL @s is
 * fine. */
void ptd_fanout_unsubscribe(struct ptd_fanout *f, struct ptd_subscriber *s);

/* Decode thread: one record; one end (after it records are ignored). */
void ptd_fanout_record(struct ptd_fanout *f, const struct ptd_record *r);
/* Decode thread, before a counters snapshot: mark the subscribers that
 * take it -- every one asking for counters records when @final (the
 * session's last snapshot), else those whose every_ms has passed since
 * their last one (their next one is then due every_ms from @now_ms; a
 * subscriber's first period starts when it is first seen here) -- and
 * give the largest top among them in *@ret_top.  Returns whether any
 * takes it; the counters records fanned out until the next call go to
 * those only, each to its top. */
bool ptd_fanout_counters_due(struct ptd_fanout *f, uint64_t now_ms,
			     bool final, uint32_t *ret_top);
/* Records rendered so far: one per record and distinct field set among the
 * subscribers that match it, however many subscribers share the set.  Any
 * thread. */
uint64_t ptd_fanout_renders(struct ptd_fanout *f);
/* Records fanned out so far in runs (ptd_fanout_records, ptd_fanout_ips:
 * encoded, or rendered straight into the subscribers' stages, a run at a
 * time), not one by one.  Any thread. */
uint64_t ptd_fanout_run_records(struct ptd_fanout *f);
void ptd_fanout_end(struct ptd_fanout *f, const struct ptd_session_end *end);
/* Decode thread: a control line (@len bytes of one JSON object with its
 * '\n', e.g. a snapshot marker) for every subscriber, whatever its
 * filter, in stream order (a pending lost record goes first).  Like bye it
 * is small, comes rarely and is not counted against the queue limit nor in
 * matched/sent/lost.  Ignored after the end. */
void ptd_fanout_line(struct ptd_fanout *f, const char *line, size_t len);

/* Loop: forget that a wake-up was sent, before draining the queues; a
 * record appended after this wakes the loop again. */
void ptd_fanout_clear_wake(struct ptd_fanout *f);

/* The producer's decode round is over: queue what ptd_fanout_record
 * staged and wake the loop for the records queued since the last wake-up
 * (it wakes it itself only once a queue holds 256 KiB, or half its size).
 * Every producer calls it before it waits for more trace;
 * ptd_fanout_wait_room pays the wake-up before it waits, ptd_fanout_end
 * and ptd_fanout_line with theirs. */
void ptd_fanout_flush(struct ptd_fanout *f);
unsigned ptd_fanout_count(struct ptd_fanout *f);
bool ptd_fanout_ended(struct ptd_fanout *f);

enum ptd_sub_state {
	PTD_SUB_IDLE,	/* nothing to write now */
	PTD_SUB_DATA,	/* *ret_data, *ret_len hold the next bytes */
	PTD_SUB_DONE,	/* the bye record has been written: close */
};

/* Loop: the next bytes to write to the subscriber's socket.  They stay
 * valid and unchanged until ptd_subscriber_consume or unsubscribe. */
enum ptd_sub_state ptd_subscriber_peek(struct ptd_subscriber *s,
				       const char **ret_data,
				       size_t *ret_len);
/* Loop: @n of the bytes peek gave have been written. */
void ptd_subscriber_consume(struct ptd_subscriber *s, size_t n);

/* Decode thread: was there a subscriber once and none now?  (Lock-free;
 * cheap enough for every record.) */
bool ptd_fanout_abandoned(struct ptd_fanout *f);

/* Where the kinds (PTD_REC_BIT()s) any subscriber of @f has asked for,
 * left or not, are kept, for as long as @f: a producer that can spare
 * work nobody wants (a replay's call stack) looks there, as often as a
 * record.  Any thread, lock-free (relaxed loads). */
const atomic_uint *ptd_fanout_kinds_seen(struct ptd_fanout *f);

/* What a paced producer's wait does with a subscriber that stalls. */
enum ptd_stall {
	PTD_STALL_DROP,		/* drop its records until it reads again */
	PTD_STALL_CUT,		/* cut it off (ptd_fanout_cut_end) */
};

enum ptd_room {
	PTD_ROOM_OK,		/* every subscriber has room */
	PTD_ROOM_CANCELLED,	/* ptd_fanout_cancel_waits was called */
	PTD_ROOM_ABANDONED,	/* there were subscribers; the last has left */
};

/* Decode thread, lossless: wait until every subscriber's queue has room
 * for @need more bytes (@need <= the queue sizes), sleeping until the loop
 * takes bytes from a queue, a subscriber leaves or the waits are
 * cancelled.  A subscriber that takes no byte for @stall_ms while it holds
 * the producer back is no longer waited for: with PTD_STALL_DROP it is
 * marked stalled (its records are dropped and counted as lost) until it
 * takes bytes again; with PTD_STALL_CUT it is cut off (every later record
 * is counted lost for it; ptd_fanout_cut_end ends its stream).  The wait
 * looks at the subscribers there are when it ends: one that joins after
 * starts with its hello only. */
enum ptd_room ptd_fanout_wait_room(struct ptd_fanout *f, size_t need,
				   unsigned stall_ms, enum ptd_stall stall);

/* How a paced producer waits before each record (ptd_fanout_wait_room's
 * arguments). */
struct ptd_fanout_pace {
	size_t need;
	unsigned stall_ms;
	enum ptd_stall stall;
};

/* Decode thread: ptd_fanout_record for each of @recs in order, a run
 * handed over at once (what a record costs beside its matching and
 * rendering is paid once a run); with @pace, each waits for room first.
 * Returns how many were fanned out: @n, or, where a wait ended without
 * room (cancelled, abandoned), the records before it. */
size_t ptd_fanout_records(struct ptd_fanout *f, const struct ptd_record *recs,
			  size_t n, const struct ptd_fanout_pace *pace);
/*
 * Runs of addresses (decode/decoder.h, opts.ips).  Decode thread: can a
 * run of addresses stand for insn records now -- every subscriber takes
 * its records by kind and, if it takes insn records, as fixed-width
 * binary records of fields among PTD_BIN_IP_FIELDS (record/binframe.h)?
 * Brings the roster up to date first (a subscriber that came or left).
 * Addresses decided while it said so go to that roster, not synced again
 * (ptd_fanout_ips): a subscriber that joins meanwhile starts after them.
 */
bool ptd_fanout_ips_ready(struct ptd_fanout *f);
/* Decode thread: the instructions at @ips of thread @tid of process
 * @pid, fanned out as the insn records they stand for would be -- after
 * ptd_fanout_ips_ready said true, with no fan-out call between but other
 * ptd_fanout_ips calls.  @pace as in ptd_fanout_records.  Returns how
 * many were fanned out: @n, or fewer where a wait ended without room. */
size_t ptd_fanout_ips(struct ptd_fanout *f, pid_t pid, pid_t tid,
		      const uint64_t *ips, size_t n,
		      const struct ptd_fanout_pace *pace);
/* Decode thread: end the stream of every subscriber cut off by
 * PTD_STALL_CUT: its pending lost record, then a bye with reason
 * "stalled" (PTD_END_STALLED), its sent and lost counts and the message
 * @why.  Nothing more is queued for it; the loop closes it once the bye
 * is written.  Returns how many were ended. */
unsigned ptd_fanout_cut_end(struct ptd_fanout *f, const char *why);
/* Decode thread: wait (at most @timeout_ms) for a first subscriber; true
 * if there is one.  Woken by subscribe and ptd_fanout_cancel_waits. */
bool ptd_fanout_wait_subscriber(struct ptd_fanout *f, unsigned timeout_ms);
/* Any thread: end every wait_room and wait_subscriber now and later (the session is
 * stopping). */
void ptd_fanout_cancel_waits(struct ptd_fanout *f);

struct ptd_subscriber_stats {
	unsigned id;		/* 1, 2, ... within the session */
	unsigned kinds;		/* PTD_REC_BIT()s */
	uint32_t fields;	/* PTD_FIELD_BIT()s; 0: every field */
	bool binary;		/* binary frames (subscribe's "format") */
	bool packed;		/* ... "packed": with address frames */
	uint64_t matched;
	uint64_t sent;
	uint64_t lost;
	uint64_t lost_kind[PTD_REC_NTYPES];
	bool cut;		/* cut off by PTD_STALL_CUT */
	size_t queued;		/* bytes not yet written */
	size_t mem;		/* bytes allocated for its buffers */
};

void ptd_subscriber_get_stats(struct ptd_subscriber *s,
			      struct ptd_subscriber_stats *ret);
/* Stats of up to @max subscribers of @f, in subscription order; returns how
 * many were written.  Records the decode thread has staged are counted
 * once queued (ptd_fanout_flush). */
unsigned ptd_fanout_get_stats(struct ptd_fanout *f,
			      struct ptd_subscriber_stats *ret, unsigned max);

#endif
