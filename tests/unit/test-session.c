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
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "target.h"
#include "catching.h"
#include "pidns.h"
#include "unit/reccmp.h"
#include "aspace/iscache.h"
#include "common/fileio.h"
#include "common/pidfd.h"
#include "daemon/session.h"
#include "decode/insncache.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"

static const char *progs_dir;
static char workdir[128];

#include "unit/session-collect.h"

static struct ptd_config cfg;

/* A session on target @pid started with @o and @sink, or NULL: the
 * failure checked and the target killed (else it runs on, its tracer
 * gone, until its time is out). */
static struct ptd_session *start_on(const struct ptd_session_opts *o,
				    const struct ptd_session_sink *sink,
				    pid_t pid)
{
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	int r = ptd_session_start(o, sink, &s, &diag);

	if (r < 0) {
		CHECK_FAIL_("start: %s (%s)", diag.msg, ptd_strerror(r));
		(void)kill(pid, SIGKILL);
	}
	return r < 0 ? NULL : s;
}

static void test_session_detach(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_session_stats st;
	struct ptd_session *s = NULL;
	struct collect c;
	struct target t;
	char dir[512];

	collect_sink(&c, &sink);
	snprintf(dir, sizeof(dir), "%s/detach", workdir);
	/* told to end after the detach: ended by its clock it could exit
	 * before the detach on a loaded machine */
	REQUIRE(target_start(progs_dir, 3600, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.capture_dir = dir;
	o.tsc = true;
	s = start_on(&o, &sink, t.pid);
	REQUIRE(s);
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
	CHECK_EQ_INT(target_tell(t.pid), 0);
	target_finish(&t);
	collect_free(&c);
}

/* A full session of prog-attach to its exit, with @jobs (see
 * test_session_threads_jobs), its records compared with the capture. */
static void exit_run(const char *name, unsigned jobs)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_session_stats st;
	struct ptd_session *s = NULL;
	struct collect c;
	struct target t;
	char dir[512], out[128];

	collect_sink(&c, &sink);
	snprintf(dir, sizeof(dir), "%s/%s", workdir, name);
	/* The target ends when told (SIGUSR1, as its time running out
	 * would), once attached: a 0.5 s run could end before the attach on
	 * a loaded machine (its main thread a zombie: refused).  The signal
	 * goes to its main thread: sent to the process it may land in the
	 * sleeping thread, whose nanosleep then fails with EINTR, which the
	 * target counts as an error (exit 1). */
	REQUIRE(target_start(progs_dir, 300, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.capture_dir = dir;
	o.jobs = jobs;
	s = start_on(&o, &sink, t.pid);
	REQUIRE(s);
	/* a full-mode session takes no snapshot */
	CHECK_EQ_INT(ptd_session_snapshot(s, NULL), -EINVAL);
	/* with jobs: until some rounds had several threads to decode */
	for (int i = 0; jobs > 1 && i < 100; i++) {
		ptd_session_get_stats(s, &st);
		if (st.threads_at_once >= 8)
			break;
		(void)usleep(50000);
	}
	CHECK_EQ_INT(target_tell(t.pid), 0);
	wait_end(&c);
	CHECK_EQ_INT(c.end.reason, PTD_END_EXITED);
	CHECK_EQ_INT(c.end.exit_code, 0);
	ptd_session_get_stats(s, &st);
	fprintf(stderr, "  %llu threads' rounds decoded at once\n",
		(unsigned long long)st.threads_at_once);
	if (jobs > 1)
		CHECK(st.threads_at_once >= 2);
	else
		CHECK_EQ_U64(st.threads_at_once, 0);
	compare_path(&c, dir, jobs > 1 ? PTD_PATH_INSN : PTD_PATH_BLOCK);
	ptd_session_free(s);
	target_output(&t, out, sizeof(out));
	CHECK(strncmp(out, "ok ", 3) == 0);
	collect_free(&c);
}

static void test_session_exit(void)
{
	exit_run("exit", 0);
}

/* A full session with jobs 2: each round, the threads of prog-attach with
 * new trace (computing, sleeping, short-lived ones, main) are decoded at
 * once (decode/threadpar.h), their records reaching the sink from the
 * workers, thread after thread.  Every thread's records are still the
 * whole-stream decode's (the instruction path) and the ground truth, and
 * rounds were decoded at once (threads_at_once: fails if every round went
 * one thread after another). */
static void test_session_threads_jobs(void)
{
	exit_run("threads-jobs", 2);
}

/* Whether a user with no rights of its own can reach @dir: every
 * directory on the way from / searchable by others. */
static bool others_can_run(const char *dir)
{
	char path[PATH_MAX], *p = path;
	struct stat st;

	if (!realpath(dir, path))
		return false;
	for (;;) {
		p = strchr(p + 1, '/');
		if (p)
			*p = '\0';
		if (stat(path, &st) < 0 || !(st.st_mode & S_IXOTH))
			return false;
		if (!p)
			return true;
		*p = '/';
	}
}

/* A user's session must not follow its process into a set-user-ID
 * program: the session ends at the exec, before the program runs. */
static void test_session_setuid_exec(void)
{
	static const char *const suid[] = { "/bin/su", "/usr/bin/passwd",
					    "/usr/bin/chfn" };
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_session *s = NULL;
	struct collect c;
	struct target t;
	const char *prog = NULL;
	char *then[3];
	struct stat st;
	int status;

	for (size_t i = 0; i < sizeof(suid) / sizeof(suid[0]); i++)
		if (stat(suid[i], &st) == 0 && (st.st_mode & S_ISUID) &&
		    st.st_uid == 0)
			prog = suid[i];
	if (!prog || getuid() != 0) {
		fprintf(stderr, "  skipped: needs root and a set-user-ID "
			"root program\n");
		return;
	}
	if (!others_can_run(progs_dir)) {
		fprintf(stderr, "  skipped: uid 65534 cannot reach the test "
			"programs in %s (a directory on the way lacks o+x)\n",
			progs_dir);
		return;
	}
	then[0] = (char *)prog;
	then[1] = (char *)"--help";
	then[2] = NULL;
	collect_sink(&c, &sink);
	/* told to go on to the exec once attached (as test_session_exit's
	 * target): a 0.3 s run could end before the attach */
	REQUIRE(target_start_as(progs_dir, 300, 65534, then, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.uid = 65534;
	s = start_on(&o, &sink, t.pid);
	REQUIRE(s);
	CHECK_EQ_INT(target_tell(t.pid), 0);
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
	r = ptd_session_start(&o, &sink, &s, &diag);
	CHECK(r < 0);
	CHECK_CONTAINS(diag.msg, "PMU type 999999");
	fprintf(stderr, "  %s\n", diag.msg);
	CHECK(s == NULL);
	CHECK(target_tell(t.pid) == 0);
	target_finish(&t);
}

static void test_session_refused(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink = { on_record, on_ended, NULL, NULL };
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

/* ---- snapshot mode ---- */

#define MAX_SNAPS 4
/* (prog-attach keeps starting threads: a snapshot decodes every one that
 * wrote since the last, more than it lists) */
#define SNAP_TIDS 256

struct snapcol {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool in;			/* between the two snapshot calls */
	unsigned nbegun, ndone;
	uint64_t outside;		/* records outside a snapshot */
	uint64_t bad_calls;		/* callbacks out of order */
	struct ptd_snapshot_info info[MAX_SNAPS];
	pid_t tid[MAX_SNAPS][SNAP_TIDS];
	struct reclist rec[MAX_SNAPS][SNAP_TIDS];
	size_t ntid[MAX_SNAPS];
	bool ended;
	struct ptd_session_end end;
};

static struct reclist *snap_list(struct snapcol *c, unsigned k, pid_t tid)
{
	for (size_t i = 0; i < c->ntid[k]; i++)
		if (c->tid[k][i] == tid)
			return &c->rec[k][i];
	if (c->ntid[k] == SNAP_TIDS)
		abort();
	c->tid[k][c->ntid[k]] = tid;
	return &c->rec[k][c->ntid[k]++];
}

static void snap_on_record(void *ctx, const struct ptd_record *rec)
{
	struct snapcol *c = ctx;

	(void)pthread_mutex_lock(&c->lock);
	if (!c->in || c->nbegun > MAX_SNAPS)
		c->outside++;
	else
		(void)reclist_add(snap_list(c, c->nbegun - 1, rec->tid), rec);
	(void)pthread_mutex_unlock(&c->lock);
}

static void snap_on_ended(void *ctx, const struct ptd_session_end *end)
{
	struct snapcol *c = ctx;

	(void)pthread_mutex_lock(&c->lock);
	c->end = *end;
	c->ended = true;
	(void)pthread_cond_broadcast(&c->cond);
	(void)pthread_mutex_unlock(&c->lock);
}

static void snap_on_snapshot(void *ctx, const struct ptd_snapshot_info *in,
			     bool done)
{
	struct snapcol *c = ctx;

	(void)pthread_mutex_lock(&c->lock);
	if (c->in == done) {
		if (!done)
			c->nbegun++;
		else if (c->nbegun <= MAX_SNAPS)
			c->info[c->nbegun - 1] = *in;
		c->in = !done;
		c->ndone += done;
	} else {
		c->bad_calls++;
	}
	(void)pthread_cond_broadcast(&c->cond);
	(void)pthread_mutex_unlock(&c->lock);
}

static void snap_wait(struct snapcol *c, unsigned ndone)
{
	(void)pthread_mutex_lock(&c->lock);
	while (c->ndone < ndone && !c->ended)
		(void)pthread_cond_wait(&c->cond, &c->lock);
	(void)pthread_mutex_unlock(&c->lock);
}

static void snapcol_init(struct snapcol *c)
{
	memset(c, 0, sizeof(*c));
	(void)pthread_mutex_init(&c->lock, NULL);
	(void)pthread_cond_init(&c->cond, NULL);
}

/* Detach @s and wait for its end. */
static void snap_detach(struct snapcol *c, struct ptd_session *s)
{
	ptd_session_stop(s, PTD_END_DETACHED);
	(void)pthread_mutex_lock(&c->lock);
	while (!c->ended)
		(void)pthread_cond_wait(&c->cond, &c->lock);
	(void)pthread_mutex_unlock(&c->lock);
}

/* Where in @truth (@n) the insn IPs of @ips (@m) run, instruction by
 * instruction; the last such place (loops repeat).  Returns the index or
 * -1. */
static long find_run(const uint64_t *truth, size_t n, const uint64_t *ips,
		     size_t m)
{
	if (m == 0 || m > n)
		return -1;
	for (size_t j = n - m + 1; j-- > 0;) {
		size_t k = 0;

		if (truth[j] != ips[0])
			continue;
		while (k < m && truth[j + k] == ips[k])
			k++;
		if (k == m)
			return (long)j;
	}
	return -1;
}

/* The snapshot's part for @tid, or NULL. */
static const struct ptd_snapshot_thread *
snap_thread(const struct ptd_snapshot_info *in, pid_t tid)
{
	for (unsigned i = 0; i < in->nlisted; i++)
		if (in->th[i].tid == tid)
			return &in->th[i];
	return NULL;
}

/* Each snapshot's insn records of each thread are a contiguous run of its
 * ground truth (its start when the snapshot holds the whole trace). */
static void snap_compare(struct snapcol *c, const struct ptd_capture *cap)
{
	struct ptd_diag diag = { "" };

	for (unsigned k = 0; k < c->ndone && k < MAX_SNAPS; k++) {
		for (size_t i = 0; i < c->ntid[k]; i++) {
			struct reclist *l = &c->rec[k][i];
			const struct ptd_snapshot_thread *th =
				snap_thread(&c->info[k], c->tid[k][i]);
			uint64_t *truth = NULL, *ips = malloc(
				(l->n + 1) * sizeof(*ips));
			size_t nt = 0, m = 0, ti;
			long at;
			int r;

			/* (a thread past the PTD_SNAPSHOT_MAX_THREADS listed
			 * is decoded all the same, its window unknown) */
			static const struct ptd_snapshot_thread unlisted;

			REQUIRE(ips);
			if (!th)
				th = &unlisted;
			for (size_t j = 0; j < l->n; j++)
				if (l->r[j].type == PTD_REC_INSN)
					ips[m++] = l->r[j].u.insn.ip;
			for (ti = 0; ti < cap->nthreads; ti++)
				if (cap->threads[ti].tid == c->tid[k][i])
					break;
			if (ti == cap->nthreads) {
				CHECK_FAIL_("snapshot %u: thread %d is not in "
					    "the capture", k + 1,
					    (int)c->tid[k][i]);
				free(ips);
				continue;
			}
			r = ptd_capture_read_truth(cap, ti, &truth, &nt, &diag);
			CHECK_EQ_INT(r, 0);
			if (th != &unlisted && th->bytes == th->end)
				at = m <= nt && !memcmp(truth, ips,
							m * sizeof(*ips))
					     ? 0 : -1;
			else
				at = find_run(truth, nt, ips, m);
			/* a window of at least a PSB period holds a PSB */
			if (th->bytes >= 4096 + 16)
				CHECK(m > 0);
			if (m > 0 && at < 0)
				CHECK_FAIL_("snapshot %u, thread %d: its %zu "
					    "instructions are not a run of "
					    "the %zu of the truth%s", k + 1,
					    (int)c->tid[k][i], m, nt,
					    at == 0 ? "" : " (from its start)");
			/* no more than the thread wrote */
			CHECK(th->end <= cap->threads[ti].pt_bytes);
			fprintf(stderr, "  snapshot %u tid %d: bytes [%llu, "
				"%llu) of %llu, %zu records, %zu insns = "
				"truth[%ld..%ld) of %zu\n", k + 1,
				(int)c->tid[k][i],
				(unsigned long long)(th->end - th->bytes),
				(unsigned long long)th->end,
				(unsigned long long)cap->threads[ti].pt_bytes,
				l->n, m, at, at + (long)m, nt);
			free(truth);
			free(ips);
		}
	}
}

/* A snapshot session with ring @size, its snapshots decoded on @jobs
 * threads (0: the session's). */
static void snapshot_run(size_t size, unsigned jobs)
{
	static struct snapcol c;	/* large */
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink = { snap_on_record, snap_on_ended, &c,
					 snap_on_snapshot };
	struct ptd_session_stats st;
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	struct ptd_capture cap;
	struct target t;
	char dir[512];
	uint64_t seq = 0, parts = 0, serial_parts = 0;

	snapcol_init(&c);
	snprintf(dir, sizeof(dir), "%s/snapshot-%u", workdir, jobs);
	REQUIRE(target_start(progs_dir, 3600, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.capture_dir = dir;
	o.mode = PTD_MODE_SNAPSHOT;
	o.snapshot_size = size;
	o.jobs = jobs;
	s = start_on(&o, &sink, t.pid);
	REQUIRE(s);
	ptd_session_get_stats(s, &st);
	CHECK_EQ_INT(st.mode, PTD_MODE_SNAPSHOT);
	CHECK_EQ_U64(st.snapshot_size, size);
	/* until the rings wrapped (the software source is slow; with jobs,
	 * rings of several parts: as long as that takes) */
	for (int i = 0; i < (jobs ? 600 : 80) && st.aux_written < 6 * size;
	     i++) {
		(void)usleep(100000);
		ptd_session_get_stats(s, &st);
	}
	fprintf(stderr, "  %llu trace bytes written\n",
		(unsigned long long)st.aux_written);
	/* nothing reaches the sink between snapshots */
	(void)pthread_mutex_lock(&c.lock);
	CHECK_EQ_U64(c.outside, 0);
	(void)pthread_mutex_unlock(&c.lock);
	CHECK_EQ_INT(ptd_session_snapshot(s, &seq), 0);
	CHECK_EQ_U64(seq, 1);
	/* one at a time */
	CHECK_EQ_INT(ptd_session_snapshot(s, NULL), -EBUSY);
	snap_wait(&c, 1);
	(void)usleep(1000000);
	CHECK_EQ_INT(ptd_session_snapshot(s, &seq), 0);
	CHECK_EQ_U64(seq, 2);
	snap_wait(&c, 2);
	snap_detach(&c, s);
	CHECK_EQ_INT(c.end.reason, PTD_END_DETACHED);
	CHECK_EQ_INT(ptd_session_snapshot(s, NULL), -ESRCH);
	CHECK_EQ_U64(c.ndone, 2);
	CHECK_EQ_U64(c.bad_calls, 0);
	CHECK_EQ_U64(c.outside, 0);
	ptd_session_get_stats(s, &st);
	CHECK_EQ_U64(st.snapshots, 2);
	for (unsigned k = 0; k < c.ndone && k < MAX_SNAPS; k++) {
		const struct ptd_snapshot_info *in = &c.info[k];

		CHECK_EQ_U64(in->seq, k + 1);
		CHECK_EQ_INT(in->err, 0);
		if (in->err)
			fprintf(stderr, "  %s\n", in->message);
		CHECK(in->nthreads >= 1);
		CHECK(in->bytes > 0);
		CHECK(in->records > 0);
		CHECK(in->insns > 0);
		/* the listed threads' parts, and those of any past them */
		{
			uint64_t listed = 0;

			for (unsigned i = 0; i < in->nlisted; i++)
				listed += in->th[i].parts;
			CHECK(in->nthreads > in->nlisted ? in->parts >= listed
							 : in->parts == listed);
		}
		parts += in->parts;
		serial_parts += in->serial_parts;
		fprintf(stderr, "  snapshot %u: %u threads, %llu bytes, %llu "
			"overwritten, %llu records\n", k + 1, in->nthreads,
			(unsigned long long)in->bytes,
			(unsigned long long)in->overwritten,
			(unsigned long long)in->records);
		for (unsigned i = 0; i < in->nlisted; i++) {
			const struct ptd_snapshot_thread *th = &in->th[i];
			struct reclist *l = snap_list(&c, k, th->tid);

			const struct ptd_snapshot_thread *prev =
				k > 0 ? snap_thread(&c.info[k - 1], th->tid)
				      : NULL;
			uint64_t from = prev ? prev->end : 0;

			/* the newest bytes, as many as the ring holds */
			CHECK_EQ_U64(th->bytes, th->end < size ? th->end : size);
			/* overwritten: written since the previous snapshot
			 * and gone before this one */
			CHECK_EQ_U64(th->overwritten,
				     th->end - from > size
					     ? th->end - from - size : 0);
			/* what was overwritten comes first, as a loss */
			if (th->overwritten) {
				REQUIRE(l->n > 0);
				CHECK_EQ_INT(l->r[0].type, PTD_REC_ERROR);
				CHECK_EQ_STR(l->r[0].u.error.context,
					     "overwritten");
				CHECK_EQ_U64(l->r[0].u.error.skipped,
					     th->overwritten);
			}
			CHECK_EQ_U64(l->n, th->records);
			if (th->parts)
				fprintf(stderr, "  snapshot %u tid %d: %llu "
					"parts, %llu decoded serially\n",
					k + 1, (int)th->tid,
					(unsigned long long)th->parts,
					(unsigned long long)th->serial_parts);
		}
	}
	/* jobs: the snapshots' threads cut into parts, decoded at once (a
	 * part the parallel decoder cannot prove goes to the serial one:
	 * the records are checked against the truth either way) */
	CHECK_EQ_U64(st.parts, parts);
	CHECK_EQ_U64(st.serial_parts, serial_parts);
	if (jobs > 1) {
		CHECK(parts >= 4);
		CHECK(serial_parts < parts);
	} else {
		CHECK_EQ_U64(parts, 0);
	}
	/* the ring had wrapped before the first snapshot (the smallest:
	 * a larger one may not have, on a slow machine) */
	if (size <= 4096)
		CHECK(c.info[0].overwritten > 0);
	CHECK_EQ_U64(st.overwritten_bytes,
		     c.info[0].overwritten + c.info[1].overwritten);
	REQUIRE(ptd_capture_load(dir, &cap, &diag) == 0);
	snap_compare(&c, &cap);
	/* the newest trace: the second snapshot ends after the first, and
	 * closer to the thread's end (the detach, right after it) than to
	 * where the first one ended */
	{
		const struct ptd_snapshot_thread *t1, *t2;
		pid_t busiest = 0;
		uint64_t most = 0;

		for (unsigned i = 0; i < c.info[1].nlisted; i++)
			if (c.info[1].th[i].end > most) {
				most = c.info[1].th[i].end;
				busiest = c.info[1].th[i].tid;
			}
		t1 = snap_thread(&c.info[0], busiest);
		t2 = snap_thread(&c.info[1], busiest);
		REQUIRE(t1 && t2);
		CHECK(t2->end > t1->end);
		for (size_t ti = 0; ti < cap.nthreads; ti++) {
			if (cap.threads[ti].tid != busiest)
				continue;
			fprintf(stderr, "  tid %d: snapshots end at byte %llu, "
				"%llu; detached at %llu\n", (int)busiest,
				(unsigned long long)t1->end,
				(unsigned long long)t2->end,
				(unsigned long long)cap.threads[ti].pt_bytes);
			/* (the target runs on while a snapshot decodes: the
			 * jobs run's larger rings take longer than the 1 s
			 * between the two under a slow build -- TSan) */
			if (!jobs)
				CHECK(cap.threads[ti].pt_bytes - t2->end <
				      t2->end - t1->end);
		}
	}
	ptd_capture_fini(&cap);
	ptd_session_free(s);
	CHECK_EQ_INT(target_tell(t.pid), 0);
	target_finish(&t);
	for (unsigned k = 0; k < MAX_SNAPS; k++)
		for (size_t i = 0; i < c.ntid[k]; i++)
			reclist_free(&c.rec[k][i]);
}

static void test_session_snapshot(void)
{
	/* the smallest ring: it wraps soon */
	snapshot_run((size_t)sysconf(_SC_PAGESIZE), 0);
}

/* options.jobs: each snapshot's threads cut at their PSBs and decoded
 * on 2 threads (decode/parallel.h) give the truth's instructions all the
 * same (snap_compare), from a ring big enough for several parts. */
static void test_session_snapshot_jobs(void)
{
	snapshot_run(16384, 2);
}

/* Bad modes and sizes are refused before anything is touched; full-mode
 * sessions take no snapshot. */
/* The executable mapping of @name in process @pid: [*start, *end); false
 * if there is none. */
static bool text_of(pid_t pid, const char *name, uint64_t *start,
		    uint64_t *end)
{
	char path[64], line[1024];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	while (f && !found && fgets(line, sizeof(line), f)) {
		unsigned long long a, b;
		char perm[8];

		if (sscanf(line, "%llx-%llx %7s", &a, &b, perm) == 3 &&
		    perm[2] == 'x' && strstr(line, name)) {
			*start = a;
			*end = b;
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* Wait until the target printed a line starting with "ok " (its run
 * ended: it execs what it was given next). */
static bool wait_ok_line(struct target *t)
{
	char buf[256];
	size_t len = 0;

	for (int i = 0; i < 1200 && len + 1 < sizeof(buf); i++) {
		struct timeval tv = { 0, 100000 };
		fd_set fds;
		ssize_t n;

		FD_ZERO(&fds);
		FD_SET(t->out, &fds);
		if (select(t->out + 1, &fds, NULL, NULL, &tv) <= 0)
			continue;
		n = read(t->out, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			return false;
		len += (size_t)n;
		buf[len] = 0;
		if (strstr(buf, "ok ") && strchr(buf, '\n'))
			return true;
	}
	return false;
}

/*
 * A snapshot whose window holds trace from before the target's exec: each
 * image change is applied where it came in the trace (feed.h,
 * hooks.positions), not all at the window's start, so the old program's
 * instructions are decoded with its own image.  They were all "no memory
 * mapped" errors before: the new program's image at every PSB of the
 * old one's trace.  The target: prog-attach for 1 s, then exec'ing
 * (through sh) prog-attach again, at another load address; the ring
 * holds its whole
 * trace, so the main thread's instructions up to its first error (the
 * exec: a change is placed early, by up to two drains' worth of trace,
 * never late) are the start of its ground truth, and include the old
 * program's main loop.
 */
static void test_session_snapshot_exec(void)
{
	static struct snapcol c;	/* large */
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink = { snap_on_record, snap_on_ended, &c,
					 snap_on_snapshot };
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	struct ptd_capture cap;
	struct target t;
	char dir[512], prog[512];
	/* (through sh, to close fd 3: the new prog-attach would write
	 * "ready" there, to a pipe whose reader is gone) */
	char *then[] = { (char *)"/bin/sh", (char *)"-c",
			 (char *)"exec \"$0\" 3600 3>&-", prog, NULL };
	uint64_t old_start = 0, old_end = 0, new_start = 0, new_end = 0;
	uint64_t *truth = NULL, old_insns = 0;
	size_t nt = 0, m = 0, ti;
	struct reclist *l;

	snapcol_init(&c);
	snprintf(dir, sizeof(dir), "%s/snapshot-exec", workdir);
	snprintf(prog, sizeof(prog), "%s/prog-attach", progs_dir);
	REQUIRE(target_start_as(progs_dir, 1, (uid_t)-1, then, &t) == 0);
	REQUIRE(text_of(t.pid, "prog-attach", &old_start, &old_end));
	o.pid = t.pid;
	o.config = &cfg;
	o.capture_dir = dir;
	o.mode = PTD_MODE_SNAPSHOT;
	o.snapshot_size = 16u << 20;	/* the whole trace */
	s = start_on(&o, &sink, t.pid);
	REQUIRE(s);
	REQUIRE(wait_ok_line(&t));
	/* the new program runs (its trace after the old one's) */
	for (int i = 0; i < 200 && !text_of(t.pid, "prog-attach", &new_start,
					     &new_end); i++)
		(void)usleep(50000);
	for (int i = 0; i < 200 && new_start == old_start; i++) {
		(void)usleep(50000);
		(void)text_of(t.pid, "prog-attach", &new_start, &new_end);
	}
	(void)usleep(300000);
	CHECK_EQ_INT(ptd_session_snapshot(s, NULL), 0);
	snap_wait(&c, 1);
	snap_detach(&c, s);
	CHECK_EQ_U64(c.ndone, 1);
	REQUIRE(ptd_capture_load(dir, &cap, &diag) == 0);
	for (ti = 0; ti < cap.nthreads && cap.threads[ti].tid != t.pid; ti++)
		;
	REQUIRE(ti < cap.nthreads);
	REQUIRE(ptd_capture_read_truth(&cap, ti, &truth, &nt, &diag) == 0);
	l = snap_list(&c, 0, t.pid);
	{
		const struct ptd_snapshot_thread *th =
			snap_thread(&c.info[0], t.pid);

		REQUIRE(th);
		/* the ring held the main thread's whole trace */
		CHECK_EQ_U64(th->bytes, th->end);
	}
	/* its instructions up to the first error: the truth's start */
	for (size_t j = 0; j < l->n && l->r[j].type != PTD_REC_ERROR; j++) {
		uint64_t ip;

		if (l->r[j].type != PTD_REC_INSN)
			continue;
		ip = l->r[j].u.insn.ip;
		if (m >= nt || truth[m] != ip) {
			CHECK_FAIL_("insn %zu is %#llx, truth %#llx", m,
				    (unsigned long long)ip,
				    m < nt ? (unsigned long long)truth[m]
					   : 0ull);
			break;
		}
		m++;
		old_insns += ip >= old_start && ip < old_end;
	}
	fprintf(stderr, "  old text [%#llx, %#llx), new [%#llx, %#llx); %zu "
		"insns of %zu before the first error, %llu in the old text\n",
		(unsigned long long)old_start, (unsigned long long)old_end,
		(unsigned long long)new_start, (unsigned long long)new_end, m,
		nt, (unsigned long long)old_insns);
	if (new_start == old_start)
		fprintf(stderr, "  (the new program loaded where the old one "
				"was: address randomisation off?)\n");
	/* the old program's main loop: collatz(27) alone is thousands */
	CHECK(old_insns > 1000);
	free(truth);
	ptd_capture_fini(&cap);
	ptd_session_free(s);
	/* the new program, let go, handles the signal once it has got that
	 * far (before, the signal kills it) */
	CHECK(wait_catching(t.pid, SIGUSR1, 60000));
	CHECK_EQ_INT(target_tell(t.pid), 0);
	target_finish(&t);
	for (size_t i = 0; i < c.ntid[0]; i++)
		reclist_free(&c.rec[0][i]);
}

static void test_session_snapshot_refused(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink = { on_record, on_ended, NULL, NULL };
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;

	CHECK_EQ_STR(ptd_session_mode_name(PTD_MODE_FULL), "full");
	CHECK_EQ_STR(ptd_session_mode_name(PTD_MODE_SNAPSHOT), "snapshot");
	CHECK_EQ_INT(ptd_session_mode_parse("snapshot"), PTD_MODE_SNAPSHOT);
	CHECK_EQ_INT(ptd_session_mode_parse("full"), PTD_MODE_FULL);
	CHECK_EQ_INT(ptd_session_mode_parse("Full"), -PTD_EFORMAT);
	CHECK_EQ_INT(ptd_session_mode_parse(NULL), -PTD_EFORMAT);
	CHECK_EQ_INT(ptd_session_snapshot(NULL, NULL), -EINVAL);
	o.config = &cfg;
	o.pid = getpid();
	o.mode = PTD_MODE_SNAPSHOT;
	o.snapshot_size = 3000;
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -EINVAL);
	CHECK_CONTAINS(diag.msg, "snapshot_size 3000");
	o.snapshot_size = 2 * (size_t)PTD_SESSION_SNAPSHOT_MAX;
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -EINVAL);
	CHECK_CONTAINS(diag.msg, "is not a power of two");
	o.mode = PTD_MODE_FULL;
	o.snapshot_size = 65536;
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -EINVAL);
	CHECK_CONTAINS(diag.msg, "snapshot mode only");
	/* a full session's jobs: its threads at once, not a merged
	 * per-CPU trace nor one table of counts */
	o.snapshot_size = 0;
	o.jobs = 2;
	o.per_cpu = true;
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -EINVAL);
	CHECK_CONTAINS(diag.msg, "jobs is not for per-CPU buffers");
	o.per_cpu = false;
	o.counters = (struct ptd_counters *)&o;	/* (never used) */
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -EINVAL);
	CHECK_CONTAINS(diag.msg, "jobs is not for a session that counts");
	o.counters = NULL;
	o.jobs = PTD_DECODE_MAX_JOBS + 1;
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -EINVAL);
	CHECK_CONTAINS(diag.msg, "is more than");
	o.jobs = 0;
	o.mode = (enum ptd_session_mode)7;
	CHECK_EQ_INT(ptd_session_start(&o, &sink, &s, &diag), -EINVAL);
	CHECK_CONTAINS(diag.msg, "unknown session mode");
	CHECK(s == NULL);
}

/* ---- the attach: beside its caller, cancellable, pinned ---- */

/* Wait until every thread of @pid is traced: the start has seized them
 * all.  (The bound only keeps a broken start from hanging the test.) */
static bool wait_all_seized(pid_t pid)
{
	for (int i = 0; i < 6000; i++) {
		int total = 0, n = target_threads_traced(pid, false, &total);

		if (n > 0 && n == total)
			return true;
		(void)usleep(10000);
	}
	return false;
}

/* Wait until the start is decided; ptd_session_started's answer. */
static int wait_decided(struct ptd_session *s, struct ptd_diag *diag)
{
	for (int i = 0; i < 12000; i++) {
		int r = ptd_session_started(s, diag);

		if (r)
			return r;
		(void)usleep(10000);
	}
	return 0;
}

/* ptd_session_begin returns at once; the attach finishes only when every
 * thread of the target has stopped, which a thread in vfork() does only
 * once its child has exited (tests/progs/vfork.c): until the test lets
 * it, the start is undecided, then it traces as any session. */
static void test_session_attach_held(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_session_stats st;
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	struct collect c;
	struct target t;
	char out[128];
	int go = -1, r;

	collect_sink(&c, &sink);
	REQUIRE(target_spawn(progs_dir, "prog-vfork", 0.2, (uid_t)-1, NULL,
			     &go, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.source = PTD_SOURCE_SOFTWARE;
	r = ptd_session_begin(&o, &sink, &s, &diag);
	if (r < 0)
		CHECK_FAIL_("begin: %s (%s)", diag.msg, ptd_strerror(r));
	REQUIRE(r == 0);
	CHECK(wait_all_seized(t.pid));
	/* the main thread cannot stop before its vfork child exits */
	CHECK_EQ_INT(ptd_session_started(s, NULL), 0);
	ptd_session_get_stats(s, &st);
	CHECK_EQ_INT(st.source, PTD_SOURCE_SOFTWARE);
	CHECK_EQ_U64(st.records, 0);
	CHECK(write(go, "\n", 1) == 1);
	(void)close(go);
	r = wait_decided(s, &diag);
	if (r < 0)
		CHECK_FAIL_("start: %s (%s)", diag.msg, ptd_strerror(r));
	CHECK_EQ_INT(r, 1);
	wait_end(&c);
	CHECK_EQ_INT(c.end.reason, PTD_END_EXITED);
	CHECK_EQ_INT(c.end.exit_code, 0);
	CHECK(c.total > 0);
	ptd_session_free(s);
	/* the session's tracer reaped it (the test is its parent too): its
	 * exit code is the end's */
	target_output(&t, out, sizeof(out));
	CHECK(strncmp(out, "ok ", 3) == 0);
	collect_free(&c);
}

/* A stop asked while the attach waits for a thread that cannot stop
 * cancels it: the start fails with -ECANCELED, and by the time it says
 * so every thread is let go -- the stopped ones at once, the one in
 * vfork() as the session's source thread exits -- and the sink is never
 * called.  The target runs on unharmed. */
static void test_session_attach_cancel(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	struct collect c;
	struct target t;
	int go = -1, r;

	collect_sink(&c, &sink);
	REQUIRE(target_spawn(progs_dir, "prog-vfork", 0.2, (uid_t)-1, NULL,
			     &go, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.source = PTD_SOURCE_SOFTWARE;
	REQUIRE(ptd_session_begin(&o, &sink, &s, &diag) == 0);
	CHECK(wait_all_seized(t.pid));
	CHECK_EQ_INT(ptd_session_started(s, NULL), 0);
	ptd_session_stop(s, PTD_END_DETACHED);
	r = wait_decided(s, &diag);
	CHECK_EQ_INT(r, -ECANCELED);
	CHECK_CONTAINS(diag.msg, "cancelled");
	CHECK_EQ_INT(target_traced_threads(t.pid), 0);
	ptd_session_free(s);
	CHECK(!c.ended);
	CHECK_EQ_U64(c.total, 0);
	CHECK(write(go, "\n", 1) == 1);
	(void)close(go);
	target_finish(&t);
	collect_free(&c);
}

/* In a pid namespace of its own: process A is pinned by a pidfd, exits
 * and is reaped, and B is given its pid.  An attach to that pid with A's
 * pidfd is refused (-ESRCH, "reused") once B is seized, and B is let go
 * untouched; the same attach without the pidfd traces B -- the pidfd
 * check is what told them apart. */
static int pid_reused_in_ns(void *arg)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_diag diag = { "" };
	struct ptd_session *s = NULL;
	unsigned before = check_failures;
	struct collect c;
	pid_t a, b;
	int pidfd = -1, r;

	(void)arg;
	collect_sink(&c, &sink);
	a = pidns_sleeper();
	if (a <= 0 || ptd_pidfd_open(a, &pidfd) < 0) {
		CHECK_FAIL_("cannot start and pin a process: %s",
			    strerror(errno));
		return 1;
	}
	(void)kill(a, SIGKILL);
	(void)waitpid(a, NULL, 0);
	CHECK_EQ_INT(pidns_next_pid(a), 0);
	b = pidns_sleeper();
	if (b != a) {
		CHECK_FAIL_("pid %d was not reused (got %d)", (int)a, (int)b);
		(void)kill(b, SIGKILL);
		return 1;
	}
	o.pid = a;
	o.config = &cfg;
	o.source = PTD_SOURCE_SOFTWARE;
	o.pidfd = pidfd;
	r = ptd_session_start(&o, &sink, &s, &diag);
	CHECK_EQ_INT(r, -ESRCH);
	CHECK_CONTAINS(diag.msg, "reused");
	fprintf(stderr, "  refused: %s\n", diag.msg);
	CHECK_EQ_INT(target_traced_threads(b), 0);
	CHECK_EQ_INT(kill(b, 0), 0);
	/* without the pin, the same pid is B's to trace */
	o.pidfd = 0;
	r = ptd_session_start(&o, &sink, &s, &diag);
	if (r < 0)
		CHECK_FAIL_("start without the pidfd: %s", diag.msg);
	if (r == 0) {
		ptd_session_stop(s, PTD_END_DETACHED);
		wait_end(&c);
		CHECK_EQ_INT(c.end.reason, PTD_END_DETACHED);
		ptd_session_free(s);
	}
	CHECK_EQ_INT(target_traced_threads(b), 0);
	(void)kill(b, SIGKILL);
	(void)waitpid(b, NULL, 0);
	(void)close(pidfd);
	collect_free(&c);
	return (int)(check_failures - before);
}

static void test_session_pid_reused(void)
{
	char why[256];
	int r = pidns_run(pid_reused_in_ns, NULL, why, sizeof(why));

	if (r < 0) {
		fprintf(stderr, "  skipped: %s\n", why);
		return;
	}
	CHECK_EQ_INT(r, 0);
}

/* Many attaches to a process creating threads as fast as it can
 * (tests/progs/churn.c): a thread born during the attach is seized once,
 * by the kernel through its creator or by the scan, and every attach
 * succeeds; each detach lets every thread go. */
static void test_session_attach_churn(void)
{
	struct ptd_session_opts o = { 0 };
	struct ptd_session_sink sink;
	struct ptd_session_stats st;
	struct ptd_session *s = NULL;
	struct collect c;
	struct target t;
	unsigned ok = 0, threads = 0;
	int i, r;

	REQUIRE(target_spawn(progs_dir, "prog-churn", 3600, (uid_t)-1, NULL,
			     NULL, &t) == 0);
	o.pid = t.pid;
	o.config = &cfg;
	o.source = PTD_SOURCE_SOFTWARE;
	for (i = 0; i < 200; i++) {
		struct ptd_diag diag = { "" };

		collect_sink(&c, &sink);
		r = ptd_session_start(&o, &sink, &s, &diag);
		if (r < 0) {
			CHECK_FAIL_("attach %d of 200: %s", i + 1, diag.msg);
			collect_free(&c);
			continue;
		}
		ok++;
		ptd_session_stop(s, PTD_END_DETACHED);
		wait_end(&c);
		CHECK_EQ_INT(c.end.reason, PTD_END_DETACHED);
		ptd_session_get_stats(s, &st);
		threads += st.threads;
		ptd_session_free(s);
		collect_free(&c);
		CHECK_EQ_INT(target_traced_threads(t.pid), 0);
	}
	fprintf(stderr, "  %u of 200 attaches, %u threads seized in all\n",
		ok, threads);
	(void)kill(t.pid, SIGUSR1);
	target_finish(&t);
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
	RUN(test_session_threads_jobs);
	RUN(test_session_snapshot_refused);
	RUN(test_session_snapshot);
	RUN(test_session_snapshot_jobs);
	RUN(test_session_snapshot_exec);
	RUN(test_session_setuid_exec);
	RUN(test_session_attach_held);
	RUN(test_session_attach_cancel);
	RUN(test_session_pid_reused);
	RUN(test_session_attach_churn);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	return check_done();
}
