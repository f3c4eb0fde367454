/* SPDX-License-Identifier: MIT */
/*
 * Building perf.data files and pipe streams record by record, from
 * format.h and the sideband encoders, for the perf.data reader's tests.
 * Header-only; include after check.h.  Every event has the sample_id
 * layout ST; attr 0 is intel_pt (type 8, id 1), attr 1 a dummy (id 2).
 */
#ifndef PTD_TESTS_PDBUILD_H
#define PTD_TESTS_PDBUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "perf/sideband.h"
#include "perfdata/format.h"

#define ST (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |             \
	    PERF_SAMPLE_IDENTIFIER)

/* ---- building files --------------------------------------------------- */

struct feat {
	unsigned id;
	struct ptd_buf body;
};

struct fb {
	struct ptd_buf recs;		/* the data section */
	struct perf_event_attr attr[2];
	uint64_t ids[2];
	size_t nattr;
	struct feat feat[8];
	size_t nfeat;
	uint64_t time;
	uint64_t aux_offsets[8];	/* of AUXTRACE records in recs */
	size_t naux;
};

static inline void put(struct ptd_buf *b, const void *p, size_t n)
{
	if (ptd_buf_append(b, p, n) < 0)
		abort();
}

static inline void put_u32(struct ptd_buf *b, uint32_t v) { put(b, &v, 4); }
static inline void put_u64(struct ptd_buf *b, uint64_t v) { put(b, &v, 8); }

static inline struct ptd_perf_sample_id sid(struct fb *f, uint32_t pid,
				     uint32_t tid, uint32_t cpu, uint64_t id)
{
	struct ptd_perf_sample_id s;

	memset(&s, 0, sizeof(s));
	s.pid = pid;
	s.tid = tid;
	s.time = ++f->time;
	s.cpu = cpu;
	s.identifier = id;
	return s;
}

static inline void fb_init(struct fb *f)
{
	memset(f, 0, sizeof(*f));
	for (size_t i = 0; i < 2; i++) {
		f->attr[i].size = PTD_PERFDATA_ATTR_SIZE;
		f->attr[i].sample_type = ST;
		f->attr[i].sample_id_all = 1;
		f->ids[i] = i + 1;
	}
	f->attr[0].type = 8;	/* intel_pt */
	f->attr[1].type = PERF_TYPE_SOFTWARE;
	f->attr[1].config = PERF_COUNT_SW_DUMMY;
	f->nattr = 2;
}

static inline void fb_free(struct fb *f)
{
	ptd_buf_fini(&f->recs);
	for (size_t i = 0; i < f->nfeat; i++)
		ptd_buf_fini(&f->feat[i].body);
}

static inline struct ptd_buf *fb_feat(struct fb *f, unsigned id)
{
	f->feat[f->nfeat].id = id;
	return &f->feat[f->nfeat++].body;
}

static inline void put_string(struct ptd_buf *b, const char *s)
{
	char pad[64] = { 0 };
	size_t n = strlen(s) + 1, p = (n + 63) & ~(size_t)63;

	put_u32(b, (uint32_t)p);
	put(b, s, n);
	put(b, pad, p - n);
}

static inline void fb_ptinfo(struct fb *f, bool per_cpu, const char *filter)
{
	uint64_t priv[PTD_PERFDATA_INTEL_PT_PRIV_MAX] = { 0 };
	struct ptd_perfdata_auxtrace_info h;
	size_t flen = filter ? strlen(filter) : 0;
	size_t fpad = filter ? (flen + 1 + 7) & ~(size_t)7 : 0;
	char buf[64] = { 0 };

	priv[PTD_PERFDATA_INTEL_PT_PMU_TYPE] = 8;
	/* the *_BIT words are config masks, as perf writes them */
	priv[PTD_PERFDATA_INTEL_PT_TSC_BIT] = 1u << 10;
	priv[PTD_PERFDATA_INTEL_PT_NORETCOMP_BIT] = 1u << 11;
	priv[PTD_PERFDATA_INTEL_PT_PER_CPU_MMAPS] = per_cpu;
	priv[PTD_PERFDATA_INTEL_PT_MTC_BIT] = 1u << 9;
	priv[PTD_PERFDATA_INTEL_PT_MTC_FREQ_BITS] = 0xfu << 14;
	priv[PTD_PERFDATA_INTEL_PT_CYC_BIT] = 1u << 1;
	priv[PTD_PERFDATA_INTEL_PT_FILTER_STR_LEN] = flen;
	memset(&h, 0, sizeof(h));
	h.header.type = PTD_PERFDATA_RECORD_AUXTRACE_INFO;
	h.header.size = (uint16_t)(sizeof(h) + sizeof(priv) + fpad);
	h.type = PTD_PERFDATA_AUXTRACE_INTEL_PT;
	put(&f->recs, &h, sizeof(h));
	put(&f->recs, priv, sizeof(priv));
	if (filter) {
		memcpy(buf, filter, flen);
		put(&f->recs, buf, fpad);
	}
}

static inline void fb_rec(struct fb *f, const void *rec, size_t n)
{
	if (!n)
		abort();
	put(&f->recs, rec, n);
}

static inline void fb_comm(struct fb *f, uint32_t pid, uint32_t tid, bool exec,
		    const char *name)
{
	struct ptd_perf_comm c = { pid, tid, exec, name };
	struct ptd_perf_sample_id s = sid(f, pid, tid, 0, 2);
	uint8_t buf[256];

	fb_rec(f, buf, ptd_perf_encode_comm(buf, sizeof(buf), &c, ST, &s));
}

static inline void fb_mmap2(struct fb *f, uint32_t pid, uint64_t addr,
		     uint64_t len, uint64_t pgoff, const char *path,
		     const uint8_t *bid)
{
	struct ptd_perf_mmap m;
	struct ptd_perf_sample_id s = sid(f, pid, pid, 0, 2);
	uint8_t buf[4200];

	memset(&m, 0, sizeof(m));
	m.pid = m.tid = pid;
	m.addr = addr;
	m.len = len;
	m.pgoff = pgoff;
	m.prot = 5;	/* r-x */
	m.flags = 2;	/* MAP_PRIVATE */
	m.filename = path;
	if (bid) {
		m.has_build_id = true;
		m.build_id_size = 20;
		memcpy(m.build_id, bid, 20);
	}
	fb_rec(f, buf, ptd_perf_encode_mmap2(buf, sizeof(buf), &m, ST, &s));
}

static inline void fb_itrace(struct fb *f, uint32_t pid, uint32_t tid,
		      uint32_t cpu)
{
	struct ptd_perf_itrace_start it = { pid, tid };
	struct ptd_perf_sample_id s = sid(f, pid, tid, cpu, 1);
	uint8_t buf[128];

	fb_rec(f, buf,
	       ptd_perf_encode_itrace_start(buf, sizeof(buf), &it, ST, &s));
}

/* PERF_RECORD_AUX (no encoder in sideband.h). */
static inline void fb_aux(struct fb *f, uint32_t pid, uint32_t tid, uint32_t cpu,
		   uint64_t off, uint64_t size, uint64_t flags)
{
	struct perf_event_header h = { PERF_RECORD_AUX, 0, 8 + 24 + 32 };

	put(&f->recs, &h, sizeof(h));
	put_u64(&f->recs, off);
	put_u64(&f->recs, size);
	put_u64(&f->recs, flags);
	put_u32(&f->recs, pid);
	put_u32(&f->recs, tid);
	put_u64(&f->recs, ++f->time);
	put_u32(&f->recs, cpu);
	put_u32(&f->recs, 0);
	put_u64(&f->recs, 1);
}

static inline void fb_auxtrace(struct fb *f, uint32_t tid, uint32_t cpu,
			uint64_t off, const void *data, size_t n)
{
	struct ptd_perfdata_auxtrace a;

	memset(&a, 0, sizeof(a));
	a.header.type = PTD_PERFDATA_RECORD_AUXTRACE;
	a.header.size = sizeof(a);
	a.size = n;
	a.offset = off;
	a.tid = tid;
	a.cpu = cpu;
	f->aux_offsets[f->naux++] = f->recs.len;
	put(&f->recs, &a, sizeof(a));
	put(&f->recs, data, n);
}

static inline void fb_buildid(struct ptd_buf *b, const char *name,
		       const uint8_t *id)
{
	struct ptd_perfdata_build_id e;
	char fn[64] = { 0 };

	memset(&e, 0, sizeof(e));
	e.header.misc = PERF_RECORD_MISC_USER |
			PTD_PERFDATA_MISC_BUILD_ID_SIZE;
	e.header.size = sizeof(e) + sizeof(fn);
	e.pid = -1;
	memcpy(e.build_id, id, 20);
	e.build_id_size = 20;
	(void)snprintf(fn, sizeof(fn), "%s", name);
	put(b, &e, sizeof(e));
	put(b, fn, sizeof(fn));
}

/* The usual features: CPUID, NRCPUS, CLOCK_DATA, BUILD_ID. */
static inline void fb_features(struct fb *f)
{
	static const uint8_t id[20] = { 0xab, 0xcd, 1, 2, 3 };
	struct ptd_perfdata_clock_data cd = { 1, 1, 1000, 2000 };
	struct ptd_perfdata_nrcpus nr = { 8, 4 };

	put_string(fb_feat(f, PTD_PERFDATA_HEADER_CPUID),
		   "GenuineIntel,6,85,4");
	put(fb_feat(f, PTD_PERFDATA_HEADER_NRCPUS), &nr, sizeof(nr));
	put(fb_feat(f, PTD_PERFDATA_HEADER_CLOCK_DATA), &cd, sizeof(cd));
	fb_buildid(fb_feat(f, PTD_PERFDATA_HEADER_BUILD_ID), "/no/such/lib",
		   id);
}

/* Lay out a file-mode perf.data (with the AUXTRACE index feature). */
static inline void fb_file(struct fb *f, struct ptd_buf *out)
{
	struct ptd_perfdata_file_header h;
	struct ptd_buf idx = { 0 };
	uint64_t off, ids_off, data_off, bodies;
	size_t i;

	memset(&h, 0, sizeof(h));
	memset(out, 0, sizeof(*out));
	h.magic = PTD_PERFDATA_MAGIC;
	h.size = sizeof(h);
	h.attr_size = sizeof(struct ptd_perfdata_file_attr);
	h.attrs.offset = sizeof(h);
	h.attrs.size = f->nattr * h.attr_size;
	ids_off = h.attrs.offset + h.attrs.size;
	data_off = ids_off + 8 * f->nattr;
	h.data.offset = data_off;
	h.data.size = f->recs.len;
	if (f->naux) {
		put_u64(&idx, f->naux);
		for (i = 0; i < f->naux; i++) {
			put_u64(&idx, data_off + f->aux_offsets[i]);
			put_u64(&idx, 48);
		}
	}
	for (i = 0; i < f->nfeat; i++)
		ptd_perfdata_feat_set(h.features, f->feat[i].id);
	if (f->naux)
		ptd_perfdata_feat_set(h.features, PTD_PERFDATA_HEADER_AUXTRACE);
	put(out, &h, sizeof(h));
	for (i = 0; i < f->nattr; i++) {
		struct ptd_perfdata_file_attr fa;

		memset(&fa, 0, sizeof(fa));
		memcpy(fa.attr, &f->attr[i], PTD_PERFDATA_ATTR_SIZE);
		fa.ids.offset = ids_off + 8 * i;
		fa.ids.size = 8;
		put(out, &fa, sizeof(fa));
	}
	for (i = 0; i < f->nattr; i++)
		put_u64(out, f->ids[i]);
	put(out, f->recs.data, f->recs.len);
	/* Feature table in bit order, then the bodies. */
	bodies = out->len + 16 * (f->nfeat + !!f->naux);
	off = bodies;
	for (unsigned bit = 0; bit < PTD_PERFDATA_FEAT_BITS; bit++) {
		const struct ptd_buf *b = NULL;

		if (!ptd_perfdata_feat_test(h.features, bit))
			continue;
		for (i = 0; i < f->nfeat; i++)
			if (f->feat[i].id == bit)
				b = &f->feat[i].body;
		if (bit == PTD_PERFDATA_HEADER_AUXTRACE)
			b = &idx;
		put_u64(out, off);
		put_u64(out, b->len);
		off += b->len;
	}
	for (unsigned bit = 0; bit < PTD_PERFDATA_FEAT_BITS; bit++) {
		if (!ptd_perfdata_feat_test(h.features, bit))
			continue;
		for (i = 0; i < f->nfeat; i++)
			if (f->feat[i].id == bit)
				put(out, f->feat[i].body.data,
				    f->feat[i].body.len);
		if (bit == PTD_PERFDATA_HEADER_AUXTRACE)
			put(out, idx.data, idx.len);
	}
	ptd_buf_fini(&idx);
}

/* Lay out a pipe-mode stream. */
static inline void fb_pipe(struct fb *f, struct ptd_buf *out)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	put_u64(out, PTD_PERFDATA_MAGIC);
	put_u64(out, 16);
	for (i = 0; i < f->nattr; i++) {
		struct perf_event_header h = { PTD_PERFDATA_RECORD_HEADER_ATTR,
					       0, 8 + PTD_PERFDATA_ATTR_SIZE +
							  8 };
		put(out, &h, sizeof(h));
		put(out, &f->attr[i], PTD_PERFDATA_ATTR_SIZE);
		put_u64(out, f->ids[i]);
	}
	for (i = 0; i < f->nfeat; i++) {
		struct perf_event_header h = {
			PTD_PERFDATA_RECORD_HEADER_FEATURE, 0,
			(uint16_t)(16 + f->feat[i].body.len)
		};
		put(out, &h, sizeof(h));
		put_u64(out, f->feat[i].id);
		put(out, f->feat[i].body.data, f->feat[i].body.len);
	}
	put(out, f->recs.data, f->recs.len);
}

/* ---- damaging files ---------------------------------------------------- */

/* Damage @b in 1 to 4 random places (@seed for rand_r): a bit flipped, a
 * random byte, a small or huge value spliced over a u16 or u64 (sizes and
 * offsets), or the end cut off.  Leaves @b->len > 0 unless it was cut at
 * 0. */
static inline void pd_mutate(struct ptd_buf *b, uint32_t *seed)
{
	unsigned k, n = 1 + rand_r(seed) % 4;

	for (k = 0; k < n && b->len; k++) {
		size_t at = (size_t)rand_r(seed) % b->len;

		switch (rand_r(seed) % 4) {
		case 0:	/* bit flip */
			b->data[at] ^= (uint8_t)(1u << (rand_r(seed) % 8));
			break;
		case 1:	/* truncation */
			b->len = at;
			break;
		case 2:	/* spliced size: a small or huge value at a u16/u64 */
			if (at + 8 <= b->len) {
				uint64_t v = rand_r(seed) % 2
						     ? (uint64_t)rand_r(seed)
						     : (uint64_t)(rand_r(seed) %
								  512);
				memcpy(b->data + at, &v,
				       rand_r(seed) % 2 ? 2 : 8);
			}
			break;
		default: /* random byte */
			b->data[at] = (uint8_t)rand_r(seed);
			break;
		}
	}
}

#endif
