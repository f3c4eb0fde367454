/* SPDX-License-Identifier: MIT */
/*
 * Subscriber filters: compiled once at subscribe time, matched per record on
 * the session's decode thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/filter.h"
#include "x86/insn.h"

int ptd_iclass_parse(const char *name)
{
	int c;

	if (!name)
		return -1;
	for (c = ptic_error; c <= ptic_ptwrite; c++)
		if (!strcmp(name, ptd_iclass_name((enum pt_insn_class)c)))
			return c;
	return -1;
}

static int cmp_tid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

static int cmp_range(const void *a, const void *b)
{
	const struct ptd_addr_range *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

/* Sort the ranges by start and merge overlapping or touching ones, so a
 * binary search finds the only candidate. */
static unsigned merge_ranges(struct ptd_addr_range *r, unsigned n)
{
	unsigned i, out = 0;

	if (!n)
		return 0;
	qsort(r, n, sizeof(*r), cmp_range);
	for (i = 1; i < n; i++) {
		if (r[i].start <= r[out].end) {
			if (r[i].end > r[out].end)
				r[out].end = r[i].end;
		} else {
			r[++out] = r[i];
		}
	}
	return out + 1;
}

int ptd_filter_compile(const struct ptd_filter_spec *spec,
		       struct ptd_filter *ret)
{
	struct ptd_filter f;
	unsigned i;

	if (!spec || !ret || !(spec->kinds & PTD_REC_ALL) ||
	    spec->ntids > PTD_FILTER_MAX_TIDS ||
	    spec->nranges > PTD_FILTER_MAX_RANGES ||
	    !memchr(spec->module, 0, sizeof(spec->module)))
		return -EINVAL;
	for (i = 0; i < spec->nranges; i++)
		if (spec->ranges[i].start >= spec->ranges[i].end)
			return -EINVAL;
	memset(&f, 0, sizeof(f));
	f.spec = *spec;
	f.spec.kinds &= PTD_REC_ALL;
	qsort(f.spec.tids, f.spec.ntids, sizeof(pid_t), cmp_tid);
	f.spec.nranges = merge_ranges(f.spec.ranges, f.spec.nranges);
	f.code_filter = f.spec.nranges || f.spec.iclasses || f.spec.module[0];
	*ret = f;
	return 0;
}

static bool tid_match(const struct ptd_filter *f, pid_t tid)
{
	return bsearch(&tid, f->spec.tids, f->spec.ntids, sizeof(pid_t),
		       cmp_tid) != NULL;
}

/* Does [lo, hi] (inclusive) overlap one of the merged ranges? */
static bool range_match(const struct ptd_filter *f, uint64_t lo, uint64_t hi)
{
	unsigned a = 0, b = f->spec.nranges;

	/* The last range starting at or below hi is the only candidate:
	 * ranges are disjoint and sorted. */
	while (a < b) {
		unsigned m = a + (b - a) / 2;

		if (f->spec.ranges[m].start <= hi)
			a = m + 1;
		else
			b = m;
	}
	return a > 0 && f->spec.ranges[a - 1].end > lo;
}

static bool module_match(struct ptd_filter *f, const char *module)
{
	size_t n;

	if (!module)
		return false;
	n = strlen(module);
	if (f->mod_ptr == module && f->mod_len == n &&
	    !memcmp(f->mod_name, module, n))
		return f->mod_match;
	f->mod_match = strstr(module, f->spec.module) != NULL;
	if (n < sizeof(f->mod_name)) {
		memcpy(f->mod_name, module, n);
		f->mod_ptr = module;
		f->mod_len = n;
	} else {
		f->mod_ptr = NULL;
	}
	return f->mod_match;
}

static bool code_match(struct ptd_filter *f, uint64_t lo, uint64_t hi,
		       enum pt_insn_class iclass, const char *module)
{
	if (f->spec.nranges && !range_match(f, lo, hi))
		return false;
	if (f->spec.iclasses &&
	    ((unsigned)iclass >= 32 ||
	     !(f->spec.iclasses & (1u << (unsigned)iclass))))
		return false;
	if (f->spec.module[0] && !module_match(f, module))
		return false;
	return true;
}

bool ptd_filter_match(struct ptd_filter *f, const struct ptd_record *r)
{
	if ((unsigned)r->type >= PTD_REC_NTYPES ||
	    !(f->spec.kinds & PTD_REC_BIT(r->type)))
		return false;
	/* the session's counts, whatever its threads and code: the
	 * snapshots this subscriber is due, to its top */
	if (r->type == PTD_REC_COUNTERS)
		return f->counters_due &&
		       (r->u.counters.of == PTD_COUNTERS_TOTAL ||
			r->u.counters.rank <= f->spec.counters_top);
	if (f->spec.ntids && !tid_match(f, r->tid))
		return false;
	if (!f->code_filter)
		return true;
	switch (r->type) {
	case PTD_REC_INSN:
	case PTD_REC_FIRST_EXEC:
		return code_match(f, r->u.insn.ip, r->u.insn.ip,
				  r->u.insn.iclass, r->u.insn.module);
	case PTD_REC_BLOCK:
		return code_match(f, r->u.block.ip,
				  r->u.block.end_ip < r->u.block.ip
					  ? r->u.block.ip
					  : r->u.block.end_ip,
				  r->u.block.iclass, r->u.block.module);
	case PTD_REC_EVENT:
	case PTD_REC_ERROR:
	case PTD_REC_CALL:	/* a stack is the thread's, not a range's */
	case PTD_REC_COUNTERS:
	case PTD_REC_TRACE:
	case PTD_REC_TRACE_WITHDRAWN:
	case PTD_REC_NTYPES:
	case PTD_REC_IMAGE:
		break;
	}
	return true;
}
