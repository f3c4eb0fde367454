/* SPDX-License-Identifier: MIT */
/*
 * Reading JSON descriptions field by field, with integers read exactly.
 *
 * cJSON keeps every number as a double, so an integer beyond 2^53 (a
 * 64-bit address, LLDB's tscPerfZeroConversion.timeZero) loses its low
 * bits.  ptd_json_parse() parses with cJSON and then walks the same text
 * once more, skipping strings (escapes included), to take every number
 * literal as it is written: its sign, its exact magnitude up to 2^64 - 1,
 * or that it has a fraction or an exponent, or that it is longer than 64
 * bits.  The k-th literal of the text is the k-th number of the tree in
 * document order, so each number item of the tree gets its literal.  A
 * literal that is not JSON (cJSON lets "01" and "1." through) is refused
 * with the document, and so is a string holding "\u0000": cJSON would cut
 * it there, and a name read as "a" from "a\u0000/../x" is not the name the
 * text gives.
 *
 * Every reader of a JSON description in ptd (bundle manifests, captures,
 * timelines, LLDB trace bundles, control requests) reads its fields here,
 * so that a refusal names the field one way everywhere: by its JSON path
 * after the origin, "ORIGIN: PATH: WHAT", as
 * "ORIGIN: processes[0].threads[2].tid: expected an integer, not a
 * string" (an origin of "" leaves out the "ORIGIN: ").  They read
 * integers from that exact value: a fraction, an exponent, a negative
 * number for an unsigned field, or a value outside the field's range is
 * refused, never rounded.  With PTD_JSON_INT_STRING an integer field may
 * also be a string: decimal, or "0x"/"0X" hex (how LLDB writes addresses
 * and reads its JSONUINT64 fields); a decimal string with a leading 0 is
 * refused (LLDB would read it as octal).
 *
 * Any reader of a JSON description (a bundle manifest, a capture, a
 * control message) can use these; the tree itself is cJSON's, got with
 * ptd_json_root(), and lives as long as the ptd_json.
 */
#ifndef PTD_COMMON_JSON_H
#define PTD_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/diag.h"

struct ptd_json;

/* Parse the @len bytes at @text (no NUL needed; whatever follows the first
 * value is ignored, as cJSON does); @origin names the text in messages.
 * Returns 0, -PTD_EFORMAT (not JSON: "ORIGIN: not valid JSON (near byte
 * N)", or a number literal that is not JSON), -EINVAL (NULL argument) or
 * -ENOMEM.  Nothing is written to @ret on failure. */
int ptd_json_parse(const char *text, size_t len, const char *origin,
		   struct ptd_json **ret, struct ptd_diag *diag);

/* ptd_json_parse(), but only white space may follow the value (one
 * control request, one timeline line): anything else is refused with
 * "ORIGIN: data after the JSON value (at byte N)". */
int ptd_json_parse_all(const char *text, size_t len, const char *origin,
		       struct ptd_json **ret, struct ptd_diag *diag);

/* Free @j (NULL is fine) and its tree. */
void ptd_json_free(struct ptd_json *j);

/* The tree: valid until ptd_json_free(@j). */
const cJSON *ptd_json_root(const struct ptd_json *j);

/* The literal of one number, exactly. */
enum ptd_json_num_kind {
	PTD_JSON_NUM_INT,	/* an integer: negative, magnitude */
	PTD_JSON_NUM_BIG,	/* an integer of magnitude 2^64 or more */
	PTD_JSON_NUM_REAL,	/* has a fraction or an exponent */
};

struct ptd_json_num {
	enum ptd_json_num_kind kind;
	bool negative;		/* a '-' sign ("-0" included) */
	uint64_t magnitude;	/* PTD_JSON_NUM_INT only */
	/* PTD_JSON_NUM_REAL only: whether its value is a whole number
	 * exactly ("1e+15", "2.50e1"), and its magnitude (or that it is
	 * 2^64 or more: @whole_big) */
	bool whole;
	bool whole_big;
	uint64_t whole_magnitude;
};

/* The literal of number item @it of @j's tree.  Returns 0, or -EINVAL
 * (@it is not a number of @j, or a NULL argument). */
int ptd_json_number(const struct ptd_json *j, const cJSON *it,
		    struct ptd_json_num *ret);

/* Parse the whole of the @len bytes at @s as an integer string: decimal
 * without a leading 0 (but "0"), or "0x"/"0X" and hex digits.  Returns 0,
 * -EINVAL (anything else) or -ERANGE (over 2^64 - 1). */
int ptd_json_parse_int_string(const char *s, size_t len, uint64_t *ret);

/* ---- reading fields ------------------------------------------------------ */

/* Where fields are read from: the document, its name, the diagnostics. */
struct ptd_json_reader {
	const struct ptd_json *doc;
	const char *origin;
	struct ptd_diag *diag;
};

/* Longest field path in messages (a longer one is cut). */
#define PTD_JSON_PATH_MAX 160

/* Flags of the getters. */
#define PTD_JSON_REQUIRED 0x1u	  /* absent: an error, not -ENOENT */
#define PTD_JSON_INT_STRING 0x2u  /* an integer may be a string */
#define PTD_JSON_NONEMPTY 0x4u	  /* a string may not be "" */
#define PTD_JSON_NULL_ABSENT 0x8u /* null is read as absent */
/* An integer may be written with a fraction or an exponent when its value
 * is a whole number exactly: cJSON prints integers from 1e15 up as "1e+15"
 * (and JavaScript from 1e21), so a reader of what they write takes it. */
#define PTD_JSON_INT_WHOLE 0x10u
/* Over @max is over a limit of ptd's (-PTD_ELIMIT, "N is over the limit
 * MAX"), not a malformed value: a file size, a string length. */
#define PTD_JSON_LIMIT 0x20u
/* An integer is a "0x"/"0X" hex string and nothing else (how ptd writes
 * 64-bit values: addresses, times). */
#define PTD_JSON_HEX 0x40u

/* "PREFIX.key" ("key" when @prefix is ""), into @out of PTD_JSON_PATH_MAX
 * bytes; returns @out. */
const char *ptd_json_path(char *out, const char *prefix, const char *key);
/* "PREFIX.key[idx]" ("key[idx]" when @prefix is ""); returns @out. */
const char *ptd_json_path_index(char *out, const char *prefix,
				const char *key, size_t idx);

/* What @it is, for messages: "a string", "a number", "a boolean", "null",
 * "an array", "an object" ("nothing" for NULL). */
const char *ptd_json_type_name(const cJSON *it);

/* Item @it (at @path; NULL: absent) as an integer in [@min, @max], as
 * ptd_json_get_u64() reads a member. */
int ptd_json_read_u64(const struct ptd_json_reader *r, const cJSON *it,
		      const char *path, unsigned flags, uint64_t min,
		      uint64_t max, uint64_t *ret);

/* Item @it (at @path; NULL: absent) as a string of at most @max bytes,
 * borrowed from the tree, as ptd_json_get_strn() reads a member. */
int ptd_json_read_str(const struct ptd_json_reader *r, const cJSON *it,
		      const char *path, unsigned flags, size_t max,
		      const char **ret);

/* Item @it (at @path; NULL: absent) as a boolean.  Returns 0, -ENOENT
 * (absent, not required), -PTD_EFORMAT ("missing", "expected a boolean,
 * got ..."). */
int ptd_json_read_bool(const struct ptd_json_reader *r, const cJSON *it,
		       const char *path, unsigned flags, bool *ret);

/* Member @key of object @obj (its path: PREFIX.key) as an integer in
 * [@min, @max].  Returns 0; -ENOENT when absent and not
 * PTD_JSON_REQUIRED (nothing in @diag); -PTD_EFORMAT naming the path when
 * absent and required ("missing"), not an integer ("expected an
 * integer", "expected an integer, not a fraction or an exponent",
 * "expected a non-negative integer"), a bad string, or out of range
 * ("N out of range [MIN, MAX]"; over @max with PTD_JSON_LIMIT:
 * -PTD_ELIMIT, "N is over the limit MAX"), or with PTD_JSON_HEX not a hex
 * string ("expected a hex string \"0x...\" (64 bits at most), got ...").
 * Nothing is written to @ret on failure. */
int ptd_json_get_u64(const struct ptd_json_reader *r, const cJSON *obj,
		     const char *prefix, const char *key, unsigned flags,
		     uint64_t min, uint64_t max, uint64_t *ret);

/* Member @key as a string, borrowed from the tree.  Returns 0, -ENOENT
 * (absent, not required), -PTD_EFORMAT ("missing", "expected a string",
 * "empty string" with PTD_JSON_NONEMPTY). */
int ptd_json_get_str(const struct ptd_json_reader *r, const cJSON *obj,
		     const char *prefix, const char *key, unsigned flags,
		     const char **ret);

/* The same, of at most @max bytes: longer is -PTD_EFORMAT ("longer than
 * MAX bytes"), or -PTD_ELIMIT with PTD_JSON_LIMIT. */
int ptd_json_get_strn(const struct ptd_json_reader *r, const cJSON *obj,
		      const char *prefix, const char *key, unsigned flags,
		      size_t max, const char **ret);

/* ptd_json_get_strn(), copied: *@ret is the caller's to free.  Returns
 * what it returns, or -ENOMEM. */
int ptd_json_get_strdup(const struct ptd_json_reader *r, const cJSON *obj,
			const char *prefix, const char *key, unsigned flags,
			size_t max, char **ret);

/* Member @key as a boolean (see ptd_json_read_bool()). */
int ptd_json_get_bool(const struct ptd_json_reader *r, const cJSON *obj,
		      const char *prefix, const char *key, unsigned flags,
		      bool *ret);

/* Member @key as an object.  Returns 0, -ENOENT, -PTD_EFORMAT
 * ("missing", "expected an object"). */
int ptd_json_get_object(const struct ptd_json_reader *r, const cJSON *obj,
			const char *prefix, const char *key, unsigned flags,
			const cJSON **ret);

/* Member @key as an array of at most @max elements (their number in
 * *@ret_n).  Returns 0, -ENOENT, -PTD_EFORMAT ("missing", "expected an
 * array"), -PTD_ELIMIT ("N elements, more than the MAX allowed"). */
int ptd_json_get_array(const struct ptd_json_reader *r, const cJSON *obj,
		       const char *prefix, const char *key, unsigned flags,
		       size_t max, const cJSON **ret, size_t *ret_n);

/* The head of a file in one of ptd's own formats (a bundle manifest, a
 * capture): @root is an object whose "format" is @format and whose
 * "version" (an integer as cJSON writes it) is @version.  Check it before
 * any other field: another format's fields are not ours.  Returns 0,
 * -PTD_EFORMAT ("not a JSON object", "format: ...", "version: ..."),
 * -PTD_EVERSION ("version: N not supported (only V)"). */
int ptd_json_check_format(const struct ptd_json_reader *r, const cJSON *root,
			  const char *format, uint64_t version);

/* Every member of object @obj (at @path) must be named in @keys
 * (NULL-terminated) and appear once: for descriptions whose unknown keys
 * are mistakes, not extensions.  Returns 0 or -PTD_EFORMAT
 * ("PATH: unknown field \"K\"", "PATH.K: given twice"). */
int ptd_json_check_keys(const struct ptd_json_reader *r, const cJSON *obj,
			const char *path, const char *const *keys);

/* "ORIGIN: PATH: WHAT" into the reader's diag ("ORIGIN: WHAT" when @path
 * is ""); returns -PTD_EFORMAT. */
int ptd_json_bad(const struct ptd_json_reader *r, const char *path,
		 const char *what);

/* The same with a printf format for WHAT, returning @err. */
int ptd_json_badf(const struct ptd_json_reader *r, int err, const char *path,
		  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
