/* SPDX-License-Identifier: MIT */
/*
 * Test helpers for decoder records: collect them, and compare two records
 * (or two sequences) over every field, naming the first that differs.
 * Header-only (static functions) so any test can include it.
 */
#ifndef PTD_TESTS_RECCMP_H
#define PTD_TESTS_RECCMP_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/jsonw.h"
#include "record/record.h"
#include "record/diff.h"

/* A growable list of records; a ptd_record_fn that appends to it. */
struct reclist {
	struct ptd_record *r;
	size_t n, cap;
	size_t stop_after;	/* non-zero: return stop_rc at this count */
	int stop_rc;
};

static inline int reclist_add(void *ctx, const struct ptd_record *rec)
{
	struct reclist *l = ctx;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		struct ptd_record *r = realloc(l->r, cap * sizeof(*r));

		if (!r)
			abort();
		l->r = r;
		l->cap = cap;
	}
	l->r[l->n++] = *rec;
	if (l->stop_after && l->n == l->stop_after)
		return l->stop_rc;
	return 0;
}

static inline void reclist_free(struct reclist *l)
{
	free(l->r);
	memset(l, 0, sizeof(*l));
}

/* The name of the first field in which @a and @b differ, or NULL. */
static inline const char *reccmp_diff(const struct ptd_record *a,
				      const struct ptd_record *b)
{
	return ptd_record_diff(a, b, 0);
}

static inline void reccmp_print(FILE *f, const char *prefix,
				const struct ptd_record *r)
{
	static char buf[PTD_JSON_MAX_RECORD];
	size_t n = ptd_json_record(buf, sizeof(buf), r);

	fprintf(f, "%s%.*s", prefix, (int)n, buf);
	if (!n)
		fprintf(f, "(unprintable record)\n");
}

/*
 * Compare two sequences.  Returns true if equal; otherwise prints the first
 * difference (index, field, both records) to @f and returns false.
 */
static inline bool reccmp_lists(FILE *f, const char *name_a,
				const struct reclist *a, const char *name_b,
				const struct reclist *b)
{
	size_t n = a->n < b->n ? a->n : b->n;

	for (size_t i = 0; i < n; i++) {
		const char *field = reccmp_diff(&a->r[i], &b->r[i]);

		if (field) {
			fprintf(f, "record %zu differs in %s:\n", i, field);
			reccmp_print(f, name_a, &a->r[i]);
			reccmp_print(f, name_b, &b->r[i]);
			return false;
		}
	}
	if (a->n != b->n) {
		const struct reclist *l = a->n > b->n ? a : b;

		fprintf(f, "%s has %zu records, %s has %zu; first extra:\n",
			name_a, a->n, name_b, b->n);
		reccmp_print(f, l == a ? name_a : name_b, &l->r[n]);
		return false;
	}
	return true;
}

#endif
