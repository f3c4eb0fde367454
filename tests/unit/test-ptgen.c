/* SPDX-License-Identifier: MIT */
/*
 * swpt/ptgen: the proof that libipt decodes exactly the instructions we say
 * were executed.
 *
 * Small programs are assembled here as machine code (two regions, one low
 * and one high, so IP compression has work to do), "executed" by a tiny
 * interpreter that knows their control flow from a list of rules (how often
 * a branch is taken, where an indirect branch goes, where a return lands,
 * where an interrupt hits), and fed to the generator.  The generated stream
 * is decoded with pt_insn_next and the IP sequence must equal the one fed,
 * minus the INT instructions (libipt reports an INT as interrupted, not
 * executed).  Every scenario runs with return compression on and off, with
 * a small PSB period (a PSB every few branches, each one also a place to
 * start decoding from) and with TSC and CBR packets.
 */
#include <errno.h>

#include <intel-pt.h>

#include "check.h"
#include "swpt/ptgen.h"
#include "x86/insn.h"

/* ---- a tiny assembler -------------------------------------------------- */

#define NREG 2
#define REGION_SIZE 4096
#define NLABEL 64
#define NFIX 128
#define NRULE 32

static const uint64_t region_base[NREG] = { 0x401000ull,
					    0x7ffff7a21000ull };

struct fixup {
	unsigned reg;
	size_t at;	/* displacement position */
	unsigned size;	/* 1 or 4 */
	size_t end;	/* end of the instruction */
	int label;
};

enum rule_type {
	R_NONE,
	R_COND,		/* taken while hits < n, then not: invert flips */
	R_TARGET,	/* indirect branch (or far transfer) goes to label */
	R_RET_TO,	/* ret goes to label, dropping n shadow entries */
	R_RESUME,	/* syscall/int resumes at label */
	R_SIGRETURN,	/* syscall resumes where the interrupt hit */
	R_INTERRUPT,	/* async interrupt before the n-th arrival: handler */
	R_REP,		/* a REP instruction iterates n times */
	R_POP,		/* a POP of a return address: drops a shadow entry */
};

struct rule {
	enum rule_type type;
	int at;		/* label of the instruction */
	int label;	/* target */
	unsigned n;
	bool invert;
	unsigned mod;	/* R_COND: if set, taken on every mod-th arrival */
	unsigned period;/* R_COND: hits counted modulo this, if set */
	unsigned hits;
};

struct prog {
	uint8_t code[NREG][REGION_SIZE];
	size_t len[NREG];
	unsigned cur;
	uint64_t label[NLABEL];
	bool label_set[NLABEL];
	struct fixup fix[NFIX];
	unsigned nfix;
	struct rule rule[NRULE];
	unsigned nrule;
	int entry, exit;
	bool bad;
};

static void prog_init(struct prog *p)
{
	memset(p, 0, sizeof(*p));
	memset(p->code, 0xcc, sizeof(p->code));
}

static uint64_t here(const struct prog *p)
{
	return region_base[p->cur] + p->len[p->cur];
}

static void b(struct prog *p, size_t n, const uint8_t *bytes)
{
	if (p->len[p->cur] + n > REGION_SIZE) {
		p->bad = true;
		return;
	}
	memcpy(p->code[p->cur] + p->len[p->cur], bytes, n);
	p->len[p->cur] += n;
}

#define B(p, ...)                                                             \
	b(p, sizeof((const uint8_t[]){ __VA_ARGS__ }),                        \
	  (const uint8_t[]){ __VA_ARGS__ })

static void L(struct prog *p, int label)
{
	p->label[label] = here(p);
	p->label_set[label] = true;
}

/* An instruction of @n opcode bytes followed by a @size-byte displacement
 * to @label. */
static void branch(struct prog *p, size_t n, const uint8_t *op,
		   unsigned size, int label)
{
	const uint8_t zero[4] = { 0 };

	b(p, n, op);
	if (p->nfix == NFIX) {
		p->bad = true;
		return;
	}
	p->fix[p->nfix++] = (struct fixup){ p->cur, p->len[p->cur], size,
					    p->len[p->cur] + size, label };
	b(p, size, zero);
}

static void jcc8(struct prog *p, uint8_t cc, int l)
{
	branch(p, 1, (const uint8_t[]){ (uint8_t)(0x70 | cc) }, 1, l);
}
static void jcc32(struct prog *p, uint8_t cc, int l)
{
	branch(p, 2, (const uint8_t[]){ 0x0f, (uint8_t)(0x80 | cc) }, 4, l);
}
static void loop8(struct prog *p, int l)
{
	branch(p, 1, (const uint8_t[]){ 0xe2 }, 1, l);
}
static void jmp32(struct prog *p, int l)
{
	branch(p, 1, (const uint8_t[]){ 0xe9 }, 4, l);
}
static void jmp8(struct prog *p, int l)
{
	branch(p, 1, (const uint8_t[]){ 0xeb }, 1, l);
}
static void call32(struct prog *p, int l)
{
	branch(p, 1, (const uint8_t[]){ 0xe8 }, 4, l);
}
static void bnd_call32(struct prog *p, int l)
{
	branch(p, 2, (const uint8_t[]){ 0xf2, 0xe8 }, 4, l);
}

#define JNZ 0x5
#define JZ 0x4

static void rule(struct prog *p, enum rule_type t, int at, int label,
		 unsigned n, bool invert)
{
	if (p->nrule == NRULE) {
		p->bad = true;
		return;
	}
	p->rule[p->nrule++] = (struct rule){ t, at, label, n, invert, 0, 0,
					     0 };
}

/* A conditional branch taken n times out of every @period (or not taken,
 * if @invert), forever. */
static void rule_period(struct prog *p, int at, unsigned n, unsigned period,
			bool invert)
{
	rule(p, R_COND, at, at, n, invert);
	if (!p->bad)
		p->rule[p->nrule - 1].period = period;
}

static void rule_mod(struct prog *p, int at, unsigned mod)
{
	rule(p, R_COND, at, at, 0, false);
	if (!p->bad)
		p->rule[p->nrule - 1].mod = mod;
}

static bool prog_link(struct prog *p)
{
	for (unsigned i = 0; i < p->nfix; i++) {
		const struct fixup *f = &p->fix[i];
		uint64_t end = region_base[f->reg] + f->end;
		int64_t d;

		if (!p->label_set[f->label])
			return false;
		d = (int64_t)(p->label[f->label] - end);
		if (f->size == 1) {
			if (d < -128 || d > 127)
				return false;
			p->code[f->reg][f->at] = (uint8_t)(int8_t)d;
		} else {
			uint32_t v = (uint32_t)(int32_t)d;

			if (d < INT32_MIN || d > INT32_MAX)
				return false;
			memcpy(&p->code[f->reg][f->at], &v, 4);
		}
	}
	return !p->bad && p->label_set[p->entry] && p->label_set[p->exit];
}

static int read_prog(uint8_t *buffer, size_t size, const struct pt_asid *asid,
		     uint64_t ip, void *ctx)
{
	const struct prog *p = ctx;

	(void)asid;
	for (unsigned r = 0; r < NREG; r++) {
		uint64_t off;

		if (ip < region_base[r] || ip - region_base[r] >= REGION_SIZE)
			continue;
		off = ip - region_base[r];
		if (size > REGION_SIZE - off)
			size = REGION_SIZE - off;
		memcpy(buffer, p->code[r] + off, size);
		return (int)size;
	}
	return -pte_nomap;
}

/* ---- the sink ---------------------------------------------------------- */

struct sink {
	uint8_t *data;
	size_t len, cap;
	unsigned calls;
	int fail_next;		/* return this from the next call, once */
};

static int sink_write(void *ctx, const uint8_t *data, size_t len)
{
	struct sink *s = ctx;

	s->calls++;
	if (s->fail_next) {
		int err = s->fail_next;

		s->fail_next = 0;
		return err;
	}
	if (s->len + len > s->cap) {
		size_t cap = s->cap ? s->cap : 65536;
		uint8_t *nd;

		while (cap < s->len + len)
			cap *= 2;
		nd = realloc(s->data, cap);
		if (!nd)
			return -ENOMEM;
		s->data = nd;
		s->cap = cap;
	}
	memcpy(s->data + s->len, data, len);
	s->len += len;
	return 0;
}

/* ---- the interpreter --------------------------------------------------- */

#define MAX_STEPS 200000u
#define MAX_SHADOW 1024u

struct run {
	uint64_t *fed;		/* IPs fed, REP once, INT included */
	size_t nfed;
	uint64_t *expect;	/* what libipt must report: no INT */
	size_t nexpect;
	unsigned ints, syscalls, interrupts;
};

static void run_free(struct run *r)
{
	free(r->fed);
	free(r->expect);
	memset(r, 0, sizeof(*r));
}

static struct rule *find_rule(struct prog *p, uint64_t ip,
			      enum rule_type t)
{
	for (unsigned i = 0; i < p->nrule; i++)
		if (p->rule[i].type == t && p->label[p->rule[i].at] == ip)
			return &p->rule[i];
	return NULL;
}

static int fetch(const struct prog *p, uint64_t ip, struct ptd_x86_insn *insn)
{
	uint8_t buf[15];
	int n = read_prog(buf, sizeof(buf), NULL, ip, (void *)p);

	if (n < 0)
		return -EFAULT;
	return ptd_x86_decode(buf, (size_t)n, ip, ptem_64bit, insn);
}

#define GEN(call)                                                             \
	do {                                                                  \
		int e_ = (call);                                              \
		if (e_ != 0) {                                                \
			CHECK_FAIL_("%s at ip 0x%" PRIx64 ": %d", #call, ip,  \
				    e_);                                      \
			return false;                                         \
		}                                                             \
	} while (0)

/* Run @p from its entry to its exit, feeding @g.  Returns false (after
 * reporting) if the program or the generator misbehaved. */
static bool interpret(struct prog *p, struct ptd_ptgen *g, struct run *r)
{
	uint64_t shadow[MAX_SHADOW];
	unsigned depth = 0;
	uint64_t ip = p->label[p->entry], saved = 0;
	unsigned steps = 0;

	r->fed = calloc(MAX_STEPS, sizeof(*r->fed));
	r->expect = calloc(MAX_STEPS, sizeof(*r->expect));
	if (!r->fed || !r->expect)
		return false;
	for (unsigned i = 0; i < p->nrule; i++)
		p->rule[i].hits = 0;

	GEN(ptd_ptgen_enable(g, ip));
	while (ip != p->label[p->exit]) {
		struct ptd_x86_insn insn;
		struct rule *ru;
		uint64_t next;

		if (++steps > MAX_STEPS) {
			CHECK_FAIL_("runaway program at 0x%" PRIx64, ip);
			return false;
		}

		ru = find_rule(p, ip, R_INTERRUPT);
		if (ru && ru->hits++ + 1 == ru->n) {
			GEN(ptd_ptgen_interrupt(g, ip));
			CHECK(!ptd_ptgen_enabled(g));
			saved = ip;
			ip = p->label[ru->label];
			r->interrupts++;
			GEN(ptd_ptgen_enable(g, ip));
			continue;
		}

		if (fetch(p, ip, &insn) != 0) {
			CHECK_FAIL_("cannot decode 0x%" PRIx64, ip);
			return false;
		}
		r->fed[r->nfed++] = ip;
		if (insn.kind != PTD_X86_INT)
			r->expect[r->nexpect++] = ip;

		next = ip + insn.size;
		switch (insn.kind) {
		case PTD_X86_OTHER:
		case PTD_X86_PTWRITE:
			if (find_rule(p, ip, R_POP) && depth)
				depth--;
			ru = find_rule(p, ip, R_REP);
			if (insn.rep && ru) {
				/* The iterations stay on the instruction. */
				for (unsigned i = 1; i < ru->n; i++)
					GEN(ptd_ptgen_step(g, ip, &insn, ip));
			}
			break;
		case PTD_X86_COND:
			ru = find_rule(p, ip, R_COND);
			if (!ru) {
				CHECK_FAIL_("no rule for cond at 0x%" PRIx64,
					    ip);
				return false;
			}
			if (ru->mod ? ru->hits % ru->mod == 0
				    : ((ru->period ? ru->hits % ru->period
						   : ru->hits) < ru->n) !=
					      ru->invert)
				next = insn.target;
			ru->hits++;
			break;
		case PTD_X86_CALL_DIRECT:
		case PTD_X86_CALL_INDIRECT:
			if (depth == MAX_SHADOW)
				return false;
			shadow[depth++] = next;
			if (insn.kind == PTD_X86_CALL_DIRECT) {
				next = insn.target;
				break;
			}
			/* fall through */
		case PTD_X86_JMP_INDIRECT:
		case PTD_X86_FAR:
			ru = find_rule(p, ip, R_TARGET);
			if (!ru) {
				CHECK_FAIL_("no target at 0x%" PRIx64, ip);
				return false;
			}
			next = p->label[ru->label];
			break;
		case PTD_X86_JMP_DIRECT:
			next = insn.target;
			break;
		case PTD_X86_RET:
			ru = find_rule(p, ip, R_RET_TO);
			if (ru) {
				next = p->label[ru->label];
				depth = depth > ru->n ? depth - ru->n : 0;
				break;
			}
			if (!depth) {
				CHECK_FAIL_("ret with empty stack at 0x%" PRIx64,
					    ip);
				return false;
			}
			next = shadow[--depth];
			break;
		case PTD_X86_SYSCALL:
		case PTD_X86_INT:
			GEN(ptd_ptgen_kernel_entry(g, ip, &insn));
			CHECK(!ptd_ptgen_enabled(g));
			if (insn.kind == PTD_X86_INT)
				r->ints++;
			else
				r->syscalls++;
			if (find_rule(p, ip, R_SIGRETURN))
				next = saved;
			else if ((ru = find_rule(p, ip, R_RESUME)))
				next = p->label[ru->label];
			GEN(ptd_ptgen_enable(g, next));
			CHECK(ptd_ptgen_enabled(g));
			ip = next;
			continue;
		}
		GEN(ptd_ptgen_step(g, ip, &insn, next));
		ip = next;
	}
	GEN(ptd_ptgen_finish(g, ip));
	return true;
}

/* ---- decoding with libipt ---------------------------------------------- */

struct decoded {
	uint64_t *ip;
	size_t n;
	unsigned enabled, disabled, async_disabled;
	int status;	/* how decoding ended: -pte_eos when all is well */
};

static void decode(const struct prog *p, const uint8_t *buf, size_t len,
		   uint64_t offset, struct decoded *d)
{
	struct pt_config cfg;
	struct pt_insn_decoder *dec;
	int status;

	memset(d, 0, sizeof(*d));
	d->ip = calloc(MAX_STEPS, sizeof(*d->ip));
	d->status = -pte_nomem;
	if (!d->ip)
		return;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + len;
	dec = pt_insn_alloc_decoder(&cfg);
	if (!dec)
		return;
	(void)pt_image_set_callback(pt_insn_get_image(dec), read_prog,
				    (void *)p);

	status = offset ? pt_insn_sync_set(dec, offset)
			: pt_insn_sync_forward(dec);
	while (status >= 0) {
		struct pt_insn insn;
		struct pt_event ev;

		while (status & pts_event_pending) {
			status = pt_insn_event(dec, &ev, sizeof(ev));
			if (status < 0)
				break;
			if (ev.type == ptev_enabled)
				d->enabled++;
			else if (ev.type == ptev_disabled)
				d->disabled++;
			else if (ev.type == ptev_async_disabled)
				d->async_disabled++;
		}
		if (status < 0)
			break;
		status = pt_insn_next(dec, &insn, sizeof(insn));
		if (status < 0)
			break;
		if (d->n == MAX_STEPS) {
			status = -pte_internal;
			break;
		}
		d->ip[d->n++] = insn.ip;
	}
	d->status = status;
	pt_insn_free_decoder(dec);
}

static void compare(const char *what, const uint64_t *exp, size_t nexp,
		    const struct decoded *d)
{
	size_t i;

	if (d->status != -pte_eos)
		CHECK_FAIL_("%s: decoding ended with %s after %zu insns "
			    "(expected 0x%" PRIx64 " next)", what,
			    pt_errstr(pt_errcode(d->status)), d->n,
			    d->n < nexp ? exp[d->n] : 0);
	for (i = 0; i < nexp && i < d->n; i++) {
		if (exp[i] != d->ip[i]) {
			CHECK_FAIL_("%s: insn #%zu: expected ip 0x%" PRIx64
				    ", libipt 0x%" PRIx64, what, i, exp[i],
				    d->ip[i]);
			return;
		}
	}
	if (d->n != nexp)
		CHECK_FAIL_("%s: expected %zu insns, libipt %zu", what, nexp,
			    d->n);
}

/* ---- packet statistics -------------------------------------------------- */

struct pkt_stats {
	unsigned count[ppt_ptw + 1];
	unsigned ipc[8];
	uint64_t psb[4096];
	unsigned npsb;
	unsigned tnt64_max;
	unsigned tnt_bits;	/* all TNT packets together */
	unsigned bad_first_ip;	/* first IP after a PSB not sext-48/full */
	int status;
};

static void scan(const uint8_t *buf, size_t len, struct pkt_stats *st)
{
	struct pt_config cfg;
	struct pt_packet_decoder *dec;
	bool after_psb = false;
	int status;

	memset(st, 0, sizeof(*st));
	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + len;
	dec = pt_pkt_alloc_decoder(&cfg);
	st->status = -pte_nomem;
	if (!dec)
		return;
	status = pt_pkt_sync_set(dec, 0);
	while (status >= 0) {
		struct pt_packet pkt;
		uint64_t off;

		(void)pt_pkt_get_offset(dec, &off);
		status = pt_pkt_next(dec, &pkt, sizeof(pkt));
		if (status < 0)
			break;
		if ((unsigned)pkt.type <= ppt_ptw)
			st->count[pkt.type]++;
		if (pkt.type == ppt_psb) {
			if (st->npsb < 4096)
				st->psb[st->npsb++] = off;
			after_psb = true;
		} else if (pkt.type == ppt_fup || pkt.type == ppt_tip ||
			   pkt.type == ppt_tip_pge || pkt.type == ppt_tip_pgd) {
			if (pkt.payload.ip.ipc == pt_ipc_suppressed)
				continue;
			st->ipc[pkt.payload.ip.ipc & 7]++;
			if (after_psb && pkt.payload.ip.ipc != pt_ipc_sext_48 &&
			    pkt.payload.ip.ipc != pt_ipc_full)
				st->bad_first_ip++;
			after_psb = false;
		} else if (pkt.type == ppt_tnt_8) {
			st->tnt_bits += pkt.payload.tnt.bit_size;
		} else if (pkt.type == ppt_tnt_64) {
			st->tnt_bits += pkt.payload.tnt.bit_size;
			if (pkt.payload.tnt.bit_size > st->tnt64_max)
				st->tnt64_max = pkt.payload.tnt.bit_size;
		}
	}
	st->status = status;
	pt_pkt_free_decoder(dec);
}


/* ---- scenarios ---------------------------------------------------------- */

enum {
	L_ENTRY, L_EXIT, L_OUTER, L_COUT, L_LOOP, L_LOOP2, L_LOOP3, L_NEVER, L_NEXT4, L_SKIP6,
	L_C1, L_C2, L_C3, L_C4, L_C5, L_C6,
	L_F, L_F3, L_NEXT3, L_G, L_G2, L_H, L_AFTER, L_AFTER_LRET, L_LOOPI,
	L_CI1, L_CI2, L_CL, L_JI, L_LR,
	L_REC, L_OUT, L_CR,
	L_MAIN, L_A, L_B, L_C, L_AFTER_A, L_Z, L_RB,
	L_BODY, L_SYSC, L_INT3, L_INT80, L_REP, L_FSYS, L_HANDLER, L_HF,
	L_SIGRET,
	L_NLABELS
};

_Static_assert(L_NLABELS <= NLABEL, "too many labels");

/* Loops: TNT bits by the hundred (TNT-64 packing), mixed patterns, a
 * never-taken rel32 Jcc, LOOP, a Jcc to the next instruction. */
static void build_loop(struct prog *p)
{
	p->entry = L_ENTRY;
	p->exit = L_EXIT;
	L(p, L_ENTRY);
	B(p, 0xbe, 0x08, 0x00, 0x00, 0x00);	/* mov $8,%esi */
	L(p, L_OUTER);
	B(p, 0xb9, 0xc8, 0x00, 0x00, 0x00);	/* mov $200,%ecx */
	L(p, L_LOOP);
	B(p, 0x01, 0xc8);			/* add %ecx,%eax */
	B(p, 0xff, 0xc9);			/* dec %ecx */
	L(p, L_C1);
	jcc8(p, JNZ, L_LOOP);
	rule_period(p, L_C1, 199, 200, false);
	B(p, 0x85, 0xc0);			/* test %eax,%eax */
	L(p, L_C2);
	jcc32(p, JZ, L_NEVER);
	rule(p, R_COND, L_C2, 0, 0, false);
	B(p, 0xb9, 0x05, 0x00, 0x00, 0x00);	/* mov $5,%ecx */
	L(p, L_LOOP2);
	B(p, 0x90);
	L(p, L_C3);
	loop8(p, L_LOOP2);
	rule_period(p, L_C3, 4, 5, false);
	B(p, 0xb9, 0x3c, 0x00, 0x00, 0x00);	/* mov $60,%ecx */
	L(p, L_LOOP3);
	L(p, L_C4);
	jcc8(p, 0x0, L_NEXT4);			/* jo next */
	rule(p, R_COND, L_C4, 0, ~0u, false);
	L(p, L_NEXT4);
	L(p, L_C6);
	jcc8(p, JZ, L_SKIP6);
	rule_mod(p, L_C6, 3);
	B(p, 0x90);
	L(p, L_SKIP6);
	B(p, 0xff, 0xc9);			/* dec %ecx */
	L(p, L_C5);
	jcc8(p, JNZ, L_LOOP3);
	rule_period(p, L_C5, 59, 60, false);
	B(p, 0xff, 0xce);			/* dec %esi */
	L(p, L_COUT);
	jcc8(p, JNZ, L_OUTER);
	rule(p, R_COND, L_COUT, 0, 7, false);
	jmp32(p, L_EXIT);
	L(p, L_NEVER);
	B(p, 0xf4);				/* hlt */
	L(p, L_EXIT);
}

/* Direct and indirect calls across two far-apart regions, a call to the
 * next instruction, notrack/bnd prefixes, PTWRITE, a far return. */
static void build_calls(struct prog *p)
{
	p->entry = L_ENTRY;
	p->exit = L_EXIT;
	L(p, L_ENTRY);
	call32(p, L_F);
	call32(p, L_F3);
	B(p, 0xb9, 0x64, 0x00, 0x00, 0x00);	/* mov $100,%ecx */
	L(p, L_LOOPI);
	L(p, L_CI1);
	B(p, 0xff, 0xd0);			/* call *%rax */
	rule(p, R_TARGET, L_CI1, L_G2, 0, false);
	L(p, L_CI2);
	B(p, 0x3e, 0xff, 0xd0);			/* notrack call *%rax */
	rule(p, R_TARGET, L_CI2, L_G, 0, false);
	B(p, 0xff, 0xc9);			/* dec %ecx */
	L(p, L_CL);
	jcc8(p, JNZ, L_LOOPI);
	rule(p, R_COND, L_CL, 0, 99, false);
	L(p, L_JI);
	B(p, 0x3e, 0xff, 0xe0);			/* notrack jmp *%rax */
	rule(p, R_TARGET, L_JI, L_AFTER, 0, false);
	B(p, 0xf4);
	L(p, L_AFTER);
	B(p, 0xf3, 0x0f, 0xae, 0xe0);		/* ptwrite %eax */
	bnd_call32(p, L_F);
	L(p, L_LR);
	B(p, 0x48, 0xcb);			/* lretq */
	rule(p, R_TARGET, L_LR, L_AFTER_LRET, 0, false);
	B(p, 0xf4);
	L(p, L_AFTER_LRET);
	jmp8(p, L_EXIT);
	L(p, L_F);
	B(p, 0x90);
	B(p, 0xf2, 0xc3);			/* bnd ret */
	L(p, L_F3);
	call32(p, L_NEXT3);			/* call next: not pushed */
	L(p, L_NEXT3);
	B(p, 0x58);				/* pop %rax */
	rule(p, R_POP, L_NEXT3, 0, 0, false);
	B(p, 0xc3);
	L(p, L_G);
	B(p, 0xc3);
	L(p, L_EXIT);

	p->cur = 1;
	L(p, L_G2);
	B(p, 0x90);
	call32(p, L_H);
	B(p, 0xc3);
	L(p, L_H);
	B(p, 0xc2, 0x00, 0x00);			/* ret $0 */
}

/* Recursion 100 deep, five times: the return stack holds the latest 64
 * calls, so 36 returns of each round go as TIP. */
static void build_recursion(struct prog *p)
{
	p->entry = L_ENTRY;
	p->exit = L_EXIT;
	L(p, L_ENTRY);
	B(p, 0xbe, 0x05, 0x00, 0x00, 0x00);	/* mov $5,%esi */
	L(p, L_OUTER);
	B(p, 0xbf, 0x64, 0x00, 0x00, 0x00);	/* mov $100,%edi */
	call32(p, L_REC);
	B(p, 0xff, 0xce);			/* dec %esi */
	L(p, L_COUT);
	jcc8(p, JNZ, L_OUTER);
	rule(p, R_COND, L_COUT, 0, 4, false);
	jmp8(p, L_EXIT);
	L(p, L_REC);
	B(p, 0xff, 0xcf);			/* dec %edi */
	L(p, L_CR);
	jcc8(p, JZ, L_OUT);
	/* not taken 99 times, then taken: 100 calls deep */
	rule_period(p, L_CR, 99, 100, true);
	call32(p, L_REC);
	L(p, L_OUT);
	B(p, 0xc3);
	L(p, L_EXIT);
}

/* A longjmp-like return that skips a frame, and a return after it whose
 * target is the entry below the stale top: compressing it (popping on an
 * uncompressed return) would derail the decoder. */
static void build_longjmp(struct prog *p)
{
	p->entry = L_ENTRY;
	p->exit = L_EXIT;
	L(p, L_ENTRY);
	call32(p, L_MAIN);
	jmp8(p, L_EXIT);
	L(p, L_MAIN);
	call32(p, L_A);
	L(p, L_AFTER_A);
	call32(p, L_C);
	B(p, 0xc3);
	L(p, L_A);
	call32(p, L_B);
	B(p, 0xf4);				/* (return address: never) */
	L(p, L_Z);
	B(p, 0xc3);				/* back to AFTER_A */
	L(p, L_B);
	L(p, L_RB);
	B(p, 0xc3);				/* "longjmp" to Z */
	rule(p, R_RET_TO, L_RB, L_Z, 1, false);
	L(p, L_C);
	B(p, 0xc3);
	L(p, L_EXIT);
}

/* Syscalls, INT3 and INT 0x80, a REP string instruction, a return across
 * a syscall, and asynchronous interrupts (one of them right at a SYSCALL)
 * with a handler that returns through rt_sigreturn. */
static void build_kernel(struct prog *p)
{
	p->entry = L_ENTRY;
	p->exit = L_EXIT;
	L(p, L_ENTRY);
	B(p, 0xb9, 0x32, 0x00, 0x00, 0x00);	/* mov $50,%ecx */
	L(p, L_LOOP);
	L(p, L_BODY);
	B(p, 0x90);
	rule(p, R_INTERRUPT, L_BODY, L_HANDLER, 10, false);
	L(p, L_SYSC);
	B(p, 0x0f, 0x05);			/* syscall */
	rule(p, R_INTERRUPT, L_SYSC, L_HANDLER, 30, false);
	L(p, L_INT3);
	B(p, 0xcc);				/* int3 */
	L(p, L_INT80);
	B(p, 0xcd, 0x80);			/* int $0x80 */
	L(p, L_REP);
	B(p, 0xf3, 0xa4);			/* rep movsb */
	rule(p, R_REP, L_REP, 0, 3, false);
	call32(p, L_FSYS);
	B(p, 0xff, 0xc9);			/* dec %ecx */
	L(p, L_C1);
	jcc8(p, JNZ, L_LOOP);
	rule(p, R_COND, L_C1, 0, 49, false);
	jmp8(p, L_EXIT);
	L(p, L_FSYS);
	B(p, 0x0f, 0x05);			/* syscall */
	B(p, 0xc3);				/* compressed across PGD/PGE */
	L(p, L_HANDLER);
	B(p, 0x55);				/* push %rbp */
	call32(p, L_HF);
	B(p, 0x5d);				/* pop %rbp */
	B(p, 0xb8, 0x0f, 0x00, 0x00, 0x00);	/* mov $15,%eax */
	L(p, L_SIGRET);
	B(p, 0x0f, 0x05);			/* rt_sigreturn */
	rule(p, R_SIGRETURN, L_SIGRET, 0, 0, false);
	L(p, L_HF);
	B(p, 0xc3);
	L(p, L_EXIT);
}

struct scenario {
	const char *name;
	void (*build)(struct prog *p);
	/* TIP packets with one PSB only: with / without return
	 * compression; -1: not checked */
	int tips, tips_noretcomp;
	unsigned ints, interrupts;
};

static const struct scenario scenarios[] = {
	{ "loop", build_loop, 0, 0, 0, 0 },
	{ "calls", build_calls, 202, 505, 0, 0 },
	{ "recursion", build_recursion, 180, 500, 0, 0 },
	{ "longjmp", build_longjmp, 3, 4, 0, 0 },
	{ "kernel", build_kernel, -1, -1, 100, 2 },
};

struct gen_config {
	const char *name;
	uint64_t psb_period;
	bool noretcomp, tsc;
	uint8_t cbr;
};

static const struct gen_config configs[] = {
	{ "default", 0, false, false, 0 },
	{ "noretcomp", 0, true, false, 0 },
	{ "psb256", 256, false, false, 0 },
	{ "psb256+noretcomp+tsc+cbr", 256, true, true, 0x2a },
	{ "tsc+cbr", 0, false, true, 0x18 },
};

/* Decoding from any PSB gives the tail of the instruction sequence: a PSB
 * is a sync point (last-IP and return stack reset). */
static void check_psb_syncs(const char *what, const struct prog *p,
			    const struct sink *sk, const struct pkt_stats *st,
			    const struct run *r)
{
	unsigned step = st->npsb > 40 ? st->npsb / 40 : 1;

	for (unsigned i = 1; i < st->npsb; i += step) {
		struct decoded d;
		char w[512];

		decode(p, sk->data, sk->len, st->psb[i], &d);
		snprintf(w, sizeof(w), "%s, from PSB #%u at %" PRIu64, what, i,
			 st->psb[i]);
		if (d.n > r->nexpect) {
			CHECK_FAIL_("%s: %zu insns, more than the %zu fed", w,
				    d.n, r->nexpect);
		} else {
			compare(w, r->expect + (r->nexpect - d.n), d.n, &d);
			if (d.status != -pte_eos || d.n == 0)
				CHECK_FAIL_("%s: nothing decoded", w);
		}
		free(d.ip);
	}
}

static void check_packets(const char *what, const struct scenario *sc,
			  const struct gen_config *gc,
			  const struct pkt_stats *st, size_t len)
{
	uint64_t period = gc->psb_period ? gc->psb_period : 4096;

	if (st->status != -pte_eos)
		CHECK_FAIL_("%s: packet scan ended with %s", what,
			    pt_errstr(pt_errcode(st->status)));
	if (st->bad_first_ip)
		CHECK_FAIL_("%s: %u IP packets after a PSB not sext-48", what,
			    st->bad_first_ip);
	if (st->npsb < 1 || st->psb[0] != 0)
		CHECK_FAIL_("%s: stream does not start with a PSB", what);
	/* PSB+ every period bytes, at the next instruction boundary. */
	for (unsigned i = 1; i < st->npsb; i++)
		if (st->psb[i] - st->psb[i - 1] < period ||
		    st->psb[i] - st->psb[i - 1] > period + 64)
			CHECK_FAIL_("%s: PSB #%u at %" PRIu64 ", previous at %"
				    PRIu64, what, i, st->psb[i],
				    st->psb[i - 1]);
	if (len >= period + 64 && st->npsb < len / (period + 64))
		CHECK_FAIL_("%s: only %u PSBs in %zu bytes", what, st->npsb,
			    len);
	CHECK_EQ_INT(st->count[ppt_mode], st->npsb);
	CHECK_EQ_INT(st->count[ppt_psbend], st->npsb);
	CHECK_EQ_INT(st->count[ppt_tsc], gc->tsc ? st->npsb : 0);
	CHECK_EQ_INT(st->count[ppt_cbr], gc->cbr ? st->npsb : 0);
	if (st->npsb == 1 && sc->tips >= 0)
		CHECK_EQ_INT(st->count[ppt_tip],
			     gc->noretcomp ? sc->tips_noretcomp : sc->tips);
}

static void run_one(const struct scenario *sc, const struct gen_config *gc)
{
	struct ptd_ptgen_config cfg = {
		.psb_period = gc->psb_period,
		.noretcomp = gc->noretcomp,
		.tsc = gc->tsc,
		.cbr = gc->cbr,
		.sink = sink_write,
	};
	struct sink sk = { 0 };
	struct prog *p = malloc(sizeof(*p));
	struct run r = { 0 };
	struct pkt_stats *st = malloc(sizeof(*st));
	struct decoded d = { 0 };
	struct ptd_ptgen *g;
	char what[256];
	int err = 0;

	snprintf(what, sizeof(what), "%s [%s]", sc->name, gc->name);
	REQUIRE(p && st);
	prog_init(p);
	sc->build(p);
	if (!prog_link(p)) {
		CHECK_FAIL_("%s: program does not link", what);
		goto out;
	}

	cfg.sink_ctx = &sk;
	err = ptd_ptgen_new(&cfg, &g);
	if (!g) {
		CHECK_FAIL_("%s: new: %d", what, err);
		goto out;
	}
	ptd_ptgen_set_tsc(g, 0x123456789ull);
	if (!interpret(p, g, &r)) {
		CHECK_FAIL_("%s: interpretation failed", what);
		ptd_ptgen_free(g);
		goto out;
	}
	CHECK(!ptd_ptgen_enabled(g));
	CHECK_EQ_U64(ptd_ptgen_offset(g), sk.len);
	CHECK_EQ_INT(ptd_ptgen_end(g), 0);
	ptd_ptgen_free(g);
	CHECK_EQ_U64(r.ints, sc->ints);
	CHECK_EQ_U64(r.interrupts, sc->interrupts);

	decode(p, sk.data, sk.len, 0, &d);
	compare(what, r.expect, r.nexpect, &d);
	/* libipt reports an INT as interrupted: an async disable each, one
	 * per interrupt, one at the end; a sync disable per syscall. */
	CHECK_EQ_INT(d.async_disabled, r.ints + r.interrupts + 1);
	CHECK_EQ_INT(d.disabled, r.syscalls);
	/* enabled: at the start, after each INT, at each handler, after
	 * each syscall (rt_sigreturn included) */
	CHECK_EQ_INT(d.enabled, 1 + r.ints + r.interrupts + r.syscalls);
	CHECK_EQ_U64(r.nfed - r.nexpect, r.ints);

	scan(sk.data, sk.len, st);
	check_packets(what, sc, gc, st, sk.len);
	check_psb_syncs(what, p, &sk, st, &r);

	fprintf(stderr, "  %s: %zu insns, %zu bytes, %u PSBs, %u TIPs\n", what,
		r.nexpect, sk.len, st->npsb, st->count[ppt_tip]);
out:
	free(d.ip);
	run_free(&r);
	free(sk.data);
	free(st);
	free(p);
}

static void test_scenarios(void)
{
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(*scenarios); i++)
		for (size_t j = 0; j < sizeof(configs) / sizeof(*configs); j++)
			run_one(&scenarios[i], &configs[j]);
}

/* The TNT packing of the loop scenario: full TNT-64 packets. */
/* A return is compressed only where libipt's stack (pops on compressed
 * returns) and perf's (pops on every return) both predict it.  Here f
 * calls g, g returns elsewhere (TIP: perf's stack drops g's entry,
 * libipt's keeps it), and a return to g's return address follows: libipt
 * alone would predict it, so it must be a TIP; the next return, to f's
 * caller, is predicted by neither (libipt still has g's entry on top). */
static void test_ret_models(void)
{
	struct ptd_ptgen_config cfg = { .sink = sink_write };
	struct sink sk = { 0 };
	struct pkt_stats *st = malloc(sizeof(*st));
	struct ptd_x86_insn call_f, call_g, ret;
	const uint8_t call0[] = { 0xe8, 0x00, 0x10, 0x00, 0x00 };
	const uint8_t ret_b[] = { 0xc3 };
	const uint64_t a = 0x401000, f = a + 5 + 0x1000, g_ = f + 5 + 0x1000,
		       x = 0x405000;
	struct ptd_ptgen *g;
	unsigned tips;

	REQUIRE(st);
	REQUIRE(ptd_x86_decode(call0, 5, a, ptem_64bit, &call_f) == 0);
	REQUIRE(ptd_x86_decode(call0, 5, f, ptem_64bit, &call_g) == 0);
	REQUIRE(ptd_x86_decode(ret_b, 1, g_, ptem_64bit, &ret) == 0);
	cfg.sink_ctx = &sk;
	(void)ptd_ptgen_new(&cfg, &g);
	REQUIRE(g);
	CHECK_EQ_INT(ptd_ptgen_enable(g, a), 0);
	CHECK_EQ_INT(ptd_ptgen_step(g, a, &call_f, f), 0);
	CHECK_EQ_INT(ptd_ptgen_step(g, f, &call_g, g_), 0);
	CHECK_EQ_INT(ptd_ptgen_step(g, g_, &ret, x), 0);	/* TIP */
	CHECK_EQ_INT(ptd_ptgen_step(g, x, &ret, f + 5), 0);	/* TIP */
	CHECK_EQ_INT(ptd_ptgen_step(g, f + 5, &ret, a + 5), 0); /* TIP */
	CHECK_EQ_INT(ptd_ptgen_finish(g, a + 5), 0);
	CHECK_EQ_INT(ptd_ptgen_end(g), 0);
	ptd_ptgen_free(g);
	scan(sk.data, sk.len, st);
	CHECK_EQ_INT(st->status, -pte_eos);
	tips = st->count[ppt_tip];
	CHECK_EQ_INT(tips, 3);
	CHECK_EQ_INT(st->tnt_bits, 0);
	free(sk.data);
	free(st);
}

static void test_tnt_packing(void)
{
	struct ptd_ptgen_config cfg = { .sink = sink_write };
	struct sink sk = { 0 };
	struct prog *p = malloc(sizeof(*p));
	struct pkt_stats *st = malloc(sizeof(*st));
	struct run r = { 0 };
	struct ptd_ptgen *g;

	REQUIRE(p && st);
	prog_init(p);
	build_loop(p);
	REQUIRE(prog_link(p));
	cfg.sink_ctx = &sk;
	(void)ptd_ptgen_new(&cfg, &g);
	REQUIRE(g);
	CHECK(interpret(p, g, &r));
	CHECK_EQ_INT(ptd_ptgen_end(g), 0);
	ptd_ptgen_free(g);
	scan(sk.data, sk.len, st);
	/* (200 + 1 + 5 + 60 * 3 + 1) * 8 conditional branches: 65 full
	 * TNT-64 and one of 41 bits at the end */
	CHECK_EQ_INT(st->tnt_bits, 3096);
	CHECK_EQ_INT(st->tnt64_max, 47);
	CHECK_EQ_INT(st->count[ppt_tnt_64], 66);
	CHECK_EQ_INT(st->count[ppt_tnt_8], 0);
	CHECK_EQ_INT(st->count[ppt_tip], 0);
	/* within one region, IPs compress to update-16 */
	CHECK(st->ipc[pt_ipc_update_16] > 0 || st->ipc[pt_ipc_sext_48] > 0);
	run_free(&r);
	free(sk.data);
	free(st);
	free(p);
}

/* IP compression against last-IP: update-16, update-32, sext-48. */
static void test_ip_compression(void)
{
	struct ptd_ptgen_config cfg = { .sink = sink_write };
	struct sink sk = { 0 };
	struct pkt_stats *st = malloc(sizeof(*st));
	struct ptd_x86_insn jmp;
	const uint8_t jmp_rax[] = { 0xff, 0xe0 };
	struct ptd_ptgen *g;
	const uint64_t a = 0x401000, b16 = 0x40f000, b32 = 0x7f001000,
		       b48 = 0x7ffff7a21000;

	REQUIRE(st);
	REQUIRE(ptd_x86_decode(jmp_rax, 2, a, ptem_64bit, &jmp) == 0);
	cfg.sink_ctx = &sk;
	(void)ptd_ptgen_new(&cfg, &g);
	REQUIRE(g);
	CHECK_EQ_INT(ptd_ptgen_enable(g, a), 0);	/* sext-48 */
	CHECK_EQ_INT(ptd_ptgen_step(g, a, &jmp, b16), 0);	/* update-16 */
	CHECK_EQ_INT(ptd_ptgen_step(g, b16, &jmp, b32), 0);	/* update-32 */
	CHECK_EQ_INT(ptd_ptgen_step(g, b32, &jmp, b48), 0);	/* sext-48 */
	CHECK_EQ_INT(ptd_ptgen_step(g, b48, &jmp, b48 + 2), 0); /* upd-16 */
	CHECK_EQ_INT(ptd_ptgen_finish(g, b48 + 2), 0);		/* upd-16 */
	CHECK_EQ_INT(ptd_ptgen_end(g), 0);
	ptd_ptgen_free(g);
	scan(sk.data, sk.len, st);
	CHECK_EQ_INT(st->status, -pte_eos);
	CHECK_EQ_INT(st->ipc[pt_ipc_sext_48], 2);
	CHECK_EQ_INT(st->ipc[pt_ipc_update_16], 3);
	CHECK_EQ_INT(st->ipc[pt_ipc_update_32], 1);
	CHECK_EQ_INT(st->ipc[pt_ipc_full], 0);
	free(sk.data);
	free(st);
}

static void test_bad_config(void)
{
	static const uint64_t bad_periods[] = { 1, 128, 255, 300, 1000,
						4097, 2u << 20,
						1ull << 40 };
	struct ptd_ptgen_config cfg = { .sink = sink_write };
	struct ptd_ptgen *g;
	int err;

	g = (struct ptd_ptgen *)1;
	CHECK_EQ_INT(ptd_ptgen_new(NULL, &g), -EINVAL);
	CHECK(g == NULL);
	CHECK_EQ_INT(ptd_ptgen_new(&cfg, NULL), -EINVAL);

	g = (struct ptd_ptgen *)1;
	cfg.sink = NULL;
	CHECK_EQ_INT(ptd_ptgen_new(&cfg, &g), -EINVAL);
	CHECK(g == NULL);
	cfg.sink = sink_write;

	for (size_t i = 0; i < sizeof(bad_periods) / sizeof(*bad_periods);
	     i++) {
		err = 0;
		cfg.psb_period = bad_periods[i];
		err = ptd_ptgen_new(&cfg, &g);
		if (g || err != -EINVAL)
			CHECK_FAIL_("psb_period %" PRIu64 " accepted (%d)",
				    bad_periods[i], err);
		ptd_ptgen_free(g);
	}
	for (uint64_t v = 256; v <= (1u << 20); v <<= 1) {
		cfg.psb_period = v;
		err = ptd_ptgen_new(&cfg, &g);
		if (!g)
			CHECK_FAIL_("psb_period %" PRIu64 " refused", v);
		CHECK_EQ_INT(ptd_ptgen_end(g), 0);
		ptd_ptgen_free(g);
	}
}

static void test_misuse(void)
{
	struct ptd_ptgen_config cfg = { .sink = sink_write };
	struct sink sk = { 0 };
	struct ptd_x86_insn nop, sys, int3, jmp, jcc, call;
	struct ptd_ptgen *g;
	uint64_t off;

	REQUIRE(ptd_x86_decode((const uint8_t[]){ 0x90 }, 1, 0x1000,
			       ptem_64bit, &nop) == 0);
	REQUIRE(ptd_x86_decode((const uint8_t[]){ 0x0f, 0x05 }, 2, 0x1000,
			       ptem_64bit, &sys) == 0);
	REQUIRE(ptd_x86_decode((const uint8_t[]){ 0xcc }, 1, 0x1000,
			       ptem_64bit, &int3) == 0);
	REQUIRE(ptd_x86_decode((const uint8_t[]){ 0xeb, 0x10 }, 2, 0x1000,
			       ptem_64bit, &jmp) == 0);
	REQUIRE(ptd_x86_decode((const uint8_t[]){ 0x74, 0x10 }, 2, 0x1000,
			       ptem_64bit, &jcc) == 0);
	REQUIRE(ptd_x86_decode((const uint8_t[]){ 0xe8, 0x10, 0, 0, 0 }, 5,
			       0x1000, ptem_64bit, &call) == 0);

	cfg.sink_ctx = &sk;
	(void)ptd_ptgen_new(&cfg, &g);
	REQUIRE(g);

	/* disabled: nothing but enable/finish */
	CHECK(!ptd_ptgen_enabled(g));
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, &nop, 0x1001), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_kernel_entry(g, 0x1000, &sys), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_interrupt(g, 0x1000), -EINVAL);
	CHECK_EQ_U64(ptd_ptgen_offset(g), 0);

	CHECK_EQ_INT(ptd_ptgen_enable(g, 0x1000), 0);
	CHECK(ptd_ptgen_enabled(g));
	off = ptd_ptgen_offset(g);
	CHECK(off > 16);	/* PSB+ and TIP.PGE */
	CHECK_EQ_INT(ptd_ptgen_enable(g, 0x1000), -EINVAL);

	/* enabled: kernel-entering kinds are not steps, and the reverse */
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, &sys, 0x1002), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, &int3, 0x1001), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_kernel_entry(g, 0x1000, &nop), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_kernel_entry(g, 0x1000, &jmp), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, NULL, 0x1001), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_kernel_entry(g, 0x1000, NULL), -EINVAL);
	/* successors the stream cannot express */
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, &nop, 0x2000), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, &nop, 0x1000), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, &jmp, 0x1002), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, &jcc, 0x1005), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, &call, 0x1005), -EINVAL);
	/* nothing was written by the refused calls */
	CHECK_EQ_U64(ptd_ptgen_offset(g), off);
	CHECK(ptd_ptgen_enabled(g));

	/* a TNT bit is not counted until its packet is written */
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, &jcc, 0x1012), 0);
	CHECK_EQ_U64(ptd_ptgen_offset(g), off);

	/* kernel entry: the offset is the end of the TIP.PGD */
	CHECK_EQ_INT(ptd_ptgen_kernel_entry(g, 0x1012, &sys), 0);
	CHECK(!ptd_ptgen_enabled(g));
	CHECK_EQ_U64(ptd_ptgen_offset(g), off + 2);	/* TNT-8, PGD */
	CHECK_EQ_INT(ptd_ptgen_flush(g), 0);
	CHECK_EQ_U64(sk.len, off + 2);
	CHECK_EQ_INT(sk.data[sk.len - 1], 0x01);	/* TIP.PGD, no IP */
	CHECK_EQ_INT(ptd_ptgen_kernel_entry(g, 0x1012, &sys), -EINVAL);

	/* finish while disabled: nothing more */
	CHECK_EQ_INT(ptd_ptgen_finish(g, 0x1014), 0);
	CHECK_EQ_U64(sk.len, off + 2);
	CHECK_EQ_INT(ptd_ptgen_end(g), 0);
	ptd_ptgen_free(g);

	/* NULL */
	CHECK_EQ_INT(ptd_ptgen_end(NULL), -EINVAL);
	ptd_ptgen_free(NULL);
	CHECK_EQ_U64(ptd_ptgen_offset(NULL), 0);
	CHECK(!ptd_ptgen_enabled(NULL));
	ptd_ptgen_set_tsc(NULL, 1);
	CHECK_EQ_INT(ptd_ptgen_enable(NULL, 0), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_step(NULL, 0, &nop, 1), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_kernel_entry(NULL, 0, &sys), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_interrupt(NULL, 0), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_finish(NULL, 0), -EINVAL);
	CHECK_EQ_INT(ptd_ptgen_flush(NULL), -EINVAL);
	free(sk.data);
}

/* free() without finish writes the pending TNT bits. */
static void test_free_flushes_tnt(void)
{
	struct ptd_ptgen_config cfg = { .sink = sink_write };
	struct sink sk = { 0 };
	struct ptd_x86_insn jcc;
	struct ptd_ptgen *g;
	uint64_t off;

	REQUIRE(ptd_x86_decode((const uint8_t[]){ 0x74, 0x10 }, 2, 0x1000,
			       ptem_64bit, &jcc) == 0);
	cfg.sink_ctx = &sk;
	(void)ptd_ptgen_new(&cfg, &g);
	REQUIRE(g);
	CHECK_EQ_INT(ptd_ptgen_enable(g, 0x1000), 0);
	CHECK_EQ_INT(ptd_ptgen_step(g, 0x1000, &jcc, 0x1012), 0);
	off = ptd_ptgen_offset(g);
	CHECK_EQ_INT(ptd_ptgen_flush(g), 0);
	CHECK_EQ_U64(sk.len, off);
	CHECK_EQ_INT(ptd_ptgen_end(g), 0);
	ptd_ptgen_free(g);
	CHECK_EQ_U64(sk.len, off + 1);
	CHECK_EQ_INT(sk.data[sk.len - 1], 0x06);	/* TNT-8: 1 bit, taken */
	free(sk.data);
}

/* A failing sink: the call that needed room fails with the sink's error,
 * changes nothing, and succeeds when retried; the stream is whole. */
static void test_sink_failure(void)
{
	struct ptd_ptgen_config cfg = { .sink = sink_write };
	struct sink sk = { 0 };
	struct prog *p = malloc(sizeof(*p));
	struct ptd_x86_insn jmp;
	struct ptd_ptgen *g;
	struct decoded d = { 0 };
	uint64_t *exp = calloc(MAX_STEPS, sizeof(*exp));
	const uint64_t a = region_base[0], bb = region_base[1];
	size_t n = 0;
	unsigned failures = 0;

	REQUIRE(p && exp);
	prog_init(p);
	B(p, 0xff, 0xe0);	/* a: jmp *%rax */
	p->cur = 1;
	B(p, 0xff, 0xe0);	/* b: jmp *%rax */
	REQUIRE(ptd_x86_decode(p->code[0], 2, a, ptem_64bit, &jmp) == 0);

	cfg.sink_ctx = &sk;
	cfg.noretcomp = true;
	(void)ptd_ptgen_new(&cfg, &g);
	REQUIRE(g);
	sk.fail_next = -ENOSPC;
	CHECK_EQ_INT(ptd_ptgen_enable(g, a), 0);
	for (unsigned i = 0; i < 30000; i++) {
		uint64_t ip = i % 2 ? bb : a, next = i % 2 ? a : bb;
		uint64_t off = ptd_ptgen_offset(g);
		int err = ptd_ptgen_step(g, ip, &jmp, next);

		if (err == -ENOSPC) {
			failures++;
			CHECK_EQ_U64(ptd_ptgen_offset(g), off);
			err = ptd_ptgen_step(g, ip, &jmp, next);
		}
		CHECK_EQ_INT(err, 0);
		exp[n++] = ip;
	}
	CHECK_EQ_INT(failures, 1);
	CHECK(sk.calls >= 3);
	CHECK_EQ_INT(ptd_ptgen_finish(g, a), 0);
	CHECK_EQ_U64(ptd_ptgen_offset(g), sk.len);
	CHECK_EQ_INT(ptd_ptgen_end(g), 0);
	ptd_ptgen_free(g);

	decode(p, sk.data, sk.len, 0, &d);
	compare("sink failure", exp, n, &d);
	free(d.ip);
	free(exp);
	free(sk.data);
	free(p);
}

int main(void)
{
	RUN(test_bad_config);
	RUN(test_misuse);
	RUN(test_free_flushes_tnt);
	RUN(test_ip_compression);
	RUN(test_ret_models);
	RUN(test_tnt_packing);
	RUN(test_sink_failure);
	RUN(test_scenarios);
	return check_done();
}
