/* SPDX-License-Identifier: MIT */
/*
 * A tracing session: one traced process, its source, its decoders.
 *
 * A session owns two threads:
 *  - the source thread: the software PT source (ptrace; the only thread
 *    that may touch the target) or the intel_pt perf events.  Either way
 *    it fills perf-layout buffers (header page + data ring + AUX area,
 *    lib/perf/ring.h), one per traced thread;
 *  - the decode thread: reads those buffers through the shared reader,
 *    keeps each thread's image from the sideband, decodes each thread's
 *    stream as it grows (decode/stream.h) and hands every record to the
 *    sink.
 * The daemon's control loop never waits on either: start returns once the
 * target is attached (or failed to), detach only asks.
 */
#ifndef PTD_DAEMON_SESSION_H
#define PTD_DAEMON_SESSION_H

#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"
#include "daemon/config.h"
#include "record/record.h"

enum ptd_source_kind {
	PTD_SOURCE_AUTO,	/* intel_pt if the CPU has it, else software
				 * if the config allows it */
	PTD_SOURCE_INTEL_PT,
	PTD_SOURCE_SOFTWARE,
};

const char *ptd_source_name(enum ptd_source_kind k);	/* "auto", ... */
int ptd_source_parse(const char *name);		/* kind or -PTD_EFORMAT */

struct ptd_session_opts {
	pid_t pid;			/* process (thread group) to trace */
	enum ptd_source_kind source;
	bool tsc;			/* timing packets (records get "tsc") */
	uint64_t max_insns;		/* detach after this many; 0: none */
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
};

enum ptd_session_end_reason {
	PTD_END_EXITED,		/* the target exited (code or signal) */
	PTD_END_DETACHED,	/* detach asked; the target runs on */
	PTD_END_LIMIT,		/* max_insns reached; detached */
	PTD_END_SHUTDOWN,	/* the daemon is stopping; detached */
	PTD_END_ERROR,		/* the source failed; message says why */
};

const char *ptd_session_end_name(enum ptd_session_end_reason r);

struct ptd_session_end {
	enum ptd_session_end_reason reason;
	int exit_code;		/* EXITED: exit status, or -1 if killed */
	int exit_signal;	/* EXITED: the killing signal, or 0 */
	char message[PTD_DIAG_MAX];	/* ERROR: what went wrong */
};

/* Where a session's records go.  Both calls come on the session's decode
 * thread, never at the same time; @rec and what it points to are valid
 * only during the call. */
struct ptd_session_sink {
	void (*record)(void *ctx, const struct ptd_record *rec);
	/* Once, after the last record.  The session may be freed from any
	 * thread once this has been called. */
	void (*ended)(void *ctx, const struct ptd_session_end *end);
	void *ctx;
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
};

struct ptd_session;

/* The session's source thread receives this signal (a no-op handler
 * without SA_RESTART, installed by the first ptd_session_start) to leave a
 * waitpid when asked to stop; it must not be ignored process-wide. */
#define PTD_SESSION_SIGNAL SIGUSR2

/* Attach to @o->pid and start tracing.  Returns 0 with *ret_session, or:
 *  -ESRCH  no such process (or a zombie)
 *  -EPERM  ptrace refused (Yama, seccomp, another tracer)
 *  -PTD_ENOPT  no intel_pt and the software source is not allowed (or
 *          source was INTEL_PT): the message names the sysfs path
 *  -PTD_EUNSUPPORTED  a 32-bit process
 *  -errno / -ENOMEM
 * with a message in @diag.  The sink is called only after a successful
 * return. */
int ptd_session_start(const struct ptd_session_opts *o,
		      const struct ptd_session_sink *sink,
		      struct ptd_session **ret_session, struct ptd_diag *diag);

/* Ask the session to end with @reason (DETACHED or SHUTDOWN): the target
 * is detached and runs on as before; the remaining trace is decoded; then
 * `ended` is called.  Returns at once; safe from any thread, repeatable. */
void ptd_session_stop(struct ptd_session *s,
		      enum ptd_session_end_reason reason);

/* Thread-safe snapshot of the counters. */
void ptd_session_get_stats(struct ptd_session *s,
			   struct ptd_session_stats *ret);

pid_t ptd_session_pid(const struct ptd_session *s);

/* Wait for the session's threads and free it.  If `ended` has not been
 * called yet this stops the session (SHUTDOWN) and waits for it. NULL is
 * fine. */
void ptd_session_free(struct ptd_session *s);

#endif
