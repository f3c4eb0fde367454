/* SPDX-License-Identifier: MIT */
/*
 * The packet generator with address filters: for every way control can
 * cross a filter boundary (direct/indirect jump, call, return, conditional
 * branch taken and not taken, sequential flow off the end, a syscall inside
 * and outside, a PSB while the filter holds packets off, TraceStop), drive
 * ptd_ptgen along a scripted path through hand-assembled code, decode the
 * stream with ptd's decoder on both paths (identical records, field for
 * field), and compare what it reports (instructions, enabled/disabled
 * events) with what the hardware would report: exactly the instructions
 * inside the ranges, an enable before the first of each stretch and a
 * disable after the last.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <intel-pt.h>

#include "check.h"
#include "mapcode.h"
#include "reccmp.h"
#include "aspace/image.h"
#include "aspace/iscache.h"
#include "common/fileio.h"
#include "decode/decoder.h"
#include "swpt/capture.h"
#include "swpt/ptgen.h"
#include "x86/insn.h"

#define BASE 0x401000ull
#define CODE_SIZE 0x3000u
#define F_LO 0x402000ull	/* the filter range [F_LO, F_HI] */
#define F_HI 0x402fffull
#define MAX_TOK 8192

/* Tokens: an IP, or one of these (no code lives there). */
#define TOK_EN 1u
#define TOK_DIS 2u
#define TOK_STOP 3u

static uint8_t code[CODE_SIZE];

/* ---- a tiny assembler ------------------------------------------------ */

static uint64_t put(uint64_t at, const uint8_t *b, size_t n)
{
	memcpy(&code[at - BASE], b, n);
	return at + n;
}

static uint64_t nop(uint64_t at)
{
	static const uint8_t b[] = { 0x90 };

	return put(at, b, sizeof(b));
}

static uint64_t rel32(uint64_t at, uint8_t op0, int op1, uint64_t target)
{
	uint8_t b[6];
	size_t n = 0;
	int32_t d;

	b[n++] = op0;
	if (op1 >= 0)
		b[n++] = (uint8_t)op1;
	d = (int32_t)(target - (at + n + 4));
	memcpy(&b[n], &d, 4);
	return put(at, b, n + 4);
}

static uint64_t jmp(uint64_t at, uint64_t t) { return rel32(at, 0xe9, -1, t); }
static uint64_t call(uint64_t at, uint64_t t) { return rel32(at, 0xe8, -1, t); }
static uint64_t jz(uint64_t at, uint64_t t) { return rel32(at, 0x0f, 0x84, t); }

static uint64_t op2(uint64_t at, uint8_t a, uint8_t b)
{
	const uint8_t v[] = { a, b };

	return put(at, v, sizeof(v));
}

static uint64_t ret(uint64_t at)
{
	static const uint8_t b[] = { 0xc3 };

	return put(at, b, sizeof(b));
}

static uint64_t jmp_rax(uint64_t at) { return op2(at, 0xff, 0xe0); }
static uint64_t syscall_(uint64_t at) { return op2(at, 0x0f, 0x05); }

/* ---- generating ------------------------------------------------------ */

struct buf {
	uint8_t *p;
	size_t n, cap;
};

static int sink(void *ctx, const uint8_t *data, size_t len)
{
	struct buf *b = ctx;

	if (b->n + len > b->cap) {
		size_t cap = (b->n + len) * 2;
		uint8_t *p = realloc(b->p, cap);

		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, len);
	b->n += len;
	return 0;
}

static int fetch(uint64_t ip, struct ptd_x86_insn *insn)
{
	if (ip < BASE || ip >= BASE + CODE_SIZE)
		return -EFAULT;
	return ptd_x86_decode(&code[ip - BASE], (size_t)(BASE + CODE_SIZE - ip),
			      ip, ptem_64bit, insn);
}

/* Run @path (executed IPs in order, then the IP the thread is at when the
 * stream ends, then 0) through a generator with filter @f.  A SYSCALL in
 * the path enters the kernel; the next IP is where it returns. */
static int generate(const uint64_t *path, const struct pt_conf_addr_filter *f,
		    uint64_t psb_period, struct buf *out)
{
	struct ptd_ptgen_config cfg = { .psb_period = psb_period,
					.sink = sink, .sink_ctx = out };
	struct ptd_ptgen *g;
	int r;

	r = ptd_ptgen_new(&cfg, &g);
	if (!g)
		return r;
	r = ptd_ptgen_set_filter(g, f);
	if (!r)
		r = ptd_ptgen_enable(g, path[0]);
	for (size_t i = 0; !r && path[i + 1]; i++) {
		struct ptd_x86_insn insn;

		r = fetch(path[i], &insn);
		if (r < 0)
			break;
		if (insn.kind == PTD_X86_SYSCALL) {
			r = ptd_ptgen_kernel_entry(g, path[i], &insn);
			if (!r)
				r = ptd_ptgen_enable(g, path[i + 1]);
		} else {
			r = ptd_ptgen_step(g, path[i], &insn, path[i + 1]);
		}
	}
	if (!r) {
		size_t last = 0;

		while (path[last + 1])
			last++;
		r = ptd_ptgen_finish(g, path[last]);
	}
	if (!r)
		r = ptd_ptgen_end(g);
	ptd_ptgen_free(g);
	return r;
}

/* ---- what the hardware would report ---------------------------------- */

static bool in_filter(const struct pt_conf_addr_filter *f, uint64_t ip)
{
	const uint64_t r[4][2] = { { f->addr0_a, f->addr0_b },
				   { f->addr1_a, f->addr1_b },
				   { f->addr2_a, f->addr2_b },
				   { f->addr3_a, f->addr3_b } };

	for (unsigned i = 0; i < 4; i++)
		if (((f->config.addr_cfg >> (4 * i)) & 0xf) == 1 &&
		    r[i][0] <= ip && ip <= r[i][1])
			return true;
	return false;
}

static size_t expected(const uint64_t *path,
		       const struct pt_conf_addr_filter *f, uint64_t *tok)
{
	bool pkt = false;
	size_t n = 0, i;

	for (i = 0; path[i + 1]; i++) {
		struct ptd_x86_insn insn;
		bool in = in_filter(f, path[i]);

		if (in && !pkt)
			tok[n++] = TOK_EN;
		if (!in && pkt)
			tok[n++] = TOK_DIS;
		pkt = in;
		if (in)
			tok[n++] = path[i];
		if (pkt && fetch(path[i], &insn) == 0 &&
		    insn.kind == PTD_X86_SYSCALL) {
			tok[n++] = TOK_DIS;
			pkt = false;
		}
	}
	/* The stream ends with the thread at path[i]: if tracing was
	 * enabled there (even just now), it is disabled before it. */
	if (in_filter(f, path[i]) && !pkt)
		tok[n++] = TOK_EN;
	if (in_filter(f, path[i]) || pkt)
		tok[n++] = TOK_DIS;
	return n;
}

/* ---- decoding -------------------------------------------------------- */

static char tmpd[200];	/* leaves room in mapcode()'s path */

/* The tokens of @l's records; returns how many, or -1 if there are too
 * many or an error record (printed). */
static long tokens(const struct reclist *l, uint64_t *tok)
{
	size_t n = 0;

	for (size_t i = 0; i < l->n; i++) {
		const struct ptd_record *r = &l->r[i];
		uint64_t t = 0;

		if (r->type == PTD_REC_ERROR) {
			reccmp_print(stderr, "decode: ", r);
			return -1;
		}
		if (r->type == PTD_REC_INSN)
			t = r->u.insn.ip;
		else if (r->type != PTD_REC_EVENT)
			t = 0;
		else if (r->u.event.ev.type == ptev_enabled)
			t = TOK_EN;
		else if (r->u.event.ev.type == ptev_disabled ||
			 r->u.event.ev.type == ptev_async_disabled)
			t = TOK_DIS;
		else if (r->u.event.ev.type == ptev_stop)
			t = TOK_STOP;
		if (!t)
			continue;
		if (n >= MAX_TOK)
			return -1;
		tok[n++] = t;
	}
	return (long)n;
}

/* Decode @b with ptd's decoder on @path, told filter @f, in @img; the
 * records go to @out. */
static int decode_path(const struct buf *b,
		       const struct pt_conf_addr_filter *f,
		       struct ptd_image *img, enum ptd_decode_path path,
		       struct reclist *out)
{
	struct ptd_decode_opts o;
	struct ptd_decode_thread_args a;

	memset(&o, 0, sizeof(o));
	o.path = path;
	o.want = PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT);
	o.cpu.vendor = pcv_unknown;
	o.addr_filter = *f;
	memset(&a, 0, sizeof(a));
	a.pt = b->p;
	a.len = b->n;
	a.pid = 1;
	a.tid = 1;
	a.img = img;
	return ptd_decode_thread(&o, &a, reclist_add, out, NULL);
}

/* Decode @b on both paths, code[] mapped from a file: the records must be
 * the same, field for field.  Returns the token count, or -1 (printed). */
static long decode(const struct buf *b, const struct pt_conf_addr_filter *f,
		   uint64_t *tok)
{
	static unsigned seq;
	struct reclist li = { 0 }, lb = { 0 };
	struct ptd_iscache *ic;
	(void)ptd_iscache_new(&ic);
	struct ptd_image *img;
	(void)ptd_image_new(ic, "filter-gen", &img);
	char name[32], file[300];
	long n = -1;
	int ri = -ENOMEM, rb = -ENOMEM;

	(void)snprintf(name, sizeof(name), "code-%u.bin", seq++);
	if (img && mapcode(img, tmpd, name, code, sizeof(code), BASE) > 0) {
		ri = decode_path(b, f, img, PTD_PATH_INSN, &li);
		rb = decode_path(b, f, img, PTD_PATH_BLOCK, &lb);
	}
	if (ri || rb)
		fprintf(stderr, "decode: insn path %d, block path %d\n", ri,
			rb);
	else if (reccmp_lists(stderr, "insn:  ", &li, "block: ", &lb))
		n = tokens(&li, tok);
	reclist_free(&li);
	reclist_free(&lb);
	ptd_image_free(img);
	ptd_iscache_free(ic);
	(void)snprintf(file, sizeof(file), "%s/%s", tmpd, name);
	(void)unlink(file);
	return n;
}

/* Print tokens [from, from + 16) of @t. */
static void print_toks(const char *what, const uint64_t *t, size_t n,
		       size_t from)
{
	fprintf(stderr, "  %s (%zu tokens, from #%zu):", what, n, from);
	for (size_t i = from; i < n && i < from + 16; i++) {
		if (t[i] == TOK_EN)
			fprintf(stderr, " EN");
		else if (t[i] == TOK_DIS)
			fprintf(stderr, " DIS");
		else if (t[i] == TOK_STOP)
			fprintf(stderr, " STOP");
		else
			fprintf(stderr, " %" PRIx64, t[i]);
	}
	fprintf(stderr, "\n");
}

/* The packets of @b, one word each: "psb fup mode psbend pge(402000)
 * tnt(2) tip(...) pgd(401000) pgd(-) stop ...". */
static void dump(const struct buf *b, char *out, size_t cap)
{
	struct pt_config cfg;
	struct pt_packet_decoder *d;
	size_t used = 0;

	out[0] = '\0';
	pt_config_init(&cfg);
	cfg.begin = b->p;
	cfg.end = b->p + b->n;
	d = pt_pkt_alloc_decoder(&cfg);
	if (!d || pt_pkt_sync_set(d, 0) < 0) {
		pt_pkt_free_decoder(d);
		return;
	}
	for (;;) {
		struct pt_packet p;
		char w[48];

		if (pt_pkt_next(d, &p, sizeof(p)) < 0)
			break;
		if (p.type == ppt_tnt_8 || p.type == ppt_tnt_64)
			snprintf(w, sizeof(w), "tnt(%u) ",
				 (unsigned)p.payload.tnt.bit_size);
		else if (p.type == ppt_fup || p.type == ppt_tip ||
			 p.type == ppt_tip_pge || p.type == ppt_tip_pgd)
			snprintf(w, sizeof(w), "%s%s ",
				 p.type == ppt_fup ? "fup"
				 : p.type == ppt_tip ? "tip"
				 : p.type == ppt_tip_pge ? "pge" : "pgd",
				 p.payload.ip.ipc == pt_ipc_suppressed ? "(-)"
								      : "");
		else
			snprintf(w, sizeof(w), "%s ",
				 p.type == ppt_psb ? "psb"
				 : p.type == ppt_psbend ? "psbend"
				 : p.type == ppt_mode ? "mode"
				 : p.type == ppt_stop ? "stop" : "?");
		if (used + strlen(w) + 1 < cap) {
			memcpy(out + used, w, strlen(w) + 1);
			used += strlen(w);
		}
	}
	pt_pkt_free_decoder(d);
}

static struct pt_conf_addr_filter one_range(void)
{
	struct pt_conf_addr_filter f;

	memset(&f, 0, sizeof(f));
	f.config.ctl.addr0_cfg = 1;
	f.addr0_a = F_LO;
	f.addr0_b = F_HI;
	return f;
}

/* Generate, decode and compare with the expected tokens; the packet dump
 * goes to @pkts (may be NULL). */
static void check_path(const char *what, const uint64_t *path,
		       const struct pt_conf_addr_filter *f, uint64_t period,
		       char *pkts, size_t cap)
{
	static uint64_t exp[MAX_TOK], got[MAX_TOK];
	struct buf b = { 0 };
	size_t nexp;
	long ngot;
	int r;

	r = generate(path, f, period, &b);
	CHECK_EQ_INT(r, 0);
	if (r) {
		free(b.p);
		return;
	}
	nexp = expected(path, f, exp);
	ngot = decode(&b, f, got);
	CHECK(ngot >= 0);
	if (ngot >= 0 && ((size_t)ngot != nexp ||
			  memcmp(exp, got, nexp * sizeof(*exp)) != 0)) {
		CHECK_FAIL_("%s: decoded tokens differ from the in-range "
			    "path", what);
		size_t d = 0;

		while (d < nexp && d < (size_t)ngot && exp[d] == got[d])
			d++;
		d = d > 4 ? d - 4 : 0;
		print_toks("expected", exp, nexp, d);
		print_toks("decoded ", got, (size_t)ngot, d);
	}
	if (pkts)
		dump(&b, pkts, cap);
	free(b.p);
}

/* ---- the boundary cases ---------------------------------------------- */

#define O1 0x401100ull	/* outside, below */
#define O2 0x403100ull	/* outside, above */
#define I1 0x402100ull	/* inside */
#define I2 0x402800ull

/* Direct jumps out and back in. */
static void test_jump(void)
{
	struct pt_conf_addr_filter f = one_range();
	char pk[1024];

	memset(code, 0xcc, sizeof(code));
	nop(O1);
	jmp(O1 + 1, I1);
	nop(I1);
	nop(I1 + 1);
	jmp(I1 + 2, O2);
	nop(O2);
	jmp(O2 + 1, I2);
	nop(I2);
	{
		const uint64_t path[] = { O1, O1 + 1, I1, I1 + 1, I1 + 2, O2,
					  O2 + 1, I2, I2 + 1, 0 };

		check_path("jump", path, &f, 0, pk, sizeof(pk));
	}
	/* Entering: PGE; leaving by a direct jump: PGD with its target. */
	CHECK_CONTAINS(pk, "psb mode psbend pge pgd pge fup pgd(-)");
}

/* A call out of the range (the callee is not traced), its return back in
 * (PGE at the return address), then a return out of the range. */
static void test_call_ret(void)
{
	struct pt_conf_addr_filter f = one_range();
	char pk[1024];

	memset(code, 0xcc, sizeof(code));
	call(O1, I1);		/* O1: call I1 (enters) */
	nop(O1 + 5);
	call(I1, O2);		/* I1: call O2 (leaves) */
	ret(I1 + 5);		/* returns to O1 + 5 (leaves) */
	nop(O2);
	ret(O2 + 1);		/* back to I1 + 5 (enters) */
	{
		const uint64_t path[] = { O1, I1, O2, O2 + 1, I1 + 5, O1 + 5,
					  O1 + 6, 0 };

		check_path("call/ret", path, &f, 0, pk, sizeof(pk));
	}
	/* The direct call out: PGD with its target; the return out: PGD
	 * with no IP and no FUP, as CPUs send it. */
	CHECK_CONTAINS(pk, "pge pgd pge pgd(-) ");
	/* No return is compressed into a TNT bit across the boundary. */
	CHECK(!strstr(pk, "tnt"));
}

/* A call and return inside the range: the return is still compressed. */
static void test_ret_inside(void)
{
	struct pt_conf_addr_filter f = one_range();
	char pk[1024];

	memset(code, 0xcc, sizeof(code));
	call(I1, I2);
	jmp(I1 + 5, O2);
	ret(I2);
	nop(O2);
	{
		const uint64_t path[] = { I1, I2, I1 + 5, O2, O2 + 1, 0 };

		check_path("ret inside", path, &f, 0, pk, sizeof(pk));
	}
	CHECK_CONTAINS(pk, "pge tnt(1) pgd ");
}

/* A conditional branch leaving the range, taken and not taken: no TNT bit
 * for it, a TIP.PGD with the IP suppressed (the SDM: "For conditional
 * branches, the payload is suppressed"). */
static void test_cond(void)
{
	struct pt_conf_addr_filter f = one_range();
	const uint64_t end = F_HI + 1 - 6;	/* jz is the last insn */
	char pk[1024];

	memset(code, 0xcc, sizeof(code));
	jz(I1, I1 + 12);	/* taken, stays inside: a TNT bit */
	jz(I1 + 12, O2);	/* taken out */
	jmp(O1, end);
	jz(end, O2);		/* not taken: falls out of the range */
	nop(O2);
	nop(F_HI + 1);
	{
		const uint64_t path[] = { I1, I1 + 12, O2, 0 };

		check_path("jcc taken out", path, &f, 0, pk, sizeof(pk));
		CHECK_CONTAINS(pk, "pge tnt(1) pgd(-) ");
	}
	{
		const uint64_t path[] = { O1, end, F_HI + 1, F_HI + 2, 0 };

		check_path("jcc not taken out", path, &f, 0, pk, sizeof(pk));
		CHECK_CONTAINS(pk, "pge pgd(-) ");
		CHECK(!strstr(pk, "tnt"));
	}
}

/* An indirect jump leaving: PGD, with no IP and no FUP, instead of TIP
 * (libipt 2.0.5's pt_insn_next alone cannot bind it). */
static void test_indirect(void)
{
	struct pt_conf_addr_filter f = one_range();
	char pk[1024];

	memset(code, 0xcc, sizeof(code));
	nop(I1);
	jmp_rax(I1 + 1);	/* to O2 */
	nop(O2);
	jmp_rax(O2 + 1);	/* to I2: enters */
	nop(I2);
	jmp_rax(I2 + 1);	/* to I1: stays inside */
	{
		const uint64_t path[] = { I1, I1 + 1, O2, O2 + 1, I2, I2 + 1,
					  I1, I1 + 1, O2, 0 };

		check_path("indirect", path, &f, 0, pk, sizeof(pk));
	}
	CHECK_CONTAINS(pk, "pge pgd(-) pge tip pgd(-) ");
}

/* Falling off the end of the range: FUP + TIP.PGD (IP suppressed). */
static void test_sequential(void)
{
	struct pt_conf_addr_filter f = one_range();
	char pk[1024];

	memset(code, 0xcc, sizeof(code));
	nop(F_HI - 1);
	nop(F_HI);
	nop(F_HI + 1);
	nop(F_HI + 2);
	jmp(O1, F_HI - 1);
	{
		const uint64_t path[] = { O1, F_HI - 1, F_HI, F_HI + 1,
					  F_HI + 2, 0 };

		check_path("sequential out", path, &f, 0, pk, sizeof(pk));
	}
	CHECK_CONTAINS(pk, "pge fup pgd(-) ");
	/* And sequential flow into a range: PGE at its first byte. */
	memset(code, 0xcc, sizeof(code));
	nop(F_LO - 2);
	nop(F_LO - 1);
	nop(F_LO);
	{
		const uint64_t path[] = { F_LO - 2, F_LO - 1, F_LO, F_LO + 1,
					  0 };

		check_path("sequential in", path, &f, 0, pk, sizeof(pk));
	}
	CHECK_CONTAINS(pk, "psbend pge fup pgd(-)");
}

/* A syscall inside (PGD at it, PGE where it returns) and one outside
 * (nothing at all). */
static void test_syscall(void)
{
	struct pt_conf_addr_filter f = one_range();
	char pk[1024];

	memset(code, 0xcc, sizeof(code));
	nop(I1);
	syscall_(I1 + 1);
	nop(I1 + 3);
	jmp(I1 + 4, O2);
	syscall_(O2);
	jmp(O2 + 2, I2);
	nop(I2);
	{
		const uint64_t path[] = { I1, I1 + 1, I1 + 3, I1 + 4, O2,
					  O2 + 2, I2, I2 + 1, 0 };

		check_path("syscall", path, &f, 0, pk, sizeof(pk));
	}
	CHECK_CONTAINS(pk, "psbend pge pgd(-) pge pgd pge fup pgd(-) ");
}

/* Many crossings with a small PSB period: PSBs fall while the filter holds
 * packets off (no FUP in them) and while it lets them through. */
static void test_psb_disabled(void)
{
	struct pt_conf_addr_filter f = one_range();
	static uint64_t path[4 * 400 + 2];
	static char pk[65536];
	size_t n = 0;

	memset(code, 0xcc, sizeof(code));
	nop(I1);
	jmp(I1 + 1, O2);
	nop(O2);
	jmp(O2 + 1, I1);
	for (unsigned i = 0; i < 400; i++) {
		path[n++] = I1;
		path[n++] = I1 + 1;
		path[n++] = O2;
		path[n++] = O2 + 1;
	}
	path[n++] = I1;
	path[n] = 0;
	check_path("psb while disabled", path, &f, 256, pk, sizeof(pk));
	/* A PSB+ right after a PGD: no FUP in it. */
	CHECK_CONTAINS(pk, "pgd psb mode psbend pge");
}

/* Two ranges: going straight from one to the other keeps tracing on. */
static void test_two_ranges(void)
{
	struct pt_conf_addr_filter f = one_range();
	char pk[1024];

	f.config.ctl.addr2_cfg = 1;
	f.addr2_a = O2;
	f.addr2_b = O2 + 0xff;
	memset(code, 0xcc, sizeof(code));
	jmp(I1, O2);
	jmp(O2, O1);
	nop(O1);
	{
		const uint64_t path[] = { I1, O2, O1, O1 + 1, 0 };

		check_path("two ranges", path, &f, 0, pk, sizeof(pk));
	}
	CHECK_CONTAINS(pk, "psbend pge pgd ");
}

/* A TraceStop range: PGD, then TraceStop; nothing after, even when the
 * path comes back into the filter range. */
static void test_tracestop(void)
{
	struct pt_conf_addr_filter f = one_range();
	struct ptd_ptgen_config cfg = { .sink = sink };
	static uint64_t got[MAX_TOK];
	const uint64_t path[] = { I1, I1 + 1, O2, I1, I1 + 1, O2, 0 };
	struct ptd_ptgen *g;
	struct buf b = { 0 };
	char pk[1024];
	long n;

	f.config.ctl.addr1_cfg = 2;
	f.addr1_a = O2;
	f.addr1_b = O2 + 0xf;
	memset(code, 0xcc, sizeof(code));
	nop(I1);
	jmp(I1 + 1, O2);
	jmp(O2, I1);

	cfg.sink_ctx = &b;
	REQUIRE(ptd_ptgen_new(&cfg, &g) == 0);
	CHECK_EQ_INT(ptd_ptgen_set_filter(g, &f), 0);
	CHECK_EQ_INT(ptd_ptgen_enable(g, path[0]), 0);
	for (size_t i = 0; path[i + 1]; i++) {
		struct ptd_x86_insn insn;

		REQUIRE(fetch(path[i], &insn) == 0);
		/* The truth: traced until the stop range is entered. */
		CHECK(ptd_ptgen_traces(g, path[i]) == (i < 2));
		CHECK_EQ_INT(ptd_ptgen_step(g, path[i], &insn, path[i + 1]), 0);
		CHECK(ptd_ptgen_stopped(g) == (i >= 1));
	}
	CHECK_EQ_INT(ptd_ptgen_finish(g, O2), 0);
	CHECK_EQ_INT(ptd_ptgen_end(g), 0);
	ptd_ptgen_free(g);
	dump(&b, pk, sizeof(pk));
	CHECK_CONTAINS(pk, "psbend pge pgd stop ");
	CHECK(!strstr(pk, "stop pge"));
	n = decode(&b, &f, got);
	CHECK_EQ_INT(n, 5);
	if (n == 5) {
		CHECK_EQ_U64(got[0], TOK_EN);
		CHECK_EQ_U64(got[1], I1);
		CHECK_EQ_U64(got[2], I1 + 1);
		CHECK_EQ_U64(got[3], TOK_DIS);
		CHECK_EQ_U64(got[4], TOK_STOP);
	}
	free(b.p);
}

/* ptd_ptgen_traces and the set_filter contract. */
static void test_api(void)
{
	struct pt_conf_addr_filter f = one_range(), bad;
	struct ptd_ptgen_config cfg = { .sink = sink };
	struct ptd_ptgen *g;
	struct buf b = { 0 };

	cfg.sink_ctx = &b;
	REQUIRE(ptd_ptgen_new(&cfg, &g) == 0);
	/* No filter: everything is traced. */
	CHECK(ptd_ptgen_traces(g, O1));
	CHECK_EQ_INT(ptd_ptgen_set_filter(NULL, &f), -EINVAL);
	bad = f;
	bad.addr0_a = F_HI + 1;		/* a > b */
	CHECK_EQ_INT(ptd_ptgen_set_filter(g, &bad), -EINVAL);
	bad = f;
	bad.config.ctl.addr1_cfg = 3;	/* no such cfg */
	CHECK_EQ_INT(ptd_ptgen_set_filter(g, &bad), -EINVAL);
	bad = f;
	bad.config.addr_cfg |= 1ull << 16;	/* beyond addr3_cfg */
	CHECK_EQ_INT(ptd_ptgen_set_filter(g, &bad), -EINVAL);
	CHECK(ptd_ptgen_traces(g, O1));	/* refused: unchanged */

	CHECK_EQ_INT(ptd_ptgen_set_filter(g, &f), 0);
	CHECK(!ptd_ptgen_traces(g, O1));
	CHECK(ptd_ptgen_traces(g, F_LO));
	CHECK(ptd_ptgen_traces(g, F_HI));	/* b is inclusive */
	CHECK(!ptd_ptgen_traces(g, F_HI + 1));
	CHECK(!ptd_ptgen_traces(NULL, F_LO));

	/* Enabled outside the range: no PGE, but TraceEn is set. */
	CHECK_EQ_INT(ptd_ptgen_enable(g, O1), 0);
	CHECK(ptd_ptgen_enabled(g));
	CHECK_EQ_INT(ptd_ptgen_set_filter(g, NULL), -EBUSY);
	CHECK_EQ_INT(ptd_ptgen_interrupt(g, O1), 0);
	CHECK(!ptd_ptgen_enabled(g));
	/* Cleared: everything traced again. */
	CHECK_EQ_INT(ptd_ptgen_set_filter(g, NULL), 0);
	CHECK(ptd_ptgen_traces(g, O1));
	CHECK(!ptd_ptgen_stopped(g));
	CHECK_EQ_INT(ptd_ptgen_end(g), 0);
	ptd_ptgen_free(g);
	/* Only the first PSB+: nothing was traced. */
	{
		char pk[256];

		dump(&b, pk, sizeof(pk));
		CHECK_EQ_STR(pk, "psb mode psbend ");
	}
	free(b.p);
}

/* ---- the filter in a capture's manifest ------------------------------ */

/* A one-thread capture in @dir with filter @f (may be all zero). */
static int save_capture(const char *dir, const struct pt_conf_addr_filter *f,
			const char *text)
{
	char *argv[] = { (char *)"/bin/true", NULL };
	struct ptd_capture_thread th = { 1, 0, (char *)"pt-1.bin",
					 (char *)"truth-1.bin", 0, 0 };
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	char path[512];
	int r;

	(void)mkdir(dir, 0700);
	(void)snprintf(path, sizeof(path), "%s/pt-1.bin", dir);
	if (ptd_file_write_atomic(path, "", 0) < 0)
		return -EIO;
	(void)snprintf(path, sizeof(path), "%s/truth-1.bin", dir);
	if (ptd_file_write_atomic(path, "", 0) < 0)
		return -EIO;
	memset(&c, 0, sizeof(c));
	c.dir = (char *)dir;
	c.pid = 1;
	c.argv = argv;
	c.cpu.vendor = pcv_unknown;
	c.config.psb_period = 4096;
	c.threads = &th;
	c.nthreads = 1;
	c.addr_filter = *f;
	c.filter = (char *)text;
	c.exited = true;
	ptd_timeline_init(&c.tl);
	r = ptd_capture_save(&c, &diag);
	if (r < 0)
		fprintf(stderr, "save: %s\n", diag.msg);
	return r;
}

static void test_capture_roundtrip(void)
{
	struct pt_conf_addr_filter f = one_range(), none;
	struct ptd_diag diag = { "" };
	struct ptd_capture l;
	char dir[300];

	/* filter in slot 0, TraceStop in slot 2: saved in order, loaded
	 * into slots 0 and 1 */
	f.config.ctl.addr2_cfg = 2;
	f.addr2_a = O2;
	f.addr2_b = O2 + 0xf;
	(void)snprintf(dir, sizeof(dir), "%s/rt", tmpd);
	REQUIRE(save_capture(dir, &f, "filter 0x10/0x20@/bin/true") == 0);
	REQUIRE(ptd_capture_load(dir, &l, &diag) == 0);
	CHECK_EQ_STR(l.filter, "filter 0x10/0x20@/bin/true");
	CHECK_EQ_INT(l.addr_filter.config.ctl.addr0_cfg, 1);
	CHECK_EQ_U64(l.addr_filter.addr0_a, F_LO);
	CHECK_EQ_U64(l.addr_filter.addr0_b, F_HI);
	CHECK_EQ_INT(l.addr_filter.config.ctl.addr1_cfg, 2);
	CHECK_EQ_U64(l.addr_filter.addr1_a, O2);
	CHECK_EQ_U64(l.addr_filter.addr1_b, O2 + 0xf);
	CHECK_EQ_INT(l.addr_filter.config.ctl.addr2_cfg, 0);
	ptd_capture_fini(&l);

	/* No filter: no "filter" field, nothing loaded. */
	memset(&none, 0, sizeof(none));
	(void)snprintf(dir, sizeof(dir), "%s/none", tmpd);
	REQUIRE(save_capture(dir, &none, NULL) == 0);
	REQUIRE(ptd_capture_load(dir, &l, &diag) == 0);
	CHECK(!l.filter);
	CHECK_EQ_U64(l.addr_filter.config.addr_cfg, 0);
	ptd_capture_fini(&l);
}

/* A manifest whose "filter" is @json: refused, the message containing
 * @want. */
static void bad_filter(const char *json, const char *want)
{
	struct pt_conf_addr_filter none;
	struct ptd_diag diag = { "" };
	struct ptd_capture l;
	char dir[300], path[400];
	char *text = NULL, *patched, *end;
	size_t len = 0;

	memset(&none, 0, sizeof(none));
	(void)snprintf(dir, sizeof(dir), "%s/bad", tmpd);
	(void)snprintf(path, sizeof(path), "%s/capture.json", dir);
	(void)unlink(path);
	REQUIRE(save_capture(dir, &none, NULL) == 0);
	REQUIRE(ptd_file_read_all(path, 1u << 20, &text, &len) == 0);
	end = strrchr(text, '}');
	REQUIRE(end);
	patched = malloc(len + strlen(json) + 16);
	REQUIRE(patched);
	(void)sprintf(patched, "%.*s,\"filter\":%s}", (int)(end - text), text,
		      json);
	REQUIRE(ptd_file_write_atomic(path, patched, strlen(patched)) == 0);
	CHECK_EQ_INT(ptd_capture_load(dir, &l, &diag), -PTD_EFORMAT);
	CHECK_CONTAINS(diag.msg, want);
	free(patched);
	free(text);
}

static void test_capture_bad(void)
{
	const char *r1 = "{\"action\":\"filter\",\"a\":1,\"b\":2}";
	char five[512];

	bad_filter("[]", "capture.json: filter: expected an object");
	bad_filter("{}", "capture.json: filter.ranges: missing");
	bad_filter("{\"ranges\":{}}", "filter.ranges: expected an array");
	bad_filter("{\"ranges\":[]}", "filter.ranges: empty");
	(void)snprintf(five, sizeof(five), "{\"ranges\":[%s,%s,%s,%s,%s]}",
		       r1, r1, r1, r1, r1);
	bad_filter(five, "more than 4 ranges");
	bad_filter("{\"ranges\":[1]}", "filter.ranges[0]: expected an object");
	bad_filter("{\"ranges\":[{\"action\":\"start\",\"a\":1,\"b\":2}]}",
		   "filter.ranges[0].action: neither");
	bad_filter("{\"ranges\":[{\"action\":\"filter\",\"a\":3,\"b\":2}]}",
		   "filter.ranges[0].b: below a");
	bad_filter("{\"ranges\":[{\"action\":\"filter\",\"a\":-1,"
		   "\"b\":2}]}", "filter.ranges[0].a: expected a non-negative");
	bad_filter("{\"ranges\":[{\"action\":\"filter\",\"a\":1}]}",
		   "filter.ranges[0].b: missing");
	bad_filter("{\"ranges\":[{\"action\":\"filter\",\"a\":1,\"b\":2}],"
		   "\"text\":7}", "filter.text: expected a string");
}

int main(void)
{
	(void)snprintf(tmpd, sizeof(tmpd), "%s/ptd-fg-XXXXXX",
		       getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR")
							    : "/tmp");
	if (!mkdtemp(tmpd))
		SKIP_ALL("mkdtemp: %s", strerror(errno));
	RUN(test_api);
	RUN(test_jump);
	RUN(test_call_ret);
	RUN(test_ret_inside);
	RUN(test_cond);
	RUN(test_indirect);
	RUN(test_sequential);
	RUN(test_syscall);
	RUN(test_psb_disabled);
	RUN(test_two_ranges);
	RUN(test_tracestop);
	RUN(test_capture_roundtrip);
	RUN(test_capture_bad);
	(void)ptd_rm_rf(tmpd);
	return check_done();
}
