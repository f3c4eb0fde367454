/* SPDX-License-Identifier: MIT */
/*
 * The direct JSON writer: every record type written and parsed back with
 * cJSON, field by field; escaping; the length guarantee; the fd writer.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "common/diag.h"
#include "common/strutil.h"
#include "record/jsonw.h"
#include "unit/fieldcmp.h"
#include "x86/insn.h"

static char line[PTD_JSON_MAX_RECORD];
static size_t line_len;

/* Write @r, check the line's framing, parse it.  NULL on failure. */
static cJSON *write_parse(const struct ptd_record *r)
{
	size_t n = ptd_json_record(line, sizeof(line), r);
	cJSON *j;

	line_len = n;

	CHECK(n > 0);
	if (!n)
		return NULL;
	CHECK(n <= PTD_JSON_MAX_RECORD);
	CHECK_EQ_INT(line[n - 1], '\n');
	CHECK(memchr(line, '\n', n - 1) == NULL);
	j = cJSON_ParseWithLength(line, n);
	if (!j) {
		CHECK_FAIL_("cJSON cannot parse %.*s", (int)n, line);
		return NULL;
	}
	/* "type" comes first. */
	CHECK(j->child && strcmp(j->child->string, "type") == 0);
	return j;
}

static const char *jstr(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool jhas(const cJSON *j, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(j, key) != NULL;
}

/* A hex string field "0x..." as a number; fails the check otherwise. */
static uint64_t jhex(const cJSON *j, const char *key)
{
	const char *s = jstr(j, key);
	uint64_t v = 0;

	if (!s || strncmp(s, "0x", 2) != 0 || ptd_parse_u64(s + 2, 16, &v)) {
		CHECK_FAIL_("field %s: expected a hex string, got %s", key,
			    s ? s : "(none)");
		return UINT64_MAX;
	}
	return v;
}

static double jnum(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	if (!cJSON_IsNumber(v)) {
		CHECK_FAIL_("field %s: expected a number", key);
		return -1e300;
	}
	return v->valuedouble;
}

static int jbool(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	if (!cJSON_IsBool(v)) {
		CHECK_FAIL_("field %s: expected a boolean", key);
		return -1;
	}
	return cJSON_IsTrue(v);
}

/* The "flags" array back as PTD_F_* bits (checking order and names). */
static uint32_t jflags(const cJSON *j)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "flags");
	const cJSON *f;
	uint32_t flags = 0;
	int last = -1;

	if (!a)
		return 0;
	CHECK(cJSON_IsArray(a));
	CHECK(cJSON_GetArraySize(a) > 0);
	cJSON_ArrayForEach(f, a) {
		int bit = -1;

		CHECK(cJSON_IsString(f));
		for (unsigned b = 0; b < PTD_F_NFLAGS && cJSON_IsString(f); b++)
			if (strcmp(ptd_flag_name(b), f->valuestring) == 0)
				bit = (int)b;
		CHECK(bit > last);
		if (bit >= 0)
			flags |= 1u << bit;
		last = bit;
	}
	return flags;
}

static void head(struct ptd_record *r, enum ptd_rec_type t)
{
	memset(r, 0xcd, sizeof(*r));	/* poison, then set what counts */
	r->type = t;
	r->pid = 1234;
	r->tid = 1240;
	r->has_tsc = false;
	r->has_time = false;
	r->has_wall = false;
	/* optional members: absent unless a test sets them */
	if (t == PTD_REC_INSN)
		r->u.insn.sym = NULL;
	if (t == PTD_REC_BLOCK)
		r->u.block.sym = NULL;
}

static void check_head(const cJSON *j, const char *type)
{
	CHECK_EQ_STR(jstr(j, "type"), type);
	CHECK_EQ_INT(jnum(j, "pid"), 1234);
	CHECK_EQ_INT(jnum(j, "tid"), 1240);
}

static void make_insn(struct ptd_record *r, uint32_t flags)
{
	static const uint8_t raw[] = {0x48, 0x89, 0xe5};

	head(r, PTD_REC_INSN);
	r->u.insn.ip = 0xffffffff81000000ull;
	r->u.insn.modoff = 0x1000;
	r->u.insn.module = "/usr/bin/ls";
	r->u.insn.isid = 7;
	r->u.insn.mode = ptem_64bit;
	r->u.insn.iclass = ptic_cond_jump;
	r->u.insn.flags = flags;
	r->u.insn.size = sizeof(raw);
	memcpy(r->u.insn.raw, raw, sizeof(raw));
}

static void test_insn(void)
{
	struct ptd_record r;
	cJSON *j;

	make_insn(&r, 0);
	j = write_parse(&r);
	REQUIRE(j);
	check_head(j, "insn");
	CHECK_EQ_U64(jhex(j, "ip"), 0xffffffff81000000ull);
	CHECK_EQ_INT(jnum(j, "size"), 3);
	CHECK_EQ_STR(jstr(j, "raw"), "4889e5");
	CHECK_EQ_STR(jstr(j, "iclass"), "cond_jump");
	CHECK_EQ_STR(jstr(j, "mode"), "64bit");
	CHECK_EQ_INT(jnum(j, "isid"), 7);
	CHECK_EQ_STR(jstr(j, "module"), "/usr/bin/ls");
	CHECK_EQ_U64(jhex(j, "offset"), 0x1000);
	CHECK(!jhas(j, "flags"));	/* only when set */
	CHECK(!jhas(j, "tsc"));		/* only when known */
	CHECK_EQ_INT(cJSON_GetArraySize(j), 11);
	cJSON_Delete(j);

	/* Zero values, tsc present. */
	make_insn(&r, 0);
	r.u.insn.ip = 0;
	r.u.insn.modoff = 0;
	r.u.insn.mode = ptem_32bit;
	r.has_tsc = true;
	r.tsc = 0x123456789abcdefull;
	j = write_parse(&r);
	REQUIRE(j);
	CHECK_EQ_STR(jstr(j, "ip"), "0x0");
	CHECK_EQ_STR(jstr(j, "mode"), "32bit");
	CHECK_EQ_U64(jhex(j, "tsc"), 0x123456789abcdefull);
	CHECK(!jhas(j, "sym"));		/* only when resolved */
	cJSON_Delete(j);

	/* The symbol: "NAME+0xOFF" after the flags, the name escaped. */
	make_insn(&r, PTD_F_ENABLED);
	r.u.insn.sym = "main";
	r.u.insn.symoff = 0x1a;
	j = write_parse(&r);
	REQUIRE(j);
	CHECK_EQ_STR(jstr(j, "sym"), "main+0x1a");
	CHECK_CONTAINS(line, "\"offset\":\"0x1000\",\"sym\":\"main+0x1a\","
			     "\"flags\":[\"enabled\"]}");
	cJSON_Delete(j);
	r.u.insn.sym = "operator\"\n";
	r.u.insn.symoff = 0;
	j = write_parse(&r);
	REQUIRE(j);
	CHECK_EQ_STR(jstr(j, "sym"), "operator\"\n+0x0");
	cJSON_Delete(j);
}

/* Every flag alone, and all together. */
static void test_insn_flags(void)
{
	for (unsigned bit = 0; bit <= PTD_F_NFLAGS; bit++) {
		uint32_t f = bit < PTD_F_NFLAGS ? 1u << bit
						: (1u << PTD_F_NFLAGS) - 1;
		struct ptd_record r;
		cJSON *j;

		make_insn(&r, f);
		j = write_parse(&r);
		REQUIRE(j);
		CHECK_EQ_U64(jflags(j), f);
		cJSON_Delete(j);
	}
}

static void test_block(void)
{
	struct ptd_record r;
	cJSON *j;

	head(&r, PTD_REC_BLOCK);
	r.u.block.ip = 0x401000;
	r.u.block.end_ip = 0x401020;
	r.u.block.modoff = 0x1000;
	r.u.block.module = "/lib/x86_64-linux-gnu/libc.so.6";
	r.u.block.isid = 3;
	r.u.block.mode = ptem_16bit;
	r.u.block.iclass = ptic_return;
	r.u.block.ninsn = 9;
	r.u.block.flags = PTD_F_ENABLED | PTD_F_DISABLED;
	r.has_tsc = true;
	r.tsc = 42;
	j = write_parse(&r);
	REQUIRE(j);
	check_head(j, "block");
	CHECK_EQ_U64(jhex(j, "ip"), 0x401000);
	CHECK_EQ_U64(jhex(j, "end_ip"), 0x401020);
	CHECK_EQ_INT(jnum(j, "ninsn"), 9);
	CHECK_EQ_STR(jstr(j, "iclass"), "return");
	CHECK_EQ_STR(jstr(j, "mode"), "16bit");
	CHECK_EQ_INT(jnum(j, "isid"), 3);
	CHECK_EQ_STR(jstr(j, "module"), "/lib/x86_64-linux-gnu/libc.so.6");
	CHECK_EQ_U64(jhex(j, "offset"), 0x1000);
	CHECK_EQ_U64(jflags(j), PTD_F_ENABLED | PTD_F_DISABLED);
	CHECK_EQ_U64(jhex(j, "tsc"), 42);
	CHECK(!jhas(j, "raw"));
	CHECK(!jhas(j, "size"));
	cJSON_Delete(j);

	/* Truncated: the last instruction's bytes come along. */
	r.u.block.flags = PTD_F_TRUNCATED | PTD_F_SPECULATIVE;
	r.u.block.size = 2;
	r.u.block.raw[0] = 0x0f;
	r.u.block.raw[1] = 0x05;
	j = write_parse(&r);
	REQUIRE(j);
	CHECK_EQ_U64(jflags(j), PTD_F_TRUNCATED | PTD_F_SPECULATIVE);
	CHECK_EQ_INT(jnum(j, "size"), 2);
	CHECK_EQ_STR(jstr(j, "raw"), "0f05");
	cJSON_Delete(j);
}

/* An event of @type with recognisable values in every variant field. */
static void make_event(struct ptd_record *r, enum pt_event_type type)
{
	struct pt_event *ev = &r->u.event.ev;

	head(r, PTD_REC_EVENT);
	memset(ev, 0, sizeof(*ev));
	ev->type = type;
	r->u.event.offset = 0x4321;
	switch (type) {
	case ptev_enabled:
		ev->variant.enabled.ip = 0x1001;
		ev->variant.enabled.resumed = 1;
		break;
	case ptev_disabled:
		ev->variant.disabled.ip = 0x1002;
		break;
	case ptev_async_disabled:
		ev->variant.async_disabled.ip = 0x1003;
		ev->variant.async_disabled.at = 0x2003;
		break;
	case ptev_async_branch:
		ev->variant.async_branch.to = 0x1004;
		ev->variant.async_branch.from = 0x2004;
		break;
	case ptev_paging:
		ev->variant.paging.cr3 = 0xabc000;
		ev->variant.paging.non_root = 1;
		break;
	case ptev_async_paging:
		ev->variant.async_paging.ip = 0x1006;
		ev->variant.async_paging.cr3 = 0xdef000;
		break;
	case ptev_overflow:
		ev->variant.overflow.ip = 0x1007;
		break;
	case ptev_exec_mode:
		ev->variant.exec_mode.ip = 0x1008;
		ev->variant.exec_mode.mode = ptem_32bit;
		break;
	case ptev_tsx:
		ev->variant.tsx.ip = 0x1009;
		ev->variant.tsx.speculative = 1;
		ev->variant.tsx.aborted = 0;
		break;
	case ptev_stop:
		break;
	case ptev_vmcs:
		ev->variant.vmcs.base = 0x5000;
		break;
	case ptev_async_vmcs:
		ev->variant.async_vmcs.ip = 0x100c;
		ev->variant.async_vmcs.base = 0x6000;
		break;
	case ptev_exstop:
		ev->variant.exstop.ip = 0x100d;
		break;
	case ptev_mwait:
		ev->variant.mwait.ip = 0x100e;
		ev->variant.mwait.hints = 0xffffffffu;
		ev->variant.mwait.ext = 3;
		break;
	case ptev_pwre:
		ev->variant.pwre.state = 6;
		ev->variant.pwre.sub_state = 2;
		ev->variant.pwre.hw = 1;
		break;
	case ptev_pwrx:
		ev->variant.pwrx.last = 1;
		ev->variant.pwrx.deepest = 7;
		ev->variant.pwrx.interrupt = 1;
		ev->variant.pwrx.store = 0;
		ev->variant.pwrx.autonomous = 1;
		break;
	case ptev_ptwrite:
		ev->variant.ptwrite.ip = 0x1011;
		ev->variant.ptwrite.size = 8;
		ev->variant.ptwrite.payload = 0xfeedfacecafebeefull;
		break;
	case ptev_tick:
		ev->variant.tick.ip = 0x1012;
		break;
	case ptev_cbr:
		ev->variant.cbr.ratio = 0x2a;
		break;
	case ptev_mnt:
		ev->variant.mnt.payload = 0x8000000000000001ull;
		break;
	}
}

/* The ip each event type carries, or 0 for none. */
static uint64_t event_ip(enum pt_event_type type)
{
	static const uint64_t ips[] = {
		[ptev_enabled] = 0x1001,     [ptev_disabled] = 0x1002,
		[ptev_async_disabled] = 0x1003, [ptev_async_branch] = 0x1004,
		[ptev_async_paging] = 0x1006, [ptev_overflow] = 0x1007,
		[ptev_exec_mode] = 0x1008,   [ptev_tsx] = 0x1009,
		[ptev_async_vmcs] = 0x100c,  [ptev_exstop] = 0x100d,
		[ptev_mwait] = 0x100e,	     [ptev_ptwrite] = 0x1011,
		[ptev_tick] = 0x1012,
	};

	return (size_t)type < PTD_ARRAY_SIZE(ips) ? ips[type] : 0;
}

static void check_event_fields(const cJSON *j, enum pt_event_type type)
{
	switch (type) {
	case ptev_enabled:
		CHECK_EQ_INT(jbool(j, "resumed"), 1);
		break;
	case ptev_disabled:
		break;
	case ptev_async_disabled:
		CHECK_EQ_U64(jhex(j, "at"), 0x2003);
		break;
	case ptev_async_branch:
		CHECK_EQ_U64(jhex(j, "from"), 0x2004);
		break;
	case ptev_paging:
		CHECK_EQ_U64(jhex(j, "cr3"), 0xabc000);
		CHECK_EQ_INT(jbool(j, "non_root"), 1);
		break;
	case ptev_async_paging:
		CHECK_EQ_U64(jhex(j, "cr3"), 0xdef000);
		CHECK_EQ_INT(jbool(j, "non_root"), 0);
		break;
	case ptev_overflow:
		break;
	case ptev_exec_mode:
		CHECK_EQ_STR(jstr(j, "mode"), "32bit");
		break;
	case ptev_tsx:
		CHECK_EQ_INT(jbool(j, "speculative"), 1);
		CHECK_EQ_INT(jbool(j, "aborted"), 0);
		break;
	case ptev_stop:
		break;
	case ptev_vmcs:
		CHECK_EQ_U64(jhex(j, "base"), 0x5000);
		break;
	case ptev_async_vmcs:
		CHECK_EQ_U64(jhex(j, "base"), 0x6000);
		break;
	case ptev_exstop:
		break;
	case ptev_mwait:
		CHECK_EQ_U64(jnum(j, "hints"), 0xffffffffu);
		CHECK_EQ_INT(jnum(j, "ext"), 3);
		break;
	case ptev_pwre:
		CHECK_EQ_INT(jnum(j, "state"), 6);
		CHECK_EQ_INT(jnum(j, "sub_state"), 2);
		CHECK_EQ_INT(jbool(j, "hw"), 1);
		break;
	case ptev_pwrx:
		CHECK_EQ_INT(jnum(j, "last"), 1);
		CHECK_EQ_INT(jnum(j, "deepest"), 7);
		CHECK_EQ_INT(jbool(j, "interrupt"), 1);
		CHECK_EQ_INT(jbool(j, "store"), 0);
		CHECK_EQ_INT(jbool(j, "autonomous"), 1);
		break;
	case ptev_ptwrite:
		CHECK_EQ_INT(jnum(j, "size"), 8);
		CHECK_EQ_U64(jhex(j, "payload"), 0xfeedfacecafebeefull);
		break;
	case ptev_tick:
		break;
	case ptev_cbr:
		CHECK_EQ_INT(jnum(j, "ratio"), 0x2a);
		break;
	case ptev_mnt:
		CHECK_EQ_U64(jhex(j, "payload"), 0x8000000000000001ull);
		break;
	}
}

static void test_events(void)
{
	for (int t = ptev_enabled; t <= ptev_mnt; t++) {
		enum pt_event_type type = (enum pt_event_type)t;
		struct ptd_record r;
		cJSON *j;

		make_event(&r, type);
		j = write_parse(&r);
		REQUIRE(j);
		check_head(j, "event");
		CHECK_EQ_STR(jstr(j, "event"), ptd_event_name(type));
		CHECK(strcmp(ptd_event_name(type), "unknown") != 0);
		CHECK_EQ_U64(jhex(j, "offset"), 0x4321);
		if (event_ip(type))
			CHECK_EQ_U64(jhex(j, "ip"), event_ip(type));
		else
			CHECK(!jhas(j, "ip"));
		check_event_fields(j, type);
		CHECK(!jhas(j, "status_update"));
		CHECK(!jhas(j, "tsc"));
		cJSON_Delete(j);

		/* Suppressed ip, status update, timing. */
		r.u.event.ev.ip_suppressed = 1;
		r.u.event.ev.status_update = 1;
		r.u.event.ev.lost_mtc = 5;
		r.u.event.ev.lost_cyc = 6;
		r.has_tsc = true;
		r.tsc = 0x77;
		j = write_parse(&r);
		REQUIRE(j);
		CHECK(!jhas(j, "ip"));
		CHECK_EQ_INT(jbool(j, "status_update"), 1);
		CHECK_EQ_INT(jnum(j, "lost_mtc"), 5);
		CHECK_EQ_INT(jnum(j, "lost_cyc"), 6);
		CHECK_EQ_U64(jhex(j, "tsc"), 0x77);
		check_event_fields(j, type);
		cJSON_Delete(j);
	}
}

static void test_error(void)
{
	struct ptd_record r;
	cJSON *j;

	head(&r, PTD_REC_ERROR);
	r.u.error.code = -pte_nomap;
	r.u.error.ptd_code = false;
	r.u.error.offset = 0x80;
	r.u.error.ip = 0x401000;
	r.u.error.ip_valid = true;
	r.u.error.context = "decode";
	r.u.error.skipped = 300;
	r.u.error.detail = NULL;
	j = write_parse(&r);
	REQUIRE(j);
	check_head(j, "error");
	CHECK_EQ_U64(jhex(j, "offset"), 0x80);
	CHECK_EQ_U64(jhex(j, "ip"), 0x401000);
	CHECK_EQ_STR(jstr(j, "error"), "nomap");
	CHECK_EQ_INT(jnum(j, "code"), -pte_nomap);
	CHECK_EQ_STR(jstr(j, "message"), "no memory mapped at this address");
	CHECK_EQ_STR(jstr(j, "context"), "decode");
	CHECK_EQ_INT(jnum(j, "skipped"), 300);
	cJSON_Delete(j);

	/* A ptd code, no ip. */
	r.u.error.code = -PTD_ENOIMAGE;
	r.u.error.ptd_code = true;
	r.u.error.ip_valid = false;
	r.u.error.context = "image";
	j = write_parse(&r);
	REQUIRE(j);
	CHECK(!jhas(j, "ip"));
	CHECK_EQ_STR(jstr(j, "error"), "PTD_ENOIMAGE");
	CHECK_EQ_INT(jnum(j, "code"), -PTD_ENOIMAGE);
	CHECK_EQ_STR(jstr(j, "message"), ptd_strerror(-PTD_ENOIMAGE));
	CHECK_EQ_STR(jstr(j, "context"), "image");
	CHECK(!jhas(j, "detail"));
	cJSON_Delete(j);

	/* With what exactly was wrong. */
	r.u.error.code = -PTD_EIDENTITY;
	r.u.error.detail = "'/l \"x\"' is not the file the process mapped";
	j = write_parse(&r);
	REQUIRE(j);
	CHECK_EQ_STR(jstr(j, "error"), "PTD_EIDENTITY");
	CHECK_EQ_STR(jstr(j, "detail"),
		     "'/l \"x\"' is not the file the process mapped");
	cJSON_Delete(j);
	r.u.error.detail = NULL;

	/* An errno code. */
	r.u.error.code = -ENOENT;
	j = write_parse(&r);
	REQUIRE(j);
	CHECK_EQ_STR(jstr(j, "error"), "ENOENT");
	CHECK_EQ_STR(jstr(j, "message"), strerror(ENOENT));
	cJSON_Delete(j);
}

/* ptd_json_string of @in must parse back to @want (cJSON decodes \u00XX
 * to UTF-8). */
static void check_string(const char *in, size_t n, const char *want_json,
			 const char *want_value)
{
	char buf[256];
	size_t len = ptd_json_string(buf, sizeof(buf), in, n);
	cJSON *j;

	REQUIRE(len > 0 && len < sizeof(buf));
	buf[len] = '\0';
	if (want_json)
		CHECK_EQ_STR(buf, want_json);
	j = cJSON_Parse(buf);
	REQUIRE(j);
	CHECK(cJSON_IsString(j));
	CHECK_EQ_STR(j->valuestring, want_value);
	cJSON_Delete(j);
}

static void test_escaping(void)
{
	check_string("plain", 5, "\"plain\"", "plain");
	check_string("", 0, "\"\"", "");
	check_string("a\"b\\c", 5, "\"a\\\"b\\\\c\"", "a\"b\\c");
	check_string("\n\t\x01\x1f", 4, "\"\\u000a\\u0009\\u0001\\u001f\"",
		     "\n\t\x01\x1f");
	/* An embedded NUL is escaped, not the end. */
	check_string("a\0b", 3, "\"a\\u0000b\"", "a");
	/* Valid UTF-8 passes through: 2, 3 and 4 bytes. */
	check_string("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9,
		     "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
		     "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	/* Invalid UTF-8: each bad byte becomes \u00XX of the byte. */
	check_string("\xff", 1, "\"\\u00ff\"", "\xc3\xbf");
	check_string("\xc0\x80", 2, "\"\\u00c0\\u0080\"", "\xc3\x80\xc2\x80");
	check_string("\xed\xa0\x80", 3, "\"\\u00ed\\u00a0\\u0080\"",
		     "\xc3\xad\xc2\xa0\xc2\x80");	/* surrogate */
	check_string("\xe2\x82", 2, "\"\\u00e2\\u0082\"",
		     "\xc3\xa2\xc2\x82");		/* cut sequence */
	check_string("\xf4\x90\x80\x80", 4, NULL,
		     "\xc3\xb4\xc2\x90\xc2\x80\xc2\x80"); /* > U+10FFFF */
	check_string("\xe0\x80\xaf", 3, NULL,
		     "\xc3\xa0\xc2\x80\xc2\xaf");	/* overlong */
	check_string("x\xc3", 2, "\"x\\u00c3\"", "x\xc3\x83");
}

static void test_string_fit(void)
{
	char buf[16];

	/* "abc" needs 5 bytes. */
	CHECK_EQ_INT(ptd_json_string(buf, 5, "abc", 3), 5);
	CHECK_EQ_INT(ptd_json_string(buf, 4, "abc", 3), 0);
	/* An escape is never split. */
	CHECK_EQ_INT(ptd_json_string(buf, 8, "\x01", 1), 8);
	CHECK_EQ_INT(ptd_json_string(buf, 7, "\x01", 1), 0);
	CHECK_EQ_INT(ptd_json_string(buf, 1, "", 0), 0);
	CHECK_EQ_INT(ptd_json_string(NULL, 8, "a", 1), 0);
	CHECK_EQ_INT(ptd_json_string(buf, 8, NULL, 1), 0);
}

/* A module name far too long, of bytes that expand sixfold, on the record
 * with the longest tail: the line stays within the limit, valid, complete. */
static void test_long_module(void)
{
	static const char *kinds[] = {"\x01", "a", "\xe2\x82\xac", "\xff"};

	for (size_t k = 0; k < PTD_ARRAY_SIZE(kinds); k++) {
		size_t unit = strlen(kinds[k]), n = 3 * PTD_JSON_MAX_RECORD;
		char *mod = malloc(n * unit + 1);
		struct ptd_record r;
		const char *got;
		cJSON *j;

		REQUIRE(mod);
		for (size_t i = 0; i < n; i++)
			memcpy(mod + i * unit, kinds[k], unit);
		mod[n * unit] = '\0';

		head(&r, PTD_REC_BLOCK);
		r.pid = INT32_MIN;
		r.tid = INT32_MIN;
		r.u.block.ip = UINT64_MAX;
		r.u.block.end_ip = UINT64_MAX;
		r.u.block.modoff = UINT64_MAX;
		r.u.block.module = mod;
		r.u.block.isid = INT32_MIN;
		r.u.block.mode = ptem_unknown;
		r.u.block.iclass = ptic_far_return;
		r.u.block.ninsn = UINT32_MAX;
		r.u.block.flags = UINT32_MAX;
		r.u.block.size = pt_max_insn_size;
		memset(r.u.block.raw, 0xff, sizeof(r.u.block.raw));
		r.u.block.sym = mod;
		r.u.block.symoff = UINT64_MAX;
		r.has_tsc = true;
		r.tsc = UINT64_MAX;
		/* the longest time fields too */
		r.has_time = r.has_wall = true;
		r.time = r.wall = UINT64_MAX;
		j = write_parse(&r);
		if (!j) {
			free(mod);
			REQUIRE(j);
		}
		got = jstr(j, "module");
		CHECK(got && strlen(got) > 1000);
		CHECK(got && strcmp(got + strlen(got) - 3, "...") == 0);
		CHECK_EQ_U64(jhex(j, "tsc"), UINT64_MAX);
		CHECK_EQ_U64(jhex(j, "time"), UINT64_MAX);
		CHECK_EQ_STR(jstr(j, "wall"), "2554-07-21T23:34:33.709551615Z");
		CHECK_EQ_U64(jhex(j, "offset"), UINT64_MAX);
		CHECK_EQ_INT(jnum(j, "size"), pt_max_insn_size);
		CHECK_EQ_U64(jflags(j), (1u << PTD_F_NFLAGS) - 1);
		got = jstr(j, "sym");
		CHECK(got && strlen(got) > 100);
		CHECK(got && strlen(got) > 22 &&
		      !strcmp(got + strlen(got) - 22, "...+0xffffffffffffffff"));
		cJSON_Delete(j);

		/* Same on an insn record. */
		make_insn(&r, UINT32_MAX);
		r.u.insn.module = mod;
		r.u.insn.sym = mod;
		r.u.insn.symoff = UINT64_MAX;
		r.u.insn.size = 255;	/* raw is cut to 15 bytes */
		r.has_tsc = true;
		r.tsc = UINT64_MAX;
		r.has_time = r.has_wall = true;
		r.time = r.wall = UINT64_MAX;
		j = write_parse(&r);
		free(mod);
		REQUIRE(j);
		CHECK_EQ_INT(strlen(jstr(j, "raw") ? jstr(j, "raw") : ""),
			     2 * pt_max_insn_size);
		CHECK_EQ_U64(jhex(j, "tsc"), UINT64_MAX);
		CHECK_EQ_U64(jhex(j, "time"), UINT64_MAX);
		CHECK_EQ_STR(jstr(j, "wall"), "2554-07-21T23:34:33.709551615Z");
		cJSON_Delete(j);
	}
}

/* Long context strings on error records are cut too. */
static void test_long_context(void)
{
	char ctx[4000];
	struct ptd_record r;
	cJSON *j;

	memset(ctx, '"', sizeof(ctx) - 1);
	ctx[sizeof(ctx) - 1] = '\0';
	head(&r, PTD_REC_ERROR);
	r.u.error.code = -pte_bad_opc;
	r.u.error.ptd_code = false;
	r.u.error.offset = 1;
	r.u.error.ip_valid = false;
	r.u.error.context = ctx;
	r.u.error.skipped = 0;
	r.u.error.detail = NULL;
	j = write_parse(&r);
	REQUIRE(j);
	CHECK(line_len < 1024);
	CHECK(jstr(j, "context") && strlen(jstr(j, "context")) < 300);
	CHECK_EQ_STR(jstr(j, "error"), "bad_opc");
	cJSON_Delete(j);
	/* and details */
	r.u.error.detail = ctx;
	j = write_parse(&r);
	REQUIRE(j);
	CHECK(line_len < 3072);
	CHECK(jstr(j, "detail") && strlen(jstr(j, "detail")) < 1100);
	cJSON_Delete(j);
}

static void test_small_buffer(void)
{
	struct ptd_record r;
	char big[PTD_JSON_MAX_RECORD], small[64];
	size_t n;

	make_insn(&r, PTD_F_ENABLED);
	n = ptd_json_record(big, sizeof(big), &r);
	REQUIRE(n > 0);
	CHECK_EQ_INT(ptd_json_record(small, sizeof(small), &r), 0);
	{
		char *exact = malloc(n);

		REQUIRE(exact);
		CHECK_EQ_INT(ptd_json_record(exact, n, &r), n);
		CHECK(memcmp(exact, big, n) == 0);
		CHECK_EQ_INT(ptd_json_record(exact, n - 1, &r), 0);
		free(exact);
	}
	CHECK_EQ_INT(ptd_json_record(NULL, sizeof(big), &r), 0);
	CHECK_EQ_INT(ptd_json_record(big, sizeof(big), NULL), 0);
	r.type = PTD_REC_NTYPES;
	CHECK_EQ_INT(ptd_json_record(big, sizeof(big), &r), 0);
}

static void test_names(void)
{
	CHECK_EQ_STR(ptd_rec_type_name(PTD_REC_INSN), "insn");
	CHECK_EQ_STR(ptd_rec_type_name(PTD_REC_ERROR), "error");
	CHECK(ptd_rec_type_name(PTD_REC_NTYPES) == NULL);
	for (int t = 0; t < PTD_REC_NTYPES; t++)
		CHECK_EQ_INT(ptd_rec_type_parse(ptd_rec_type_name(
				     (enum ptd_rec_type)t)),
			     t);
	CHECK_EQ_INT(ptd_rec_type_parse("insns"), -1);
	CHECK_EQ_INT(ptd_rec_type_parse(""), -1);
	CHECK_EQ_INT(ptd_rec_type_parse(NULL), -1);

	CHECK_EQ_STR(ptd_flag_name(0), "speculative");
	CHECK_EQ_STR(ptd_flag_name(9), "committed");
	CHECK(ptd_flag_name(PTD_F_NFLAGS) == NULL);
	for (unsigned b = 0; b < PTD_F_NFLAGS; b++)
		CHECK(ptd_flag_name(b) != NULL);

	CHECK_EQ_STR(ptd_event_name(ptev_async_disabled), "async_disabled");
	CHECK_EQ_STR(ptd_event_name((enum pt_event_type)99), "unknown");
	CHECK_EQ_STR(ptd_mode_name(ptem_64bit), "64bit");
	CHECK_EQ_STR(ptd_mode_name(ptem_unknown), "unknown");
	CHECK_EQ_STR(ptd_mode_name((enum pt_exec_mode)9), "unknown");

	CHECK_EQ_STR(ptd_pterr_name(-pte_nomap), "nomap");
	CHECK_EQ_STR(ptd_pterr_name(pte_bad_opc), "bad_opc");
	CHECK_EQ_STR(ptd_pterr_name(-pte_bad_cpu), "bad_cpu");
	CHECK_EQ_STR(ptd_pterr_name(-1000), "unknown");
	CHECK_EQ_STR(ptd_pterr_name(INT32_MIN), "unknown");
	/* Every libipt code has its own name. */
	for (int c = pte_ok; c <= pte_bad_cpu; c++) {
		CHECK(strcmp(ptd_pterr_name(-c), "unknown") != 0);
		for (int o = pte_ok; o < c; o++)
			CHECK(strcmp(ptd_pterr_name(-c), ptd_pterr_name(-o)));
	}
}

/* Read what a writer put into @fd (a regular file). */
static size_t slurp(int fd, char *buf, size_t cap)
{
	ssize_t n = pread(fd, buf, cap - 1, 0);

	if (n < 0)
		return 0;
	buf[n] = '\0';
	return (size_t)n;
}

static void test_writer(void)
{
	char path[] = "/tmp/ptd-test-jsonw-XXXXXX";
	int fd = mkstemp(path);
	static char got[1 << 20];
	struct ptd_jsonw w;
	struct ptd_record r;
	size_t n, lines = 0;

	REQUIRE(fd >= 0);
	(void)unlink(path);
	CHECK_EQ_INT(ptd_jsonw_init(&w, -1, 0), -EINVAL);
	/* Tiny buffer requests still hold one record. */
	REQUIRE(ptd_jsonw_init(&w, fd, 16) == 0);
	CHECK(w.cap >= PTD_JSON_MAX_RECORD);
	make_insn(&r, 0);
	for (int i = 0; i < 1000; i++) {
		r.u.insn.ip = (uint64_t)i;
		CHECK_EQ_INT(ptd_jsonw_put(&w, &r), 0);
	}
	CHECK_EQ_INT(ptd_jsonw_line(&w, "{\"type\":\"x\"}\n", 13), 0);
	CHECK_EQ_INT(ptd_jsonw_line(&w, "no newline", 10), -EINVAL);
	CHECK_EQ_INT(ptd_jsonw_fini(&w), 0);
	CHECK_EQ_U64(w.lines, 1001);
	n = slurp(fd, got, sizeof(got));
	CHECK_EQ_U64(w.bytes, n);
	for (char *p = got, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
		cJSON *j = cJSON_ParseWithLength(p, (size_t)(nl - p));

		CHECK(j != NULL);
		if (j && lines < 1000)
			CHECK_EQ_U64(jhex(j, "ip"), lines);
		cJSON_Delete(j);
		lines++;
	}
	CHECK_EQ_U64(lines, 1001);
	/* fini twice is harmless. */
	CHECK_EQ_INT(ptd_jsonw_fini(&w), 0);
	close(fd);
}

/* A line longer than the buffer goes straight through. */
static void test_writer_long_line(void)
{
	char path[] = "/tmp/ptd-test-jsonw-XXXXXX";
	int fd = mkstemp(path);
	size_t n = 3 * PTD_JSON_MAX_RECORD;
	char *big = malloc(n), *got = malloc(n + 64);
	struct ptd_jsonw w;

	REQUIRE(fd >= 0 && big && got);
	(void)unlink(path);
	memset(big, 'x', n);
	big[n - 1] = '\n';
	REQUIRE(ptd_jsonw_init(&w, fd, PTD_JSON_MAX_RECORD) == 0);
	CHECK_EQ_INT(ptd_jsonw_line(&w, "a\n", 2), 0);
	CHECK_EQ_INT(ptd_jsonw_line(&w, big, n), 0);
	CHECK_EQ_INT(ptd_jsonw_line(&w, "b\n", 2), 0);
	CHECK_EQ_INT(ptd_jsonw_fini(&w), 0);
	CHECK_EQ_U64(slurp(fd, got, n + 64), n + 4);
	CHECK(got[0] == 'a' && got[2] == 'x' && got[n + 2] == 'b');
	free(big);
	free(got);
	close(fd);
}

/* A write error is reported and stays. */
static void test_writer_error(void)
{
	int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	struct ptd_jsonw w;
	struct ptd_record r;
	int err = 0;

	if (fd < 0) {
		fprintf(stderr, "no /dev/full, sticky error not tested\n");
		return;
	}
	REQUIRE(ptd_jsonw_init(&w, fd, PTD_JSON_MAX_RECORD) == 0);
	make_insn(&r, 0);
	for (int i = 0; i < 100 && !err; i++)
		err = ptd_jsonw_put(&w, &r);
	CHECK_EQ_INT(err, -ENOSPC);
	CHECK_EQ_INT(ptd_jsonw_put(&w, &r), -ENOSPC);
	CHECK_EQ_INT(ptd_jsonw_line(&w, "x\n", 2), -ENOSPC);
	CHECK_EQ_INT(ptd_jsonw_flush(&w), -ENOSPC);
	CHECK_EQ_INT(ptd_jsonw_fini(&w), -ENOSPC);
	close(fd);
}

/* A pre-rendered body (ptd_json_insn_body, as the instruction cache makes
 * it) gives exactly the bytes of a line rendered field by field, through
 * ptd_json_record and through the writer's cached-head fast path, for short
 * and for over-long module names, with and without flags. */
static void test_insn_body(void)
{
	static const char *mods[] = { "/usr/bin/ls", "", "[vdso]", NULL };
	char *longmod = malloc(3 * PTD_JSON_MAX_RECORD + 1);

	REQUIRE(longmod);
	memset(longmod, 'm', 3 * PTD_JSON_MAX_RECORD);
	longmod[3 * PTD_JSON_MAX_RECORD] = 0;
	mods[3] = longmod;
	for (size_t m = 0; m < PTD_ARRAY_SIZE(mods); m++) {
		for (uint32_t flags = 0; flags < 3; flags++) {
			static char body[PTD_JSON_MAX_INSN_BODY];
			char a[PTD_JSON_MAX_RECORD], b[PTD_JSON_MAX_RECORD];
			struct ptd_record r;
			size_t na, nb, nbody;

			make_insn(&r, flags ? PTD_F_ENABLED << flags : 0);
			r.pid = r.tid = (m & 1) ? INT32_MIN : 7;
			r.u.insn.module = mods[m];
			/* a symbol (as long as the module) follows the
			 * body on both paths */
			r.u.insn.sym = flags == 2 ? mods[m] : NULL;
			r.u.insn.symoff = UINT64_MAX;
			na = ptd_json_record(a, sizeof(a), &r);
			nbody = ptd_json_insn_body(body, sizeof(body), &r.u.insn);
			CHECK(nbody > 0 && nbody <= PTD_JSON_MAX_INSN_BODY);
			CHECK_EQ_INT(ptd_json_insn_body(body, 16, &r.u.insn), 0);
			r.u.insn.json_body = body;
			r.u.insn.json_body_len = (uint32_t)nbody;
			nb = ptd_json_record(b, sizeof(b), &r);
			CHECK_EQ_INT(nb, na);
			CHECK(na && na <= PTD_JSON_MAX_RECORD && !memcmp(a, b, na));

			/* Every field but sym: the body's part before sym is
			 * copied, the same bytes as rendered without a body. */
			{
				static char nosym[PTD_JSON_MAX_INSN_BODY];
				struct ptd_rec_insn bare = r.u.insn;
				struct ptd_jsonr jr;
				struct ptd_record q = r;
				uint32_t fl = PTD_FIELDS_ALL &
					      ~PTD_FIELD_BIT(PTD_FIELD_SYM);
				char c1[PTD_JSON_MAX_RECORD];
				char c2[PTD_JSON_MAX_RECORD];
				size_t n1, n2;

				bare.sym = NULL;
				r.u.insn.json_body_nosym_len =
					(uint32_t)ptd_json_insn_body(
						nosym, sizeof(nosym), &bare);
				CHECK(!memcmp(nosym, body,
					      r.u.insn.json_body_nosym_len));
				ptd_jsonr_init(&jr, fl);
				n1 = ptd_jsonr_render(&jr, c1, &r);
				q.u.insn.json_body = NULL;
				ptd_jsonr_init(&jr, fl);
				n2 = ptd_jsonr_render(&jr, c2, &q);
				CHECK_EQ_INT(n1, n2);
				CHECK(n1 && n1 == n2 && !memcmp(c1, c2, n1));
				CHECK(!memmem(c1, n1, "\"sym\"", 5));
				r.u.insn.json_body_nosym_len = 0;
			}

			/* The writer's fast path, twice (cached head). */
			int p[2];
			REQUIRE(pipe(p) == 0);
			struct ptd_jsonw w;
			REQUIRE(ptd_jsonw_init(&w, p[1], 0) == 0);
			CHECK_EQ_INT(ptd_jsonw_put(&w, &r), 0);
			CHECK_EQ_INT(ptd_jsonw_put(&w, &r), 0);
			CHECK_EQ_INT(ptd_jsonw_fini(&w), 0);
			close(p[1]);
			char got[2 * PTD_JSON_MAX_RECORD];
			ssize_t n, tot = 0;
			while ((n = read(p[0], got + tot, sizeof(got) - (size_t)tot)) > 0)
				tot += n;
			close(p[0]);
			CHECK_EQ_INT(tot, 2 * (ssize_t)na);
			CHECK(tot == 2 * (ssize_t)na && !memcmp(got, a, na) &&
			      !memcmp(got + na, a, na));
		}
	}
	free(longmod);
}

/* Field names and their parser agree; anything else is refused. */
static void test_field_names(void)
{
	for (int f = 0; f < PTD_FIELD_N; f++) {
		const char *n = ptd_field_name((enum ptd_field)f);

		REQUIRE(n);
		CHECK(strlen(n) <= PTD_FIELD_NAME_MAX);
		CHECK_EQ_INT(ptd_field_parse(n), f);
		CHECK(strstr(ptd_field_list(), n) != NULL);
	}
	CHECK(ptd_field_name(PTD_FIELD_N) == NULL);
	CHECK_EQ_INT(ptd_field_parse("IP"), -1);
	CHECK_EQ_INT(ptd_field_parse("ip "), -1);
	CHECK_EQ_INT(ptd_field_parse(""), -1);
	CHECK_EQ_INT(ptd_field_parse("event"), -1);
	CHECK_EQ_INT(ptd_field_parse(NULL), -1);
}

/* Records of every kind and shape for the projection tests. */
static size_t field_records(struct ptd_record *rs, char *body, size_t cap)
{
	size_t n = 0, nb;

	make_insn(&rs[n++], 0);
	make_insn(&rs[n], PTD_F_ENABLED | PTD_F_SPECULATIVE);
	rs[n].has_tsc = rs[n].has_time = rs[n].has_wall = true;
	rs[n].tsc = 0x1234;
	rs[n].time = 0x5678;
	rs[n++].wall = 1795000000123456789ull;
	/* pre-rendered body, other thread */
	make_insn(&rs[n], PTD_F_DISABLED);
	rs[n].tid = 99;
	nb = ptd_json_insn_body(body, cap, &rs[n].u.insn);
	rs[n].u.insn.json_body = body;
	rs[n++].u.insn.json_body_len = (uint32_t)nb;
	/* tsc without a clock */
	make_insn(&rs[n], 0);
	rs[n].has_tsc = true;
	rs[n++].tsc = UINT64_MAX;
	head(&rs[n], PTD_REC_BLOCK);
	rs[n].u.block.ip = 0x401000;
	rs[n].u.block.end_ip = 0x401010;
	rs[n].u.block.modoff = 0x1000;
	rs[n].u.block.module = "/lib/x86_64-linux-gnu/libc.so.6";
	rs[n].u.block.isid = 2;
	rs[n].u.block.mode = ptem_64bit;
	rs[n].u.block.iclass = ptic_return;
	rs[n].u.block.ninsn = 5;
	rs[n].u.block.flags = 0;
	rs[n].has_tsc = rs[n].has_time = rs[n].has_wall = true;
	rs[n].tsc = 1;
	rs[n].time = 2;
	rs[n].wall = 3;
	n++;
	rs[n] = rs[n - 1];
	rs[n].u.block.flags = PTD_F_TRUNCATED | PTD_F_ENABLED;
	rs[n].u.block.size = 2;
	rs[n].u.block.raw[0] = 0x0f;
	rs[n++].u.block.raw[1] = 0x05;
	head(&rs[n], PTD_REC_EVENT);
	memset(&rs[n].u.event, 0, sizeof(rs[n].u.event));
	rs[n].u.event.ev.type = ptev_enabled;
	rs[n].u.event.ev.variant.enabled.ip = 0x401000;
	rs[n++].u.event.offset = 0x40;
	head(&rs[n], PTD_REC_ERROR);
	memset(&rs[n].u.error, 0, sizeof(rs[n].u.error));
	rs[n].u.error.code = -pte_nomap;
	rs[n].u.error.context = "decode";
	rs[n].u.error.ip_valid = true;
	rs[n++].u.error.ip = 0x1;
	return n;
}

/*
 * A projected line is the full line restricted to its fields, for every
 * single field, every pair and many other sets, rendered by a fresh
 * renderer and by one whose caches are warm from the records before.
 */
static void test_fields(void)
{
	static char body[PTD_JSON_MAX_INSN_BODY];
	char full[PTD_JSON_MAX_RECORD], a[PTD_JSON_MAX_RECORD],
		b[PTD_JSON_MAX_RECORD];
	struct ptd_record rs[16];
	size_t nr = field_records(rs, body, sizeof(body));
	uint32_t masks[512];
	size_t nm = 0;
	uint32_t x = 12345;
	unsigned fails = 0;

	for (unsigned i = 0; i < PTD_FIELD_N; i++)
		for (unsigned j = i; j < PTD_FIELD_N; j++)
			masks[nm++] = PTD_FIELD_BIT(i) | PTD_FIELD_BIT(j);
	while (nm < PTD_ARRAY_SIZE(masks)) {
		x = x * 1103515245u + 12345u;
		masks[nm++] = (x >> 8) & PTD_FIELDS_ALL;
	}
	masks[0] = PTD_FIELDS_ALL;
	for (size_t m = 0; m < nm && fails < 3; m++) {
		struct ptd_jsonr warm;

		ptd_jsonr_init(&warm, masks[m]);
		CHECK(warm.fields & PTD_FIELD_BIT(PTD_FIELD_TYPE));
		for (size_t k = 0; k < 2 * nr; k++) {
			const struct ptd_record *r = &rs[k % nr];
			struct ptd_jsonr fresh;
			size_t nf, na, nb;

			ptd_jsonr_init(&fresh, masks[m]);
			nf = ptd_json_record(full, sizeof(full), r);
			na = ptd_jsonr_render(&fresh, a, r);
			nb = ptd_jsonr_render(&warm, b, r);
			REQUIRE(nf && na && nb);
			CHECK(na == nb && !memcmp(a, b, na));
			CHECK_EQ_INT(a[na - 1], '\n');
			CHECK(!strncmp(a, "{\"type\":", 8));
			if (!fieldcmp_line(full, nf, a, na, masks[m]))
				fails++;
		}
		CHECK_EQ_U64(warm.renders, 2 * nr);
	}
	CHECK_EQ_INT(fails, 0);
	/* Every field is the full line, byte for byte; 0 means every field. */
	for (unsigned fl = 0; fl < 2; fl++) {
		struct ptd_jsonr jr;

		ptd_jsonr_init(&jr, fl ? PTD_FIELDS_ALL : 0);
		for (size_t k = 0; k < nr; k++) {
			size_t nf = ptd_json_record(full, sizeof(full), &rs[k]);
			size_t na = ptd_jsonr_render(&jr, a, &rs[k]);

			CHECK(nf == na && !memcmp(full, a, nf));
		}
	}
	/* The line a consumer of addresses and threads reads. */
	{
		struct ptd_jsonr jr;
		size_t n;

		ptd_jsonr_init(&jr, PTD_FIELD_BIT(PTD_FIELD_IP) |
					    PTD_FIELD_BIT(PTD_FIELD_TID));
		n = ptd_jsonr_render(&jr, a, &rs[1]);
		a[n] = '\0';
		CHECK_EQ_STR(a,
			       "{\"type\":\"insn\",\"tid\":1240,"
			       "\"ip\":\"0xffffffff81000000\"}\n");
		/* event records stay whole */
		n = ptd_jsonr_render(&jr, a, &rs[6]);
		nr = ptd_json_record(full, sizeof(full), &rs[6]);
		CHECK(n == nr && !memcmp(a, full, n));
	}
	CHECK_EQ_INT(ptd_jsonr_render(NULL, a, &rs[0]), 0);
}

/* The writer with a field set writes the projected lines. */
static void test_writer_fields(void)
{
	static char body[PTD_JSON_MAX_INSN_BODY];
	struct ptd_record rs[16];
	size_t nr = field_records(rs, body, sizeof(body));
	uint32_t fields = PTD_FIELD_BIT(PTD_FIELD_IP) |
			  PTD_FIELD_BIT(PTD_FIELD_FLAGS) |
			  PTD_FIELD_BIT(PTD_FIELD_WALL) |
			  PTD_FIELD_BIT(PTD_FIELD_MODULE);
	char want[16 * PTD_JSON_MAX_RECORD], got[16 * PTD_JSON_MAX_RECORD];
	size_t nw = 0, ng = 0;
	struct ptd_jsonr jr;
	struct ptd_jsonw w;
	ssize_t k;
	int p[2];

	ptd_jsonr_init(&jr, fields);
	for (size_t i = 0; i < nr; i++)
		nw += ptd_jsonr_render(&jr, want + nw, &rs[i]);
	REQUIRE(pipe(p) == 0);
	REQUIRE(ptd_jsonw_init(&w, p[1], 0) == 0);
	ptd_jsonw_set_fields(&w, fields);
	for (size_t i = 0; i < nr; i++)
		CHECK_EQ_INT(ptd_jsonw_put(&w, &rs[i]), 0);
	CHECK_EQ_INT(ptd_jsonw_fini(&w), 0);
	close(p[1]);
	while ((k = read(p[0], got + ng, sizeof(got) - ng)) > 0)
		ng += (size_t)k;
	close(p[0]);
	CHECK(ng == nw && !memcmp(got, want, nw));
}

/* Write @r twice through a writer into a pipe; return what came out. */
static size_t writer_output(struct ptd_jsonw *w, int rfd,
			    const struct ptd_record *r, char *out, size_t cap)
{
	ssize_t n;

	if (ptd_jsonw_put(w, r) || ptd_jsonw_flush(w))
		return 0;
	n = read(rfd, out, cap);
	return n > 0 ? (size_t)n : 0;
}

/* The writer's module cache: the same pointer with other bytes behind it is
 * a miss, and every line equals the stateless rendering. */
static void test_module_cache(void)
{
	char mod[64] = "/usr/lib/libone.so";
	char a[PTD_JSON_MAX_RECORD], got[PTD_JSON_MAX_RECORD];
	struct ptd_record r;
	struct ptd_jsonw w;
	int p[2];

	REQUIRE(pipe(p) == 0);
	REQUIRE(ptd_jsonw_init(&w, p[1], 0) == 0);
	head(&r, PTD_REC_BLOCK);
	r.u.block.ip = 0x401000;
	r.u.block.end_ip = 0x401020;
	r.u.block.ninsn = 3;
	r.u.block.module = mod;
	for (int round = 0; round < 4; round++) {
		size_t na, ng;

		if (round == 2)
			memcpy(mod, "/usr/lib/libtwo\"x.so", 21);
		na = ptd_json_record(a, sizeof(a), &r);
		ng = writer_output(&w, p[0], &r, got, sizeof(got));
		CHECK_EQ_INT(ng, na);
		CHECK(ng == na && !memcmp(a, got, na));
	}
	CHECK_CONTAINS(got, "libtwo\\\"x.so");
	CHECK_EQ_INT(ptd_jsonw_fini(&w), 0);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	RUN(test_insn);
	RUN(test_insn_flags);
	RUN(test_insn_body);
	RUN(test_block);
	RUN(test_module_cache);
	RUN(test_field_names);
	RUN(test_fields);
	RUN(test_writer_fields);
	RUN(test_events);
	RUN(test_error);
	RUN(test_escaping);
	RUN(test_string_fit);
	RUN(test_long_module);
	RUN(test_long_context);
	RUN(test_small_buffer);
	RUN(test_names);
	RUN(test_writer);
	RUN(test_writer_long_line);
	RUN(test_writer_error);
	return check_done();
}
