/* SPDX-License-Identifier: MIT */
/*
 * Export a software-source capture (swpt/capture.h) as a perf.data file
 * that perf (Debian's perf 6.1) decodes: `perf script --itrace=i1i` then
 * shows the instructions the capture's PT holds.
 *
 * The file is what `perf record --per-thread -e intel_pt//u` would write:
 *
 *  - two events: intel_pt (attr.type from the machine's intel_pt PMU if it
 *    has one, else PTD_PERFDATA_PT_TYPE_DEFAULT; config bits pt, branch
 *    and the capture's tsc / noretcomp / psb_period, at the PMU's format/
 *    positions or the usual ones) and a dummy tracking event (mmap2, comm,
 *    task, sample_id_all), each with one sample id;
 *  - data: AUXTRACE_INFO (Intel PT, perf 6.1's priv[] layout, timeless:
 *    no time conversion), then the process's COMM (exec), and in timeline
 *    order the image changes (MMAP2) with each thread's FORK (other than
 *    the first), COMM and ITRACE_START where the thread started; then per
 *    thread its PT as one AUXTRACE record (data zero-padded to 8 bytes) and
 *    an AUX record; then each thread's EXIT.  Every kernel-style record
 *    carries a sample_id trailer (TID, TIME, CPU, IDENTIFIER) with times
 *    increasing in file order;
 *  - features: HEADER_AUXTRACE (the index of the AUXTRACE records),
 *    ARCH, NRCPUS, CPUID (for an Intel capture cpu).
 *
 * What perf cannot be told, because it has no record for it or decodes a
 * thread only when it has seen every mapping (per-thread files have no
 * timestamps perf could order decoding by):
 *  - an UNMAP event is not written (perf keeps a mapping until another
 *    replaces it);
 *  - non-file code (vDSO, JIT, anonymous): each snapshot is mapped from
 *    its snapshot file in the capture directory (absolute path, pgoff 0;
 *    perf reads code from any plain file), so perf decodes the exact
 *    bytes, and the capture directory must stay where it is; code that
 *    changes in place (a JIT rewriting a mapping) shows only the version
 *    mapped last;
 *  - an EXEC after the start is a COMM exec record; the old program's
 *    mappings stay unless new ones replace them (prog-exec decodes).
 */
#ifndef PTD_PERFDATA_WRITE_H
#define PTD_PERFDATA_WRITE_H

#include "common/diag.h"
#include "swpt/capture.h"

/* attr.type used for intel_pt when this machine has no intel_pt PMU. */
#define PTD_PERFDATA_PT_TYPE_DEFAULT 8u

/* The sample ids of the two events. */
#define PTD_PERFDATA_PT_ID 1u
#define PTD_PERFDATA_DUMMY_ID 2u

/*
 * Write capture @c as the perf.data file @path, atomically: a temporary
 * file in @path's directory, renamed over @path only when complete; on any
 * failure no file is left at @path (an old one stays as it was) and the
 * temporary is removed.
 * Returns 0.
 * Returns -EINVAL if @c or @path is NULL or @c has no threads.
 * Returns -errno (message naming the file) if the temporary cannot be
 *   created or written, or the rename fails.
 * Returns what ptd_capture_open_pt() returns (-PTD_ECHECKSUM for a PT file
 *   whose size changed, before or while it is written; -errno for a
 *   missing one) with its message, and
 *   -errno naming the file for a snapshot file that cannot be opened.
 * Returns -PTD_ELIMIT if a record or the file would exceed perf's limits
 *   (a path too long for one MMAP2 record).
 */
int ptd_perfdata_write_capture(const struct ptd_capture *c, const char *path,
			       struct ptd_diag *diag);

#endif
