/* SPDX-License-Identifier: MIT */
/*
 * LLDB per-CPU bundles, piece by piece: a trace cut into PSB blocks
 * (decode/psbsplit.h), context switch traces turned into thread
 * executions (every pairing rule, every malformed record), and blocks
 * given to executions by time (lldb/percpu.h).  The whole decode of a
 * per-CPU bundle against the ground truth is in e2e/test-lldb-e2e.c.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <linux/perf_event.h>

#include "check.h"
#include "unit/ptenc.h"
#include "decode/psbsplit.h"
#include "lldb/percpu.h"
#include "perf/sideband.h"

static const struct pt_cpu no_cpu;

/* ---- PSB blocks ---------------------------------------------------------- */

static void test_psb_split(void)
{
	struct ptd_psb_block *b = NULL;
	struct trace t;
	uint64_t a, c, d, skipped = 0;
	size_t n = 0;

	tr_begin(&t);
	simple(&t, ppt_pad);
	simple(&t, ppt_pad);
	simple(&t, ppt_pad);
	a = psb_tsc(&t, 0x100, 0x401000);
	tnt(&t, "101");
	ippkt(&t, ppt_tip_pgd, 0);
	/* tracing off at this PSB: no FUP, no IP */
	c = psb_tsc(&t, 0x200, 0);
	ippkt(&t, ppt_tip_pge, 0x402000);
	/* a PSB whose PSB+ does not decode (a TIP inside it): not a block
	 * start, its bytes stay in the block before */
	simple(&t, ppt_psb);
	ippkt(&t, ppt_tip, 0x403000);
	simple(&t, ppt_psbend);
	tnt(&t, "1");
	/* a PSB+ without a TSC packet has no time */
	d = t.len;
	psb(&t);
	tr_end(&t);

	REQUIRE(ptd_psb_split(t.buf, t.len, &no_cpu, &b, &n, &skipped) == 0);
	REQUIRE(n == 3);
	CHECK_EQ_U64(skipped, 3);
	CHECK_EQ_U64(b[0].offset, a);
	CHECK_EQ_U64(b[0].size, c - a);
	CHECK(b[0].has_tsc);
	CHECK_EQ_U64(b[0].tsc, 0x100);
	CHECK(b[0].has_ip);
	CHECK_EQ_U64(b[0].ip, 0x401000);
	CHECK_EQ_U64(b[1].offset, c);
	CHECK_EQ_U64(b[1].size, d - c);
	CHECK(b[1].has_tsc);
	CHECK_EQ_U64(b[1].tsc, 0x200);
	CHECK(!b[1].has_ip);
	CHECK_EQ_U64(b[2].offset, d);
	CHECK_EQ_U64(b[2].size, t.len - d);
	CHECK(!b[2].has_tsc);
	free(b);

	/* no PSB at all; nothing; bad arguments */
	REQUIRE(ptd_psb_split(t.buf, 3, &no_cpu, &b, &n, &skipped) == 0);
	CHECK(n == 0 && b == NULL);
	CHECK_EQ_U64(skipped, 3);
	REQUIRE(ptd_psb_split(NULL, 0, &no_cpu, &b, &n, NULL) == 0);
	CHECK_EQ_INT(n, 0);
	CHECK_EQ_INT(ptd_psb_split(NULL, 1, &no_cpu, &b, &n, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_psb_split(t.buf, t.len, NULL, &b, &n, NULL),
		     -EINVAL);
}

/* Bytes of random garbage never crash the splitter, and blocks tile the
 * stream from the first one to the end. */
static void test_psb_split_garbage(void)
{
	uint8_t buf[8192];
	uint64_t seed = 88172645463325252ull;

	for (int round = 0; round < 200; round++) {
		struct ptd_psb_block *b = NULL;
		uint64_t skipped = 0, at;
		size_t n = 0, len = 1 + (size_t)(seed % sizeof(buf));

		for (size_t i = 0; i < len; i++) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			buf[i] = (uint8_t)seed;
		}
		/* sprinkle PSB patterns in */
		for (size_t i = 0; i + 16 <= len && i < 4096; i += 1024)
			memcpy(buf + i, "\x02\x82\x02\x82\x02\x82\x02\x82"
					"\x02\x82\x02\x82\x02\x82\x02\x82", 16);
		REQUIRE(ptd_psb_split(buf, len, &no_cpu, &b, &n, &skipped) ==
			0);
		at = skipped;
		for (size_t i = 0; i < n; i++) {
			CHECK_EQ_U64(b[i].offset, at);
			at += b[i].size;
		}
		CHECK_EQ_U64(at, len);
		free(b);
	}
}

/* ---- context switch traces ----------------------------------------------- */

struct cs {
	uint8_t buf[4096];
	size_t len;
};

#define TID_TIME (PERF_SAMPLE_TID | PERF_SAMPLE_TIME)

static void sw(struct cs *c, bool out, uint32_t tid, uint64_t time)
{
	struct ptd_perf_switch s = { .out = out, .cpu_wide = true };
	struct ptd_perf_sample_id sid = { .mask = 0, .pid = 100, .tid = tid,
					  .time = time };
	size_t n = ptd_perf_encode_switch(c->buf + c->len,
					  sizeof(c->buf) - c->len, &s,
					  TID_TIME, &sid);

	REQUIRE(n == 32);
	c->len += n;
}

static void raw(struct cs *c, uint32_t type, uint16_t size)
{
	struct perf_event_header h = { type, 0, size };

	memcpy(c->buf + c->len, &h, sizeof(h));
	memset(c->buf + c->len + sizeof(h), 0, size > 8 ? size - 8u : 0);
	c->len += size < 8 ? 8 : size;
}

static const struct ptd_perf_clock ident = { .time_mult = 1 };

struct want {
	uint32_t tid;
	uint64_t start, end;
};

static void check_execs(const struct cs *c, const struct want *w, size_t nw)
{
	struct ptd_lldb_exec *v = NULL;
	size_t n = 0, cap = 0;
	struct ptd_diag d = { "" };
	int r = ptd_lldb_cswitch_parse(c->buf, c->len, 3, &ident, "cs", &v,
				       &n, &cap, &d);

	CHECK_EQ_INT(r, 0);
	if (r < 0)
		fprintf(stderr, "  %s\n", d.msg);
	CHECK_EQ_INT(n, nw);
	for (size_t i = 0; i < n && i < nw; i++) {
		CHECK_EQ_INT(v[i].cpu, 3);
		CHECK_EQ_INT(v[i].pid, 100);
		CHECK_EQ_INT(v[i].tid, w[i].tid);
		CHECK_EQ_U64(v[i].start, w[i].start);
		CHECK_EQ_U64(v[i].end, w[i].end);
	}
	free(v);
}

static void test_cswitch_pairs(void)
{
	struct cs c = { .len = 0 };

	sw(&c, true, 1, 10);		/* first OUT: from 0 */
	sw(&c, false, 2, 20);		/* IN OUT of one thread */
	raw(&c, PERF_RECORD_COMM, 24);	/* not a switch: skipped */
	sw(&c, true, 2, 30);
	sw(&c, false, 3, 40);		/* IN IN: 3 ends at 49 */
	sw(&c, false, 4, 50);
	sw(&c, true, 4, 60);
	sw(&c, true, 5, 70);		/* OUT OUT: 5 starts at 61 */
	sw(&c, false, 6, 80);		/* IN(6) OUT(7): both hinted */
	sw(&c, true, 7, 90);
	sw(&c, false, 8, 100);		/* last IN: never ends */
	const struct want w[] = {
		{ 1, 0, 10 },   { 2, 20, 30 },	{ 3, 40, 49 },
		{ 4, 50, 60 },  { 5, 61, 70 },	{ 6, 80, 89 },
		{ 7, 81, 90 },  { 8, 100, UINT64_MAX },
	};
	check_execs(&c, w, sizeof(w) / sizeof(w[0]));

	/* OUT then IN is a gap; an empty trace has no execution */
	c.len = 0;
	sw(&c, false, 1, 10);
	sw(&c, true, 1, 20);
	sw(&c, false, 2, 30);
	sw(&c, true, 2, 40);
	const struct want w2[] = { { 1, 10, 20 }, { 2, 30, 40 } };
	check_execs(&c, w2, 2);
	c.len = 0;
	check_execs(&c, NULL, 0);

	/* times are perf times, turned into TSC with the conversion */
	struct ptd_perf_clock conv = { .time_zero = 1000, .time_mult = 3,
				       .time_shift = 1 };
	struct ptd_lldb_exec *v = NULL;
	size_t n = 0, cap = 0;
	struct ptd_diag d = { "" };

	c.len = 0;
	sw(&c, false, 1, ptd_perf_tsc_to_time(&conv, 5000));
	sw(&c, true, 1, ptd_perf_tsc_to_time(&conv, 9000));
	REQUIRE(ptd_lldb_cswitch_parse(c.buf, c.len, 0, &conv, "cs", &v, &n,
				       &cap, &d) == 0);
	REQUIRE(n == 1);
	CHECK_EQ_U64(v[0].start, 5000);
	CHECK_EQ_U64(v[0].end, 9000);
	/* appended to what is there */
	REQUIRE(ptd_lldb_cswitch_parse(c.buf, c.len, 1, &conv, "cs", &v, &n,
				       &cap, &d) == 0);
	REQUIRE(n == 2);
	CHECK_EQ_INT(v[1].cpu, 1);
	free(v);
}

static void bad_cs(const struct cs *c, const char *want)
{
	struct ptd_lldb_exec *v = NULL;
	size_t n = 0, cap = 0;
	struct ptd_diag d = { "" };

	CHECK_EQ_INT(ptd_lldb_cswitch_parse(c->buf, c->len, 0, &ident,
					    "B/trace.json: cpus[0].cs", &v,
					    &n, &cap, &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "B/trace.json: cpus[0].cs: ");
	CHECK_CONTAINS(d.msg, want);
	free(v);
}

static void test_cswitch_bad(void)
{
	struct cs c = { .len = 0 };

	/* a header cut short */
	sw(&c, false, 1, 10);
	memset(c.buf + c.len, 0, 5);
	c.len += 5;
	bad_cs(&c, "offset 32: 5 bytes left, too few for a record header");
	/* sizes below the header, past the end */
	c.len = 32;
	raw(&c, PERF_RECORD_COMM, 4);
	bad_cs(&c, "offset 32: a record of 4 bytes (8 left in the file");
	c.len = 0;
	raw(&c, PERF_RECORD_COMM, 64);
	c.len = 40;
	bad_cs(&c, "offset 0: a record of 64 bytes (40 left in the file");
	c.len = 0;
	raw(&c, PERF_RECORD_COMM, 0);
	bad_cs(&c, "offset 0: a record of 0 bytes");
	/* a switch record without its sample_id */
	c.len = 0;
	raw(&c, PERF_RECORD_SWITCH_CPU_WIDE, 24);
	bad_cs(&c, "offset 0: a SWITCH_CPU_WIDE record of 24 bytes "
		   "(expected 32");
	/* times that do not increase */
	c.len = 0;
	sw(&c, false, 1, 10);
	sw(&c, true, 1, 10);
	bad_cs(&c, "offset 32: switch at TSC 0xa is not after the one "
		   "before (TSC 0xa)");
	c.len = 0;
	sw(&c, false, 1, 10);
	sw(&c, true, 1, 5);
	bad_cs(&c, "offset 32: switch at TSC 0x5");
	/* bad arguments */
	struct ptd_lldb_exec *v = NULL;
	size_t n = 0, cap = 0;
	struct ptd_perf_clock zero = { .time_mult = 0 };

	CHECK_EQ_INT(ptd_lldb_cswitch_parse(NULL, 1, 0, &ident, "x", &v, &n,
					    &cap, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_lldb_cswitch_parse(c.buf, c.len, 0, &zero, "x", &v,
					    &n, &cap, NULL), -EINVAL);
}

/* ---- blocks to executions ------------------------------------------------ */

static void test_assign(void)
{
	struct ptd_psb_block b[6];
	struct ptd_lldb_exec e[2];
	uint64_t bytes = 0;

	memset(b, 0, sizeof(b));
	for (int i = 0; i < 6; i++) {
		b[i].offset = (uint64_t)i * 100;
		b[i].size = 100;
		b[i].has_tsc = true;
		b[i].tsc = 5 + (uint64_t)i * 10;	/* 5 15 25 35 45 55 */
	}
	memset(e, 0xee, sizeof(e));
	e[0].start = 15;	/* strict: 15 is not inside */
	e[0].end = 35;
	e[1].start = 40;
	e[1].end = 50;
	CHECK_EQ_INT(ptd_lldb_assign_blocks(b, 6, e, 2, &bytes), 4);
	CHECK_EQ_U64(bytes, 400);
	CHECK_EQ_INT(e[0].first, 2);
	CHECK_EQ_INT(e[0].nblocks, 1);
	CHECK_EQ_INT(e[1].first, 4);
	CHECK_EQ_INT(e[1].nblocks, 1);

	/* TSCs out of order inside a run end it: blocks stay adjacent */
	b[1].tsc = 2;	/* 5 2 25 35 45 55 */
	b[0].tsc = 20;	/* 20 2 25 ... */
	e[0].start = 10;
	e[0].end = 100;
	bytes = 0;
	CHECK_EQ_INT(ptd_lldb_assign_blocks(b, 6, e, 1, &bytes), 5);
	CHECK_EQ_INT(e[0].first, 0);
	CHECK_EQ_INT(e[0].nblocks, 1);
	CHECK_EQ_U64(bytes, 500);
	/* no executions: every block is nobody's */
	CHECK_EQ_INT(ptd_lldb_assign_blocks(b, 6, e, 0, NULL), 6);
}

int main(void)
{
	RUN(test_psb_split);
	RUN(test_psb_split_garbage);
	RUN(test_cswitch_pairs);
	RUN(test_cswitch_bad);
	RUN(test_assign);
	return check_done();
}
