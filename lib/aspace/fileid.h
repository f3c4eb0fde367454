/* SPDX-License-Identifier: MIT */
/*
 * The identity of a mapped file: which file a process mapped, as the kernel
 * names it (device and inode), so that ptd decodes with that file and not
 * with whatever now has its path.
 *
 * A path is not an identity: between the mapping and ptd opening the path,
 * its owner may rename another file over it (an update does so too).  Both
 * places that tell ptd about a mapping also tell which file it is:
 *  - /proc/PID/maps: "MAJ:MIN INODE", the device in hex, the inode decimal;
 *  - PERF_RECORD_MMAP2: maj, min, ino (and ino_generation) as numbers,
 *    unless PERF_RECORD_MISC_MMAP_BUILD_ID put a build id there instead.
 * Both are the mapped inode's i_sb->s_dev split with MAJOR()/MINOR() and its
 * i_ino; fstat() of the file ptd opened gives st_dev = makedev(major,
 * minor) and st_ino.  ptd_file_id_check() compares the two.
 *
 * Where stat() and the kernel's maps disagree on the device for the same
 * file (ptd_file_id_check says which file systems and why), only the inode
 * is compared.
 */
#ifndef PTD_ASPACE_FILEID_H
#define PTD_ASPACE_FILEID_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "aspace/maps.h"
#include "common/diag.h"

struct ptd_file_id {
	uint32_t dev_major, dev_minor;
	uint64_t ino;		/* 0: unknown (no check) */
};

/* Whether @id names a file (inode 0 never does: maps prints 0 for
 * anonymous memory, a MMAP2 with a build id carries none). */
static inline bool ptd_file_id_known(const struct ptd_file_id *id)
{
	return id && id->ino != 0;
}

/* The identity of the file mapping @m maps (unknown for non-file kinds). */
void ptd_file_id_from_map(const struct ptd_map *m, struct ptd_file_id *ret);

/* The identity of an open file: @st from fstat, @fd to ask its file
 * system's type (may be -1: then the device is always compared). */
struct ptd_file_found {
	struct ptd_file_id id;
	bool dev_unreliable;	/* its file system's st_dev is not the
				 * kernel's maps device (see fileid.c) */
};
void ptd_file_id_of(int fd, const struct stat *st, struct ptd_file_found *ret);

/* Compare @want (unknown: always 0) with @found.  Returns 0 when they are
 * the same file, or -PTD_EIDENTITY with, in @diag, "'@path' is not the file
 * the process mapped: expected dev MAJ:MIN inode N, found dev MAJ:MIN inode
 * M" (the device in maps' hex form). */
int ptd_file_id_check(const struct ptd_file_id *want,
		      const struct ptd_file_found *found, const char *path,
		      struct ptd_diag *diag);

#endif
