/* SPDX-License-Identifier: MIT */
/*
 * decode/codesnap.h: CODE chunks reassembled into snapshot files, and a
 * session's files shared -- the same bytes given twice are one file (the
 * software source gives every new thread the vDSO), other bytes a file
 * of their own, every file holding exactly what its event maps.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "decode/codesnap.h"

static char dir[64];

static size_t files_in(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *de;
	size_t n = 0;

	if (!dp)
		return 0;
	while ((de = readdir(dp)))
		n += de->d_name[0] != '.';
	(void)closedir(dp);
	return n;
}

/* The bytes of @file in dir, compared with @want. */
static void holds(const char *file, const uint8_t *want, size_t len)
{
	char path[256], *have = NULL;
	size_t n = 0;

	(void)snprintf(path, sizeof(path), "%s/%s", dir, file);
	REQUIRE(ptd_file_read_all(path, 1 << 20, &have, &n) == 0);
	CHECK_EQ_U64(n, len);
	CHECK(n == len && memcmp(have, want, len) == 0);
	free(have);
}

static void test_put_shares(void)
{
	struct ptd_codesnap_files f;
	struct ptd_diag diag = { "" };
	uint8_t a[300], b[300];
	char fa[64], fa2[64], fb[64], fc[64];

	memset(a, 0x90, sizeof(a));
	memcpy(b, a, sizeof(b));
	b[299] = 0xc3;	/* same length, one byte apart */
	ptd_codesnap_files_init(&f, dir);
	CHECK_EQ_INT(ptd_codesnap_files_put(&f, a, sizeof(a), fa, &diag), 0);
	CHECK_EQ_INT(ptd_codesnap_files_put(&f, a, sizeof(a), fa2, &diag), 0);
	CHECK_EQ_STR(fa2, fa);
	CHECK_EQ_INT(ptd_codesnap_files_put(&f, b, sizeof(b), fb, &diag), 0);
	CHECK(strcmp(fb, fa) != 0);
	CHECK_EQ_INT(ptd_codesnap_files_put(&f, a, 100, fc, &diag), 0);
	CHECK(strcmp(fc, fa) != 0 && strcmp(fc, fb) != 0);
	CHECK_EQ_U64(files_in(dir), 3);
	CHECK_EQ_U64(f.shared, 1);
	holds(fa, a, sizeof(a));
	holds(fb, b, sizeof(b));
	holds(fc, a, 100);
	/* a file that no longer holds those bytes is not given out */
	{
		char path[256];

		(void)snprintf(path, sizeof(path), "%s/%s", dir, fb);
		REQUIRE(unlink(path) == 0);
		CHECK_EQ_INT(ptd_codesnap_files_put(&f, b, sizeof(b), fc,
						    &diag), 0);
		CHECK(strcmp(fc, fb) != 0);
		holds(fc, b, sizeof(b));
	}
	ptd_codesnap_files_fini(&f);
	/* a directory that is not there: the error names the file */
	ptd_codesnap_files_init(&f, "/nonexistent/ptd");
	CHECK(ptd_codesnap_files_put(&f, a, sizeof(a), fa, &diag) < 0);
	CHECK_CONTAINS(diag.msg, "/nonexistent/ptd/snap-0.bin");
	ptd_codesnap_files_fini(&f);
}

/* Two readers (two threads' feeds) given the same region in chunks: one
 * file, each its event mapping it where the chunks said. */
static void test_add_two_readers(void)
{
	struct ptd_codesnap_files f;
	struct ptd_codesnap cs[2] = { { 0 }, { 0 } };
	struct ptd_diag diag = { "" };
	struct ptd_tl_event ev;
	uint64_t bad = 0;
	uint8_t code[64];
	char first[64] = "";
	size_t before = files_in(dir);

	for (size_t i = 0; i < sizeof(code); i++)
		code[i] = (uint8_t)i;
	ptd_codesnap_files_init(&f, dir);
	for (int k = 0; k < 2; k++) {
		struct ptd_perf_code c = { 1, 2, 0x7fff0000, sizeof(code), 0,
					   40, "[vdso]", code };

		CHECK_EQ_INT(ptd_codesnap_add(&cs[k], &c, &f, &ev, &bad,
					      &diag), 0);
		c.offset = 40;
		c.size = 24;
		c.bytes = code + 40;
		CHECK_EQ_INT(ptd_codesnap_add(&cs[k], &c, &f, &ev, &bad,
					      &diag), 1);
		CHECK_EQ_INT(ev.op, PTD_TL_SNAPSHOT);
		CHECK_EQ_U64(ev.start, 0x7fff0000);
		CHECK_EQ_U64(ev.end, 0x7fff0000 + sizeof(code));
		CHECK_EQ_STR(ev.name, "[vdso]");
		holds(ev.file, code, sizeof(code));
		if (k == 0)
			(void)snprintf(first, sizeof(first), "%s", ev.file);
		else
			CHECK_EQ_STR(ev.file, first);
	}
	CHECK_EQ_U64(bad, 0);
	CHECK_EQ_U64(files_in(dir), before + 1);
	/* a chunk out of order is malformed, nothing written */
	{
		struct ptd_perf_code c = { 1, 2, 0x1000, 8, 4, 4, "x", code };

		CHECK_EQ_INT(ptd_codesnap_add(&cs[0], &c, &f, &ev, &bad,
					      &diag), 0);
		CHECK_EQ_U64(bad, 1);
	}
	ptd_codesnap_fini(&cs[0]);
	ptd_codesnap_fini(&cs[1]);
	ptd_codesnap_files_fini(&f);
}

int main(void)
{
	char tmpl[] = "/tmp/ptd-codesnap-XXXXXX";

	if (!mkdtemp(tmpl))
		SKIP_ALL("mkdtemp: %s", strerror(errno));
	(void)snprintf(dir, sizeof(dir), "%s", tmpl);
	RUN(test_put_shares);
	(void)ptd_rm_rf(dir);
	if (!mkdtemp(strcpy(tmpl, "/tmp/ptd-codesnap-XXXXXX")))
		SKIP_ALL("mkdtemp: %s", strerror(errno));
	(void)snprintf(dir, sizeof(dir), "%s", tmpl);
	RUN(test_add_two_readers);
	(void)ptd_rm_rf(dir);
	return check_done();
}
