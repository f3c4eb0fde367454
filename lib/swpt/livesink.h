/* SPDX-License-Identifier: MIT */
/*
 * The software PT source's live output: what the tracer produces is written
 * into perf buffers laid out exactly as the kernel lays out an intel_pt
 * event's (header page, data ring, AUX area; lib/perf/ring.h), one buffer
 * per traced thread (perf's per-thread mode), through the kernel-faithful
 * producer (lib/perf/producer.h).  A live session reads them with the same
 * reader as the hardware's.
 *
 * What each thread's buffer holds, in order:
 *  - PERF_RECORD_ITRACE_START {pid, tid};
 *  - the image as it is when the thread's stream begins, as records (perf
 *    synthesizes these from /proc/PID/maps for a new attach; here they are
 *    the process's image changes so far, replayed);
 *  - its PT bytes in the AUX area, each batch announced by PERF_RECORD_AUX;
 *  - image changes where they fall in its stream: PERF_RECORD_MMAP2 for
 *    file code, PERF_RECORD_COMM with COMM_EXEC for an exec, and two
 *    ptd-private records the kernel has no equivalent for
 *    (lib/perf/sideband.h): PTD_PERF_RECORD_CODE (the bytes of non-file
 *    code, in chunks) and PTD_PERF_RECORD_UNMAP;
 *  - PERF_RECORD_EXIT {pid, tid} when its stream ends.
 * Records carry sample_id_all trailers of PTD_SIDEBAND_SAMPLE_TYPE.
 *
 * Nothing is lost: where the kernel would drop (ring full), this producer
 * waits for the reader, which stalls the traced program instead.  In
 * overwrite (snapshot) mode (ptd_livesink_set_overwrite) the AUX areas are
 * rings that overwrite their oldest bytes, as an intel_pt event's mapped
 * read-only: PT bytes never wait and are not announced by PERF_RECORD_AUX;
 * sideband records still wait for room in the data ring.
 *
 * Pausing (the software PERF_EVENT_IOC_DISABLE): ptd_livesink_pause makes
 * every producer stop at its next output call -- the tracing thread waits
 * there, so the traced program is stopped -- and returns once none is in
 * the middle of writing; the buffers are then still until
 * ptd_livesink_resume.
 */
#ifndef PTD_SWPT_LIVESINK_H
#define PTD_SWPT_LIVESINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "perf/producer.h"
#include "perf/ring.h"
#include "perf/time.h"
#include "swpt/tracer.h"

/* One traced thread's buffer.  The producer side is the tracing thread's;
 * the reader side anybody's (one reader). */
struct ptd_livesink_thread {
	pid_t tid;
	uint64_t seq;			/* the how-manieth thread to begin */
	struct ptd_perf_buf buf;	/* per-CPU mode: none (zeroed) */
	struct ptd_perf_producer prod;
	/* per-CPU mode (tracing thread's; read them once it ended): its
	 * virtual CPU, its PT batches, how often it moved to another CPU */
	unsigned cpu;
	uint64_t batches;
	unsigned migrations;
	/* set (release) once the EXIT record is in the ring: after the
	 * reader drained past it, nothing more comes */
	atomic_bool ended;
};

struct ptd_livesink;

/* @data_size/@aux_size: each thread's rings (powers of two of pages).
 * @wake_fd: an eventfd written when data is ready (-1: none), not owned.
 * @cancel: when non-zero (from any thread), a producer waiting for space
 * gives up with -ECANCELED (may be NULL).
 * Returns 0 or -EINVAL (sizes) / -ENOMEM. */
int ptd_livesink_new(pid_t pid, size_t data_size, size_t aux_size,
		     int wake_fd, atomic_int *cancel,
		     struct ptd_livesink **ret);
void ptd_livesink_free(struct ptd_livesink *s);

/* Overwrite (snapshot) mode for the buffers of threads that begin from now
 * on (call it before tracing starts).  Returns 0, or -EBUSY if a thread's
 * buffer already exists, -EINVAL for a NULL @s (or @on in per-CPU mode). */
int ptd_livesink_set_overwrite(struct ptd_livesink *s, bool on);

/* The TSC -> perf time clock every buffer publishes in its header page
 * (call it before tracing starts; per-CPU buffers made already get it
 * now).  Without it, each buffer publishes a calibration made when the
 * buffer is (ptd_perf_clock_calibrate).  Returns 0, or -EINVAL (NULL, a
 * clock with time_mult 0 or time_shift >= 32). */
int ptd_livesink_set_clock(struct ptd_livesink *s,
			   const struct ptd_perf_clock *c);

/* Per-CPU mode, at most this many virtual CPUs. */
#define PTD_LIVESINK_MAX_CPUS 64u

/*
 * Per-CPU mode (perf's default layout for intel_pt: one event per CPU with
 * inherit=1): @ncpus virtual CPUs, each with one perf buffer of the sizes
 * given to ptd_livesink_new, instead of one buffer per thread.  Call it
 * before tracing starts; overwrite mode is not supported with it.
 *  - A thread gets a virtual CPU when it begins, round-robin; every
 *    @migrate_every-th batch of its PT bytes (0: never) it moves to the
 *    next CPU (to exercise migration: SWITCH OUT on the old one).
 *  - When a CPU's running thread changes: PERF_RECORD_SWITCH OUT of the
 *    old one, then SWITCH IN of the new one (per-task switch records, as
 *    an inherited event writes them); a new thread: ITRACE_START {pid,
 *    tid} on its CPU instead of the IN.
 *  - Switches happen only between two batches of PT bytes (pt() calls),
 *    and each batch is written whole as AUX chunks of the thread's CPU,
 *    so each thread's bytes, split back out (perf/percpu.h), are exactly
 *    its per-thread stream: it goes on after a switch where its PT left
 *    off; no PSB is inserted and no TIP.PGD is waited for.
 *  - Image changes (MMAP2, COMM exec, ptd CODE / UNMAP) are the
 *    process's: written once, into the buffer of the CPU that ran the last
 *    batch, after a SWITCH OUT of every running thread (so every CPU's
 *    bytes before the change end with a timed record; the next batch
 *    switches back IN).  They are not replayed for new threads: the reader
 *    keeps the process's image (decode/cpufeed.h).
 *  - A thread's end: SWITCH OUT (if running), then PERF_RECORD_EXIT on its
 *    CPU.
 *  - Every record has sample_id_all (PTD_SIDEBAND_SAMPLE_TYPE) with
 *    cpu = the virtual CPU and strictly increasing times (CLOCK_MONOTONIC
 *    nanoseconds, raised by 1 where the clock did not move).
 * Returns 0, or -EINVAL (NULL, @ncpus 0 or above PTD_LIVESINK_MAX_CPUS,
 * overwrite mode set), -EBUSY (a thread already began, or called twice),
 * -ENOMEM. */
int ptd_livesink_set_cpus(struct ptd_livesink *s, unsigned ncpus,
			  unsigned migrate_every);

/* Per-CPU mode: the CPUs' buffers, up to @max (all live until
 * ptd_livesink_free).  Returns how many were copied (0: not per-CPU). */
size_t ptd_livesink_cpus(struct ptd_livesink *s, struct ptd_perf_buf **out,
			 size_t max);

/* Stop every producer at its next output call and wait until none is
 * writing (a producer waiting for ring space is not writing: it stops
 * there).  Paused twice, resumed once is not counted: one pauser at a time.
 * Thread-safe; must not be called from the tracing thread. */
void ptd_livesink_pause(struct ptd_livesink *s);
/* Ask the tracer to hand over every thread's PT bytes it holds (it
 * batches them: swpt/tracer.h) -- once thread @tid (0: none) has had a
 * stop taken at or after CLOCK_MONOTONIC @after_ns, so that what it ran
 * then is in them -- @kick(@ctx) it out of a wait for a stop, and wait at
 * most @ms for it to have: true once it has.  Not from the tracing
 * thread.  A snapshot taken right after holds the trace up to where each
 * thread stands (a tracer that does not come round in time -- waiting
 * for room in a ring its reader holds, a thread @tid blocked in a
 * syscall since -- leaves a thread's last batch out). */
bool ptd_livesink_flush(struct ptd_livesink *s, pid_t tid, int64_t after_ns,
			void (*kick)(void *ctx), void *ctx, unsigned ms);
/* Let the producers go on. */
void ptd_livesink_resume(struct ptd_livesink *s);
/* Whether paused (tests). */
bool ptd_livesink_paused(struct ptd_livesink *s);

/* The tracer output that writes into this sink. */
const struct ptd_swpt_out *ptd_livesink_out(struct ptd_livesink *s);

/* The threads' buffers in the order they began, those with seq @from or
 * later (a reader that saw seq N asks for N + 1 next): up to @max
 * pointers are copied to @out.  Thread-safe; a buffer lives until the
 * reader releases it (ptd_livesink_release) or ptd_livesink_free.
 * Returns how many were copied.  (Per-CPU mode: the threads not ended,
 * without buffers; an ended one is freed at its end.) */
size_t ptd_livesink_threads(struct ptd_livesink *s, uint64_t from,
			    struct ptd_livesink_thread **out, size_t max);

/* The reader is done with ended thread @t (it read past its EXIT): its
 * buffer is freed and it leaves the list (its counts stay in the
 * stats).  Returns 0, or -EBUSY if @t has not ended yet (its producer
 * may still be finishing the end: ask again later). */
int ptd_livesink_release(struct ptd_livesink *s,
			 struct ptd_livesink_thread *t);

struct ptd_livesink_stats {
	uint64_t threads;	/* begun */
	unsigned live;		/* begun, not ended */
	unsigned migrated;	/* per-CPU mode: ended threads that ran on
				 * more than one CPU */
	uint64_t aux_written;	/* PT bytes written into the AUX areas,
				 * released threads' included */
};

/* Thread-safe. */
void ptd_livesink_get_stats(struct ptd_livesink *s,
			    struct ptd_livesink_stats *ret);

#endif
