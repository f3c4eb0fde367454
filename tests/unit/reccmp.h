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

static inline bool reccmp_str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

/* The name of the first field in which @a and @b differ, or NULL. */
static inline const char *reccmp_diff(const struct ptd_record *a,
				      const struct ptd_record *b)
{
#define RC_FIELD(f)                                                           \
	do {                                                                  \
		if (a->f != b->f)                                             \
			return #f;                                            \
	} while (0)
	RC_FIELD(type);
	RC_FIELD(pid);
	RC_FIELD(tid);
	RC_FIELD(has_tsc);
	if (a->has_tsc)
		RC_FIELD(tsc);
	switch (a->type) {
	case PTD_REC_INSN:
		RC_FIELD(u.insn.ip);
		RC_FIELD(u.insn.modoff);
		if (!reccmp_str_eq(a->u.insn.module, b->u.insn.module))
			return "u.insn.module";
		RC_FIELD(u.insn.isid);
		RC_FIELD(u.insn.mode);
		RC_FIELD(u.insn.iclass);
		RC_FIELD(u.insn.flags);
		RC_FIELD(u.insn.size);
		if (memcmp(a->u.insn.raw, b->u.insn.raw,
			   a->u.insn.size <= sizeof(a->u.insn.raw)
				   ? a->u.insn.size
				   : sizeof(a->u.insn.raw)))
			return "u.insn.raw";
		return NULL;
	case PTD_REC_BLOCK:
		RC_FIELD(u.block.ip);
		RC_FIELD(u.block.end_ip);
		RC_FIELD(u.block.modoff);
		if (!reccmp_str_eq(a->u.block.module, b->u.block.module))
			return "u.block.module";
		RC_FIELD(u.block.isid);
		RC_FIELD(u.block.mode);
		RC_FIELD(u.block.iclass);
		RC_FIELD(u.block.ninsn);
		RC_FIELD(u.block.flags);
		if (a->u.block.flags & PTD_F_TRUNCATED) {
			RC_FIELD(u.block.size);
			if (memcmp(a->u.block.raw, b->u.block.raw,
				   a->u.block.size <= sizeof(a->u.block.raw)
					   ? a->u.block.size
					   : sizeof(a->u.block.raw)))
				return "u.block.raw";
		}
		return NULL;
	case PTD_REC_EVENT: {
		/* Every variant field is in the JSON line; compare that. */
		static char la[PTD_JSON_MAX_RECORD], lb[PTD_JSON_MAX_RECORD];
		size_t na, nb;

		RC_FIELD(u.event.offset);
		RC_FIELD(u.event.ev.type);
		RC_FIELD(u.event.ev.ip_suppressed);
		RC_FIELD(u.event.ev.status_update);
		RC_FIELD(u.event.ev.has_tsc);
		if (a->u.event.ev.has_tsc)
			RC_FIELD(u.event.ev.tsc);
		RC_FIELD(u.event.ev.lost_mtc);
		RC_FIELD(u.event.ev.lost_cyc);
		na = ptd_json_record(la, sizeof(la), a);
		nb = ptd_json_record(lb, sizeof(lb), b);
		if (na != nb || memcmp(la, lb, na))
			return "u.event.ev.variant";
		return NULL;
	}
	case PTD_REC_ERROR:
		RC_FIELD(u.error.code);
		RC_FIELD(u.error.ptd_code);
		RC_FIELD(u.error.offset);
		RC_FIELD(u.error.ip_valid);
		if (a->u.error.ip_valid)
			RC_FIELD(u.error.ip);
		if (!reccmp_str_eq(a->u.error.context, b->u.error.context))
			return "u.error.context";
		RC_FIELD(u.error.skipped);
		return NULL;
	case PTD_REC_NTYPES:
		break;
	}
	return "type (invalid)";
#undef RC_FIELD
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
