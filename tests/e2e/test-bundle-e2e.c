/* SPDX-License-Identifier: MIT */
/*
 * ptd bundles through ptctl, as a user meets them: a capture made with
 * `ptctl trace --out`, saved as a bundle (ptd_bundle_save, and `ptctl
 * export --format bundle` where this ptctl has it), moved elsewhere, and
 * `ptctl decode BUNDLE` gives exactly the records of `ptctl decode
 * CAPTURE`; a tampered bundle is refused (exit 2) naming the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bundle/bundle.h"
#include "check.h"
#include "e2e/run-cmd.h"
#include "common/diag.h"
#include "common/fileio.h"
#include "common/strutil.h"

static char ptctl[PATH_MAX];
static char workdir[] = "/tmp/test-bundle-e2e-XXXXXX";

/* Run ptctl with @args (NULL-terminated) to its end. */
static struct run run_ptctl(const char *const *args)
{
	return run_cmd(ptctl, args, workdir);
}

static void path_in(char *out, size_t n, const char *name)
{
	(void)snprintf(out, n, "%s/%s", workdir, name);
}

/* The stream after its first (hello) line. */
static const char *after_hello(const char *out)
{
	const char *nl = out ? strchr(out, '\n') : NULL;

	return nl ? nl + 1 : "";
}

/* `ptctl decode ARGS... @path`: exit 0, a hello naming @source; its lines
 * after the hello (malloc'd) in *@ret. */
static bool decode(const char *path, const char *pathopt, const char *source,
		   char **ret)
{
	const char *args[] = { "decode", "--path", pathopt, path, NULL };
	struct run r = run_ptctl(args);
	char want[64];

	*ret = NULL;
	if (r.status != 0) {
		CHECK_FAIL_("ptctl decode %s: exit %d: %s", path, r.status,
			    r.err ? r.err : "");
		run_free(&r);
		return false;
	}
	(void)snprintf(want, sizeof(want), "\"source\":\"%s\"", source);
	CHECK_CONTAINS(r.out, "\"type\":\"hello\"");
	CHECK_CONTAINS(r.out, want);
	*ret = strdup(after_hello(r.out));
	run_free(&r);
	return *ret != NULL;
}

/* The decodes of @bundle equal those of @cap (given as @ref_*). */
static void same_as_capture(const char *bundle, const char *ref_insn,
			    const char *ref_block, const char *what)
{
	char *got = NULL;

	if (decode(bundle, "insn", "ptd-bundle", &got)) {
		if (strcmp(got, ref_insn) != 0)
			CHECK_FAIL_("%s: insn-path decode differs from the "
				    "capture's (%zu vs %zu bytes)", what,
				    strlen(got), strlen(ref_insn));
		free(got);
	}
	if (decode(bundle, "block", "ptd-bundle", &got)) {
		if (strcmp(got, ref_block) != 0)
			CHECK_FAIL_("%s: block-path decode differs from the "
				    "capture's", what);
		free(got);
	}
}

static bool has_export_bundle(void)
{
	const char *args[] = { "export", "--help", NULL };
	struct run r = run_ptctl(args);
	bool yes = (r.out && strstr(r.out, "bundle")) ||
		   (r.err && strstr(r.err, "bundle"));

	run_free(&r);
	return yes;
}

static void test_bundle_decode(void)
{
	const char *progs = getenv("PTD_TEST_PROGS");
	char prog[PATH_MAX], cap[PATH_MAX], b1[PATH_MAX], moved[PATH_MAX];
	char b2[PATH_MAX], b3[PATH_MAX], pt[2 * PATH_MAX];
	char *ref_insn = NULL, *ref_block = NULL;
	struct ptd_bundle b;
	struct ptd_diag d = { "" };
	struct run r;

	REQUIRE(progs);
	(void)snprintf(prog, sizeof(prog), "%s/prog-threads", progs);
	path_in(cap, sizeof(cap), "cap");
	{
		const char *args[] = { "trace", "--out", cap, "--no-decode",
				       "--quiet-target", "--", prog, NULL };

		r = run_ptctl(args);
		if (r.status != 0 && r.err && strstr(r.err, "ptrace"))
			SKIP_ALL("cannot trace here: %s", r.err);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
	}
	REQUIRE(decode(cap, "insn", "swpt-capture", &ref_insn));
	REQUIRE(decode(cap, "block", "swpt-capture", &ref_block));
	CHECK(strlen(ref_insn) > 100000);

	/* saved with the library, then moved: still the same records */
	path_in(b1, sizeof(b1), "b1");
	CHECK_EQ_INT(ptd_bundle_save(cap, b1, NULL, &d), 0);
	REQUIRE(ptd_bundle_load(b1, &b, &d) == 0);
	CHECK(b.capture.nthreads >= 2);
	ptd_bundle_fini(&b);
	path_in(moved, sizeof(moved), "elsewhere");
	REQUIRE(mkdir(moved, 0755) == 0);
	path_in(moved, sizeof(moved), "elsewhere/b1-moved");
	REQUIRE(rename(b1, moved) == 0);
	same_as_capture(moved, ref_insn, ref_block, "saved bundle");

	/* a bundle exported as an LLDB bundle (images from its copies) is
	 * the capture's LLDB bundle; as a bundle again, refused */
	{
		char l0[PATH_MAX], l1[PATH_MAX], l2[PATH_MAX];
		const char *e0[] = { "export", "--format", "lldb", cap, l0,
				     NULL };
		const char *e1[] = { "export", "--format", "lldb", moved, l1,
				     NULL };
		const char *e2[] = { "export", "--format", "bundle", moved,
				     l2, NULL };
		char *g0 = NULL, *g1 = NULL;

		path_in(l0, sizeof(l0), "cap-lldb");
		path_in(l1, sizeof(l1), "bundle-lldb");
		path_in(l2, sizeof(l2), "bundle-bundle");
		r = run_ptctl(e0);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
		r = run_ptctl(e1);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
		if (decode(l0, "insn", "lldb-bundle", &g0) &&
		    decode(l1, "insn", "lldb-bundle", &g1)) {
			CHECK(strlen(g1) > 100000);
			if (strcmp(g0, g1))
				CHECK_FAIL_("%s: the bundle's LLDB export "
					    "decodes differently from the "
					    "capture's", l1);
		}
		free(g0);
		free(g1);
		r = run_ptctl(e2);
		CHECK_EQ_INT(r.status, 2);
		CHECK_CONTAINS(r.err, "is a ptd bundle already");
		run_free(&r);
	}

	/* tampered: refused, exit 2, naming the file */
	{
		struct ptd_bundle tb;
		const char *args[] = { "decode", moved, NULL };
		size_t len;
		char *data = NULL;
		int fd;

		REQUIRE(ptd_bundle_load(moved, &tb, &d) == 0);
		(void)snprintf(pt, sizeof(pt), "%s/capture/%s", moved,
			       tb.capture.threads[0].pt);
		ptd_bundle_fini(&tb);
		REQUIRE(ptd_file_read_all(pt, 1u << 30, &data, &len) == 0);
		data[len / 2] ^= 1;
		fd = open(pt, O_WRONLY | O_TRUNC | O_CLOEXEC);
		REQUIRE(fd >= 0 && ptd_write_all(fd, data, len) == 0);
		(void)close(fd);
		r = run_ptctl(args);
		CHECK_EQ_INT(r.status, 2);
		CHECK_CONTAINS(r.err, "capture/pt-");
		CHECK_CONTAINS(r.err, "checksum mismatch");
		CHECK(!r.out || !strstr(r.out, "\"type\":\"insn\""));
		run_free(&r);
		free(data);
		/* nor is it exported */
		{
			char l3[PATH_MAX];
			const char *e3[] = { "export", "--format", "lldb",
					     moved, l3, NULL };

			path_in(l3, sizeof(l3), "tampered-lldb");
			r = run_ptctl(e3);
			CHECK_EQ_INT(r.status, 2);
			CHECK_CONTAINS(r.err, "checksum mismatch");
			CHECK(access(l3, F_OK) != 0);
			run_free(&r);
		}
	}

	/* through ptctl's own export, copying and referencing images */
	if (!has_export_bundle()) {
		fprintf(stderr, "ptctl has no 'export --format bundle': "
				"that part skipped\n");
	} else {
		const char *a2[] = { "export", "--format", "bundle", cap, b2,
				     NULL };
		const char *a3[] = { "export", "--format", "bundle",
				     "--reference", cap, b3, NULL };

		path_in(b2, sizeof(b2), "b2");
		path_in(b3, sizeof(b3), "b3");
		r = run_ptctl(a2);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
		same_as_capture(b2, ref_insn, ref_block, "ptctl export");
		r = run_ptctl(a3);
		CHECK_EQ_INT(r.status, 0);
		run_free(&r);
		same_as_capture(b3, ref_insn, ref_block,
				"ptctl export --reference");
		/* exporting onto an existing bundle is refused */
		r = run_ptctl(a2);
		CHECK(r.status != 0);
		CHECK_CONTAINS(r.err, "not empty");
		run_free(&r);
	}
	free(ref_insn);
	free(ref_block);
}

int main(void)
{
	const char *root = getenv("PTD_BUILD_ROOT");

	if (!root)
		SKIP_ALL("PTD_BUILD_ROOT is not set (run through meson test)");
	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", root);
	if (access(ptctl, X_OK) != 0)
		SKIP_ALL("%s is not built", ptctl);
	if (!mkdtemp(workdir))
		return 2;
	RUN(test_bundle_decode);
	(void)ptd_rm_rf(workdir);
	return check_done();
}
