/* SPDX-License-Identifier: MIT */
/*
 * decode/calls.c on synthetic record sequences: the cases no test program
 * reaches (a ret into a caller's middle, a return past where the trace
 * began, a ret to nowhere, resets on errors and overflows, tracing off
 * across a call), each with the records written out by hand; and the JSON
 * lines of the three kinds.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "decode/calls.h"
#include "record/jsonw.h"

#define MAXOUT 16

struct out {
	struct ptd_record r[MAXOUT];
	size_t n;
};

static int collect(void *ctx, const struct ptd_record *rec)
{
	struct out *o = ctx;

	if (o->n == MAXOUT) {
		CHECK_FAIL_("%s", "more records than expected");
		return 1;
	}
	o->r[o->n++] = *rec;
	return 0;
}

static const char MOD[] = "/bin/t";


/* Feed an instruction at @ip of class @ic in function @sym (+@off). */
static void insn(struct ptd_calls *c, struct out *o, uint64_t ip,
		 uint8_t size, enum pt_insn_class ic, const char *sym,
		 uint64_t off)
{
	struct ptd_record r;

	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_INSN;
	r.pid = 1;
	r.tid = 2;
	r.u.insn.ip = ip;
	r.u.insn.size = size;
	r.u.insn.iclass = ic;
	r.u.insn.sym = sym;
	r.u.insn.symoff = off;
	r.u.insn.module = MOD;
	CHECK_EQ_INT(ptd_calls_feed(c, &r, collect, o), 0);
}

static void check_ret(const struct ptd_record *r, uint32_t depth,
		      uint32_t frames, uint64_t from, uint64_t to,
		      uint32_t flags)
{
	CHECK_EQ_INT(r->type, PTD_REC_CALL);
	CHECK_EQ_INT(r->u.call.kind, PTD_CALL_RETURN);
	CHECK_EQ_U64(r->u.call.depth, depth);
	CHECK_EQ_U64(r->u.call.frames, frames);
	CHECK_EQ_U64(r->u.call.from, from);
	CHECK_EQ_U64(r->u.call.to, to);
	CHECK_EQ_U64(r->u.call.flags, flags);
}

/* main calls a, a calls b; b "returns" into main's middle (an unwinder's
 * ret to a landing pad): both frames pop, unwind. */
static void test_ret_unwind(void)
{
	struct ptd_calls *c;
	struct out o = { .n = 0 };

	REQUIRE(ptd_calls_new(&c) == 0);
	insn(c, &o, 0x1000, 5, ptic_call, "main", 0);
	insn(c, &o, 0x2000, 5, ptic_call, "a", 0);
	insn(c, &o, 0x3000, 1, ptic_return, "b", 0);
	insn(c, &o, 0x1040, 1, ptic_other, "main", 0x40);
	REQUIRE(o.n == 3);
	CHECK_EQ_INT(o.r[0].u.call.kind, PTD_CALL_CALL);
	CHECK_EQ_U64(o.r[0].u.call.depth, 1);
	CHECK_EQ_U64(o.r[0].u.call.from, 0x1000);
	CHECK_EQ_U64(o.r[0].u.call.to, 0x2000);
	CHECK_EQ_U64(o.r[1].u.call.depth, 2);
	check_ret(&o.r[2], 2, 2, 0x3000, 0x1040, PTD_CALL_F_UNWIND);
	CHECK_EQ_U64(ptd_calls_depth(c), 0);
	ptd_calls_free(c);
}

/* A return past where the trace began pops nothing; one to no frame
 * pops the top frame, unmatched; a plain return pops one. */
static void test_unmatched(void)
{
	struct ptd_calls *c;
	struct out o = { .n = 0 };

	REQUIRE(ptd_calls_new(&c) == 0);
	insn(c, &o, 0x1000, 1, ptic_return, "f", 0);
	insn(c, &o, 0x5000, 5, ptic_call, "g", 0x10);
	insn(c, &o, 0x6000, 5, ptic_call, "h", 0);
	insn(c, &o, 0x7000, 1, ptic_return, "k", 0);
	insn(c, &o, 0x9999, 1, ptic_return, NULL, 0);
	insn(c, &o, 0x5005, 1, ptic_other, "g", 0x15);
	REQUIRE(o.n == 5);
	check_ret(&o.r[0], 0, 0, 0x1000, 0x5000, PTD_CALL_F_UNMATCHED);
	check_ret(&o.r[3], 2, 1, 0x7000, 0x9999, PTD_CALL_F_UNMATCHED);
	check_ret(&o.r[4], 1, 1, 0x9999, 0x5005, 0);
	ptd_calls_free(c);
}

/* An error resets the stack (once: nothing left to lose after), and the
 * instruction before it is not joined to the one after; so does an
 * overflow. */
static void test_reset(void)
{
	struct ptd_calls *c;
	struct out o = { .n = 0 };
	struct ptd_record e;

	REQUIRE(ptd_calls_new(&c) == 0);
	insn(c, &o, 0x1000, 5, ptic_call, "main", 0);
	insn(c, &o, 0x2000, 5, ptic_call, "a", 0);
	memset(&e, 0, sizeof(e));
	e.type = PTD_REC_ERROR;
	e.u.error.context = "decode";
	CHECK_EQ_INT(ptd_calls_feed(c, &e, collect, &o), 0);
	CHECK_EQ_INT(ptd_calls_feed(c, &e, collect, &o), 0);
	insn(c, &o, 0x2005, 1, ptic_return, "a", 5);
	/* the call at 0x2000 never reached its target: one frame lost */
	REQUIRE(o.n == 2);
	CHECK_EQ_INT(o.r[1].u.call.kind, PTD_CALL_RESET);
	CHECK_EQ_U64(o.r[1].u.call.depth, 1);
	CHECK_EQ_STR(o.r[1].u.call.reason, "decode");
	CHECK_EQ_U64(ptd_calls_depth(c), 0);
	/* the call at 0x2000 and the ret at 0x2005 are not joined */
	insn(c, &o, 0x1005, 5, ptic_call, "main", 5);
	REQUIRE(o.n == 3);
	check_ret(&o.r[2], 0, 0, 0x2005, 0x1005, PTD_CALL_F_UNMATCHED);
	memset(&e, 0, sizeof(e));
	e.type = PTD_REC_EVENT;
	e.u.event.ev.type = ptev_overflow;
	CHECK_EQ_INT(ptd_calls_feed(c, &e, collect, &o), 0);
	REQUIRE(o.n == 4);
	CHECK_EQ_INT(o.r[3].u.call.kind, PTD_CALL_RESET);
	CHECK_EQ_STR(o.r[3].u.call.reason, "overflow");
	ptd_calls_free(c);
}

/* A signal interrupting an instruction (async_disabled at its resume
 * IP), the handler's ret into the trampoline, sigreturn. */
static void test_async(void)
{
	struct ptd_calls *c;
	struct out o = { .n = 0 };
	struct ptd_record e;

	REQUIRE(ptd_calls_new(&c) == 0);
	insn(c, &o, 0x1000, 2, ptic_cond_jump, "main", 0);
	memset(&e, 0, sizeof(e));
	e.type = PTD_REC_EVENT;
	e.u.event.ev.type = ptev_async_disabled;
	e.u.event.ev.variant.async_disabled.at = 0x1100;
	CHECK_EQ_INT(ptd_calls_feed(c, &e, collect, &o), 0);
	insn(c, &o, 0x8000, 1, ptic_return, "handler", 0);
	insn(c, &o, 0x9000, 2, ptic_far_call, "__restore_rt", 0);
	insn(c, &o, 0x1100, 1, ptic_other, "main", 0x100);
	REQUIRE(o.n == 2);
	CHECK_EQ_INT(o.r[0].u.call.kind, PTD_CALL_CALL);
	CHECK_EQ_U64(o.r[0].u.call.flags, PTD_CALL_F_ASYNC);
	CHECK_EQ_U64(o.r[0].u.call.from, 0x1100);
	CHECK_EQ_U64(o.r[0].u.call.to, 0x8000);
	CHECK_EQ_STR(o.r[0].u.call.sym, "handler");
	check_ret(&o.r[1], 1, 1, 0x9000, 0x1100, PTD_CALL_F_SIGRETURN);
	ptd_calls_free(c);
}

/* A ret interrupted after it ran: it returned (to the resume IP), then
 * the handler was entered from there. */
static void test_async_ret(void)
{
	struct ptd_calls *c;
	struct out o = { .n = 0 };
	struct ptd_record e;

	REQUIRE(ptd_calls_new(&c) == 0);
	insn(c, &o, 0x1000, 5, ptic_call, "main", 0);
	insn(c, &o, 0x2000, 1, ptic_return, "f", 0);
	memset(&e, 0, sizeof(e));
	e.type = PTD_REC_EVENT;
	e.u.event.ev.type = ptev_async_disabled;
	e.u.event.ev.variant.async_disabled.at = 0x1005;
	CHECK_EQ_INT(ptd_calls_feed(c, &e, collect, &o), 0);
	insn(c, &o, 0x8000, 1, ptic_other, "handler", 0);
	REQUIRE(o.n == 3);
	check_ret(&o.r[1], 1, 1, 0x2000, 0x1005, 0);
	CHECK_EQ_INT(o.r[2].u.call.kind, PTD_CALL_CALL);
	CHECK_EQ_U64(o.r[2].u.call.flags, PTD_CALL_F_ASYNC);
	CHECK_EQ_U64(o.r[2].u.call.depth, 1);
	CHECK_EQ_U64(o.r[2].u.call.from, 0x1005);
	ptd_calls_free(c);
}

/* A call into code outside the address filter: tracing goes off after
 * the call and comes back at its return address; nothing is known of
 * what ran, no frame is left behind.  A syscall's disable is no gap. */
static void test_filtered(void)
{
	struct ptd_calls *c;
	struct out o = { .n = 0 };
	struct ptd_record e;

	REQUIRE(ptd_calls_new(&c) == 0);
	memset(&e, 0, sizeof(e));
	e.type = PTD_REC_EVENT;
	e.u.event.ev.type = ptev_disabled;
	insn(c, &o, 0x1000, 5, ptic_call, "main", 0);
	CHECK_EQ_INT(ptd_calls_feed(c, &e, collect, &o), 0);
	insn(c, &o, 0x1005, 2, ptic_far_call, "main", 5);
	CHECK_EQ_INT(ptd_calls_feed(c, &e, collect, &o), 0);
	insn(c, &o, 0x1007, 5, ptic_call, "main", 7);
	insn(c, &o, 0x2000, 1, ptic_return, "f", 0);
	insn(c, &o, 0x100c, 1, ptic_other, "main", 0xc);
	REQUIRE(o.n == 2);
	CHECK_EQ_U64(o.r[0].u.call.depth, 1);
	CHECK_EQ_U64(o.r[0].u.call.from, 0x1007);
	check_ret(&o.r[1], 1, 1, 0x2000, 0x100c, 0);
	ptd_calls_free(c);
}

static void test_json(void)
{
	struct ptd_record r;
	char buf[PTD_JSON_MAX_RECORD];
	size_t n;

	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_CALL;
	r.pid = 1;
	r.tid = 2;
	r.u.call.kind = PTD_CALL_CALL;
	r.u.call.depth = 3;
	r.u.call.from = 0x10;
	r.u.call.to = 0x20;
	r.u.call.sym = "f";
	r.u.call.flags = PTD_CALL_F_TAIL;
	n = ptd_json_record(buf, sizeof(buf), &r);
	buf[n] = '\0';
	CHECK_EQ_STR(buf, "{\"type\":\"call\",\"pid\":1,\"tid\":2,\"depth\":3,"
			  "\"site\":\"0x10\",\"target\":\"0x20\",\"sym\":"
			  "\"f+0x0\",\"tail\":true}\n");
	r.u.call.kind = PTD_CALL_RETURN;
	r.u.call.frames = 2;
	r.u.call.flags = PTD_CALL_F_UNWIND;
	r.u.call.sym = NULL;
	r.has_tsc = true;
	r.tsc = 0xabc;
	n = ptd_json_record(buf, sizeof(buf), &r);
	buf[n] = '\0';
	CHECK_EQ_STR(buf, "{\"type\":\"return\",\"pid\":1,\"tid\":2,\"depth\":3,"
			  "\"frames\":2,\"from\":\"0x10\",\"to\":\"0x20\","
			  "\"unwind\":true,\"tsc\":\"0xabc\"}\n");
	/* a renderer without sym (a subscriber that did not ask for
	 * symbols) leaves it out, and only it */
	{
		struct ptd_jsonr jr;

		ptd_jsonr_init(&jr, PTD_FIELDS_ALL &
					    ~PTD_FIELD_BIT(PTD_FIELD_SYM));
		r.u.call.sym = "g";
		n = ptd_jsonr_render(&jr, buf, &r);
		buf[n] = '\0';
		CHECK_EQ_STR(buf, "{\"type\":\"return\",\"pid\":1,\"tid\":2,"
				  "\"depth\":3,\"frames\":2,\"from\":\"0x10\","
				  "\"to\":\"0x20\",\"unwind\":true,\"tsc\":"
				  "\"0xabc\"}\n");
	}
	r.has_tsc = false;
	r.u.call.kind = PTD_CALL_RESET;
	r.u.call.reason = "lost";
	n = ptd_json_record(buf, sizeof(buf), &r);
	buf[n] = '\0';
	CHECK_EQ_STR(buf, "{\"type\":\"stack_reset\",\"pid\":1,\"tid\":2,"
			  "\"depth\":3,\"reason\":\"lost\"}\n");
}

int main(void)
{
	RUN(test_ret_unwind);
	RUN(test_unmatched);
	RUN(test_reset);
	RUN(test_async);
	RUN(test_async_ret);
	RUN(test_filtered);
	RUN(test_json);
	return check_done();
}
