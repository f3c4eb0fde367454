/* SPDX-License-Identifier: MIT */
/*
 * A live trace source: where a session's trace comes from, and the
 * decoders that read it.  One interface, one module per source:
 *
 *   intel_pt   (intelpt.c)   the hardware: perf intel_pt events, per
 *                            thread or per CPU (inherit), their buffers
 *   software   (software.c)  the software PT source: swpt/tracer.c
 *                            single-steps the process and writes what the
 *                            hardware would into swpt/livesink.c's buffers
 *
 * Either way the buffers have the kernel's layout and are read by the one
 * perf ring reader (perf/ring.c) through decode/feed.h (a buffer per
 * thread) or decode/cpufeed.h (a buffer per CPU), into one stream decoder
 * (decode/stream.h) per thread; the records go to the host's callback.
 *
 * Saved traces are not a source: they have no process to attach to, stop
 * or snapshot; input/input.h reads them (the daemon's replay.c).
 *
 * Threads: ptd_source_*_new, _set_filter and _start on one thread (the
 * session's start thread), which then calls _drain, _ending, _kick,
 * _cancel, _result and the snapshot calls (the decode thread).
 * ptd_source_stop and ptd_source_get_stats may be called from any thread.
 * The source never logs; it reports through the host's callbacks.
 */
#ifndef PTD_SOURCE_SOURCE_H
#define PTD_SOURCE_SOURCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/diag.h"
#include "perf/pmu.h"
#include "record/record.h"

enum ptd_source_kind {
	PTD_SOURCE_AUTO,	/* intel_pt if the CPU has it, else software
				 * if the config allows it */
	PTD_SOURCE_INTEL_PT,
	PTD_SOURCE_SOFTWARE,
};

const char *ptd_source_name(enum ptd_source_kind k);	/* "auto", ... */
int ptd_source_parse(const char *name);		/* kind or -PTD_EFORMAT */

/* The software source's per-CPU mode: virtual CPUs, and threads migrating
 * every so many batches (swpt/livesink.h). */
#define PTD_SOURCE_SW_CPUS 2u
#define PTD_SOURCE_SW_MIGRATE 8u

/* A kernel uprobe (ptd's triggers) about to be registered on the traced
 * process (@add), or gone.  The software source must know where they are
 * (swpt/tracer.h, struct ptd_swpt_uprobe: the kernel's INT3 is not the
 * code, and a step across one ends in the kernel's SIGTRAP); intel_pt
 * needs nothing.  Any thread, while the source exists.  Returns 0 or
 * -ENOMEM. */
struct ptd_swpt_uprobe;
struct ptd_source;
int ptd_source_uprobe(struct ptd_source *s, bool add,
		      const struct ptd_swpt_uprobe *u);

/* ---- snapshots (params.snapshot) ---- */

/* One thread's part of a snapshot. */
struct ptd_snapshot_thread {
	pid_t tid;
	uint64_t end;		/* offset in the thread's trace (all bytes
				 * it wrote) where these end: aux_head */
	uint64_t bytes;		/* AUX bytes read (the newest ones, ending
				 * at @end) */
	uint64_t overwritten;	/* bytes written since the previous
				 * snapshot that were overwritten before
				 * this one: lost */
	uint64_t records;	/* records handed to the sink */
	uint64_t insns;		/* of which instructions */
	/* params.jobs > 1: the parts its trace was cut into, and those the
	 * parallel decoder gave to the serial one (decode/parallel.h) */
	uint64_t parts, serial_parts;
	const char *serial_why;	/* why the first was (static; NULL) */
};

/* Threads listed in a snapshot's result at most (nthreads counts all). */
#define PTD_SNAPSHOT_MAX_THREADS 64u

/* What a snapshot did.  Threads whose AUX area got no byte since the
 * previous snapshot are not part of it. */
struct ptd_snapshot_info {
	uint64_t seq;		/* 1, 2, ...: ptd_session_snapshot's */
	/* In: a thread whose trace must reach past CLOCK_MONOTONIC upto_ns
	 * (a trigger's hit), or 0.  The software source records a thread's
	 * run at its next stop: it waits (a little) for that thread's first
	 * stop taken from then on before it pauses; intel_pt writes as it
	 * goes. */
	pid_t upto_tid;
	int64_t upto_ns;
	int err;		/* 0, or why it failed (message) */
	char message[PTD_DIAG_MAX];
	unsigned nthreads;	/* threads in this snapshot */
	unsigned nlisted;	/* entries of th[] filled */
	struct ptd_snapshot_thread th[PTD_SNAPSHOT_MAX_THREADS];
	uint64_t bytes, overwritten, records, insns;	/* sums */
	uint64_t parts, serial_parts;	/* sums, listed or not */
	const char *serial_why;		/* the first thread's (static) */
};

/* ---- making one ---- */

/* What the source asks of whoever runs it (the session). */
struct ptd_source_host {
	void *ctx;
	/* A decoded record (decode thread).  Required. */
	int (*record)(void *ctx, const struct ptd_record *rec);
	/* May thread @tid be traced (its memory)?  1 yes, 0 refused (the
	 * host reports it), negative errno.  NULL: always. */
	int (*charge)(void *ctx, pid_t tid);
	/* Thread @tid, charged (charge gave 1), is decoded to its end (a
	 * snapshot session's: ended, its last trace copied) and its
	 * buffers are freed: its charge is the host's to give back.  May
	 * be NULL. */
	void (*uncharge)(void *ctx, pid_t tid);
	/* Snapshot mode: an ended thread's last trace, @bytes, is kept for
	 * the snapshots once its buffers went (source-int.h,
	 * ptd_source_threads_retire): may it be?  0 yes, negative errno
	 * (-ENOMEM: over the user's limit; the window is dropped, counted).
	 * NULL: always.  unkeep gives such bytes back (may be NULL). */
	int (*keep)(void *ctx, uint64_t bytes);
	void (*unkeep)(void *ctx, uint64_t bytes);
	/* The source holds the process (software: every thread seized and
	 * stopped; intel_pt: the events open): may it still be traced?
	 * Negative (with a message in @diag): the start fails.  NULL: yes. */
	int (*recheck)(void *ctx, pid_t pid, struct ptd_diag *diag);
	/* May be NULL: follow the process's children.  Software source: a
	 * child process (fork, vfork, clone without CLONE_THREAD) at its
	 * first stop, left stopped by a SIGSTOP for the host to trace (from
	 * its first instruction) or continue: swpt/tracer.h, opt->child.
	 * On the tracer's thread.  intel_pt refuses a host that asks
	 * (-PTD_EUNSUPPORTED, intelpt.c says why): its host stops children
	 * itself (the daemon: daemon/forkstop.h). */
	void (*child)(void *ctx, pid_t pid);
};

struct ptd_symbols;
struct ptd_counters;

struct ptd_source_params {
	pid_t pid;		/* the process (thread group) to trace */
	uid_t uid;		/* not 0: end at an exec of a program no
				 * longer @uid's to trace (software) */
	int pidfd;		/* of @pid, > 0; else none: checked once the
				 * source holds the process */
	bool tsc;		/* timing packets (software) */
	uint64_t max_insns;	/* software: detach after so many; 0 none */
	bool single_step;	/* software: single-step every instruction
				 * (the reference), not run to branches */
	const char *capture_dir;	/* software: also a capture; NULL */
	bool snapshot;		/* snapshot mode: overwritable AUX areas,
				 * decoded only at ptd_source_snapshot_* */
	unsigned jobs;		/* > 1: the instruction path, decoded on that
				 * many threads: in snapshot mode each
				 * thread's snapshot (decode/parallel.h); in
				 * full mode with per-thread buffers, the
				 * threads' rounds at once
				 * (decode/threadpar.h; not with counters,
				 * which count in one order) */
	bool per_cpu;		/* one buffer per CPU (full mode only) */
	size_t data_size;	/* perf data area per buffer */
	size_t aux_size;	/* AUX area per buffer */
	uint64_t max_buffered;	/* a thread decoder's bytes held at most */
	const char *dir;	/* the session's directory for code copies:
				 * borrowed, filled before ptd_source_start */
	int wake_fd;		/* eventfd the source writes to when the
				 * decode thread should drain */
	atomic_int *stop;	/* set by the host: detach (borrowed) */
	struct ptd_symbols *symbols;	/* the decoders' (decode.symbols);
					 * NULL: none; borrowed */
	/* Exact counts (decode/counters.h; NULL: none): every thread's
	 * decoder counts into this one table (decode.counters), all on the
	 * decode thread, and gives first_exec records; borrowed */
	struct ptd_counters *counters;
	int signo;		/* software: the signal that gets its tracer
				 * out of waitpid (a handler installed) */
	struct ptd_source_host host;
};

struct ptd_source;

/* intel_pt, on @pmu (perf/pmu.h, probed by the caller).  A host that
 * asks it to follow children (host.child) is refused, -PTD_EUNSUPPORTED
 * with this message. */
extern const char ptd_source_intelpt_no_children[];

int ptd_source_intelpt_new(const struct ptd_source_params *p,
			   const struct ptd_pt_pmu *pmu,
			   struct ptd_source **ret, struct ptd_diag *diag);
/* The software source (swpt/tracer.c). */
int ptd_source_software_new(const struct ptd_source_params *p,
			    struct ptd_source **ret, struct ptd_diag *diag);
/* Stops nothing: the host stops the source (ptd_source_stop, and waits
 * for _drain's final round) first.  NULL is fine. */
void ptd_source_free(struct ptd_source *s);

/* ---- running it ---- */

/* An address filter, perf's --filter text (copied): parsed (against the
 * PMU's number of ranges for intel_pt), its file ranges resolved with the
 * process's maps now for the decoders; intel_pt makes the kernel's string
 * for its events.  Before ptd_source_start.  -PTD_EFORMAT, -PTD_ELIMIT,
 * -PTD_EUNSUPPORTED as ptd_session_opts.filter says. */
int ptd_source_set_filter(struct ptd_source *s, const char *text,
			  struct ptd_diag *diag);
const char *ptd_source_filter(const struct ptd_source *s); /* or NULL */

/* Open the source for the process and start tracing it: intel_pt opens
 * and enables its events; the software source seizes every thread (a
 * thread of its own) and returns once they are traced, or once that
 * failed (or a stop was asked: ptd_source_stop). */
int ptd_source_start(struct ptd_source *s, struct ptd_diag *diag);

/* Should the next _drain be the final one (the source ended: the process
 * exited, a stop was asked, the tracer gave up)? */
bool ptd_source_ending(struct ptd_source *s);
/* One round: drain every buffer through the ring reader into the
 * decoders, follow new threads, decode what arrived (snapshot mode: the
 * sideband only); @final: everything, to its end. */
int ptd_source_drain(struct ptd_source *s, bool final,
		     struct ptd_diag *diag);
/* How long the decode thread may sleep between rounds (ms). */
unsigned ptd_source_poll_ms(const struct ptd_source *s);

/* A stop was asked (*params.stop set): wake a start waiting for the
 * attach.  Any thread. */
void ptd_source_stop(struct ptd_source *s);
/* Decode thread, a stop being asked: get the tracer out of a wait. */
void ptd_source_kick(struct ptd_source *s);
/* Decode thread: decoding failed with @diag: stop the source and let it
 * end (the buffers drained, nothing waits on a full one). */
void ptd_source_cancel(struct ptd_source *s, struct ptd_diag *diag);

/* How the source ended, once _drain's final round is done. */
struct ptd_source_result {
	int err;		/* the source's own failure, or 0 */
	struct ptd_diag diag;	/* and what it was */
	bool exec_refused;	/* ended at an exec params.uid may not trace */
	bool exited;		/* the process exited */
	int exit_code;		/* or -1: not known */
	int exit_signal;
};
void ptd_source_result(struct ptd_source *s, struct ptd_source_result *ret);

struct ptd_source_stats {
	unsigned threads;		/* traced so far */
	unsigned threads_live;
	unsigned migrated;		/* software per_cpu */
	unsigned ncpus;			/* per_cpu: buffers */
	uint64_t trace_bytes, lost_bytes, overwritten_bytes, aux_written;
	uint64_t identity_mismatches;	/* mapped files whose path named
					 * another file when read (each
					 * once; its error records say
					 * which) */
	uint64_t threads_at_once;	/* params.jobs, full mode: threads'
					 * rounds decoded on a worker, at
					 * once with others' */
	/* snapshot mode: ended threads whose last trace is kept for the
	 * snapshots now, its bytes; ended threads whose last trace was
	 * dropped (the user's memory limit refused it), their bytes */
	unsigned kept_threads, dropped_threads;
	uint64_t kept_bytes, dropped_bytes;
};
/* Once started.  Any thread. */
void ptd_source_get_stats(struct ptd_source *s, struct ptd_source_stats *ret);

/* ---- snapshots (decode thread) ---- */

/* Pause the producers (intel_pt: the events disabled, flushing the
 * hardware's buffers), read the sideband so far and the newest AUX bytes of
 * every thread that wrote some since its previous snapshot into @in, and
 * resume. */
int ptd_source_snapshot_read(struct ptd_source *s,
			     struct ptd_snapshot_info *in,
			     struct ptd_diag *diag);
/* Decode what _snapshot_read read, thread by thread from its first PSB
 * with a fresh decoder, the records going to the host; @err: the read's
 * result (not 0: nothing is decoded, the bytes are let go).  Fills the
 * per-thread counts and sums of @in, sets in->err and message on a
 * failure. */
void ptd_source_snapshot_decode(struct ptd_source *s,
				struct ptd_snapshot_info *in, int err);

#endif
