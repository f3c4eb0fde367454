/* SPDX-License-Identifier: MIT */
/*
 * Loading the code of an ELF file into an image, as ptxed's --elf does:
 * every executable PT_LOAD segment is mapped from the file.
 */
#ifndef PTD_ASPACE_ELF_H
#define PTD_ASPACE_ELF_H

#include <stdbool.h>
#include <stdint.h>

#include "aspace/image.h"
#include "common/diag.h"

/* Map the executable PT_LOAD segments of @path into @img.  Without a base
 * (@has_base false) segments go to their p_vaddr; with one, the lowest
 * PT_LOAD (page-aligned) goes to @base and the rest keep their distance.
 * Returns the number of segments mapped (> 0), or -PTD_EFORMAT (not an ELF,
 * bad headers, a segment outside the file), -PTD_ENOIMAGE (no executable
 * segment), -errno, with a message naming the file in @diag. */
int ptd_elf_load(struct ptd_image *img, const char *path, bool has_base,
		 uint64_t base, struct ptd_diag *diag);

#endif
