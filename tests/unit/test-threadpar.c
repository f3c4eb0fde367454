/* SPDX-License-Identifier: MIT */
/*
 * decode/threadpar.h with units whose decodes are made up here: the
 * records come unit after unit in order, each unit's done after its
 * records; the units are decoded on workers at once (a unit's decode
 * starts while the one before is being handed on), at most
 * PTD_DECODE_PART_RECORDS records ahead; the consumer's stop and a unit's
 * error are what the serial run gives; runs go to the batch callback;
 * and when it decodes at once (ptd_threadpar_fits).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "decode/threadpar.h"

#define MAXU 8

struct syn {
	size_t n;
	size_t len[MAXU];	/* records of each unit */
	int fail_unit;		/* -1, or its decode fails with -EIO */
	pthread_t caller;
	atomic_int on_caller, on_worker, bad_lock, bad_opts;
	/* unit @wait_unit's consumer waits, at its first record, for
	 * unit @wait_unit + 1's decode to start (true: it must) */
	int wait_unit;
	/* unit @press_unit's consumer waits, at its first record, for the
	 * next unit's decode to run more than @press_bound ahead (it must
	 * not) */
	int press_unit;
	size_t press_bound;
	pthread_mutex_t mx;
	pthread_cond_t cv;
	bool started[MAXU];
	atomic_size_t produced[MAXU], consumed[MAXU];
	atomic_size_t max_ahead[MAXU];
	/* the consumer's stop: at record @stop_rec of unit @stop_unit */
	int stop_unit;
	size_t stop_rec;
	int stop_rc;
	/* what came */
	uint64_t *got;		/* unit << 32 | seq */
	size_t ngot, cap;
	size_t batches, batched;
	int done_unit[MAXU * 2];
	int done_err[MAXU * 2];
	uint64_t done_insns[MAXU * 2];
	char done_msg[MAXU * 2][32];
	size_t ndone;
	bool waited_ok, pressed;
};

static void syn_init(struct syn *s, size_t n, const size_t *len)
{
	memset(s, 0, sizeof(*s));
	s->n = n;
	memcpy(s->len, len, n * sizeof(*len));
	s->fail_unit = -1;
	s->wait_unit = -1;
	s->press_unit = -1;
	s->stop_unit = -1;
	s->caller = pthread_self();
	(void)pthread_mutex_init(&s->mx, NULL);
	(void)pthread_cond_init(&s->cv, NULL);
}

static void syn_fini(struct syn *s)
{
	free(s->got);
	(void)pthread_cond_destroy(&s->cv);
	(void)pthread_mutex_destroy(&s->mx);
}

/* Wait (at most @secs) until @pred(@s, @u) holds; whether it did. */
static bool wait_until(struct syn *s, bool (*pred)(struct syn *, size_t),
		       size_t u, int secs)
{
	struct timespec dl;
	bool ok;

	(void)clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += secs;
	(void)pthread_mutex_lock(&s->mx);
	while (!pred(s, u) && pthread_cond_timedwait(&s->cv, &s->mx, &dl) == 0)
		;
	ok = pred(s, u);
	(void)pthread_mutex_unlock(&s->mx);
	return ok;
}

static bool next_started(struct syn *s, size_t u)
{
	return s->started[u + 1];
}

static bool past_bound(struct syn *s, size_t u)
{
	return atomic_load(&s->produced[u + 1]) > s->press_bound + 1;
}

static int syn_decode(void *ctx, size_t i, const struct ptd_decode_opts *o,
		      pthread_mutex_t *lock, ptd_record_fn fn, void *fctx,
		      struct ptd_decode_stats *st, struct ptd_diag *diag)
{
	struct syn *s = ctx;
	bool worker = !pthread_equal(pthread_self(), s->caller);

	atomic_fetch_add(worker ? &s->on_worker : &s->on_caller, 1);
	if (worker != (lock != NULL))
		atomic_fetch_add(&s->bad_lock, 1);
	/* a worker decodes its unit serially, records one by one; this
	 * thread with the caller's options (par_opts: jobs and a batch) */
	if (worker ? o->jobs || o->batch || o->batch_of || o->ips ||
			     o->ips_gate
		   : o->jobs < 2 || !o->batch)
		atomic_fetch_add(&s->bad_opts, 1);
	(void)pthread_mutex_lock(&s->mx);
	s->started[i] = true;
	(void)pthread_cond_broadcast(&s->cv);
	(void)pthread_mutex_unlock(&s->mx);
	for (size_t k = 0; k < s->len[i]; k++) {
		struct ptd_record rec;
		size_t ahead;
		int r;

		memset(&rec, 0, sizeof(rec));
		rec.type = PTD_REC_INSN;
		rec.tid = (pid_t)i + 1;
		rec.u.insn.ip = (uint64_t)i << 32 | k;
		ahead = atomic_fetch_add(&s->produced[i], 1) + 1 -
			atomic_load(&s->consumed[i]);
		if (ahead > atomic_load(&s->max_ahead[i]))
			atomic_store(&s->max_ahead[i], ahead);
		if ((int)i == s->press_unit + 1) {
			(void)pthread_mutex_lock(&s->mx);
			(void)pthread_cond_broadcast(&s->cv);
			(void)pthread_mutex_unlock(&s->mx);
		}
		r = fn(fctx, &rec);
		if (r)
			return r;
		st->insns++;
	}
	if ((int)i == s->fail_unit) {
		(void)snprintf(diag->msg, sizeof(diag->msg), "unit %zu broke",
			       i);
		return -EIO;
	}
	return 0;
}

static void syn_done(void *ctx, size_t i, int err,
		     const struct ptd_decode_stats *st,
		     const struct ptd_diag *diag)
{
	struct syn *s = ctx;

	if (s->ndone < MAXU * 2) {
		s->done_unit[s->ndone] = (int)i;
		s->done_err[s->ndone] = err;
		s->done_insns[s->ndone] = st->insns;
		(void)snprintf(s->done_msg[s->ndone],
			       sizeof(s->done_msg[0]), "%.31s", diag->msg);
	}
	s->ndone++;
}

static int syn_record(void *ctx, const struct ptd_record *rec)
{
	struct syn *s = ctx;
	size_t u = (size_t)rec->tid - 1;
	size_t seq = (size_t)(rec->u.insn.ip & 0xffffffffu);

	if (s->ngot == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 4096;
		uint64_t *v = realloc(s->got, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->got = v;
		s->cap = cap;
	}
	s->got[s->ngot++] = rec->u.insn.ip;
	atomic_fetch_add(&s->consumed[u], 1);
	if (seq == 0 && (int)u == s->wait_unit)
		s->waited_ok = wait_until(s, next_started, u, 20);
	/* the decode may run ahead of here up to the bound, never past
	 * it: given a second, it would */
	if (seq == 0 && (int)u == s->press_unit)
		s->pressed = wait_until(s, past_bound, u, 1);
	if ((int)u == s->stop_unit && seq == s->stop_rec)
		return s->stop_rc;
	return 0;
}

static int syn_batch(void *ctx, const struct ptd_record *recs, size_t n)
{
	struct syn *s = ctx;

	s->batches++;
	s->batched += n;
	for (size_t i = 0; i < n; i++) {
		int r = syn_record(s, &recs[i]);

		if (r)
			return r;
	}
	return 0;
}

static struct ptd_decode_opts par_opts(unsigned jobs)
{
	struct ptd_decode_opts o;

	memset(&o, 0, sizeof(o));
	o.path = PTD_PATH_INSN;
	o.want = PTD_REC_BIT(PTD_REC_INSN);
	o.jobs = jobs;
	return o;
}

static int run(struct syn *s, unsigned jobs, bool fits)
{
	struct ptd_decode_opts o = par_opts(jobs);
	struct ptd_threadpar_ops ops = { NULL, syn_decode, syn_done, s };

	/* runs for another callback than this one's: the records still
	 * come one by one, and a worker's decode must not see them */
	o.batch = syn_batch;
	return ptd_threadpar_run(&o, s->n, fits, &ops, syn_record, s);
}

/* Every record of every unit, in order, each unit's done after them. */
static void check_all(const struct syn *s)
{
	size_t at = 0;

	CHECK_EQ_U64(s->ndone, s->n);
	for (size_t i = 0; i < s->n; i++) {
		for (size_t k = 0; k < s->len[i] && at < s->ngot; k++, at++)
			if (s->got[at] != ((uint64_t)i << 32 | k)) {
				CHECK_FAIL_("record %zu: 0x%" PRIx64
					    ", expected unit %zu seq %zu",
					    at, s->got[at], i, k);
				return;
			}
		if (i < MAXU * 2) {
			CHECK_EQ_INT(s->done_unit[i], i);
			CHECK_EQ_INT(s->done_err[i], 0);
			CHECK_EQ_U64(s->done_insns[i], s->len[i]);
		}
	}
	CHECK_EQ_U64(s->ngot, at);
}

static void test_order(void)
{
	static const size_t len[] = { 5000, 1, 0, 70000, 3000, 2048, 4097 };
	static const unsigned jobs[] = { 2, 3, 8 };

	for (size_t j = 0; j < 3; j++) {
		struct syn s;

		syn_init(&s, 7, len);
		CHECK_EQ_INT(run(&s, jobs[j], true), 0);
		check_all(&s);
		/* every decode on a worker, with the lock */
		CHECK_EQ_INT(atomic_load(&s.on_worker), 7);
		CHECK_EQ_INT(atomic_load(&s.on_caller), 0);
		CHECK_EQ_INT(atomic_load(&s.bad_lock), 0);
		CHECK_EQ_INT(atomic_load(&s.bad_opts), 0);
		syn_fini(&s);
	}
	/* not fitting: one after another on this thread, without a lock */
	{
		struct syn s;

		syn_init(&s, 7, len);
		CHECK_EQ_INT(run(&s, 2, false), 0);
		check_all(&s);
		CHECK_EQ_INT(atomic_load(&s.on_worker), 0);
		CHECK_EQ_INT(atomic_load(&s.on_caller), 7);
		CHECK_EQ_INT(atomic_load(&s.bad_lock), 0);
		CHECK_EQ_INT(atomic_load(&s.bad_opts), 0);
		syn_fini(&s);
	}
}

/* Unit 1's decode starts while unit 0's first records are being handed
 * on (they wait for it): the units are decoded at once. */
static void test_at_once(void)
{
	static const size_t len[] = { 10, 10, 10 };
	struct syn s;

	syn_init(&s, 3, len);
	s.wait_unit = 0;
	CHECK_EQ_INT(run(&s, 2, true), 0);
	CHECK(s.waited_ok);
	check_all(&s);
	syn_fini(&s);
}

/* A unit decoded ahead waits once the workers keep PTD_DECODE_HELD
 * records: with the consumer held at the unit before's first record, its
 * decode gets that far and no further -- and that far, not a part's
 * worth: one unit may use all of it. */
static void test_bounded(void)
{
	static const size_t len[] = { 100, 8 * PTD_DECODE_PART_RECORDS, 100 };
	struct syn s;

	syn_init(&s, 3, len);
	s.press_unit = 0;
	s.press_bound = PTD_DECODE_HELD(2);
	CHECK_EQ_INT(run(&s, 2, true), 0);
	CHECK(!s.pressed);
	CHECK(atomic_load(&s.max_ahead[1]) <= PTD_DECODE_HELD(2));
	CHECK(atomic_load(&s.max_ahead[1]) >
	      PTD_DECODE_HELD(2) - 2 * PTD_DECODE_PART_RECORDS);
	check_all(&s);
	syn_fini(&s);
}

/* The consumer's stop and a unit's error: what the serial run gives. */
static void test_stops(void)
{
	static const size_t len[] = { 3000, 5000, 7000, 10 };
	static const int rcs[] = { 7, -EPIPE };

	for (size_t c = 0; c < 3; c++) {
		struct syn ser, par;

		syn_init(&ser, 4, len);
		syn_init(&par, 4, len);
		if (c < 2) {
			ser.stop_unit = par.stop_unit = 1;
			ser.stop_rec = par.stop_rec = 4000;
			ser.stop_rc = par.stop_rc = rcs[c];
		} else {
			ser.fail_unit = par.fail_unit = 2;
		}
		CHECK_EQ_INT(run(&ser, 2, false), c == 0 ? 7 : 0);
		CHECK_EQ_INT(run(&par, 2, true), c == 0 ? 7 : 0);
		/* positive: nothing after; negative: the unit ends there
		 * with that error, the next follows; a failing unit: its
		 * records, then its error and message */
		CHECK_EQ_U64(par.ngot, ser.ngot);
		CHECK_EQ_U64(ser.ngot, c == 0   ? 3000 + 4001
				       : c == 1 ? 3000 + 4001 + 7000 + 10
						: 3000 + 5000 + 7000 + 10);
		CHECK(par.ngot == ser.ngot &&
		      !memcmp(par.got, ser.got, ser.ngot * sizeof(*ser.got)));
		CHECK_EQ_U64(par.ndone, ser.ndone);
		CHECK_EQ_U64(ser.ndone, c == 0 ? 1 : 4);
		for (size_t i = 0; i < ser.ndone && i < par.ndone; i++) {
			CHECK_EQ_INT(par.done_unit[i], ser.done_unit[i]);
			CHECK_EQ_INT(par.done_err[i], ser.done_err[i]);
			CHECK_EQ_STR(par.done_msg[i], ser.done_msg[i]);
		}
		if (c == 1)
			CHECK_EQ_INT(par.done_err[1], -EPIPE);
		if (c == 2) {
			CHECK_EQ_INT(par.done_err[2], -EIO);
			CHECK_EQ_STR(par.done_msg[2], "unit 2 broke");
		}
		syn_fini(&ser);
		syn_fini(&par);
	}
}

/* Where the consumer takes runs, the records come in runs. */
static void test_batch(void)
{
	static const size_t len[] = { 5000, 3, 9000 };
	struct ptd_decode_opts o = par_opts(2);
	struct ptd_threadpar_ops ops;
	struct syn s;

	syn_init(&s, 3, len);
	ops = (struct ptd_threadpar_ops){ NULL, syn_decode, syn_done, &s };
	o.batch = syn_batch;
	o.batch_of = syn_record;
	CHECK_EQ_INT(ptd_threadpar_run(&o, 3, true, &ops, syn_record, &s), 0);
	check_all(&s);
	CHECK_EQ_U64(s.batched, 14003);
	CHECK(s.batches > 3 && s.batches < 14003 / 100);
	syn_fini(&s);
}

static void test_fits(void)
{
	struct ptd_decode_opts o = par_opts(2);
	const uint64_t part = PTD_DECODE_PART_MAX_BYTES;
	/* short: fewer than jobs parts */
	const uint64_t two_short[] = { 2 * part - 1, 100 };
	const uint64_t two_long[] = { 2 * part, 2 * part };
	/* a long main thread and short ones: mostly short */
	const uint64_t main_and_short[] = { 9558, 3505, 3505, 3505 };
	const uint64_t long_main[] = { 12000, 3505, 3505, 3505 };
	const uint64_t huge[] = { UINT64_MAX, UINT64_MAX, 1 };

	CHECK(ptd_threadpar_fits(&o, two_short, 2));
	CHECK(!ptd_threadpar_fits(&o, two_short, 1));	/* one thread */
	CHECK(!ptd_threadpar_fits(&o, two_long, 2));	/* split at PSBs */
	CHECK(ptd_threadpar_fits(&o, main_and_short, 4));
	CHECK(!ptd_threadpar_fits(&o, long_main, 4));	/* mostly long */
	CHECK(!ptd_threadpar_fits(&o, huge, 3));
	o.jobs = 4;
	CHECK(ptd_threadpar_fits(&o, two_long, 2));
	CHECK(ptd_threadpar_fits(&o, long_main, 4));
	o.jobs = 1;
	CHECK(!ptd_threadpar_fits(&o, two_short, 2));
	o = par_opts(2);
	o.path = PTD_PATH_BLOCK;	/* libipt's block cache */
	CHECK(!ptd_threadpar_fits(&o, two_short, 2));
	o = par_opts(2);
	o.want |= PTD_REC_BIT(PTD_REC_FIRST_EXEC);	/* one table */
	CHECK(!ptd_threadpar_fits(&o, two_short, 2));
	o = par_opts(2);
	o.part_bytes = 1;		/* parts asked for */
	CHECK(!ptd_threadpar_fits(&o, two_short, 2));
	CHECK(!ptd_threadpar_fits(NULL, two_short, 2));
	CHECK(!ptd_threadpar_fits(&o, NULL, 2));
}

int main(void)
{
	RUN(test_order);
	RUN(test_at_once);
	RUN(test_bounded);
	RUN(test_stops);
	RUN(test_batch);
	RUN(test_fits);
	return check_done();
}
