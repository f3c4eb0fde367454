/* SPDX-License-Identifier: MIT */
/*
 * decode/cpufeed: per-CPU buffers merged by time into per-thread byte
 * streams and image changes.  The buffers are written by the software
 * source's per-CPU sink (swpt/livesink.h) or by hand with the producer;
 * everything is written before the feed reads, so the merge, not the
 * timing of the reads, must restore the order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "aspace/iscache.h"
#include "common/fileio.h"
#include "decode/cpufeed.h"
#include "perf/producer.h"
#include "perf/sideband.h"
#include "swpt/livesink.h"

#define NT 2
#define BATCHES 12

struct obs {
	pid_t tid[NT];
	uint8_t bytes[NT][4096];
	size_t nbytes[NT];
	uint64_t map_at[NT][4];	/* where each MAP landed, by start / 0x1000 */
	unsigned nmaps[NT];
	unsigned ended[NT];
	unsigned seen;
	struct ptd_stream *streams[NT];
	struct ptd_iscache *ic;
	char dir[64];
};

static int slot(struct obs *o, pid_t tid)
{
	for (int i = 0; i < NT; i++)
		if (o->tid[i] == tid)
			return i;
	return -1;
}

static int ob_new(void *ctx, pid_t pid, pid_t tid, struct ptd_stream **ret)
{
	struct obs *o = ctx;
	int i = slot(o, tid);

	(void)pid;
	o->seen++;
	*ret = NULL;
	if (i >= 0 && o->ic) {	/* a real stream (losses) */
		struct ptd_stream_opts so = { 0 };

		so.decode.path = PTD_PATH_BLOCK;
		so.decode.want = PTD_REC_ALL & ~(PTD_REC_BIT(PTD_REC_BLOCK) |
						 PTD_COUNTERS_KINDS);
		so.decode.cpu.vendor = pcv_unknown;
		so.pid = getpid();
		so.tid = tid;
		so.iscache = o->ic;
		so.dir = o->dir;
		int r = ptd_stream_new(&so, &o->streams[i]);

		if (r < 0)
			return r;
		*ret = o->streams[i];
	}
	return 0;
}

static int ob_end(void *ctx, pid_t tid)
{
	struct obs *o = ctx;
	int i = slot(o, tid);

	if (i >= 0)
		o->ended[i]++;
	return 0;
}

static void ob_bytes(void *ctx, pid_t tid, const uint8_t *d, size_t len)
{
	struct obs *o = ctx;
	int i = slot(o, tid);

	if (i < 0 || o->nbytes[i] + len > sizeof(o->bytes[i]))
		return;
	memcpy(o->bytes[i] + o->nbytes[i], d, len);
	o->nbytes[i] += len;
}

static void ob_image(void *ctx, pid_t tid, uint64_t at,
		     const struct ptd_tl_event *ev)
{
	struct obs *o = ctx;
	int i = slot(o, tid);

	if (i < 0 || ev->op != PTD_TL_MAP || o->nmaps[i] >= 4)
		return;
	o->map_at[i][o->nmaps[i]++] = at;
}

static int image_map(const struct ptd_swpt_out *out, uint64_t start)
{
	struct ptd_tl_event ev = { 0 };

	ev.op = PTD_TL_MAP;
	ev.start = start;
	ev.end = start + 0x1000;
	ev.path = (char *)"/bin/true";
	return out->image(out->ctx, &ev, NULL, 0);
}

/* (no CODE records here: no snapshot file is written) */
static struct ptd_codesnap_files snapfiles;

static struct ptd_cpufeed *feed_new(struct ptd_perf_buf **bufs, unsigned n,
				    struct obs *o)
{
	struct ptd_cpufeed_opts fo = { 0 };
	struct ptd_cpufeed_ops ops = { ob_new, ob_end, ob_bytes, ob_image, o };
	struct ptd_cpufeed *f = NULL;

	fo.ncpus = n;
	fo.bufs = bufs;
	fo.pid = getpid();
	fo.sample_type = PTD_SIDEBAND_SAMPLE_TYPE;
	fo.sample_id_all = true;
	fo.snapfiles = &snapfiles;
	if (ptd_cpufeed_new(&fo, &ops, &f) < 0)
		return NULL;
	return f;
}

/* Two threads on two CPUs, migrating every other batch, with an image
 * change in the middle: each thread gets its bytes in order and the
 * change where its stream was when it happened. */
static void test_cpufeed_merge(void)
{
	static struct obs o;
	struct ptd_livesink *ls = NULL;
	const struct ptd_swpt_out *out;
	struct ptd_perf_buf *bufs[2];
	struct ptd_cpufeed_stats st;
	struct ptd_diag diag = { "" };
	struct ptd_cpufeed *f;
	uint8_t want[NT][4096];
	size_t nwant[NT] = { 0 };
	uint64_t mid[NT] = { 0 };

	memset(&o, 0, sizeof(o));
	o.tid[0] = 900001;
	o.tid[1] = 900002;
	REQUIRE(ptd_livesink_new(getpid(), 64u << 10, 16u << 10, -1, NULL,
				 &ls) == 0);
	REQUIRE(ptd_livesink_set_cpus(ls, 2, 2) == 0);
	REQUIRE(ptd_livesink_cpus(ls, bufs, 2) == 2);
	out = ptd_livesink_out(ls);
	CHECK_EQ_INT(image_map(out, 0x400000), 0);	/* before any thread */
	for (int t = 0; t < NT; t++)
		CHECK_EQ_INT(out->thread_begin(out->ctx, o.tid[t]), 0);
	for (int b = 0; b < BATCHES; b++) {
		for (int t = 0; t < NT; t++) {
			uint8_t d[40];
			size_t n = 5 + (size_t)b + (size_t)t;

			for (size_t k = 0; k < n; k++)
				d[k] = (uint8_t)(t * 100 + b * 7 + k);
			memcpy(want[t] + nwant[t], d, n);
			nwant[t] += n;
			CHECK_EQ_INT(out->pt(out->ctx, o.tid[t], d, n), 0);
		}
		if (b == 5) {
			CHECK_EQ_INT(image_map(out, 0x800000), 0);
			mid[0] = nwant[0];
			mid[1] = nwant[1];
		}
	}
	for (int t = 0; t < NT; t++)
		CHECK_EQ_INT(out->thread_end(out->ctx, o.tid[t]), 0);
	/* both CPUs ran both threads */
	CHECK(bufs[0]->meta->aux_head > 0 && bufs[1]->meta->aux_head > 0);

	f = feed_new(bufs, 2, &o);
	REQUIRE(f != NULL);
	/* round 1: everything is read, nothing is older than what an
	 * earlier round saw: all of it waits */
	CHECK_EQ_INT(ptd_cpufeed_round(f, false, &diag), 0);
	ptd_cpufeed_get_stats(f, &st);
	CHECK(st.queued > 0);
	CHECK_EQ_U64(st.aux_bytes, 0);
	CHECK_EQ_U64(o.nbytes[0] + o.nbytes[1], 0);
	/* round 2: up to round 1's newest time, which is everything */
	CHECK_EQ_INT(ptd_cpufeed_round(f, false, &diag), 0);
	CHECK_EQ_INT(ptd_cpufeed_round(f, true, &diag), 0);
	ptd_cpufeed_get_stats(f, &st);
	CHECK_EQ_U64(st.queued, 0);
	CHECK_EQ_U64(st.aux_bytes, 0);	/* no streams here */
	CHECK_EQ_U64(st.split.reordered, 0);
	CHECK_EQ_U64(st.split.bad_switches, 0);
	CHECK_EQ_U64(st.split.orphan_bytes, 0);
	CHECK_EQ_U64(st.image_events, 2);
	/* ended threads are followed no more: the one left is the
	 * process's leader (the image records carry its tid), which never
	 * ended here */
	CHECK_EQ_U64(st.threads, NT + 1);
	CHECK_EQ_U64(st.threads_live, 1);
	CHECK_EQ_U64(o.seen, NT + 1);
	for (int t = 0; t < NT; t++) {
		CHECK_EQ_U64(o.nbytes[t], nwant[t]);
		if (o.nbytes[t] == nwant[t] &&
		    memcmp(o.bytes[t], want[t], nwant[t]) != 0)
			CHECK_FAIL_("thread %d: bytes out of order", t);
		CHECK_EQ_INT(o.ended[t], 1);
		/* the first MAP replayed at its start, the second where its
		 * stream was when the change happened */
		CHECK_EQ_INT(o.nmaps[t], 2);
		CHECK_EQ_U64(o.map_at[t][0], 0);
		CHECK_EQ_U64(o.map_at[t][1], mid[t]);
	}
	ptd_cpufeed_free(f);
	ptd_livesink_free(ls);
}

/* A record of CPU @p's ring: ITRACE_START / EXIT of @tid at @time. */
static void put_task(struct ptd_perf_producer *p, uint32_t tid,
		     uint64_t time, bool exit)
{
	uint8_t rec[256];
	struct ptd_perf_sample_id sid = { 0 };
	size_t len;

	sid.pid = (uint32_t)getpid();
	sid.tid = tid;
	sid.time = time;
	if (exit) {
		struct ptd_perf_task t = { sid.pid, sid.pid, tid, tid, time };

		len = ptd_perf_encode_task(rec, sizeof(rec), true, &t,
					   PTD_SIDEBAND_SAMPLE_TYPE, &sid);
	} else {
		struct ptd_perf_itrace_start it = { sid.pid, tid };

		len = ptd_perf_encode_itrace_start(rec, sizeof(rec), &it,
						   PTD_SIDEBAND_SAMPLE_TYPE,
						   &sid);
	}
	CHECK_EQ_INT(ptd_perf_producer_record(p, rec, len), 0);
}

/* AUX bytes lost in a CPU's ring are a gap in the stream of the thread
 * that owned the CPU. */
static void test_cpufeed_loss(void)
{
	static struct obs o;
	static const uint8_t bytes[16] = { 1, 2, 3 };
	struct ptd_perf_buf buf, *bufs[1] = { &buf };
	struct ptd_perf_producer p;
	struct ptd_cpufeed_stats st;
	struct ptd_stream_stats ss;
	struct ptd_diag diag = { "" };
	struct ptd_cpufeed *f;

	memset(&o, 0, sizeof(o));
	o.tid[0] = 900011;
	(void)ptd_iscache_new(&o.ic);
	snprintf(o.dir, sizeof(o.dir), "/tmp");
	REQUIRE(o.ic != NULL);
	REQUIRE(ptd_perf_buf_alloc(16u << 10, 16u << 10, false, &buf) == 0);
	ptd_perf_producer_init(&p, &buf);
	put_task(&p, 900011, 10, false);
	CHECK_EQ_INT(ptd_perf_producer_aux(&p, bytes, sizeof(bytes), 0), 16);
	CHECK_EQ_INT(ptd_perf_producer_inject_aux_gap(&p, 100), 0);
	CHECK_EQ_INT(ptd_perf_producer_aux(&p, bytes, sizeof(bytes), 0), 16);
	put_task(&p, 900011, 20, true);
	f = feed_new(bufs, 1, &o);
	REQUIRE(f != NULL);
	CHECK_EQ_INT(ptd_cpufeed_round(f, true, &diag), 0);
	ptd_cpufeed_get_stats(f, &st);
	CHECK_EQ_U64(st.aux_bytes, 32);
	CHECK_EQ_U64(st.lost_bytes, 100);
	CHECK_EQ_U64(st.losses, 1);
	CHECK_EQ_INT(o.ended[0], 1);
	REQUIRE(o.streams[0] != NULL);
	ptd_stream_get_stats(o.streams[0], &ss);
	CHECK_EQ_U64(ss.appended, 32);
	CHECK_EQ_U64(ss.lost, 100);
	ptd_cpufeed_free(f);
	ptd_stream_free(o.streams[0]);
	ptd_perf_buf_fini(&buf);
	ptd_iscache_free(o.ic);
}

static void test_cpufeed_args(void)
{
	struct ptd_perf_buf buf, *bufs[1] = { &buf }, *nob[1] = { NULL };
	struct ptd_cpufeed_opts fo = { 0 };
	struct ptd_cpufeed_ops ops = { ob_new, NULL, NULL, NULL, NULL };
	struct ptd_cpufeed *f = NULL;
	struct ptd_diag diag = { "" };

	REQUIRE(ptd_perf_buf_alloc(4096, 4096, false, &buf) == 0);
	fo.ncpus = 1;
	fo.bufs = bufs;
	fo.pid = getpid();
	fo.sample_type = PTD_SIDEBAND_SAMPLE_TYPE;
	fo.sample_id_all = true;
	fo.snapfiles = &snapfiles;
	CHECK_EQ_INT(ptd_cpufeed_new(NULL, &ops, &f), -EINVAL);
	CHECK_EQ_INT(ptd_cpufeed_new(&fo, NULL, &f), -EINVAL);
	fo.ncpus = 0;
	CHECK_EQ_INT(ptd_cpufeed_new(&fo, &ops, &f), -EINVAL);
	fo.ncpus = PTD_PERCPU_MAX_CPUS + 1;
	CHECK_EQ_INT(ptd_cpufeed_new(&fo, &ops, &f), -EINVAL);
	fo.ncpus = 1;
	fo.bufs = nob;
	CHECK_EQ_INT(ptd_cpufeed_new(&fo, &ops, &f), -EINVAL);
	fo.bufs = bufs;
	fo.sample_id_all = false;
	CHECK_EQ_INT(ptd_cpufeed_new(&fo, &ops, &f), -EINVAL);
	fo.sample_id_all = true;
	fo.sample_type = PERF_SAMPLE_TIME;
	CHECK_EQ_INT(ptd_cpufeed_new(&fo, &ops, &f), -EINVAL);
	fo.sample_type = PTD_SIDEBAND_SAMPLE_TYPE;
	fo.pid = 0;
	CHECK_EQ_INT(ptd_cpufeed_new(&fo, &ops, &f), -EINVAL);
	fo.pid = getpid();
	ops.thread_new = NULL;
	CHECK_EQ_INT(ptd_cpufeed_new(&fo, &ops, &f), -EINVAL);
	CHECK(f == NULL);
	ops.thread_new = ob_new;
	CHECK_EQ_INT(ptd_cpufeed_new(&fo, &ops, &f), 0);
	CHECK_EQ_INT(ptd_cpufeed_round(NULL, false, &diag), -EINVAL);
	CHECK_EQ_INT(ptd_cpufeed_image(f, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_cpufeed_round(f, true, &diag), 0);	/* empty */
	ptd_cpufeed_free(f);
	ptd_cpufeed_free(NULL);
	ptd_perf_buf_fini(&buf);
}

int main(void)
{
	ptd_codesnap_files_init(&snapfiles, "/nonexistent");
	RUN(test_cpufeed_args);
	RUN(test_cpufeed_merge);
	RUN(test_cpufeed_loss);
	ptd_codesnap_files_fini(&snapfiles);
	return check_done();
}
