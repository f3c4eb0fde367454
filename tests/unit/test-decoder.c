/* SPDX-License-Identifier: MIT */
/*
 * The decoder on traces made with libipt's encoder over small pieces of
 * machine code: both paths give identical records, event flags land on the
 * right instructions, errors become records and decoding resumes, the
 * callback can stop it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#include <intel-pt.h>

#include "check.h"
#include "mapcode.h"
#include "ptenc.h"
#include "reccmp.h"
#include "skl014.h"
#include "aspace/image.h"
#include "aspace/iscache.h"
#include "aspace/timeline.h"
#include "common/diag.h"
#include "decode/decoder.h"

#define BASE 0x400000ull
#define TAIL 0x410000ull	/* two nops, then nothing mapped */
#define LATE 0x420000ull	/* mapped only by a timeline event */
#define NOWHERE 0x700000ull
#define FILT 0x430000ull	/* filt[]: a filtered program's branches out */
#define LOOP 0x440000ull	/* nop; jmp LOOP: needs no trace, ever */
#define UNEXP 0x450000ull	/* the same with a byte only libipt decodes */
#define BCACHE 0x460000ull	/* test_block_cache's code */

static uint8_t code[0x50];

/* Fill code[]: see the listing in the comments. */
static void make_code(void)
{
	static const struct {
		unsigned off;
		uint8_t b[5];
		unsigned n;
	} ins[] = {
		{0x00, {0x48, 0x89, 0xe5}, 3},		/* mov %rsp,%rbp */
		{0x03, {0xe8, 0x08, 0, 0, 0}, 5},	/* call 0x10 */
		{0x09, {0x74, 0xf5}, 2},		/* je 0x00 */
		{0x0b, {0xff, 0xe0}, 2},		/* jmp *%rax */
		{0x11, {0x31, 0xc0}, 2},		/* xor %eax,%eax */
		{0x13, {0xeb, 0x01}, 2},		/* jmp 0x16 */
		{0x16, {0xc3}, 1},			/* ret */
		{0x22, {0x0f, 0x05}, 2},		/* syscall */
		{0x27, {0xff, 0xe0}, 2},		/* jmp *%rax */
		{0x33, {0xc3}, 1},			/* ret */
		{0x42, {0xff, 0xe0}, 2},		/* jmp *%rax */
	};

	memset(code, 0x90, sizeof(code));	/* nop everywhere else */
	for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
		memcpy(code + ins[i].off, ins[i].b, ins[i].n);
}

/* Code traced with an IP filter on it alone; each branch leaves it. */
static const uint8_t filt[] = {
	0x48, 0x89, 0xe5,			/* 00 mov %rsp,%rbp */
	0xff, 0x15, 0xf7, 0x0f, 0x00, 0x00,	/* 03 call *0xff7(%rip): GOT */
	0x90,					/* 09 nop */
	0xff, 0xe0,				/* 0a jmp *%rax */
	0x90,					/* 0c nop */
	0xc3,					/* 0d ret */
	0x90,					/* 0e nop */
};

static char dir[] = "/tmp/ptd-test-decoder-XXXXXX";
static struct ptd_iscache *ic;
static struct ptd_image *img;

static void path_of(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", dir, name);
}

static int map_bytes(const char *name, const void *data, size_t n,
		     uint64_t vaddr)
{
	return mapcode(img, dir, name, data, n, vaddr);
}

static void setup(void)
{
	static const uint8_t tail[] = {0x90, 0x90};

	make_code();
	if (!mkdtemp(dir))
		SKIP_ALL("cannot create a temporary directory: %s",
			 strerror(errno));
	(void)ptd_iscache_new(&ic);
	(void)ptd_image_new(ic, "test", &img);
	if (!img)
		SKIP_ALL("cannot allocate an image");
	if (map_bytes("code.bin", code, sizeof(code), BASE) <= 0 ||
	    map_bytes("tail.bin", tail, sizeof(tail), TAIL) <= 0 ||
	    map_bytes("filt.bin", filt, sizeof(filt), FILT) <= 0)
		SKIP_ALL("cannot map the test code");
}

static void tsx(struct trace *t, int intx, int abrt)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_tsx;
	p.payload.mode.bits.tsx.intx = (uint32_t)intx & 1;
	p.payload.mode.bits.tsx.abrt = (uint32_t)abrt & 1;
	pkt(t, &p);
}

/*
 * The main trace: two loop iterations through a call, a direct jump and a
 * compressed return, an indirect jump, a syscall that disables tracing, and
 * a resume after it.
 */
static const uint64_t main_ips[] = {
	0x400000, 0x400003, 0x400010, 0x400011, 0x400013, 0x400016,
	0x400008, 0x400009, 0x400000, 0x400003, 0x400010, 0x400011,
	0x400013, 0x400016, 0x400008, 0x400009, 0x40000b, 0x400020,
	0x400021, 0x400022, 0x400024, 0x400025, 0x400026, 0x400027,
};

static void main_trace(struct trace *t)
{
	psb(t);
	ippkt(t, ppt_tip_pge, BASE);
	tnt(t, "1110");		/* ret, je taken, ret, je not taken */
	ippkt(t, ppt_tip, 0x400020);	/* jmp *%rax */
	ippkt(t, ppt_tip_pgd, 0);	/* syscall */
	ippkt(t, ppt_tip_pge, 0x400024);
	/* A near branch leaving the filter: TIP.PGD with the target (the
	 * suppressed ip real CPUs send is test_filter_exit). */
	ippkt(t, ppt_tip_pgd, NOWHERE);	/* jmp *%rax */
}

/* --- Decoding. --- */

/* Options for @path and @want, and the arguments of thread 100/101 of
 * @pt with the test image. */
static void opts_args(enum ptd_decode_path path, unsigned want,
		      const uint8_t *pt, size_t len,
		      struct ptd_decode_opts *o, struct ptd_decode_thread_args *a)
{
	memset(o, 0, sizeof(*o));
	o->path = path;
	o->want = want;
	o->cpu.vendor = pcv_unknown;
	memset(a, 0, sizeof(*a));
	a->pt = pt;
	a->len = len;
	a->pid = 100;
	a->tid = 101;
	a->img = img;
}

static int decode(enum ptd_decode_path path, unsigned want,
		  const uint8_t *pt, size_t len, struct ptd_tl_cursor *cursor,
		  struct reclist *out, struct ptd_decode_stats *st)
{
	struct ptd_decode_opts o;
	struct ptd_decode_thread_args a;
	struct ptd_decode_stats dummy;

	opts_args(path, want, pt, len, &o, &a);
	a.cursor = cursor;
	return ptd_decode_thread(&o, &a, reclist_add, out, st ? st : &dummy);
}

#define WANT_IE (PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT))

static void dump(const struct reclist *l);

/* Decode on both paths; check both succeed and agree.  *ret_insn keeps
 * the insn path's records (free with reclist_free). */
static bool decode_both(const uint8_t *pt, size_t len,
			struct reclist *ret_insn)
{
	struct reclist li = {0}, lb = {0};
	struct ptd_decode_stats si, sb;
	int ri, rb;
	bool same;

	ri = decode(PTD_PATH_INSN, WANT_IE, pt, len, NULL, &li, &si);
	rb = decode(PTD_PATH_BLOCK, WANT_IE, pt, len, NULL, &lb, &sb);
	CHECK_EQ_INT(ri, 0);
	CHECK_EQ_INT(rb, 0);
	same = reccmp_lists(stderr, "insn:  ", &li, "block: ", &lb);
	if (getenv("PTD_TEST_DUMP")) {
		fprintf(stderr, "insn path:\n");
		dump(&li);
		fprintf(stderr, "block path:\n");
		dump(&lb);
	}
	CHECK(same);
	CHECK_EQ_U64(sb.insns, si.insns);
	CHECK_EQ_U64(sb.events, si.events);
	CHECK_EQ_U64(sb.errors, si.errors);
	CHECK_EQ_U64(sb.skipped, si.skipped);
	CHECK_EQ_U64(si.bytes, len);
	reclist_free(&lb);
	*ret_insn = li;
	return same && ri == 0 && rb == 0;
}

static void dump(const struct reclist *l)
{
	for (size_t i = 0; i < l->n; i++)
		reccmp_print(stderr, "  ", &l->r[i]);
}

/* The insn records' ips in order; returns how many. */
static size_t insn_ips(const struct reclist *l, uint64_t *ips, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < l->n; i++) {
		if (l->r[i].type != PTD_REC_INSN)
			continue;
		if (n < cap)
			ips[n] = l->r[i].u.insn.ip;
		n++;
	}
	return n;
}

/* The @k-th insn record (0-based), or NULL. */
static const struct ptd_rec_insn *nth_insn(const struct reclist *l, size_t k)
{
	for (size_t i = 0; i < l->n; i++) {
		if (l->r[i].type == PTD_REC_INSN && k-- == 0)
			return &l->r[i].u.insn;
	}
	return NULL;
}

/* The flags of the last insn record at @ip. */
static uint32_t flags_at(const struct reclist *l, uint64_t ip)
{
	uint32_t f = UINT32_MAX;

	for (size_t i = 0; i < l->n; i++) {
		if (l->r[i].type == PTD_REC_INSN && l->r[i].u.insn.ip == ip)
			f = l->r[i].u.insn.flags;
	}
	return f;
}

static size_t count_type(const struct reclist *l, enum ptd_rec_type t)
{
	size_t n = 0;

	for (size_t i = 0; i < l->n; i++)
		n += l->r[i].type == t;
	return n;
}

static void check_ips(const struct reclist *l, const uint64_t *want,
		      size_t n)
{
	uint64_t got[256];
	size_t m = insn_ips(l, got, 256);

	CHECK_EQ_U64(m, n);
	for (size_t i = 0; i < n && i < m; i++) {
		if (got[i] != want[i]) {
			CHECK_FAIL_("insn %zu: expected ip 0x%" PRIx64
				    ", got 0x%" PRIx64,
				    i, want[i], got[i]);
			dump(l);
			return;
		}
	}
}

/* --- Tests. --- */

static void test_main(void)
{
	struct trace t;
	struct reclist l;
	const struct ptd_rec_insn *in;

	tr_begin(&t);
	main_trace(&t);
	tr_end(&t);
	REQUIRE(decode_both(t.buf, t.len, &l));
	check_ips(&l, main_ips, sizeof(main_ips) / sizeof(main_ips[0]));

	/* Every field of one record. */
	in = nth_insn(&l, 1);
	REQUIRE(in);
	CHECK_EQ_U64(in->ip, 0x400003);
	CHECK_EQ_INT(in->size, 5);
	CHECK(memcmp(in->raw, code + 3, 5) == 0);
	CHECK_EQ_INT(in->iclass, ptic_call);
	CHECK_EQ_INT(in->mode, ptem_64bit);
	CHECK(in->isid > 0);
	CHECK_EQ_U64(in->modoff, 3);
	CHECK(in->module && strstr(in->module, "code.bin"));
	CHECK_EQ_U64(in->flags, 0);
	CHECK_EQ_INT(l.r[0].pid, 100);
	CHECK_EQ_INT(l.r[0].tid, 101);

	/* Flags: enabled on the first, disabled on the syscall and the
	 * last jump, enabled again after the syscall. */
	CHECK_EQ_U64(flags_at(&l, 0x400000) & PTD_F_ENABLED, 0); /* 2nd */
	CHECK_EQ_U64(nth_insn(&l, 0)->flags & ~PTD_F_RESUMED, PTD_F_ENABLED);
	CHECK_EQ_U64(flags_at(&l, 0x400022), PTD_F_DISABLED);
	CHECK_EQ_U64(flags_at(&l, 0x400024) & ~PTD_F_RESUMED, PTD_F_ENABLED);
	CHECK_EQ_U64(flags_at(&l, 0x400027), PTD_F_DISABLED);
	CHECK_EQ_U64(flags_at(&l, 0x400021), 0);

	/* Event records sit between the right instructions. */
	for (size_t i = 0; i + 1 < l.n; i++) {
		const struct ptd_record *r = &l.r[i];

		if (r->type != PTD_REC_EVENT)
			continue;
		if (r->u.event.ev.type == ptev_disabled && i > 0)
			CHECK(l.r[i - 1].type == PTD_REC_INSN &&
			      (l.r[i - 1].u.insn.flags & PTD_F_DISABLED));
		if (r->u.event.ev.type == ptev_enabled) {
			CHECK(l.r[i + 1].type == PTD_REC_INSN &&
			      (l.r[i + 1].u.insn.flags & PTD_F_ENABLED));
			/* resumed on the insn iff on the event */
			CHECK_EQ_INT(!!(l.r[i + 1].u.insn.flags &
					PTD_F_RESUMED),
				     r->u.event.ev.variant.enabled.resumed);
		}
	}
	CHECK_EQ_U64(count_type(&l, PTD_REC_ERROR), 0);
	reclist_free(&l);
}

/* FUP+TIP: an asynchronous branch; FUP+TIP.PGD: an asynchronous disable. */
static void test_async(void)
{
	static const uint64_t want[] = {0x400024, 0x400025, 0x400030,
					0x400031};
	struct trace t;
	struct reclist l;

	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, 0x400024);
	ippkt(&t, ppt_fup, 0x400026);
	ippkt(&t, ppt_tip, 0x400030);
	ippkt(&t, ppt_fup, 0x400032);
	ippkt(&t, ppt_tip_pgd, 0);
	tr_end(&t);
	REQUIRE(decode_both(t.buf, t.len, &l));
	check_ips(&l, want, 4);
	CHECK_EQ_U64(flags_at(&l, 0x400025), PTD_F_INTERRUPTED);
	CHECK_EQ_U64(flags_at(&l, 0x400030), 0);
	CHECK_EQ_U64(flags_at(&l, 0x400031),
		     PTD_F_DISABLED | PTD_F_INTERRUPTED);
	reclist_free(&l);
}

/*
 * An IP filter on one program: an indirect call through the GOT, an
 * indirect jump and a return leave it, and the CPU sends TIP.PGD with the
 * IP suppressed and no FUP (the target is not traced).  The disable binds
 * to the branch on both paths (libipt 2.0.5's pt_insn_next alone fails
 * there, see disable_at_branch in decoder.c); tracing comes back after the
 * call (a resume, as the block decoder says) and after the jump (not one:
 * only a call says where tracing resumes).
 */
static void test_filter_exit(void)
{
	static const uint64_t want[] = {FILT, FILT + 3, FILT + 9, FILT + 0xa,
					FILT + 0xc, FILT + 0xd};
	struct trace t;
	struct reclist l;
	size_t ndis = 0, nres = 0;

	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, FILT);
	ippkt(&t, ppt_tip_pgd, 0);		/* call *GOT */
	ippkt(&t, ppt_tip_pge, FILT + 9);	/* the callee returns */
	ippkt(&t, ppt_tip_pgd, 0);		/* jmp *%rax */
	ippkt(&t, ppt_tip_pge, FILT + 0xc);
	ippkt(&t, ppt_tip_pgd, 0);		/* ret */
	tr_end(&t);
	REQUIRE(decode_both(t.buf, t.len, &l));
	check_ips(&l, want, sizeof(want) / sizeof(want[0]));
	CHECK_EQ_U64(count_type(&l, PTD_REC_ERROR), 0);
	CHECK_EQ_U64(flags_at(&l, FILT), PTD_F_ENABLED);
	CHECK_EQ_U64(flags_at(&l, FILT + 3), PTD_F_DISABLED);
	CHECK_EQ_U64(flags_at(&l, FILT + 9), PTD_F_ENABLED | PTD_F_RESUMED);
	CHECK_EQ_U64(flags_at(&l, FILT + 0xa), PTD_F_DISABLED);
	CHECK_EQ_U64(flags_at(&l, FILT + 0xc), PTD_F_ENABLED);
	CHECK_EQ_U64(flags_at(&l, FILT + 0xd), PTD_F_DISABLED);
	for (size_t i = 0; i < l.n; i++) {
		const struct pt_event *ev = &l.r[i].u.event.ev;

		if (l.r[i].type != PTD_REC_EVENT)
			continue;
		if (ev->type == ptev_disabled) {
			ndis++;
			CHECK(ev->ip_suppressed);
			CHECK(i > 0 && l.r[i - 1].type == PTD_REC_INSN);
		}
		if (ev->type == ptev_enabled)
			nres += ev->variant.enabled.resumed;
	}
	CHECK_EQ_U64(ndis, 3);
	CHECK_EQ_U64(nres, 1);
	reclist_free(&l);

	/* Each branch alone as the first thing after an enable. */
	for (unsigned k = 0; k < 3; k++) {
		static const uint64_t at[] = {FILT + 3, FILT + 0xa, FILT + 0xd};

		tr_begin(&t);
		psb(&t);
		ippkt(&t, ppt_tip_pge, at[k]);
		ippkt(&t, ppt_tip_pgd, 0);
		tr_end(&t);
		REQUIRE(decode_both(t.buf, t.len, &l));
		check_ips(&l, &at[k], 1);
		CHECK_EQ_U64(flags_at(&l, at[k]),
			     PTD_F_ENABLED | PTD_F_DISABLED);
		CHECK_EQ_U64(count_type(&l, PTD_REC_ERROR), 0);
		reclist_free(&l);
	}
}

/*
 * libipt's SKL014 cases (skl014.h): decoded with the CPU of each "cpu"
 * line and the filter of the "opt:ptxed" line, both paths give ptxed's
 * instructions, then the disable, and no error.  Without the filter the
 * IP-less TIP.PGD after a direct branch cannot be placed: the decode runs
 * on and fails, as ptxed's would.
 */
static int decode_cfg(enum ptd_decode_path path, const uint8_t *pt,
		      size_t len, struct ptd_image *im, uint8_t model,
		      bool filter, struct reclist *out)
{
	struct ptd_decode_opts o;
	struct ptd_decode_thread_args a;

	memset(&o, 0, sizeof(o));
	o.path = path;
	o.want = WANT_IE | PTD_REC_BIT(PTD_REC_ERROR);
	o.cpu.vendor = pcv_intel;
	o.cpu.family = 6;
	o.cpu.model = model;
	if (filter)
		o.addr_filter = skl014_filter();
	memset(&a, 0, sizeof(a));
	a.pt = pt;
	a.len = len;
	a.pid = 100;
	a.tid = 101;
	a.img = im;
	return ptd_decode_thread(&o, &a, reclist_add, out, NULL);
}

static void test_skl014(void)
{
	struct skl014_case c;

	for (unsigned i = 0; skl014_get(i, &c); i++) {
		struct ptd_image *im;
		(void)ptd_image_new(ic, "skl014", &im);
		char name[64];
		struct trace t;

		REQUIRE(im);
		(void)snprintf(name, sizeof(name), "%s.bin", c.ptt);
		REQUIRE(mapcode(im, dir, name, c.code, c.code_len, c.org) > 0);
		tr_begin(&t);
		skl014_trace(&c, &t);
		tr_end(&t);
		for (size_t m = 0; m < SKL014_NMODELS; m++) {
			struct reclist li = {0}, lb = {0};
			const struct ptd_record *last;

			CHECK_EQ_INT(decode_cfg(PTD_PATH_INSN, t.buf, t.len, im,
						skl014_models[m], c.filter,
						&li), 0);
			CHECK_EQ_INT(decode_cfg(PTD_PATH_BLOCK, t.buf, t.len,
						im, skl014_models[m], c.filter,
						&lb), 0);
			if (!reccmp_lists(stderr, "insn:  ", &li, "block: ",
					  &lb))
				CHECK_FAIL_("%s, cpu 6/%u: the paths differ",
					    c.ptt, skl014_models[m]);
			check_ips(&li, c.exp, c.nexp);
			CHECK_EQ_U64(count_type(&li, PTD_REC_ERROR), 0);
			last = li.n ? &li.r[li.n - 1] : NULL;
			CHECK(last && last->type == PTD_REC_EVENT &&
			      last->u.event.ev.type == ptev_disabled &&
			      last->u.event.ev.ip_suppressed);
			CHECK_EQ_U64(flags_at(&li, c.exp[c.nexp - 1]) &
					     PTD_F_DISABLED,
				     PTD_F_DISABLED);
			reclist_free(&li);
			reclist_free(&lb);
			if (!c.filter)
				continue;
			/* The filter is what places the disable. */
			for (int path = 0; path < 2; path++) {
				struct reclist l = {0};

				CHECK_EQ_INT(decode_cfg(path ? PTD_PATH_BLOCK
							     : PTD_PATH_INSN,
							t.buf, t.len, im,
							skl014_models[m], false,
							&l), 0);
				CHECK(count_type(&l, PTD_REC_ERROR) > 0);
				reclist_free(&l);
			}
		}
		ptd_image_free(im);
		{
			char file[300];

			path_of(file, sizeof(file), name);
			(void)unlink(file);
		}
	}
}

/* OVF+FUP: tracing resumes elsewhere; the first instruction there is
 * resynced. */
static void test_overflow(void)
{
	/* The overflow comes right after the je: nothing more of the
	 * first stretch is known to have executed. */
	static const uint64_t want[] = {0x400009, 0x400040, 0x400041,
					0x400042};
	struct trace t;
	struct reclist l;
	bool seen = false;

	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, 0x400009);
	tnt(&t, "0");
	simple(&t, ppt_ovf);
	ippkt(&t, ppt_fup, 0x400040);
	ippkt(&t, ppt_tip_pgd, NOWHERE);
	tr_end(&t);
	REQUIRE(decode_both(t.buf, t.len, &l));
	check_ips(&l, want, 4);
	CHECK_EQ_U64(flags_at(&l, 0x400040), PTD_F_RESYNCED);
	CHECK_EQ_U64(flags_at(&l, 0x400009), PTD_F_ENABLED);
	CHECK_EQ_U64(flags_at(&l, 0x400042), PTD_F_DISABLED);
	for (size_t i = 0; i < l.n; i++)
		seen |= l.r[i].type == PTD_REC_EVENT &&
			l.r[i].u.event.ev.type == ptev_overflow;
	CHECK(seen);
	reclist_free(&l);
}

/* TraceStop after TIP.PGD binds to the same instruction. */
static void test_stop(void)
{
	struct trace t;
	struct reclist l;
	size_t stop_at = 0, insn_at = 0;

	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, 0x400020);
	ippkt(&t, ppt_tip_pgd, 0);	/* syscall */
	simple(&t, ppt_stop);
	tr_end(&t);
	REQUIRE(decode_both(t.buf, t.len, &l));
	CHECK_EQ_U64(flags_at(&l, 0x400022),
		     PTD_F_DISABLED | PTD_F_STOPPED);
	/* The records stay in trace order: insn, disabled, stop. */
	for (size_t i = 0; i < l.n; i++) {
		if (l.r[i].type == PTD_REC_INSN &&
		    l.r[i].u.insn.ip == 0x400022)
			insn_at = i;
		if (l.r[i].type == PTD_REC_EVENT &&
		    l.r[i].u.event.ev.type == ptev_stop)
			stop_at = i;
	}
	CHECK(stop_at > insn_at + 1);
	reclist_free(&l);
}

/* A transaction: speculative instructions, committed on the last. */
static void test_tsx(void)
{
	struct trace t;
	struct reclist l;

	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, 0x400020);
	tsx(&t, 1, 0);
	ippkt(&t, ppt_fup, 0x400021);
	tsx(&t, 0, 0);
	ippkt(&t, ppt_fup, 0x400022);
	ippkt(&t, ppt_tip_pgd, 0);	/* syscall */
	tr_end(&t);
	REQUIRE(decode_both(t.buf, t.len, &l));
	CHECK_EQ_U64(flags_at(&l, 0x400020), PTD_F_ENABLED);
	CHECK_EQ_U64(flags_at(&l, 0x400021),
		     PTD_F_SPECULATIVE | PTD_F_COMMITTED);
	CHECK_EQ_U64(flags_at(&l, 0x400022), PTD_F_DISABLED);
	reclist_free(&l);
}

/* A transaction aborted: the last speculative instruction is aborted. */
static void test_tsx_abort(void)
{
	struct trace t;
	struct reclist l;

	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, 0x400020);
	tsx(&t, 1, 0);
	ippkt(&t, ppt_fup, 0x400021);
	tsx(&t, 0, 1);
	ippkt(&t, ppt_fup, 0x400022);
	ippkt(&t, ppt_tip, 0x400040);
	ippkt(&t, ppt_tip_pgd, NOWHERE);	/* jmp *%rax at 0x400042 */
	tr_end(&t);
	REQUIRE(decode_both(t.buf, t.len, &l));
	/* The abort is also an asynchronous branch (FUP+TIP). */
	CHECK_EQ_U64(flags_at(&l, 0x400021),
		     PTD_F_SPECULATIVE | PTD_F_ABORTED | PTD_F_INTERRUPTED);
	CHECK_EQ_U64(flags_at(&l, 0x400040), 0);
	reclist_free(&l);
}

/* Two segments: the first with a corrupted byte, the second clean. */
static void two_segments(struct trace *t, size_t *ret_second)
{
	tr_begin(t);
	psb(t);
	ippkt(t, ppt_tip_pge, BASE);
	tnt(t, "1110");
	ippkt(t, ppt_tip, 0x400020);
	ippkt(t, ppt_tip_pgd, 0);
	*ret_second = t->len;
	psb(t);
	ippkt(t, ppt_tip_pge, 0x400030);
	ippkt(t, ppt_fup, 0x400032);
	ippkt(t, ppt_tip_pgd, NOWHERE);
	tr_end(t);
}

static void test_corrupt(void)
{
	struct trace t;
	struct reclist l;
	size_t second, nerr = 0;
	const struct ptd_record *err = NULL;
	uint64_t tnt_at = 0;

	two_segments(&t, &second);
	/* Find the TNT byte: the first byte after PSB+ and TIP.PGE. */
	{
		struct trace h;

		tr_begin(&h);
		psb(&h);
		ippkt(&h, ppt_tip_pge, BASE);
		tnt_at = h.len;
		tr_end(&h);
	}
	/* 0xd9 is no packet opcode: libipt stops with bad_opc. */
	t.buf[tnt_at] = 0xd9;
	REQUIRE(decode_both(t.buf, t.len, &l));
	for (size_t i = 0; i < l.n; i++) {
		if (l.r[i].type == PTD_REC_ERROR) {
			nerr++;
			if (!err)
				err = &l.r[i];
		}
	}
	CHECK_EQ_U64(nerr, 1);
	REQUIRE(err);
	CHECK(!err->u.error.ptd_code);
	CHECK(err->u.error.code < 0);
	/* Met while reading ahead for an event or an instruction. */
	CHECK(strcmp(err->u.error.context, "decode") == 0 ||
	      strcmp(err->u.error.context, "event") == 0);
	CHECK(err->u.error.offset >= tnt_at);
	CHECK(err->u.error.offset < second);
	CHECK_EQ_U64(err->u.error.offset + err->u.error.skipped, second);
	/* Decoding resumed at the second PSB. */
	CHECK_EQ_U64(flags_at(&l, 0x400030), PTD_F_ENABLED);
	CHECK_EQ_U64(flags_at(&l, 0x400031),
		     PTD_F_DISABLED | PTD_F_INTERRUPTED);
	CHECK(err < &l.r[l.n - 1]);
	reclist_free(&l);
}

/*
 * One corrupted trace: both paths end cleanly; where neither meets an error
 * they agree record for record.  (On garbage libipt's two decoders may
 * legitimately fail at different places.)
 */
static bool sweep_one(const uint8_t *pt, size_t len, bool compare)
{
	struct reclist li = {0}, lb = {0};
	struct ptd_decode_stats si, sb;
	bool ok = true;

	ok &= decode(PTD_PATH_INSN, WANT_IE, pt, len, NULL, &li, &si) == 0;
	ok &= decode(PTD_PATH_BLOCK, WANT_IE, pt, len, NULL, &lb, &sb) == 0;
	if (ok && compare && !si.errors && !sb.errors)
		ok = reccmp_lists(stderr, "insn:  ", &li, "block: ", &lb);
	/* Every error record says what and where. */
	for (size_t i = 0; i < li.n; i++)
		if (li.r[i].type == PTD_REC_ERROR)
			ok &= li.r[i].u.error.code < 0 &&
			      li.r[i].u.error.context != NULL &&
			      li.r[i].u.error.offset <= len;
	reclist_free(&li);
	reclist_free(&lb);
	return ok;
}

/* Any byte corrupted any way: decoding ends cleanly. */
static void test_corrupt_sweep(void)
{
	static const uint8_t vals[] = {0x00, 0xff, 0x02, 0xd9, 0x4d, 0x99};
	struct trace t;
	size_t second;

	two_segments(&t, &second);
	for (size_t pos = 0; pos < t.len; pos++) {
		/* Not the MODE.Exec payloads: libipt's block cache is kept
		 * per section and reused across modes, so the same code
		 * decoded as 16-bit and 64-bit makes pt_blk_next and
		 * pt_insn_next disagree -- a libipt limit no real program
		 * meets. */
		if (pos == 17 || pos == second + 17)
			continue;
		for (size_t v = 0; v < sizeof(vals); v++) {
			uint8_t saved = t.buf[pos];
			bool ok;

			t.buf[pos] = vals[v];
			ok = sweep_one(t.buf, t.len, true);
			t.buf[pos] = saved;
			if (!ok) {
				CHECK_FAIL_("byte %zu = 0x%02x", pos, vals[v]);
				return;
			}
		}
	}
}

/* A trace cut anywhere ends cleanly, on both paths alike. */
static void test_truncated(void)
{
	struct trace t;

	tr_begin(&t);
	main_trace(&t);
	tr_end(&t);
	for (size_t len = 0; len <= t.len; len++) {
		struct reclist l;
		bool ok = decode_both(t.buf, len, &l);

		if (len == 0)
			CHECK_EQ_U64(l.n, 0);
		reclist_free(&l);
		if (!ok) {
			CHECK_FAIL_("cut at %zu of %zu bytes", len, t.len);
			return;
		}
	}
}

static const struct ptd_record *first_error(const struct reclist *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->r[i].type == PTD_REC_ERROR)
			return &l->r[i];
	return NULL;
}

/* Code that is not in the image: -pte_nomap with its ip, then the next
 * PSB. */
static void test_nomap(void)
{
	struct trace t;
	struct reclist l;
	const struct ptd_record *e;

	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, NOWHERE);
	tnt(&t, "1");	/* keeps libipt's read-ahead before the PSB */
	ippkt(&t, ppt_tip_pgd, BASE);
	psb(&t);
	ippkt(&t, ppt_tip_pge, 0x400020);
	ippkt(&t, ppt_tip_pgd, 0);
	tr_end(&t);
	REQUIRE(decode_both(t.buf, t.len, &l));
	e = first_error(&l);
	REQUIRE(e);
	CHECK_EQ_INT(e->u.error.code, -pte_nomap);
	CHECK(!e->u.error.ptd_code);
	CHECK(e->u.error.ip_valid);
	CHECK_EQ_U64(e->u.error.ip, NOWHERE);
	CHECK_EQ_U64(flags_at(&l, 0x400022), PTD_F_DISABLED);
	reclist_free(&l);

	/* Falling off the end of mapped code, mid-block. */
	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, TAIL);
	tnt(&t, "1");	/* keeps libipt's read-ahead before the PSB */
	ippkt(&t, ppt_tip_pgd, BASE);
	psb(&t);
	ippkt(&t, ppt_tip_pge, 0x400020);
	ippkt(&t, ppt_tip_pgd, 0);
	tr_end(&t);
	REQUIRE(decode_both(t.buf, t.len, &l));
	e = first_error(&l);
	REQUIRE(e);
	CHECK_EQ_INT(e->u.error.code, -pte_nomap);
	CHECK_EQ_U64(e->u.error.ip, TAIL + 2);
	CHECK_EQ_U64(flags_at(&l, TAIL + 1), 0);
	CHECK_EQ_U64(flags_at(&l, 0x400022), PTD_F_DISABLED);
	reclist_free(&l);
}

/* The callback's non-zero value stops decoding and is returned. */
static void test_callback_stop(void)
{
	struct trace t;

	tr_begin(&t);
	main_trace(&t);
	tr_end(&t);
	for (int p = PTD_PATH_INSN; p <= PTD_PATH_BLOCK; p++) {
		for (size_t k = 1; k <= 5; k++) {
			struct reclist l = {.stop_after = k, .stop_rc = 42};
			int r = decode((enum ptd_decode_path)p, WANT_IE, t.buf,
				       t.len, NULL, &l, NULL);

			CHECK_EQ_INT(r, 42);
			CHECK_EQ_U64(l.n, k);
			reclist_free(&l);
		}
		{
			struct reclist l = {.stop_after = 3, .stop_rc = -7};

			CHECK_EQ_INT(decode((enum ptd_decode_path)p, WANT_IE,
					    t.buf, t.len, NULL, &l, NULL),
				     -7);
			reclist_free(&l);
		}
	}
}

/* Block records on the block path: they cover every instruction. */
static void test_blocks(void)
{
	struct trace t;
	struct reclist l = {0};
	struct ptd_decode_stats st;
	uint64_t ninsn = 0;
	unsigned want = WANT_IE | PTD_REC_BIT(PTD_REC_BLOCK);
	size_t since = 0;

	tr_begin(&t);
	main_trace(&t);
	tr_end(&t);
	CHECK_EQ_INT(decode(PTD_PATH_BLOCK, want, t.buf, t.len, NULL, &l,
			    &st),
		     0);
	for (size_t i = 0; i < l.n; i++) {
		const struct ptd_record *r = &l.r[i];

		if (r->type == PTD_REC_INSN)
			since++;
		if (r->type != PTD_REC_BLOCK)
			continue;
		/* A block record follows its own instructions. */
		CHECK_EQ_U64(since, r->u.block.ninsn);
		REQUIRE(i >= 1 && l.r[i - 1].type == PTD_REC_INSN);
		CHECK_EQ_U64(l.r[i - 1].u.insn.ip, r->u.block.end_ip);
		CHECK_EQ_U64(l.r[i - since].u.insn.ip, r->u.block.ip);
		CHECK_EQ_INT(l.r[i - 1].u.insn.iclass, r->u.block.iclass);
		CHECK_EQ_U64(r->u.block.flags & PTD_F_DISABLED,
			     l.r[i - 1].u.insn.flags & PTD_F_DISABLED);
		CHECK_EQ_U64(r->u.block.flags & PTD_F_ENABLED,
			     l.r[i - since].u.insn.flags & PTD_F_ENABLED);
		CHECK(r->u.block.module &&
		      strstr(r->u.block.module, "code.bin"));
		ninsn += r->u.block.ninsn;
		since = 0;
	}
	CHECK_EQ_U64(ninsn, sizeof(main_ips) / sizeof(main_ips[0]));
	CHECK_EQ_U64(st.insns, ninsn);
	CHECK_EQ_U64(st.blocks, count_type(&l, PTD_REC_BLOCK));
	reclist_free(&l);

	/* Blocks only: no insn records, same counts. */
	CHECK_EQ_INT(decode(PTD_PATH_BLOCK, PTD_REC_BIT(PTD_REC_BLOCK), t.buf,
			    t.len, NULL, &l, &st),
		     0);
	CHECK_EQ_U64(count_type(&l, PTD_REC_INSN), 0);
	CHECK_EQ_U64(count_type(&l, PTD_REC_EVENT), 0);
	CHECK_EQ_U64(st.insns, ninsn);
	reclist_free(&l);
}

static void test_args(void)
{
	struct ptd_decode_opts o;
	struct ptd_decode_thread_args a;
	struct reclist l = {0};
	struct ptd_decode_stats st;
	uint8_t b = 0;

	memset(&o, 0, sizeof(o));
	memset(&a, 0, sizeof(a));
	o.path = PTD_PATH_INSN;
	o.want = WANT_IE;
	a.pt = &b;
	a.len = 1;
	a.img = img;
	CHECK_EQ_INT(ptd_decode_thread(NULL, &a, reclist_add, &l, &st),
		     -EINVAL);
	CHECK_EQ_INT(ptd_decode_thread(&o, NULL, reclist_add, &l, &st),
		     -EINVAL);
	CHECK_EQ_INT(ptd_decode_thread(&o, &a, NULL, &l, &st), -EINVAL);
	a.img = NULL;
	CHECK_EQ_INT(ptd_decode_thread(&o, &a, reclist_add, &l, &st),
		     -EINVAL);
	a.img = img;
	a.pt = NULL;
	CHECK_EQ_INT(ptd_decode_thread(&o, &a, reclist_add, &l, &st),
		     -EINVAL);
	a.pt = &b;
	/* Block records need the block path. */
	o.want = PTD_REC_BIT(PTD_REC_BLOCK);
	CHECK_EQ_INT(ptd_decode_thread(&o, &a, reclist_add, &l, &st),
		     -EINVAL);
	o.want = 1u << PTD_REC_NTYPES;
	CHECK_EQ_INT(ptd_decode_thread(&o, &a, reclist_add, &l, &st),
		     -EINVAL);
	o.want = WANT_IE;
	o.path = (enum ptd_decode_path)7;
	CHECK_EQ_INT(ptd_decode_thread(&o, &a, reclist_add, &l, &st),
		     -EINVAL);
	/* No PSB at all: nothing, no error. */
	o.path = PTD_PATH_BLOCK;
	CHECK_EQ_INT(ptd_decode_thread(&o, &a, reclist_add, &l, &st), 0);
	CHECK_EQ_U64(l.n, 0);
	CHECK_EQ_U64(st.bytes, 1);
	/* Stats may be NULL. */
	CHECK_EQ_INT(ptd_decode_thread(&o, &a, reclist_add, &l, NULL), 0);
	reclist_free(&l);
}

/* A file of a test image: @data at @vaddr. */
struct tl_map {
	const char *name;
	const uint8_t *data;
	size_t n;
	uint64_t vaddr;
};

/* Decode @t on @path, with its records into @l, against a fresh image of
 * the @nmaps files at @maps and a timeline of the @nev events at @evs,
 * each at offset @at of thread 101; the image and the timeline are gone
 * after (the records hold neither).  Returns whether it decoded to the
 * end. */
static bool decode_tl(enum ptd_decode_path path, const struct trace *t,
		      const struct tl_map *maps, size_t nmaps,
		      struct ptd_tl_event *evs, size_t nev, size_t at,
		      struct reclist *l, struct ptd_decode_stats *st)
{
	struct ptd_image *saved = img;
	struct ptd_timeline tl;
	struct ptd_tl_pos pos = {.tid = 101, .pos = at};
	struct ptd_tl_cursor cur;
	struct ptd_diag diag;
	int rc;

	(void)ptd_image_new(ic, "tl", &img);
	REQUIRE_OR_FALSE(img);
	for (size_t i = 0; i < nmaps; i++)
		REQUIRE_OR_FALSE(map_bytes(maps[i].name, maps[i].data,
					   maps[i].n, maps[i].vaddr) > 0);
	ptd_timeline_init(&tl);
	for (size_t i = 0; i < nev; i++) {
		evs[i].pos = &pos;
		evs[i].npos = 1;
		REQUIRE_OR_FALSE(ptd_timeline_add(&tl, &evs[i]) >= 0);
	}
	REQUIRE_OR_FALSE(ptd_tl_cursor_init(&cur, &tl, dir, 101, 0,
					    UINT64_MAX, img, &diag) == 0);
	rc = decode(path, WANT_IE, t->buf, t->len, &cur, l, st);
	CHECK_EQ_INT(rc, 0);
	ptd_timeline_fini(&tl);
	ptd_image_free(img);
	img = saved;
	return rc == 0;
}

/* A timeline event maps code as the decoder passes its position; a broken
 * one becomes an "image" error record and decoding goes on. */
static void test_timeline(void)
{
	static const uint8_t late[] = {0x90, 0x90, 0xff, 0xe0};
	static const struct tl_map maps[] = {
		{"tl-code.bin", code, sizeof(code), BASE},
	};
	char path[256];
	struct trace t;
	size_t second;

	path_of(path, sizeof(path), "late.bin");
	REQUIRE(ptd_file_write_atomic(path, late, sizeof(late)) == 0);

	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, 0x400020);
	ippkt(&t, ppt_tip_pgd, 0);
	second = t.len;
	psb(&t);
	ippkt(&t, ppt_tip_pge, LATE);
	ippkt(&t, ppt_tip_pgd, NOWHERE);
	tr_end(&t);

	for (int p = PTD_PATH_INSN; p <= PTD_PATH_BLOCK; p++) {
		/* A broken event first, then the real one. */
		struct ptd_tl_event ev[2] = {
			{.op = PTD_TL_MAP,
			 .start = LATE + 0x1000,
			 .end = LATE + 0x2000,
			 .path = (char *)"/nonexistent/ptd-test"},
			{.op = PTD_TL_MAP,
			 .start = LATE,
			 .end = LATE + sizeof(late),
			 .path = path},
		};
		struct ptd_decode_stats st;
		struct reclist l = {0};

		if (!decode_tl((enum ptd_decode_path)p, &t, maps, 1, ev, 2,
			       second, &l, &st))
			continue;
		CHECK_EQ_U64(st.tl_applied, 1);
		CHECK_EQ_U64(flags_at(&l, 0x400022), PTD_F_DISABLED);
		CHECK_EQ_U64(flags_at(&l, LATE) & PTD_F_ENABLED,
			     PTD_F_ENABLED);
		CHECK_EQ_U64(flags_at(&l, LATE + 2), PTD_F_DISABLED);
		{
			const struct ptd_record *e = first_error(&l);

			REQUIRE(e);
			CHECK(e->u.error.ptd_code);
			CHECK_EQ_STR(e->u.error.context, "image");
			CHECK(e->u.error.offset >= second);
			CHECK_EQ_U64(count_type(&l, PTD_REC_ERROR), 1);
		}
		reclist_free(&l);
	}
}

/*
 * A timeline change positioned exactly where a branch's step left the
 * decoder applies before the next instruction, though the instructions
 * after it read no trace (the offset does not move again until the
 * next branch).  JUMP's jmp *%rax reads the TIP to NEW, whose code the
 * change replaces: old nop, nop, nop, jmp *%rax; new xor, nop, jmp *%rax.
 */
#define JUMP 0x470000ull
#define NEW 0x471000ull
static void test_timeline_at_step(void)
{
	static const uint8_t jump[] = {0xff, 0xe0};
	static const uint8_t old[] = {0x90, 0x90, 0x90, 0x74, 0x00,
				      0xff, 0xe0};
	static const uint8_t fresh[] = {0x31, 0xc0, 0x90, 0x74, 0x00,
					0xff, 0xe0};
	static const uint64_t want_ips[] = {JUMP, NEW, NEW + 2, NEW + 3,
					    NEW + 5};
	static const struct tl_map maps[] = {
		{"jump.bin", jump, sizeof(jump), JUMP},
		{"old.bin", old, sizeof(old), NEW},
	};
	char path[256];
	struct trace t;
	size_t at;

	path_of(path, sizeof(path), "fresh.bin");
	REQUIRE(ptd_file_write_atomic(path, fresh, sizeof(fresh)) == 0);
	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, JUMP);
	ippkt(&t, ppt_tip, NEW);
	at = t.len;		/* the offset the jmp's step leaves */
	tnt(&t, "1");
	ippkt(&t, ppt_tip_pgd, NOWHERE);
	tr_end(&t);

	for (int p = PTD_PATH_INSN; p <= PTD_PATH_BLOCK; p++) {
		struct ptd_tl_event ev = {.op = PTD_TL_MAP,
					  .start = NEW,
					  .end = NEW + sizeof(fresh),
					  .path = path};
		struct ptd_decode_stats st;
		struct reclist l = {0};
		uint64_t ips[8];

		if (!decode_tl((enum ptd_decode_path)p, &t, maps, 2, &ev, 1,
			       at, &l, &st))
			continue;
		CHECK_EQ_U64(st.tl_applied, 1);
		CHECK_EQ_U64(count_type(&l, PTD_REC_ERROR), 0);
		CHECK_EQ_U64(insn_ips(&l, ips, 8), 5);
		for (size_t i = 0; i < 5; i++)
			CHECK_EQ_U64(ips[i], want_ips[i]);
		if (nth_insn(&l, 1))
			CHECK_EQ_U64(nth_insn(&l, 1)->raw[0], 0x31);
		reclist_free(&l);
	}
}

/* Counts what a decode gives, and stops it at @limit instructions. */
struct loop_count {
	uint64_t insns, limit;
	unsigned errors;
	struct ptd_rec_error err;
	uint64_t insns_before_error;
};

static int loop_count(void *ctx, const struct ptd_record *r)
{
	struct loop_count *c = ctx;

	if (r->type == PTD_REC_ERROR) {
		if (!c->errors++) {
			c->err = r->u.error;
			c->insns_before_error = c->insns;
		}
	} else if (r->type == PTD_REC_INSN && ++c->insns >= c->limit) {
		return 1;
	}
	return 0;
}

/* Code the trace never leaves (found by fuzz-capture: the trace and the
 * code disagree, and a direct jump closes a cycle) would be decoded
 * forever, libipt needing no trace for it: after 2^20 instructions
 * without trace it is an error record and decoding resyncs at the next
 * PSB, on both paths.  The error comes after exactly the 2^20th
 * instruction since the offset last moved (the TIP.PGE's), on both paths:
 * not wherever a periodic check or the end of one of libipt's blocks
 * (its block cache decides where) happened to fall -- a decode started
 * elsewhere, or with another cache, would give other records. */
static void test_loop_without_trace(void)
{
	static const uint8_t loop[] = {0x90, 0xeb, 0xfd};
	struct trace t;
	uint64_t second;

	REQUIRE(map_bytes("loop.bin", loop, sizeof(loop), LOOP) > 0);
	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, LOOP);
	tnt(&t, "1");	/* never needed: the loop has no conditional */
	second = psb_plus(&t, false, 0, BASE + 0x20);
	ippkt(&t, ppt_tip_pgd, 0);	/* the syscall at 0x400022 */
	tr_end(&t);
	for (int path = 0; path < 2; path++) {
		struct loop_count c = { .limit = 8u << 20 };
		struct ptd_decode_stats st;
		struct ptd_decode_opts o;
		struct ptd_decode_thread_args a;

		memset(&o, 0, sizeof(o));
		o.path = path ? PTD_PATH_BLOCK : PTD_PATH_INSN;
		o.want = WANT_IE;
		memset(&a, 0, sizeof(a));
		a.pt = t.buf;
		a.len = t.len;
		a.pid = 100;
		a.tid = 101;
		a.img = img;
		CHECK_EQ_INT(ptd_decode_thread(&o, &a, loop_count, &c, &st),
			     0);
		CHECK_EQ_INT(c.errors, 1);
		CHECK_EQ_INT(c.err.code, -PTD_EDECODE);
		CHECK(c.err.ptd_code);
		CHECK(c.err.context &&
		      strstr(c.err.context, "without trace") != NULL);
		CHECK_EQ_U64(c.err.skipped, second - c.err.offset);
		CHECK_EQ_U64(c.insns_before_error, 1u << 20);
		/* then from the next PSB: 0x400020, 0x400021, the syscall */
		CHECK_EQ_U64(c.insns - c.insns_before_error, 3);
		CHECK_EQ_U64(st.errors, 1);
	}
}

/* What test_batch's consumer got: the records (through either call),
 * the calls of each kind, and the most records one batch held. */
struct batch_got {
	struct reclist l;
	size_t ones, batches, most, stop_at_batch;
};

static int batch_one(void *ctx, const struct ptd_record *r)
{
	struct batch_got *g = ctx;

	g->ones++;
	return reclist_add(&g->l, r);
}

static int batch_many(void *ctx, const struct ptd_record *recs, size_t n)
{
	struct batch_got *g = ctx;

	g->batches++;
	if (n > g->most)
		g->most = n;
	for (size_t i = 0; i < n; i++)
		(void)reclist_add(&g->l, &recs[i]);
	return g->stop_at_batch && g->batches == g->stop_at_batch ? 42 : 0;
}

/* ptd_decode_thread with opts.batch: @batch_of names @fn (runs) or not (a
 * wrapper: one by one). */
static int decode_batch(enum ptd_decode_path path, unsigned want,
			const struct trace *t, bool paired,
			struct batch_got *g)
{
	struct ptd_decode_opts o;
	struct ptd_decode_thread_args a;
	struct ptd_decode_stats st;

	opts_args(path, want, t->buf, t->len, &o, &a);
	o.batch = batch_many;
	o.batch_of = paired ? batch_one : reclist_add;
	return ptd_decode_thread(&o, &a, batch_one, g, &st);
}

/* The main trace (*@tm), and one of a loop that needs no trace ever
 * (*@tl: nop; jmp back -- more than 2^20 instructions, then the loop
 * error). */
static void main_and_loop_traces(struct trace *tm, struct trace *tl)
{
	static const uint8_t loop[] = {0x90, 0xeb, 0xfd};

	tr_begin(tm);
	main_trace(tm);
	tr_end(tm);
	REQUIRE(map_bytes("loop.bin", loop, sizeof(loop), LOOP) > 0);
	tr_begin(tl);
	psb(tl);
	ippkt(tl, ppt_tip_pge, LOOP);
	(void)psb_plus(tl, false, 0, BASE + 0x20);
	ippkt(tl, ppt_tip_pgd, 0);
	tr_end(tl);
}

/* The main trace's loop (8 instructions, a call and a return each) for
 * @groups TNT packets of six branches (33: 100 times), then its end. */
static void loop_trace(struct trace *t, int groups)
{
	tr_begin(t);
	psb(t);
	ippkt(t, ppt_tip_pge, BASE);
	for (int i = 0; i < groups; i++)
		tnt(t, "111111");
	tnt(t, "1110");
	ippkt(t, ppt_tip, 0x400020);
	ippkt(t, ppt_tip_pgd, 0);
	tr_end(t);
}

/* Records handed over in runs (opts.batch) are those handed over one by
 * one, in order -- call records made between them included -- at most
 * PTD_DECODE_BATCH a call; a non-zero return stops the decode with its
 * value; a callback that is not batch_of gets every record itself. */
static void test_batch(void)
{
	const unsigned want = WANT_IE | PTD_REC_BIT(PTD_REC_CALL);
	struct trace tm, tl;

	main_and_loop_traces(&tm, &tl);
	for (int p = PTD_PATH_INSN; p <= PTD_PATH_BLOCK; p++) {
		enum ptd_decode_path path = (enum ptd_decode_path)p;
		const struct trace *ts[] = { &tm, &tl };

		for (size_t k = 0; k < 2; k++) {
			struct batch_got one = {0}, many = {0};

			CHECK_EQ_INT(decode_batch(path, want, ts[k], false,
						  &one), 0);
			CHECK_EQ_U64(one.batches, 0);
			CHECK_EQ_U64(one.ones, one.l.n);
			CHECK_EQ_INT(decode_batch(path, want, ts[k], true,
						  &many), 0);
			CHECK_EQ_U64(many.ones, 0);
			CHECK(many.batches >=
			      (many.l.n + PTD_DECODE_BATCH - 1) /
				      PTD_DECODE_BATCH);
			CHECK(many.most <= PTD_DECODE_BATCH);
			CHECK(reccmp_lists(stderr, "one by one: ", &one.l,
					   "in runs: ", &many.l));
			if (k == 0)
				CHECK(count_type(&many.l, PTD_REC_CALL) > 0);
			else
				CHECK(many.l.n > (1u << 20));
			reclist_free(&one.l);
			reclist_free(&many.l);
		}
		{
			struct batch_got g = { .stop_at_batch = 2 };

			CHECK_EQ_INT(decode_batch(path, want, &tl, true, &g), 42);
			CHECK_EQ_U64(g.batches, 2);
			CHECK_EQ_U64(g.l.n, 2 * PTD_DECODE_BATCH);
			reclist_free(&g.l);
		}
	}
}

/* A part's callback that keeps its records in @v and has the decoder
 * make the next insn record there (ptd_decode_part.place), but for every
 * third slot, which it copies into. */
struct placed {
	struct ptd_decode_part dp;
	struct ptd_record *v;
	size_t n, cap, in_place, offered, runs, calls;
	size_t stop_at;		/* on_run stops the decode here (0: never) */
};

/* The next window: sizes 1 to 5 in turn, none every fourth time. */
static void placed_window(struct placed *pl)
{
	size_t room = ++pl->calls % 4 ? pl->calls % 5 + 1 : 0;

	if (room > pl->cap - pl->n)
		room = pl->cap - pl->n;
	pl->dp.place = room ? &pl->v[pl->n] : NULL;
	pl->dp.room = room;
	pl->offered += room;
}

static int placed_record(void *ctx, const struct ptd_record *r)
{
	struct placed *pl = ctx;

	if (pl->n == pl->cap || (r >= pl->v && r < pl->v + pl->cap))
		return 1;	/* (a record made in place comes to on_run) */
	pl->v[pl->n++] = *r;
	placed_window(pl);
	return 0;
}

static int placed_run(void *ctx, size_t n)
{
	struct placed *pl = ctx;

	if (!n || n > pl->dp.room)
		return 2;
	pl->n += n;
	pl->in_place += n;
	pl->runs++;
	if (pl->stop_at && pl->n >= pl->stop_at)
		return 3;
	placed_window(pl);
	return 0;
}

/*
 * The decoder makes a part's insn records where its callback keeps them
 * (decoder.h, ptd_decode_part.place and room: the parallel decoder's
 * parts, which copied each record before) and reports them a run at a
 * time: the records are the ones a decode without a window gives, in
 * their order -- none made there is overwritten by a record delivered
 * before it, none lacks a field the decoder's own record has, a run is
 * reported before any record after it and at the end (insn records
 * alone: the last ones are in a window) -- and on_run's value stops the
 * decode as the callback's does.
 */
static void test_part_place(void)
{
	struct trace tm, tl;

	main_and_loop_traces(&tm, &tl);
	for (int p = 0; p < 4; p++) {
		enum ptd_decode_path path = p % 2 ? PTD_PATH_BLOCK
						  : PTD_PATH_INSN;
		unsigned want = p < 2 ? WANT_IE : PTD_REC_BIT(PTD_REC_INSN);
		struct ptd_decode_opts o;
		struct ptd_decode_thread_args a;
		struct ptd_decode_stats st;
		struct reclist recs = {0}, got = {0};
		struct placed pl = { .cap = 4096 };
		size_t ninsn;

		CHECK_EQ_INT(decode(path, want, tm.buf, tm.len, NULL, &recs,
				    &st), 0);
		ninsn = count_type(&recs, PTD_REC_INSN);
		pl.v = calloc(pl.cap, sizeof(*pl.v));
		REQUIRE(pl.v);
		pl.dp.on_run = placed_run;
		pl.dp.ctx = &pl;
		placed_window(&pl);
		opts_args(path, want, tm.buf, tm.len, &o, &a);
		a.part = &pl.dp;
		CHECK_EQ_INT(ptd_decode_thread(&o, &a, placed_record, &pl, &st),
			     0);
		for (size_t i = 0; i < pl.n; i++)
			(void)reclist_add(&got, &pl.v[i]);
		CHECK(reccmp_lists(stderr, "own: ", &recs, "placed: ", &got));
		CHECK(recs.n > 0 && recs.r[recs.n - 1].type ==
		      (want == WANT_IE ? PTD_REC_EVENT : PTD_REC_INSN));
		/* most insn records were made in place, in runs: not the
		 * events' and errors' slots, nor where no window was given */
		CHECK(pl.in_place <= pl.offered);
		CHECK(2 * pl.in_place >= ninsn);
		CHECK(pl.runs > 1 && pl.runs < pl.in_place);

		/* on_run stops it: nothing delivered after */
		memset(pl.v, 0, pl.cap * sizeof(*pl.v));
		pl.n = pl.in_place = pl.offered = pl.runs = pl.calls = 0;
		pl.stop_at = ninsn / 2;
		placed_window(&pl);
		CHECK_EQ_INT(ptd_decode_thread(&o, &a, placed_record, &pl, &st),
			     3);
		CHECK(pl.n >= pl.stop_at && pl.n < pl.stop_at + 5);
		free(pl.v);
		reclist_free(&recs);
		reclist_free(&got);
	}
}

/* What test_loop_unexpandable counts; stops the decode at @limit errors. */
struct unexp_count {
	uint64_t insns, insns_at_loop, insns_after_loop;
	unsigned expand_errors, loop_errors, other_errors, limit;
	bool bad_expand_ip, saw_1f;
	struct ptd_rec_error loop;
};

static int unexp_count(void *ctx, const struct ptd_record *r)
{
	struct unexp_count *c = ctx;
	const struct ptd_rec_error *e = &r->u.error;

	if (r->type == PTD_REC_INSN) {
		c->insns++;
		if (c->loop_errors)
			c->insns_after_loop++;
		if (r->u.insn.ip == UNEXP && r->u.insn.size == 1 &&
		    r->u.insn.raw[0] == 0x1f)
			c->saw_1f = true;
		return 0;
	}
	if (r->type != PTD_REC_ERROR)
		return 0;
	if (e->context && !strcmp(e->context, "expand")) {
		c->expand_errors++;
		if (!e->ip_valid || e->ip != UNEXP)
			c->bad_expand_ip = true;
	} else if (e->context && strstr(e->context, "without trace")) {
		if (!c->loop_errors++) {
			c->loop = *e;
			c->insns_at_loop = c->insns;
		}
	} else {
		c->other_errors++;
	}
	return c->expand_errors + c->loop_errors + c->other_errors >=
	       c->limit;
}

/*
 * The same cycle through an instruction libipt decodes and ptd's x86
 * decoder refuses (0x1f, pop %ds, invalid in 64-bit mode: libipt 2.0.5
 * takes it as a one-byte instruction).  Found by fuzz-capture
 * (tests/fuzz/corpus/capture/regress-blk-unexpandable-loop.cap, a mutated
 * snapshot): each pt_blk_next returns a block of 65535 instructions of
 * the cycle, whose expansion stops at the first with an "expand" error.
 * When the loop guard counted the instructions expanded -- here none a
 * block -- the block path never ended (the capture: about 5 a block,
 * half an hour at 100% CPU), an error record a block.  It counts what
 * libipt decoded: the block path ends as the insn path does.  The cycle
 * needs no trace, so it is one run (decoder.c): one "expand" error, which
 * comes before the loop error, not one a block (how many blocks libipt
 * makes of the cycle depends on its block cache).
 */
static void test_loop_unexpandable(void)
{
	static const uint8_t loop[] = {0x1f, 0xeb, 0xfd}; /* pop %ds; jmp */
	struct trace t;
	uint64_t second;

	REQUIRE(map_bytes("unexp.bin", loop, sizeof(loop), UNEXP) > 0);
	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, UNEXP);
	tnt(&t, "1");	/* never needed; without it libipt reads the PSB+ ahead */
	second = psb_plus(&t, false, 0, BASE + 0x20);
	ippkt(&t, ppt_tip_pgd, 0);	/* the syscall at 0x400022 */
	tr_end(&t);
	for (int v = 0; v < 3; v++) {
		struct unexp_count c = { .limit = 1000 };
		struct ptd_decode_stats st;
		struct ptd_decode_opts o;
		struct ptd_decode_thread_args a;

		memset(&o, 0, sizeof(o));
		o.path = v ? PTD_PATH_BLOCK : PTD_PATH_INSN;
		o.want = WANT_IE;
		if (v == 2)
			o.want |= PTD_REC_BIT(PTD_REC_BLOCK);
		o.json_bodies = v == 2;
		memset(&a, 0, sizeof(a));
		a.pt = t.buf;
		a.len = t.len;
		a.pid = 100;
		a.tid = 101;
		a.img = img;
		/* Without the fix: 1000 expand errors stop it (1). */
		CHECK_EQ_INT(ptd_decode_thread(&o, &a, unexp_count, &c, &st),
			     0);
		CHECK_EQ_INT(c.loop_errors, 1);
		CHECK_EQ_INT(c.other_errors, 0);
		CHECK_EQ_INT(c.loop.code, -PTD_EDECODE);
		CHECK_EQ_U64(c.loop.skipped, second - c.loop.offset);
		/* then from the next PSB: 0x400020, 0x400021, the syscall */
		CHECK_EQ_U64(c.insns_after_loop, 3);
		if (!v) {
			/* libipt decodes the byte: the cycle is insn records */
			CHECK(c.saw_1f);
			CHECK_EQ_INT(c.expand_errors, 0);
			CHECK(c.insns_at_loop >= (1u << 20));
			CHECK(c.insns_at_loop < (1u << 20) + 3 * 65536);
			continue;
		}
		/* ptd's x86 decoder refuses it: one expand error, naming
		 * its ip */
		CHECK_EQ_INT(c.expand_errors, 1);
		CHECK(!c.bad_expand_ip);
		CHECK_EQ_U64(c.insns_at_loop, 0);
		CHECK_EQ_U64(st.errors, c.expand_errors + 1);
	}
}

/*
 * The block path's records do not depend on libipt's block cache, which
 * lives in the sections and so is warmed by every decode before (and, in
 * a parallel decode, by the other parts in another order).  A cold cache
 * ends a block at a direct call, a warm one runs on through it:
 *
 *   BCACHE+0:    pop %ds       ptd's x86 decoder refuses it (0x1f)
 *   BCACHE+1:    call BCACHE+0x10
 *   BCACHE+6:    syscall       tracing stops
 *   BCACHE+0x10: nop; ret      compressed
 *
 * Cold: [pop, call] [nop, ret]; warm: [pop, call, nop, ret].  The pop
 * cannot be expanded: when that dropped the rest of its libipt block, a
 * cold decode gave the nop and the ret and a warm one did not (and the
 * error's offset differed).  Found as a parallel decode of a damaged
 * capture that differed from the serial one.  Now the stretch up to the
 * next instruction that needs trace (the ret) is dropped either way.
 */
/* decoder.h calls_gate: no call stack while it is shut; from the record
 * after it opens, one kept from empty, as at the trace's start. */
struct gated {
	struct reclist l;
	atomic_bool gate;
	size_t open_at;			/* insn records before it opens */
	size_t insns;
	size_t calls_before;		/* call records while it was shut */
};

static int gated_add(void *ctx, const struct ptd_record *rec)
{
	struct gated *g = ctx;

	if (rec->type == PTD_REC_CALL && !atomic_load(&g->gate))
		g->calls_before++;
	if (rec->type == PTD_REC_INSN && ++g->insns == g->open_at)
		atomic_store(&g->gate, true);
	return reclist_add(&g->l, rec);
}

static void gated_decode(enum ptd_decode_path path, const struct trace *t,
			 struct gated *g, size_t open_at)
{
	struct ptd_decode_opts o;
	struct ptd_decode_thread_args a;
	struct ptd_decode_stats st;

	memset(g, 0, sizeof(*g));
	atomic_init(&g->gate, open_at == 0);
	g->open_at = open_at;
	memset(&o, 0, sizeof(o));
	o.path = path;
	o.want = WANT_IE | PTD_REC_BIT(PTD_REC_CALL);
	o.cpu.vendor = pcv_unknown;
	o.calls_gate = &g->gate;
	memset(&a, 0, sizeof(a));
	a.pt = t->buf;
	a.len = t->len;
	a.pid = 100;
	a.tid = 101;
	a.img = img;
	CHECK_EQ_INT(ptd_decode_thread(&o, &a, gated_add, g, &st), 0);
}

static void test_calls_gate(void)
{
	static const enum ptd_decode_path paths[] = { PTD_PATH_INSN,
						      PTD_PATH_BLOCK };
	struct trace t;
	struct gated g;
	struct reclist ungated;

	tr_begin(&t);
	main_trace(&t);
	tr_end(&t);
	for (size_t p = 0; p < 2; p++) {
		memset(&ungated, 0, sizeof(ungated));
		REQUIRE(decode(paths[p], WANT_IE | PTD_REC_BIT(PTD_REC_CALL),
			       t.buf, t.len, NULL, &ungated, NULL) == 0);
		/* two calls, two returns */
		CHECK_EQ_U64(count_type(&ungated, PTD_REC_CALL), 4);

		/* open from the start: as without a gate */
		gated_decode(paths[p], &t, &g, 0);
		CHECK_EQ_U64(g.l.n, ungated.n);
		CHECK_EQ_U64(count_type(&g.l, PTD_REC_CALL), 4);
		reclist_free(&g.l);

		/* never opened: the same insn and event records, no call
		 * records */
		gated_decode(paths[p], &t, &g, SIZE_MAX);
		CHECK_EQ_U64(count_type(&g.l, PTD_REC_CALL), 0);
		CHECK_EQ_U64(count_type(&g.l, PTD_REC_INSN),
			     count_type(&ungated, PTD_REC_INSN));
		CHECK_EQ_U64(count_type(&g.l, PTD_REC_EVENT),
			     count_type(&ungated, PTD_REC_EVENT));
		reclist_free(&g.l);

		/* opened at the second loop's first instruction (the 8th
		 * record opens it for the 9th, 0x400000): its call and
		 * return only, the call at depth 1 as if it were the
		 * first */
		gated_decode(paths[p], &t, &g, 8);
		CHECK_EQ_U64(g.calls_before, 0);
		CHECK_EQ_U64(count_type(&g.l, PTD_REC_CALL), 2);
		for (size_t i = 0; i < g.l.n; i++)
			if (g.l.r[i].type == PTD_REC_CALL) {
				CHECK_EQ_INT(g.l.r[i].u.call.depth, 1);
				break;
			}
		reclist_free(&g.l);
		reclist_free(&ungated);
	}
}

/* The gate opened by the consumer of runs when the first run reaches it,
 * while the decoder holds the next instruction in the slot of its runs
 * that instruction would take (decoder.c, new_insn): the call records the
 * stack then makes go first, and the instruction after them -- the
 * records of a consumer that takes them one by one and opens the gate at
 * the same record. */
struct gated_runs {
	struct reclist l;
	atomic_bool gate;
	size_t open_after;		/* records */
};

static void gated_runs_open(struct gated_runs *g)
{
	if (g->l.n >= g->open_after)
		atomic_store(&g->gate, true);
}

static int gated_runs_one(void *ctx, const struct ptd_record *r)
{
	struct gated_runs *g = ctx;
	int rc = reclist_add(&g->l, r);

	gated_runs_open(g);
	return rc;
}

static int gated_runs_many(void *ctx, const struct ptd_record *recs,
			   size_t n)
{
	struct gated_runs *g = ctx;

	for (size_t i = 0; i < n; i++)
		(void)reclist_add(&g->l, &recs[i]);
	gated_runs_open(g);
	return 0;
}

static void gated_runs_decode(enum ptd_decode_path path,
			      const struct trace *t, bool runs,
			      struct gated_runs *g)
{
	struct ptd_decode_opts o;
	struct ptd_decode_thread_args a;
	struct ptd_decode_stats st;

	memset(g, 0, sizeof(*g));
	atomic_init(&g->gate, false);
	g->open_after = PTD_DECODE_BATCH;
	opts_args(path, WANT_IE | PTD_REC_BIT(PTD_REC_CALL), t->buf, t->len,
		  &o, &a);
	o.calls_gate = &g->gate;
	if (runs) {
		o.batch = gated_runs_many;
		o.batch_of = gated_runs_one;
	}
	CHECK_EQ_INT(ptd_decode_thread(&o, &a, gated_runs_one, g, &st), 0);
}

static void test_calls_gate_runs(void)
{
	struct trace t;

	/* the main trace's loop 100 times, then its end */
	loop_trace(&t, 33);
	for (int p = PTD_PATH_INSN; p <= PTD_PATH_BLOCK; p++) {
		struct gated_runs one, many;

		gated_runs_decode((enum ptd_decode_path)p, &t, false, &one);
		gated_runs_decode((enum ptd_decode_path)p, &t, true, &many);
		CHECK(count_type(&one.l, PTD_REC_INSN) > 800);
		CHECK(count_type(&one.l, PTD_REC_CALL) > 100);
		CHECK(reccmp_lists(stderr, "one by one: ", &one.l,
				   "in runs: ", &many.l));
		reclist_free(&one.l);
		reclist_free(&many.l);
	}
}

/* What test_ips_runs's consumer got: records and addresses as one list
 * (an address as an insn record of its ip, pid and tid alone, what
 * ips_project makes of a record), the calls of each kind; @toggle: the
 * consumer flips the gate after every call; @stop_at_ips: the ips call
 * that stops the decode (43). */
struct ips_got {
	uint64_t magic;		/* IPS_MAGIC: the ctx is this */
	struct reclist l;
	atomic_bool gate;
	bool toggle;
	size_t ips_calls, rec_calls, most, stop_at_ips;
	/* ips calls that found the gate closed: addresses decided while it
	 * was (it changes only in the consumer's calls) */
	size_t closed;
};

#define IPS_MAGIC 0x1e5a11ull

static void ips_project(const struct ptd_record *r, struct ptd_record *p)
{
	if (r->type != PTD_REC_INSN) {
		*p = *r;
		return;
	}
	memset(p, 0, sizeof(*p));
	p->type = PTD_REC_INSN;
	p->pid = r->pid;
	p->tid = r->tid;
	p->u.insn.ip = r->u.insn.ip;
}

static void ips_after(struct ips_got *g)
{
	if (g->toggle)
		atomic_store(&g->gate, !atomic_load(&g->gate));
}

static int ips_recs(void *ctx, const struct ptd_record *recs, size_t n)
{
	struct ips_got *g = ctx;

	g->rec_calls++;
	for (size_t i = 0; i < n; i++)
		(void)reclist_add(&g->l, &recs[i]);
	ips_after(g);
	return 0;
}

static int ips_one(void *ctx, const struct ptd_record *r)
{
	return ips_recs(ctx, r, 1);
}

static int ips_run(void *ctx, pid_t pid, pid_t tid, const uint64_t *ips,
		   size_t n)
{
	struct ips_got *g = ctx;

	/* (the first member of whatever ctx is: never written) */
	if (g->magic != IPS_MAGIC)
		return -EINVAL;
	g->ips_calls++;
	g->closed += !atomic_load(&g->gate);
	if (n > g->most)
		g->most = n;
	for (size_t i = 0; i < n; i++) {
		struct ptd_record r;

		memset(&r, 0, sizeof(r));
		r.type = PTD_REC_INSN;
		r.pid = pid;
		r.tid = tid;
		r.u.insn.ip = ips[i];
		(void)reclist_add(&g->l, &r);
	}
	ips_after(g);
	return g->stop_at_ips && g->ips_calls == g->stop_at_ips ? 43 : 0;
}

/* ips_decode's opts.jobs */
static unsigned ips_jobs;

static int ips_decode(enum ptd_decode_path path, unsigned want,
		      const struct trace *t, bool gate, bool toggle,
		      struct ips_got *g)
{
	struct ptd_decode_opts o;
	struct ptd_decode_thread_args a;
	struct ptd_decode_stats st;

	atomic_init(&g->gate, gate);
	g->magic = IPS_MAGIC;
	g->toggle = toggle;
	opts_args(path, want, t->buf, t->len, &o, &a);
	o.batch = ips_recs;
	o.batch_of = ips_one;
	o.ips = ips_run;
	o.ips_gate = &g->gate;
	o.jobs = ips_jobs;
	return ptd_decode_thread(&o, &a, ips_one, g, &st);
}

/* Runs of addresses (opts.ips): while the gate is open, the block path
 * hands its instructions over as addresses, in order with the records
 * around them -- the records of the same decode without runs, each insn
 * record reduced to its address, thread and process -- at most
 * PTD_DECODE_IPS a call; a gate that the consumer flips at every call is
 * obeyed from the instruction after each call (no address decided while
 * it was closed); with the gate closed, on the instruction path
 * or where a call stack is kept, records only; a non-zero return stops
 * the decode with its value. */
static void test_ips_runs(void)
{
	struct trace tm, tl, tc, tt;
	size_t second;

	main_and_loop_traces(&tm, &tl);
	/* an error record between instructions: test_corrupt's bad
	 * byte where the TNT was, then the second PSB's */
	two_segments(&tc, &second);
	{
		struct trace h;

		tr_begin(&h);
		psb(&h);
		ippkt(&h, ppt_tip_pge, BASE);
		REQUIRE(h.len < second);
		tc.buf[h.len] = 0xd9;
		tr_end(&h);
	}
	/* the main trace's loop 400 times: blocks of a few instructions,
	 * 3200 instructions */
	loop_trace(&tt, 133);
	for (int p = PTD_PATH_INSN; p <= PTD_PATH_BLOCK; p++) {
		enum ptd_decode_path path = (enum ptd_decode_path)p;
		const struct trace *ts[] = { &tm, &tl, &tc, &tt };

		for (size_t k = 0; k < 4; k++) {
			struct batch_got ref = {0};
			struct reclist proj = {0};

			CHECK_EQ_INT(decode_batch(path, WANT_IE, ts[k], true,
						  &ref), 0);
			for (size_t i = 0; i < ref.l.n; i++) {
				struct ptd_record r;

				ips_project(&ref.l.r[i], &r);
				(void)reclist_add(&proj, &r);
			}
			CHECK(count_type(&ref.l, PTD_REC_INSN) > 1);
			if (k == 2)
				CHECK(count_type(&ref.l, PTD_REC_ERROR) > 0);
			for (int mode = 0; mode < 3; mode++) {
				struct ips_got g = {0};

				/* 0: open; 1: flipped at every call; 2:
				 * closed */
				CHECK_EQ_INT(ips_decode(path, WANT_IE, ts[k],
							mode != 2, mode == 1,
							&g), 0);
				if (mode == 2 || path == PTD_PATH_INSN) {
					CHECK_EQ_U64(g.ips_calls, 0);
					CHECK(reccmp_lists(stderr, "records: ",
							   &ref.l, "gate: ",
							   &g.l));
				} else if (mode == 0) {
					/* every instruction an address */
					CHECK(g.ips_calls > 0);
					CHECK(g.most <= PTD_DECODE_IPS);
					CHECK(reccmp_lists(stderr,
							   "projected: ",
							   &proj,
							   "addresses: ",
							   &g.l));
				} else {
					/* some of each */
					struct reclist gp = {0};

					for (size_t i = 0; i < g.l.n; i++) {
						struct ptd_record r;

						ips_project(&g.l.r[i], &r);
						(void)reclist_add(&gp, &r);
					}
					CHECK(reccmp_lists(stderr,
							   "projected: ",
							   &proj, "mixed: ",
							   &gp));
					reclist_free(&gp);
				}
				/* (a block goes on in records once the
				 * gate closed in it: the loop's are long) */
				if (mode == 1 && path == PTD_PATH_BLOCK &&
				    k == 3) {
					CHECK(g.rec_calls > 2);
					CHECK(g.ips_calls > 2);
				}
				if (mode == 0 && path == PTD_PATH_BLOCK &&
				    k == 1)
					CHECK(g.ips_calls >=
					      (1u << 20) / PTD_DECODE_IPS);
				CHECK_EQ_U64(g.closed, 0);
				reclist_free(&g.l);
			}
			reclist_free(&ref.l);
			reclist_free(&proj);
		}
	}
	{
		struct ips_got g = { .stop_at_ips = 2 };

		CHECK_EQ_INT(ips_decode(PTD_PATH_BLOCK, WANT_IE, &tl, true,
					false, &g), 43);
		CHECK_EQ_U64(g.ips_calls, 2);
		CHECK_EQ_U64(count_type(&g.l, PTD_REC_INSN),
			     2 * PTD_DECODE_IPS);
		reclist_free(&g.l);
	}
	for (unsigned jobs = 0; jobs <= 2; jobs += 2) {
		/* a call stack kept (no gate): it needs every record; with
		 * jobs, by the parallel decoder's wrapper, whose serial
		 * decode of the block path must not hand the caller's ips
		 * its own ctx */
		struct ips_got g = {0};
		struct batch_got ref = {0};

		ips_jobs = jobs;
		CHECK_EQ_INT(ips_decode(PTD_PATH_BLOCK,
					WANT_IE | PTD_REC_BIT(PTD_REC_CALL),
					&tm, true, false, &g), 0);
		ips_jobs = 0;
		CHECK_EQ_U64(g.ips_calls, 0);
		CHECK(count_type(&g.l, PTD_REC_CALL) > 0);
		CHECK_EQ_INT(decode_batch(PTD_PATH_BLOCK,
					  WANT_IE | PTD_REC_BIT(PTD_REC_CALL),
					  &tm, true, &ref), 0);
		CHECK(reccmp_lists(stderr, "serial: ", &ref.l, "gated: ",
				   &g.l));
		reclist_free(&ref.l);
		reclist_free(&g.l);
	}
}

static void test_block_cache(void)
{
	static const uint8_t bytes[0x12] = {
		0x1f, 0xe8, 0x0a, 0x00, 0x00, 0x00, 0x0f, 0x05,
		[0x10] = 0x90, [0x11] = 0xc3,
	};
	struct reclist cold = {0}, warm = {0};
	struct trace t;
	size_t insns = 0, errors = 0;

	REQUIRE(map_bytes("bcache.bin", bytes, sizeof(bytes), BCACHE) > 0);
	tr_begin(&t);
	psb(&t);
	ippkt(&t, ppt_tip_pge, BCACHE);
	tnt(&t, "1");			/* the ret */
	ippkt(&t, ppt_tip_pgd, 0);	/* the syscall */
	tr_end(&t);
	/* The first decode of this code fills the cache, the second uses
	 * it. */
	CHECK_EQ_INT(decode(PTD_PATH_BLOCK, WANT_IE, t.buf, t.len, NULL,
			    &cold, NULL), 0);
	CHECK_EQ_INT(decode(PTD_PATH_BLOCK, WANT_IE, t.buf, t.len, NULL,
			    &warm, NULL), 0);
	CHECK(reccmp_lists(stderr, "cold: ", &cold, "warm: ", &warm));
	for (size_t i = 0; i < cold.n; i++) {
		const struct ptd_record *r = &cold.r[i];

		if (r->type == PTD_REC_INSN) {
			insns++;
			CHECK_EQ_U64(r->u.insn.ip, BCACHE + 6);
		} else if (r->type == PTD_REC_ERROR) {
			errors++;
			CHECK_EQ_STR(r->u.error.context, "expand");
			CHECK_EQ_U64(r->u.error.ip, BCACHE);
		}
	}
	CHECK_EQ_U64(insns, 1);		/* the syscall */
	CHECK_EQ_U64(errors, 1);
	reclist_free(&cold);
	reclist_free(&warm);
}

static void cleanup(void)
{
	static const char *files[] = {"code.bin", "tail.bin", "late.bin",
				      "filt.bin", "loop.bin", "unexp.bin", "bcache.bin"};
	char path[256];

	ptd_image_free(img);
	ptd_iscache_free(ic);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		path_of(path, sizeof(path), files[i]);
		(void)unlink(path);
	}
	(void)rmdir(dir);
}

int main(void)
{
	setup();
	RUN(test_main);
	RUN(test_async);
	RUN(test_filter_exit);
	RUN(test_skl014);
	RUN(test_overflow);
	RUN(test_stop);
	RUN(test_tsx);
	RUN(test_tsx_abort);
	RUN(test_corrupt);
	RUN(test_corrupt_sweep);
	RUN(test_truncated);
	RUN(test_nomap);
	RUN(test_callback_stop);
	RUN(test_blocks);
	RUN(test_args);
	RUN(test_timeline);
	RUN(test_timeline_at_step);
	RUN(test_loop_without_trace);
	RUN(test_batch);
	RUN(test_part_place);
	RUN(test_ips_runs);
	RUN(test_loop_unexpandable);
	RUN(test_block_cache);
	RUN(test_calls_gate);
	RUN(test_calls_gate_runs);
	cleanup();
	return check_done();
}
