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

/* The number literal at @s (@n bytes left, s[0] is '-' or a digit), by
 * JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
 * Returns its length, or 0 if it is not a JSON number. */
static size_t scan_number(const char *s, size_t n, struct ptd_json_num *num)
{
	size_t i = 0;

	memset(num, 0, sizeof(*num));
	num->kind = PTD_JSON_NUM_INT;
	if (s[i] == '-') {
		num->negative = true;
		i++;
	}
	if (i >= n || !is_digit(s[i]))
		return 0;
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
		num->kind = PTD_JSON_NUM_REAL;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		size_t d0;

		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		d0 = i;
		while (i < n && is_digit(s[i]))
			i++;
		if (i == d0)
			return 0;
		num->kind = PTD_JSON_NUM_REAL;
	}
	/* "01", "1.2.3": what cJSON's strtod would read differently */
	if (i < n && in_number(s[i]))
		return 0;
	if (num->kind != PTD_JSON_NUM_INT)
		num->magnitude = 0;
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
			for (i++; i < n && s[i] != '"'; i++)
				if (s[i] == '\\')
					i++;
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

int ptd_json_parse(const char *text, size_t len, const char *origin,
		   struct ptd_json **ret, struct ptd_diag *diag)
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

int ptd_json_bad(const struct ptd_json_reader *r, const char *path,
		 const char *what)
{
	return ptd_diagf(r->diag, -PTD_EFORMAT, "%s: %s: %s", r->origin, path,
			 what);
}

/* Member @key of @obj, its path into @path; NULL when absent (or null,
 * with PTD_JSON_NULL_ABSENT). */
static const cJSON *member(const cJSON *obj, const char *prefix,
			   const char *key, unsigned flags, char *path)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

	ptd_json_path(path, prefix, key);
	if (it && (flags & PTD_JSON_NULL_ABSENT) && cJSON_IsNull(it))
		return NULL;
	return it;
}

static int absent(const struct ptd_json_reader *r, const char *path,
		  unsigned flags)
{
	return (flags & PTD_JSON_REQUIRED) ? ptd_json_bad(r, path, "missing")
					   : -ENOENT;
}

static int out_of_range(const struct ptd_json_reader *r, const char *path,
			const char *value, uint64_t min, uint64_t max)
{
	return ptd_diagf(r->diag, -PTD_EFORMAT,
			 "%s: %s: %s out of range [%" PRIu64 ", %" PRIu64 "]",
			 r->origin, path, value, min, max);
}

int ptd_json_get_u64(const struct ptd_json_reader *r, const cJSON *obj,
		     const char *prefix, const char *key, unsigned flags,
		     uint64_t min, uint64_t max, uint64_t *ret)
{
	char path[PTD_JSON_PATH_MAX], val[64];
	const cJSON *it = member(obj, prefix, key, flags, path);
	struct ptd_json_num num;
	uint64_t v = 0;
	int e;

	if (!it)
		return absent(r, path, flags);
	if ((flags & PTD_JSON_INT_STRING) && cJSON_IsString(it) &&
	    it->valuestring) {
		const char *s = it->valuestring;

		e = ptd_json_parse_int_string(s, strlen(s), &v);
		if (e == -ERANGE) {
			char q[64];

			(void)snprintf(q, sizeof(q), "\"%.40s\"", s);
			return out_of_range(r, path, q, min, max);
		}
		if (e < 0)
			return ptd_diagf(r->diag, -PTD_EFORMAT,
					 "%s: %s: \"%.40s\" is not a decimal "
					 "or 0x-hex integer%s", r->origin,
					 path, s,
					 s[0] == '0' && is_digit(s[1])
						 ? " (a leading 0: octal to "
						   "LLDB)"
						 : "");
	} else if (!cJSON_IsNumber(it)) {
		return ptd_json_bad(r, path,
				    (flags & PTD_JSON_INT_STRING)
					    ? "expected an integer or an "
					      "integer string"
					    : "expected an integer");
	} else {
		if (ptd_json_number(r->doc, it, &num) < 0)
			return ptd_json_bad(r, path, "expected an integer");
		switch (num.kind) {
		case PTD_JSON_NUM_REAL:
			return ptd_json_bad(r, path,
					    "expected an integer, not a "
					    "fraction or an exponent");
		case PTD_JSON_NUM_BIG:
			if (num.negative)
				return ptd_json_bad(r, path,
						    "expected a non-negative "
						    "integer");
			return out_of_range(r, path,
					    "an integer over 64 bits", min,
					    max);
		case PTD_JSON_NUM_INT:
			break;
		}
		if (num.negative && num.magnitude)
			return ptd_json_bad(r, path,
					    "expected a non-negative integer");
		v = num.magnitude;
	}
	if (v < min || v > max) {
		(void)snprintf(val, sizeof(val), "%" PRIu64, v);
		return out_of_range(r, path, val, min, max);
	}
	*ret = v;
	return 0;
}

int ptd_json_get_str(const struct ptd_json_reader *r, const cJSON *obj,
		     const char *prefix, const char *key, unsigned flags,
		     const char **ret)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *it = member(obj, prefix, key, flags, path);

	if (!it)
		return absent(r, path, flags);
	if (!cJSON_IsString(it) || !it->valuestring)
		return ptd_json_bad(r, path, "expected a string");
	if ((flags & PTD_JSON_NONEMPTY) && !it->valuestring[0])
		return ptd_json_bad(r, path, "empty string");
	*ret = it->valuestring;
	return 0;
}

int ptd_json_get_object(const struct ptd_json_reader *r, const cJSON *obj,
			const char *prefix, const char *key, unsigned flags,
			const cJSON **ret)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *it = member(obj, prefix, key, flags, path);

	if (!it)
		return absent(r, path, flags);
	if (!cJSON_IsObject(it))
		return ptd_json_bad(r, path, "expected an object");
	*ret = it;
	return 0;
}

int ptd_json_get_array(const struct ptd_json_reader *r, const cJSON *obj,
		       const char *prefix, const char *key, unsigned flags,
		       size_t max, const cJSON **ret, size_t *ret_n)
{
	char path[PTD_JSON_PATH_MAX];
	const cJSON *it = member(obj, prefix, key, flags, path);
	int n;

	if (!it)
		return absent(r, path, flags);
	if (!cJSON_IsArray(it))
		return ptd_json_bad(r, path, "expected an array");
	n = cJSON_GetArraySize(it);
	if (n < 0 || (size_t)n > max)
		return ptd_diagf(r->diag, -PTD_ELIMIT,
				 "%s: %s: %d elements, more than the %zu "
				 "allowed", r->origin, path, n, max);
	*ret = it;
	*ret_n = (size_t)n;
	return 0;
}
