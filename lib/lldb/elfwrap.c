/* SPDX-License-Identifier: MIT */
#include "lldb/elfwrap.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#define WRAP_PAGE 4096u

/* Section header string table: "\0.text\0.shstrtab\0". */
static const char shstrtab[] = "\0.text\0.shstrtab";
#define NAME_TEXT 1
#define NAME_SHSTRTAB 7

/* Pad @b with zero bytes up to length @len. */
static int pad_to(struct ptd_buf *b, size_t base, size_t len)
{
	static const uint8_t zero[64];

	while (b->len - base < len) {
		size_t n = len - (b->len - base);
		int r = ptd_buf_append(b, zero, n < sizeof(zero) ? n
								 : sizeof(zero));
		if (r < 0)
			return r;
	}
	return 0;
}

static void fill_ehdr(Elf64_Ehdr *eh, uint64_t entry, uint64_t shoff)
{
	memset(eh, 0, sizeof(*eh));
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_ident[EI_OSABI] = ELFOSABI_SYSV;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_entry = entry;
	eh->e_phoff = sizeof(Elf64_Ehdr);
	eh->e_shoff = shoff;
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_phentsize = sizeof(Elf64_Phdr);
	eh->e_phnum = 1;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = 3;
	eh->e_shstrndx = 2;
}

int ptd_elfwrap_build(const uint8_t *code, size_t len, uint64_t vaddr,
		      struct ptd_buf *out, struct ptd_diag *diag)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	Elf64_Shdr sh[3];
	uint64_t code_off = WRAP_PAGE + (vaddr % WRAP_PAGE);
	uint64_t str_off = code_off + len;
	/* section headers 8-byte aligned after the string table */
	uint64_t sh_off = (str_off + sizeof(shstrtab) + 7) & ~(uint64_t)7;
	size_t base;
	int r;

	if (!code || !out || !len)
		return ptd_diagf(diag, -EINVAL, "elfwrap: no code to wrap");
	if (len > PTD_ELFWRAP_MAX_CODE || vaddr + len < vaddr)
		return ptd_diagf(diag, -PTD_ELIMIT,
				 "elfwrap: %zu bytes at 0x%" PRIx64
				 " cannot be wrapped (limit %u bytes, no "
				 "wrap-around)", len, vaddr,
				 PTD_ELFWRAP_MAX_CODE);
	base = out->len;
	r = ptd_buf_reserve(out, sh_off + sizeof(sh));
	if (r < 0)
		return ptd_diagf(diag, r, "elfwrap: out of memory");

	fill_ehdr(&eh, vaddr, sh_off);
	memset(&ph, 0, sizeof(ph));
	ph.p_type = PT_LOAD;
	ph.p_flags = PF_R | PF_X;
	ph.p_offset = code_off;
	ph.p_vaddr = vaddr;
	ph.p_paddr = vaddr;
	ph.p_filesz = len;
	ph.p_memsz = len;
	ph.p_align = WRAP_PAGE;

	memset(sh, 0, sizeof(sh));
	sh[1].sh_name = NAME_TEXT;
	sh[1].sh_type = SHT_PROGBITS;
	sh[1].sh_flags = SHF_ALLOC | SHF_EXECINSTR;
	sh[1].sh_addr = vaddr;
	sh[1].sh_offset = code_off;
	sh[1].sh_size = len;
	sh[1].sh_addralign = 1;
	sh[2].sh_name = NAME_SHSTRTAB;
	sh[2].sh_type = SHT_STRTAB;
	sh[2].sh_offset = str_off;
	sh[2].sh_size = sizeof(shstrtab);
	sh[2].sh_addralign = 1;

	/* Reserved above: none of these appends can fail. */
	(void)ptd_buf_append(out, &eh, sizeof(eh));
	(void)ptd_buf_append(out, &ph, sizeof(ph));
	(void)pad_to(out, base, code_off);
	(void)ptd_buf_append(out, code, len);
	(void)ptd_buf_append(out, shstrtab, sizeof(shstrtab));
	(void)pad_to(out, base, sh_off);
	(void)ptd_buf_append(out, sh, sizeof(sh));
	return 0;
}

int ptd_elfwrap_write(const char *path, const uint8_t *code, size_t len,
		      uint64_t vaddr, struct ptd_diag *diag)
{
	struct ptd_buf b = { 0 };
	int r;

	if (!path)
		return -EINVAL;
	r = ptd_elfwrap_build(code, len, vaddr, &b, diag);
	if (r == 0) {
		r = ptd_file_write_atomic(path, b.data, b.len);
		if (r < 0)
			(void)ptd_diagf(diag, r, "cannot write '%s': %s", path,
					ptd_strerror(r));
	}
	ptd_buf_fini(&b);
	return r;
}
