/* SPDX-License-Identifier: MIT */
/*
 * A growing stream decodes to exactly the records of one decode of the
 * whole stream: real programs are traced with the software source, each
 * thread is decoded at once (the expected records), then fed to ptd_stream
 * in random pieces with a round after each; the records must be the same,
 * field for field, in the same order, on both decode paths.  The two
 * paths' whole decodes are the same too (times aside), also for a program
 * traced with an IP filter on its own binary, whose branches out of it
 * end in IP-less TIP.PGDs.
 */
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "check.h"
#include "ptdamage.h"
#include "reccmp.h"
#include "aspace/iscache.h"
#include "common/fileio.h"
#include "decode/counters.h"
#include "decode/decoder.h"
#include "decode/stream.h"
#include "perf/addrfilter.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"
#include "swpt/tracer.h"
#include "record/diff.h"

static const char *progs_dir;
static char workdir[256];
static struct ptd_iscache *ic;
/* Shared by every decode, so the JSON bodies of kept records stay valid. */
static struct ptd_insncache *icache;

/* --- Small deterministic random numbers (xorshift). --- */

static uint64_t rnd_state;

static uint64_t rnd_r(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t rnd(void)
{
	return rnd_r(&rnd_state);
}

/* --- Tracing. --- */

/* Trace @argv into workdir/@name and load the capture; false if it could
 * not be made (a failure is reported). */
static bool trace_filtered(const char *name, char *const argv[],
			   uint64_t psb_period, bool tsc, bool noretcomp,
			   const char *filter_text, struct ptd_capture *ret)
{
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_addrfilter f;
	struct ptd_diag diag = { "" };
	char dir[512];
	int r;

	(void)snprintf(dir, sizeof(dir), "%s/%s", workdir, name);
	memset(&so, 0, sizeof(so));
	so.gen.psb_period = psb_period;
	so.gen.tsc = tsc;
	so.gen.noretcomp = noretcomp;
	so.outdir = dir;
	so.quiet_target = true;
	memset(&f, 0, sizeof(f));
	if (filter_text) {
		r = ptd_addrfilter_parse(filter_text, PTD_ADDRFILTER_MAX, &f,
					 &diag);
		if (r < 0) {
			CHECK_FAIL_("filter %s: %s", filter_text, diag.msg);
			return false;
		}
		so.filter = &f;
		so.filter_text = filter_text;
	}
	r = ptd_swpt_run(argv, &so, &res, &diag);
	ptd_addrfilter_fini(&f);
	if (r < 0) {
		CHECK_FAIL_("tracing %s failed: %s (%s)", name, diag.msg,
			    ptd_strerror(r));
		return false;
	}
	r = ptd_capture_load(dir, ret, &diag);
	if (r < 0) {
		CHECK_FAIL_("loading %s: %s", dir, diag.msg);
		return false;
	}
	return true;
}

static bool trace(const char *name, char *const argv[], uint64_t psb_period,
		  bool tsc, bool noretcomp, struct ptd_capture *ret)
{
	return trace_filtered(name, argv, psb_period, tsc, noretcomp, NULL,
			      ret);
}

/* --- The expected records: one decode of the whole stream. --- */

static struct ptd_decode_opts path_opts(const struct ptd_capture *c,
					bool block)
{
	struct ptd_decode_opts o;

	memset(&o, 0, sizeof(o));
	o.cpu = c->cpu;
	o.addr_filter = c->addr_filter;
	if (block) {
		/* No block records: where libipt ends a block depends on its
		 * block cache (warm after the first decode), so two decodes
		 * of the same whole stream may already give different
		 * block records. */
		o.path = PTD_PATH_BLOCK;
		o.json_bodies = true;
		o.want = PTD_REC_BIT(PTD_REC_INSN) |
			 PTD_REC_BIT(PTD_REC_EVENT);
	} else {
		o.path = PTD_PATH_INSN;
		o.want = PTD_REC_BIT(PTD_REC_INSN) |
			 PTD_REC_BIT(PTD_REC_EVENT);
	}
	return o;
}

/* Decode @pt[@from, @to) of thread @idx as a whole stream with the image
 * as it stood at @from, offsets counted from @from - @shift.  */
static int decode_whole(const struct ptd_capture *c, size_t idx,
			const struct ptd_decode_opts *o, const uint8_t *pt,
			size_t from, size_t to, uint64_t shift,
			struct reclist *ret)
{
	struct ptd_capture_stream rs;
	struct ptd_diag diag = { "" };
	int r;

	r = ptd_capture_stream_open(c, idx, ic, &rs, &diag);
	if (r == 0 && from)
		r = ptd_tl_cursor_advance(&rs.cursor, from, rs.img, &diag);
	if (r >= 0) {
		rs.args.pt = pt + from;
		rs.args.len = to - from;
		rs.args.base = from;
		rs.args.icache = icache;
		r = ptd_decode_thread(o, &rs.args, reclist_add, ret, NULL);
	}
	ptd_capture_stream_close(&rs);
	for (size_t i = 0; i < ret->n; i++) {
		if (ret->r[i].type == PTD_REC_EVENT)
			ret->r[i].u.event.offset -= shift;
		else if (ret->r[i].type == PTD_REC_ERROR)
			ret->r[i].u.error.offset -= shift;
	}
	if (r < 0)
		CHECK_FAIL_("whole decode failed: %s (%s)", diag.msg,
			    ptd_strerror(r));
	return r;
}

/* --- Feeding a stream. --- */

/* Events of thread @t in the order and at the positions its cursor would
 * apply them: events before its start at 0; an event after it without a
 * position for it (the thread had ended) not at all. */
struct evpos {
	const struct ptd_tl_event *ev;
	uint64_t pos;
};

static size_t thread_events(const struct ptd_capture *c, size_t idx,
			    struct evpos *out)
{
	const struct ptd_capture_thread *t = &c->threads[idx];
	uint64_t last = 0;
	size_t n = 0;

	for (size_t i = 0; i < c->tl.n; i++) {
		const struct ptd_tl_event *ev = &c->tl.ev[i];
		int64_t p = ptd_tl_event_pos(ev, t->tid);
		uint64_t pos = ev->seq < t->first_seq ? 0 : (uint64_t)p;

		if (ev->seq >= t->first_seq && p < 0)
			continue;

		if (pos < last)
			pos = last;
		last = pos;
		out[n].ev = ev;
		out[n++].pos = pos;
	}
	return n;
}

struct feed {
	size_t max_chunk;	/* 1: byte at a time */
	bool check_anchor;
	/* A loss: @lost_len bytes at @lost_at are not appended. */
	size_t lost_at, lost_len;
	size_t max_buffered;
	/* Streams fed on several threads at once: their decodes hold @lock
	 * (ptd_stream_decode_locked), no instruction cache, chunk sizes
	 * from @rs. */
	pthread_mutex_t *lock;
	uint64_t rs;
};

/* Feed thread @idx's @pt (@len bytes) through a stream; records to @out. */
static int feed_stream(const struct ptd_capture *c, size_t idx,
		       const struct ptd_decode_opts *o, const uint8_t *pt,
		       size_t len, struct feed *f, struct reclist *out,
		       struct ptd_stream_stats *ret_st)
{
	struct ptd_stream_opts so;
	struct ptd_stream *s = NULL;
	struct evpos *evs;
	size_t nev, e = 0, off = 0;
	int r;

	evs = calloc(c->tl.n + 1, sizeof(*evs));
	if (!evs)
		return -ENOMEM;
	nev = thread_events(c, idx, evs);
	memset(&so, 0, sizeof(so));
	so.decode = *o;
	so.pid = c->pid;
	so.tid = c->threads[idx].tid;
	so.iscache = ic;
	so.icache = f->lock ? NULL : icache;
	so.dir = c->dir;
	so.check_anchor = f->check_anchor;
	so.max_buffered = f->max_buffered;
	r = ptd_stream_new(&so, &s);
	if (r < 0)
		goto out;
	for (;;) {
		size_t n, stop = len;

		/* Events due at this length go in before the bytes after. */
		while (e < nev && evs[e].pos <= off) {
			r = ptd_stream_add_event(s, evs[e++].ev);
			if (r < 0)
				goto out;
		}
		if (f->lost_len && off == f->lost_at) {
			r = ptd_stream_lost(s, f->lost_len);
			if (r < 0)
				goto out;
			off += f->lost_len;
			/* Events inside the gap happened at the gap. */
			continue;
		}
		if (off == len)
			break;
		if (e < nev && evs[e].pos < stop)
			stop = evs[e].pos;
		if (f->lost_len && off < f->lost_at && f->lost_at < stop)
			stop = f->lost_at;
		n = 1 + (f->lock ? rnd_r(&f->rs) : rnd()) % f->max_chunk;
		if (n > stop - off)
			n = stop - off;
		r = ptd_stream_append(s, pt + off, n);
		if (r < 0)
			goto out;
		off += n;
		r = ptd_stream_decode_locked(s, false, f->lock, reclist_add,
					     out);
		if (r < 0)
			goto out;
	}
	r = ptd_stream_decode_locked(s, true, f->lock, reclist_add, out);
	if (r < 0)
		goto out;
	ptd_stream_get_stats(s, ret_st);
	r = 0;
out:
	if (r < 0)
		CHECK_FAIL_("stream failed: %s", ptd_strerror(r));
	ptd_stream_free(s);
	free(evs);
	return r;
}

/* Compare field for field; on the block path without time: an instruction
 * there has its block's time, and blocks end where libipt's block cache
 * (warm after the first decode) says. */
static bool same_flags(const char *what, const struct reclist *want,
		       const struct reclist *got, unsigned flags)
{
	size_t i, n = want->n < got->n ? want->n : got->n;
	const char *field = NULL;

	for (i = 0; i < n; i++)
		if ((field = ptd_record_diff(&want->r[i], &got->r[i], flags)))
			break;
	if (i == n && want->n == got->n)
		return true;
	fprintf(stderr, "record %zu differs (%s); %zu vs %zu records\n", i,
		field ? field : "count", want->n, got->n);
	for (size_t j = i > 3 ? i - 3 : 0; j < i + 3; j++) {
		fprintf(stderr, "  [%zu]\n", j);
		if (j < want->n)
			reccmp_print(stderr, "  whole:  ", &want->r[j]);
		if (j < got->n)
			reccmp_print(stderr, "  stream: ", &got->r[j]);
	}
	CHECK_FAIL_("%s: stream records differ from the whole decode", what);
	return false;
}

static bool same(const char *what, const struct reclist *want,
		 const struct reclist *got)
{
	return same_flags(what, want, got, 0);
}

static bool same_path(const char *what, const struct reclist *want,
		      const struct reclist *got, bool block)
{
	return same_flags(what, want, got, block ? PTD_DIFF_IGNORE_TIME : 0);
}

/* Chunked decodes of every thread of @c, several seeds, both paths. */
static void check_capture(const struct ptd_capture *c, const char *what,
			  const size_t *chunks, size_t nchunks,
			  double *ret_ratio, uint64_t *ret_moves)
{
	for (size_t t = 0; t < c->nthreads; t++) {
		struct ptd_diag diag = { "" };
		uint8_t *pt = NULL;
		size_t len = 0;

		if (ptd_capture_read_pt(c, t, &pt, &len, &diag) < 0) {
			CHECK_FAIL_("%s: %s", what, diag.msg);
			continue;
		}
		struct reclist wants[2] = { { 0 }, { 0 } };

		for (int block = 0; block < 2; block++) {
			struct ptd_decode_opts o = path_opts(c, block);
			struct reclist want = { 0 };

			if (decode_whole(c, t, &o, pt, 0, len, 0, &want) < 0)
				continue;
			CHECK(want.n > 0);
			/* The paths agree on the whole stream. */
			if (block && wants[0].n)
				(void)same_path("block path vs insn path",
						&wants[0], &want, true);

			for (size_t k = 0; k < nchunks; k++) {
				struct feed f = { .max_chunk = chunks[k],
						  .check_anchor = true };
				struct ptd_stream_stats st;
				struct reclist got = { 0 };
				char label[160];

				rnd_state = 0x9e3779b97f4a7c15ull + k * 7919 +
					    (uint64_t)block;
				(void)snprintf(label, sizeof(label),
					       "%s tid %ld %s chunks <= %zu",
					       what, (long)c->threads[t].tid,
					       block ? "block" : "insn",
					       chunks[k]);
				if (feed_stream(c, t, &o, pt, len, &f, &got,
						&st) == 0 &&
				    same_path(label, &want, &got, block)) {
					CHECK_EQ_U64(st.delivered, want.n);
					CHECK_EQ_U64(st.anchor_mismatches, 0);
					CHECK_EQ_U64(st.appended, len);
					if (ret_ratio && !block && k == 0)
						*ret_ratio = (double)st.redecoded /
							     (double)len;
					if (ret_moves && !block && k == 0)
						*ret_moves += st.anchor_moves;
				}
				reclist_free(&got);
			}
			wants[block] = want;
		}
		reclist_free(&wants[0]);
		reclist_free(&wants[1]);
		free(pt);
	}
}

static char *prog(const char *name)
{
	static char path[4][512];
	static unsigned next;
	char *p = path[next++ % 4];

	if (name[0] == '/')
		(void)snprintf(p, 512, "%s", name);
	else
		(void)snprintf(p, 512, "%s/prog-%s", progs_dir, name);
	return p;
}

/* Check a capture traced with a small PSB period: exact, and the anchor
 * moves so that little is decoded twice. */
static void check_small_psb(struct ptd_capture *c, const char *what)
{
	static const size_t chunks[] = { 4096, 64, 9000 };
	double ratio = 0;
	uint64_t moves = 0;

	check_capture(c, what, chunks, 3, &ratio, &moves);
	fprintf(stderr, "  %s: re-decoded %.2fx appended, %llu anchor moves\n",
		what, ratio, (unsigned long long)moves);
	CHECK(moves > 0);
	CHECK(ratio < 3.0);
}

/* Trace prog-@name with PSBs every 256 bytes (tracing is slow under ASan:
 * one configuration a program, the options vary between programs). */
static void check_prog(const char *name, const char *arg, bool tsc,
		       bool noretcomp)
{
	char *argv[] = { prog(name), (char *)arg, NULL };
	struct ptd_capture c;

	if (access(argv[0], X_OK) != 0) {
		CHECK_FAIL_("%s is missing (build the test programs)",
			    argv[0]);
		return;
	}
	if (trace(name, argv, 256, tsc, noretcomp, &c)) {
		check_small_psb(&c, name);
		ptd_capture_fini(&c);
	}
}

/* isids number sections of one cache: zeroed where decodes had their own */
static void zero_isids(struct reclist *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->r[i].type == PTD_REC_INSN)
			l->r[i].u.insn.isid = 0;
}

/*
 * The streams of a session's threads decoded at once (a full session with
 * jobs, source/source.c): every thread of prog-threads fed through its
 * own stream on its own pthread, all sharing one fresh section cache, the
 * decodes holding one lock (ptd_stream_decode_locked), the instruction
 * path: each gives its whole decode.  Under TSan (a build with
 * -Db_sanitize=thread) a decode that does not hold the lock where it
 * touches the shared cache is reported.
 */
struct at_once {
	const struct ptd_capture *c;
	size_t idx;
	const struct ptd_decode_opts *o;
	const uint8_t *pt;
	size_t len;
	struct feed f;
	struct reclist got;
	int r;
};

static void *at_once_main(void *arg)
{
	struct at_once *a = arg;
	struct ptd_stream_stats st;

	a->r = feed_stream(a->c, a->idx, a->o, a->pt, a->len, &a->f, &a->got,
			   &st);
	return NULL;
}

static void test_threads_at_once(void)
{
	char *argv[] = { prog("threads"), (char *)"3", (char *)"2000", NULL };
	struct ptd_iscache *shared_ic = ic;
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct at_once a[4];
	pthread_t th[4];
	struct ptd_capture c;
	struct ptd_decode_opts o;
	uint8_t *pt[4] = { NULL };
	size_t n;

	if (!trace("at-once", argv, 256, true, false, &c))
		return;
	o = path_opts(&c, false);
	n = c.nthreads < 4 ? c.nthreads : 4;
	CHECK_EQ_U64(n, 4);
	(void)ptd_iscache_new(&ic);
	REQUIRE(ic);
	memset(a, 0, sizeof(a));
	for (size_t i = 0; i < n; i++) {
		struct ptd_diag diag = { "" };

		REQUIRE(ptd_capture_read_pt(&c, i, &pt[i], &a[i].len,
					    &diag) == 0);
		a[i].c = &c;
		a[i].idx = i;
		a[i].o = &o;
		a[i].pt = pt[i];
		a[i].f.max_chunk = 512;
		a[i].f.lock = &lock;
		a[i].f.rs = 0x5eed0100 + i;
	}
	for (size_t i = 0; i < n; i++)
		REQUIRE(pthread_create(&th[i], NULL, at_once_main, &a[i]) == 0);
	for (size_t i = 0; i < n; i++)
		(void)pthread_join(th[i], NULL);
	for (size_t i = 0; i < n; i++) {
		struct reclist want = { 0 };
		char label[64];

		CHECK_EQ_INT(a[i].r, 0);
		REQUIRE(decode_whole(&c, i, &o, pt[i], 0, a[i].len, 0,
				     &want) >= 0);
		zero_isids(&want);
		zero_isids(&a[i].got);
		(void)snprintf(label, sizeof(label), "thread %zu at once", i);
		CHECK(want.n > 1000);
		CHECK(same(label, &want, &a[i].got));
		reclist_free(&want);
		reclist_free(&a[i].got);
		free(pt[i]);
	}
	ptd_iscache_free(ic);
	ic = shared_ic;
	ptd_capture_fini(&c);
}

/*
 * A live session's caches start cold: libipt's block cache (in the
 * session's image section cache) and ptd's instruction cache warm up as
 * rounds go by, and where libipt ends a block changes with them.  A round
 * may then hold back, as its last block, instructions that an earlier
 * round released (a short round).  When the anchor moved in such a round,
 * the stream skipped too few records and sent a block twice (test-daemon
 * saw it about once in six runs beside CPU hogs).  Fed in small chunks
 * with caches as cold as a new session's, the stream gives exactly the
 * whole decode.
 */

static void test_cold_caches(void)
{
	char *argv[] = { prog("threads"), NULL };
	struct ptd_iscache *warm_ic = ic;
	struct ptd_insncache *warm_icache = icache;
	uint64_t short_rounds = 0, moves = 0;
	struct ptd_capture c;
	struct reclist want = { 0 };
	struct ptd_decode_opts o;
	uint8_t *pt = NULL;
	size_t len = 0;

	if (!trace("cold", argv, 256, false, false, &c))
		return;
	o = path_opts(&c, true);
	{
		struct ptd_diag diag = { "" };

		REQUIRE(ptd_capture_read_pt(&c, 0, &pt, &len, &diag) == 0);
	}
	REQUIRE(decode_whole(&c, 0, &o, pt, 0, len, 0, &want) >= 0);
	/* isids number sections of one cache: each feed has its own */
	zero_isids(&want);
	for (uint64_t seed = 1; seed <= 15; seed++) {
		for (size_t chunk = 8; chunk <= 16; chunk += 8) {
			struct feed f = { .max_chunk = chunk };
			struct reclist got = { 0 };
			struct ptd_stream_stats st;
			char label[64];

			(void)ptd_iscache_new(&ic);
			(void)ptd_insncache_new(0, &icache);
			REQUIRE(ic && icache);
			rnd_state = 0x5eed0000 + seed;
			(void)snprintf(label, sizeof(label),
				       "cold, seed %llu, chunks <= %zu",
				       (unsigned long long)seed, chunk);
			if (feed_stream(&c, 0, &o, pt, len, &f, &got, &st) == 0 &&
			    (zero_isids(&got), same_path(label, &want, &got,
							 true))) {
				short_rounds += st.short_rounds;
				moves += st.anchor_moves;
			}
			reclist_free(&got);
			ptd_insncache_free(icache);
			ptd_iscache_free(ic);
		}
	}
	ic = warm_ic;
	icache = warm_icache;
	fprintf(stderr, "  cold: %llu short rounds, %llu anchor moves\n",
		(unsigned long long)short_rounds, (unsigned long long)moves);
	/* the case is met, or the test proves nothing */
	CHECK(short_rounds > 0 && moves > 0);
	reclist_free(&want);
	free(pt);
	ptd_capture_fini(&c);
}

static void test_fnptr(void) { check_prog("fnptr", NULL, false, false); }
static void test_signal(void) { check_prog("signal", NULL, true, false); }
static void test_threads(void) { check_prog("threads", NULL, false, true); }
static void test_exec(void) { check_prog("exec", NULL, true, true); }
static void test_jit(void) { check_prog("jit", NULL, false, false); }

static void test_dlopen(void)
{
	char lib[512];

	(void)snprintf(lib, sizeof(lib), "%s/libptdtarget.so", progs_dir);
	check_prog("dlopen", lib, true, false);
}

/*
 * first_exec and counters across a stream's rounds (decode/stream.h):
 * the same first_exec records in the same places, and the same counts,
 * as one decode of the whole stream, on both paths; prog-jit rewrites
 * its code in place (new code at an address: a new first_exec).
 */
static void test_first_exec(void)
{
	char *argv[] = { prog("jit"), NULL };
	struct ptd_capture c;

	if (access(argv[0], X_OK) != 0) {
		CHECK_FAIL_("%s is missing (build the test programs)",
			    argv[0]);
		return;
	}
	if (!trace("jit-fe", argv, 256, false, false, &c))
		return;
	for (size_t t = 0; t < c.nthreads; t++) {
		struct ptd_diag diag = { "" };
		uint8_t *pt = NULL;
		size_t len = 0;

		if (ptd_capture_read_pt(&c, t, &pt, &len, &diag) < 0) {
			CHECK_FAIL_("jit: %s", diag.msg);
			continue;
		}
		for (int block = 0; block < 2; block++) {
			struct ptd_decode_opts o = path_opts(&c, block);
			struct reclist want = { 0 }, got = { 0 };
			struct reclist cw = { 0 }, cg = { 0 };
			struct feed f = { .max_chunk = 64,
					  .check_anchor = true };
			struct ptd_counters *a = NULL, *b = NULL;
			struct ptd_stream_stats st;
			size_t nfe = 0;

			REQUIRE(ptd_counters_new(0, &a) == 0 &&
				ptd_counters_new(0, &b) == 0);
			o.want |= PTD_REC_BIT(PTD_REC_FIRST_EXEC) |
				  PTD_REC_BIT(PTD_REC_COUNTERS);
			o.counters = a;
			rnd_state = 0x51ed27 + (uint64_t)block;
			if (decode_whole(&c, t, &o, pt, 0, len, 0, &want) == 0) {
				o.counters = b;
				if (feed_stream(&c, t, &o, pt, len, &f, &got,
						&st) == 0)
					(void)same_path(block ? "first_exec, "
								"block path"
							      : "first_exec, "
								"insn path",
							&want, &got, block);
			}
			for (size_t i = 0; i < want.n; i++)
				nfe += want.r[i].type == PTD_REC_FIRST_EXEC;
			CHECK(nfe > 0);
			/* the block path counts by the slot the decoder
			 * resolved once per cached instruction (code of a
			 * section), not by a lookup per record */
			if (block) {
				size_t slotted = 0, unslotted = 0;

				for (size_t i = 0; i < got.n; i++) {
					const struct ptd_record *r = &got.r[i];

					if (r->type != PTD_REC_INSN ||
					    !r->u.insn.isid)
						continue;
					if (r->u.insn.cslot)
						slotted++;
					else
						unslotted++;
				}
				CHECK(slotted > 0);
				CHECK_EQ_U64(unslotted, 0);
			}
			CHECK_EQ_INT(ptd_counters_emit(a, 0, 1, 2, reclist_add,
						       &cw),
				     0);
			CHECK_EQ_INT(ptd_counters_emit(b, 0, 1, 2, reclist_add,
						       &cg),
				     0);
			CHECK(cw.n > 1);
			(void)same("counters of the stream", &cw, &cg);
			reclist_free(&want);
			reclist_free(&got);
			reclist_free(&cw);
			reclist_free(&cg);
			ptd_counters_free(a);
			ptd_counters_free(b);
		}
		free(pt);
	}
	ptd_capture_fini(&c);
}

/*
 * trace and trace_withdrawn records across a stream's rounds: the same
 * records in the same places as one decode of the whole stream, on both
 * paths; prog-jitloop forms a trace over JIT code, rewrites the code (the
 * trace withdrawn) and forms it again.
 */
static void test_traces(void)
{
	char *argv[] = { prog("jitloop"), NULL };
	struct ptd_capture c;

	if (access(argv[0], X_OK) != 0) {
		CHECK_FAIL_("%s is missing (build the test programs)",
			    argv[0]);
		return;
	}
	if (!trace("jitloop-tr", argv, 256, false, false, &c))
		return;
	for (size_t t = 0; t < c.nthreads; t++) {
		struct ptd_diag diag = { "" };
		uint8_t *pt = NULL;
		size_t len = 0;

		if (ptd_capture_read_pt(&c, t, &pt, &len, &diag) < 0) {
			CHECK_FAIL_("jitloop: %s", diag.msg);
			continue;
		}
		for (int block = 0; block < 2; block++) {
			struct ptd_decode_opts o = path_opts(&c, block);
			struct reclist want = { 0 }, got = { 0 };
			struct feed f = { .max_chunk = 64,
					  .check_anchor = true };
			struct ptd_counters *a = NULL, *b = NULL;
			struct ptd_stream_stats st;
			size_t ntr = 0, nwd = 0;

			REQUIRE(ptd_counters_new(0, &a) == 0 &&
				ptd_counters_new(0, &b) == 0);
			o.want |= PTD_REC_BIT(PTD_REC_TRACE) |
				  PTD_REC_BIT(PTD_REC_TRACE_WITHDRAWN);
			o.trace_threshold = 10;
			o.counters = a;
			rnd_state = 0x7ace + (uint64_t)block;
			if (decode_whole(&c, t, &o, pt, 0, len, 0, &want) == 0) {
				o.counters = b;
				if (feed_stream(&c, t, &o, pt, len, &f, &got,
						&st) == 0)
					(void)same_path(block ? "traces, "
								"block path"
							      : "traces, "
								"insn path",
							&want, &got, block);
			}
			for (size_t i = 0; i < want.n; i++) {
				ntr += want.r[i].type == PTD_REC_TRACE;
				nwd += want.r[i].type ==
				       PTD_REC_TRACE_WITHDRAWN;
			}
			CHECK(ntr >= 3);
			CHECK_EQ_INT(nwd, 1);
			reclist_free(&want);
			reclist_free(&got);
			ptd_counters_free(a);
			ptd_counters_free(b);
		}
		free(pt);
	}
	ptd_capture_fini(&c);
}

/* File offset and size of the executable segment of ELF file @path. */
static bool text_segment(const char *path, uint64_t *ret_off,
			 uint64_t *ret_size)
{
	Elf64_Ehdr eh;
	FILE *f = fopen(path, "rb");
	bool ok = false;

	if (!f)
		return false;
	if (fread(&eh, sizeof(eh), 1, f) == 1 &&
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 &&
	    eh.e_phentsize == sizeof(Elf64_Phdr)) {
		for (unsigned i = 0; i < eh.e_phnum && !ok; i++) {
			Elf64_Phdr ph;

			if (fseek(f, (long)(eh.e_phoff + i * sizeof(ph)),
				  SEEK_SET) != 0 ||
			    fread(&ph, sizeof(ph), 1, f) != 1)
				break;
			if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
			    ph.p_filesz) {
				*ret_off = ph.p_offset;
				*ret_size = ph.p_filesz;
				ok = true;
			}
		}
	}
	(void)fclose(f);
	return ok;
}

/* prog-fnptr traced with a filter on its code, as a user filters
 * on the main binary: _start's call through the GOT, the PLT's jumps
 * through it and the returns into libc leave the range. */
static void test_filter_main(void)
{
	char *argv[] = { prog("fnptr"), NULL };
	char real[PATH_MAX], text[PATH_MAX + 64];
	struct ptd_capture c;
	uint64_t off, size;
	size_t ndis = 0;

	if (!realpath(argv[0], real) || !text_segment(real, &off, &size)) {
		CHECK_FAIL_("%s is missing or not a 64-bit ELF file (build "
			    "the test programs)", argv[0]);
		return;
	}
	(void)snprintf(text, sizeof(text), "filter %#llx/%#llx@%s",
		       (unsigned long long)off, (unsigned long long)size,
		       real);
	if (!trace_filtered("filter-main", argv, 256, false, false, text,
			    &c))
		return;
	CHECK(c.addr_filter.config.addr_cfg != 0);
	/* A short trace: too few PSBs to require the anchor to move. */
	{
		static const size_t chunks[] = { 4096, 64, 9000 };

		check_capture(&c, "fnptr filtered", chunks, 3, NULL, NULL);
	}
	/* The trace does leave the range: disables without an IP. */
	for (size_t t = 0; t < c.nthreads; t++) {
		struct ptd_diag diag = { "" };
		struct ptd_decode_opts o = path_opts(&c, false);
		struct reclist l = { 0 };
		uint8_t *pt = NULL;
		size_t len = 0;

		if (ptd_capture_read_pt(&c, t, &pt, &len, &diag) < 0)
			continue;
		if (decode_whole(&c, t, &o, pt, 0, len, 0, &l) == 0) {
			for (size_t i = 0; i < l.n; i++) {
				const struct pt_event *ev = &l.r[i].u.event.ev;

				ndis += l.r[i].type == PTD_REC_EVENT &&
					ev->type == ptev_disabled &&
					ev->ip_suppressed;
				CHECK(l.r[i].type != PTD_REC_ERROR);
			}
		}
		reclist_free(&l);
		free(pt);
	}
	fprintf(stderr, "  fnptr filtered: %zu disables without an IP\n",
		ndis);
	CHECK(ndis > 2);
	ptd_capture_fini(&c);
}

/* --- One small capture, shared by the tests below. --- */

static struct ptd_capture small;
static bool have_small;
static uint8_t *small_pt;
static size_t small_len;

static bool get_small(void)
{
	char *argv[] = { prog("recursion"), NULL };
	struct ptd_diag diag = { "" };

	if (have_small)
		return true;
	/* No return compression: see test_corrupt. */
	if (!trace("small", argv, 256, true, true, &small))
		return false;
	if (ptd_capture_read_pt(&small, 0, &small_pt, &small_len, &diag) < 0) {
		CHECK_FAIL_("%s", diag.msg);
		ptd_capture_fini(&small);
		return false;
	}
	have_small = true;
	return true;
}

/* Byte at a time, on a prefix of a small trace, both paths. */
static void test_byte_at_a_time(void)
{
	size_t len;

	REQUIRE(get_small());
	len = small_len < 6000 ? small_len : 6000;
	for (int block = 0; block < 2; block++) {
		struct ptd_decode_opts o = path_opts(&small, block);
		struct reclist want = { 0 }, got = { 0 };
		struct feed f = { .max_chunk = 1, .check_anchor = true };
		struct ptd_stream_stats st;

		REQUIRE(decode_whole(&small, 0, &o, small_pt, 0, len, 0,
				     &want) == 0);
		if (feed_stream(&small, 0, &o, small_pt, len, &f, &got, &st) ==
		    0)
			(void)same_path(block ? "byte at a time, block"
					      : "byte at a time, insn",
					&want, &got, block);
		CHECK_EQ_U64(st.rounds, len + 1);
		CHECK_EQ_U64(st.anchor_mismatches, 0);
		reclist_free(&want);
		reclist_free(&got);
	}
}

static void test_recursion(void)
{
	REQUIRE(get_small());
	check_small_psb(&small, "recursion");
}

/* Corrupt streams: up to and including the first error record, the
 * stream gives exactly the whole decode's records; after it both go on
 * (resynced) but may differ -- a corrupt byte can make libipt pop a
 * return-stack entry pushed before the anchor PSB (stream.h's known
 * limit), so exact equality there depends on where the bytes fell. */
static void corrupt_compare(const struct reclist *want,
			    const struct reclist *got, bool block)
{
	size_t first = want->n;
	struct reclist a = *want, b = *got;

	/* the first error of either: the stream may meet one where the
	 * whole decode popped a return pushed before the anchor */
	for (size_t i = 0; i < want->n; i++)
		if (want->r[i].type == PTD_REC_ERROR) {
			first = i;
			break;
		}
	for (size_t i = 0; i < got->n && i < first; i++)
		if (got->r[i].type == PTD_REC_ERROR) {
			first = i;
			break;
		}
	if (first == want->n && want->n == got->n) {	/* decode cleanly */
		(void)same_path("corrupt", want, got, block);
		return;
	}
	a.n = first;
	b.n = got->n < first ? got->n : first;
	(void)same_path("corrupt, before the first error", &a, &b, block);
	CHECK(got->n > first + 1);	/* decoding went on after it */
}

/* Flipped bytes: error records and resyncs, the same chunked as whole,
 * and the stream never moves its anchor to a PSB the decode at the old
 * one passed out of step (check_anchor would count it).  Round 0 flips
 * the TIPs before PSBs, the others random bytes.  Without return
 * compression: with it, a corrupt byte can send a decode that passes a
 * PSB down a wrong path that pops a return-stack entry from before the
 * PSB, which a decode starting at the PSB does not have. */
static void test_corrupt(void)
{
	static const size_t chunks[] = { 1000, 37, 5000 };
	uint8_t *pt;

	REQUIRE(get_small());
	REQUIRE(small_len > 4000);
	pt = malloc(small_len);
	REQUIRE(pt);
	for (unsigned seed = 0; seed <= 3; seed++) {
		memcpy(pt, small_pt, small_len);
		rnd_state = seed * 0x2545f4914f6cdd1dull;
		if (seed == 0) {
			long n = ptdamage_tips_before_psbs(pt, small_len,
							   &small.cpu);

			fprintf(stderr, "  corrupt: %ld TIPs before PSBs\n",
				n);
			CHECK(n > 0);
		}
		for (int i = 0; seed && i < 4; i++) {
			/* in this order: one statement, one sequence */
			uint8_t x = (uint8_t)(1 + rnd() % 255);

			pt[rnd() % small_len] ^= x;
		}
		for (int block = 0; block < 2; block++) {
			struct ptd_decode_opts o = path_opts(&small, block);
			struct reclist want = { 0 };
			size_t errors = 0;

			REQUIRE(decode_whole(&small, 0, &o, pt, 0, small_len,
					     0, &want) == 0);

			for (size_t i = 0; i < want.n; i++)
				errors += want.r[i].type == PTD_REC_ERROR;
			if (!block)
				fprintf(stderr, "  corrupt round %u: %zu error "
					"records\n", seed, errors);
			for (size_t k = 0; k < 3; k++) {
				struct feed f = { .max_chunk = chunks[k],
						  .check_anchor = true };
				struct reclist got = { 0 };
				struct ptd_stream_stats st;

				rnd_state = 77 + k;
				if (feed_stream(&small, 0, &o, pt, small_len, &f,
						&got, &st) == 0) {
					corrupt_compare(&want, &got, block);
					CHECK_EQ_U64(st.anchor_mismatches, 0);
				}
				reclist_free(&got);
			}
			reclist_free(&want);
		}
	}
	free(pt);
}

/* Hardware traces have padding and timing packets after a PSB+: libipt's
 * read ahead decodes them before it fetches the PSB+'s status updates,
 * and the anchor moves past such PSBs all the same (decode/stream.c,
 * after_status).  The PADs go after the thread's last image change,
 * whose stream position they would move. */
static void test_padded(void)
{
	struct evpos *evs;
	uint64_t last = 0, first = 0;
	size_t nev, len = 0;
	uint8_t *pt;

	REQUIRE(get_small());
	evs = calloc(small.tl.n + 1, sizeof(*evs));
	REQUIRE(evs);
	nev = thread_events(&small, 0, evs);
	for (size_t i = 0; i < nev; i++)
		last = evs[i].pos > last ? evs[i].pos : last;
	free(evs);
	pt = ptdamage_pad_after_psbend(small_pt, small_len, &small.cpu,
				       last + 1, 3, &len, &first);
	REQUIRE(pt);
	REQUIRE(first > 0 && first + 2048 < len);
	for (int block = 0; block < 2; block++) {
		struct ptd_decode_opts o = path_opts(&small, block);
		struct reclist want = { 0 }, got = { 0 };
		struct feed f = { .max_chunk = 700, .check_anchor = true };
		struct ptd_stream_stats st;

		REQUIRE(decode_whole(&small, 0, &o, pt, 0, len, 0, &want) ==
			0);
		if (feed_stream(&small, 0, &o, pt, len, &f, &got, &st) == 0) {
			(void)same_path(block ? "padded, block"
					      : "padded, insn",
					&want, &got, block);
			/* it went on moving past the padded PSBs */
			CHECK(st.anchor > first + 1024);
			CHECK_EQ_U64(st.anchor_mismatches, 0);
		}
		reclist_free(&want);
		reclist_free(&got);
	}
	free(pt);
}

/* A loss: before it the whole decode of the prefix, then a record saying
 * what was lost, then the decode from the next PSB after the gap. */
static void test_lost(void)
{
	size_t at, gap = 300;

	REQUIRE(get_small());
	REQUIRE(small_len > 3000);
	at = small_len / 2 + 5;
	for (int block = 0; block < 2; block++) {
		struct ptd_decode_opts o = path_opts(&small, block);
		struct reclist pre = { 0 }, post = { 0 }, got = { 0 };
		struct feed f = { .max_chunk = 700, .check_anchor = true,
				  .lost_at = at, .lost_len = gap };
		struct ptd_stream_stats st;
		struct reclist head, tail;
		const struct ptd_rec_error *e;

		REQUIRE(decode_whole(&small, 0, &o, small_pt, 0, at, 0, &pre) ==
			0);
		REQUIRE(decode_whole(&small, 0, &o, small_pt, at + gap,
				     small_len, gap, &post) == 0);
		rnd_state = 99;
		REQUIRE(feed_stream(&small, 0, &o, small_pt, small_len, &f,
				    &got, &st) == 0);
		REQUIRE(got.n == pre.n + 1 + post.n);
		head = got;
		head.n = pre.n;
		(void)same_path("before the loss", &pre, &head, block);
		e = &got.r[pre.n].u.error;
		CHECK_EQ_INT(got.r[pre.n].type, PTD_REC_ERROR);
		CHECK_EQ_INT(e->code, -PTD_ETRUNC);
		CHECK_EQ_STR(e->context, "lost");
		CHECK_EQ_U64(e->offset, at);
		CHECK_EQ_U64(e->skipped, gap);
		tail = got;
		tail.r += pre.n + 1;
		tail.n = post.n;
		(void)same_path("after the loss", &post, &tail, block);
		CHECK(post.n > 0);
		CHECK_EQ_U64(st.lost, gap);
		CHECK_EQ_U64(st.segments, 2);
		reclist_free(&pre);
		reclist_free(&post);
		reclist_free(&got);
	}
}

/* Beyond max_buffered the segment ends with an "overflow" record. */
static void test_overflow(void)
{
	struct ptd_decode_opts o;
	struct feed f = { .max_chunk = 512, .max_buffered = 1024 };
	struct reclist got = { 0 };
	struct ptd_stream_stats st;
	struct ptd_capture c;
	char *argv[] = { prog("recursion"), NULL };
	size_t overflows = 0;
	uint8_t *pt = NULL;
	size_t len = 0;
	struct ptd_diag diag = { "" };

	/* One PSB: the anchor never moves, the records are still exact. */
	REQUIRE(trace("psb1m", argv, 1u << 20, false, false, &c));
	{
		static const size_t chunks[] = { 3000 };
		uint64_t moves = 0;

		check_capture(&c, "psb1m", chunks, 1, NULL, &moves);
		CHECK_EQ_U64(moves, 0);
	}
	/* With a small bound the buffer fills. */
	o = path_opts(&c, false);
	if (ptd_capture_read_pt(&c, 0, &pt, &len, &diag) == 0 && len > 4096) {
		rnd_state = 5;
		if (feed_stream(&c, 0, &o, pt, len, &f, &got, &st) == 0) {
			for (size_t i = 0; i < got.n; i++)
				if (got.r[i].type == PTD_REC_ERROR &&
				    !strcmp(got.r[i].u.error.context,
					    "overflow"))
					overflows++;
			CHECK(overflows > 0);
			CHECK_EQ_U64(st.overflows, overflows);
		}
	} else {
		CHECK_FAIL_("trace too small: %zu bytes", len);
	}
	reclist_free(&got);
	free(pt);
	ptd_capture_fini(&c);
}

/* A callback that stops: the records it got count, the rest follows. */
static void test_callback_stop(void)
{
	struct ptd_decode_opts o;
	struct ptd_stream_opts so;
	struct ptd_stream *s = NULL;
	struct reclist want = { 0 }, got = { 0 };
	int r, rounds = 0;

	REQUIRE(get_small());
	o = path_opts(&small, false);
	REQUIRE(decode_whole(&small, 0, &o, small_pt, 0, small_len, 0,
			     &want) == 0);
	memset(&so, 0, sizeof(so));
	so.decode = o;
	so.pid = small.pid;
	so.tid = small.threads[0].tid;
	so.iscache = ic;
	so.dir = small.dir;
	REQUIRE(ptd_stream_new(&so, &s) == 0);
	/* Every event is in place before the bytes after it: add them all
	 * at their positions by feeding byte ranges between them. */
	{
		struct evpos *evs = calloc(small.tl.n + 1, sizeof(*evs));
		size_t nev, e = 0, off = 0;

		REQUIRE(evs);
		nev = thread_events(&small, 0, evs);
		while (off < small_len || e < nev) {
			size_t stop = small_len;

			while (e < nev && evs[e].pos <= off)
				CHECK_EQ_INT(ptd_stream_add_event(s,
								  evs[e++].ev),
					     0);
			if (off == small_len)
				break;
			if (e < nev && evs[e].pos < stop)
				stop = evs[e].pos;
			CHECK_EQ_INT(ptd_stream_append(s, small_pt + off,
						       stop - off),
				     0);
			off = stop;
		}
		free(evs);
	}
	/* Stop after every 1000 records. */
	for (;;) {
		got.stop_after = got.n + 1000;
		got.stop_rc = -EAGAIN;
		r = ptd_stream_decode(s, true, reclist_add, &got);
		rounds++;
		if (r != -EAGAIN)
			break;
		REQUIRE(rounds < 100000);
	}
	CHECK(r >= 0);
	CHECK(rounds > 1);
	(void)same("stopping callback", &want, &got);
	/* Decoded final: no more input. */
	CHECK_EQ_INT(ptd_stream_append(s, small_pt, 1), -EINVAL);
	CHECK_EQ_INT(ptd_stream_lost(s, 1), -EINVAL);
	CHECK_EQ_INT(ptd_stream_decode(s, true, reclist_add, &got), 0);
	ptd_stream_free(s);
	reclist_free(&want);
	reclist_free(&got);
}

static void test_args(void)
{
	struct ptd_stream_opts so;
	struct ptd_stream *s = NULL;
	struct ptd_tl_event ev;
	struct reclist got = { 0 };

	memset(&so, 0, sizeof(so));
	so.tid = 1;
	CHECK_EQ_INT(ptd_stream_new(NULL, &s), -EINVAL);
	CHECK_EQ_INT(ptd_stream_new(&so, &s), -EINVAL); /* no iscache */
	so.iscache = ic;
	CHECK_EQ_INT(ptd_stream_new(&so, NULL), -EINVAL);
	so.tid = 0;
	CHECK_EQ_INT(ptd_stream_new(&so, &s), -EINVAL);
	so.tid = 1;
	so.decode.path = (enum ptd_decode_path)7;
	CHECK_EQ_INT(ptd_stream_new(&so, &s), -EINVAL);
	so.decode.path = PTD_PATH_INSN;
	so.decode.want = PTD_REC_BIT(PTD_REC_BLOCK);
	CHECK_EQ_INT(ptd_stream_new(&so, &s), -EINVAL);
	so.decode.want = PTD_REC_ALL + 1;
	CHECK_EQ_INT(ptd_stream_new(&so, &s), -EINVAL);
	so.decode.want = PTD_REC_BIT(PTD_REC_INSN);
	REQUIRE(ptd_stream_new(&so, &s) == 0);
	CHECK_EQ_INT(ptd_stream_append(NULL, (const uint8_t *)"", 1), -EINVAL);
	CHECK_EQ_INT(ptd_stream_append(s, NULL, 1), -EINVAL);
	CHECK_EQ_INT(ptd_stream_append(s, NULL, 0), 0);
	CHECK_EQ_INT(ptd_stream_lost(s, 0), -EINVAL);
	CHECK_EQ_INT(ptd_stream_lost(NULL, 1), -EINVAL);
	CHECK_EQ_INT(ptd_stream_add_event(s, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_stream_decode(s, false, NULL, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_stream_decode(NULL, false, reclist_add, &got),
		     -EINVAL);
	/* Nothing yet, then garbage with no PSB: no records, no errors. */
	CHECK_EQ_INT(ptd_stream_decode(s, false, reclist_add, &got), 0);
	CHECK_EQ_INT(ptd_stream_append(s, (const uint8_t *)"\x55\x55\x55", 3),
		     0);
	memset(&ev, 0, sizeof(ev));
	ev.op = PTD_TL_UNMAP;
	ev.start = 0x1000;
	ev.end = 0x2000;
	CHECK_EQ_INT(ptd_stream_add_event(s, &ev), 0);
	CHECK_EQ_INT(ptd_stream_decode(s, false, reclist_add, &got), 0);
	CHECK_EQ_INT(ptd_stream_decode(s, true, reclist_add, &got), 0);
	CHECK_EQ_U64(got.n, 0);
	CHECK_EQ_INT(ptd_stream_add_event(s, &ev), -EINVAL);
	ptd_stream_free(s);
	ptd_stream_free(NULL);
	/* Too many losses waiting for a round. */
	REQUIRE(ptd_stream_new(&so, &s) == 0);
	{
		int r = 0;

		for (unsigned i = 0; i <= PTD_STREAM_MAX_SEGMENTS && !r; i++)
			r = ptd_stream_lost(s, 1);
		CHECK_EQ_INT(r, -PTD_ELIMIT);
		/* A round delivers one "lost" record each. */
		r = ptd_stream_decode(s, false, reclist_add, &got);
		CHECK_EQ_INT(r, PTD_STREAM_MAX_SEGMENTS);
		CHECK_EQ_INT(ptd_stream_lost(s, 1), 0);
	}
	ptd_stream_free(s);
	reclist_free(&got);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-stream-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir)) {
		fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	(void)ptd_iscache_new(&ic);
	(void)ptd_insncache_new(0, &icache);
	if (!ic || !icache)
		return 1;
	RUN(test_args);
	RUN(test_callback_stop);
	RUN(test_byte_at_a_time);
	RUN(test_corrupt);
	RUN(test_padded);
	RUN(test_lost);
	RUN(test_overflow);
	RUN(test_recursion);
	RUN(test_cold_caches);
	RUN(test_threads_at_once);
	RUN(test_fnptr);
	RUN(test_filter_main);
	RUN(test_signal);
	RUN(test_threads);
	RUN(test_dlopen);
	RUN(test_exec);
	RUN(test_jit);
	RUN(test_first_exec);
	RUN(test_traces);
	if (have_small) {
		free(small_pt);
		ptd_capture_fini(&small);
	}
	ptd_insncache_free(icache);
	ptd_iscache_free(ic);
	if (!check_failures || getenv("PTD_TEST_CLEANUP_ALWAYS"))
		(void)ptd_rm_rf(workdir);
	else
		fprintf(stderr, "captures kept in %s\n", workdir);
	return check_done();
}
