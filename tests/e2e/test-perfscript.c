// SPDX-License-Identifier: MIT
/*
 * Cross-check with perf itself: trace test programs with the software
 * source, export each capture as perf.data (perfdata/write.h), let
 * Debian's perf 6.1 decode it (`perf script --itrace=i1i -F tid,ip`) and
 * require, per thread, exactly the instructions the process executed
 * (ground truth), instruction by instruction.  A mismatch reports the
 * first differing index with the expected and actual IP.
 *
 * Programs: loop, recursion, signal, longjmp, jumptable, fnptr, repstr,
 * threads (3 threads), dlopen (a library mapped, called, unmapped), vdso
 * (code from the vDSO snapshot, mapped from its file); fnptr with
 * noretcomp, a 256-byte PSB period and TSC packets.  prog-jit,
 * prog-exec and prog-fork matched as well when tried by hand; they are left
 * out to keep this test under its time budget under ASan (tracing is the
 * slow part), and because perf's per-thread decode sees only the final
 * image (see perfdata/write.h), a JIT that rewrites code in place would not
 * be decodable by perf in general.
 *
 * Skips (77) when perf is not installed or cannot run.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "perfdata/write.h"
#include "swpt/capture.h"
#include "swpt/tracer.h"

static const char *progs_dir;
static char workdir[256];

/* IPs perf printed for one thread. */
struct perf_thread {
	long tid;
	uint64_t *ips;
	size_t n, cap;
};

struct perf_out {
	struct perf_thread t[16];
	size_t nt;
	unsigned bad_lines;
	char first_bad[256];
};

static void perf_out_free(struct perf_out *o)
{
	for (size_t i = 0; i < o->nt; i++)
		free(o->t[i].ips);
}

static struct perf_thread *perf_thread_get(struct perf_out *o, long tid)
{
	for (size_t i = 0; i < o->nt; i++)
		if (o->t[i].tid == tid)
			return &o->t[i];
	if (o->nt == (sizeof(o->t) / sizeof(o->t[0])))
		return NULL;
	memset(&o->t[o->nt], 0, sizeof(o->t[0]));
	o->t[o->nt].tid = tid;
	return &o->t[o->nt++];
}

static int push_ip(struct perf_thread *t, uint64_t ip)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 65536;
		uint64_t *p = realloc(t->ips, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		t->ips = p;
		t->cap = cap;
	}
	t->ips[t->n++] = ip;
	return 0;
}

/* Whether perf can run at all. */
static bool perf_usable(void)
{
	return system("perf version >/dev/null 2>&1") == 0;
}

/* Run perf script on @file; parse "TID IP" lines.  perf's stderr goes to
 * @file.err (shown on failure). */
static int run_perf(const char *file, struct perf_out *o)
{
	char cmd[2048], line[256];
	FILE *f;
	int st;

	memset(o, 0, sizeof(*o));
	/* -f: no ownership check (the file is ours anyway). */
	(void)snprintf(cmd, sizeof(cmd),
		       "perf script -f -i '%s' --itrace=i1i -F tid,ip "
		       "2>'%s.err'", file, file);
	f = popen(cmd, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		long tid;
		uint64_t ip;
		struct perf_thread *t;

		if (sscanf(line, "%ld %" SCNx64, &tid, &ip) != 2) {
			if (!o->bad_lines++)
				(void)snprintf(o->first_bad,
					       sizeof(o->first_bad), "%s",
					       line);
			continue;
		}
		t = perf_thread_get(o, tid);
		if (!t || push_ip(t, ip) < 0) {
			(void)pclose(f);
			return -ENOMEM;
		}
	}
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void show_err_file(const char *file)
{
	char path[600], *text = NULL;
	size_t n = 0;

	(void)snprintf(path, sizeof(path), "%s.err", file);
	if (ptd_file_read_all(path, 4096, &text, &n) == 0 && n)
		fprintf(stderr, "  perf said: %.2000s\n", text);
	free(text);
}

/* Compare thread @idx of @c with what perf printed for it. */
static void compare_thread(const struct ptd_capture *c, size_t idx,
			   const struct perf_out *o, const char *name)
{
	struct ptd_diag diag = { "" };
	uint64_t *truth = NULL;
	size_t ntruth = 0, n;
	const struct perf_thread *t = NULL;
	long tid = c->threads[idx].tid;

	if (ptd_capture_read_truth(c, idx, &truth, &ntruth, &diag) < 0) {
		CHECK_FAIL_("%s: reading truth: %s", name, diag.msg);
		return;
	}
	for (size_t i = 0; i < o->nt; i++)
		if (o->t[i].tid == tid)
			t = &o->t[i];
	n = t ? t->n : 0;
	fprintf(stderr, "  %s tid %ld: truth %zu, perf %zu\n", name, tid,
		ntruth, n);
	for (size_t i = 0; i < ntruth && i < n; i++) {
		if (truth[i] != t->ips[i]) {
			CHECK_FAIL_("%s tid %ld: instruction %zu: expected "
				    "0x%" PRIx64 ", perf gave 0x%" PRIx64,
				    name, tid, i, truth[i], t->ips[i]);
			free(truth);
			return;
		}
	}
	if (n != ntruth)
		CHECK_FAIL_("%s tid %ld: expected %zu instructions, perf gave "
			    "%zu (equal up to there)", name, tid, ntruth, n);
	free(truth);
}

/* Trace prog-@name @arg (NULL: none), export, decode with perf, compare
 * every thread (@want_threads of them). */
static void cross_check(const char *label, const char *name, const char *arg,
			const struct ptd_ptgen_config *gen,
			size_t want_threads)
{
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	struct ptd_capture c;
	struct perf_out o;
	char prog[512], dir[512], file[600];
	char *argv[] = { prog, (char *)arg, NULL };
	int r;

	(void)snprintf(prog, sizeof(prog), "%s/prog-%s", progs_dir, name);
	(void)snprintf(dir, sizeof(dir), "%s/%s", workdir, label);
	(void)snprintf(file, sizeof(file), "%s/%s.perf.data", workdir, label);
	memset(&so, 0, sizeof(so));
	if (gen)
		so.gen = *gen;
	so.outdir = dir;
	so.quiet_target = true;
	r = ptd_swpt_run(argv, &so, &res, &diag);
	if (r == -EPERM)
		SKIP_ALL("ptrace refused: %s", diag.msg);
	if (r < 0) {
		CHECK_FAIL_("tracing %s: %s", label, diag.msg);
		return;
	}
	REQUIRE(ptd_capture_load(dir, &c, &diag) == 0);
	CHECK_EQ_INT(c.nthreads, want_threads);
	r = ptd_perfdata_write_capture(&c, file, &diag);
	if (r < 0) {
		CHECK_FAIL_("writing %s: %s", file, diag.msg);
		ptd_capture_fini(&c);
		return;
	}
	r = run_perf(file, &o);
	if (r != 0) {
		CHECK_FAIL_("%s: perf script exited with %d", label, r);
		show_err_file(file);
	}
	if (o.bad_lines) {
		CHECK_FAIL_("%s: %u lines of perf output not \"TID IP\", the "
			    "first: %s", label, o.bad_lines, o.first_bad);
		show_err_file(file);
	}
	for (size_t i = 0; i < c.nthreads; i++)
		compare_thread(&c, i, &o, label);
	/* perf must not have invented threads */
	CHECK_EQ_INT(o.nt, c.nthreads);
	perf_out_free(&o);
	ptd_capture_fini(&c);
	(void)ptd_rm_rf(dir);
	(void)unlink(file);
}

static void test_loop(void) { cross_check("loop", "loop", "0", NULL, 1); }
static void test_recursion(void)
{
	cross_check("recursion", "recursion", NULL, NULL, 1);
}
static void test_signal(void) { cross_check("signal", "signal", NULL, NULL, 1); }
static void test_longjmp(void)
{
	cross_check("longjmp", "longjmp", NULL, NULL, 1);
}
static void test_jumptable(void)
{
	cross_check("jumptable", "jumptable", NULL, NULL, 1);
}
static void test_repstr(void) { cross_check("repstr", "repstr", NULL, NULL, 1); }
static void test_threads(void)
{
	cross_check("threads", "threads", NULL, NULL, 3);
}
static void test_vdso(void) { cross_check("vdso", "vdso", NULL, NULL, 1); }

static void test_dlopen(void)
{
	char lib[512];

	(void)snprintf(lib, sizeof(lib), "%s/libptdtarget.so", progs_dir);
	cross_check("dlopen", "dlopen", lib, NULL, 1);
}

/* With noretcomp (attr config bit + AUXTRACE_INFO), PSBs every 256 bytes
 * (the return stack cleared often) and TSC packets. */
static void test_fnptr_noretcomp(void)
{
	struct ptd_ptgen_config gen;

	memset(&gen, 0, sizeof(gen));
	gen.noretcomp = true;
	gen.psb_period = 256;
	gen.tsc = true;
	cross_check("fnptr-noretcomp", "fnptr", NULL, &gen, 1);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	if (!perf_usable())
		SKIP_ALL("perf is not installed or cannot run "
			 "('perf version' failed)");
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-perfscript-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir)) {
		fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(test_loop);
	RUN(test_recursion);
	RUN(test_signal);
	RUN(test_longjmp);
	RUN(test_jumptable);
	RUN(test_fnptr_noretcomp);
	RUN(test_repstr);
	RUN(test_threads);
	RUN(test_dlopen);
	RUN(test_vdso);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	else
		fprintf(stderr, "files kept in %s\n", workdir);
	return check_done();
}
