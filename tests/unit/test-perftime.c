/* SPDX-License-Identifier: MIT */
/* Tests for perf/time.h: the kernel's TSC <-> perf time formulas against
 * hand-computed vectors and a 128-bit reference over the whole 64-bit
 * range, the header-page reader, wall-clock references, and a live page of
 * a real software event. */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/strutil.h"
#include "perf/time.h"
#include "unit/tscmono.h"

__extension__ typedef unsigned __int128 u128;

static struct ptd_perf_clock clk(uint64_t zero, uint32_t mult, uint16_t shift)
{
	struct ptd_perf_clock c;

	memset(&c, 0, sizeof(c));
	c.time_zero = zero;
	c.time_mult = mult;
	c.time_shift = shift;
	return c;
}

/* Worked by hand: mult/2^shift = 3/4 ns per cycle. */
static void test_vectors(void)
{
	struct ptd_perf_clock c = clk(1000, 3u << 29, 31);

	CHECK_EQ_U64(ptd_perf_tsc_to_time(&c, 0), 1000);
	CHECK_EQ_U64(ptd_perf_tsc_to_time(&c, 4000), 4000);	/* 1000+3000 */
	CHECK_EQ_U64(ptd_perf_tsc_to_time(&c, 5), 1003);	/* floor 3.75 */
	/* 2^63 cycles: quot = 2^32, rem = 0 -> 2^32 * 3 * 2^29 */
	CHECK_EQ_U64(ptd_perf_tsc_to_time(&c, UINT64_C(1) << 63),
		     1000 + 3 * (UINT64_C(1) << 61));
	/* near 2^64: quot = 2^33 - 1, rem = 2^31 - 1:
	 * (2^33-1)*3*2^29 + floor((2^31-1)*3*2^29 / 2^31)
	 * = 3*2^62 - 3*2^29 + floor(3*2^29 - 3/4) = 3*2^62 - 1 */
	CHECK_EQ_U64(ptd_perf_tsc_to_time(&c, UINT64_MAX),
		     1000 + 3 * (UINT64_C(1) << 62) - 1);
	/* reverse */
	CHECK_EQ_U64(ptd_perf_time_to_tsc(&c, 1000), 0);
	CHECK_EQ_U64(ptd_perf_time_to_tsc(&c, 4000), 4000);
	CHECK_EQ_U64(ptd_perf_time_to_tsc(&c, 1003), 4);	/* floor 4.0 */
	CHECK_EQ_U64(ptd_perf_time_to_tsc(&c, 1004), 5);	/* floor 5.33 */
	CHECK_EQ_U64(ptd_perf_time_to_tsc(&c, 1000 + 3 * (UINT64_C(1) << 61)),
		     UINT64_C(1) << 63);
	/* a time before time_zero wraps modulo 2^64, as in the kernel */
	CHECK_EQ_U64(ptd_perf_time_to_tsc(&c, 999),
		     ptd_perf_time_to_tsc(&c, 999));

	/* mult == 2^shift: the identity plus time_zero */
	c = clk(UINT64_C(0xfffffffffffff000), 1u << 20, 20);
	CHECK_EQ_U64(ptd_perf_tsc_to_time(&c, 0x1000), 0);
	CHECK_EQ_U64(ptd_perf_time_to_tsc(&c, 0), 0x1000);
	/* shift 0 */
	c = clk(7, 3, 0);
	CHECK_EQ_U64(ptd_perf_tsc_to_time(&c, 10), 37);
	CHECK_EQ_U64(ptd_perf_time_to_tsc(&c, 37), 10);
	CHECK_EQ_U64(ptd_perf_time_to_tsc(&c, 38), 10);
}

/* The split formulas equal the exact 128-bit products, floor'd. */
static uint64_t ref_to_time(const struct ptd_perf_clock *c, uint64_t x)
{
	u128 p = (u128)x * c->time_mult;

	return c->time_zero + (uint64_t)(p >> c->time_shift);
}

static uint64_t ref_to_tsc(const struct ptd_perf_clock *c, uint64_t t)
{
	u128 d = (u128)(t - c->time_zero)
			      << c->time_shift;

	return (uint64_t)(d / c->time_mult);
}

static uint64_t rnd64(uint64_t *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(2685821657736338717);
}

static void test_reference_and_roundtrip(void)
{
	/* 2.5 GHz TSC (0.4 ns/cycle) and 1.1 GHz; kernel-like zeros */
	const struct ptd_perf_clock clocks[] = {
		clk(0, 858993459, 31),
		clk(UINT64_C(0xfffff2b1c4d2e0f0), 858993459, 31),
		clk(123456789, 1952257861, 31),
		clk(0, 3u << 29, 31),
		clk(42, 1, 0),
	};
	uint64_t seed = 0x9e3779b97f4a7c15u;
	unsigned k, i, bad = 0;

	for (k = 0; k < PTD_ARRAY_SIZE(clocks); k++) {
		const struct ptd_perf_clock *c = &clocks[k];
		/* cycles per ns, rounded up: the TSC resolution lost */
		uint64_t slack = ((UINT64_C(1) << c->time_shift) +
				  c->time_mult - 1) / c->time_mult + 1;

		for (i = 0; i < 200000; i++) {
			uint64_t x, t, x2, t2;

			if (i < 64)	/* near 2^64 and near 0 */
				x = i < 32 ? UINT64_MAX - i : i;
			else if (i < 128)
				x = UINT64_C(1) << (i - 64);
			else
				x = rnd64(&seed) >> (i % 64);
			t = ptd_perf_tsc_to_time(c, x);
			if (t != ref_to_time(c, x) && bad++ < 5)
				CHECK_EQ_U64(t, ref_to_time(c, x));
			x2 = ptd_perf_time_to_tsc(c, x);
			if (x2 != ref_to_tsc(c, x) && bad++ < 5)
				CHECK_EQ_U64(x2, ref_to_tsc(c, x));
			/* TSC -> time -> TSC loses less than one ns worth of
			 * cycles (all clocks here have mult <= 2^shift, so
			 * nothing wraps) */
			x2 = ptd_perf_time_to_tsc(c, t);
			if ((x2 > x || x - x2 > slack) && bad++ < 5)
				CHECK_FAIL_("tsc %#lx -> %#lx -> %#lx",
					    (unsigned long)x, (unsigned long)t,
					    (unsigned long)x2);
			/* time -> TSC -> time is exact to 1 ns, where the
			 * TSC does not pass 2^64 */
			if ((u128)(x - c->time_zero) << c->time_shift >=
			    (u128)c->time_mult << 64)
				continue;
			t2 = ptd_perf_tsc_to_time(c, ptd_perf_time_to_tsc(c, x));
			if ((t2 - c->time_zero > x - c->time_zero ||
			     x - t2 > 1) && bad++ < 5)
				CHECK_FAIL_("time %#lx -> %#lx", (unsigned long)x,
					    (unsigned long)t2);
		}
	}
	CHECK_EQ_INT(bad, 0);
}

static void test_time_short(void)
{
	struct ptd_perf_clock c = clk(0, 1u << 10, 10);

	c.cap_user_time_short = true;
	c.time_cycles = UINT64_C(0x1234500000000);
	c.time_mask = UINT64_C(0xffffffff);
	/* a 32-bit counter value is widened around time_cycles */
	CHECK_EQ_U64(ptd_perf_tsc_to_time(&c, 0x10),
		     UINT64_C(0x1234500000010));
}

static void test_from_page(void)
{
	struct perf_event_mmap_page *pg = calloc(1, 4096);
	struct ptd_perf_clock c;
	struct ptd_diag diag = { "" };

	REQUIRE(pg);
	pg->time_zero = 77;
	pg->time_mult = 858993459;
	pg->time_shift = 31;
	memset(&c, 0xcd, sizeof(c));
	CHECK_EQ_INT(ptd_perf_clock_from_page(pg, &c, &diag),
		     -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(diag.msg, "cap_user_time_zero is 0");
	CHECK_EQ_U64(c.time_zero, 0xcdcdcdcdcdcdcdcdu);
	pg->cap_user_time_zero = 1;
	CHECK_EQ_INT(ptd_perf_clock_from_page(pg, &c, &diag), 0);
	CHECK_EQ_U64(c.time_zero, 77);
	CHECK_EQ_INT(c.time_mult, 858993459);
	CHECK_EQ_INT(c.time_shift, 31);
	CHECK(!c.cap_user_time_short);
	pg->time_mult = 0;
	CHECK_EQ_INT(ptd_perf_clock_from_page(pg, &c, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "time_mult 0");
	pg->time_mult = 1;
	pg->time_shift = 32;
	CHECK_EQ_INT(ptd_perf_clock_from_page(pg, &c, &diag), -PTD_EFORMAT);
	CHECK_EQ_INT(ptd_perf_clock_from_page(NULL, &c, &diag), -EINVAL);
	free(pg);
}

static uint64_t now_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_wallref(void)
{
	struct ptd_perf_wallref ref;
	uint64_t mono, wall;

	CHECK_EQ_INT(ptd_perf_wallref_sample(NULL, CLOCK_MONOTONIC, NULL),
		     -EINVAL);
	REQUIRE(ptd_perf_wallref_sample(NULL, CLOCK_MONOTONIC, &ref) == 0);
	mono = now_ns(CLOCK_MONOTONIC);
	wall = now_ns(CLOCK_REALTIME);
	CHECK(mono >= ref.perf_ns && mono - ref.perf_ns < 100000000u);
	CHECK(wall >= ref.wall_ns && wall - ref.wall_ns < 100000000u);
	CHECK_EQ_U64(ptd_perf_time_to_wall(&ref, ref.perf_ns), ref.wall_ns);
	CHECK_EQ_U64(ptd_perf_time_to_wall(&ref, ref.perf_ns + 5),
		     ref.wall_ns + 5);
	CHECK_EQ_U64(ptd_perf_time_to_wall(&ref, ref.perf_ns - 1000000),
		     ref.wall_ns - 1000000);
	/* "now" in perf time maps to "now" on the wall clock */
	mono = now_ns(CLOCK_MONOTONIC);
	wall = now_ns(CLOCK_REALTIME);
	{
		int64_t d = (int64_t)(ptd_perf_time_to_wall(&ref, mono) - wall);

		CHECK(d > -50000000 && d < 50000000);
	}
}

/* A real header page of a software dummy event on this machine. */
static void test_live_page(void)
{
	struct perf_event_attr a;
	struct perf_event_mmap_page *pg;
	struct ptd_perf_clock c;
	struct ptd_perf_wallref ref;
	struct ptd_diag diag = { "" };
	long page = sysconf(_SC_PAGESIZE);
	uint64_t tsc = 0, perf_now, mono = 0;
	int64_t d;
	int fd, err;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.exclude_kernel = 1;
	fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "note: perf_event_open refused (%s, see "
				"/proc/sys/kernel/perf_event_paranoid): "
				"skipping the live page check\n",
			strerror(errno));
		return;
	}
	pg = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
	REQUIRE(pg != MAP_FAILED);
	err = ptd_perf_clock_from_page(pg, &c, &diag);
	if (!pg->cap_user_time_zero) {
		CHECK_EQ_INT(err, -PTD_EUNSUPPORTED);
		CHECK_CONTAINS(diag.msg, "cap_user_time_zero");
		fprintf(stderr, "note: cap_user_time_zero is 0 on this machine "
				"(no stable TSC exposed, typical of a VM): "
				"skipping the TSC-vs-clock check\n");
		goto out;
	}
	CHECK_EQ_INT(err, 0);
	CHECK_EQ_INT(c.time_mult, pg->time_mult);
	if (tsc_mono_now(&tsc, &mono) < 0) {
		fprintf(stderr, "note: no TSC on this architecture: skipping "
				"the TSC-vs-clock check\n");
		goto out;
	}
	perf_now = ptd_perf_tsc_to_time(&c, tsc);
	d = (int64_t)(mono - perf_now);
	fprintf(stderr, "note: CLOCK_MONOTONIC - TSC-derived perf time = "
			"%lld ns\n", (long long)d);
	/* perf's default clock is local_clock(), which on x86 with a stable
	 * TSC tracks CLOCK_MONOTONIC closely. */
	CHECK(d > -5000000 && d < 5000000);
	REQUIRE(ptd_perf_wallref_sample(&c, 0, &ref) == 0);
	d = (int64_t)(ptd_perf_time_to_wall(&ref, perf_now) -
		      now_ns(CLOCK_REALTIME));
	CHECK(d > -50000000 && d < 0);
out:
	munmap(pg, (size_t)page);
	close(fd);
}

int main(void)
{
	RUN(test_vectors);
	RUN(test_reference_and_roundtrip);
	RUN(test_time_short);
	RUN(test_from_page);
	RUN(test_wallref);
	RUN(test_live_page);
	return check_done();
}
