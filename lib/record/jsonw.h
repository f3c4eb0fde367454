/* SPDX-License-Identifier: MIT */
/*
 * The direct JSON-lines writer for records: no cJSON on the hot path
 * (building a record with cJSON runs at ~0.17 M records/s, this writer at
 * tens of millions).  Tests parse every record type back with cJSON.
 *
 * Contract (doc/protocol.md): one object per line, "type" first, 64-bit
 * values (addresses, offsets, TSC) as hex strings "0x...", small counts as
 * numbers, strings escaped per RFC 8259 (control characters as \u00XX,
 * invalid UTF-8 bytes as \u00XX of the byte so every line is valid JSON).
 *
 *  {"type":"insn","pid":1,"tid":1,"ip":"0x401000","size":3,"raw":"4889e5",
 *   "iclass":"other","mode":"64bit","isid":1,"module":"/usr/bin/ls",
 *   "offset":"0x1000","sym":"main+0x1a","flags":["enabled"],
 *   "tsc":"0x...","time":"0x...","wall":"2026-11-22T10:00:00.123456789Z"}
 *     ("sym" (the function holding ip and ip's offset in it) only when
 *     the decoder resolved one (ptd_rec_insn.sym); "flags" only when any
 *     is set; "tsc" only when known; "time" (perf
 *     time, ns) and "wall" (UTC, ISO 8601 with ns) only with "tsc" and
 *     when the decoder knew the clock: ptd_record.has_time/has_wall; every
 *     record type ends with these three when it has them)
 *  {"type":"block","pid":1,"tid":1,"ip":"0x..","end_ip":"0x..","ninsn":4,
 *   "iclass":"cond_jump","mode":"64bit","isid":1,"module":"..",
 *   "offset":"0x..","flags":[...]}   (+"size","raw" when truncated)
 *  {"type":"event","pid":1,"tid":1,"event":"enabled","offset":"0x..",
 *   "ip":"0x.." (when not suppressed), per-event fields:
 *     enabled: "resumed"; async_branch: "from"; paging: "cr3",
 *     "non_root"; overflow; exec_mode: "mode"; tsx: "speculative",
 *     "aborted"; vmcs: "base"; exstop; mwait: "hints","ext";
 *     pwre: "state","sub_state","hw"; pwrx: "last","deepest",...;
 *     ptwrite: "payload"; tick; cbr: "ratio"; mnt: "payload";
 *   "status_update":true when set}
 *  {"type":"error","pid":1,"tid":1,"offset":"0x..","ip":"0x..",
 *   "error":"nomap","message":"no memory mapped at this address",
 *   "context":"decode"}
 *  {"type":"first_exec","pid":1,"tid":1,"ip":..,"size":..,"raw":..,
 *   "iclass":..,"mode":..,"isid":..,"module":..,"offset":..,"sym":..}
 *     (an insn line's body without flags; "sym" as on call lines)
 *  {"type":"counters","pid":1,"of":"insn","rank":1,"count":"0x..",...}
 *     ("of": total, insn, block, function; doc/protocol.md)
 *  {"type":"trace","pid":1,"tid":1,"id":1,"head":"0x..","mode":..,
 *   "isid":..,"module":..,"offset":..,"sym":..,"ninsn":..,"nblocks":..,
 *   "blocks":["0x..",...],"end":"backward_branch"}
 *  {"type":"trace_withdrawn","pid":1,"tid":1,"id":1,"head":"0x..",
 *   "reason":"code_changed","at":"0x.."}
 *     (whole whatever the fields, "sym" only where they have it)
 * A renderer with fields (struct ptd_jsonr, record.h enum ptd_field)
 * leaves the others out of insn and block lines: {"type":"insn","tid":1,
 * "ip":"0x401000"}.
 */
#ifndef PTD_RECORD_JSONW_H
#define PTD_RECORD_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "record/record.h"

/* No record line is longer than this (module names are cut to fit). */
#define PTD_JSON_MAX_RECORD 8192u

/* Write the line for @r with every field, with its '\n', into @buf of @cap
 * bytes (a projection: ptd_jsonr).
 * Returns its length, or 0 if @cap < PTD_JSON_MAX_RECORD and it did not
 * fit (nothing useful is in @buf then). */
size_t ptd_json_record(char *buf, size_t cap, const struct ptd_record *r);

/* Render the part of @in's insn line that depends only on the instruction:
 * from ,"ip" to the "offset" value and "sym", without flags.  Returns its length, or 0
 * if @cap is less than PTD_JSON_MAX_INSN_BODY.  The writer copies such a
 * body (ptd_rec_insn.json_body) instead of rendering the fields again. */
#define PTD_JSON_MAX_INSN_BODY 7840u
size_t ptd_json_insn_body(char *buf, size_t cap, const struct ptd_rec_insn *in);

/* Write @s (@n bytes) as a JSON string with quotes into @buf; returns the
 * length or 0 if it does not fit in @cap. */
size_t ptd_json_string(char *buf, size_t cap, const char *s, size_t n);

/* Length of "YYYY-MM-DDTHH:MM:SS." in a "wall" value. */
#define PTD_JSON_WALL_PREFIX 20u

/*
 * A renderer: the fields it writes (PTD_FIELD_BIT()s, record/record.h) and
 * the caches that make consecutive records cheap.  One renderer writes
 * every record, full or projected: a projected line is the full line with
 * the fields not chosen left out, byte for byte.  A writer (ptd_jsonw) has
 * one; a fan-out has one per distinct field set of its subscribers.  Used
 * by one thread at a time.
 */
struct ptd_jsonr {
	uint32_t fields;	/* PTD_FIELD_TYPE always among them */
	/* `{"type":"insn","pid":P,"tid":T` (as far as fields has them) of the
	 * last insn record, reused while pid and tid stay the same. */
	char insn_head[64];
	size_t insn_head_len;
	pid_t head_pid, head_tid;
	/* The last short module name written, as given and as escaped:
	 * consecutive records mostly share it, and comparing costs less than
	 * escaping.  A hit needs the same pointer and the same bytes. */
	const char *mod_ptr;
	size_t mod_len;		/* 0: empty cache */
	char mod_raw[256];
	char mod_esc[6 * 256 + 16];
	size_t mod_esc_len;
	/* "YYYY-MM-DDTHH:MM:SS." of wall second @wall_sec, rendered once a
	 * second for the "wall" field. */
	bool wall_valid;
	uint64_t wall_sec;
	char wall_prefix[PTD_JSON_WALL_PREFIX];
	uint64_t renders;	/* records rendered */
};

/* A renderer of @fields (0: all; PTD_FIELD_TYPE is added), caches empty. */
void ptd_jsonr_init(struct ptd_jsonr *jr, uint32_t fields);
/* Write @r's line, with its '\n', into @buf, which has room for
 * PTD_JSON_MAX_RECORD bytes.  Returns its length, or 0 for a record of no
 * known type. */
size_t ptd_jsonr_render(struct ptd_jsonr *jr, char *buf,
			const struct ptd_record *r);

/* A buffered writer of lines to a file descriptor. */
struct ptd_jsonw {
	int fd;
	char *buf;
	size_t len;
	size_t cap;
	uint64_t lines;
	uint64_t bytes;
	int err;	/* first write error (-errno), sticky */
	struct ptd_jsonr jr;	/* every field unless ptd_jsonw_set_fields */
};

/* @bufsize 0: 256 KiB.  Returns 0 or -ENOMEM. */
int ptd_jsonw_init(struct ptd_jsonw *w, int fd, size_t bufsize);
/* Write only @fields (PTD_FIELD_BIT()s; 0: all) of the records put after. */
void ptd_jsonw_set_fields(struct ptd_jsonw *w, uint32_t fields);
/* Append one record.  Returns 0 or the sticky write error. */
int ptd_jsonw_put(struct ptd_jsonw *w, const struct ptd_record *r);
/* Append a ready line (must end in '\n'). */
int ptd_jsonw_line(struct ptd_jsonw *w, const char *line, size_t n);
int ptd_jsonw_flush(struct ptd_jsonw *w);
/* Flush and free the buffer (not the fd).  Returns the flush result. */
int ptd_jsonw_fini(struct ptd_jsonw *w);

#endif
