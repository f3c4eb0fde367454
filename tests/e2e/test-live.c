/* SPDX-License-Identifier: MIT */
/*
 * Live tracing of running processes, proved against the ground truth.
 *
 *  - attach: the software source seizes a running multi-threaded program
 *    (threads computing, sleeping in nanosleep, threads created later),
 *    traces it, detaches (at an instruction limit, on request from another
 *    thread, or when the program exits): the capture it wrote decodes to
 *    exactly what every thread executed, and the program runs on and
 *    finishes with every result it computed correct.
 *  - refused: a process that does not exist, or whose main thread has
 *    exited, is refused with a message saying so.
 *  - a thread born as the tracer detaches is one stream, begun and ended
 *    once, however the kernel orders its first stop and its creator's
 *    clone event.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>

#include "check.h"
#include "target.h"
#include "common/fileio.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"
#include "swpt/tracer.h"

static const char *progs_dir;
static char workdir[256];

static void verify(const char *dir, size_t min_threads)
{
	struct ptd_verify_report rep;
	struct ptd_diag diag = { "" };
	struct ptd_capture c;
	int r;

	r = ptd_capture_load(dir, &c, &diag);
	if (r < 0) {
		CHECK_FAIL_("loading %s: %s", dir, diag.msg);
		return;
	}
	r = ptd_capture_verify(&c, &rep, &diag);
	if (r < 0) {
		CHECK_FAIL_("verify %s could not run: %s", dir, diag.msg);
		ptd_capture_fini(&c);
		return;
	}
	CHECK(rep.nthreads >= min_threads);
	for (size_t i = 0; i < rep.nthreads; i++) {
		const struct ptd_verify_thread *t = &rep.threads[i];

		fprintf(stderr, "  tid %ld: %s, %llu executed\n",
			(long)t->tid, t->ok ? "ok" : t->why,
			(unsigned long long)t->truth);
		if (!t->ok)
			CHECK_FAIL_("thread %ld: %s", (long)t->tid, t->why);
	}
	CHECK(rep.ok);
	ptd_verify_report_fini(&rep);
	ptd_capture_fini(&c);
}

static const char *subdir(const char *name)
{
	static char dir[512];

	(void)snprintf(dir, sizeof(dir), "%s/%s", workdir, name);
	return dir;
}

/* Attach, stop at an instruction limit, detach: exact, and unharmed. */
static void test_attach_limit(void)
{
	struct ptd_swpt_options so = { 0 };
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	struct target t;
	int r;

	/* told to end below: one ended by its clock could exit before the
	 * limit on a loaded machine */
	REQUIRE(target_start(progs_dir, 3600, &t) == 0);
	so.outdir = subdir("limit");
	so.max_insns = 40000;
	so.gen.psb_period = 4096;
	r = ptd_swpt_attach(t.pid, &so, &res, &diag);
	if (r < 0)
		CHECK_FAIL_("attach: %s (%s)", diag.msg, ptd_strerror(r));
	CHECK(res.detached);
	CHECK(!res.exited);
	CHECK(res.insns >= 40000);
	CHECK(res.threads >= 3);
	fprintf(stderr, "  %llu insns, %u threads\n",
		(unsigned long long)res.insns, res.threads);
	verify(so.outdir, 3);
	CHECK(target_tell(t.pid) == 0);
	target_finish(&t);
}

static void on_usr1(int sig)
{
	(void)sig;
}

struct attach_job {
	pid_t pid;
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag diag;
	int r;
	atomic_int stop;
	atomic_int done;
	pid_t tid;		/* the tracing thread's */
};

static void *attach_thread(void *arg)
{
	struct attach_job *j = arg;

	j->tid = gettid();
	j->r = ptd_swpt_attach(j->pid, &j->so, &j->res, &j->diag);
	atomic_store(&j->done, 1);
	return NULL;
}

/* Attach from a thread of ours, ask it to stop from another: the waitpid
 * it may sit in is interrupted by a signal, and it detaches. */
static void test_attach_stop(void)
{
	struct attach_job j = { 0 };
	struct sigaction sa = { 0 };
	struct timespec ts = { 0, 10000000 };
	struct target t;
	pthread_t th;

	sa.sa_handler = on_usr1;	/* no SA_RESTART */
	REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0);
	REQUIRE(target_start(progs_dir, 3600, &t) == 0);
	j.pid = t.pid;
	j.so.outdir = subdir("stop");
	j.so.stop = &j.stop;
	j.so.gen.tsc = true;
	REQUIRE(pthread_create(&th, NULL, attach_thread, &j) == 0);
	(void)nanosleep(&(struct timespec){ 0, 700000000 }, NULL);
	atomic_store(&j.stop, 1);
	while (!atomic_load(&j.done)) {
		(void)pthread_kill(th, SIGUSR1);
		(void)nanosleep(&ts, NULL);
	}
	(void)pthread_join(th, NULL);
	if (j.r < 0)
		CHECK_FAIL_("attach: %s (%s)", j.diag.msg, ptd_strerror(j.r));
	CHECK(j.res.detached);
	CHECK(j.res.insns > 0);
	fprintf(stderr, "  %llu insns, %u threads\n",
		(unsigned long long)j.res.insns, j.res.threads);
	verify(j.so.outdir, 3);
	CHECK(target_tell(t.pid) == 0);
	target_finish(&t);
}

static void tell_target(void *ctx)
{
	CHECK(target_tell(*(pid_t *)ctx) == 0);
}

/* SIGKILL while traced, at many points of the tracer's work: the trace
 * ends with the target killed by signal 9, never an error, and what it
 * holds is exact.  A ptrace
 * request on a thread the tracer holds stopped fails with ESRCH once a
 * SIGKILL has woken it; its exit comes next (once, PTRACE_SETREGS failing
 * so ended the trace as an error: "No such process"). */
static atomic_int started;

static void set_flag(void *ctx)
{
	atomic_store((atomic_int *)ctx, 1);
}

static void test_attach_killed(void)
{
	unsigned errors = 0, killed = 0;

	for (int round = 0; round < 24; round++) {
		struct attach_job j = { 0 };
		char name[32];
		struct target t = { .pid = -1, .out = -1 };
		pthread_t th;

		(void)snprintf(name, sizeof(name), "killed%d", round);
		REQUIRE(target_start(progs_dir, 3600, &t) == 0);
		j.pid = t.pid;
		j.so.outdir = subdir(name);
		j.so.started = set_flag;
		j.so.started_ctx = &started;
		atomic_store(&started, 0);
		REQUIRE(pthread_create(&th, NULL, attach_thread, &j) == 0);
		/* tracing (a kill during the attach is an attach that
		 * failed, -ESRCH: another test), then 20 to 230 ms on */
		while (!atomic_load(&started) && !atomic_load(&j.done))
			(void)nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		(void)nanosleep(&(struct timespec){
				0, (20 + (round * 37) % 211) * 1000000l },
				NULL);
		CHECK(kill(t.pid, SIGKILL) == 0);
		(void)pthread_join(th, NULL);
		if (j.r < 0) {
			errors++;
			fprintf(stderr, "  round %d: %s (%s)\n", round,
				j.diag.msg, ptd_strerror(j.r));
		} else if (j.res.exited && j.res.exit_signal == SIGKILL) {
			killed++;
			/* and what was traced up to the kill is exact */
			verify(j.so.outdir, 1);
		} else {
			CHECK_FAIL_("round %d: exited %d, signal %d", round,
				    j.res.exited, j.res.exit_signal);
		}
		/* (the tracer, a thread of ours, has reaped it) */
		(void)close(t.out);
	}
	fprintf(stderr, "  24 kills: %u seen as the target's end, %u "
		"ended the trace with an error\n", killed, errors);
	CHECK_EQ_INT(errors, 0);
}

/* Attach and trace to the end: the exit is seen, every thread exact.  The
 * target is told to end once every thread is stopped under the tracer (as
 * tracing starts), not by its clock: one that ran out of time while the
 * attach was still seizing (a loaded machine) ended with no brief thread
 * left to trace.  Told, it starts one more brief thread, then ends. */
static void test_attach_to_exit(void)
{
	struct ptd_swpt_options so = { 0 };
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	struct target t;
	int r;

	REQUIRE(target_start(progs_dir, 3600, &t) == 0);
	so.started = tell_target;
	so.started_ctx = &t.pid;
	so.outdir = subdir("exit");
	r = ptd_swpt_attach(t.pid, &so, &res, &diag);
	if (r < 0)
		CHECK_FAIL_("attach: %s (%s)", diag.msg, ptd_strerror(r));
	CHECK(res.exited);
	CHECK_EQ_INT(res.exit_code, 0);
	CHECK(res.threads >= 4);	/* main, 2 workers, brief ones */
	fprintf(stderr, "  %llu insns, %u threads\n",
		(unsigned long long)res.insns, res.threads);
	verify(so.outdir, 4);
	/* the tracer collected the exit; the output is still ours */
	{
		char buf[128];

		target_output(&t, buf, sizeof(buf));
		CHECK(strncmp(buf, "ok ", 3) == 0);
	}
}

static void test_attach_refused(void)
{
	struct ptd_swpt_options so = { 0 };
	struct ptd_diag diag = { "" };
	int r;

	so.outdir = subdir("none");
	r = ptd_swpt_attach(999999999, &so, NULL, &diag);
	CHECK_EQ_INT(r, -ESRCH);
	CHECK_CONTAINS(diag.msg, "no such process");
}

static void *sleep_long(void *arg)
{
	(void)arg;
	(void)sleep(30);
	return NULL;
}

/* The State: letter of @pid in /proc, or 0. */
static char proc_state(pid_t pid)
{
	char path[64], buf[4096], *p;
	FILE *f;
	size_t n;

	(void)snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	(void)fclose(f);
	buf[n] = 0;
	p = strstr(buf, "\nState:");
	return p ? p[strspn(p + 7, " \t") + 7] : 0;
}

/* A process whose main thread has exited (a zombie) while another runs on:
 * PTRACE_SEIZE refuses the exited thread with EPERM, as it does any thread
 * whose exit has begun (the same check lets an attach pass by a thread that
 * ends while the others are seized).  The refusal says why, not "ptrace
 * refused" with a list of permission causes. */
static void test_attach_zombie_leader(void)
{
	struct ptd_swpt_options so = { 0 };
	struct ptd_diag diag = { "" };
	pthread_t th;
	pid_t pid;
	int r, status;

	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		if (pthread_create(&th, NULL, sleep_long, NULL) != 0)
			_exit(2);
		pthread_exit(NULL);
	}
	for (int i = 0; i < 500 && proc_state(pid) != 'Z'; i++) {
		struct timespec ts = { 0, 10000000 };

		(void)nanosleep(&ts, NULL);
	}
	CHECK(proc_state(pid) == 'Z');
	so.outdir = subdir("zombie");
	r = ptd_swpt_attach(pid, &so, NULL, &diag);
	CHECK_EQ_INT(r, -EPERM);
	CHECK_CONTAINS(diag.msg, "main thread has exited");
	(void)kill(pid, SIGKILL);
	CHECK(waitpid(pid, &status, 0) == pid);
}

/* ---- a thread born as the tracer detaches -------------------------- */

/* Start prog-churn (threads started and joined one after another, for
 * ever) as our child: a tracer whose target is its own child (as
 * ptd_swpt_run's always is) cannot count on waitpid(-1) saying ECHILD to
 * end a wait for a task it has already let go.  A program of tests/progs,
 * not a fork of this one: under ASan a thread's start and exit clear
 * shadow memory with REP STOS, a million single steps, and one attach
 * took minutes.  Returns its pid once its threads run, or -1. */
static pid_t start_churn(void)
{
	char path[PATH_MAX], ready[6];
	int fds[2];
	pid_t pid;

	(void)snprintf(path, sizeof(path), "%s/prog-churn", progs_dir);
	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		if (dup2(fds[1], 3) < 0)
			_exit(127);
		execl(path, "prog-churn", "3600", (char *)NULL);
		_exit(127);
	}
	(void)close(fds[1]);
	if (pid > 0 && read(fds[0], ready, sizeof(ready)) != sizeof(ready)) {
		(void)kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		pid = -1;
	}
	(void)close(fds[0]);
	return pid;
}

/* Kills the target of an attach that has not returned in a minute (each
 * takes a fraction of a second), so that a tracer waiting for nothing
 * fails the test instead of hanging it. */
struct watchdog {
	pid_t pid;
	pid_t tracer;		/* the thread that attaches */
	atomic_int attaching;	/* 1 while an attach runs */
	/* trace bytes the attach has written: a slow attach writes on, a
	 * stuck one does not */
	atomic_ullong pt_bytes;
	atomic_int fired;
	atomic_int quit;
};

/* What a hang looks like, for its report: each thread of the target with
 * its state, the stop it is in and its tracer, and the tracing thread's
 * own state and the kernel function it sleeps in. */
static void dump_task(const char *dir, const char *who)
{
	static const char *keys[] = { "State:", "TracerPid:", "SigPnd:",
				      "ShdPnd:", "SigBlk:" };
	char path[PATH_MAX], line[256], wchan[64] = "";
	FILE *f;
	int fd;

	(void)snprintf(path, sizeof(path), "%s/wchan", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, wchan, sizeof(wchan) - 1);

		wchan[n > 0 ? n : 0] = 0;
		(void)close(fd);
	}
	fprintf(stderr, "    %s %s: wchan %s;", who, dir, wchan);
	(void)snprintf(path, sizeof(path), "%s/status", dir);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
			if (!strncmp(line, keys[i], strlen(keys[i])))
				fprintf(stderr, " %.*s;",
					(int)strcspn(line, "\n"), line);
	if (f)
		(void)fclose(f);
	fprintf(stderr, "\n");
}

static void dump_hang(pid_t target, pid_t tracer)
{
	char path[64], sub[PATH_MAX];
	struct dirent *de;
	DIR *d;

	(void)snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)getpid(),
		       (int)tracer);
	dump_task(path, "tracer");
	(void)snprintf(path, sizeof(path), "/proc/%d/task", (int)target);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		(void)snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		dump_task(sub, "target");
	}
	if (d)
		(void)closedir(d);
}

static void *watchdog_main(void *arg)
{
	struct watchdog *w = arg;
	unsigned long long seen = 0, at50 = 0;
	int ticks = 0;

	while (!atomic_load(&w->quit)) {
		struct timespec ts = { 0, 100000000 };

		(void)nanosleep(&ts, NULL);
		ticks = atomic_load(&w->attaching) ? ticks + 1 : 0;
		if (ticks == 1)
			seen = atomic_load(&w->pt_bytes);
		if (ticks == 500)
			at50 = atomic_load(&w->pt_bytes);
		if (ticks == 600) {
			fprintf(stderr, "  attach stuck: %llu trace bytes in "
				"its first 50 s, %llu in the next 10 s\n",
				at50 - seen, atomic_load(&w->pt_bytes) - at50);
			dump_hang(w->pid, w->tracer);
			atomic_store(&w->fired, 1);
			(void)kill(w->pid, SIGKILL);
		}
	}
	return NULL;
}

/* What the live output saw: each stream's tid, begun and ended. */
struct streams {
	pid_t tid[PTD_CAPTURE_MAX_THREADS];
	bool ended[PTD_CAPTURE_MAX_THREADS];
	size_t n;
	size_t begun_twice, ended_twice, stray_bytes;
	bool started;
	atomic_int stop;
	atomic_ullong *pt_bytes;	/* the watchdog's count */
};

static ssize_t stream_of(const struct streams *s, pid_t tid)
{
	for (size_t i = s->n; i-- > 0;)
		if (s->tid[i] == tid)
			return (ssize_t)i;
	return -1;
}

static int st_begin(void *ctx, pid_t tid)
{
	struct streams *s = ctx;

	if (stream_of(s, tid) >= 0)
		s->begun_twice++;
	if (s->n == PTD_CAPTURE_MAX_THREADS)
		return -ENOSPC;
	s->tid[s->n] = tid;
	s->ended[s->n++] = false;
	/* the first thread created since tracing began: detach now, while
	 * its first stop and its creator's clone event are both pending */
	if (s->started)
		atomic_store(&s->stop, 1);
	return 0;
}

static int st_pt(void *ctx, pid_t tid, const uint8_t *data, size_t len)
{
	struct streams *s = ctx;
	ssize_t i = stream_of(s, tid);

	(void)data;
	atomic_fetch_add(s->pt_bytes, len);
	if (i < 0 || s->ended[i])
		s->stray_bytes += len;
	return 0;
}

/* An image event: nothing to keep (st_*, fo_*). */
static int ignore_image(void *ctx, const struct ptd_tl_event *ev,
			const uint8_t *code, size_t ncode)
{
	(void)ctx;
	(void)ev;
	(void)code;
	(void)ncode;
	return 0;
}

static int st_end(void *ctx, pid_t tid)
{
	struct streams *s = ctx;
	ssize_t i = stream_of(s, tid);

	if (i < 0 || s->ended[i])
		s->ended_twice++;
	else
		s->ended[i] = true;
	return 0;
}

static void st_started(void *ctx)
{
	((struct streams *)ctx)->started = true;
}

/* A thread the target creates as the tracer begins to detach: the kernel
 * may report the new thread's first stop before its creator's clone event
 * (newer tracees are waited for first, so the event can wait until the new
 * thread is gone).  The tracer met the thread at its first stop, detached
 * it there (it was detaching) or stepped it to its exit, and then took the
 * clone event for a thread it had never seen: a second stream for the
 * same thread, begun and never stopped, that the tracer waited for (for
 * ever, when the target is the tracer's own child).  And a thread reaped
 * by then is no longer in /proc: the event was taken for a child process,
 * whose first stop the tracer waited for, for ever. */
static void test_attach_thread_born_detaching(void)
{
	struct streams *s = calloc(1, sizeof(*s));
	struct ptd_swpt_out out = { st_begin, st_pt, ignore_image, st_end,
				    NULL };
	struct watchdog w = { .pid = start_churn(), .tracer = gettid() };
	size_t doubled = 0;
	uint64_t most_steps = 0;
	int rounds = 40, k;
	pthread_t wd;

	REQUIRE(s && w.pid > 0);
	REQUIRE(pthread_create(&wd, NULL, watchdog_main, &w) == 0);
	for (k = 0; k < rounds; k++) {
		struct ptd_swpt_options so = { 0 };
		struct ptd_swpt_result res;
		struct ptd_diag diag = { "" };
		size_t open = 0;
		int r;

		memset(s, 0, sizeof(*s));
		s->pt_bytes = &w.pt_bytes;
		out.ctx = s;
		so.out = &out;
		so.stop = &s->stop;
		so.started = st_started;
		so.started_ctx = s;
		atomic_store(&w.attaching, 1);
		r = ptd_swpt_attach(w.pid, &so, &res, &diag);
		atomic_store(&w.attaching, 0);
		if (r == 0 && res.steps > most_steps)
			most_steps = res.steps;
		if (atomic_load(&w.fired)) {
			CHECK_FAIL_("attach %d did not return in a minute "
				    "(%zu streams, %zu begun twice): the target "
				    "was killed to end it", k, s->n,
				    s->begun_twice);
			break;
		}
		if (r < 0) {
			CHECK_FAIL_("attach %d: %s (%s)", k, diag.msg,
				    ptd_strerror(r));
			break;
		}
		for (size_t i = 0; i < s->n; i++)
			open += !s->ended[i];
		CHECK(res.detached);
		CHECK(s->n >= 3);	/* main, churn_loop, a new one */
		CHECK_EQ_INT(res.threads, s->n);
		CHECK_EQ_INT(s->begun_twice, 0);
		CHECK_EQ_INT(s->ended_twice, 0);
		CHECK_EQ_INT(s->stray_bytes, 0);
		CHECK_EQ_INT(open, 0);
		doubled += s->begun_twice;
		if (check_failures)
			break;
	}
	fprintf(stderr, "  %d attaches, %zu threads begun twice, at most %"
		PRIu64 " steps in one\n", k, doubled, most_steps);
	atomic_store(&w.quit, 1);
	(void)pthread_join(wd, NULL);
	/* attached and let go again and again, it ran on unharmed: told to
	 * end, every thread it started came back with the right result */
	if (!atomic_load(&w.fired) && target_tell(w.pid) == 0) {
		int status = 0;

		CHECK(waitpid(w.pid, &status, 0) == w.pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	} else {
		(void)kill(w.pid, SIGKILL);
		(void)waitpid(w.pid, NULL, 0);
	}
	free(s);
}

/* A live output that fails its Nth batch of trace bytes. */
struct failing_out {
	atomic_int left;
};

static int fo_begin(void *ctx, pid_t tid)
{
	(void)ctx;
	(void)tid;
	return 0;
}

static int fo_pt(void *ctx, pid_t tid, const uint8_t *data, size_t len)
{
	struct failing_out *o = ctx;

	(void)tid;
	(void)data;
	(void)len;
	return atomic_fetch_sub(&o->left, 1) <= 1 ? -EIO : 0;
}

/*
 * The tracer fails while the target runs on (its live output refuses
 * bytes, after a few batches or many), ATTEMPTS times on one target, each
 * from a thread of its own as ptd's sessions trace (the kernel lets go of
 * a thread the tracer met but never stopped when that thread exits):
 * every attach returns that error, and the target, let go each time with
 * its original code, runs on unharmed -- every thread resumed where it
 * stood, none past one of the breakpoints branch mode had placed (its
 * threads run through them all the time: one in a stop the tracer had not
 * yet taken when it failed must be put back before it goes).
 */
static void test_attach_output_fails(void)
{
	enum { ATTEMPTS = 12 };
	struct target t;

	REQUIRE(target_start(progs_dir, 3600, &t) == 0);
	for (int i = 0; i < ATTEMPTS; i++) {
		struct failing_out fo;
		struct ptd_swpt_out out = { 0 };
		struct attach_job j = { 0 };
		pthread_t th;

		atomic_init(&fo.left, 2 + i * 7);
		out.thread_begin = fo_begin;
		out.pt = fo_pt;
		out.image = ignore_image;
		out.thread_end = fo_begin;
		out.ctx = &fo;
		j.pid = t.pid;
		j.so.out = &out;
		REQUIRE(pthread_create(&th, NULL, attach_thread, &j) == 0);
		(void)pthread_join(th, NULL);
		if (j.r != -EIO)
			CHECK_FAIL_("attempt %d: attach returned %d (%s), not "
				    "the output's -EIO", i, j.r, j.diag.msg);
		CHECK_EQ_INT(ptd_swpt_wait_released(t.pid, j.tid), 0);
		if (kill(t.pid, 0) < 0) {
			CHECK_FAIL_("attempt %d: the target is gone", i);
			break;
		}
	}
	CHECK(target_tell(t.pid) == 0);
	target_finish(&t);
}

int main(void)
{
	char tmpl[] = "/tmp/ptd-live-XXXXXX";

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set");
	if (!mkdtemp(tmpl))
		SKIP_ALL("mkdtemp: %s", strerror(errno));
	(void)snprintf(workdir, sizeof(workdir), "%s", tmpl);
	RUN(test_attach_refused);
	RUN(test_attach_zombie_leader);
	RUN(test_attach_limit);
	RUN(test_attach_stop);
	RUN(test_attach_to_exit);
	RUN(test_attach_killed);
	RUN(test_attach_thread_born_detaching);
	RUN(test_attach_output_fails);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	return check_done();
}
