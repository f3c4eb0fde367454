/* SPDX-License-Identifier: MIT */
/*
 * x86 instruction classification, in libipt's terms.
 *
 * One decoder serves two users: the software PT source (which packets does
 * this instruction make the hardware emit?) and the block-to-instruction
 * expansion of the decoder (size, class and successor of each instruction in
 * a pt_blk block).  It is built on Zydis, and its classes follow libipt's
 * pt_ild opcode map exactly (libipt/src/pt_ild.c), so that an expanded block
 * equals what pt_insn_next reports field for field:
 *   ptic_cond_jump  Jcc (70-7F, 0F 80-8F), JrCXZ (E3), LOOP/LOOPE/LOOPNE
 *   ptic_call       near CALL E8, FF /2
 *   ptic_return     near RET C3, C2
 *   ptic_jump       near JMP E9, EB, FF /4
 *   ptic_far_call   CALL 9A, FF /3; INT n, INT3, INTO, INT1; SYSCALL,
 *                   SYSENTER; VMCALL
 *   ptic_far_return RET CA, CB; IRET; SYSEXIT, SYSRET; VMLAUNCH, VMRESUME;
 *                   UIRET
 *   ptic_far_jump   JMP EA, FF /5
 *   ptic_ptwrite    PTWRITE
 *   ptic_other      everything else
 */
#ifndef PTD_X86_INSN_H
#define PTD_X86_INSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <intel-pt.h>

enum ptd_x86_kind {
	PTD_X86_OTHER,		/* no control transfer */
	PTD_X86_COND,		/* conditional branch: TNT bit */
	PTD_X86_JMP_DIRECT,	/* near direct jmp: no packet */
	PTD_X86_JMP_INDIRECT,	/* near indirect jmp: TIP */
	PTD_X86_CALL_DIRECT,	/* near direct call: no packet, pushes */
	PTD_X86_CALL_INDIRECT,	/* near indirect call: TIP, pushes */
	PTD_X86_RET,		/* near ret: TNT (compressed) or TIP */
	PTD_X86_SYSCALL,	/* SYSCALL, SYSENTER: enters the kernel */
	PTD_X86_INT,		/* INT n, INT3, INTO, INT1: enters the kernel */
	PTD_X86_FAR,		/* other far transfers (far call/jmp/ret,
				 * IRET, SYSRET...): TIP */
	PTD_X86_PTWRITE,
};

struct ptd_x86_insn {
	uint8_t size;			/* 1..15 */
	enum pt_insn_class iclass;	/* as libipt's pt_ild */
	enum ptd_x86_kind kind;
	bool rep;			/* REP/REPE/REPNE string instruction:
					 * one instruction however many
					 * iterations */
	bool cpuid;			/* CPUID: in a VM the hypervisor runs
					 * it, and may lose the single-step
					 * trap after it (swpt/tracer-stops.c) */
	uint64_t target;		/* COND, JMP_DIRECT, CALL_DIRECT: the
					 * branch target (ip-relative,
					 * resolved against the ip given) */
};

/* Decode the instruction at @ip from the @len bytes at @bytes (up to 15 are
 * used) in execution @mode (ptem_64bit, ptem_32bit, ptem_16bit).
 * Returns 0 and fills *ret.
 * Returns -PTD_EFORMAT if the bytes are not a valid instruction.
 * Returns -PTD_ETRUNC if @len is too short for the instruction.
 * Returns -EINVAL for a bad @mode. */
int ptd_x86_decode(const uint8_t *bytes, size_t len, uint64_t ip,
		   enum pt_exec_mode mode, struct ptd_x86_insn *ret);

/* How the successor of a branch follows from registers and memory, for a
 * tracer that computes it instead of stepping the branch (swpt's branch
 * mode).  Registers are numbered as in the encoding: 0 rax, 1 rcx, 2 rdx,
 * 3 rbx, 4 rsp, 5 rbp, 6 rsi, 7 rdi, 8..15 r8..r15. */
enum ptd_x86_flow_kind {
	PTD_X86_FLOW_NONE,	/* not one of those below */
	PTD_X86_FLOW_JCC,	/* Jcc: taken if condition @cc holds */
	PTD_X86_FLOW_JRCXZ,	/* JRCXZ: taken if rcx is 0 */
	PTD_X86_FLOW_RET,	/* near RET: pops the target, then @imm */
	PTD_X86_FLOW_REG,	/* indirect JMP/CALL to register @base */
	PTD_X86_FLOW_MEM,	/* indirect JMP/CALL through memory */
};

struct ptd_x86_flow {
	enum ptd_x86_flow_kind kind;
	bool call;		/* REG/MEM: a CALL (pushes ip + size) */
	uint8_t cc;		/* JCC: low nibble of the opcode */
	uint16_t imm;		/* RET: bytes released after the pop */
	int8_t base, index;	/* register numbers, -1: none */
	bool rip;		/* MEM: rip-relative (base is the next ip) */
	uint8_t scale;		/* MEM: 1, 2, 4 or 8 */
	uint8_t seg;		/* MEM: 0 none, 1 fs, 2 gs */
	int64_t disp;
};

/* The successor rule of the 64-bit-mode instruction at @ip (@len bytes at
 * @bytes).  Only the forms whose effect is exactly "rip (and rsp, and the
 * return address pushed or popped) change" are described: 64-bit operand
 * and address size, general-purpose registers; anything else is
 * PTD_X86_FLOW_NONE.  Returns 0, or ptd_x86_decode's errors. */
int ptd_x86_decode_flow(const uint8_t *bytes, size_t len, uint64_t ip,
			struct ptd_x86_flow *ret);

/* libipt's name of an instruction class ("other", "call", "return", "jump",
 * "cond_jump", "far_call", "far_return", "far_jump", "ptwrite", "error"). */
const char *ptd_iclass_name(enum pt_insn_class iclass);

#endif
