/* SPDX-License-Identifier: MIT */
/*
 * A thread id the kernel gives twice inside one recording.  Ids are reused
 * once freed (pid_max is 32768 on many machines), so a long recording of a
 * program that starts threads meets this.  The software source once
 * failed the whole recording (its second "pt-TID.bin" could not be
 * created), and a capture could not list a tid twice.
 *
 * prog-tidreuse makes the kernel reuse an id on cue: it runs in a PID
 * namespace of the test's own (no other process takes ids there) and sets
 * ns_last_pid once its first thread is gone.  The second thread rewrites
 * code the first one ran, early in its own stream; the capture must keep
 * each thread's image changes to that thread (end_seq), or the first
 * thread's calls decode from the second's bytes and differ from the ground
 * truth.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "input/input.h"
#include "perfdata/write.h"
#include "swpt/capdecode.h"
#include "swpt/capture.h"
#include "swpt/tracer.h"

static char workdir[256];

/* In a new PID and mount namespace, as its init with /proc of its own:
 * trace @prog into @dir.  Exit status: 0 traced and the target exited 0;
 * 10 + its code otherwise; 20 tracing failed; 77 no namespace here. */
static void traced_in_namespace(const char *prog, const char *dir)
{
	char *argv[] = { (char *)prog, NULL };
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	int st;
	pid_t init;

	if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		_exit(77);
	init = fork();
	if (init < 0)
		_exit(77);
	if (init > 0) {
		if (waitpid(init, &st, 0) != init || !WIFEXITED(st))
			_exit(21);
		_exit(WEXITSTATUS(st));
	}
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL) < 0)
		_exit(77);
	memset(&so, 0, sizeof(so));
	so.outdir = dir;
	so.quiet_target = true;
	if (ptd_swpt_run(argv, &so, &res, &diag) < 0) {
		fprintf(stderr, "tracing %s: %s\n", prog, diag.msg);
		_exit(20);
	}
	if (!res.exited || res.exit_code != 0)
		_exit(10 + (res.exited ? res.exit_code : 9));
	_exit(0);
}

/* The perf.data export of the capture, decoded: one stream per thread
 * life, in the capture's order, each the thread's ground truth. */
struct lives {
	size_t n;		/* threads done */
	size_t k[8];		/* instructions per thread */
	pid_t tid[8];
	const struct ptd_capture *c;
	uint64_t *truth;	/* of thread n */
	size_t ntruth;
	bool bad[8];
};

static void lives_load(struct lives *l)
{
	struct ptd_diag diag = { "" };

	free(l->truth);
	l->truth = NULL;
	l->ntruth = 0;
	if (l->n < l->c->nthreads &&
	    ptd_capture_read_truth(l->c, l->n, &l->truth, &l->ntruth,
				   &diag) < 0)
		CHECK_FAIL_("truth of thread %zu: %s", l->n, diag.msg);
}

static int lives_rec(void *ctx, const struct ptd_record *rec)
{
	struct lives *l = ctx;
	size_t n = l->n, k;

	if (rec->type != PTD_REC_INSN || n >= 8)
		return 0;
	k = l->k[n]++;
	if (!l->bad[n] && (k >= l->ntruth || rec->u.insn.ip != l->truth[k])) {
		l->bad[n] = true;
		CHECK_FAIL_("perf.data stream %zu (tid %ld): insn %zu is "
			    "0x%llx, the truth 0x%llx", n, (long)rec->tid, k,
			    (unsigned long long)rec->u.insn.ip,
			    (unsigned long long)(k < l->ntruth ? l->truth[k]
							       : 0));
	}
	return 0;
}

static void lives_done(void *ctx, pid_t tid, const struct ptd_decode_stats *st,
		       int err, const struct ptd_diag *diag)
{
	struct lives *l = ctx;

	(void)st;
	if (err)
		CHECK_FAIL_("perf.data stream %zu (tid %ld): %s", l->n,
			    (long)tid, diag->msg);
	if (l->n < 8 && !l->bad[l->n] && l->k[l->n] != l->ntruth)
		CHECK_FAIL_("perf.data stream %zu (tid %ld): %zu of %zu "
			    "instructions", l->n, (long)tid, l->k[l->n],
			    l->ntruth);
	if (l->n < 8)
		l->tid[l->n] = tid;
	l->n++;
	lives_load(l);
}

static void check_perfdata(const struct ptd_capture *c, const char *data)
{
	struct lives l = { .c = c };
	struct ptd_input_sink sink = { NULL, lives_rec, lives_done, &l, NULL };
	struct ptd_input_opts o;
	struct ptd_diag diag = { "" };
	size_t terr = 0;

	memset(&o, 0, sizeof(o));
	o.decode.path = PTD_PATH_INSN;
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN);
	lives_load(&l);
	CHECK_EQ_INT(ptd_input_decode(data, &o, &sink, &terr, &diag), 0);
	CHECK_EQ_INT((int)terr, 0);
	/* two lives of one tid are two streams, not one */
	CHECK_EQ_INT((int)l.n, (int)c->nthreads);
	for (size_t i = 0; i < l.n && i < c->nthreads && i < 8; i++)
		CHECK_EQ_INT(l.tid[i], c->threads[i].tid);
	free(l.truth);
}

static void test_reused_tid(void)
{
	const char *progs = getenv("PTD_TEST_PROGS");
	struct ptd_verify_report rep;
	struct ptd_diag diag = { "" };
	struct ptd_capture c;
	char prog[512], dir[512], path[600];
	int st;
	pid_t pid;

	(void)snprintf(prog, sizeof(prog), "%s/prog-tidreuse", progs);
	(void)snprintf(dir, sizeof(dir), "%s/reuse", workdir);
	fflush(NULL);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		traced_in_namespace(prog, dir);
	REQUIRE(waitpid(pid, &st, 0) == pid);
	REQUIRE(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		SKIP_ALL("no PID namespace of our own here: %s",
			 strerror(errno));
	if (WEXITSTATUS(st) == 13)
		CHECK_FAIL_("%s", "the kernel gave the second thread another "
			    "id: nothing was reused");
	REQUIRE(WEXITSTATUS(st) == 0);

	REQUIRE(ptd_capture_load(dir, &c, &diag) == 0);
	REQUIRE(c.nthreads == 3);
	/* main, A, then B with A's id and files of its own */
	CHECK(c.threads[0].tid != c.threads[1].tid);
	CHECK_EQ_INT(c.threads[2].tid, c.threads[1].tid);
	CHECK(c.threads[1].has_end);
	CHECK(c.threads[1].end_seq <= c.threads[2].first_seq);
	(void)snprintf(path, sizeof(path), "pt-%d.2.bin",
		       (int)c.threads[1].tid);
	CHECK_EQ_STR(c.threads[2].pt, path);
	(void)snprintf(path, sizeof(path), "truth-%d.2.bin",
		       (int)c.threads[1].tid);
	CHECK_EQ_STR(c.threads[2].truth, path);
	CHECK(c.threads[1].insns > 5000 * 3);

	/* every thread exactly as it ran, on both decoder paths */
	REQUIRE(ptd_capture_verify(&c, &rep, &diag) == 0);
	CHECK_EQ_INT(rep.nthreads, 3);
	for (size_t i = 0; i < rep.nthreads; i++) {
		const struct ptd_verify_thread *t = &rep.threads[i];

		fprintf(stderr, "  tid %ld: %s, %llu executed\n",
			(long)t->tid, t->ok ? "ok" : t->why,
			(unsigned long long)t->truth);
		if (!t->ok)
			CHECK_FAIL_("thread %zu (tid %ld): %s", i,
				    (long)t->tid, t->why);
	}
	CHECK(rep.ok);
	ptd_verify_report_fini(&rep);

	/* the same through perf.data: the export says where A ended and B
	 * began, the decoder keeps them apart */
	(void)snprintf(path, sizeof(path), "%s/reuse.data", workdir);
	REQUIRE(ptd_perfdata_write_capture(&c, path, &diag) == 0);
	check_perfdata(&c, path);
	ptd_capture_fini(&c);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	if (!getenv("PTD_TEST_PROGS"))
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	if (geteuid() != 0)
		SKIP_ALL("needs root: a PID namespace and ns_last_pid");
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-tidreuse-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir)) {
		fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(test_reused_tid);
	if (!check_failures || getenv("PTD_TEST_CLEANUP_ALWAYS"))
		(void)ptd_rm_rf(workdir);
	else
		fprintf(stderr, "capture kept in %s\n", workdir);
	return check_done();
}
