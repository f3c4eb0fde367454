/* SPDX-License-Identifier: MIT */
/*
 * perf.data reader (see read.h).  Everything is checked against the input's
 * size before it is read; multi-byte fields of sections are read with
 * memcpy, and records are only ever addressed at 8-aligned offsets (the data
 * section offset and every record/payload size must be multiples of 8, as
 * perf writes them), so a hostile file cannot cause a misaligned access.
 */
#include "perfdata/read.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bytes.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "perfdata/read-int.h"

/* "NAME: offset 0xOFF: what" */
int pdr_fail(struct rd *r, int err, uint64_t off, const char *fmt, ...)
{
	char what[PTD_DIAG_MAX];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ptd_diagf(r->diag, err, "%s: offset 0x%" PRIx64 ": %s",
			 r->pd->name, off, what);
}

/* Grow *@arr (elements of @esz) to hold @n + 1, doubling. */
int pdr_grow(void **arr, size_t *cap, size_t n, size_t esz)
{
	size_t nc;
	void *p;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 64;
	p = reallocarray(*arr, nc, esz);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

/* ---- attrs ------------------------------------------------------------ */

/* One perf_event_attr at @p (@avail bytes there), then @nids ids at @ids. */
static int add_attr(struct rd *r, const uint8_t *p, size_t avail,
		    uint64_t off, const uint8_t *ids, uint64_t nids)
{
	struct ptd_perfdata *pd = r->pd;
	struct ptd_perfdata_evattr *ea;
	uint32_t asz;
	size_t i;

	if (avail < PTD_PERFDATA_ATTR_SIZE_VER0)
		return pdr_fail(r, -PTD_ETRUNC, off, "attr of %zu bytes is "
				"shorter than the first attr version (%u)", avail,
				PTD_PERFDATA_ATTR_SIZE_VER0);
	asz = ptd_get_u32(p + 4);
	if (asz == 0)	/* perf: a zero size means the first version */
		asz = PTD_PERFDATA_ATTR_SIZE_VER0;
	if (asz < PTD_PERFDATA_ATTR_SIZE_VER0 || asz > avail || asz % 8)
		return pdr_fail(r, -PTD_EFORMAT, off, "attr.size %u is not a "
				"multiple of 8 between %u and the %zu bytes its "
				"entry has", asz, PTD_PERFDATA_ATTR_SIZE_VER0,
				avail);
	for (i = sizeof(struct perf_event_attr); i < asz; i++)
		if (p[i])
			return pdr_fail(r, -PTD_EUNSUPPORTED, off, "attr.size %u "
					"has non-zero fields this reader does "
					"not know (beyond byte %zu)", asz,
					sizeof(struct perf_event_attr));
	if (pd->nattrs >= PTD_PERFDATA_MAX_ATTRS)
		return pdr_fail(r, -PTD_ELIMIT, off, "more than %u event attrs",
				PTD_PERFDATA_MAX_ATTRS);
	if (nids > PTD_PERFDATA_MAX_IDS - r->total_ids)
		return pdr_fail(r, -PTD_ELIMIT, off, "more than %u sample ids",
				PTD_PERFDATA_MAX_IDS);
	ea = reallocarray(pd->attrs, pd->nattrs + 1, sizeof(*ea));
	if (!ea)
		return -ENOMEM;
	pd->attrs = ea;
	ea = &pd->attrs[pd->nattrs];
	memset(ea, 0, sizeof(*ea));
	memcpy(&ea->attr, p,
	       asz < sizeof(ea->attr) ? asz : sizeof(ea->attr));
	ea->attr.size = asz;
	if (nids) {
		ea->ids = calloc(nids, sizeof(*ea->ids));
		if (!ea->ids)
			return -ENOMEM;
		memcpy(ea->ids, ids, nids * sizeof(*ea->ids));
	}
	ea->nids = nids;
	r->total_ids += nids;
	pd->nattrs++;
	return 0;
}

static int read_file_attrs(struct rd *r,
			   const struct ptd_perfdata_file_header *h)
{
	const uint8_t *d = r->pd->data;
	uint64_t i, n;
	int err;

	if (h->attr_size < PTD_PERFDATA_ATTR_SIZE_VER0 + 16 ||
	    h->attr_size > 4096 || h->attr_size % 8)
		return pdr_fail(r, -PTD_EFORMAT, 16, "attr_size %" PRIu64 " is "
				"not a multiple of 8 between %u and 4096",
				h->attr_size, PTD_PERFDATA_ATTR_SIZE_VER0 + 16);
	n = h->attrs.size / h->attr_size;
	if (n > PTD_PERFDATA_MAX_ATTRS)
		return pdr_fail(r, -PTD_ELIMIT, 24, "%" PRIu64 " event attrs "
				"(limit %u)", n, PTD_PERFDATA_MAX_ATTRS);
	if (!pdr_inside(h->attrs.offset, h->attrs.size, r->pd->size))
		return pdr_fail(r, -PTD_ETRUNC, 24, "attrs section [0x%" PRIx64
				", +%" PRIu64 ") lies outside the %zu-byte file",
				h->attrs.offset, h->attrs.size, r->pd->size);
	if (h->attrs.size % h->attr_size)
		return pdr_fail(r, -PTD_EFORMAT, 24, "attrs section size %" PRIu64
				" is not a multiple of attr_size %" PRIu64,
				h->attrs.size, h->attr_size);
	for (i = 0; i < n; i++) {
		uint64_t off = h->attrs.offset + i * h->attr_size;
		const uint8_t *e = d + off;
		size_t asz = h->attr_size - 16;
		uint64_t ioff = ptd_get_u64(e + asz), isz = ptd_get_u64(e + asz + 8);

		if (!pdr_inside(ioff, isz, r->pd->size) || isz % 8)
			return pdr_fail(r, -PTD_EFORMAT, off + asz, "ids section "
					"[0x%" PRIx64 ", +%" PRIu64 ") of attr %"
					PRIu64 " lies outside the file or is not "
					"a multiple of 8 bytes", ioff, isz, i);
		err = add_attr(r, e, asz, off, d + ioff, isz / 8);
		if (err < 0)
			return err;
	}
	return 0;
}


/* ---- user records ----------------------------------------------------- */

static int parse_auxtrace_info(struct rd *r, const uint8_t *p, uint16_t size,
			       uint64_t off)
{
	struct ptd_perfdata_ptinfo *pt = &r->pd->pt;
	const uint8_t *w = p + 16;
	size_t n;

	if (pt->present)
		return pdr_fail(r, -PTD_EFORMAT, off, "a second AUXTRACE_INFO "
				"record");
	if (size < 16)
		return pdr_fail(r, -PTD_EFORMAT, off, "AUXTRACE_INFO of %u bytes "
				"(needs 16)", size);
	memset(pt, 0, sizeof(*pt));
	pt->present = true;
	pt->type = ptd_get_u32(p + 8);
	pt->npriv = n = (size - 16u) / 8;
	if (pt->type != PTD_PERFDATA_AUXTRACE_INTEL_PT)
		return 0;	/* the decoder refuses it, with its type */
	if (n < PTD_PERFDATA_INTEL_PT_PER_CPU_MMAPS + 1)
		return pdr_fail(r, -PTD_EFORMAT, off, "Intel PT AUXTRACE_INFO "
				"with %zu words (perf needs at least %d)", n,
				PTD_PERFDATA_INTEL_PT_PER_CPU_MMAPS + 1);
#define W(i) ptd_get_u64(w + 8 * (i))
	pt->pmu_type = W(PTD_PERFDATA_INTEL_PT_PMU_TYPE);
	pt->clock.time_shift = (uint16_t)W(PTD_PERFDATA_INTEL_PT_TIME_SHIFT);
	pt->clock.time_mult = (uint32_t)W(PTD_PERFDATA_INTEL_PT_TIME_MULT);
	pt->clock.time_zero = W(PTD_PERFDATA_INTEL_PT_TIME_ZERO);
	pt->cap_user_time_zero = W(PTD_PERFDATA_INTEL_PT_CAP_USER_TIME_ZERO);
	pt->tsc_bit = W(PTD_PERFDATA_INTEL_PT_TSC_BIT);
	pt->noretcomp_bit = W(PTD_PERFDATA_INTEL_PT_NORETCOMP_BIT);
	pt->have_sched_switch = W(PTD_PERFDATA_INTEL_PT_HAVE_SCHED_SWITCH);
	pt->snapshot_mode = W(PTD_PERFDATA_INTEL_PT_SNAPSHOT_MODE);
	pt->per_cpu_mmaps = W(PTD_PERFDATA_INTEL_PT_PER_CPU_MMAPS);
	if (n > PTD_PERFDATA_INTEL_PT_CYC_BIT) {
		pt->mtc_bit = W(PTD_PERFDATA_INTEL_PT_MTC_BIT);
		pt->mtc_freq_bits = W(PTD_PERFDATA_INTEL_PT_MTC_FREQ_BITS);
		pt->tsc_ctc_n = W(PTD_PERFDATA_INTEL_PT_TSC_CTC_N);
		pt->tsc_ctc_d = W(PTD_PERFDATA_INTEL_PT_TSC_CTC_D);
		pt->cyc_bit = W(PTD_PERFDATA_INTEL_PT_CYC_BIT);
	}
	if (n > PTD_PERFDATA_INTEL_PT_MAX_NONTURBO_RATIO)
		pt->max_nonturbo_ratio =
			W(PTD_PERFDATA_INTEL_PT_MAX_NONTURBO_RATIO);
	if (n > PTD_PERFDATA_INTEL_PT_FILTER_STR_LEN) {
		uint64_t flen = W(PTD_PERFDATA_INTEL_PT_FILTER_STR_LEN);
		size_t room = (n - PTD_PERFDATA_INTEL_PT_PRIV_MAX) * 8;
		const char *f = (const char *)w + 8 * PTD_PERFDATA_INTEL_PT_PRIV_MAX;

		if (n < PTD_PERFDATA_INTEL_PT_PRIV_MAX)
			room = 0;
		if (flen && (flen >= room || f[flen] != '\0'))
			return pdr_fail(r, -PTD_EFORMAT, off, "address filter of "
					"%" PRIu64 " bytes does not fit (NUL "
					"included) in the %zu bytes after the "
					"Intel PT words", flen, room);
		pt->filter = flen ? f : NULL;
	}
#undef W
	if (pt->cap_user_time_zero &&
	    (pt->clock.time_mult == 0 || pt->clock.time_shift >= 32))
		return pdr_fail(r, -PTD_EFORMAT, off, "time conversion with "
				"time_mult %u, time_shift %u", pt->clock.time_mult,
				pt->clock.time_shift);
	return 0;
}

static int parse_time_conv(struct rd *r, const uint8_t *p, uint16_t size,
			   uint64_t off)
{
	struct ptd_perfdata_time_conv tc;

	if (size < PTD_PERFDATA_TIME_CONV_MIN_SIZE)
		return pdr_fail(r, -PTD_EFORMAT, off, "TIME_CONV of %u bytes "
				"(needs %u)", size,
				PTD_PERFDATA_TIME_CONV_MIN_SIZE);
	memset(&tc, 0, sizeof(tc));
	memcpy(&tc, p, size < sizeof(tc) ? size : sizeof(tc));
	memset(&r->pd->time_conv, 0, sizeof(r->pd->time_conv));
	r->pd->time_conv.time_shift = (uint16_t)tc.time_shift;
	r->pd->time_conv.time_mult = (uint32_t)tc.time_mult;
	r->pd->time_conv.time_zero = tc.time_zero;
	r->pd->time_conv.time_cycles = tc.time_cycles;
	r->pd->time_conv.time_mask = tc.time_mask;
	r->pd->time_conv.cap_user_time_short = tc.cap_user_time_short;
	r->pd->have_time_conv = true;
	return 0;
}

/* AUXTRACE at @off (its header checked): the payload follows.  Returns
 * the payload size. */
static int64_t add_auxtrace(struct rd *r, const uint8_t *p, uint64_t off,
			    uint64_t end)
{
	struct ptd_perfdata *pd = r->pd;
	struct ptd_perfdata_auxtrace a;
	struct ptd_perfdata_auxtrace_rec *ar;

	memcpy(&a, p, sizeof(a));
	if (a.header.size != sizeof(a))
		return pdr_fail(r, -PTD_EFORMAT, off, "AUXTRACE record of %u "
				"bytes (expected %zu)", a.header.size, sizeof(a));
	if (a.size % 8)
		return pdr_fail(r, -PTD_EFORMAT, off, "AUXTRACE payload size %"
				PRIu64 " is not a multiple of 8", a.size);
	if (!pdr_inside(off + sizeof(a), a.size, end))
		return pdr_fail(r, -PTD_ETRUNC, off, "AUXTRACE payload of %" PRIu64
				" bytes runs past the end of the data (0x%" PRIx64
				")", a.size, end);
	if (pd->nauxtrace >= PTD_PERFDATA_MAX_AUXTRACE)
		return pdr_fail(r, -PTD_ELIMIT, off, "more than %u AUXTRACE "
				"records", PTD_PERFDATA_MAX_AUXTRACE);
	if (pdr_grow((void **)&pd->auxtrace, &r->aux_cap, pd->nauxtrace,
		     sizeof(*ar)) < 0)
		return -ENOMEM;
	ar = &pd->auxtrace[pd->nauxtrace++];
	ar->rec_offset = off;
	ar->data = p + sizeof(a);
	ar->size = a.size;
	ar->offset = a.offset;
	ar->reference = a.reference;
	ar->idx = a.idx;
	ar->tid = a.tid;
	ar->cpu = a.cpu;
	return (int64_t)a.size;
}

/* A user record; returns the payload bytes that follow it (AUXTRACE). */
static int64_t user_record(struct rd *r, const uint8_t *p, uint64_t off,
			   uint64_t end)
{
	struct perf_event_header hh;
	const struct perf_event_header *h = &hh;
	int err = 0;

	memcpy(&hh, p, sizeof(hh));
	switch (h->type) {
	case PTD_PERFDATA_RECORD_AUXTRACE:
		if (h->size < sizeof(struct ptd_perfdata_auxtrace))
			return pdr_fail(r, -PTD_EFORMAT, off, "AUXTRACE record of "
					"%u bytes (expected 48)", h->size);
		return add_auxtrace(r, p, off, end);
	case PTD_PERFDATA_RECORD_COMPRESSED:
		return pdr_fail(r, -PTD_EUNSUPPORTED, off, "compressed records "
				"(perf record -z) are not supported: decompress "
				"with 'perf inject -i IN -o OUT'");
	case PTD_PERFDATA_RECORD_HEADER_TRACING_DATA: {
		/* A pipe's tracepoint formats (perf record -e a:tracepoint
		 * -o -): the record's size field counts the payload that
		 * follows it, padded to 8 as perf writes and checks it.
		 * Nothing ptd decodes needs them: skipped. */
		uint32_t n;

		if (h->size < 16)
			return pdr_fail(r, -PTD_EFORMAT, off, "HEADER_TRACING_DATA"
					" of %u bytes (expected 16)", h->size);
		n = ptd_get_u32(p + 8);
		if (n % 8)
			return pdr_fail(r, -PTD_EFORMAT, off, "tracing data size "
					"%u is not a multiple of 8", n);
		if (!pdr_inside(off + h->size, n, end))
			return pdr_fail(r, -PTD_ETRUNC, off, "tracing data of %u "
					"bytes runs past the end of the data "
					"(0x%" PRIx64 ")", n, end);
		r->pd->other_records++;
		return n;
	}
	case PTD_PERFDATA_RECORD_HEADER_ATTR: {
		uint32_t asz;

		if (h->size < 8 + PTD_PERFDATA_ATTR_SIZE_VER0)
			return pdr_fail(r, -PTD_EFORMAT, off, "HEADER_ATTR of %u "
					"bytes", h->size);
		asz = ptd_get_u32(p + 12);
		if (asz == 0)
			asz = PTD_PERFDATA_ATTR_SIZE_VER0;
		if (asz > h->size - 8u)
			return pdr_fail(r, -PTD_EFORMAT, off, "HEADER_ATTR attr."
					"size %u beyond its %u-byte record", asz,
					h->size);
		err = add_attr(r, p + 8, asz, off, p + 8 + asz,
			       (h->size - 8u - asz) / 8);
		break;
	}
	case PTD_PERFDATA_RECORD_HEADER_FEATURE:
		if (h->size < sizeof(struct ptd_perfdata_header_feature))
			return pdr_fail(r, -PTD_EFORMAT, off, "HEADER_FEATURE of "
					"%u bytes", h->size);
		err = pdr_parse_feature(r, ptd_get_u64(p + 8), p + 16, h->size - 16u,
					off + 16);
		/* a defined feature: pdr_parse_feature checked it */
		if (err == 0 && ptd_get_u64(p + 8) != 0 &&
		    ptd_get_u64(p + 8) < PTD_PERFDATA_HEADER_LAST_FEATURE)
			ptd_perfdata_feat_set(r->pd->features,
					      (unsigned)ptd_get_u64(p + 8));
		break;
	case PTD_PERFDATA_RECORD_HEADER_BUILD_ID: {
		int64_t n = pdr_add_buildid(r, p, h->size, off);

		err = n < 0 ? (int)n : 0;
		break;
	}
	case PTD_PERFDATA_RECORD_AUXTRACE_INFO:
		err = parse_auxtrace_info(r, p, h->size, off);
		break;
	case PTD_PERFDATA_RECORD_TIME_CONV:
		err = parse_time_conv(r, p, h->size, off);
		break;
	default:
		r->pd->other_records++;
		break;
	}
	return err;
}

/* Walk the records in [start, end). */
static int walk_records(struct rd *r, uint64_t start, uint64_t end)
{
	struct ptd_perfdata *pd = r->pd;
	uint64_t pos = start;

	while (pos < end) {
		const uint8_t *p = pd->data + pos;
		struct perf_event_header h;
		struct ptd_perfdata_rec *rec;
		int64_t extra = 0;

		if (end - pos < sizeof(h))
			return pdr_fail(r, -PTD_ETRUNC, pos, "record header cut "
					"short (%" PRIu64 " bytes left)", end - pos);
		memcpy(&h, p, sizeof(h));
		if (h.size < sizeof(h))
			return pdr_fail(r, -PTD_EFORMAT, pos, "record type %u has "
					"size %u, below its 8-byte header", h.type,
					h.size);
		/* The kernel pads its records to 8 bytes; perf's own
		 * (pipe-mode HEADER_FEATURE) need not be. */
		if (h.type < PTD_PERFDATA_RECORD_USER_TYPE_START && h.size % 8)
			return pdr_fail(r, -PTD_EFORMAT, pos, "record type %u size "
					"%u is not a multiple of 8", h.type,
					h.size);
		if (h.size > end - pos)
			return pdr_fail(r, -PTD_ETRUNC, pos, "record type %u of %u "
					"bytes runs past the end of the data "
					"(0x%" PRIx64 ")", h.type, h.size, end);
		if (pd->nrecs >= PTD_PERFDATA_MAX_RECORDS)
			return pdr_fail(r, -PTD_ELIMIT, pos, "more than %u "
					"records", PTD_PERFDATA_MAX_RECORDS);
		if (h.type >= PTD_PERFDATA_RECORD_USER_TYPE_START) {
			extra = user_record(r, p, pos, end);
			if (extra < 0)
				return (int)extra;
		}
		if (pdr_grow((void **)&pd->recs, &r->recs_cap, pd->nrecs,
			     sizeof(*rec)) < 0)
			return -ENOMEM;
		rec = &pd->recs[pd->nrecs++];
		rec->offset = pos;
		rec->type = h.type;
		rec->hdr = (const void *)p;	/* aligned by align_records() */
		rec->aux = h.type == PTD_PERFDATA_RECORD_AUXTRACE
				   ? (uint32_t)(pd->nauxtrace - 1)
				   : UINT32_MAX;
		rec->attr = -1;
		pos += h.size + (uint64_t)extra;
	}
	return 0;
}

/* Kernel records after an odd-sized perf record (pipe mode) sit at
 * unaligned addresses: copy those into one aligned buffer, so every
 * record's hdr can be read in place. */
static size_t rec_size(const void *hdr)
{
	uint16_t sz;

	memcpy(&sz, (const uint8_t *)hdr + 6, sizeof(sz));
	return sz;
}

static int align_records(struct rd *r)
{
	struct ptd_perfdata *pd = r->pd;
	size_t i, need = 0;
	uint8_t *p;

	for (i = 0; i < pd->nrecs; i++)
		if (pd->recs[i].type < PTD_PERFDATA_RECORD_USER_TYPE_START &&
		    (uintptr_t)pd->recs[i].hdr % 8)
			need += rec_size(pd->recs[i].hdr);
	if (!need)
		return 0;
	pd->shadow_ = malloc(need);
	if (!pd->shadow_)
		return -ENOMEM;
	p = pd->shadow_;
	for (i = 0; i < pd->nrecs; i++) {
		const uint8_t *src = (const uint8_t *)pd->recs[i].hdr;
		size_t sz;

		if (pd->recs[i].type >= PTD_PERFDATA_RECORD_USER_TYPE_START ||
		    (uintptr_t)src % 8 == 0)
			continue;
		sz = rec_size(src);
		memcpy(p, src, sz);
		pd->recs[i].hdr = (const void *)p;
		p += sz;
	}
	return 0;
}

/* ---- sample_id layouts ------------------------------------------------ */

static int idmap_cmp(const void *a, const void *b)
{
	const struct idmap *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static bool same_layout(const struct perf_event_attr *a,
			const struct perf_event_attr *b)
{
	return a->sample_id_all == b->sample_id_all &&
	       (a->sample_type & PTD_PERF_SID_SAMPLE_TYPES) ==
		       (b->sample_type & PTD_PERF_SID_SAMPLE_TYPES);
}

/* How the attr of a kernel record is found: -1 all alike (attr 0), else
 * the id's slot counted from the record's end (1: IDENTIFIER). */
static int id_slot(struct rd *r, int *ret)
{
	struct ptd_perfdata *pd = r->pd;
	int slot = -1;
	size_t i, n = 0;

	for (i = 1; i < pd->nattrs; i++)
		if (!same_layout(&pd->attrs[0].attr, &pd->attrs[i].attr))
			break;
	if (i >= pd->nattrs) {
		*ret = -1;
		return 0;
	}
	for (i = 0; i < pd->nattrs; i++) {
		const struct perf_event_attr *a = &pd->attrs[i].attr;
		uint64_t st = a->sample_type;
		int s;

		if (!a->sample_id_all)
			break;
		if (st & PERF_SAMPLE_IDENTIFIER)
			s = 1;
		else if (st & PERF_SAMPLE_ID)
			s = 1 + !!(st & PERF_SAMPLE_STREAM_ID) +
			    !!(st & PERF_SAMPLE_CPU);
		else
			break;
		if (slot >= 0 && s != slot)
			break;
		slot = s;
	}
	if (i < pd->nattrs)
		return pdr_fail(r, -PTD_EUNSUPPORTED, 0, "its %zu events have "
				"different sample_id layouts and no common "
				"sample id position", pd->nattrs);
	for (i = 0; i < pd->nattrs; i++)
		n += pd->attrs[i].nids;
	r->idmap = calloc(n ? n : 1, sizeof(*r->idmap));
	if (!r->idmap)
		return -ENOMEM;
	for (i = 0; i < pd->nattrs; i++) {
		size_t k;

		for (k = 0; k < pd->attrs[i].nids; k++) {
			r->idmap[r->nidmap].id = pd->attrs[i].ids[k];
			r->idmap[r->nidmap++].attr = (int)i;
		}
	}
	qsort(r->idmap, r->nidmap, sizeof(*r->idmap), idmap_cmp);
	*ret = slot;
	return 0;
}

/* Give every kernel record its attr and parse the ones ptd uses. */
static int check_kernel_records(struct rd *r)
{
	struct ptd_perfdata *pd = r->pd;
	size_t i;
	int slot = -1, err;

	for (i = 0; i < pd->nrecs; i++)
		if (pd->recs[i].type < PTD_PERFDATA_RECORD_USER_TYPE_START)
			break;
	if (i == pd->nrecs)
		return 0;
	if (!pd->nattrs)
		return pdr_fail(r, -PTD_EFORMAT, pd->recs[i].offset, "kernel "
				"record before any event attr");
	err = id_slot(r, &slot);
	if (err < 0)
		return err;
	for (i = 0; i < pd->nrecs; i++) {
		struct ptd_perfdata_rec *rec = &pd->recs[i];
		const struct perf_event_header *h = rec->hdr;
		struct ptd_perf_event ev;

		if (rec->type >= PTD_PERFDATA_RECORD_USER_TYPE_START)
			continue;
		if (h->type == PERF_RECORD_SAMPLE) {
			pd->samples++;
			continue;
		}
		rec->attr = 0;
		if (slot > 0) {
			struct idmap key, *m;

			if (h->size < 8u + 8u * (unsigned)slot)
				return pdr_fail(r, -PTD_EFORMAT, rec->offset,
						"%s record of %u bytes is too "
						"short for its sample id",
						ptd_perf_record_name(h->type),
						h->size);
			key.id = ptd_get_u64((const uint8_t *)h + h->size -
					 8u * (unsigned)slot);
			/* perf synthesizes kernel and module MMAPs (and
			 * more) with a zeroed sample_id and reads id 0 as
			 * the first event's, as ptd does. */
			m = key.id ? bsearch(&key, r->idmap, r->nidmap,
					     sizeof(key), idmap_cmp) : NULL;
			if (key.id && !m)
				return pdr_fail(r, -PTD_EFORMAT, rec->offset,
						"%s record's sample id %" PRIu64
						" belongs to no event",
						ptd_perf_record_name(h->type),
						key.id);
			if (m)
				rec->attr = m->attr;
		}
		err = ptd_perfdata_event(pd, i, &ev, r->diag);
		if (err < 0)
			return err;
		if (ev.type == PERF_RECORD_LOST)
			pd->lost_records += ev.u.lost.lost;
		if (ev.other)
			pd->other_records++;
	}
	return 0;
}

int ptd_perfdata_event(const struct ptd_perfdata *pd, size_t i,
		       struct ptd_perf_event *ret, struct ptd_diag *diag)
{
	const struct ptd_perfdata_rec *rec;
	const struct perf_event_attr *a;
	struct ptd_diag d = { "" };
	int err;

	if (!pd || !ret || i >= pd->nrecs || pd->recs[i].attr < 0 ||
	    (size_t)pd->recs[i].attr >= pd->nattrs)
		return -EINVAL;
	rec = &pd->recs[i];
	a = &pd->attrs[rec->attr].attr;
	err = ptd_perf_event_parse(rec->hdr, a->sample_type, a->sample_id_all,
				   ret, &d);
	if (err < 0)
		return ptd_diagf(diag, err, "%s: offset 0x%" PRIx64 ": %s",
				 pd->name, rec->offset, d.msg);
	return 0;
}

/* Every AUXTRACE index entry names an AUXTRACE record we read. */
static int check_index(struct rd *r)
{
	struct ptd_perfdata *pd = r->pd;
	size_t i, lo, hi;

	for (i = 0; i < pd->nindex; i++) {
		uint64_t fo = pd->index[i].file_offset;

		lo = 0;
		hi = pd->nauxtrace;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (pd->auxtrace[mid].rec_offset < fo)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == pd->nauxtrace || pd->auxtrace[lo].rec_offset != fo)
			return pdr_fail(r, -PTD_EFORMAT, fo, "auxtrace index entry "
					"%zu points at 0x%" PRIx64 ", which is not "
					"an AUXTRACE record", i, fo);
	}
	return 0;
}

/* ---- top level -------------------------------------------------------- */

static int parse_mem(struct rd *r)
{
	struct ptd_perfdata *pd = r->pd;
	struct ptd_perfdata_file_header h;
	uint64_t magic, hsize;
	int err;

	if (pd->size < 16)
		return pdr_fail(r, -PTD_ETRUNC, 0, "%zu bytes: too short for a "
				"perf.data header", pd->size);
	magic = ptd_get_u64(pd->data);
	hsize = ptd_get_u64(pd->data + 8);
	if (magic == PTD_PERFDATA_MAGIC_SWAPPED)
		return pdr_fail(r, -PTD_EUNSUPPORTED, 0, "perf.data of a "
				"big-endian machine");
	if (magic != PTD_PERFDATA_MAGIC)
		return pdr_fail(r, -PTD_EFORMAT, 0, "bad magic 0x%016" PRIx64
				" (not PERFILE2)", magic);
	if (hsize == sizeof(struct ptd_perfdata_pipe_header)) {
		pd->pipe = true;
		err = walk_records(r, 16, pd->size);
	} else if (hsize == sizeof(h)) {
		if (pd->size < sizeof(h))
			return pdr_fail(r, -PTD_ETRUNC, 0, "file header cut short "
					"(%zu of %zu bytes)", pd->size, sizeof(h));
		memcpy(&h, pd->data, sizeof(h));
		memcpy(pd->features, h.features, sizeof(pd->features));
		if (!pdr_inside(h.data.offset, h.data.size, pd->size))
			return pdr_fail(r, -PTD_ETRUNC, 40, "data section [0x%"
					PRIx64 ", +%" PRIu64 ") lies outside the "
					"%zu-byte file", h.data.offset,
					h.data.size, pd->size);
		if (h.data.offset % 8 || h.data.offset < sizeof(h))
			return pdr_fail(r, -PTD_EFORMAT, 40, "data section offset "
					"0x%" PRIx64 " is inside the header or not "
					"8-aligned", h.data.offset);
		/* Records before features: a bad data size is reported as
		 * such, not as a misplaced feature table. */
		err = read_file_attrs(r, &h);
		if (err == 0)
			err = walk_records(r, h.data.offset,
					   h.data.offset + h.data.size);
		if (err == 0)
			err = pdr_read_file_features(r, &h);
	} else {
		return pdr_fail(r, -PTD_EFORMAT, 8, "header size %" PRIu64
				" (expected %zu, or 16 for a pipe)", hsize,
				sizeof(h));
	}
	if (err == 0)
		err = align_records(r);
	if (err == 0)
		err = check_kernel_records(r);
	if (err == 0)
		err = check_index(r);
	return err;
}

void ptd_perfdata_free(struct ptd_perfdata *pd)
{
	size_t i;

	if (!pd)
		return;
	for (i = 0; i < pd->nattrs; i++)
		free(pd->attrs[i].ids);
	free(pd->attrs);
	free(pd->index);
	free(pd->buildids);
	free(pd->recs);
	free(pd->auxtrace);
	free(pd->buf_);
	free(pd->shadow_);
	free(pd->name);
	free(pd);
}

static int finish(struct ptd_perfdata *pd, struct ptd_perfdata **ret,
		  struct ptd_diag *diag)
{
	struct rd r = { .pd = pd, .diag = diag };
	int err = parse_mem(&r);

	free(r.idmap);
	if (err < 0) {
		ptd_perfdata_free(pd);
		return err;
	}
	*ret = pd;
	return 0;
}

static struct ptd_perfdata *pd_new(const char *name)
{
	struct ptd_perfdata *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	pd->name = strdup(name ? name : "perf.data");
	if (!pd->name) {
		free(pd);
		return NULL;
	}
	return pd;
}

int ptd_perfdata_parse(const void *data, size_t len, const char *name,
		       struct ptd_perfdata **ret, struct ptd_diag *diag)
{
	struct ptd_perfdata *pd;

	if (!data || !ret)
		return -EINVAL;
	pd = pd_new(name);
	if (!pd)
		return -ENOMEM;
	pd->buf_ = malloc(len ? len : 1);
	if (!pd->buf_) {
		ptd_perfdata_free(pd);
		return -ENOMEM;
	}
	memcpy(pd->buf_, data, len);
	pd->data = pd->buf_;
	pd->size = len;
	return finish(pd, ret, diag);
}

/* Read @fd to its end into memory; @hint: the bytes expected (0: unknown),
 * reserved at once so a file's bytes are not copied while they grow. */
static int read_all(int fd, const char *name, uint64_t hint,
		    struct ptd_perfdata **ret, struct ptd_diag *diag)
{
	struct ptd_buf b = { 0 };
	struct ptd_perfdata *pd;

	if (fd < 0 || !ret)
		return -EINVAL;
	pd = pd_new(name);
	if (!pd)
		return -ENOMEM;
	if (hint && ptd_buf_reserve(&b, (size_t)hint + 1) < 0) {
		ptd_perfdata_free(pd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n;

		if (b.len >= PTD_PERFDATA_PIPE_MAX) {
			ptd_buf_fini(&b);
			ptd_perfdata_free(pd);
			return ptd_diagf(diag, -PTD_ELIMIT, "%s: stream longer "
					 "than %llu bytes", name ? name : "",
					 PTD_PERFDATA_PIPE_MAX);
		}
		if (ptd_buf_reserve(&b, 1u << 16) < 0) {
			ptd_buf_fini(&b);
			ptd_perfdata_free(pd);
			return -ENOMEM;
		}
		n = read(fd, b.data + b.len, b.cap - b.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;

			ptd_buf_fini(&b);
			ptd_perfdata_free(pd);
			return ptd_diagf(diag, err, "cannot read '%s': %s",
					 name ? name : "", strerror(-err));
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
	}
	pd->buf_ = b.data;
	pd->data = b.data ? b.data : (const uint8_t *)"";
	pd->size = b.len;
	return finish(pd, ret, diag);
}

int ptd_perfdata_read_fd(int fd, const char *name, struct ptd_perfdata **ret,
			 struct ptd_diag *diag)
{
	return read_all(fd, name, 0, ret, diag);
}

/* A file is read, never mapped: whoever can write it (a client of the
 * daemon replaying its own file) could truncate a mapping under the
 * reader, and the fault (SIGBUS) would end the whole process. */
static int open_file(const char *path, bool streams,
		     struct ptd_perfdata **ret, struct ptd_diag *diag)
{
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (!path || !ret)
		return -EINVAL;
	if (streams && !strcmp(path, "-"))
		return ptd_perfdata_read_fd(STDIN_FILENO, "-", ret, diag);
	fd = ptd_file_open_regular(AT_FDCWD, path, 0, &st, diag);
	if (fd == -PTD_ENOTREG && streams) {
		/* A FIFO (or a device) the user named: a stream, opened as
		 * such (blocking until its writer comes). */
		fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			return ptd_diagf(diag, -errno, "cannot open '%s': %s",
					 path, strerror(errno));
		return ptd_perfdata_read_fd(fd, path, ret, diag);
	}
	if (fd < 0)
		return fd;
	if (st.st_size < 16)
		return ptd_diagf(diag, -PTD_ETRUNC, "%s: offset 0x0: %lld "
				 "bytes: too short for a perf.data header",
				 path, (long long)st.st_size);
	if ((uint64_t)st.st_size > PTD_PERFDATA_PIPE_MAX)
		return ptd_diagf(diag, -PTD_ELIMIT, "%s: %lld bytes, more "
				 "than %llu", path, (long long)st.st_size,
				 PTD_PERFDATA_PIPE_MAX);
	return read_all(fd, path, (uint64_t)st.st_size, ret, diag);
}

int ptd_perfdata_open(const char *path, struct ptd_perfdata **ret,
		      struct ptd_diag *diag)
{
	return open_file(path, true, ret, diag);
}

int ptd_perfdata_open_file(const char *path, struct ptd_perfdata **ret,
			   struct ptd_diag *diag)
{
	return open_file(path, false, ret, diag);
}

const struct ptd_perfdata_buildid *
ptd_perfdata_find_buildid(const struct ptd_perfdata *pd, const char *filename)
{
	size_t i;

	if (!pd || !filename)
		return NULL;
	for (i = 0; i < pd->nbuildids; i++)
		if (!strcmp(pd->buildids[i].filename, filename))
			return &pd->buildids[i];
	return NULL;
}
