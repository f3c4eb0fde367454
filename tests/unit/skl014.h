/* SPDX-License-Identifier: MIT */
/*
 * libipt's test cases for erratum SKL014 ("Intel PT TIP.PGD May Not Have
 * Target IP Payload": a direct unconditional branch leaving the IP filter
 * may send TIP.PGD without its target), reproduced for ptd's tests.
 *
 * Source: intel/libipt v2.0.5, test/src/skl014-call.ptt, skl014-jmp.ptt,
 * skl014-jmp-jmp.ptt and skl014-no_filter.ptt (BSD-3-Clause, Copyright
 * Intel Corporation).  pttc is not packaged by Debian, so each case is
 * rebuilt here from the .ptt: the code its listing assembles to (bytes
 * written out by hand; "ALIGN 0x100" pads with NOPs), the packets of its
 * "@pt" lines (built with ptenc.h), the filter of its "opt:ptxed" line,
 * the CPUs of its "cpu" lines, and the instructions and events of its
 * ".exp(ptxed)" section.  Nothing of libipt's code is in here.
 *
 * Header-only; include after check.h and ptenc.h.
 */
#ifndef PTD_TESTS_SKL014_H
#define PTD_TESTS_SKL014_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <intel-pt.h>

#define SKL014_CODE_MAX 0x101

struct skl014_case {
	const char *ptt;		/* the libipt test it reproduces */
	uint64_t org;			/* where the code is loaded */
	uint8_t code[SKL014_CODE_MAX];
	size_t code_len;
	/* "opt:ptxed --filter:addr0_cfg 1 --filter:addr0_a 0x1000
	 * --filter:addr0_b 0x10ff" */
	bool filter;
	/* PSB+ order of the .ptt: psb fup mode.exec psbend (else psb
	 * mode.exec fup psbend). */
	bool fup_first;
	/* ptxed's output: these instructions, then "[disabled]". */
	uint64_t exp[2];
	size_t nexp;
};

/* The "cpu" lines of every skl014-*.ptt: family 6 models. */
static const uint8_t skl014_models[] = {
	78, 85, 94, 142, 158, 102, 125, 126, 165, 166,
	106, 108, 143, 140, 141, 167, 168, 151, 154, 191,
};

#define SKL014_NMODELS (sizeof(skl014_models) / sizeof(skl014_models[0]))

/* The filter of the "opt:ptxed" lines. */
static inline struct pt_conf_addr_filter skl014_filter(void)
{
	struct pt_conf_addr_filter f;

	memset(&f, 0, sizeof(f));
	f.config.ctl.addr0_cfg = 1;	/* filter */
	f.addr0_a = 0x1000;
	f.addr0_b = 0x10ff;
	return f;
}

/* Fill @c with case @i (0..3); false past the last. */
static inline bool skl014_get(unsigned i, struct skl014_case *c)
{
	memset(c, 0, sizeof(*c));
	switch (i) {
	case 0:
		/* l0: call l2; l1: hlt; ALIGN 0x100; l2: hlt
		 * psb mode.exec fup(3: l0) psbend tip.pgd(0: l2)
		 * ptxed: l0, [disabled] */
		c->ptt = "skl014-call.ptt";
		c->org = 0x1000;
		memset(c->code, 0x90, 0x100);
		memcpy(c->code, "\xe8\xfb\x00\x00\x00\xf4", 6);
		c->code[0x100] = 0xf4;
		c->code_len = 0x101;
		c->filter = true;
		c->exp[0] = 0x1000;
		c->nexp = 1;
		return true;
	case 1:
		/* l0: jmp l2; l1: hlt; ALIGN 0x100; l2: hlt
		 * psb mode.exec fup(3: l0) psbend tip.pgd(0: l2)
		 * ptxed: l0, [disabled] */
		c->ptt = "skl014-jmp.ptt";
		c->org = 0x1000;
		memset(c->code, 0x90, 0x100);
		memcpy(c->code, "\xe9\xfb\x00\x00\x00\xf4", 6);
		c->code[0x100] = 0xf4;
		c->code_len = 0x101;
		c->filter = true;
		c->exp[0] = 0x1000;
		c->nexp = 1;
		return true;
	case 2:
		/* l0: jmp l2; l1: hlt; l2: jmp l4; l3: hlt; ALIGN 0x100;
		 * l4: hlt
		 * psb mode.exec fup(3: l0) psbend tip.pgd(0: l4)
		 * ptxed: l0, l2, [disabled] (the disable binds to the second
		 * jump, the first stays inside the filter) */
		c->ptt = "skl014-jmp-jmp.ptt";
		c->org = 0x1000;
		memset(c->code, 0x90, 0x100);
		memcpy(c->code, "\xeb\x01\xf4\xe9\xf8\x00\x00\x00\xf4", 9);
		c->code[0x100] = 0xf4;
		c->code_len = 0x101;
		c->filter = true;
		c->exp[0] = 0x1000;
		c->exp[1] = 0x1003;
		c->nexp = 2;
		return true;
	case 3:
		/* org 0x100000; l0: jmp l2; l1: hlt; l2: jmp far [rax];
		 * l3: hlt; l4: hlt
		 * psb fup(3: l0) mode.exec psbend tip.pgd(0: l4)
		 * no filter: the IP-less disable is not applied to the
		 * direct jump but to the far one.
		 * ptxed: l0, l2, [disabled] */
		c->ptt = "skl014-no_filter.ptt";
		c->org = 0x100000;
		memcpy(c->code, "\xeb\x01\xf4\xff\x28\xf4\xf4", 7);
		c->code_len = 7;
		c->fup_first = true;
		c->exp[0] = 0x100000;
		c->exp[1] = 0x100003;
		c->nexp = 2;
		return true;
	default:
		return false;
	}
}

/* The case's packets into @t (begun with tr_begin; the caller ends it). */
static inline void skl014_trace(const struct skl014_case *c,
				struct trace *t)
{
	struct pt_packet p;

	simple(t, ppt_psb);
	if (c->fup_first)
		ippkt(t, ppt_fup, c->org);
	memset(&p, 0, sizeof(p));
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
	pkt(t, &p);
	if (!c->fup_first)
		ippkt(t, ppt_fup, c->org);
	simple(t, ppt_psbend);
	ippkt(t, ppt_tip_pgd, 0);
}

#endif
