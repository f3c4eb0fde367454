/* SPDX-License-Identifier: MIT */
/*
 * The capture directory: ground-truth varints, manifest and timeline round
 * trip, and every way a capture read back is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "common/diag.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "swpt/capture.h"

static char tmpdir[] = "/tmp/test-capture-XXXXXX";

static const uint8_t pt_bytes[] = { 0x02, 0x82, 0x02, 0x82, 0x99, 0x00 };
static const uint64_t truth_ips[] = {
	0x401000, 0x401004, 0x401002, 0x7fffffffe000, 0x401000, 0,
	UINT64_MAX, 1, 0x8000000000000000ull,
};

static void write_file(const char *dir, const char *name, const void *p,
		       size_t n)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || ptd_write_all(fd, p, n) < 0) {
		perror(path);
		exit(2);
	}
	(void)close(fd);
}

/* A fresh directory with pt-100.bin and truth-100.bin. */
static char *make_dir(const char *tag)
{
	struct ptd_truth_writer w;
	char *dir, path[512];

	if (asprintf(&dir, "%s/%s", tmpdir, tag) < 0 || mkdir(dir, 0755) < 0)
		exit(2);
	write_file(dir, "pt-100.bin", pt_bytes, sizeof(pt_bytes));
	snprintf(path, sizeof(path), "%s/truth-100.bin", dir);
	if (ptd_truth_writer_open(&w, path) < 0)
		exit(2);
	for (size_t i = 0; i < PTD_ARRAY_SIZE(truth_ips); i++)
		if (ptd_truth_writer_add(&w, truth_ips[i]) < 0)
			exit(2);
	if (ptd_truth_writer_close(&w) < 0)
		exit(2);
	write_file(dir, "timeline.jsonl", "", 0);
	return dir;
}

/* The manifest of make_dir()'s directory, to be broken by each test. */
static cJSON *good_manifest(void)
{
	const char *text =
		"{\"format\":\"ptd-swpt-capture\",\"version\":1,\"pid\":100,"
		"\"argv\":[\"/bin/true\",\"x y\"],"
		"\"cpu\":{\"vendor\":\"intel\",\"family\":6,\"model\":85,"
		"\"stepping\":4},"
		"\"config\":{\"psb_period\":4096,\"noretcomp\":false,"
		"\"tsc\":false},"
		"\"threads\":[{\"tid\":100,\"first_seq\":0,"
		"\"pt\":\"pt-100.bin\",\"truth\":\"truth-100.bin\","
		"\"insns\":9,\"pt_bytes\":6}],"
		"\"exit\":{\"code\":3}}";
	cJSON *j = cJSON_Parse(text);

	if (!j)
		exit(2);
	return j;
}

static cJSON *thread0(cJSON *m)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItem(m, "threads"), 0);
}

/* Write @m (consumed) as the manifest of @dir and load it. */
static int load_with(const char *dir, cJSON *m, struct ptd_diag *diag)
{
	struct ptd_capture c;
	char *text = cJSON_PrintUnformatted(m);
	int r;

	cJSON_Delete(m);
	write_file(dir, "capture.json", text, strlen(text));
	free(text);
	memset(&c, 0xcd, sizeof(c));
	diag->msg[0] = 0;
	r = ptd_capture_load(dir, &c, diag);
	if (r == 0)
		ptd_capture_fini(&c);
	return r;
}

/* Load @m in a new directory; expect @err and a message with @needle. */
static void expect_refused(const char *tag, cJSON *m, int err,
			   const char *needle)
{
	struct ptd_diag diag;
	char *dir = make_dir(tag);
	int r = load_with(dir, m, &diag);

	CHECK_EQ_INT(r, err);
	CHECK_CONTAINS(diag.msg, needle);
	CHECK_CONTAINS(diag.msg, tag);	/* names the file */
	free(dir);
}

/* ---- truth ----------------------------------------------------------- */

static void test_truth_roundtrip(void)
{
	char path[512];
	struct ptd_truth_writer w;
	_cleanup_free_ char *data = NULL;
	uint64_t *ips = NULL;
	size_t len, n = 0;
	struct ptd_diag diag;

	snprintf(path, sizeof(path), "%s/truth-rt.bin", tmpdir);
	REQUIRE(ptd_truth_writer_open(&w, path) == 0);
	for (size_t i = 0; i < PTD_ARRAY_SIZE(truth_ips); i++)
		CHECK_EQ_INT(ptd_truth_writer_add(&w, truth_ips[i]), 0);
	CHECK_EQ_U64(w.count, PTD_ARRAY_SIZE(truth_ips));
	CHECK_EQ_INT(ptd_truth_writer_close(&w), 0);
	CHECK(w.f == NULL);
	REQUIRE(ptd_file_read_all(path, 1 << 20, &data, &len) == 0);
	/* small deltas are small: 0x401000 from 0 takes 4 bytes (zigzag 23
	 * bits), +4 takes one, -2 takes one */
	CHECK_EQ_U64((uint8_t)data[4], 8);
	CHECK_EQ_U64((uint8_t)data[5], 3);
	REQUIRE(ptd_truth_decode((uint8_t *)data, len, "rt", &ips, &n,
				 &diag) == 0);
	REQUIRE(n == PTD_ARRAY_SIZE(truth_ips));
	for (size_t i = 0; i < n; i++)
		CHECK_EQ_U64(ips[i], truth_ips[i]);
	free(ips);
}

static void test_truth_empty(void)
{
	uint64_t *ips = NULL;
	size_t n = 99;

	CHECK_EQ_INT(ptd_truth_decode(NULL, 0, "e", &ips, &n, NULL), 0);
	CHECK_EQ_U64(n, 0);
	free(ips);
}

static void test_truth_truncated(void)
{
	const uint8_t d[] = { 0x02, 0x80, 0x80 };
	uint64_t *ips = (uint64_t *)0x1;
	size_t n = 7;
	struct ptd_diag diag;

	CHECK_EQ_INT(ptd_truth_decode(d, sizeof(d), "trunc.bin", &ips, &n,
				      &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "trunc.bin");
	CHECK_CONTAINS(diag.msg, "past the end");
	CHECK(ips == (uint64_t *)0x1 && n == 7);	/* untouched */
}

static void test_truth_overlong(void)
{
	uint8_t eleven[12], tenth[10];
	uint64_t *ips = NULL;
	size_t n;
	struct ptd_diag diag;

	memset(eleven, 0x80, sizeof(eleven));
	eleven[0] = 0x00;		/* one good IP, then 11 bytes */
	eleven[11] = 0x01;
	CHECK_EQ_INT(ptd_truth_decode(eleven, sizeof(eleven), "long", &ips,
				      &n, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "offset 1");
	CHECK_CONTAINS(diag.msg, "64 bits");
	/* ten bytes, but the last carries bits past bit 63 */
	memset(tenth, 0xff, sizeof(tenth));
	tenth[9] = 0x02;
	CHECK_EQ_INT(ptd_truth_decode(tenth, sizeof(tenth), "long", &ips, &n,
				      &diag), -PTD_EFORMAT);
	/* while ten bytes ending in 0x01 are the largest valid value */
	tenth[9] = 0x01;
	REQUIRE(ptd_truth_decode(tenth, sizeof(tenth), "long", &ips, &n,
				 &diag) == 0);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(ips[0], 0x8000000000000000ull);
	free(ips);
}

/* ---- round trip ------------------------------------------------------ */

static void add_events(struct ptd_timeline *tl)
{
	struct ptd_tl_pos pos[2] = { { 100, 0 }, { 101, 17 } };
	struct ptd_tl_event ev = { 0 };

	ev.op = PTD_TL_MAP;
	ev.start = 0x400000;
	ev.end = 0x401000;
	ev.pgoff = 0x1000;
	ev.path = (char *)"/bin/true";
	ev.pos = pos;
	ev.npos = 1;
	if (ptd_timeline_add(tl, &ev) < 0)
		exit(2);
	memset(&ev, 0, sizeof(ev));
	ev.op = PTD_TL_SNAPSHOT;
	ev.start = 0x7fff0000;
	ev.end = 0x7fff2000;
	ev.name = (char *)"[vdso]";
	ev.file = (char *)"snap-1.bin";
	ev.pos = pos;
	ev.npos = 2;
	if (ptd_timeline_add(tl, &ev) < 0)
		exit(2);
}

static void test_roundtrip(void)
{
	char *dir = make_dir("roundtrip");
	char *argv[] = { (char *)"/bin/true", (char *)"a \"b\"", NULL };
	struct ptd_capture_thread th[2] = {
		{ 100, 0, (char *)"pt-100.bin", (char *)"truth-100.bin", 9, 6 },
		{ 101, 2, (char *)"pt-101.bin", (char *)"truth-101.bin", 0, 0 },
	};
	struct ptd_capture c = { 0 }, l;
	struct ptd_diag diag = { "" };
	uint8_t *pt = NULL;
	uint64_t *ips = NULL;
	size_t len = 0, n = 0;

	write_file(dir, "pt-101.bin", "", 0);
	write_file(dir, "truth-101.bin", "", 0);
	c.dir = dir;
	c.pid = 100;
	c.argv = argv;
	c.cpu.vendor = pcv_intel;
	c.cpu.family = 6;
	c.cpu.model = 0x55;
	c.cpu.stepping = 4;
	c.config.psb_period = 1024;
	c.config.noretcomp = true;
	c.config.tsc = true;
	c.config.cbr = 40;
	c.threads = th;
	c.nthreads = 2;
	ptd_timeline_init(&c.tl);
	add_events(&c.tl);
	c.exited = true;
	c.exit_signal = 9;
	c.has_clock = true;
	c.clock.time_zero = 0xfffffffff0000001ull;	/* past 2^53 */
	c.clock.time_mult = 0xfffffffeu;
	c.clock.time_shift = 31;
	c.has_wallref = true;
	c.wallref.perf_ns = 0x123456789abcdef0ull;
	c.wallref.wall_ns = 0x1800000000000001ull;
	REQUIRE(ptd_capture_save(&c, &diag) == 0);
	ptd_timeline_fini(&c.tl);

	REQUIRE(ptd_capture_load(dir, &l, &diag) == 0);
	CHECK(l.has_clock && l.has_wallref);
	CHECK_EQ_U64(l.clock.time_zero, 0xfffffffff0000001ull);
	CHECK_EQ_U64(l.clock.time_mult, 0xfffffffeu);
	CHECK_EQ_U64(l.clock.time_shift, 31);
	CHECK_EQ_U64(l.wallref.perf_ns, 0x123456789abcdef0ull);
	CHECK_EQ_U64(l.wallref.wall_ns, 0x1800000000000001ull);
	CHECK_EQ_STR(l.dir, dir);
	CHECK_EQ_INT(l.pid, 100);
	CHECK_EQ_STR(l.argv[0], "/bin/true");
	CHECK_EQ_STR(l.argv[1], "a \"b\"");
	CHECK(l.argv[2] == NULL);
	CHECK_EQ_INT(l.cpu.vendor, pcv_intel);
	CHECK_EQ_INT(l.cpu.family, 6);
	CHECK_EQ_INT(l.cpu.model, 0x55);
	CHECK_EQ_INT(l.cpu.stepping, 4);
	CHECK_EQ_U64(l.config.psb_period, 1024);
	CHECK(l.config.noretcomp && l.config.tsc);
	CHECK_EQ_INT(l.config.cbr, 40);
	REQUIRE(l.nthreads == 2);
	CHECK_EQ_INT(l.threads[1].tid, 101);
	CHECK_EQ_U64(l.threads[1].first_seq, 2);
	CHECK_EQ_STR(l.threads[1].pt, "pt-101.bin");
	CHECK_EQ_STR(l.threads[0].truth, "truth-100.bin");
	CHECK_EQ_U64(l.threads[0].insns, 9);
	CHECK_EQ_U64(l.threads[0].pt_bytes, 6);
	CHECK(l.exited && !l.detached);
	CHECK_EQ_INT(l.exit_signal, 9);
	REQUIRE(l.tl.n == 2);
	CHECK_EQ_INT(l.tl.ev[0].op, PTD_TL_MAP);
	CHECK_EQ_STR(l.tl.ev[0].path, "/bin/true");
	CHECK_EQ_U64(l.tl.ev[0].pgoff, 0x1000);
	CHECK_EQ_INT(l.tl.ev[1].op, PTD_TL_SNAPSHOT);
	CHECK_EQ_STR(l.tl.ev[1].file, "snap-1.bin");
	CHECK_EQ_INT(ptd_tl_event_pos(&l.tl.ev[1], 101), 17);
	CHECK_EQ_INT(ptd_capture_find_thread(&l, 101), 1);
	CHECK_EQ_INT(ptd_capture_find_thread(&l, 102), -1);

	REQUIRE(ptd_capture_read_pt(&l, 0, &pt, &len, &diag) == 0);
	CHECK_EQ_U64(len, sizeof(pt_bytes));
	CHECK(memcmp(pt, pt_bytes, len) == 0);
	free(pt);
	REQUIRE(ptd_capture_read_truth(&l, 0, &ips, &n, &diag) == 0);
	REQUIRE(n == PTD_ARRAY_SIZE(truth_ips));
	for (size_t i = 0; i < n; i++)
		CHECK_EQ_U64(ips[i], truth_ips[i]);
	free(ips);
	CHECK_EQ_INT(ptd_capture_read_truth(&l, 2, &ips, &n, &diag), -EINVAL);
	ptd_capture_fini(&l);
	ptd_capture_fini(NULL);
	free(dir);
}

static void test_exit_kinds(void)
{
	char *dir = make_dir("exitkinds");
	struct ptd_capture c = { 0 }, l;
	struct ptd_capture_thread th = { 100, 0, (char *)"pt-100.bin",
					 (char *)"truth-100.bin", 9, 6 };
	struct ptd_diag diag;

	c.dir = dir;
	c.pid = 100;
	c.threads = &th;
	c.nthreads = 1;
	ptd_timeline_init(&c.tl);
	c.detached = true;
	REQUIRE(ptd_capture_save(&c, &diag) == 0);
	REQUIRE(ptd_capture_load(dir, &l, &diag) == 0);
	CHECK(l.detached && !l.exited);
	CHECK(l.argv && l.argv[0] == NULL);
	CHECK_EQ_U64(l.config.psb_period, 4096);	/* default written */
	CHECK_EQ_INT(l.cpu.vendor, pcv_unknown);
	ptd_capture_fini(&l);
	c.detached = false;
	c.exited = true;
	c.exit_code = 7;
	REQUIRE(ptd_capture_save(&c, &diag) == 0);
	REQUIRE(ptd_capture_load(dir, &l, &diag) == 0);
	CHECK(l.exited && !l.detached);
	CHECK_EQ_INT(l.exit_code, 7);
	CHECK_EQ_INT(l.exit_signal, 0);
	ptd_capture_fini(&l);
	free(dir);
}

/* ---- refusals -------------------------------------------------------- */

static void test_bad_json(void)
{
	struct ptd_diag diag;
	struct ptd_capture c;
	char *dir = make_dir("badjson");

	write_file(dir, "capture.json", "{\"format\":", 11);
	CHECK_EQ_INT(ptd_capture_load(dir, &c, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "badjson/capture.json");
	CHECK_CONTAINS(diag.msg, "not valid JSON");
	write_file(dir, "capture.json", "[1,2]", 5);
	CHECK_EQ_INT(ptd_capture_load(dir, &c, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "not a JSON object");
	free(dir);
}

static void test_no_manifest(void)
{
	struct ptd_diag diag;
	struct ptd_capture c;
	char *dir = make_dir("nomanifest");

	CHECK_EQ_INT(ptd_capture_load(dir, &c, &diag), -ENOENT);
	CHECK_CONTAINS(diag.msg, "nomanifest/capture.json");
	free(dir);
}

static void test_format_version(void)
{
	cJSON *m = good_manifest();

	cJSON_ReplaceItemInObject(m, "format", cJSON_CreateString("other"));
	expect_refused("fmt", m, -PTD_EFORMAT, "capture.json: format: ");
	m = good_manifest();
	cJSON_ReplaceItemInObject(m, "version", cJSON_CreateNumber(2));
	expect_refused("ver", m, -PTD_EVERSION, "capture.json: version: 2");
}

static void test_missing_fields(void)
{
	static const char *top[] = { "format", "version", "pid", "argv",
				     "cpu", "config", "threads", "exit" };
	static const char *thr[] = { "tid", "first_seq", "pt", "truth",
				     "insns", "pt_bytes" };
	char tag[64], field[64];
	cJSON *m;

	for (size_t i = 0; i < PTD_ARRAY_SIZE(top); i++) {
		m = good_manifest();
		cJSON_DeleteItemFromObject(m, top[i]);
		snprintf(tag, sizeof(tag), "miss-%s", top[i]);
		snprintf(field, sizeof(field),
			 "capture.json: %s: missing", top[i]);
		expect_refused(tag, m, -PTD_EFORMAT, field);
	}
	for (size_t i = 0; i < PTD_ARRAY_SIZE(thr); i++) {
		m = good_manifest();
		cJSON_DeleteItemFromObject(thread0(m), thr[i]);
		snprintf(tag, sizeof(tag), "miss-t-%s", thr[i]);
		snprintf(field, sizeof(field),
			 "capture.json: threads[0].%s: missing",
			 thr[i]);
		expect_refused(tag, m, -PTD_EFORMAT, field);
	}
	m = good_manifest();
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(m, "cpu"), "model");
	expect_refused("miss-model", m, -PTD_EFORMAT,
		       "capture.json: cpu.model: missing");
	m = good_manifest();
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(m, "config"), "tsc");
	expect_refused("miss-tsc", m, -PTD_EFORMAT,
		       "capture.json: config.tsc: missing");
}

static void test_wrong_types(void)
{
	cJSON *m = good_manifest();

	cJSON_ReplaceItemInObject(m, "pid", cJSON_CreateString("100"));
	expect_refused("t-pid", m, -PTD_EFORMAT,
		       "capture.json: pid: expected an integer, not a string");
	m = good_manifest();
	cJSON_ReplaceItemInObject(m, "pid", cJSON_CreateNumber(1.5));
	expect_refused("t-pidfrac", m, -PTD_EFORMAT,
		       "capture.json: pid: expected an integer, not a "
		       "fraction");
	m = good_manifest();
	cJSON_ReplaceItemInObject(m, "pid", cJSON_CreateNumber(-1));
	expect_refused("t-pidneg", m, -PTD_EFORMAT,
		       "capture.json: pid: expected a non-negative integer");
	m = good_manifest();
	cJSON_ReplaceItemInObject(m, "pid", cJSON_CreateNumber(0));
	expect_refused("t-pid0", m, -PTD_EFORMAT, "capture.json: pid: ");
	m = good_manifest();
	cJSON_AddItemToArray(cJSON_GetObjectItem(m, "argv"),
			     cJSON_CreateNumber(3));
	expect_refused("t-argv", m, -PTD_EFORMAT,
		       "capture.json: argv[2]: expected a string");
	m = good_manifest();
	cJSON_ReplaceItemInObject(m, "argv", cJSON_CreateString("x"));
	expect_refused("t-argvs", m, -PTD_EFORMAT,
		       "capture.json: argv: expected an array");
	m = good_manifest();
	cJSON_ReplaceItemInObject(m, "threads", cJSON_CreateObject());
	expect_refused("t-thr", m, -PTD_EFORMAT,
		       "capture.json: threads: expected an array");
	m = good_manifest();
	cJSON_ReplaceItemInObject(m, "threads", cJSON_CreateArray());
	expect_refused("t-thr0", m, -PTD_EFORMAT,
		       "capture.json: threads: no thread");
	m = good_manifest();
	cJSON_ReplaceItemInObject(m, "cpu", cJSON_CreateTrue());
	expect_refused("t-cpu", m, -PTD_EFORMAT,
		       "capture.json: cpu: expected an object");
	m = good_manifest();
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(m, "cpu"), "vendor",
				  cJSON_CreateString("amd"));
	expect_refused("t-vendor", m, -PTD_EFORMAT,
		       "capture.json: cpu.vendor: ");
	m = good_manifest();
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(m, "cpu"), "model",
				  cJSON_CreateNumber(256));
	expect_refused("t-model", m, -PTD_EFORMAT,
		       "capture.json: cpu.model: 256 out");
	m = good_manifest();
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(m, "config"),
				  "noretcomp", cJSON_CreateNumber(0));
	expect_refused("t-nrc", m, -PTD_EFORMAT,
		       "capture.json: config.noretcomp: expected a boolean");
	m = good_manifest();
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(m, "config"),
				  "psb_period", cJSON_CreateNumber(3000));
	expect_refused("t-psb", m, -PTD_EFORMAT, "power of two");
	m = good_manifest();
	cJSON_ReplaceItemInObject(thread0(m), "pt", cJSON_CreateNumber(1));
	expect_refused("t-pt", m, -PTD_EFORMAT,
		       "capture.json: threads[0].pt: expected a string");
	m = good_manifest();
	cJSON_ReplaceItemInArray(cJSON_GetObjectItem(m, "threads"), 0,
				 cJSON_CreateString("t"));
	expect_refused("t-thrs", m, -PTD_EFORMAT,
		       "capture.json: threads[0]: expected an object");
}

/* good_manifest() with a "clock" (time_mult @mult, time_shift @shift; a
 * field named @drop left out) and, if @wallref, a "wallref". */
static cJSON *clock_manifest(double mult, double shift, const char *drop,
			     bool wallref, cJSON **ret_clock,
			     cJSON **ret_wallref)
{
	cJSON *m = good_manifest();
	cJSON *clk = cJSON_AddObjectToObject(m, "clock"), *w = NULL;

	cJSON_AddStringToObject(clk, "time_zero", "0x10");
	cJSON_AddNumberToObject(clk, "time_mult", mult);
	cJSON_AddNumberToObject(clk, "time_shift", shift);
	if (drop)
		cJSON_DeleteItemFromObject(clk, drop);
	if (wallref) {
		w = cJSON_AddObjectToObject(m, "wallref");
		cJSON_AddStringToObject(w, "perf_ns", "0x1");
		cJSON_AddStringToObject(w, "wall_ns", "0x2");
	}
	if (ret_clock)
		*ret_clock = clk;
	if (ret_wallref)
		*ret_wallref = w;
	return m;
}

/* The optional clock and wall-clock reference: each bad field named. */
static void test_clock_fields(void)
{
	static const struct {
		const char *name, *key, *field, *value, *why;
	} bad[] = {
		{ "c-zero", "clock", "time_zero", "12", "expected a hex" },
		{ "c-zero2", "clock", "time_zero", "0x1g", "expected a hex" },
		{ "c-zero3", "clock", "time_zero", "0x10000000000000000",
		  "expected a hex" },
		{ "w-perf", "wallref", "perf_ns", "0x", "expected a hex" },
		{ "w-wall", "wallref", "wall_ns", "-1", "expected a hex" },
	};
	cJSON *m, *clk, *w;

	for (size_t i = 0; i < PTD_ARRAY_SIZE(bad); i++) {
		char field[64];

		m = clock_manifest(5, 1, NULL, true, &clk, &w);
		cJSON_ReplaceItemInObject(!strcmp(bad[i].key, "clock") ? clk : w,
					  bad[i].field,
					  cJSON_CreateString(bad[i].value));
		(void)snprintf(field, sizeof(field), "capture.json: %s.%s: %s",
			       bad[i].key, bad[i].field, bad[i].why);
		expect_refused(bad[i].name, m, -PTD_EFORMAT, field);
	}
	expect_refused("c-mult", clock_manifest(0, 1, NULL, false, NULL, NULL),
		       -PTD_EFORMAT, "capture.json: clock.time_mult: 0");
	expect_refused("c-shift", clock_manifest(1, 32, NULL, false, NULL,
						 NULL),
		       -PTD_EFORMAT, "capture.json: clock.time_shift: ");
	expect_refused("c-nomult", clock_manifest(1, 1, "time_mult", false,
						  NULL, NULL),
		       -PTD_EFORMAT, "capture.json: clock.time_mult: ");
	m = clock_manifest(1, 1, NULL, true, NULL, NULL);
	cJSON_DeleteItemFromObject(m, "clock");
	expect_refused("w-alone", m, -PTD_EFORMAT, "without a \"clock\"");
}

static void test_exit_fields(void)
{
	cJSON *m = good_manifest();

	cJSON_AddNumberToObject(cJSON_GetObjectItem(m, "exit"), "signal", 9);
	expect_refused("x-two", m, -PTD_EFORMAT, "exactly one");
	m = good_manifest();
	cJSON_ReplaceItemInObject(m, "exit", cJSON_CreateObject());
	expect_refused("x-none", m, -PTD_EFORMAT, "exactly one");
	m = good_manifest();
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(m, "exit"), "code",
				  cJSON_CreateNumber(256));
	expect_refused("x-code", m, -PTD_EFORMAT, "capture.json: exit.code: ");
	m = good_manifest();
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(m, "exit"), "code");
	cJSON_AddFalseToObject(cJSON_GetObjectItem(m, "exit"), "detached");
	expect_refused("x-det", m, -PTD_EFORMAT, "must be true");
}

static void test_path_traversal(void)
{
	static const char *names[] = { "../pt-100.bin", "sub/pt-100.bin",
				       "..", ".", "", "/etc/passwd" };
	char tag[32];

	for (size_t i = 0; i < PTD_ARRAY_SIZE(names); i++) {
		cJSON *m = good_manifest();

		cJSON_ReplaceItemInObject(thread0(m), i & 1 ? "truth" : "pt",
					  cJSON_CreateString(names[i]));
		snprintf(tag, sizeof(tag), "trav-%zu", i);
		expect_refused(tag, m, -PTD_EFORMAT, "not a plain file name");
	}
}

static void test_symlink_refused(void)
{
	struct ptd_diag diag;
	char *dir = make_dir("symlink"), path[512];

	snprintf(path, sizeof(path), "%s/pt-100.bin", dir);
	REQUIRE(unlink(path) == 0);
	REQUIRE(symlink("truth-100.bin", path) == 0);
	CHECK_EQ_INT(load_with(dir, good_manifest(), &diag), -ELOOP);
	CHECK_CONTAINS(diag.msg, "symlink/pt-100.bin");
	free(dir);
}

static void test_file_sizes(void)
{
	cJSON *m = good_manifest();
	struct ptd_diag diag;
	struct ptd_capture c;
	uint64_t *ips;
	uint8_t *pt;
	size_t n;
	char *dir;

	cJSON_ReplaceItemInObject(thread0(m), "pt_bytes",
				  cJSON_CreateNumber(7));
	expect_refused("sz-pt", m, -PTD_EFORMAT,
		       "capture.json: threads[0].pt_bytes: ");
	m = good_manifest();
	cJSON_ReplaceItemInObject(thread0(m), "insns", cJSON_CreateNumber(99));
	expect_refused("sz-truth", m, -PTD_EFORMAT, "truth-100.bin");
	m = good_manifest();
	cJSON_ReplaceItemInObject(thread0(m), "truth",
				  cJSON_CreateString("missing.bin"));
	expect_refused("sz-missing", m, -ENOENT, "missing.bin");

	/* a count the size allows but the varints do not hold */
	dir = make_dir("sz-count");
	m = good_manifest();
	cJSON_ReplaceItemInObject(thread0(m), "insns", cJSON_CreateNumber(8));
	{
		char *text = cJSON_PrintUnformatted(m);

		write_file(dir, "capture.json", text, strlen(text));
		free(text);
		cJSON_Delete(m);
	}
	REQUIRE(ptd_capture_load(dir, &c, &diag) == 0);
	CHECK_EQ_INT(ptd_capture_read_truth(&c, 0, &ips, &n, &diag),
		     -PTD_ECHECKSUM);
	CHECK_CONTAINS(diag.msg, "sz-count/truth-100.bin");
	CHECK_CONTAINS(diag.msg, "holds 9 IPs");
	/* a truth file cut inside a varint */
	write_file(dir, "truth-100.bin", "\x02\x04\x80\x80\x80\x80\x80\x80",
		   8);
	CHECK_EQ_INT(ptd_capture_read_truth(&c, 0, &ips, &n, &diag),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, "past the end");
	/* a PT file that changed after loading */
	write_file(dir, "pt-100.bin", "abc", 3);
	CHECK_EQ_INT(ptd_capture_read_pt(&c, 0, &pt, &n, &diag),
		     -PTD_ECHECKSUM);
	CHECK_CONTAINS(diag.msg, "pt-100.bin");
	ptd_capture_fini(&c);
	free(dir);
}

static void test_oversized(void)
{
	struct ptd_diag diag;
	struct ptd_capture c;
	char *dir = make_dir("big"), path[512];
	cJSON *m, *arr;
	int fd;

	snprintf(path, sizeof(path), "%s/capture.json", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, PTD_CAPTURE_MAX_MANIFEST + 1) == 0);
	(void)close(fd);
	CHECK_EQ_INT(ptd_capture_load(dir, &c, &diag), -PTD_ELIMIT);
	CHECK_CONTAINS(diag.msg, "big/capture.json");
	free(dir);

	m = good_manifest();
	arr = cJSON_GetObjectItem(m, "threads");
	for (unsigned i = 0; i < PTD_CAPTURE_MAX_THREADS; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNull());
	expect_refused("big-thr", m, -PTD_ELIMIT, "capture.json: threads: ");
	m = good_manifest();
	arr = cJSON_GetObjectItem(m, "argv");
	for (unsigned i = 0; i < 5000; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString("a"));
	expect_refused("big-argv", m, -PTD_ELIMIT, "capture.json: argv: ");
	m = good_manifest();
	cJSON_ReplaceItemInObject(thread0(m), "insns",
				  cJSON_CreateNumber(1e15));
	expect_refused("big-insns", m, -PTD_EFORMAT, "out of range");
	m = good_manifest();
	cJSON_ReplaceItemInObject(thread0(m), "pt_bytes",
				  cJSON_CreateNumber(1e300));
	expect_refused("big-ptb", m, -PTD_EFORMAT,
		       "capture.json: threads[0].pt_bytes: ");
}

static void test_duplicate_thread(void)
{
	cJSON *m = good_manifest();

	cJSON_AddItemToArray(cJSON_GetObjectItem(m, "threads"),
			     cJSON_Duplicate(thread0(m), true));
	expect_refused("dup", m, -PTD_EFORMAT,
		       "capture.json: threads[1].tid: thread 100 listed "
		       "twice, and threads[0] has no end_seq");
}

/* @m's thread 0 again, as threads[1], first_seq @first, with its own copy
 * of the files in @dir named with @suffix (NULL: thread 0's files); thread
 * 0 ends at @end. */
static cJSON *twice(cJSON *m, const char *dir, const char *suffix,
		    unsigned first, unsigned end)
{
	cJSON *t = cJSON_Duplicate(thread0(m), true);
	_cleanup_free_ char *truth = NULL;
	char src[512], name[64];
	size_t n = 0;

	cJSON_AddNumberToObject(thread0(m), "end_seq", end);
	cJSON_ReplaceItemInObject(t, "first_seq", cJSON_CreateNumber(first));
	if (suffix) {
		(void)snprintf(name, sizeof(name), "pt-100.%s.bin", suffix);
		write_file(dir, name, pt_bytes, sizeof(pt_bytes));
		cJSON_ReplaceItemInObject(t, "pt", cJSON_CreateString(name));
		(void)snprintf(src, sizeof(src), "%s/truth-100.bin", dir);
		if (ptd_file_read_all(src, 1 << 20, &truth, &n) < 0)
			exit(2);
		(void)snprintf(name, sizeof(name), "truth-100.%s.bin", suffix);
		write_file(dir, name, truth, n);
		cJSON_ReplaceItemInObject(t, "truth", cJSON_CreateString(name));
	}
	cJSON_AddItemToArray(cJSON_GetObjectItem(m, "threads"), t);
	return m;
}

/* Load @m in make_dir(@tag) after twice(); expect @err and @needle. */
static void expect_twice_refused(const char *tag, const char *suffix,
				 unsigned first, unsigned end,
				 const char *needle)
{
	struct ptd_diag diag;
	char *dir = make_dir(tag);
	cJSON *m = twice(good_manifest(), dir, suffix, first, end);

	CHECK_EQ_INT(load_with(dir, m, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, needle);
	free(dir);
}

/* A thread id the kernel gave again once its first thread was gone: listed
 * twice, in order, each with its own files; what can't be is refused. */
static void test_reused_tid(void)
{
	struct ptd_diag diag;
	struct ptd_capture c;
	char *dir = make_dir("reuse");
	cJSON *m = twice(good_manifest(), dir, "2", 0, 0);
	char *text = cJSON_PrintUnformatted(m);

	cJSON_Delete(m);
	write_file(dir, "capture.json", text, strlen(text));
	free(text);
	REQUIRE(ptd_capture_load(dir, &c, &diag) == 0);
	CHECK_EQ_INT(c.nthreads, 2);
	CHECK_EQ_INT(c.threads[0].tid, 100);
	CHECK_EQ_INT(c.threads[1].tid, 100);
	CHECK(c.threads[0].has_end);
	CHECK_EQ_U64(c.threads[0].end_seq, 0);
	CHECK(!c.threads[1].has_end);
	CHECK_EQ_STR(c.threads[1].pt, "pt-100.2.bin");
	CHECK_EQ_INT(ptd_capture_find_thread(&c, 100), 0);
	/* saved as loaded */
	REQUIRE(ptd_capture_save(&c, &diag) == 0);
	ptd_capture_fini(&c);
	REQUIRE(ptd_capture_load(dir, &c, &diag) == 0);
	CHECK(c.threads[0].has_end && !c.threads[1].has_end);
	ptd_capture_fini(&c);
	free(dir);

	expect_twice_refused("reuse-files", NULL, 0, 0,
			     "capture.json: threads[1].pt: \"pt-100.bin\" "
			     "is threads[0].pt's file too");
	expect_twice_refused("reuse-overlap", "2", 0, 1,
			     "capture.json: threads[1].tid: thread 100 "
			     "listed twice with lives that overlap: "
			     "threads[0] ends at seq 1, after this one's "
			     "first_seq 0");
	m = good_manifest();
	cJSON_AddNumberToObject(thread0(m), "end_seq", 5);
	expect_refused("reuse-late", m, -PTD_EFORMAT,
		       "capture.json: threads[0].end_seq: 5 is past the "
		       "timeline's last event");
}

static void test_timeline_checks(void)
{
	char *dir = make_dir("tl-snap");
	struct ptd_capture c = { 0 };
	struct ptd_capture_thread th = { 100, 0, (char *)"pt-100.bin",
					 (char *)"truth-100.bin", 9, 6 };
	struct ptd_tl_pos pos = { 100, 0 };
	struct ptd_tl_event ev = { 0 };
	struct ptd_diag diag;
	struct ptd_capture l;
	cJSON *m;

	/* a snapshot file outside the capture */
	c.dir = dir;
	c.pid = 100;
	c.threads = &th;
	c.nthreads = 1;
	ptd_timeline_init(&c.tl);
	ev.op = PTD_TL_SNAPSHOT;
	ev.start = 0x1000;
	ev.end = 0x2000;
	ev.name = (char *)"[anon]";
	ev.file = (char *)"../../etc/passwd";
	ev.pos = &pos;
	ev.npos = 1;
	REQUIRE(ptd_timeline_add(&c.tl, &ev) >= 0);
	REQUIRE(ptd_capture_save(&c, &diag) == 0);
	ptd_timeline_fini(&c.tl);
	diag.msg[0] = 0;
	CHECK(ptd_capture_load(dir, &l, &diag) < 0);
	CHECK_CONTAINS(diag.msg, "timeline.jsonl");
	free(dir);

	/* a thread that starts after an event that does not exist */
	m = good_manifest();
	cJSON_ReplaceItemInObject(thread0(m), "first_seq",
				  cJSON_CreateNumber(1));
	expect_refused("tl-seq", m, -PTD_EFORMAT, "first_seq");

	/* no timeline at all */
	dir = make_dir("tl-none");
	{
		char path[512];

		snprintf(path, sizeof(path), "%s/timeline.jsonl", dir);
		REQUIRE(unlink(path) == 0);
	}
	CHECK_EQ_INT(load_with(dir, good_manifest(), &diag), -ENOENT);
	CHECK_CONTAINS(diag.msg, "tl-none/timeline.jsonl");
	free(dir);
}

static void test_save_refuses_bad_names(void)
{
	struct ptd_capture c = { 0 };
	struct ptd_capture_thread th = { 100, 0, (char *)"../pt.bin",
					 (char *)"truth.bin", 0, 0 };
	struct ptd_diag diag;

	c.dir = tmpdir;
	c.threads = &th;
	c.nthreads = 1;
	ptd_timeline_init(&c.tl);
	CHECK_EQ_INT(ptd_capture_save(&c, &diag), -EINVAL);
	CHECK_CONTAINS(diag.msg, "plain");
}

int main(void)
{
	char cmd[128];
	int r;

	if (!mkdtemp(tmpdir))
		SKIP_ALL("cannot create a temporary directory");
	RUN(test_truth_roundtrip);
	RUN(test_truth_empty);
	RUN(test_truth_truncated);
	RUN(test_truth_overlong);
	RUN(test_roundtrip);
	RUN(test_exit_kinds);
	RUN(test_bad_json);
	RUN(test_no_manifest);
	RUN(test_format_version);
	RUN(test_missing_fields);
	RUN(test_wrong_types);
	RUN(test_exit_fields);
	RUN(test_clock_fields);
	RUN(test_path_traversal);
	RUN(test_symlink_refused);
	RUN(test_file_sizes);
	RUN(test_oversized);
	RUN(test_duplicate_thread);
	RUN(test_reused_tid);
	RUN(test_timeline_checks);
	RUN(test_save_refuses_bad_names);
	r = check_done();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (r == 0 && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return r;
}
