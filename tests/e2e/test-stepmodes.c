/* SPDX-License-Identifier: MIT */
/*
 * Branch mode against the reference: every test program is traced twice,
 * single-stepped and in branch mode (swpt/tracer.h, step), with address
 * space randomisation off so both runs execute the same addresses.  Both
 * captures must decode to exactly their ground truth on both decoder
 * paths, and for the programs whose run does not depend on timing the two
 * truths and the two PT streams must be identical, byte for byte.  Branch
 * mode must also stop far less often than it executes instructions.
 *
 * The programs are traced from their entry point (PTD_SWPT_START_ENTRY):
 * the ~100 k instructions of the dynamic loader that precede every one of
 * them are the same each time, and single-stepping them a dozen times
 * proved nothing new.  The loader is compared in both modes once, in full:
 * prog-exec execs itself, and the new image is traced from its exec.
 * test_start_entry checks tracing from the entry itself.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "swpt/capture.h"
#include "swpt/capdecode.h"
#include "swpt/tracer.h"

static const char *progs_dir;
static char workdir[256];

struct pcase {
	const char *name;
	bool lib;		/* argv[1]: the test library */
	size_t threads;
	/* Timing changes what runs: the truths may differ between any two
	 * runs, single-stepped or not (only each run's own verdict counts).
	 * The reason is in the table. */
	bool timing;
	/* REP iterations are stops in both modes (and most of this run) */
	bool rep;
};

static const struct pcase cases[] = {
	{ "recursion", false, 1, false },
	{ "fnptr", false, 1, false },
	{ "jumptable", false, 1, false },
	{ "longjmp", false, 1, false },
	{ "repstr", false, 1, false, true },
	{ "exec", false, 1, false },
	{ "jit", false, 1, false },
	{ "fork", false, 1, false },
	{ "spawn", false, 1, false },
	{ "dlopen", true, 1, false },
	/* the alarm lands anywhere in the spin loop */
	{ "signal", false, 1, true },
	/* the main thread's joins wait, or not, on the others' progress */
	{ "threads", false, 3, true },
	/* the vDSO's clock reads retry when the kernel updates its data */
	{ "vdso", false, 1, true },
};

static int trace_from(const char *dir, char *const argv[],
		      enum ptd_swpt_step step, enum ptd_swpt_start start,
		      struct ptd_swpt_result *res, struct ptd_diag *ret_diag)
{
	struct ptd_swpt_options so;
	struct ptd_diag diag = { "" };
	int r;

	memset(&so, 0, sizeof(so));
	so.outdir = dir;
	so.quiet_target = true;
	so.step = step;
	so.start = start;
	r = ptd_swpt_run(argv, &so, res, ret_diag ? ret_diag : &diag);
	if (ret_diag)
		return r;
	if (r < 0)
		CHECK_FAIL_("tracing %s (%s) failed: %s (%s)", argv[0],
			    step == PTD_SWPT_STEP_SINGLE ? "single" : "branch",
			    diag.msg, ptd_strerror(r));
	return r;
}

static int trace(const char *dir, char *const argv[], enum ptd_swpt_step step,
		 struct ptd_swpt_result *res)
{
	return trace_from(dir, argv, step, PTD_SWPT_START_ENTRY, res, NULL);
}

/* Load @dir and check it decodes to its ground truth. */
static bool verified(const char *dir, size_t threads, struct ptd_capture *c)
{
	struct ptd_verify_report rep;
	struct ptd_diag diag = { "" };
	bool ok;

	if (ptd_capture_load(dir, c, &diag) < 0) {
		CHECK_FAIL_("loading %s: %s", dir, diag.msg);
		return false;
	}
	if (ptd_capture_verify(c, &rep, &diag) < 0) {
		CHECK_FAIL_("verifying %s: %s", dir, diag.msg);
		return false;
	}
	ok = rep.ok && rep.nthreads == threads;
	for (size_t i = 0; i < rep.nthreads; i++)
		if (!rep.threads[i].ok)
			CHECK_FAIL_("%s: thread %ld: %s", dir,
				    (long)rep.threads[i].tid, rep.threads[i].why);
	if (rep.nthreads != threads)
		CHECK_FAIL_("%s: %zu threads, expected %zu", dir, rep.nthreads,
			    threads);
	ptd_verify_report_fini(&rep);
	return ok;
}

/* Thread @i's truth and PT in @a and @b are the same. */
static void same_thread(const struct ptd_capture *a,
			const struct ptd_capture *b, size_t i, const char *name)
{
	struct ptd_diag diag = { "" };
	uint64_t *ta = NULL, *tb = NULL;
	uint8_t *pa = NULL, *pb = NULL;
	size_t na = 0, nb = 0, la = 0, lb = 0;

	if (ptd_capture_read_truth(a, i, &ta, &na, &diag) < 0 ||
	    ptd_capture_read_truth(b, i, &tb, &nb, &diag) < 0 ||
	    ptd_capture_read_pt(a, i, &pa, &la, &diag) < 0 ||
	    ptd_capture_read_pt(b, i, &pb, &lb, &diag) < 0) {
		CHECK_FAIL_("%s: %s", name, diag.msg);
		goto out;
	}
	if (na != nb) {
		CHECK_FAIL_("%s thread %zu: %zu instructions single-stepped, "
			    "%zu in branch mode", name, i, na, nb);
	} else {
		for (size_t k = 0; k < na; k++)
			if (ta[k] != tb[k]) {
				CHECK_FAIL_("%s thread %zu: instruction %zu at "
					    "%#" PRIx64 " single-stepped, %#"
					    PRIx64 " in branch mode", name, i,
					    k, ta[k], tb[k]);
				break;
			}
	}
	if (la != lb || memcmp(pa, pb, la) != 0)
		CHECK_FAIL_("%s thread %zu: the PT streams differ (%zu and %zu "
			    "bytes)", name, i, la, lb);
out:
	free(ta);
	free(tb);
	free(pa);
	free(pb);
}

static void run_case(const struct pcase *pc)
{
	char single[512], branch[512], prog[512], lib[512];
	char *argv[] = { prog, pc->lib ? lib : NULL, NULL };
	struct ptd_swpt_result rs, rb;
	struct ptd_capture cs, cb;
	bool oks, okb;

	(void)snprintf(prog, sizeof(prog), "%s/prog-%s", progs_dir, pc->name);
	(void)snprintf(lib, sizeof(lib), "%s/libptdtarget.so", progs_dir);
	(void)snprintf(single, sizeof(single), "%s/%s-single", workdir,
		       pc->name);
	(void)snprintf(branch, sizeof(branch), "%s/%s-branch", workdir,
		       pc->name);
	if (trace(single, argv, PTD_SWPT_STEP_SINGLE, &rs) < 0 ||
	    trace(branch, argv, PTD_SWPT_STEP_BRANCH, &rb) < 0)
		return;
	fprintf(stderr, "  %s: %" PRIu64 " insns in %" PRIu64 " stops "
		"single-stepped, %" PRIu64 " in %" PRIu64 " stops in branch "
		"mode (%" PRIu64 " runs, %" PRIu64 " branches computed)\n",
		pc->name, rs.insns, rs.steps, rb.insns, rb.steps, rb.runs,
		rb.emulated);
	CHECK(!rs.branch);
	CHECK(rb.branch);
	/* the program checks its own results (fork, spawn: its children's) */
	CHECK(rs.exited && rs.exit_code == 0 && rs.exit_signal == 0);
	CHECK(rb.exited && rb.exit_code == 0 && rb.exit_signal == 0);
	if (pc->rep)
		CHECK(rb.steps < rs.steps);
	else
		CHECK(rb.steps * 2 < rb.insns);
	memset(&cs, 0, sizeof(cs));
	memset(&cb, 0, sizeof(cb));
	oks = verified(single, pc->threads, &cs);
	okb = verified(branch, pc->threads, &cb);
	if (oks && okb && !pc->timing) {
		CHECK_EQ_INT(rs.insns, rb.insns);
		CHECK_EQ_INT(cs.nthreads, cb.nthreads);
		for (size_t i = 0; i < cs.nthreads && i < cb.nthreads; i++)
			same_thread(&cs, &cb, i, pc->name);
	}
	ptd_capture_fini(&cs);
	ptd_capture_fini(&cb);
}

/* e_entry of the ELF file @path (0: unreadable) */
static uint64_t elf_entry(const char *path)
{
	Elf64_Ehdr eh;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : pread(fd, &eh, sizeof(eh), 0);

	if (fd >= 0)
		(void)close(fd);
	return n == (ssize_t)sizeof(eh) ? eh.e_entry : 0;
}

/* Thread 0's truth of the capture in @dir (NULL on failure, reported). */
static uint64_t *truth0(const char *dir, size_t *n)
{
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	uint64_t *t = NULL;

	if (!verified(dir, 1, &c))
		return NULL;
	if (ptd_capture_read_truth(&c, 0, &t, n, &diag) < 0)
		CHECK_FAIL_("%s: %s", dir, diag.msg);
	ptd_capture_fini(&c);
	return t;
}

/* Tracing from the entry point gives exactly the tail of the trace from the
 * exec that begins at the program's entry; and what happens before the
 * entry (a preloaded library's constructor) is handled: an exec moves the
 * start to the new program's entry, a fork is refused by name. */
static void test_start_entry(void)
{
	char prog[512], ctor[512], dexec[512], dentry[512], d2[512], d3[512];
	char *argv[] = { prog, NULL };
	struct ptd_swpt_result rx, re;
	struct ptd_diag diag = { "" };
	uint64_t *tx = NULL, *te = NULL, entry;
	size_t nx = 0, ne = 0, k;
	int r;

	(void)snprintf(prog, sizeof(prog), "%s/prog-recursion", progs_dir);
	(void)snprintf(ctor, sizeof(ctor), "%s/libptdctor.so", progs_dir);
	(void)snprintf(dexec, sizeof(dexec), "%s/entry-exec", workdir);
	(void)snprintf(dentry, sizeof(dentry), "%s/entry-entry", workdir);
	entry = elf_entry(prog);
	REQUIRE(entry != 0);
	if (trace_from(dexec, argv, PTD_SWPT_STEP_BRANCH, PTD_SWPT_START_EXEC,
		       &rx, NULL) < 0 ||
	    trace_from(dentry, argv, PTD_SWPT_STEP_BRANCH,
		       PTD_SWPT_START_ENTRY, &re, NULL) < 0)
		return;
	CHECK(re.exited && re.exit_code == 0);
	tx = truth0(dexec, &nx);
	te = truth0(dentry, &ne);
	if (!tx || !te || ne == 0)
		goto out;
	/* a PIE is loaded at a page-aligned base */
	CHECK((te[0] - entry) % 4096 == 0);
	for (k = 0; k < nx && tx[k] != te[0]; k++)
		;
	fprintf(stderr, "  %zu instructions from the exec, %zu from the "
		"entry (the first %zu before it)\n", nx, ne, k);
	/* the dynamic loader ran before the entry */
	CHECK(k > 10000);
	CHECK_EQ_INT(nx - k, ne);
	if (nx - k == ne)
		CHECK(memcmp(tx + k, te, ne * sizeof(*te)) == 0);
	CHECK_EQ_INT(rx.insns, nx);
	CHECK_EQ_INT(re.insns, ne);

	/* a constructor that execs: the trace starts at the new entry */
	REQUIRE(setenv("LD_PRELOAD", ctor, 1) == 0);
	REQUIRE(setenv("PTD_CTOR", "exec", 1) == 0);
	(void)snprintf(d2, sizeof(d2), "%s/entry-ctor-exec", workdir);
	r = trace_from(d2, argv, PTD_SWPT_STEP_BRANCH, PTD_SWPT_START_ENTRY,
		       &re, NULL);
	if (r == 0) {
		uint64_t *t2;
		size_t n2 = 0;

		CHECK(re.exited && re.exit_code == 0);
		t2 = truth0(d2, &n2);
		if (t2 && n2) {
			CHECK((t2[0] - entry) % 4096 == 0);
			/* neither loader ran traced (the preload and the
			 * shorter environment change the C library's
			 * start-up a little) */
			CHECK(n2 < k);
		}
		free(t2);
	}

	/* a constructor that forks: refused, naming why */
	REQUIRE(setenv("PTD_CTOR", "fork", 1) == 0);
	(void)snprintf(d3, sizeof(d3), "%s/entry-ctor-fork", workdir);
	r = trace_from(d3, argv, PTD_SWPT_STEP_BRANCH, PTD_SWPT_START_ENTRY,
		       &re, &diag);
	CHECK_EQ_INT(r, -PTD_EUNSUPPORTED);
	CHECK_CONTAINS(diag.msg, "before its entry point");
	CHECK_CONTAINS(diag.msg, "prog-recursion");
	(void)unsetenv("PTD_CTOR");
	(void)unsetenv("LD_PRELOAD");
out:
	free(tx);
	free(te);
}

static void test_programs(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	/* the same addresses in both runs (inherited by the programs) */
	if (personality(PER_LINUX | ADDR_NO_RANDOMIZE) < 0)
		SKIP_ALL("personality(ADDR_NO_RANDOMIZE): %s", strerror(errno));
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-steps-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir)) {
		fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(test_start_entry);
	RUN(test_programs);
	if (!check_failures || getenv("PTD_TEST_CLEANUP_ALWAYS"))
		(void)ptd_rm_rf(workdir);
	else
		fprintf(stderr, "captures kept in %s\n", workdir);
	return check_done();
}
