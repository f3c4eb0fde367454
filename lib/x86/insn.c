/* SPDX-License-Identifier: MIT */
/*
 * x86 instruction classification on top of Zydis.
 *
 * Zydis gives the length and the raw encoding (opcode map, opcode, ModRM,
 * prefixes); the class is then derived from those raw fields with the very
 * rules of libipt 2.0.5's pt_instruction_decode() (libipt/src/pt_ild.c), not
 * from Zydis' mnemonics: libipt looks at opcode bytes only, ignores VEX/EVEX
 * and maps other than 0F, and takes ModRM.reg without REX.R.  Matching its
 * rules, not the architecture's, is what makes an expanded block equal to
 * pt_insn_next field for field.
 */
#include "x86/insn.h"

#include <errno.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "common/diag.h"

/* libipt's opcode maps that carry interesting opcodes. */
enum ild_map {
	ILD_MAP_0,	/* one-byte opcodes */
	ILD_MAP_1,	/* 0F xx */
	ILD_MAP_OTHER,	/* 0F 38, 0F 3A, 3DNow!, VEX/EVEX/XOP: all "other" */
};

/* The raw view of one instruction that libipt's classifier looks at. */
struct ild_view {
	enum ild_map map;
	uint8_t opcode;
	uint8_t modrm;		/* whole ModRM byte; 0 if none */
	uint8_t reg;		/* ModRM.reg, without REX.R */
	uint8_t mod;
	bool f3;		/* an F3 prefix anywhere among the prefixes */
	bool osz;		/* a 66 prefix anywhere among the prefixes */
};

static void ild_view_init(struct ild_view *v, const ZydisDecodedInstruction *z)
{
	memset(v, 0, sizeof(*v));

	if (z->encoding != ZYDIS_INSTRUCTION_ENCODING_LEGACY)
		v->map = ILD_MAP_OTHER;
	else if (z->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT)
		v->map = ILD_MAP_0;
	else if (z->opcode_map == ZYDIS_OPCODE_MAP_0F)
		v->map = ILD_MAP_1;
	else
		v->map = ILD_MAP_OTHER;

	v->opcode = z->opcode;
	if (z->attributes & ZYDIS_ATTRIB_HAS_MODRM) {
		v->mod = z->raw.modrm.mod;
		v->reg = z->raw.modrm.reg;
		v->modrm = (uint8_t)((z->raw.modrm.mod << 6) |
				     (z->raw.modrm.reg << 3) |
				     z->raw.modrm.rm);
	}

	for (unsigned i = 0; i < z->raw.prefix_count; i++) {
		if (z->raw.prefixes[i].value == 0xf3)
			v->f3 = true;
		else if (z->raw.prefixes[i].value == 0x66)
			v->osz = true;
	}
}

/* Map 0 opcodes, as pt_ild.c's switch (and its 70-7F Jcc range). */
static void classify_map0(const struct ild_view *v, enum pt_insn_class *cls,
			  enum ptd_x86_kind *kind)
{
	uint8_t op = v->opcode;

	if (op >= 0x70 && op <= 0x7f) {
		*cls = ptic_cond_jump;
		*kind = PTD_X86_COND;
		return;
	}

	switch (op) {
	case 0xe0: /* LOOPNE */
	case 0xe1: /* LOOPE */
	case 0xe2: /* LOOP */
	case 0xe3: /* JrCXZ */
		*cls = ptic_cond_jump;
		*kind = PTD_X86_COND;
		return;
	case 0xe8:
		*cls = ptic_call;
		*kind = PTD_X86_CALL_DIRECT;
		return;
	case 0xe9:
	case 0xeb:
		*cls = ptic_jump;
		*kind = PTD_X86_JMP_DIRECT;
		return;
	case 0xc2:
	case 0xc3:
		*cls = ptic_return;
		*kind = PTD_X86_RET;
		return;
	case 0xca:
	case 0xcb:
	case 0xcf: /* IRET */
		*cls = ptic_far_return;
		*kind = PTD_X86_FAR;
		return;
	case 0x9a:
		*cls = ptic_far_call;
		*kind = PTD_X86_FAR;
		return;
	case 0xea:
		*cls = ptic_far_jump;
		*kind = PTD_X86_FAR;
		return;
	case 0xcc: /* INT3 */
	case 0xcd: /* INT n */
	case 0xce: /* INTO */
	case 0xf1: /* INT1 */
		*cls = ptic_far_call;
		*kind = PTD_X86_INT;
		return;
	case 0xff:
		/* ModRM.reg selects; REX.R is not part of it (libipt uses
		 * the raw field too). */
		switch (v->reg) {
		case 2:
			*cls = ptic_call;
			*kind = PTD_X86_CALL_INDIRECT;
			return;
		case 3:
			*cls = ptic_far_call;
			*kind = PTD_X86_FAR;
			return;
		case 4:
			*cls = ptic_jump;
			*kind = PTD_X86_JMP_INDIRECT;
			return;
		case 5:
			*cls = ptic_far_jump;
			*kind = PTD_X86_FAR;
			return;
		default:
			return;
		}
	default:
		return;
	}
}

/* Map 1 (0F xx) opcodes. */
static void classify_map1(const struct ild_view *v, enum pt_insn_class *cls,
			  enum ptd_x86_kind *kind)
{
	uint8_t op = v->opcode;

	if (op >= 0x80 && op <= 0x8f) {
		*cls = ptic_cond_jump;
		*kind = PTD_X86_COND;
		return;
	}

	switch (op) {
	case 0x05: /* SYSCALL */
	case 0x34: /* SYSENTER */
		*cls = ptic_far_call;
		*kind = PTD_X86_SYSCALL;
		return;
	case 0x07: /* SYSRET */
	case 0x35: /* SYSEXIT */
		*cls = ptic_far_return;
		*kind = PTD_X86_FAR;
		return;
	case 0x01:
		/* libipt matches the whole ModRM byte and no prefix (so
		 * UIRET is F3 0F 01 EC or plain 0F 01 EC alike). */
		switch (v->modrm) {
		case 0xc1: /* VMCALL */
			*cls = ptic_far_call;
			*kind = PTD_X86_FAR;
			return;
		case 0xc2: /* VMLAUNCH */
		case 0xc3: /* VMRESUME */
		case 0xec: /* UIRET */
			*cls = ptic_far_return;
			*kind = PTD_X86_FAR;
			return;
		default:
			return;
		}
	case 0xae:
		/* PTWRITE: F3 (no 66) 0F AE /4. */
		if (v->f3 && !v->osz && v->reg == 4) {
			*cls = ptic_ptwrite;
			*kind = PTD_X86_PTWRITE;
		}
		return;
	default:
		return;
	}
}

/* String instructions (map 0): INS 6C/6D, OUTS 6E/6F, MOVS A4/A5,
 * CMPS A6/A7, STOS AA/AB, LODS AC/AD, SCAS AE/AF. */
static bool is_string_op(const struct ild_view *v)
{
	if (v->map != ILD_MAP_0)
		return false;
	return (v->opcode >= 0x6c && v->opcode <= 0x6f) ||
	       (v->opcode >= 0xa4 && v->opcode <= 0xa7) ||
	       (v->opcode >= 0xaa && v->opcode <= 0xaf);
}

static bool has_rep_prefix(const ZydisDecodedInstruction *z)
{
	/* Any F2 or F3 repeats a string instruction (F2 on MOVS acts as
	 * REP, as the hardware does). */
	for (unsigned i = 0; i < z->raw.prefix_count; i++) {
		uint8_t p = z->raw.prefixes[i].value;

		if (p == 0xf2 || p == 0xf3)
			return true;
	}
	return false;
}

/* The target of a direct branch: ip + size + displacement, wrapped to the
 * operand size outside 64-bit mode (EIP/IP wrap as the hardware's do). */
static uint64_t branch_target(const ZydisDecodedInstruction *z, uint64_t ip,
			      enum pt_exec_mode mode)
{
	int64_t disp = 0;
	uint64_t target;

	if (z->raw.imm[0].is_relative)
		disp = z->raw.imm[0].value.s;
	else if (z->raw.imm[1].is_relative)
		disp = z->raw.imm[1].value.s;

	target = ip + z->length + (uint64_t)disp;
	if (mode == ptem_64bit)
		return target;
	if (z->operand_width == 16)
		return target & 0xffffull;
	return target & 0xffffffffull;
}

static int zydis_mode(enum pt_exec_mode mode, ZydisMachineMode *ret_mm,
		      ZydisStackWidth *ret_sw)
{
	switch (mode) {
	case ptem_64bit:
		*ret_mm = ZYDIS_MACHINE_MODE_LONG_64;
		*ret_sw = ZYDIS_STACK_WIDTH_64;
		return 0;
	case ptem_32bit:
		*ret_mm = ZYDIS_MACHINE_MODE_LEGACY_32;
		*ret_sw = ZYDIS_STACK_WIDTH_32;
		return 0;
	case ptem_16bit:
		*ret_mm = ZYDIS_MACHINE_MODE_LEGACY_16;
		*ret_sw = ZYDIS_STACK_WIDTH_16;
		return 0;
	case ptem_unknown:
		return -EINVAL;
	}
	return -EINVAL;
}

int ptd_x86_decode(const uint8_t *bytes, size_t len, uint64_t ip,
		   enum pt_exec_mode mode, struct ptd_x86_insn *ret)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction z;
	ZydisMachineMode mm;
	ZydisStackWidth sw;
	ZyanStatus st;
	struct ild_view v;
	struct ptd_x86_insn out;
	int err;

	if (!ret || (!bytes && len))
		return -EINVAL;
	err = zydis_mode(mode, &mm, &sw);
	if (err < 0)
		return err;
	if (len == 0)
		return -PTD_ETRUNC;
	if (len > ZYDIS_MAX_INSTRUCTION_LENGTH)
		len = ZYDIS_MAX_INSTRUCTION_LENGTH;

	/* Initialising a decoder only stores the mode: cheap enough to do
	 * per call, and it keeps this function free of shared state. */
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, mm, sw)))
		return -EINVAL;

	st = ZydisDecoderDecodeInstruction(&dec, NULL, bytes, len, &z);
	if (st == ZYDIS_STATUS_NO_MORE_DATA)
		return -PTD_ETRUNC;
	if (!ZYAN_SUCCESS(st))
		return -PTD_EFORMAT;
	/* Encodings libipt's length decoder does not know, and that never
	 * complete on a CPU with Intel PT (they raise #UD, so no trace ever
	 * reports them as executed): refuse them rather than disagree with
	 * libipt on the size.
	 *  - XOP (AMD only): libipt reads 8F as POP;
	 *  - UD0 (0F FF /r), UD1 (0F B9 /r): libipt gives them no ModRM. */
	if (z.encoding == ZYDIS_INSTRUCTION_ENCODING_XOP ||
	    z.mnemonic == ZYDIS_MNEMONIC_UD0 || z.mnemonic == ZYDIS_MNEMONIC_UD1)
		return -PTD_EFORMAT;

	ild_view_init(&v, &z);

	memset(&out, 0, sizeof(out));
	out.size = z.length;
	out.iclass = ptic_other;
	out.kind = PTD_X86_OTHER;
	if (v.map == ILD_MAP_0)
		classify_map0(&v, &out.iclass, &out.kind);
	else if (v.map == ILD_MAP_1)
		classify_map1(&v, &out.iclass, &out.kind);

	out.rep = is_string_op(&v) && has_rep_prefix(&z);
	out.cpuid = z.mnemonic == ZYDIS_MNEMONIC_CPUID;

	switch (out.kind) {
	case PTD_X86_COND:
	case PTD_X86_JMP_DIRECT:
	case PTD_X86_CALL_DIRECT:
		out.target = branch_target(&z, ip, mode);
		break;
	case PTD_X86_OTHER:
	case PTD_X86_JMP_INDIRECT:
	case PTD_X86_CALL_INDIRECT:
	case PTD_X86_RET:
	case PTD_X86_SYSCALL:
	case PTD_X86_INT:
	case PTD_X86_FAR:
	case PTD_X86_PTWRITE:
		break;
	}

	*ret = out;
	return 0;
}

/* A 64-bit general-purpose register's number, or -1. */
static int gpr64(ZydisRegister r)
{
	if (ZydisRegisterGetClass(r) != ZYDIS_REGCLASS_GPR64)
		return -1;
	return ZydisRegisterGetId(r);
}

static int flow_operand(const ZydisDecodedOperand *op,
			struct ptd_x86_flow *f)
{
	int b, i;

	if (op->type == ZYDIS_OPERAND_TYPE_REGISTER) {
		b = gpr64(op->reg.value);
		if (b < 0)
			return -1;
		f->kind = PTD_X86_FLOW_REG;
		f->base = (int8_t)b;
		return 0;
	}
	if (op->type != ZYDIS_OPERAND_TYPE_MEMORY ||
	    op->mem.type != ZYDIS_MEMOP_TYPE_MEM || op->size != 64)
		return -1;
	if (op->mem.segment == ZYDIS_REGISTER_FS)
		f->seg = 1;
	else if (op->mem.segment == ZYDIS_REGISTER_GS)
		f->seg = 2;
	else if (op->mem.segment != ZYDIS_REGISTER_NONE &&
		 op->mem.segment != ZYDIS_REGISTER_CS &&
		 op->mem.segment != ZYDIS_REGISTER_DS &&
		 op->mem.segment != ZYDIS_REGISTER_ES &&
		 op->mem.segment != ZYDIS_REGISTER_SS)
		return -1;
	if (op->mem.base == ZYDIS_REGISTER_RIP) {
		f->rip = true;
		b = -1;
	} else if (op->mem.base == ZYDIS_REGISTER_NONE) {
		b = -1;
	} else if ((b = gpr64(op->mem.base)) < 0) {
		return -1;
	}
	if (op->mem.index == ZYDIS_REGISTER_NONE)
		i = -1;
	else if ((i = gpr64(op->mem.index)) < 0)
		return -1;
	f->kind = PTD_X86_FLOW_MEM;
	f->base = (int8_t)b;
	f->index = (int8_t)i;
	f->scale = op->mem.scale ? op->mem.scale : 1;
	f->disp = op->mem.disp.has_displacement ? op->mem.disp.value : 0;
	return 0;
}

int ptd_x86_decode_flow(const uint8_t *bytes, size_t len, uint64_t ip,
			struct ptd_x86_flow *ret)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecoderContext ctx;
	ZydisDecodedInstruction z;
	struct ptd_x86_insn insn;
	struct ptd_x86_flow f;
	ZydisDecoder dec;
	int r;

	r = ptd_x86_decode(bytes, len, ip, ptem_64bit, &insn);
	if (r < 0)
		return r;
	memset(&f, 0, sizeof(f));
	f.base = f.index = -1;
	*ret = f;
	if (insn.kind != PTD_X86_COND && insn.kind != PTD_X86_RET &&
	    insn.kind != PTD_X86_JMP_INDIRECT &&
	    insn.kind != PTD_X86_CALL_INDIRECT)
		return 0;
	if (len > ZYDIS_MAX_INSTRUCTION_LENGTH)
		len = ZYDIS_MAX_INSTRUCTION_LENGTH;
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					   ZYDIS_STACK_WIDTH_64)) ||
	    !ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, &ctx, bytes, len,
							&z)))
		return 0;
	if (z.encoding != ZYDIS_INSTRUCTION_ENCODING_LEGACY ||
	    z.address_width != 64)
		return 0;
	switch (insn.kind) {
	case PTD_X86_COND:
		if (z.mnemonic == ZYDIS_MNEMONIC_JRCXZ) {
			f.kind = PTD_X86_FLOW_JRCXZ;
		} else if ((z.opcode_map == ZYDIS_OPCODE_MAP_DEFAULT &&
			    z.opcode >= 0x70 && z.opcode <= 0x7f) ||
			   (z.opcode_map == ZYDIS_OPCODE_MAP_0F &&
			    z.opcode >= 0x80 && z.opcode <= 0x8f)) {
			f.kind = PTD_X86_FLOW_JCC;
			f.cc = z.opcode & 0xf;
		}
		break;
	case PTD_X86_RET:
		if (z.operand_width != 64)
			break;
		f.kind = PTD_X86_FLOW_RET;
		if (z.opcode == 0xc2)
			f.imm = (uint16_t)z.raw.imm[0].value.u;
		break;
	case PTD_X86_JMP_INDIRECT:
	case PTD_X86_CALL_INDIRECT:
		if (z.operand_width != 64 ||
		    (z.mnemonic != ZYDIS_MNEMONIC_JMP &&
		     z.mnemonic != ZYDIS_MNEMONIC_CALL) ||
		    !ZYAN_SUCCESS(ZydisDecoderDecodeOperands(
			    &dec, &ctx, &z, ops, z.operand_count_visible)) ||
		    z.operand_count_visible < 1 || flow_operand(&ops[0], &f) < 0) {
			f.kind = PTD_X86_FLOW_NONE;
			break;
		}
		f.call = insn.kind == PTD_X86_CALL_INDIRECT;
		break;
	case PTD_X86_OTHER:
	case PTD_X86_JMP_DIRECT:
	case PTD_X86_CALL_DIRECT:
	case PTD_X86_SYSCALL:
	case PTD_X86_INT:
	case PTD_X86_FAR:
	case PTD_X86_PTWRITE:
		break;
	}
	*ret = f;
	return 0;
}

const char *ptd_iclass_name(enum pt_insn_class iclass)
{
	/* No default: -Wswitch-enum flags a class added to libipt. */
	switch (iclass) {
	case ptic_error:
		return "error";
	case ptic_other:
		return "other";
	case ptic_call:
		return "call";
	case ptic_return:
		return "return";
	case ptic_jump:
		return "jump";
	case ptic_cond_jump:
		return "cond_jump";
	case ptic_far_call:
		return "far_call";
	case ptic_far_return:
		return "far_return";
	case ptic_far_jump:
		return "far_jump";
	case ptic_ptwrite:
		return "ptwrite";
	}
	return "error";
}
