/* SPDX-License-Identifier: MIT */
/*
 * The fork stopper (daemon/forkstop.h, its BPF programs in daemon/bpf/
 * forkstop.bpf.c), for real: a process P (forked here, told what to do
 * through a pipe) is followed, and
 *  - four threads of P fork a child each: four reports (none for the
 *    threads), each naming P and its cookie; each child is stopped
 *    ('T') and its first act after the fork, a write to a pipe, has not
 *    happened until the test sends it a SIGCONT; their exit statuses
 *    are what they chose;
 *  - P vforks a child that execs echo: stopped before it runs, its
 *    output comes once continued;
 *  - P's child C, followed in turn (as a child's session does), forks a
 *    grandchild: reported with C's cookie, stopped the same way;
 *  - a process not followed, and P once unfollowed, fork children that
 *    are never stopped nor reported;
 *  - a storm of 300 forks from four threads: 300 reports, none missed,
 *    every child continued and reaped with its status;
 *  - the same storm with a one-page ring buffer nobody reads: the
 *    children without room are let go unstopped and counted for P, every
 *    fork reported or counted.
 * Root, with BPF; skipped saying why elsewhere.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "daemon/forkstop.h"

#define NTHREADS 4
#define STORM 300
#define WAIT_MS 10000

static struct ptd_forkstop *fs;
static int out_r, out_w;	/* the children's first writes */

/* ---- the followed process, P ---------------------------------------- */

struct pjob {
	int i;
	int n;			/* forks (storm), else 1 */
	int bad;
};

static void *p_thread_fork(void *arg)
{
	struct pjob *j = arg;

	for (int k = 0; k < j->n; k++) {
		int want = j->n == 1 ? 10 + j->i : (j->i * 64 + k) & 0x7f;
		pid_t c = fork();
		int st;

		if (c == 0) {
			char b = (char)('a' + j->i);

			if (j->n == 1 && write(out_w, &b, 1) != 1)
				_exit(99);
			_exit(want);
		}
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != want)
			j->bad++;
	}
	return NULL;
}

/* @n forks in each of NTHREADS threads; 0 if each exit status was its
 * child's. */
static int p_threads(int n)
{
	pthread_t th[NTHREADS];
	struct pjob j[NTHREADS];
	int bad = 0;

	for (int i = 0; i < NTHREADS; i++) {
		j[i] = (struct pjob){ .i = i, .n = n };
		if (pthread_create(&th[i], NULL, p_thread_fork, &j[i]))
			return 1;
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		bad += j[i].bad;
	}
	return bad ? 2 : 0;
}

static int p_vfork(void)
{
	pid_t c = vfork();
	int st;

	if (c == 0) {
		if (dup2(out_w, 1) < 0)
			_exit(98);
		execl("/bin/echo", "echo", "vforked", (char *)NULL);
		_exit(127);
	}
	if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return 3;
	return 0;
}

/* C forks G: G writes 'g' and exits 7, C (having reaped it) 'c' and 8. */
static int p_grandchild(void)
{
	pid_t c = fork();
	int st;

	if (c == 0) {
		pid_t g = fork();

		if (g == 0)
			_exit(write(out_w, "g", 1) == 1 ? 7 : 99);
		if (g < 0 || waitpid(g, &st, 0) != g || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 7)
			_exit(97);
		_exit(write(out_w, "c", 1) == 1 ? 8 : 99);
	}
	if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 8)
		return 4;
	return 0;
}

static int p_one(void)
{
	pid_t c = fork();
	int st;

	if (c == 0)
		_exit(write(out_w, "u", 1) == 1 ? 3 : 99);
	if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 3)
		return 5;
	return 0;
}

struct proc {
	pid_t pid;
	int cmd, res;
};

static void p_main(int cmd, int res)
{
	char c, r;

	while (read(cmd, &c, 1) == 1) {
		switch (c) {
		case 't': r = (char)p_threads(1); break;
		case 's': r = (char)p_threads(STORM / NTHREADS); break;
		case 'v': r = (char)p_vfork(); break;
		case 'g': r = (char)p_grandchild(); break;
		case 'u': r = (char)p_one(); break;
		default: r = 100; break;
		}
		if (write(res, &r, 1) != 1)
			_exit(1);
	}
	_exit(0);
}

static void proc_start(struct proc *p)
{
	int a[2], b[2];

	REQUIRE(pipe2(a, O_CLOEXEC) == 0 && pipe2(b, O_CLOEXEC) == 0);
	p->pid = fork();
	REQUIRE(p->pid >= 0);
	if (p->pid == 0) {
		close(a[1]);
		close(b[0]);
		p_main(a[0], b[1]);
	}
	close(a[0]);
	close(b[1]);
	p->cmd = a[1];
	p->res = b[0];
}

static void proc_ask(struct proc *p, char c)
{
	REQUIRE(write(p->cmd, &c, 1) == 1);
}

/* P's answer to its last command (0: every status as it should be). */
static int proc_result(struct proc *p)
{
	struct pollfd pf = { .fd = p->res, .events = POLLIN };
	char r;

	if (poll(&pf, 1, WAIT_MS) != 1 || read(p->res, &r, 1) != 1)
		return -1;
	return r;
}

static void proc_end(struct proc *p)
{
	int st;

	close(p->cmd);
	close(p->res);
	CHECK(waitpid(p->pid, &st, 0) == p->pid && WIFEXITED(st) &&
	      WEXITSTATUS(st) == 0);
}

/* ---- the test's side ------------------------------------------------- */

struct evs {
	struct ptd_forkstop_event v[STORM + 16];
	unsigned n;
};

static void on_event(void *ctx, const struct ptd_forkstop_event *ev)
{
	struct evs *e = ctx;

	if (e->n < sizeof(e->v) / sizeof(e->v[0]))
		e->v[e->n] = *ev;
	e->n++;
}

/* Reports until @e holds @want (or @ms pass); how many it holds. */
static unsigned collect(struct evs *e, unsigned want, int ms)
{
	struct pollfd pf = { .fd = ptd_forkstop_fd(fs), .events = POLLIN };
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	(void)ptd_forkstop_drain(fs, on_event, e);
	while (e->n < want) {
		long left;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = ms - ((t.tv_sec - t0.tv_sec) * 1000 +
			     (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&pf, 1, (int)left) < 0)
			break;
		(void)ptd_forkstop_drain(fs, on_event, e);
	}
	return e->n;
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	(void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* @pid reaches its stop (the SIGSTOP is taken on its way to user space,
 * a little after the report). */
static bool stopped(pid_t pid)
{
	const struct timespec tick = { 0, 1000000 };

	for (int i = 0; i < WAIT_MS; i++) {
		char s = proc_state(pid);

		if (s == 'T')
			return true;
		if (s == 0 || s == 'Z' || s == 'X')
			return false;
		(void)nanosleep(&tick, NULL);
	}
	return false;
}

/* What the children wrote so far, without waiting, into @buf. */
static size_t written(char *buf, size_t size)
{
	ssize_t n = read(out_r, buf, size);

	return n > 0 ? (size_t)n : 0;
}

/* @n bytes the children write once continued. */
static size_t await_written(char *buf, size_t n)
{
	struct pollfd pf = { .fd = out_r, .events = POLLIN };
	size_t got = 0;

	while (got < n && poll(&pf, 1, WAIT_MS) == 1)
		got += written(buf + got, n - got);
	return got;
}

static void test_threads(void)
{
	struct evs e = { .n = 0 };
	struct proc p;
	char buf[16];
	bool seen[NTHREADS] = { false };

	proc_start(&p);
	REQUIRE(ptd_forkstop_follow(fs, p.pid, 111) == 0);
	CHECK_EQ_INT(ptd_forkstop_follow(fs, p.pid, 112), -EEXIST);
	proc_ask(&p, 't');
	CHECK_EQ_INT(collect(&e, NTHREADS, WAIT_MS), NTHREADS);
	for (unsigned i = 0; i < e.n && i < NTHREADS; i++) {
		CHECK_EQ_INT(e.v[i].parent, p.pid);
		CHECK_EQ_U64(e.v[i].cookie, 111);
		CHECK(stopped((pid_t)e.v[i].pid));
	}
	/* every child stopped before its first act: nothing written */
	CHECK_EQ_INT(written(buf, sizeof(buf)), 0);
	for (unsigned i = 0; i < e.n && i < NTHREADS; i++)
		CHECK(kill((pid_t)e.v[i].pid, SIGCONT) == 0);
	CHECK_EQ_INT(await_written(buf, NTHREADS), NTHREADS);
	for (int i = 0; i < NTHREADS; i++)
		if (buf[i] >= 'a' && buf[i] < 'a' + NTHREADS)
			seen[buf[i] - 'a'] = true;
	for (int i = 0; i < NTHREADS; i++)
		CHECK(seen[i]);
	CHECK_EQ_INT(proc_result(&p), 0);
	/* the threads P made were not reported (nor stopped) */
	CHECK_EQ_INT(collect(&e, 0, 0), NTHREADS);
	CHECK_EQ_INT(ptd_forkstop_unfollow(fs, p.pid, 112, NULL), -ENOENT);
	CHECK_EQ_INT(ptd_forkstop_unfollow(fs, p.pid, 111, NULL), 0);
	proc_end(&p);
}

static void test_vfork(void)
{
	struct evs e = { .n = 0 };
	struct proc p;
	char buf[16] = "";

	proc_start(&p);
	REQUIRE(ptd_forkstop_follow(fs, p.pid, 5) == 0);
	proc_ask(&p, 'v');
	REQUIRE(collect(&e, 1, WAIT_MS) == 1);
	CHECK_EQ_INT(e.v[0].parent, p.pid);
	CHECK(stopped((pid_t)e.v[0].pid));
	CHECK_EQ_INT(written(buf, sizeof(buf)), 0);
	CHECK(kill((pid_t)e.v[0].pid, SIGCONT) == 0);
	CHECK_EQ_INT(await_written(buf, 8), 8);
	CHECK(!memcmp(buf, "vforked\n", 8));
	CHECK_EQ_INT(proc_result(&p), 0);
	/* the exec'd echo forked nothing, and P nothing more */
	CHECK_EQ_INT(collect(&e, 0, 0), 1);
	CHECK_EQ_INT(ptd_forkstop_unfollow(fs, p.pid, 5, NULL), 0);
	proc_end(&p);
}

static void test_grandchild(void)
{
	struct evs e = { .n = 0 };
	struct proc p;
	char buf[16] = "";
	pid_t c, g;

	proc_start(&p);
	REQUIRE(ptd_forkstop_follow(fs, p.pid, 1) == 0);
	proc_ask(&p, 'g');
	REQUIRE(collect(&e, 1, WAIT_MS) == 1);
	c = (pid_t)e.v[0].pid;
	CHECK_EQ_INT(e.v[0].parent, p.pid);
	REQUIRE(stopped(c));
	/* followed before it runs, as the child's own session does */
	REQUIRE(ptd_forkstop_follow(fs, c, 2) == 0);
	CHECK(kill(c, SIGCONT) == 0);
	REQUIRE(collect(&e, 2, WAIT_MS) == 2);
	g = (pid_t)e.v[1].pid;
	CHECK_EQ_INT(e.v[1].parent, c);
	CHECK_EQ_U64(e.v[1].cookie, 2);
	CHECK(stopped(g));
	CHECK_EQ_INT(written(buf, sizeof(buf)), 0);
	CHECK(kill(g, SIGCONT) == 0);
	CHECK_EQ_INT(await_written(buf, 2), 2);
	CHECK(!memcmp(buf, "gc", 2));
	CHECK_EQ_INT(proc_result(&p), 0);
	(void)ptd_forkstop_unfollow(fs, c, 2, NULL);	/* (gone: either way) */
	CHECK_EQ_INT(ptd_forkstop_unfollow(fs, p.pid, 1, NULL), 0);
	proc_end(&p);
}

/* Not followed, or no more: its child runs at once, never reported. */
static void test_not_followed(void)
{
	struct evs e = { .n = 0 };
	struct proc p, q;
	char buf[4] = "";

	/* (one at a time: each would hold the other's command pipe) */
	proc_start(&p);
	REQUIRE(ptd_forkstop_follow(fs, p.pid, 9) == 0);
	proc_start(&q);
	proc_ask(&q, 'u');
	/* (its report, if any, is written before the child runs at all) */
	CHECK_EQ_INT(await_written(buf, 1), 1);
	CHECK_EQ_INT(buf[0], 'u');
	CHECK_EQ_INT(proc_result(&q), 0);
	CHECK_EQ_INT(collect(&e, 0, 0), 0);
	proc_end(&q);
	/* P forks after the follow ended */
	REQUIRE(ptd_forkstop_unfollow(fs, p.pid, 9, NULL) == 0);
	proc_ask(&p, 'u');
	CHECK_EQ_INT(await_written(buf, 1), 1);
	CHECK_EQ_INT(proc_result(&p), 0);
	CHECK_EQ_INT(collect(&e, 0, 0), 0);
	proc_end(&p);
}

static void test_storm(void)
{
	static struct evs e;
	struct ptd_forkstop_count before, after;
	struct proc p;
	unsigned done = 0;
	uint64_t missed = 1;

	e.n = 0;
	REQUIRE(ptd_forkstop_counts(fs, &before) == 0);
	proc_start(&p);
	REQUIRE(ptd_forkstop_follow(fs, p.pid, 77) == 0);
	proc_ask(&p, 's');
	/* continue each as it comes: P's threads fork the next one after
	 * reaping the last */
	while (done < STORM && collect(&e, done + 1, WAIT_MS) > done) {
		for (; done < e.n && done < STORM; done++) {
			CHECK_EQ_INT(e.v[done].parent, p.pid);
			CHECK(stopped((pid_t)e.v[done].pid));
			CHECK(kill((pid_t)e.v[done].pid, SIGCONT) == 0);
		}
	}
	CHECK_EQ_INT(done, STORM);
	CHECK_EQ_INT(proc_result(&p), 0);
	CHECK_EQ_INT(collect(&e, 0, 0), STORM);
	REQUIRE(ptd_forkstop_counts(fs, &after) == 0);
	CHECK_EQ_U64(after.stopped - before.stopped, STORM);
	CHECK_EQ_U64(after.missed, 0);
	fprintf(stderr, "  storm: %u forks reported, %llu missed\n", done,
		(unsigned long long)after.missed);
	CHECK_EQ_INT(ptd_forkstop_unfollow(fs, p.pid, 77, &missed), 0);
	CHECK_EQ_U64(missed, 0);
	proc_end(&p);
}

/* Continue every child of @parent that is stopped now (found in /proc,
 * not from the reports). */
static void cont_stopped_children(pid_t parent)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[300], buf[512], *p;
		int ppid = 0;
		FILE *f;
		size_t n;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		(void)snprintf(path, sizeof(path), "/proc/%s/stat",
			       de->d_name);
		if (!(f = fopen(path, "re")))
			continue;
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		p = strrchr(buf, ')');
		if (p && sscanf(p, ") %*c %d", &ppid) == 1 &&
		    ppid == parent && p[2] == 'T')
			(void)kill(atoi(de->d_name), SIGCONT);
	}
	closedir(d);
}

/* A ring buffer that is not read fills: the children it has no room for
 * are not stopped (nothing would continue them) and are counted for
 * their parent, every fork either reported or counted missed. */
static void test_missed(void)
{
	static struct evs e;
	struct ptd_diag diag = { "" };
	struct pollfd pf;
	struct proc p;
	uint64_t missed = 0, at_end = 0;
	char r = -1;

	ptd_forkstop_free(fs, NULL, NULL);
	/* one page: room for 128 reports */
	REQUIRE(ptd_forkstop_new("the test", 4096, &fs, &diag) == 0);
	e.n = 0;
	proc_start(&p);
	REQUIRE(ptd_forkstop_follow(fs, p.pid, 55) == 0);
	proc_ask(&p, 's');
	pf = (struct pollfd){ .fd = p.res, .events = POLLIN };
	for (int i = 0; i < 60000 && poll(&pf, 1, 1) == 0; i++)
		cont_stopped_children(p.pid);
	REQUIRE(read(p.res, &r, 1) == 1);
	CHECK_EQ_INT(r, 0);		/* every exit status as chosen */
	REQUIRE(ptd_forkstop_missed(fs, p.pid, 55, &missed) == 0);
	CHECK_EQ_INT(ptd_forkstop_missed(fs, p.pid, 56, &at_end), -ENOENT);
	(void)collect(&e, 0, 0);
	fprintf(stderr, "  unread ring: %u reported, %llu missed of %d\n",
		e.n, (unsigned long long)missed, STORM);
	CHECK(e.n > 0);
	CHECK(missed > 0);
	CHECK_EQ_U64(e.n + missed, STORM);
	CHECK_EQ_INT(ptd_forkstop_unfollow(fs, p.pid, 55, &at_end), 0);
	CHECK_EQ_U64(at_end, missed);
	proc_end(&p);
}

int main(void)
{
	struct ptd_diag diag = { "" };
	int fds[2], r;

	if (geteuid() != 0)
		SKIP_ALL("the fork stopper loads BPF programs: run as root");
	r = ptd_forkstop_new("children with the intel_pt source", 0, &fs,
			     &diag);
	if (r == -PTD_EUNSUPPORTED || r == -EPERM)
		SKIP_ALL("%s", diag.msg);
	if (r < 0) {
		fprintf(stderr, "cannot load the fork stopper: %s\n", diag.msg);
		return 1;
	}
	if (pipe2(fds, O_CLOEXEC) < 0)
		return 1;
	out_r = fds[0];
	out_w = fds[1];
	/* the children's writes are read without waiting */
	(void)fcntl(out_r, F_SETFL, O_NONBLOCK);
	RUN(test_threads);
	RUN(test_vfork);
	RUN(test_grandchild);
	RUN(test_not_followed);
	RUN(test_storm);
	RUN(test_missed);
	ptd_forkstop_free(fs, NULL, NULL);
	return check_done();
}
