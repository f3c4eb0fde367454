/* SPDX-License-Identifier: MIT */
/*
 * Sessions, end to end through the shared perf-buffer reader: the software
 * source attaches to a running multi-threaded program and writes per-thread
 * perf buffers (header page, data ring, AUX), the decode thread reads them
 * with the reader the hardware path uses, decodes each thread's growing
 * stream, and the sink gets records while the program runs.  The records
 * must equal, field for field, the whole-stream decode of the capture the
 * same trace wrote beside them, and their IPs the ground truth.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "target.h"
#include "unit/reccmp.h"
#include "aspace/iscache.h"
#include "common/fileio.h"
#include "daemon/session.h"
#include "decode/insncache.h"
#include "swpt/capture.h"
#include "swpt/replay.h"

static const char *progs_dir;
static char workdir[128];

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
		if (l->r[i].type == PTD_REC_INSN) {
			l->r[i].u.insn.isid = 0;
			l->r[i].u.insn.json_body = NULL;
			l->r[i].u.insn.json_body_len = 0;
		}
}

/* The live records of every thread against the capture: the whole-stream
 * decode (block path, same options) and the ground truth. */
static void compare(struct collect *c, const char *dir)
{
	struct ptd_diag diag = { "" };
	struct ptd_capture cap;
	struct ptd_iscache *ic = ptd_iscache_new();
	struct ptd_insncache *icache = ptd_insncache_new(1u << 20);
	struct ptd_decode_opts o = { 0 };
	int r;

	REQUIRE(ic && icache);
	r = ptd_capture_load(dir, &cap, &diag);
	if (r < 0) {
		CHECK_FAIL_("loading %s: %s", dir, diag.msg);
		return;
	}
	o.path = PTD_PATH_BLOCK;
	o.want = PTD_REC_ALL & ~PTD_REC_BIT(PTD_REC_BLOCK);
	o.json_bodies = true;
	o.cpu.vendor = pcv_unknown;
	CHECK_EQ_INT(cap.nthreads, c->ntid);
	for (size_t i = 0; i < cap.nthreads; i++) {
		struct reclist whole = { 0 }, *live;
		uint64_t *ips = NULL;
		size_t nips = 0, k = 0;
		char name[64];

		live = list_of(c, cap.threads[i].tid);
		r = ptd_replay_thread(&cap, i, &o, ic, icache, reclist_add,
				      &whole, NULL, &diag);
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
	ptd_capture_free(&cap);
	ptd_insncache_free(icache);
	ptd_iscache_free(ic);
}

static struct ptd_config cfg;

static void test_session_detach(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_session_stats st;
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	struct collect c;
	struct target t;
	char dir[512];
	int r;

	collect_init(&c);
	sink.record = on_record;
	sink.ended = on_ended;
	sink.ctx = &c;
	snprintf(dir, sizeof(dir), "%s/detach", workdir);
	REQUIRE(target_start(progs_dir, 4.0, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.capture_dir = dir;
	o.tsc = true;
	r = ptd_session_start(&o, &sink, &s, &diag);
	if (r < 0)
		CHECK_FAIL_("start: %s (%s)", diag.msg, ptd_strerror(r));
	REQUIRE(r == 0);
	/* records flow while it runs */
	for (int i = 0; i < 100; i++) {
		uint64_t n;

		(void)pthread_mutex_lock(&c.lock);
		n = c.total;
		(void)pthread_mutex_unlock(&c.lock);
		if (n > 5000)
			break;
		(void)usleep(20000);
	}
	ptd_session_get_stats(s, &st);
	CHECK(st.records > 0);
	CHECK(st.threads >= 3);
	CHECK_EQ_INT(st.source, PTD_SOURCE_SOFTWARE);
	ptd_session_stop(s, PTD_END_DETACHED);
	wait_end(&c);
	CHECK_EQ_INT(c.end.reason, PTD_END_DETACHED);
	ptd_session_get_stats(s, &st);
	CHECK(st.ended);
	CHECK_EQ_U64(st.lost_bytes, 0);
	fprintf(stderr, "  %llu records, %llu insns, %u threads, %llu bytes\n",
		(unsigned long long)st.records, (unsigned long long)st.insns,
		st.threads, (unsigned long long)st.trace_bytes);
	compare(&c, dir);
	ptd_session_free(s);
	target_finish(&t);
	collect_free(&c);
}

static void test_session_exit(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	struct collect c;
	struct target t;
	char dir[512], out[128];
	int r;

	collect_init(&c);
	sink.record = on_record;
	sink.ended = on_ended;
	sink.ctx = &c;
	snprintf(dir, sizeof(dir), "%s/exit", workdir);
	REQUIRE(target_start(progs_dir, 0.5, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.capture_dir = dir;
	r = ptd_session_start(&o, &sink, &s, &diag);
	if (r < 0)
		CHECK_FAIL_("start: %s (%s)", diag.msg, ptd_strerror(r));
	REQUIRE(r == 0);
	wait_end(&c);
	CHECK_EQ_INT(c.end.reason, PTD_END_EXITED);
	CHECK_EQ_INT(c.end.exit_code, 0);
	compare(&c, dir);
	ptd_session_free(s);
	target_output(&t, out, sizeof(out));
	CHECK(strncmp(out, "ok ", 3) == 0);
	collect_free(&c);
}

/* A user's session must not follow its process into a set-user-ID
 * program: the session ends at the exec, before the program runs. */
static void test_session_setuid_exec(void)
{
	static const char *const suid[] = { "/bin/su", "/usr/bin/passwd",
					    "/usr/bin/chfn" };
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	struct collect c;
	struct target t;
	const char *prog = NULL;
	char *then[3];
	struct stat st;
	int r, status;

	for (size_t i = 0; i < sizeof(suid) / sizeof(suid[0]); i++)
		if (stat(suid[i], &st) == 0 && (st.st_mode & S_ISUID) &&
		    st.st_uid == 0)
			prog = suid[i];
	if (!prog || getuid() != 0) {
		fprintf(stderr, "  skipped: needs root and a set-user-ID "
			"root program\n");
		return;
	}
	then[0] = (char *)prog;
	then[1] = (char *)"--help";
	then[2] = NULL;
	collect_init(&c);
	sink.record = on_record;
	sink.ended = on_ended;
	sink.ctx = &c;
	REQUIRE(target_start_as(progs_dir, 0.3, 65534, then, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.uid = 65534;
	r = ptd_session_start(&o, &sink, &s, &diag);
	if (r < 0)
		CHECK_FAIL_("start: %s (%s)", diag.msg, ptd_strerror(r));
	REQUIRE(r == 0);
	wait_end(&c);
	CHECK_EQ_INT(c.end.reason, PTD_END_ERROR);
	CHECK_CONTAINS(c.end.message, "set-user-ID");
	fprintf(stderr, "  %s\n", c.end.message);
	ptd_session_free(s);
	/* the program ran on, untraced, and finished */
	{
		char out[4096];

		target_output(&t, out, sizeof(out));
	}
	CHECK(waitpid(t.pid, &status, 0) == t.pid);
	if (!WIFEXITED(status))
		CHECK_FAIL_("%s ended by signal %d", prog,
			    WIFSIGNALED(status) ? WTERMSIG(status) : -1);
	collect_free(&c);
}

/* Where the CPU has Intel PT, sessions use it: here a fake PMU tree (a
 * Skylake's, with a PMU type no kernel has) reaches the kernel, whose
 * refusal names the event; the target is never touched. */
static void test_session_intel_pt_path(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink = { on_record, on_ended, NULL };
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	struct ptd_config c2 = cfg;
	const char *data = getenv("PTD_TEST_DATA");
	char cmd[1024];
	struct target t;
	int r;

	if (!data) {
		fprintf(stderr, "  skipped: PTD_TEST_DATA is not set\n");
		return;
	}
	snprintf(c2.intel_pt_sysfs, sizeof(c2.intel_pt_sysfs), "%s/pmu",
		 workdir);
	snprintf(cmd, sizeof(cmd), "cp -r %s/sysfs/skylake %s && "
		 "echo 999999 > %s/type", data, c2.intel_pt_sysfs,
		 c2.intel_pt_sysfs);
	REQUIRE(system(cmd) == 0);
	REQUIRE(target_start(progs_dir, 0.5, &t) == 0);
	o.pid = t.pid;
	o.config = &c2;
	r = ptd_session_start(&o, &sink, &s, &diag);
	CHECK(r < 0);
	CHECK_CONTAINS(diag.msg, "PMU type 999999");
	fprintf(stderr, "  %s\n", diag.msg);
	CHECK(s == NULL);
	target_finish(&t);
}

static void test_session_refused(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink = { on_record, on_ended, NULL };
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	struct ptd_config c2 = cfg;

	o.config = &cfg;
	o.pid = 999999999;
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -ESRCH);
	CHECK_CONTAINS(diag.msg, "no such process");
	o.pid = getpid();
	o.source = PTD_SOURCE_INTEL_PT;
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -PTD_ENOPT);
	CHECK_CONTAINS(diag.msg, cfg.intel_pt_sysfs);
	o.source = PTD_SOURCE_AUTO;
	c2.software_source = false;
	o.config = &c2;
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -PTD_ENOPT);
	CHECK_CONTAINS(diag.msg, "software_source = no");
	CHECK(s == NULL);
}

int main(void)
{
	char tmpl[] = "/tmp/ptd-session-test-XXXXXX";

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set");
	if (!mkdtemp(tmpl))
		SKIP_ALL("mkdtemp: %s", strerror(errno));
	(void)snprintf(workdir, sizeof(workdir), "%s", tmpl);
	ptd_config_defaults(&cfg);
	cfg.aux_buffer_size = 64u << 10;	/* small rings: they wrap */
	cfg.data_buffer_size = 16u << 10;
	/* no intel_pt here, whatever the machine has */
	strcpy(cfg.intel_pt_sysfs, "/nonexistent/intel_pt");
	RUN(test_session_refused);
	RUN(test_session_intel_pt_path);
	RUN(test_session_detach);
	RUN(test_session_exit);
	RUN(test_session_setuid_exec);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	return check_done();
}
