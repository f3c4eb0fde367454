/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU sessions (opts.per_cpu): the software source writes per-CPU
 * buffers (two virtual CPUs; threads switch in and out, and migrate
 * between the CPUs), the session reads them through decode/cpufeed.h
 * (time-ordered merge, split into per-thread streams), and every thread's
 * live records must equal, field for field, the whole-stream decode of
 * the capture written beside them, and their IPs the ground truth.  The
 * intel_pt per-CPU path is followed up to the kernel's refusal of a fake
 * PMU.
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
#include "perf/time.h"
#include "swpt/capture.h"
#include "swpt/livesink.h"
#include "swpt/capdecode.h"

static const char *progs_dir;
static char workdir[128];

#include "unit/session-collect.h"


static struct ptd_config cfg;

/* Attach per-CPU to a prog-attach running @secs; detach once records flow
 * (@detach) or wait for its exit; compare with the capture. */
static void run_percpu(const char *name, bool detach)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_session_stats st;
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	struct collect c;
	struct target t;
	char dir[512], out[128];
	int r;

	collect_sink(&c, &sink);
	snprintf(dir, sizeof(dir), "%s/%s", workdir, name);
	REQUIRE(target_start(progs_dir, 3600, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.capture_dir = dir;
	o.tsc = true;
	o.per_cpu = true;
	r = ptd_session_start(&o, &sink, &s, &diag);
	if (r < 0)
		CHECK_FAIL_("start: %s (%s)", diag.msg, ptd_strerror(r));
	REQUIRE(r == 0);
	ptd_session_get_stats(s, &st);
	CHECK(st.per_cpu);
	CHECK_EQ_INT(st.ncpus, PTD_SESSION_SW_CPUS);
	/* records flow while it runs: the merge does not wait for the end */
	{
		for (int i = 0; i < 150; i++) {
			uint64_t n;

			(void)pthread_mutex_lock(&c.lock);
			n = c.total;
			(void)pthread_mutex_unlock(&c.lock);
			if (n > 20000)
				break;
			(void)usleep(20000);
		}
		ptd_session_get_stats(s, &st);
		CHECK(st.records > 0);
		CHECK(st.aux_written > 0);
	}
	/* then detached, or told to end: not ended by its clock, which on a
	 * loaded machine could run out before the attach (refused) or
	 * before the detach (an exit instead) */
	if (detach)
		ptd_session_stop(s, PTD_END_DETACHED);
	else
		CHECK_EQ_INT(target_tell(t.pid), 0);
	wait_end(&c);
	CHECK_EQ_INT(c.end.reason, detach ? PTD_END_DETACHED : PTD_END_EXITED);
	if (c.end.reason == PTD_END_ERROR)
		fprintf(stderr, "  error: %s\n", c.end.message);
	ptd_session_get_stats(s, &st);
	CHECK(st.ended);
	CHECK(st.threads >= 3);
	CHECK_EQ_U64(st.lost_bytes, 0);
	/* short-lived threads come and go every ~50 ms: some ran long
	 * enough to move to the other CPU */
	CHECK(st.migrated > 0);
	session_timed = 0;
	fprintf(stderr, "  %llu records, %llu insns, %u threads (%u "
		"migrated), %llu bytes\n", (unsigned long long)st.records,
		(unsigned long long)st.insns, st.threads, st.migrated,
		(unsigned long long)st.trace_bytes);
	compare(&c, dir);
	/* the per-CPU buffers' clock reaches the streams, as the per-thread
	 * feed's does: records with a TSC carry perf time */
	{
		struct ptd_perf_clock clk;

		if (ptd_perf_clock_calibrate(&clk, NULL) == 0)
			CHECK(session_timed > 0);
		else
			fprintf(stderr, "  (no TSC clock here: no times)\n");
	}
	ptd_session_free(s);
	if (detach) {
		CHECK_EQ_INT(target_tell(t.pid), 0);
		target_finish(&t);
	} else {
		target_output(&t, out, sizeof(out));
		CHECK(strncmp(out, "ok ", 3) == 0);
	}
	collect_free(&c);
}

static void test_percpu_detach(void)
{
	run_percpu("detach", true);
}

static void test_percpu_exit(void)
{
	run_percpu("exit", false);
}

/* Per-CPU buffers are for full mode only. */
static void test_percpu_snapshot_refused(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink = { on_record, on_ended, NULL, NULL };
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;

	o.pid = getpid();
	o.config = &cfg;
	o.per_cpu = true;
	o.mode = PTD_MODE_SNAPSHOT;
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -EINVAL);
	CHECK_CONTAINS(diag.msg, "per-CPU");
	CHECK(s == NULL);
}

/* Where the CPU has Intel PT, a per-CPU session opens one intel_pt event
 * per online CPU: here a fake PMU tree (a Skylake's, with a PMU type no
 * kernel has) reaches the kernel, whose refusal names the event and the
 * CPU; the target is never touched. */
static void test_percpu_intel_pt_path(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink = { on_record, on_ended, NULL, NULL };
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
	/* told to end below, not ended by its clock: one that ended before
	 * the start (a loaded machine) would be refused for that instead */
	REQUIRE(target_start(progs_dir, 3600, &t) == 0);
	o.pid = t.pid;
	o.config = &c2;
	o.per_cpu = true;
	r = ptd_session_start(&o, &sink, &s, &diag);
	CHECK(r < 0);
	CHECK_CONTAINS(diag.msg, "PMU type 999999");
	CHECK_CONTAINS(diag.msg, "on cpu #");
	fprintf(stderr, "  %s\n", diag.msg);
	CHECK(s == NULL);
	CHECK(target_tell(t.pid) == 0);
	target_finish(&t);
}

int main(void)
{
	char tmpl[] = "/tmp/ptd-session-percpu-XXXXXX";

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
	RUN(test_percpu_snapshot_refused);
	RUN(test_percpu_intel_pt_path);
	RUN(test_percpu_exit);
	RUN(test_percpu_detach);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	return check_done();
}
