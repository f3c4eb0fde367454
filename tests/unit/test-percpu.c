/* SPDX-License-Identifier: MIT */
/*
 * Tests of perf/percpu: per-CPU buffers written by the kernel-faithful
 * producer (perf/producer.h) on a scripted schedule of threads, drained by
 * the shared reader into the splitter; every thread must get exactly its
 * own bytes, records and losses.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "perf/percpu.h"
#include "perf/producer.h"
#include "perf/ring.h"
#include "perf/sideband.h"

#define PAGE 4096u
#define ST PTD_SIDEBAND_SAMPLE_TYPE
#define MAXTID 512u
#define MAXCPU 4u
#define MAXLOSS 64u

/* ---- what the sinks saw, per thread ---- */

struct loss_ev {
	size_t pos;		/* stream length when it was reported */
	uint64_t bytes;		/* 0: unknown */
};

struct tsee {
	uint8_t *bytes;
	size_t len, cap;
	unsigned seen;
	unsigned records;
	unsigned nloss;
	struct loss_ev loss[MAXLOSS];
	uint32_t seen_pid;
};

struct coll {
	struct tsee t[MAXTID];
	unsigned bad_tid;	/* a sink call for a tid out of range */
	int fail_bytes;		/* > 0: fail the Nth bytes call with -EIO */
	unsigned bytes_calls;
};

static struct tsee *tget(struct coll *c, uint32_t tid)
{
	if (tid >= MAXTID) {
		c->bad_tid++;
		return NULL;
	}
	return &c->t[tid];
}

static int s_bytes(void *ctx, uint32_t tid, const uint8_t *data, size_t len)
{
	struct coll *c = ctx;
	struct tsee *t = tget(c, tid);

	if (c->fail_bytes && ++c->bytes_calls == (unsigned)c->fail_bytes)
		return -EIO;
	if (!t)
		return 0;
	if (t->len + len > t->cap) {
		size_t cap = (t->len + len) * 2 + 64;
		uint8_t *n = realloc(t->bytes, cap);

		if (!n)
			return -ENOMEM;
		t->bytes = n;
		t->cap = cap;
	}
	memcpy(t->bytes + t->len, data, len);
	t->len += len;
	return 0;
}

static int s_record(void *ctx, uint32_t tid, const struct ptd_perf_event *e)
{
	struct tsee *t = tget(ctx, tid);

	(void)e;
	if (t)
		t->records++;
	return 0;
}

static int s_lost(void *ctx, uint32_t tid, uint64_t bytes)
{
	struct tsee *t = tget(ctx, tid);

	if (t && t->nloss < MAXLOSS)
		t->loss[t->nloss++] = (struct loss_ev){ t->len, bytes };
	return 0;
}

static int s_seen(void *ctx, uint32_t pid, uint32_t tid)
{
	struct tsee *t = tget(ctx, tid);

	if (t) {
		t->seen++;
		t->seen_pid = pid;
	}
	return 0;
}

static struct coll *coll_new(void)
{
	struct coll *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	return c;
}

static void coll_free(struct coll *c)
{
	for (unsigned i = 0; i < MAXTID; i++)
		free(c->t[i].bytes);
	free(c);
}

static struct ptd_percpu *pc_new(struct coll *c, unsigned ncpus, int64_t pid,
				 bool follow, uint32_t max_threads)
{
	struct ptd_percpu_opts o = {
		.ncpus = ncpus, .pid = pid, .follow_children = follow,
		.sample_type = ST, .sample_id_all = true,
		.max_threads = max_threads,
	};
	struct ptd_percpu_sink s = {
		.bytes = s_bytes, .record = s_record, .lost = s_lost,
		.thread_seen = s_seen, .ctx = c,
	};
	struct ptd_percpu *pc = NULL;

	if (ptd_percpu_new(&o, &s, &pc) != 0)
		abort();
	return pc;
}

/* ---- one simulated CPU ring ---- */

struct cpu {
	unsigned no;
	struct ptd_perf_buf b;
	struct ptd_perf_producer p;
	struct ptd_perf_reader r;
};

static uint64_t now = 1000;	/* sample time, grows with each record */

static void cpu_init(struct cpu *c, unsigned no, size_t data, size_t aux)
{
	memset(c, 0, sizeof(*c));
	c->no = no;
	if (ptd_perf_buf_alloc(data, aux, false, &c->b) != 0)
		abort();
	ptd_perf_producer_init(&c->p, &c->b);
	ptd_perf_reader_init(&c->r, &c->b);
}

static struct ptd_perf_sample_id sid_of(const struct cpu *c, uint32_t pid,
					uint32_t tid)
{
	return (struct ptd_perf_sample_id){
		.pid = pid, .tid = tid, .time = now++, .cpu = c->no,
		.identifier = 7,
	};
}

/* Byte @k of thread @tid's trace: tags the thread and the position. */
static uint8_t tbyte(uint32_t tid, uint64_t k)
{
	return (uint8_t)(tid * 31u + k * 7u + (k >> 8) * 3u);
}

static int put(struct cpu *c, const void *rec, size_t size)
{
	if (size == 0)
		abort();	/* an encoder refused: a bug in the test */
	return ptd_perf_producer_record(&c->p, rec, size);
}

static int put_itrace(struct cpu *c, uint32_t pid, uint32_t tid)
{
	uint64_t rec[16];
	struct ptd_perf_itrace_start it = { pid, tid };
	struct ptd_perf_sample_id sid = sid_of(c, pid, tid);

	return put(c, rec, ptd_perf_encode_itrace_start(rec, sizeof(rec), &it,
							ST, &sid));
}

/* SWITCH (or SWITCH_CPU_WIDE with next/prev @np_*) of @pid/@tid. */
static int put_switch(struct cpu *c, bool wide, bool out, uint32_t pid,
		      uint32_t tid, uint32_t np_pid, uint32_t np_tid)
{
	uint64_t rec[16];
	struct ptd_perf_switch sw = { .out = out, .cpu_wide = wide,
				      .next_prev_pid = np_pid,
				      .next_prev_tid = np_tid };
	struct ptd_perf_sample_id sid = sid_of(c, pid, tid);
	size_t n = ptd_perf_encode_switch(rec, sizeof(rec), &sw, ST, &sid);

	return n ? put(c, rec, n) : -EINVAL;
}

static int put_task(struct cpu *c, bool exit, uint32_t pid, uint32_t ppid,
		    uint32_t tid, uint32_t ptid)
{
	uint64_t rec[16];
	struct ptd_perf_task t = { pid, ppid, tid, ptid, now };
	struct ptd_perf_sample_id sid = sid_of(c, pid, tid);

	return put(c, rec, ptd_perf_encode_task(rec, sizeof(rec), exit, &t, ST,
						&sid));
}

static int put_mmap2(struct cpu *c, uint32_t pid, uint32_t tid)
{
	uint64_t rec[32];
	struct ptd_perf_mmap m = {
		.pid = pid, .tid = tid, .addr = 0x400000, .len = 0x1000,
		.prot = 5, .flags = 2, .filename = "/usr/bin/true",
	};
	struct ptd_perf_sample_id sid = sid_of(c, pid, tid);

	return put(c, rec, ptd_perf_encode_mmap2(rec, sizeof(rec), &m, ST,
						 &sid));
}

static int put_comm(struct cpu *c, uint32_t pid, uint32_t tid)
{
	uint64_t rec[16];
	struct ptd_perf_comm m = { .pid = pid, .tid = tid, .comm = "worker" };
	struct ptd_perf_sample_id sid = sid_of(c, pid, tid);

	return put(c, rec, ptd_perf_encode_comm(rec, sizeof(rec), &m, ST,
						&sid));
}

/* Write @len bytes of thread @tid's stream from *@pos. */
static int64_t put_aux(struct cpu *c, uint32_t tid, uint64_t *pos, size_t len)
{
	uint8_t buf[1024];
	int64_t n;

	if (len > sizeof(buf))
		abort();
	for (size_t i = 0; i < len; i++)
		buf[i] = tbyte(tid, *pos + i);
	n = ptd_perf_producer_aux(&c->p, buf, len, 0);
	if (n > 0)
		*pos += (uint64_t)n;
	return n;
}

static bool stream_ok(const struct tsee *t, uint32_t tid, uint64_t len)
{
	if (t->len != len)
		return false;
	for (uint64_t k = 0; k < len; k++)
		if (t->bytes[k] != tbyte(tid, k))
			return false;
	return true;
}

/* ---- API contract ---- */

static void test_new_invalid(void)
{
	struct ptd_percpu_opts o = {
		.ncpus = 2, .pid = -1, .sample_type = ST, .sample_id_all = true,
	};
	struct ptd_percpu_sink s = { 0 };
	struct ptd_percpu *pc = NULL;
	struct ptd_perf_loss l = { .kind = PTD_PERF_LOSS_SAMPLES };
	struct perf_event_header h = { .type = 0x7000, .size = 8 };
	uint32_t pid, tid;

	CHECK_EQ_INT(ptd_percpu_new(NULL, &s, &pc), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_new(&o, NULL, &pc), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_new(&o, &s, NULL), -EINVAL);
	o.ncpus = 0;
	CHECK_EQ_INT(ptd_percpu_new(&o, &s, &pc), -EINVAL);
	o.ncpus = PTD_PERCPU_MAX_CPUS + 1;
	CHECK_EQ_INT(ptd_percpu_new(&o, &s, &pc), -EINVAL);
	o.ncpus = 2;
	o.pid = -2;
	CHECK_EQ_INT(ptd_percpu_new(&o, &s, &pc), -EINVAL);
	o.pid = (int64_t)INT32_MAX + 1;
	CHECK_EQ_INT(ptd_percpu_new(&o, &s, &pc), -EINVAL);
	o.pid = 5;
	o.sample_id_all = false;
	CHECK_EQ_INT(ptd_percpu_new(&o, &s, &pc), -EINVAL);
	o.sample_id_all = true;
	o.sample_type = PERF_SAMPLE_TIME;
	CHECK_EQ_INT(ptd_percpu_new(&o, &s, &pc), -EINVAL);
	o.sample_type = ST;
	o.max_threads = PTD_PERCPU_THREADS_MAX + 1;
	CHECK_EQ_INT(ptd_percpu_new(&o, &s, &pc), -EINVAL);
	CHECK(pc == NULL);
	o.max_threads = 0;
	REQUIRE(ptd_percpu_new(&o, &s, &pc) == 0);

	CHECK_EQ_INT(ptd_percpu_drain(pc, 2, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_drain(pc, 0, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_drain(NULL, 0, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_aux(pc, 2, 0, "x", 1), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_aux(pc, 0, 0, NULL, 1), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_record(pc, 2, &h), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_record(pc, 0, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_loss(pc, 2, &l), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_loss(pc, 0, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_owner(pc, 2, &pid, &tid), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_owner(pc, 0, NULL, &tid), -EINVAL);
	CHECK_EQ_INT(ptd_percpu_owner(pc, 0, &pid, &tid), 0);
	/* NULL sinks are fine: an unknown record, an orphan chunk */
	CHECK_EQ_INT(ptd_percpu_record(pc, 1, &h), 0);
	CHECK_EQ_INT(ptd_percpu_aux(pc, 1, 0, "xy", 2), 0);
	CHECK_EQ_INT(ptd_percpu_loss(pc, 1, &l), 0);
	CHECK_EQ_STR(ptd_percpu_last_error(pc), "");
	CHECK_EQ_STR(ptd_percpu_last_error(NULL), "");
	ptd_percpu_free(pc);
	ptd_percpu_free(NULL);
}

/* ---- the ownership rule, both record orders, both switch forms ---- */

static void test_owner_orders(void)
{
	struct coll *co = coll_new();
	struct ptd_percpu *pc = pc_new(co, 1, 100, false, 0);
	struct cpu c;
	uint64_t pa = 0, pb = 0;
	uint32_t pid = 0, tid = 0;
	struct ptd_percpu_stats st;

	cpu_init(&c, 0, 4 * PAGE, 4 * PAGE);
	/* producer order: AUX(A), OUT(A), IN(B) */
	REQUIRE(put_itrace(&c, 100, 101) == 0);
	REQUIRE(put_aux(&c, 101, &pa, 100) == 100);
	REQUIRE(put_switch(&c, false, true, 100, 101, 0, 0) == 0);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	/* after OUT the thread that went out still owns the CPU */
	CHECK_EQ_INT(ptd_percpu_owner(pc, 0, &pid, &tid), 1);
	CHECK_EQ_INT(tid, 101);
	REQUIRE(put_itrace(&c, 100, 102) == 0);
	REQUIRE(put_switch(&c, false, false, 100, 102, 0, 0) == 0);
	REQUIRE(put_aux(&c, 102, &pb, 50) == 50);
	/* kernel order: OUT(B) (cpu-wide, next A), then B's last chunk */
	REQUIRE(put_switch(&c, true, true, 100, 102, 100, 101) == 0);
	REQUIRE(put_aux(&c, 102, &pb, 70) == 70);
	REQUIRE(put_switch(&c, true, false, 100, 101, 100, 102) == 0);
	REQUIRE(put_aux(&c, 101, &pa, 30) == 30);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	CHECK_EQ_INT(ptd_percpu_owner(pc, 0, &pid, &tid), 1);
	CHECK_EQ_INT(pid, 100);
	CHECK_EQ_INT(tid, 101);

	CHECK(stream_ok(&co->t[101], 101, 130));
	CHECK(stream_ok(&co->t[102], 102, 120));
	CHECK_EQ_INT(co->t[101].seen, 1);
	CHECK_EQ_INT(co->t[102].seen, 1);
	CHECK_EQ_INT(co->t[101].seen_pid, 100);
	ptd_percpu_get_stats(pc, &st);
	CHECK_EQ_U64(st.bytes, 250);
	CHECK_EQ_U64(st.switches, 6);
	CHECK_EQ_U64(st.bad_switches, 0);
	CHECK_EQ_U64(st.orphan_bytes, 0);
	CHECK_EQ_U64(st.threads, 2);
	ptd_perf_buf_fini(&c.b);
	ptd_percpu_free(pc);
	coll_free(co);
}

/* ---- a scripted schedule over 4 CPUs ---- */

enum tstate { T_NONE, T_RUNNABLE, T_RUNNING, T_EXITED };

struct sim_thread {
	uint32_t pid, tid;
	enum tstate state;
	uint64_t pos;		/* bytes written */
	unsigned records;	/* records expected at the sink */
	unsigned nloss;
	struct loss_ev loss[MAXLOSS];
	unsigned started;	/* CPUs with an ITRACE_START (bitmask) */
};

struct sim {
	struct cpu cpu[MAXCPU];
	int running[MAXCPU];	/* index into th, -1: idle */
	int last[MAXCPU];	/* previous thread, for next_prev */
	bool chunk[MAXCPU];	/* a chunk since the last switch-in */
	struct sim_thread th[8];
	unsigned nth;
	uint64_t rng;
	uint64_t other_bytes;
	unsigned migrations;
	struct ptd_percpu *pc;
};

static unsigned rnd(struct sim *s, unsigned n)
{
	s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)((s->rng >> 33) % n);
}

static void drain(struct sim *s, unsigned cpu)
{
	int n = ptd_percpu_drain(s->pc, cpu, &s->cpu[cpu].r);

	if (n < 0)
		abort();
}

/* Make room for a record and a chunk of up to 1 KiB. */
static void room(struct sim *s, unsigned cpu)
{
	size_t d, a;

	ptd_perf_producer_space(&s->cpu[cpu].p, &d, &a);
	if (d < 512 || a < 1024 + 256)
		drain(s, cpu);
}

static void sim_chunk(struct sim *s, unsigned cpu, struct sim_thread *t)
{
	size_t len = 1 + rnd(s, 300);

	room(s, cpu);
	if (put_aux(&s->cpu[cpu], t->tid, &t->pos, len) != (int64_t)len)
		abort();
	s->chunk[cpu] = true;
	if (t->pid != 100)
		s->other_bytes += len;
}

static void sim_switch_out(struct sim *s, unsigned cpu, struct sim_thread *t)
{
	bool wide = rnd(s, 2);
	bool kernel_order = rnd(s, 2);
	int next = -1;
	struct sim_thread *n;

	room(s, cpu);
	for (unsigned i = 0; i < s->nth; i++)
		if (s->th[i].state == T_RUNNABLE)
			next = (int)i;
	n = next >= 0 ? &s->th[next] : NULL;
	if (!kernel_order)
		sim_chunk(s, cpu, t);
	if (put_switch(&s->cpu[cpu], wide, true, t->pid, t->tid,
		       n ? n->pid : 0, n ? n->tid : 0) != 0)
		abort();
	if (kernel_order)
		sim_chunk(s, cpu, t);	/* committed at sched-out */
	if (t->state == T_RUNNING)
		t->state = T_RUNNABLE;
	s->last[cpu] = s->running[cpu];
	s->running[cpu] = -1;
	/* the thread may run elsewhere now: keep each thread's order */
	drain(s, cpu);
}

static void sim_switch_in(struct sim *s, unsigned cpu)
{
	unsigned cand[8], n = 0;
	struct sim_thread *t, *prev;
	bool wide = rnd(s, 2);

	for (unsigned i = 0; i < s->nth; i++)
		if (s->th[i].state == T_RUNNABLE)
			cand[n++] = i;
	if (n == 0)
		return;
	t = &s->th[cand[rnd(s, n)]];
	prev = s->last[cpu] >= 0 ? &s->th[s->last[cpu]] : NULL;
	room(s, cpu);
	if (!(t->started & (1u << cpu))) {
		/* first time on this CPU: the inherited event starts */
		if (put_itrace(&s->cpu[cpu], t->pid, t->tid) != 0)
			abort();
		t->started |= 1u << cpu;
	}
	if (put_switch(&s->cpu[cpu], wide, false, t->pid, t->tid,
		       prev ? prev->pid : 0, prev ? prev->tid : 0) != 0)
		abort();
	if (t->pos > 0)
		s->migrations++;
	t->state = T_RUNNING;
	s->running[cpu] = (int)(t - s->th);
	s->chunk[cpu] = false;
}

static void sim_step(struct sim *s, unsigned cpu)
{
	struct sim_thread *t;
	unsigned a = rnd(s, 100);

	if (s->running[cpu] < 0) {
		sim_switch_in(s, cpu);
		return;
	}
	t = &s->th[s->running[cpu]];
	room(s, cpu);
	if (a < 55) {
		sim_chunk(s, cpu, t);
	} else if (a < 60) {
		if (put_mmap2(&s->cpu[cpu], t->pid, t->tid) != 0)
			abort();
		if (t->pid == 100)
			t->records++;
	} else if (a < 64) {
		for (unsigned i = 0; i < s->nth; i++) {
			struct sim_thread *c = &s->th[i];

			if (c->state != T_NONE || c->pid != t->pid)
				continue;
			if (put_task(&s->cpu[cpu], false, c->pid, t->pid,
				     c->tid, t->tid) != 0 ||
			    put_comm(&s->cpu[cpu], c->pid, c->tid) != 0)
				abort();
			c->state = T_RUNNABLE;
			if (c->pid == 100)
				c->records += 2;	/* FORK, COMM */
			break;
		}
	} else if (a < 66 && t->tid != 101 && t->tid != 201) {
		if (put_task(&s->cpu[cpu], true, t->pid, t->pid, t->tid,
			     t->tid) != 0)
			abort();
		if (t->pid == 100)
			t->records++;
		t->state = T_EXITED;
		sim_switch_out(s, cpu, t);
	} else if (a < 68 && s->chunk[cpu]) {
		/* a gap inside the slice: exact, for this thread (right
		 * after a switch-in it would be ambiguous: see
		 * test_gap_ambiguous) */
		uint64_t gap = 1 + rnd(s, 200);

		if (ptd_perf_producer_inject_aux_gap(&s->cpu[cpu].p, gap))
			abort();
		if (t->pid == 100 && t->nloss < MAXLOSS)
			t->loss[t->nloss++] = (struct loss_ev){ t->pos, gap };
		sim_chunk(s, cpu, t);
	} else if (a < 80) {
		sim_switch_out(s, cpu, t);
	} else {
		sim_chunk(s, cpu, t);
	}
}

static void test_schedule(void)
{
	static struct sim s;
	struct coll *co = coll_new();
	struct ptd_percpu_stats st;

	memset(&s, 0, sizeof(s));
	s.rng = 42;
	s.pc = pc_new(co, MAXCPU, 100, false, 0);
	for (unsigned i = 0; i < MAXCPU; i++) {
		cpu_init(&s.cpu[i], i, 8 * PAGE, 8 * PAGE);
		s.running[i] = s.last[i] = -1;
	}
	/* 6 threads of process 100 (101 runs first, the others are forked),
	 * 2 of process 200 (filtered out) */
	for (unsigned i = 0; i < 6; i++)
		s.th[i] = (struct sim_thread){ .pid = 100, .tid = 101 + i };
	s.th[6] = (struct sim_thread){ .pid = 200, .tid = 201 };
	s.th[7] = (struct sim_thread){ .pid = 200, .tid = 202 };
	s.nth = 8;
	s.th[0].state = T_RUNNABLE;
	s.th[6].state = T_RUNNABLE;

	for (unsigned step = 0; step < 6000; step++)
		sim_step(&s, rnd(&s, MAXCPU));
	for (unsigned i = 0; i < MAXCPU; i++) {
		if (s.running[i] >= 0)
			sim_switch_out(&s, i, &s.th[s.running[i]]);
		drain(&s, i);
	}

	CHECK(s.migrations > 20);
	{
		unsigned gaps = 0, exited = 0;

		for (unsigned i = 0; i < 6; i++) {
			gaps += s.th[i].nloss;
			exited += s.th[i].state == T_EXITED;
		}
		CHECK(gaps >= 5);
		CHECK(exited >= 1);
	}
	for (unsigned i = 0; i < 6; i++) {
		const struct sim_thread *t = &s.th[i];
		const struct tsee *g = &co->t[t->tid];

		CHECK(t->state != T_NONE);
		CHECK(t->pos > 0);
		if (!stream_ok(g, t->tid, t->pos))
			CHECK_FAIL_("thread %u: stream of %zu bytes, want %" PRIu64
				    " of its own in order", t->tid, g->len,
				    t->pos);
		CHECK_EQ_INT(g->seen, 1);
		CHECK_EQ_INT(g->records, t->records);
		CHECK_EQ_INT(g->nloss, t->nloss);
		for (unsigned k = 0; k < t->nloss && k < g->nloss; k++) {
			CHECK_EQ_U64(g->loss[k].pos, t->loss[k].pos);
			CHECK_EQ_U64(g->loss[k].bytes, t->loss[k].bytes);
		}
	}
	for (unsigned i = 6; i < 8; i++) {
		const struct tsee *g = &co->t[s.th[i].tid];

		CHECK_EQ_INT(g->len + g->seen + g->records + g->nloss, 0);
	}
	CHECK_EQ_INT(co->bad_tid, 0);
	ptd_percpu_get_stats(s.pc, &st);
	CHECK(s.other_bytes > 0);
	CHECK_EQ_U64(st.filtered_bytes, s.other_bytes);
	CHECK_EQ_U64(st.bad_switches, 0);
	CHECK_EQ_U64(st.bad_records, 0);
	CHECK_EQ_U64(st.orphan_bytes, 0);
	CHECK_EQ_U64(st.ambiguous_losses, 0);
	CHECK_EQ_U64(st.reordered, 0);
	CHECK_EQ_U64(st.threads, 6);
	for (unsigned i = 0; i < MAXCPU; i++)
		ptd_perf_buf_fini(&s.cpu[i].b);
	ptd_percpu_free(s.pc);
	coll_free(co);
}

/* ---- losses ---- */

/* A gap between A's chunk and B's: either could have written it. */
static void test_gap_ambiguous(void)
{
	struct coll *co = coll_new();
	struct ptd_percpu *pc = pc_new(co, 1, -1, false, 0);
	struct cpu c;
	uint64_t pa = 0, pb = 0;
	struct ptd_percpu_stats st;

	cpu_init(&c, 0, 4 * PAGE, 4 * PAGE);
	REQUIRE(put_itrace(&c, 100, 101) == 0);
	REQUIRE(put_aux(&c, 101, &pa, 40) == 40);
	REQUIRE(ptd_perf_producer_inject_aux_gap(&c.p, 24) == 0);
	REQUIRE(put_switch(&c, false, true, 100, 101, 0, 0) == 0);
	REQUIRE(put_switch(&c, false, false, 300, 301, 0, 0) == 0);
	REQUIRE(put_aux(&c, 301, &pb, 10) == 10);
	/* and one inside B's slice: exact */
	REQUIRE(ptd_perf_producer_inject_aux_gap(&c.p, 8) == 0);
	REQUIRE(put_aux(&c, 301, &pb, 10) == 10);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);

	REQUIRE(co->t[101].nloss == 1);
	CHECK_EQ_U64(co->t[101].loss[0].bytes, 0);
	CHECK_EQ_U64(co->t[101].loss[0].pos, 40);
	REQUIRE(co->t[301].nloss == 2);
	CHECK_EQ_U64(co->t[301].loss[0].bytes, 0);
	CHECK_EQ_U64(co->t[301].loss[0].pos, 0);
	CHECK_EQ_U64(co->t[301].loss[1].bytes, 8);
	CHECK_EQ_U64(co->t[301].loss[1].pos, 10);
	CHECK(stream_ok(&co->t[301], 301, 20));
	CHECK_EQ_INT(co->t[301].seen_pid, 300);	/* pid -1: all processes */
	ptd_percpu_get_stats(pc, &st);
	CHECK_EQ_U64(st.ambiguous_losses, 1);
	CHECK_EQ_U64(st.lost_bytes, 32);
	CHECK_EQ_U64(st.losses, 3);
	ptd_perf_buf_fini(&c.b);
	ptd_percpu_free(pc);
	coll_free(co);
}

/* TRUNCATED (AUX full) and PARTIAL go to the chunk's owner, unknown size. */
static void test_truncated_partial(void)
{
	struct coll *co = coll_new();
	struct ptd_percpu *pc = pc_new(co, 1, 100, false, 0);
	struct cpu c;
	uint64_t pa = 0;
	int64_t n;
	uint8_t junk[16] = { 0 };

	cpu_init(&c, 0, 4 * PAGE, PAGE);
	REQUIRE(put_itrace(&c, 100, 101) == 0);
	for (unsigned i = 0; i < 4; i++)
		REQUIRE(put_aux(&c, 101, &pa, 1000) == 1000);
	n = put_aux(&c, 101, &pa, 1000);	/* only part fits */
	REQUIRE(n > 0 && n < 1000);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	CHECK(stream_ok(&co->t[101], 101, pa));
	REQUIRE(co->t[101].nloss == 1);
	CHECK_EQ_U64(co->t[101].loss[0].bytes, 0);
	CHECK_EQ_U64(co->t[101].loss[0].pos, pa);	/* after the chunk */

	REQUIRE(ptd_perf_producer_aux(&c.p, junk, sizeof(junk),
				      PERF_AUX_FLAG_PARTIAL) == 16);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	REQUIRE(co->t[101].nloss == 2);
	CHECK_EQ_U64(co->t[101].loss[1].pos, pa);	/* before the chunk */
	CHECK_EQ_U64(co->t[101].len, pa + 16);
	ptd_perf_buf_fini(&c.b);
	ptd_percpu_free(pc);
	coll_free(co);
}

/* Sideband loss: a switch may be missing, so nobody owns the CPU until
 * the next switch-in; bytes meanwhile are dropped and counted. */
static void test_lost_records(void)
{
	struct coll *co = coll_new();
	struct ptd_percpu *pc = pc_new(co, 1, 100, false, 0);
	struct cpu c;
	uint64_t pa = 0, pb = 0;
	struct ptd_percpu_stats st;
	uint32_t pid, tid;
	unsigned dropped = 0;

	cpu_init(&c, 0, PAGE, 4 * PAGE);
	REQUIRE(put_itrace(&c, 100, 101) == 0);
	REQUIRE(put_aux(&c, 101, &pa, 64) == 64);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	/* fill the data ring: records are dropped (a switch among them) */
	for (unsigned i = 0; i < 64; i++)
		if (put_mmap2(&c, 100, 101) == -ENOSPC)
			dropped++;
	REQUIRE(dropped > 0);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	/* LOST is written before the next record: ITRACE_START of B */
	REQUIRE(put_itrace(&c, 100, 102) == 0);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	REQUIRE(put_aux(&c, 102, &pb, 30) == 30);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	REQUIRE(co->t[101].nloss == 1);
	CHECK_EQ_U64(co->t[101].loss[0].bytes, 0);
	CHECK(stream_ok(&co->t[101], 101, 64));
	CHECK(stream_ok(&co->t[102], 102, 30));
	ptd_percpu_get_stats(pc, &st);
	CHECK_EQ_U64(st.owner_resets, 1);
	CHECK_EQ_INT(ptd_percpu_owner(pc, 0, &pid, &tid), 1);
	CHECK_EQ_INT(tid, 102);

	/* the owner is unknown after a corrupt data ring */
	ptd_perf_producer_inject_bad_size(&c.p, 0xfff8);
	REQUIRE(put_mmap2(&c, 100, 102) == 0);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	CHECK_EQ_INT(ptd_percpu_owner(pc, 0, &pid, &tid), 0);
	REQUIRE(co->t[102].nloss == 1);
	REQUIRE(put_aux(&c, 102, &pb, 30) == 30);
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	ptd_percpu_get_stats(pc, &st);
	CHECK_EQ_U64(st.owner_resets, 2);
	CHECK_EQ_U64(st.orphan_bytes, 30);
	CHECK_EQ_U64(co->t[102].len, 30);
	ptd_perf_buf_fini(&c.b);
	ptd_percpu_free(pc);
	coll_free(co);
}

/* ---- malformed and out-of-order records ---- */

static void test_bad_records(void)
{
	struct coll *co = coll_new();
	struct ptd_percpu *pc = pc_new(co, 2, 100, false, 0);
	struct cpu c;
	uint64_t pa = 0, pb = 0, rec[4] = { 0 };
	struct perf_event_header h = {
		.type = PERF_RECORD_ITRACE_START, .size = 16,
	};
	struct ptd_percpu_stats st;

	cpu_init(&c, 1, 4 * PAGE, 4 * PAGE);
	/* AUX before any ITRACE_START: nobody's */
	REQUIRE(put_aux(&c, 101, &pa, 20) == 20);
	/* OUT with no owner, a record too short for its trailer */
	REQUIRE(put_switch(&c, false, true, 100, 101, 0, 0) == 0);
	memcpy(rec, &h, sizeof(h));
	REQUIRE(put(&c, rec, 16) == 0);
	REQUIRE(put_itrace(&c, 100, 101) == 0);
	/* OUT of another thread, then OUT twice, then IN without OUT */
	REQUIRE(put_switch(&c, false, true, 100, 102, 0, 0) == 0);
	REQUIRE(put_switch(&c, false, true, 100, 101, 0, 0) == 0);
	REQUIRE(put_switch(&c, false, true, 100, 101, 0, 0) == 0);
	REQUIRE(put_switch(&c, true, false, 100, 102, 100, 101) == 0);
	REQUIRE(put_aux(&c, 102, &pb, 5) == 5);
	REQUIRE(put_switch(&c, false, false, 100, 101, 0, 0) == 0);
	REQUIRE(put_aux(&c, 101, &pa, 7) == 7);
	REQUIRE(ptd_percpu_drain(pc, 1, &c.r) >= 0);

	ptd_percpu_get_stats(pc, &st);
	CHECK_EQ_U64(st.orphan_bytes, 20);
	CHECK_EQ_U64(st.bad_records, 1);
	CHECK_CONTAINS(ptd_percpu_last_error(pc), "ITRACE_START");
	CHECK_EQ_U64(st.bad_switches, 4);
	CHECK_EQ_U64(co->t[102].len, 5);
	CHECK_EQ_U64(co->t[101].len, 7);
	/* 101's stream continues from byte 20 (the orphan bytes dropped) */
	CHECK(co->t[101].bytes && co->t[101].bytes[0] == tbyte(101, 20));
	ptd_perf_buf_fini(&c.b);
	ptd_percpu_free(pc);
	coll_free(co);
}

/* ---- process filter, children ---- */

static void test_children(void)
{
	for (int follow = 0; follow < 2; follow++) {
		struct coll *co = coll_new();
		struct ptd_percpu *pc = pc_new(co, 1, 100, follow, 0);
		struct cpu c;
		uint64_t pa = 0, pc3 = 0;
		struct ptd_percpu_stats st;

		cpu_init(&c, 0, 4 * PAGE, 4 * PAGE);
		REQUIRE(put_itrace(&c, 100, 100) == 0);
		REQUIRE(put_task(&c, false, 300, 100, 300, 100) == 0);
		REQUIRE(put_aux(&c, 100, &pa, 10) == 10);
		REQUIRE(put_switch(&c, false, true, 100, 100, 0, 0) == 0);
		REQUIRE(put_itrace(&c, 300, 300) == 0);
		REQUIRE(put_aux(&c, 300, &pc3, 11) == 11);
		REQUIRE(put_comm(&c, 300, 300) == 0);
		REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
		ptd_percpu_get_stats(pc, &st);
		CHECK(stream_ok(&co->t[100], 100, 10));
		if (follow) {
			CHECK(stream_ok(&co->t[300], 300, 11));
			CHECK_EQ_INT(co->t[300].records, 2);
			CHECK_EQ_INT(co->t[300].seen, 1);
			CHECK_EQ_U64(st.filtered_bytes, 0);
		} else {
			CHECK_EQ_INT(co->t[300].len + co->t[300].records +
				     co->t[300].seen, 0);
			CHECK_EQ_U64(st.filtered_bytes, 11);
			CHECK_EQ_U64(st.filtered_records, 2);
		}
		ptd_perf_buf_fini(&c.b);
		ptd_percpu_free(pc);
		coll_free(co);
	}
}

/* ---- cross-CPU order ---- */

static void test_reorder_detected(void)
{
	struct coll *co = coll_new();
	struct ptd_percpu *pc = pc_new(co, 2, 100, false, 0);
	struct cpu c0, c1;
	uint64_t pa = 0;
	struct ptd_percpu_stats st;

	cpu_init(&c0, 0, 4 * PAGE, 4 * PAGE);
	cpu_init(&c1, 1, 4 * PAGE, 4 * PAGE);
	REQUIRE(put_itrace(&c0, 100, 101) == 0);
	REQUIRE(put_aux(&c0, 101, &pa, 10) == 10);
	REQUIRE(put_switch(&c0, false, true, 100, 101, 0, 0) == 0);
	REQUIRE(put_itrace(&c1, 100, 101) == 0);	/* later time */
	REQUIRE(put_aux(&c1, 101, &pa, 10) == 10);
	/* drained the wrong way round */
	REQUIRE(ptd_percpu_drain(pc, 1, &c1.r) >= 0);
	REQUIRE(ptd_percpu_drain(pc, 0, &c0.r) >= 0);
	ptd_percpu_get_stats(pc, &st);
	CHECK_EQ_U64(st.reordered, 1);
	REQUIRE(co->t[101].nloss == 1);
	CHECK_EQ_U64(co->t[101].loss[0].pos, 10);	/* before CPU 0's */
	CHECK_EQ_U64(co->t[101].loss[0].bytes, 0);
	CHECK_EQ_U64(co->t[101].len, 20);
	ptd_perf_buf_fini(&c0.b);
	ptd_perf_buf_fini(&c1.b);
	ptd_percpu_free(pc);
	coll_free(co);
}

/* ---- thread table: limit, eviction, tid reuse ---- */

static void test_thread_limit(void)
{
	struct coll *co = coll_new();
	struct ptd_percpu *pc = pc_new(co, 1, 100, false, 2);
	struct cpu c;
	uint64_t p1 = 0, p2 = 0, p3 = 0;
	struct ptd_percpu_stats st;

	cpu_init(&c, 0, 4 * PAGE, 4 * PAGE);
	REQUIRE(put_itrace(&c, 100, 101) == 0);
	REQUIRE(put_aux(&c, 101, &p1, 5) == 5);
	REQUIRE(put_itrace(&c, 100, 102) == 0);
	REQUIRE(put_aux(&c, 102, &p2, 5) == 5);
	REQUIRE(put_itrace(&c, 100, 103) == 0);	/* table full */
	REQUIRE(put_aux(&c, 103, &p3, 5) == 5);
	REQUIRE(put_comm(&c, 100, 103) == 0);
	REQUIRE(put_task(&c, true, 100, 100, 101, 101) == 0);
	REQUIRE(put_switch(&c, false, false, 100, 103, 0, 0) == 0);
	REQUIRE(put_aux(&c, 103, &p3, 6) == 6);	/* 101 forgotten */
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	ptd_percpu_get_stats(pc, &st);
	CHECK_EQ_U64(st.over_limit_bytes, 5);
	CHECK_EQ_U64(st.over_limit_records, 1);
	CHECK_EQ_INT(co->t[103].seen, 1);
	CHECK_EQ_U64(co->t[103].len, 6);
	CHECK_EQ_INT(co->t[101].records, 1);	/* its EXIT */
	CHECK_EQ_U64(st.threads, 3);
	ptd_perf_buf_fini(&c.b);
	ptd_percpu_free(pc);
	coll_free(co);
}

static void test_tid_reuse(void)
{
	struct coll *co = coll_new();
	struct ptd_percpu *pc = pc_new(co, 2, 100, false, 0);
	struct cpu c0, c1;
	uint64_t p = 0;

	cpu_init(&c0, 0, 4 * PAGE, 4 * PAGE);
	cpu_init(&c1, 1, 4 * PAGE, 4 * PAGE);
	/* CPU 1's start of 105 predates its EXIT on CPU 0 */
	REQUIRE(put_itrace(&c1, 100, 105) == 0);
	REQUIRE(put_aux(&c1, 105, &p, 4) == 4);
	REQUIRE(put_itrace(&c0, 100, 105) == 0);
	REQUIRE(put_task(&c0, true, 100, 100, 105, 105) == 0);
	REQUIRE(ptd_percpu_drain(pc, 0, &c0.r) >= 0);
	REQUIRE(ptd_percpu_drain(pc, 1, &c1.r) >= 0);
	CHECK_EQ_INT(co->t[105].seen, 1);	/* late data: same thread */
	/* a later thread with the same tid */
	REQUIRE(put_itrace(&c0, 100, 105) == 0);
	REQUIRE(ptd_percpu_drain(pc, 0, &c0.r) >= 0);
	CHECK_EQ_INT(co->t[105].seen, 2);
	ptd_perf_buf_fini(&c0.b);
	ptd_perf_buf_fini(&c1.b);
	ptd_percpu_free(pc);
	coll_free(co);
}

/* ---- a sink error aborts; the replay delivers nothing twice ---- */

static void test_sink_error(void)
{
	struct coll *co = coll_new();
	struct ptd_percpu *pc = pc_new(co, 1, 100, false, 0);
	struct cpu c;
	uint64_t p = 0;

	cpu_init(&c, 0, 4 * PAGE, 4 * PAGE);
	REQUIRE(put_itrace(&c, 100, 101) == 0);
	for (unsigned i = 0; i < 5; i++)
		REQUIRE(put_aux(&c, 101, &p, 33) == 33);
	co->fail_bytes = 3;
	CHECK_EQ_INT(ptd_percpu_drain(pc, 0, &c.r), -EIO);
	CHECK_EQ_U64(co->t[101].len, 66);
	co->fail_bytes = 0;
	REQUIRE(ptd_percpu_drain(pc, 0, &c.r) >= 0);
	CHECK(stream_ok(&co->t[101], 101, 165));
	CHECK_EQ_INT(co->t[101].seen, 1);
	ptd_perf_buf_fini(&c.b);
	ptd_percpu_free(pc);
	coll_free(co);
}

int main(void)
{
	RUN(test_new_invalid);
	RUN(test_owner_orders);
	RUN(test_schedule);
	RUN(test_gap_ambiguous);
	RUN(test_truncated_partial);
	RUN(test_lost_records);
	RUN(test_bad_records);
	RUN(test_children);
	RUN(test_reorder_detected);
	RUN(test_thread_limit);
	RUN(test_tid_reuse);
	RUN(test_sink_error);
	return check_done();
}
