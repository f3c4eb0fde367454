/* SPDX-License-Identifier: MIT */
/*
 * Tests for aspace/iscache and aspace/image: sections from real files,
 * partial unmaps, exec, the live-memory callback, and that libipt's own
 * pt_image (what the decoder sees) agrees with the region list: a trace made
 * with libipt's encoder is decoded over a file of NOPs, and the decoder must
 * stop exactly where our regions say the code ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <intel-pt.h>

#include "aspace/image.h"
#include "aspace/iscache.h"
#include "aspace/maps.h"
#include "common/fileio.h"
#include "check.h"

#define PAGE 0x1000u
#define VA 0x10000000ull

static char tmpdir[] = "/tmp/ptd-test-image-XXXXXX";
static char pattern_path[PATH_MAX];	/* 4 pages, byte i = pattern(i) */
static char nops_path[PATH_MAX];	/* 4 pages of 0x90 */
static char other_path[PATH_MAX];	/* 1 page of 0xcc */

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 7 + i / 251 + 3);
}

static int write_file(const char *path, size_t len, int fill)
{
	uint8_t *b = malloc(len);
	int r;

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		b[i] = fill < 0 ? pattern(i) : (uint8_t)fill;
	r = ptd_file_write_atomic(path, b, len);
	free(b);
	return r;
}

static void setup(void)
{
	if (!mkdtemp(tmpdir))
		SKIP_ALL("cannot create a temporary directory: %s",
			 strerror(errno));
	(void)snprintf(pattern_path, sizeof(pattern_path), "%s/pattern.bin",
		       tmpdir);
	(void)snprintf(nops_path, sizeof(nops_path), "%s/nops.bin", tmpdir);
	(void)snprintf(other_path, sizeof(other_path), "%s/other.bin", tmpdir);
	if (write_file(pattern_path, 4 * PAGE, -1) < 0 ||
	    write_file(nops_path, 4 * PAGE, 0x90) < 0 ||
	    write_file(other_path, PAGE, 0xcc) < 0)
		SKIP_ALL("cannot write test files in %s", tmpdir);
}

static void teardown(void)
{
	(void)unlink(pattern_path);
	(void)unlink(nops_path);
	(void)unlink(other_path);
	(void)rmdir(tmpdir);
}

/* Check that the image holds @len bytes of pattern.bin from file offset
 * @off at @va, read in odd-sized pieces. */
static void check_pattern(struct ptd_image *img, uint64_t va, uint64_t off,
			  uint64_t len)
{
	uint8_t buf[333];
	uint64_t done = 0;

	while (done < len) {
		size_t want = len - done < sizeof(buf) ? len - done : sizeof(buf);
		int n = ptd_image_read(img, va + done, buf, want);

		if (n <= 0) {
			CHECK_FAIL_("read at 0x%" PRIx64 " returned %d",
				    va + done, n);
			return;
		}
		for (int i = 0; i < n; i++) {
			if (buf[i] != pattern(off + done + (uint64_t)i)) {
				CHECK_FAIL_("byte at 0x%" PRIx64
					    ": expected 0x%02x, got 0x%02x",
					    va + done + (uint64_t)i,
					    pattern(off + done + (uint64_t)i),
					    buf[i]);
				return;
			}
		}
		done += (uint64_t)n;
	}
}

static bool readable(struct ptd_image *img, uint64_t va)
{
	uint8_t b;

	return ptd_image_read(img, va, &b, 1) == 1;
}

/* Number of sections for @path in @img's pt_image, counted by removing
 * them from a copy. */
/* libipt reads every section from ptd's private copy of the file's bytes:
 * count the sections of each copy made of @path. */
static int pt_sections_of(struct ptd_image *img, const char *path)
{
	struct pt_image *copy = pt_image_alloc("copy");
	const char *done[64];
	int n = 0, isid, k, nd = 0;

	if (!copy)
		return -1;
	if (pt_image_copy(copy, ptd_image_pt(img)) != 0) {
		pt_image_free(copy);
		return -1;
	}
	for (isid = 1; isid < 4096 && nd < 64; isid++) {
		const struct ptd_module *m =
			ptd_iscache_module(ptd_image_iscache(img), isid);

		if (!m || strcmp(m->path, path))
			continue;
		for (k = 0; k < nd && strcmp(done[k], m->section_file); k++)
			;
		if (k < nd)
			continue;
		done[nd++] = m->section_file;
		n += pt_image_remove_by_filename(copy, m->section_file, NULL);
	}
	pt_image_free(copy);
	return n;
}

/* Decode a trace that enables tracing at @ip over @img with libipt's
 * instruction decoder.  Returns the number of instructions decoded before
 * the decoder failed; *ret_err gets its error, *ret_isid the last isid. */
static long decode_from(struct ptd_image *img, uint64_t ip, int *ret_err,
			int *ret_isid)
{
	uint8_t trace[256];
	struct pt_config cfg;
	struct pt_encoder *enc;
	struct pt_insn_decoder *dec;
	struct pt_packet pk;
	long count = 0;
	int r;

	pt_config_init(&cfg);
	cfg.begin = trace;
	cfg.end = trace + sizeof(trace);
	enc = pt_alloc_encoder(&cfg);
	if (!enc)
		return -1;
	memset(&pk, 0, sizeof(pk));
	pk.type = ppt_psb;
	r = pt_enc_next(enc, &pk);
	memset(&pk, 0, sizeof(pk));
	pk.type = ppt_mode;
	pk.payload.mode.leaf = pt_mol_exec;
	pk.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
	r |= pt_enc_next(enc, &pk) < 0 ? -1 : 0;
	memset(&pk, 0, sizeof(pk));
	pk.type = ppt_psbend;
	r |= pt_enc_next(enc, &pk) < 0 ? -1 : 0;
	memset(&pk, 0, sizeof(pk));
	pk.type = ppt_tip_pge;
	pk.payload.ip.ipc = pt_ipc_sext_48;
	pk.payload.ip.ip = ip;
	r |= pt_enc_next(enc, &pk) < 0 ? -1 : 0;
	{
		uint64_t off = 0;

		(void)pt_enc_get_offset(enc, &off);
		cfg.end = trace + off;
	}
	pt_free_encoder(enc);
	if (r < 0)
		return -1;

	dec = pt_insn_alloc_decoder(&cfg);
	if (!dec)
		return -1;
	(void)pt_insn_set_image(dec, ptd_image_pt(img));
	r = pt_insn_sync_forward(dec);
	*ret_isid = -1;
	while (r >= 0 && count < 100000) {
		struct pt_insn insn;

		while (r & pts_event_pending) {
			struct pt_event ev;

			r = pt_insn_event(dec, &ev, sizeof(ev));
			if (r < 0)
				break;
		}
		if (r < 0)
			break;
		r = pt_insn_next(dec, &insn, sizeof(insn));
		if (r < 0)
			break;
		/* only NOPs are expected: stop at anything else */
		if (insn.ip != ip + (uint64_t)count) {
			r = 1;
			break;
		}
		*ret_isid = insn.isid;
		count++;
	}
	*ret_err = r;
	pt_insn_free_decoder(dec);
	return count;
}

/* A file truncated (or rewritten shorter) by its owner after ptd added
 * it: the bytes ptd decodes with stay readable, without a fault (a
 * mapping of the file itself would end the process with SIGBUS), and a
 * FIFO named as an image is refused at once instead of blocking. */
static void test_file_changes_under_ptd(void)
{
	char path[PATH_MAX + 16], fifo[PATH_MAX + 16];
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "img", &img);
	uint8_t buf[64];
	int isid;

	REQUIRE(ic && img);
	(void)snprintf(path, sizeof(path), "%s/shrinks.bin", tmpdir);
	REQUIRE(write_file(path, 4 * PAGE, -1) == 0);
	isid = ptd_image_map_file(img, path, 0, 4 * PAGE, VA, NULL, NULL);
	REQUIRE(isid > 0);
	/* read once: libipt now holds the section mapped */
	check_pattern(img, VA, 0, 4 * PAGE);
	REQUIRE(truncate(path, 0) == 0);
	check_pattern(img, VA, 0, 4 * PAGE);
	CHECK_EQ_INT(ptd_iscache_read(ic, isid, VA + 3 * PAGE, buf, 64), 64);
	CHECK_EQ_INT(buf[0], pattern(3 * PAGE));
	/* the copy is ptd's: sealed, not the traced file */
	CHECK(strncmp(ptd_iscache_module(ic, isid)->section_file,
		      "/proc/self/fd/", 14) == 0);
	CHECK_EQ_STR(ptd_iscache_module(ic, isid)->path, path);

	(void)snprintf(fifo, sizeof(fifo), "%s/fifo", tmpdir);
	REQUIRE(mkfifo(fifo, 0600) == 0);
	CHECK_EQ_INT(ptd_iscache_add(ic, fifo, 0, PAGE, VA + 64 * PAGE, NULL),
		     -EINVAL);
	(void)unlink(fifo);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

static void test_iscache(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	const struct ptd_module *m;
	uint8_t buf[16];
	int a, b, c;

	REQUIRE(ic);
	CHECK(ptd_iscache_pt(ic) != NULL);
	a = ptd_iscache_add(ic, pattern_path, PAGE, 2 * PAGE, VA, NULL);
	CHECK(a > 0);
	/* same section, same isid */
	CHECK_EQ_INT(ptd_iscache_add(ic, pattern_path, PAGE, 2 * PAGE, VA,
				     NULL), a);
	/* another vaddr, another isid */
	b = ptd_iscache_add(ic, pattern_path, PAGE, 2 * PAGE, VA + 8 * PAGE,
			    "lib");
	CHECK(b > 0 && b != a);

	m = ptd_iscache_module(ic, a);
	REQUIRE(m);
	CHECK_EQ_INT(m->isid, a);
	CHECK_EQ_STR(m->path, pattern_path);
	CHECK_EQ_STR(m->name, pattern_path);
	CHECK_EQ_U64(m->offset, PAGE);
	CHECK_EQ_U64(m->size, 2 * PAGE);
	CHECK_EQ_U64(m->vaddr, VA);
	m = ptd_iscache_module(ic, b);
	REQUIRE(m);
	CHECK_EQ_STR(m->name, "lib");

	/* truncated to the file */
	c = ptd_iscache_add(ic, pattern_path, 3 * PAGE, 100 * PAGE, VA, NULL);
	REQUIRE(c > 0);
	CHECK_EQ_U64(ptd_iscache_module(ic, c)->size, PAGE);

	CHECK_EQ_INT(ptd_iscache_read(ic, a, VA + 5, buf, sizeof(buf)), 16);
	CHECK_EQ_INT(buf[0], pattern(PAGE + 5));
	CHECK_EQ_INT(buf[15], pattern(PAGE + 20));
	/* short at the section end */
	CHECK_EQ_INT(ptd_iscache_read(ic, a, VA + 2 * PAGE - 3, buf, 16), 3);
	CHECK_EQ_INT(ptd_iscache_read(ic, a, VA + 2 * PAGE, buf, 16),
		     -PTD_ENOIMAGE);
	CHECK_EQ_INT(ptd_iscache_read(ic, a, VA - 1, buf, 16), -PTD_ENOIMAGE);
	CHECK_EQ_INT(ptd_iscache_read(ic, 999, VA, buf, 16), -PTD_ENOIMAGE);

	/* errors, with errno */
	CHECK_EQ_INT(ptd_iscache_add(ic, "/nonexistent/x", 0, PAGE, VA, NULL),
		     -ENOENT);
	CHECK_EQ_INT(ptd_iscache_add(ic, pattern_path, 4 * PAGE, PAGE, VA,
				     NULL),
		     -EINVAL);
	CHECK_EQ_INT(ptd_iscache_add(ic, tmpdir, 0, PAGE, VA, NULL), -EISDIR);
	CHECK_EQ_INT(ptd_iscache_add(ic, "/dev/null", 0, PAGE, VA, NULL),
		     -EINVAL);
	CHECK_EQ_INT(ptd_iscache_add(ic, pattern_path, 0, 0, VA, NULL),
		     -EINVAL);
	CHECK(ptd_iscache_module(ic, 0) == NULL);
	CHECK(ptd_iscache_module(ic, -1) == NULL);
	CHECK(ptd_iscache_module(ic, 12345) == NULL);

	if (geteuid() != 0) {
		char path[PATH_MAX];

		(void)snprintf(path, sizeof(path), "%s/noread.bin", tmpdir);
		REQUIRE(write_file(path, PAGE, 0) == 0);
		REQUIRE(chmod(path, 0) == 0);
		CHECK_EQ_INT(ptd_iscache_add(ic, path, 0, PAGE, VA, NULL),
			     -EACCES);
		(void)unlink(path);
	}
	ptd_iscache_free(ic);
	ptd_iscache_free(NULL);
}

/* /bin/true's bytes mapped at a vaddr read back as the file has them. */
static void test_real_file(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "true", &img);
	struct ptd_diag d = { "" };
	char *file = NULL;
	size_t flen = 0;
	uint8_t buf[512];
	uint64_t off;
	const char *name;
	int isid, n;

	REQUIRE(ic && img);
	if (ptd_file_read_all("/bin/true", 16 << 20, &file, &flen) < 0 ||
	    flen < 2 * PAGE) {
		fprintf(stderr, "no usable /bin/true, skipping this test\n");
		goto out;
	}
	isid = ptd_image_map_file(img, "/bin/true", PAGE, PAGE, 0x400000,
				  NULL, &d);
	CHECK(isid > 0);
	n = ptd_image_read(img, 0x400000 + 100, buf, sizeof(buf));
	CHECK_EQ_INT(n, sizeof(buf));
	CHECK(memcmp(buf, file + PAGE + 100, sizeof(buf)) == 0);
	/* a large read is whole, up to the region end */
	{
		uint8_t *all = malloc(PAGE + 100);

		REQUIRE(all);
		CHECK_EQ_INT(ptd_image_read(img, 0x400000, all, PAGE + 100),
			     PAGE);
		CHECK(memcmp(all, file + PAGE, PAGE) == 0);
		free(all);
	}
	/* short at the region end */
	CHECK_EQ_INT(ptd_image_read(img, 0x401000 - 10, buf, sizeof(buf)), 10);
	CHECK(memcmp(buf, file + 2 * PAGE - 10, 10) == 0);
	CHECK_EQ_INT(ptd_image_read(img, 0x401000, buf, 1), -PTD_ENOIMAGE);

	CHECK_EQ_INT(ptd_image_module_of(img, isid, 0x400123, &name, &off), 0);
	CHECK_EQ_STR(name, "/bin/true");
	CHECK_EQ_U64(off, PAGE + 0x123);
out:
	free(file);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

static void test_map_errors(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "errs", &img);
	struct ptd_diag d = { "" };

	REQUIRE(ic && img);
	{
		struct ptd_image *none = (struct ptd_image *)1;

		CHECK_EQ_INT(ptd_image_new(NULL, "x", &none), -EINVAL);
		CHECK(none == NULL);
	}
	CHECK(ptd_image_pt(img) != NULL);
	CHECK(ptd_image_iscache(img) == ic);

	CHECK_EQ_INT(ptd_image_map_file(img, "/nonexistent/lib.so", 0, PAGE,
					VA, NULL, &d),
		     -ENOENT);
	CHECK_CONTAINS(d.msg, "'/nonexistent/lib.so'");
	CHECK_EQ_INT(ptd_image_map_file(img, pattern_path, 8 * PAGE, PAGE, VA,
					NULL, &d),
		     -PTD_ENOIMAGE);
	CHECK_CONTAINS(d.msg, "beyond its end");
	CHECK_EQ_INT(ptd_image_map_file(img, "/dev/null", 0, PAGE, VA, NULL,
					&d),
		     -PTD_ENOIMAGE);
	CHECK_CONTAINS(d.msg, "'/dev/null' at 0x10000000: not a regular file");
	CHECK_EQ_INT(ptd_image_map_file(img, tmpdir, 0, PAGE, VA, NULL, &d),
		     -EISDIR);
	CHECK_CONTAINS(d.msg, tmpdir);
	/* a large read over a whole 4-page region comes back whole */
	REQUIRE(ptd_image_map_file(img, pattern_path, 0, 4 * PAGE, VA, NULL,
				   &d) > 0);
	{
		uint8_t *all = malloc(8 * PAGE);

		REQUIRE(all);
		CHECK_EQ_INT(ptd_image_read(img, VA + 1, all, 8 * PAGE),
			     4 * PAGE - 1);
		CHECK_EQ_INT(all[4 * PAGE - 2], pattern(4 * PAGE - 1));
		free(all);
	}
	REQUIRE(ptd_image_clear(img) == 0);
	CHECK_EQ_INT(ptd_image_map_file(img, pattern_path, 0, 0, VA, NULL, &d),
		     -EINVAL);
	CHECK_EQ_INT(ptd_image_map_file(img, pattern_path, 0, 2 * PAGE,
					UINT64_MAX - PAGE, NULL, &d),
		     -EINVAL);
	CHECK(ptd_image_find(img, VA) == NULL);
	CHECK_EQ_INT(ptd_image_read(img, VA, (uint8_t[1]){ 0 }, 1),
		     -PTD_ENOIMAGE);
	CHECK_EQ_INT(ptd_image_unmap(img, 2, 1), -EINVAL);
	CHECK_EQ_INT(ptd_image_unmap(img, 0, UINT64_MAX), 0);
	CHECK_EQ_INT(ptd_image_module_of(img, 4242, VA, NULL, NULL), -ENOENT);
	ptd_image_free(img);
	ptd_image_free(NULL);
	ptd_iscache_free(ic);
}

static void test_map_and_find(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "img", &img);
	const struct ptd_image_region *reg;
	const char *name;
	uint64_t off;
	int isid;

	REQUIRE(ic && img);
	/* size larger than the file: the region ends with the file */
	isid = ptd_image_map_file(img, pattern_path, PAGE, 16 * PAGE, VA,
				  "[mylib]", NULL);
	REQUIRE(isid > 0);
	reg = ptd_image_find(img, VA);
	REQUIRE(reg);
	CHECK_EQ_U64(reg->start, VA);
	CHECK_EQ_U64(reg->end, VA + 3 * PAGE);
	CHECK_EQ_INT(reg->isid, isid);
	CHECK(ptd_image_find(img, VA - 1) == NULL);
	CHECK(ptd_image_find(img, VA + 3 * PAGE) == NULL);
	CHECK(ptd_image_find(img, VA + 3 * PAGE - 1) == reg);
	check_pattern(img, VA, PAGE, 3 * PAGE);

	CHECK_EQ_INT(ptd_image_module_of(img, isid, VA + 0x10, &name, &off),
		     0);
	CHECK_EQ_STR(name, "[mylib]");
	CHECK_EQ_U64(off, PAGE + 0x10);
	CHECK_EQ_INT(ptd_image_module_of(img, 0, 0x1234, &name, &off), 0);
	CHECK_EQ_STR(name, "[live]");
	CHECK_EQ_U64(off, 0x1234);
	CHECK_EQ_INT(pt_sections_of(img, pattern_path), 1);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

/* Unmapping the middle of a region leaves two readable pieces and a hole;
 * another region of the same file is untouched. */
static void test_unmap_middle(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "img", &img);
	const struct ptd_image_region *l, *r, *far;
	const struct ptd_module *ml, *mr;
	const char *name;
	uint64_t off;
	int a, b;

	REQUIRE(ic && img);
	a = ptd_image_map_file(img, pattern_path, 0, 4 * PAGE, VA, "lib",
			       NULL);
	b = ptd_image_map_file(img, pattern_path, 0, 4 * PAGE, VA + 16 * PAGE,
			       "lib", NULL);
	REQUIRE(a > 0 && b > 0);
	CHECK_EQ_INT(pt_sections_of(img, pattern_path), 2);

	CHECK_EQ_INT(ptd_image_unmap(img, VA + PAGE, VA + 2 * PAGE), 0);

	l = ptd_image_find(img, VA);
	r = ptd_image_find(img, VA + 2 * PAGE);
	far = ptd_image_find(img, VA + 16 * PAGE);
	REQUIRE(l && r && far);
	CHECK_EQ_U64(l->start, VA);
	CHECK_EQ_U64(l->end, VA + PAGE);
	CHECK_EQ_U64(r->start, VA + 2 * PAGE);
	CHECK_EQ_U64(r->end, VA + 4 * PAGE);
	CHECK(l->isid != a && r->isid != a && l->isid != r->isid);
	CHECK_EQ_INT(far->isid, b);
	CHECK(ptd_image_find(img, VA + PAGE) == NULL);
	CHECK(ptd_image_find(img, VA + 2 * PAGE - 1) == NULL);

	ml = ptd_iscache_module(ic, l->isid);
	mr = ptd_iscache_module(ic, r->isid);
	REQUIRE(ml && mr);
	CHECK_EQ_STR(ml->name, "lib");
	CHECK_EQ_STR(mr->name, "lib");
	CHECK_EQ_U64(ml->offset, 0);
	CHECK_EQ_U64(ml->size, PAGE);
	CHECK_EQ_U64(mr->offset, 2 * PAGE);
	CHECK_EQ_U64(mr->vaddr, VA + 2 * PAGE);
	CHECK_EQ_U64(mr->size, 2 * PAGE);

	check_pattern(img, VA, 0, PAGE);
	check_pattern(img, VA + 2 * PAGE, 2 * PAGE, 2 * PAGE);
	check_pattern(img, VA + 16 * PAGE, 0, 4 * PAGE);
	CHECK(!readable(img, VA + PAGE));
	CHECK(!readable(img, VA + 2 * PAGE - 1));
	/* the read before the hole stops at it */
	{
		uint8_t buf[64];

		CHECK_EQ_INT(ptd_image_read(img, VA + PAGE - 8, buf, 64), 8);
	}
	CHECK_EQ_INT(ptd_image_module_of(img, r->isid, VA + 3 * PAGE + 4,
					 &name, &off),
		     0);
	CHECK_EQ_STR(name, "lib");
	CHECK_EQ_U64(off, 3 * PAGE + 4);
	/* libipt's image holds exactly the three pieces */
	CHECK_EQ_INT(pt_sections_of(img, pattern_path), 3);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

static void test_unmap_edges_and_span(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "img", &img);
	const struct ptd_image_region *reg;

	REQUIRE(ic && img);
	REQUIRE(ptd_image_map_file(img, pattern_path, 0, 4 * PAGE, VA, NULL,
				   NULL) > 0);
	REQUIRE(ptd_image_map_file(img, other_path, 0, PAGE, VA + 4 * PAGE,
				   NULL, NULL) > 0);
	REQUIRE(ptd_image_map_file(img, nops_path, 0, 4 * PAGE, VA + 8 * PAGE,
				   NULL, NULL) > 0);

	/* left edge */
	CHECK_EQ_INT(ptd_image_unmap(img, VA - PAGE, VA + PAGE), 0);
	reg = ptd_image_find(img, VA + PAGE);
	REQUIRE(reg);
	CHECK_EQ_U64(reg->start, VA + PAGE);
	check_pattern(img, VA + PAGE, PAGE, 3 * PAGE);
	CHECK(!readable(img, VA));

	/* right edge */
	CHECK_EQ_INT(ptd_image_unmap(img, VA + 3 * PAGE, VA + 4 * PAGE), 0);
	reg = ptd_image_find(img, VA + PAGE);
	REQUIRE(reg);
	CHECK_EQ_U64(reg->end, VA + 3 * PAGE);
	check_pattern(img, VA + PAGE, PAGE, 2 * PAGE);
	CHECK(readable(img, VA + 4 * PAGE));

	/* a range over three regions and a gap: the first loses its tail,
	 * the second goes, the third loses its head */
	CHECK_EQ_INT(ptd_image_unmap(img, VA + 2 * PAGE, VA + 9 * PAGE), 0);
	CHECK(readable(img, VA + 2 * PAGE - 1));
	CHECK(!readable(img, VA + 2 * PAGE));
	CHECK(!readable(img, VA + 4 * PAGE));
	CHECK(!readable(img, VA + 9 * PAGE - 1));
	CHECK(readable(img, VA + 9 * PAGE));
	CHECK_EQ_INT(pt_sections_of(img, other_path), 0);
	CHECK_EQ_INT(pt_sections_of(img, pattern_path), 1);
	CHECK_EQ_INT(pt_sections_of(img, nops_path), 1);

	/* a range that touches nothing changes nothing */
	CHECK_EQ_INT(ptd_image_unmap(img, VA + 4 * PAGE, VA + 5 * PAGE), 0);
	CHECK_EQ_INT(ptd_image_unmap(img, VA + 9 * PAGE, VA + 9 * PAGE), 0);
	CHECK(readable(img, VA + 9 * PAGE));

	/* exact whole region */
	CHECK_EQ_INT(ptd_image_unmap(img, VA + PAGE, VA + 2 * PAGE), 0);
	CHECK(!readable(img, VA + PAGE));
	CHECK_EQ_INT(pt_sections_of(img, pattern_path), 0);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

/* Mapping over part of a region replaces that part only. */
static void test_map_replaces(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "img", &img);
	uint8_t b = 0;

	REQUIRE(ic && img);
	REQUIRE(ptd_image_map_file(img, pattern_path, 0, 4 * PAGE, VA, NULL,
				   NULL) > 0);
	REQUIRE(ptd_image_map_file(img, other_path, 0, PAGE, VA + PAGE, NULL,
				   NULL) > 0);
	check_pattern(img, VA, 0, PAGE);
	CHECK_EQ_INT(ptd_image_read(img, VA + PAGE + 7, &b, 1), 1);
	CHECK_EQ_INT(b, 0xcc);
	check_pattern(img, VA + 2 * PAGE, 2 * PAGE, 2 * PAGE);
	CHECK_EQ_INT(pt_sections_of(img, pattern_path), 2);
	CHECK_EQ_INT(pt_sections_of(img, other_path), 1);

	/* the same mapping again: same isid, nothing doubled */
	{
		const struct ptd_image_region *reg = ptd_image_find(img, VA + PAGE);
		int isid;

		REQUIRE(reg);
		isid = reg->isid;
		CHECK_EQ_INT(ptd_image_map_file(img, other_path, 0, PAGE,
						VA + PAGE, NULL, NULL),
			     isid);
		CHECK_EQ_INT(pt_sections_of(img, other_path), 1);
	}
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

static void test_clear_and_copy(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_iscache *ic2;
	(void)ptd_iscache_new(&ic2);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "a", &img);
	struct ptd_image *cp;
	(void)ptd_image_new(ic, "b", &cp);
	struct ptd_image *foreign;
	(void)ptd_image_new(ic2, "c", &foreign);
	const struct ptd_image_region *r1, *r2;

	REQUIRE(ic && ic2 && img && cp && foreign);
	REQUIRE(ptd_image_map_file(img, pattern_path, 0, 4 * PAGE, VA, NULL,
				   NULL) > 0);
	REQUIRE(ptd_image_map_file(img, other_path, 0, PAGE, VA + 8 * PAGE,
				   NULL, NULL) > 0);
	REQUIRE(ptd_image_map_file(cp, nops_path, 0, PAGE, VA + 20 * PAGE,
				   NULL, NULL) > 0);

	CHECK_EQ_INT(ptd_image_copy(cp, img), 0);
	CHECK(!readable(cp, VA + 20 * PAGE));
	r1 = ptd_image_find(img, VA + 8 * PAGE);
	r2 = ptd_image_find(cp, VA + 8 * PAGE);
	REQUIRE(r1 && r2);
	CHECK_EQ_INT(r2->isid, r1->isid);
	check_pattern(cp, VA, 0, 4 * PAGE);
	CHECK_EQ_INT(pt_sections_of(cp, pattern_path), 1);
	CHECK_EQ_INT(ptd_image_copy(foreign, img), -EINVAL);

	/* exec */
	CHECK_EQ_INT(ptd_image_clear(img), 0);
	CHECK(ptd_image_find(img, VA) == NULL);
	CHECK(!readable(img, VA));
	CHECK(!readable(img, VA + 8 * PAGE));
	CHECK_EQ_INT(pt_sections_of(img, pattern_path), 0);
	CHECK_EQ_INT(pt_sections_of(img, other_path), 0);
	/* the copy is its own */
	check_pattern(cp, VA, 0, 4 * PAGE);
	/* and the image works after a clear */
	CHECK(ptd_image_map_file(img, other_path, 0, PAGE, VA, NULL, NULL) > 0);
	CHECK(readable(img, VA));

	ptd_image_free(foreign);
	ptd_image_free(cp);
	ptd_image_free(img);
	ptd_iscache_free(ic2);
	ptd_iscache_free(ic);
}

/* Which mapping of a section the image holds: the same file at the same
 * address mapped again after an unmap or an exec is the same isid and the
 * next mapping; a repeated report of a mapping there is not; a partial
 * unmap leaves the rest the mapping it was; a copy agrees. */
static void test_mapping_gen(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "a", &img);
	struct ptd_image *cp;
	(void)ptd_image_new(ic, "b", &cp);
	const struct ptd_image_region *r;
	int isid, other;

	REQUIRE(ic && img && cp);
	CHECK_EQ_U64(ptd_image_gen(img, 0), 0);
	CHECK_EQ_U64(ptd_image_gen(NULL, 1), 0);
	isid = ptd_image_map_file(img, pattern_path, 0, PAGE, VA, NULL, NULL);
	other = ptd_image_map_file(img, pattern_path, PAGE, 4 * PAGE,
				   VA + 8 * PAGE, NULL, NULL);
	REQUIRE(isid > 0 && other > 0);
	CHECK_EQ_U64(ptd_image_gen(img, isid), 1);
	CHECK_EQ_U64(ptd_image_gen(img, 1000), 0);
	/* reported again where it is: the same mapping */
	CHECK_EQ_INT(ptd_image_map_file(img, pattern_path, 0, PAGE, VA, NULL,
					NULL), isid);
	CHECK_EQ_U64(ptd_image_gen(img, isid), 1);
	/* dlclose, dlopen: the same section, its second mapping */
	CHECK_EQ_INT(ptd_image_unmap(img, VA, VA + PAGE), 0);
	CHECK_EQ_INT(ptd_image_map_file(img, pattern_path, 0, PAGE, VA, NULL,
					NULL), isid);
	CHECK_EQ_U64(ptd_image_gen(img, isid), 2);
	/* part of the other unmapped: what is left is a piece of its own,
	 * the file's first mapping still */
	CHECK_EQ_INT(ptd_image_unmap(img, VA + 8 * PAGE, VA + 9 * PAGE), 0);
	r = ptd_image_find(img, VA + 9 * PAGE);
	REQUIRE(r);
	CHECK(ptd_image_gen(img, r->isid) <= 1);
	CHECK_EQ_U64(ptd_image_gen(img, other), 1);
	/* a copy agrees */
	CHECK_EQ_INT(ptd_image_copy(cp, img), 0);
	CHECK_EQ_U64(ptd_image_gen(cp, isid), 2);
	/* exec, and the same program again: its third */
	CHECK_EQ_INT(ptd_image_clear(img), 0);
	CHECK_EQ_INT(ptd_image_map_file(img, pattern_path, 0, PAGE, VA, NULL,
					NULL), isid);
	CHECK_EQ_U64(ptd_image_gen(img, isid), 3);
	CHECK_EQ_U64(ptd_image_gen(cp, isid), 2);
	ptd_image_free(cp);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

static void test_load_maps(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "img", &img);
	struct ptd_maps maps = { 0 };
	struct ptd_diag d = { "" };
	unsigned skipped = 99;
	char text[8 * PATH_MAX];

	REQUIRE(ic && img);
	REQUIRE(strlen(pattern_path) < 200 && strlen(nops_path) < 200 &&
		strlen(other_path) < 200);
	(void)snprintf(text, sizeof(text),
		       "10000000-10001000 r--p 00000000 08:01 1 %s\n"
		       "10001000-10003000 r-xp 00001000 08:01 1 %s\n"
		       "10003000-10004000 rw-p 00003000 08:01 1 %s\n"
		       "10004000-10005000 r-xp 00000000 08:01 2 /nonexistent/a.so\n"
		       "10005000-10006000 r-xp 00000000 08:01 3 /nonexistent/b.so\n"
		       "10006000-10007000 r-xp 00000000 08:01 4 %s (deleted)\n"
		       "10007000-10008000 r-xp 00000000 00:00 0 [anon:jit]\n"
		       "10008000-10009000 r-xp 00000000 08:01 5 %s\n",
		       pattern_path, pattern_path, pattern_path, nops_path,
		       other_path);
	REQUIRE(ptd_maps_parse(text, strlen(text), "t", &maps, NULL) == 0);
	CHECK_EQ_INT(ptd_image_load_maps(img, &maps, &skipped, &d), 0);
	CHECK_EQ_INT(skipped, 2);
	CHECK_CONTAINS(d.msg, "/nonexistent/a.so");
	CHECK(!readable(img, 0x10000000));	/* not executable */
	check_pattern(img, 0x10001000, PAGE, 2 * PAGE);
	CHECK(!readable(img, 0x10003000));	/* not executable */
	CHECK(!readable(img, 0x10004000));	/* skipped */
	CHECK(!readable(img, 0x10006000));	/* deleted: not a file */
	CHECK(!readable(img, 0x10007000));	/* anonymous */
	CHECK(readable(img, 0x10008000));
	CHECK_EQ_INT(ptd_image_load_maps(img, &maps, NULL, NULL), 0);
	ptd_maps_fini(&maps);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

static uint8_t live_code[256];

/* The callback reads this very process for what no section covers. */
static void test_live(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "live", &img);
	struct ptd_image_stats st;
	static uint8_t secret[100];
	uint8_t buf[100];
	uint64_t va = (uint64_t)(uintptr_t)secret;

	REQUIRE(ic && img);
	for (size_t i = 0; i < sizeof(secret); i++)
		secret[i] = (uint8_t)(0xa0 ^ i);
	CHECK_EQ_INT(ptd_image_read(img, va, buf, sizeof(buf)), -PTD_ENOIMAGE);

	CHECK_EQ_INT(ptd_image_set_live_pid(img, getpid()), 0);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ_INT(ptd_image_read(img, va, buf, sizeof(buf)), 100);
	CHECK(memcmp(buf, secret, sizeof(buf)) == 0);
	ptd_image_get_stats(img, &st);
	CHECK_EQ_U64(st.callback_reads, 1);
	CHECK_EQ_U64(st.callback_bytes, 100);
	CHECK_EQ_U64(st.callback_failures, 0);

	/* unmapped in the process too */
	CHECK_EQ_INT(ptd_image_read(img, 16, buf, 8), -PTD_ENOIMAGE);
	ptd_image_get_stats(img, &st);
	CHECK_EQ_U64(st.callback_failures, 1);

	/* sections come first */
	REQUIRE(ptd_image_map_file(img, other_path, 0, PAGE, va, NULL, NULL) >
		0);
	CHECK_EQ_INT(ptd_image_read(img, va, buf, 1), 1);
	CHECK_EQ_INT(buf[0], 0xcc);
	ptd_image_get_stats(img, &st);
	CHECK_EQ_U64(st.callback_reads, 1);
	CHECK_EQ_INT(ptd_image_unmap(img, va, va + PAGE), 0);

	/* the libipt decoder reaches the live bytes through the callback,
	 * with isid 0 */
	{
		int err = 0, isid = 0;
		long n;

		memset(live_code, 0x90, sizeof(live_code));
		n = decode_from(img, (uint64_t)(uintptr_t)live_code, &err,
				&isid);

		CHECK(n >= (long)sizeof(live_code));
		CHECK_EQ_INT(isid, 0);
		ptd_image_get_stats(img, &st);
		CHECK(st.callback_reads > 1);
	}

	CHECK_EQ_INT(ptd_image_set_live_pid(img, 0), 0);
	CHECK_EQ_INT(ptd_image_read(img, va, buf, 1), -PTD_ENOIMAGE);
	CHECK_EQ_INT(ptd_image_set_live_pid(img, -5), -EINVAL);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

/* What libipt's decoder sees equals our regions: over NOPs it runs to the
 * exact end of the code, also after a partial unmap; the same with
 * sections of the image's own (ptd_image_own_sections), under the
 * iscache's isids (the NOPs are the iscache's second section). */
static void test_decoder_agrees(void)
{
	for (int own = 0; own < 2; own++) {
		struct ptd_iscache *ic;
		(void)ptd_iscache_new(&ic);
		struct ptd_image *img, *first;
		(void)ptd_image_new(ic, "dec", &img);
		(void)ptd_image_new(ic, "first", &first);
		const struct ptd_image_region *reg;
		struct ptd_image_stats st;
		int err = 0, isid = 0;
		long n;

		REQUIRE(ic && img && first);
		REQUIRE(ptd_image_map_file(first, pattern_path, 0, PAGE, VA,
					   NULL, NULL) == 1);
		if (own)
			CHECK_EQ_INT(ptd_image_own_sections(img), 0);
		REQUIRE(ptd_image_map_file(img, nops_path, 0, 4 * PAGE, VA,
					   "nops", NULL) == 2);
		n = decode_from(img, VA + 0x100, &err, &isid);
		CHECK_EQ_INT(n, 4 * PAGE - 0x100);
		CHECK_EQ_INT(err, -pte_nomap);
		CHECK_EQ_INT(isid, 2);

		CHECK_EQ_INT(ptd_image_unmap(img, VA + PAGE, VA + 2 * PAGE), 0);
		n = decode_from(img, VA + 0x100, &err, &isid);
		CHECK_EQ_INT(n, PAGE - 0x100);
		CHECK_EQ_INT(err, -pte_nomap);
		reg = ptd_image_find(img, VA);
		REQUIRE(reg);
		CHECK_EQ_INT(isid, reg->isid);

		n = decode_from(img, VA + 2 * PAGE, &err, &isid);
		CHECK_EQ_INT(n, 2 * PAGE);
		reg = ptd_image_find(img, VA + 2 * PAGE);
		REQUIRE(reg);
		CHECK_EQ_INT(isid, reg->isid);

		/* a copy into it takes its own sections too */
		CHECK_EQ_INT(ptd_image_copy(img, first), 0);
		n = decode_from(img, VA, &err, &isid);
		CHECK_EQ_INT(isid, 1);
		ptd_image_get_stats(img, &st);
		CHECK_EQ_INT(st.sections_own, own ? 4 : 0);
		CHECK_EQ_INT(st.sections_shared, own ? 0 : 4);
		CHECK_EQ_INT(ptd_image_own_sections(img), -EINVAL);

		CHECK_EQ_INT(ptd_image_clear(img), 0);
		n = decode_from(img, VA + 2 * PAGE, &err, &isid);
		CHECK_EQ_INT(n, 0);
		ptd_image_free(first);
		ptd_image_free(img);
		ptd_iscache_free(ic);
	}
}

/* A mirror holds the iscache's sections under their isids, read from the
 * same bytes; past an isid the iscache lacks, it holds no more (the image
 * uses the iscache's sections there), what it holds still serves. */
static void test_iscache_mirror(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "m", &img);
	struct ptd_iscache_mirror *mr = NULL;
	struct pt_image_section_cache *pc;
	uint8_t buf[16];

	REQUIRE(ic && img);
	REQUIRE(ptd_iscache_mirror_new(&mr) == 0 && mr);
	REQUIRE(ptd_image_map_file(img, other_path, 0, PAGE, VA, NULL,
				   NULL) == 1);
	REQUIRE(ptd_image_map_file(img, pattern_path, PAGE, PAGE,
				   VA + 4 * PAGE, NULL, NULL) == 2);
	CHECK(ptd_iscache_mirror_get(mr, ic, 0) == NULL);
	pc = ptd_iscache_mirror_get(mr, ic, 2);
	REQUIRE(pc && pc != ptd_iscache_pt(ic));
	CHECK_EQ_INT(pt_iscache_read(pc, buf, sizeof(buf), 2,
				     VA + 4 * PAGE + 16), (int)sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		CHECK_EQ_INT(buf[i], pattern(PAGE + 16 + i));
	CHECK_EQ_INT(pt_iscache_read(pc, buf, 1, 1, VA), 1);
	CHECK_EQ_INT(buf[0], 0xcc);
	CHECK(ptd_iscache_mirror_get(mr, ic, 3) == NULL);
	CHECK(ptd_iscache_mirror_get(mr, ic, 1) == pc);
	REQUIRE(ptd_image_map_file(img, nops_path, 0, PAGE, VA + 8 * PAGE,
				   NULL, NULL) == 3);
	CHECK(ptd_iscache_mirror_get(mr, ic, 3) == NULL);
	ptd_iscache_mirror_free(mr);
	ptd_iscache_mirror_free(NULL);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

/* A resolver redirects a traced path to the file that holds its bytes; the
 * module keeps the traced name; its errors reach the caller by name. */
static int resolve_to_pattern(void *ctx, const char *path, char *out,
			      size_t outsz, struct ptd_diag *diag)
{
	int *calls = ctx;

	(*calls)++;
	if (!strcmp(path, "/traced/lib.so"))
		return snprintf(out, outsz, "%s", pattern_path) < (int)outsz
			       ? 0
			       : -ENAMETOOLONG;
	if (!strcmp(path, "/traced/empty"))
		return 0;	/* gives no file: refused */
	return ptd_diagf(diag, -ENOENT, "'%s' is not in the bundle", path);
}

static void test_resolver(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "resolved", &img);
	struct ptd_diag d = { "" };
	const struct ptd_module *m;
	uint8_t buf[4];
	int calls = 0, isid;

	REQUIRE(ic && img);
	ptd_iscache_set_resolver(ic, resolve_to_pattern, &calls);
	isid = ptd_image_map_file(img, "/traced/lib.so", PAGE, PAGE, VA, NULL,
				  &d);
	REQUIRE(isid > 0);
	CHECK_EQ_INT(calls, 1);
	m = ptd_iscache_module(ic, isid);
	REQUIRE(m);
	CHECK_EQ_STR(m->path, pattern_path);
	CHECK_EQ_STR(m->name, "/traced/lib.so");
	CHECK_EQ_INT(ptd_image_read(img, VA + 7, buf, 1), 1);
	CHECK_EQ_INT(buf[0], pattern(PAGE + 7));

	CHECK_EQ_INT(ptd_image_map_file(img, "/traced/other", 0, PAGE, VA,
					NULL, &d),
		     -ENOENT);
	CHECK(strstr(d.msg, "/traced/other") != NULL);
	CHECK(strstr(d.msg, "not in the bundle") != NULL);
	CHECK_EQ_INT(ptd_image_map_file(img, "/traced/empty", 0, PAGE, VA,
					NULL, &d),
		     -EINVAL);
	CHECK(strstr(d.msg, "gave no file") != NULL);

	/* cleared: paths are opened as they are */
	ptd_iscache_set_resolver(ic, NULL, NULL);
	CHECK_EQ_INT(ptd_image_map_file(img, "/traced/lib.so", 0, PAGE, VA,
					NULL, &d),
		     -ENOENT);
	CHECK_EQ_INT(calls, 3);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

int main(void)
{
	setup();
	RUN(test_iscache);
	RUN(test_file_changes_under_ptd);
	RUN(test_real_file);
	RUN(test_resolver);
	RUN(test_map_errors);
	RUN(test_map_and_find);
	RUN(test_unmap_middle);
	RUN(test_unmap_edges_and_span);
	RUN(test_map_replaces);
	RUN(test_clear_and_copy);
	RUN(test_mapping_gen);
	RUN(test_load_maps);
	RUN(test_live);
	RUN(test_decoder_agrees);
	RUN(test_iscache_mirror);
	teardown();
	return check_done();
}
