/* SPDX-License-Identifier: MIT */
/*
 * Damaging real PT traces where it matters, and padding them as hardware
 * does, for tests of how decoders recover and resynchronize
 * (decode/stream.c's anchors, decode/parallel.c's cuts).
 * Header-only.
 */
#ifndef PTD_TESTS_PTDAMAGE_H
#define PTD_TESTS_PTDAMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <intel-pt.h>

/* A packet decoder over @pt, synchronized at its start (a PSB); NULL if
 * @pt does not start with one (or out of memory). */
static inline struct pt_packet_decoder *
ptdamage_packets(const uint8_t *pt, size_t len, const struct pt_cpu *cpu)
{
	struct pt_packet_decoder *pd;
	struct pt_config cfg;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)(uintptr_t)pt;
	cfg.end = cfg.begin + len;
	if (cpu)
		cfg.cpu = *cpu;
	pd = pt_pkt_alloc_decoder(&cfg);
	if (pd && pt_pkt_sync_set(pd, 0) < 0) {
		pt_pkt_free_decoder(pd);
		return NULL;
	}
	return pd;
}

/* The next packet of @pd and its offset; false at the end (or at a
 * packet that does not decode). */
static inline bool ptdamage_next(struct pt_packet_decoder *pd,
				 struct pt_packet *p, uint64_t *off)
{
	return pt_pkt_get_offset(pd, off) >= 0 &&
	       pt_pkt_next(pd, p, sizeof(*p)) >= 0;
}

/* Flip bit 6 of the last IP byte of every TIP that comes right before a
 * PSB in @pt: a decode that passes the PSB arrives somewhere else than
 * its FUP says (libipt holds the PSB+'s status updates back until it
 * reaches the FUP's IP, if ever), and in code that repeats its records
 * can look like those of a decode starting at the PSB for a while.
 * Returns the TIPs changed, or -1 if @pt does not start with a PSB. */
static inline long ptdamage_tips_before_psbs(uint8_t *pt, size_t len,
					     const struct pt_cpu *cpu)
{
	struct pt_packet_decoder *pd = ptdamage_packets(pt, len, cpu);
	struct pt_packet p, prev = { .type = ppt_invalid };
	uint64_t off, prev_off = 0;
	long n = 0;

	if (!pd)
		return -1;
	while (ptdamage_next(pd, &p, &off)) {
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

/* A copy of @pt with @pads PADs (0x00) after every PSBEND of a PSB at or
 * after @from, as hardware traces have padding there; its length in
 * *@ret_len, the first PSB padded in *@ret_first (0: none).  NULL if @pt
 * does not start with a PSB (or out of memory). */
static inline uint8_t *ptdamage_pad_after_psbend(const uint8_t *pt,
						 size_t len,
						 const struct pt_cpu *cpu,
						 uint64_t from, unsigned pads,
						 size_t *ret_len,
						 uint64_t *ret_first)
{
	/* at most one PSBEND in 16 bytes (a PSB's length) */
	uint8_t *out = malloc(len + (len / 16 + 1) * pads);
	struct pt_packet_decoder *pd = ptdamage_packets(pt, len, cpu);
	struct pt_packet p;
	uint64_t off, psb = 0, done = 0;
	size_t n = 0;

	*ret_first = 0;
	if (!out || !pd) {
		pt_pkt_free_decoder(pd);
		free(out);
		return NULL;
	}
	while (ptdamage_next(pd, &p, &off)) {
		if (p.type == ppt_psb)
			psb = off;
		if (p.type != ppt_psbend || psb < from)
			continue;
		memcpy(out + n, pt + done, off + p.size - done);
		n += off + p.size - done;
		done = off + p.size;
		memset(out + n, 0, pads);
		n += pads;
		if (!*ret_first)
			*ret_first = psb;
	}
	pt_pkt_free_decoder(pd);
	memcpy(out + n, pt + done, len - done);
	*ret_len = n + len - done;
	return out;
}

/* Set @n bytes of @buf (@len > 0) chosen by xorshift64 from *@state (go
 * on with the same state for the next choice) to values it chooses: the
 * same damage for the same state, run after run. */
static inline void ptdamage_flip_bytes(uint8_t *buf, size_t len, unsigned n,
				       uint64_t *state)
{
	uint64_t x = *state;

	for (unsigned i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[(x >> 8) % len] = (uint8_t)(x >> 40);
	}
	*state = x;
}

/* The state ptdamage_flip_bytes starts from in the tests. */
#define PTDAMAGE_SEED 0x9e3779b97f4a7c15ull

#endif
