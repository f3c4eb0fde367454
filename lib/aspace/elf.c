/* SPDX-License-Identifier: MIT */
#include "aspace/elf.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/strutil.h"

#define PTD_ELF_PAGE 4096u

/* A GNU build-id note in @d (a note section's or segment's bytes). */
static bool note_build_id(Elf_Data *d, char *hex, size_t hexsz)
{
	GElf_Nhdr nh;
	size_t off = 0, noff, doff, next;

	while (d && (next = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    !memcmp((const char *)d->d_buf + noff, "GNU", 4) &&
		    nh.n_descsz > 0 && nh.n_descsz <= PTD_ELF_BUILD_ID_MAX &&
		    hexsz > 2 * nh.n_descsz) {
			for (size_t i = 0; i < nh.n_descsz; i++)
				(void)snprintf(hex + 2 * i, 3, "%02x",
					       ((const uint8_t *)d->d_buf)
						       [doff + i]);
			return true;
		}
		off = next;
	}
	return false;
}

/* From PT_NOTE segments (what a loaded image and a vmlinux carry), then
 * SHT_NOTE sections. */
static bool elf_build_id(Elf *e, char *hex, size_t hexsz)
{
	Elf_Scn *scn = NULL;
	size_t phnum = 0;

	if (hexsz)
		hex[0] = '\0';
	if (elf_getphdrnum(e, &phnum) == 0) {
		for (size_t i = 0; i < phnum; i++) {
			GElf_Phdr ph;
			Elf_Data *d;

			if (!gelf_getphdr(e, (int)i, &ph) ||
			    ph.p_type != PT_NOTE || !ph.p_filesz)
				continue;
			d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset,
						 ph.p_filesz, ELF_T_NHDR);
			if (note_build_id(d, hex, hexsz))
				return true;
		}
	}
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		if (note_build_id(elf_getdata(scn, NULL), hex, hexsz))
			return true;
	}
	if (hexsz)
		hex[0] = '\0';
	return false;
}

bool ptd_elf_build_id_fd(int fd, char *hex, size_t hexsz)
{
	Elf *e;
	bool ok;

	if (!hex || !hexsz || elf_version(EV_CURRENT) == EV_NONE)
		return false;
	hex[0] = '\0';
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return false;
	ok = elf_kind(e) == ELF_K_ELF && elf_build_id(e, hex, hexsz);
	elf_end(e);
	return ok;
}

void ptd_elf_info_fini(struct ptd_elf_info *info)
{
	if (!info)
		return;
	free(info->seg);
	info->seg = NULL;
	info->nseg = 0;
}

int ptd_elf_read_info(const char *path, struct ptd_elf_info *ret,
		      struct ptd_diag *diag)
{
	_cleanup_close_ int fd = -1;
	struct ptd_elf_info info;
	Elf *elf = NULL;
	GElf_Ehdr eh;
	struct stat st;
	size_t phnum, i;
	int r = 0;

	if (!path || !ret)
		return -EINVAL;
	memset(&info, 0, sizeof(info));
	info.lowest_vaddr = UINT64_MAX;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return ptd_diagf(diag, -PTD_EFORMAT, "libelf is unusable");
	fd = ptd_file_open_regular(AT_FDCWD, path, 0, &st, diag);
	if (fd < 0)
		return fd;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    elf_getphdrnum(elf, &phnum) != 0) {
		r = ptd_diagf(diag, -PTD_EFORMAT, "'%s' is not an ELF file%s%s",
			      path, elf_errmsg(-1) ? ": " : "",
			      elf_errmsg(-1) ? elf_errmsg(-1) : "");
		goto out;
	}
	info.type = eh.e_type;
	for (i = 0; i < phnum; i++) {
		struct ptd_elf_segment *s;
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph)) {
			r = ptd_diagf(diag, -PTD_EFORMAT,
				      "'%s': program header %zu unreadable",
				      path, i);
			goto out;
		}
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_vaddr < info.lowest_vaddr)
			info.lowest_vaddr = ph.p_vaddr;
		if (!ph.p_filesz)
			continue;
		if (ph.p_offset > (uint64_t)st.st_size ||
		    ph.p_filesz > (uint64_t)st.st_size - ph.p_offset ||
		    ph.p_vaddr + ph.p_filesz < ph.p_vaddr) {
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
		if (info.nseg >= PTD_ELF_MAX_SEGMENTS) {
			r = ptd_diagf(diag, -PTD_ELIMIT, "'%s': more than %u "
				      "loadable segments", path,
				      PTD_ELF_MAX_SEGMENTS);
			goto out;
		}
		s = reallocarray(info.seg, info.nseg + 1, sizeof(*s));
		if (!s) {
			r = -ENOMEM;
			goto out;
		}
		info.seg = s;
		s = &info.seg[info.nseg++];
		s->vaddr = ph.p_vaddr;
		s->offset = ph.p_offset;
		s->size = ph.p_filesz;
		s->exec = (ph.p_flags & PF_X) != 0;
	}
	(void)elf_build_id(elf, info.build_id, sizeof(info.build_id));
out:
	elf_end(elf);
	if (r < 0) {
		ptd_elf_info_fini(&info);
		return r;
	}
	*ret = info;
	return 0;
}

/* Most a vDSO may take (they are a few pages). */
#define PTD_ELF_VDSO_MAX (1u << 20)

int ptd_elf_own_vdso(char *hex, size_t hexsz)
{
	const uint8_t *base = (const uint8_t *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
	uint64_t size;
	int fd, r;

	if (hex && hexsz)
		hex[0] = '\0';
	if (!base)
		return -ENOENT;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    eh->e_phoff > PTD_ELF_VDSO_MAX)
		return -PTD_EFORMAT;
	/* Its size: the furthest of its segments' and section headers'
	 * ends (the kernel's vDSO image ends with its section headers). */
	size = (uint64_t)eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff +
							     i * sizeof(*ph));

		if (ph->p_type == PT_LOAD && ph->p_offset + ph->p_filesz > size)
			size = ph->p_offset + ph->p_filesz;
	}
	if (size < sizeof(*eh) || size > PTD_ELF_VDSO_MAX)
		return -PTD_EFORMAT;
	fd = memfd_create("ptd-vdso", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = ptd_write_all(fd, base, size);
	if (r < 0) {
		(void)close(fd);
		return r;
	}
	if (hex && hexsz)
		(void)ptd_elf_build_id_fd(fd, hex, hexsz);
	return fd;
}

int ptd_elf_load(struct ptd_image *img, const char *path, bool has_base,
		 uint64_t base, struct ptd_diag *diag)
{
	struct ptd_elf_info info;
	uint64_t shift = 0;
	int mapped = 0, r;
	size_t i;

	r = ptd_elf_read_info(path, &info, diag);
	if (r < 0)
		return r;
	/* The lowest PT_LOAD decides where a base address goes. */
	if (has_base && info.lowest_vaddr != UINT64_MAX)
		shift = base -
			(info.lowest_vaddr & ~(uint64_t)(PTD_ELF_PAGE - 1));
	for (i = 0; i < info.nseg; i++) {
		const struct ptd_elf_segment *s = &info.seg[i];

		if (!s->exec)
			continue;
		r = ptd_image_map_file(img, path, s->offset, s->size,
				       s->vaddr + shift, NULL, diag);
		if (r < 0)
			goto out;
		mapped++;
	}
	r = mapped ? mapped
		   : ptd_diagf(diag, -PTD_ENOIMAGE,
			       "'%s' has no executable segment", path);
out:
	ptd_elf_info_fini(&info);
	return r;
}

