/* SPDX-License-Identifier: MIT */
#include "decode/psbsplit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int push(struct ptd_psb_block **v, size_t *n, size_t *cap,
		const struct ptd_psb_block *b)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct ptd_psb_block *nv = realloc(*v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = *b;
	return 0;
}

int ptd_psb_split(const uint8_t *pt, size_t len, const struct pt_cpu *cpu,
		  struct ptd_psb_block **ret, size_t *ret_n,
		  uint64_t *ret_skipped)
{
	struct pt_query_decoder *q;
	struct ptd_psb_block *v = NULL;
	struct pt_config cfg;
	size_t n = 0, cap = 0, tries;
	int r = 0;

	if (!cpu || !ret || !ret_n || (!pt && len))
		return -EINVAL;
	*ret = NULL;
	*ret_n = 0;
	if (ret_skipped)
		*ret_skipped = len;
	if (!len)
		return 0;
	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)(uintptr_t)pt;
	cfg.end = cfg.begin + len;
	cfg.cpu = *cpu;
	if (cfg.cpu.vendor == pcv_intel)
		(void)pt_cpu_errata(&cfg.errata, &cfg.cpu); /* unknown: none */
	q = pt_qry_alloc_decoder(&cfg);
	if (!q)
		return -ENOMEM;
	/* Each try consumes a PSB (16 bytes): a bound that does not trust
	 * libipt to always move on. */
	for (tries = len / 16 + 2; tries; tries--) {
		struct ptd_psb_block b;
		uint64_t ip = 0, off = 0;
		int st = pt_qry_sync_forward(q, &ip);

		/* pte_eos: no further PSB.  Any other error is a PSB whose
		 * PSB+ does not decode: libipt moved past it, so looking
		 * for the next one goes on (its bytes stay in the block
		 * before). */
		if (st == -pte_eos)
			break;
		if (st < 0)
			continue;
		if (pt_qry_get_sync_offset(q, &off) < 0 || off >= len)
			break;
		memset(&b, 0, sizeof(b));
		b.offset = off;
		b.has_ip = !(st & pts_ip_suppressed);
		b.ip = b.has_ip ? ip : 0;
		/* The PSB+'s events carry the time it sets (libipt applies
		 * the TSC packet of a PSB+ to its events). */
		while (st >= 0 && (st & pts_event_pending) && !b.has_tsc) {
			struct pt_event ev;

			st = pt_qry_event(q, &ev, sizeof(ev));
			if (st >= 0 && ev.has_tsc) {
				b.has_tsc = true;
				b.tsc = ev.tsc;
			}
		}
		r = push(&v, &n, &cap, &b);
		if (r < 0)
			break;
	}
	pt_qry_free_decoder(q);
	if (r < 0) {
		free(v);
		return r;
	}
	for (size_t i = 0; i < n; i++)
		v[i].size = (i + 1 < n ? v[i + 1].offset : len) - v[i].offset;
	if (ret_skipped)
		*ret_skipped = n ? v[0].offset : len;
	*ret = v;
	*ret_n = n;
	return 0;
}
