/* SPDX-License-Identifier: MIT */
/*
 * Binary framing of record streams (binframe.h; doc/protocol.md, "Binary
 * framing", has the byte layout).
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bytes.h"
#include "record/binframe.h"

#define HAS(fl, f) (((fl) & PTD_FIELD_BIT(PTD_FIELD_##f)) != 0)
#define CLOCK_FIELDS                                                          \
	(PTD_FIELD_BIT(PTD_FIELD_TSC) | PTD_FIELD_BIT(PTD_FIELD_TIME) |       \
	 PTD_FIELD_BIT(PTD_FIELD_WALL))
/* the clock byte's bits */
#define CLK_TSC 1u
#define CLK_TIME 2u
#define CLK_WALL 4u

unsigned ptd_bin_recsize(uint32_t fl)
{
	unsigned n = 0;

	n += HAS(fl, PID) ? 4 : 0;
	n += HAS(fl, TID) ? 4 : 0;
	n += HAS(fl, IP) ? 8 : 0;
	n += HAS(fl, SIZE) ? 1 : 0;
	n += HAS(fl, RAW) ? 1 + pt_max_insn_size : 0;
	n += HAS(fl, ICLASS) ? 1 : 0;
	n += HAS(fl, MODE) ? 1 : 0;
	n += HAS(fl, ISID) ? 4 : 0;
	n += HAS(fl, OFFSET) ? 8 : 0;
	n += HAS(fl, FLAGS) ? 2 : 0;
	n += (fl & CLOCK_FIELDS) ? 1 : 0;
	n += HAS(fl, TSC) ? 8 : 0;
	n += HAS(fl, TIME) ? 8 : 0;
	n += HAS(fl, WALL) ? 8 : 0;
	return n;
}

/* Little-endian fields at any alignment: one store or load each (the
 * byte-by-byte shifts these replaced compiled to loops, a sixth of ptd's
 * CPU for ip,tid binary subscribers). */
static uint8_t *put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
	return p + 2;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
	return p + 4;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
	return p + 8;
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

size_t ptd_bin_encode(uint8_t *dst, uint32_t fl, const struct ptd_record *r)
{
	const struct ptd_rec_insn *in = &r->u.insn;
	uint8_t *p = dst;

	if (HAS(fl, PID))
		p = put32(p, (uint32_t)r->pid);
	if (HAS(fl, TID))
		p = put32(p, (uint32_t)r->tid);
	if (HAS(fl, IP))
		p = put64(p, in->ip);
	if (HAS(fl, SIZE))
		*p++ = in->size;
	if (HAS(fl, RAW)) {
		uint8_t n = in->size < pt_max_insn_size ? in->size
							: pt_max_insn_size;

		*p++ = n;
		memcpy(p, in->raw, n);
		memset(p + n, 0, pt_max_insn_size - n);
		p += pt_max_insn_size;
	}
	if (HAS(fl, ICLASS))
		*p++ = (uint8_t)in->iclass;
	if (HAS(fl, MODE))
		*p++ = (uint8_t)in->mode;
	if (HAS(fl, ISID))
		p = put32(p, (uint32_t)in->isid);
	if (HAS(fl, OFFSET))
		p = put64(p, in->modoff);
	if (HAS(fl, FLAGS))
		p = put16(p, (uint16_t)(in->flags & ((1u << PTD_F_NFLAGS) - 1)));
	if (fl & CLOCK_FIELDS) {
		/* what the JSON line would carry: time and wall only with
		 * the TSC */
		bool t = r->has_tsc, tm = t && r->has_time,
		     w = t && r->has_wall;

		*p++ = (uint8_t)((t ? CLK_TSC : 0) | (tm ? CLK_TIME : 0) |
				 (w ? CLK_WALL : 0));
		if (HAS(fl, TSC))
			p = put64(p, t ? r->tsc : 0);
		if (HAS(fl, TIME))
			p = put64(p, tm ? r->time : 0);
		if (HAS(fl, WALL))
			p = put64(p, w ? r->wall : 0);
	}
	return (size_t)(p - dst);
}

size_t ptd_bin_encode_run(uint8_t *dst, uint32_t fl,
			  const struct ptd_record *recs, size_t n)
{
	const uint32_t tid_ip =
		PTD_FIELD_BIT(PTD_FIELD_TID) | PTD_FIELD_BIT(PTD_FIELD_IP);
	uint8_t *p = dst;

	/* what most compact readers take, without a test a field */
	if ((fl & ~PTD_FIELD_BIT(PTD_FIELD_TYPE)) == tid_ip) {
		for (size_t i = 0; i < n; i++) {
			p = put32(p, (uint32_t)recs[i].tid);
			p = put64(p, recs[i].u.insn.ip);
		}
		return (size_t)(p - dst);
	}
	for (size_t i = 0; i < n; i++)
		p += ptd_bin_encode(p, fl, &recs[i]);
	return (size_t)(p - dst);
}

size_t ptd_bin_encode_ips(uint8_t *dst, uint32_t fl, pid_t pid, pid_t tid,
			  const uint64_t *ips, size_t n)
{
	const uint32_t tid_ip =
		PTD_FIELD_BIT(PTD_FIELD_TID) | PTD_FIELD_BIT(PTD_FIELD_IP);
	uint8_t *p = dst;

	if ((fl & ~PTD_FIELD_BIT(PTD_FIELD_TYPE)) == tid_ip) {
		for (size_t i = 0; i < n; i++) {
			p = put32(p, (uint32_t)tid);
			p = put64(p, ips[i]);
		}
		return (size_t)(p - dst);
	}
	for (size_t i = 0; i < n; i++) {
		if (HAS(fl, PID))
			p = put32(p, (uint32_t)pid);
		if (HAS(fl, TID))
			p = put32(p, (uint32_t)tid);
		if (HAS(fl, IP))
			p = put64(p, ips[i]);
	}
	return (size_t)(p - dst);
}

static void put_header(uint8_t *p, enum ptd_bin_type type, unsigned recsize,
		       uint32_t count, uint32_t fields, uint32_t len)
{
	p = put32(p, PTD_BIN_MAGIC);
	*p++ = PTD_BIN_VERSION;
	*p++ = (uint8_t)type;
	p = put16(p, (uint16_t)recsize);
	p = put32(p, count);
	p = put32(p, fields);
	p = put32(p, len);
	(void)put32(p, 0);
}

/* An address frame's delta: the difference of two addresses (mod 2^64)
 * as a signed number, zigzag-mapped (0, -1, 1, -2, ... to 0, 1, 2, 3,
 * ...) and written 7 bits a byte, low first, the top bit set on every
 * byte but the last: at most PTD_BIN_DELTA_MAX bytes. */
static inline uint8_t *put_delta(uint8_t *p, uint64_t from, uint64_t to)
{
	uint64_t d = to - from;
	uint64_t z = (d << 1) ^ (uint64_t)-(int64_t)(d >> 63);

	while (z >= 0x80) {
		*p++ = (uint8_t)(z | 0x80);
		z >>= 7;
	}
	*p++ = (uint8_t)z;
	return p;
}

size_t ptd_bin_addrs_frame(uint8_t *dst, uint32_t fl, pid_t pid, pid_t tid,
			   const uint64_t *ips, size_t n)
{
	uint8_t *p = dst + PTD_BIN_HDR;

	if (HAS(fl, PID))
		p = put32(p, (uint32_t)pid);
	if (HAS(fl, TID))
		p = put32(p, (uint32_t)tid);
	p = put64(p, ips[0]);
	for (size_t i = 1; i < n; i++)
		p = put_delta(p, ips[i - 1], ips[i]);
	put_header(dst, PTD_BIN_ADDRS, 0, (uint32_t)n, fl,
		   (uint32_t)(p - dst - PTD_BIN_HDR));
	return (size_t)(p - dst);
}

/* The bytes of an address frame's pid, tid and first address. */
static size_t addrs_head(uint32_t fl)
{
	return (HAS(fl, PID) ? 4u : 0u) + (HAS(fl, TID) ? 4u : 0u) + 8u;
}

int ptd_bin_buf_addrs(struct ptd_buf *b, size_t *open, uint64_t *open_last,
		      const uint8_t *frame, size_t n, uint64_t last)
{
	uint32_t fl = get32(frame + 12), count = get32(frame + 8);
	size_t head = addrs_head(fl), deltas = n - PTD_BIN_HDR - head;
	const uint8_t *first = frame + PTD_BIN_HDR + head - 8;

	if (*open != PTD_BIN_NONE && *open + PTD_BIN_HDR <= b->len) {
		uint8_t *h = b->data + *open;
		uint32_t len = get32(h + 16);

		if (h[5] == PTD_BIN_ADDRS && get32(h + 12) == fl &&
		    *open + PTD_BIN_HDR + len == b->len &&
		    !memcmp(h + PTD_BIN_HDR, frame + PTD_BIN_HDR, head - 8) &&
		    get32(h + 8) + (uint64_t)count <= PTD_BIN_MAX_ADDRS &&
		    len + PTD_BIN_DELTA_MAX + deltas <=
			    PTD_BIN_MAX_RECORDS_PAYLOAD) {
			uint8_t *p, *start;

			if (ptd_buf_reserve(b, PTD_BIN_DELTA_MAX + deltas) < 0)
				return -ENOMEM;
			start = p = b->data + b->len;
			p = put_delta(p, *open_last, get64(first));
			memcpy(p, first + 8, deltas);
			p += deltas;
			b->len += (size_t)(p - start);
			h = b->data + *open;
			(void)put32(h + 8, get32(h + 8) + count);
			(void)put32(h + 16, len + (uint32_t)(p - start));
			*open_last = last;
			return 0;
		}
	}
	if (ptd_buf_reserve(b, n) < 0)
		return -ENOMEM;
	*open = b->len;
	(void)ptd_buf_append(b, frame, n);
	*open_last = last;
	return 0;
}

/* Can the frame at *@open take one more record of @fields? */
static bool open_fits(const struct ptd_buf *b, size_t open, uint32_t fields,
		      unsigned rs)
{
	const uint8_t *h;

	if (open == PTD_BIN_NONE || open + PTD_BIN_HDR > b->len)
		return false;
	h = b->data + open;
	return h[5] == PTD_BIN_RECORDS && get32(h + 12) == fields &&
	       get32(h + 8) < PTD_BIN_MAX_RECORDS_PAYLOAD &&
	       get32(h + 16) + rs <= PTD_BIN_MAX_RECORDS_PAYLOAD &&
	       open + PTD_BIN_HDR + get32(h + 16) == b->len;
}

size_t ptd_bin_buf_record_need(const struct ptd_buf *b, size_t open,
			       uint32_t fields)
{
	unsigned rs = ptd_bin_recsize(fields);

	return open_fits(b, open, fields, rs) ? rs : rs + PTD_BIN_HDR;
}

int ptd_bin_buf_record(struct ptd_buf *b, size_t *open, uint32_t fields,
		       const uint8_t *rec)
{
	unsigned rs = ptd_bin_recsize(fields);
	uint8_t *h;

	if (open_fits(b, *open, fields, rs)) {
		if (ptd_buf_append(b, rec, rs) < 0)
			return -ENOMEM;
	} else {
		uint8_t hdr[PTD_BIN_HDR];

		if (ptd_buf_reserve(b, PTD_BIN_HDR + rs) < 0)
			return -ENOMEM;
		put_header(hdr, PTD_BIN_RECORDS, rs, 0, fields, 0);
		*open = b->len;
		(void)ptd_buf_append(b, hdr, sizeof(hdr));
		(void)ptd_buf_append(b, rec, rs);
	}
	h = b->data + *open;
	(void)put32(h + 8, get32(h + 8) + 1);
	(void)put32(h + 16, get32(h + 16) + rs);
	return 0;
}

int ptd_bin_buf_json(struct ptd_buf *b, size_t *open, enum ptd_bin_type type,
		     const char *lines, size_t n)
{
	uint8_t hdr[PTD_BIN_HDR];
	uint32_t count = 0;

	if ((type != PTD_BIN_JSON && type != PTD_BIN_END) ||
	    n > PTD_BIN_MAX_JSON_PAYLOAD || (n && lines[n - 1] != '\n') ||
	    (!n && type != PTD_BIN_END))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		count += lines[i] == '\n';
	/* lines join an open json frame that has room */
	if (type == PTD_BIN_JSON && *open != PTD_BIN_NONE &&
	    *open + PTD_BIN_HDR <= b->len) {
		uint8_t *h = b->data + *open;

		if (h[5] == PTD_BIN_JSON &&
		    *open + PTD_BIN_HDR + get32(h + 16) == b->len &&
		    get32(h + 16) + n <= PTD_BIN_MAX_JSON_PAYLOAD) {
			if (ptd_buf_append(b, lines, n) < 0)
				return -ENOMEM;
			h = b->data + *open;
			(void)put32(h + 8, get32(h + 8) + count);
			(void)put32(h + 16, get32(h + 16) + (uint32_t)n);
			return 0;
		}
	}
	if (ptd_buf_reserve(b, PTD_BIN_HDR + n) < 0)
		return -ENOMEM;
	put_header(hdr, type, 0, count, 0, (uint32_t)n);
	*open = type == PTD_BIN_JSON ? b->len : PTD_BIN_NONE;
	(void)ptd_buf_append(b, hdr, sizeof(hdr));
	if (n)
		(void)ptd_buf_append(b, lines, n);
	return 0;
}

static int bad(struct ptd_diag *diag, uint64_t off, const char *what,
	       uint64_t v)
{
	return ptd_diagf(diag, -PTD_EFORMAT,
			 "binary stream: offset %" PRIu64 ": %s (%" PRIu64 ")",
			 off, what, v);
}

/* Check record @p (at stream offset @off) of @fl. */
static int check_record(const uint8_t *p, uint32_t fl, uint64_t off,
			struct ptd_diag *diag)
{
	const uint8_t *q = p;
	uint8_t size = 0;
	bool has_size = false;

	q += HAS(fl, PID) ? 4 : 0;
	q += HAS(fl, TID) ? 4 : 0;
	q += HAS(fl, IP) ? 8 : 0;
	if (HAS(fl, SIZE)) {
		size = *q;
		has_size = true;
		if (size > pt_max_insn_size)
			return bad(diag, off + (uint64_t)(q - p),
				   "insn size above 15", size);
		q++;
	}
	if (HAS(fl, RAW)) {
		uint8_t n = *q;

		if (n > pt_max_insn_size || (has_size && n != size))
			return bad(diag, off + (uint64_t)(q - p),
				   "raw length not the insn size", n);
		for (unsigned i = n; i < pt_max_insn_size; i++)
			if (q[1 + i])
				return bad(diag, off + (uint64_t)(q + 1 + i - p),
					   "raw byte past its length not zero",
					   q[1 + i]);
		q += 1 + pt_max_insn_size;
	}
	if (HAS(fl, ICLASS)) {
		if (*q > ptic_ptwrite)
			return bad(diag, off + (uint64_t)(q - p),
				   "unknown iclass", *q);
		q++;
	}
	if (HAS(fl, MODE)) {
		if (*q > ptem_32bit && *q != ptem_64bit)
			return bad(diag, off + (uint64_t)(q - p),
				   "unknown exec mode", *q);
		q++;
	}
	q += HAS(fl, ISID) ? 4 : 0;
	q += HAS(fl, OFFSET) ? 8 : 0;
	if (HAS(fl, FLAGS)) {
		if (get16(q) >> PTD_F_NFLAGS)
			return bad(diag, off + (uint64_t)(q - p),
				   "unknown flag bits", get16(q));
		q += 2;
	}
	if (fl & CLOCK_FIELDS) {
		uint8_t c = *q;
		const uint8_t *v = q + 1;

		if ((c & ~7u) || ((c & (CLK_TIME | CLK_WALL)) && !(c & CLK_TSC)))
			return bad(diag, off + (uint64_t)(q - p),
				   "bad clock byte", c);
		/* a value the record does not have is zero */
		if (HAS(fl, TSC)) {
			if (!(c & CLK_TSC) && get64(v))
				return bad(diag, off + (uint64_t)(v - p),
					   "tsc set without its clock bit", 0);
			v += 8;
		}
		if (HAS(fl, TIME)) {
			if (!(c & CLK_TIME) && get64(v))
				return bad(diag, off + (uint64_t)(v - p),
					   "time set without its clock bit", 0);
			v += 8;
		}
		if (HAS(fl, WALL) && !(c & CLK_WALL) && get64(v))
			return bad(diag, off + (uint64_t)(v - p),
				   "wall set without its clock bit", 0);
	}
	return 0;
}

/* Check @n bytes of JSON lines at @p (stream offset @off), @count of them. */
static int check_lines(const uint8_t *p, uint32_t n, uint32_t count,
		       uint64_t off, struct ptd_diag *diag)
{
	uint32_t lines = 0, start = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (p[i] == 0)
			return bad(diag, off + i, "NUL byte in a JSON line", 0);
		if (p[i] != '\n')
			continue;
		if (i - start < 2 || p[start] != '{' || p[i - 1] != '}')
			return bad(diag, off + start,
				   "JSON line not one object", i - start);
		lines++;
		start = i + 1;
	}
	if (start != n)
		return bad(diag, off + start, "JSON line without its newline",
			   n - start);
	if (lines != count)
		return bad(diag, off - PTD_BIN_HDR + 8,
			   "line count not the lines there", count);
	return 0;
}

/* Check address frame @fr's payload (at stream offset @off): its head,
 * then exactly count - 1 deltas of at most PTD_BIN_DELTA_MAX bytes, none
 * of more than 64 bits, and nothing after them.  Each refusal names a
 * byte of the frame: the length field for a payload too short for its
 * head, the payload's last byte where the deltas run past it. */
static int check_addrs(const struct ptd_bin_frame *fr, uint64_t off,
		       struct ptd_diag *diag)
{
	size_t at = addrs_head(fr->fields), len = fr->len;
	const uint8_t *p = fr->payload;

	if (len < at)
		return bad(diag, off - PTD_BIN_HDR + 16,
			   "address frame shorter than its first address",
			   len);
	for (uint32_t i = 1; i < fr->count; i++) {
		size_t start = at;

		for (;;) {
			if (at == len)
				return bad(diag, off + at - 1,
					   "address frame ends inside its "
					   "deltas, count",
					   fr->count);
			/* the last byte a delta may have holds bit 63
			 * alone */
			if (at - start == PTD_BIN_DELTA_MAX - 1 && p[at] > 1)
				return bad(diag, off + at,
					   "address delta above 64 bits",
					   p[at]);
			if (!(p[at++] & 0x80))
				break;
		}
	}
	if (at != len)
		return bad(diag, off + at,
			   "bytes after an address frame's last delta",
			   len - at);
	return 0;
}

ssize_t ptd_bin_frame_parse(const uint8_t *buf, size_t n, uint64_t off,
			    struct ptd_bin_frame *ret, struct ptd_diag *diag)
{
	struct ptd_bin_frame fr;
	unsigned rs;
	int e;

	memset(ret, 0, sizeof(*ret));
	/* the magic and version are checked as soon as they are there, so a
	 * stream that is not frames is refused at its first bytes */
	for (size_t i = 0; i < 4 && i < n; i++)
		if (buf[i] != (uint8_t)(PTD_BIN_MAGIC >> (8 * i)))
			return bad(diag, off + i, "bad frame magic, not \"PTDB\"",
				   buf[i]);
	if (n > 4 && buf[4] != PTD_BIN_VERSION)
		return ptd_diagf(diag, -PTD_EVERSION,
				 "binary stream: offset %" PRIu64
				 ": frame version %u, this reader knows %u",
				 off + 4, buf[4], PTD_BIN_VERSION);
	if (n < PTD_BIN_HDR)
		return 0;
	memset(&fr, 0, sizeof(fr));
	fr.type = (enum ptd_bin_type)buf[5];
	fr.recsize = get16(buf + 6);
	fr.count = get32(buf + 8);
	fr.fields = get32(buf + 12);
	fr.len = get32(buf + 16);
	if (get32(buf + 20))
		return bad(diag, off + 20, "reserved header bytes not zero",
			   get32(buf + 20));
	switch (fr.type) {
	case PTD_BIN_RECORDS:
		if (!(fr.fields & PTD_FIELD_BIT(PTD_FIELD_TYPE)) ||
		    !ptd_bin_fields_fixed(fr.fields))
			return bad(diag, off + 12,
				   "field set not one of fixed-width records",
				   fr.fields);
		rs = ptd_bin_recsize(fr.fields);
		if (fr.recsize != rs)
			return bad(diag, off + 6,
				   "record size not the field set's", fr.recsize);
		if (fr.count == 0)
			return bad(diag, off + 8, "records frame of no record",
				   0);
		if (fr.len > PTD_BIN_MAX_RECORDS_PAYLOAD)
			return bad(diag, off + 16,
				   "records payload above 65536 bytes", fr.len);
		/* rs is 0 only for the set {type}: count alone bounds it */
		if ((uint64_t)fr.count * rs != fr.len ||
		    (rs == 0 && fr.count > PTD_BIN_MAX_RECORDS_PAYLOAD))
			return bad(diag, off + 8,
				   "record count times size not the payload "
				   "length", fr.count);
		break;
	case PTD_BIN_ADDRS:
		if (!ptd_bin_fields_addrs(fr.fields))
			return bad(diag, off + 12,
				   "field set not one of address frames",
				   fr.fields);
		if (fr.recsize)
			return bad(diag, off + 6,
				   "record size in an address frame",
				   fr.recsize);
		if (fr.count == 0 || fr.count > PTD_BIN_MAX_ADDRS)
			return bad(diag, off + 8,
				   "address frame's count not 1..4096",
				   fr.count);
		if (fr.len > PTD_BIN_MAX_RECORDS_PAYLOAD)
			return bad(diag, off + 16,
				   "records payload above 65536 bytes", fr.len);
		break;
	case PTD_BIN_JSON:
	case PTD_BIN_END:
		if (fr.recsize || fr.fields)
			return bad(diag, off + (fr.recsize ? 6 : 12),
				   "record size or fields in a JSON frame",
				   fr.recsize ? fr.recsize : fr.fields);
		if (fr.len > PTD_BIN_MAX_JSON_PAYLOAD)
			return bad(diag, off + 16,
				   "JSON payload above 65536 bytes", fr.len);
		if (fr.type == PTD_BIN_JSON && !fr.count)
			return bad(diag, off + 8, "JSON frame of no line", 0);
		break;
	default:
		return bad(diag, off + 5, "unknown frame type", buf[5]);
	}
	if (n - PTD_BIN_HDR < fr.len)
		return 0;
	fr.payload = buf + PTD_BIN_HDR;
	if (fr.type == PTD_BIN_ADDRS) {
		e = check_addrs(&fr, off + PTD_BIN_HDR, diag);
		if (e < 0)
			return e;
	} else if (fr.type == PTD_BIN_RECORDS) {
		for (uint32_t i = 0; i < fr.count; i++) {
			e = check_record(fr.payload + (size_t)i * fr.recsize,
					 fr.fields,
					 off + PTD_BIN_HDR +
						 (uint64_t)i * fr.recsize,
					 diag);
			if (e < 0)
				return e;
		}
	} else {
		e = check_lines(fr.payload, fr.len, fr.count,
				off + PTD_BIN_HDR, diag);
		if (e < 0)
			return e;
	}
	*ret = fr;
	return (ssize_t)(PTD_BIN_HDR + fr.len);
}

void ptd_bin_record_get(const struct ptd_bin_frame *fr, uint32_t i,
			struct ptd_record *ret)
{
	const uint8_t *p = fr->payload + (size_t)i * fr->recsize;
	uint32_t fl = fr->fields;
	struct ptd_rec_insn *in = &ret->u.insn;

	memset(ret, 0, sizeof(*ret));
	ret->type = PTD_REC_INSN;
	in->module = "";
	if (HAS(fl, PID)) {
		ret->pid = (pid_t)get32(p);
		p += 4;
	}
	if (HAS(fl, TID)) {
		ret->tid = (pid_t)get32(p);
		p += 4;
	}
	if (HAS(fl, IP)) {
		in->ip = get64(p);
		p += 8;
	}
	if (HAS(fl, SIZE))
		in->size = *p++;
	if (HAS(fl, RAW)) {
		/* without size, raw's length stands for it */
		if (!HAS(fl, SIZE))
			in->size = *p;
		memcpy(in->raw, p + 1, pt_max_insn_size);
		p += 1 + pt_max_insn_size;
	}
	if (HAS(fl, ICLASS))
		in->iclass = (enum pt_insn_class) * p++;
	if (HAS(fl, MODE))
		in->mode = (enum pt_exec_mode) * p++;
	if (HAS(fl, ISID)) {
		in->isid = (int)get32(p);
		p += 4;
	}
	if (HAS(fl, OFFSET)) {
		in->modoff = get64(p);
		p += 8;
	}
	if (HAS(fl, FLAGS)) {
		in->flags = get16(p);
		p += 2;
	}
	if (fl & CLOCK_FIELDS) {
		uint8_t c = *p++;

		ret->has_tsc = c & CLK_TSC;
		ret->has_time = c & CLK_TIME;
		ret->has_wall = c & CLK_WALL;
		if (HAS(fl, TSC)) {
			ret->tsc = get64(p);
			p += 8;
		}
		if (HAS(fl, TIME)) {
			ret->time = get64(p);
			p += 8;
		}
		if (HAS(fl, WALL))
			ret->wall = get64(p);
	}
}

void ptd_bin_addrs_begin(const struct ptd_bin_frame *fr,
			 struct ptd_bin_addrs *it)
{
	const uint8_t *p = fr->payload;

	memset(it, 0, sizeof(*it));
	if (HAS(fr->fields, PID)) {
		it->pid = (pid_t)get32(p);
		p += 4;
	}
	if (HAS(fr->fields, TID)) {
		it->tid = (pid_t)get32(p);
		p += 4;
	}
	it->p = p;
}

void ptd_bin_addrs_next(struct ptd_bin_addrs *it, struct ptd_record *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->type = PTD_REC_INSN;
	ret->u.insn.module = "";
	ret->pid = it->pid;
	ret->tid = it->tid;
	if (it->i++ == 0) {
		it->ip = get64(it->p);
		it->p += 8;
	} else {
		/* (checked: at most 10 bytes, within 64 bits) */
		uint64_t z = 0;
		unsigned sh = 0;
		uint8_t b;

		do {
			b = *it->p++;
			z |= (uint64_t)(b & 0x7f) << sh;
			sh += 7;
		} while (b & 0x80);
		it->ip += (z >> 1) ^ (uint64_t)-(int64_t)(z & 1);
	}
	ret->u.insn.ip = it->ip;
}

#define READER_CAP (PTD_BIN_HDR + PTD_BIN_MAX_RECORDS_PAYLOAD + (64u << 10))
_Static_assert(PTD_BIN_MAX_JSON_PAYLOAD <= PTD_BIN_MAX_RECORDS_PAYLOAD,
	       "the reader's buffer holds the largest frame");

int ptd_bin_reader_init(struct ptd_bin_reader *rd, int fd)
{
	memset(rd, 0, sizeof(*rd));
	rd->fd = fd;
	rd->buf = malloc(READER_CAP);
	if (!rd->buf)
		return -ENOMEM;
	rd->cap = READER_CAP;
	return 0;
}

void ptd_bin_reader_fini(struct ptd_bin_reader *rd)
{
	free(rd->buf);
	rd->buf = NULL;
}

/* Read more bytes; 0 at EOF, 1 got some, -errno. */
static int reader_fill(struct ptd_bin_reader *rd)
{
	ssize_t k;

	if (rd->start) {
		memmove(rd->buf, rd->buf + rd->start, rd->end - rd->start);
		rd->end -= rd->start;
		rd->start = 0;
	}
	do
		k = read(rd->fd, rd->buf + rd->end, rd->cap - rd->end);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return -errno;
	if (k == 0) {
		rd->eof = true;
		return 0;
	}
	rd->end += (size_t)k;
	return 1;
}

int ptd_bin_read(struct ptd_bin_reader *rd, struct ptd_bin_frame *ret,
		 struct ptd_diag *diag)
{
	ssize_t n;
	int e;

	for (;;) {
		if (rd->ended) {
			/* nothing may follow the end frame */
			if (rd->start == rd->end && !rd->eof &&
			    (e = reader_fill(rd)) < 0)
				return ptd_diagf(diag, e,
						 "binary stream: read error");
			if (rd->start < rd->end)
				return bad(diag, rd->off,
					   "data after the end frame",
					   rd->end - rd->start);
			return 0;
		}
		n = ptd_bin_frame_parse(rd->buf + rd->start,
					rd->end - rd->start, rd->off, ret, diag);
		if (n < 0)
			return (int)n;
		if (n > 0) {
			rd->start += (size_t)n;
			rd->off += (uint64_t)n;
			if (ret->type == PTD_BIN_END)
				rd->ended = true;
			return 1;
		}
		if (rd->eof)
			return ptd_diagf(diag, -PTD_ETRUNC,
					 rd->start == rd->end
						 ? "binary stream: offset %"
						   PRIu64 ": ends without an "
						   "end frame"
						 : "binary stream: offset %"
						   PRIu64 ": ends inside a "
						   "frame",
					 rd->off);
		e = reader_fill(rd);
		if (e < 0)
			return ptd_diagf(diag, e, "binary stream: read error");
	}
}

int ptd_bin_to_json(int fd, struct ptd_jsonw *w, struct ptd_diag *diag)
{
	struct ptd_bin_reader rd;
	struct ptd_bin_frame fr;
	struct ptd_record rec;
	uint32_t fields = 0;
	int e;

	e = ptd_bin_reader_init(&rd, fd);
	if (e < 0)
		return ptd_diagf(diag, e, "binary stream: out of memory");
	while ((e = ptd_bin_read(&rd, &fr, diag)) > 0) {
		if (fr.type == PTD_BIN_JSON || fr.type == PTD_BIN_END) {
			if (fr.len)
				e = ptd_jsonw_line(w, (const char *)fr.payload,
						   fr.len);
		} else {
			/* insn records: fixed-width, or an address frame's
			 * one after the other */
			struct ptd_bin_addrs it;

			if (fr.fields != fields) {
				ptd_jsonw_set_fields(w, fr.fields);
				fields = fr.fields;
			}
			if (fr.type == PTD_BIN_ADDRS)
				ptd_bin_addrs_begin(&fr, &it);
			for (uint32_t i = 0; i < fr.count && e >= 0; i++) {
				if (fr.type == PTD_BIN_ADDRS)
					ptd_bin_addrs_next(&it, &rec);
				else
					ptd_bin_record_get(&fr, i, &rec);
				e = ptd_jsonw_put(w, &rec);
			}
		}
		if (e < 0) {
			e = ptd_diagf(diag, e, "writing JSON lines: %s",
				      ptd_strerror(e));
			break;
		}
	}
	ptd_bin_reader_fini(&rd);
	return e;
}

int ptd_binw_init(struct ptd_binw *w, int fd, uint32_t fields)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->open = PTD_BIN_NONE;
	ptd_jsonr_init(&w->jr, fields);
	w->fields = w->jr.fields;
	w->fixed = ptd_bin_fields_fixed(w->fields);
	if (ptd_buf_reserve(&w->buf, 256u << 10) < 0)
		return -ENOMEM;
	return 0;
}

int ptd_binw_flush(struct ptd_binw *w)
{
	int e;

	if (w->err || !w->buf.len) {
		w->buf.len = 0;
		w->open = PTD_BIN_NONE;
		return w->err;
	}
	e = ptd_write_all(w->fd, w->buf.data, w->buf.len);
	if (e < 0)
		w->err = e;
	else
		w->bytes += w->buf.len;
	w->buf.len = 0;
	w->open = PTD_BIN_NONE;
	return w->err;
}

/* Flush when the buffer is full (frames are whole: a flush between
 * records closes the open frame). */
static int binw_room(struct ptd_binw *w, size_t n)
{
	if (w->err)
		return w->err;
	if (w->buf.len + n > (256u << 10))
		return ptd_binw_flush(w);
	return 0;
}

int ptd_binw_put(struct ptd_binw *w, const struct ptd_record *r)
{
	uint8_t rec[PTD_BIN_MAX_REC];
	size_t n;
	int e;

	if (r->type == PTD_REC_INSN && w->fixed) {
		if ((e = binw_room(w, PTD_BIN_HDR + PTD_BIN_MAX_REC)) < 0)
			return e;
		(void)ptd_bin_encode(rec, w->fields, r);
		if (ptd_bin_buf_record(&w->buf, &w->open, w->fields, rec) < 0)
			return -ENOMEM;
		w->records++;
		return 0;
	}
	n = ptd_jsonr_render(&w->jr, w->line, r);
	if (!n)
		return -EINVAL;
	return ptd_binw_line(w, w->line, n);
}

/* ptd_binw_ips of a packed writer whose fields an address frame carries:
 * address frames of up to PTD_BIN_MAX_ADDRS, each made in w->frame and
 * joining the open one where it can. */
static int binw_addrs(struct ptd_binw *w, pid_t pid, pid_t tid,
		      const uint64_t *ips, size_t n)
{
	int e;

	if (n && !w->frame &&
	    !(w->frame = malloc(PTD_BIN_ADDRS_MAX(PTD_BIN_MAX_ADDRS))))
		return -ENOMEM;
	while (n) {
		size_t k = n < PTD_BIN_MAX_ADDRS ? n : PTD_BIN_MAX_ADDRS, fn;

		if ((e = binw_room(w, PTD_BIN_ADDRS_MAX(k))) < 0)
			return e;
		fn = ptd_bin_addrs_frame(w->frame, w->fields, pid, tid, ips,
					 k);
		if (ptd_bin_buf_addrs(&w->buf, &w->open, &w->open_last,
				      w->frame, fn, ips[k - 1]) < 0)
			return -ENOMEM;
		w->records += k;
		ips += k;
		n -= k;
	}
	return 0;
}

int ptd_binw_ips(struct ptd_binw *w, pid_t pid, pid_t tid,
		 const uint64_t *ips, size_t n)
{
	/* encoded a slice at a time, appended to the open frame at once
	 * where it takes them */
	enum { SLICE = 256 };
	uint8_t recs[SLICE * PTD_BIN_MAX_REC];
	unsigned rs = ptd_bin_recsize(w->fields);
	int e;

	if (!ptd_binw_takes_ips(w))
		return -EINVAL;
	if (w->packed && ptd_bin_fields_addrs(w->fields))
		return binw_addrs(w, pid, tid, ips, n);
	while (n) {
		size_t k = n < SLICE ? n : SLICE;

		if ((e = binw_room(w, PTD_BIN_HDR + k * rs)) < 0)
			return e;
		(void)ptd_bin_encode_ips(recs, w->fields, pid, tid, ips, k);
		if (!ptd_bin_buf_records_fast(&w->buf, w->open, w->fields,
					      recs, (uint32_t)k, rs)) {
			for (size_t i = 0; i < k; i++)
				if (ptd_bin_buf_record(&w->buf, &w->open,
						       w->fields,
						       recs + i * rs) < 0)
					return -ENOMEM;
		}
		w->records += k;
		ips += k;
		n -= k;
	}
	return 0;
}

int ptd_binw_line(struct ptd_binw *w, const char *line, size_t n)
{
	int e;

	if ((e = binw_room(w, PTD_BIN_HDR + n)) < 0)
		return e;
	e = ptd_bin_buf_json(&w->buf, &w->open, PTD_BIN_JSON, line, n);
	if (e == 0)
		w->records++;
	return e;
}

int ptd_binw_end(struct ptd_binw *w, const char *lines, size_t n)
{
	int e;

	if ((e = binw_room(w, PTD_BIN_HDR + n)) < 0)
		return e;
	e = ptd_bin_buf_json(&w->buf, &w->open, PTD_BIN_END, lines, n);
	if (e < 0)
		return e;
	return ptd_binw_flush(w);
}

int ptd_binw_fini(struct ptd_binw *w)
{
	int e = ptd_binw_flush(w);

	ptd_buf_fini(&w->buf);
	free(w->frame);
	w->frame = NULL;
	return e;
}
