/* SPDX-License-Identifier: MIT */
/*
 * The saved-trace interface (input/input.h): kinds detected from content,
 * never from names; clear refusals; a capture decoded through the interface
 * gives exactly the records ptd_capture_decode_thread gives, thread by
 * thread, with its hello information first and each thread's statistics
 * after it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/diag.h"
#include "common/fileio.h"
#include "decode/threadpar.h"
#include "input/input.h"
#include "record/jsonw.h"
#include "record/record.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"
#include "swpt/tracer.h"

static char workdir[] = "/tmp/ptd-test-input-XXXXXX";
static const char *progs_dir;

static void path_in(char *buf, size_t n, const char *name)
{
	(void)snprintf(buf, n, "%s/%s", workdir, name);
}

static void put(const char *name, const char *text)
{
	char p[PATH_MAX];

	path_in(p, sizeof(p), name);
	REQUIRE(ptd_file_write_atomic(p, text, strlen(text)) == 0);
}

static void expect_kind(const char *name, enum ptd_input_kind want)
{
	char p[PATH_MAX];
	struct ptd_diag d = { "" };
	enum ptd_input_kind k = PTD_INPUT_NONE;

	path_in(p, sizeof(p), name);
	CHECK_EQ_INT(ptd_input_detect(p, &k, &d), 0);
	CHECK_EQ_INT(k, want);
}

static void expect_refused(const char *name, int err, const char *msg)
{
	char p[PATH_MAX];
	struct ptd_diag d = { "" };
	enum ptd_input_kind k = PTD_INPUT_CAPTURE;

	path_in(p, sizeof(p), name);
	CHECK_EQ_INT(ptd_input_detect(p, &k, &d), err);
	CHECK_EQ_INT(k, PTD_INPUT_NONE);
	CHECK_CONTAINS(d.msg, p);
	CHECK_CONTAINS(d.msg, msg);
}

static void test_detect(void)
{
	char p[PATH_MAX];
	struct ptd_diag d = { "" };
	enum ptd_input_kind k;

	path_in(p, sizeof(p), "cap");
	REQUIRE(mkdir(p, 0700) == 0);
	put("cap/capture.json", "{}");
	expect_kind("cap", PTD_INPUT_CAPTURE);

	/* a bundle holds a capture too: the manifest decides */
	path_in(p, sizeof(p), "bun");
	REQUIRE(mkdir(p, 0700) == 0);
	put("bun/ptd-bundle.json", "{}");
	put("bun/capture.json", "{}");
	expect_kind("bun", PTD_INPUT_BUNDLE);

	path_in(p, sizeof(p), "lldb");
	REQUIRE(mkdir(p, 0700) == 0);
	put("lldb/trace.json", "{\"type\":\"intel-pt\"}");
	expect_kind("lldb", PTD_INPUT_LLDB);
	expect_kind("lldb/trace.json", PTD_INPUT_LLDB);
	put("spaced.json", "\n  {\n \"processes\": [], \"type\": \"intel-pt\"}");
	expect_kind("spaced.json", PTD_INPUT_LLDB);

	/* names do not matter, content does */
	put("trace.data", "PERFILE2\x68");
	expect_kind("trace.data", PTD_INPUT_PERFDATA);
	put("perf.data", "not perf at all");
	expect_refused("perf.data", -PTD_EFORMAT, "not a trace ptd reads");
	put("other.json", "{\"type\":\"amd-ibs\"}");
	expect_refused("other.json", -PTD_EFORMAT, "not a trace ptd reads");
	put("empty", "");
	expect_refused("empty", -PTD_EFORMAT, "not a trace ptd reads");

	path_in(p, sizeof(p), "emptydir");
	REQUIRE(mkdir(p, 0700) == 0);
	expect_refused("emptydir", -PTD_EFORMAT, "no ptd-bundle.json");
	expect_refused("nonexistent", -ENOENT, "No such file");
	/* a directory named like a manifest is not one */
	path_in(p, sizeof(p), "trick");
	REQUIRE(mkdir(p, 0700) == 0);
	path_in(p, sizeof(p), "trick/capture.json");
	REQUIRE(mkdir(p, 0700) == 0);
	expect_refused("trick", -PTD_EFORMAT, "holds no trace");

	/* a FIFO is taken for a pipe-mode perf.data stream, unread */
	path_in(p, sizeof(p), "fifo");
	REQUIRE(mkfifo(p, 0600) == 0);
	CHECK_EQ_INT(ptd_input_detect(p, &k, &d), 0);
	CHECK_EQ_INT(k, PTD_INPUT_PERFDATA);

	CHECK_EQ_INT(ptd_input_detect("-", &k, &d), 0);
	CHECK_EQ_INT(k, PTD_INPUT_PERFDATA);
	CHECK_EQ_INT(ptd_input_detect("/dev/null", &k, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "neither a file nor a directory");
	CHECK_EQ_INT(ptd_input_detect(NULL, &k, &d), -EINVAL);

	CHECK_EQ_STR(ptd_input_kind_name(PTD_INPUT_CAPTURE), "swpt-capture");
	CHECK_EQ_STR(ptd_input_kind_name(PTD_INPUT_PERFDATA), "perf.data");
	CHECK_EQ_STR(ptd_input_kind_name(PTD_INPUT_NONE), "unknown");
}

/* What a decode through the interface delivered. */
struct got {
	struct ptd_record *recs;
	size_t n, cap;
	int infos;
	struct ptd_input_info info;
	pid_t done_tid[16];
	uint64_t done_insns[16];
	int done_err[16];
	size_t ndone;
	size_t stop_after;	/* 0: never stop */
};

static int got_info(void *ctx, const struct ptd_input_info *info)
{
	struct got *g = ctx;

	g->infos++;
	g->info = *info;
	CHECK_EQ_INT(g->n, 0);	/* before any record */
	return 0;
}

static int got_record(void *ctx, const struct ptd_record *r)
{
	struct got *g = ctx;

	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 4096;
		struct ptd_record *p = realloc(g->recs, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		g->recs = p;
		g->cap = cap;
	}
	g->recs[g->n++] = *r;
	/* module names point into the decoder's cache, which lives until
	 * the decode returns: compare by value below only up to there */
	if (g->stop_after && g->n == g->stop_after)
		return 42;
	return 0;
}

static void got_done(void *ctx, pid_t tid, const struct ptd_decode_stats *st,
		     int err, const struct ptd_diag *diag)
{
	struct got *g = ctx;

	(void)diag;
	if (g->ndone < 16) {
		g->done_tid[g->ndone] = tid;
		g->done_insns[g->ndone] = st->insns;
		g->done_err[g->ndone] = err;
	}
	g->ndone++;
}

/* The records of every thread through ptd_capture_decode_thread, for
 * comparison. */
static int ref_record(void *ctx, const struct ptd_record *r)
{
	struct got *g = ctx;

	return got_record(g, r);
}

/* A capture of test program @name (with @arg, or none) into @dir,
 * loaded into @c. */
static bool trace_prog(const char *dir, const char *name, const char *arg,
		       struct ptd_capture *c)
{
	char prog[PATH_MAX];
	char *argv[3] = { prog, (char *)arg, NULL };
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag d = { "" };

	(void)snprintf(prog, sizeof(prog), "%s/%s", progs_dir, name);
	memset(&so, 0, sizeof(so));
	so.outdir = dir;
	so.quiet_target = true;
	REQUIRE_OR_FALSE(ptd_swpt_run(argv, &so, &res, &d) == 0);
	REQUIRE_OR_FALSE(ptd_capture_load(dir, c, &d) == 0);
	return true;
}

/* A capture of prog-threads (the main thread and two more). */
static bool trace_threads(const char *dir, struct ptd_capture *c)
{
	REQUIRE_OR_FALSE(trace_prog(dir, "prog-threads", NULL, c));
	REQUIRE_OR_FALSE(c->nthreads == 3);
	return true;
}

/* Every record as its JSON line, and each thread's done, for comparing
 * whole decodes (a record's strings live only as long as its decode). */
struct lines {
	char *s;
	size_t n, cap;
	size_t nrec;
	char done[512];
	size_t stop_after;	/* 0: never stop */
	bool hold_first;	/* sleep at the first record */
	struct ptd_decode_stats st;	/* the last thread's */
};

static int lines_record(void *ctx, const struct ptd_record *r)
{
	struct lines *l = ctx;
	char line[4096];
	size_t n = ptd_json_record(line, sizeof(line), r);

	/* (a consumer that falls behind: decoders run on ahead) */
	if (l->hold_first && !l->nrec)
		(void)nanosleep(&(struct timespec){ 0, 300000000 }, NULL);

	if (l->n + n + 1 > l->cap) {
		size_t cap = 2 * (l->n + n + 1) + 65536;
		char *p = realloc(l->s, cap);

		if (!p)
			return -ENOMEM;
		l->s = p;
		l->cap = cap;
	}
	memcpy(l->s + l->n, line, n);
	l->n += n;
	l->s[l->n++] = '\n';
	l->nrec++;
	return l->stop_after && l->nrec == l->stop_after ? 42 : 0;
}

static void lines_done(void *ctx, pid_t tid, const struct ptd_decode_stats *st,
		       int err, const struct ptd_diag *diag)
{
	struct lines *l = ctx;
	size_t n = strlen(l->done);

	l->st = *st;
	/* (parts: threads decoded at once are each decoded serially) */
	(void)snprintf(l->done + n, sizeof(l->done) - n,
		       "%ld:%" PRIu64 ":%" PRIu64 ":%d:%s:%" PRIu64 ";",
		       (long)tid, st->insns, st->errors, err, diag->msg,
		       st->parts);
}

/* A capture's threads decoded at once (--jobs, decode/threadpar.h) give
 * the serial decode's records and thread ends, in the same order; the
 * sink's stop is the serial decode's too. */
static void test_threads_at_once(void)
{
	char dir[PATH_MAX];
	struct ptd_diag d = { "" };
	struct ptd_capture c;
	struct ptd_input_opts o;
	struct lines ser, par;
	struct ptd_input_sink ss = { NULL, lines_record, lines_done, &ser };
	struct ptd_input_sink ps = { NULL, lines_record, lines_done, &par };
	uint64_t bytes[3];
	size_t terr = 99;

	path_in(dir, sizeof(dir), "threads-at-once");
	REQUIRE(trace_threads(dir, &c));
	for (size_t i = 0; i < 3; i++)
		bytes[i] = c.threads[i].pt_bytes;
	memset(&o, 0, sizeof(o));
	o.decode.path = PTD_PATH_INSN;
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT) |
			PTD_REC_BIT(PTD_REC_ERROR) | PTD_REC_BIT(PTD_REC_CALL);
	memset(&ser, 0, sizeof(ser));
	CHECK_EQ_INT(ptd_input_decode(dir, &o, &ss, &terr, &d), 0);
	CHECK_EQ_U64(terr, 0);
	for (unsigned jobs = 2; jobs <= 4; jobs += 2) {
		o.decode.jobs = jobs;
		/* (else this would compare the serial decode with itself) */
		CHECK(ptd_threadpar_fits(&o.decode, bytes, 3));
		memset(&par, 0, sizeof(par));
		terr = 99;
		CHECK_EQ_INT(ptd_input_decode(dir, &o, &ps, &terr, &d), 0);
		CHECK_EQ_U64(terr, 0);
		CHECK_EQ_U64(par.nrec, ser.nrec);
		CHECK(par.n == ser.n && !memcmp(par.s, ser.s, ser.n));
		CHECK_EQ_STR(par.done, ser.done);
		free(par.s);

		/* stopped by the sink: no record and no thread end after */
		memset(&par, 0, sizeof(par));
		par.stop_after = 5000;
		CHECK_EQ_INT(ptd_input_decode(dir, &o, &ps, &terr, &d), 42);
		CHECK_EQ_U64(par.nrec, 5000);
		CHECK(par.n < ser.n && !memcmp(par.s, ser.s, par.n));
		CHECK_EQ_STR(par.done, "");
		free(par.s);
	}
	CHECK(ser.nrec > 100000);
	free(ser.s);
	ptd_capture_fini(&c);
}

/* One thread's trace cut into parts (decode/parallel.h) whose records
 * are far more than the decode may hold ahead of its consumer: a tight
 * loop gives some 20 records a trace byte, and 16 KiB parts some 300k
 * records each, where 2 jobs may hold PTD_DECODE_HELD(2) (131k).  With a
 * consumer that falls behind at once, the workers wait at that bound, and
 * the records are still the serial decode's. */
static void test_parts_bounded(void)
{
	char dir[PATH_MAX];
	struct ptd_diag d = { "" };
	struct ptd_capture c;
	struct ptd_input_opts o;
	struct lines ser, par;
	struct ptd_input_sink ss = { NULL, lines_record, lines_done, &ser };
	struct ptd_input_sink ps = { NULL, lines_record, lines_done, &par };
	size_t terr = 99;

	path_in(dir, sizeof(dir), "loop");
	REQUIRE(trace_prog(dir, "prog-loop", "1", &c));
	REQUIRE(c.nthreads == 1);
	ptd_capture_fini(&c);
	memset(&o, 0, sizeof(o));
	o.decode.path = PTD_PATH_INSN;
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT) |
			PTD_REC_BIT(PTD_REC_ERROR);
	memset(&ser, 0, sizeof(ser));
	CHECK_EQ_INT(ptd_input_decode(dir, &o, &ss, &terr, &d), 0);
	CHECK_EQ_U64(terr, 0);
	CHECK(ser.nrec > 3 * PTD_DECODE_HELD(2));

	o.decode.jobs = 2;
	o.decode.part_bytes = 16384;
	memset(&par, 0, sizeof(par));
	par.hold_first = true;
	CHECK_EQ_INT(ptd_input_decode(dir, &o, &ps, &terr, &d), 0);
	CHECK_EQ_U64(terr, 0);
	CHECK_EQ_U64(par.nrec, ser.nrec);
	CHECK(par.n == ser.n && !memcmp(par.s, ser.s, ser.n));
	fprintf(stderr, "prog-loop 1: %zu records, %" PRIu64 " parts, "
			"%" PRIu64 " serial, at most %" PRIu64 " held, %" PRIu64
			" held in all\n",
		par.nrec, par.st.parts, par.st.serial_parts, par.st.held_max,
		par.st.held);
	CHECK(par.st.parts >= 3);
	CHECK_EQ_U64(par.st.serial_parts, 0);
	CHECK(par.st.held_max > 0);
	CHECK(par.st.held_max <= PTD_DECODE_HELD(2));
	/* The part being handed on streams: its worker hands its records
	 * to the consumer as it makes them (the turn), held only while
	 * another part has it.  The first part, which has it from the
	 * start, holds none (its first records, the seam's head, wait in
	 * the chunk it fills, not queued); it is about a part's worth of
	 * the records. */
	CHECK(par.st.held > 0);
	CHECK(par.st.held < par.nrec - par.nrec / par.st.parts / 2);
	free(par.s);
	free(ser.s);
}

static void test_capture_decode(void)
{
	char dir[PATH_MAX];
	struct ptd_diag d = { "" };
	struct ptd_capture c;
	struct ptd_input_opts o;
	struct got g, ref;
	struct ptd_input_sink sink = { got_info, got_record, got_done, &g };
	size_t i, terr = 99;

	path_in(dir, sizeof(dir), "threads");
	REQUIRE(trace_threads(dir, &c));

	memset(&o, 0, sizeof(o));
	o.decode.path = PTD_PATH_INSN;
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT);
	memset(&g, 0, sizeof(g));
	CHECK_EQ_INT(ptd_input_decode(dir, &o, &sink, &terr, &d), 0);
	CHECK_EQ_U64(terr, 0);
	CHECK_EQ_INT(g.infos, 1);
	CHECK_EQ_INT(g.info.kind, PTD_INPUT_CAPTURE);
	CHECK_EQ_STR(g.info.source, "swpt-capture");
	CHECK_EQ_INT(g.info.pid, c.pid);
	CHECK_EQ_U64(g.info.nthreads, c.nthreads);
	CHECK_EQ_U64(g.ndone, c.nthreads);

	/* the same records as decoding each thread directly, in order */
	memset(&ref, 0, sizeof(ref));
	for (i = 0; i < c.nthreads; i++) {
		struct ptd_decode_opts dopts = o.decode;
		struct ptd_decode_stats st;
		size_t before = ref.n;

		dopts.cpu = c.cpu;
		memset(&st, 0, sizeof(st));
		CHECK_EQ_INT(ptd_capture_decode_thread(&c, i, &dopts, NULL,
							NULL, NULL, ref_record,
							&ref, &st, &d),
			     0);
		if (i < 16) {
			CHECK_EQ_INT(g.done_tid[i], c.threads[i].tid);
			CHECK_EQ_U64(g.done_insns[i], st.insns);
			CHECK_EQ_INT(g.done_err[i], 0);
		}
		CHECK(ref.n > before);
	}
	CHECK_EQ_U64(g.n, ref.n);
	for (i = 0; i < g.n && i < ref.n; i++) {
		/* module strings belong to different caches: compare all
		 * but the pointers (ips, tids, flags, offsets) */
		CHECK_EQ_INT(g.recs[i].type, ref.recs[i].type);
		CHECK_EQ_INT(g.recs[i].tid, ref.recs[i].tid);
		if (g.recs[i].type == PTD_REC_INSN &&
		    g.recs[i].u.insn.ip != ref.recs[i].u.insn.ip) {
			CHECK_FAIL_("record %zu: ip 0x%llx vs 0x%llx", i,
				    (unsigned long long)g.recs[i].u.insn.ip,
				    (unsigned long long)ref.recs[i].u.insn.ip);
			break;
		}
	}

	/* one thread only */
	o.have_tid = true;
	o.tid = c.threads[1].tid;
	g.n = 0;
	g.ndone = 0;
	g.infos = 0;
	CHECK_EQ_INT(ptd_input_decode(dir, &o, &sink, &terr, &d), 0);
	CHECK_EQ_U64(g.ndone, 1);
	CHECK_EQ_U64(g.info.nthreads, 1);
	CHECK_EQ_INT(g.done_tid[0], c.threads[1].tid);
	for (i = 0; i < g.n; i++)
		if (g.recs[i].tid != c.threads[1].tid) {
			CHECK_FAIL_("record %zu of tid %ld", i,
				    (long)g.recs[i].tid);
			break;
		}
	/* a thread it does not have */
	o.tid = 1;
	g.n = 0;
	CHECK_EQ_INT(ptd_input_decode(dir, &o, &sink, &terr, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "has no thread 1");
	CHECK_EQ_U64(g.n, 0);

	/* the sink stops the decode: its value comes back */
	o.have_tid = false;
	g.n = 0;
	g.stop_after = 10;
	CHECK_EQ_INT(ptd_input_decode(dir, &o, &sink, &terr, &d), 42);
	CHECK_EQ_U64(g.n, 10);

	/* a damaged capture is refused by name */
	{
		char cj[PATH_MAX + 32];

		(void)snprintf(cj, sizeof(cj), "%s/capture.json", dir);
		REQUIRE(ptd_file_write_atomic(cj, "{\"format\":1}", 12) == 0);
		g.n = 0;
		g.stop_after = 0;
		CHECK(ptd_input_decode(dir, &o, &sink, &terr, &d) < 0);
		CHECK_CONTAINS(d.msg, "capture.json");
		CHECK_EQ_U64(g.n, 0);
	}
	CHECK_EQ_INT(ptd_input_decode(NULL, &o, &sink, &terr, &d), -EINVAL);
	free(g.recs);
	free(ref.recs);
	ptd_capture_fini(&c);
}

int main(void)
{
	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	if (!mkdtemp(workdir)) {
		fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(test_detect);
	RUN(test_capture_decode);
	RUN(test_threads_at_once);
	RUN(test_parts_bounded);
	(void)ptd_rm_rf(workdir);
	return check_done();
}
