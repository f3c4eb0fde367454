/* SPDX-License-Identifier: MIT */
#include "aspace/elf.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strutil.h"

#define PTD_ELF_PAGE 4096u

int ptd_elf_load(struct ptd_image *img, const char *path, bool has_base,
		 uint64_t base, struct ptd_diag *diag)
{
	_cleanup_close_ int fd = -1;
	Elf *elf = NULL;
	GElf_Ehdr eh;
	struct stat st;
	size_t phnum, i;
	uint64_t lowest = UINT64_MAX, shift = 0;
	int mapped = 0, r;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return ptd_diagf(diag, -PTD_EFORMAT, "libelf is unusable");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		return ptd_diagf(diag, r, "cannot open ELF '%s': %s", path,
				 ptd_strerror(r));
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		return ptd_diagf(diag, r, "cannot stat '%s': %s", path,
				 ptd_strerror(r));
	}
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    elf_getphdrnum(elf, &phnum) != 0) {
		r = ptd_diagf(diag, -PTD_EFORMAT, "'%s' is not an ELF file%s%s",
			      path, elf_errmsg(-1) ? ": " : "",
			      elf_errmsg(-1) ? elf_errmsg(-1) : "");
		goto out;
	}
	/* The lowest PT_LOAD decides where a base address goes. */
	for (i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (ph.p_vaddr < lowest)
			lowest = ph.p_vaddr;
	}
	if (has_base && lowest != UINT64_MAX)
		shift = base - (lowest & ~(uint64_t)(PTD_ELF_PAGE - 1));

	for (i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph)) {
			r = ptd_diagf(diag, -PTD_EFORMAT,
				      "'%s': program header %zu unreadable",
				      path, i);
			goto out;
		}
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) ||
		    !ph.p_filesz)
			continue;
		if (ph.p_offset > (uint64_t)st.st_size ||
		    ph.p_filesz > (uint64_t)st.st_size - ph.p_offset) {
			r = ptd_diagf(diag, -PTD_EFORMAT,
				      "'%s': program header %zu (offset 0x%"
				      PRIx64 ", size 0x%" PRIx64
				      ") lies outside the file (0x%" PRIx64
				      " bytes)",
				      path, i, (uint64_t)ph.p_offset,
				      (uint64_t)ph.p_filesz,
				      (uint64_t)st.st_size);
			goto out;
		}
		r = ptd_image_map_file(img, path, ph.p_offset, ph.p_filesz,
				       ph.p_vaddr + shift, NULL, diag);
		if (r < 0)
			goto out;
		mapped++;
	}
	r = mapped ? mapped
		   : ptd_diagf(diag, -PTD_ENOIMAGE,
			       "'%s' has no executable segment", path);
out:
	elf_end(elf);
	return r;
}
