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
#include "swpt/tracer.h"

/* One traced thread's buffer.  The producer side is the tracing thread's;
 * the reader side anybody's (one reader). */
struct ptd_livesink_thread {
	pid_t tid;
	struct ptd_perf_buf buf;
	struct ptd_perf_producer prod;
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
 * buffer already exists, -EINVAL for a NULL @s. */
int ptd_livesink_set_overwrite(struct ptd_livesink *s, bool on);

/* Stop every producer at its next output call and wait until none is
 * writing (a producer waiting for ring space is not writing: it stops
 * there).  Paused twice, resumed once is not counted: one pauser at a time.
 * Thread-safe; must not be called from the tracing thread. */
void ptd_livesink_pause(struct ptd_livesink *s);
/* Let the producers go on. */
void ptd_livesink_resume(struct ptd_livesink *s);
/* Whether paused (tests). */
bool ptd_livesink_paused(struct ptd_livesink *s);

/* The tracer output that writes into this sink. */
const struct ptd_swpt_out *ptd_livesink_out(struct ptd_livesink *s);

/* The threads' buffers in creation order, from index @from on: up to @max
 * pointers are copied to @out.  Thread-safe; the buffers live until
 * ptd_livesink_free.  Returns how many were copied. */
size_t ptd_livesink_threads(struct ptd_livesink *s, size_t from,
			    struct ptd_livesink_thread **out, size_t max);

#endif
