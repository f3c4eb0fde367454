/* SPDX-License-Identifier: MIT */
/*
 * Test helper: a projected record line (record.h, enum ptd_field) must be
 * the full line restricted to the chosen fields: the same keys in the same
 * order with the same values, for insn and block records; every other
 * line whole.  Header-only, for any test.
 */
#ifndef PTD_TESTS_FIELDCMP_H
#define PTD_TESTS_FIELDCMP_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/record.h"

/* @full restricted to @fields, printed by cJSON (NULL if @full is not a
 * JSON object with a "type" or a key of an insn or block record is not a
 * field name).  The caller frees it. */
static inline char *fieldcmp_restrict(const char *full, size_t len,
				      uint32_t fields)
{
	cJSON *o = cJSON_ParseWithLength(full, len), *k, *next;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
	char *s = NULL;

	if (!cJSON_IsObject(o) || !cJSON_IsString(t))
		goto out;
	if (!strcmp(t->valuestring, "insn") ||
	    !strcmp(t->valuestring, "block")) {
		for (k = o->child; k; k = next) {
			int f = ptd_field_parse(k->string);

			next = k->next;
			if (f < 0)
				goto out;
			if (!(fields & PTD_FIELD_BIT(f)) &&
			    f != PTD_FIELD_TYPE)
				cJSON_Delete(cJSON_DetachItemViaPointer(o, k));
		}
	}
	s = cJSON_PrintUnformatted(o);
out:
	cJSON_Delete(o);
	return s;
}

/* Is @proj (@plen bytes) @full (@flen bytes) restricted to @fields?  On a
 * difference both are printed to stderr. */
static inline bool fieldcmp_line(const char *full, size_t flen,
				 const char *proj, size_t plen,
				 uint32_t fields)
{
	char *want = fieldcmp_restrict(full, flen, fields);
	cJSON *p = cJSON_ParseWithLength(proj, plen);
	char *got = p ? cJSON_PrintUnformatted(p) : NULL;
	bool ok = want && got && !strcmp(want, got);

	if (!ok)
		fprintf(stderr, "fields 0x%x:\n  full:      %.*s\n  want:      "
			"%s\n  projected: %.*s\n",
			fields, (int)flen, full, want ? want : "(none)",
			(int)plen, proj);
	free(want);
	free(got);
	cJSON_Delete(p);
	return ok;
}

/* The same over two streams of lines (the n-th line of each). */
static inline bool fieldcmp_stream(const char *full, size_t flen,
				   const char *proj, size_t plen,
				   uint32_t fields, size_t *ret_lines)
{
	const char *a = full, *ae = full + flen, *b = proj, *be = proj + plen;
	size_t n = 0;

	while (a < ae && b < be) {
		const char *na = memchr(a, '\n', (size_t)(ae - a));
		const char *nb = memchr(b, '\n', (size_t)(be - b));

		if (!na || !nb)
			break;
		if (!fieldcmp_line(a, (size_t)(na - a), b, (size_t)(nb - b),
				   fields)) {
			fprintf(stderr, "  at line %zu\n", n + 1);
			return false;
		}
		n++;
		a = na + 1;
		b = nb + 1;
	}
	if (ret_lines)
		*ret_lines = n;
	if (a != ae || b != be) {
		fprintf(stderr, "streams of different lengths after %zu "
			"lines\n", n);
		return false;
	}
	return true;
}

#endif
