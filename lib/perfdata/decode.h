/* SPDX-License-Identifier: MIT */
/*
 * Decoding the Intel PT of a perf.data file (read.h) through the input
 * interface (input/input.h).
 *
 * Streams.  Per-thread recordings (AUXTRACE records with a tid): a thread's
 * stream is its AUXTRACE payloads in input order; a payload whose AUX
 * offset jumps past the end of the previous one leaves a gap of known size
 * (an error record "lost N trace bytes"; the decoder resyncs after it).
 * Per-CPU recordings (tid (u32)-1, or AUXTRACE_INFO per_cpu_mmaps): each
 * PERF_RECORD_AUX {aux_offset, aux_size} of a CPU takes those bytes from
 * that CPU's AUXTRACE payloads, and perf/percpu.h gives them to the thread
 * that owns the CPU then (ITRACE_START / SWITCH records; sample_type must
 * have TID and CPU, and every event the same sample_id layout).
 *
 * Image rule (positions).  perf.data records are taken in input order.  An
 * image change (MMAP/MMAP2 of executable code, COMM exec) read before a
 * thread's first trace byte is in effect when its stream starts; one read
 * after N bytes of the thread's stream were read is applied when its
 * decoder reaches stream offset N (removals -- exec -- wait, as for every
 * timeline, until tracing is disabled there); for every thread of the
 * process alike, each at its own N.  A file written with all sideband
 * before the trace (as perf record's synthesized start, or ptd's exporter)
 * thus decodes every thread against every mapping, as perf's timeless
 * decoding does.  Payload padding: perf pads each AUXTRACE payload to 8
 * bytes and starts the next at the unpadded end; that overlap, and the
 * padding after the end the thread's PERF_RECORD_AUX records announce,
 * is dropped.
 *
 * Time.  When AUXTRACE_INFO carries the kernel's TSC conversion
 * (cap_user_time_zero), records with a TSC also get perf time ("time"), as
 * perf's own decoder computes it; no wall time (perf.data has no
 * reference between perf time and the wall clock unless recorded with
 * --clockid).  MTC and CYC packets refine the TSC between TSC packets
 * as perf's decoder has them: the MTC period from the intel_pt event's
 * mtc_period field (AUXTRACE_INFO's MTC words are config masks), the
 * TSC:CTC ratio and the nominal core:bus ratio from AUXTRACE_INFO.
 *
 * Files.  A mapped file is found under o->sysroot (the traced path
 * appended), else by build-id (from the MMAP2 record or the BUILD_ID
 * feature): o->buildid_dir/.build-id/xx/REST/elf (or .../REST/vdso, as
 * perf caches a vDSO, or .../xx/REST), or without o->buildid_dir the same
 * in $HOME/.debug then /usr/lib/debug/.build-id/xx/REST.debug; else at its
 * traced path.  Non-file code ("[vdso]"...) is found only by build-id; a
 * "[vdso]" whose build-id is this machine's own vDSO's (a recording made
 * here) is that vDSO, as perf takes its own.  A mapping whose file is
 * not found is left out of the image, and each thread it concerns gets an
 * error record (context "image '/path' (build-id HEX): not found ...",
 * code -PTD_ENOIMAGE) at its position; decoding goes on (code there gives
 * decode error records).
 *
 * Kernel code.  When an intel_pt event traces the kernel (exclude_kernel
 * 0), the kernel's mappings (MMAP records with the kernel cpumode or pid
 * -1: "[kernel.kallsyms]_text", modules, x86 entry trampolines) are in
 * every process's image from where they were read on, and again after
 * each exec; records name them "[kernel.kallsyms]" or the module.  Their
 * bytes come from one ELF whose program headers place code at kernel
 * addresses, found once: o->kernel (that one or none); else the kcore
 * copy of a `perf record --kcore` directory (DIR/kcore_dir/kcore, when the
 * input is DIR); else by the kernel's build-id (perf buildid-cache
 * --kcore's DIR/[kernel.kcore]/BID/TIMESTAMP/kcore, newest, in o->buildid_dir or
 * ~/.debug, then the build-id caches as for files); else vmlinux-RELEASE
 * (the OSRELEASE feature) in /usr/lib/debug/boot, /boot,
 * /usr/lib/debug/lib/modules/RELEASE/vmlinux or
 * /lib/modules/RELEASE/build/vmlinux, under o->sysroot.  A vmlinux (which
 * has no modules) whose build-id differs from the recorded one is not
 * taken.  A kernel not found gives every thread one error record (code
 * -PTD_ENOIMAGE, naming the mapping, the build-id, where ptd looked and
 * what to do); likewise one for the first mapping the ELF does not hold.
 * TEXT_POKE records (the kernel patching its own code: ftrace, static
 * keys) put their new bytes in place from where they are read, in every
 * image, as perf applies them to its kcore copy; records name that code
 * "[text_poke]".
 * A directory with data.N files (perf record --threads) is refused.
 *
 * Losses: AUX records flagged TRUNCATED/PARTIAL/COLLISION and
 * PERF_RECORD_LOST give error records (code -PTD_ETRUNC, context naming
 * the loss and its byte or record count) in the affected thread.
 *
 * Snapshot mode: a payload that starts where the thread's last one ended,
 * or before that with the bytes it shares with it identical (taken before
 * the ring overwrote them), continues the stream (the shared bytes once);
 * any other is a separate snapshot (an error record "snapshot: trace
 * between ... not recorded" between them).
 *
 * Decoder config: o->decode, with the CPU from the CPUID feature unless
 * o->cpu_given, and (unless o->decode has one) the address filter perf
 * recorded with (AUXTRACE_INFO's text, perf-record --filter syntax with
 * addresses, perf/addrfilter.h), resolved per process against its MMAP
 * records, as libipt needs it for erratum SKL014; a text or range that does
 * not resolve (symbol names, a file never mapped) is said through the
 * sink's notice and left out.  The AUXTRACE_INFO noretcomp bit needs no decoder setting
 * (libipt follows the trace either way).
 */
#ifndef PTD_PERFDATA_DECODE_H
#define PTD_PERFDATA_DECODE_H

#include <stddef.h>

#include "input/input.h"
#include "perfdata/read.h"

/* ptd_input_decode_fn for perf.data: reads @path (ptd_perfdata_open) and
 * decodes it.  Errors: those of ptd_perfdata_open; -PTD_EUNSUPPORTED (no
 * Intel PT AUXTRACE_INFO, per-CPU data without the needed sample_id
 * fields); -ENOENT for o->have_tid naming a thread the file does
 * not have; -ENOMEM. */
int ptd_perfdata_decode(const char *path, const struct ptd_input_opts *o,
			const struct ptd_input_sink *sink,
			size_t *ret_thread_errors, struct ptd_diag *diag);

/* The same on a parsed file. */
int ptd_perfdata_decode_parsed(const struct ptd_perfdata *pd,
			       const struct ptd_input_opts *o,
			       const struct ptd_input_sink *sink,
			       size_t *ret_thread_errors,
			       struct ptd_diag *diag);

#endif
