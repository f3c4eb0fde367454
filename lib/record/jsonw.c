/* SPDX-License-Identifier: MIT */
/*
 * The direct JSON-lines writer (record/jsonw.h, doc/protocol.md).
 *
 * Hot path rules: no printf, constant keys are memcpy'd literals, numbers
 * and hex are converted by hand.  Every record is first written into a
 * buffer of at least PTD_JSON_MAX_RECORD bytes; each variable-length part
 * (module name, error context and message) is written with a byte budget,
 * and every other part is bounded by a constant, so no line can exceed
 * PTD_JSON_MAX_RECORD (the unit test checks the worst case).
 */
#include "record/jsonw.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/diag.h"
#include "common/fileio.h"
#include "x86/insn.h"

/* Bytes of ,"sym":"NAME+0xOFF" at most: the name is cut to fit. */
#define SYM_BUDGET 520u
/* Bytes kept free after a record's module name for the fields that follow
 * it (offset, flags, size, raw, sym, tsc, time, wall, "}\n"): 30 + 124 +
 * 11 + 38 + SYM_BUDGET + 25 + 28 + 40 + 2 = 818 at most, rounded up. */
#define TAIL_RESERVE (320u + SYM_BUDGET)
/* Longest `{"type":"insn","pid":P,"tid":T` (50; a block's: 51). */
#define INSN_HEAD_MAX 64u
/* Longest run of fields between that head and a module name's value: an
 * insn's ,"ip" to ,"module": is 191 bytes, a block's 190. */
#define MODULE_PREFIX_MAX 192u
/* A module name's budget, quotes included: the same wherever it stands
 * (full line, pre-rendered body, projected line), so it is cut at the
 * same byte in all of them. */
#define MODULE_BUDGET                                                         \
	(PTD_JSON_MAX_RECORD - TAIL_RESERVE - INSN_HEAD_MAX - MODULE_PREFIX_MAX)
/* The fields an insn record's pre-rendered body holds. */
#define INSN_BODY_FIELDS                                                      \
	(PTD_FIELD_BIT(PTD_FIELD_IP) | PTD_FIELD_BIT(PTD_FIELD_SIZE) |        \
	 PTD_FIELD_BIT(PTD_FIELD_RAW) | PTD_FIELD_BIT(PTD_FIELD_ICLASS) |     \
	 PTD_FIELD_BIT(PTD_FIELD_MODE) | PTD_FIELD_BIT(PTD_FIELD_ISID) |      \
	 PTD_FIELD_BIT(PTD_FIELD_MODULE) | PTD_FIELD_BIT(PTD_FIELD_OFFSET) |  \
	 PTD_FIELD_BIT(PTD_FIELD_SYM))
#define HAS(fl, f) ((fl) & PTD_FIELD_BIT(PTD_FIELD_##f))
/* Budgets for the error record's strings, quotes included. */
#define CONTEXT_BUDGET 256u
#define MESSAGE_BUDGET 256u
#define DETAIL_BUDGET 1024u
/* Longest libipt/ptd constant name we copy (iclass, mode, event...). */
#define NAME_MAX_LEN 32u

static const char hexdig[16] = "0123456789abcdef";

#define PUT_LIT(p, lit)                                                       \
	do {                                                                  \
		memcpy((p), (lit), sizeof(lit) - 1);                          \
		(p) += sizeof(lit) - 1;                                       \
	} while (0)

/* "0x..." with quotes, no leading zeros. */
static char *put_hex64(char *p, uint64_t v)
{
	unsigned nd = v ? (unsigned)(64 - __builtin_clzll(v) + 3) / 4 : 1;

	*p++ = '"';
	*p++ = '0';
	*p++ = 'x';
	for (unsigned i = nd; i > 0; i--) {
		p[i - 1] = hexdig[v & 0xf];
		v >>= 4;
	}
	p += nd;
	*p++ = '"';
	return p;
}

static char *put_u64(char *p, uint64_t v)
{
	char tmp[20];
	unsigned n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *put_i64(char *p, int64_t v)
{
	if (v < 0) {
		*p++ = '-';
		/* Negate in unsigned arithmetic: INT64_MIN has no positive. */
		return put_u64(p, (uint64_t)0 - (uint64_t)v);
	}
	return put_u64(p, (uint64_t)v);
}

static char *put_bool(char *p, bool b)
{
	if (b)
		PUT_LIT(p, "true");
	else
		PUT_LIT(p, "false");
	return p;
}

/* A constant name (enum names): quoted, never escaped, bounded. */
static char *put_name(char *p, const char *s)
{
	size_t n;

	if (!s)
		s = "unknown";
	n = strnlen(s, NAME_MAX_LEN);
	*p++ = '"';
	memcpy(p, s, n);
	p += n;
	*p++ = '"';
	return p;
}

/* Raw bytes as a quoted lowercase hex string. */
static char *put_rawhex(char *p, const uint8_t *b, size_t n)
{
	*p++ = '"';
	for (size_t i = 0; i < n; i++) {
		*p++ = hexdig[b[i] >> 4];
		*p++ = hexdig[b[i] & 0xf];
	}
	*p++ = '"';
	return p;
}

/* Length of the valid UTF-8 multi-byte sequence at @s (@n bytes left,
 * s[0] >= 0x80), or 0 if it is not one (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF). */
static size_t utf8_len(const uint8_t *s, size_t n)
{
	uint8_t c = s[0], lo = 0x80, hi = 0xbf;
	size_t len;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (n < len)
		return 0;
	/* The second byte's range depends on the lead byte. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++) {
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	}
	return len;
}

/*
 * Escape @s (@n bytes) into [p, limit) without the quotes.  Stops at the
 * first unit (character or escape) that does not fit.  Returns the new end
 * and sets *ret_used to the input bytes consumed.
 */
static char *escape_into(char *p, const char *limit, const uint8_t *s,
			 size_t n, size_t *ret_used)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];

		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			if (p >= limit)
				break;
			*p++ = (char)c;
			i++;
			continue;
		}
		if (c == '"' || c == '\\') {
			if (limit - p < 2)
				break;
			*p++ = '\\';
			*p++ = (char)c;
			i++;
			continue;
		}
		if (c >= 0x80) {
			size_t len = utf8_len(s + i, n - i);

			if (len) {
				if ((size_t)(limit - p) < len)
					break;
				memcpy(p, s + i, len);
				p += len;
				i += len;
				continue;
			}
		}
		/* A control character or a byte that is not UTF-8: \u00XX
		 * of the byte, so the line stays valid JSON. */
		if (limit - p < 6)
			break;
		PUT_LIT(p, "\\u00");
		*p++ = hexdig[c >> 4];
		*p++ = hexdig[c & 0xf];
		i++;
	}
	*ret_used = i;
	return p;
}

/*
 * @s as a quoted JSON string of at most @budget bytes (@budget >= 5).  A
 * string that does not fit is cut at a character boundary and ends in
 * "...".
 */
static char *put_str_cut(char *p, size_t budget, const char *s, size_t n)
{
	const uint8_t *u = (const uint8_t *)s;
	char *start = p;
	size_t used;

	*p++ = '"';
	p = escape_into(p, start + budget - 1, u, n, &used);
	if (used < n) {
		p = escape_into(start + 1, start + budget - 4, u, n, &used);
		PUT_LIT(p, "...");
	}
	*p++ = '"';
	return p;
}

size_t ptd_json_string(char *buf, size_t cap, const char *s, size_t n)
{
	size_t used;
	char *p;

	if (!buf || cap < 2 || (!s && n))
		return 0;
	p = buf;
	*p++ = '"';
	p = escape_into(p, buf + cap - 1, (const uint8_t *)s, n, &used);
	if (used < n)
		return 0;
	*p++ = '"';
	return (size_t)(p - buf);
}

static char *put_flags(char *p, uint32_t flags)
{
	bool first = true;

	if (!(flags & ((1u << PTD_F_NFLAGS) - 1)))
		return p;
	PUT_LIT(p, ",\"flags\":[");
	for (unsigned bit = 0; bit < PTD_F_NFLAGS; bit++) {
		if (!(flags & (1u << bit)))
			continue;
		if (!first)
			*p++ = ',';
		first = false;
		p = put_name(p, ptd_flag_name(bit));
	}
	*p++ = ']';
	return p;
}

/* "type", "pid", "tid": common to all records (pid and tid as far as
 * @fl has them). */
static char *put_head(char *p, const char *type_lit, size_t type_len,
		      const struct ptd_record *r, uint32_t fl)
{
	memcpy(p, type_lit, type_len);
	p += type_len;
	if (HAS(fl, PID)) {
		PUT_LIT(p, ",\"pid\":");
		p = put_i64(p, r->pid);
	}
	if (HAS(fl, TID)) {
		PUT_LIT(p, ",\"tid\":");
		p = put_i64(p, r->tid);
	}
	return p;
}

/* The fields of @jr (NULL: every field). */
static uint32_t fields_of(const struct ptd_jsonr *jr)
{
	return jr ? jr->fields : PTD_FIELDS_ALL;
}

/* "YYYY-MM-DDTHH:MM:SS." of @sec seconds since the epoch (UTC) into @buf
 * (PTD_JSON_WALL_PREFIX bytes, no NUL).  Wall times are unsigned ns, so
 * years 1970..2554: always four digits. */
static void wall_prefix(char *buf, uint64_t sec)
{
	time_t t = (time_t)sec;
	struct tm tm;
	unsigned v[6];
	char *p = buf;

	memset(&tm, 0, sizeof(tm));
	(void)gmtime_r(&t, &tm);
	v[0] = (unsigned)tm.tm_year + 1900;
	v[1] = (unsigned)tm.tm_mon + 1;
	v[2] = (unsigned)tm.tm_mday;
	v[3] = (unsigned)tm.tm_hour;
	v[4] = (unsigned)tm.tm_min;
	v[5] = (unsigned)tm.tm_sec;
	*p++ = (char)('0' + v[0] / 1000 % 10);
	*p++ = (char)('0' + v[0] / 100 % 10);
	*p++ = (char)('0' + v[0] / 10 % 10);
	*p++ = (char)('0' + v[0] % 10);
	for (unsigned i = 1; i < 6; i++) {
		static const char sep[5] = { '-', '-', 'T', ':', ':' };

		*p++ = sep[i - 1];
		*p++ = (char)('0' + v[i] / 10 % 10);
		*p++ = (char)('0' + v[i] % 10);
	}
	*p = '.';	/* the 20th byte */
}

/* ,"wall":"2026-11-22T10:00:00.123456789Z".  The date and time of day are
 * rendered once per second through @w's cache (NULL: every time). */
static char *put_wall(char *p, uint64_t wall_ns, struct ptd_jsonr *w)
{
	uint64_t sec = wall_ns / 1000000000u;
	uint32_t ns = (uint32_t)(wall_ns % 1000000000u);
	char tmp[PTD_JSON_WALL_PREFIX];
	const char *pre = tmp;

	if (w && w->wall_valid && w->wall_sec == sec)
		pre = w->wall_prefix;
	else if (w) {
		wall_prefix(w->wall_prefix, sec);
		w->wall_sec = sec;
		w->wall_valid = true;
		pre = w->wall_prefix;
	} else
		wall_prefix(tmp, sec);
	PUT_LIT(p, ",\"wall\":\"");
	memcpy(p, pre, PTD_JSON_WALL_PREFIX);
	p += PTD_JSON_WALL_PREFIX;
	for (unsigned i = 9; i > 0; i--) {
		p[i - 1] = (char)('0' + ns % 10);
		ns /= 10;
	}
	p += 9;
	*p++ = 'Z';
	*p++ = '"';
	return p;
}

/* ,"sym":"NAME+0xOFF", the name cut (ending in "...") so that the whole
 * takes at most SYM_BUDGET bytes; nothing without a symbol. */
static char *put_sym(char *p, const char *sym, uint64_t off)
{
	/* ,"sym":" and "+0x", 16 digits, '"' */
	const size_t fixed = 8 + 3 + 16 + 1;
	size_t n, used;
	char *q;

	if (!sym)
		return p;
	n = strlen(sym);
	PUT_LIT(p, ",\"sym\":\"");
	q = p;
	p = escape_into(p, q + SYM_BUDGET - fixed, (const uint8_t *)sym, n,
			&used);
	if (used < n) {
		p = escape_into(q, q + SYM_BUDGET - fixed - 3,
				(const uint8_t *)sym, n, &used);
		PUT_LIT(p, "...");
	}
	/* put_hex64 writes "0x...": its opening quote becomes the '+' */
	q = p;
	p = put_hex64(p, off);
	*q = '+';
	return p;
}

/* The time fields (as far as @fl has them) and the end of the line. */
static char *put_tail(char *p, const struct ptd_record *r, uint32_t fl,
		      struct ptd_jsonr *w)
{
	if (r->has_tsc) {
		if (HAS(fl, TSC)) {
			PUT_LIT(p, ",\"tsc\":");
			p = put_hex64(p, r->tsc);
		}
		if (r->has_time && HAS(fl, TIME)) {
			PUT_LIT(p, ",\"time\":");
			p = put_hex64(p, r->time);
		}
		if (r->has_wall && HAS(fl, WALL))
			p = put_wall(p, r->wall, w);
	}
	*p++ = '}';
	*p++ = '\n';
	return p;
}

/* ,"module":"..." cut to MODULE_BUDGET bytes, wherever it stands. */
static char *put_module(char *p, const char *module)
{
	if (!module)
		module = "";
	PUT_LIT(p, ",\"module\":");
	return put_str_cut(p, MODULE_BUDGET, module, strlen(module));
}

/* put_module through @w's cache (NULL: none). */
static char *put_module_cached(char *p, const char *module,
			       struct ptd_jsonr *w)
{
	size_t n = module ? strlen(module) : 0;
	char *q;

	if (!w || !n || n >= sizeof(w->mod_raw))
		return put_module(p, module);
	if (w->mod_len == n && w->mod_ptr == module &&
	    !memcmp(w->mod_raw, module, n)) {
		memcpy(p, w->mod_esc, w->mod_esc_len);
		return p + w->mod_esc_len;
	}
	q = put_module(p, module);
	if ((size_t)(q - p) <= sizeof(w->mod_esc)) {
		memcpy(w->mod_esc, p, (size_t)(q - p));
		w->mod_esc_len = (size_t)(q - p);
		memcpy(w->mod_raw, module, n);
		w->mod_len = n;
		w->mod_ptr = module;
	}
	return q;
}

/* ,"size":N and ,"raw":"..." as far as @fl has them. */
static char *put_raw_field(char *p, uint8_t size, const uint8_t *raw,
			   uint32_t fl)
{
	if (HAS(fl, SIZE)) {
		PUT_LIT(p, ",\"size\":");
		p = put_u64(p, size);
	}
	if (HAS(fl, RAW)) {
		PUT_LIT(p, ",\"raw\":");
		p = put_rawhex(p, raw, size < pt_max_insn_size
					       ? size
					       : pt_max_insn_size);
	}
	return p;
}

/* ,"ip":... up to the "offset" value, as far as @fl has them; the module
 * name through @w's cache (NULL: none). */
static char *put_insn_body(char *p, const struct ptd_rec_insn *in,
			   uint32_t fl, struct ptd_jsonr *w)
{
	if (HAS(fl, IP)) {
		PUT_LIT(p, ",\"ip\":");
		p = put_hex64(p, in->ip);
	}
	p = put_raw_field(p, in->size, in->raw, fl);
	if (HAS(fl, ICLASS)) {
		PUT_LIT(p, ",\"iclass\":");
		p = put_name(p, ptd_iclass_name(in->iclass));
	}
	if (HAS(fl, MODE)) {
		PUT_LIT(p, ",\"mode\":");
		p = put_name(p, ptd_mode_name(in->mode));
	}
	if (HAS(fl, ISID)) {
		PUT_LIT(p, ",\"isid\":");
		p = put_i64(p, in->isid);
	}
	if (HAS(fl, MODULE))
		p = put_module_cached(p, in->module, w);
	if (HAS(fl, OFFSET)) {
		PUT_LIT(p, ",\"offset\":");
		p = put_hex64(p, in->modoff);
	}
	/* the symbol depends on the instruction only: part of the body */
	if (HAS(fl, SYM))
		p = put_sym(p, in->sym, in->symoff);
	return p;
}

/* The body, copied if pre-rendered and every field of it is wanted --
 * or every one but sym, which comes last: then its part before sym (a
 * daemon's subscribers that did not ask for symbols, of a session that
 * has them). */
static char *put_insn_body_or_copy(char *p, const struct ptd_rec_insn *in,
				   uint32_t fl, struct ptd_jsonr *w)
{
	uint32_t body = fl & INSN_BODY_FIELDS;

	if (in->json_body && in->json_body_len <= PTD_JSON_MAX_INSN_BODY) {
		if (body == INSN_BODY_FIELDS) {
			memcpy(p, in->json_body, in->json_body_len);
			return p + in->json_body_len;
		}
		if (body == (INSN_BODY_FIELDS &
			     ~PTD_FIELD_BIT(PTD_FIELD_SYM)) &&
		    in->json_body_nosym_len &&
		    in->json_body_nosym_len <= in->json_body_len) {
			memcpy(p, in->json_body, in->json_body_nosym_len);
			return p + in->json_body_nosym_len;
		}
	}
	return put_insn_body(p, in, fl, w);
}

/* An insn record's head through @w's cache (NULL: none): it stays the
 * same while pid and tid do. */
static char *put_insn_head(char *p, const struct ptd_record *r, uint32_t fl,
			   struct ptd_jsonr *w)
{
	if (!w)
		return put_head(p, "{\"type\":\"insn\"", 14, r, fl);
	if (!w->insn_head_len || w->head_pid != r->pid ||
	    w->head_tid != r->tid) {
		char *e = put_head(w->insn_head, "{\"type\":\"insn\"", 14, r,
				   fl);

		w->insn_head_len = (size_t)(e - w->insn_head);
		w->head_pid = r->pid;
		w->head_tid = r->tid;
	}
	memcpy(p, w->insn_head, w->insn_head_len);
	return p + w->insn_head_len;
}

static char *put_insn(char *p, const struct ptd_record *r,
		      struct ptd_jsonr *w)
{
	const struct ptd_rec_insn *in = &r->u.insn;
	uint32_t fl = fields_of(w);

	p = put_insn_head(p, r, fl, w);
	p = put_insn_body_or_copy(p, in, fl, w);
	if (HAS(fl, FLAGS))
		p = put_flags(p, in->flags);
	return put_tail(p, r, fl, w);
}

size_t ptd_json_insn_body(char *buf, size_t cap, const struct ptd_rec_insn *in)
{
	char *p;

	if (!buf || !in || cap < PTD_JSON_MAX_INSN_BODY)
		return 0;
	/* After the module's budget come only ,"offset":"0x" and 16 digits
	 * (30 bytes) and the symbol (SYM_BUDGET). */
	_Static_assert(MODULE_PREFIX_MAX + MODULE_BUDGET + 30 + SYM_BUDGET <=
			       PTD_JSON_MAX_INSN_BODY,
		       "the module budget bounds a body by PTD_JSON_MAX_INSN_BODY");
	p = put_insn_body(buf, in, PTD_FIELDS_ALL, NULL);
	return (size_t)(p - buf);
}

static char *put_block(char *p, const struct ptd_record *r,
		       struct ptd_jsonr *w)
{
	const struct ptd_rec_block *b = &r->u.block;
	uint32_t fl = fields_of(w);

	p = put_head(p, "{\"type\":\"block\"", 15, r, fl);
	if (HAS(fl, IP)) {
		PUT_LIT(p, ",\"ip\":");
		p = put_hex64(p, b->ip);
	}
	if (HAS(fl, END_IP)) {
		PUT_LIT(p, ",\"end_ip\":");
		p = put_hex64(p, b->end_ip);
	}
	if (HAS(fl, NINSN)) {
		PUT_LIT(p, ",\"ninsn\":");
		p = put_u64(p, b->ninsn);
	}
	if (HAS(fl, ICLASS)) {
		PUT_LIT(p, ",\"iclass\":");
		p = put_name(p, ptd_iclass_name(b->iclass));
	}
	if (HAS(fl, MODE)) {
		PUT_LIT(p, ",\"mode\":");
		p = put_name(p, ptd_mode_name(b->mode));
	}
	if (HAS(fl, ISID)) {
		PUT_LIT(p, ",\"isid\":");
		p = put_i64(p, b->isid);
	}
	if (HAS(fl, MODULE))
		p = put_module_cached(p, b->module, w);
	if (HAS(fl, OFFSET)) {
		PUT_LIT(p, ",\"offset\":");
		p = put_hex64(p, b->modoff);
	}
	if (HAS(fl, SYM))
		p = put_sym(p, b->sym, b->symoff);
	if (HAS(fl, FLAGS))
		p = put_flags(p, b->flags);
	if (b->flags & PTD_F_TRUNCATED)
		p = put_raw_field(p, b->size, b->raw, fl);
	return put_tail(p, r, fl, w);
}

/* ,"ip":"0x.." unless the event's ip is suppressed. */
static char *put_event_ip(char *p, const struct pt_event *ev, uint64_t ip)
{
	if (ev->ip_suppressed)
		return p;
	PUT_LIT(p, ",\"ip\":");
	return put_hex64(p, ip);
}

/* The fields particular to each event type. */
static char *put_event_fields(char *p, const struct pt_event *ev)
{
	switch (ev->type) {
	case ptev_enabled:
		p = put_event_ip(p, ev, ev->variant.enabled.ip);
		PUT_LIT(p, ",\"resumed\":");
		return put_bool(p, ev->variant.enabled.resumed);
	case ptev_disabled:
		return put_event_ip(p, ev, ev->variant.disabled.ip);
	case ptev_async_disabled:
		p = put_event_ip(p, ev, ev->variant.async_disabled.ip);
		PUT_LIT(p, ",\"at\":");
		return put_hex64(p, ev->variant.async_disabled.at);
	case ptev_async_branch:
		p = put_event_ip(p, ev, ev->variant.async_branch.to);
		PUT_LIT(p, ",\"from\":");
		return put_hex64(p, ev->variant.async_branch.from);
	case ptev_paging:
		PUT_LIT(p, ",\"cr3\":");
		p = put_hex64(p, ev->variant.paging.cr3);
		PUT_LIT(p, ",\"non_root\":");
		return put_bool(p, ev->variant.paging.non_root);
	case ptev_async_paging:
		p = put_event_ip(p, ev, ev->variant.async_paging.ip);
		PUT_LIT(p, ",\"cr3\":");
		p = put_hex64(p, ev->variant.async_paging.cr3);
		PUT_LIT(p, ",\"non_root\":");
		return put_bool(p, ev->variant.async_paging.non_root);
	case ptev_overflow:
		return put_event_ip(p, ev, ev->variant.overflow.ip);
	case ptev_exec_mode:
		p = put_event_ip(p, ev, ev->variant.exec_mode.ip);
		PUT_LIT(p, ",\"mode\":");
		return put_name(p, ptd_mode_name(ev->variant.exec_mode.mode));
	case ptev_tsx:
		p = put_event_ip(p, ev, ev->variant.tsx.ip);
		PUT_LIT(p, ",\"speculative\":");
		p = put_bool(p, ev->variant.tsx.speculative);
		PUT_LIT(p, ",\"aborted\":");
		return put_bool(p, ev->variant.tsx.aborted);
	case ptev_stop:
		return p;
	case ptev_vmcs:
		PUT_LIT(p, ",\"base\":");
		return put_hex64(p, ev->variant.vmcs.base);
	case ptev_async_vmcs:
		p = put_event_ip(p, ev, ev->variant.async_vmcs.ip);
		PUT_LIT(p, ",\"base\":");
		return put_hex64(p, ev->variant.async_vmcs.base);
	case ptev_exstop:
		return put_event_ip(p, ev, ev->variant.exstop.ip);
	case ptev_mwait:
		p = put_event_ip(p, ev, ev->variant.mwait.ip);
		PUT_LIT(p, ",\"hints\":");
		p = put_u64(p, ev->variant.mwait.hints);
		PUT_LIT(p, ",\"ext\":");
		return put_u64(p, ev->variant.mwait.ext);
	case ptev_pwre:
		PUT_LIT(p, ",\"state\":");
		p = put_u64(p, ev->variant.pwre.state);
		PUT_LIT(p, ",\"sub_state\":");
		p = put_u64(p, ev->variant.pwre.sub_state);
		PUT_LIT(p, ",\"hw\":");
		return put_bool(p, ev->variant.pwre.hw);
	case ptev_pwrx:
		PUT_LIT(p, ",\"last\":");
		p = put_u64(p, ev->variant.pwrx.last);
		PUT_LIT(p, ",\"deepest\":");
		p = put_u64(p, ev->variant.pwrx.deepest);
		PUT_LIT(p, ",\"interrupt\":");
		p = put_bool(p, ev->variant.pwrx.interrupt);
		PUT_LIT(p, ",\"store\":");
		p = put_bool(p, ev->variant.pwrx.store);
		PUT_LIT(p, ",\"autonomous\":");
		return put_bool(p, ev->variant.pwrx.autonomous);
	case ptev_ptwrite:
		p = put_event_ip(p, ev, ev->variant.ptwrite.ip);
		PUT_LIT(p, ",\"size\":");
		p = put_u64(p, ev->variant.ptwrite.size);
		PUT_LIT(p, ",\"payload\":");
		return put_hex64(p, ev->variant.ptwrite.payload);
	case ptev_tick:
		return put_event_ip(p, ev, ev->variant.tick.ip);
	case ptev_cbr:
		PUT_LIT(p, ",\"ratio\":");
		return put_u64(p, ev->variant.cbr.ratio);
	case ptev_mnt:
		PUT_LIT(p, ",\"payload\":");
		return put_hex64(p, ev->variant.mnt.payload);
	}
	return p;
}

/* Event and error records are written whole whatever the fields
 * (record.h, enum ptd_field). */
static char *put_event(char *p, const struct ptd_record *r,
		       struct ptd_jsonr *w)
{
	const struct pt_event *ev = &r->u.event.ev;

	p = put_head(p, "{\"type\":\"event\"", 15, r, PTD_FIELDS_ALL);
	PUT_LIT(p, ",\"event\":");
	p = put_name(p, ptd_event_name(ev->type));
	PUT_LIT(p, ",\"offset\":");
	p = put_hex64(p, r->u.event.offset);
	p = put_event_fields(p, ev);
	if (ev->status_update)
		PUT_LIT(p, ",\"status_update\":true");
	if (ev->lost_mtc) {
		PUT_LIT(p, ",\"lost_mtc\":");
		p = put_u64(p, ev->lost_mtc);
	}
	if (ev->lost_cyc) {
		PUT_LIT(p, ",\"lost_cyc\":");
		p = put_u64(p, ev->lost_cyc);
	}
	return put_tail(p, r, PTD_FIELDS_ALL, w);
}

/* The C name of a ptd domain error code; NULL if it is not one. */
static const char *ptd_err_cname(enum ptd_errno e)
{
	switch (e) {
	case PTD_EFORMAT:
		return "PTD_EFORMAT";
	case PTD_ETRUNC:
		return "PTD_ETRUNC";
	case PTD_ELIMIT:
		return "PTD_ELIMIT";
	case PTD_ENOPT:
		return "PTD_ENOPT";
	case PTD_EVERSION:
		return "PTD_EVERSION";
	case PTD_ECHECKSUM:
		return "PTD_ECHECKSUM";
	case PTD_ENOIMAGE:
		return "PTD_ENOIMAGE";
	case PTD_EDECODE:
		return "PTD_EDECODE";
	case PTD_EUNSUPPORTED:
		return "PTD_EUNSUPPORTED";
	case PTD_ENOTREG:
		return "PTD_ENOTREG";
	case PTD_EIDENTITY:
		return "PTD_EIDENTITY";
	case PTD_ERR_MAX:
		break;
	}
	return NULL;
}

/* "error" name: libipt's name ("nomap"), or for ptd/errno codes the C
 * name ("PTD_ENOIMAGE", "ENOENT"; "errno" if glibc has none). */
static const char *error_name(const struct ptd_rec_error *e)
{
	int c = e->code < 0 ? -e->code : e->code;
	const char *s;

	if (!e->ptd_code)
		return ptd_pterr_name(e->code);
	if (c >= PTD_ERR_BASE && c < PTD_ERR_MAX) {
		s = ptd_err_cname((enum ptd_errno)c);
		if (s)
			return s;
	}
	s = strerrorname_np(c);
	return s ? s : "errno";
}

static const char *error_message(const struct ptd_rec_error *e)
{
	if (!e->ptd_code)
		return pt_errstr(pt_errcode(e->code < 0 ? e->code : -e->code));
	return ptd_strerror(e->code);
}

static char *put_error(char *p, const struct ptd_record *r,
		       struct ptd_jsonr *w)
{
	const struct ptd_rec_error *e = &r->u.error;
	const char *msg = error_message(e);
	const char *ctx = e->context ? e->context : "";

	p = put_head(p, "{\"type\":\"error\"", 15, r, PTD_FIELDS_ALL);
	PUT_LIT(p, ",\"offset\":");
	p = put_hex64(p, e->offset);
	if (e->ip_valid) {
		PUT_LIT(p, ",\"ip\":");
		p = put_hex64(p, e->ip);
	}
	PUT_LIT(p, ",\"error\":");
	p = put_name(p, error_name(e));
	PUT_LIT(p, ",\"code\":");
	p = put_i64(p, e->code);
	PUT_LIT(p, ",\"message\":");
	msg = msg ? msg : "";
	p = put_str_cut(p, MESSAGE_BUDGET, msg, strlen(msg));
	PUT_LIT(p, ",\"context\":");
	p = put_str_cut(p, CONTEXT_BUDGET, ctx, strlen(ctx));
	PUT_LIT(p, ",\"skipped\":");
	p = put_u64(p, e->skipped);
	if (e->detail) {
		PUT_LIT(p, ",\"detail\":");
		p = put_str_cut(p, DETAIL_BUDGET, e->detail,
				strlen(e->detail));
	}
	return put_tail(p, r, PTD_FIELDS_ALL, w);
}

/* Call records are written whole whatever the fields, as events, but for
 * "sym": only where the fields have it (a subscriber that asked for
 * symbols), as on insn records. */
static char *put_call(char *p, const struct ptd_record *r,
		      struct ptd_jsonr *w)
{
	const struct ptd_rec_call *c = &r->u.call;

	switch (c->kind) {
	case PTD_CALL_CALL:
		p = put_head(p, "{\"type\":\"call\"", 14, r, PTD_FIELDS_ALL);
		PUT_LIT(p, ",\"depth\":");
		p = put_u64(p, c->depth);
		PUT_LIT(p, ",\"site\":");
		p = put_hex64(p, c->from);
		PUT_LIT(p, ",\"target\":");
		p = put_hex64(p, c->to);
		if (HAS(fields_of(w), SYM))
			p = put_sym(p, c->sym, c->symoff);
		if (c->flags & PTD_CALL_F_TAIL)
			PUT_LIT(p, ",\"tail\":true");
		if (c->flags & PTD_CALL_F_ASYNC)
			PUT_LIT(p, ",\"async\":true");
		break;
	case PTD_CALL_RETURN:
		p = put_head(p, "{\"type\":\"return\"", 16, r,
			     PTD_FIELDS_ALL);
		PUT_LIT(p, ",\"depth\":");
		p = put_u64(p, c->depth);
		PUT_LIT(p, ",\"frames\":");
		p = put_u64(p, c->frames);
		PUT_LIT(p, ",\"from\":");
		p = put_hex64(p, c->from);
		PUT_LIT(p, ",\"to\":");
		p = put_hex64(p, c->to);
		if (HAS(fields_of(w), SYM))
			p = put_sym(p, c->sym, c->symoff);
		if (c->flags & PTD_CALL_F_SIGRETURN)
			PUT_LIT(p, ",\"sigreturn\":true");
		if (c->flags & PTD_CALL_F_UNWIND)
			PUT_LIT(p, ",\"unwind\":true");
		if (c->flags & PTD_CALL_F_UNMATCHED)
			PUT_LIT(p, ",\"unmatched\":true");
		break;
	case PTD_CALL_RESET:
		p = put_head(p, "{\"type\":\"stack_reset\"", 21, r,
			     PTD_FIELDS_ALL);
		PUT_LIT(p, ",\"depth\":");
		p = put_u64(p, c->depth);
		PUT_LIT(p, ",\"reason\":");
		p = put_str_cut(p, CONTEXT_BUDGET, c->reason ? c->reason : "",
				c->reason ? strlen(c->reason) : 0);
		break;
	}
	return put_tail(p, r, PTD_FIELDS_ALL, w);
}

/* ,"map":N where code ran from the Nth mapping of its section, N > 1
 * (record.h, ptd_rec_insn.gen): the same isid at the same address, new
 * code to the counter table.  At most 17 bytes, in the room kept for an
 * insn record's flags, which first_exec and counters lines have not. */
static char *put_map(char *p, uint32_t gen)
{
	if (gen <= 1)
		return p;
	PUT_LIT(p, ",\"map\":");
	return put_u64(p, gen);
}

/* A first_exec record: the instruction's fields as its insn record has
 * them (the pre-rendered body copied where it can be), without flags,
 * written whole whatever the fields but for "sym": only where the fields
 * have it, as on call records. */
static char *put_first_exec(char *p, const struct ptd_record *r,
			    struct ptd_jsonr *w)
{
	uint32_t fl = INSN_BODY_FIELDS & ~PTD_FIELD_BIT(PTD_FIELD_SYM);

	fl |= fields_of(w) & PTD_FIELD_BIT(PTD_FIELD_SYM);
	p = put_head(p, "{\"type\":\"first_exec\"", 20, r, PTD_FIELDS_ALL);
	p = put_insn_body_or_copy(p, &r->u.insn, fl, w);
	p = put_map(p, r->u.insn.gen);
	return put_tail(p, r, PTD_FIELDS_ALL, w);
}

/* The counters fields before a counted item's own: 17 + 22 + 28 + 20 +
 * 30 bytes at most, taken from its module's budget. */
#define COUNTERS_PREFIX_MAX 128u

static char *put_counters_of(char *p, enum ptd_counters_of of)
{
	switch (of) {
	case PTD_COUNTERS_TOTAL:
		PUT_LIT(p, ",\"of\":\"total\"");
		break;
	case PTD_COUNTERS_INSN:
		PUT_LIT(p, ",\"of\":\"insn\"");
		break;
	case PTD_COUNTERS_BLOCK:
		PUT_LIT(p, ",\"of\":\"block\"");
		break;
	case PTD_COUNTERS_FUNC:
		PUT_LIT(p, ",\"of\":\"function\"");
		break;
	}
	return p;
}

/* A counters record, whole (fields do not apply), "sym" and "function"
 * names only where the fields have sym; pid and tid only when set (0:
 * counts of more than one). */
static char *put_counters(char *p, const struct ptd_record *r,
			  struct ptd_jsonr *w)
{
	const struct ptd_rec_counters *c = &r->u.counters;
	const struct ptd_rec_insn *in = &c->insn;
	bool sym = HAS(fields_of(w), SYM);
	uint32_t fl = PTD_FIELD_BIT(PTD_FIELD_TYPE);

	if (r->pid)
		fl |= PTD_FIELD_BIT(PTD_FIELD_PID);
	if (r->tid)
		fl |= PTD_FIELD_BIT(PTD_FIELD_TID);
	p = put_head(p, "{\"type\":\"counters\"", 18, r, fl);
	p = put_counters_of(p, c->of);
	if (c->of != PTD_COUNTERS_TOTAL) {
		PUT_LIT(p, ",\"rank\":");
		p = put_u64(p, c->rank);
	}
	PUT_LIT(p, ",\"count\":");
	p = put_hex64(p, c->count);
	if (c->of != PTD_COUNTERS_INSN) {
		PUT_LIT(p, ",\"ninsn\":");
		p = put_u64(p, c->ninsn);
	}
	switch (c->of) {
	case PTD_COUNTERS_TOTAL:
		PUT_LIT(p, ",\"uncounted\":");
		p = put_hex64(p, c->uncounted);
		break;
	case PTD_COUNTERS_INSN:
	case PTD_COUNTERS_BLOCK:
		PUT_LIT(p, ",\"ip\":");
		p = put_hex64(p, in->ip);
		if (c->of == PTD_COUNTERS_BLOCK) {
			PUT_LIT(p, ",\"end_ip\":");
			p = put_hex64(p, c->end_ip);
		} else {
			p = put_raw_field(p, in->size, in->raw,
					  PTD_FIELDS_ALL);
			PUT_LIT(p, ",\"iclass\":");
			p = put_name(p, ptd_iclass_name(in->iclass));
		}
		PUT_LIT(p, ",\"mode\":");
		p = put_name(p, ptd_mode_name(in->mode));
		PUT_LIT(p, ",\"isid\":");
		p = put_i64(p, in->isid);
		PUT_LIT(p, ",\"module\":");
		p = put_str_cut(p, MODULE_BUDGET - COUNTERS_PREFIX_MAX,
				in->module ? in->module : "",
				in->module ? strlen(in->module) : 0);
		PUT_LIT(p, ",\"offset\":");
		p = put_hex64(p, in->modoff);
		if (sym)
			p = put_sym(p, in->sym, in->symoff);
		p = put_map(p, in->gen);
		break;
	case PTD_COUNTERS_FUNC:
		PUT_LIT(p, ",\"module\":");
		p = put_str_cut(p, MODULE_BUDGET - COUNTERS_PREFIX_MAX,
				in->module ? in->module : "",
				in->module ? strlen(in->module) : 0);
		if (sym && in->sym) {
			PUT_LIT(p, ",\"function\":");
			p = put_str_cut(p, SYM_BUDGET, in->sym,
					strlen(in->sym));
		}
		break;
	}
	return put_tail(p, r, PTD_FIELDS_ALL, w);
}

/* A trace or trace_withdrawn record, whole; "sym" only where the fields
 * have it.  At most 128 blocks of 21 bytes, a module cut to 1024 bytes
 * and the symbol's SYM_BUDGET: well within PTD_JSON_MAX_RECORD. */
#define TRACE_MODULE_BUDGET 1024u
_Static_assert(PTD_TRACES_JSON_MAX_BLOCKS * 21u + TRACE_MODULE_BUDGET +
			       SYM_BUDGET + 400u + TAIL_RESERVE <=
		       PTD_JSON_MAX_RECORD,
	       "a trace record fits the record bound");

static char *put_trace(char *p, const struct ptd_record *r,
		       struct ptd_jsonr *w)
{
	const struct ptd_rec_trace *t = &r->u.trace;
	uint32_t n = t->nblocks;

	if (r->type == PTD_REC_TRACE)
		p = put_head(p, "{\"type\":\"trace\"", 15, r, PTD_FIELDS_ALL);
	else
		p = put_head(p, "{\"type\":\"trace_withdrawn\"", 25, r,
			     PTD_FIELDS_ALL);
	PUT_LIT(p, ",\"id\":");
	p = put_u64(p, t->id);
	PUT_LIT(p, ",\"head\":");
	p = put_hex64(p, t->head);
	if (r->type == PTD_REC_TRACE_WITHDRAWN) {
		PUT_LIT(p, ",\"reason\":");
		p = put_name(p, t->reason ? t->reason : "");
		PUT_LIT(p, ",\"at\":");
		p = put_hex64(p, t->at);
		return put_tail(p, r, PTD_FIELDS_ALL, w);
	}
	PUT_LIT(p, ",\"mode\":");
	p = put_name(p, ptd_mode_name(t->mode));
	PUT_LIT(p, ",\"isid\":");
	p = put_i64(p, t->isid);
	PUT_LIT(p, ",\"module\":");
	p = put_str_cut(p, TRACE_MODULE_BUDGET, t->module ? t->module : "",
			t->module ? strlen(t->module) : 0);
	PUT_LIT(p, ",\"offset\":");
	p = put_hex64(p, t->modoff);
	if (HAS(fields_of(w), SYM))
		p = put_sym(p, t->sym, t->symoff);
	PUT_LIT(p, ",\"ninsn\":");
	p = put_u64(p, t->ninsn);
	PUT_LIT(p, ",\"nblocks\":");
	p = put_u64(p, n);
	PUT_LIT(p, ",\"blocks\":[");
	if (n > PTD_TRACES_JSON_MAX_BLOCKS)
		n = PTD_TRACES_JSON_MAX_BLOCKS;
	for (uint32_t i = 0; t->blocks && i < n; i++) {
		if (i)
			*p++ = ',';
		p = put_hex64(p, t->blocks[i]);
	}
	*p++ = ']';
	PUT_LIT(p, ",\"end\":");
	p = put_name(p, t->end ? t->end : "");
	return put_tail(p, r, PTD_FIELDS_ALL, w);
}

/* Write @r into @buf, which has room for PTD_JSON_MAX_RECORD bytes: the
 * fields of @w and through its caches, or every field without caches
 * (@w NULL). */
static size_t write_record(char *buf, const struct ptd_record *r,
			   struct ptd_jsonr *w)
{
	char *p = buf;

	switch (r->type) {
	case PTD_REC_INSN:
		p = put_insn(p, r, w);
		break;
	case PTD_REC_BLOCK:
		p = put_block(p, r, w);
		break;
	case PTD_REC_EVENT:
		p = put_event(p, r, w);
		break;
	case PTD_REC_ERROR:
		p = put_error(p, r, w);
		break;
	case PTD_REC_CALL:
		p = put_call(p, r, w);
		break;
	case PTD_REC_FIRST_EXEC:
		p = put_first_exec(p, r, w);
		break;
	case PTD_REC_COUNTERS:
		p = put_counters(p, r, w);
		break;
	case PTD_REC_TRACE:
	case PTD_REC_TRACE_WITHDRAWN:
		p = put_trace(p, r, w);
		break;
	case PTD_REC_NTYPES:
	case PTD_REC_IMAGE:
		return 0;
	}
	return (size_t)(p - buf);
}

size_t ptd_json_record(char *buf, size_t cap, const struct ptd_record *r)
{
	char tmp[PTD_JSON_MAX_RECORD];
	size_t n;

	if (!buf || !r)
		return 0;
	if (cap >= PTD_JSON_MAX_RECORD)
		return write_record(buf, r, NULL);
	/* A small buffer: write aside, copy if it fits. */
	n = write_record(tmp, r, NULL);
	if (n > cap)
		return 0;
	memcpy(buf, tmp, n);
	return n;
}

int ptd_jsonw_init(struct ptd_jsonw *w, int fd, size_t bufsize)
{
	if (!w || fd < 0)
		return -EINVAL;
	if (!bufsize)
		bufsize = 256u * 1024u;
	/* Room for at least one record of the longest kind. */
	if (bufsize < PTD_JSON_MAX_RECORD)
		bufsize = PTD_JSON_MAX_RECORD;
	memset(w, 0, sizeof(*w));
	ptd_jsonr_init(&w->jr, 0);
	w->fd = fd;
	w->buf = malloc(bufsize);
	if (!w->buf)
		return -ENOMEM;
	w->cap = bufsize;
	return 0;
}

int ptd_jsonw_flush(struct ptd_jsonw *w)
{
	int err;

	if (!w)
		return -EINVAL;
	if (w->err || !w->len) {
		w->len = 0;
		return w->err;
	}
	err = ptd_write_all(w->fd, w->buf, w->len);
	if (err < 0)
		w->err = err;
	else
		w->bytes += w->len;
	w->len = 0;
	return w->err;
}

void ptd_jsonr_init(struct ptd_jsonr *jr, uint32_t fields)
{
	memset(jr, 0, sizeof(*jr));
	jr->fields = (fields ? fields & PTD_FIELDS_ALL : PTD_FIELDS_ALL) |
		     PTD_FIELD_BIT(PTD_FIELD_TYPE);
}

size_t ptd_jsonr_render(struct ptd_jsonr *jr, char *buf,
			const struct ptd_record *r)
{
	size_t n;

	if (!jr || !buf || !r)
		return 0;
	n = write_record(buf, r, jr);
	if (n)
		jr->renders++;
	return n;
}

void ptd_jsonw_set_fields(struct ptd_jsonw *w, uint32_t fields)
{
	if (w)
		ptd_jsonr_init(&w->jr, fields);
}

int ptd_jsonw_put(struct ptd_jsonw *w, const struct ptd_record *r)
{
	size_t n;

	if (!w || !r || !w->buf)
		return -EINVAL;
	if (w->err)
		return w->err;
	if (w->cap - w->len < PTD_JSON_MAX_RECORD && ptd_jsonw_flush(w) < 0)
		return w->err;
	n = ptd_jsonr_render(&w->jr, w->buf + w->len, r);
	if (!n)
		return -EINVAL;
	w->len += n;
	w->lines++;
	return 0;
}

int ptd_jsonw_line(struct ptd_jsonw *w, const char *line, size_t n)
{
	if (!w || !line || !w->buf || !n || line[n - 1] != '\n')
		return -EINVAL;
	if (w->err)
		return w->err;
	if (w->cap - w->len < n && ptd_jsonw_flush(w) < 0)
		return w->err;
	if (n > w->cap) {
		/* Longer than the whole buffer: straight through. */
		int err = ptd_write_all(w->fd, line, n);

		if (err < 0)
			return w->err = err;
		w->bytes += n;
	} else {
		memcpy(w->buf + w->len, line, n);
		w->len += n;
	}
	w->lines++;
	return 0;
}

int ptd_jsonw_fini(struct ptd_jsonw *w)
{
	int err;

	if (!w)
		return -EINVAL;
	if (!w->buf)
		return w->err;
	err = ptd_jsonw_flush(w);
	free(w->buf);
	w->buf = NULL;
	w->cap = 0;
	return err;
}
