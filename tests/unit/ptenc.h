/* SPDX-License-Identifier: MIT */
/*
 * Building small PT traces packet by packet with libipt's encoder, for
 * tests that need exact bytes (decoder paths, PSB splitting).  Header-only;
 * include after check.h.
 */
#ifndef PTD_TESTS_PTENC_H
#define PTD_TESTS_PTENC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <intel-pt.h>

struct trace {
	uint8_t buf[4096];
	struct pt_encoder *enc;
	size_t len;
};

static inline void tr_begin(struct trace *t)
{
	struct pt_config cfg;

	memset(t, 0, sizeof(*t));
	pt_config_init(&cfg);
	cfg.begin = t->buf;
	cfg.end = t->buf + sizeof(t->buf);
	t->enc = pt_alloc_encoder(&cfg);
	if (!t->enc)
		abort();
}

static inline void pkt(struct trace *t, const struct pt_packet *p)
{
	uint64_t off = 0;
	int r = pt_enc_next(t->enc, p);

	if (r < 0) {
		fprintf(stderr, "pt_enc_next(type %d): %s\n", p->type,
			pt_errstr(pt_errcode(r)));
		abort();
	}
	if (pt_enc_get_offset(t->enc, &off) < 0)
		abort();
	t->len = (size_t)off;
}

static inline void tr_end(struct trace *t)
{
	pt_free_encoder(t->enc);
	t->enc = NULL;
}

static inline void simple(struct trace *t, enum pt_packet_type type)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = type;
	pkt(t, &p);
}

/* PAD packets up to a multiple of 8 bytes (perf's AUXTRACE payloads
 * are). */
static inline void pad8(struct trace *t)
{
	while (t->len % 8)
		simple(t, ppt_pad);
}

/* An IP packet; ip 0 means suppressed. */
static inline void ippkt(struct trace *t, enum pt_packet_type type, uint64_t ip)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = type;
	p.payload.ip.ipc = ip ? pt_ipc_sext_48 : pt_ipc_suppressed;
	p.payload.ip.ip = ip;
	pkt(t, &p);
}

/* TNT-8; @bits "1" taken, "0" not, first branch first. */
static inline void tnt(struct trace *t, const char *bits)
{
	struct pt_packet p;
	size_t n = strlen(bits);

	memset(&p, 0, sizeof(p));
	p.type = ppt_tnt_8;
	p.payload.tnt.bit_size = (uint8_t)n;
	for (size_t i = 0; i < n; i++)
		p.payload.tnt.payload = (p.payload.tnt.payload << 1) |
					(bits[i] == '1');
	pkt(t, &p);
}

/* PSB+ with 64-bit mode, a TSC packet (@tsc) if @has_tsc and, if @ip is
 * non-zero, a FUP(@ip) (tracing on); returns the PSB's offset. */
static inline uint64_t psb_plus(struct trace *t, bool has_tsc, uint64_t tsc,
				uint64_t ip)
{
	struct pt_packet p;
	uint64_t at = t->len;

	simple(t, ppt_psb);
	memset(&p, 0, sizeof(p));
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
	pkt(t, &p);
	if (has_tsc) {
		memset(&p, 0, sizeof(p));
		p.type = ppt_tsc;
		p.payload.tsc.tsc = tsc;
		pkt(t, &p);
	}
	if (ip)
		ippkt(t, ppt_fup, ip);
	simple(t, ppt_psbend);
	return at;
}

/* PSB+ with 64-bit mode, tracing off. */
static inline void psb(struct trace *t)
{
	(void)psb_plus(t, false, 0, 0);
}

static inline uint64_t psb_tsc(struct trace *t, uint64_t tsc, uint64_t ip)
{
	return psb_plus(t, true, tsc, ip);
}

#endif
