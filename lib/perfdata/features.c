/* SPDX-License-Identifier: MIT */
/*
 * perf.data reader (see read.h): the feature sections of the file header
 * (build ids, cpuid, ...), read under the same rules as the rest (read.c).
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

/* ---- features --------------------------------------------------------- */

int ptd_perfdata_parse_cpuid(const char *s, struct pt_cpu *ret)
{
	unsigned long fam, mod, step;
	char vendor[32];
	int end = 0;

	if (!s || !ret)
		return -EINVAL;
	if (sscanf(s, "%31[^,],%lu,%lu,%lu%n", vendor, &fam, &mod, &step,
		   &end) != 4 || s[end] != '\0' || fam > 0xffff || mod > 0xff ||
	    step > 0xff)
		return -PTD_EFORMAT;
	if (strcmp(vendor, "GenuineIntel"))
		return -PTD_EUNSUPPORTED;
	memset(ret, 0, sizeof(*ret));
	ret->vendor = pcv_intel;
	ret->family = (uint16_t)fam;
	ret->model = (uint8_t)mod;
	ret->stepping = (uint8_t)step;
	return 0;
}

/* A perf header string: u32 len, then len bytes holding a NUL. */
static int feat_string(struct rd *r, const uint8_t *p, uint64_t len,
		       uint64_t off, const char **ret)
{
	uint32_t n;

	if (len < 4)
		return pdr_fail(r, -PTD_ETRUNC, off, "string feature of %" PRIu64
				" bytes has no length", len);
	n = ptd_get_u32(p);
	if (n == 0 || n > len - 4 || !memchr(p + 4, '\0', n))
		return pdr_fail(r, -PTD_EFORMAT, off, "string of %u bytes is not "
				"NUL-terminated inside its %" PRIu64 "-byte "
				"feature", n, len - 4);
	*ret = (const char *)p + 4;
	return 0;
}

/* One build-id entry of @avail bytes at @p: returns its size or < 0. */
int64_t pdr_add_buildid(struct rd *r, const uint8_t *p, uint64_t avail,
			uint64_t off)
{
	struct ptd_perfdata *pd = r->pd;
	struct ptd_perfdata_buildid *b;
	struct perf_event_header h;
	size_t fsz;

	if (avail < sizeof(struct ptd_perfdata_build_id))
		return pdr_fail(r, -PTD_ETRUNC, off, "build-id entry cut short "
				"(%" PRIu64 " bytes left)", avail);
	memcpy(&h, p, sizeof(h));
	if (h.size < sizeof(struct ptd_perfdata_build_id) + 1 ||
	    h.size > avail)
		return pdr_fail(r, -PTD_EFORMAT, off, "build-id entry size %u "
				"outside [%zu, %" PRIu64 "]", h.size,
				sizeof(struct ptd_perfdata_build_id) + 1, avail);
	fsz = h.size - sizeof(struct ptd_perfdata_build_id);
	if (!memchr(p + sizeof(struct ptd_perfdata_build_id), '\0', fsz))
		return pdr_fail(r, -PTD_EFORMAT, off, "build-id entry's file name "
				"is not NUL-terminated");
	if (pd->nbuildids >= PTD_PERFDATA_MAX_BUILD_IDS)
		return pdr_fail(r, -PTD_ELIMIT, off, "more than %u build-ids",
				PTD_PERFDATA_MAX_BUILD_IDS);
	if (pdr_grow((void **)&pd->buildids, &r->bid_cap, pd->nbuildids,
		     sizeof(*b)) < 0)
		return -ENOMEM;
	b = &pd->buildids[pd->nbuildids];
	memcpy(&b->pid, p + 8, 4);
	memcpy(b->id, p + 12, sizeof(b->id));
	b->size = PTD_PERFDATA_BUILD_ID_MAX;
	if (h.misc & PTD_PERFDATA_MISC_BUILD_ID_SIZE) {
		b->size = p[32];
		if (b->size == 0 || b->size > PTD_PERFDATA_BUILD_ID_MAX)
			return pdr_fail(r, -PTD_EFORMAT, off, "build-id size %u "
					"(at most %u)", b->size,
					PTD_PERFDATA_BUILD_ID_MAX);
	}
	b->filename = (const char *)p + sizeof(struct ptd_perfdata_build_id);
	pd->nbuildids++;
	return h.size;
}

static int feat_auxtrace_index(struct rd *r, const uint8_t *p, uint64_t len,
			       uint64_t off)
{
	struct ptd_perfdata *pd = r->pd;
	uint64_t pos = 0;

	while (pos < len) {
		uint64_t nr, i;
		void *n;

		if (len - pos < 8)
			return pdr_fail(r, -PTD_ETRUNC, off + pos, "auxtrace index "
					"count cut short");
		nr = ptd_get_u64(p + pos);
		pos += 8;
		if (nr > PTD_PERFDATA_AUXTRACE_INDEX_GROUP ||
		    nr * 16 > len - pos)
			return pdr_fail(r, -PTD_EFORMAT, off + pos - 8, "auxtrace "
					"index group of %" PRIu64 " entries (at "
					"most %u, %" PRIu64 " bytes left)", nr,
					PTD_PERFDATA_AUXTRACE_INDEX_GROUP,
					len - pos);
		if (pd->nindex + nr > PTD_PERFDATA_MAX_AUXTRACE)
			return pdr_fail(r, -PTD_ELIMIT, off + pos, "more than %u "
					"auxtrace index entries",
					PTD_PERFDATA_MAX_AUXTRACE);
		n = reallocarray(pd->index, pd->nindex + nr + 1,
				 sizeof(*pd->index));
		if (!n)
			return -ENOMEM;
		pd->index = n;
		for (i = 0; i < nr; i++, pos += 16) {
			pd->index[pd->nindex].file_offset = ptd_get_u64(p + pos);
			pd->index[pd->nindex].sz = ptd_get_u64(p + pos + 8);
			pd->nindex++;
		}
	}
	return 0;
}

/* The body of feature @feat: @len bytes at @p, at input offset @off. */
int pdr_parse_feature(struct rd *r, uint64_t feat, const uint8_t *p,
		      uint64_t len, uint64_t off)
{
	struct ptd_perfdata *pd = r->pd;
	const char *s = NULL;
	uint64_t pos;
	int err;

	/* A feature this reader does not know (a newer perf's, or the
	 * HEADER_LAST_FEATURE mark perf ends a pipe's features with) says
	 * nothing ptd needs: perf skips them too.  Counted. */
	if (feat == 0 || feat >= PTD_PERFDATA_HEADER_LAST_FEATURE) {
		pd->unknown_features++;
		return 0;
	}
	switch (feat) {
	case PTD_PERFDATA_HEADER_CPUID:
		err = feat_string(r, p, len, off, &s);
		if (err < 0)
			return err;
		err = ptd_perfdata_parse_cpuid(s, &pd->cpu);
		if (err == -PTD_EFORMAT)
			return pdr_fail(r, err, off, "CPUID '%.64s' is not "
					"VENDOR,FAMILY,MODEL,STEPPING", s);
		pd->have_cpu = err == 0;
		return 0;
	case PTD_PERFDATA_HEADER_OSRELEASE:
		return feat_string(r, p, len, off, &pd->osrelease);
	case PTD_PERFDATA_HEADER_NRCPUS:
		if (len < sizeof(pd->nrcpus))
			return pdr_fail(r, -PTD_ETRUNC, off, "NRCPUS feature of %"
					PRIu64 " bytes (needs 8)", len);
		memcpy(&pd->nrcpus, p, sizeof(pd->nrcpus));
		pd->have_nrcpus = true;
		return 0;
	case PTD_PERFDATA_HEADER_CLOCK_DATA:
		if (len < sizeof(pd->clock_data))
			return pdr_fail(r, -PTD_ETRUNC, off, "CLOCK_DATA feature "
					"of %" PRIu64 " bytes (needs 24)", len);
		memcpy(&pd->clock_data, p, sizeof(pd->clock_data));
		if (pd->clock_data.version < 1)
			return pdr_fail(r, -PTD_EFORMAT, off, "CLOCK_DATA version "
					"0");
		pd->have_clock_data = true;
		return 0;
	case PTD_PERFDATA_HEADER_AUXTRACE:
		return feat_auxtrace_index(r, p, len, off);
	case PTD_PERFDATA_HEADER_BUILD_ID:
		for (pos = 0; pos < len;) {
			int64_t n = pdr_add_buildid(r, p + pos, len - pos,
						    off + pos);

			if (n < 0)
				return (int)n;
			pos += (uint64_t)n;
		}
		return 0;
	default:
		return 0;	/* inside the file; not needed */
	}
}

int pdr_read_file_features(struct rd *r,
			   const struct ptd_perfdata_file_header *h)
{
	const uint8_t *d = r->pd->data;
	uint64_t tab = h->data.offset + h->data.size;
	unsigned feat, k = 0;
	int err;

	for (feat = 0; feat < PTD_PERFDATA_FEAT_BITS; feat++) {
		uint64_t so, sz, eoff;

		if (!ptd_perfdata_feat_test(h->features, feat))
			continue;
		eoff = tab + 16ull * k++;
		if (!pdr_inside(eoff, 16, r->pd->size))
			return pdr_fail(r, -PTD_ETRUNC, eoff, "feature %u's "
					"section entry lies past the end of the "
					"file", feat);
		so = ptd_get_u64(d + eoff);
		sz = ptd_get_u64(d + eoff + 8);
		if (!pdr_inside(so, sz, r->pd->size))
			return pdr_fail(r, -PTD_ETRUNC, eoff, "feature %u section "
					"[0x%" PRIx64 ", +%" PRIu64 ") lies "
					"outside the %zu-byte file", feat, so, sz,
					r->pd->size);
		err = pdr_parse_feature(r, feat, d + so, sz, so);
		if (err < 0)
			return err;
	}
	return 0;
}
