/* SPDX-License-Identifier: MIT */
/*
 * Symbol tables: the functions of one module, looked up by address.
 *
 * A table is filled from one or more sources, then sealed, then looked up:
 *  - ELF files (ptd_symtab_add_elf): function symbols (STT_FUNC,
 *    STT_GNU_IFUNC) of .symtab and .dynsym, and the PLT entries named as
 *    perf names them, "name@plt", from .rela.plt (.rel.plt) and .plt.sec,
 *    else .plt (x86: 16-byte entries, .plt's first one the resolver's).
 *    Addresses are the file's virtual addresses; the main file's PT_LOAD
 *    segments turn a file offset into one (ptd_symtab_vaddr_of).  A
 *    separate debug file (objcopy --only-keep-debug) adds its .symtab.
 *  - perf map files (ptd_symtab_add_perfmap: "/tmp/perf-PID.map", what
 *    JITs write for perf): "START SIZE NAME" lines, absolute addresses.
 *
 * Every input is untrusted.  Section sizes, offsets and entry sizes are
 * checked against the file, string indices against their table, counts
 * against PTD_SYMTAB_MAX_SYMS; a table that fails a check is refused whole
 * with a message naming the file, the section (index and file offset) and
 * the entry.  A perf map line that fails is skipped and counted; the first
 * is named by its line number.
 *
 * A sealed table is read-only: lookups from several threads are safe.
 */
#ifndef PTD_SYM_SYMTAB_H
#define PTD_SYM_SYMTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aspace/elf.h"
#include "common/diag.h"

/* Most symbols one table holds, from all its sources. */
#define PTD_SYMTAB_MAX_SYMS (1u << 22)
/* Most bytes of names one table holds. */
#define PTD_SYMTAB_MAX_STRBYTES (256u << 20)
/* Longer names are cut to this many bytes. */
#define PTD_SYMTAB_MAX_NAME 1024u
/* Most bytes of a perf map file, and of one of its lines. */
#define PTD_PERFMAP_MAX_BYTES (64u << 20)
#define PTD_PERFMAP_MAX_LINE 4096u

struct ptd_sym {
	uint64_t addr;		/* file vaddr (ELF) or absolute (perf map) */
	uint64_t size;		/* 0: unknown, reaches the next symbol */
	const char *name;	/* lives as long as the table */
};

struct ptd_symtab;

/* What an ELF file says about its symbols and where its debug file is. */
struct ptd_elf_syminfo {
	bool has_symtab;	/* a .symtab (not stripped) */
	char build_id[2 * PTD_ELF_BUILD_ID_MAX + 1];	/* hex, "" if none */
	char debuglink[256];	/* .gnu_debuglink's file name, "" if none */
	uint32_t debuglink_crc;
};

/* Allocate an empty table into *@ret.  Returns 0 or -ENOMEM. */
int ptd_symtab_new(struct ptd_symtab **ret);
void ptd_symtab_free(struct ptd_symtab *t);

/* Only the symbols of .symtab (a debug file: its code sections are
 * NOBITS, its segments and PLT are the main file's). */
#define PTD_SYMTAB_DEBUG_FILE 1u

/* Add the symbols of the ELF file open at @fd (read with read(), never
 * mapped), named @name in messages.  Without PTD_SYMTAB_DEBUG_FILE also
 * its PT_LOAD segments and PLT entries.  *@ret_info (may be NULL) says
 * what the file holds.  Returns 0, or with a message in @diag:
 *  -PTD_EFORMAT   not an ELF file; a symbol table, string table or PLT
 *                 section that lies outside the file, has a bad entry
 *                 size or link, or a name index outside its strings
 *  -PTD_ELIMIT    more than PTD_SYMTAB_MAX_SYMS symbols or
 *                 PTD_SYMTAB_MAX_STRBYTES bytes of names
 *  -EINVAL        the table is sealed
 *  -ENOMEM, -errno
 * Nothing is added on failure. */
int ptd_symtab_add_elf(struct ptd_symtab *t, int fd, const char *name,
		       unsigned flags, struct ptd_elf_syminfo *ret_info,
		       struct ptd_diag *diag);

/* Add the lines of the perf map text @text (@len bytes), named @name.
 * Each line is "START SIZE NAME": START and SIZE hex (an optional "0x"),
 * SIZE > 0, the range inside 64 bits, NAME the rest of the line, not
 * empty, without NUL bytes, at most PTD_PERFMAP_MAX_LINE bytes the line.
 * A line that is not is skipped and counted in *@ret_bad (may be NULL);
 * the first one is described in @diag ("NAME:LINE: why").  Returns 0,
 * -PTD_ELIMIT, -EINVAL (sealed), -ENOMEM. */
int ptd_symtab_add_perfmap(struct ptd_symtab *t, const char *name,
			   const char *text, size_t len, unsigned *ret_bad,
			   struct ptd_diag *diag);

/* Sort and drop duplicates (at one address: the symbol of .symtab before
 * .dynsym, global before weak before local, sized before unsized).  No
 * more can be added after. */
void ptd_symtab_seal(struct ptd_symtab *t);

/* The symbol containing @addr in a sealed table and @addr's offset in it
 * (*@ret_off, may be NULL), or NULL if none does: the last symbol at or
 * below @addr that covers it (its size, or up to the next symbol when it
 * has none). */
const struct ptd_sym *ptd_symtab_lookup(const struct ptd_symtab *t,
					uint64_t addr, uint64_t *ret_off);

/* Bytes @t holds (its symbols, names and segments), for charging it. */
size_t ptd_symtab_bytes(const struct ptd_symtab *t);

/* The symbols of a sealed table, by address. */
size_t ptd_symtab_count(const struct ptd_symtab *t);
const struct ptd_sym *ptd_symtab_at(const struct ptd_symtab *t, size_t i);

/* By name, before ptd_symtab_seal (which keeps one name per address, so
 * an alias would be gone): how many different addresses the symbols named
 * @name have (0, 1, or 2 for two or more: ambiguous), and the address of
 * the first in *@ret_addr (may be NULL). */
unsigned ptd_symtab_find(const struct ptd_symtab *t, const char *name,
			 uint64_t *ret_addr);

/* The file offset of vaddr @vaddr by the main file's PT_LOAD segments
 * (inside their bytes in the file).  Returns 0, or -ENOENT. */
int ptd_symtab_offset_of(const struct ptd_symtab *t, uint64_t vaddr,
			 uint64_t *ret_off);

/* The vaddr at file offset @off by the main file's PT_LOAD segments.
 * Returns 0, or -ENOENT if no segment holds @off. */
int ptd_symtab_vaddr_of(const struct ptd_symtab *t, uint64_t off,
			uint64_t *ret_vaddr);

#endif
