/* SPDX-License-Identifier: MIT */
/*
 * lib/views: the stacks from records made up here -- what the decoder
 * rarely gives (call records whose depth skips, resets, errors, stacks
 * past the depth limit, code without symbols, threads interleaved) --
 * must always give slices that nest and counts that add up; the writers
 * must give valid JSON and XML for any name.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "views/flamegraph.h"
#include "views/perfetto.h"
#include "views/stacks.h"

/* The slices seen, checked as they come. */
struct log {
	unsigned open[4];	/* per thread (tid 1..3): slices open */
	unsigned opens, closes, resets, bad;
	uint64_t last_ts[4];
	char names[64][64];	/* the first names opened */
	unsigned nnames;
};

static int lg_open(void *ctx, pid_t pid, pid_t tid, uint32_t depth,
		   const char *name, uint64_t ts)
{
	struct log *l = ctx;

	(void)pid;
	if (depth != l->open[tid] || ts < l->last_ts[tid])
		l->bad++;
	l->last_ts[tid] = ts;
	l->open[tid]++;
	l->opens++;
	if (l->nnames < 64)
		(void)snprintf(l->names[l->nnames++], 64, "%s", name);
	return 0;
}

static int lg_close(void *ctx, pid_t pid, pid_t tid, uint32_t depth,
		    uint64_t ts)
{
	struct log *l = ctx;

	(void)pid;
	if (!l->open[tid] || depth != l->open[tid] - 1 ||
	    ts < l->last_ts[tid])
		l->bad++;
	l->last_ts[tid] = ts;
	l->open[tid]--;
	l->closes++;
	return 0;
}

static int lg_reset(void *ctx, pid_t pid, pid_t tid, const char *reason,
		    uint64_t ts)
{
	struct log *l = ctx;

	(void)pid;
	(void)ts;
	if (l->open[tid] || strcmp(reason, "decode"))
		l->bad++;
	l->resets++;
	return 0;
}

static struct ptd_stacks *new_stacks(struct log *l)
{
	struct ptd_stacks_ops ops = { NULL, lg_open, lg_close, lg_reset, l };
	struct ptd_stacks *s = NULL;

	memset(l, 0, sizeof(*l));
	if (ptd_stacks_new(&ops, &s) < 0)
		abort();
	return s;
}

static void insn(struct ptd_stacks *s, pid_t tid, uint64_t ip,
		 const char *sym)
{
	struct ptd_record r;

	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_INSN;
	r.pid = 1;
	r.tid = tid;
	r.u.insn.ip = ip;
	r.u.insn.size = 1;
	r.u.insn.sym = sym;
	CHECK_EQ_INT(ptd_stacks_feed(s, &r), 0);
}

static void call(struct ptd_stacks *s, pid_t tid, enum ptd_call_kind kind,
		 uint32_t depth, uint32_t frames, uint32_t flags)
{
	struct ptd_record r;

	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_CALL;
	r.pid = 1;
	r.tid = tid;
	r.u.call.kind = kind;
	r.u.call.depth = depth;
	r.u.call.frames = frames;
	r.u.call.flags = flags;
	r.u.call.reason = "decode";
	CHECK_EQ_INT(ptd_stacks_feed(s, &r), 0);
}

static const struct ptd_stack_node *child(const struct ptd_stacks *s,
					  uint32_t parent, const char *name)
{
	for (uint32_t c = ptd_stacks_node(s, parent)->child; c;
	     c = ptd_stacks_node(s, c)->next)
		if (!strcmp(ptd_stacks_node(s, c)->name, name))
			return ptd_stacks_node(s, c);
	return NULL;
}

static uint32_t idx(const struct ptd_stacks *s, const struct ptd_stack_node *n)
{
	return (uint32_t)(n - ptd_stacks_node(s, 0));
}

/* A call, a tail call, a return, calls whose depths skip, an unwind. */
static void test_nesting(void)
{
	struct log l;
	struct ptd_stacks *s = new_stacks(&l);
	const struct ptd_stack_node *m, *a, *b;

	insn(s, 1, 0x100, "main");
	insn(s, 1, 0x101, "main");
	call(s, 1, PTD_CALL_CALL, 1, 0, 0);
	insn(s, 1, 0x200, "a");
	call(s, 1, PTD_CALL_CALL, 1, 0, PTD_CALL_F_TAIL);
	insn(s, 1, 0x300, "b");		/* a's frame now runs b */
	insn(s, 1, 0x301, "b");
	call(s, 1, PTD_CALL_RETURN, 1, 1, 0);
	insn(s, 1, 0x102, "main");
	/* a call record deeper than the stack: frames in between */
	call(s, 1, PTD_CALL_CALL, 4, 0, 0);
	insn(s, 1, 0x400, "c");
	CHECK_EQ_U64(l.open[1], 5);
	/* an unwind past all of them */
	call(s, 1, PTD_CALL_RETURN, 4, 4, PTD_CALL_F_UNWIND);
	insn(s, 1, 0x103, "main");
	CHECK_EQ_U64(l.open[1], 1);
	CHECK_EQ_INT(ptd_stacks_finish(s), 0);
	CHECK_EQ_U64(l.open[1], 0);
	CHECK_EQ_U64(l.bad, 0);
	CHECK_EQ_U64(l.opens, l.closes);
	CHECK_EQ_STR(l.names[0], "main");
	CHECK_EQ_STR(l.names[1], "a");
	CHECK_EQ_STR(l.names[2], "b");
	CHECK_EQ_STR(l.names[3], "[unknown]");
	/* counts: main 4 self, main;a 1, main;b 2, main;[unknown]... c 1 */
	CHECK_EQ_U64(ptd_stacks_node(s, 0)->total, 8);
	m = child(s, 0, "main");
	REQUIRE(m);
	CHECK_EQ_U64(m->self, 4);
	CHECK_EQ_U64(m->total, 8);
	a = child(s, idx(s, m), "a");
	b = child(s, idx(s, m), "b");
	REQUIRE(a && b);
	CHECK_EQ_U64(a->total, 1);
	CHECK_EQ_U64(b->self, 2);
	/* children by name: [unknown] < a < b */
	CHECK_EQ_STR(ptd_stacks_node(s, m->child)->name, "[unknown]");
	CHECK_EQ_U64(ptd_stacks_insns(s), 8);
	CHECK_EQ_INT(ptd_stacks_clock(s), PTD_STACKS_CLOCK_INSNS);
	ptd_stacks_free(s);
}

/* Two calls with no instruction between: the first frame is named
 * "[unknown]" and the second nests in it. */
static void test_call_call(void)
{
	struct log l;
	struct ptd_stacks *s = new_stacks(&l);
	const struct ptd_stack_node *m, *u;

	insn(s, 1, 0x100, "main");
	call(s, 1, PTD_CALL_CALL, 1, 0, 0);
	call(s, 1, PTD_CALL_CALL, 2, 0, 0);
	insn(s, 1, 0x200, "f");
	CHECK_EQ_U64(l.open[1], 3);
	CHECK_EQ_INT(ptd_stacks_finish(s), 0);
	CHECK_EQ_U64(l.bad, 0);
	m = child(s, 0, "main");
	REQUIRE(m);
	u = child(s, idx(s, m), "[unknown]");
	REQUIRE(u);
	CHECK(child(s, idx(s, u), "f") && child(s, idx(s, u), "f")->self == 1);
	ptd_stacks_free(s);
}

/* Errors and stack_reset close everything; a new base follows. */
static void test_reset(void)
{
	struct log l;
	struct ptd_stacks *s = new_stacks(&l);
	struct ptd_record e;

	insn(s, 1, 0x100, "main");
	call(s, 1, PTD_CALL_CALL, 1, 0, 0);
	insn(s, 1, 0x200, "a");
	call(s, 1, PTD_CALL_RESET, 2, 0, 0);
	CHECK_EQ_U64(l.open[1], 0);
	CHECK_EQ_U64(l.resets, 1);
	insn(s, 1, 0x201, "a");
	call(s, 1, PTD_CALL_CALL, 1, 0, 0);
	insn(s, 1, 0x300, "b");
	memset(&e, 0, sizeof(e));
	e.type = PTD_REC_ERROR;
	e.pid = 1;
	e.tid = 1;
	e.u.error.context = "decode";
	CHECK_EQ_INT(ptd_stacks_feed(s, &e), 0);
	CHECK_EQ_U64(l.open[1], 0);
	CHECK_EQ_U64(l.resets, 2);
	/* an error with nothing open is no reset */
	CHECK_EQ_INT(ptd_stacks_feed(s, &e), 0);
	CHECK_EQ_U64(l.resets, 2);
	/* a return past the start renames the base */
	insn(s, 1, 0x301, "b");
	call(s, 1, PTD_CALL_RETURN, 0, 0, PTD_CALL_F_UNMATCHED);
	insn(s, 1, 0x500, "caller");
	CHECK_EQ_INT(ptd_stacks_thread_end(s, 1), 0);
	CHECK_EQ_U64(l.open[1], 0);
	CHECK_EQ_INT(ptd_stacks_finish(s), 0);
	CHECK_EQ_U64(ptd_stacks_resets(s), 2);
	CHECK_EQ_U64(l.bad, 0);
	CHECK_EQ_U64(ptd_stacks_node(s, 0)->total, 6);
	CHECK(child(s, 0, "caller") && child(s, 0, "b") && child(s, 0, "a"));
	ptd_stacks_free(s);
}

/* Code without symbols: a frame is named by where it was entered. */
static void test_nosym(void)
{
	struct log l;
	struct ptd_stacks *s = new_stacks(&l);
	const struct ptd_stack_node *n;

	insn(s, 1, 0x100, NULL);
	insn(s, 1, 0x101, NULL);
	call(s, 1, PTD_CALL_CALL, 1, 0, 0);
	insn(s, 1, 0x2000, NULL);
	insn(s, 1, 0x2001, NULL);
	insn(s, 1, 0x2002, "named");
	insn(s, 1, 0x3000, NULL);	/* into unnamed code again */
	CHECK_EQ_INT(ptd_stacks_finish(s), 0);
	CHECK_EQ_U64(l.bad, 0);
	n = child(s, 0, "0x100");
	REQUIRE(n);
	CHECK_EQ_U64(n->self, 2);
	CHECK(child(s, idx(s, n), "0x2000") &&
	      child(s, idx(s, n), "0x2000")->self == 2);
	CHECK(child(s, idx(s, n), "named") && child(s, idx(s, n), "0x3000"));
	ptd_stacks_free(s);
}

/* Threads interleaved keep their own stacks; past the depth limit
 * nothing more opens and every instruction is still counted. */
static void test_threads_depth(void)
{
	struct log l;
	struct ptd_stacks *s = new_stacks(&l);
	uint32_t d;

	insn(s, 1, 0x100, "t1");
	insn(s, 2, 0x100, "t2");
	for (d = 1; d <= PTD_STACKS_MAX_DEPTH + 100; d++) {
		call(s, 1, PTD_CALL_CALL, d, 0, 0);
		insn(s, 1, 0x200, "rec");
		insn(s, 2, 0x101, "t2");
	}
	CHECK_EQ_U64(l.open[1], PTD_STACKS_MAX_DEPTH);
	CHECK_EQ_U64(l.open[2], 1);
	call(s, 1, PTD_CALL_RETURN, d - 1, 150, 0);
	insn(s, 1, 0x201, "rec");
	CHECK_EQ_U64(l.open[1], PTD_STACKS_MAX_DEPTH - 49);
	CHECK_EQ_INT(ptd_stacks_finish(s), 0);
	CHECK_EQ_U64(l.bad, 0);
	CHECK_EQ_U64(ptd_stacks_node(s, 0)->total,
		     2 + 2 * (PTD_STACKS_MAX_DEPTH + 100) + 1);
	CHECK_EQ_U64(child(s, 0, "t2")->self, PTD_STACKS_MAX_DEPTH + 101);
	ptd_stacks_free(s);
}

/* Any bytes in a name: the JSON parses, the XML escapes them. */
static void test_writers(void)
{
	static const char odd[] = "q\"uote\\<&>'\x01\xff\xc3(";
	struct ptd_stacks_ops ops;
	struct ptd_perfetto *pf = NULL;
	struct ptd_stacks *s = NULL;
	struct ptd_record r;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cJSON *doc, *ev;
	const cJSON *e;
	bool found = false;

	REQUIRE(f);
	REQUIRE(ptd_perfetto_new(f, &ops, &pf) == 0);
	REQUIRE(ptd_stacks_new(&ops, &s) == 0);
	ptd_perfetto_set_stacks(pf, s);
	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_INSN;
	r.pid = 7;
	r.tid = 8;
	r.has_tsc = r.has_time = true;
	r.time = 1234567;
	r.u.insn.sym = odd;
	CHECK_EQ_INT(ptd_stacks_feed(s, &r), 0);
	CHECK_EQ_INT(ptd_stacks_finish(s), 0);
	CHECK_EQ_INT(ptd_perfetto_finish(pf, "in\"put", "test"), 0);
	REQUIRE(fclose(f) == 0);
	CHECK(strstr(buf, "\"ts\":1234.567"));
	doc = cJSON_Parse(buf);
	REQUIRE(doc);
	ev = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
	cJSON_ArrayForEach(e, ev)
	{
		const char *n = cJSON_GetStringValue(
			cJSON_GetObjectItemCaseSensitive(e, "name"));

		found = found || (n && !strncmp(n, "q\"uote\\<&>'\x01", 12));
	}
	CHECK(found);
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			     cJSON_GetObjectItemCaseSensitive(doc,
							      "otherData"),
			     "time_axis")),
		     "time");
	cJSON_Delete(doc);
	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	REQUIRE(f);
	CHECK_EQ_INT(ptd_flamegraph_write(f, s, NULL), 0);
	REQUIRE(fclose(f) == 0);
	CHECK(strstr(buf, "q&quot;uote\\&lt;&amp;&gt;&apos;?&#xff;&#xc3;("));
	CHECK(!strstr(buf, "\xff"));
	CHECK(strstr(buf, "<title>all (1 instructions, 100.00%)</title>"));
	free(buf);
	ptd_stacks_free(s);
	ptd_perfetto_free(pf);
}

/* The first instruction picks the clock: TSC without perf time gives
 * TSC ticks; an instruction without it keeps the thread's last time. */
static void test_tsc_axis(void)
{
	struct log l;
	struct ptd_stacks *s = new_stacks(&l);
	struct ptd_record r;

	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_INSN;
	r.pid = 1;
	r.tid = 1;
	r.has_tsc = true;
	r.tsc = 5000;
	r.u.insn.sym = "main";
	CHECK_EQ_INT(ptd_stacks_feed(s, &r), 0);
	CHECK_EQ_INT(ptd_stacks_clock(s), PTD_STACKS_CLOCK_TSC);
	CHECK_EQ_U64(l.last_ts[1], 5000);
	call(s, 1, PTD_CALL_CALL, 1, 0, 0);
	r.has_tsc = false;	/* no TSC: the time stays */
	r.u.insn.sym = "f";
	CHECK_EQ_INT(ptd_stacks_feed(s, &r), 0);
	CHECK_EQ_U64(l.last_ts[1], 5000);
	r.has_tsc = true;
	r.tsc = 7000;
	r.u.insn.sym = "g";	/* a jump into g: f's slice ends at 7000 */
	CHECK_EQ_INT(ptd_stacks_feed(s, &r), 0);
	CHECK_EQ_U64(l.last_ts[1], 7000);
	CHECK_EQ_INT(ptd_stacks_finish(s), 0);
	CHECK_EQ_U64(l.bad, 0);
	CHECK_EQ_STR(ptd_stacks_clock_name(ptd_stacks_clock(s)), "tsc");
	ptd_stacks_free(s);
}

int main(void)
{
	RUN(test_nesting);
	RUN(test_call_call);
	RUN(test_reset);
	RUN(test_nosym);
	RUN(test_threads_depth);
	RUN(test_writers);
	RUN(test_tsc_axis);
	return check_done();
}
