/* SPDX-License-Identifier: MIT */
/*
 * The counter table (decode/counters.h): what makes two instructions one
 * slot, first executions, a full table, an index that grows, names that
 * outlive their givers, the derived blocks and functions, and the lines
 * the JSON writer makes of first_exec and counters records.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/counters.h"
#include "record/jsonw.h"

static struct ptd_rec_insn insn(uint64_t ip, int isid, const char *raw_hex)
{
	struct ptd_rec_insn in;
	size_t n = strlen(raw_hex) / 2;

	memset(&in, 0xcd, sizeof(in));	/* poison: only the key counts */
	in.ip = ip;
	in.isid = isid;
	in.gen = isid ? 1 : 0;	/* the section's first mapping */
	in.mode = ptem_64bit;
	in.iclass = ptic_other;
	in.size = (uint8_t)n;
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		(void)sscanf(raw_hex + 2 * i, "%2x", &v);
		in.raw[i] = (uint8_t)v;
	}
	in.module = "/bin/prog";
	in.modoff = ip - 0x400000;
	in.sym = NULL;
	in.symoff = 0;
	in.json_body = NULL;
	in.cslot = 0;
	return in;
}

static void test_null_empty(void)
{
	struct ptd_counters *t = (struct ptd_counters *)1;
	struct ptd_rec_insn in = insn(0x401000, 1, "90");
	uint64_t e, d, u;

	CHECK_EQ_INT(ptd_counters_new(0, NULL), -EINVAL);
	CHECK_EQ_U64(ptd_counters_slot(NULL, &in), 0);
	CHECK_EQ_U64(ptd_counters_get(NULL, &in), 0);
	ptd_counters_free(NULL);
	REQUIRE(ptd_counters_new(0, &t) == 0);
	CHECK_EQ_U64(ptd_counters_get(t, &in), 0);
	ptd_counters_totals(t, &e, &d, &u);
	CHECK_EQ_U64(e + d + u, 0);
	/* an instruction longer than x86 allows is no key */
	in.size = pt_max_insn_size + 1;
	CHECK_EQ_U64(ptd_counters_slot(t, &in), 0);
	ptd_counters_free(t);
}

static void test_keys(void)
{
	struct ptd_counters *t;
	struct ptd_rec_insn a = insn(0x401000, 1, "4889e5");
	struct ptd_rec_insn b = a, c = a, m = a;
	struct ptd_rec_insn j1 = insn(0x7f0000001000, 0, "b82a000000");
	struct ptd_rec_insn j2 = insn(0x7f0000001000, 0, "b807000000");
	uint32_t sa;

	REQUIRE(ptd_counters_new(0, &t) == 0);
	sa = ptd_counters_slot(t, &a);
	CHECK(sa > 0);
	/* what is not the key does not matter */
	b.module = "/other";
	b.sym = "f";
	b.flags = 7;
	CHECK_EQ_U64(ptd_counters_slot(t, &b), sa);
	/* another section at the same address: new code */
	c.isid = 2;
	CHECK(ptd_counters_slot(t, &c) != sa);
	/* the same section mapped there again (a dlopen after a dlclose):
	 * new code */
	b = a;
	b.gen = 2;
	CHECK(ptd_counters_slot(t, &b) != sa);
	CHECK(ptd_counters_slot(t, &b) != ptd_counters_slot(t, &c));
	/* another mode */
	m.mode = ptem_32bit;
	CHECK(ptd_counters_slot(t, &m) != sa);
	/* no section (isid 0): told apart by the bytes (a JIT rewrite) */
	CHECK(ptd_counters_slot(t, &j1) != ptd_counters_slot(t, &j2));
	CHECK_EQ_U64(ptd_counters_slot(t, &j1), ptd_counters_slot(t, &j1));
	ptd_counters_free(t);
}

static void test_hits(void)
{
	struct ptd_counters *t;
	struct ptd_rec_insn a = insn(0x401000, 1, "90");
	uint64_t e, d, u;
	uint32_t s;

	REQUIRE(ptd_counters_new(0, &t) == 0);
	s = ptd_counters_slot(t, &a);
	CHECK(ptd_counters_hit(t, s));
	CHECK(!ptd_counters_hit(t, s));
	CHECK(!ptd_counters_hit(t, s));
	CHECK_EQ_U64(ptd_counters_get(t, &a), 3);
	/* slot 0 (a full table's answer) and a slot out of range: counted
	 * as uncounted, never a first */
	CHECK(!ptd_counters_hit(t, 0));
	CHECK(!ptd_counters_hit(t, 99));
	ptd_counters_totals(t, &e, &d, &u);
	CHECK_EQ_U64(e, 3);
	CHECK_EQ_U64(d, 1);
	CHECK_EQ_U64(u, 2);
	ptd_counters_free(t);
}

/* Records given by feed / emit. */
struct got {
	struct ptd_record r[64];
	size_t n;
	char line[64][PTD_JSON_MAX_RECORD];
};

static int got_record(void *ctx, const struct ptd_record *r)
{
	struct got *g = ctx;

	if (g->n < 64) {
		size_t len = ptd_json_record(g->line[g->n], PTD_JSON_MAX_RECORD,
					     r);

		g->line[g->n][len ? len - 1 : 0] = '\0';	/* the '\n' */
		g->r[g->n++] = *r;
	}
	return 0;
}

static void test_full(void)
{
	struct ptd_counters *t;
	struct ptd_rec_insn in[5];
	struct got *g = calloc(1, sizeof(*g));

	REQUIRE(g);
	REQUIRE(ptd_counters_new(4, &t) == 0);
	for (int i = 0; i < 5; i++) {
		in[i] = insn(0x401000 + (uint64_t)i, 1, "90");
		(void)ptd_counters_hit(t, ptd_counters_slot(t, &in[i]));
	}
	CHECK_EQ_U64(ptd_counters_slot(t, &in[4]), 0);
	CHECK_EQ_U64(ptd_counters_get(t, &in[4]), 0);
	CHECK_EQ_U64(ptd_counters_get(t, &in[3]), 1);
	/* the total says what was not counted */
	CHECK_EQ_INT(ptd_counters_emit(t, 1, 0, 0, got_record, g), 0);
	REQUIRE(g->n >= 1);
	CHECK_EQ_U64(g->r[0].u.counters.of, PTD_COUNTERS_TOTAL);
	CHECK_EQ_U64(g->r[0].u.counters.count, 4);
	CHECK_EQ_U64(g->r[0].u.counters.ninsn, 4);
	CHECK_EQ_U64(g->r[0].u.counters.uncounted, 1);
	CHECK_EQ_STR(g->line[0], "{\"type\":\"counters\",\"of\":\"total\","
				 "\"count\":\"0x4\",\"ninsn\":4,"
				 "\"uncounted\":\"0x1\"}");
	ptd_counters_free(t);
	free(g);
}

/* A grow callback that refuses stops the table where it is: the
 * instructions it would need memory for are uncounted, the ones it has
 * go on counting; what it asked for is what it took. */
struct budget {
	uint64_t left, asked;
	unsigned calls, refused;
};

static int budget_grow(void *ctx, uint64_t bytes)
{
	struct budget *b = ctx;

	b->calls++;
	if (bytes > b->left) {
		b->refused++;
		return -1;
	}
	b->left -= bytes;
	b->asked += bytes;
	return 0;
}

static void test_grow_refused(void)
{
	struct ptd_counters *t;
	struct budget b = { 64 * 1024, 0, 0, 0 };
	uint64_t execs, distinct, uncounted;
	const uint32_t n = 20000;
	uint32_t counted = 0;

	REQUIRE(ptd_counters_new(0, &t) == 0);
	ptd_counters_set_grow(t, budget_grow, &b);
	for (uint32_t i = 0; i < n; i++) {
		struct ptd_rec_insn in = insn(0x400000 + 3 * (uint64_t)i, 1,
					      "4889e5");
		uint32_t s = ptd_counters_slot(t, &in);

		counted += s != 0;
		(void)ptd_counters_hit(t, s);
	}
	CHECK(b.calls >= 2);
	CHECK_EQ_INT(b.refused, 1);	/* then held: no more asking */
	CHECK(counted > 0 && counted < n);
	ptd_counters_totals(t, &execs, &distinct, &uncounted);
	CHECK_EQ_U64(distinct, counted);
	CHECK_EQ_U64(execs, counted);
	CHECK_EQ_U64(uncounted, n - counted);
	CHECK(b.asked <= 64 * 1024);
	/* an instruction it has still counts */
	{
		struct ptd_rec_insn in = insn(0x400000, 1, "4889e5");

		CHECK(ptd_counters_slot(t, &in) != 0);
	}
	ptd_counters_free(t);
}

/* Slots stay what they were while the index grows many times. */
static void test_grow(void)
{
	struct ptd_counters *t;
	const uint32_t n = 100000;
	uint32_t *slot = calloc(n, sizeof(*slot));
	bool ok = true;

	REQUIRE(slot);
	REQUIRE(ptd_counters_new(0, &t) == 0);
	for (uint32_t i = 0; i < n; i++) {
		struct ptd_rec_insn in = insn(0x400000 + 3 * (uint64_t)i, 1,
					      "4889e5");

		slot[i] = ptd_counters_slot(t, &in);
		for (uint32_t k = 0; k <= i % 3; k++)
			(void)ptd_counters_hit(t, slot[i]);
	}
	for (uint32_t i = 0; i < n && ok; i++) {
		struct ptd_rec_insn in = insn(0x400000 + 3 * (uint64_t)i, 1,
					      "4889e5");

		ok = ptd_counters_slot(t, &in) == slot[i] &&
		     ptd_counters_get(t, &in) == i % 3 + 1;
	}
	CHECK(ok);
	ptd_counters_free(t);
	free(slot);
}

/* A first execution: one first_exec record, the instruction's, without
 * its flags; later executions none. */
static void test_feed(void)
{
	struct ptd_counters *t;
	struct ptd_record r;
	struct got *g = calloc(1, sizeof(*g));
	cJSON *o;
	const unsigned fe = PTD_REC_BIT(PTD_REC_FIRST_EXEC);

	REQUIRE(g);
	REQUIRE(ptd_counters_new(0, &t) == 0);
	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_INSN;
	r.pid = 10;
	r.tid = 11;
	r.u.insn = insn(0x401000, 1, "4889e5");
	r.u.insn.sym = "main";
	r.u.insn.symoff = 4;
	r.u.insn.flags = PTD_F_ENABLED;
	CHECK_EQ_INT(ptd_counters_feed(t, &r, fe, got_record, g), 0);
	CHECK_EQ_INT(ptd_counters_feed(t, &r, fe, got_record, g), 0);
	/* not an insn record: nothing */
	r.type = PTD_REC_ERROR;
	CHECK_EQ_INT(ptd_counters_feed(t, &r, fe, got_record, g), 0);
	REQUIRE(g->n == 1);
	CHECK_EQ_U64(g->r[0].type, PTD_REC_FIRST_EXEC);
	CHECK_EQ_U64(g->r[0].u.insn.flags, 0);
	CHECK_EQ_STR(g->line[0],
		     "{\"type\":\"first_exec\",\"pid\":10,\"tid\":11,"
		     "\"ip\":\"0x401000\",\"size\":3,\"raw\":\"4889e5\","
		     "\"iclass\":\"other\",\"mode\":\"64bit\",\"isid\":1,"
		     "\"module\":\"/bin/prog\",\"offset\":\"0x1000\","
		     "\"sym\":\"main+0x4\"}");
	o = cJSON_Parse(g->line[0]);
	CHECK(o != NULL);
	cJSON_Delete(o);
	/* its section mapped there again: a first execution again, the
	 * line saying which mapping */
	r.type = PTD_REC_INSN;
	r.u.insn.gen = 2;
	CHECK_EQ_INT(ptd_counters_feed(t, &r, fe, got_record, g), 0);
	REQUIRE(g->n == 2);
	CHECK_EQ_STR(g->line[1],
		     "{\"type\":\"first_exec\",\"pid\":10,\"tid\":11,"
		     "\"ip\":\"0x401000\",\"size\":3,\"raw\":\"4889e5\","
		     "\"iclass\":\"other\",\"mode\":\"64bit\",\"isid\":1,"
		     "\"module\":\"/bin/prog\",\"offset\":\"0x1000\","
		     "\"sym\":\"main+0x4\",\"map\":2}");
	CHECK_EQ_U64(ptd_counters_get(t, &r.u.insn), 1);
	g->n = 1;
	r.u.insn.gen = 1;
	/* counted both times; first_exec off: counted, nothing given */
	r.type = PTD_REC_INSN;
	CHECK_EQ_U64(ptd_counters_get(t, &r.u.insn), 2);
	r.u.insn = insn(0x401003, 1, "90");
	CHECK_EQ_INT(ptd_counters_feed(t, &r, 0, got_record, g), 0);
	CHECK_EQ_U64(g->n, 1);
	CHECK_EQ_U64(ptd_counters_get(t, &r.u.insn), 1);
	ptd_counters_free(t);
	free(g);
}

/* Names are copied: the table outlives the section cache and symbol
 * tables that named its instructions. */
static void test_names_copied(void)
{
	struct ptd_counters *t;
	struct got *g = calloc(1, sizeof(*g));
	char *mod = strdup("/lib/libx.so"), *sym = strdup("fn");
	struct ptd_rec_insn in = insn(0x401000, 1, "90");

	REQUIRE(g && mod && sym);
	REQUIRE(ptd_counters_new(0, &t) == 0);
	in.module = mod;
	in.sym = sym;
	(void)ptd_counters_hit(t, ptd_counters_slot(t, &in));
	memset(mod, 'X', strlen(mod));
	memset(sym, 'Y', strlen(sym));
	free(mod);
	free(sym);
	CHECK_EQ_INT(ptd_counters_emit(t, 0, 0, 0, got_record, g), 0);
	REQUIRE(g->n == 4);
	CHECK_EQ_STR(g->r[1].u.counters.insn.module, "/lib/libx.so");
	CHECK_EQ_STR(g->r[1].u.counters.insn.sym, "fn");
	CHECK_EQ_STR(g->r[3].u.counters.insn.sym, "fn");
	ptd_counters_free(t);
	free(g);
}

/*
 * f: 0x1000 nop, 0x1001 nop, 0x1002 jmp (a block run 5 times) and 0x1004
 * nop run 2 times; g: 0x2000 nop run 9 times.  Blocks: [0x1000, 0x1002]
 * x5, [0x1004] x2, [0x2000] x9; functions g 9, f 5*3+2 = 17.
 */
static void test_emit(void)
{
	static const struct {
		uint64_t ip;
		const char *raw;
		enum pt_insn_class iclass;
		const char *sym;
		unsigned n;
	} prog[] = {
		{ 0x1000, "90", ptic_other, "f", 5 },
		{ 0x1001, "90", ptic_other, "f", 5 },
		{ 0x1002, "ebfc", ptic_jump, "f", 5 },
		{ 0x1004, "90", ptic_other, "f", 2 },
		{ 0x2000, "90", ptic_other, "g", 9 },
	};
	struct ptd_counters *t;
	struct got *g = calloc(1, sizeof(*g));
	const struct ptd_rec_counters *c;
	cJSON *o;

	REQUIRE(g);
	REQUIRE(ptd_counters_new(0, &t) == 0);
	for (size_t i = 0; i < sizeof(prog) / sizeof(prog[0]); i++) {
		struct ptd_rec_insn in = insn(prog[i].ip, 1, prog[i].raw);
		uint32_t s;

		in.iclass = prog[i].iclass;
		in.sym = prog[i].sym;
		in.symoff = prog[i].ip & 0xfff;
		s = ptd_counters_slot(t, &in);
		for (unsigned k = 0; k < prog[i].n; k++)
			(void)ptd_counters_hit(t, s);
	}
	CHECK_EQ_INT(ptd_counters_emit(t, 0, 7, 8, got_record, g), 0);
	/* total, 5 insns, 3 blocks, 2 functions */
	REQUIRE(g->n == 11);
	c = &g->r[0].u.counters;
	CHECK_EQ_U64(c->count, 5 * 3 + 2 + 9);
	CHECK_EQ_U64(c->ninsn, 5);
	/* instructions: 0x2000 (9), then the three of 5 by address */
	c = &g->r[1].u.counters;
	CHECK_EQ_U64(c->of, PTD_COUNTERS_INSN);
	CHECK_EQ_U64(c->rank, 1);
	CHECK_EQ_U64(c->insn.ip, 0x2000);
	CHECK_EQ_U64(c->count, 9);
	CHECK_EQ_U64(g->r[2].u.counters.insn.ip, 0x1000);
	CHECK_EQ_U64(g->r[4].u.counters.insn.ip, 0x1002);
	CHECK_EQ_U64(g->r[5].u.counters.insn.ip, 0x1004);
	CHECK_EQ_U64(g->r[5].u.counters.rank, 5);
	/* blocks */
	c = &g->r[6].u.counters;
	CHECK_EQ_U64(c->of, PTD_COUNTERS_BLOCK);
	CHECK_EQ_U64(c->insn.ip, 0x2000);
	c = &g->r[7].u.counters;
	CHECK_EQ_U64(c->insn.ip, 0x1000);
	CHECK_EQ_U64(c->end_ip, 0x1002);
	CHECK_EQ_U64(c->ninsn, 3);
	CHECK_EQ_U64(c->count, 5);
	c = &g->r[8].u.counters;
	CHECK_EQ_U64(c->insn.ip, 0x1004);
	CHECK_EQ_U64(c->ninsn, 1);
	CHECK_EQ_U64(c->count, 2);
	/* functions */
	c = &g->r[9].u.counters;
	CHECK_EQ_U64(c->of, PTD_COUNTERS_FUNC);
	CHECK_EQ_STR(c->insn.sym, "f");
	CHECK_EQ_U64(c->count, 17);
	CHECK_EQ_U64(c->ninsn, 4);
	CHECK_EQ_STR(g->r[10].u.counters.insn.sym, "g");
	CHECK_EQ_U64(g->r[10].u.counters.count, 9);
	/* the lines */
	CHECK_EQ_STR(g->line[7],
		     "{\"type\":\"counters\",\"pid\":7,\"tid\":8,\"of\":\"block\","
		     "\"rank\":2,\"count\":\"0x5\",\"ninsn\":3,\"ip\":\"0x1000\","
		     "\"end_ip\":\"0x1002\",\"mode\":\"64bit\",\"isid\":1,"
		     "\"module\":\"/bin/prog\",\"offset\":\"0xffffffffffc01000\","
		     "\"sym\":\"f+0x0\"}");
	CHECK_EQ_STR(g->line[9],
		     "{\"type\":\"counters\",\"pid\":7,\"tid\":8,"
		     "\"of\":\"function\",\"rank\":1,\"count\":\"0x11\","
		     "\"ninsn\":4,\"module\":\"/bin/prog\",\"function\":\"f\"}");
	for (size_t i = 0; i < g->n; i++) {
		o = cJSON_Parse(g->line[i]);
		CHECK(o != NULL);
		cJSON_Delete(o);
	}
	/* top 1: total and one of each kind */
	g->n = 0;
	CHECK_EQ_INT(ptd_counters_emit(t, 1, 0, 0, got_record, g), 0);
	CHECK_EQ_U64(g->n, 4);
	ptd_counters_free(t);
	free(g);
}

/* A function's code run from two mappings of its file: an instruction
 * and a block per mapping, each line saying which ("map" from the
 * second), one function whose instructions are counted once. */
static void test_mappings(void)
{
	struct ptd_counters *t;
	struct got *g = calloc(1, sizeof(*g));
	const struct ptd_rec_counters *c;

	REQUIRE(g);
	REQUIRE(ptd_counters_new(0, &t) == 0);
	for (uint32_t gen = 1; gen <= 2; gen++) {
		for (uint64_t ip = 0x1000; ip < 0x1002; ip++) {
			struct ptd_rec_insn in = insn(ip, 1, ip == 0x1000
							     ? "90"
							     : "c3");
			uint32_t s;

			in.iclass = ip == 0x1000 ? ptic_other : ptic_return;
			in.sym = "f";
			in.symoff = ip & 0xfff;
			in.gen = gen;
			s = ptd_counters_slot(t, &in);
			for (unsigned k = 0; k < gen * 3; k++)
				(void)ptd_counters_hit(t, s);
		}
	}
	CHECK_EQ_INT(ptd_counters_emit(t, 0, 7, 8, got_record, g), 0);
	/* total, 4 insns, 2 blocks, 1 function */
	REQUIRE(g->n == 8);
	CHECK_EQ_U64(g->r[0].u.counters.ninsn, 4);
	/* the second mapping's (6 each) rank first */
	c = &g->r[1].u.counters;
	CHECK_EQ_U64(c->insn.ip, 0x1000);
	CHECK_EQ_U64(c->insn.gen, 2);
	CHECK_EQ_U64(c->count, 6);
	CHECK_EQ_U64(g->r[3].u.counters.insn.gen, 1);
	c = &g->r[5].u.counters;
	CHECK_EQ_U64(c->of, PTD_COUNTERS_BLOCK);
	CHECK_EQ_U64(c->ninsn, 2);
	CHECK_EQ_U64(c->count, 6);
	CHECK(strstr(g->line[5], ",\"map\":2}") != NULL);
	CHECK_EQ_U64(g->r[6].u.counters.ninsn, 2);
	CHECK_EQ_U64(g->r[6].u.counters.count, 3);
	CHECK(strstr(g->line[6], "\"map\"") == NULL);
	c = &g->r[7].u.counters;
	CHECK_EQ_U64(c->of, PTD_COUNTERS_FUNC);
	CHECK_EQ_U64(c->count, 18);
	CHECK_EQ_U64(c->ninsn, 2);
	ptd_counters_free(t);
	free(g);
}

/* A long module name and symbol still make a line within the bound. */
static void test_long_names(void)
{
	struct ptd_counters *t;
	struct got *g = calloc(1, sizeof(*g));
	char *mod = malloc(20000), *sym = malloc(20000);
	struct ptd_rec_insn in = insn(0x401000, 1, "0f1f840000000000");

	REQUIRE(g && mod && sym);
	memset(mod, '\x01', 19999);	/* escaped as \u0001: 6 bytes each */
	mod[19999] = '\0';
	memset(sym, '"', 19999);
	sym[19999] = '\0';
	in.module = mod;
	in.sym = sym;
	REQUIRE(ptd_counters_new(0, &t) == 0);
	(void)ptd_counters_hit(t, ptd_counters_slot(t, &in));
	CHECK_EQ_INT(ptd_counters_emit(t, 0, 1, 1, got_record, g), 0);
	REQUIRE(g->n == 4);
	for (size_t i = 0; i < g->n; i++) {
		cJSON *o = cJSON_Parse(g->line[i]);

		CHECK(o != NULL);
		CHECK(strlen(g->line[i]) < PTD_JSON_MAX_RECORD);
		cJSON_Delete(o);
	}
	ptd_counters_free(t);
	free(mod);
	free(sym);
	free(g);
}

/* With traces enabled and asked for, the fed executions build them: a
 * one-instruction loop at threshold 2 forms its trace as its head is
 * entered the 4th time (the 2nd and 3rd are counted); not asked for,
 * none. */
static void test_feed_traces(void)
{
	const unsigned tr = PTD_REC_BIT(PTD_REC_TRACE);
	struct ptd_counters *t;
	struct ptd_record r;
	struct got *g = calloc(1, sizeof(*g));

	REQUIRE(g);
	REQUIRE(ptd_counters_new(0, &t) == 0);
	CHECK(ptd_counters_traces(t) == NULL);
	CHECK_EQ_INT(ptd_counters_enable_traces(t, 1u << 31), -EINVAL);
	CHECK_EQ_INT(ptd_counters_enable_traces(t, 2), 0);
	CHECK(ptd_counters_traces(t) != NULL);
	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_INSN;
	r.pid = 10;
	r.tid = 11;
	r.u.insn = insn(0x401000, 1, "75fe");	/* jnz . */
	r.u.insn.iclass = ptic_cond_jump;
	for (int i = 0; i < 4; i++)
		CHECK_EQ_INT(ptd_counters_feed(t, &r, 0, got_record, g), 0);
	CHECK_EQ_INT(g->n, 0);
	ptd_counters_free(t);
	REQUIRE(ptd_counters_new(0, &t) == 0);
	REQUIRE(ptd_counters_enable_traces(t, 2) == 0);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(ptd_counters_feed(t, &r, tr, got_record, g), 0);
	CHECK_EQ_INT(g->n, 0);
	CHECK_EQ_INT(ptd_counters_feed(t, &r, tr, got_record, g), 0);
	REQUIRE(g->n == 1);
	CHECK_EQ_U64(g->r[0].type, PTD_REC_TRACE);
	CHECK_CONTAINS(g->line[0], "\"type\":\"trace\",\"pid\":10,\"tid\":11,"
				   "\"id\":1,\"head\":\"0x401000\"");
	ptd_counters_free(t);
	free(g);
}

int main(void)
{
	RUN(test_null_empty);
	RUN(test_keys);
	RUN(test_hits);
	RUN(test_full);
	RUN(test_grow);
	RUN(test_grow_refused);
	RUN(test_feed);
	RUN(test_feed_traces);
	RUN(test_names_copied);
	RUN(test_emit);
	RUN(test_mappings);
	RUN(test_long_names);
	return check_done();
}
