/* SPDX-License-Identifier: MIT */
/*
 * perf.data end to end: trace test programs with the software source,
 * export each capture as perf.data (ptd_perfdata_write_capture), decode it
 * with the perf.data reader through ptd_input_decode, and require per
 * thread the ground truth's IPs and exactly the records of decoding the
 * capture itself.  Then the file lookups: the program's MMAP2 renamed to a
 * path that does not exist is found under --sysroot and, given a build-id,
 * in a build-id cache; with neither, error records name the file and the
 * decode goes on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "input/input.h"
#include "perfdata/read.h"
#include "perfdata/write.h"
#include "swpt/capture.h"
#include "swpt/tracer.h"
#include "unit/reccmp.h"

static const char *progs_dir;
static char workdir[256];

/* Records of one decode, with their strings copied (the decoder's live
 * only during the call). */
struct coll {
	struct reclist l;
	char **strs;
	size_t nstrs;
	unsigned errors, image_errors;
	char first_image_error[512];
};

/* Interned copy of @s (module names and error contexts: few distinct). */
static const char *keep(struct coll *c, const char *s)
{
	char **v;

	if (!s)
		return NULL;
	for (size_t i = c->nstrs; i-- > 0;)
		if (!strcmp(c->strs[i], s))
			return c->strs[i];
	v = realloc(c->strs, (c->nstrs + 1) * sizeof(*v));
	if (!v)
		abort();
	c->strs = v;
	v[c->nstrs] = strdup(s);
	if (!v[c->nstrs])
		abort();
	return v[c->nstrs++];
}

static int coll_add(void *ctx, const struct ptd_record *rec)
{
	struct coll *c = ctx;
	struct ptd_record r = *rec;

	if (r.type == PTD_REC_INSN) {
		r.u.insn.module = keep(c, r.u.insn.module);
		r.u.insn.json_body = NULL;
	} else if (r.type == PTD_REC_BLOCK) {
		r.u.block.module = keep(c, r.u.block.module);
	} else if (r.type == PTD_REC_ERROR) {
		r.u.error.context = keep(c, r.u.error.context);
		if (r.u.error.detail)
			r.u.error.detail = keep(c, r.u.error.detail);
		c->errors++;
		if (r.u.error.ptd_code && r.u.error.code == -PTD_ENOIMAGE) {
			if (!c->image_errors++)
				(void)snprintf(c->first_image_error,
					       sizeof(c->first_image_error),
					       "%s", r.u.error.context);
		}
	}
	return reclist_add(&c->l, &r);
}

static void coll_free(struct coll *c)
{
	for (size_t i = 0; i < c->nstrs; i++)
		free(c->strs[i]);
	free(c->strs);
	reclist_free(&c->l);
	memset(c, 0, sizeof(*c));
}

/* Decode @path through the input interface into @c. */
static int decode(const char *path, const struct ptd_input_opts *o,
		  struct coll *c, struct ptd_diag *diag)
{
	struct ptd_input_sink sink = { NULL, coll_add, NULL, c };
	size_t terr = 0;
	int r;

	memset(c, 0, sizeof(*c));
	r = ptd_input_decode(path, o, &sink, &terr, diag);
	if (r == 0 && terr)
		CHECK_FAIL_("%s: %zu threads ended early: %s", path, terr,
			    diag->msg);
	return r;
}

/* The records of thread @tid. */
static void only_tid(const struct coll *c, pid_t tid, struct reclist *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < c->l.n; i++)
		if (c->l.r[i].tid == tid)
			(void)reclist_add(out, &c->l.r[i]);
}

static void default_opts(struct ptd_input_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->decode.path = PTD_PATH_INSN;
	o->decode.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT);
}

/* Trace @argv into WORKDIR/NAME and export it to WORKDIR/NAME.data. */
static bool trace_export(const char *name, char *const argv[],
			 struct ptd_capture *c, char *data, size_t datasz)
{
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag diag = { "" };
	char dir[512];
	int r;

	(void)snprintf(dir, sizeof(dir), "%s/%s", workdir, name);
	(void)snprintf(data, datasz, "%s/%s.data", workdir, name);
	memset(&so, 0, sizeof(so));
	so.outdir = dir;
	so.quiet_target = true;
	r = ptd_swpt_run(argv, &so, &res, &diag);
	if (r < 0) {
		CHECK_FAIL_("tracing %s: %s (%s)", name, diag.msg,
			    ptd_strerror(r));
		return false;
	}
	r = ptd_capture_load(dir, c, &diag);
	if (r < 0) {
		CHECK_FAIL_("loading %s: %s", dir, diag.msg);
		return false;
	}
	r = ptd_perfdata_write_capture(c, data, &diag);
	if (r < 0) {
		CHECK_FAIL_("exporting %s: %s", name, diag.msg);
		ptd_capture_fini(c);
		return false;
	}
	return true;
}

/* Every thread: perf.data IPs == ground truth, records == the capture's. */
static void compare(const char *name, const struct ptd_capture *c,
		    const char *data)
{
	struct ptd_input_opts o;
	struct ptd_diag diag = { "" };
	struct coll cap, pd;
	int r;

	default_opts(&o);
	r = decode(c->dir, &o, &cap, &diag);
	CHECK_EQ_INT(r, 0);
	r = decode(data, &o, &pd, &diag);
	if (r)
		CHECK_FAIL_("%s: decoding %s: %s", name, data, diag.msg);
	CHECK_EQ_INT(pd.errors, 0);
	for (size_t t = 0; r == 0 && t < c->nthreads; t++) {
		struct reclist a, b;
		uint64_t *truth = NULL;
		size_t ntruth = 0, k = 0;

		REQUIRE(ptd_capture_read_truth(c, t, &truth, &ntruth,
					       &diag) == 0);
		only_tid(&cap, c->threads[t].tid, &a);
		only_tid(&pd, c->threads[t].tid, &b);
		for (size_t i = 0; i < b.n; i++) {
			if (b.r[i].type != PTD_REC_INSN)
				continue;
			if (k >= ntruth || b.r[i].u.insn.ip != truth[k]) {
				CHECK_FAIL_("%s tid %d: insn %zu: expected "
					    "0x%" PRIx64 ", got 0x%" PRIx64,
					    name, c->threads[t].tid, k,
					    k < ntruth ? truth[k] : 0,
					    b.r[i].u.insn.ip);
				break;
			}
			k++;
		}
		if (k != ntruth)
			CHECK_FAIL_("%s tid %d: %zu of %zu instructions", name,
				    c->threads[t].tid, k, ntruth);
		/* Code no file holds (JIT, [vdso]) is exported as its
		 * snapshot's file: named so in perf.data, by its mapping's
		 * name in the capture; its bytes must be the same. */
		for (size_t i = 0; i < a.n && i < b.n; i++) {
			const char *am, *bm, *base;

			if (a.r[i].type != PTD_REC_INSN ||
			    b.r[i].type != PTD_REC_INSN)
				continue;
			am = a.r[i].u.insn.module;
			bm = b.r[i].u.insn.module;
			base = bm ? strrchr(bm, '/') : NULL;
			if (am && am[0] == '[' && base &&
			    !strncmp(base, "/snap-", 6))
				b.r[i].u.insn.module = am;
		}
		if (!reccmp_lists(stderr, "capture:   ", &a, "perf.data: ",
				  &b))
			CHECK_FAIL_("%s tid %d: records differ", name,
				    c->threads[t].tid);
		fprintf(stderr, "%s tid %d: %zu instructions, %zu records "
			"equal\n", name, c->threads[t].tid, ntruth, b.n);
		reclist_free(&a);
		reclist_free(&b);
		free(truth);
	}
	coll_free(&cap);
	coll_free(&pd);
}

static char *prog(const char *name)
{
	static char p[4][512];
	static int n;
	char *s = p[n++ % 4];

	(void)snprintf(s, 512, "%s/prog-%s", progs_dir, name);
	return s;
}

/* prog-dlopen's capture, kept for test_lookup. */
static struct ptd_capture keep_cap;
static bool have_keep;
static char keep_data[512];

static void simple(const char *name, char *arg)
{
	char *argv[] = { prog(name), arg, NULL };
	struct ptd_capture c;
	char data[512];

	if (!trace_export(name, argv, &c, data, sizeof(data)))
		return;
	compare(name, &c, data);
	ptd_capture_fini(&c);
}

/* Each traced program pays for ld.so's start (~10^5 instructions, a few
 * seconds under ptrace): short programs keep the test fast. */
static void test_loop(void) { simple("loop", "0"); }
static void test_signal(void) { simple("signal", NULL); }
static void test_threads(void) { simple("threads", NULL); }
/* Code rewritten in place: each execution decodes with the bytes it ran
 * (the export places the image change inside the trace, not before). */
static void test_jit(void) { simple("jit", NULL); }

static void test_dlopen(void)
{
	char lib[512];
	char *argv[] = { prog("dlopen"), lib, NULL };

	(void)snprintf(lib, sizeof(lib), "%s/libptdtarget.so", progs_dir);
	if (!trace_export("dlopen", argv, &keep_cap, keep_data,
			  sizeof(keep_data)))
		return;
	have_keep = true;
	compare("dlopen", &keep_cap, keep_data);
}

/* ---- file lookups ----------------------------------------------------- */

/* Rewrite every occurrence of @from in file @path to @to (same length). */
static size_t rewrite(const char *path, const char *from, const char *to)
{
	char *buf = NULL;
	size_t len, n = 0, fl = strlen(from);

	if (ptd_file_read_all(path, 1u << 30, &buf, &len) < 0)
		return 0;
	for (size_t i = 0; i + fl <= len; i++)
		if (!memcmp(buf + i, from, fl)) {
			memcpy(buf + i, to, fl);
			n++;
		}
	if (ptd_file_write_atomic(path, buf, len) < 0)
		n = 0;
	free(buf);
	return n;
}

/* Give the MMAP2 of @file the build-id form with @id (20 bytes). */
static bool set_buildid(const char *path, const char *file,
			const uint8_t *id)
{
	struct ptd_perfdata *pd = NULL;
	struct ptd_diag diag = { "" };
	uint64_t offs[16];
	size_t n = 0, len;
	char *buf = NULL;
	bool ok;

	if (ptd_perfdata_open(path, &pd, &diag) < 0)
		return false;
	for (size_t i = 0; i < pd->nrecs && n < 16; i++) {
		struct ptd_perf_event e;

		if (pd->recs[i].type == PERF_RECORD_MMAP2 &&
		    ptd_perfdata_event(pd, i, &e, NULL) == 0 &&
		    !strcmp(e.u.mmap.filename, file))
			offs[n++] = pd->recs[i].offset;
	}
	ptd_perfdata_free(pd);
	if (!n || ptd_file_read_all(path, 1u << 30, &buf, &len) < 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		uint8_t *r = (uint8_t *)buf + offs[i];
		uint16_t misc;

		memcpy(&misc, r + 4, 2);
		misc |= PERF_RECORD_MISC_MMAP_BUILD_ID;
		memcpy(r + 4, &misc, 2);
		memset(r + 40, 0, 24);
		r[40] = 20;
		memcpy(r + 44, id, 20);
	}
	ok = ptd_file_write_atomic(path, buf, len) == 0;
	free(buf);
	return ok;
}

static void copy_file(const char *from, const char *to)
{
	char cmd[2048];

	(void)snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\" && "
		       "cp '%s' '%s'", to, from, to);
	if (system(cmd) != 0)
		CHECK_FAIL_("cannot copy %s to %s", from, to);
}

static void test_lookup(void)
{
	static const uint8_t id[20] = { 0xfe, 0xed, 0xfa, 0xce, 1, 2, 3, 4 };
	const char *progpath = prog("dlopen");
	struct ptd_input_opts o;
	struct ptd_diag diag = { "" };
	const struct ptd_capture *c = &keep_cap;
	const char *data = keep_data;
	char moved[512], root[512], bid[512], p[1024];
	struct coll got;
	struct stat st;
	uint64_t *truth = NULL;
	size_t ntruth = 0, k = 0, in_prog = 0;
	int r;

	if (!have_keep)
		return;	/* test_loop failed and said why */
	/* The program under a name that exists nowhere: same length. */
	(void)snprintf(moved, sizeof(moved), "%s", progpath);
	moved[1] = moved[1] == 'Q' ? 'R' : 'Q';
	REQUIRE(stat(moved, &st) < 0);
	REQUIRE(rewrite(data, progpath, moved) > 0);
	REQUIRE(ptd_capture_read_truth(c, 0, &truth, &ntruth, &diag) == 0);

	/* Not found: error records name it, the decode goes on. */
	default_opts(&o);
	r = decode(data, &o, &got, &diag);
	CHECK_EQ_INT(r, 0);
	CHECK(got.image_errors >= 1);
	CHECK_CONTAINS(got.first_image_error, moved);
	CHECK_CONTAINS(got.first_image_error, "build-id unknown");
	coll_free(&got);

	/* Under a sysroot. */
	(void)snprintf(root, sizeof(root), "%s/sysroot", workdir);
	(void)snprintf(p, sizeof(p), "%s%s", root, moved);
	copy_file(progpath, p);
	o.sysroot = root;
	r = decode(data, &o, &got, &diag);
	CHECK_EQ_INT(r, 0);
	CHECK_EQ_INT(got.errors, 0);
	for (size_t i = 0; i < got.l.n; i++) {
		const struct ptd_record *rec = &got.l.r[i];

		if (rec->type != PTD_REC_INSN)
			continue;
		if (k < ntruth && rec->u.insn.ip != truth[k])
			break;
		if (!strcmp(rec->u.insn.module, moved))
			in_prog++;
		k++;
	}
	CHECK_EQ_U64(k, ntruth);
	CHECK(in_prog > 0);	/* named by its traced path */
	coll_free(&got);

	/* By build-id, in a perf-style cache. */
	REQUIRE(set_buildid(data, moved, id));
	(void)snprintf(bid, sizeof(bid), "%s/bidcache", workdir);
	/* build-id feedface01020304 and 12 zero bytes: xx/ + 38 digits */
	(void)snprintf(p, sizeof(p), "%s/.build-id/fe/edface01020304"
		       "000000000000000000000000/elf", bid);
	copy_file(progpath, p);
	default_opts(&o);
	o.buildid_dir = bid;
	r = decode(data, &o, &got, &diag);
	CHECK_EQ_INT(r, 0);
	CHECK_EQ_INT(got.errors, 0);
	k = 0;
	for (size_t i = 0; i < got.l.n; i++)
		if (got.l.r[i].type == PTD_REC_INSN &&
		    k < ntruth && got.l.r[i].u.insn.ip == truth[k])
			k++;
	CHECK_EQ_U64(k, ntruth);
	coll_free(&got);

	/* The build-id now named in the error when the cache is empty. */
	o.buildid_dir = workdir;
	r = decode(data, &o, &got, &diag);
	CHECK_EQ_INT(r, 0);
	CHECK_CONTAINS(got.first_image_error, "feedface01020304");
	coll_free(&got);
	free(truth);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-pd-XXXXXX",
		       tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir))
		SKIP_ALL("cannot create a temporary directory");
	RUN(test_loop);
	RUN(test_signal);
	RUN(test_threads);
	RUN(test_jit);
	RUN(test_dlopen);
	RUN(test_lookup);
	if (have_keep)
		ptd_capture_fini(&keep_cap);
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	else
		fprintf(stderr, "files kept in %s\n", workdir);
	return check_done();
}
