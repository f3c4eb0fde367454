/* SPDX-License-Identifier: MIT */
/*
 * A tracing session: one traced process, its source, its decoders.
 *
 * A session owns two threads:
 *  - the source thread (source/source.h, whose modules hold each
 *    source): the software PT source (ptrace; the only thread that may
 *    touch the target) or the intel_pt perf events.  Either way
 *    it fills perf-layout buffers (header page + data ring + AUX area,
 *    lib/perf/ring.h), one per traced thread (or one per CPU, with
 *    opts.per_cpu: decoded through decode/cpufeed.h);
 *  - the decode thread: reads those buffers through the shared reader,
 *    keeps each thread's image from the sideband, decodes each thread's
 *    stream as it grows (decode/stream.h) and hands every record to the
 *    sink.
 * A third, the start thread, attaches (every thread of the target seized
 * and stopped, its code read: as long as the target makes it take) and
 * then becomes the decode thread.  The daemon's control loop never waits
 * on any of them: ptd_session_begin returns at once, ptd_session_started
 * says how the attach went, detach (ptd_session_stop) only asks -- also
 * while the attach is under way, which cancels it.
 */
#ifndef PTD_DAEMON_SESSION_H
#define PTD_DAEMON_SESSION_H

#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"
#include "daemon/config.h"
#include "daemon/memlimit.h"
#include "record/record.h"
#include "source/source.h"

/* How a session records (perf's full-trace vs snapshot mode, perf -S).
 *  FULL      every byte of trace is read and decoded as it comes; the sink
 *            gets records all along.
 *  SNAPSHOT  each thread's AUX area is a ring that overwrites its oldest
 *            bytes (software source: the producer never waits for room
 *            there; intel_pt: the AUX area mapped read-only).  Sideband is
 *            still read all along, so no image change is lost, but nothing
 *            is decoded until ptd_session_snapshot: the sink gets records
 *            only then. */
enum ptd_session_mode {
	PTD_MODE_FULL,
	PTD_MODE_SNAPSHOT,
};

const char *ptd_session_mode_name(enum ptd_session_mode m); /* "full",.. */
int ptd_session_mode_parse(const char *name);	/* mode or -PTD_EFORMAT */

/* snapshot_size bounds: a power of two in [page size, this]. */
#define PTD_SESSION_SNAPSHOT_MAX (64u << 20)

struct ptd_session_opts {
	pid_t pid;			/* process (thread group) to trace */
	enum ptd_source_kind source;
	bool tsc;			/* timing packets (records get "tsc") */
	uint64_t max_insns;		/* detach after this many; 0: none */
	bool single_step;		/* software: single-step (reference) */
	/* Started, the decode thread waits at most this long for the sink's
	 * first subscriber (sink.wait_subscriber) before it decodes, so
	 * that a client that attaches and then subscribes sees the trace
	 * from its start (the buffers hold it meanwhile: the software
	 * source waits for room, intel_pt may lose, counted).  0: decode
	 * at once. */
	unsigned wait_ms;
	/* Software source only: also write a capture (swpt/capture.h, with
	 * the ground truth) into this directory, which must not exist or be
	 * empty.  NULL: none.  (Tests and `ptctl verify` check a live stream
	 * against it; the daemon lets only root ask for it.) */
	const char *capture_dir;
	/* The client's uid.  Not 0: when the process execs a program that
	 * is no longer that user's to trace (set-user-ID or set-group-ID:
	 * its /proc/PID/mem is no longer owned by @uid), the session ends
	 * with an error before the new program runs an instruction -- ptd's
	 * CAP_SYS_PTRACE must not let a user watch a privileged program. */
	uid_t uid;
	const struct ptd_config *config;	/* sizes, software_source,
						 * intel_pt_sysfs; copied */
	enum ptd_session_mode mode;	/* FULL (0) by default */
	/* SNAPSHOT: AUX bytes kept per thread (the newest ones); 0: the
	 * config's aux_buffer_size.  A power of two, at least a page, at
	 * most PTD_SESSION_SNAPSHOT_MAX. */
	size_t snapshot_size;
	/* > 1: decoded on that many threads, the instruction path, at most
	 * PTD_DECODE_MAX_JOBS, charged (ptd_session_attach_bytes) as a
	 * replay's "jobs" are.  SNAPSHOT: each thread's snapshot cut at its
	 * PSBs (decode/parallel.h: the same records, sooner on that many
	 * cores).  FULL: each round's threads decoded at once
	 * (decode/threadpar.h; the sink is called by one thread at a time,
	 * thread after thread as before, not always the session's); not
	 * with per_cpu or counters (refused).  0 or 1: on the session's
	 * thread. */
	unsigned jobs;
	/* Per-CPU buffers (perf's default layout) instead of per-thread
	 * ones.  intel_pt: one intel_pt event per online CPU with inherit=1
	 * for the process, plus one sideband dummy event per CPU (mmap2,
	 * comm, task, context_switch); threads and children created later
	 * are traced by inheritance.  Software source: the livesink's
	 * per-CPU mode with PTD_SESSION_SW_CPUS virtual CPUs, threads
	 * migrating every PTD_SESSION_SW_MIGRATE batches.  Either way the
	 * buffers are decoded by decode/cpufeed.h.  FULL mode only. */
	bool per_cpu;
	/* Address filter, perf's --filter text (perf/addrfilter.h; copied;
	 * NULL: none): only instructions inside the ranges are traced.
	 * File ranges are resolved with /proc/PID/maps at the start, for the
	 * decoder (pt_config.addr_filter) and the software source; intel_pt
	 * events get the text with PERF_EVENT_IOC_SET_FILTER (the kernel
	 * resolves it), at most the PMU's nr_addr_filters ranges.  Start
	 * fails with -PTD_EFORMAT (bad text, the message naming the column;
	 * or a range in a file the process does not map, or across the end
	 * of its mapping), -PTD_ELIMIT (too many ranges), -PTD_EUNSUPPORTED
	 * (intel_pt without address filtering), or the ioctl's error. */
	const char *filter;
	/* A pidfd of the process (common/pidfd.h), taken when the caller
	 * decided the process may be traced; 0 or -1: none.  Borrowed until
	 * the start is decided.  Once the source holds the process (software:
	 * every thread seized and stopped; intel_pt: the events open), the
	 * pidfd's process must still hold opts.pid, else the attach is
	 * undone and refused with -ESRCH: the pid was reused. */
	int pidfd;
	/* May be NULL.  Called once, on a session thread, at the same point
	 * (after the pidfd check): the caller's permission check, made again
	 * on the process as it is now (its owner may have changed since,
	 * by an exec of a set-user-ID program).  A negative return (with a
	 * message in @diag) undoes the attach and is the start's error. */
	int (*recheck)(void *ctx, pid_t pid, struct ptd_diag *diag);
	void *recheck_ctx;
	/* May be NULL.  Called once, first, on the start thread, before
	 * anything reads the process: what must hold before the source may
	 * take it (a watch rule's process: its stop at the exec reached).
	 * A negative return (with a message in @diag) is the start's
	 * error.  It may wait: the caller's loop does not. */
	int (*prepare)(void *ctx, pid_t pid, struct ptd_diag *diag);
	void *prepare_ctx;
	/* May be NULL.  Called once, on a session thread, when the start is
	 * decided (ptd_session_started no longer returns 0), to wake the
	 * caller's loop. */
	void (*decided)(void *ctx);
	void *decided_ctx;
	/* Memory limit (memlimit.h; NULL: none): the session charges every
	 * thread it traces beyond the first @prepaid_threads (which its
	 * caller charged at attach: ptd_session_attach_bytes) to @acct, and
	 * does not trace a thread the charge is refused for: it is counted
	 * (stats.threads_refused) and its stream gets an error record
	 * (code -PTD_ELIMIT, context "user_memory_limit", the thread's tid).
	 * The caller gives the charges back (ptd_memacct_release) once the
	 * session is freed. */
	struct ptd_memacct *acct;
	unsigned prepaid_threads;
	/* Symbols (sym/symbols.h; NULL: none): every insn record names the
	 * function holding its ip (ptd_rec_insn.sym), resolved once per
	 * instruction of the session's instruction cache, from the start.
	 * Borrowed: must outlive the session (ptd_session_free). */
	struct ptd_symbols *symbols;
	/* Exact counts (decode/counters.h; NULL: none): every thread's
	 * executions counted into this one table on the decode thread, and
	 * first_exec records given; the sink takes the counts when it likes
	 * (on the decode thread: the table is that thread's).  Borrowed:
	 * must outlive the session. */
	struct ptd_counters *counters;
	/* May be NULL: follow the process's children (source/source.h,
	 * host.child: the software source hands each one over stopped by a
	 * SIGSTOP, for the caller to trace or continue; intel_pt refuses,
	 * -PTD_EUNSUPPORTED).  On the source's thread. */
	void (*child)(void *ctx, pid_t pid);
	void *child_ctx;
};

/* Software source, per-CPU mode: its virtual CPUs and migration period. */
#define PTD_SESSION_SW_CPUS PTD_SOURCE_SW_CPUS
#define PTD_SESSION_SW_MIGRATE PTD_SOURCE_SW_MIGRATE

enum ptd_session_end_reason {
	PTD_END_EXITED,		/* the target exited (code or signal) */
	PTD_END_DETACHED,	/* detach asked; the target runs on */
	PTD_END_LIMIT,		/* max_insns reached; detached */
	PTD_END_SHUTDOWN,	/* the daemon is stopping; detached */
	PTD_END_ERROR,		/* the source failed; message says why */
	/* Never a session's end: one subscriber's, in its bye only -- it
	 * read nothing for subscriber_stall_ms while a paced stream (a
	 * snapshot's decode) waited for it, and was cut off; the session and
	 * its other subscribers go on. */
	PTD_END_STALLED,
};

const char *ptd_session_end_name(enum ptd_session_end_reason r);

struct ptd_session_end {
	enum ptd_session_end_reason reason;
	int exit_code;		/* EXITED: exit status, or -1 if killed */
	int exit_signal;	/* EXITED: the killing signal, or 0 */
	char message[PTD_DIAG_MAX];	/* ERROR: what went wrong */
};

/* Snapshots (struct ptd_snapshot_info): source/source.h. */

/* Where a session's records go.  Both calls come on the session's decode
 * thread, never at the same time; @rec and what it points to are valid
 * only during the call.  `record` may wait during a snapshot (ptd's sink
 * paces a snapshot's records to its subscribers); it must not otherwise,
 * and a stop must end such a wait (ptd cancels its fan-out's waits). */
struct ptd_session_sink {
	void (*record)(void *ctx, const struct ptd_record *rec);
	/* Once, after the last record.  The session may be freed from any
	 * thread once this has been called. */
	void (*ended)(void *ctx, const struct ptd_session_end *end);
	void *ctx;
	/* SNAPSHOT mode, may be NULL: called around each snapshot's records,
	 * on the decode thread like the others: with @done false once the
	 * buffers are read (seq, nthreads, bytes, overwritten and th[].tid/
	 * bytes/overwritten filled; err may already be set, then no record
	 * follows), then the records, then with @done true (everything
	 * filled).  The session takes the next snapshot request before the
	 * @done call. */
	void (*snapshot)(void *ctx, const struct ptd_snapshot_info *info,
			 bool done);
	/* May be NULL: wait at most @ms for a first subscriber; true once
	 * there is one (see opts.wait_ms). */
	bool (*wait_subscriber)(void *ctx, unsigned ms);
	/* May be NULL: a decode round is over (the records so far may go
	 * out together); called before the decode thread waits for more. */
	void (*flush)(void *ctx);
	/* May be NULL: @n records at once, as many calls of `record` would
	 * take them; with @stall_ms > 0 (a lossless replay) each first waits
	 * for room in every subscriber's queue, one that takes nothing for
	 * @stall_ms no longer waited for (its records dropped, counted).
	 * Returns how many it took: fewer than @n where such a wait ended
	 * without room (a stop cancelled it, or no subscriber is left). */
	size_t (*records)(void *ctx, const struct ptd_record *recs, size_t n,
			  unsigned stall_ms);
	/* May be NULL (then so is ips): may runs of addresses
	 * (decode/decoder.h, opts.ips) stand for insn records now
	 * (daemon/fanout.h, ptd_fanout_ips_ready)?  Asked between calls. */
	bool (*ips_ready)(void *ctx);
	/* The instructions at @ips of thread @tid of process @pid, decided
	 * after ips_ready said true and handed over with no record between,
	 * as `records` would take their insn records (@stall_ms the same).
	 * Returns how many it took. */
	size_t (*ips)(void *ctx, pid_t pid, pid_t tid, const uint64_t *ips,
		      size_t n, unsigned stall_ms);
};

struct ptd_session_stats {
	enum ptd_source_kind source;	/* the one in use, never AUTO */
	unsigned threads;		/* traced so far */
	unsigned threads_live;
	uint64_t trace_bytes;		/* PT bytes read from the buffers */
	uint64_t insns;			/* instructions decoded */
	uint64_t records;		/* records handed to the sink */
	uint64_t lost_bytes;		/* trace bytes the source lost */
	bool ended;
	enum ptd_session_mode mode;
	size_t snapshot_size;		/* SNAPSHOT: AUX bytes per thread */
	uint64_t snapshots;		/* snapshots taken */
	uint64_t overwritten_bytes;	/* SNAPSHOT: bytes overwritten before
					 * a snapshot read them */
	/* SNAPSHOT: ended threads whose last trace is kept for the
	 * snapshots now (their buffers gone), its bytes; ended threads
	 * whose last trace the memory limit dropped, their bytes
	 * (source.h) */
	unsigned kept_threads, dropped_threads;
	uint64_t kept_bytes, dropped_bytes;
	uint64_t aux_written;		/* software source: trace bytes
					 * written into the AUX areas so far
					 * (read or not); intel_pt: 0 */
	bool per_cpu;			/* per-CPU buffers (opts.per_cpu) */
	unsigned ncpus;			/* per_cpu: buffers (CPUs) */
	unsigned migrated;		/* software per_cpu: ended threads that
					 * ran on more than one CPU */
	unsigned threads_refused;	/* not traced: opts.acct refused their
					 * memory */
	uint64_t identity_mismatches;	/* mapped files whose path named
					 * another file when read (each
					 * once; its error records say
					 * which) */
	/* A replay with "jobs" (a snapshot session's: its snapshots): parts
	 * its threads' traces were cut into, those the parallel decoder gave
	 * to the serial one, summed over the threads decoded
	 * (ptd_decode_stats), and why the first was (a static string; NULL:
	 * none was; a replay's only).  0 otherwise. */
	uint64_t serial_parts;
	const char *serial_why;
	uint64_t parts;		/* ptd_decode_stats.parts, summed */
	uint64_t threads_at_once;	/* ... .at_once, counted (a FULL
					 * session with jobs: its threads'
					 * rounds decoded at once) */
};

struct ptd_session;

/* The session's source thread receives this signal (a no-op handler
 * without SA_RESTART, installed by the first ptd_session_start) to leave a
 * waitpid when asked to stop; it must not be ignored process-wide. */
#define PTD_SESSION_SIGNAL SIGUSR2

/* Begin a session on @o->pid: check the options, choose the source, and
 * start the session's thread, which attaches (ptd_session_started says
 * when it has, or why it could not) and then decodes.  Returns at once, 0
 * with *ret_session (to free with ptd_session_free whatever the start
 * gives), or with a message in @diag:
 *  -EINVAL  bad options (the message names which)
 *  -ESRCH   no such process
 *  -PTD_ENOPT  no intel_pt and the software source is not allowed (or
 *          source was INTEL_PT): the message names the sysfs path
 *  -errno / -ENOMEM
 * The sink is called only once ptd_session_started has returned 1. */
int ptd_session_begin(const struct ptd_session_opts *o,
		      const struct ptd_session_sink *sink,
		      struct ptd_session **ret_session, struct ptd_diag *diag);

/* How the attach went: 0 still attaching, 1 tracing (the sink gets
 * records from now on; `ended` comes in the end), or the error that ended
 * the start, with its message in @diag (may be NULL) -- then the target
 * is let go as it was (every thread the start seized released, the
 * signals they were to get kept), and the sink is never called:
 *  -ESRCH  no such process, a zombie, it exited during the attach, or
 *          opts.pidfd's process no longer holds the pid (reused)
 *  -EPERM  ptrace refused (Yama, seccomp, another tracer)
 *  -ECANCELED  ptd_session_stop was asked before every thread stopped
 *  -PTD_EUNSUPPORTED  a 32-bit process
 *  -PTD_EFORMAT  opts.filter does not resolve (see there)
 *  opts.recheck's error, -errno / -ENOMEM
 * Thread-safe. */
int ptd_session_started(struct ptd_session *s, struct ptd_diag *diag);

/* ptd_session_begin, then wait until the start is decided: returns 0 with
 * *ret_session once tracing, or the error of either (the session freed).
 * For callers that may wait (tests, tools): the target decides how long,
 * e.g. a thread in vfork() stops only when its child has exec'd or
 * exited. */
int ptd_session_start(const struct ptd_session_opts *o,
		      const struct ptd_session_sink *sink,
		      struct ptd_session **ret_session, struct ptd_diag *diag);

/* Ask the session to end with @reason (DETACHED or SHUTDOWN): the target
 * is detached and runs on as before; the remaining trace is decoded; then
 * `ended` is called.  While attaching, this cancels the attach: the start
 * fails with -ECANCELED (unless it is past the point of no return: then
 * it starts and ends at once, with @reason).  Returns at once; safe from
 * any thread, repeatable. */
void ptd_session_stop(struct ptd_session *s,
		      enum ptd_session_end_reason reason);

/* SNAPSHOT mode: ask for a snapshot.  The decode thread pauses every
 * thread's producer (software source: the tracing thread waits at its next
 * output call; intel_pt: PERF_EVENT_IOC_DISABLE), reads the sideband so far
 * and the newest AUX bytes of each thread, resumes them, then decodes each
 * thread's bytes from their first PSB with a fresh decoder (final: the
 * last instructions are delivered even if the trace is cut there), its
 * image being every image change seen so far for that thread -- an
 * approximation: a change that came after the oldest bytes but unmapped
 * code they ran is applied too early.  Before a thread's records comes an
 * error record (code -PTD_ETRUNC, context "overwritten", skipped = the
 * bytes) if bytes were overwritten since its previous snapshot.  The sink's
 * snapshot callback brackets the records.  Returns at once: 0 and
 * *ret_seq, the seq the sink will see, or
 *  -EINVAL  not a SNAPSHOT-mode session (or NULL)
 *  -EBUSY   the previous snapshot is not done yet
 *  -ESRCH   the session has ended (or is ending: no snapshot will come)
 * A request that was taken is always answered through the sink before
 * `ended`.  The sink may make the decode wait (it paces a snapshot's
 * records to its subscribers); a stop (ptd_session_stop) ends that decode
 * at its next record, and the snapshot is answered with err -ECANCELED. */
int ptd_session_snapshot(struct ptd_session *s, uint64_t *ret_seq);

/* ptd_session_snapshot, taken once thread @tid's trace reaches past
 * CLOCK_MONOTONIC @after_ns (a trigger's hit: source.h, struct
 * ptd_snapshot_info.upto_tid). */
int ptd_session_snapshot_upto(struct ptd_session *s, pid_t tid,
			      int64_t after_ns, uint64_t *ret_seq);

/* What a session with options @o (mode, snapshot_size, per_cpu; sizes
 * from o->config) reserves at attach when the process has @nthreads
 * threads: per-thread buffers, ptd_memlimit_thread_bytes for each thread;
 * per-CPU buffers, that for each CPU (the online ones, at least
 * PTD_SESSION_SW_CPUS) plus each thread's decoder buffer
 * (ptd_memlimit_stream_bytes).  *ret_thread (may be NULL): what each
 * thread the target creates later costs. */
uint64_t ptd_session_attach_bytes(const struct ptd_session_opts *o,
				  unsigned nthreads, uint64_t *ret_thread);

/* Thread-safe snapshot of the counters. */
void ptd_session_get_stats(struct ptd_session *s,
			   struct ptd_session_stats *ret);

pid_t ptd_session_pid(const struct ptd_session *s);

/* A kernel uprobe about to be registered on the session's process (@add),
 * or unregistered: source/source.h, ptd_source_uprobe.  Any thread, until
 * ptd_session_free. */
int ptd_session_uprobe(struct ptd_session *s, bool add,
		       const struct ptd_swpt_uprobe *u);

/* The session's address filter text (opts.filter), or NULL. */
const char *ptd_session_filter(const struct ptd_session *s);

/* Wait for the session's threads and free it.  If `ended` has not been
 * called yet this stops the session (SHUTDOWN) and waits for it. NULL is
 * fine. */
void ptd_session_free(struct ptd_session *s);

#endif
