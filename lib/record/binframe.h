/* SPDX-License-Identifier: MIT */
/*
 * The binary framing of a record stream (doc/protocol.md, "Binary
 * framing"): what `"format":"binary"` in subscribe and `ptctl decode
 * --format binary` give instead of JSON lines.  A stream is a sequence of
 * frames, each a 24-byte header and a payload:
 *
 *   records frame  fixed-width little-endian insn records of one field
 *                  set (the header names the set and the record size);
 *                  only sets without module and sym (variable size)
 *   json frame     JSON lines exactly as the JSON path writes them: every
 *                  other record (event, error, call, block, insn records
 *                  with module or sym) and the stream's own (hello, lost,
 *                  snapshot, trigger, ...)
 *   end frame      JSON lines too (a daemon stream's last lost record and
 *                  its bye; offline: none); the stream's last frame, so a
 *                  reader tells a finished stream from a cut one
 *   address frame  "packed" streams only (`"format":"packed"`, ptctl
 *                  --format packed): a run of insn records of one thread
 *                  whose fields are among type, pid, tid and ip, ip
 *                  among them -- the pid and tid once, the first address,
 *                  then each next one as its difference from the one
 *                  before (zigzag LEB128): an instruction that follows
 *                  the one before in memory takes one byte
 *
 * The reader checks every frame whole before it hands it out (magic,
 * version, known type, reserved bytes zero, bounded lengths, the record
 * size the field set implies, every record's values in range, JSON lines
 * whole) and refuses a bad one naming its stream offset.  A records frame
 * converted back (ptd_bin_record_get + the JSON renderer of the frame's
 * field set) gives the bytes the JSON path would have written.
 */
#ifndef PTD_RECORD_BINFRAME_H
#define PTD_RECORD_BINFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "common/diag.h"
#include "common/fileio.h"
#include "record/jsonw.h"
#include "record/record.h"

#define PTD_BIN_VERSION 1
#define PTD_BIN_HDR 24u
/* "PTDB" as a little-endian u32 */
#define PTD_BIN_MAGIC 0x42445450u
/* Payload limits: a records frame holds at most this many bytes (the
 * writers close a frame before), a json or end frame at most this. */
#define PTD_BIN_MAX_RECORDS_PAYLOAD (64u << 10)
#define PTD_BIN_MAX_JSON_PAYLOAD (64u << 10)
/* The longest fixed-width record (every fixed field). */
#define PTD_BIN_MAX_REC 80u

enum ptd_bin_type {
	PTD_BIN_RECORDS = 1,
	PTD_BIN_JSON = 2,
	PTD_BIN_END = 3,
	PTD_BIN_ADDRS = 4,
};

/* The fields fixed-width records can carry: all but module and sym. */
#define PTD_BIN_FIXED_FIELDS                                                  \
	(PTD_FIELDS_ALL & ~PTD_FIELD_BIT(PTD_FIELD_MODULE) &                  \
	 ~PTD_FIELD_BIT(PTD_FIELD_SYM))

/* Do insn records of @fields (PTD_FIELD_BIT()s, type among them) go as
 * fixed-width records? */
static inline bool ptd_bin_fields_fixed(uint32_t fields)
{
	return fields && !(fields & ~PTD_BIN_FIXED_FIELDS);
}

/* Bytes of one record of @fields (fixed: ptd_bin_fields_fixed). */
unsigned ptd_bin_recsize(uint32_t fields);

/* Encode insn record @r's @fields into @dst (PTD_BIN_MAX_REC bytes);
 * returns ptd_bin_recsize(@fields). */
size_t ptd_bin_encode(uint8_t *dst, uint32_t fields,
		      const struct ptd_record *r);
/* Encode the @n insn records @recs one after the other (as
 * ptd_bin_encode each); returns @n * ptd_bin_recsize(@fields). */
size_t ptd_bin_encode_run(uint8_t *dst, uint32_t fields,
			  const struct ptd_record *recs, size_t n);

/* The fields an insn record's address, thread and process give alone:
 * what a run of addresses (decode/decoder.h, opts.ips) carries. */
#define PTD_BIN_IP_FIELDS                                                     \
	(PTD_FIELD_BIT(PTD_FIELD_TYPE) | PTD_FIELD_BIT(PTD_FIELD_PID) |       \
	 PTD_FIELD_BIT(PTD_FIELD_TID) | PTD_FIELD_BIT(PTD_FIELD_IP))

/* Encode, as ptd_bin_encode_run would the insn records they stand for,
 * the @n instructions at @ips of thread @tid of process @pid; @fields
 * among PTD_BIN_IP_FIELDS.  Returns @n * ptd_bin_recsize(@fields). */
size_t ptd_bin_encode_ips(uint8_t *dst, uint32_t fields, pid_t pid,
			  pid_t tid, const uint64_t *ips, size_t n);

/* Address frames (PTD_BIN_ADDRS): the field sets they carry -- type and
 * ip, with pid and/or tid or not -- and the most records one holds (its
 * payload, at 10 bytes an address at worst, stays within the limit). */
static inline bool ptd_bin_fields_addrs(uint32_t fields)
{
	const uint32_t need = PTD_FIELD_BIT(PTD_FIELD_TYPE) |
			      PTD_FIELD_BIT(PTD_FIELD_IP);

	return (fields & need) == need && !(fields & ~PTD_BIN_IP_FIELDS);
}
#define PTD_BIN_MAX_ADDRS 4096u
/* The most bytes one address's difference takes (64 bits, 7 a byte). */
#define PTD_BIN_DELTA_MAX 10u
/* The most bytes an address frame of @n (1..PTD_BIN_MAX_ADDRS) records
 * takes, header included. */
#define PTD_BIN_ADDRS_MAX(n)                                                  \
	(PTD_BIN_HDR + 16u + PTD_BIN_DELTA_MAX * (size_t)(n))
_Static_assert(PTD_BIN_ADDRS_MAX(PTD_BIN_MAX_ADDRS) - PTD_BIN_HDR <=
		       PTD_BIN_MAX_RECORDS_PAYLOAD,
	       "an address frame's payload stays within the limit");

/* Write the address frame of the @n (1..PTD_BIN_MAX_ADDRS) instructions at
 * @ips of thread @tid of process @pid, of @fields (ptd_bin_fields_addrs),
 * whole, at @dst (PTD_BIN_ADDRS_MAX(@n) bytes).  Returns its size. */
size_t ptd_bin_addrs_frame(uint8_t *dst, uint32_t fields, pid_t pid,
			   pid_t tid, const uint64_t *ips, size_t n);

/*
 * Appending frames to a buffer.  *@open is the offset of the frame still
 * open at the buffer's end (SIZE_MAX: none): records of the same field
 * set join an open records frame, JSON lines an open json frame, while it
 * has room; anything else closes it.  The
 * buffer always holds whole, valid frames (the open frame's header is
 * updated with each record).
 */
#define PTD_BIN_NONE SIZE_MAX
/* Bytes ptd_bin_buf_record would add. */
size_t ptd_bin_buf_record_need(const struct ptd_buf *b, size_t open,
			       uint32_t fields);
/* Returns 0 or -ENOMEM (nothing appended). */
int ptd_bin_buf_record(struct ptd_buf *b, size_t *open, uint32_t fields,
		       const uint8_t *rec);
/* The hot path of ptd_bin_buf_record for @k records one after another
 * at @recs (@rs bytes each, ptd_bin_recsize(@fields)): true if the open
 * frame took them all in room @b already has; false: nothing done. */
static inline bool ptd_bin_buf_records_fast(struct ptd_buf *b, size_t open,
					    uint32_t fields,
					    const uint8_t *recs, uint32_t k,
					    unsigned rs)
{
	size_t bytes = (size_t)k * rs;
	uint8_t *h;
	uint32_t count, len, fl;

	if (open == PTD_BIN_NONE || b->cap - b->len < bytes)
		return false;
	h = b->data + open;
	memcpy(&count, h + 8, 4);
	memcpy(&fl, h + 12, 4);
	memcpy(&len, h + 16, 4);
	/* the header's fields as stored: a little-endian host */
	_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
		       "ptd_bin_buf_records_fast reads the header natively");
	if (fl != fields || open + PTD_BIN_HDR + len != b->len ||
	    len + bytes > PTD_BIN_MAX_RECORDS_PAYLOAD ||
	    count + (uint64_t)k > PTD_BIN_MAX_RECORDS_PAYLOAD ||
	    h[5] != PTD_BIN_RECORDS)
		return false;
	memcpy(b->data + b->len, recs, bytes);
	b->len += bytes;
	count += k;
	len += (uint32_t)bytes;
	memcpy(h + 8, &count, 4);
	memcpy(h + 16, &len, 4);
	return true;
}

/* The same for one record (ptd_bin_buf_record's hot path). */
static inline bool ptd_bin_buf_record_fast(struct ptd_buf *b, size_t open,
					   uint32_t fields, const uint8_t *rec,
					   unsigned rs)
{
	return ptd_bin_buf_records_fast(b, open, fields, rec, 1, rs);
}

/* Address frame @frame (@n bytes, whole, from ptd_bin_addrs_frame; its
 * last address @last): it joins the open frame where that is an address
 * frame of the same field set, process and thread with room for it (its
 * deltas and one for its first address: never more bytes than @n), else
 * it opens a new one.  *@open_last is the open address frame's last
 * address (kept here).  Returns 0 or -ENOMEM. */
int ptd_bin_buf_addrs(struct ptd_buf *b, size_t *open, uint64_t *open_last,
		      const uint8_t *frame, size_t n, uint64_t last);

/* @n bytes of JSON lines (each ending in '\n', @n <=
 * PTD_BIN_MAX_JSON_PAYLOAD) in a frame of @type (PTD_BIN_JSON: the open
 * json frame if they fit; PTD_BIN_END: a frame of their own).  Returns 0, -EINVAL or -ENOMEM. */
int ptd_bin_buf_json(struct ptd_buf *b, size_t *open, enum ptd_bin_type type,
		     const char *lines, size_t n);

/* One frame, checked. */
struct ptd_bin_frame {
	enum ptd_bin_type type;
	uint32_t count;		/* records, or JSON lines */
	uint32_t fields;	/* records: the field set; else 0 */
	uint32_t recsize;	/* records: bytes each; else 0 */
	uint32_t len;		/* payload bytes */
	const uint8_t *payload;
};

/* Check the frame at @buf (@n bytes there), which starts at offset @off of
 * the stream.  Returns its size (header and payload), 0 if @n holds only
 * part of it (more is needed), or -PTD_EFORMAT / -PTD_EVERSION with @diag
 * naming the offset of the bad byte and what was wrong. */
ssize_t ptd_bin_frame_parse(const uint8_t *buf, size_t n, uint64_t off,
			    struct ptd_bin_frame *ret, struct ptd_diag *diag);

/* Record @i of records frame @fr (checked by ptd_bin_frame_parse) into
 * @ret: an insn record, the fields not in the set zero (module ""). */
void ptd_bin_record_get(const struct ptd_bin_frame *fr, uint32_t i,
			struct ptd_record *ret);

/* The records of address frame @fr (checked by ptd_bin_frame_parse), one
 * after the other: ptd_bin_addrs_begin, then ptd_bin_addrs_next fr->count
 * times (@it holds where it is in @fr's payload), each record as
 * ptd_bin_record_get gives one. */
struct ptd_bin_addrs {
	const uint8_t *p;	/* the next delta */
	uint64_t ip;		/* the last address */
	uint32_t i;		/* records given */
	pid_t pid, tid;
};
void ptd_bin_addrs_begin(const struct ptd_bin_frame *fr,
			 struct ptd_bin_addrs *it);
void ptd_bin_addrs_next(struct ptd_bin_addrs *it, struct ptd_record *ret);

/* Frames from a file descriptor. */
struct ptd_bin_reader {
	int fd;
	uint8_t *buf;
	size_t cap, start, end;	/* unread bytes: buf[start..end) */
	uint64_t off;		/* stream offset of buf[start] */
	bool eof, ended;	/* end frame seen */
};

int ptd_bin_reader_init(struct ptd_bin_reader *rd, int fd);
void ptd_bin_reader_fini(struct ptd_bin_reader *rd);
/* The next frame: 1 (valid until the next call), 0 at the end of a
 * stream that ended with an end frame, or a negative error with @diag:
 * a bad frame (-PTD_EFORMAT/-PTD_EVERSION, its offset), a stream cut in a
 * frame or without an end frame (-PTD_ETRUNC), bytes after the end frame
 * (-PTD_EFORMAT), a read error (-errno). */
int ptd_bin_read(struct ptd_bin_reader *rd, struct ptd_bin_frame *ret,
		 struct ptd_diag *diag);

/* Convert the frames read from @fd into the JSON lines the JSON path
 * gives, written through @w (whose fields it sets per frame).  Returns 0
 * or the first error (@diag says what and where). */
int ptd_bin_to_json(int fd, struct ptd_jsonw *w, struct ptd_diag *diag);

/* A buffered writer of frames to a file descriptor: offline decodes. */
struct ptd_binw {
	int fd;
	struct ptd_buf buf;
	size_t open;
	uint32_t fields;	/* PTD_FIELD_TYPE among them */
	bool fixed;		/* insn records as fixed-width records */
	bool packed;		/* runs of addresses as address frames
				 * (ptd_binw_set_packed) */
	uint64_t open_last;	/* (ptd_bin_buf_addrs) */
	uint8_t *frame;		/* packed: one frame being made */
	struct ptd_jsonr jr;	/* the JSON lines of the others */
	char line[PTD_JSON_MAX_RECORD];
	uint64_t records;
	uint64_t bytes;		/* written */
	int err;		/* first write error, sticky */
};

/* @fields: as ptd_jsonw_set_fields (0: all).  Returns 0 or -ENOMEM. */
int ptd_binw_init(struct ptd_binw *w, int fd, uint32_t fields);
/* A packed stream: runs of addresses (ptd_binw_ips) go as address frames
 * where the fields allow (ptd_bin_fields_addrs). */
static inline void ptd_binw_set_packed(struct ptd_binw *w)
{
	w->packed = true;
}
int ptd_binw_put(struct ptd_binw *w, const struct ptd_record *r);
/* Does @w take runs of addresses (decode/decoder.h, opts.ips) for its
 * insn records: fixed-width records of fields among PTD_BIN_IP_FIELDS? */
static inline bool ptd_binw_takes_ips(const struct ptd_binw *w)
{
	return w->fixed && !(w->fields & ~PTD_BIN_IP_FIELDS) &&
	       ptd_bin_recsize(w->fields);
}
/* The insn records of the @n instructions at @ips of thread @tid of
 * process @pid, as ptd_binw_put each (ptd_binw_takes_ips); packed: as
 * address frames. */
int ptd_binw_ips(struct ptd_binw *w, pid_t pid, pid_t tid,
		 const uint64_t *ips, size_t n);
/* A ready JSON line (ending in '\n') in a json frame. */
int ptd_binw_line(struct ptd_binw *w, const char *line, size_t n);
/* The end frame (with @n bytes of lines, or none), then a flush. */
int ptd_binw_end(struct ptd_binw *w, const char *lines, size_t n);
int ptd_binw_flush(struct ptd_binw *w);
/* Flush and free (not the fd); returns the flush result. */
int ptd_binw_fini(struct ptd_binw *w);

#endif
