/* SPDX-License-Identifier: MIT */
/*
 * Writing a software-source capture as an LLDB Intel PT trace bundle, so
 * that `lldb -o "trace load DIR/trace.json"` (and ptd's own reader,
 * lldb/trace.h) can decode it:
 *
 *   DIR/trace.json                   per-thread description
 *   DIR/threads/TID.intelpt.trace    each thread's PT, copied
 *   DIR/modules/N/BASENAME           each mapped file, copied whole
 *   DIR/modules/N/BASENAME.elf       each snapshot of non-file code
 *                                    ([vdso], JIT), wrapped as an ELF
 *                                    (lldb/elfwrap.h) at its address
 *
 * A capture with a clock gets "tscPerfZeroConversion" (timeZero a decimal
 * string, as LLDB writes it) and, with its wall-clock reference,
 * "ptdWallClock" (lldb/trace.h), so that a decode of the bundle gives the
 * records the "time" and "wall" the live stream had.
 *
 * A module's loadAddress is what LLDB expects: the address its first
 * PT_LOAD segment was loaded at (for a file mapped from offset 0, the
 * lowest mapping).  An LLDB bundle describes one static image per process,
 * so captures whose image cannot be one are refused: an exec after code
 * was mapped, one file loaded at two different addresses, or two pieces of
 * code at overlapping addresses (JIT code rewritten in place).  The same
 * snapshot taken twice with the same bytes is one module.
 *
 * The bundle is written to a temporary directory beside @out_dir and
 * renamed to @out_dir at the end: a reader never sees half a bundle.
 */
#ifndef PTD_LLDB_EXPORT_H
#define PTD_LLDB_EXPORT_H

#include "aspace/iscache.h"
#include "common/diag.h"
#include "swpt/capture.h"

/* Write @c as an LLDB bundle in @out_dir (which must not exist).
 * Returns 0, or: -EINVAL (NULL argument), -EEXIST (@out_dir exists),
 * -PTD_EUNSUPPORTED (the capture's image is not one static image: the
 * message names the events), -PTD_EFORMAT (a mapped file is not an ELF),
 * -ENOENT (a mapped file or snapshot is missing), -errno writing, with a
 * message in @diag.  Nothing is left behind on failure. */
int ptd_lldb_export_capture(const struct ptd_capture *c, const char *out_dir,
			    struct ptd_diag *diag);

/* The same with the mapped files read where @resolve says (traced path ->
 * file; e.g. ptd_bundle_resolve for a verified bundle's copies); the
 * bundle still names them by their traced paths.  A path the resolver
 * does not know is refused with its message. */
int ptd_lldb_export_capture_resolved(const struct ptd_capture *c,
				     ptd_iscache_resolve_fn resolve,
				     void *resolve_ctx, const char *out_dir,
				     struct ptd_diag *diag);

#endif
