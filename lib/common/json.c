/* SPDX-License-Identifier: MIT */
/*
 * JSON with exact integers, and field readers (see json.h).
 */
#include "common/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"

/* One number literal of the text and the tree item it became. */
struct lit {
	uintptr_t item;
	struct ptd_json_num num;
};

struct ptd_json {
	cJSON *root;
	struct lit *lits;	/* sorted by item once the tree is walked */
	size_t nlits, cap;
};

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Characters cJSON takes into a number (it hands them to strtod). */
static bool in_number(char c)
{
	return is_digit(c) || c == '+' || c == '-' || c == '.' || c == 'e' ||
	       c == 'E';
}

/* The value of a literal with a fraction or an exponent, if it is a whole
 * number: its digits @s[@i0, @i1) (a '.' among them is skipped) times
 * 10^(@exp - @nfrac), @nfrac being the digits after the '.'. */
static void whole_value(const char *s, size_t i0, size_t i1, size_t nfrac,
			long exp, struct ptd_json_num *num)
{
	long shift = exp - (long)nfrac;
	uint64_t v = 0;
	size_t i;

	/* trailing zeros of the digits move into the shift */
	while (i1 > i0 && (s[i1 - 1] == '0' || s[i1 - 1] == '.')) {
		if (s[i1 - 1] == '0')
			shift++;
		i1--;
	}
	while (i0 < i1 && (s[i0] == '0' || s[i0] == '.'))
		i0++;
	if (i0 == i1) {		/* zero */
		num->whole = true;
		return;
	}
	if (shift < 0)		/* a non-zero digit after the point */
		return;
	num->whole = true;
	for (i = i0; i < i1; i++) {
		uint64_t d;

		if (s[i] == '.')
			continue;
		d = (uint64_t)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10) {
			num->whole_big = true;
			return;
		}
		v = v * 10 + d;
	}
	for (; shift > 0; shift--) {
		if (v > UINT64_MAX / 10) {
			num->whole_big = true;
			return;
		}
		v *= 10;
	}
	num->whole_magnitude = v;
}

/* The number literal at @s (@n bytes left, s[0] is '-' or a digit), by
 * JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
 * Returns its length, or 0 if it is not a JSON number. */
static size_t scan_number(const char *s, size_t n, struct ptd_json_num *num)
{
	size_t i = 0, d_start, d_end, nfrac = 0;
	long exp = 0;
	bool exp_neg = false;

	memset(num, 0, sizeof(*num));
	num->kind = PTD_JSON_NUM_INT;
	if (s[i] == '-') {
		num->negative = true;
		i++;
	}
	if (i >= n || !is_digit(s[i]))
		return 0;
	d_start = i;
	if (s[i] == '0') {
		i++;
	} else {
		for (; i < n && is_digit(s[i]); i++) {
			uint64_t d = (uint64_t)(s[i] - '0');

			if (num->kind == PTD_JSON_NUM_BIG)
				continue;
			if (num->magnitude > (UINT64_MAX - d) / 10) {
				num->kind = PTD_JSON_NUM_BIG;
				num->magnitude = 0;
				continue;
			}
			num->magnitude = num->magnitude * 10 + d;
		}
	}
	if (i < n && s[i] == '.') {
		size_t d0 = ++i;

		while (i < n && is_digit(s[i]))
			i++;
		if (i == d0)
			return 0;
		nfrac = i - d0;
		num->kind = PTD_JSON_NUM_REAL;
	}
	d_end = i;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		size_t d0;

		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			exp_neg = s[i++] == '-';
		d0 = i;
		for (; i < n && is_digit(s[i]); i++)
			if (exp < 100000)	/* past 2^64 either way */
				exp = exp * 10 + (s[i] - '0');
		if (i == d0)
			return 0;
		num->kind = PTD_JSON_NUM_REAL;
	}
	/* "01", "1.2.3": what cJSON's strtod would read differently */
	if (i < n && in_number(s[i]))
		return 0;
	if (num->kind != PTD_JSON_NUM_INT)
		num->magnitude = 0;
	if (num->kind == PTD_JSON_NUM_REAL)
		whole_value(s, d_start, d_end, nfrac, exp_neg ? -exp : exp,
			    num);
	return i;
}

static int add_lit(struct ptd_json *j, const struct ptd_json_num *num)
{
	if (j->nlits == j->cap) {
		size_t nc = j->cap ? j->cap * 2 : 64;
		struct lit *nv = realloc(j->lits, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		j->lits = nv;
		j->cap = nc;
	}
	j->lits[j->nlits].item = 0;
	j->lits[j->nlits++].num = *num;
	return 0;
}

/* Every number literal of the @n bytes at @s, in order. */
static int scan_text(struct ptd_json *j, const char *s, size_t n,
		     const char *origin, struct ptd_diag *diag)
{
	size_t i = 0;

	while (i < n) {
		struct ptd_json_num num;
		size_t len;
		int r;

		if (s[i] == '"') {
			/* a string: to its unescaped closing quote */
			for (i++; i < n && s[i] != '"'; i++) {
				if (s[i] != '\\')
					continue;
				if (n - i >= 6 && !memcmp(s + i, "\\u0000", 6))
					return ptd_diagf(diag, -PTD_EFORMAT,
							 "%s: a string holds "
							 "\\u0000 (near byte "
							 "%zu): ptd keeps no "
							 "NUL in a string",
							 origin, i);
				i++;
			}
			i++;
			continue;
		}
		if (s[i] != '-' && !is_digit(s[i])) {
			i++;
			continue;
		}
		len = scan_number(s + i, n - i, &num);
		if (!len)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s: not valid JSON (near byte %zu): "
					 "a malformed number", origin, i);
		r = add_lit(j, &num);
		if (r < 0)
			return r;
		i += len;
	}
	return 0;
}

/* Give the number items of the tree under @it (and its siblings), in
 * document order, their literals from *@k on. */
static int match_items(struct ptd_json *j, const cJSON *it, size_t *k)
{
	for (; it; it = it->next) {
		if (cJSON_IsNumber(it)) {
			if (*k >= j->nlits)
				return -1;
			j->lits[(*k)++].item = (uintptr_t)it;
		}
		if ((cJSON_IsArray(it) || cJSON_IsObject(it)) &&
		    match_items(j, it->child, k) < 0)
			return -1;
	}
	return 0;
}

static int lit_cmp(const void *a, const void *b)
{
	const struct lit *x = a, *y = b;

	return x->item < y->item ? -1 : x->item > y->item;
}

void ptd_json_free(struct ptd_json *j)
{
	if (!j)
		return;
	cJSON_Delete(j->root);
	free(j->lits);
	free(j);
}

static int parse(const char *text, size_t len, const char *origin,
		 bool all, struct ptd_json **ret, struct ptd_diag *diag)
{
	struct ptd_json *j;
	const char *end = NULL;
	size_t k = 0;
	int r;

	if (!text || !origin || !ret)
		return -EINVAL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->root = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (!j->root) {
		size_t at = end && end >= text ? (size_t)(end - text) : 0;

		ptd_json_free(j);
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "%s: not valid JSON (near byte %zu)", origin,
				 at);
	}
	if (!end || end < text || end > text + len)
		end = text + len;
	for (const char *p = end; all && p < text + len; p++)
		if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
			ptd_json_free(j);
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s: data after the JSON value (at "
					 "byte %zu)", origin,
					 (size_t)(p - text));
		}
	r = scan_text(j, text, (size_t)(end - text), origin, diag);
	if (r == 0 && (match_items(j, j->root, &k) < 0 || k != j->nlits))
		r = ptd_diagf(diag, -PTD_EFORMAT,
			      "%s: the number literals of the text and of its "
			      "parse disagree (%zu and %zu)", origin,
			      j->nlits, k);
	if (r < 0) {
		ptd_json_free(j);
		return r;
	}
	if (j->nlits)
		qsort(j->lits, j->nlits, sizeof(*j->lits), lit_cmp);
	*ret = j;
	return 0;
}

int ptd_json_parse(const char *text, size_t len, const char *origin,
		   struct ptd_json **ret, struct ptd_diag *diag)
{
	return parse(text, len, origin, false, ret, diag);
}

int ptd_json_parse_all(const char *text, size_t len, const char *origin,
		       struct ptd_json **ret, struct ptd_diag *diag)
{
	return parse(text, len, origin, true, ret, diag);
}

const cJSON *ptd_json_root(const struct ptd_json *j)
{
	return j ? j->root : NULL;
}

int ptd_json_number(const struct ptd_json *j, const cJSON *it,
		    struct ptd_json_num *ret)
{
	struct lit key = { .item = (uintptr_t)it };
	const struct lit *l;

	if (!j || !it || !ret || !cJSON_IsNumber(it) || !j->nlits)
		return -EINVAL;
	l = bsearch(&key, j->lits, j->nlits, sizeof(*j->lits), lit_cmp);
	if (!l)
		return -EINVAL;
	*ret = l->num;
	return 0;
}

int ptd_json_parse_int_string(const char *s, size_t len, uint64_t *ret)
{
	size_t i;

	if (!s || !ret)
		return -EINVAL;
	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < len; i++)
			if (!is_hex(s[i]))
				return -EINVAL;
		return ptd_parse_u64n(s + 2, len - 2, 16, ret);
	}
	if (!len || (s[0] == '0' && len > 1))
		return -EINVAL;
	for (i = 0; i < len; i++)
		if (!is_digit(s[i]))
			return -EINVAL;
	return ptd_parse_u64n(s, len, 10, ret);
}

/* ---- reading fields ------------------------------------------------------ */

/* vsnprintf into @out of PTD_JSON_PATH_MAX bytes: a long path is cut. */
__attribute__((format(printf, 2, 3)))
static void pathf(char *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(out, PTD_JSON_PATH_MAX, fmt, ap);
	va_end(ap);
}

const char *ptd_json_path(char *out, const char *prefix, const char *key)
{
	pathf(out, "%s%s%s", prefix, *prefix ? "." : "", key);
	return out;
}

const char *ptd_json_path_index(char *out, const char *prefix,
				const char *key, size_t idx)
{
	pathf(out, "%s%s%s[%zu]", prefix, *prefix ? "." : "", key, idx);
	return out;
}

const char *ptd_json_type_name(const cJSON *it)
{
	if (!it)
		return "nothing";
	if (cJSON_IsString(it))
		return "a string";
	if (cJSON_IsNumber(it))
		return "a number";
	if (cJSON_IsBool(it))
		return "a boolean";
	if (cJSON_IsNull(it))
		return "null";
	if (cJSON_IsArray(it))
		return "an array";
	if (cJSON_IsObject(it))
		return "an object";
	return "invalid";
}

int ptd_json_badf(const struct ptd_json_reader *r, int err, const char *path,
		  const char *fmt, ...)
{
	char what[PTD_DIAG_MAX];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ptd_diagf(r->diag, err, "%s%s%s%s%s", r->origin,
			 *r->origin ? ": " : "", path, *path ? ": " : "",
			 what);
}

int ptd_json_bad(const struct ptd_json_reader *r, const char *path,
		 const char *what)
{
	return ptd_json_badf(r, -PTD_EFORMAT, path, "%s", what);
}

/* "expected WHAT, not TYPE" */
static int wrong_type(const struct ptd_json_reader *r, const char *path,
		      const char *what, const cJSON *it)
{
	return ptd_json_badf(r, -PTD_EFORMAT, path, "expected %s, not %s",
			     what, ptd_json_type_name(it));
}

/* Member @key of @obj, its path into @path; NULL when absent (or null,
 * with PTD_JSON_NULL_ABSENT). */
static const cJSON *member(const cJSON *obj, const char *prefix,
			   const char *key, char *path)
{
	ptd_json_path(path, prefix, key);
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* Absent (NULL, or null with PTD_JSON_NULL_ABSENT): -ENOENT, or an error
 * when required; 0 when present. */
static int absent(const struct ptd_json_reader *r, const cJSON *it,
		  const char *path, unsigned flags)
{
	if (it && !((flags & PTD_JSON_NULL_ABSENT) && cJSON_IsNull(it)))
		return 0;
	return (flags & PTD_JSON_REQUIRED) ? ptd_json_bad(r, path, "missing")
					   : -ENOENT;
}

static int out_of_range(const struct ptd_json_reader *r, const char *path,
			unsigned flags, const char *value, uint64_t min,
			uint64_t max, bool over)
{
	if (over && (flags & PTD_JSON_LIMIT))
		return ptd_json_badf(r, -PTD_ELIMIT, path,
				     "%s is over the limit %" PRIu64, value,
				     max);
	return ptd_json_badf(r, -PTD_EFORMAT, path,
			     "%s out of range [%" PRIu64 ", %" PRIu64 "]",
			     value, min, max);
}

#define HEX_WANTED "a hex string \"0x...\" (64 bits at most)"

/* A string integer (PTD_JSON_INT_STRING or PTD_JSON_HEX) into *@v. */
static int string_int(const struct ptd_json_reader *r, const char *path,
		      unsigned flags, const char *s, uint64_t min,
		      uint64_t max, uint64_t *v)
{
	bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	int e;

	if ((flags & PTD_JSON_HEX) && !hex)
		e = -EINVAL;
	else
		e = ptd_json_parse_int_string(s, strlen(s), v);
	if (e == 0)
		return 0;
	if (flags & PTD_JSON_HEX)
		return ptd_json_badf(r, -PTD_EFORMAT, path,
				     "expected " HEX_WANTED ", not \"%.40s\"",
				     s);
	if (e == -ERANGE) {
		char q[64];

		(void)snprintf(q, sizeof(q), "\"%.40s\"", s);
		return out_of_range(r, path, flags, q, min, max, true);
	}
	return ptd_json_badf(r, -PTD_EFORMAT, path,
			     "\"%.40s\" is not a decimal or 0x-hex integer%s",
			     s,
			     s[0] == '0' && is_digit(s[1])
				     ? " (a leading 0: octal to LLDB)"
				     : "");
}

/* A number item into *@v. */
static int number_int(const struct ptd_json_reader *r, const cJSON *it,
		      const char *path, unsigned flags, uint64_t min,
		      uint64_t max, uint64_t *v)
{
	struct ptd_json_num num;
	bool big;

	if (ptd_json_number(r->doc, it, &num) < 0)
		return ptd_json_bad(r, path, "expected an integer");
	switch (num.kind) {
	case PTD_JSON_NUM_REAL:
		if (!(flags & PTD_JSON_INT_WHOLE))
			return ptd_json_bad(r, path,
					    "expected an integer, not a "
					    "fraction or an exponent");
		if (!num.whole)
			return ptd_json_bad(r, path,
					    "expected an integer, not a "
					    "fraction");
		big = num.whole_big;
		num.magnitude = num.whole_magnitude;
		break;
	case PTD_JSON_NUM_BIG:
		big = true;
		break;
	case PTD_JSON_NUM_INT:
	default:
		big = false;
		break;
	}
	if (num.negative && (big || num.magnitude))
		return ptd_json_bad(r, path, "expected a non-negative integer");
	if (big)
		return out_of_range(r, path, flags, "an integer over 64 bits",
				    min, max, true);
	*v = num.magnitude;
	return 0;
}

int ptd_json_read_u64(const struct ptd_json_reader *r, const cJSON *it,
		      const char *path, unsigned flags, uint64_t min,
		      uint64_t max, uint64_t *ret)
{
	char val[64];
	uint64_t v = 0;
	int e = absent(r, it, path, flags);

	if (e < 0)
		return e;
	if ((flags & (PTD_JSON_INT_STRING | PTD_JSON_HEX)) &&
	    cJSON_IsString(it) && it->valuestring)
		e = string_int(r, path, flags, it->valuestring, min, max, &v);
	else if (flags & PTD_JSON_HEX)
		e = wrong_type(r, path, HEX_WANTED, it);
	else if (!cJSON_IsNumber(it))
		e = wrong_type(r, path,
			       (flags & PTD_JSON_INT_STRING)
				       ? "an integer or an integer string"
				       : "an integer",
			       it);
	else
		e = number_int(r, it, path, flags, min, max, &v);
	if (e < 0)
		return e;
	if (v < min || v > max) {
		(void)snprintf(val, sizeof(val),
			       (flags & PTD_JSON_HEX) ? "0x%" PRIx64
						      : "%" PRIu64, v);
		return out_of_range(r, path, flags, val, min, max, v > max);
	}
	*ret = v;
	return 0;
}

int ptd_json_read_str(const struct ptd_json_reader *r, const cJSON *it,
		      const char *path, unsigned flags, size_t max,
		      const char **ret)
{
	int e = absent(r, it, path, flags);

	if (e < 0)
		return e;
	if (!cJSON_IsString(it) || !it->valuestring)
		return wrong_type(r, path, "a string", it);
	if ((flags & PTD_JSON_NONEMPTY) && !it->valuestring[0])
		return ptd_json_bad(r, path, "empty string");
	if (strnlen(it->valuestring, max) >= max && it->valuestring[max])
		return ptd_json_badf(r,
				     (flags & PTD_JSON_LIMIT) ? -PTD_ELIMIT
							      : -PTD_EFORMAT,
				     path, "longer than %zu bytes", max);
	*ret = it->valuestring;
	return 0;
}

int ptd_json_read_bool(const struct ptd_json_reader *r, const cJSON *it,
		       const char *path, unsigned flags, bool *ret)
{
	int e = absent(r, it, path, flags);

	if (e < 0)
		return e;
	if (!cJSON_IsBool(it))
		return wrong_type(r, path, "a boolean", it);
	*ret = cJSON_IsTrue(it);
	return 0;
}

int ptd_json_get_u64(const struct ptd_json_reader *r, const cJSON *obj,
		     const char *prefix, const char *key, unsigned flags,
		     uint64_t min, uint64_t max, uint64_t *ret)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *it = member(obj, prefix, key, path);

	return ptd_json_read_u64(r, it, path, flags, min, max, ret);
}

int ptd_json_get_strn(const struct ptd_json_reader *r, const cJSON *obj,
		      const char *prefix, const char *key, unsigned flags,
		      size_t max, const char **ret)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *it = member(obj, prefix, key, path);

	return ptd_json_read_str(r, it, path, flags, max, ret);
}

int ptd_json_get_str(const struct ptd_json_reader *r, const cJSON *obj,
		     const char *prefix, const char *key, unsigned flags,
		     const char **ret)
{
	return ptd_json_get_strn(r, obj, prefix, key, flags, SIZE_MAX, ret);
}

int ptd_json_get_strdup(const struct ptd_json_reader *r, const cJSON *obj,
			const char *prefix, const char *key, unsigned flags,
			size_t max, char **ret)
{
	const char *s;
	char *d;
	int e = ptd_json_get_strn(r, obj, prefix, key, flags, max, &s);

	if (e < 0)
		return e;
	d = strdup(s);
	if (!d)
		return -ENOMEM;
	*ret = d;
	return 0;
}

int ptd_json_get_bool(const struct ptd_json_reader *r, const cJSON *obj,
		      const char *prefix, const char *key, unsigned flags,
		      bool *ret)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *it = member(obj, prefix, key, path);

	return ptd_json_read_bool(r, it, path, flags, ret);
}

int ptd_json_get_object(const struct ptd_json_reader *r, const cJSON *obj,
			const char *prefix, const char *key, unsigned flags,
			const cJSON **ret)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *it = member(obj, prefix, key, path);
	int e = absent(r, it, path, flags);

	if (e < 0)
		return e;
	if (!cJSON_IsObject(it))
		return wrong_type(r, path, "an object", it);
	*ret = it;
	return 0;
}

int ptd_json_get_array(const struct ptd_json_reader *r, const cJSON *obj,
		       const char *prefix, const char *key, unsigned flags,
		       size_t max, const cJSON **ret, size_t *ret_n)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *it = member(obj, prefix, key, path);
	int e = absent(r, it, path, flags);
	int n;

	if (e < 0)
		return e;
	if (!cJSON_IsArray(it))
		return wrong_type(r, path, "an array", it);
	n = cJSON_GetArraySize(it);
	if (n < 0 || (size_t)n > max)
		return ptd_json_badf(r, -PTD_ELIMIT, path,
				     "%d elements, more than the %zu allowed",
				     n, max);
	*ret = it;
	*ret_n = (size_t)n;
	return 0;
}

int ptd_json_check_keys(const struct ptd_json_reader *r, const cJSON *obj,
			const char *path, const char *const *keys)
{
	char p[PTD_JSON_PATH_MAX];
	const cJSON *k, *k2;
	size_t i;

	cJSON_ArrayForEach(k, obj) {
		const char *name = k->string ? k->string : "";

		for (i = 0; keys[i]; i++)
			if (!strcmp(name, keys[i]))
				break;
		if (!keys[i])
			return ptd_json_badf(r, -PTD_EFORMAT, path,
					     "unknown field \"%.64s\"", name);
		for (k2 = k->next; k2; k2 = k2->next)
			if (k2->string && !strcmp(name, k2->string))
				return ptd_json_bad(r, ptd_json_path(p, path,
								     name),
						    "given twice");
	}
	return 0;
}

int ptd_json_check_format(const struct ptd_json_reader *r, const cJSON *root,
			  const char *format, uint64_t version)
{
	const char *s;
	uint64_t v;
	int e;

	if (!cJSON_IsObject(root))
		return ptd_json_bad(r, "", "not a JSON object");
	e = ptd_json_get_str(r, root, "", "format", PTD_JSON_REQUIRED, &s);
	if (e < 0)
		return e;
	if (strcmp(s, format) != 0)
		return ptd_json_badf(r, -PTD_EFORMAT, "format",
				     "\"%.64s\" is not \"%s\"", s, format);
	e = ptd_json_get_u64(r, root, "", "version",
			     PTD_JSON_REQUIRED | PTD_JSON_INT_WHOLE, 0,
			     UINT64_MAX, &v);
	if (e < 0)
		return e;
	if (v != version)
		return ptd_json_badf(r, -PTD_EVERSION, "version",
				     "%" PRIu64 " not supported (only %" PRIu64
				     ")", v, version);
	return 0;
}
