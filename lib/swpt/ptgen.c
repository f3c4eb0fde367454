/* SPDX-License-Identifier: MIT */
/*
 * The packet generator of the software PT source (see ptgen.h for the
 * packets it writes and when).
 *
 * Packets are encoded with libipt's encoder into a scratch buffer that is
 * handed to the sink when it runs low.  Every public call first makes room
 * for the worst case it can write (PTGEN_RESERVE), so a failing sink leaves
 * the generator unchanged and the call can be retried; after that, encoding
 * cannot run out of space, and an encoder error is an internal bug that
 * breaks the stream for good (g->err).
 *
 * Return compression must predict exactly what libipt's decoders will do
 * (pt_insn_decoder.c, pt_block_decoder.c, pt_retstack.c):
 *  - a near call pushes the address after it, except a direct call with
 *    displacement 0 (call next; pop: PIC code), which pushes nothing;
 *  - a compressed return (taken TNT bit) pops; a return sent as TIP does
 *    not touch the stack;
 *  - the stack keeps the latest 64 entries (older ones are overwritten);
 *  - the decoder empties its stack when it synchronizes, which it may do
 *    at any PSB.  We empty ours at every PSB, so a return is compressed
 *    only against calls made since the last PSB.  Whether or not a decoder
 *    that reads on across a PSB keeps older entries, ours is then always
 *    the top of its stack, and every compressed return pops the same entry
 *    on both sides.
 * perf's own Intel PT decoder (tools/perf/util/intel-pt-decoder) differs in
 * one way: it pops its stack on every near return, compressed or not.  So
 * ptgen keeps both models and compresses a return only when both predict
 * its target (then both pop); a return sent as TIP pops perf's model only.
 * On that encoding the two decoders cannot disagree.
 */
#include "swpt/ptgen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PTGEN_BUF_SIZE (64u << 10)
/* Worst case one call writes: TNT-64 (8) + TIP (9) + PSB+ (PSB 16, FUP 9,
 * MODE 2, TSC 8, CBR 4, PSBEND 2) = 58; keep a margin. */
#define PTGEN_RESERVE 128u
#define PTGEN_RETSTACK 64u
#define PTGEN_TNT8_MAX 6u
#define PTGEN_TNT64_MAX 47u
#define PTGEN_PSB_DEFAULT 4096u
#define PTGEN_PSB_MIN 256u
#define PTGEN_PSB_MAX (1u << 20)

/* A return-address stack: a ring of the latest PTGEN_RETSTACK entries. */
struct retstack {
	uint64_t ip[PTGEN_RETSTACK];
	unsigned top;		/* index of the next push */
	unsigned n;		/* entries held, <= PTGEN_RETSTACK */
};

struct ptd_ptgen {
	struct ptd_ptgen_config cfg;
	struct pt_encoder *enc;
	uint8_t *buf;
	uint64_t flushed;	/* bytes handed to the sink */

	bool have_psb;		/* a PSB+ was written */
	uint64_t last_psb;	/* stream offset of the last PSB */
	bool enabled;

	/* Last-IP for IP compression; invalid after a PSB, when the next IP
	 * packet must be sext-48 (or full). */
	uint64_t last_ip;
	bool last_ip_valid;

	uint64_t tsc;

	/* TNT bits being collected, the first one the most significant. */
	uint64_t tnt_bits;
	unsigned tnt_n;

	/* Return-address stacks: libipt's model (pops on compressed
	 * returns only) and perf's (pops on every return). */
	struct retstack ipt, perf;

	/* Address filter (ptd_ptgen_set_filter). */
	struct pt_conf_addr_filter filter;
	bool have_filter;	/* at least one FilterEn range */
	bool have_stop;		/* at least one TraceStop range */
	bool pkt;		/* PacketEn: enabled and inside the filter */
	bool stopped;		/* a TraceStop range was entered */

	int err;		/* sticky: the stream is broken */
};

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static uint64_t enc_offset(const struct ptd_ptgen *g)
{
	uint64_t off = 0;

	/* Cannot fail: the encoder has a buffer. */
	(void)pt_enc_get_offset(g->enc, &off);
	return off;
}

uint64_t ptd_ptgen_offset(const struct ptd_ptgen *g)
{
	if (!g)
		return 0;
	return g->flushed + enc_offset(g);
}

bool ptd_ptgen_enabled(const struct ptd_ptgen *g)
{
	return g && g->enabled;
}

bool ptd_ptgen_stopped(const struct ptd_ptgen *g)
{
	return g && g->stopped;
}

/* ---- address filter --------------------------------------------------- */

#define FILTER_RANGES 4u
#define CFG_FILTER 1u	/* IA32_RTIT_CTL.ADDRn_CFG: FilterEn range */
#define CFG_STOP 2u	/* TraceStop range */

static unsigned range_cfg(const struct pt_conf_addr_filter *f, unsigned i)
{
	return (unsigned)(f->config.addr_cfg >> (4 * i)) & 0xfu;
}

static void range_get(const struct pt_conf_addr_filter *f, unsigned i,
		      uint64_t *a, uint64_t *b)
{
	const uint64_t v[FILTER_RANGES][2] = {
		{ f->addr0_a, f->addr0_b }, { f->addr1_a, f->addr1_b },
		{ f->addr2_a, f->addr2_b }, { f->addr3_a, f->addr3_b },
	};

	*a = v[i][0];
	*b = v[i][1];
}

/* Whether @ip is in a range configured as @cfg. */
static bool in_ranges(const struct ptd_ptgen *g, unsigned cfg, uint64_t ip)
{
	for (unsigned i = 0; i < FILTER_RANGES; i++) {
		uint64_t a, b;

		if (range_cfg(&g->filter, i) != cfg)
			continue;
		range_get(&g->filter, i, &a, &b);
		if (a <= ip && ip <= b)
			return true;
	}
	return false;
}

/* FilterEn at @ip: inside a filter range, or there are none. */
static bool filter_en(const struct ptd_ptgen *g, uint64_t ip)
{
	return !g->have_filter || in_ranges(g, CFG_FILTER, ip);
}

static bool in_stop(const struct ptd_ptgen *g, uint64_t ip)
{
	return g->have_stop && in_ranges(g, CFG_STOP, ip);
}

int ptd_ptgen_set_filter(struct ptd_ptgen *g,
			 const struct pt_conf_addr_filter *f)
{
	static const struct pt_conf_addr_filter none;
	bool have_filter = false, have_stop = false;

	if (!g)
		return -EINVAL;
	if (!f)
		f = &none;
	/* Only the four 4-bit fields exist. */
	if (f->config.addr_cfg >> (4 * FILTER_RANGES))
		return -EINVAL;
	for (unsigned i = 0; i < FILTER_RANGES; i++) {
		unsigned cfg = range_cfg(f, i);
		uint64_t a, b;

		range_get(f, i, &a, &b);
		if (cfg > CFG_STOP || (cfg && a > b))
			return -EINVAL;
		have_filter |= cfg == CFG_FILTER;
		have_stop |= cfg == CFG_STOP;
	}
	if (g->enabled)
		return -EBUSY;
	g->filter = *f;
	g->have_filter = have_filter;
	g->have_stop = have_stop;
	return 0;
}

bool ptd_ptgen_traces(const struct ptd_ptgen *g, uint64_t ip)
{
	return g && !g->stopped && filter_en(g, ip) && !in_stop(g, ip);
}

void ptd_ptgen_set_tsc(struct ptd_ptgen *g, uint64_t tsc)
{
	if (g)
		g->tsc = tsc;
}

/* TNT bits still being collected stay where they are: they are not bytes
 * yet (ptd_ptgen_offset does not count them either), and writing them
 * early would only shorten a TNT packet.  ptd_ptgen_free writes them. */
int ptd_ptgen_flush(struct ptd_ptgen *g)
{
	uint64_t off;
	int err;

	if (!g)
		return -EINVAL;
	if (g->err)
		return g->err;
	off = enc_offset(g);
	if (!off)
		return 0;
	err = g->cfg.sink(g->cfg.sink_ctx, g->buf, (size_t)off);
	if (err < 0)
		return err;
	g->flushed += off;
	if (pt_enc_sync_set(g->enc, 0) < 0)
		return g->err = -EIO;
	return 0;
}

/* Called first by every call that writes packets. */
static int make_room(struct ptd_ptgen *g)
{
	if (g->err)
		return g->err;
	if (PTGEN_BUF_SIZE - enc_offset(g) >= PTGEN_RESERVE)
		return 0;
	return ptd_ptgen_flush(g);
}

static void emit(struct ptd_ptgen *g, const struct pt_packet *p)
{
	if (g->err)
		return;
	if (pt_enc_next(g->enc, p) < 0)
		g->err = -EIO;	/* cannot happen: room was made */
}

static void emit_simple(struct ptd_ptgen *g, enum pt_packet_type type)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = type;
	emit(g, &p);
}

static bool fits_sext48(uint64_t ip)
{
	return (uint64_t)((int64_t)(ip << 16) >> 16) == ip;
}

/* The compression the hardware would pick against last-IP. */
static enum pt_ip_compression pick_ipc(const struct ptd_ptgen *g, uint64_t ip)
{
	if (g->last_ip_valid) {
		uint64_t diff = ip ^ g->last_ip;

		if (!(diff >> 16))
			return pt_ipc_update_16;
		if (!(diff >> 32))
			return pt_ipc_update_32;
	}
	/* Also the first IP after a PSB, whatever last-IP (zero) would
	 * allow: perf 6.1 misreads an update against a zero last-IP. */
	return fits_sext48(ip) ? pt_ipc_sext_48 : pt_ipc_full;
}

static void emit_ip(struct ptd_ptgen *g, enum pt_packet_type type,
		    uint64_t ip)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = type;
	p.payload.ip.ipc = pick_ipc(g, ip);
	p.payload.ip.ip = ip;
	emit(g, &p);
	g->last_ip = ip;
	g->last_ip_valid = true;
}

/* TIP.PGD with the IP suppressed: the target is in the kernel.  A
 * suppressed IP leaves last-IP alone. */
static void emit_pgd(struct ptd_ptgen *g)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = ppt_tip_pgd;
	p.payload.ip.ipc = pt_ipc_suppressed;
	emit(g, &p);
}

static void tnt_flush(struct ptd_ptgen *g)
{
	struct pt_packet p;

	if (!g->tnt_n)
		return;
	memset(&p, 0, sizeof(p));
	p.type = g->tnt_n <= PTGEN_TNT8_MAX ? ppt_tnt_8 : ppt_tnt_64;
	p.payload.tnt.bit_size = (uint8_t)g->tnt_n;
	p.payload.tnt.payload = g->tnt_bits;
	emit(g, &p);
	g->tnt_bits = 0;
	g->tnt_n = 0;
}

int ptd_ptgen_flush_tnt(struct ptd_ptgen *g)
{
	if (!g)
		return -EINVAL;
	if (g->err)
		return g->err;
	tnt_flush(g);
	return ptd_ptgen_flush(g);
}

static void tnt_add(struct ptd_ptgen *g, bool taken)
{
	/* libipt reads a TNT payload from its most significant bit down:
	 * the first branch goes highest. */
	g->tnt_bits = (g->tnt_bits << 1) | (taken ? 1u : 0u);
	if (++g->tnt_n == PTGEN_TNT64_MAX)
		tnt_flush(g);
}

static void rs_clear(struct retstack *rs)
{
	rs->top = 0;
	rs->n = 0;
}

static void rs_push(struct retstack *rs, uint64_t ip)
{
	rs->ip[rs->top] = ip;
	rs->top = (rs->top + 1) % PTGEN_RETSTACK;
	if (rs->n < PTGEN_RETSTACK)
		rs->n++;
}

/* Whether the top of @rs is @target. */
static bool rs_predicts(const struct retstack *rs, uint64_t target)
{
	return rs->n &&
	       rs->ip[(rs->top + PTGEN_RETSTACK - 1) % PTGEN_RETSTACK] ==
		       target;
}

static void rs_pop(struct retstack *rs)
{
	if (!rs->n)
		return;
	rs->top = (rs->top + PTGEN_RETSTACK - 1) % PTGEN_RETSTACK;
	rs->n--;
}

static void calls_push(struct ptd_ptgen *g, uint64_t ip)
{
	rs_push(&g->ipt, ip);
	rs_push(&g->perf, ip);
}

/* A near return to @target: whether it is compressed.  Both models must
 * predict it; perf's pops either way. */
static bool ret_compress(struct ptd_ptgen *g, uint64_t target)
{
	bool both = !g->cfg.noretcomp && rs_predicts(&g->ipt, target) &&
		    rs_predicts(&g->perf, target);

	if (both)
		rs_pop(&g->ipt);
	rs_pop(&g->perf);
	return both;
}

/* PSB+ (after the pending TNT bits); FUP(@ip) if tracing is enabled. */
static void psb_write(struct ptd_ptgen *g, bool fup, uint64_t ip)
{
	struct pt_packet p;

	tnt_flush(g);
	g->last_psb = ptd_ptgen_offset(g);
	g->have_psb = true;
	emit_simple(g, ppt_psb);
	g->last_ip_valid = false;
	rs_clear(&g->ipt);
	rs_clear(&g->perf);

	if (fup)
		emit_ip(g, ppt_fup, ip);

	memset(&p, 0, sizeof(p));
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec.csl = 1;
	p.payload.mode.bits.exec.csd = 0;
	emit(g, &p);

	if (g->cfg.tsc) {
		memset(&p, 0, sizeof(p));
		p.type = ppt_tsc;
		p.payload.tsc.tsc = g->tsc;
		emit(g, &p);
	}
	if (g->cfg.cbr) {
		memset(&p, 0, sizeof(p));
		p.type = ppt_cbr;
		p.payload.cbr.ratio = g->cfg.cbr;
		emit(g, &p);
	}
	emit_simple(g, ppt_psbend);
}

static bool psb_due(const struct ptd_ptgen *g)
{
	return !g->have_psb ||
	       ptd_ptgen_offset(g) - g->last_psb >= g->cfg.psb_period;
}

static struct ptd_ptgen *ptgen_alloc(const struct ptd_ptgen_config *cfg,
				      int *ret_err)
{
	struct ptd_ptgen *g = NULL;
	struct pt_config pc;
	int err = -EINVAL;

	if (!cfg || !cfg->sink)
		goto fail;
	if (cfg->psb_period &&
	    (!is_pow2(cfg->psb_period) || cfg->psb_period < PTGEN_PSB_MIN ||
	     cfg->psb_period > PTGEN_PSB_MAX))
		goto fail;

	err = -ENOMEM;
	g = calloc(1, sizeof(*g));
	if (!g)
		goto fail;
	g->cfg = *cfg;
	if (!g->cfg.psb_period)
		g->cfg.psb_period = PTGEN_PSB_DEFAULT;
	g->buf = malloc(PTGEN_BUF_SIZE);
	if (!g->buf)
		goto fail;

	pt_config_init(&pc);
	pc.begin = g->buf;
	pc.end = g->buf + PTGEN_BUF_SIZE;
	g->enc = pt_alloc_encoder(&pc);
	if (!g->enc)
		goto fail;
	return g;

fail:
	if (g) {
		free(g->buf);
		free(g);
	}
	if (ret_err)
		*ret_err = err;
	return NULL;
}

int ptd_ptgen_new(const struct ptd_ptgen_config *cfg, struct ptd_ptgen **ret)
{
	int err = -ENOMEM;

	if (!ret)
		return -EINVAL;
	*ret = ptgen_alloc(cfg, &err);
	return *ret ? 0 : err;
}

int ptd_ptgen_end(struct ptd_ptgen *g)
{
	int err;

	if (!g)
		return -EINVAL;
	err = make_room(g);
	if (!err) {
		tnt_flush(g);
		err = ptd_ptgen_flush(g);
	}
	return err;
}

void ptd_ptgen_free(struct ptd_ptgen *g)
{
	if (!g)
		return;
	(void)ptd_ptgen_end(g);
	pt_free_encoder(g->enc);
	free(g->buf);
	free(g);
}

static void pge(struct ptd_ptgen *g, uint64_t ip)
{
	emit_ip(g, ppt_tip_pge, ip);
	g->pkt = true;
}

/* Packets go off after @insn at @ip, whose successor @next is outside
 * every filter range (or in a TraceStop range). */
static void filter_exit(struct ptd_ptgen *g, const struct ptd_x86_insn *insn,
			uint64_t next)
{
	tnt_flush(g);
	switch (insn->kind) {
	case PTD_X86_OTHER:
	case PTD_X86_PTWRITE:
		/* No branch to bind a disable to: an asynchronous one
		 * before the first instruction outside. */
		emit_ip(g, ppt_fup, next);
		emit_pgd(g);
		break;
	case PTD_X86_COND:
		/* The SDM: "For conditional branches, the payload is
		 * suppressed"; where it went follows from the code. */
	case PTD_X86_JMP_INDIRECT:
	case PTD_X86_CALL_INDIRECT:
	case PTD_X86_RET:
		/* The SDM promises the target here, but CPUs in the field
		 * send none (real traces filtered on a main binary end at
		 * _start's call through the GOT with an IP-less TIP.PGD and
		 * no FUP); the decoder binds it to the branch either way
		 * (decode/decoder.c, disable_at_branch). */
		emit_pgd(g);
		break;
	case PTD_X86_JMP_DIRECT:
	case PTD_X86_CALL_DIRECT:
	case PTD_X86_FAR:
		/* The branch's TIP becomes a TIP.PGD carrying its target
		 * (SKL014: a direct one's may be missing, which a decoder
		 * told the filter handles). */
		emit_ip(g, ppt_tip_pgd, next);
		break;
	case PTD_X86_SYSCALL:
	case PTD_X86_INT:
		break;	/* not a step: ptd_ptgen_kernel_entry */
	}
	/* Calls made outside are not seen by the decoder: start over. */
	rs_clear(&g->ipt);
	rs_clear(&g->perf);
	g->pkt = false;
}

/* A TraceStop range was entered: TraceEn is cleared for good. */
static void trace_stop(struct ptd_ptgen *g)
{
	emit_simple(g, ppt_stop);
	g->pkt = false;
	g->stopped = true;
}

int ptd_ptgen_enable(struct ptd_ptgen *g, uint64_t ip)
{
	int err;

	if (!g || g->enabled)
		return -EINVAL;
	err = make_room(g);
	if (err)
		return err;
	g->enabled = true;
	if (g->stopped)
		return 0;
	/* The first PSB+, or a due one: tracing is still off, no FUP. */
	if (psb_due(g))
		psb_write(g, false, 0);
	if (in_stop(g, ip))
		trace_stop(g);
	else if (filter_en(g, ip))
		pge(g, ip);
	return g->err;
}

/* Is @next_ip a possible successor of @insn at @ip?  The stream could not
 * express anything else. */
static bool step_consistent(uint64_t ip, const struct ptd_x86_insn *insn,
			    uint64_t next_ip)
{
	uint64_t fall = ip + insn->size;

	switch (insn->kind) {
	case PTD_X86_OTHER:
	case PTD_X86_PTWRITE:
		/* A REP iteration stays on the instruction. */
		return next_ip == fall || (insn->rep && next_ip == ip);
	case PTD_X86_COND:
		return next_ip == fall || next_ip == insn->target;
	case PTD_X86_JMP_DIRECT:
	case PTD_X86_CALL_DIRECT:
		return next_ip == insn->target;
	case PTD_X86_JMP_INDIRECT:
	case PTD_X86_CALL_INDIRECT:
	case PTD_X86_RET:
	case PTD_X86_FAR:
		return true;
	case PTD_X86_SYSCALL:
	case PTD_X86_INT:
		return false;	/* ptd_ptgen_kernel_entry */
	}
	return false;
}

int ptd_ptgen_step(struct ptd_ptgen *g, uint64_t ip,
		   const struct ptd_x86_insn *insn, uint64_t next_ip)
{
	uint64_t fall;
	int err;

	if (!g || !insn || !g->enabled || insn->size < 1 || insn->size > 15 ||
	    !step_consistent(ip, insn, next_ip))
		return -EINVAL;
	err = make_room(g);
	if (err)
		return err;
	if (g->stopped)
		return 0;
	if (!g->pkt) {
		/* Outside the filter: only entering it writes packets. */
		if (in_stop(g, next_ip))
			trace_stop(g);
		else if (filter_en(g, next_ip))
			pge(g, next_ip);
		else
			return g->err;
		if (!g->stopped && psb_due(g))
			psb_write(g, true, next_ip);
		return g->err;
	}
	if (!filter_en(g, next_ip) || in_stop(g, next_ip)) {
		filter_exit(g, insn, next_ip);
		if (in_stop(g, next_ip))
			trace_stop(g);
		else if (psb_due(g))
			psb_write(g, false, 0);
		return g->err;
	}

	fall = ip + insn->size;
	switch (insn->kind) {
	case PTD_X86_OTHER:
	case PTD_X86_PTWRITE:	/* PTW packets are not enabled */
	case PTD_X86_JMP_DIRECT:
		break;
	case PTD_X86_COND:
		/* A branch to the next instruction goes there either way;
		 * the bit says which way the decoder takes. */
		tnt_add(g, next_ip != fall);
		break;
	case PTD_X86_CALL_DIRECT:
		if (insn->target != fall)
			calls_push(g, fall);
		break;
	case PTD_X86_CALL_INDIRECT:
		calls_push(g, fall);
		tnt_flush(g);
		emit_ip(g, ppt_tip, next_ip);
		break;
	case PTD_X86_RET:
		if (ret_compress(g, next_ip)) {
			tnt_add(g, true);
			break;
		}
		tnt_flush(g);
		emit_ip(g, ppt_tip, next_ip);
		break;
	case PTD_X86_JMP_INDIRECT:
	case PTD_X86_FAR:
		tnt_flush(g);
		emit_ip(g, ppt_tip, next_ip);
		break;
	case PTD_X86_SYSCALL:
	case PTD_X86_INT:
		return -EINVAL;	/* refused by step_consistent() */
	}

	if (psb_due(g))
		psb_write(g, true, next_ip);
	return g->err;
}

int ptd_ptgen_kernel_entry(struct ptd_ptgen *g, uint64_t ip,
			   const struct ptd_x86_insn *insn)
{
	int err;

	if (!g || !insn || !g->enabled ||
	    (insn->kind != PTD_X86_SYSCALL && insn->kind != PTD_X86_INT))
		return -EINVAL;
	err = make_room(g);
	if (err)
		return err;

	g->enabled = false;
	if (!g->pkt)
		return g->err;	/* held off by the filter, or stopped */
	tnt_flush(g);
	/* SYSCALL completes in user space as far as the trace goes: the
	 * PGD binds to it.  INT is reported as interrupted before it
	 * completes, at its own ip. */
	if (insn->kind == PTD_X86_INT)
		emit_ip(g, ppt_fup, ip);
	emit_pgd(g);
	g->pkt = false;
	return g->err;
}

int ptd_ptgen_interrupt(struct ptd_ptgen *g, uint64_t ip)
{
	int err;

	if (!g || !g->enabled)
		return -EINVAL;
	err = make_room(g);
	if (err)
		return err;

	g->enabled = false;
	if (!g->pkt)
		return g->err;
	tnt_flush(g);
	emit_ip(g, ppt_fup, ip);
	emit_pgd(g);
	g->pkt = false;
	return g->err;
}

int ptd_ptgen_finish(struct ptd_ptgen *g, uint64_t ip)
{
	int err;

	if (!g)
		return -EINVAL;
	if (g->enabled) {
		err = ptd_ptgen_interrupt(g, ip);
		if (err)
			return err;
	}
	return ptd_ptgen_flush(g);
}
