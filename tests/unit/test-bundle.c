/* SPDX-License-Identifier: MIT */
/*
 * ptd bundles: SHA-256 against NIST and sha256sum; a real capture saved,
 * loaded and decoded to the same records as the capture (and the ground
 * truth), also once the traced program is gone; every corruption of every
 * file and of the manifest refused by name; atomic saves; a manifest fuzz.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bundle/bundle.h"
#include "bundle/sha256.h"
#include "check.h"
#include "common/diag.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "input/input.h"
#include "reccmp.h"
#include "swpt/capture.h"
#include "swpt/tracer.h"

static char tmpdir[] = "/tmp/test-bundle-XXXXXX";
static char progcopy[PATH_MAX];	/* the traced program (a temp copy) */
static char capdir[PATH_MAX];	/* its capture */
static char bundir[PATH_MAX];	/* a bundle that copies the images */
static char refdir[PATH_MAX];	/* a bundle that references them */
static bool have_capture;

static void path_in(char *out, size_t n, const char *name)
{
	(void)snprintf(out, n, "%s/%s", tmpdir, name);
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[3 * PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0) {
		fprintf(stderr, "'%s' failed\n", cmd);
		exit(2);
	}
}

/* ---- SHA-256 ----------------------------------------------------------- */

static void hex_of(const void *p, size_t n, char out[65])
{
	uint8_t d[PTD_SHA256_LEN];

	ptd_sha256(p, n, d);
	ptd_sha256_hex(d, out);
}

static void test_sha256_vectors(void)
{
	static const char m448[] =
		"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	struct ptd_sha256 s;
	uint8_t d[PTD_SHA256_LEN], e[PTD_SHA256_LEN];
	char hex[65], chunk[997];
	size_t left;

	hex_of("abc", 3, hex);
	CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223"
			  "b00361a396177a9cb410ff61f20015ad");
	hex_of(m448, strlen(m448), hex);
	CHECK_EQ_STR(hex, "248d6a61d20638b8e5c026930c3e6039"
			  "a33ce45964ff2167f6ecedd419db06c1");
	hex_of("", 0, hex);
	CHECK_EQ_STR(hex, "e3b0c44298fc1c149afbf4c8996fb924"
			  "27ae41e4649b934ca495991b7852b855");
	/* one million 'a', streamed in odd-sized pieces */
	memset(chunk, 'a', sizeof(chunk));
	ptd_sha256_init(&s);
	for (left = 1000000; left;) {
		size_t n = left < sizeof(chunk) ? left : sizeof(chunk);

		ptd_sha256_update(&s, chunk, n);
		left -= n;
	}
	ptd_sha256_final(&s, d);
	ptd_sha256_hex(d, hex);
	CHECK_EQ_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67"
			  "f1809a48a497200e046d39ccc7112cd0");
	/* byte by byte equals one call (every padding boundary) */
	for (size_t n = 50; n < 130; n++) {
		ptd_sha256_init(&s);
		for (size_t i = 0; i < n; i++)
			ptd_sha256_update(&s, chunk, 1);
		ptd_sha256_final(&s, d);
		ptd_sha256(chunk, n, e);
		CHECK(!memcmp(d, e, sizeof(d)));
	}
	CHECK_EQ_INT(ptd_sha256_parse_hex(hex, e), 0);
	CHECK(!memcmp(d, e, 0));
	CHECK_EQ_INT(ptd_sha256_parse_hex("abc", e), -EINVAL);
	hex[10] = 'g';
	CHECK_EQ_INT(ptd_sha256_parse_hex(hex, e), -EINVAL);
}

/* ptd_sha256_file equals sha256sum on a real file (this test program). */
static void test_sha256_file(void)
{
	char cmd[PATH_MAX + 32], line[256], hex[65];
	uint8_t d[PTD_SHA256_LEN];
	uint64_t size = 0;
	struct stat st;
	FILE *p;

	REQUIRE(stat("/proc/self/exe", &st) == 0);
	(void)snprintf(cmd, sizeof(cmd), "sha256sum /proc/%ld/exe",
		       (long)getpid());
	p = popen(cmd, "r");
	REQUIRE(p);
	REQUIRE(fgets(line, sizeof(line), p));
	(void)pclose(p);
	line[64] = '\0';
	CHECK_EQ_INT(ptd_sha256_file("/proc/self/exe", UINT64_MAX, d, &size),
		     0);
	ptd_sha256_hex(d, hex);
	CHECK_EQ_STR(hex, line);
	CHECK_EQ_U64(size, st.st_size);
	CHECK_EQ_INT(ptd_sha256_file("/proc/self/exe", 100, d, &size),
		     -PTD_ELIMIT);
	CHECK_EQ_INT(ptd_sha256_file("/nonexistent", 100, d, &size), -ENOENT);
}

/* A cancel that says stop from its (limit+1)th question on. */
struct ask_count {
	unsigned asked, limit;
};

static bool stop_after(void *ctx)
{
	struct ask_count *a = ctx;

	return ++a->asked > a->limit;
}

/* The cancelled hash stops between blocks; never cancelled, it is the
 * plain one. */
static void test_sha256_cancel(void)
{
	uint8_t d1[PTD_SHA256_LEN], d2[PTD_SHA256_LEN];
	struct ask_count a = { 0, 2 };
	struct ptd_cancel c = { stop_after, &a };
	struct ptd_cancel never = { 0 };
	int fd;

	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	CHECK_EQ_INT(ptd_sha256_fd_until(fd, UINT64_MAX, &c, d1, NULL),
		     -ECANCELED);
	CHECK_EQ_INT(a.asked, 3);	/* two blocks read, then stop */
	REQUIRE(lseek(fd, 0, SEEK_SET) == 0);
	CHECK_EQ_INT(ptd_sha256_fd_until(fd, UINT64_MAX, &never, d1, NULL),
		     0);
	CHECK_EQ_INT(ptd_sha256_file("/proc/self/exe", UINT64_MAX, d2, NULL),
		     0);
	CHECK(memcmp(d1, d2, sizeof(d1)) == 0);
	(void)close(fd);
}

/* ---- records ---------------------------------------------------------- */

/* Records with module names copied, so they outlive the decode. */
struct got {
	struct reclist l;
	char **names;		/* the strings records point to, kept */
	size_t nnames, names_cap;
	struct ptd_input_info info;
	unsigned infos;
	size_t done;
};

static const char *intern(struct got *g, const char *s)
{
	size_t i;

	for (i = 0; i < g->nnames; i++)
		if (!strcmp(g->names[i], s))
			return g->names[i];
	if (g->nnames == g->names_cap) {
		size_t cap = g->names_cap ? 2 * g->names_cap : 64;
		char **v = realloc(g->names, cap * sizeof(*v));

		if (!v)
			abort();
		g->names = v;
		g->names_cap = cap;
	}
	if (!(g->names[g->nnames] = strdup(s)))
		abort();
	return g->names[g->nnames++];
}

static int got_record(void *ctx, const struct ptd_record *r)
{
	struct got *g = ctx;
	struct ptd_record c = *r;

	if (c.type == PTD_REC_INSN) {
		c.u.insn.module = intern(g, c.u.insn.module);
		c.u.insn.json_body = NULL;
		c.u.insn.json_body_len = 0;
	} else if (c.type == PTD_REC_ERROR && c.u.error.detail) {
		/* valid only during the call, like the module's name */
		c.u.error.detail = intern(g, c.u.error.detail);
	} else if (c.type != PTD_REC_EVENT && c.type != PTD_REC_ERROR) {
		return 0;
	}
	return reclist_add(&g->l, &c);
}

static int got_info(void *ctx, const struct ptd_input_info *info)
{
	struct got *g = ctx;

	g->info = *info;
	g->info.source = NULL;	/* does not outlive the decode */
	g->infos++;
	return 0;
}

static void got_done(void *ctx, pid_t tid, const struct ptd_decode_stats *st,
		     int err, const struct ptd_diag *diag)
{
	struct got *g = ctx;

	(void)tid, (void)st;
	if (err)
		fprintf(stderr, "thread %ld ended: %s\n", (long)tid, diag->msg);
	g->done++;
}

static void got_free(struct got *g)
{
	for (size_t i = 0; i < g->nnames; i++)
		free(g->names[i]);
	free(g->names);
	reclist_free(&g->l);
	memset(g, 0, sizeof(*g));
}

static int decode(const char *path, struct got *g, size_t *terr,
		  struct ptd_diag *d)
{
	struct ptd_input_opts o;
	struct ptd_input_sink sink = { got_info, got_record, got_done, g };

	memset(&o, 0, sizeof(o));
	o.decode.path = PTD_PATH_INSN;
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT);
	memset(g, 0, sizeof(*g));
	return ptd_input_decode(path, &o, &sink, terr, d);
}

/* ---- a real capture, saved ------------------------------------------- */

static void setup_capture(void)
{
	const char *progs = getenv("PTD_TEST_PROGS");
	char src[PATH_MAX];
	char *argv[2];
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag d = { "" };
	struct ptd_bundle_save_opts o = PTD_BUNDLE_SAVE_OPTS_INIT;
	int r;

	if (!progs)
		return;
	/* prog-vdso: file-backed code and a vDSO snapshot */
	(void)snprintf(src, sizeof(src), "%s/prog-vdso", progs);
	path_in(progcopy, sizeof(progcopy), "prog-copy");
	sh("cp '%s' '%s'", src, progcopy);
	path_in(capdir, sizeof(capdir), "cap");
	path_in(bundir, sizeof(bundir), "bundle");
	path_in(refdir, sizeof(refdir), "bundle-ref");
	argv[0] = progcopy;
	argv[1] = NULL;
	memset(&so, 0, sizeof(so));
	so.outdir = capdir;
	so.quiet_target = true;
	r = ptd_swpt_run(argv, &so, &res, &d);
	if (r < 0) {
		fprintf(stderr, "cannot trace: %s\n", d.msg);
		return;
	}
	if (ptd_bundle_save(capdir, bundir, NULL, &d) < 0) {
		CHECK_FAIL_("save: %s", d.msg);
		return;
	}
	o.reference_images = true;
	if (ptd_bundle_save(capdir, refdir, &o, &d) < 0) {
		CHECK_FAIL_("save (reference): %s", d.msg);
		return;
	}
	have_capture = true;
}

/* Every insn IP of @g's records equals the capture's ground truth. */
static void check_truth(const struct got *g)
{
	struct ptd_capture c;
	struct ptd_diag d = { "" };
	size_t k = 0;

	REQUIRE(ptd_capture_load(capdir, &c, &d) == 0);
	for (size_t t = 0; t < c.nthreads; t++) {
		uint64_t *ips = NULL;
		size_t n = 0, i = 0;

		if (ptd_capture_read_truth(&c, t, &ips, &n, &d) < 0) {
			CHECK_FAIL_("truth: %s", d.msg);
			break;
		}
		for (; k < g->l.n; k++) {
			const struct ptd_record *r = &g->l.r[k];

			if (r->tid != c.threads[t].tid)
				break;
			if (r->type != PTD_REC_INSN)
				continue;
			if (i >= n || r->u.insn.ip != ips[i]) {
				CHECK_FAIL_("tid %ld insn %zu: ip 0x%llx, "
					    "truth 0x%llx",
					    (long)r->tid, i,
					    (unsigned long long)r->u.insn.ip,
					    (unsigned long long)(i < n ? ips[i]
								       : 0));
				break;
			}
			i++;
		}
		CHECK_EQ_U64(i, n);
		free(ips);
	}
	CHECK_EQ_U64(k, g->l.n);
	ptd_capture_fini(&c);
}

static void test_roundtrip(void)
{
	struct got gc, gb, gr;
	struct ptd_bundle b;
	struct ptd_diag d = { "" };
	enum ptd_input_kind k;
	size_t terr = 99;
	bool prog_seen = false;

	CHECK_EQ_INT(ptd_input_detect(bundir, &k, &d), 0);
	CHECK_EQ_INT(k, PTD_INPUT_BUNDLE);
	REQUIRE(ptd_bundle_load(bundir, &b, &d) == 0);
	CHECK_EQ_STR(b.source, "swpt-capture");
	CHECK(b.nfiles >= 5);	/* manifest, timeline, pt, truth, vdso */
	CHECK(b.nimages >= 2);	/* the program, ld.so, libc */
	for (size_t i = 0; i < b.nimages; i++) {
		CHECK(b.images[i].file != NULL);
		if (!strcmp(b.images[i].path, progcopy))
			CHECK(b.images[i].build_id != NULL);
	}
	ptd_bundle_fini(&b);

	CHECK_EQ_INT(decode(capdir, &gc, &terr, &d), 0);
	CHECK_EQ_INT(decode(bundir, &gb, &terr, &d), 0);
	CHECK_EQ_U64(terr, 0);
	CHECK_EQ_INT(gb.infos, 1);
	CHECK_EQ_INT(gb.info.kind, PTD_INPUT_BUNDLE);
	CHECK(gb.l.n > 1000);
	CHECK(reccmp_lists(stderr, "capture: ", &gc.l, "bundle: ", &gb.l));
	/* records name the traced path, not the bundle's copy */
	for (size_t i = 0; i < gb.nnames; i++) {
		CHECK(!strstr(gb.names[i], "/images/"));
		prog_seen |= !strcmp(gb.names[i], progcopy);
	}
	CHECK(prog_seen);
	check_truth(&gb);
	CHECK_EQ_INT(decode(refdir, &gr, &terr, &d), 0);
	CHECK(reccmp_lists(stderr, "capture: ", &gc.l, "ref bundle: ", &gr.l));
	got_free(&gc);
	got_free(&gb);
	got_free(&gr);
}

/* ---- corruptions ------------------------------------------------------ */

static char *slurp(const char *path, size_t *len)
{
	char *t = NULL;

	if (ptd_file_read_all(path, 64u << 20, &t, len) < 0)
		exit(2);
	return t;
}

static void put(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || ptd_write_all(fd, p, n) < 0)
		exit(2);
	(void)close(fd);
}

/* Load @dir: must be refused with @err and a message containing @a and
 * @b (either may be NULL). */
static void refused(const char *dir, int err, const char *a, const char *b,
		    const char *what)
{
	struct ptd_bundle bun;
	struct ptd_diag d = { "" };
	int r = ptd_bundle_load(dir, &bun, &d);

	if (r == 0) {
		CHECK_FAIL_("%s: loaded", what);
		ptd_bundle_fini(&bun);
		return;
	}
	if (r != err)
		CHECK_FAIL_("%s: expected %d (%s), got %d: %s", what, err,
			    ptd_strerror(err), r, d.msg);
	if (a && !strstr(d.msg, a))
		CHECK_FAIL_("%s: message lacks \"%s\": %s", what, a, d.msg);
	if (b && !strstr(d.msg, b))
		CHECK_FAIL_("%s: message lacks \"%s\": %s", what, b, d.msg);
}

static void loads(const char *dir, const char *what)
{
	struct ptd_bundle bun;
	struct ptd_diag d = { "" };

	if (ptd_bundle_load(dir, &bun, &d) < 0)
		CHECK_FAIL_("%s: refused: %s", what, d.msg);
	else
		ptd_bundle_fini(&bun);
}

/* The names of every file in bundle @dir (files, then copied images). */
static size_t bundle_files(const char *dir, char names[][256], size_t max)
{
	struct ptd_bundle b;
	struct ptd_diag d = { "" };
	size_t n = 0, i;

	if (ptd_bundle_load(dir, &b, &d) < 0)
		return 0;
	for (i = 0; i < b.nfiles && n < max; i++)
		(void)snprintf(names[n++], 256, "%s", b.files[i].name);
	for (i = 0; i < b.nimages && n < max; i++)
		if (b.images[i].file)
			(void)snprintf(names[n++], 256, "%s", b.images[i].file);
	ptd_bundle_fini(&b);
	return n;
}

/* A load cancelled at any point of its verification stops there, naming
 * the file; with enough patience it loads.  Every listed file is asked
 * about at least once. */
static void test_load_cancel(void)
{
	struct ptd_diag d = { "" };
	struct ptd_bundle b;
	unsigned limit;
	int r = -ECANCELED;

	for (limit = 0; limit < 100000 && r == -ECANCELED; limit++) {
		struct ask_count a = { 0, limit };
		struct ptd_cancel c = { stop_after, &a };

		d.msg[0] = 0;
		r = ptd_bundle_load_until(bundir, &c, &b, &d);
		if (r == -ECANCELED) {
			CHECK_CONTAINS(d.msg, "verification stopped");
			CHECK_CONTAINS(d.msg, "file '");
		}
	}
	REQUIRE(r == 0);
	CHECK(limit - 1 >= b.nfiles + b.nimages);
	ptd_bundle_fini(&b);
}

static void test_file_corruptions(void)
{
	char names[64][256], work[PATH_MAX], path[2 * PATH_MAX];
	size_t n, i, len;

	path_in(work, sizeof(work), "corrupt");
	sh("cp -a '%s' '%s'", bundir, work);
	n = bundle_files(work, names, 64);
	CHECK(n >= 7);
	for (i = 0; i < n; i++) {
		char *orig;

		(void)snprintf(path, sizeof(path), "%s/%s", work, names[i]);
		orig = slurp(path, &len);
		/* truncated */
		REQUIRE(len > 0);
		put(path, orig, len - 1);
		refused(work, -PTD_ECHECKSUM, names[i], "truncated", names[i]);
		/* one byte flipped */
		orig[len / 2] ^= 0x20;
		put(path, orig, len);
		refused(work, -PTD_ECHECKSUM, names[i], "checksum mismatch",
			names[i]);
		orig[len / 2] ^= 0x20;
		/* grown */
		put(path, orig, len);
		{
			int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);

			REQUIRE(fd >= 0 && write(fd, "x", 1) == 1);
			(void)close(fd);
		}
		refused(work, -PTD_ECHECKSUM, names[i], "wrong size",
			names[i]);
		/* deleted */
		REQUIRE(unlink(path) == 0);
		refused(work, -ENOENT, names[i], "missing", names[i]);
		/* replaced by a symlink to an identical copy elsewhere */
		{
			char other[PATH_MAX];

			path_in(other, sizeof(other), "other");
			put(other, orig, len);
			REQUIRE(symlink(other, path) == 0);
			refused(work, -PTD_EFORMAT, names[i], "symlink",
				names[i]);
			REQUIRE(unlink(path) == 0);
		}
		put(path, orig, len);
		free(orig);
		loads(work, "restored");
	}
	/* the manifest itself */
	(void)snprintf(path, sizeof(path), "%s/" PTD_BUNDLE_MANIFEST, work);
	REQUIRE(unlink(path) == 0);
	refused(work, -ENOENT, "no " PTD_BUNDLE_MANIFEST, work, "manifest");
	REQUIRE(ptd_rm_rf(work) == 0);
}

/* ---- the manifest ----------------------------------------------------- */

static char mwork[PATH_MAX], mpath[2 * PATH_MAX];
static char *morig;
static size_t morig_len;

static cJSON *manifest(void)
{
	cJSON *j = cJSON_ParseWithLength(morig, morig_len);

	if (!j)
		exit(2);
	return j;
}

/* Write @j (consumed) as the manifest, check the refusal, restore. */
static void bad_manifest(cJSON *j, int err, const char *a, const char *b,
			 const char *what)
{
	char *t = cJSON_PrintUnformatted(j);

	cJSON_Delete(j);
	if (!t)
		exit(2);
	put(mpath, t, strlen(t));
	free(t);
	refused(mwork, err, a, b, what);
	put(mpath, morig, morig_len);
}

static cJSON *item(cJSON *j, const char *arr, int i)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItem(j, arr), i);
}

/* The index of the files[] entry whose name contains @s. */
static int file_index(const cJSON *j, const char *s)
{
	const cJSON *it;
	int i = 0;

	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "files")) {
		if (strstr(cJSON_GetObjectItem(it, "name")->valuestring, s))
			return i;
		i++;
	}
	exit(2);
}

static void test_manifest_fields(void)
{
	static const char *const top[] = { "format", "version", "created",
					   "source", "files", "images" };
	static const char *const fkeys[] = { "name", "size", "sha256" };
	static const char *const ikeys[] = { "path", "size", "sha256" };
	char what[128];
	cJSON *j;
	size_t i;

	path_in(mwork, sizeof(mwork), "manifest");
	sh("cp -a '%s' '%s'", bundir, mwork);
	(void)snprintf(mpath, sizeof(mpath), "%s/" PTD_BUNDLE_MANIFEST, mwork);
	morig = slurp(mpath, &morig_len);
	loads(mwork, "pristine");

	/* each field removed, or of the wrong type */
	for (i = 0; i < PTD_ARRAY_SIZE(top); i++) {
		j = manifest();
		cJSON_DeleteItemFromObject(j, top[i]);
		(void)snprintf(what, sizeof(what), "no %s", top[i]);
		bad_manifest(j, -PTD_EFORMAT, top[i], "missing", what);
		j = manifest();
		cJSON_ReplaceItemInObject(j, top[i], cJSON_CreateBool(1));
		(void)snprintf(what, sizeof(what), "%s: bool", top[i]);
		bad_manifest(j, -PTD_EFORMAT, top[i], "not", what);
	}
	for (i = 0; i < PTD_ARRAY_SIZE(fkeys); i++) {
		j = manifest();
		cJSON_DeleteItemFromObject(item(j, "files", 1), fkeys[i]);
		(void)snprintf(what, sizeof(what), "files[1] no %s", fkeys[i]);
		bad_manifest(j, -PTD_EFORMAT, "files[1]", fkeys[i], what);
		j = manifest();
		cJSON_ReplaceItemInObject(item(j, "files", 1), fkeys[i],
					  cJSON_CreateArray());
		bad_manifest(j, -PTD_EFORMAT, "files[1]", fkeys[i], what);
	}
	for (i = 0; i < PTD_ARRAY_SIZE(ikeys); i++) {
		j = manifest();
		cJSON_DeleteItemFromObject(item(j, "images", 0), ikeys[i]);
		(void)snprintf(what, sizeof(what), "images[0] no %s", ikeys[i]);
		bad_manifest(j, -PTD_EFORMAT, "images[0]", ikeys[i], what);
		j = manifest();
		cJSON_ReplaceItemInObject(item(j, "images", 0), ikeys[i],
					  cJSON_CreateObject());
		bad_manifest(j, -PTD_EFORMAT, "images[0]", ikeys[i], what);
	}
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "images", 0), "file",
				  cJSON_CreateNumber(1));
	bad_manifest(j, -PTD_EFORMAT, "images[0].file", "expected a string",
		     "file: number");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "images", 0), "build_id",
				  cJSON_CreateString("xyz"));
	bad_manifest(j, -PTD_EFORMAT, "images[0].build_id", "hex",
		     "build_id");

	/* header values */
	j = manifest();
	cJSON_ReplaceItemInObject(j, "format", cJSON_CreateString("zip"));
	bad_manifest(j, -PTD_EFORMAT, "format", "zip", "format");
	j = manifest();
	cJSON_ReplaceItemInObject(j, "version", cJSON_CreateNumber(2));
	bad_manifest(j, -PTD_EVERSION, "version", "2", "version 2");
	j = manifest();
	cJSON_ReplaceItemInObject(j, "version", cJSON_CreateNumber(1.5));
	bad_manifest(j, -PTD_EFORMAT, "version", "integer", "version 1.5");
	j = manifest();
	cJSON_ReplaceItemInObject(j, "source", cJSON_CreateString("perf"));
	bad_manifest(j, -PTD_EFORMAT, "source", NULL, "source");
	j = manifest();
	cJSON_ReplaceItemInObject(j, "created", cJSON_CreateString("today"));
	bad_manifest(j, -PTD_EFORMAT, "created", NULL, "created");
	j = manifest();
	cJSON_AddNumberToObject(j, "extra", 1);
	bad_manifest(j, -PTD_EFORMAT, "unknown field", "extra", "extra");
	j = manifest();
	cJSON_AddNumberToObject(item(j, "files", 0), "mode", 1);
	bad_manifest(j, -PTD_EFORMAT, "files[0]", "mode", "extra in entry");
	j = manifest();
	cJSON_AddNumberToObject(j, "version", 1);
	bad_manifest(j, -PTD_EFORMAT, "version", "twice", "duplicate key");
	j = manifest();
	cJSON_ReplaceItemInObject(j, "files", cJSON_CreateObject());
	bad_manifest(j, -PTD_EFORMAT, "files", "array", "files object");

	/* sizes and hashes */
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "files", 2), "size",
				  cJSON_CreateNumber(
					  cJSON_GetObjectItem(item(j, "files",
								   2),
							      "size")
						  ->valuedouble + 1));
	bad_manifest(j, -PTD_ECHECKSUM, "capture/", "expected", "size+1");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "files", 2), "size",
				  cJSON_CreateNumber(-1));
	bad_manifest(j, -PTD_EFORMAT, "files[2].size", "non-negative",
		     "size -1");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "images", 0), "size",
				  cJSON_CreateNumber(1e15));
	bad_manifest(j, -PTD_ELIMIT, "images[0].size", "limit", "size 1e15");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "files", 0), "sha256",
				  cJSON_CreateString(
					  "00000000000000000000000000000000"
					  "00000000000000000000000000000000"));
	bad_manifest(j, -PTD_ECHECKSUM, "capture/", "checksum mismatch",
		     "wrong hash");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "files", 0), "sha256",
				  cJSON_CreateString("abc"));
	bad_manifest(j, -PTD_EFORMAT, "files[0].sha256", "hex", "short hash");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "images", 0), "sha256",
				  cJSON_CreateString(
					  "0000000000000000000000000000000000"
					  "000000000000000000000000000000"));
	bad_manifest(j, -PTD_ECHECKSUM, "images/", "checksum mismatch",
		     "wrong image hash");

	/* names */
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "files", 0), "name",
				  cJSON_CreateString("../x"));
	bad_manifest(j, -PTD_EFORMAT, "files[0].name", "..", "../x");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "files", 0), "name",
				  cJSON_CreateString("capture/../../x"));
	bad_manifest(j, -PTD_EFORMAT, "files[0].name", "..", "capture/..");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "files", 0), "name",
				  cJSON_CreateString("/etc/passwd"));
	bad_manifest(j, -PTD_EFORMAT, "files[0].name", "absolute", "abs");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "images", 0), "file",
				  cJSON_CreateString("/etc/passwd"));
	bad_manifest(j, -PTD_EFORMAT, "images[0].file", "absolute",
		     "abs image");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "files", 0), "name",
				  cJSON_CreateString("capture//x"));
	bad_manifest(j, -PTD_EFORMAT, "files[0].name", "plain", "//");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "files", 0), "name",
				  cJSON_CreateString("ptd-bundle.json"));
	bad_manifest(j, -PTD_EFORMAT, "files[0].name", "plain", "manifest");
	j = manifest();
	cJSON_ReplaceItemInObject(item(j, "images", 0), "path",
				  cJSON_CreateString("libc.so"));
	bad_manifest(j, -PTD_EFORMAT, "images[0].path", "absolute",
		     "relative image path");

	/* duplicates */
	j = manifest();
	cJSON_AddItemToArray(cJSON_GetObjectItem(j, "files"),
			     cJSON_Duplicate(item(j, "files", 1), 1));
	bad_manifest(j, -PTD_EFORMAT, "listed twice", "capture/", "dup file");
	j = manifest();
	cJSON_AddItemToArray(cJSON_GetObjectItem(j, "images"),
			     cJSON_Duplicate(item(j, "images", 0), 1));
	bad_manifest(j, -PTD_EFORMAT, "listed twice", NULL, "dup image");

	/* a file the capture needs, unlisted */
	{
		static const char *const need[] = { "capture.json",
						     "timeline.jsonl", "pt-",
						     "truth-", "snap-" };

		for (i = 0; i < PTD_ARRAY_SIZE(need); i++) {
			j = manifest();
			cJSON_DeleteItemFromArray(
				cJSON_GetObjectItem(j, "files"),
				file_index(j, need[i]));
			(void)snprintf(what, sizeof(what), "unlisted %s",
				       need[i]);
			bad_manifest(j, -PTD_EFORMAT, need[i], "not listed",
				     what);
		}
	}
	j = manifest();
	{
		cJSON *im = item(j, "images", 0);
		char p[PATH_MAX];

		(void)snprintf(p, sizeof(p), "%s",
			       cJSON_GetObjectItem(im, "path")->valuestring);
		cJSON_DeleteItemFromArray(cJSON_GetObjectItem(j, "images"), 0);
		bad_manifest(j, -PTD_EFORMAT, p, "not listed",
			     "unlisted image");
	}
	j = manifest();
	cJSON_DeleteItemFromObject(j, "images");
	cJSON_AddItemToObject(j, "images", cJSON_CreateArray());
	bad_manifest(j, -PTD_EFORMAT, "image", "not listed", "no images");

	/* not JSON, huge */
	put(mpath, "{\"format\":", 10);
	refused(mwork, -PTD_EFORMAT, "not valid JSON", NULL, "truncated");
	put(mpath, morig, morig_len);
	loads(mwork, "restored");
}

/* Random mutations of the manifest text never crash; each is refused with
 * a message, or parses to what the original says, or is refused by the
 * full load (a different name, size or hash). */
static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static bool same_bundle(const struct ptd_bundle *a, const struct ptd_bundle *b)
{
	size_t i;

	if (a->nfiles != b->nfiles || a->nimages != b->nimages)
		return false;
	for (i = 0; i < a->nfiles; i++)
		if (strcmp(a->files[i].name, b->files[i].name) ||
		    a->files[i].size != b->files[i].size ||
		    memcmp(a->files[i].sha256, b->files[i].sha256, 32))
			return false;
	for (i = 0; i < a->nimages; i++)
		if (strcmp(a->images[i].path, b->images[i].path) ||
		    !a->images[i].file != !b->images[i].file ||
		    (a->images[i].file &&
		     strcmp(a->images[i].file, b->images[i].file)) ||
		    a->images[i].size != b->images[i].size ||
		    memcmp(a->images[i].sha256, b->images[i].sha256, 32))
			return false;
	return true;
}

static void test_manifest_fuzz(void)
{
	static const char tokens[][8] = { "\"", "{", "}", "[", "]", ",", ":",
					  "0", "-1", "1e99", "null", "..",
					  "/", "\\u0000", "true", "\"\"" };
	struct ptd_bundle orig, b;
	size_t accepted = 0, refused_n = 0, full = 0;
	char *buf;

	REQUIRE(ptd_bundle_parse_manifest(morig, morig_len, "m", &orig,
					  NULL) == 0);
	buf = malloc(morig_len + 64);
	REQUIRE(buf);
	for (unsigned iter = 0; iter < 4000; iter++) {
		struct ptd_diag d = { "" };
		size_t len = morig_len, pos, nmut = 1 + rnd() % 3;
		int r;

		memcpy(buf, morig, len);
		for (size_t m = 0; m < nmut && len > 1; m++) {
			pos = rnd() % len;
			switch (rnd() % 4) {
			case 0:	/* flip a byte */
				buf[pos] = (char)(buf[pos] ^ (1u << rnd() % 8));
				break;
			case 1:	/* delete one */
				memmove(buf + pos, buf + pos + 1,
					len - pos - 1);
				len--;
				break;
			case 2:	/* a random byte */
				buf[pos] = (char)rnd();
				break;
			default: {	/* insert a JSON token */
				const char *t = tokens[rnd() %
						       PTD_ARRAY_SIZE(tokens)];
				size_t tl = strlen(t);

				if (len + tl > morig_len + 60)
					break;
				memmove(buf + pos + tl, buf + pos, len - pos);
				memcpy(buf + pos, t, tl);
				len += tl;
			}
			}
		}
		r = ptd_bundle_parse_manifest(buf, len, "fuzz", &b, &d);
		if (r < 0) {
			if (!d.msg[0] && r != -ENOMEM)
				CHECK_FAIL_("iteration %u: refused (%d) "
					    "without a message", iter, r);
			refused_n++;
			continue;
		}
		accepted++;
		if (!same_bundle(&orig, &b) && full < 25) {
			/* a different name, size or hash: the full load must
			 * refuse it */
			full++;
			put(mpath, buf, len);
			{
				struct ptd_bundle lb;
				struct ptd_diag ld = { "" };

				if (ptd_bundle_load(mwork, &lb, &ld) == 0) {
					CHECK_FAIL_("iteration %u: a changed "
						    "manifest loaded", iter);
					ptd_bundle_fini(&lb);
				}
			}
			put(mpath, morig, morig_len);
		}
		ptd_bundle_fini(&b);
	}
	fprintf(stderr, "fuzz: %zu refused, %zu parsed, %zu fully loaded\n",
		refused_n, accepted, full);
	CHECK(refused_n > 1000);
	free(buf);
	ptd_bundle_fini(&orig);
	loads(mwork, "after fuzz");
}

/* ---- saving ----------------------------------------------------------- */

/* Whether @dir's parent holds an entry starting with @prefix. */
static size_t count_prefix(const char *prefix)
{
	char cmd[PATH_MAX + 64], line[64];
	FILE *p;

	(void)snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -c '^%s' || true",
		       tmpdir, prefix);
	p = popen(cmd, "r");
	if (!p || !fgets(line, sizeof(line), p))
		exit(2);
	(void)pclose(p);
	return (size_t)atoi(line);
}

static size_t count_entries(const char *dir)
{
	char cmd[PATH_MAX + 64], line[64];
	FILE *p;

	(void)snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	p = popen(cmd, "r");
	if (!p || !fgets(line, sizeof(line), p))
		exit(2);
	(void)pclose(p);
	return (size_t)atoi(line);
}

static void test_save_refusals(void)
{
	char dst[PATH_MAX], cap2[PATH_MAX], path[2 * PATH_MAX];
	struct ptd_diag d = { "" };
	struct ptd_bundle_save_opts o = PTD_BUNDLE_SAVE_OPTS_INIT;
	struct {
		struct ptd_bundle_save_opts o;
		uint64_t extra;
	} big;
	struct stat st;
	int fd;

	/* into a non-empty directory */
	path_in(dst, sizeof(dst), "full");
	REQUIRE(mkdir(dst, 0755) == 0);
	(void)snprintf(path, sizeof(path), "%s/keep", dst);
	put(path, "x", 1);
	CHECK_EQ_INT(ptd_bundle_save(capdir, dst, NULL, &d), -EEXIST);
	CHECK_CONTAINS(d.msg, "not empty");
	CHECK_EQ_INT(count_entries(dst), 1);
	CHECK_EQ_U64(count_prefix("full.tmp-"), 0);
	/* into a file */
	CHECK_EQ_INT(ptd_bundle_save(capdir, path, NULL, &d), -EEXIST);
	/* into an empty directory (trailing slash): fine */
	path_in(dst, sizeof(dst), "empty");
	REQUIRE(mkdir(dst, 0755) == 0);
	(void)snprintf(path, sizeof(path), "%s/", dst);
	CHECK_EQ_INT(ptd_bundle_save(capdir, path, NULL, &d), 0);
	loads(dst, "saved into an empty dir");
	REQUIRE(stat(dst, &st) == 0);
	CHECK_EQ_INT(st.st_mode & 07777, 0755);
	CHECK_EQ_U64(count_prefix("empty.tmp-"), 0);
	/* options: unknown non-zero tail refused, zero tail fine */
	memset(&big, 0, sizeof(big));
	big.o = o;
	big.o.sz = sizeof(big);
	big.extra = 1;
	path_in(dst, sizeof(dst), "opts");
	CHECK_EQ_INT(ptd_bundle_save(capdir, dst, &big.o, &d), -EINVAL);
	big.extra = 0;
	CHECK_EQ_INT(ptd_bundle_save(capdir, dst, &big.o, &d), 0);
	/* set_owner: to ourselves (works unprivileged) */
	path_in(dst, sizeof(dst), "owned");
	o.set_owner = true;
	o.uid = getuid() == 0 ? 1234 : getuid();
	o.gid = getuid() == 0 ? 1234 : getgid();
	CHECK_EQ_INT(ptd_bundle_save(capdir, dst, &o, &d), 0);
	(void)snprintf(path, sizeof(path), "%s/" PTD_BUNDLE_MANIFEST, dst);
	REQUIRE(stat(path, &st) == 0);
	CHECK_EQ_INT(st.st_uid, o.uid);
	REQUIRE(stat(dst, &st) == 0);
	CHECK_EQ_INT(st.st_gid, o.gid);
	/* bad arguments */
	CHECK_EQ_INT(ptd_bundle_save(NULL, dst, NULL, &d), -EINVAL);
	CHECK_EQ_INT(ptd_bundle_save(capdir, "", NULL, &d), -EINVAL);
	CHECK_EQ_INT(ptd_bundle_save_at(capdir, -1, NULL, &d), -EINVAL);

	/* a failure mid-save: a capture whose truth file is gone (after
	 * capture.json and timeline were copied) leaves nothing behind */
	path_in(cap2, sizeof(cap2), "cap2");
	sh("cp -a '%s' '%s'", capdir, cap2);
	sh("rm -f '%s'/truth-*.bin%s", cap2, "");
	path_in(dst, sizeof(dst), "broken");
	CHECK_EQ_INT(ptd_bundle_save(cap2, dst, NULL, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "truth-");
	CHECK(access(dst, F_OK) != 0);
	CHECK_EQ_U64(count_prefix("broken.tmp-"), 0);
	/* the same into a directory fd: the directory is empty again */
	REQUIRE(mkdir(dst, 0755) == 0);
	fd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	CHECK_EQ_INT(ptd_bundle_save_at(cap2, fd, NULL, &d), -ENOENT);
	CHECK_EQ_INT(count_entries(dst), 0);
	/* save_at that works, then refuses the now non-empty directory */
	CHECK_EQ_INT(ptd_bundle_save_at(capdir, fd, NULL, &d), 0);
	CHECK_EQ_INT(count_entries(dst), 3);	/* capture images manifest */
	loads(dst, "saved at a dir fd");
	CHECK_EQ_INT(ptd_bundle_save_at(capdir, fd, NULL, &d), -EEXIST);
	CHECK_CONTAINS(d.msg, "not empty");
	(void)close(fd);
	(void)snprintf(path, sizeof(path), "%s/" PTD_BUNDLE_MANIFEST, dst);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	CHECK_EQ_INT(ptd_bundle_save_at(capdir, fd, NULL, &d), -ENOTDIR);
	(void)close(fd);
	/* not a capture */
	path_in(dst, sizeof(dst), "nocap");
	CHECK(ptd_bundle_save(tmpdir, dst, NULL, &d) < 0);
	CHECK_CONTAINS(d.msg, "capture.json");
	CHECK(access(dst, F_OK) != 0);
	REQUIRE(ptd_rm_rf(cap2) == 0);
}

/* Last: the traced program changes, then goes away. */
static void test_images_gone(void)
{
	struct got g, gb;
	struct ptd_diag d = { "" };
	char dst[PATH_MAX];
	size_t terr = 0;
	int fd;

	/* another file renamed over the program (as an update does): a
	 * bundle saved now refuses it, naming it, and leaves nothing.  (An
	 * offline decode reads what the path holds, as documented in
	 * aspace/iscache.h: on another machine it rightly differs.) */
	sh("cp '%s' '%s.new' && mv '%s.new' '%s'", progcopy, progcopy,
	   progcopy, progcopy);
	path_in(dst, sizeof(dst), "replaced");
	CHECK_EQ_INT(ptd_bundle_save(capdir, dst, NULL, &d), -PTD_EIDENTITY);
	CHECK_CONTAINS(d.msg, progcopy);
	CHECK_CONTAINS(d.msg, "is not the file the process mapped");
	CHECK(access(dst, F_OK) != 0);
	CHECK_EQ_U64(count_prefix("replaced.tmp-"), 0);

	/* a referencing bundle refuses a changed file, naming it */
	fd = open(progcopy, O_WRONLY | O_APPEND | O_CLOEXEC);
	REQUIRE(fd >= 0 && write(fd, "x", 1) == 1);
	(void)close(fd);
	refused(refdir, -PTD_ECHECKSUM, "referenced image", progcopy,
		"changed reference");
	/* saving a capture whose image is gone fails and leaves nothing */
	REQUIRE(unlink(progcopy) == 0);
	refused(refdir, -ENOENT, progcopy, "missing", "gone reference");
	path_in(dst, sizeof(dst), "late");
	CHECK_EQ_INT(ptd_bundle_save(capdir, dst, NULL, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, progcopy);
	CHECK(access(dst, F_OK) != 0);
	CHECK_EQ_U64(count_prefix("late.tmp-"), 0);
	/* the copying bundle decodes on its own */
	CHECK_EQ_INT(decode(bundir, &gb, &terr, &d), 0);
	CHECK_EQ_U64(terr, 0);
	check_truth(&gb);
	/* while the capture alone no longer can */
	(void)decode(capdir, &g, &terr, &d);
	CHECK(terr > 0 || g.l.n < gb.l.n / 2 ||
	      reccmp_lists(stderr, "c: ", &g.l, "b: ", &gb.l) == false);
	got_free(&g);
	got_free(&gb);
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		return 2;
	RUN(test_sha256_vectors);
	RUN(test_sha256_file);
	RUN(test_sha256_cancel);
	setup_capture();
	if (!have_capture) {
		if (check_failures)
			return check_done();
		SKIP_ALL("no capture to bundle (PTD_TEST_PROGS unset or "
			 "tracing refused)");
	}
	RUN(test_roundtrip);
	RUN(test_load_cancel);
	RUN(test_file_corruptions);
	RUN(test_manifest_fields);
	RUN(test_manifest_fuzz);
	RUN(test_save_refusals);
	RUN(test_images_gone);
	free(morig);
	(void)ptd_rm_rf(tmpdir);
	return check_done();
}
