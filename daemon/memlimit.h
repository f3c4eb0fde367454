/* SPDX-License-Identifier: MIT */
/*
 * Per-user memory limits (ptd.conf's user_memory_limit): what all of one
 * user's sessions may hold, counted in bytes that ptd reserves for them.
 *
 * A ledger (struct ptd_memlimit) keeps, per uid, the bytes charged; a
 * charge that would take a uid past the limit is refused whole (nothing
 * is charged).  What a session reserves is charged when it is reserved:
 *  - at attach: the buffers of the threads (or CPUs) traced from the
 *    start, each ptd_memlimit_thread_bytes (perf header page + data ring
 *    + AUX area + the stream decoder's buffer bound + in snapshot mode the
 *    copy a snapshot reads into), plus a recorded session's spool bound;
 *  - when the target creates a thread: that thread's buffers (the
 *    session's source thread charges it; a thread refused is not traced
 *    and the session says so in an error record and its stats);
 *  - at subscribe: the subscriber's two queue buffers (fanout.h);
 *  - at replay: PTD_MEMLIMIT_REPLAY_BYTES for the decoder of the saved
 *    trace, and with "jobs" N, PTD_MEMLIMIT_REPLAY_PART_BYTES for each
 *    of the N + 2 parts a parallel decode works on at once (its image
 *    copy and instruction cache; the records all parts hold between
 *    them are bounded to N + 2 parts' worth, decode/parallel.h), or of
 *    the N + 2 threads decoded at once, bounded the same way
 *    (decode/threadpar.h).  A snapshot session's options.jobs N: the
 *    same for its parallel decodes (one thread's snapshot at a time),
 *    at attach (ptd_session_attach_bytes).
 *  - in a session with symbols: each file's symbol table, when it is
 *    loaded (server/symbols.c; a table refused is not kept, and an error
 *    record says so).
 *  - in a session that counts (options.counters): the counters table's
 *    entries and index as they grow (decode/counters.h
 *    ptd_counters_set_grow; a growth refused holds the table at its
 *    size, later new instructions uncounted: the counters total's
 *    "uncounted").
 * A traced thread's charge is given back once its trace is decoded to its
 * end and its buffers freed (full mode: a target that starts and ends
 * threads holds only those alive); everything else a session charged
 * when the session's threads are freed (it ended), a subscriber's when it
 * unsubscribes.
 *
 * Not charged: the per-session instruction and section caches (bounded on
 * their own: ICACHE_ENTRIES entries, the traced process's code) and the
 * control plane's small allocations.
 *
 * Every call is thread-safe (one mutex in the ledger).
 */
#ifndef PTD_DAEMON_MEMLIMIT_H
#define PTD_DAEMON_MEMLIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "decode/parallel.h"
#include "record/record.h"

/* A replay's decoder and input buffers, charged at the replay request. */
#define PTD_MEMLIMIT_REPLAY_BYTES (64ull << 20)
/* A replay's parallel decode, for each part held: a part's worth of the
 * records the decode holds (PTD_DECODE_PART_RECORDS, the workers wait at
 * jobs + 2 of them, decode/parallel.h: 6 MiB of 192-byte records;
 * computed from the record's size, which a constant would not follow),
 * its image copy and instruction cache (8 MiB). */
#define PTD_MEMLIMIT_REPLAY_PART_BYTES                                       \
	((uint64_t)PTD_DECODE_PART_RECORDS * sizeof(struct ptd_record) +     \
	 (8ull << 20))
/* The bound a live session's stream decoder keeps past its anchor for one
 * thread (ptd_stream_opts.max_buffered): the AUX area's size, at least
 * this. */
#define PTD_MEMLIMIT_STREAM_MIN (1ull << 20)
/* A recorded session's spool (tmpfs beside the socket): capture bytes per
 * instruction at most, times its max_insns. */
#define PTD_MEMLIMIT_SPOOL_PER_INSN 4ull

struct ptd_memlimit;

/* A ledger with @limit bytes per uid, into *@ret.  Returns 0, or -ENOMEM
 * (*@ret NULL). */
int ptd_memlimit_new(uint64_t limit, struct ptd_memlimit **ret);
void ptd_memlimit_free(struct ptd_memlimit *m);	/* NULL is fine */

uint64_t ptd_memlimit_limit(const struct ptd_memlimit *m);

/* Charge @bytes to @uid.  Returns 0, or -PTD_ELIMIT (nothing charged) if
 * that would take @uid past the limit.  Either way *ret_used (may be
 * NULL) is what @uid had in use before. */
int ptd_memlimit_charge(struct ptd_memlimit *m, uid_t uid, uint64_t bytes,
			uint64_t *ret_used);

/* Give back @bytes charged to @uid before. */
void ptd_memlimit_release(struct ptd_memlimit *m, uid_t uid, uint64_t bytes);

/* What @uid has in use now. */
uint64_t ptd_memlimit_used(struct ptd_memlimit *m, uid_t uid);

/* One charge holder (a session, a subscriber): what it charged to whom,
 * so that it gives back exactly that.  Zero it, then set m and uid (m
 * NULL: nothing is limited or counted). */
struct ptd_memacct {
	struct ptd_memlimit *m;
	uid_t uid;
	atomic_uint_fast64_t charged;
};

/* ptd_memlimit_charge for @a's uid, remembered in @a.  NULL @a: 0. */
int ptd_memacct_charge(struct ptd_memacct *a, uint64_t bytes,
		       uint64_t *ret_used);
/* Give back @bytes of what @a charged (at most all of it: a holder never
 * gives back more than it took).  NULL @a is fine. */
void ptd_memacct_give_back(struct ptd_memacct *a, uint64_t bytes);
/* Give back everything @a charged.  NULL is fine; repeatable. */
void ptd_memacct_release(struct ptd_memacct *a);

/* The bytes one traced thread's (or, per-CPU mode, CPU's) buffers hold:
 * perf header page + @data_size + @aux_size + the stream buffer bound
 * (@aux_size, at least PTD_MEMLIMIT_STREAM_MIN) + in snapshot mode
 * @aux_size again (the copy a snapshot reads). */
uint64_t ptd_memlimit_thread_bytes(size_t data_size, size_t aux_size,
				   bool snapshot);

/* The stream buffer bound for an AUX area of @aux_size. */
size_t ptd_memlimit_stream_bytes(size_t aux_size);

/* Human-readable @bytes ("4.5 MiB", "1 GiB", "512 B") into @buf. */
const char *ptd_memlimit_fmt(uint64_t bytes, char *buf, size_t cap);

#endif
