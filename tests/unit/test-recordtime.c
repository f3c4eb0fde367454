/* SPDX-License-Identifier: MIT */
/*
 * Time on records: the software source's TSC calibration against
 * CLOCK_MONOTONIC, the clock in a buffer's header page, and records of a
 * traced program (software source with TSC packets, through livesink + feed
 * + stream, as a live session) carrying perf time and wall-clock time that
 * the JSON writer renders and cJSON parses back.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "aspace/iscache.h"
#include "common/diag.h"
#include "common/strutil.h"
#include "decode/feed.h"
#include "decode/stream.h"
#include "common/fileio.h"
#include "perf/sideband.h"
#include "perf/time.h"
#include "record/jsonw.h"
#include "swpt/livesink.h"
#include "swpt/tracer.h"
#include "record/diff.h"
#include "unit/tscmono.h"

static uint64_t now_ns(clockid_t id)
{
	struct timespec ts;

	(void)clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* The bound time.h documents: 50 us + 2 ppm of the time since the clock
 * was computed. */
static uint64_t bound_ns(uint64_t since_ns)
{
	return 50000u + since_ns / 500000u;
}

/* TSC -> perf time now, against CLOCK_MONOTONIC now (tscmono.h). */
static uint64_t error_now(const struct ptd_perf_clock *c)
{
	uint64_t tsc = 0, mono = 0;

	(void)tsc_mono_now(&tsc, &mono);
	return absdiff(ptd_perf_tsc_to_time(c, tsc), mono);
}

static void test_calibrate(void)
{
	struct ptd_perf_clock c, c2;
	struct ptd_diag diag = { "" };
	uint64_t t0, tsc, err;
	int r;

	CHECK_EQ_INT(ptd_perf_clock_calibrate(NULL, NULL), -EINVAL);
	r = ptd_perf_clock_calibrate(&c, &diag);
	if (r == -EOPNOTSUPP) {
		fprintf(stderr, "no TSC: %s\n", diag.msg);
		return;
	}
	REQUIRE(r == 0);
	t0 = now_ns(CLOCK_MONOTONIC);
	/* A second call soon after gives the same clock (not re-measured
	 * until the baseline has doubled in age). */
	REQUIRE(ptd_perf_clock_calibrate(&c2, NULL) == 0);
	CHECK_EQ_U64(c2.time_mult, c.time_mult);
	CHECK_EQ_U64(c2.time_zero, c.time_zero);
	CHECK(c.time_mult > 0);
	CHECK(c.time_shift < 32);
	CHECK(!c.cap_user_time_short);
	err = error_now(&c);
	if (err > bound_ns(0))
		CHECK_FAIL_("rdtsc now converts %" PRIu64 " ns away from "
			    "CLOCK_MONOTONIC (bound %" PRIu64 ")", err,
			    bound_ns(0));
	/* still within the bound a while later */
	(void)usleep(200000);
	err = error_now(&c);
	fprintf(stderr, "calibration error 200 ms later: %" PRIu64 " ns\n",
		err);
	if (err > bound_ns(now_ns(CLOCK_MONOTONIC) - t0))
		CHECK_FAIL_("after 200 ms: %" PRIu64 " ns away (bound %" PRIu64
			    ")", err, bound_ns(now_ns(CLOCK_MONOTONIC) - t0));
	/* round trips: one ns is a few cycles, one cycle under a ns */
	(void)ptd_perf_rdtsc(&tsc);
	{
		uint64_t t = ptd_perf_tsc_to_time(&c, tsc);
		uint64_t back = ptd_perf_time_to_tsc(&c, t);
		uint64_t cyc_per_ns = ((UINT64_C(1) << c.time_shift) +
				       c.time_mult - 1) / c.time_mult;

		CHECK(back <= tsc && tsc - back <= cyc_per_ns + 1);
		CHECK(absdiff(ptd_perf_tsc_to_time(&c, back), t) <= 1);
		CHECK(absdiff(ptd_perf_tsc_to_time(&c,
				ptd_perf_time_to_tsc(&c, t + 12345)),
			      t + 12345) <= 1);
	}
	/* After that it is re-measured over the longer span: still good. */
	(void)usleep(250000);
	REQUIRE(ptd_perf_clock_calibrate(&c2, NULL) == 0);
	err = error_now(&c2);
	if (err > bound_ns(0))
		CHECK_FAIL_("recalibrated: %" PRIu64 " ns away", err);
}

static void test_page(void)
{
	struct perf_event_mmap_page pg;
	struct ptd_perf_clock c, back;
	struct ptd_diag diag = { "" };

	memset(&pg, 0xcd, sizeof(pg));
	pg.capabilities = 0;
	pg.lock = 6;
	memset(&c, 0, sizeof(c));
	c.time_zero = UINT64_C(0xfffffff000001234);
	c.time_mult = 0x9abcdef0;
	c.time_shift = 31;
	CHECK_EQ_INT(ptd_perf_clock_to_page(&c, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_perf_clock_to_page(&c, &pg), 0);
	CHECK_EQ_INT(pg.lock, 8);	/* one write: +2, even again */
	CHECK_EQ_INT(pg.cap_user_time_zero, 1);
	CHECK_EQ_INT(pg.cap_user_time_short, 0);
	REQUIRE(ptd_perf_clock_from_page(&pg, &back, &diag) == 0);
	CHECK_EQ_U64(back.time_zero, c.time_zero);
	CHECK_EQ_U64(back.time_mult, c.time_mult);
	CHECK_EQ_U64(back.time_shift, c.time_shift);
	/* invalid clocks are refused, the page untouched */
	c.time_mult = 0;
	CHECK_EQ_INT(ptd_perf_clock_to_page(&c, &pg), -EINVAL);
	c.time_mult = 1;
	c.time_shift = 32;
	CHECK_EQ_INT(ptd_perf_clock_to_page(&c, &pg), -EINVAL);
	CHECK_EQ_INT(pg.lock, 8);
	/* NULL: no conversion any more */
	CHECK_EQ_INT(ptd_perf_clock_to_page(NULL, &pg), 0);
	CHECK_EQ_INT(pg.cap_user_time_zero, 0);
	CHECK_EQ_INT(ptd_perf_clock_from_page(&pg, &back, &diag),
		     -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(diag.msg, "cap_user_time_zero");
}

/* ---- records of a traced program -------------------------------------- */

static const char *progs_dir;

/* A traced program's per-thread buffers (livesink), big enough that the
 * producer never waits for a reader. */
struct traced {
	struct ptd_livesink *ls;
	struct ptd_livesink_thread *th[8];
	size_t nth;
	uint64_t mono0, mono1, wall0, wall1;	/* around the run */
};

static int trace_threads(struct traced *t)
{
	char path[512];
	char *argv[] = { path, NULL };
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	int r;

	(void)snprintf(path, sizeof(path), "%s/prog-threads", progs_dir);
	memset(t, 0, sizeof(*t));
	/* (the pid only labels the sideband records: the target's is not
	 * known before it runs) */
	r = ptd_livesink_new(getpid(), 1u << 20, 16u << 20, -1, NULL, &t->ls);
	if (r < 0) {
		CHECK_FAIL_("ptd_livesink_new: %s", ptd_strerror(r));
		return r;
	}
	memset(&so, 0, sizeof(so));
	so.gen.tsc = true;
	so.gen.psb_period = 4096;
	so.out = ptd_livesink_out(t->ls);
	so.quiet_target = true;
	t->mono0 = now_ns(CLOCK_MONOTONIC);
	t->wall0 = now_ns(CLOCK_REALTIME);
	r = ptd_swpt_run(argv, &so, &res, &diag);
	t->mono1 = now_ns(CLOCK_MONOTONIC);
	t->wall1 = now_ns(CLOCK_REALTIME);
	if (r < 0) {
		CHECK_FAIL_("tracing %s: %s (%s)", path, diag.msg,
			    ptd_strerror(r));
		return r;
	}
	t->nth = ptd_livesink_threads(t->ls, 0, t->th, 8);
	return 0;
}

struct collect {
	struct ptd_record *v;
	size_t n, cap;
};

static int collect_fn(void *ctx, const struct ptd_record *r)
{
	struct collect *c = ctx;

	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 1024;
		struct ptd_record *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = *r;
	return 0;
}

/* Decode thread @lt's buffer as a live session does (feed -> stream),
 * with wall-clock reference @ref (NULL: none). */
static int decode_buf(struct ptd_livesink_thread *lt, struct ptd_iscache *isc,
		      const struct ptd_perf_wallref *ref, struct collect *out)
{
	struct ptd_stream_opts so;
	struct ptd_stream *st = NULL;
	struct ptd_feed *feed = NULL;
	struct ptd_diag diag = { "" };
	struct ptd_codesnap_files files;
	char dir[] = "/tmp/ptd-recordtime-XXXXXX";
	int r;

	if (!mkdtemp(dir))
		return -errno;
	memset(&so, 0, sizeof(so));
	so.decode.path = PTD_PATH_BLOCK;
	/* (not the kinds of a counter table: records are kept past the
	 * decode, and theirs point into its table) */
	so.decode.want = PTD_REC_ALL & ~(PTD_REC_BIT(PTD_REC_BLOCK) |
					 PTD_COUNTERS_KINDS);
	so.decode.cpu.vendor = pcv_unknown;
	if (ref) {
		so.decode.has_wallref = true;
		so.decode.wallref = *ref;
	}
	so.pid = lt->tid;
	so.tid = lt->tid;
	so.iscache = isc;
	so.dir = dir;
	ptd_codesnap_files_init(&files, dir);
	r = ptd_stream_new(&so, &st);
	if (r == 0)
		r = ptd_feed_new(&lt->buf, lt->tid, st, &files,
				 PTD_SIDEBAND_SAMPLE_TYPE, true, &feed);
	if (r == 0)
		r = ptd_feed_drain(feed, &diag);
	if (r >= 0)
		r = ptd_stream_decode(st, true, collect_fn, out);
	ptd_feed_free(feed);
	ptd_stream_free(st);
	ptd_codesnap_files_fini(&files);
	(void)ptd_rm_rf(dir);
	return r < 0 ? r : 0;
}

/* "2026-11-22T10:00:00.123456789Z" -> ns since the epoch, or 0. */
static uint64_t parse_iso(const char *s)
{
	struct tm tm;
	unsigned long ns;
	char *end;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%S.", &tm);
	if (!end || strlen(end) != 10 || end[9] != 'Z')
		return 0;
	ns = strtoul(end, &end, 10);
	if (*end != 'Z')
		return 0;
	return (uint64_t)timegm(&tm) * 1000000000u + ns;
}

static uint64_t hexfield(const cJSON *o, const char *key, bool *ok)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsString(v) || strncmp(v->valuestring, "0x", 2)) {
		*ok = false;
		return 0;
	}
	return strtoull(v->valuestring + 2, NULL, 16);
}

/* The JSON line of @r has "time"/"wall" iff the record has them, and
 * they parse back to its values. */
static void check_json(const struct ptd_record *r, struct ptd_jsonw *w)
{
	char buf[PTD_JSON_MAX_RECORD];
	size_t n = ptd_json_record(buf, sizeof(buf), r);
	const cJSON *wall;
	cJSON *o;
	bool ok = true;

	REQUIRE(n > 0);
	buf[n - 1] = 0;
	o = cJSON_Parse(buf);
	REQUIRE(o);
	CHECK_EQ_INT(cJSON_HasObjectItem(o, "time"), r->has_time);
	CHECK_EQ_INT(cJSON_HasObjectItem(o, "wall"), r->has_wall);
	if (r->has_time)
		CHECK_EQ_U64(hexfield(o, "time", &ok), r->time);
	if (r->has_wall) {
		wall = cJSON_GetObjectItemCaseSensitive(o, "wall");
		REQUIRE(cJSON_IsString(wall));
		CHECK_EQ_U64(parse_iso(wall->valuestring), r->wall);
	}
	CHECK(ok);
	cJSON_Delete(o);
	/* the buffered writer (its cached seconds) writes the same line */
	if (w) {
		size_t at = w->len;

		REQUIRE(ptd_jsonw_put(w, r) == 0);
		if (w->len - at != n || memcmp(w->buf + at, buf, n - 1))
			CHECK_FAIL_("writer line differs from ptd_json_record: "
				    "%.*s", (int)(w->len - at), w->buf + at);
		w->len = 0;
	}
}

static void test_records(void)
{
	struct ptd_perf_clock clk;
	struct ptd_perf_wallref ref;
	struct ptd_iscache *isc;
	struct ptd_jsonw w;
	struct traced t;
	uint64_t timed = 0, walls = 0;

	if (ptd_perf_clock_calibrate(&clk, NULL) < 0) {
		fprintf(stderr, "no TSC clock: skipped\n");
		return;
	}
	/* as a session: perf time is CLOCK_MONOTONIC for this source */
	REQUIRE(ptd_perf_wallref_sample(NULL, CLOCK_MONOTONIC, &ref) == 0);
	REQUIRE(trace_threads(&t) == 0);
	CHECK_EQ_INT(t.nth, 3);
	(void)ptd_iscache_new(&isc);
	REQUIRE(isc);
	REQUIRE(ptd_jsonw_init(&w, 1, 0) == 0);
	for (size_t i = 0; i < t.nth; i++) {
		struct ptd_perf_clock pc;
		struct collect c = { 0 };
		uint64_t last = 0;

		/* the source published a calibrated clock (not necessarily
		 * the one calibrate gives now: a later call may re-measure
		 * the rate over a longer span) */
		REQUIRE(ptd_perf_clock_from_page(t.th[i]->buf.meta, &pc,
						 NULL) == 0);
		/* (tscmono.h: a single unbracketed rdtsc and clock_gettime
		 * here counted a vCPU preempted between them as error) */
		{
			uint64_t err = error_now(&pc);
			uint64_t bound = bound_ns(now_ns(CLOCK_MONOTONIC) -
						  t.mono0);

			if (err > bound)
				CHECK_FAIL_("thread %zu: its clock converts %"
					    PRIu64 " ns away from "
					    "CLOCK_MONOTONIC (bound %" PRIu64
					    ")", i, err, bound);
		}
		REQUIRE(decode_buf(t.th[i], isc, &ref, &c) == 0);
		CHECK(c.n > 100);
		for (size_t k = 0; k < c.n; k++) {
			const struct ptd_record *rec = &c.v[k];
			/* the source's TSC is read when tracing starts, a
			 * moment before CLOCK_MONOTONIC at the end */
			uint64_t slack = bound_ns(t.mono1 - t.mono0);

			CHECK_EQ_INT(rec->has_time, rec->has_tsc);
			CHECK_EQ_INT(rec->has_wall, rec->has_tsc);
			if (k < 64 || k % 97 == 0)
				check_json(rec, &w);
			if (!rec->has_tsc)
				continue;
			timed++;
			walls += rec->has_wall;
			CHECK_EQ_U64(rec->time,
				     ptd_perf_tsc_to_time(&pc, rec->tsc));
			CHECK_EQ_U64(rec->wall,
				     ptd_perf_time_to_wall(&ref, rec->time));
			if (rec->time < last)
				CHECK_FAIL_("thread %d record %zu: time %" PRIu64
					    " < %" PRIu64, (int)rec->tid, k,
					    rec->time, last);
			last = rec->time;
			if (rec->time + slack < t.mono0 ||
			    rec->time > t.mono1 + slack)
				CHECK_FAIL_("time %" PRIu64 " outside the run "
					    "[%" PRIu64 ", %" PRIu64 "]",
					    rec->time, t.mono0, t.mono1);
			/* the wall clock may step: the same slack plus what
			 * the two clocks moved apart during the run */
			if (rec->wall + slack < t.wall0 ||
			    rec->wall > t.wall1 + slack)
				CHECK_FAIL_("wall %" PRIu64 " outside the run "
					    "[%" PRIu64 ", %" PRIu64 "]",
					    rec->wall, t.wall0, t.wall1);
		}
		free(c.v);
	}
	CHECK(timed > 300);
	CHECK_EQ_U64(walls, timed);

	/* Without a clock in the page (cap_user_time_zero 0, as intel_pt
	 * on this kind of VM): TSC only, no "time" or "wall". */
	for (size_t i = 0; i < t.nth; i++) {
		struct collect c = { 0 };
		size_t tsc = 0;

		REQUIRE(ptd_perf_clock_to_page(NULL, t.th[i]->buf.meta) == 0);
		/* the reader has consumed it all: read it again from 0 */
		t.th[i]->buf.meta->data_tail = 0;
		t.th[i]->buf.meta->aux_tail = 0;
		REQUIRE(decode_buf(t.th[i], isc, &ref, &c) == 0);
		CHECK(c.n > 100);
		for (size_t k = 0; k < c.n; k++) {
			tsc += c.v[k].has_tsc;
			CHECK(!c.v[k].has_time && !c.v[k].has_wall);
			if (k < 8)
				check_json(&c.v[k], NULL);
		}
		CHECK(tsc > 0);
		free(c.v);
	}
	w.len = 0;
	(void)ptd_jsonw_fini(&w);
	ptd_iscache_free(isc);
	ptd_livesink_free(t.ls);
}

/* The writer: "wall" rendering (epoch, leap day, far future), its
 * per-second cache, and ptd_record_diff's rule. */
static void test_writer(void)
{
	static const struct {
		uint64_t ns;
		const char *iso;
	} v[] = {
		{ 0, "1970-01-01T00:00:00.000000000Z" },
		{ 951782400123456789ull, "2000-02-29T00:00:00.123456789Z" },
		{ 1795341600000000001ull, "2026-11-22T10:00:00.000000001Z" },
		{ UINT64_MAX, "2554-07-21T23:34:33.709551615Z" },
	};
	struct ptd_record a, b;
	struct ptd_jsonw w;
	char buf[PTD_JSON_MAX_RECORD], want[96];

	memset(&a, 0, sizeof(a));
	a.type = PTD_REC_ERROR;
	a.u.error.context = "decode";
	a.has_tsc = true;
	a.tsc = 0x1234;
	a.has_time = true;
	a.time = 0xabcdef;
	a.has_wall = true;
	REQUIRE(ptd_jsonw_init(&w, 1, 0) == 0);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t n;

		a.wall = v[i].ns;
		n = ptd_json_record(buf, sizeof(buf), &a);
		REQUIRE(n > 0);
		buf[n] = 0;
		(void)snprintf(want, sizeof(want),
			       ",\"tsc\":\"0x1234\",\"time\":\"0xabcdef\","
			       "\"wall\":\"%s\"}\n", v[i].iso);
		CHECK_CONTAINS(buf, want);
		CHECK_EQ_U64(parse_iso(v[i].iso), v[i].ns);
		/* twice through the writer: the cached second is right */
		check_json(&a, &w);
		check_json(&a, &w);
	}
	/* same second, other ns; then the next second */
	a.wall = 1795341600999999999ull;
	check_json(&a, &w);
	a.wall++;
	check_json(&a, &w);
	w.len = 0;
	(void)ptd_jsonw_fini(&w);

	/* no TSC: no time fields even if set (they derive from it) */
	a.has_tsc = false;
	{
		size_t n = ptd_json_record(buf, sizeof(buf), &a);

		REQUIRE(n > 0);
		buf[n] = 0;
	}
	CHECK(!strstr(buf, "\"time\"") && !strstr(buf, "\"wall\""));

	/* diff: compared unless times are ignored */
	a.has_tsc = true;
	b = a;
	CHECK(ptd_record_diff(&a, &b, 0) == NULL);
	b.time++;
	CHECK_EQ_STR(ptd_record_diff(&a, &b, 0), "time");
	CHECK(ptd_record_diff(&a, &b, PTD_DIFF_IGNORE_TIME) == NULL);
	b = a;
	b.has_wall = false;
	CHECK_EQ_STR(ptd_record_diff(&a, &b, 0), "has_wall");
	b = a;
	b.wall--;
	CHECK_EQ_STR(ptd_record_diff(&a, &b, 0), "wall");
	CHECK(ptd_record_diff(&a, &b, PTD_DIFF_IGNORE_TIME) == NULL);
	/* events too (compared through their JSON) */
	a.type = b.type = PTD_REC_EVENT;
	a.u.event.ev.type = b.u.event.ev.type = ptev_tick;
	b = a;
	b.wall++;
	CHECK_EQ_STR(ptd_record_diff(&a, &b, 0), "wall");
	CHECK(ptd_record_diff(&a, &b, PTD_DIFF_IGNORE_TIME) == NULL);
}

int main(void)
{
	progs_dir = getenv("PTD_TEST_PROGS");
	RUN(test_page);
	RUN(test_writer);
	RUN(test_calibrate);
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set");
	RUN(test_records);
	return check_done();
}
