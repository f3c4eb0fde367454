/* SPDX-License-Identifier: MIT */
/*
 * What the perf.data reader's files share (read.c: attrs, records, the
 * top level; features.c: the header's feature sections); not an API.
 */
#ifndef PTD_PERFDATA_READ_INT_H
#define PTD_PERFDATA_READ_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfdata/read.h"

struct rd {
	struct ptd_perfdata *pd;
	struct ptd_diag *diag;
	size_t recs_cap, aux_cap, bid_cap;
	size_t total_ids;
	/* id -> attr, sorted by id (built after all attrs are known) */
	struct idmap { uint64_t id; int attr; } *idmap;
	size_t nidmap;
};

/* "NAME: offset 0xOFF: what" */
int pdr_fail(struct rd *r, int err, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Does [@off, +@len) lie within @size bytes? */
static inline bool pdr_inside(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}
/* Grow *@arr (elements of @esz) to hold @n + 1, doubling. */
int pdr_grow(void **arr, size_t *cap, size_t n, size_t esz);

/* features.c */
/* A build id record at @p (@avail bytes) added; returns its size. */
int64_t pdr_add_buildid(struct rd *r, const uint8_t *p, uint64_t avail,
			uint64_t off);
/* Feature section @feat, @len bytes at @p (file offset @off). */
int pdr_parse_feature(struct rd *r, uint64_t feat, const uint8_t *p,
		      uint64_t len, uint64_t off);
/* Every feature section the file header announces. */
int pdr_read_file_features(struct rd *r,
			   const struct ptd_perfdata_file_header *h);

#endif
