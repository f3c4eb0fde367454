/* SPDX-License-Identifier: MIT */
/* Subscriber filters on synthetic records: each condition selects exactly
 * what it should. */
#include <errno.h>

#include "check.h"
#include "common/strutil.h"
#include "daemon/filter.h"

static struct ptd_record insn(pid_t tid, uint64_t ip, enum pt_insn_class c,
			      const char *module)
{
	struct ptd_record r;

	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_INSN;
	r.pid = 100;
	r.tid = tid;
	r.u.insn.ip = ip;
	r.u.insn.iclass = c;
	r.u.insn.module = module;
	r.u.insn.size = 1;
	return r;
}

static struct ptd_record block(uint64_t ip, uint64_t end_ip,
			       enum pt_insn_class c)
{
	struct ptd_record r;

	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_BLOCK;
	r.pid = r.tid = 100;
	r.u.block.ip = ip;
	r.u.block.end_ip = end_ip;
	r.u.block.iclass = c;
	r.u.block.module = "/bin/x";
	return r;
}

static struct ptd_record other(enum ptd_rec_type t, pid_t tid)
{
	struct ptd_record r;

	memset(&r, 0, sizeof(r));
	r.type = t;
	r.pid = 100;
	r.tid = tid;
	if (t == PTD_REC_ERROR)
		r.u.error.context = "decode";
	return r;
}

static struct ptd_filter_spec spec_all(void)
{
	struct ptd_filter_spec s;

	memset(&s, 0, sizeof(s));
	s.kinds = PTD_REC_ALL;
	return s;
}

static void test_compile_errors(void)
{
	struct ptd_filter_spec s = spec_all();
	struct ptd_filter f;

	memset(&f, 0xcd, sizeof(f));
	s.kinds = 0;
	CHECK_EQ_INT(ptd_filter_compile(&s, &f), -EINVAL);
	s = spec_all();
	s.ntids = PTD_FILTER_MAX_TIDS + 1;
	CHECK_EQ_INT(ptd_filter_compile(&s, &f), -EINVAL);
	s = spec_all();
	s.nranges = 1;
	s.ranges[0].start = s.ranges[0].end = 0x1000;
	CHECK_EQ_INT(ptd_filter_compile(&s, &f), -EINVAL);
	s = spec_all();
	s.nranges = PTD_FILTER_MAX_RANGES + 1;
	CHECK_EQ_INT(ptd_filter_compile(&s, &f), -EINVAL);
	CHECK_EQ_INT(ptd_filter_compile(NULL, &f), -EINVAL);
	s = spec_all();
	CHECK_EQ_INT(ptd_filter_compile(&s, &f), 0);
}

static void test_kinds(void)
{
	struct ptd_filter_spec s = spec_all();
	struct ptd_filter f;
	struct ptd_record i = insn(1, 0x1000, ptic_other, "/a");
	struct ptd_record b = block(0x1000, 0x1010, ptic_jump);
	struct ptd_record e = other(PTD_REC_EVENT, 1);
	struct ptd_record er = other(PTD_REC_ERROR, 1);

	s.kinds = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_ERROR);
	REQUIRE(ptd_filter_compile(&s, &f) == 0);
	CHECK(ptd_filter_match(&f, &i));
	CHECK(!ptd_filter_match(&f, &b));
	CHECK(!ptd_filter_match(&f, &e));
	CHECK(ptd_filter_match(&f, &er));
	/* An out-of-range type never matches. */
	i.type = PTD_REC_NTYPES;
	CHECK(!ptd_filter_match(&f, &i));
}

static void test_tid(void)
{
	struct ptd_filter_spec s = spec_all();
	struct ptd_filter f;
	pid_t t;

	s.ntids = 3;
	s.tids[0] = 30;
	s.tids[1] = 10;
	s.tids[2] = 20;
	REQUIRE(ptd_filter_compile(&s, &f) == 0);
	for (t = 1; t < 40; t++) {
		struct ptd_record i = insn(t, 0x1000, ptic_other, "/a");
		struct ptd_record e = other(PTD_REC_EVENT, t);
		bool want = t == 10 || t == 20 || t == 30;

		CHECK_EQ_INT(ptd_filter_match(&f, &i), want);
		/* tid applies to every kind */
		CHECK_EQ_INT(ptd_filter_match(&f, &e), want);
	}
}

static void test_ranges(void)
{
	struct ptd_filter_spec s = spec_all();
	struct ptd_filter f;
	struct ptd_record r;

	/* Unsorted, overlapping and touching ranges. */
	s.nranges = 4;
	s.ranges[0] = (struct ptd_addr_range){ 0x5000, 0x6000 };
	s.ranges[1] = (struct ptd_addr_range){ 0x1000, 0x2000 };
	s.ranges[2] = (struct ptd_addr_range){ 0x1800, 0x2800 };
	s.ranges[3] = (struct ptd_addr_range){ 0x2800, 0x3000 };
	REQUIRE(ptd_filter_compile(&s, &f) == 0);
	CHECK_EQ_INT(f.spec.nranges, 2);
	static const struct {
		uint64_t ip;
		bool want;
	} cases[] = {
		{ 0xfff, false },  { 0x1000, true }, { 0x27ff, true },
		{ 0x2800, true },  { 0x2fff, true }, { 0x3000, false },
		{ 0x4fff, false }, { 0x5000, true }, { 0x5fff, true },
		{ 0x6000, false }, { 0, false },     { UINT64_MAX, false },
	};
	for (size_t k = 0; k < PTD_ARRAY_SIZE(cases); k++) {
		r = insn(1, cases[k].ip, ptic_other, "/a");
		if (ptd_filter_match(&f, &r) != cases[k].want)
			CHECK_FAIL_("ip 0x%" PRIx64 ": expected %d",
				    cases[k].ip, cases[k].want);
	}
	/* A block matches when [ip, end_ip] overlaps a range. */
	r = block(0x3000, 0x4fff, ptic_jump);
	CHECK(!ptd_filter_match(&f, &r));
	r = block(0x4000, 0x5000, ptic_jump);
	CHECK(ptd_filter_match(&f, &r));
	r = block(0x0, 0x7000, ptic_jump);
	CHECK(ptd_filter_match(&f, &r));
	r = block(0x2ff0, 0x3010, ptic_jump);
	CHECK(ptd_filter_match(&f, &r));
	/* Events and errors pass code filters. */
	r = other(PTD_REC_EVENT, 1);
	CHECK(ptd_filter_match(&f, &r));
	r = other(PTD_REC_ERROR, 1);
	CHECK(ptd_filter_match(&f, &r));
}

static void test_iclass(void)
{
	struct ptd_filter_spec s = spec_all();
	struct ptd_filter f;
	int c;

	CHECK_EQ_INT(ptd_iclass_parse("call"), ptic_call);
	CHECK_EQ_INT(ptd_iclass_parse("cond_jump"), ptic_cond_jump);
	CHECK_EQ_INT(ptd_iclass_parse("ptwrite"), ptic_ptwrite);
	CHECK_EQ_INT(ptd_iclass_parse("Call"), -1);
	CHECK_EQ_INT(ptd_iclass_parse(""), -1);
	CHECK_EQ_INT(ptd_iclass_parse(NULL), -1);
	s.iclasses = (1u << ptic_call) | (1u << ptic_return);
	REQUIRE(ptd_filter_compile(&s, &f) == 0);
	for (c = ptic_error; c <= ptic_ptwrite; c++) {
		struct ptd_record r = insn(1, 0x1000, (enum pt_insn_class)c,
					   "/a");
		struct ptd_record b = block(0x1000, 0x1008,
					    (enum pt_insn_class)c);
		bool want = c == ptic_call || c == ptic_return;

		CHECK_EQ_INT(ptd_filter_match(&f, &r), want);
		CHECK_EQ_INT(ptd_filter_match(&f, &b), want);
	}
}

static void test_module(void)
{
	struct ptd_filter_spec s = spec_all();
	struct ptd_filter f;
	char name[64];
	struct ptd_record r;

	strcpy(s.module, "libc");
	REQUIRE(ptd_filter_compile(&s, &f) == 0);
	r = insn(1, 0x1000, ptic_other, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	CHECK(ptd_filter_match(&f, &r));
	r = insn(1, 0x1000, ptic_other, "/usr/bin/ls");
	CHECK(!ptd_filter_match(&f, &r));
	r = insn(1, 0x1000, ptic_other, "[vdso]");
	CHECK(!ptd_filter_match(&f, &r));
	/* The same buffer holding another name: the cache must not answer
	 * for the old name. */
	strcpy(name, "/lib/libc.so");
	r = insn(1, 0x1000, ptic_other, name);
	CHECK(ptd_filter_match(&f, &r));
	strcpy(name, "/lib/libm.so");
	CHECK(!ptd_filter_match(&f, &r));
	strcpy(name, "/lib/libc.so");
	CHECK(ptd_filter_match(&f, &r));
}

static void test_combined(void)
{
	struct ptd_filter_spec s = spec_all();
	struct ptd_filter f;
	struct ptd_record r;

	s.kinds = PTD_REC_BIT(PTD_REC_INSN);
	s.ntids = 1;
	s.tids[0] = 7;
	s.nranges = 1;
	s.ranges[0] = (struct ptd_addr_range){ 0x1000, 0x2000 };
	s.iclasses = 1u << ptic_call;
	strcpy(s.module, "/bin/");
	REQUIRE(ptd_filter_compile(&s, &f) == 0);
	r = insn(7, 0x1500, ptic_call, "/bin/x");
	CHECK(ptd_filter_match(&f, &r));
	r = insn(8, 0x1500, ptic_call, "/bin/x");
	CHECK(!ptd_filter_match(&f, &r));
	r = insn(7, 0x2500, ptic_call, "/bin/x");
	CHECK(!ptd_filter_match(&f, &r));
	r = insn(7, 0x1500, ptic_jump, "/bin/x");
	CHECK(!ptd_filter_match(&f, &r));
	r = insn(7, 0x1500, ptic_call, "/lib/x");
	CHECK(!ptd_filter_match(&f, &r));
	r = other(PTD_REC_EVENT, 7);
	CHECK(!ptd_filter_match(&f, &r));
}

int main(void)
{
	RUN(test_compile_errors);
	RUN(test_kinds);
	RUN(test_tid);
	RUN(test_ranges);
	RUN(test_iclass);
	RUN(test_module);
	RUN(test_combined);
	return check_done();
}
