/* SPDX-License-Identifier: MIT */
/*
 * What session tests share: a sink that collects each thread's records, and
 * the comparison of a finished session's live records with the capture
 * written beside them (the whole-stream decode, field for field, and the
 * ground truth).  Header-only; include after check.h and reccmp.h, with
 * progs_dir/workdir defined by the test.
 */
#ifndef PTD_TESTS_SESSION_COLLECT_H
#define PTD_TESTS_SESSION_COLLECT_H

#include <pthread.h>

#include "aspace/iscache.h"
#include "daemon/session.h"
#include "decode/insncache.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"

/* Records that carried perf/wall time (derived from their TSC with the
 * buffers' clock, which the capture's whole-stream decode has not got). */
static size_t session_timed;

#define MAX_TIDS 256

struct collect {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pid_t tid[MAX_TIDS];
	struct reclist rec[MAX_TIDS];
	size_t ntid;
	uint64_t total;
	bool ended;
	struct ptd_session_end end;
};

static struct reclist *list_of(struct collect *c, pid_t tid)
{
	for (size_t i = 0; i < c->ntid; i++)
		if (c->tid[i] == tid)
			return &c->rec[i];
	if (c->ntid == MAX_TIDS)
		abort();
	c->tid[c->ntid] = tid;
	return &c->rec[c->ntid++];
}

static void on_record(void *ctx, const struct ptd_record *rec)
{
	struct collect *c = ctx;

	(void)pthread_mutex_lock(&c->lock);
	/* block records are what the block path adds: compare the rest */
	if (rec->type != PTD_REC_BLOCK)
		(void)reclist_add(list_of(c, rec->tid), rec);
	c->total++;
	(void)pthread_mutex_unlock(&c->lock);
}

static void on_ended(void *ctx, const struct ptd_session_end *end)
{
	struct collect *c = ctx;

	(void)pthread_mutex_lock(&c->lock);
	c->end = *end;
	c->ended = true;
	(void)pthread_cond_broadcast(&c->cond);
	(void)pthread_mutex_unlock(&c->lock);
}

static void collect_init(struct collect *c)
{
	memset(c, 0, sizeof(*c));
	(void)pthread_mutex_init(&c->lock, NULL);
	(void)pthread_cond_init(&c->cond, NULL);
}

/* @c initialised, and @sink the one that collects into it. */
static void collect_sink(struct collect *c, struct ptd_session_sink *sink)
{
	collect_init(c);
	memset(sink, 0, sizeof(*sink));
	sink->record = on_record;
	sink->ended = on_ended;
	sink->ctx = c;
}

static void collect_free(struct collect *c)
{
	for (size_t i = 0; i < c->ntid; i++)
		reclist_free(&c->rec[i]);
}

static void wait_end(struct collect *c)
{
	(void)pthread_mutex_lock(&c->lock);
	while (!c->ended)
		(void)pthread_cond_wait(&c->cond, &c->lock);
	(void)pthread_mutex_unlock(&c->lock);
}

static void unisid(struct reclist *l)
{
	for (size_t i = 0; i < l->n; i++)
		session_timed += l->r[i].has_time;
	for (size_t i = 0; i < l->n; i++)
		if (l->r[i].type == PTD_REC_INSN) {
			l->r[i].u.insn.isid = 0;
			l->r[i].u.insn.json_body = NULL;
			l->r[i].u.insn.json_body_len = 0;
		}
}

/* The live records of every thread against the capture: the whole-stream
 * decode (the session's path @path, same options) and the ground truth. */
static void compare_path(struct collect *c, const char *dir,
			 enum ptd_decode_path path)
{
	struct ptd_diag diag = { "" };
	struct ptd_capture cap;
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_insncache *icache;
	(void)ptd_insncache_new(1u << 20, &icache);
	struct ptd_decode_opts o = { 0 };
	int r;

	REQUIRE(ic && icache);
	r = ptd_capture_load(dir, &cap, &diag);
	if (r < 0) {
		CHECK_FAIL_("loading %s: %s", dir, diag.msg);
		return;
	}
	o.path = path;
	/* what a live session decodes (ptd_source_stream_opts) */
	o.want = PTD_REC_ALL & ~(PTD_REC_BIT(PTD_REC_BLOCK) |
				 PTD_COUNTERS_KINDS);
	o.json_bodies = true;
	o.cpu.vendor = pcv_unknown;
	/* the capture keeps the clock the live buffers published and the
	 * session's wall-clock reference: the same time and wall */
	CHECK(cap.has_clock && cap.has_wallref);
	o.has_clock = cap.has_clock;
	o.clock = cap.clock;
	o.has_wallref = cap.has_wallref;
	o.wallref = cap.wallref;
	/* Every thread with live records is in the capture.  The capture
	 * may list more: a thread that the session met at its first stop
	 * as it detached ran no instruction traced, and sent no record
	 * (the loop below holds its truth to none). */
	for (size_t t = 0; t < c->ntid; t++) {
		size_t i = 0;

		while (i < cap.nthreads && cap.threads[i].tid != c->tid[t])
			i++;
		if (i == cap.nthreads)
			CHECK_FAIL_("thread %d sent records but is not in the "
				    "capture", (int)c->tid[t]);
	}
	CHECK(cap.nthreads >= c->ntid);
	for (size_t i = 0; i < cap.nthreads; i++) {
		struct reclist whole = { 0 }, *live;
		uint64_t *ips = NULL;
		size_t nips = 0, k = 0;
		char name[64];

		live = list_of(c, cap.threads[i].tid);
		r = ptd_capture_decode_thread(&cap, i, &o, ic, icache, NULL,
					      reclist_add, &whole, NULL,
					      &diag);
		if (r < 0)
			CHECK_FAIL_("replay of %d: %s", (int)cap.threads[i].tid,
				    diag.msg);
		/* isids name sections in one image section cache: the
		 * session's is shared by its threads, so its numbers differ
		 * from a fresh decode's; the module and offset say the same */
		unisid(live);
		unisid(&whole);
		snprintf(name, sizeof(name), "live %d", (int)cap.threads[i].tid);
		if (!reccmp_lists(stderr, name, live, "whole", &whole))
			CHECK_FAIL_("thread %d: live records differ from the "
				    "whole-stream decode",
				    (int)cap.threads[i].tid);
		r = ptd_capture_read_truth(&cap, i, &ips, &nips, &diag);
		CHECK_EQ_INT(r, 0);
		for (size_t j = 0; j < live->n; j++) {
			if (live->r[j].type != PTD_REC_INSN)
				continue;
			if (k >= nips || live->r[j].u.insn.ip != ips[k]) {
				CHECK_FAIL_("thread %d: insn %zu is %#llx, "
					    "truth says %#llx",
					    (int)cap.threads[i].tid, k,
					    (unsigned long long)live->r[j].u.insn.ip,
					    k < nips ? (unsigned long long)ips[k]
						     : 0ull);
				break;
			}
			k++;
		}
		CHECK_EQ_U64(k, nips);
		fprintf(stderr, "  tid %d: %zu records, %zu insns = truth\n",
			(int)cap.threads[i].tid, live->n, k);
		free(ips);
		reclist_free(&whole);
	}
	ptd_capture_fini(&cap);
	ptd_insncache_free(icache);
	ptd_iscache_free(ic);
}

/* compare_path for the block path, a live session's unless opts.jobs. */
static void compare(struct collect *c, const char *dir)
{
	compare_path(c, dir, PTD_PATH_BLOCK);
}

#endif
