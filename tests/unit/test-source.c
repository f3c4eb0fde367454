/* SPDX-License-Identifier: MIT */
/*
 * The trace sources through their interface (source/source.h), with no
 * session around them and only lib/ linked: the software source attached
 * to a running multi-threaded program, drained round by round into its
 * decoders, with the host's memory charge refusing every thread but the
 * first; and intel_pt on a fake PMU tree up to the kernel's refusal, its
 * address filter refused where the PMU has no ranges, and a host that
 * follows children refused; a snapshot session's ended threads, their
 * last trace kept for the snapshots (charged at its size, dropped when
 * the host refuses it) and let go once read.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "target.h"
#include "common/fileio.h"
#include "source/source.h"

static const char *progs_dir;
static char workdir[128];

struct host {
	unsigned charged, refused;
	uint64_t records, insns;
	pid_t tid;		/* the one thread whose records came */
	bool other_tid;		/* a record of another thread */
	bool refuse_keep;	/* host.keep refuses */
	uint64_t kept;		/* host.keep's bytes, less unkeep's */
};

static int on_record(void *ctx, const struct ptd_record *rec)
{
	struct host *h = ctx;

	h->records++;
	if (rec->type != PTD_REC_INSN)
		return 0;
	h->insns++;
	if (!h->tid)
		h->tid = rec->tid;
	else if (rec->tid != h->tid)
		h->other_tid = true;
	return 0;
}

/* The first thread may be traced, no other. */
static int on_charge(void *ctx, pid_t tid)
{
	struct host *h = ctx;

	(void)tid;
	if (h->charged++ == 0)
		return 1;
	h->refused++;
	return 0;
}

static void on_child(void *ctx, pid_t pid)
{
	(void)ctx;
	(void)pid;
}

static void on_signal(int sig)
{
	(void)sig;
}

static double now(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Each source its own directory, as each session has (their snapshot
 * files are numbered from 0 in it, and never written over). */
static const char *source_dir(void)
{
	static char dirs[4][PATH_MAX];
	static unsigned n;
	char *d = dirs[n++ % 4];

	(void)snprintf(d, PATH_MAX, "%s/source-%u", workdir, n);
	if (mkdir(d, 0700) < 0)
		CHECK_FAIL_("mkdir %s: %s", d, strerror(errno));
	return d;
}

static void params_init(struct ptd_source_params *p, pid_t pid,
			atomic_int *stop, int wake_fd, struct host *h)
{
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->data_size = 16u << 10;
	p->aux_size = 64u << 10;
	p->max_buffered = 16u << 20;
	p->dir = source_dir();
	p->wake_fd = wake_fd;
	p->stop = stop;
	p->signo = SIGUSR2;
	p->host.ctx = h;
	p->host.record = on_record;
	p->host.charge = on_charge;
}

/* A software source with @p, started; NULL (said why) if not. */
static struct ptd_source *software_start(const struct ptd_source_params *p)
{
	struct ptd_diag diag = { "" };
	struct ptd_source *s = NULL;
	int r = ptd_source_software_new(p, &s, &diag);

	if (r == 0 && (r = ptd_source_start(s, &diag)) < 0)
		ptd_source_free(s);
	if (r < 0) {
		CHECK_FAIL_("software source: %s (%s)", diag.msg,
			    ptd_strerror(r));
		return NULL;
	}
	return s;
}

static void test_software(void)
{
	struct ptd_source_params p;
	struct ptd_source_result res;
	struct ptd_source_stats st;
	struct ptd_diag diag = { "" };
	struct ptd_source *s = NULL;
	struct host h = { 0 };
	atomic_int stop = 0;
	struct target t;
	double until;
	int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int r = 0;
	bool last = false;

	REQUIRE(wake_fd >= 0);
	REQUIRE(target_start(progs_dir, 20.0, &t) == 0);
	params_init(&p, t.pid, &stop, wake_fd, &h);
	s = software_start(&p);
	REQUIRE(s);
	/* rounds until enough came, then detach, as a session does */
	until = now() + 10;
	while (!last) {
		struct pollfd pf = { wake_fd, POLLIN, 0 };
		uint64_t v;

		last = ptd_source_ending(s);
		r = ptd_source_drain(s, last, &diag);
		if (r < 0)
			break;
		if (!atomic_load(&stop) && (h.insns > 20000 || now() > until)) {
			atomic_store(&stop, 1);
			ptd_source_stop(s);
		}
		if (atomic_load(&stop))
			ptd_source_kick(s);
		if (poll(&pf, 1, (int)ptd_source_poll_ms(s)) > 0)
			(void)!read(wake_fd, &v, sizeof(v));
	}
	if (r < 0) {
		CHECK_FAIL_("drain: %s (%s)", diag.msg, ptd_strerror(r));
		ptd_source_cancel(s, &diag);
	}
	ptd_source_result(s, &res);
	CHECK_EQ_INT(res.err, 0);
	CHECK(!res.exited);
	ptd_source_get_stats(s, &st);
	fprintf(stderr, "  %llu records, %llu insns of thread %d; %u threads "
		"charged, %u refused; %u traced, %llu bytes\n",
		(unsigned long long)h.records, (unsigned long long)h.insns,
		(int)h.tid, h.charged, h.refused, st.threads,
		(unsigned long long)st.trace_bytes);
	CHECK(h.insns > 0);
	CHECK(!h.other_tid);
	/* prog-attach runs three threads at least: all but one refused */
	CHECK(h.refused >= 2);
	CHECK_EQ_INT(st.threads, 1);
	CHECK(st.trace_bytes > 0);
	CHECK_EQ_U64(st.lost_bytes, 0);
	ptd_source_free(s);
	CHECK_EQ_INT(target_traced_threads(t.pid), 0);
	CHECK(target_tell(t.pid) == 0);
	target_finish(&t);
	(void)close(wake_fd);
}

static int on_keep(void *ctx, uint64_t bytes)
{
	struct host *h = ctx;

	if (h->refuse_keep)
		return -ENOMEM;
	h->kept += bytes;
	return 0;
}

static void on_unkeep(void *ctx, uint64_t bytes)
{
	struct host *h = ctx;

	CHECK(bytes <= h->kept);
	h->kept -= bytes;
}

/* A snapshot of @s taken as a session does, with @upto (0: none):
 * the threads in it other than @leader, each decoded to instructions. */
static unsigned snapshot_others(struct ptd_source *s, pid_t leader,
				pid_t upto, pid_t *ret_tid)
{
	struct ptd_snapshot_info *in = calloc(1, sizeof(*in));
	struct ptd_diag diag = { "" };
	unsigned n = 0;
	int r;

	if (!in) {
		CHECK_FAIL_("%s", "out of memory");
		return 0;
	}
	in->upto_tid = upto;
	r = ptd_source_snapshot_read(s, in, &diag);
	CHECK_EQ_INT(r, 0);
	ptd_source_snapshot_decode(s, in, r);
	CHECK_EQ_INT(in->err, 0);
	for (unsigned i = 0; i < in->nlisted; i++) {
		if (in->th[i].tid == leader)
			continue;
		CHECK(in->th[i].bytes > 0 && in->th[i].insns > 0);
		if (ret_tid)
			*ret_tid = in->th[i].tid;
		n++;
	}
	free(in);
	return n;
}

/* A snapshot source on prog-onebyone: N threads, one after another, each
 * ended before the next; rounds until all are ended and let go. */
static void snapshot_ended(bool refuse)
{
	enum { N = 3 };
	struct ptd_source_params p;
	struct ptd_source_stats st;
	struct ptd_diag diag = { "" };
	struct ptd_source *s = NULL;
	struct host h = { 0 };
	atomic_int stop = 0;
	int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct ptd_source_result res;
	int in = -1, out = -1, r = 0;
	pid_t pid, tid = 0;
	char c = 0;
	double until;

	REQUIRE(wake_fd >= 0);
	pid = spawn_piped(progs_dir, "prog-onebyone", &in, &out);
	REQUIRE(pid > 0);
	params_init(&p, pid, &stop, wake_fd, &h);
	p.snapshot = true;
	p.host.charge = NULL;
	p.host.keep = on_keep;
	p.host.unkeep = on_unkeep;
	h.refuse_keep = refuse;
	s = software_start(&p);
	REQUIRE(s);
	for (int i = 0; i < N; i++) {
		struct pollfd pf = { out, POLLIN, 0 };

		REQUIRE(write(in, "+", 1) == 1);
		/* (the tracer runs on its own thread: the rounds need not
		 * run meanwhile) */
		REQUIRE(poll(&pf, 1, 60000) == 1 && read(out, &c, 1) == 1);
	}
	until = now() + 20;
	do {
		r = ptd_source_drain(s, false, &diag);
		ptd_source_get_stats(s, &st);
		if (r < 0 ||
		    (refuse ? st.dropped_threads : st.kept_threads) >= N)
			break;
		(void)poll(NULL, 0, 10);
	} while (now() < until);
	CHECK_EQ_INT(r, 0);
	fprintf(stderr, "  %u threads; windows kept %u (%llu bytes), dropped "
		"%u (%llu bytes)\n", st.threads, st.kept_threads,
		(unsigned long long)st.kept_bytes, st.dropped_threads,
		(unsigned long long)st.dropped_bytes);
	CHECK_EQ_INT(st.threads, 1 + N);
	CHECK_EQ_INT(st.threads_live, 1);
	if (refuse) {
		CHECK_EQ_INT(st.dropped_threads, N);
		CHECK(st.dropped_bytes > 0);
		CHECK_EQ_INT(st.kept_threads, 0);
		CHECK_EQ_INT(snapshot_others(s, pid, 0, NULL), 0);
	} else {
		CHECK_EQ_INT(st.kept_threads, N);
		CHECK_EQ_INT(st.dropped_threads, 0);
		CHECK_EQ_U64(h.kept, st.kept_bytes);
		/* every ended thread in the next snapshot */
		CHECK_EQ_INT(snapshot_others(s, pid, 0, &tid), N);
		/* read: they go at the next, but a trigger's thread is in
		 * it once more */
		CHECK_EQ_INT(snapshot_others(s, pid, tid, NULL), 1);
		ptd_source_get_stats(s, &st);
		CHECK_EQ_INT(st.kept_threads, 1);
		CHECK_EQ_U64(h.kept, st.kept_bytes);
		CHECK_EQ_INT(snapshot_others(s, pid, 0, NULL), 0);
		ptd_source_get_stats(s, &st);
		CHECK_EQ_INT(st.kept_threads, 0);
	}
	CHECK_EQ_U64(h.kept, 0);
	/* at the end of its input it exits, and the source ends */
	close(in);
	until = now() + 20;
	while (!ptd_source_ending(s) && now() < until &&
	       ptd_source_drain(s, false, &diag) == 0)
		(void)poll(NULL, 0, 10);
	CHECK_EQ_INT(ptd_source_drain(s, true, &diag), 0);
	ptd_source_result(s, &res);
	CHECK(res.exited && res.exit_code == 0 && !res.exit_signal);
	ptd_source_free(s);
	(void)waitpid(pid, NULL, 0);	/* (the tracer may have reaped it) */
	close(out);
	(void)close(wake_fd);
}

static void test_snapshot_ended(void)
{
	snapshot_ended(false);
}

static void test_snapshot_ended_dropped(void)
{
	snapshot_ended(true);
}

/* A Skylake's PMU tree with a PMU type no kernel has: the events reach
 * the kernel, whose refusal names them; with no address ranges, a filter
 * is refused before. */
static void test_intelpt_fake_pmu(void)
{
	const char *data = getenv("PTD_TEST_DATA");
	struct ptd_source_params p;
	struct ptd_diag diag = { "" };
	struct ptd_source *s = NULL;
	struct ptd_pt_pmu pmu;
	struct host h = { 0 };
	atomic_int stop = 0;
	char dir[256], cmd[1024];
	struct target t;
	int r;

	if (!data) {
		fprintf(stderr, "  skipped: PTD_TEST_DATA is not set\n");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/pmu", workdir);
	snprintf(cmd, sizeof(cmd), "cp -r %s/sysfs/skylake %s && "
		 "echo 999999 > %s/type", data, dir, dir);
	REQUIRE(system(cmd) == 0);
	REQUIRE(ptd_pt_pmu_probe(dir, &pmu, &diag) == 0);
	REQUIRE(target_start(progs_dir, 20.0, &t) == 0);
	params_init(&p, t.pid, &stop, -1, &h);
	for (int per_cpu = 0; per_cpu < 2; per_cpu++) {
		p.per_cpu = per_cpu;
		REQUIRE(ptd_source_intelpt_new(&p, &pmu, &s, &diag) == 0);
		r = ptd_source_start(s, &diag);
		CHECK(r < 0);
		CHECK_CONTAINS(diag.msg, "PMU type 999999");
		fprintf(stderr, "  %s\n", diag.msg);
		ptd_source_free(s);
	}
	/* children: refused by name, with why (intelpt.c: the host stops
	 * them, as ptd's fork stopper does), before any event is opened */
	p.per_cpu = false;
	p.host.child = on_child;
	s = (struct ptd_source *)&h;
	CHECK_EQ_INT(ptd_source_intelpt_new(&p, &pmu, &s, &diag),
		     -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(diag.msg, "children: the intel_pt source does not "
		       "follow a child process itself");
	CHECK(s == (struct ptd_source *)&h);	/* *ret untouched */
	p.host.child = NULL;
	pmu.nr_addr_filters = 0;
	REQUIRE(ptd_source_intelpt_new(&p, &pmu, &s, &diag) == 0);
	CHECK_EQ_INT(ptd_source_set_filter(s, "filter 0x1000/0x100", &diag),
		     -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(diag.msg, "nr_addr_filters is 0");
	ptd_source_free(s);
	ptd_source_free(NULL);
	CHECK_EQ_INT(h.records, 0);
	CHECK(target_tell(t.pid) == 0);
	target_finish(&t);
}

int main(void)
{
	char tmpl[] = "/tmp/ptd-source-test-XXXXXX";
	struct sigaction sa;

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set");
	if (!mkdtemp(tmpl))
		SKIP_ALL("mkdtemp: %s", strerror(errno));
	(void)snprintf(workdir, sizeof(workdir), "%s", tmpl);
	/* the signal that gets the tracer out of waitpid (no SA_RESTART) */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	(void)sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGUSR2, &sa, NULL);
	RUN(test_intelpt_fake_pmu);
	RUN(test_software);
	RUN(test_snapshot_ended);
	RUN(test_snapshot_ended_dropped);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	return check_done();
}
