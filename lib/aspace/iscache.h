/* SPDX-License-Identifier: MIT */
/*
 * The shared image section cache: one libipt pt_image_section_cache plus what
 * ptd needs to know about every section in it (which module an isid belongs
 * to, where it was loaded).
 *
 * Every file-backed piece of code any traced process maps is added here once
 * (pt_iscache_add_file dedups identical file/offset/size/vaddr), and each
 * process image (image.h) refers to sections by isid.  Sections stay mapped
 * across image changes, the block decoder's per-section block cache survives,
 * and every decoded instruction carries a non-zero isid that maps back to its
 * file and file offset.
 *
 * Thread safety: none; one owner (the decoder thread) uses it.
 */
#ifndef PTD_ASPACE_ISCACHE_H
#define PTD_ASPACE_ISCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aspace/fileid.h"

struct pt_image_section_cache;
struct ptd_iscache;

struct ptd_module {
	int isid;
	/* The file the bytes come from (for a snapshot: the snapshot file). */
	const char *path;
	/* What to call it in records: the file's path, or for a snapshot of
	 * non-file code its maps name ("[vdso]", "[anon]", ...). */
	const char *name;
	/* The file libipt reads the section from: ptd's private copy of
	 * the bytes (iscache.c says why), named /proc/self/fd/N. */
	const char *section_file;
	uint64_t section_offset;	/* where vaddr is in section_file */
	uint64_t offset;	/* file offset of vaddr */
	uint64_t size;		/* bytes, after truncation to the file size */
	uint64_t vaddr;		/* load address */
};

/* Allocate into *@ret.  Returns 0, or -ENOMEM (*@ret NULL). */
int ptd_iscache_new(struct ptd_iscache **ret);
/* Free; accepts NULL.  Every image using it must be freed first. */
void ptd_iscache_free(struct ptd_iscache *ic);

/* Where a file named in a trace really is.  Traces name files by the path
 * they had on the traced machine (/proc/PID/maps, MMAP2 records, a
 * manifest); a saved trace keeps them elsewhere (a bundle's copies, a
 * --sysroot, the perf build-id cache).  The resolver gets the traced @path
 * and writes the file to open into @out (@outsz bytes, NUL-terminated).
 * Returns 0, or a negative error (-ENOENT: not found; its message, if any,
 * in @diag, e.g. "not in the bundle" or "build-id 1234... not in
 * ~/.debug") which ptd_iscache_add returns and ptd_image_map_file reports.
 * Records keep naming the module by the traced path. */
struct ptd_diag;
typedef int (*ptd_iscache_resolve_fn)(void *ctx, const char *path, char *out,
				      size_t outsz, struct ptd_diag *diag);

/* Set (or with NULL clear) the resolver used by every later add. */
void ptd_iscache_set_resolver(struct ptd_iscache *ic,
			      ptd_iscache_resolve_fn fn, void *ctx);

/* Like ptd_iscache_add, but through the resolver (if set): @path is the
 * traced path, which becomes the module name unless @name is given.
 * Resolver errors are returned with their message in @diag. */
int ptd_iscache_add_resolved(struct ptd_iscache *ic, const char *path,
			     uint64_t offset, uint64_t size, uint64_t vaddr,
			     const char *name, struct ptd_diag *diag);

/* The libipt cache, for pt_image_add_cached. */
struct pt_image_section_cache *ptd_iscache_pt(struct ptd_iscache *ic);

/* Add @size bytes at @offset of @path loaded at @vaddr, named @name (NULL:
 * @path).  Returns the isid (> 0), the same isid for the same
 * path/offset/size/vaddr, or a negative error:
 * -ENOENT/-EACCES if the file cannot be opened, -EINVAL if @offset is beyond
 * its end, -ENOMEM. */
int ptd_iscache_add(struct ptd_iscache *ic, const char *path, uint64_t offset,
		    uint64_t size, uint64_t vaddr, const char *name);

/*
 * Identity checks.  A live session knows which file each mapping holds
 * (aspace/fileid.h: device and inode from /proc/PID/maps and MMAP2); a path
 * may meanwhile name another file.  With checks on, every add that is told
 * the identity (ptd_iscache_add_id) compares it with the fstat() of the
 * file it opened, and a file that is not the one mapped is never read.
 * Instead, when @pid is not 0, the code is copied from that process's
 * memory at the mapping's address (the mapping still holds the file it
 * mapped, so its bytes are that file's; at most PTD_ISCACHE_LIVE_MAX
 * bytes), sealed like a file copy and added in the file's place under the
 * file's name; otherwise, or if the memory cannot be read (the mapping is
 * gone), nothing is added.  Each distinct refusal is counted once
 * (ptd_iscache_identity_mismatches) and read from the process once.
 * Off by default: offline decoders read files that a resolver chose or
 * that may rightly differ from the recording machine's.
 */
#define PTD_ISCACHE_LIVE_MAX (256ull << 20)
void ptd_iscache_check_identity(struct ptd_iscache *ic, bool on, pid_t pid);

/* How the process's memory is read for the above: @fn (bytes read, short
 * at an unmapped page, or -errno) instead of process_vm_readv, e.g. to see
 * the code without a tracer's breakpoints (swpt/tracer.h,
 * ptd_swpt_patches_read).  Set before the cache is used; NULL: the
 * default. */
typedef ssize_t (*ptd_iscache_live_read_fn)(void *ctx, pid_t pid,
					    uint64_t addr, void *buf,
					    size_t len);
void ptd_iscache_set_live_reader(struct ptd_iscache *ic,
				 ptd_iscache_live_read_fn fn, void *ctx);

/* ptd_iscache_add, checking that @path is the file @want (NULL or unknown:
 * no check; no check either while checks are off).  A file that is not:
 * -PTD_EIDENTITY, @diag naming the file, the expected and the found
 * dev:inode and what was done instead, and *@ret_isid (may be NULL) the
 * isid of the process's code standing in for it, or 0 when there is none
 * (*@ret_isid is 0 on every other return). */
int ptd_iscache_add_id(struct ptd_iscache *ic, const char *path,
		       uint64_t offset, uint64_t size, uint64_t vaddr,
		       const char *name, const struct ptd_file_id *want,
		       int *ret_isid, struct ptd_diag *diag);

/* ptd_iscache_add_resolved with ptd_iscache_add_id's check.  A file a
 * resolver chose is not checked (it is a copy, not the traced file). */
int ptd_iscache_add_resolved_id(struct ptd_iscache *ic, const char *path,
				uint64_t offset, uint64_t size, uint64_t vaddr,
				const char *name,
				const struct ptd_file_id *want, int *ret_isid,
				struct ptd_diag *diag);

/* Files refused so far as not the file mapped, each distinct one once.
 * May be called from any thread. */
uint64_t ptd_iscache_identity_mismatches(const struct ptd_iscache *ic);

/* The part [@start, @end) of section @isid as a section of its own, read
 * from the same private copy (the file is not opened again: it may be
 * another file by now).  Returns the isid or a negative error. */
int ptd_iscache_add_piece(struct ptd_iscache *ic, int isid, uint64_t start,
			  uint64_t end);

/* A copy of @s that lives as long as @ic (the same pointer for equal
 * strings), for records that name a message; NULL when out of memory or
 * past a bound of distinct strings. */
const char *ptd_iscache_intern(struct ptd_iscache *ic, const char *s);

/* What isid @isid is, or NULL if @ic has no such isid. */
const struct ptd_module *ptd_iscache_module(const struct ptd_iscache *ic,
					    int isid);

/*
 * A libipt section cache of its own holding @ic's sections under the same
 * isids, for the image of a decoder that runs beside others (image.h,
 * ptd_image_own_sections).  libipt takes a section's lock, its attach
 * lock and its cache's lock at every switch of section: decoders on
 * several cores that share sections bounce those locks between the cores.
 * Its sections map the same files (ptd's private copies, read-only).
 * Thread safety: as @ic's (the caller holds what guards @ic).
 */
struct ptd_iscache_mirror;

/* Allocate into *@ret.  Returns 0, or -ENOMEM (*@ret NULL). */
int ptd_iscache_mirror_new(struct ptd_iscache_mirror **ret);
/* Free; accepts NULL.  Every image using it must be freed first. */
void ptd_iscache_mirror_free(struct ptd_iscache_mirror *mr);
/* @mr's libipt cache, filled with @ic's sections up to @isid; NULL where
 * it cannot hold @isid under that number (a section it could not add:
 * from there on @ic's own sections are used). */
struct pt_image_section_cache *
ptd_iscache_mirror_get(struct ptd_iscache_mirror *mr,
		       const struct ptd_iscache *ic, int isid);

/* Read up to @size bytes at @vaddr from section @isid.  Returns the number of
 * bytes read (may be short at the section end) or a negative libipt error
 * (-pte_nomap, -pte_bad_image) converted to -PTD_ENOIMAGE. */
int ptd_iscache_read(struct ptd_iscache *ic, int isid, uint64_t vaddr,
		     uint8_t *buf, uint64_t size);

#endif
