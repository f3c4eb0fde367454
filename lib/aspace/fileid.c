/* SPDX-License-Identifier: MIT */
/* Mapped files' identities (see fileid.h). */
#include "aspace/fileid.h"

#include <inttypes.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

/* statfs f_type values (linux/magic.h) of the file systems whose stat()
 * device is not the device the kernel prints in /proc/PID/maps and MMAP2
 * for the same file. */
#define OVERLAYFS_MAGIC 0x794c7630
#define BTRFS_MAGIC 0x9123683e

void ptd_file_id_from_map(const struct ptd_map *m, struct ptd_file_id *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!m || (m->kind != PTD_MAP_FILE && m->kind != PTD_MAP_DELETED))
		return;
	ret->dev_major = m->dev_major;
	ret->dev_minor = m->dev_minor;
	ret->ino = m->inode;
}

/*
 * Which devices can be compared.  maps and MMAP2 print the device of the
 * super block of the inode the mapping holds (vma->vm_file); stat() prints
 * what the file system's getattr says.  They differ, for the same file, on:
 *  - overlayfs: a mapping of an overlay file holds the real (upper or
 *    lower layer) file, so maps shows that layer's device -- on kernels
 *    with backing files (6.6 on) the overlay's own inode may be shown
 *    instead -- while stat() of the overlay path gives the overlay's
 *    device (or a layer's: overlayfs.rst, "Non-standard behavior");
 *  - btrfs: maps shows the file system's anonymous device, stat() that of
 *    the subvolume.
 * There the device says nothing and only the inode is compared: the
 * inode stays the real one when all layers share one file system (and
 * without "xino" otherwise), and is the same on btrfs.  Where overlayfs
 * composes inode numbers ("xino"), the inodes differ and the file is
 * refused: ptd then reads the code from the process (iscache.h), which is
 * right in every case, rather than decode with a file it cannot tell is
 * the one mapped.
 */
void ptd_file_id_of(int fd, const struct stat *st, struct ptd_file_found *ret)
{
	struct statfs sf;

	memset(ret, 0, sizeof(*ret));
	ret->id.dev_major = major(st->st_dev);
	ret->id.dev_minor = minor(st->st_dev);
	ret->id.ino = (uint64_t)st->st_ino;
	if (fd >= 0 && fstatfs(fd, &sf) == 0)
		ret->dev_unreliable = (unsigned long)sf.f_type ==
					      OVERLAYFS_MAGIC ||
				      (unsigned long)sf.f_type == BTRFS_MAGIC;
}

int ptd_file_id_check(const struct ptd_file_id *want,
		      const struct ptd_file_found *found, const char *path,
		      struct ptd_diag *diag)
{
	const struct ptd_file_id *f = &found->id;

	if (!ptd_file_id_known(want))
		return 0;
	if (want->ino == f->ino &&
	    (found->dev_unreliable || (want->dev_major == f->dev_major &&
				       want->dev_minor == f->dev_minor)))
		return 0;
	return ptd_diagf(diag, -PTD_EIDENTITY,
			 "'%s' is not the file the process mapped: expected "
			 "dev %02x:%02x inode %" PRIu64 ", found dev "
			 "%02x:%02x inode %" PRIu64, path ? path : "",
			 want->dev_major, want->dev_minor, want->ino,
			 f->dev_major, f->dev_minor, f->ino);
}
