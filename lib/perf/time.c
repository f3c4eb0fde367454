/* SPDX-License-Identifier: MIT */
/*
 * TSC <-> perf time <-> wall clock, with the formulas of
 * include/uapi/linux/perf_event.h (see time.h).
 */
#include "perf/time.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
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

/* ---- the software source's clock ---------------------------------------- */

/* One (TSC, CLOCK_MONOTONIC) pair. */
struct tsc_pair {
	uint64_t tsc;
	uint64_t mono;
};

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

/* The pair from the tightest rdtsc / clock_gettime / rdtsc window of a
 * few tries: the clock was read somewhere inside it, so its middle is off
 * by at most half its width. */
static int sample_pair(struct tsc_pair *ret)
{
	uint64_t best = UINT64_MAX;
	int err;

	for (unsigned i = 0; i < 32; i++) {
		struct timespec ts;
		uint64_t a, b;

		if ((err = ptd_perf_rdtsc(&a)) < 0)
			return err;
		if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
			return -errno;
		(void)ptd_perf_rdtsc(&b);
		if (b < a || b - a >= best)
			continue;
		best = b - a;
		ret->tsc = a + (b - a) / 2;
		ret->mono = ts_ns(&ts);
	}
	return best == UINT64_MAX ? -PTD_EUNSUPPORTED : 0;
}

/* The conversion through @p1 and @p2 (p2 later), anchored at @p2. */
static int clock_between(const struct tsc_pair *p1, const struct tsc_pair *p2,
			 struct ptd_perf_clock *ret, struct ptd_diag *diag)
{
	double ns_per_cyc, mult;
	uint64_t dtsc = p2->tsc - p1->tsc, dns = p2->mono - p1->mono;
	struct ptd_perf_clock c;
	unsigned shift;

	/* Plausible TSC rates: 1 MHz .. 100 GHz. */
	if (p2->tsc <= p1->tsc || p2->mono <= p1->mono ||
	    dtsc < dns / 1000 || dtsc / 100 > dns)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "the TSC does not advance with "
				 "CLOCK_MONOTONIC (%" PRIu64 " cycles in %"
				 PRIu64 " ns): no TSC clock for the software "
				 "source", dtsc, dns);
	ns_per_cyc = (double)dns / (double)dtsc;
	/* The largest shift whose mult still fits 32 bits: the most
	 * precise (mult is ~2^31 or more, a relative step below 1e-9). */
	shift = 31;
	while (shift > 0 && ns_per_cyc * (double)(UINT64_C(1) << shift) >=
				    (double)UINT32_MAX)
		shift--;
	mult = ns_per_cyc * (double)(UINT64_C(1) << shift) + 0.5;
	memset(&c, 0, sizeof(c));
	c.time_mult = mult >= (double)UINT32_MAX ? UINT32_MAX
						 : (uint32_t)mult;
	if (c.time_mult == 0)
		c.time_mult = 1;
	c.time_shift = (uint16_t)shift;
	/* time_zero: p2 converts to exactly its clock value (mod 2^64). */
	c.time_zero = p2->mono - ptd_perf_tsc_to_time(&c, p2->tsc);
	*ret = c;
	return 0;
}

/* The process's calibration (see time.h). */
static struct {
	pthread_mutex_t lock;
	bool have_base, have_clock;
	struct tsc_pair base;
	uint64_t span;			/* of the last computation */
	struct ptd_perf_clock clock;
} calib = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int calibrate_locked(struct ptd_perf_clock *ret,
			    struct ptd_diag *diag)
{
	struct tsc_pair now;
	int err;

	if (!calib.have_base) {
		if ((err = sample_pair(&calib.base)) < 0)
			return ptd_diagf(diag, err, "cannot read the TSC: %s",
					 ptd_strerror(err));
		calib.have_base = true;
	}
	if ((err = sample_pair(&now)) < 0)
		return ptd_diagf(diag, err, "cannot read the TSC: %s",
				 ptd_strerror(err));
	if (calib.have_clock && now.mono - calib.base.mono < 2 * calib.span) {
		*ret = calib.clock;
		return 0;
	}
	if (now.mono - calib.base.mono < PTD_PERF_CALIBRATE_MIN_NS) {
		uint64_t wait = PTD_PERF_CALIBRATE_MIN_NS -
				(now.mono - calib.base.mono);
		struct timespec ts = { (time_t)(wait / 1000000000u),
				       (long)(wait % 1000000000u) };

		while ((err = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts)) ==
		       EINTR)
			;
		if (err)
			return ptd_diagf(diag, -err, "clock_nanosleep: %s",
					 strerror(err));
		if ((err = sample_pair(&now)) < 0)
			return ptd_diagf(diag, err, "cannot read the TSC: %s",
					 ptd_strerror(err));
	}
	err = clock_between(&calib.base, &now, &calib.clock, diag);
	if (err < 0)
		return err;
	calib.have_clock = true;
	calib.span = now.mono - calib.base.mono;
	*ret = calib.clock;
	return 0;
}

int ptd_perf_clock_calibrate(struct ptd_perf_clock *ret,
			     struct ptd_diag *diag)
{
	int err;

	if (!ret)
		return ptd_diagf(diag, -EINVAL, "no clock to fill");
	(void)pthread_mutex_lock(&calib.lock);
	err = calibrate_locked(ret, diag);
	(void)pthread_mutex_unlock(&calib.lock);
	return err;
}

#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

int ptd_perf_clock_to_page(const struct ptd_perf_clock *c,
			   struct perf_event_mmap_page *pg)
{
	struct perf_event_mmap_page caps;

	if (!pg || (c && (c->time_mult == 0 || c->time_shift >= 32)))
		return -EINVAL;
	/* The kernel's seqcount: odd while writing; readers retry when
	 * the count changed under them. */
	WRITE_ONCE(pg->lock, READ_ONCE(pg->lock) + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	caps.capabilities = READ_ONCE(pg->capabilities);
	caps.cap_user_time_zero = c != NULL;
	caps.cap_user_time_short = c && c->cap_user_time_short;
	if (c) {
		WRITE_ONCE(pg->time_zero, c->time_zero);
		WRITE_ONCE(pg->time_mult, c->time_mult);
		WRITE_ONCE(pg->time_shift, c->time_shift);
		WRITE_ONCE(pg->time_cycles, c->time_cycles);
		WRITE_ONCE(pg->time_mask, c->time_mask);
	}
	WRITE_ONCE(pg->capabilities, caps.capabilities);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	WRITE_ONCE(pg->lock, READ_ONCE(pg->lock) + 1);
	return 0;
}
