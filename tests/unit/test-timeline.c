/* SPDX-License-Identifier: MIT */
/* Tests for aspace/timeline: events, JSON lines, applying, the cursor. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "aspace/image.h"
#include "aspace/iscache.h"
#include "aspace/timeline.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "check.h"

#define PAGE 0x1000u

static char tmpdir[] = "/tmp/ptd-test-tl-XXXXXX";
static char lib_path[PATH_MAX];		/* 2 pages of 0x11 */
static char lib2_path[PATH_MAX];	/* 1 page of 0x22 */

static int write_fill(const char *path, size_t len, int fill)
{
	uint8_t *b = malloc(len);
	int r;

	if (!b)
		return -ENOMEM;
	memset(b, fill, len);
	r = ptd_file_write_atomic(path, b, len);
	free(b);
	return r;
}

static void setup(void)
{
	char snap[PATH_MAX];

	if (!mkdtemp(tmpdir))
		SKIP_ALL("cannot create a temporary directory: %s",
			 strerror(errno));
	(void)snprintf(lib_path, sizeof(lib_path), "%s/lib.so", tmpdir);
	(void)snprintf(lib2_path, sizeof(lib2_path), "%s/lib2.so", tmpdir);
	(void)snprintf(snap, sizeof(snap), "%s/snap-3.bin", tmpdir);
	if (write_fill(lib_path, 2 * PAGE, 0x11) < 0 ||
	    write_fill(lib2_path, PAGE, 0x22) < 0 ||
	    write_fill(snap, PAGE, 0x33) < 0)
		SKIP_ALL("cannot write test files in %s", tmpdir);
}

static void teardown(void)
{
	char snap[PATH_MAX];

	(void)snprintf(snap, sizeof(snap), "%s/snap-3.bin", tmpdir);
	(void)unlink(snap);
	(void)unlink(lib_path);
	(void)unlink(lib2_path);
	(void)rmdir(tmpdir);
}

/* Byte at @va in @img, or -1. */
static int byte_at(struct ptd_image *img, uint64_t va)
{
	uint8_t b;

	return ptd_image_read(img, va, &b, 1) == 1 ? b : -1;
}

static int64_t add(struct ptd_timeline *tl, enum ptd_tl_op op, uint64_t start,
		   uint64_t end, const char *path, const char *name,
		   const char *file, const struct ptd_tl_pos *pos, size_t npos)
{
	struct ptd_tl_event ev = {
		.op = op, .start = start, .end = end, .pgoff = 0,
		.path = (char *)path, .name = (char *)name,
		.file = (char *)file, .pos = (struct ptd_tl_pos *)pos,
		.npos = npos,
	};

	return ptd_timeline_add(tl, &ev);
}

/* A timeline with one event of each kind. */
static void build_sample(struct ptd_timeline *tl)
{
	static const struct ptd_tl_pos p0[] = { { 100, 0 } };
	static const struct ptd_tl_pos p1[] = { { 100, 4096 }, { 101, 7 } };
	struct ptd_tl_event ev = {
		.op = PTD_TL_MAP, .start = 0x7f0000001000ull,
		.end = 0x7f0000003000ull, .pgoff = 0x2000,
		.path = (char *)"/usr/lib/x86_64-linux-gnu/libc \"so\"\\6\n",
		.id = { 0x103, 0xfffff, 0x123456789abcull },
		.pos = (struct ptd_tl_pos *)p0, .npos = 1,
	};

	ptd_timeline_init(tl);
	CHECK_EQ_INT(ptd_timeline_add(tl, &ev), 0);
	CHECK_EQ_INT(add(tl, PTD_TL_SNAPSHOT, 0xffffffffff600000ull,
			 0xffffffffff601000ull, NULL, "[vdso]", "snap-1.bin",
			 p1, 2),
		     1);
	CHECK_EQ_INT(add(tl, PTD_TL_UNMAP, 0x1000, 0x2000, NULL, NULL, NULL,
			 p1, 2),
		     2);
	CHECK_EQ_INT(add(tl, PTD_TL_EXEC, 0, 0, "/usr/bin/ls", NULL, NULL,
			 NULL, 0),
		     3);
}

static char *write_to_string(const struct ptd_timeline *tl, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	if (ptd_timeline_write(tl, f) != 0) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	return buf;
}

static void test_add_and_pos(void)
{
	struct ptd_timeline tl;
	char path[] = "/lib/x.so";
	struct ptd_tl_pos pos[] = { { 5, 10 }, { 6, 20 } };
	struct ptd_tl_event ev = {
		.op = PTD_TL_MAP, .start = 1, .end = 2, .path = path,
		.pos = pos, .npos = 2,
	};

	ptd_timeline_init(&tl);
	CHECK_EQ_INT(ptd_timeline_add(&tl, &ev), 0);
	/* deep copies: changing the caller's data changes nothing */
	path[1] = 'X';
	pos[0].pos = 999;
	CHECK_EQ_STR(tl.ev[0].path, "/lib/x.so");
	CHECK_EQ_INT(ptd_tl_event_pos(&tl.ev[0], 5), 10);
	CHECK_EQ_INT(ptd_tl_event_pos(&tl.ev[0], 6), 20);
	CHECK_EQ_INT(ptd_tl_event_pos(&tl.ev[0], 7), -1);
	CHECK(tl.ev[0].pos != pos);
	CHECK_EQ_INT(ptd_timeline_add(&tl, &ev), 1);
	CHECK_EQ_U64(tl.next_seq, 2);
	CHECK_EQ_INT(tl.n, 2);
	ev.npos = 1;
	ev.pos = NULL;
	CHECK_EQ_INT(ptd_timeline_add(&tl, &ev), -EINVAL);
	ptd_timeline_fini(&tl);
	CHECK(tl.ev == NULL && tl.n == 0);
	ptd_timeline_fini(NULL);
}

static void test_write_format(void)
{
	struct ptd_timeline tl;
	char *text;
	size_t len;

	build_sample(&tl);
	text = write_to_string(&tl, &len);
	REQUIRE(text);
	CHECK_EQ_STR(text,
		     "{\"seq\":0,\"op\":\"map\",\"start\":\"0x7f0000001000\","
		     "\"end\":\"0x7f0000003000\",\"pgoff\":\"0x2000\","
		     "\"dev\":\"103:fffff\",\"ino\":\"0x123456789abc\","
		     "\"path\":\"/usr/lib/x86_64-linux-gnu/libc \\\"so\\\"\\\\6"
		     "\\u000a\",\"pos\":{\"100\":0}}\n"
		     "{\"seq\":1,\"op\":\"snapshot\","
		     "\"start\":\"0xffffffffff600000\","
		     "\"end\":\"0xffffffffff601000\",\"name\":\"[vdso]\","
		     "\"file\":\"snap-1.bin\",\"pos\":{\"100\":4096,\"101\":7}}\n"
		     "{\"seq\":2,\"op\":\"unmap\",\"start\":\"0x1000\","
		     "\"end\":\"0x2000\",\"pos\":{\"100\":4096,\"101\":7}}\n"
		     "{\"seq\":3,\"op\":\"exec\",\"path\":\"/usr/bin/ls\","
		     "\"pos\":{}}\n");
	free(text);

	/* positions a JSON number cannot hold exactly are refused */
	tl.ev[2].pos[0].pos = (UINT64_C(1) << 53) + 1;
	text = NULL;
	{
		FILE *f = open_memstream(&text, &len);

		REQUIRE(f);
		CHECK_EQ_INT(ptd_timeline_write(&tl, f), -ERANGE);
		fclose(f);
		free(text);
	}
	ptd_timeline_fini(&tl);
}

static void check_same_event(const struct ptd_tl_event *a,
			     const struct ptd_tl_event *b)
{
	CHECK_EQ_U64(a->seq, b->seq);
	CHECK_EQ_INT(a->op, b->op);
	CHECK_EQ_U64(a->start, b->start);
	CHECK_EQ_U64(a->end, b->end);
	CHECK_EQ_U64(a->pgoff, b->pgoff);
	CHECK_EQ_INT(a->id.dev_major, b->id.dev_major);
	CHECK_EQ_INT(a->id.dev_minor, b->id.dev_minor);
	CHECK_EQ_U64(a->id.ino, b->id.ino);
	CHECK((a->path == NULL) == (b->path == NULL));
	if (a->path && b->path)
		CHECK_EQ_STR(a->path, b->path);
	CHECK((a->name == NULL) == (b->name == NULL));
	if (a->name && b->name)
		CHECK_EQ_STR(a->name, b->name);
	CHECK((a->file == NULL) == (b->file == NULL));
	if (a->file && b->file)
		CHECK_EQ_STR(a->file, b->file);
	CHECK_EQ_INT(a->npos, b->npos);
	for (size_t i = 0; i < a->npos && i < b->npos; i++) {
		CHECK_EQ_INT(a->pos[i].tid, b->pos[i].tid);
		CHECK_EQ_U64(a->pos[i].pos, b->pos[i].pos);
	}
}

static void test_round_trip(void)
{
	struct ptd_timeline tl, back;
	struct ptd_diag d = { "" };
	char *text, *again;
	size_t len, len2;

	build_sample(&tl);
	text = write_to_string(&tl, &len);
	REQUIRE(text);
	CHECK_EQ_INT(ptd_timeline_parse(text, len, "t.jsonl", &back, &d), 0);
	if (d.msg[0])
		fprintf(stderr, "diag: %s\n", d.msg);
	REQUIRE(back.n == tl.n);
	for (size_t i = 0; i < tl.n; i++)
		check_same_event(&back.ev[i], &tl.ev[i]);
	CHECK_EQ_U64(back.next_seq, 4);
	again = write_to_string(&back, &len2);
	REQUIRE(again);
	CHECK_EQ_STR(again, text);
	free(again);
	ptd_timeline_fini(&back);

	/* no final newline; seq may skip values; empty input */
	{
		static const char two[] =
			"{\"seq\":5,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}\n"
			"{\"seq\":9,\"op\":\"exec\",\"path\":\"b\",\"pos\":{}}";

		CHECK_EQ_INT(ptd_timeline_parse(two, sizeof(two) - 1, "t",
						&back, &d),
			     0);
	}
	CHECK_EQ_INT(back.n, 2);
	CHECK_EQ_U64(back.next_seq, 10);
	ptd_timeline_fini(&back);
	CHECK_EQ_INT(ptd_timeline_parse("", 0, "t", &back, &d), 0);
	CHECK_EQ_INT(back.n, 0);
	CHECK_EQ_U64(back.next_seq, 0);
	ptd_timeline_fini(&back);
	free(text);
	ptd_timeline_fini(&tl);
}

#define MAP_OK "\"seq\":1,\"op\":\"map\",\"start\":\"0x1000\",\"end\":\"0x2000\""
#define POS ",\"pos\":{\"1\":0}"

static void test_malformed(void)
{
	static const struct {
		const char *text;
		int err;
		const char *msg;
	} cases[] = {
		{ "not json", -PTD_EFORMAT, "t:1: not valid JSON" },
		{ "[1]", -PTD_EFORMAT, "t:1: expected a JSON object" },
		{ "{\"seq\":1}", -PTD_EFORMAT, "t:1: op: missing" },
		{ "{\"seq\":1,\"op\":\"frob\",\"pos\":{}}", -PTD_EFORMAT,
		  "t:1: op: expected map, snapshot" },
		{ "{\"seq\":1,\"op\":7,\"pos\":{}}", -PTD_EFORMAT,
		  "t:1: op: expected a string" },
		{ "{\"seq\":\"1\",\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}",
		  -PTD_EFORMAT, "t:1: seq: expected an integer" },
		{ "{\"seq\":-1,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}",
		  -PTD_EFORMAT, "t:1: seq: expected a non-negative integer" },
		{ "{\"seq\":1.5,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}",
		  -PTD_EFORMAT, "t:1: seq: expected an integer" },
		{ "{\"seq\":1e300,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}",
		  -PTD_EFORMAT, "t:1: seq: an integer over 64 bits out of" },
		{ "{\"seq\":1,\"op\":\"map\",\"start\":4096,\"end\":\"0x2000\","
		  "\"pgoff\":\"0x0\",\"path\":\"/a\"" POS "}",
		  -PTD_EFORMAT, "t:1: start: expected a hex string" },
		{ "{\"seq\":1,\"op\":\"map\",\"start\":\"1000\",\"end\":\"0x2000\","
		  "\"pgoff\":\"0x0\",\"path\":\"/a\"" POS "}",
		  -PTD_EFORMAT, "t:1: start: expected a hex string" },
		{ "{\"seq\":1,\"op\":\"map\",\"start\":\"0x\",\"end\":\"0x2000\","
		  "\"pgoff\":\"0x0\",\"path\":\"/a\"" POS "}",
		  -PTD_EFORMAT, "t:1: start: expected a hex string" },
		{ "{\"seq\":1,\"op\":\"map\",\"start\":\"0x1g\",\"end\":\"0x2000\","
		  "\"pgoff\":\"0x0\",\"path\":\"/a\"" POS "}",
		  -PTD_EFORMAT, "t:1: start: expected a hex string" },
		{ "{\"seq\":1,\"op\":\"map\",\"start\":\"0x10000000000000000\","
		  "\"end\":\"0x2000\",\"pgoff\":\"0x0\",\"path\":\"/a\"" POS "}",
		  -PTD_EFORMAT, "t:1: start: expected a hex string" },
		{ "{\"seq\":1,\"op\":\"map\",\"start\":\"0x2000\",\"end\":\"0x2000\","
		  "\"pgoff\":\"0x0\",\"path\":\"/a\"" POS "}",
		  -PTD_EFORMAT, "t:1: end: must be above start" },
		{ "{" MAP_OK ",\"pgoff\":\"0xffffffffffffffff\",\"path\":\"/a\""
		  POS "}", -PTD_EFORMAT, "t:1: pgoff: mapping runs" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":5" POS "}",
		  -PTD_EFORMAT, "t:1: path: expected a string" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":\"\"" POS "}",
		  -PTD_EFORMAT, "t:1: path: empty string" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":\"lib.so\"" POS "}",
		  -PTD_EFORMAT, "t:1: path: expected an absolute" },
		{ "{" MAP_OK ",\"path\":\"/a\"" POS "}", -PTD_EFORMAT,
		  "t:1: pgoff: missing (required for op 'map')" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":\"/a\"}", -PTD_EFORMAT,
		  "t:1: pos: missing" },
		{ "{\"seq\":1,\"op\":\"unmap\",\"start\":\"0x1000\","
		  "\"end\":\"0x2000\",\"pgoff\":\"0x0\"" POS "}",
		  -PTD_EFORMAT, "t:1: pgoff: not allowed for op 'unmap'" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":\"/a\",\"dev\":"
		  "\"fe:01\"" POS "}", -PTD_EFORMAT, "t:1: ino: missing" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":\"/a\",\"ino\":"
		  "\"0x5\"" POS "}", -PTD_EFORMAT, "t:1: ino: given without dev" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":\"/a\",\"dev\":"
		  "\"fe\",\"ino\":\"0x5\"" POS "}", -PTD_EFORMAT,
		  "t:1: dev: expected MAJOR:MINOR in hex" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":\"/a\",\"dev\":"
		  "\"1000:0\",\"ino\":\"0x5\"" POS "}", -PTD_EFORMAT,
		  "t:1: dev: expected MAJOR:MINOR in hex" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":\"/a\",\"dev\":"
		  "\"fe:01\",\"ino\":\"0x0\"" POS "}", -PTD_EFORMAT,
		  "t:1: ino: 0x0 out of range" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":\"/a\",\"dev\":"
		  "7,\"ino\":\"0x5\"" POS "}", -PTD_EFORMAT,
		  "t:1: dev: expected a string" },
		{ "{\"seq\":1,\"op\":\"unmap\",\"start\":\"0x1000\","
		  "\"end\":\"0x2000\",\"dev\":\"fe:01\",\"ino\":\"0x5\"" POS
		  "}", -PTD_EFORMAT, "t:1: dev: not allowed for op 'unmap'" },
		{ "{" MAP_OK ",\"pgoff\":\"0x0\",\"path\":\"/a\",\"x\":1" POS "}",
		  -PTD_EFORMAT, "t:1: unknown field \"x\"" },
		{ "{" MAP_OK ",\"seq\":1,\"pgoff\":\"0x0\",\"path\":\"/a\"" POS
		  "}", -PTD_EFORMAT, "t:1: seq: given twice" },
		{ "{\"seq\":1,\"op\":\"snapshot\",\"start\":\"0x1000\","
		  "\"end\":\"0x2000\",\"name\":\"[vdso]\",\"file\":\"../etc/x\""
		  POS "}", -PTD_EFORMAT, "t:1: file: expected a plain" },
		{ "{\"seq\":1,\"op\":\"snapshot\",\"start\":\"0x1000\","
		  "\"end\":\"0x2000\",\"name\":\"[vdso]\",\"file\":\"a/b\""
		  POS "}", -PTD_EFORMAT, "t:1: file: expected a plain" },
		{ "{\"seq\":1,\"op\":\"snapshot\",\"start\":\"0x1000\","
		  "\"end\":\"0x2000\",\"name\":\"[vdso]\",\"file\":\"..\""
		  POS "}", -PTD_EFORMAT, "t:1: file: expected a plain" },
		{ "{\"seq\":1,\"op\":\"snapshot\",\"start\":\"0x1000\","
		  "\"end\":\"0x2000\",\"name\":\"[vdso]\",\"file\":\".\""
		  POS "}", -PTD_EFORMAT, "t:1: file: expected a plain" },
		{ "{\"seq\":1,\"op\":\"snapshot\",\"start\":\"0x1000\","
		  "\"end\":\"0x2000\",\"name\":[],\"file\":\"s.bin\""
		  POS "}", -PTD_EFORMAT, "t:1: name: expected a string" },
		{ "{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\",\"pos\":[]}",
		  -PTD_EFORMAT, "t:1: pos: expected an object" },
		{ "{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{\"x\":1}}",
		  -PTD_EFORMAT, "t:1: pos: keys must be thread ids" },
		{ "{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{\"0\":1}}",
		  -PTD_EFORMAT, "t:1: pos: keys must be thread ids" },
		{ "{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{\"-1\":1}}",
		  -PTD_EFORMAT, "t:1: pos: keys must be thread ids" },
		{ "{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\","
		  "\"pos\":{\"2147483648\":1}}",
		  -PTD_EFORMAT, "t:1: pos: keys must be thread ids" },
		{ "{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{\"1\":\"1\"}}",
		  -PTD_EFORMAT, "t:1: pos.1: expected an integer" },
		{ "{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{\"1\":-1}}",
		  -PTD_EFORMAT, "t:1: pos.1: expected a non-negative integer" },
		{ "{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\","
		  "\"pos\":{\"1\":1,\"1\":2}}",
		  -PTD_EFORMAT, "t:1: pos: duplicate thread id" },
		{ "{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}} x",
		  -PTD_EFORMAT, "t:1: data after the JSON value" },
		{ "{\"seq\":2,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}\n"
		  "{\"seq\":2,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}\n",
		  -PTD_EFORMAT, "t:2: seq: not above" },
		{ "{\"seq\":2,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}\n"
		  "{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}\n",
		  -PTD_EFORMAT, "t:2: seq: not above" },
		{ "{\"seq\":2,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}\n\n"
		  "{\"seq\":3,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}\n",
		  -PTD_EFORMAT, "t:2: empty line" },
	};

	for (size_t i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
		struct ptd_timeline tl = { (void *)0x1, 5, 5, 5 };
		struct ptd_diag d = { "" };
		int r = ptd_timeline_parse(cases[i].text, strlen(cases[i].text),
					   "t", &tl, &d);

		if (r != cases[i].err || !strstr(d.msg, cases[i].msg))
			fprintf(stderr, "case %zu: %s\n", i, cases[i].text);
		CHECK_EQ_INT(r, cases[i].err);
		CHECK_CONTAINS(d.msg, cases[i].msg);
		/* a failed parse leaves *ret alone */
		CHECK(tl.ev == (void *)0x1 && tl.n == 5);
	}
}

/* Snapshot file names follow the one plain-name rule of lib/common
 * (ptd_filename_check), as bundles and captures do: a name with ".." in
 * it is one component and stays; "..", "." and "a/b" do not. */
static void test_snapshot_names(void)
{
	static const char *const ok[] = { "snap..1.bin", "..snap", ".s" };
	char line[256];

	for (size_t i = 0; i < PTD_ARRAY_SIZE(ok); i++) {
		struct ptd_timeline tl;
		struct ptd_diag d = { "" };

		(void)snprintf(line, sizeof(line),
			       "{\"seq\":1,\"op\":\"snapshot\",\"start\":"
			       "\"0x1000\",\"end\":\"0x2000\",\"name\":\"[vdso]\","
			       "\"file\":\"%s\",\"pos\":{}}\n", ok[i]);
		if (ptd_timeline_parse(line, strlen(line), "t", &tl, &d) != 0) {
			CHECK_FAIL_("%s: refused: %s", ok[i], d.msg);
			continue;
		}
		CHECK_EQ_STR(tl.ev[0].file, ok[i]);
		ptd_timeline_fini(&tl);
	}
}

static void test_malformed_bytes(void)
{
	static const char nul[] =
		"{\"seq\":1,\"op\":\"exec\",\"path\":\"/a\",\"pos\":{}}\n{\0}\n";
	struct ptd_timeline tl;
	struct ptd_diag d = { "" };
	char *line;

	CHECK_EQ_INT(ptd_timeline_parse(nul, sizeof(nul) - 1, "t", &tl, &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t:2: NUL byte");

	/* a line over the limit */
	line = malloc(PTD_TL_MAX_LINE + 2);
	REQUIRE(line);
	memset(line, ' ', PTD_TL_MAX_LINE + 1);
	line[PTD_TL_MAX_LINE + 1] = '\n';
	CHECK_EQ_INT(ptd_timeline_parse(line, PTD_TL_MAX_LINE + 2, "t", &tl,
					&d),
		     -PTD_ELIMIT);
	CHECK_CONTAINS(d.msg, "t:1: line longer than 65536");
	free(line);

	/* a name over its limit */
	line = malloc(1024);
	REQUIRE(line);
	{
		char name[300];

		memset(name, 'n', sizeof(name) - 1);
		name[sizeof(name) - 1] = '\0';
		(void)snprintf(line, 1024,
			       "{\"seq\":1,\"op\":\"snapshot\",\"start\":\"0x1\","
			       "\"end\":\"0x2\",\"name\":\"%s\",\"file\":\"f\","
			       "\"pos\":{}}",
			       name);
	}
	CHECK_EQ_INT(ptd_timeline_parse(line, strlen(line), "t", &tl, &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t:1: name: longer than 255 bytes");
	free(line);
	CHECK_EQ_INT(ptd_timeline_parse(NULL, 1, "t", &tl, &d), -EINVAL);
}

static void test_event_limit(void)
{
	static const char line[] = "{\"seq\":%u,\"op\":\"exec\",\"path\":\"/\","
				   "\"pos\":{}}\n";
	struct ptd_buf b = { 0 };
	struct ptd_timeline tl;
	struct ptd_diag d = { "" };

	REQUIRE(ptd_buf_reserve(&b, (size_t)(PTD_TL_MAX_EVENTS + 1) * 56) == 0);
	for (unsigned i = 0; i <= PTD_TL_MAX_EVENTS; i++) {
		char l[80];
		int n = snprintf(l, sizeof(l), line, i);

		REQUIRE(ptd_buf_append(&b, l, (size_t)n) == 0);
	}
	CHECK_EQ_INT(ptd_timeline_parse((char *)b.data, b.len, "t", &tl, &d),
		     -PTD_ELIMIT);
	CHECK_CONTAINS(d.msg, "t:1000001: more than 1000000 events");
	ptd_buf_fini(&b);
}

static void test_apply(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "img", &img);
	struct ptd_diag d = { "" };
	struct ptd_tl_event ev = { 0 };
	const char *name;
	uint64_t off;

	REQUIRE(ic && img);
	ev.seq = 7;
	ev.op = PTD_TL_MAP;
	ev.start = 0x400000;
	ev.end = 0x402000;
	ev.pgoff = PAGE;
	ev.path = lib_path;
	CHECK_EQ_INT(ptd_tl_event_apply(&ev, img, tmpdir, &d), 0);
	CHECK_EQ_INT(byte_at(img, 0x400000), 0x11);
	/* pgoff is honoured: one page of the file is left */
	CHECK_EQ_INT(byte_at(img, 0x401000), -1);
	REQUIRE(ptd_image_find(img, 0x400000));
	CHECK_EQ_INT(ptd_image_module_of(img, ptd_image_find(img, 0x400000)->isid,
					 0x400010, &name, &off),
		     0);
	CHECK_EQ_U64(off, PAGE + 0x10);

	ev.op = PTD_TL_SNAPSHOT;
	ev.seq = 8;
	ev.start = 0x500000;
	ev.end = 0x501000;
	ev.path = NULL;
	ev.name = (char *)"[vdso]";
	ev.file = (char *)"snap-3.bin";
	CHECK_EQ_INT(ptd_tl_event_apply(&ev, img, tmpdir, &d), 0);
	CHECK_EQ_INT(byte_at(img, 0x500fff), 0x33);
	REQUIRE(ptd_image_find(img, 0x500000));
	CHECK_EQ_INT(ptd_image_module_of(img, ptd_image_find(img, 0x500000)->isid,
					 0x500010, &name, &off),
		     0);
	CHECK_EQ_STR(name, "[vdso]");
	CHECK_EQ_U64(off, 0x10);

	/* a missing snapshot file: the message names the event and file */
	ev.seq = 9;
	ev.file = (char *)"snap-9.bin";
	CHECK(ptd_tl_event_apply(&ev, img, tmpdir, &d) == -ENOENT);
	CHECK_CONTAINS(d.msg, "timeline event 9 (snapshot");
	CHECK_CONTAINS(d.msg, "snap-9.bin");
	/* a file name that leaves the directory is refused */
	ev.file = (char *)"../x";
	CHECK_EQ_INT(ptd_tl_event_apply(&ev, img, tmpdir, &d), -EINVAL);

	ev.op = PTD_TL_UNMAP;
	ev.start = 0x400800;
	ev.end = 0x500800;
	CHECK_EQ_INT(ptd_tl_event_apply(&ev, img, tmpdir, &d), 0);
	CHECK_EQ_INT(byte_at(img, 0x4007ff), 0x11);
	CHECK_EQ_INT(byte_at(img, 0x400800), -1);
	CHECK_EQ_INT(byte_at(img, 0x5007ff), -1);
	CHECK_EQ_INT(byte_at(img, 0x500800), 0x33);

	ev.op = PTD_TL_EXEC;
	ev.path = (char *)"/bin/true";
	CHECK_EQ_INT(ptd_tl_event_apply(&ev, img, tmpdir, &d), 0);
	CHECK_EQ_INT(byte_at(img, 0x400000), -1);
	CHECK_EQ_INT(byte_at(img, 0x500800), -1);

	ev.op = PTD_TL_MAP;
	ev.path = (char *)"/nonexistent/lib.so";
	ev.start = 0x400000;
	ev.end = 0x401000;
	ev.seq = 11;
	CHECK_EQ_INT(ptd_tl_event_apply(&ev, img, tmpdir, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "timeline event 11 (map 0x400000-0x401000)");
	CHECK_CONTAINS(d.msg, "/nonexistent/lib.so");
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

/*
 * Two threads.  T1 (tid 10) exists from the start; T2 (tid 20) is created
 * after event 1, so its first_seq is 2.
 *   seq 0  map lib  at 0x400000   pos {10: 0}
 *   seq 1  map lib2 at 0x600000   pos {10: 100}
 *   seq 2  unmap 0x400000..       pos {10: 200, 20: 50}
 *   seq 3  map lib at 0x700000    pos {10: 300, 20: 80}
 */
static void build_two_threads(struct ptd_timeline *tl)
{
	static const struct ptd_tl_pos p0[] = { { 10, 0 } };
	static const struct ptd_tl_pos p1[] = { { 10, 100 } };
	static const struct ptd_tl_pos p2[] = { { 10, 200 }, { 20, 50 } };
	static const struct ptd_tl_pos p3[] = { { 20, 80 }, { 10, 300 } };

	ptd_timeline_init(tl);
	add(tl, PTD_TL_MAP, 0x400000, 0x401000, lib_path, NULL, NULL, p0, 1);
	add(tl, PTD_TL_MAP, 0x600000, 0x601000, lib2_path, NULL, NULL, p1, 1);
	add(tl, PTD_TL_UNMAP, 0x400000, 0x401000, NULL, NULL, NULL, p2, 2);
	add(tl, PTD_TL_MAP, 0x700000, 0x701000, lib_path, NULL, NULL, p3, 2);
	CHECK_EQ_INT(tl->n, 4);
}

static void test_cursor_two_threads(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *i1;
	(void)ptd_image_new(ic, "t1", &i1);
	struct ptd_image *i2;
	(void)ptd_image_new(ic, "t2", &i2);
	struct ptd_timeline tl;
	struct ptd_tl_cursor c1, c2;
	struct ptd_diag d = { "" };

	REQUIRE(ic && i1 && i2);
	build_two_threads(&tl);

	/* T1: nothing before its start; events at its positions */
	CHECK_EQ_INT(ptd_tl_cursor_init(&c1, &tl, tmpdir, 10, 0, UINT64_MAX,
					i1, &d), 0);
	CHECK_EQ_INT(byte_at(i1, 0x400000), -1);
	CHECK(ptd_tl_cursor_due(&c1, 0));
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c1, 0, i1, &d), 1);
	CHECK_EQ_INT(byte_at(i1, 0x400000), 0x11);
	CHECK(!ptd_tl_cursor_due(&c1, 99));
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c1, 99, i1, &d), 0);
	CHECK_EQ_INT(byte_at(i1, 0x600000), -1);
	CHECK(ptd_tl_cursor_due(&c1, 100));
	/* one call applies everything due, in order */
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c1, 250, i1, &d), 2);
	CHECK_EQ_INT(byte_at(i1, 0x600000), 0x22);
	CHECK_EQ_INT(byte_at(i1, 0x400000), -1);
	CHECK_EQ_INT(byte_at(i1, 0x700000), -1);
	CHECK_EQ_U64(c1.next_pos, 300);

	/* T2 starts with events 0 and 1 applied */
	CHECK_EQ_INT(ptd_tl_cursor_init(&c2, &tl, tmpdir, 20, 2, UINT64_MAX,
					i2, &d), 0);
	CHECK_EQ_INT(byte_at(i2, 0x400000), 0x11);
	CHECK_EQ_INT(byte_at(i2, 0x600000), 0x22);
	CHECK_EQ_U64(c2.next_pos, 50);
	CHECK(!ptd_tl_cursor_due(&c2, 49));
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c2, 49, i2, &d), 0);
	CHECK_EQ_INT(byte_at(i2, 0x400000), 0x11);
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c2, 50, i2, &d), 1);
	CHECK_EQ_INT(byte_at(i2, 0x400000), -1);
	/* T1's image did not move with T2 */
	CHECK_EQ_INT(byte_at(i1, 0x700000), -1);
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c2, 80, i2, &d), 1);
	CHECK_EQ_INT(byte_at(i2, 0x700000), 0x11);
	CHECK_EQ_U64(c2.next_pos, UINT64_MAX);
	CHECK(!ptd_tl_cursor_due(&c2, UINT64_MAX - 1));
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c2, 1000, i2, &d), 0);

	CHECK_EQ_INT(ptd_tl_cursor_advance(&c1, 300, i1, &d), 1);
	CHECK_EQ_INT(byte_at(i1, 0x700000), 0x11);

	/* an event appended later (live timeline) is picked up */
	{
		static const struct ptd_tl_pos p4[] = { { 10, 400 } };

		CHECK_EQ_INT(add(&tl, PTD_TL_EXEC, 0, 0, "/bin/x", NULL, NULL,
				 p4, 1),
			     4);
		CHECK_EQ_INT(ptd_tl_cursor_advance(&c1, 399, i1, &d), 0);
		CHECK_EQ_U64(c1.next_pos, 400);
		CHECK_EQ_INT(ptd_tl_cursor_advance(&c1, 400, i1, &d), 1);
		CHECK_EQ_INT(byte_at(i1, 0x600000), -1);
	}
	ptd_timeline_fini(&tl);
	ptd_image_free(i1);
	ptd_image_free(i2);
	ptd_iscache_free(ic);
}

/* ptd_tl_add_sections adds every section a thread's cursor adds, in its
 * order (isids 1, 2, 3 for thread 20: its start's two maps, then the
 * later map), whatever thread's cursor applies them afterwards: thread
 * 10's, going to its end, adds none. */
static void test_add_sections(void)
{
	struct ptd_iscache *ic;
	struct ptd_image *img = NULL;
	struct ptd_timeline tl;
	struct ptd_tl_cursor c;
	struct ptd_diag d = { "" };
	static const uint64_t vaddr[] = { 0x400000, 0x600000, 0x700000 };

	(void)ptd_iscache_new(&ic);
	REQUIRE(ic);
	build_two_threads(&tl);
	CHECK_EQ_INT(ptd_tl_add_sections(ic, &tl, tmpdir, 20, 2, UINT64_MAX),
		     0);
	for (int i = 1; i <= 3; i++) {
		const struct ptd_module *m = ptd_iscache_module(ic, i);

		CHECK(m && m->vaddr == vaddr[i - 1]);
	}
	CHECK(!ptd_iscache_module(ic, 4));
	(void)ptd_image_new(ic, "t1", &img);
	REQUIRE(img);
	CHECK_EQ_INT(ptd_tl_cursor_init(&c, &tl, tmpdir, 10, 0, UINT64_MAX,
					img, &d), 0);
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c, UINT64_MAX, img, &d), 4);
	CHECK_EQ_INT(byte_at(img, 0x700000), 0x11);
	CHECK(!ptd_iscache_module(ic, 4));
	ptd_image_free(img);
	ptd_timeline_fini(&tl);
	ptd_iscache_free(ic);
}

/* An event with no position for the thread (after first_seq: it happened
 * once the thread's stream had ended) is never applied to it; a failing
 * event is reported and skipped, and the cursor goes on. */
static void test_cursor_nopos_and_errors(void)
{
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "t", &img);
	static const struct ptd_tl_pos p[] = { { 10, 500 } };
	struct ptd_timeline tl;
	struct ptd_tl_cursor c;
	struct ptd_diag d = { "" };

	REQUIRE(ic && img);
	ptd_timeline_init(&tl);
	add(&tl, PTD_TL_MAP, 0x400000, 0x401000, lib_path, NULL, NULL, NULL, 0);
	add(&tl, PTD_TL_MAP, 0x500000, 0x501000, "/nonexistent/x", NULL, NULL,
	    p, 1);
	add(&tl, PTD_TL_MAP, 0x600000, 0x601000, lib2_path, NULL, NULL, p, 1);
	add(&tl, PTD_TL_UNMAP, 0x600000, 0x601000, NULL, NULL, NULL, NULL, 0);

	CHECK_EQ_INT(ptd_tl_cursor_init(&c, &tl, tmpdir, 10, 0, UINT64_MAX,
					img, &d), 0);
	CHECK_EQ_U64(c.next_pos, 500);
	CHECK(!ptd_tl_cursor_due(&c, 499));
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c, 499, img, &d), 0);
	CHECK_EQ_INT(byte_at(img, 0x400000), -1);	/* never applied */
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c, 500, img, &d), -ENOENT);
	CHECK_CONTAINS(d.msg, "timeline event 1");
	CHECK(ptd_tl_cursor_due(&c, 500));
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c, 500, img, &d), 1);
	CHECK_EQ_INT(byte_at(img, 0x600000), 0x22);
	/* the unmap after the thread's end is not the thread's */
	CHECK_EQ_U64(c.next_pos, UINT64_MAX);
	CHECK(ptd_tl_cursor_peek(&c) == NULL);
	CHECK_EQ_INT(ptd_tl_cursor_apply_next(&c, img, &d), 0);
	CHECK_EQ_INT(ptd_tl_cursor_advance(&c, UINT64_MAX - 1, img, &d), 0);
	CHECK_EQ_INT(byte_at(img, 0x600000), 0x22);

	/* init: a failing event before first_seq is reported, the rest is
	 * still applied */
	ptd_image_free(img);
	(void)ptd_image_new(ic, "t2", &img);
	REQUIRE(img);
	CHECK_EQ_INT(ptd_tl_cursor_init(&c, &tl, tmpdir, 10, 3, UINT64_MAX,
					img, &d),
		     -ENOENT);
	CHECK_CONTAINS(d.msg, "/nonexistent/x");
	CHECK_EQ_INT(byte_at(img, 0x400000), 0x11);
	CHECK_EQ_INT(byte_at(img, 0x600000), 0x22);
	CHECK_EQ_U64(c.next_pos, UINT64_MAX);

	ptd_timeline_fini(&tl);
	ptd_image_free(img);
	ptd_iscache_free(ic);
}

/*
 * Thread id 10 twice: thread A from the start until before event 2, then,
 * once A was gone, thread B given the same id from event 2 on.  B's
 * positions are in its own stream, so A's cursor must stop at its end:
 *   seq 0  map lib  at 0x400000   pos {10: 0}     (A)
 *   seq 1  map lib2 at 0x600000   pos {10: 100}   (A)
 *   seq 2  unmap 0x400000..       pos {10: 20}    (B)
 *   seq 3  map lib at 0x700000    pos {10: 30}    (B)
 */
static void test_cursor_reused_tid(void)
{
	static const struct ptd_tl_pos p0[] = { { 10, 0 } };
	static const struct ptd_tl_pos p1[] = { { 10, 100 } };
	static const struct ptd_tl_pos p2[] = { { 10, 20 } };
	static const struct ptd_tl_pos p3[] = { { 10, 30 } };
	struct ptd_iscache *ic;
	struct ptd_image *ia, *ib, *iu;
	struct ptd_timeline tl;
	struct ptd_tl_cursor a, b, u;
	struct ptd_diag d = { "" };

	(void)ptd_iscache_new(&ic);
	REQUIRE(ic);
	(void)ptd_image_new(ic, "a", &ia);
	(void)ptd_image_new(ic, "b", &ib);
	(void)ptd_image_new(ic, "u", &iu);
	REQUIRE(ia && ib && iu);
	ptd_timeline_init(&tl);
	add(&tl, PTD_TL_MAP, 0x400000, 0x401000, lib_path, NULL, NULL, p0, 1);
	add(&tl, PTD_TL_MAP, 0x600000, 0x601000, lib2_path, NULL, NULL, p1, 1);
	add(&tl, PTD_TL_UNMAP, 0x400000, 0x401000, NULL, NULL, NULL, p2, 1);
	add(&tl, PTD_TL_MAP, 0x700000, 0x701000, lib_path, NULL, NULL, p3, 1);

	/* A: its two events at its positions, none of B's */
	CHECK_EQ_INT(ptd_tl_cursor_init(&a, &tl, tmpdir, 10, 0, 2, ia, &d), 0);
	CHECK_EQ_INT(ptd_tl_cursor_advance(&a, 50, ia, &d), 1);
	CHECK_EQ_INT(byte_at(ia, 0x400000), 0x11);
	CHECK_EQ_U64(a.next_pos, 100);
	CHECK_EQ_INT(ptd_tl_cursor_advance(&a, 5000, ia, &d), 1);
	CHECK_EQ_INT(byte_at(ia, 0x600000), 0x22);
	CHECK_EQ_INT(byte_at(ia, 0x400000), 0x11);	/* B's unmap: not A's */
	CHECK_EQ_INT(byte_at(ia, 0x700000), -1);
	CHECK_EQ_U64(a.next_pos, UINT64_MAX);
	CHECK(ptd_tl_cursor_peek(&a) == NULL);
	CHECK_EQ_INT(ptd_tl_cursor_apply_next(&a, ia, &d), 0);

	/* without the bound, A would take B's unmap at its offset 20 */
	CHECK_EQ_INT(ptd_tl_cursor_init(&u, &tl, tmpdir, 10, 0, UINT64_MAX, iu,
					&d), 0);
	CHECK_EQ_INT(ptd_tl_cursor_advance(&u, 50, iu, &d), 1);
	CHECK_EQ_INT(ptd_tl_cursor_advance(&u, 100, iu, &d), 3);
	CHECK_EQ_INT(byte_at(iu, 0x400000), -1);

	/* B: A's events in effect at its start, then its own */
	CHECK_EQ_INT(ptd_tl_cursor_init(&b, &tl, tmpdir, 10, 2, UINT64_MAX, ib,
					&d), 0);
	CHECK_EQ_INT(byte_at(ib, 0x400000), 0x11);
	CHECK_EQ_U64(b.next_pos, 20);
	CHECK_EQ_INT(ptd_tl_cursor_advance(&b, 30, ib, &d), 2);
	CHECK_EQ_INT(byte_at(ib, 0x400000), -1);
	CHECK_EQ_INT(byte_at(ib, 0x700000), 0x11);

	/* an end before the start is refused */
	CHECK_EQ_INT(ptd_tl_cursor_init(&b, &tl, tmpdir, 10, 3, 2, ib, &d),
		     -EINVAL);
	ptd_timeline_fini(&tl);
	ptd_image_free(ia);
	ptd_image_free(ib);
	ptd_image_free(iu);
	ptd_iscache_free(ic);
}

/* The file a map event names, checked on an open descriptor: the one the
 * process mapped passes, another file at its path does not. */
static void test_check_file(void)
{
	struct ptd_timeline tl;
	struct ptd_tl_event ev = { .op = PTD_TL_MAP, .start = 0x1000,
				   .end = 0x2000, .path = lib_path };
	struct ptd_diag d = { "" };
	struct stat st;
	int fd = open(lib_path, O_RDONLY | O_CLOEXEC);
	int other = open(lib2_path, O_RDONLY | O_CLOEXEC);

	REQUIRE(fd >= 0 && other >= 0 && fstat(fd, &st) == 0);
	ptd_timeline_init(&tl);
	/* no identity recorded: nothing to check */
	REQUIRE(ptd_timeline_add(&tl, &ev) >= 0);
	CHECK_EQ_INT(ptd_timeline_check_file(&tl, lib_path, other, &d), 0);
	ev.id.dev_major = major(st.st_dev);
	ev.id.dev_minor = minor(st.st_dev);
	ev.id.ino = st.st_ino;
	REQUIRE(ptd_timeline_add(&tl, &ev) >= 0);
	CHECK_EQ_INT(ptd_timeline_check_file(&tl, lib_path, fd, &d), 0);
	CHECK_EQ_INT(ptd_timeline_check_file(&tl, lib_path, other, &d),
		     -PTD_EIDENTITY);
	CHECK_CONTAINS(d.msg, lib_path);
	CHECK_CONTAINS(d.msg, "is not the file the process mapped");
	/* events of other paths are not this file's */
	CHECK_EQ_INT(ptd_timeline_check_file(&tl, lib2_path, other, &d), 0);
	ptd_timeline_fini(&tl);
	(void)close(fd);
	(void)close(other);
}

int main(void)
{
	setup();
	RUN(test_add_and_pos);
	RUN(test_write_format);
	RUN(test_round_trip);
	RUN(test_malformed);
	RUN(test_snapshot_names);
	RUN(test_malformed_bytes);
	RUN(test_event_limit);
	RUN(test_apply);
	RUN(test_cursor_two_threads);
	RUN(test_add_sections);
	RUN(test_cursor_reused_tid);
	RUN(test_check_file);
	RUN(test_cursor_nopos_and_errors);
	teardown();
	return check_done();
}
