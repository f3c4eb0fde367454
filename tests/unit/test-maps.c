/* SPDX-License-Identifier: MIT */
/* Tests for aspace/maps: the strict /proc/PID/maps parser. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aspace/maps.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "check.h"

static const char *data_dir(void)
{
	const char *d = getenv("PTD_TEST_DATA");

	if (!d)
		SKIP_ALL("PTD_TEST_DATA is not set (run through meson test)");
	return d;
}

/* Parse fixture @name; returns what ptd_maps_parse returned. */
static int parse_fixture(const char *name, struct ptd_maps *ret,
			 struct ptd_diag *diag)
{
	char path[PATH_MAX], *text = NULL;
	size_t len;
	int r;

	(void)snprintf(path, sizeof(path), "%s/maps/%s", data_dir(), name);
	r = ptd_file_read_all(path, PTD_MAPS_MAX_BYTES, &text, &len);
	if (r < 0) {
		fprintf(stderr, "cannot read fixture %s: %s\n", path,
			ptd_strerror(r));
		return r;
	}
	r = ptd_maps_parse(text, len, name, ret, diag);
	free(text);
	return r;
}

static void test_good_fixture(void)
{
	struct ptd_maps m = { 0 };
	struct ptd_diag d = { "" };
	const struct ptd_map *e;

	CHECK_EQ_INT(parse_fixture("good.maps", &m, &d), 0);
	REQUIRE(m.n == 16);

	e = &m.v[0];
	CHECK_EQ_U64(e->start, 0x400000);
	CHECK_EQ_U64(e->end, 0x452000);
	CHECK_EQ_U64(e->offset, 0);
	CHECK_EQ_U64(e->dev_major, 8);
	CHECK_EQ_U64(e->dev_minor, 2);
	CHECK_EQ_U64(e->inode, 173521);
	CHECK_EQ_INT(e->prot, PTD_MAP_PROT_R | PTD_MAP_PROT_X);
	CHECK(!e->shared);
	CHECK_EQ_INT(e->kind, PTD_MAP_FILE);
	CHECK_EQ_STR(e->path, "/usr/bin/dbus-daemon");

	CHECK_EQ_INT(m.v[2].prot, PTD_MAP_PROT_R | PTD_MAP_PROT_W);
	CHECK_EQ_U64(m.v[2].offset, 0x52000);
	CHECK_EQ_INT(m.v[3].kind, PTD_MAP_HEAP);
	CHECK_EQ_STR(m.v[3].path, "[heap]");

	e = &m.v[5];
	CHECK_EQ_U64(e->start, 0x7f2c19e22000);
	CHECK_EQ_U64(e->offset, 0x22000);
	CHECK_EQ_U64(e->dev_major, 0xfe);
	CHECK_EQ_STR(e->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");

	/* inner and doubled spaces are part of the name */
	CHECK_EQ_STR(m.v[6].path, "/home/user/my lib/lib two  spaces.so");
	CHECK_EQ_INT(m.v[6].kind, PTD_MAP_FILE);

	CHECK_EQ_INT(m.v[7].kind, PTD_MAP_DELETED);
	CHECK_EQ_STR(m.v[7].path, "/tmp/jit-1234.so");

	e = &m.v[8];
	CHECK_EQ_INT(e->kind, PTD_MAP_DELETED);
	CHECK_EQ_STR(e->path, "/memfd:jit");
	CHECK(e->shared);
	CHECK_EQ_INT(e->prot, PTD_MAP_PROT_R | PTD_MAP_PROT_W | PTD_MAP_PROT_X);
	CHECK_EQ_U64(e->dev_minor, 1);

	/* anonymous: trailing space, and none */
	CHECK_EQ_INT(m.v[9].kind, PTD_MAP_ANON);
	CHECK_EQ_STR(m.v[9].path, "");
	CHECK_EQ_INT(m.v[11].kind, PTD_MAP_ANON);
	CHECK_EQ_STR(m.v[11].path, "");
	CHECK_EQ_INT(m.v[11].prot, 0);

	CHECK_EQ_INT(m.v[10].kind, PTD_MAP_OTHER);
	CHECK_EQ_STR(m.v[10].path, "[anon:foo]");
	CHECK_EQ_INT(m.v[12].kind, PTD_MAP_STACK);
	CHECK_EQ_INT(m.v[13].kind, PTD_MAP_VVAR);
	CHECK_EQ_INT(m.v[14].kind, PTD_MAP_VDSO);
	CHECK_EQ_STR(m.v[14].path, "[vdso]");
	e = &m.v[15];
	CHECK_EQ_INT(e->kind, PTD_MAP_VSYSCALL);
	CHECK_EQ_U64(e->start, 0xffffffffff600000);
	CHECK_EQ_U64(e->end, 0xffffffffff601000);
	CHECK_EQ_INT(e->prot, PTD_MAP_PROT_X);

	ptd_maps_fini(&m);
	CHECK(m.v == NULL && m.n == 0);
}

static void test_bad_fixtures(void)
{
	static const struct {
		const char *file;
		const char *msg;
	} cases[] = {
		{ "start-above-end.maps", "start-above-end.maps:2: field 'end'" },
		{ "overlap.maps", "overlap.maps:2: field 'start'" },
		{ "bad-perms.maps", "bad-perms.maps:1: field 'perms'" },
		{ "missing-inode.maps", "missing-inode.maps:1: field 'dev'" },
		{ "bad-offset.maps", "bad-offset.maps:1: field 'offset'" },
		{ "bad-inode.maps", "bad-inode.maps:1: field 'inode'" },
		{ "overflow-start.maps", "overflow-start.maps:1: field 'start'" },
		{ "empty-line.maps", "empty-line.maps:2: field 'start'" },
		{ "double-space.maps", "double-space.maps:1: field 'perms'" },
		{ "bad-dev.maps", "bad-dev.maps:1: field 'dev'" },
	};

	for (size_t i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
		struct ptd_maps m = { (void *)0x1, 77 };
		struct ptd_diag d = { "" };

		CHECK_EQ_INT(parse_fixture(cases[i].file, &m, &d),
			     -PTD_EFORMAT);
		CHECK_CONTAINS(d.msg, cases[i].msg);
		/* a failed call leaves *ret alone */
		CHECK(m.v == (void *)0x1 && m.n == 77);
	}
}

static int parse_str(const char *s, struct ptd_maps *m, struct ptd_diag *d)
{
	return ptd_maps_parse(s, strlen(s), "t", m, d);
}

static void test_bad_lines(void)
{
	static const struct {
		const char *text;
		const char *msg;
	} cases[] = {
		{ "-1000 r-xp 0 0:0 0\n", "t:1: field 'start'" },
		{ "1000- r-xp 0 0:0 0\n", "t:1: field 'end'" },
		{ "1000 r-xp 0 0:0 0\n", "t:1: field 'start'" },
		{ "1000-1000 r-xp 0 0:0 0\n", "t:1: field 'end': not above" },
		{ "1000-2000 r-x 0 0:0 0\n", "t:1: field 'perms'" },
		{ "1000-2000 r-xpp 0 0:0 0\n", "t:1: field 'perms'" },
		{ "1000-2000 R-xp 0 0:0 0\n", "t:1: field 'perms'" },
		{ "1000-2000 rwxp 0x0 0:0 0\n", "t:1: field 'offset'" },
		{ "1000-2000 rwxp 0 100000000:0 0\n", "t:1: field 'dev'" },
		{ "1000-2000 rwxp 0 0:100000000 0\n", "t:1: field 'dev'" },
		{ "1000-2000 rwxp 0 0: 0\n", "t:1: field 'dev'" },
		{ "1000-2000 rwxp 0 0:0 -1\n", "t:1: field 'inode'" },
		{ "1000-2000 rwxp 0 0:0 99999999999999999999\n",
		  "t:1: field 'inode'" },
		{ "1000-2000 rwxp 0 0:0 0/x\n", "t:1: field 'inode'" },
		{ "1000-2000 rwxp 0 0:0\n", "t:1: field 'dev'" },
		{ "1000-2000 rwxp 0 0:0 0\n0-1000 rwxp 0 0:0 0\n",
		  "t:2: field 'start'" },
		{ "\n", "t:1: field 'start'" },
		{ " 1000-2000 rwxp 0 0:0 0\n", "t:1: field 'start'" },
		{ "+1000-2000 rwxp 0 0:0 0\n", "t:1: field 'start'" },
	};

	for (size_t i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
		struct ptd_maps m = { 0 };
		struct ptd_diag d = { "" };
		int r = parse_str(cases[i].text, &m, &d);

		if (r != -PTD_EFORMAT)
			fprintf(stderr, "case %zu: %s", i, cases[i].text);
		CHECK_EQ_INT(r, -PTD_EFORMAT);
		CHECK_CONTAINS(d.msg, cases[i].msg);
	}
}

static void test_nul_and_long_path(void)
{
	static const char nul[] = "1000-2000 r-xp 0 0:0 0 /a\0b\n";
	struct ptd_maps m = { 0 };
	struct ptd_diag d = { "" };
	char *text;
	size_t n = 4 * 4096 + 10;

	CHECK_EQ_INT(ptd_maps_parse(nul, sizeof(nul) - 1, "t", &m, &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t:1: NUL byte");

	text = malloc(64 + n);
	REQUIRE(text);
	strcpy(text, "1000-2000 r-xp 0 0:0 0 /");
	memset(text + strlen(text), 'a', n);
	text[24 + n] = '\0';
	CHECK_EQ_INT(parse_str(text, &m, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t:1: pathname longer than");
	free(text);
}

static void test_edges(void)
{
	struct ptd_maps m = { 0 };
	struct ptd_diag d = { "" };

	/* empty input: no mappings */
	CHECK_EQ_INT(ptd_maps_parse("", 0, "t", &m, &d), 0);
	CHECK_EQ_INT(m.n, 0);
	ptd_maps_fini(&m);
	ptd_maps_fini(NULL);

	/* no final newline; adjacent mappings; upper-case hex is hex */
	CHECK_EQ_INT(parse_str("1000-2000 r-xp 0 0:0 0 /x\n"
			       "2000-3000 r-xP 0 0:0 0 /x", &m, &d),
		     -PTD_EFORMAT);
	CHECK_EQ_INT(parse_str("1000-2000 r-xp 0 0:0 0 /x\n"
			       "2000-3ABC r-xp 1F 0:0 0 /y", &m, &d), 0);
	REQUIRE(m.n == 2);
	CHECK_EQ_U64(m.v[1].end, 0x3abc);
	CHECK_EQ_U64(m.v[1].offset, 0x1f);
	CHECK_EQ_STR(m.v[1].path, "/y");

	/* find: start inclusive, end exclusive, gaps */
	CHECK(ptd_maps_find(&m, 0xfff) == NULL);
	CHECK(ptd_maps_find(&m, 0x1000) == &m.v[0]);
	CHECK(ptd_maps_find(&m, 0x1fff) == &m.v[0]);
	CHECK(ptd_maps_find(&m, 0x2000) == &m.v[1]);
	CHECK(ptd_maps_find(&m, 0x3abc) == NULL);
	CHECK(ptd_maps_find(NULL, 0x1000) == NULL);
	ptd_maps_fini(&m);

	CHECK_EQ_INT(ptd_maps_parse(NULL, 1, "t", &m, &d), -EINVAL);
	CHECK_EQ_INT(ptd_maps_parse("", 0, "t", NULL, &d), -EINVAL);
}

static void test_find_many(void)
{
	struct ptd_buf b = { 0 };
	struct ptd_maps m = { 0 };
	char line[128];

	for (unsigned i = 0; i < 1000; i++) {
		int n = snprintf(line, sizeof(line),
				 "%x-%x r-xp 0 0:0 0\n", (i + 1) * 0x2000,
				 (i + 1) * 0x2000 + 0x1000);
		REQUIRE(ptd_buf_append(&b, line, (size_t)n) == 0);
	}
	REQUIRE(ptd_maps_parse((char *)b.data, b.len, "t", &m, NULL) == 0);
	REQUIRE(m.n == 1000);
	for (unsigned i = 0; i < 1000; i++) {
		uint64_t s = (i + 1) * 0x2000ull;

		CHECK(ptd_maps_find(&m, s) == &m.v[i]);
		CHECK(ptd_maps_find(&m, s + 0xfff) == &m.v[i]);
		CHECK(ptd_maps_find(&m, s + 0x1000) == NULL);
	}
	ptd_maps_fini(&m);
	ptd_buf_fini(&b);
}

static void test_limits(void)
{
	struct ptd_maps m = { 0 };
	struct ptd_diag d = { "" };
	struct ptd_buf b = { 0 };
	char *big;

	/* over the byte limit: refused before a byte is read */
	big = calloc(1, (size_t)PTD_MAPS_MAX_BYTES + 1);
	REQUIRE(big);
	CHECK_EQ_INT(ptd_maps_parse(big, (size_t)PTD_MAPS_MAX_BYTES + 1, "t",
				    &m, &d),
		     -PTD_ELIMIT);
	CHECK_CONTAINS(d.msg, "t: ");
	free(big);

	/* one line more than the line limit */
	REQUIRE(ptd_buf_reserve(&b, (PTD_MAPS_MAX_LINES + 1) * 24) == 0);
	for (unsigned i = 0; i <= PTD_MAPS_MAX_LINES; i++) {
		char line[64];
		int n = snprintf(line, sizeof(line), "%x-%x ---p 0 0:0 0\n",
				 (i + 1) * 2, (i + 1) * 2 + 1);

		REQUIRE(ptd_buf_append(&b, line, (size_t)n) == 0);
	}
	CHECK_EQ_INT(ptd_maps_parse((char *)b.data, b.len, "t", &m, &d),
		     -PTD_ELIMIT);
	CHECK_CONTAINS(d.msg, "t:1000001: more than 1000000 lines");
	/* exactly the limit is fine */
	{
		const char *last = memrchr(b.data, '\n', b.len - 1);

		REQUIRE(last);
		CHECK_EQ_INT(ptd_maps_parse((char *)b.data,
					    (size_t)(last - (char *)b.data) + 1,
					    "t", &m, &d),
			     0);
		CHECK_EQ_INT(m.n, PTD_MAPS_MAX_LINES);
		ptd_maps_fini(&m);
	}
	ptd_buf_fini(&b);
}

static void test_read_pid_procroot(void)
{
	char root[] = "/tmp/ptd-test-maps-XXXXXX", path[PATH_MAX];
	struct ptd_maps m = { 0 };
	struct ptd_diag d = { "" };
	static const char text[] = "1000-2000 r-xp 0 0:0 0 /bin/x\n"
				   "3000-4000 r-xp 0 0:0 0 /bin/y\n"
				   "5000-4000 r-xp 0 0:0 0 /bin/z\n";

	REQUIRE(mkdtemp(root));
	(void)snprintf(path, sizeof(path), "%s/42", root);
	REQUIRE(mkdir(path, 0700) == 0);
	(void)snprintf(path, sizeof(path), "%s/42/maps", root);
	REQUIRE(ptd_file_write_atomic(path, text, 60) == 0);

	CHECK_EQ_INT(ptd_maps_read_pid(root, 42, &m, &d), 0);
	CHECK_EQ_INT(m.n, 2);
	CHECK_EQ_STR(m.v[1].path, "/bin/y");
	ptd_maps_fini(&m);

	/* the origin in messages is the file read */
	REQUIRE(ptd_file_write_atomic(path, text, sizeof(text) - 1) == 0);
	CHECK_EQ_INT(ptd_maps_read_pid(root, 42, &m, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "/42/maps:3: field 'end'");

	CHECK_EQ_INT(ptd_maps_read_pid(root, 43, &m, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "/43/maps");
	CHECK_EQ_INT(ptd_maps_read_pid(root, 0, &m, &d), -EINVAL);
	CHECK_EQ_INT(ptd_maps_read_pid(root, -1, &m, &d), -EINVAL);

	(void)unlink(path);
	(void)snprintf(path, sizeof(path), "%s/42", root);
	(void)rmdir(path);
	(void)rmdir(root);
}

/* The parser takes what this kernel prints, and finds our own code. */
static void test_proc_self(void)
{
	struct ptd_maps m = { 0 };
	struct ptd_diag d = { "" };
	const struct ptd_map *e;
	char exe[PATH_MAX];
	ssize_t n;
	uint64_t here = (uint64_t)(uintptr_t)&test_proc_self;
	int stack_var = 0;

	CHECK_EQ_INT(ptd_maps_read_pid("/proc", getpid(), &m, &d), 0);
	if (d.msg[0])
		fprintf(stderr, "diag: %s\n", d.msg);
	REQUIRE(m.n > 0);
	e = ptd_maps_find(&m, here);
	REQUIRE(e);
	CHECK_EQ_INT(e->kind, PTD_MAP_FILE);
	CHECK(e->prot & PTD_MAP_PROT_X);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	REQUIRE(n > 0);
	exe[n] = '\0';
	CHECK_EQ_STR(e->path, exe);

	e = ptd_maps_find(&m, (uint64_t)(uintptr_t)&stack_var);
	REQUIRE(e);
	CHECK_EQ_INT(e->kind, PTD_MAP_STACK);
	CHECK(e->prot & PTD_MAP_PROT_W);
	ptd_maps_fini(&m);
}

static void test_kind_names(void)
{
	CHECK_EQ_STR(ptd_map_kind_name(PTD_MAP_FILE), "file");
	CHECK_EQ_STR(ptd_map_kind_name(PTD_MAP_DELETED), "deleted");
	CHECK_EQ_STR(ptd_map_kind_name(PTD_MAP_ANON), "anon");
	CHECK_EQ_STR(ptd_map_kind_name(PTD_MAP_HEAP), "heap");
	CHECK_EQ_STR(ptd_map_kind_name(PTD_MAP_STACK), "stack");
	CHECK_EQ_STR(ptd_map_kind_name(PTD_MAP_VDSO), "vdso");
	CHECK_EQ_STR(ptd_map_kind_name(PTD_MAP_VVAR), "vvar");
	CHECK_EQ_STR(ptd_map_kind_name(PTD_MAP_VSYSCALL), "vsyscall");
	CHECK_EQ_STR(ptd_map_kind_name(PTD_MAP_OTHER), "other");
}

int main(void)
{
	RUN(test_good_fixture);
	RUN(test_bad_fixtures);
	RUN(test_bad_lines);
	RUN(test_nul_and_long_path);
	RUN(test_edges);
	RUN(test_find_many);
	RUN(test_limits);
	RUN(test_read_pid_procroot);
	RUN(test_proc_self);
	RUN(test_kind_names);
	return check_done();
}
