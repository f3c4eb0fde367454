/* SPDX-License-Identifier: MIT */
/*
 * The hot trace builder (decode/traces.h) on synthetic block sequences:
 * a loop's trace formed exactly at the threshold, its blocks and end, a
 * trace withdrawn when code under it changes and formed again on the
 * new code, the block bound, thread-private counts, a trace's exit
 * becoming a head, and the JSON lines of both records.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/traces.h"
#include "record/jsonw.h"

#define BASE 0x1000u
#define SPAN 0x4000u

/* The machine: instructions of one byte at [BASE, BASE + SPAN), each
 * address's code in a version (a rewrite bumps it): the slot. */
struct sim {
	struct ptd_traces *t;
	unsigned version[SPAN];
	bool seen[4][SPAN];
	/* records given */
	struct ptd_record rec[64];
	uint64_t blocks[64][PTD_TRACES_MAX_BBS];
	char line[64][PTD_JSON_MAX_RECORD];
	unsigned nrec;
	uint64_t steps;		/* instructions fed */
	uint64_t step_of[64];	/* steps when each record came */
};

static int got(void *ctx, const struct ptd_record *r)
{
	struct sim *s = ctx;

	if (s->nrec >= 64)
		return -E2BIG;
	s->rec[s->nrec] = *r;
	for (uint32_t i = 0; i < r->u.trace.nblocks &&
			     i < PTD_TRACES_MAX_BBS && r->u.trace.blocks;
	     i++)
		s->blocks[s->nrec][i] = r->u.trace.blocks[i];
	s->rec[s->nrec].u.trace.blocks = s->blocks[s->nrec];
	s->line[s->nrec][ptd_json_record(s->line[s->nrec],
					 PTD_JSON_MAX_RECORD, r)] = 0;
	s->step_of[s->nrec] = s->steps;
	s->nrec++;
	return 0;
}

/* Execute the block at @ip of @n instructions on thread @tid, the last
 * of class @last. */
static int run_block(struct sim *s, pid_t tid, uint64_t ip, unsigned n,
		     enum pt_insn_class last)
{
	for (unsigned i = 0; i < n; i++) {
		struct ptd_record r;
		uint64_t a = ip + i;
		unsigned v = s->version[a - BASE];
		uint32_t slot = (uint32_t)(v * SPAN + (a - BASE) + 1);
		bool first = !s->seen[v][a - BASE];
		int rc;

		s->seen[v][a - BASE] = true;
		memset(&r, 0, sizeof(r));
		r.type = PTD_REC_INSN;
		r.pid = 7;
		r.tid = tid;
		r.u.insn.ip = a;
		r.u.insn.size = 1;
		r.u.insn.mode = ptem_64bit;
		r.u.insn.module = "/bin/sim";
		r.u.insn.modoff = a - BASE;
		r.u.insn.iclass = i + 1 == n ? last : ptic_other;
		s->steps++;
		rc = ptd_traces_feed(s->t, &r, slot, first, got, s);
		if (rc)
			return rc;
	}
	return 0;
}

static struct sim *sim_new(uint32_t threshold)
{
	struct sim *s = calloc(1, sizeof(*s));

	if (s && ptd_traces_new(threshold, &s->t) < 0) {
		free(s);
		return NULL;
	}
	return s;
}

static void sim_free(struct sim *s)
{
	if (s)
		ptd_traces_free(s->t);
	free(s);
}

/* A: 0x1000..0x1002 (jump to B), B: 0x1010..0x1011 (cond jump back to
 * A): one iteration. */
static void loop_iter(struct sim *s, pid_t tid)
{
	CHECK_EQ_INT(run_block(s, tid, 0x1000, 3, ptic_jump), 0);
	CHECK_EQ_INT(run_block(s, tid, 0x1010, 2, ptic_cond_jump), 0);
}

static void test_args(void)
{
	struct ptd_traces *t = NULL;

	CHECK_EQ_INT(ptd_traces_new(0, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_traces_new(PTD_TRACES_MAX_THRESHOLD + 1, &t),
		     -EINVAL);
	CHECK(t == NULL);
	ptd_traces_free(NULL);
	CHECK_EQ_INT(ptd_traces_feed(NULL, NULL, 0, false, got, NULL), 0);
}

/* The loop's head A is one from its second execution (entered by B's
 * backward branch); its 50th count starts the recording, and the trace
 * [A, B] forms as the next A is entered. */
static void test_loop_threshold(void)
{
	struct sim *s = sim_new(0);
	uint64_t formed_at;

	REQUIRE(s);
	for (unsigned i = 0; i < 51; i++)
		loop_iter(s, 1);
	CHECK_EQ_INT(s->nrec, 0);
	/* the 52nd A: the trace ends before it (backward branch) */
	CHECK_EQ_INT(run_block(s, 1, 0x1000, 3, ptic_jump), 0);
	REQUIRE(s->nrec == 1);
	formed_at = s->step_of[0];
	CHECK_EQ_U64(formed_at, 51 * 5 + 1);
	CHECK_EQ_INT(s->rec[0].type, PTD_REC_TRACE);
	CHECK_EQ_INT(s->rec[0].u.trace.id, 1);
	CHECK_EQ_U64(s->rec[0].u.trace.head, 0x1000);
	CHECK_EQ_INT(s->rec[0].u.trace.nblocks, 2);
	CHECK_EQ_INT(s->rec[0].u.trace.ninsn, 5);
	CHECK_EQ_U64(s->blocks[0][0], 0x1000);
	CHECK_EQ_U64(s->blocks[0][1], 0x1010);
	CHECK_EQ_STR(s->rec[0].u.trace.end, "backward_branch");
	CHECK_EQ_INT(s->rec[0].tid, 1);
	CHECK_CONTAINS(s->line[0], "\"type\":\"trace\",\"pid\":7,\"tid\":1,"
				   "\"id\":1,\"head\":\"0x1000\"");
	CHECK_CONTAINS(s->line[0], "\"ninsn\":5,\"nblocks\":2,\"blocks\":["
				   "\"0x1000\",\"0x1010\"],\"end\":"
				   "\"backward_branch\"");
	CHECK_CONTAINS(s->line[0], "\"module\":\"/bin/sim\"");
	/* running in the trace forms nothing more */
	for (unsigned i = 0; i < 500; i++)
		loop_iter(s, 1);
	CHECK_EQ_INT(s->nrec, 1);
	sim_free(s);

	/* a threshold of 3: formed as the 5th A is entered */
	s = sim_new(3);
	REQUIRE(s);
	for (unsigned i = 0; i < 4; i++)
		loop_iter(s, 1);
	CHECK_EQ_INT(s->nrec, 0);
	CHECK_EQ_INT(run_block(s, 1, 0x1000, 3, ptic_jump), 0);
	CHECK_EQ_INT(s->nrec, 1);
	sim_free(s);
}

/* What the builder asked for, and the most it may have. */
struct budget {
	uint64_t asked, granted, limit;
	unsigned refusals;
};

static int budget_grow(void *ctx, uint64_t bytes)
{
	struct budget *b = ctx;

	b->asked += bytes;
	if (b->granted + bytes > b->limit) {
		b->refusals++;
		return -ENOMEM;
	}
	b->granted += bytes;
	return 0;
}

/* Its memory is asked for before it is taken: with room, the loop's trace
 * forms and what it took was asked for; with none past the tables that
 * made A a head, no recording starts and nothing forms, the loss is
 * counted, and it asks no more after the refusal. */
static void test_grow(void)
{
	struct budget b = { .limit = UINT64_MAX };
	struct sim *s = sim_new(3);
	uint64_t f, w, d;

	REQUIRE(s);
	ptd_traces_set_grow(s->t, budget_grow, &b);
	for (unsigned i = 0; i < 6; i++)
		loop_iter(s, 1);
	CHECK_EQ_INT(s->nrec, 1);
	/* the thread table, the heads, a recording's room, the trace's
	 * blocks, the page index */
	CHECK(b.granted >= 128 * 16);
	CHECK_EQ_INT(b.refusals, 0);
	fprintf(stderr, "  grow: %" PRIu64 " bytes asked for one trace\n",
		b.granted);
	sim_free(s);

	memset(&b, 0, sizeof(b));
	s = sim_new(3);
	REQUIRE(s);
	ptd_traces_set_grow(s->t, budget_grow, &b);
	b.limit = UINT64_MAX;
	loop_iter(s, 1);
	loop_iter(s, 1);	/* A is a head now: its tables are there */
	CHECK(b.granted > 0);
	b.limit = b.granted;	/* no room for a recording */
	for (unsigned i = 0; i < 200; i++)
		loop_iter(s, 1);
	CHECK_EQ_INT(s->nrec, 0);
	ptd_traces_totals(s->t, &f, &w, &d);
	CHECK_EQ_U64(f, 0);
	CHECK(d > 0);
	CHECK_EQ_INT(b.refusals, 1);
	CHECK(b.granted <= b.limit);
	ptd_traces_set_grow(NULL, budget_grow, &b);	/* NULL is fine */
	sim_free(s);
}

/* B's second byte rewritten: the trace is withdrawn when the new code
 * first runs, and forms again (id 2) on it after the threshold. */
static void test_withdraw(void)
{
	struct sim *s = sim_new(5);

	REQUIRE(s);
	for (unsigned i = 0; i < 20; i++)
		loop_iter(s, 1);
	REQUIRE(s->nrec == 1);
	s->version[0x1011 - BASE] = 1;
	CHECK_EQ_INT(run_block(s, 1, 0x1000, 3, ptic_jump), 0);
	CHECK_EQ_INT(s->nrec, 1);	/* 0x1010 is the same code */
	CHECK_EQ_INT(run_block(s, 1, 0x1010, 2, ptic_cond_jump), 0);
	REQUIRE(s->nrec == 2);
	CHECK_EQ_INT(s->rec[1].type, PTD_REC_TRACE_WITHDRAWN);
	CHECK_EQ_INT(s->rec[1].u.trace.id, 1);
	CHECK_EQ_U64(s->rec[1].u.trace.at, 0x1011);
	CHECK_EQ_STR(s->rec[1].u.trace.reason, "code_changed");
	CHECK_CONTAINS(s->line[1], "{\"type\":\"trace_withdrawn\",\"pid\":7,"
				   "\"tid\":1,\"id\":1,\"head\":\"0x1000\","
				   "\"reason\":\"code_changed\",\"at\":"
				   "\"0x1011\"}");
	/* A's head count starts again: the head kept its code, its trace
	 * went */
	for (unsigned i = 0; i < 5; i++)
		loop_iter(s, 1);
	CHECK_EQ_INT(s->nrec, 2);
	loop_iter(s, 1);
	REQUIRE(s->nrec == 3);
	CHECK_EQ_INT(s->rec[2].type, PTD_REC_TRACE);
	CHECK_EQ_INT(s->rec[2].u.trace.id, 2);
	CHECK_EQ_INT(s->rec[2].u.trace.nblocks, 2);
	/* code elsewhere changing withdraws nothing */
	s->version[0x1100 - BASE] = 1;
	CHECK_EQ_INT(run_block(s, 1, 0x1100, 1, ptic_return), 0);
	CHECK_EQ_INT(s->nrec, 3);
	{
		uint64_t f, w, d;

		ptd_traces_totals(s->t, &f, &w, &d);
		CHECK_EQ_U64(f, 2);
		CHECK_EQ_U64(w, 1);
		CHECK_EQ_U64(d, 0);
	}
	sim_free(s);
}

/* Thread @tid's decode passed an unmap of [@lo, @hi) (@exec: an exec). */
static int image_change(struct sim *s, pid_t tid, uint64_t lo, uint64_t hi,
			bool exec)
{
	struct ptd_record r;

	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_IMAGE;
	r.pid = 7;
	r.tid = tid;
	r.u.image.start = exec ? 0 : lo;
	r.u.image.end = exec ? UINT64_MAX : hi;
	r.u.image.exec = exec;
	return ptd_traces_feed(s->t, &r, 0, false, got, s);
}

/* Code unmapped under a trace withdraws it, with no new code run there
 * (a dlclose); only the thread's whose decode passed the unmap (another
 * thread's decode passes it itself); an exec withdraws all the thread's
 * traces, and a recording over the code goes. */
static void test_withdraw_unmapped(void)
{
	struct sim *s = sim_new(5);

	REQUIRE(s);
	for (unsigned i = 0; i < 20; i++) {
		loop_iter(s, 1);
		loop_iter(s, 2);
	}
	REQUIRE(s->nrec == 2);
	/* elsewhere: nothing */
	CHECK_EQ_INT(image_change(s, 1, 0x2000, 0x3000, false), 0);
	CHECK_EQ_INT(s->nrec, 2);
	/* the page of B, thread 1: its trace */
	CHECK_EQ_INT(image_change(s, 1, 0x1010, 0x1011, false), 0);
	REQUIRE(s->nrec == 3);
	CHECK_EQ_INT(s->rec[2].type, PTD_REC_TRACE_WITHDRAWN);
	CHECK_EQ_INT(s->rec[2].tid, 1);
	CHECK_EQ_INT(s->rec[2].u.trace.id, 1);
	CHECK_CONTAINS(s->line[2], "\"reason\":\"unmapped\",\"at\":"
				   "\"0x1010\"}");
	/* again: nothing left of thread 1's */
	CHECK_EQ_INT(image_change(s, 1, 0x1000, 0x2000, false), 0);
	CHECK_EQ_INT(s->nrec, 3);
	/* thread 2 starts recording a new loop elsewhere (its head entered
	 * from the trace, then backward: 5 times), then execs: its trace
	 * goes, its recording forms nothing */
	for (unsigned i = 0; i < 4; i++) {
		CHECK_EQ_INT(run_block(s, 2, 0x3000, 2, ptic_jump), 0);
		CHECK_EQ_INT(run_block(s, 2, 0x3010, 2, ptic_cond_jump), 0);
	}
	CHECK_EQ_INT(run_block(s, 2, 0x3000, 2, ptic_jump), 0);
	CHECK_EQ_INT(s->nrec, 3);
	CHECK_EQ_INT(image_change(s, 2, 0, 0, true), 0);
	REQUIRE(s->nrec == 4);
	CHECK_EQ_INT(s->rec[3].tid, 2);
	CHECK_EQ_INT(s->rec[3].u.trace.id, 2);
	CHECK_EQ_STR(s->rec[3].u.trace.reason, "exec");
	CHECK_EQ_INT(run_block(s, 2, 0x3010, 2, ptic_cond_jump), 0);
	CHECK_EQ_INT(run_block(s, 2, 0x3000, 2, ptic_jump), 0);
	CHECK_EQ_INT(s->nrec, 4);
	{
		uint64_t f, w, d;

		ptd_traces_totals(s->t, &f, &w, &d);
		CHECK_EQ_U64(f, 2);
		CHECK_EQ_U64(w, 2);
	}
	sim_free(s);
}

/* A loop of 200 forward blocks: the trace stops at 128. */
static void test_max_bbs(void)
{
	struct sim *s = sim_new(2);

	REQUIRE(s);
	for (unsigned it = 0; it < 4 && s->nrec == 0; it++) {
		for (unsigned b = 0; b < 200; b++)
			CHECK_EQ_INT(run_block(s, 1, 0x2000 + 4 * b, 2,
					       b == 199 ? ptic_jump
							: ptic_cond_jump),
				     0);
	}
	REQUIRE(s->nrec == 1);
	CHECK_EQ_INT(s->rec[0].u.trace.nblocks, PTD_TRACES_MAX_BBS);
	CHECK_EQ_INT(s->rec[0].u.trace.ninsn, 2 * PTD_TRACES_MAX_BBS);
	CHECK_EQ_STR(s->rec[0].u.trace.end, "max_bbs");
	CHECK_EQ_U64(s->blocks[0][127], 0x2000 + 4 * 127);
	CHECK(strlen(s->line[0]) < PTD_JSON_MAX_RECORD);
	{
		cJSON *o = cJSON_Parse(s->line[0]);
		cJSON *b = cJSON_GetObjectItem(o, "blocks");

		CHECK(o != NULL);
		CHECK_EQ_INT(cJSON_GetArraySize(b), PTD_TRACES_MAX_BBS);
		cJSON_Delete(o);
	}
	sim_free(s);
}

/* Counts are per thread: 30 iterations on each of two threads form no
 * trace at 50; each thread's own 52nd forms its own. */
static void test_per_thread(void)
{
	struct sim *s = sim_new(0);

	REQUIRE(s);
	for (unsigned i = 0; i < 30; i++) {
		loop_iter(s, 1);
		loop_iter(s, 2);
	}
	CHECK_EQ_INT(s->nrec, 0);
	for (unsigned i = 0; i < 22; i++)
		loop_iter(s, 2);
	REQUIRE(s->nrec == 1);
	CHECK_EQ_INT(s->rec[0].tid, 2);
	for (unsigned i = 0; i < 22; i++)
		loop_iter(s, 1);
	REQUIRE(s->nrec == 2);
	CHECK_EQ_INT(s->rec[1].tid, 1);
	CHECK_EQ_INT(s->rec[1].u.trace.id, 2);
	sim_free(s);
}

/* Leaving a trace makes where it went a head: A B loop, B sometimes
 * going on to C (forward) which jumps back to A.  C becomes a head when
 * entered from the trace, and hot after 3 such exits. */
static void test_exit_head(void)
{
	struct sim *s = sim_new(3);

	REQUIRE(s);
	for (unsigned i = 0; i < 6; i++)
		loop_iter(s, 1);
	REQUIRE(s->nrec == 1);
	for (unsigned i = 0; i < 3; i++) {
		CHECK_EQ_INT(run_block(s, 1, 0x1000, 3, ptic_jump), 0);
		CHECK_EQ_INT(run_block(s, 1, 0x1010, 2, ptic_cond_jump), 0);
		CHECK_EQ_INT(run_block(s, 1, 0x1020, 2, ptic_jump), 0);
	}
	CHECK_EQ_INT(s->nrec, 1);
	/* the 3rd count started recording at C; A ends it (a trace head) */
	CHECK_EQ_INT(run_block(s, 1, 0x1000, 3, ptic_jump), 0);
	REQUIRE(s->nrec == 2);
	CHECK_EQ_U64(s->rec[1].u.trace.head, 0x1020);
	CHECK_EQ_INT(s->rec[1].u.trace.nblocks, 1);
	CHECK_EQ_STR(s->rec[1].u.trace.end, "backward_branch");
	sim_free(s);
}

int main(void)
{
	RUN(test_args);
	RUN(test_loop_threshold);
	RUN(test_grow);
	RUN(test_withdraw);
	RUN(test_withdraw_unmapped);
	RUN(test_max_bbs);
	RUN(test_per_thread);
	RUN(test_exit_head);
	return check_done();
}
