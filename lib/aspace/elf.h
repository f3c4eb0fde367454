/* SPDX-License-Identifier: MIT */
/*
 * ELF files as code sources: their loadable segments (by virtual address,
 * with where each lies in the file) and their GNU build-id.  Used to load a
 * file's code into an image as ptxed's --elf does, and to map kernel code
 * (a kcore copy or a vmlinux) by address.
 */
#ifndef PTD_ASPACE_ELF_H
#define PTD_ASPACE_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aspace/image.h"
#include "common/diag.h"

/* Longest GNU build-id read, in bytes (perf's is 20). */
#define PTD_ELF_BUILD_ID_MAX 64u
/* Most segments read from one file. */
#define PTD_ELF_MAX_SEGMENTS 4096u

/* A PT_LOAD segment with bytes in the file. */
struct ptd_elf_segment {
	uint64_t vaddr;
	uint64_t offset;	/* of vaddr in the file */
	uint64_t size;		/* p_filesz; inside the file */
	bool exec;		/* PF_X */
};

/* An ELF file's loadable segments and build-id (free with
 * ptd_elf_info_fini). */
struct ptd_elf_info {
	uint16_t type;		/* ET_EXEC, ET_DYN, ET_CORE... */
	struct ptd_elf_segment *seg;	/* program header order */
	size_t nseg;
	uint64_t lowest_vaddr;	/* of every PT_LOAD; UINT64_MAX: none */
	/* GNU build-id as lowercase hex ("" if the file has none), from
	 * its PT_NOTE segments or SHT_NOTE sections. */
	char build_id[2 * PTD_ELF_BUILD_ID_MAX + 1];
};

/* Read @path's PT_LOAD segments with bytes in the file (p_filesz > 0) and
 * its build-id.  Every segment is checked to lie inside the file.  Returns
 * 0, or -PTD_EFORMAT (not an ELF, unreadable headers, a segment outside the
 * file), -PTD_ELIMIT (more than PTD_ELF_MAX_SEGMENTS), -errno, -ENOMEM,
 * with a message naming the file in @diag. */
int ptd_elf_read_info(const char *path, struct ptd_elf_info *ret,
		      struct ptd_diag *diag);
void ptd_elf_info_fini(struct ptd_elf_info *info);

/* The GNU build-id of the ELF file open at @fd as hex into @hex (at least
 * 2 * PTD_ELF_BUILD_ID_MAX + 1 bytes).  Returns true if it has one. */
bool ptd_elf_build_id_fd(int fd, char *hex, size_t hexsz);

/* This process's vDSO (the one every process of this machine maps), copied
 * into a new memfd: returns the fd (CLOEXEC; the caller closes it) with
 * the vDSO's build-id as hex in @hex ("" if none), or -ENOENT (no vDSO),
 * -PTD_EFORMAT (its headers do not say its size), -errno. */
int ptd_elf_own_vdso(char *hex, size_t hexsz);

/* Map the executable PT_LOAD segments of @path into @img.  Without a base
 * (@has_base false) segments go to their p_vaddr; with one, the lowest
 * PT_LOAD (page-aligned) goes to @base and the rest keep their distance.
 * Returns the number of segments mapped (> 0), or -PTD_EFORMAT (not an ELF,
 * bad headers, a segment outside the file), -PTD_ENOIMAGE (no executable
 * segment), -errno, with a message naming the file in @diag. */
int ptd_elf_load(struct ptd_image *img, const char *path, bool has_base,
		 uint64_t base, struct ptd_diag *diag);

#endif
