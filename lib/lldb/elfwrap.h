/* SPDX-License-Identifier: MIT */
/*
 * A minimal ELF file around raw code bytes.
 *
 * Debuggers such as LLDB only load object files, so code that no file holds
 * (a vDSO snapshot, JIT code) is wrapped in the smallest ELF64 x86-64 file
 * that places it where it ran:
 *
 *   offset 0       ELF header
 *   offset 64      one program header: PT_LOAD, R+X, p_vaddr = @vaddr,
 *                  p_filesz = p_memsz = @len, p_align 4096
 *   offset 4096 + (@vaddr % 4096)
 *                  the bytes (so p_offset == p_vaddr modulo the page size)
 *   then           ".shstrtab" contents and three section headers: the null
 *                  section, .text (SHF_ALLOC|SHF_EXECINSTR, covering the
 *                  bytes) and .shstrtab
 *
 * The file is ET_EXEC: it is meant to be loaded at @vaddr, unmoved.
 */
#ifndef PTD_LLDB_ELFWRAP_H
#define PTD_LLDB_ELFWRAP_H

#include <stddef.h>
#include <stdint.h>

#include "common/diag.h"
#include "common/fileio.h"

/* Largest code blob wrapped (a vDSO is 8 KiB, JIT regions are small). */
#define PTD_ELFWRAP_MAX_CODE (256u << 20)

/* Append the ELF file wrapping @len bytes of @code at @vaddr to @out.
 * Returns 0, -EINVAL (NULL @code or @out, @len 0), -PTD_ELIMIT (@len over
 * PTD_ELFWRAP_MAX_CODE, or @vaddr + @len wraps around), or -ENOMEM; @diag
 * says which. */
int ptd_elfwrap_build(const uint8_t *code, size_t len, uint64_t vaddr,
		      struct ptd_buf *out, struct ptd_diag *diag);

/* Build as above and write the file to @path (atomically).  Returns 0, an
 * error of ptd_elfwrap_build, or -errno naming @path in @diag. */
int ptd_elfwrap_write(const char *path, const uint8_t *code, size_t len,
		      uint64_t vaddr, struct ptd_diag *diag);

#endif
