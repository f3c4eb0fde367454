/* SPDX-License-Identifier: MIT */
/*
 * TSC <-> perf time <-> wall clock, with the formulas of
 * include/uapi/linux/perf_event.h (see time.h).
 */
#include "perf/time.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

/* Read a field the kernel may be updating, once. */
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))

int ptd_perf_clock_from_page(const struct perf_event_mmap_page *pg,
			     struct ptd_perf_clock *ret,
			     struct ptd_diag *diag)
{
	/* Only its capabilities word is used, to decode the cap_* bits
	 * from one read of the shared word. */
	struct perf_event_mmap_page caps;
	struct ptd_perf_clock c;
	unsigned tries;
	bool zero_cap = false;

	if (!pg || !ret)
		return ptd_diagf(diag, -EINVAL, "no perf header page");
	/* The kernel bumps pg->lock around each update (a seqcount): copy
	 * the fields and retry until the count is unchanged. */
	for (tries = 0; tries < 1000; tries++) {
		uint32_t seq = READ_ONCE(pg->lock);

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		memset(&c, 0, sizeof(c));
		caps.capabilities = READ_ONCE(pg->capabilities);
		zero_cap = caps.cap_user_time_zero;
		c.time_zero = READ_ONCE(pg->time_zero);
		c.time_mult = READ_ONCE(pg->time_mult);
		c.time_shift = READ_ONCE(pg->time_shift);
		c.cap_user_time_short = caps.cap_user_time_short;
		c.time_cycles = READ_ONCE(pg->time_cycles);
		c.time_mask = READ_ONCE(pg->time_mask);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (READ_ONCE(pg->lock) == seq)
			break;
	}
	if (tries == 1000)
		return ptd_diagf(diag, -EAGAIN,
				 "perf header page kept changing while read");
	if (!zero_cap)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "the kernel gives no TSC conversion "
				 "(cap_user_time_zero is 0: no stable TSC on "
				 "this machine or VM), so PT timestamps cannot "
				 "be related to perf time");
	if (c.time_mult == 0 || c.time_shift >= 32)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "perf header page has time_mult %u, "
				 "time_shift %u: expected mult > 0, shift < 32",
				 c.time_mult, c.time_shift);
	*ret = c;
	return 0;
}

uint64_t ptd_perf_tsc_to_time(const struct ptd_perf_clock *c, uint64_t cyc)
{
	uint64_t quot, rem;

	if (c->cap_user_time_short)
		cyc = c->time_cycles + ((cyc - c->time_cycles) & c->time_mask);
	quot = cyc >> c->time_shift;
	rem = cyc & ((UINT64_C(1) << c->time_shift) - 1);
	/* rem < 2^shift and mult < 2^32: rem * mult < 2^64 for shift < 32. */
	return c->time_zero + quot * c->time_mult +
	       ((rem * c->time_mult) >> c->time_shift);
}

uint64_t ptd_perf_time_to_tsc(const struct ptd_perf_clock *c, uint64_t ts)
{
	uint64_t time = ts - c->time_zero;
	uint64_t quot = time / c->time_mult;
	uint64_t rem = time % c->time_mult;

	/* rem < mult < 2^32 and shift < 32: rem << shift < 2^64. */
	return (quot << c->time_shift) + (rem << c->time_shift) / c->time_mult;
}

int ptd_perf_rdtsc(uint64_t *ret)
{
#if defined(__x86_64__) || defined(__i386__)
	*ret = __rdtsc();
	return 0;
#else
	(void)ret;
	return -EOPNOTSUPP;
#endif
}

static int read_clock(const struct ptd_perf_clock *c, int clockid,
		      uint64_t *ret)
{
	struct timespec ts;
	uint64_t tsc;
	int err;

	if (c) {
		err = ptd_perf_rdtsc(&tsc);
		if (err < 0)
			return err;
		*ret = ptd_perf_tsc_to_time(c, tsc);
		return 0;
	}
	if (clock_gettime(clockid, &ts) < 0)
		return -errno;
	*ret = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return 0;
}

int ptd_perf_wallref_sample(const struct ptd_perf_clock *c, int clockid,
			    struct ptd_perf_wallref *ret)
{
	struct timespec wall;
	uint64_t before, after;
	int err;

	if (!ret)
		return -EINVAL;
	if ((err = read_clock(c, clockid, &before)) < 0)
		return err;
	if (clock_gettime(CLOCK_REALTIME, &wall) < 0)
		return -errno;
	if ((err = read_clock(c, clockid, &after)) < 0)
		return err;
	/* Midpoint without overflow; the perf clock is monotonic. */
	ret->perf_ns = before + (after - before) / 2;
	ret->wall_ns = (uint64_t)wall.tv_sec * 1000000000u +
		       (uint64_t)wall.tv_nsec;
	return 0;
}

uint64_t ptd_perf_time_to_wall(const struct ptd_perf_wallref *ref,
			       uint64_t perf_ns)
{
	return ref->wall_ns + (perf_ns - ref->perf_ns);
}
