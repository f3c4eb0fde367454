/* SPDX-License-Identifier: MIT */
/*
 * The binary framing (record/binframe.h): records of every fixed field set
 * written as frames and converted back equal the JSON writer's lines byte
 * for byte; a run of records encoded at once equals them one by one;
 * the records frame closes at its payload limit; every header
 * byte and record value the reader checks is refused with its offset; a
 * stream cut short, without its end frame or with bytes after it is
 * refused.  A packed writer's address frames carry the same records as
 * fixed-width ones, in a tenth of the bytes where instructions follow
 * each other, and every malformed address frame is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "common/diag.h"
#include "record/binframe.h"
#include "record/jsonw.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A random record: mostly insn records of varied values, some events and
 * errors between them. */
static void make_record(struct ptd_record *r, unsigned i)
{
	memset(r, 0, sizeof(*r));
	r->pid = (pid_t)(1000 + rnd() % 3);
	r->tid = r->pid + (pid_t)(rnd() % 4);
	r->has_tsc = rnd() % 4 != 0;
	r->tsc = r->has_tsc ? rnd() : 0;
	r->has_time = r->has_tsc && rnd() % 2;
	r->time = r->has_time ? rnd() >> 8 : 0;
	r->has_wall = r->has_time && rnd() % 2;
	r->wall = r->has_wall ? 1790000000000000000ull + rnd() % 1000000000000ull
			      : 0;
	if (i % 37 == 5) {
		r->type = PTD_REC_EVENT;
		r->u.event.ev.type = ptev_enabled;
		r->u.event.ev.variant.enabled.ip = rnd();
		r->u.event.offset = rnd() >> 20;
		return;
	}
	if (i % 53 == 7) {
		r->type = PTD_REC_ERROR;
		r->u.error.code = -pte_nomap;
		r->u.error.offset = rnd() >> 20;
		r->u.error.context = "decode";
		return;
	}
	r->type = PTD_REC_INSN;
	r->u.insn.ip = rnd();
	r->u.insn.modoff = rnd() >> 30;
	r->u.insn.module = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	r->u.insn.isid = (int)(rnd() % 5);
	r->u.insn.mode = (enum pt_exec_mode)(rnd() % 4);
	r->u.insn.iclass = (enum pt_insn_class)(rnd() % (ptic_ptwrite + 1));
	r->u.insn.flags = rnd() % 3 ? 0 : (uint32_t)(rnd() & 0x3ff);
	r->u.insn.size = (uint8_t)(1 + rnd() % 15);
	for (unsigned k = 0; k < r->u.insn.size; k++)
		r->u.insn.raw[k] = (uint8_t)rnd();
}

/* Everything written to @fd so far, from its start, NUL-terminated. */
static char *slurp(int fd, size_t *ret_len)
{
	off_t end = lseek(fd, 0, SEEK_END);
	char *s = malloc((size_t)end + 1);

	CHECK(s != NULL);
	CHECK_EQ_INT(pread(fd, s, (size_t)end, 0), end);
	s[end] = 0;
	*ret_len = (size_t)end;
	return s;
}

/* @n records of @fields as JSON (the JSON writer) and as frames converted
 * back: the same bytes. */
static void roundtrip(uint32_t fields, unsigned n)
{
	int jfd = memfd_create("json", 0), bfd = memfd_create("bin", 0),
	    cfd = memfd_create("conv", 0);
	struct ptd_jsonw jw, cw;
	struct ptd_binw bw;
	struct ptd_diag d = { "" };
	struct ptd_record r;
	char *a, *b;
	size_t alen, blen;
	uint64_t seed = rng;

	CHECK(jfd >= 0 && bfd >= 0 && cfd >= 0);
	CHECK_EQ_INT(ptd_jsonw_init(&jw, jfd, 0), 0);
	ptd_jsonw_set_fields(&jw, fields);
	CHECK_EQ_INT(ptd_binw_init(&bw, bfd, fields), 0);
	for (unsigned i = 0; i < n; i++) {
		make_record(&r, i);
		CHECK_EQ_INT(ptd_jsonw_put(&jw, &r), 0);
		CHECK_EQ_INT(ptd_binw_put(&bw, &r), 0);
	}
	CHECK_EQ_INT(ptd_jsonw_line(&jw, "{\"type\":\"bye\"}\n", 15), 0);
	CHECK_EQ_INT(ptd_binw_end(&bw, "{\"type\":\"bye\"}\n", 15), 0);
	CHECK_EQ_INT(ptd_jsonw_fini(&jw), 0);
	CHECK_EQ_INT(ptd_binw_fini(&bw), 0);
	CHECK_EQ_INT(lseek(bfd, 0, SEEK_SET), 0);
	CHECK_EQ_INT(ptd_jsonw_init(&cw, cfd, 0), 0);
	if (ptd_bin_to_json(bfd, &cw, &d) != 0)
		CHECK_FAIL_("fields %#x: %s", fields, d.msg);
	CHECK_EQ_INT(ptd_jsonw_fini(&cw), 0);
	a = slurp(jfd, &alen);
	b = slurp(cfd, &blen);
	if (alen != blen || memcmp(a, b, alen))
		CHECK_FAIL_("fields %#x seed %#llx: converted frames differ "
			    "from the JSON lines (%zu vs %zu bytes)",
			    fields, (unsigned long long)seed, blen, alen);
	/* fixed sets are smaller than JSON (the point of it) */
	if (ptd_bin_fields_fixed(fields) && n > 1000) {
		size_t bbytes;
		char *bb = slurp(bfd, &bbytes);

		CHECK(bbytes < alen);
		free(bb);
	}
	free(a);
	free(b);
	close(jfd);
	close(bfd);
	close(cfd);
}

static void test_roundtrip_sets(void)
{
	uint32_t fixed = PTD_BIN_FIXED_FIELDS;

	roundtrip(PTD_FIELD_BIT(PTD_FIELD_TYPE) | PTD_FIELD_BIT(PTD_FIELD_IP) |
			  PTD_FIELD_BIT(PTD_FIELD_TID),
		  20000);
	roundtrip(fixed, 3000);
	roundtrip(PTD_FIELD_BIT(PTD_FIELD_TYPE), 500);
	/* raw without size: its length stands for the size */
	roundtrip(PTD_FIELD_BIT(PTD_FIELD_TYPE) | PTD_FIELD_BIT(PTD_FIELD_RAW),
		  500);
	/* module or sym: insn records go as JSON frames */
	roundtrip(0, 500);
	roundtrip(PTD_FIELD_BIT(PTD_FIELD_TYPE) | PTD_FIELD_BIT(PTD_FIELD_IP) |
			  PTD_FIELD_BIT(PTD_FIELD_MODULE),
		  500);
	/* every fixed subset, one field at a time and random ones */
	for (unsigned f = 1; f < PTD_FIELD_N; f++)
		if (fixed & PTD_FIELD_BIT(f))
			roundtrip(PTD_FIELD_BIT(PTD_FIELD_TYPE) |
					  PTD_FIELD_BIT(f),
				  300);
	for (unsigned k = 0; k < 40; k++)
		roundtrip(((uint32_t)rnd() & fixed) |
				  PTD_FIELD_BIT(PTD_FIELD_TYPE),
			  300);
}

/* ptd_bin_encode_run: the bytes of ptd_bin_encode one record after the
 * other, for the ip,tid set it encodes on its own (with and without
 * "type") and for others. */
static void encode_run(uint32_t fields, unsigned n)
{
	struct ptd_record *recs = calloc(n, sizeof(*recs));
	size_t rs = ptd_bin_recsize(fields);
	uint8_t *one = calloc(n + 1, rs + 1), *run = calloc(n + 1, rs + 1);
	size_t len = 0;

	CHECK(recs && one && run);
	for (unsigned i = 0; i < n; i++) {
		do
			make_record(&recs[i], (unsigned)rnd());
		while (recs[i].type != PTD_REC_INSN);
		len += ptd_bin_encode(one + len, fields, &recs[i]);
	}
	CHECK_EQ_U64(len, n * rs);
	CHECK_EQ_U64(ptd_bin_encode_run(run, fields, recs, n), len);
	if (memcmp(one, run, len))
		CHECK_FAIL_("fields %#x: a run's bytes differ", fields);
	free(recs);
	free(one);
	free(run);
}

static void test_encode_run(void)
{
	const uint32_t iptid =
		PTD_FIELD_BIT(PTD_FIELD_IP) | PTD_FIELD_BIT(PTD_FIELD_TID);
	const uint32_t type = PTD_FIELD_BIT(PTD_FIELD_TYPE);

	encode_run(type | iptid, 1000);
	encode_run(iptid, 1000);
	encode_run(type | iptid | PTD_FIELD_BIT(PTD_FIELD_PID), 300);
	encode_run(type | PTD_FIELD_BIT(PTD_FIELD_IP), 300);
	encode_run(PTD_BIN_FIXED_FIELDS, 300);
	encode_run(type, 10);
	encode_run(type | iptid, 0);
}

/* @fd's frames converted to JSON lines (NUL-terminated, *@ret_len bytes),
 * or NULL if the reader refused them. */
static char *converted(int fd, size_t *ret_len)
{
	int cfd = memfd_create("conv", 0);
	struct ptd_jsonw cw;
	struct ptd_diag d = { "" };
	char *s = NULL;

	CHECK(cfd >= 0);
	if (cfd < 0)
		return NULL;
	CHECK_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ_INT(ptd_jsonw_init(&cw, cfd, 0), 0);
	if (ptd_bin_to_json(fd, &cw, &d) != 0)
		CHECK_FAIL_("%s", d.msg);
	CHECK_EQ_INT(ptd_jsonw_fini(&cw), 0);
	if (!d.msg[0])
		s = slurp(cfd, ret_len);
	close(cfd);
	return s;
}

/* The address of instruction @i of binw_ips's runs: mostly the one
 * before plus 1..15, now and then a jump anywhere (either way, the ends
 * of the address space among them). */
static uint64_t next_ip(uint64_t prev, size_t i)
{
	switch (i % 97) {
	case 13:
		return rnd();
	case 29:
		return prev - (rnd() % 100000);
	case 41:
		return 0;
	case 42:
		return UINT64_MAX;
	case 43:
		return UINT64_MAX / 2 + 1;
	default:
		return prev + 1 + i % 15;
	}
}

/* @n instructions written by ptd_binw_ips (in calls of 1, 8, 57...
 * addresses) carry, converted back, the records ptd_binw_put writes for
 * their insn records (pid 100, tid 101, addresses from next_ip), JSON
 * lines between them included, over frame boundaries (which may fall
 * elsewhere); a writer of other fields does not take them.  @packed: the
 * runs go as address frames (where the fields have ip), in under 2 bytes
 * a record. */
static void binw_ips(uint32_t fields, size_t n, bool packed)
{
	int fa = memfd_create("put", 0), fb = memfd_create("ips", 0);
	struct ptd_binw a, b;
	static uint64_t ips[1024];
	struct ptd_record r;
	char *ja, *jb;
	size_t la = 0, lb = 0;

	REQUIRE(fa >= 0 && fb >= 0);
	REQUIRE(ptd_binw_init(&a, fa, fields) == 0);
	REQUIRE(ptd_binw_init(&b, fb, fields) == 0);
	if (packed)
		ptd_binw_set_packed(&b);
	CHECK(ptd_binw_takes_ips(&b));
	memset(&r, 0, sizeof(r));
	r.type = PTD_REC_INSN;
	r.pid = 100;
	r.tid = 101;
	r.u.insn.ip = 0x400000;
	for (size_t at = 0, k = 1; at < n; at += k, k = k * 7 % 1021 + 1) {
		if (k > n - at)
			k = n - at;
		for (size_t i = 0; i < k; i++) {
			r.u.insn.ip = next_ip(r.u.insn.ip, at + i);
			CHECK_EQ_INT(ptd_binw_put(&a, &r), 0);
			ips[i] = r.u.insn.ip;
		}
		CHECK_EQ_INT(ptd_binw_ips(&b, 100, 101, ips, k), 0);
		CHECK_EQ_INT(ptd_binw_line(&a, "{\"type\":\"x\"}\n", 13), 0);
		CHECK_EQ_INT(ptd_binw_line(&b, "{\"type\":\"x\"}\n", 13), 0);
	}
	CHECK_EQ_INT(ptd_binw_end(&a, NULL, 0), 0);
	CHECK_EQ_INT(ptd_binw_end(&b, NULL, 0), 0);
	CHECK_EQ_U64(b.records, a.records);
	CHECK_EQ_INT(ptd_binw_fini(&a), 0);
	CHECK_EQ_INT(ptd_binw_fini(&b), 0);
	if (packed && (fields & PTD_FIELD_BIT(PTD_FIELD_IP))) {
		off_t got = lseek(fb, 0, SEEK_END);

		/* jumps take up to 10 bytes; the frames' headers and the
		 * JSON lines between the runs add their share */
		if (got > (off_t)(n * 2 + (n / 200 + 1) * 80))
			CHECK_FAIL_("fields %#x: %lld bytes for %zu packed "
				    "records", fields, (long long)got, n);
	} else {
		CHECK(lseek(fb, 0, SEEK_END) >
			      (off_t)(2 * PTD_BIN_MAX_RECORDS_PAYLOAD) ||
		      n < 20000);
	}
	ja = converted(fa, &la);
	jb = converted(fb, &lb);
	if (la <= n * 20)
		CHECK_FAIL_("fields %#x: %zu bytes of JSON for %zu records",
			    fields, la, n);
	if (!ja || !jb || la != lb || memcmp(ja, jb, la))
		CHECK_FAIL_("fields %#x: runs of addresses differ from records "
			    "(%zu vs %zu bytes)", fields, lb, la);
	free(ja);
	free(jb);
	close(fa);
	close(fb);
}

static void test_binw_ips(void)
{
	const uint32_t ip = PTD_FIELD_BIT(PTD_FIELD_IP),
		       tid = PTD_FIELD_BIT(PTD_FIELD_TID),
		       pid = PTD_FIELD_BIT(PTD_FIELD_PID);
	struct ptd_binw w;

	for (int packed = 0; packed < 2; packed++) {
		binw_ips(ip | tid, 30000, packed);
		binw_ips(pid | ip, 30000, packed);
		binw_ips(pid | tid | ip, 5000, packed);
		binw_ips(ip, 5000, packed);
		/* no address: fixed-width records even when packed */
		binw_ips(tid, 100, packed);
	}
	/* more than an address: records only */
	REQUIRE(ptd_binw_init(&w, -1, ip | PTD_FIELD_BIT(PTD_FIELD_SIZE)) ==
		0);
	CHECK(!ptd_binw_takes_ips(&w));
	CHECK_EQ_INT(ptd_binw_ips(&w, 1, 1, (const uint64_t[]){ 1 }, 1),
		     -EINVAL);
	(void)ptd_binw_fini(&w);
	REQUIRE(ptd_binw_init(&w, -1, ip | PTD_FIELD_BIT(PTD_FIELD_MODULE)) ==
		0);
	CHECK(!ptd_binw_takes_ips(&w));
	(void)ptd_binw_fini(&w);
}

/* A frame holds at most 64 KiB of records: the writer opens the next. */
static void test_frame_limit(void)
{
	uint32_t fl = PTD_FIELD_BIT(PTD_FIELD_TYPE) |
		      PTD_FIELD_BIT(PTD_FIELD_IP) | PTD_FIELD_BIT(PTD_FIELD_TID);
	struct ptd_buf b = { 0 };
	size_t open = PTD_BIN_NONE, off = 0;
	uint8_t rec[PTD_BIN_MAX_REC];
	struct ptd_record r;
	struct ptd_bin_frame fr;
	struct ptd_diag d = { "" };
	unsigned frames = 0, total = 0;

	CHECK_EQ_INT(ptd_bin_recsize(fl), 12);
	make_record(&r, 0);
	CHECK_EQ_INT(ptd_bin_encode(rec, fl, &r), 12);
	for (unsigned i = 0; i < 20000; i++) {
		size_t need = ptd_bin_buf_record_need(&b, open, fl);
		size_t before = b.len;

		CHECK_EQ_INT(ptd_bin_buf_record(&b, &open, fl, rec), 0);
		CHECK_EQ_U64(b.len - before, need);
	}
	while (off < b.len) {
		ssize_t n = ptd_bin_frame_parse(b.data + off, b.len - off, off,
						&fr, &d);

		CHECK(n > 0);
		if (n <= 0)
			break;
		CHECK(fr.len <= PTD_BIN_MAX_RECORDS_PAYLOAD);
		total += fr.count;
		frames++;
		off += (size_t)n;
	}
	CHECK_EQ_INT(total, 20000);
	CHECK_EQ_INT(frames, (20000 * 12 + 65535) / 65536);
	ptd_buf_fini(&b);
}

/* A stream of two frames (json "hello", records) and the end frame. */
static void make_stream(struct ptd_buf *b, uint32_t fl)
{
	size_t open = PTD_BIN_NONE;
	uint8_t rec[PTD_BIN_MAX_REC];
	struct ptd_record r;

	CHECK_EQ_INT(ptd_bin_buf_json(b, &open, PTD_BIN_JSON,
				      "{\"type\":\"hello\"}\n", 17),
		     0);
	for (unsigned i = 0; i < 3; i++) {
		do
			make_record(&r, i);
		while (r.type != PTD_REC_INSN);
		r.has_tsc = true;
		(void)ptd_bin_encode(rec, fl, &r);
		CHECK_EQ_INT(ptd_bin_buf_record(b, &open, fl, rec), 0);
	}
	CHECK_EQ_INT(ptd_bin_buf_json(b, &open, PTD_BIN_END,
				      "{\"type\":\"bye\"}\n", 15),
		     0);
}

/* Read every frame of @len bytes at @p; the first error (0: none). */
static int read_all(const uint8_t *p, size_t len, struct ptd_diag *d)
{
	int fd = memfd_create("s", 0), e;
	struct ptd_bin_reader rd;
	struct ptd_bin_frame fr;

	CHECK(fd >= 0);
	CHECK_EQ_INT(write(fd, p, len), (ssize_t)len);
	CHECK_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ_INT(ptd_bin_reader_init(&rd, fd), 0);
	d->msg[0] = 0;
	while ((e = ptd_bin_read(&rd, &fr, d)) > 0)
		;
	ptd_bin_reader_fini(&rd);
	close(fd);
	return e;
}

static void expect_bad(const uint8_t *p, size_t len, int err,
		       const char *offset_text, const char *what)
{
	struct ptd_diag d = { "" };
	int e = read_all(p, len, &d);

	if (e != err)
		CHECK_FAIL_("%s: got %d (%s), expected %d", what, e, d.msg,
			    err);
	CHECK_CONTAINS(d.msg, offset_text);
}

static void test_corrupt(void)
{
	uint32_t fl = PTD_FIELD_BIT(PTD_FIELD_TYPE) |
		      PTD_FIELD_BIT(PTD_FIELD_IP) |
		      PTD_FIELD_BIT(PTD_FIELD_SIZE) |
		      PTD_FIELD_BIT(PTD_FIELD_RAW) |
		      PTD_FIELD_BIT(PTD_FIELD_ICLASS) |
		      PTD_FIELD_BIT(PTD_FIELD_MODE) |
		      PTD_FIELD_BIT(PTD_FIELD_FLAGS) |
		      PTD_FIELD_BIT(PTD_FIELD_TSC);
	struct ptd_buf b = { 0 };
	struct ptd_diag d = { "" };
	uint8_t *s;
	size_t rs = ptd_bin_recsize(fl), r0 = 17 + 2 * PTD_BIN_HDR;
	char at[64];

	make_stream(&b, fl);
	CHECK_EQ_INT(read_all(b.data, b.len, &d), 0);
	s = malloc(b.len + 1);
	CHECK(s != NULL);
	/* every header byte of the records frame, flipped */
	for (unsigned i = 0; i < PTD_BIN_HDR; i++) {
		memcpy(s, b.data, b.len);
		s[17 + PTD_BIN_HDR + i] ^= 0x40;
		CHECK(read_all(s, b.len, &d) < 0);
		if (d.msg[0] == 0)
			CHECK_FAIL_("header byte %u: no message", i);
	}
	/* named by their offsets: magic, version, type, reserved */
	memcpy(s, b.data, b.len);
	s[0] = 'X';
	expect_bad(s, b.len, -PTD_EFORMAT, "offset 0: bad frame magic", "magic");
	memcpy(s, b.data, b.len);
	s[41 + 4] = 2;
	expect_bad(s, b.len, -PTD_EVERSION, "offset 45: frame version 2",
		   "version");
	memcpy(s, b.data, b.len);
	s[41 + 5] = 9;
	expect_bad(s, b.len, -PTD_EFORMAT, "offset 46: unknown frame type",
		   "type");
	memcpy(s, b.data, b.len);
	s[41 + 20] = 1;
	expect_bad(s, b.len, -PTD_EFORMAT, "offset 61: reserved", "reserved");
	/* record values: size, raw length, iclass, mode, flags, clock */
	memcpy(s, b.data, b.len);
	s[r0 + rs + 8] = 16;		/* record 1's size */
	snprintf(at, sizeof(at), "offset %zu: insn size", r0 + rs + 8);
	expect_bad(s, b.len, -PTD_EFORMAT, at, "size");
	memcpy(s, b.data, b.len);
	s[r0 + 9] = s[r0 + 8] == 15 ? 14 : 15;	/* raw length != size */
	snprintf(at, sizeof(at), "offset %zu: raw length", r0 + 9);
	expect_bad(s, b.len, -PTD_EFORMAT, at, "raw length");
	memcpy(s, b.data, b.len);
	s[r0 + 8 + 1 + 16] = ptic_ptwrite + 1;
	snprintf(at, sizeof(at), "offset %zu: unknown iclass", r0 + 25);
	expect_bad(s, b.len, -PTD_EFORMAT, at, "iclass");
	memcpy(s, b.data, b.len);
	s[r0 + 26] = 4;
	snprintf(at, sizeof(at), "offset %zu: unknown exec mode", r0 + 26);
	expect_bad(s, b.len, -PTD_EFORMAT, at, "mode");
	memcpy(s, b.data, b.len);
	s[r0 + 28] = 0x04;		/* flags bit 10 */
	snprintf(at, sizeof(at), "offset %zu: unknown flag bits", r0 + 27);
	expect_bad(s, b.len, -PTD_EFORMAT, at, "flags");
	memcpy(s, b.data, b.len);
	s[r0 + 29] = 2;			/* time without tsc */
	snprintf(at, sizeof(at), "offset %zu: bad clock byte", r0 + 29);
	expect_bad(s, b.len, -PTD_EFORMAT, at, "clock");
	/* a JSON line without its newline */
	memcpy(s, b.data, b.len);
	s[PTD_BIN_HDR + 16] = ' ';
	expect_bad(s, b.len, -PTD_EFORMAT, "offset 24: JSON line", "json");
	/* cut anywhere: refused, never read past */
	for (size_t n = 0; n < b.len; n++) {
		int e = read_all(b.data, n, &d);

		if (e != -PTD_ETRUNC)
			CHECK_FAIL_("cut at %zu: %d (%s)", n, e, d.msg);
	}
	expect_bad(b.data, b.len - 39, -PTD_ETRUNC,
		   "ends without an end frame", "no end");
	/* a byte after the end frame */
	memcpy(s, b.data, b.len);
	s[b.len] = 'P';
	snprintf(at, sizeof(at), "offset %zu: data after the end frame",
		 b.len);
	expect_bad(s, b.len + 1, -PTD_EFORMAT, at, "after end");
	free(s);
	ptd_buf_fini(&b);
}

/* An address frame of @count records of @fl, its @len-byte payload @pay,
 * between a hello and the end frame, read whole: 0 or the error. */
static int read_addrs(uint32_t fl, uint32_t count, uint16_t recsize,
		      const uint8_t *pay, size_t len, struct ptd_diag *d)
{
	struct ptd_buf b = { 0 };
	size_t open = PTD_BIN_NONE;
	uint8_t h[PTD_BIN_HDR] = { 'P', 'T', 'D', 'B', PTD_BIN_VERSION,
				   PTD_BIN_ADDRS };
	int e;

	CHECK_EQ_INT(ptd_bin_buf_json(&b, &open, PTD_BIN_JSON,
				      "{\"type\":\"hello\"}\n", 17),
		     0);
	memcpy(h + 6, &recsize, 2);
	memcpy(h + 8, &count, 4);
	memcpy(h + 12, &fl, 4);
	memcpy(h + 16, &(uint32_t){ (uint32_t)len }, 4);
	CHECK_EQ_INT(ptd_buf_append(&b, h, sizeof(h)), 0);
	CHECK_EQ_INT(ptd_buf_append(&b, pay, len), 0);
	open = PTD_BIN_NONE;
	CHECK_EQ_INT(ptd_bin_buf_json(&b, &open, PTD_BIN_END, NULL, 0), 0);
	e = read_all(b.data, b.len, d);
	ptd_buf_fini(&b);
	return e;
}

/* Address frames: what the writer makes reads back (addresses anywhere,
 * deltas either way); a frame whose count, fields, record size or
 * deltas are not right is refused, naming the offset. */
static void test_addrs_frames(void)
{
	const uint32_t fl = PTD_FIELD_BIT(PTD_FIELD_TYPE) |
			    PTD_FIELD_BIT(PTD_FIELD_TID) |
			    PTD_FIELD_BIT(PTD_FIELD_IP);
	const uint64_t ips[] = { 0x1000, 0x1003, 0, UINT64_MAX,
				 UINT64_MAX / 2 + 1, 0x1000, 0x1001 };
	const size_t nips = sizeof(ips) / sizeof(ips[0]);
	uint8_t f[PTD_BIN_ADDRS_MAX(7)], pay[64];
	struct ptd_bin_frame fr;
	struct ptd_bin_addrs it;
	struct ptd_record r;
	struct ptd_diag d = { "" };
	size_t n = ptd_bin_addrs_frame(f, fl, 7, 42, ips, nips), k;

	CHECK(n <= PTD_BIN_ADDRS_MAX(nips));
	REQUIRE(ptd_bin_frame_parse(f, n, 0, &fr, &d) == (ssize_t)n);
	CHECK_EQ_INT(fr.type, PTD_BIN_ADDRS);
	CHECK_EQ_INT(fr.count, nips);
	ptd_bin_addrs_begin(&fr, &it);
	for (size_t i = 0; i < nips; i++) {
		ptd_bin_addrs_next(&it, &r);
		CHECK_EQ_U64(r.u.insn.ip, ips[i]);
		CHECK_EQ_INT(r.tid, 42);
		CHECK_EQ_INT(r.pid, 0);	/* not in the set */
		CHECK_EQ_INT(r.type, PTD_REC_INSN);
	}
	CHECK(it.p == fr.payload + fr.len);
	/* a step of one byte ahead is one byte */
	k = ptd_bin_addrs_frame(f, fl, 7, 42, (const uint64_t[]){ 5, 6, 20 },
				3);
	CHECK_EQ_INT(k, PTD_BIN_HDR + 4 + 8 + 2);
	/* the frame as written, in a stream: read */
	CHECK_EQ_INT(read_addrs(fl, 3, 0, f + PTD_BIN_HDR, k - PTD_BIN_HDR,
				&d),
		     0);
	/* payload: tid 42, first address 5, deltas */
	memcpy(pay, f + PTD_BIN_HDR, 12);
	/* count 0, count above 4096 */
	CHECK_EQ_INT(read_addrs(fl, 0, 0, pay, 12, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "offset 49: address frame's count not 1..4096");
	CHECK_EQ_INT(read_addrs(fl, 4097, 0, pay, 12, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "count not 1..4096 (4097)");
	/* fields without ip, or beyond an address's */
	CHECK_EQ_INT(read_addrs(fl & ~PTD_FIELD_BIT(PTD_FIELD_IP), 1, 0, pay,
				4, &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "offset 53: field set not one of address frames");
	CHECK_EQ_INT(read_addrs(fl | PTD_FIELD_BIT(PTD_FIELD_SIZE), 1, 0, pay,
				12, &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "field set not one of address frames");
	/* a record size */
	CHECK_EQ_INT(read_addrs(fl, 1, 12, pay, 12, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "offset 47: record size in an address frame");
	/* shorter than tid and first address */
	CHECK_EQ_INT(read_addrs(fl, 1, 0, pay, 11, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "offset 57: address frame shorter than its "
			      "first address");
	/* a count the deltas do not have: more, fewer */
	pay[12] = 2;		/* +1 */
	CHECK_EQ_INT(read_addrs(fl, 3, 0, pay, 13, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "offset 77: address frame ends inside its "
			      "deltas");
	CHECK_EQ_INT(read_addrs(fl, 1, 0, pay, 13, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "offset 77: bytes after an address frame's "
			      "last delta (1)");
	/* a delta cut in its bytes (the last has its top bit set) */
	pay[12] = 0x82;
	CHECK_EQ_INT(read_addrs(fl, 2, 0, pay, 13, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "ends inside its deltas");
	/* ten bytes: the tenth holds bit 63 alone; above, refused */
	memset(pay + 12, 0xff, 9);
	pay[21] = 1;
	CHECK_EQ_INT(read_addrs(fl, 2, 0, pay, 22, &d), 0);
	pay[21] = 2;
	CHECK_EQ_INT(read_addrs(fl, 2, 0, pay, 22, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "offset 86: address delta above 64 bits (2)");
	/* eleven bytes */
	pay[21] = 0x81;
	pay[22] = 0;
	CHECK_EQ_INT(read_addrs(fl, 2, 0, pay, 23, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "address delta above 64 bits");
}

/* A converted stream that is not frames says so, with the offset, and
 * writes nothing. */
static void test_not_frames(void)
{
	int in = memfd_create("in", 0), out = memfd_create("out", 0);
	struct ptd_jsonw w;
	struct ptd_diag d = { "" };

	CHECK(in >= 0 && out >= 0);
	CHECK_EQ_INT(write(in, "{\"type\":\"insn\"}\n", 16), 16);
	CHECK_EQ_INT(lseek(in, 0, SEEK_SET), 0);
	CHECK_EQ_INT(ptd_jsonw_init(&w, out, 0), 0);
	CHECK_EQ_INT(ptd_bin_to_json(in, &w, &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "offset 0: bad frame magic");
	CHECK_EQ_INT(ptd_jsonw_fini(&w), 0);
	CHECK_EQ_INT(lseek(out, 0, SEEK_END), 0);
	close(in);
	close(out);
}

int main(void)
{
	RUN(test_roundtrip_sets);
	RUN(test_encode_run);
	RUN(test_binw_ips);
	RUN(test_frame_limit);
	RUN(test_corrupt);
	RUN(test_addrs_frames);
	RUN(test_not_frames);
	return check_done();
}
