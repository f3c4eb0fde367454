/* SPDX-License-Identifier: MIT */
/*
 * Damaging real PT traces where it matters, for tests of how decoders
 * recover (decode/stream.c's anchors, decode/parallel.c's cuts).
 * Header-only.
 */
#ifndef PTD_TESTS_PTDAMAGE_H
#define PTD_TESTS_PTDAMAGE_H

#include <stddef.h>
#include <stdint.h>

#include <intel-pt.h>

/* Flip bit 6 of the last IP byte of every TIP that comes right before a
 * PSB in @pt: a decode that passes the PSB arrives somewhere else than
 * its FUP says (libipt holds the PSB+'s status updates back until it
 * reaches the FUP's IP, if ever), and in code that repeats its records
 * can look like those of a decode starting at the PSB for a while.
 * Returns the TIPs changed, or -1 if @pt does not start with a PSB. */
static inline long ptdamage_tips_before_psbs(uint8_t *pt, size_t len,
					     const struct pt_cpu *cpu)
{
	struct pt_packet_decoder *pd;
	struct pt_config cfg;
	struct pt_packet prev = { .type = ppt_invalid };
	uint64_t prev_off = 0;
	long n = 0;

	pt_config_init(&cfg);
	cfg.begin = pt;
	cfg.end = pt + len;
	if (cpu)
		cfg.cpu = *cpu;
	pd = pt_pkt_alloc_decoder(&cfg);
	if (!pd || pt_pkt_sync_set(pd, 0) < 0) {
		pt_pkt_free_decoder(pd);
		return -1;
	}
	for (;;) {
		struct pt_packet p;
		uint64_t off;

		if (pt_pkt_get_offset(pd, &off) < 0 ||
		    pt_pkt_next(pd, &p, sizeof(p)) < 0)
			break;
		if (p.type == ppt_psb && prev.type == ppt_tip &&
		    prev.payload.ip.ipc != pt_ipc_suppressed) {
			pt[prev_off + prev.size - 1] ^= 0x40;
			n++;
		}
		prev = p;
		prev_off = off;
	}
	pt_pkt_free_decoder(pd);
	return n;
}

#endif
