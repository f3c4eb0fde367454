/* SPDX-License-Identifier: MIT */
/*
 * x86/insn: hand-assembled instructions of every class (with the prefixes
 * that must not change the class), errors, and a differential test against
 * libipt itself: a linear sweep over the .text of real binaries, turned into
 * a trace that makes pt_insn_next walk the same instructions, so that every
 * size and class we compute is compared with libipt's.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <intel-pt.h>

#include "check.h"
#include "common/diag.h"
#include "x86/insn.h"

struct case_ {
	const char *what;
	enum pt_exec_mode mode;
	uint64_t ip;
	uint8_t len;
	uint8_t bytes[16];
	uint8_t size;
	enum pt_insn_class iclass;
	enum ptd_x86_kind kind;
	bool rep;
	uint64_t target;	/* checked for COND/JMP/CALL_DIRECT only */
};

#define M64 ptem_64bit
#define M32 ptem_32bit
#define M16 ptem_16bit
#define IP 0x1000

static const struct case_ cases[] = {
	/* other */
	{ "nop", M64, IP, 1, { 0x90 }, 1, ptic_other, PTD_X86_OTHER, 0, 0 },
	{ "nopw 0(%rax,%rax)", M64, IP, 6, { 0x66, 0x0f, 0x1f, 0x44, 0, 0 }, 6,
	  ptic_other, PTD_X86_OTHER, 0, 0 },
	{ "mov 0,%rax", M64, IP, 8, { 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0 }, 8,
	  ptic_other, PTD_X86_OTHER, 0, 0 },
	{ "ud2", M64, IP, 2, { 0x0f, 0x0b }, 2, ptic_other, PTD_X86_OTHER, 0,
	  0 },
	{ "hlt", M64, IP, 1, { 0xf4 }, 1, ptic_other, PTD_X86_OTHER, 0, 0 },
	{ "xsave (%rax) (0F AE /4 without F3)", M64, IP, 3,
	  { 0x0f, 0xae, 0x20 }, 3, ptic_other, PTD_X86_OTHER, 0, 0 },
	{ "vzeroupper (VEX)", M64, IP, 3, { 0xc5, 0xf8, 0x77 }, 3, ptic_other,
	  PTD_X86_OTHER, 0, 0 },
	{ "vbroadcastss (%rax),%xmm0 (VEX3)", M64, IP, 5,
	  { 0xc4, 0xe2, 0x79, 0x18, 0x00 }, 5, ptic_other, PTD_X86_OTHER, 0,
	  0 },
	{ "vmovaps %zmm1,%zmm0 (EVEX)", M64, IP, 6,
	  { 0x62, 0xf1, 0x7c, 0x48, 0x28, 0xc1 }, 6, ptic_other,
	  PTD_X86_OTHER, 0, 0 },
	{ "0F 3A map: pextrb", M64, IP, 6,
	  { 0x66, 0x0f, 0x3a, 0x14, 0xc0, 0x01 }, 6, ptic_other,
	  PTD_X86_OTHER, 0, 0 },
	{ "cmovo (0F 40: not Jcc)", M64, IP, 3, { 0x0f, 0x40, 0xc1 }, 3,
	  ptic_other, PTD_X86_OTHER, 0, 0 },
	{ "add %al,(%rax) (map 0 80: not Jcc)", M64, IP, 3,
	  { 0x80, 0x00, 0x01 }, 3, ptic_other, PTD_X86_OTHER, 0, 0 },
	{ "pop (%rax) (8F /0)", M64, IP, 2, { 0x8f, 0x00 }, 2, ptic_other,
	  PTD_X86_OTHER, 0, 0 },
	{ "inc %eax (FF /0)", M64, IP, 2, { 0xff, 0xc0 }, 2, ptic_other,
	  PTD_X86_OTHER, 0, 0 },
	{ "push (%rax) (FF /6)", M64, IP, 2, { 0xff, 0x30 }, 2, ptic_other,
	  PTD_X86_OTHER, 0, 0 },
	/* conditional */
	{ "je .+7", M64, IP, 2, { 0x74, 0x05 }, 2, ptic_cond_jump,
	  PTD_X86_COND, 0, IP + 7 },
	{ "jne . (self)", M64, IP, 2, { 0x75, 0xfe }, 2, ptic_cond_jump,
	  PTD_X86_COND, 0, IP },
	{ "jo next", M64, IP, 2, { 0x70, 0x00 }, 2, ptic_cond_jump,
	  PTD_X86_COND, 0, IP + 2 },
	{ "jg rel8 back", M64, IP, 2, { 0x7f, 0x80 }, 2, ptic_cond_jump,
	  PTD_X86_COND, 0, IP + 2 - 128 },
	{ "je rel32", M64, IP, 6, { 0x0f, 0x84, 0x10, 0, 0, 0 }, 6,
	  ptic_cond_jump, PTD_X86_COND, 0, IP + 6 + 0x10 },
	{ "jnle rel32 back", M64, IP, 6, { 0x0f, 0x8f, 0xf0, 0xff, 0xff, 0xff },
	  6, ptic_cond_jump, PTD_X86_COND, 0, IP + 6 - 0x10 },
	{ "bnd je rel32", M64, IP, 7, { 0xf2, 0x0f, 0x84, 0x10, 0, 0, 0 }, 7,
	  ptic_cond_jump, PTD_X86_COND, 0, IP + 7 + 0x10 },
	{ "jrcxz", M64, IP, 2, { 0xe3, 0x10 }, 2, ptic_cond_jump, PTD_X86_COND,
	  0, IP + 0x12 },
	{ "jecxz (67)", M64, IP, 3, { 0x67, 0xe3, 0x10 }, 3, ptic_cond_jump,
	  PTD_X86_COND, 0, IP + 0x13 },
	{ "loop", M64, IP, 2, { 0xe2, 0xf0 }, 2, ptic_cond_jump, PTD_X86_COND,
	  0, IP + 2 - 16 },
	{ "loope", M64, IP, 2, { 0xe1, 0x01 }, 2, ptic_cond_jump, PTD_X86_COND,
	  0, IP + 3 },
	{ "loopne", M64, IP, 2, { 0xe0, 0x02 }, 2, ptic_cond_jump,
	  PTD_X86_COND, 0, IP + 4 },
	/* near call */
	{ "call rel32", M64, IP, 5, { 0xe8, 0x00, 0x01, 0, 0 }, 5, ptic_call,
	  PTD_X86_CALL_DIRECT, 0, IP + 5 + 0x100 },
	{ "call next", M64, IP, 5, { 0xe8, 0, 0, 0, 0 }, 5, ptic_call,
	  PTD_X86_CALL_DIRECT, 0, IP + 5 },
	{ "call self", M64, IP, 5, { 0xe8, 0xfb, 0xff, 0xff, 0xff }, 5,
	  ptic_call, PTD_X86_CALL_DIRECT, 0, IP },
	{ "bnd call rel32", M64, IP, 6, { 0xf2, 0xe8, 0x10, 0, 0, 0 }, 6,
	  ptic_call, PTD_X86_CALL_DIRECT, 0, IP + 6 + 0x10 },
	{ "call *%rax", M64, IP, 2, { 0xff, 0xd0 }, 2, ptic_call,
	  PTD_X86_CALL_INDIRECT, 0, 0 },
	{ "call *%r11", M64, IP, 3, { 0x41, 0xff, 0xd3 }, 3, ptic_call,
	  PTD_X86_CALL_INDIRECT, 0, 0 },
	{ "call *%rax with REX.R (ignored)", M64, IP, 3, { 0x44, 0xff, 0xd0 },
	  3, ptic_call, PTD_X86_CALL_INDIRECT, 0, 0 },
	{ "call *(%rsp)", M64, IP, 3, { 0xff, 0x14, 0x24 }, 3, ptic_call,
	  PTD_X86_CALL_INDIRECT, 0, 0 },
	{ "call *0(%rip)", M64, IP, 6, { 0xff, 0x15, 0, 0, 0, 0 }, 6,
	  ptic_call, PTD_X86_CALL_INDIRECT, 0, 0 },
	{ "notrack call *%rax", M64, IP, 3, { 0x3e, 0xff, 0xd0 }, 3, ptic_call,
	  PTD_X86_CALL_INDIRECT, 0, 0 },
	{ "bnd call *%rax", M64, IP, 3, { 0xf2, 0xff, 0xd0 }, 3, ptic_call,
	  PTD_X86_CALL_INDIRECT, 0, 0 },
	/* near return */
	{ "ret", M64, IP, 1, { 0xc3 }, 1, ptic_return, PTD_X86_RET, 0, 0 },
	{ "ret $8", M64, IP, 3, { 0xc2, 0x08, 0x00 }, 3, ptic_return,
	  PTD_X86_RET, 0, 0 },
	{ "bnd ret", M64, IP, 2, { 0xf2, 0xc3 }, 2, ptic_return, PTD_X86_RET,
	  0, 0 },
	{ "rep ret", M64, IP, 2, { 0xf3, 0xc3 }, 2, ptic_return, PTD_X86_RET,
	  0, 0 },
	/* near jump */
	{ "jmp rel32", M64, IP, 5, { 0xe9, 0x00, 0x01, 0, 0 }, 5, ptic_jump,
	  PTD_X86_JMP_DIRECT, 0, IP + 5 + 0x100 },
	{ "jmp rel32 with 66 (ignored in 64-bit)", M64, IP, 6,
	  { 0x66, 0xe9, 0x00, 0x01, 0, 0 }, 6, ptic_jump, PTD_X86_JMP_DIRECT,
	  0, IP + 6 + 0x100 },
	{ "jmp rel8 back", M64, IP, 2, { 0xeb, 0x80 }, 2, ptic_jump,
	  PTD_X86_JMP_DIRECT, 0, IP + 2 - 128 },
	{ "bnd jmp rel32", M64, IP, 6, { 0xf2, 0xe9, 0x10, 0, 0, 0 }, 6,
	  ptic_jump, PTD_X86_JMP_DIRECT, 0, IP + 6 + 0x10 },
	{ "jmp *%rax", M64, IP, 2, { 0xff, 0xe0 }, 2, ptic_jump,
	  PTD_X86_JMP_INDIRECT, 0, 0 },
	{ "notrack jmp *%rax", M64, IP, 3, { 0x3e, 0xff, 0xe0 }, 3, ptic_jump,
	  PTD_X86_JMP_INDIRECT, 0, 0 },
	{ "bnd jmp *%rax", M64, IP, 3, { 0xf2, 0xff, 0xe0 }, 3, ptic_jump,
	  PTD_X86_JMP_INDIRECT, 0, 0 },
	{ "notrack jmp *(%rax,%rdx,8)", M64, IP, 4, { 0x3e, 0xff, 0x24, 0xd0 },
	  4, ptic_jump, PTD_X86_JMP_INDIRECT, 0, 0 },
	{ "jmp *%r11", M64, IP, 3, { 0x41, 0xff, 0xe3 }, 3, ptic_jump,
	  PTD_X86_JMP_INDIRECT, 0, 0 },
	{ "jmp *0(%rip)", M64, IP, 6, { 0xff, 0x25, 0, 0, 0, 0 }, 6, ptic_jump,
	  PTD_X86_JMP_INDIRECT, 0, 0 },
	/* far call */
	{ "lcall *(%rsp) (FF /3)", M64, IP, 3, { 0xff, 0x1c, 0x24 }, 3,
	  ptic_far_call, PTD_X86_FAR, 0, 0 },
	{ "rex.w lcall *(%rsp)", M64, IP, 4, { 0x48, 0xff, 0x1c, 0x24 }, 4,
	  ptic_far_call, PTD_X86_FAR, 0, 0 },
	{ "lcall $0x10,$0 (9A, 32-bit)", M32, IP, 7,
	  { 0x9a, 0, 0, 0, 0, 0x10, 0 }, 7, ptic_far_call, PTD_X86_FAR, 0, 0 },
	{ "int $0x80", M64, IP, 2, { 0xcd, 0x80 }, 2, ptic_far_call,
	  PTD_X86_INT, 0, 0 },
	{ "int3", M64, IP, 1, { 0xcc }, 1, ptic_far_call, PTD_X86_INT, 0, 0 },
	{ "int1", M64, IP, 1, { 0xf1 }, 1, ptic_far_call, PTD_X86_INT, 0, 0 },
	{ "into (32-bit)", M32, IP, 1, { 0xce }, 1, ptic_far_call, PTD_X86_INT,
	  0, 0 },
	{ "syscall", M64, IP, 2, { 0x0f, 0x05 }, 2, ptic_far_call,
	  PTD_X86_SYSCALL, 0, 0 },
	{ "sysenter (32-bit)", M32, IP, 2, { 0x0f, 0x34 }, 2, ptic_far_call,
	  PTD_X86_SYSCALL, 0, 0 },
	{ "vmcall", M64, IP, 3, { 0x0f, 0x01, 0xc1 }, 3, ptic_far_call,
	  PTD_X86_FAR, 0, 0 },
	/* far return */
	{ "lret", M64, IP, 1, { 0xcb }, 1, ptic_far_return, PTD_X86_FAR, 0, 0 },
	{ "lretq", M64, IP, 2, { 0x48, 0xcb }, 2, ptic_far_return, PTD_X86_FAR,
	  0, 0 },
	{ "lret $8", M64, IP, 3, { 0xca, 0x08, 0x00 }, 3, ptic_far_return,
	  PTD_X86_FAR, 0, 0 },
	{ "iret", M64, IP, 1, { 0xcf }, 1, ptic_far_return, PTD_X86_FAR, 0, 0 },
	{ "iretq", M64, IP, 2, { 0x48, 0xcf }, 2, ptic_far_return, PTD_X86_FAR,
	  0, 0 },
	{ "sysret", M64, IP, 2, { 0x0f, 0x07 }, 2, ptic_far_return,
	  PTD_X86_FAR, 0, 0 },
	{ "sysretq", M64, IP, 3, { 0x48, 0x0f, 0x07 }, 3, ptic_far_return,
	  PTD_X86_FAR, 0, 0 },
	{ "sysexit (32-bit)", M32, IP, 2, { 0x0f, 0x35 }, 2, ptic_far_return,
	  PTD_X86_FAR, 0, 0 },
	{ "vmlaunch", M64, IP, 3, { 0x0f, 0x01, 0xc2 }, 3, ptic_far_return,
	  PTD_X86_FAR, 0, 0 },
	{ "vmresume", M64, IP, 3, { 0x0f, 0x01, 0xc3 }, 3, ptic_far_return,
	  PTD_X86_FAR, 0, 0 },
	{ "uiret", M64, IP, 4, { 0xf3, 0x0f, 0x01, 0xec }, 4, ptic_far_return,
	  PTD_X86_FAR, 0, 0 },
	/* far jump */
	{ "ljmp *(%rsp) (FF /5)", M64, IP, 3, { 0xff, 0x2c, 0x24 }, 3,
	  ptic_far_jump, PTD_X86_FAR, 0, 0 },
	{ "ljmp $0x10,$0 (EA, 32-bit)", M32, IP, 7,
	  { 0xea, 0, 0, 0, 0, 0x10, 0 }, 7, ptic_far_jump, PTD_X86_FAR, 0, 0 },
	/* ptwrite */
	{ "ptwrite %eax", M64, IP, 4, { 0xf3, 0x0f, 0xae, 0xe0 }, 4,
	  ptic_ptwrite, PTD_X86_PTWRITE, 0, 0 },
	{ "ptwrite %rax", M64, IP, 5, { 0xf3, 0x48, 0x0f, 0xae, 0xe0 }, 5,
	  ptic_ptwrite, PTD_X86_PTWRITE, 0, 0 },
	{ "ptwrite (%rax)", M64, IP, 4, { 0xf3, 0x0f, 0xae, 0x20 }, 4,
	  ptic_ptwrite, PTD_X86_PTWRITE, 0, 0 },
	/* string instructions and REP */
	{ "rep movsb", M64, IP, 2, { 0xf3, 0xa4 }, 2, ptic_other,
	  PTD_X86_OTHER, 1, 0 },
	{ "rep movsq", M64, IP, 3, { 0xf3, 0x48, 0xa5 }, 3, ptic_other,
	  PTD_X86_OTHER, 1, 0 },
	{ "rep stosb", M64, IP, 2, { 0xf3, 0xaa }, 2, ptic_other,
	  PTD_X86_OTHER, 1, 0 },
	{ "rep stosl", M64, IP, 2, { 0xf3, 0xab }, 2, ptic_other,
	  PTD_X86_OTHER, 1, 0 },
	{ "rep lodsb", M64, IP, 2, { 0xf3, 0xac }, 2, ptic_other,
	  PTD_X86_OTHER, 1, 0 },
	{ "repe cmpsb", M64, IP, 2, { 0xf3, 0xa6 }, 2, ptic_other,
	  PTD_X86_OTHER, 1, 0 },
	{ "repne scasb", M64, IP, 2, { 0xf2, 0xae }, 2, ptic_other,
	  PTD_X86_OTHER, 1, 0 },
	{ "repe scasq", M64, IP, 3, { 0xf3, 0x48, 0xaf }, 3, ptic_other,
	  PTD_X86_OTHER, 1, 0 },
	{ "rep insb", M64, IP, 2, { 0xf3, 0x6c }, 2, ptic_other,
	  PTD_X86_OTHER, 1, 0 },
	{ "rep outsb", M64, IP, 2, { 0xf3, 0x6e }, 2, ptic_other,
	  PTD_X86_OTHER, 1, 0 },
	{ "movsb (no rep)", M64, IP, 1, { 0xa4 }, 1, ptic_other, PTD_X86_OTHER,
	  0, 0 },
	{ "pause (F3 90: not a string op)", M64, IP, 2, { 0xf3, 0x90 }, 2,
	  ptic_other, PTD_X86_OTHER, 0, 0 },
	{ "movsd %xmm1,%xmm0 (F2 0F 10: not a string op)", M64, IP, 4,
	  { 0xf2, 0x0f, 0x10, 0xc1 }, 4, ptic_other, PTD_X86_OTHER, 0, 0 },
	{ "popcnt (F3 0F B8)", M64, IP, 4, { 0xf3, 0x0f, 0xb8, 0xc1 }, 4,
	  ptic_other, PTD_X86_OTHER, 0, 0 },
	/* 32-bit and 16-bit modes: sizes and wrapped targets */
	{ "32-bit call rel32", M32, 0x8048000, 5, { 0xe8, 0x10, 0, 0, 0 }, 5,
	  ptic_call, PTD_X86_CALL_DIRECT, 0, 0x8048015 },
	{ "32-bit jmp wraps at 4G", M32, 0xfffffff0, 5,
	  { 0xe9, 0x20, 0, 0, 0 }, 5, ptic_jump, PTD_X86_JMP_DIRECT, 0, 0x15 },
	{ "32-bit jmp rel16 (66) wraps at 64K", M32, 0x1fff0, 4,
	  { 0x66, 0xe9, 0x20, 0x00 }, 4, ptic_jump, PTD_X86_JMP_DIRECT, 0,
	  0x0014 },
	{ "32-bit inc %eax (40: not REX)", M32, IP, 1, { 0x40 }, 1, ptic_other,
	  PTD_X86_OTHER, 0, 0 },
	{ "16-bit call rel16 wraps", M16, 0xfff0, 3, { 0xe8, 0x10, 0x00 }, 3,
	  ptic_call, PTD_X86_CALL_DIRECT, 0, 0x0003 },
	{ "16-bit je rel16", M16, 0x100, 4, { 0x0f, 0x84, 0x10, 0x00 }, 4,
	  ptic_cond_jump, PTD_X86_COND, 0, 0x114 },
	{ "16-bit ret", M16, 0x100, 1, { 0xc3 }, 1, ptic_return, PTD_X86_RET, 0,
	  0 },
	{ "16-bit int $0x21", M16, 0x100, 2, { 0xcd, 0x21 }, 2, ptic_far_call,
	  PTD_X86_INT, 0, 0 },
};

static void test_table(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct case_ *c = &cases[i];
		struct ptd_x86_insn insn;
		int err;

		memset(&insn, 0xcd, sizeof(insn));
		err = ptd_x86_decode(c->bytes, c->len, c->ip, c->mode, &insn);
		if (err != 0) {
			CHECK_FAIL_("%s: decode returned %d (%s)", c->what,
				    err, ptd_strerror(err));
			continue;
		}
		if (insn.size != c->size || insn.iclass != c->iclass ||
		    insn.kind != c->kind || insn.rep != c->rep)
			CHECK_FAIL_("%s: expected size %u %s kind %d rep %d, "
				    "got size %u %s kind %d rep %d",
				    c->what, c->size,
				    ptd_iclass_name(c->iclass), c->kind,
				    c->rep, insn.size,
				    ptd_iclass_name(insn.iclass), insn.kind,
				    insn.rep);
		if ((c->kind == PTD_X86_COND || c->kind == PTD_X86_JMP_DIRECT ||
		     c->kind == PTD_X86_CALL_DIRECT) &&
		    insn.target != c->target)
			CHECK_FAIL_("%s: expected target 0x%" PRIx64
				    ", got 0x%" PRIx64,
				    c->what, c->target, insn.target);
	}
}

/* Decoding from a longer buffer uses only the instruction's bytes. */
static void test_longer_buffer(void)
{
	const uint8_t b[] = { 0xe8, 0x10, 0, 0, 0, 0xc3, 0xc3, 0xc3, 0xc3,
			      0xc3, 0xc3, 0xc3, 0xc3, 0xc3, 0xc3, 0xc3,
			      0xc3, 0xc3, 0xc3, 0xc3 };
	struct ptd_x86_insn insn;

	CHECK_EQ_INT(ptd_x86_decode(b, sizeof(b), 0x400000, ptem_64bit, &insn),
		     0);
	CHECK_EQ_INT(insn.size, 5);
	CHECK_EQ_U64(insn.target, 0x400015);
	CHECK_EQ_INT(ptd_x86_decode(b + 5, sizeof(b) - 5, 0, ptem_64bit,
				    &insn), 0);
	CHECK_EQ_INT(insn.size, 1);
	CHECK_EQ_INT(insn.iclass, ptic_return);
}

struct bad {
	const char *what;
	enum pt_exec_mode mode;
	size_t len;
	uint8_t bytes[20];
	int err;
};

static const struct bad bads[] = {
	{ "empty", M64, 0, { 0 }, -PTD_ETRUNC },
	{ "call rel32 cut", M64, 3, { 0xe8, 0, 0 }, -PTD_ETRUNC },
	{ "0F alone", M64, 1, { 0x0f }, -PTD_ETRUNC },
	{ "REX alone", M64, 1, { 0x48 }, -PTD_ETRUNC },
	{ "prefixes only", M64, 3, { 0x66, 0xf3, 0x2e }, -PTD_ETRUNC },
	{ "mov imm64 cut", M64, 9,
	  { 0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7 }, -PTD_ETRUNC },
	{ "modrm missing", M64, 1, { 0xff }, -PTD_ETRUNC },
	{ "push %es in 64-bit", M64, 1, { 0x06 }, -PTD_EFORMAT },
	{ "salc in 64-bit", M64, 1, { 0xd6 }, -PTD_EFORMAT },
	{ "into in 64-bit", M64, 1, { 0xce }, -PTD_EFORMAT },
	{ "lcall ptr16:32 in 64-bit", M64, 7, { 0x9a, 0, 0, 0, 0, 0x10, 0 },
	  -PTD_EFORMAT },
	{ "0F 04", M64, 2, { 0x0f, 0x04 }, -PTD_EFORMAT },
	{ "XOP vprotb (AMD only, not libipt's)", M64, 6,
	  { 0x8f, 0xe8, 0x78, 0xc0, 0xc1, 0x02 }, -PTD_EFORMAT },
	{ "ud0 %eax,%ecx (libipt: no ModRM)", M64, 3, { 0x0f, 0xff, 0xc8 },
	  -PTD_EFORMAT },
	{ "ud1 %eax,%ecx (libipt: no ModRM)", M64, 3, { 0x0f, 0xb9, 0xc8 },
	  -PTD_EFORMAT },
	{ "lock nop", M64, 2, { 0xf0, 0x90 }, -PTD_EFORMAT },
	{ "call *%rax with FF /3 register form", M64, 2, { 0xff, 0xd8 },
	  -PTD_EFORMAT },
	{ "16 prefixes: over 15 bytes", M64, 17,
	  { 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
	    0x66, 0x66, 0x66, 0x66, 0x66, 0x90 }, -PTD_EFORMAT },
};

static void test_errors(void)
{
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		const struct bad *b = &bads[i];
		struct ptd_x86_insn insn, poison;
		int err;

		memset(&insn, 0xcd, sizeof(insn));
		memset(&poison, 0xcd, sizeof(poison));
		err = ptd_x86_decode(b->bytes, b->len, IP, b->mode, &insn);
		if (err != b->err)
			CHECK_FAIL_("%s: expected %d (%s), got %d (%s)",
				    b->what, b->err, ptd_strerror(b->err), err,
				    ptd_strerror(err));
		if (memcmp(&insn, &poison, sizeof(insn)) != 0)
			CHECK_FAIL_("%s: output written on failure", b->what);
	}
}

static void test_bad_args(void)
{
	const uint8_t nop = 0x90;
	struct ptd_x86_insn insn;

	CHECK_EQ_INT(ptd_x86_decode(&nop, 1, 0, ptem_unknown, &insn), -EINVAL);
	CHECK_EQ_INT(ptd_x86_decode(&nop, 1, 0, (enum pt_exec_mode)77, &insn),
		     -EINVAL);
	CHECK_EQ_INT(ptd_x86_decode(&nop, 1, 0, ptem_64bit, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_x86_decode(NULL, 1, 0, ptem_64bit, &insn), -EINVAL);
	/* A mode error wins over an empty buffer. */
	CHECK_EQ_INT(ptd_x86_decode(&nop, 0, 0, ptem_unknown, &insn), -EINVAL);
}

static void test_iclass_names(void)
{
	CHECK_EQ_STR(ptd_iclass_name(ptic_error), "error");
	CHECK_EQ_STR(ptd_iclass_name(ptic_other), "other");
	CHECK_EQ_STR(ptd_iclass_name(ptic_call), "call");
	CHECK_EQ_STR(ptd_iclass_name(ptic_return), "return");
	CHECK_EQ_STR(ptd_iclass_name(ptic_jump), "jump");
	CHECK_EQ_STR(ptd_iclass_name(ptic_cond_jump), "cond_jump");
	CHECK_EQ_STR(ptd_iclass_name(ptic_far_call), "far_call");
	CHECK_EQ_STR(ptd_iclass_name(ptic_far_return), "far_return");
	CHECK_EQ_STR(ptd_iclass_name(ptic_far_jump), "far_jump");
	CHECK_EQ_STR(ptd_iclass_name(ptic_ptwrite), "ptwrite");
	CHECK_EQ_STR(ptd_iclass_name((enum pt_insn_class)99), "error");
}

/* ---- differential test against libipt's pt_insn_next ------------------ */

#define MAX_FILE (64u << 20)
#define SWEEP_MAX_INSNS 1500000u
#define SWEEP_BASE 0x10000000ull	/* fits 32-bit mode too */

struct code {
	uint8_t *file;
	size_t file_len;
	const uint8_t *text;
	size_t text_len;
};

static void code_free(struct code *c)
{
	free(c->file);
	c->file = NULL;
}

/* Read @path and find its .text section (bounds-checked ELF64 parse).
 * Returns 0 or a negative error. */
static int code_load(const char *path, struct code *ret)
{
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh, *strtab;
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n;

		if (len == cap) {
			uint8_t *nb;

			if (cap >= MAX_FILE) {
				free(buf);
				close(fd);
				return -EFBIG;
			}
			cap = cap ? cap * 2 : (1u << 20);
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			int err = -errno;

			free(buf);
			close(fd);
			return err;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);

	eh = (const Elf64_Ehdr *)buf;
	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    eh->e_shoff > len ||
	    (len - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum ||
	    eh->e_shstrndx >= eh->e_shnum)
		goto bad;

	sh = (const Elf64_Shdr *)(buf + eh->e_shoff);
	strtab = &sh[eh->e_shstrndx];
	if (strtab->sh_offset > len || strtab->sh_size > len - strtab->sh_offset)
		goto bad;
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		const char *name;

		if (sh[i].sh_name >= strtab->sh_size ||
		    strtab->sh_size - sh[i].sh_name < 6)
			continue;
		name = (const char *)buf + strtab->sh_offset + sh[i].sh_name;
		if (memcmp(name, ".text", 6) != 0)
			continue;
		if (sh[i].sh_offset > len || sh[i].sh_size > len - sh[i].sh_offset)
			goto bad;
		ret->file = buf;
		ret->file_len = len;
		ret->text = buf + sh[i].sh_offset;
		ret->text_len = sh[i].sh_size;
		return 0;
	}
bad:
	free(buf);
	return -PTD_EFORMAT;
}

struct expect {
	uint64_t ip;
	uint8_t size;
	enum pt_insn_class iclass;
};

struct sweep {
	const uint8_t *code;
	size_t len;
	uint64_t base;
	struct pt_encoder *enc;
	uint8_t *trace;
	size_t trace_cap;
	struct expect *exp;
	size_t nexp;
	int enc_err;
	/* Where the decoder went on after the last packet it consumed: an
	 * async disable at an ip in [seg_start, here] would bind to the first
	 * arrival there, not to the one we mean. */
	uint64_t seg_start;
};

static int read_code(uint8_t *buffer, size_t size, const struct pt_asid *asid,
		     uint64_t ip, void *ctx)
{
	const struct sweep *s = ctx;
	uint64_t off;

	(void)asid;
	if (ip < s->base || ip - s->base >= s->len)
		return -pte_nomap;
	off = ip - s->base;
	if (size > s->len - off)
		size = s->len - off;
	memcpy(buffer, s->code + off, size);
	return (int)size;
}

static void put(struct sweep *s, enum pt_packet_type type, uint64_t ip,
		enum pt_ip_compression ipc)
{
	struct pt_packet p;
	int err;

	memset(&p, 0, sizeof(p));
	p.type = type;
	p.payload.ip.ip = ip;
	p.payload.ip.ipc = ipc;
	err = pt_enc_next(s->enc, &p);
	if (err < 0 && !s->enc_err)
		s->enc_err = err;
}

static void put_tnt_not_taken(struct sweep *s)
{
	struct pt_packet p;
	int err;

	memset(&p, 0, sizeof(p));
	p.type = ppt_tnt_8;
	p.payload.tnt.bit_size = 1;
	p.payload.tnt.payload = 0;
	err = pt_enc_next(s->enc, &p);
	if (err < 0 && !s->enc_err)
		s->enc_err = err;
}

/* Stop at @stop (not executed) and restart at @resume: an async disable
 * the decoder takes before decoding @stop. */
static void put_detour(struct sweep *s, uint64_t stop, uint64_t resume)
{
	put(s, ppt_fup, stop, pt_ipc_full);
	put(s, ppt_tip_pgd, 0, pt_ipc_suppressed);
	put(s, ppt_tip_pge, resume, pt_ipc_full);
	s->seg_start = resume;
}

/* A direct branch at @ip to @target: let libipt follow it, then detour
 * back to the next instruction.  A backward branch into the stretch the
 * decoder walked since its last packet first gets a separator (stop and
 * resume at @ip).  Returns false for a branch to itself, which cannot be
 * told apart from its own arrival: the caller skips it uncompared. */
static bool put_direct(struct sweep *s, uint64_t ip, uint64_t target,
		       uint64_t next)
{
	if (target == next)
		return true;	/* falls through: nothing to do */
	if (target == ip)
		return false;
	if (target >= s->seg_start && target < ip)
		put_detour(s, ip, ip);
	put_detour(s, target, next);
	return true;
}

/* Walk the code linearly with our decoder and write a trace that makes
 * libipt walk the same instructions: not-taken TNT for conditional
 * branches, a TIP to the next instruction for indirect transfers, and a
 * detour (disable at the target, enable after the branch) for direct
 * jumps and calls.  Bytes we cannot decode are skipped the same way. */
static void sweep_build(struct sweep *s, enum pt_exec_mode mode)
{
	struct pt_packet p;
	uint64_t off = 0;

	memset(&p, 0, sizeof(p));
	p.type = ppt_psb;
	(void)pt_enc_next(s->enc, &p);
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(mode);
	(void)pt_enc_next(s->enc, &p);
	p.type = ppt_psbend;
	(void)pt_enc_next(s->enc, &p);
	put(s, ppt_tip_pge, s->base, pt_ipc_full);
	s->seg_start = s->base;

	while (off < s->len && s->nexp < SWEEP_MAX_INSNS && !s->enc_err) {
		uint64_t ip = s->base + off;
		struct ptd_x86_insn insn;
		int err;

		err = ptd_x86_decode(s->code + off, s->len - off, ip, mode,
				     &insn);
		if (err == -PTD_ETRUNC)
			break;
		if (err < 0) {
			put_detour(s, ip, ip + 1);
			off++;
			continue;
		}
		off += insn.size;
		if ((insn.kind == PTD_X86_JMP_DIRECT ||
		     insn.kind == PTD_X86_CALL_DIRECT) &&
		    !put_direct(s, ip, insn.target, ip + insn.size)) {
			put_detour(s, ip, ip + insn.size);
			continue;
		}
		s->exp[s->nexp++] = (struct expect){ ip, insn.size,
						      insn.iclass };
		switch (insn.kind) {
		case PTD_X86_OTHER:
		case PTD_X86_PTWRITE:
		case PTD_X86_JMP_DIRECT:
		case PTD_X86_CALL_DIRECT:
			break;
		case PTD_X86_COND:
			put_tnt_not_taken(s);
			s->seg_start = ip + insn.size;
			break;
		case PTD_X86_JMP_INDIRECT:
		case PTD_X86_CALL_INDIRECT:
		case PTD_X86_RET:
		case PTD_X86_SYSCALL:
		case PTD_X86_INT:
		case PTD_X86_FAR:
			put(s, ppt_tip, ip + insn.size, pt_ipc_full);
			s->seg_start = ip + insn.size;
			break;
		}
	}
	/* Stop the decoder where we stopped. */
	put(s, ppt_fup, s->base + off, pt_ipc_full);
	put(s, ppt_tip_pgd, 0, pt_ipc_suppressed);
}

/* Decode the trace with pt_insn_next and compare with s->exp. */
static void sweep_check(struct sweep *s, const char *what)
{
	struct pt_config cfg;
	struct pt_insn_decoder *dec;
	struct pt_image *image;
	uint64_t end;
	size_t n = 0;
	unsigned mismatches = 0;
	int status;

	REQUIRE(pt_enc_get_offset(s->enc, &end) == 0);
	pt_config_init(&cfg);
	cfg.begin = s->trace;
	cfg.end = s->trace + end;
	dec = pt_insn_alloc_decoder(&cfg);
	REQUIRE(dec);
	image = pt_insn_get_image(dec);
	REQUIRE(pt_image_set_callback(image, read_code, s) == 0);

	status = pt_insn_sync_forward(dec);
	while (status >= 0) {
		struct pt_insn insn;
		struct pt_event ev;

		while (status & pts_event_pending) {
			status = pt_insn_event(dec, &ev, sizeof(ev));
			if (status < 0)
				break;
		}
		if (status < 0)
			break;
		status = pt_insn_next(dec, &insn, sizeof(insn));
		if (status < 0)
			break;
		if (n >= s->nexp) {
			CHECK_FAIL_("%s: libipt reports an extra insn at "
				    "0x%" PRIx64, what, insn.ip);
			break;
		}
		if (insn.ip != s->exp[n].ip || insn.size != s->exp[n].size ||
		    insn.iclass != s->exp[n].iclass) {
			if (mismatches++ < 10)
				CHECK_FAIL_("%s: insn #%zu: expected ip 0x%"
					    PRIx64 " size %u %s, libipt: ip 0x%"
					    PRIx64 " size %u %s (bytes %02x "
					    "%02x %02x %02x)", what, n,
					    s->exp[n].ip, s->exp[n].size,
					    ptd_iclass_name(s->exp[n].iclass),
					    insn.ip, insn.size,
					    ptd_iclass_name(insn.iclass),
					    insn.raw[0], insn.raw[1],
					    insn.raw[2], insn.raw[3]);
			if (insn.ip != s->exp[n].ip)
				break;	/* out of step: stop */
		}
		n++;
	}
	if (status != -pte_eos)
		CHECK_FAIL_("%s: decoder stopped with %d (%s) after %zu "
			    "insns, expecting ip 0x%" PRIx64, what, status,
			    pt_errstr(pt_errcode(status)), n,
			    n < s->nexp ? s->exp[n].ip : 0);
	CHECK_EQ_U64(n, s->nexp);
	pt_insn_free_decoder(dec);
}

static void sweep_file(const char *path, enum pt_exec_mode mode,
		       bool *found)
{
	struct code c = { 0 };
	struct sweep s;
	struct pt_config cfg;
	char what[256];

	if (code_load(path, &c) < 0)
		return;
	*found = true;

	memset(&s, 0, sizeof(s));
	s.code = c.text;
	s.len = c.text_len;
	s.base = SWEEP_BASE;
	s.trace_cap = 256u << 20;
	s.trace = malloc(s.trace_cap);
	s.exp = calloc(SWEEP_MAX_INSNS, sizeof(*s.exp));
	REQUIRE(s.trace && s.exp);

	pt_config_init(&cfg);
	cfg.begin = s.trace;
	cfg.end = s.trace + s.trace_cap;
	s.enc = pt_alloc_encoder(&cfg);
	REQUIRE(s.enc);

	sweep_build(&s, mode);
	snprintf(what, sizeof(what), "%s .text (%d-bit)", path,
		 mode == ptem_64bit ? 64 : 32);
	CHECK_EQ_INT(s.enc_err, 0);
	CHECK(s.nexp > 1000);
	sweep_check(&s, what);
	fprintf(stderr, "  %s: %zu instructions compared\n", what, s.nexp);

	pt_free_encoder(s.enc);
	free(s.trace);
	free(s.exp);
	code_free(&c);
}

/* Real code: a small program, the C library, and libcrypto for AVX,
 * AVX-512 and other VEX/EVEX encodings (optional: it may be missing). */
static const char *const sweep_files[] = {
	"/bin/ls",
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/lib/x86_64-linux-gnu/libcrypto.so.3",
};

static void test_libipt_differential(void)
{
	bool found = false, found32 = false;

	for (size_t i = 0; i < sizeof(sweep_files) / sizeof(*sweep_files); i++)
		sweep_file(sweep_files[i], ptem_64bit, &found);
	/* The same bytes read as 32-bit code: other lengths, other rules
	 * (no REX, 9A/EA/CE valid). */
	sweep_file("/bin/ls", ptem_32bit, &found32);
	/* /bin/ls exists on every system this builds on. */
	CHECK(found);
	CHECK(found32);
}

int main(void)
{
	RUN(test_table);
	RUN(test_longer_buffer);
	RUN(test_errors);
	RUN(test_bad_args);
	RUN(test_iclass_names);
	RUN(test_libipt_differential);
	return check_done();
}
