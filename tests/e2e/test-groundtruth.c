/* SPDX-License-Identifier: MIT */
/*
 * The core promise, proved on real programs: run each one under the
 * software PT source, decode every thread on the instruction path and on the
 * block path, and require that both give exactly the instructions the
 * process executed (ground truth), and identical records.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "decode/decoder.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"
#include "swpt/tracer.h"

static const char *progs_dir;
static char workdir[256];

/* Trace @argv into a fresh capture directory; returns its path. */
static const char *trace_from(const char *name, char *const argv[],
			      const struct ptd_ptgen_config *gen,
			      enum ptd_swpt_start start,
			      struct ptd_swpt_result *res)
{
	static char dir[512];
	struct ptd_swpt_options so;
	struct ptd_diag diag = { "" };
	int r;

	(void)snprintf(dir, sizeof(dir), "%s/%s", workdir, name);
	memset(&so, 0, sizeof(so));
	if (gen)
		so.gen = *gen;
	so.outdir = dir;
	so.quiet_target = true;
	so.start = start;
	r = ptd_swpt_run(argv, &so, res, &diag);
	if (r < 0) {
		CHECK_FAIL_("tracing %s failed: %s (%s)", name, diag.msg,
			    ptd_strerror(r));
		return NULL;
	}
	return dir;
}

/* Trace @argv from its exec (the dynamic loader's first instruction). */
static const char *trace(const char *name, char *const argv[],
			 const struct ptd_ptgen_config *gen,
			 struct ptd_swpt_result *res)
{
	return trace_from(name, argv, gen, PTD_SWPT_START_EXEC, res);
}

/* Verify a capture against its ground truth; print the verdict per
 * thread. */
static void verify(const char *dir, size_t want_threads,
		   struct ptd_capture *ret_c)
{
	struct ptd_verify_report rep;
	struct ptd_diag diag = { "" };
	struct ptd_capture c;
	size_t i;
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
	CHECK_EQ_INT(rep.nthreads, want_threads);
	for (i = 0; i < rep.nthreads; i++) {
		const struct ptd_verify_thread *t = &rep.threads[i];

		fprintf(stderr, "  tid %ld: %s, %llu executed\n",
			(long)t->tid, t->ok ? "ok" : t->why,
			(unsigned long long)t->truth);
		if (!t->ok)
			CHECK_FAIL_("thread %ld: %s", (long)t->tid, t->why);
		CHECK(t->truth > 0);
	}
	CHECK(rep.ok);
	ptd_verify_report_fini(&rep);
	if (ret_c)
		*ret_c = c;
	else
		ptd_capture_fini(&c);
}

static char *prog(const char *name)
{
	static char path[8][512];
	static unsigned next;
	char *p = path[next++ % 8];

	(void)snprintf(p, 512, "%s/prog-%s", progs_dir, name);
	return p;
}

/* Trace prog-@name with default settings, then with noretcomp and a tiny
 * PSB period (many PSBs mid-flow, return stack cleared often); the second
 * run from the program's entry point: the dynamic loader, the same in
 * every program, is in the first. */
static void simple(const char *name, size_t threads)
{
	struct ptd_ptgen_config gen;
	struct ptd_swpt_result res;
	char sub[64];
	char *argv[] = { prog(name), NULL };
	const char *dir;

	dir = trace(name, argv, NULL, &res);
	REQUIRE(dir);
	CHECK(res.exited);
	CHECK_EQ_INT(res.exit_code, 0);
	verify(dir, threads, NULL);

	memset(&gen, 0, sizeof(gen));
	gen.noretcomp = true;
	gen.psb_period = 256;
	gen.tsc = true;
	(void)snprintf(sub, sizeof(sub), "%s-noretcomp", name);
	dir = trace_from(sub, argv, &gen, PTD_SWPT_START_ENTRY, &res);
	REQUIRE(dir);
	verify(dir, threads, NULL);
}

static void test_recursion(void) { simple("recursion", 1); }
static void test_fnptr(void) { simple("fnptr", 1); }
static void test_jumptable(void) { simple("jumptable", 1); }
static void test_longjmp(void) { simple("longjmp", 1); }
static void test_signal(void) { simple("signal", 1); }
static void test_threads(void) { simple("threads", 3); }

/* Whether some timeline event of @c is @op and names @needle. */
static bool timeline_has(const struct ptd_capture *c, enum ptd_tl_op op,
			 const char *needle)
{
	for (size_t i = 0; i < c->tl.n; i++) {
		const struct ptd_tl_event *e = &c->tl.ev[i];
		const char *s = e->name ? e->name : e->path;

		if (e->op == op && (!needle || (s && strstr(s, needle))))
			return true;
	}
	return false;
}

static void test_exec(void)
{
	struct ptd_swpt_result res;
	struct ptd_capture c;
	char *argv[] = { prog("exec"), NULL };
	const char *dir = trace("exec", argv, NULL, &res);

	REQUIRE(dir);
	CHECK_EQ_INT(res.exit_code, 0);
	memset(&c, 0, sizeof(c));
	verify(dir, 1, &c);
	CHECK(timeline_has(&c, PTD_TL_EXEC, NULL));
	ptd_capture_fini(&c);
}

/* Snapshot events of non-file code other than the vDSO. */
static unsigned anon_snapshots(const struct ptd_capture *c)
{
	unsigned n = 0;

	for (size_t i = 0; i < c->tl.n; i++)
		if (c->tl.ev[i].op == PTD_TL_SNAPSHOT && c->tl.ev[i].name &&
		    strcmp(c->tl.ev[i].name, "[vdso]"))
			n++;
	return n;
}

static void test_jit(void)
{
	struct ptd_swpt_result res;
	struct ptd_capture c;
	char *argv[] = { prog("jit"), NULL };
	const char *dir = trace("jit", argv, NULL, &res);

	REQUIRE(dir);
	CHECK_EQ_INT(res.exit_code, 0);
	memset(&c, 0, sizeof(c));
	verify(dir, 1, &c);
	/* Snapshotted when first run, and again after the rewrite. */
	CHECK(anon_snapshots(&c) >= 2);
	ptd_capture_fini(&c);
}

static void test_vdso(void)
{
	struct ptd_swpt_result res;
	struct ptd_capture c;
	char *argv[] = { prog("vdso"), NULL };
	const char *dir = trace("vdso", argv, NULL, &res);

	REQUIRE(dir);
	memset(&c, 0, sizeof(c));
	verify(dir, 1, &c);
	CHECK(timeline_has(&c, PTD_TL_SNAPSHOT, "[vdso]"));
	ptd_capture_fini(&c);
}

static void test_dlopen(void)
{
	struct ptd_swpt_result res;
	struct ptd_capture c;
	char lib[512];
	char *argv[] = { prog("dlopen"), lib, NULL };
	const char *dir;

	(void)snprintf(lib, sizeof(lib), "%s/libptdtarget.so", progs_dir);
	dir = trace("dlopen", argv, NULL, &res);
	REQUIRE(dir);
	CHECK_EQ_INT(res.exit_code, 0);
	memset(&c, 0, sizeof(c));
	verify(dir, 1, &c);
	CHECK(timeline_has(&c, PTD_TL_MAP, "libptdtarget.so"));
	CHECK(timeline_has(&c, PTD_TL_UNMAP, NULL));
	ptd_capture_fini(&c);
}

/* Count decoded instructions of module @mod whose bytes start with @raw. */
struct raw_count {
	const char *mod;
	const uint8_t *raw;
	size_t len;
	unsigned n;
};

static int count_raw(void *ctx, const struct ptd_record *r)
{
	struct raw_count *rc = ctx;

	if (r->type == PTD_REC_INSN && strstr(r->u.insn.module, rc->mod) &&
	    r->u.insn.size >= rc->len &&
	    !memcmp(r->u.insn.raw, rc->raw, rc->len))
		rc->n++;
	return 0;
}

static unsigned count_insns(const struct ptd_capture *c, const char *mod,
			    const uint8_t *raw, size_t len)
{
	struct raw_count rc = { mod, raw, len, 0 };
	struct ptd_decode_opts o;
	struct ptd_diag diag = { "" };

	memset(&o, 0, sizeof(o));
	o.path = PTD_PATH_BLOCK;
	o.want = PTD_REC_BIT(PTD_REC_INSN);
	if (ptd_capture_decode_thread(c, 0, &o, NULL, NULL, NULL, count_raw,
				      &rc, NULL, &diag) < 0)
		CHECK_FAIL_("replay: %s", diag.msg);
	return rc.n;
}

static void test_repstr(void)
{
	static const uint8_t movsb[] = { 0xf3, 0xa4 };
	static const uint8_t stosq[] = { 0xf3, 0x48, 0xab };
	static const uint8_t stosb[] = { 0xf3, 0xaa };
	struct ptd_swpt_result res;
	struct ptd_capture c;
	char *argv[] = { prog("repstr"), NULL };
	const char *dir = trace("repstr", argv, NULL, &res);

	REQUIRE(dir);
	CHECK_EQ_INT(res.exit_code, 0);
	/* 4096 + 512 + 0 iterations were single-stepped (in either mode)... */
	CHECK(res.steps > 4096 + 512);
	memset(&c, 0, sizeof(c));
	verify(dir, 1, &c);
	/* ...but each REP instruction is one instruction. */
	CHECK_EQ_INT(count_insns(&c, "prog-repstr", movsb, sizeof(movsb)), 1);
	CHECK_EQ_INT(count_insns(&c, "prog-repstr", stosq, sizeof(stosq)), 1);
	CHECK_EQ_INT(count_insns(&c, "prog-repstr", stosb, sizeof(stosb)), 1);
	ptd_capture_fini(&c);
}

static void test_fork(void)
{
	struct ptd_swpt_result res;
	char *argv[] = { prog("fork"), NULL };
	const char *dir = trace("fork", argv, NULL, &res);

	REQUIRE(dir);
	/* The parent exits 0 only if the child exited 42 by itself. */
	CHECK(res.exited);
	CHECK_EQ_INT(res.exit_code, 0);
	CHECK_EQ_INT(res.forks_detached, 1);
	verify(dir, 1, NULL);
}

static void test_system_ls(void)
{
	struct ptd_swpt_result res;
	char *argv[] = { "/bin/ls", "/usr", NULL };
	const char *dir;

	if (access("/bin/ls", X_OK) != 0)
		SKIP_ALL("/bin/ls not present");
	dir = trace("ls", argv, NULL, &res);
	REQUIRE(dir);
	CHECK_EQ_INT(res.exit_code, 0);
	CHECK(res.insns > 100000);
	verify(dir, 1, NULL);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-gt-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir)) {
		fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(test_recursion);
	RUN(test_fnptr);
	RUN(test_jumptable);
	RUN(test_longjmp);
	RUN(test_signal);
	RUN(test_vdso);
	RUN(test_dlopen);
	RUN(test_repstr);
	RUN(test_threads);
	RUN(test_exec);
	RUN(test_jit);
	RUN(test_fork);
	RUN(test_system_ls);
	if (!check_failures || getenv("PTD_TEST_CLEANUP_ALWAYS"))
		(void)ptd_rm_rf(workdir);
	else
		fprintf(stderr, "captures kept in %s\n", workdir);
	return check_done();
}
