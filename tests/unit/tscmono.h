/* SPDX-License-Identifier: MIT */
/*
 * The TSC and CLOCK_MONOTONIC read at one moment, for tests that hold a
 * TSC-to-perf-time conversion to the kernel's clock: CLOCK_MONOTONIC read
 * between two TSC reads, their midpoint its TSC, in the tightest window of
 * a few -- a thread preempted between two unbracketed reads (a vCPU on a
 * loaded host: milliseconds) is no clock error, nor is a cold first read.
 * Header-only; include after perf/time.h.
 */
#ifndef PTD_TESTS_TSCMONO_H
#define PTD_TESTS_TSCMONO_H

#include <stdint.h>
#include <time.h>

/* 0, or -EOPNOTSUPP where there is no TSC. */
static inline int tsc_mono_now(uint64_t *ret_tsc, uint64_t *ret_mono)
{
	uint64_t best = UINT64_MAX;

	for (unsigned i = 0; i < 16; i++) {
		struct timespec ts;
		uint64_t t0, t1;
		int r = ptd_perf_rdtsc(&t0);

		if (r < 0)
			return r;
		(void)clock_gettime(CLOCK_MONOTONIC, &ts);
		(void)ptd_perf_rdtsc(&t1);
		if (t1 - t0 < best) {
			best = t1 - t0;
			*ret_tsc = t0 + (t1 - t0) / 2;
			*ret_mono = (uint64_t)ts.tv_sec * 1000000000u +
				    (uint64_t)ts.tv_nsec;
		}
	}
	return 0;
}

#endif
