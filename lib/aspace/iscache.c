/* SPDX-License-Identifier: MIT */
/*
 * The shared image section cache: libipt's pt_image_section_cache plus a
 * table isid -> struct ptd_module.
 *
 * libipt hands out isids as (entry index + 1), so the table is an array
 * indexed by isid; slot 0 is never used.  Files are checked here before
 * libipt sees them so that a failure has an errno and a cause instead of
 * libipt's bare -pte_invalid.
 */
#include "aspace/iscache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <intel-pt.h>

#include "aspace/fileid.h"
#include "common/diag.h"
#include "common/fileio.h"
#include "common/strutil.h"

/* Keep up to this many bytes of sections mapped between reads: without a
 * limit libipt maps and unmaps a section on every read. */
#define ISCACHE_MAPPED_LIMIT (256ull << 20)

/* A private copy of a file's bytes [offset, offset + size): a memfd sealed
 * against shrinking, growing and writing, which libipt opens by its
 * /proc/self/fd name and maps.  libipt would otherwise map the traced
 * file itself, and whoever can write that file (the user whose process is
 * traced, the client replaying its own capture) could truncate it under
 * the mapping: the next read of it faults (SIGBUS) and ends the daemon
 * with every user's sessions.  A copy cannot change.  Copies are shared
 * by every section of the same file version and range. */
struct copy {
	bool live;		/* read from a process, not a file */
	dev_t dev;
	ino_t ino;
	off_t fsize;
	struct timespec mtime;
	uint64_t offset, size;
	int fd;
	char path[32];		/* /proc/self/fd/N */
};

struct ptd_iscache {
	struct pt_image_section_cache *pt;
	struct copy **copies;	/* each its own allocation: modules point
				 * at their path */
	size_t ncopies, copies_cap;
	/* mods[isid] for 0 < isid < nmods; isid 0 marks an unused slot. */
	struct ptd_module *mods;
	size_t nmods;
	ptd_iscache_resolve_fn resolve;
	void *resolve_ctx;
	/* Identity checks (ptd_iscache_check_identity). */
	bool check_id;
	pid_t live_pid;
	ptd_iscache_live_read_fn live_read;
	void *live_ctx;
	struct mismatch *mm;
	size_t nmm, mm_cap;
	atomic_uint_fast64_t nmismatch;
	char **strs;		/* ptd_iscache_intern */
	size_t nstrs;
};

/* A file refused because it is not the one mapped (one per distinct
 * mapping and file found), with the copy of the process's memory that
 * stands in for it (NULL: none could be read). */
struct mismatch {
	struct ptd_file_id want, found;
	uint64_t offset, size, vaddr;
	struct copy *c;
};

/* Most distinct strings ptd_iscache_intern keeps. */
#define ISCACHE_MAX_STRINGS 1024u

/* A libipt section cache as ptd keeps them (the iscache's, a mirror's);
 * NULL when out of memory. */
static struct pt_image_section_cache *section_cache_new(const char *name)
{
	struct pt_image_section_cache *pt = pt_iscache_alloc(name);

	/* A failure only costs speed. */
	if (pt)
		(void)pt_iscache_set_limit(pt, ISCACHE_MAPPED_LIMIT);
	return pt;
}

static struct ptd_iscache *iscache_alloc(void)
{
	struct ptd_iscache *ic = calloc(1, sizeof(*ic));

	if (!ic)
		return NULL;
	ic->pt = section_cache_new("ptd");
	if (!ic->pt) {
		free(ic);
		return NULL;
	}
	return ic;
}

int ptd_iscache_new(struct ptd_iscache **ret)
{
	if (!ret)
		return -EINVAL;
	*ret = iscache_alloc();
	return *ret ? 0 : -ENOMEM;
}

struct ptd_iscache_mirror {
	struct pt_image_section_cache *pt;
	int n;			/* isids 1..n added */
	bool stuck;		/* an isid it could not add as @n + 1 */
};

int ptd_iscache_mirror_new(struct ptd_iscache_mirror **ret)
{
	struct ptd_iscache_mirror *mr;

	if (!ret)
		return -EINVAL;
	*ret = NULL;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->pt = section_cache_new("ptd-mirror");
	if (!mr->pt) {
		free(mr);
		return -ENOMEM;
	}
	*ret = mr;
	return 0;
}

void ptd_iscache_mirror_free(struct ptd_iscache_mirror *mr)
{
	if (!mr)
		return;
	pt_iscache_free(mr->pt);
	free(mr);
}

struct pt_image_section_cache *
ptd_iscache_mirror_get(struct ptd_iscache_mirror *mr,
		       const struct ptd_iscache *ic, int isid)
{
	if (!mr || !ic || isid <= 0)
		return NULL;
	/* libipt numbers the sections of a cache 1, 2, ... as they are
	 * added, and @ic's are distinct (pt_iscache_add_file dedups): the
	 * same sections added in the same order get the same isids. */
	while (!mr->stuck && mr->n < isid) {
		const struct ptd_module *m = ptd_iscache_module(ic, mr->n + 1);

		if (!m || pt_iscache_add_file(mr->pt, m->section_file,
					      m->section_offset, m->size,
					      m->vaddr) != mr->n + 1)
			mr->stuck = true;
		else
			mr->n++;
	}
	return isid <= mr->n ? mr->pt : NULL;
}

static void module_clear(struct ptd_module *m)
{
	/* name may alias path */
	if (m->name != m->path)
		free((char *)m->name);
	free((char *)m->path);
	memset(m, 0, sizeof(*m));
}

void ptd_iscache_free(struct ptd_iscache *ic)
{
	if (!ic)
		return;
	for (size_t i = 0; i < ic->nmods; i++)
		module_clear(&ic->mods[i]);
	free(ic->mods);
	pt_iscache_free(ic->pt);
	for (size_t i = 0; i < ic->ncopies; i++) {
		(void)close(ic->copies[i]->fd);
		free(ic->copies[i]);
	}
	free(ic->copies);
	free(ic->mm);
	for (size_t i = 0; i < ic->nstrs; i++)
		free(ic->strs[i]);
	free(ic->strs);
	free(ic);
}

struct pt_image_section_cache *ptd_iscache_pt(struct ptd_iscache *ic)
{
	return ic ? ic->pt : NULL;
}

/* Open @path for reading: a regular file (a FIFO or device is refused
 * before it could block: ptd_file_open_regular); its fd, -EISDIR,
 * -EINVAL (not a regular file: image.c says so) or -errno. */
static int open_file(const char *path, struct stat *st)
{
	int fd = ptd_file_open_regular(AT_FDCWD, path, 0, st, NULL);

	return fd == -PTD_ENOTREG ? -EINVAL : fd;
}

static struct copy *copy_find(struct ptd_iscache *ic, const struct stat *st,
			      uint64_t offset, uint64_t size)
{
	for (size_t i = 0; i < ic->ncopies; i++) {
		struct copy *c = ic->copies[i];

		if (!c->live && c->dev == st->st_dev && c->ino == st->st_ino &&
		    c->fsize == st->st_size &&
		    c->mtime.tv_sec == st->st_mtim.tv_sec &&
		    c->mtime.tv_nsec == st->st_mtim.tv_nsec &&
		    c->offset == offset && c->size == size)
			return c;
	}
	return NULL;
}

static int copies_reserve(struct ptd_iscache *ic)
{
	if (ic->ncopies == ic->copies_cap) {
		size_t n = ic->copies_cap ? 2 * ic->copies_cap : 16;
		struct copy **v = reallocarray(ic->copies, n, sizeof(*v));

		if (!v)
			return -ENOMEM;
		ic->copies = v;
		ic->copies_cap = n;
	}
	return 0;
}

/* Read @size bytes at @offset of the file @fd, or (@fd < 0) at address
 * @offset of process @pid, into @buf. Returns the bytes read (short: the
 * file ends or the memory is not mapped) or -errno. */
static ssize_t copy_read(const struct ptd_iscache *ic, int fd, pid_t pid,
			 uint8_t *buf, size_t size, uint64_t offset)
{
	struct iovec l = { buf, size };
	struct iovec r = { (void *)(uintptr_t)offset, size };
	ssize_t n;

	if (fd < 0 && ic->live_read)
		return ic->live_read(ic->live_ctx, pid, offset, buf, size);
	do {
		n = fd >= 0 ? pread(fd, buf, size, (off_t)offset)
			    : process_vm_readv(pid, &l, 1, &r, 1, 0);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/* Copy @size bytes at @offset of @fd (or, @fd < 0, at address @offset of
 * process @pid) into a new sealed memfd, *@ret; 0, -EIO if the file shrank
 * meanwhile (or the memory is not all there), or -errno. */
static int copy_make(struct ptd_iscache *ic, int fd, pid_t pid,
		     const struct stat *st, uint64_t offset, uint64_t size,
		     struct copy **ret)
{
	_cleanup_close_ int m = -1;
	uint8_t *buf = NULL;
	uint64_t done = 0;
	struct copy *c;
	int err = copies_reserve(ic);

	if (err)
		return err;
	m = memfd_create("ptd-code", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (m < 0)
		return -errno;
	if (ftruncate(m, (off_t)size) < 0)
		return -errno;
	buf = malloc(1u << 16);
	if (!buf)
		return -ENOMEM;
	while (done < size && !err) {
		size_t want = size - done > (1u << 16) ? (1u << 16)
						      : (size_t)(size - done);
		ssize_t n = copy_read(ic, fd, pid, buf, want, offset + done);

		if (n <= 0)
			err = n < 0 ? (int)n : -EIO;	/* it shrank */
		else if (pwrite(m, buf, (size_t)n, (off_t)done) != n)
			err = errno ? -errno : -EIO;
		else
			done += (uint64_t)n;
	}
	free(buf);
	if (err)
		return err;
	if (fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE |
				  F_SEAL_SEAL) < 0)
		return -errno;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->live = !st;		/* no file: never found by copy_find */
	if (st) {
		c->dev = st->st_dev;
		c->ino = st->st_ino;
		c->fsize = st->st_size;
		c->mtime = st->st_mtim;
	}
	c->offset = offset;
	c->size = size;
	(void)snprintf(c->path, sizeof(c->path), "/proc/self/fd/%d", m);
	c->fd = m;
	m = -1;
	ic->copies[ic->ncopies++] = c;
	*ret = c;
	return 0;
}

static int pt_to_errno(int err)
{
	switch (-err) {
	case pte_nomem:
		return -ENOMEM;
	case pte_invalid:
		return -EINVAL;
	case pte_nomap:
	case pte_bad_image:
		return -PTD_ENOIMAGE;
	default:
		return -PTD_ENOIMAGE;
	}
}

/* Make sure mods[isid] exists. */
static int grow(struct ptd_iscache *ic, int isid)
{
	size_t want = (size_t)isid + 1, n;
	struct ptd_module *v;

	if (want <= ic->nmods)
		return 0;
	n = ic->nmods ? ic->nmods : 16;
	while (n < want)
		n *= 2;
	v = reallocarray(ic->mods, n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	memset(v + ic->nmods, 0, (n - ic->nmods) * sizeof(*v));
	ic->mods = v;
	ic->nmods = n;
	return 0;
}

static int record_module(struct ptd_iscache *ic, int isid, const char *path,
			 uint64_t offset, uint64_t size, uint64_t vaddr,
			 const char *name)
{
	struct ptd_module m = {
		.isid = isid, .offset = offset, .size = size, .vaddr = vaddr,
	};
	int r = grow(ic, isid);

	if (r < 0)
		return r;
	m.path = strdup(path);
	if (!m.path)
		return -ENOMEM;
	if (name && strcmp(name, path) != 0) {
		m.name = strdup(name);
		if (!m.name) {
			free((char *)m.path);
			return -ENOMEM;
		}
	} else {
		m.name = m.path;
	}
	ic->mods[isid] = m;
	return 0;
}

/* Add a section of copy @c ([@coff, @coff + @size) of it) at @vaddr as
 * module @path/@offset; its isid or a negative error. */
static int add_section(struct ptd_iscache *ic, struct copy *c, uint64_t coff,
		       const char *path, uint64_t offset, uint64_t size,
		       uint64_t vaddr, const char *name)
{
	int r, isid = pt_iscache_add_file(ic->pt, c->path, coff, size, vaddr);

	if (isid < 0)
		return pt_to_errno(isid);
	if (isid == 0)
		return -PTD_ENOIMAGE;
	/* libipt returns the existing isid for an identical section; the
	 * module keeps the name it was first added with. */
	if ((size_t)isid < ic->nmods && ic->mods[isid].isid == isid)
		return isid;
	r = record_module(ic, isid, path, offset, size, vaddr, name);
	if (r < 0)
		return r;
	ic->mods[isid].section_file = c->path;
	ic->mods[isid].section_offset = coff;
	return isid;
}

static bool id_eq(const struct ptd_file_id *a, const struct ptd_file_id *b)
{
	return a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
	       a->ino == b->ino;
}

/* The file at @path is not @want (@diag says so): find or make the
 * mismatch entry, with a copy of the process's memory if there is a
 * process to read.  Returns -PTD_EIDENTITY, *@ret_isid the section of
 * that copy or 0; -ENOMEM. */
static int mismatch(struct ptd_iscache *ic, const char *path, uint64_t offset,
		    uint64_t size, uint64_t vaddr, const char *name,
		    const struct ptd_file_id *want,
		    const struct ptd_file_found *found, int *ret_isid,
		    struct ptd_diag *diag)
{
	struct mismatch *mm = NULL;
	struct ptd_diag d = { "" };
	int isid;

	*ret_isid = 0;
	(void)ptd_file_id_check(want, found, path, &d);
	for (size_t i = 0; i < ic->nmm && !mm; i++) {
		struct mismatch *e = &ic->mm[i];

		if (id_eq(&e->want, want) && id_eq(&e->found, &found->id) &&
		    e->offset == offset && e->size == size &&
		    e->vaddr == vaddr)
			mm = e;
	}
	if (!mm) {
		if (ic->nmm == ic->mm_cap) {
			size_t n = ic->mm_cap ? 2 * ic->mm_cap : 8;
			struct mismatch *v =
				reallocarray(ic->mm, n, sizeof(*v));

			if (!v)
				return -ENOMEM;
			ic->mm = v;
			ic->mm_cap = n;
		}
		mm = &ic->mm[ic->nmm++];
		memset(mm, 0, sizeof(*mm));
		mm->want = *want;
		mm->found = found->id;
		mm->offset = offset;
		mm->size = size;
		mm->vaddr = vaddr;
		atomic_fetch_add(&ic->nmismatch, 1);
		/* The mapping still holds the file it mapped: what the
		 * process has at @vaddr is that file's bytes.  Nothing
		 * read (gone, or too large): left unmapped. */
		if (ic->live_pid > 0 && size <= PTD_ISCACHE_LIVE_MAX &&
		    copy_make(ic, -1, ic->live_pid, NULL, vaddr, size,
			      &mm->c) < 0)
			mm->c = NULL;
	}
	if (!mm->c)
		return ptd_diagf(diag, -PTD_EIDENTITY, "%s; not decoded "
				 "(no copy of the process's code)", d.msg);
	isid = add_section(ic, mm->c, 0, path, offset, size, vaddr, name);
	if (isid < 0)
		return isid;
	*ret_isid = isid;
	return ptd_diagf(diag, -PTD_EIDENTITY, "%s; decoded from process "
			 "%d's memory instead", d.msg, (int)ic->live_pid);
}

/* ptd_iscache_add with the identity check; see ptd_iscache_add_id. */
static int add_file(struct ptd_iscache *ic, const char *path, uint64_t offset,
		    uint64_t size, uint64_t vaddr, const char *name,
		    const struct ptd_file_id *want, int *ret_isid,
		    struct ptd_diag *diag)
{
	_cleanup_close_ int fd = -1;
	struct copy *c;
	struct stat st;
	uint64_t fsize;
	int r;

	if (!ic || !path || !*path || size == 0 || vaddr + size < vaddr)
		return -EINVAL;
	fd = open_file(path, &st);
	if (fd < 0)
		return fd;
	if (ic->check_id && ptd_file_id_known(want)) {
		struct ptd_file_found found;

		ptd_file_id_of(fd, &st, &found);
		if (ptd_file_id_check(want, &found, path, NULL) < 0)
			return mismatch(ic, path, offset, size, vaddr, name,
					want, &found, ret_isid, diag);
	}
	fsize = (uint64_t)st.st_size;
	if (offset >= fsize)
		return -EINVAL;
	/* Truncate as libipt does, so that our size is the section's. */
	if (size > fsize - offset)
		size = fsize - offset;
	c = copy_find(ic, &st, offset, size);
	if (!c) {
		r = copy_make(ic, fd, 0, &st, offset, size, &c);
		if (r < 0)
			return r;
	}
	return add_section(ic, c, 0, path, offset, size, vaddr, name);
}

int ptd_iscache_add(struct ptd_iscache *ic, const char *path, uint64_t offset,
		    uint64_t size, uint64_t vaddr, const char *name)
{
	int isid;

	return add_file(ic, path, offset, size, vaddr, name, NULL, &isid,
			NULL);
}

int ptd_iscache_add_id(struct ptd_iscache *ic, const char *path,
		       uint64_t offset, uint64_t size, uint64_t vaddr,
		       const char *name, const struct ptd_file_id *want,
		       int *ret_isid, struct ptd_diag *diag)
{
	int isid = 0, r;

	r = add_file(ic, path, offset, size, vaddr, name, want, &isid, diag);
	if (ret_isid)
		*ret_isid = r == -PTD_EIDENTITY ? isid : 0;
	return r;
}

int ptd_iscache_add_piece(struct ptd_iscache *ic, int isid, uint64_t start,
			  uint64_t end)
{
	const struct ptd_module *m = ptd_iscache_module(ic, isid);
	struct copy *c = NULL;
	uint64_t d;

	if (!m || start < m->vaddr || end > m->vaddr + m->size || start >= end)
		return -EINVAL;
	for (size_t i = 0; i < ic->ncopies && !c; i++)
		if (ic->copies[i]->path == m->section_file)
			c = ic->copies[i];
	if (!c)
		return -PTD_ENOIMAGE;
	d = start - m->vaddr;
	/* m's strings may move with ic->mods: copy them first */
	{
		_cleanup_free_ char *path = strdup(m->path);
		_cleanup_free_ char *name = strdup(m->name);
		uint64_t coff = m->section_offset + d, off = m->offset + d;

		if (!path || !name)
			return -ENOMEM;
		return add_section(ic, c, coff, path, off, end - start, start,
				   name);
	}
}

void ptd_iscache_check_identity(struct ptd_iscache *ic, bool on, pid_t pid)
{
	if (!ic)
		return;
	ic->check_id = on;
	ic->live_pid = on && pid > 0 ? pid : 0;
}

void ptd_iscache_set_live_reader(struct ptd_iscache *ic,
				 ptd_iscache_live_read_fn fn, void *ctx)
{
	if (!ic)
		return;
	ic->live_read = fn;
	ic->live_ctx = ctx;
}

uint64_t ptd_iscache_identity_mismatches(const struct ptd_iscache *ic)
{
	return ic ? atomic_load(&ic->nmismatch) : 0;
}

const char *ptd_iscache_intern(struct ptd_iscache *ic, const char *s)
{
	char **v;

	if (!ic || !s)
		return NULL;
	for (size_t i = 0; i < ic->nstrs; i++)
		if (strcmp(ic->strs[i], s) == 0)
			return ic->strs[i];
	if (ic->nstrs >= ISCACHE_MAX_STRINGS)
		return NULL;
	v = reallocarray(ic->strs, ic->nstrs + 1, sizeof(*v));
	if (!v)
		return NULL;
	ic->strs = v;
	v[ic->nstrs] = strdup(s);
	return v[ic->nstrs] ? v[ic->nstrs++] : NULL;
}

void ptd_iscache_set_resolver(struct ptd_iscache *ic,
			      ptd_iscache_resolve_fn fn, void *ctx)
{
	if (!ic)
		return;
	ic->resolve = fn;
	ic->resolve_ctx = fn ? ctx : NULL;
}

int ptd_iscache_add_resolved(struct ptd_iscache *ic, const char *path,
			     uint64_t offset, uint64_t size, uint64_t vaddr,
			     const char *name, struct ptd_diag *diag)
{
	return ptd_iscache_add_resolved_id(ic, path, offset, size, vaddr, name,
					   NULL, NULL, diag);
}

int ptd_iscache_add_resolved_id(struct ptd_iscache *ic, const char *path,
				uint64_t offset, uint64_t size, uint64_t vaddr,
				const char *name,
				const struct ptd_file_id *want, int *ret_isid,
				struct ptd_diag *diag)
{
	char real[PATH_MAX];
	int r;

	if (ret_isid)
		*ret_isid = 0;
	if (!ic || !path || !*path)
		return -EINVAL;
	if (!ic->resolve)
		return ptd_iscache_add_id(ic, path, offset, size, vaddr, name,
					  want, ret_isid, diag);
	real[0] = '\0';
	r = ic->resolve(ic->resolve_ctx, path, real, sizeof(real), diag);
	if (r < 0)
		return r;
	if (!real[0] || !memchr(real, '\0', sizeof(real)))
		return ptd_diagf(diag, -EINVAL,
				 "resolving '%s': the resolver gave no file",
				 path);
	/* A resolver picks the file (a bundle's copy, a build-id cache
	 * entry): its identity is not the traced machine's. */
	return ptd_iscache_add(ic, real, offset, size, vaddr,
			       name ? name : path);
}

const struct ptd_module *ptd_iscache_module(const struct ptd_iscache *ic,
					    int isid)
{
	if (!ic || isid <= 0 || (size_t)isid >= ic->nmods ||
	    ic->mods[isid].isid != isid)
		return NULL;
	return &ic->mods[isid];
}

int ptd_iscache_read(struct ptd_iscache *ic, int isid, uint64_t vaddr,
		     uint8_t *buf, uint64_t size)
{
	int r;

	if (!ic || !buf)
		return -EINVAL;
	if (!ptd_iscache_module(ic, isid))
		return -PTD_ENOIMAGE;
	if (size == 0)
		return 0;
	r = pt_iscache_read(ic->pt, buf, size, isid, vaddr);
	if (r < 0)
		return pt_to_errno(r);
	return r;
}
