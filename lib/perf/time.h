/* SPDX-License-Identifier: MIT */
/*
 * TSC <-> perf time <-> wall clock.
 *
 * PT timestamps are TSC values; perf sideband records carry perf time (the
 * kernel's perf_clock(), i.e. local_clock(), unless the event was opened
 * with use_clockid).  The kernel publishes the conversion in the header
 * page of any mapped event (struct perf_event_mmap_page: time_zero,
 * time_mult, time_shift, valid when cap_user_time_zero is set) and
 * documents the formulas in include/uapi/linux/perf_event.h:
 *
 *   perf time -> TSC:  time = timestamp - time_zero;
 *                      quot = time / time_mult; rem = time % time_mult;
 *                      cyc = (quot << time_shift) + (rem << time_shift) / time_mult;
 *   TSC -> perf time:  quot = cyc >> time_shift;
 *                      rem  = cyc & ((1 << time_shift) - 1);
 *                      timestamp = time_zero + quot * time_mult +
 *                                  ((rem * time_mult) >> time_shift);
 *
 * The quot/rem split keeps every product inside 64 bits for any TSC; all
 * arithmetic is modulo 2^64 as in the kernel.  When cap_user_time_short is
 * set (counters narrower than 64 bits, not x86) the TSC is first widened:
 * cyc = time_cycles + ((cyc - time_cycles) & time_mask).
 */
#ifndef PTD_PERF_TIME_H
#define PTD_PERF_TIME_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/perf_event.h>

#include "common/diag.h"

struct ptd_perf_clock {
	uint64_t time_zero;
	uint32_t time_mult;	/* > 0 */
	uint16_t time_shift;	/* < 32 */
	bool cap_user_time_short;
	uint64_t time_cycles;
	uint64_t time_mask;
};

/* Read the conversion from a mapped event's header page, under the
 * page's seqlock (pg->lock) so the fields are one consistent set.
 * Returns 0 and fills *ret.
 * Returns -EINVAL if an argument is NULL.
 * Returns -PTD_EUNSUPPORTED if cap_user_time_zero is 0 (this kernel, clock
 *   or VM gives no TSC conversion: PT timestamps cannot be related to
 *   sideband times).
 * Returns -PTD_EFORMAT if time_mult is 0 or time_shift >= 32.
 * Returns -EAGAIN if the page kept changing while read (1000 tries). */
int ptd_perf_clock_from_page(const struct perf_event_mmap_page *pg,
			     struct ptd_perf_clock *ret,
			     struct ptd_diag *diag);

/* Convert a TSC value to perf time (ns) / perf time to TSC. */
uint64_t ptd_perf_tsc_to_time(const struct ptd_perf_clock *c, uint64_t tsc);
uint64_t ptd_perf_time_to_tsc(const struct ptd_perf_clock *c, uint64_t time);

/* A wall-clock reference: perf time @perf_ns and CLOCK_REALTIME @wall_ns
 * sampled at the same instant (as perf's HEADER_CLOCK_DATA). */
struct ptd_perf_wallref {
	uint64_t perf_ns;
	uint64_t wall_ns;
};

/* Sample a reference pair now.  Perf time is taken from the TSC through @c
 * when @c is not NULL (exact for the default perf clock; x86 only), and from
 * @clockid otherwise (for events opened with use_clockid, e.g.
 * CLOCK_MONOTONIC).  The wall clock is read between two reads of the perf
 * clock and paired with their midpoint.
 * Returns 0 and fills *ret.
 * Returns -EINVAL if @ret is NULL; -EOPNOTSUPP if @c is given on a machine
 *   without a TSC; -errno from clock_gettime. */
int ptd_perf_wallref_sample(const struct ptd_perf_clock *c, int clockid,
			    struct ptd_perf_wallref *ret);

/* Wall-clock ns (CLOCK_REALTIME) of perf time @perf_ns, by the offset of
 * @ref (works on either side of the reference; modulo 2^64). */
uint64_t ptd_perf_time_to_wall(const struct ptd_perf_wallref *ref,
			       uint64_t perf_ns);

/* Read the TSC (rdtsc).  Returns 0 and sets *ret, or -EOPNOTSUPP where
 * there is none (not x86). */
int ptd_perf_rdtsc(uint64_t *ret);

/*
 * The software PT source's clock: a conversion TSC -> CLOCK_MONOTONIC ns in
 * the kernel's form, which the source publishes in its buffers' header
 * pages (ptd_perf_clock_to_page) so that readers treat it like the
 * kernel's.  (The source stamps sideband records with CLOCK_MONOTONIC, so
 * this is its perf time.)
 *
 * How: pairs (TSC, CLOCK_MONOTONIC) are sampled, each as the middle of the
 * tightest rdtsc / clock_gettime / rdtsc window out of a few tries.  The
 * first call takes a baseline pair, waits PTD_PERF_CALIBRATE_MIN_NS and
 * takes a second one: the rate is (mono2 - mono1) / (tsc2 - tsc1) and
 * time_zero makes the second pair convert exactly.  The baseline is kept
 * for the process: a later call whose baseline has at least doubled in age
 * since the last computation re-measures the rate over the whole span
 * (and re-anchors time_zero now); otherwise it returns the last result.
 *
 * Error: each pair is off by at most half its window (w/2, ~10-30 ns on
 * x86 with the vDSO), so the rate is off by about w / span: with w = 40 ns
 * and the first span of 100 ms, 0.4 ppm, i.e. ~24 us after a minute and
 * ~0.4 us after a second; a daemon's later calls shrink it (span 10 min:
 * 0.07 ppm).  Measured on a KVM guest (clocksource tsc): 0.04 ppm from the
 * first call, 2.4 us a minute.  On top: CLOCK_MONOTONIC is slewed by NTP (up to 500 ppm,
 * usually < 10 ppm of drift changes) which a fixed rate cannot follow, and
 * the conversion is only as good as the TSC is invariant (constant_tsc,
 * nonstop_tsc).  The unit test checks the bound it documents: within
 * 50 us + 2 ppm of the time since calibration.
 */
#define PTD_PERF_CALIBRATE_MIN_NS 100000000ull

/* Returns 0 and fills *ret (cap_user_time_short false).
 * Returns -EINVAL if @ret is NULL.
 * Returns -EOPNOTSUPP on a machine without a TSC (not x86).
 * Returns -PTD_EUNSUPPORTED if the TSC does not advance with the clock (or
 *   the rate is outside 1 MHz .. 100 GHz).
 * Returns -errno from clock_gettime / clock_nanosleep.
 * Thread-safe. */
int ptd_perf_clock_calibrate(struct ptd_perf_clock *ret,
			     struct ptd_diag *diag);

/* Publish @c in header page @pg as the kernel does: time_zero, time_mult,
 * time_shift, cap_user_time_zero = 1 (cap_user_time_short from @c, with
 * time_cycles/time_mask), written inside the page's seqlock (pg->lock
 * incremented before and after) so a concurrent ptd_perf_clock_from_page
 * sees one consistent set.  @c NULL: clears cap_user_time_zero (no
 * conversion).  Returns 0, or -EINVAL for a NULL @pg or an invalid @c
 * (time_mult 0, time_shift >= 32). */
int ptd_perf_clock_to_page(const struct ptd_perf_clock *c,
			   struct perf_event_mmap_page *pg);

#endif
