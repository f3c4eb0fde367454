/* SPDX-License-Identifier: MIT */
/*
 * LLDB decodes what ptd exports: real programs are traced with the
 * software source, exported as LLDB bundles (lldb/export.h), loaded with
 * `lldb-22 ... trace load`, and every thread's instruction addresses as
 * LLDB dumps them must be the ground truth, in order.  Skips when no
 * lldb-22 is installed.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "lldb/export.h"
#include "lldb/trace.h"
#include "swpt/capture.h"
#include "swpt/tracer.h"

static const char *progs_dir;
static const char *lldb;
static char workdir[256];

static const char *find_lldb(void)
{
	static const char *const cands[] = { "/usr/bin/lldb-22",
					     "/usr/lib/llvm-22/bin/lldb" };
	const char *env = getenv("PTD_LLDB");

	if (env && *env)
		return access(env, X_OK) == 0 ? env : NULL;
	for (size_t i = 0; i < PTD_ARRAY_SIZE(cands); i++)
		if (access(cands[i], X_OK) == 0)
			return cands[i];
	return NULL;
}

/* Run lldb with @args (NULL-terminated, after the program name), output to
 * @log.  Returns the exit status, or -1. */
static int run_lldb(char *const args[], const char *log)
{
	char *argv[64];
	size_t n = 0;
	int st = 0;
	pid_t pid;

	argv[n++] = (char *)"timeout";
	argv[n++] = (char *)"120";
	argv[n++] = (char *)lldb;
	for (size_t i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0644);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Compare LLDB's dump of one thread (the file @path, written by `thread
 * trace dump instructions -f -a -r -F`) with the ground truth of @c. */
static void compare_dump(const struct ptd_capture *c, const char *path,
			 const char *log)
{
	_cleanup_free_ char *text = NULL;
	uint64_t *truth = NULL;
	size_t len = 0, ntruth = 0, k = 0, lineno = 0;
	long tid = -1;
	ssize_t idx;
	struct ptd_diag d = { "" };
	char *line, *save = NULL;

	if (ptd_file_read_all(path, 1u << 30, &text, &len) < 0) {
		CHECK_FAIL_("no dump '%s' from lldb (see %s)", path, log);
		return;
	}
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned long long id, ip;
		int used = 0;

		lineno++;
		if (sscanf(line, "thread #%*u: tid = %ld", &tid) == 1) {
			idx = ptd_capture_find_thread(c, (pid_t)tid);
			if (idx < 0) {
				CHECK_FAIL_("%s: lldb shows thread %ld, which "
					    "the capture lacks", path, tid);
				return;
			}
			free(truth);
			truth = NULL;
			if (ptd_capture_read_truth(c, (size_t)idx, &truth,
						   &ntruth, &d) < 0) {
				CHECK_FAIL_("truth: %s", d.msg);
				return;
			}
			k = 0;
			continue;
		}
		if (strstr(line, "no more data"))
			continue;
		if (sscanf(line, " %llu: 0x%llx%n", &id, &ip, &used) != 2 ||
		    line[used] != '\0' || !truth) {
			CHECK_FAIL_("%s:%zu: unexpected line from lldb: "
				    "\"%.120s\"", path, lineno, line);
			break;
		}
		if (k >= ntruth || ip != truth[k]) {
			CHECK_FAIL_("thread %ld: instruction %zu: expected "
				    "0x%" PRIx64 ", lldb decoded 0x%llx", tid,
				    k, k < ntruth ? truth[k] : 0, ip);
			break;
		}
		k++;
	}
	if (!truth)
		CHECK_FAIL_("%s: no thread header from lldb", path);
	else if (k != ntruth)
		CHECK_FAIL_("thread %ld: lldb decoded %zu instructions, %zu "
			    "were executed", tid, k, ntruth);
	else
		fprintf(stderr, "  tid %ld: %zu instructions, as executed\n",
			tid, k);
	free(truth);
}

/* Whether the bundle in @bdir has a module named @system_path. */
static bool bundle_has(const char *bdir, const char *system_path)
{
	struct ptd_lldb_trace t;
	struct ptd_diag d = { "" };
	bool found = false;

	if (ptd_lldb_trace_load(bdir, &t, &d) < 0) {
		CHECK_FAIL_("%s", d.msg);
		return false;
	}
	for (size_t i = 0; i < t.nprocs; i++)
		for (size_t j = 0; j < t.procs[i].nmodules; j++)
			if (!strcmp(t.procs[i].modules[j].system_path,
				    system_path))
				found = true;
	ptd_lldb_trace_free(&t);
	return found;
}

static void check_prog(const char *name, size_t want_threads,
		       const char *want_module)
{
	char prog[512], cdir[512], bdir[512], desc[600], log[600];
	char load[700], files[8][600];
	/* sized for gcc, which bounds files[i] by all of files */
	static char cmds[8][4900];
	char *argv[] = { prog, NULL };
	char *args[40];
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag d = { "" };
	struct ptd_capture c;
	size_t n = 0, i;
	int r;

	(void)snprintf(prog, sizeof(prog), "%s/prog-%s", progs_dir, name);
	(void)snprintf(cdir, sizeof(cdir), "%s/%s-cap", workdir, name);
	(void)snprintf(bdir, sizeof(bdir), "%s/%s-lldb", workdir, name);
	memset(&so, 0, sizeof(so));
	so.outdir = cdir;
	so.quiet_target = true;
	r = ptd_swpt_run(argv, &so, &res, &d);
	if (r == -EPERM)
		SKIP_ALL("ptrace refused: %s", d.msg);
	if (r < 0) {
		CHECK_FAIL_("tracing %s: %s", name, d.msg);
		return;
	}
	REQUIRE(ptd_capture_load(cdir, &c, &d) == 0);
	CHECK_EQ_INT(c.nthreads, want_threads);
	r = ptd_lldb_export_capture(&c, bdir, &d);
	if (r < 0) {
		CHECK_FAIL_("export of %s: %s", name, d.msg);
		ptd_capture_free(&c);
		return;
	}
	if (want_module)
		CHECK(bundle_has(bdir, want_module));
	(void)snprintf(desc, sizeof(desc), "%s/trace.json", bdir);
	(void)snprintf(log, sizeof(log), "%s/%s-lldb.log", workdir, name);
	(void)snprintf(load, sizeof(load), "trace load -v %s", desc);
	args[n++] = (char *)"-b";
	args[n++] = (char *)"-o";
	args[n++] = load;
	/* one dump per thread, by LLDB's thread index (1-based) */
	for (i = 0; i < c.nthreads && i < 8; i++) {
		(void)snprintf(files[i], sizeof(files[i]), "%s/%s-%zu.txt",
			       workdir, name, i + 1);
		(void)snprintf(cmds[i], sizeof(cmds[i]),
			       "thread trace dump instructions -f -a -r -F "
			       "%s %zu", files[i], i + 1);
		args[n++] = (char *)"-o";
		args[n++] = cmds[i];
	}
	args[n] = NULL;
	r = run_lldb(args, log);
	if (r != 0) {
		_cleanup_free_ char *out = NULL;
		size_t len = 0;

		(void)ptd_file_read_all(log, 1u << 20, &out, &len);
		CHECK_FAIL_("lldb exited with %d:\n%s", r, out ? out : "");
	}
	for (i = 0; i < c.nthreads && i < 8; i++)
		compare_dump(&c, files[i], log);
	ptd_capture_free(&c);
}

static void test_recursion(void) { check_prog("recursion", 1, NULL); }
static void test_fnptr(void) { check_prog("fnptr", 1, NULL); }
static void test_threads(void) { check_prog("threads", 3, NULL); }
/* the vDSO goes to LLDB wrapped as an ELF (lldb/elfwrap.h) */
static void test_vdso(void) { check_prog("vdso", 1, "[vdso]"); }

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set");
	lldb = find_lldb();
	if (!lldb)
		SKIP_ALL("lldb-22 is not installed (apt-get install lldb-22)");
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-test-lldb-e2e-XXXXXX",
		       tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir))
		SKIP_ALL("cannot create a work directory");
	RUN(test_recursion);
	RUN(test_fnptr);
	RUN(test_threads);
	RUN(test_vdso);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	else
		fprintf(stderr, "kept %s\n", workdir);
	return check_done();
}
