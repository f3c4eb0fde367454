/* SPDX-License-Identifier: MIT */
/*
 * Binary frames (record/binframe.h) carry the records the JSON path does:
 * on software-source captures of real programs (one with threads, with
 * TSC, time and wall; one without), for every field set below,
 *  - offline: `ptctl decode --format binary` converted back with `ptctl
 *    decode --from-binary` is byte for byte `ptctl decode`'s output, on
 *    both decoder paths, with call records or not (ip,tid without:
 *    runs of addresses on the block path);
 *  - through ptd: a lossless replay streamed with `ptctl replay --format
 *    binary --output F`, converted back, gives the JSON replay's records
 *    (all but the hello and bye lines, which name the session), with
 *    call records beside them or not (ip,tid without: runs of
 *    addresses);
 *  - a slow binary subscriber of a lossy replay with a small queue loses
 *    records, and its lost records (in json frames) and bye (in the end
 *    frame) count them exactly: received + lost == every record;
 *  - a cut or damaged stream is refused naming the offset;
 *  - all of it again for packed streams (`--format packed`), whose runs
 *    of addresses are address frames, for the field sets of an address
 *    and one without (fixed-width records there): ip,tid in under a
 *    fifteenth of its JSON bytes; a slow packed subscriber loses whole
 *    frames and counts every record of them.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "e2e/daemon-client.h"
#include "e2e/run-cmd.h"
#include "record/binframe.h"

static char ptctl[1100];

static const char *const sets[] = {
	"ip,tid", "tid,ip,flags", "pid,size,mode,isid,tsc,time,wall",
	"raw", "type", "iclass,offset",
	"pid,tid,ip,size,raw,iclass,mode,isid,offset,flags,tsc,time,wall",
	/* module: insn records go in json frames */
	"module,offset", NULL,	/* NULL: every field */
};
#define NSETS (sizeof(sets) / sizeof(sets[0]))
/* Packed: each set without call records, then with (records, not runs
 * of addresses: fixed-width records in a packed stream too). */
static const char *const packed_sets[] = {
	"ip,tid", "ip,tid", "pid,tid,ip", "pid,tid,ip", "ip", "tid",
};
#define NPACKED (sizeof(packed_sets) / sizeof(packed_sets[0]))

static struct run ptctl_run(const char *const *args)
{
	return run_cmd(ptctl, args, tmpdir);
}

/* @a and @b: the same bytes; else say where they part. */
static void same_bytes(const char *what, const char *set, const char *a,
		       size_t alen, const char *b, size_t blen)
{
	size_t i = 0, line = 1;

	if (a && b && alen == blen && !memcmp(a, b, alen))
		return;
	for (; a && b && i < alen && i < blen && a[i] == b[i]; i++)
		line += a[i] == '\n';
	CHECK_FAIL_("%s, fields %s: the converted frames differ from the "
		    "JSON lines at line %zu (%zu vs %zu bytes)",
		    what, set ? set : "(all)", line, blen, alen);
}

/* The file @path's bytes (NUL-terminated), or NULL. */
static char *slurp(const char *path, size_t *ret_len)
{
	char *data = NULL;

	if (ptd_file_read_all(path, 1u << 30, &data, ret_len) < 0)
		return NULL;
	return data;
}

/* ptctl decode --from-binary @path. */
static struct run from_binary(const char *path)
{
	const char *args[] = { "decode", "--from-binary", path, NULL };

	return ptctl_run(args);
}

static void check_offline(const char *dir, const char *format,
			  const char *const *list, size_t nsets)
{
	static const char *const paths[] = { "block", "insn" };
	char bin[600];
	bool packed = !strcmp(format, "packed");

	(void)snprintf(bin, sizeof(bin), "%s/offline.bin", tmpdir);
	for (size_t p = 0; p < 2; p++) {
		for (size_t i = 0; i < nsets; i++) {
			const char *a1[16], *a2[16];
			size_t n = 0;
			struct run j, b, c;
			FILE *f;

			a1[n++] = "decode";
			a1[n++] = "--path";
			a1[n++] = paths[p];
			a1[n++] = "--records";
			/* as through ptd (test_daemon): ip,tid without call
			 * records goes as runs of addresses */
			a1[n++] = i % 2 ? "insn,event,error,call"
					: "insn,event,error";
			if (list[i]) {
				a1[n++] = "--fields";
				a1[n++] = list[i];
			}
			memcpy(a2, a1, n * sizeof(*a1));
			a1[n] = dir;
			a1[n + 1] = NULL;
			a2[n] = "--format";
			a2[n + 1] = format;
			a2[n + 2] = dir;
			a2[n + 3] = NULL;
			j = ptctl_run(a1);
			b = ptctl_run(a2);
			CHECK_EQ_INT(j.status, 0);
			CHECK_EQ_INT(b.status, 0);
			f = fopen(bin, "w");
			REQUIRE(f != NULL);
			CHECK_EQ_U64(fwrite(b.out, 1, b.out_len, f), b.out_len);
			fclose(f);
			c = from_binary(bin);
			CHECK_EQ_INT(c.status, 0);
			same_bytes(paths[p], list[i], j.out, j.out_len, c.out,
				   c.out_len);
			CHECK(j.out_len > 100000);
			/* ip,tid: 12 bytes a record, not 49; packed (the
			 * block path's runs of addresses): 1 to 2 */
			if (i == 0)
				CHECK(b.out_len * 3 < j.out_len);
			if (i == 0 && packed && p == 0 &&
			    b.out_len * 15 >= j.out_len)
				CHECK_FAIL_("packed ip,tid: %zu bytes, JSON "
					    "%zu", b.out_len, j.out_len);
			run_free(&j);
			run_free(&b);
			run_free(&c);
		}
	}
}

/* The records of a daemon stream's JSON lines: every line but hello and
 * bye (which name the session and subscriber). */
static char *records_only(const char *s, size_t len, size_t *ret_len)
{
	char *out = malloc(len + 1);
	size_t n = 0;

	if (!out)
		abort();
	for (const char *p = s; p < s + len;) {
		const char *nl = memchr(p, '\n', (size_t)(s + len - p));
		size_t k = nl ? (size_t)(nl - p) + 1 : (size_t)(s + len - p);

		if (!is_type(p, "hello") && !is_type(p, "bye")) {
			memcpy(out + n, p, k);
			n += k;
		}
		p += k;
	}
	out[n] = 0;
	*ret_len = n;
	return out;
}

static void check_daemon(const struct daemon *d, const char *dir,
			 const char *format, const char *const *list,
			 size_t nsets)
{
	char bin[600], hello[64];

	(void)snprintf(bin, sizeof(bin), "%s/replay-%s.bin", tmpdir, format);
	(void)snprintf(hello, sizeof(hello), "\"format\":\"%s\"", format);
	for (size_t i = 0; i < nsets; i++) {
		const char *a1[16], *a2[16];
		size_t n = 0, jl, cl;
		struct run j, b, c;
		char *jr, *cr;

		a1[n++] = "--socket";
		a1[n++] = d->sock;
		a1[n++] = "replay";
		a1[n++] = "--kinds";
		/* every other set with call records: without them a
		 * replay to ip,tid binary hands runs of addresses to the
		 * fan-out (decode/decoder.h, opts.ips), with them records */
		a1[n++] = i % 2 ? "insn,event,error,call" : "insn,event,error";
		if (list[i]) {
			a1[n++] = "--fields";
			a1[n++] = list[i];
		}
		memcpy(a2, a1, n * sizeof(*a1));
		a1[n] = dir;
		a1[n + 1] = NULL;
		a2[n] = "--format";
		a2[n + 1] = format;
		a2[n + 2] = "--output";
		a2[n + 3] = bin;
		a2[n + 4] = dir;
		a2[n + 5] = NULL;
		j = ptctl_run(a1);
		b = ptctl_run(a2);
		CHECK_EQ_INT(j.status, 0);
		if (b.status != 0)
			CHECK_FAIL_("ptctl replay --format %s: %d: %s", format,
				    b.status, b.err ? b.err : "");
		CHECK_EQ_U64(b.out_len, 0);	/* the frames went to F */
		c = from_binary(bin);
		CHECK_EQ_INT(c.status, 0);
		jr = records_only(j.out ? j.out : "", j.out_len, &jl);
		cr = records_only(c.out ? c.out : "", c.out_len, &cl);
		same_bytes("through ptd", list[i], jr, jl, cr, cl);
		CHECK(jl > 100000);
		/* the hello says so */
		CHECK(c.out && strstr(c.out, hello) != NULL);
		/* packed ip,tid, runs of addresses: address frames */
		if (i == 0 && !strcmp(format, "packed")) {
			size_t bl = 0;
			char *bd = slurp(bin, &bl);

			if (!bd || bl * 15 >= jl)
				CHECK_FAIL_("packed ip,tid through ptd: %zu "
					    "bytes, JSON %zu", bl, jl);
			free(bd);
		}
		free(jr);
		free(cr);
		run_free(&j);
		run_free(&b);
		run_free(&c);
	}
}

/* Count @s's insn records, and the records its lost records count. */
static void count_json(const char *s, size_t len, uint64_t *insns,
		       uint64_t *lost, uint64_t *bye_sent, uint64_t *bye_lost)
{
	*insns = *lost = 0;
	for (const char *p = s; p < s + len;) {
		const char *nl = memchr(p, '\n', (size_t)(s + len - p));
		size_t k = nl ? (size_t)(nl - p) + 1 : (size_t)(s + len - p);

		if (is_type(p, "insn")) {
			(*insns)++;
		} else if (is_type(p, "lost") ||
			   (is_type(p, "bye") && strstr(p, "\"sent\":"))) {
			cJSON *o = cJSON_ParseWithLength(p, k);
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(
				o, is_type(p, "lost") ? "records" : "sent");

			REQUIRE(o != NULL && cJSON_IsNumber(v));
			if (is_type(p, "lost")) {
				*lost += (uint64_t)v->valuedouble;
			} else {
				*bye_sent = (uint64_t)v->valuedouble;
				v = cJSON_GetObjectItemCaseSensitive(o, "lost");
				*bye_lost = (uint64_t)v->valuedouble;
			}
			cJSON_Delete(o);
		}
		p += k;
	}
}

/* A binary (@format) subscriber that reads nothing for a while, of a
 * lossy replay with a 16 KiB queue: it loses records, and says exactly
 * how many. */
static void check_slow(const struct daemon *d, const char *dir,
		       const char *format, uint64_t all_insns)
{
	char req[1024], bin[600];
	struct dconn *c = dc_connect(d);
	cJSON *r;
	long sid;
	FILE *f;
	struct run conv;
	uint64_t insns, lost, sent = 0, bye_lost = 0;

	REQUIRE(c != NULL);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\","
		       "\"lossy\":true}\n", dir);
	r = dc_call(c, req);
	REQUIRE(r != NULL && dc_ok(r));
	sid = (long)dc_num(r, "session");
	cJSON_Delete(r);
	dc_close(c);
	c = dc_connect(d);
	REQUIRE(c != NULL);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"subscribe\",\"session\":%ld,"
		       "\"kinds\":[\"insn\"],\"fields\":[\"ip\",\"tid\"],"
		       "\"format\":\"%s\"}\n", sid, format);
	r = dc_call(c, req);
	REQUIRE(r != NULL && dc_ok(r));
	cJSON_Delete(r);
	/* the decoder runs on meanwhile: the queue fills */
	msleep(1500);
	(void)snprintf(bin, sizeof(bin), "%s/slow.bin", tmpdir);
	f = fopen(bin, "w");
	REQUIRE(f != NULL);
	fwrite(c->buf + c->off, 1, c->len - c->off, f);
	for (;;) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 30000) <= 0)
			break;
		n = read(c->fd, c->buf, sizeof(c->buf));
		if (n <= 0)
			break;
		fwrite(c->buf, 1, (size_t)n, f);
	}
	fclose(f);
	dc_close(c);
	conv = from_binary(bin);
	CHECK_EQ_INT(conv.status, 0);
	count_json(conv.out ? conv.out : "", conv.out_len, &insns, &lost,
		   &sent, &bye_lost);
	fprintf(stderr, "slow %s subscriber: %" PRIu64 " received, %" PRIu64
		" lost of %" PRIu64 "\n", format, insns, lost, all_insns);
	CHECK(lost > 0);
	CHECK(insns > 0);
	CHECK_EQ_U64(insns, sent);
	CHECK_EQ_U64(lost, bye_lost);
	CHECK_EQ_U64(insns + lost, all_insns);
	run_free(&conv);
}

/* A stream cut or damaged is refused with its offset. */
static void check_damaged(void)
{
	char bin[600], cut[600];
	size_t len;
	char *data;
	FILE *f;
	struct run r;

	(void)snprintf(bin, sizeof(bin), "%s/replay-binary.bin", tmpdir);
	(void)snprintf(cut, sizeof(cut), "%s/cut.bin", tmpdir);
	data = slurp(bin, &len);
	REQUIRE(data != NULL && len > 1000);
	f = fopen(cut, "w");
	REQUIRE(f != NULL);
	fwrite(data, 1, len - 7, f);
	fclose(f);
	r = from_binary(cut);
	CHECK_EQ_INT(r.status, 2);
	CHECK_CONTAINS(r.err, "ends inside a frame");
	run_free(&r);
	/* the second frame's type byte */
	{
		uint32_t first = PTD_BIN_HDR + (uint32_t)(uint8_t)data[16] +
				 ((uint32_t)(uint8_t)data[17] << 8);
		char want[64];

		data[first + 5] = 7;
		f = fopen(cut, "w");
		REQUIRE(f != NULL);
		fwrite(data, 1, len, f);
		fclose(f);
		r = from_binary(cut);
		CHECK_EQ_INT(r.status, 2);
		(void)snprintf(want, sizeof(want),
			       "offset %u: unknown frame type", first + 5);
		CHECK_CONTAINS(r.err, want);
		run_free(&r);
	}
	free(data);
}

static char dir[600], dir2[600];
static struct daemon d;
static bool have_daemon;

static void make_traces(void)
{
	char prog[1100];
	struct run r;
	const char *a1[] = { "trace", "--out", dir, "--no-decode", "--tsc",
			     "--quiet-target", "--", prog, NULL };
	const char *a2[] = { "trace", "--out", dir2, "--no-decode",
			     "--quiet-target", "--", prog, NULL };

	(void)snprintf(prog, sizeof(prog), "%s/prog-threads", progs);
	(void)snprintf(dir, sizeof(dir), "%s/threads", tmpdir);
	r = ptctl_run(a1);
	CHECK_EQ_INT(r.status, 0);
	run_free(&r);
	(void)snprintf(prog, sizeof(prog), "%s/prog-jumptable", progs);
	(void)snprintf(dir2, sizeof(dir2), "%s/jt", tmpdir);
	r = ptctl_run(a2);
	CHECK_EQ_INT(r.status, 0);
	run_free(&r);
}

static void test_offline(void)
{
	check_offline(dir, "binary", sets, NSETS);
	check_offline(dir2, "binary", sets, NSETS);
}

static void test_offline_packed(void)
{
	check_offline(dir, "packed", packed_sets, NPACKED);
	check_offline(dir2, "packed", packed_sets, NPACKED);
}

static void test_daemon(void)
{
	REQUIRE(have_daemon);
	check_daemon(&d, dir, "binary", sets, NSETS);
	check_damaged();
}

static void test_daemon_packed(void)
{
	REQUIRE(have_daemon);
	check_daemon(&d, dir, "packed", packed_sets, NPACKED);
}

static void test_slow(void)
{
	const char *args[] = { "decode", "--records", "insn", "--fields",
			       "ip", dir2, NULL };
	uint64_t all = 0, lost = 0, s = 0, l = 0;
	struct run r = ptctl_run(args);

	REQUIRE(have_daemon && r.status == 0);
	count_json(r.out, r.out_len, &all, &lost, &s, &l);
	run_free(&r);
	check_slow(&d, dir2, "binary", all);
	check_slow(&d, dir2, "packed", all);
}

int main(void)
{
	harness_setup("/tmp/ptd-bin-XXXXXX");
	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", build_root);
	RUN(make_traces);
	RUN(test_offline);
	RUN(test_offline_packed);
	have_daemon = daemon_start(&d, "d", "subscriber_queue_size = 16k\n");
	CHECK(have_daemon);
	RUN(test_daemon);
	RUN(test_daemon_packed);
	RUN(test_slow);
	if (have_daemon)
		CHECK_EQ_INT(daemon_stop(&d), 0);
	return harness_done();
}
