/* SPDX-License-Identifier: MIT */
/*
 * A replay: a saved trace (anything ptd_input_decode reads) decoded on a
 * thread of its own and delivered like a live session's records -- through
 * a struct ptd_session_sink into the session's fan-out, so subscribers get
 * hello, records, lost and bye exactly as from a live session.
 *
 * Files are read with the CLIENT's permissions, never the daemon's: the
 * replay thread, before it opens anything, takes the client's file-system
 * rights (ptd_cred_become_reader, cred.h).  Every file of the decode --
 * the input, the images it maps, opened lazily -- is opened by that
 * thread, or (input.decode.jobs > 1) by the decode threads it starts,
 * which Linux gives a copy of its credentials (per thread, copied at
 * clone): the client's rights too.
 *
 * Life of a replay:
 *  1. ptd_replay_begin: the thread takes the client's credentials and
 *     starts the decode; begin returns at once.  The input is then
 *     accepted (the reader described it) or refused (-errno with the
 *     reader's message) -- or, still undecided after PTD_REPLAY_START_MS,
 *     accepted (a later refusal ends the replay with an error).  The
 *     thread calls opts.decided when it decides; ptd_replay_started says
 *     what was decided.  A daemon's control loop uses these so that a
 *     slow input (a large bundle to verify) never holds it up;
 *     ptd_replay_start is begin + waiting for the decision, for callers
 *     that may block.
 *  2. ptd_replay_go: the caller has made the fan-out; the thread waits for
 *     the first subscriber (at most @wait_ms: a client subscribes after
 *     the replay response), then delivers the records; if none came, it
 *     decodes nothing and ends (DETACHED, "nobody subscribed").
 *  3. the sink's `ended` (reason EXITED with exit_code 0 at the end of the
 *     trace, DETACHED/SHUTDOWN when stopped or left without subscribers,
 *     ERROR if the decode failed).
 *
 * Lossless (what ptd's replay request asks unless the client says
 * "lossy"): before each record the thread waits until every subscriber's
 * queue has room for a record of the largest size (backpressure) instead
 * of letting the fan-out drop it (ptd_fanout_wait_room).  The wait sleeps
 * until something changes -- the loop takes bytes from a queue, a
 * subscriber leaves, the replay is stopped (ptd_replay_stop cancels the
 * fan-out's waits) -- never polling.  One that stays connected but reads
 * nothing for opts.stall_ms (ptd: subscriber_stall_ms) stops holding the
 * replay back (PTD_STALL_DROP: its records are then dropped and counted
 * as lost, as without lossless, until it reads again).
 *
 * Lossless or not, a replay whose subscribers have all left (there was
 * one, there is none now) ends: DETACHED, "every subscriber left".  A
 * replay has no live process to keep up with: nobody left to deliver to,
 * nothing left to do.
 */
#ifndef PTD_DAEMON_REPLAY_H
#define PTD_DAEMON_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"
#include "daemon/cred.h"
#include "daemon/fanout.h"
#include "daemon/session.h"
#include "input/input.h"

/* How long ptd_replay_start waits for the input to be accepted. */
#define PTD_REPLAY_START_MS 5000u
/* Default wait for the first subscriber. */
#define PTD_REPLAY_WAIT_MS 5000u
/* Lossless: how long a subscriber may hold the replay back without
 * taking a byte. */
#define PTD_REPLAY_STALL_MS 30000u
struct ptd_replay_opts {
	const char *path;		/* the saved trace, absolute; copied */
	struct ptd_input_opts input;	/* decode options; strings copied */
	bool lossless;			/* wait for subscribers (above) */
	struct ptd_cred creds;		/* whose rights it reads with; copied */
	unsigned wait_ms;		/* first subscriber; 0: no wait, decode
					 * at once */
	/* lossless: the subscribers' queue limit (fan-out queue_size) */
	size_t queue_size;
	unsigned stall_ms;		/* 0: PTD_REPLAY_STALL_MS */
	/* Called once, on the replay thread, when it accepts or refuses the
	 * input (not when PTD_REPLAY_START_MS passes: the caller times
	 * that, see ptd_replay_start_left_ms); NULL: not told. */
	void (*decided)(void *ctx);
	void *decided_ctx;
};

/* What the input said of itself (the reader's info; kind NONE and pid 0
 * if it was accepted by timeout). */
struct ptd_replay_info {
	enum ptd_input_kind kind;
	long pid;
	size_t nthreads;
};

struct ptd_replay;

/* Start replaying @o->path into @sink (record and ended; snapshot unused)
 * without waiting for the input to be accepted.  Returns 0 with
 * *ret_replay, or -EINVAL (a relative or empty path, a bad option),
 * -ENOMEM, -errno (the thread could not be made) with @diag. */
int ptd_replay_begin(const struct ptd_replay_opts *o,
		     const struct ptd_session_sink *sink,
		     struct ptd_replay **ret_replay, struct ptd_diag *diag);

/* What became of the input of a replay begun: 0 undecided yet; 1 accepted
 * (*ret_info filled; PTD_REPLAY_START_MS after begin an undecided input
 * counts as accepted); or the refusal's error as ptd_replay_start returns
 * it, with its message in @diag (then ptd_replay_free it).  Any thread. */
int ptd_replay_started(struct ptd_replay *r, struct ptd_replay_info *ret_info,
		       struct ptd_diag *diag);

/* Milliseconds until an undecided input counts as accepted (0: now). */
unsigned ptd_replay_start_left_ms(struct ptd_replay *r);

/* ptd_replay_begin, then wait until ptd_replay_started decides.
 * Returns 0 with *ret_replay and *ret_info, or with a message in @diag:
 *  -EINVAL  a relative or empty path, a bad option
 *  -EPERM   ptd cannot take the client's credentials (not root, another
 *           uid)
 *  -ENOENT/-EACCES/-ENOTDIR...  the input (or a file it needs) cannot be
 *           opened as the client: the message names the file
 *  -PTD_EFORMAT/-PTD_EUNSUPPORTED/...  the input was refused by its reader
 *  -ENOMEM, -errno (the thread could not be made)
 * The sink is called only after ptd_replay_go. */
int ptd_replay_start(const struct ptd_replay_opts *o,
		     const struct ptd_session_sink *sink,
		     struct ptd_replay **ret_replay,
		     struct ptd_replay_info *ret_info, struct ptd_diag *diag);

/* Let the replay deliver: @fan is the fan-out its sink feeds (waited on
 * for the first subscriber and, lossless, for room).  Call once. */
void ptd_replay_go(struct ptd_replay *r, struct ptd_fanout *fan);

/* Ask the replay to end with @reason (DETACHED or SHUTDOWN); `ended`
 * follows.  An input still being checked (a bundle's files hashed) stops
 * being checked: it is refused with -ECANCELED (unless it counts as
 * accepted already; then `ended` follows).  Returns at once; any thread;
 * repeatable. */
void ptd_replay_stop(struct ptd_replay *r,
		     enum ptd_session_end_reason reason);

/* Counters so far (threads: decoded or being decoded; threads_live: 1
 * while decoding; trace_bytes of finished threads; insns and records
 * handed to the sink).  source is PTD_SOURCE_AUTO (not a live source). */
void ptd_replay_get_stats(struct ptd_replay *r, struct ptd_session_stats *ret);

/* Stop (SHUTDOWN) if still running, wait for the thread, free.  If
 * ptd_replay_go was never called, `ended` is not called.  NULL is fine. */
void ptd_replay_free(struct ptd_replay *r);

#endif
