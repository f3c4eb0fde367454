/* SPDX-License-Identifier: MIT */
/*
 * The image model of one traced address space: which code is where, as the
 * decoder must see it at one point of the trace.
 *
 * It owns a libipt pt_image that a decoder is pointed at (ptd_image_pt), and
 * keeps its own sorted list of regions so that a partial munmap, an mprotect
 * that removes PROT_EXEC, or an exec can be applied exactly: libipt 2.0 can
 * only remove whole files (pt_image_remove_by_filename), so an unmap removes
 * the affected files' sections and re-adds what remains of them.
 *
 *  - File-backed code is added through the shared ptd_iscache, so each
 *    section has a non-zero isid and keeps its block cache.
 *  - Non-file code (vDSO, anonymous/JIT, deleted files) is added as a
 *    snapshot: a file holding the bytes as they were when first executed.
 *  - For anything no section covers, an optional read-memory callback
 *    (pt_image_set_callback) reads the live process with process_vm_readv.
 *    libipt's block cache does not serve such memory, so it is the last
 *    resort, and every callback read is counted.
 *
 * The image may be changed between calls of the decoder that uses it.
 */
#ifndef PTD_ASPACE_IMAGE_H
#define PTD_ASPACE_IMAGE_H

#include <stdint.h>
#include <sys/types.h>

#include "aspace/iscache.h"
#include "aspace/maps.h"
#include "common/diag.h"

struct pt_image;
struct ptd_image;

/* One region of the image. */
struct ptd_image_region {
	uint64_t start;
	uint64_t end;
	int isid;		/* its section in the iscache */
};

struct ptd_image_stats {
	uint64_t callback_reads;	/* reads served by the live callback */
	uint64_t callback_bytes;
	uint64_t callback_failures;	/* reads the callback could not serve */
	/* sections added from its own section cache (ptd_image_own_sections)
	 * and from the iscache's */
	uint64_t sections_own, sections_shared;
};

/* Allocate into *@ret an empty image named @name (copied; for messages)
 * using @ic, which must outlive it.  Returns 0, or -EINVAL (no @ic) or
 * -ENOMEM (*@ret NULL). */
int ptd_image_new(struct ptd_iscache *ic, const char *name,
		  struct ptd_image **ret);
/* Free; accepts NULL. */
void ptd_image_free(struct ptd_image *img);

/* The libipt image, for pt_insn_set_image / pt_blk_set_image.  Owned by
 * @img; stays the same object for @img's whole life. */
struct pt_image *ptd_image_pt(struct ptd_image *img);
struct ptd_iscache *ptd_image_iscache(struct ptd_image *img);

/* Map @size bytes of @path at file @offset to @vaddr, named @name (NULL:
 * @path).  Replaces whatever the range held before.
 * Returns the isid (> 0), or -errno / -PTD_ENOIMAGE if the file cannot be
 * used (the message in @diag names it). */
int ptd_image_map_file(struct ptd_image *img, const char *path,
		       uint64_t offset, uint64_t size, uint64_t vaddr,
		       const char *name, struct ptd_diag *diag);

/* ptd_image_map_file, checking that @path is the file @want (aspace/
 * fileid.h; NULL or unknown: no check) when its iscache checks identities
 * (ptd_iscache_check_identity).  A file that is not: the range loses what
 * it held and holds the process's code instead if the iscache could read
 * it, nothing otherwise; returns -PTD_EIDENTITY either way, @diag naming
 * the file, both identities and which of the two was done. */
int ptd_image_map_file_id(struct ptd_image *img, const char *path,
			  uint64_t offset, uint64_t size, uint64_t vaddr,
			  const char *name, const struct ptd_file_id *want,
			  struct ptd_diag *diag);

/* Which mapping of section @isid the image holds: 1 for its first, one
 * more each time it is mapped again where it was not (after an unmap or
 * an exec: dlopen of a library dlclose'd, a program exec'd again), the
 * same for a repeated report of a mapping already there; 0 for isid 0 or
 * a section never mapped.  Images that apply the same changes in the same
 * order (each thread's, along a timeline) agree, and a copy takes its
 * source's.  libipt gives one file at one address the same isid every
 * time; this tells its mappings apart (decode/counters.h). */
uint32_t ptd_image_gen(const struct ptd_image *img, int isid);

/* Remove [@start, @end) from the image; parts of regions outside it stay.
 * Returns 0 or a negative error. */
int ptd_image_unmap(struct ptd_image *img, uint64_t start, uint64_t end);

/* Remove everything (exec). */
int ptd_image_clear(struct ptd_image *img);

/* Add every executable file-backed mapping of @maps (PTD_MAP_FILE with
 * PROT_X), each checked to be the file the maps line names by device and
 * inode (ptd_image_map_file_id).  Mappings whose file cannot be opened, or
 * is not that file, are skipped and counted in
 * *ret_skipped (may be NULL), with the first one named in @diag.
 * Returns 0 or a negative error for anything but an unusable file. */
int ptd_image_load_maps(struct ptd_image *img, const struct ptd_maps *maps,
			unsigned *ret_skipped, struct ptd_diag *diag);

/* Read memory of live process @pid for whatever no section covers
 * (pt_image_set_callback).  @pid 0 switches the callback off. */
int ptd_image_set_live_pid(struct ptd_image *img, pid_t pid);

/* The region containing @ip, or NULL. */
const struct ptd_image_region *ptd_image_find(const struct ptd_image *img,
					      uint64_t ip);

/* Module name and module offset (file offset) for @ip in section @isid.
 * For isid 0 (callback memory) the name is "[live]" and the offset is @ip.
 * Returns 0, or -ENOENT if @isid is unknown. */
int ptd_image_module_of(const struct ptd_image *img, int isid, uint64_t ip,
			const char **ret_name, uint64_t *ret_offset);

/* Read up to @size bytes of the image at @ip, as the decoder would see them
 * (sections first, then the live callback).  Returns the number of bytes
 * read (short at the end of a region) or -PTD_ENOIMAGE if nothing is mapped
 * at @ip. */
int ptd_image_read(struct ptd_image *img, uint64_t ip, uint8_t *buf,
		   size_t size);

/* From now on, @img's sections are ones of its own (iscache.h,
 * ptd_iscache_mirror), under the same isids, for a decoder that runs
 * beside others on the same iscache.  Call it while @img is empty.
 * Returns 0, -EINVAL (not empty) or -ENOMEM. */
int ptd_image_own_sections(struct ptd_image *img);

/* Make @dst a copy of @src (same regions, same isids). */
int ptd_image_copy(struct ptd_image *dst, const struct ptd_image *src);

void ptd_image_get_stats(const struct ptd_image *img,
			 struct ptd_image_stats *ret);

#endif
