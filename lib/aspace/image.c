/* SPDX-License-Identifier: MIT */
/*
 * The image of one address space: a libipt pt_image plus our own sorted,
 * disjoint list of regions.
 *
 * Invariant: every region is exactly the extent of its iscache section
 * ([module.vaddr, module.vaddr + module.size)), and the pt_image holds
 * exactly one section per region.  Regions never overlap, so libipt never
 * has to shrink or split a section itself.
 *
 * libipt 2.0 removes sections only by file name, so removing part of the
 * image removes every section of each affected file and adds back what is
 * left of them; a piece of a section becomes a new iscache entry with the
 * same path and name and adjusted offset/vaddr/size.
 */
#include "aspace/image.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <intel-pt.h>

#include "common/strutil.h"

struct ptd_image {
	struct ptd_iscache *ic;
	struct pt_image *pt;
	char *name;
	struct ptd_image_region *r;	/* sorted by start, disjoint */
	size_t n, cap;
	pid_t pid;			/* live process, 0: none */
	struct ptd_image_stats stats;
	/* gen[isid]: the mapping of section isid (ptd_image_gen); isids
	 * at or above ngen have 0 */
	uint32_t *gen;
	size_t ngen;
	struct ptd_iscache_mirror *own;	/* ptd_image_own_sections */
};

static struct ptd_image *image_alloc(struct ptd_iscache *ic, const char *name)
{
	struct ptd_image *img;

	if (!ic)
		return NULL;
	img = calloc(1, sizeof(*img));
	if (!img)
		return NULL;
	img->ic = ic;
	img->name = strdup(name ? name : "");
	img->pt = pt_image_alloc(name);
	if (!img->name || !img->pt) {
		ptd_image_free(img);
		return NULL;
	}
	return img;
}

int ptd_image_new(struct ptd_iscache *ic, const char *name,
		  struct ptd_image **ret)
{
	if (!ret)
		return -EINVAL;
	*ret = ic ? image_alloc(ic, name) : NULL;
	return *ret ? 0 : ic ? -ENOMEM : -EINVAL;
}

void ptd_image_free(struct ptd_image *img)
{
	if (!img)
		return;
	if (img->pt)
		pt_image_free(img->pt);
	ptd_iscache_mirror_free(img->own);
	free(img->r);
	free(img->gen);
	free(img->name);
	free(img);
}

struct pt_image *ptd_image_pt(struct ptd_image *img)
{
	return img ? img->pt : NULL;
}

struct ptd_iscache *ptd_image_iscache(struct ptd_image *img)
{
	return img ? img->ic : NULL;
}

int ptd_image_own_sections(struct ptd_image *img)
{
	if (!img || img->n || img->own)
		return -EINVAL;
	return ptd_iscache_mirror_new(&img->own);
}

/* Index of the first region whose end is above @addr (n if none). */
static size_t lower_bound(const struct ptd_image *img, uint64_t addr)
{
	size_t lo = 0, hi = img->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (img->r[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int regions_reserve(struct ptd_image *img, size_t more)
{
	size_t want = img->n + more, cap;
	struct ptd_image_region *v;

	if (want <= img->cap)
		return 0;
	cap = img->cap ? img->cap : 16;
	while (cap < want)
		cap *= 2;
	v = reallocarray(img->r, cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	img->r = v;
	img->cap = cap;
	return 0;
}

/* Insert a region that overlaps none (reserve first). */
static void regions_insert(struct ptd_image *img,
			   const struct ptd_image_region *reg)
{
	size_t i = lower_bound(img, reg->start);

	memmove(&img->r[i + 1], &img->r[i], (img->n - i) * sizeof(*img->r));
	img->r[i] = *reg;
	img->n++;
}

/* Add section @isid to the pt_image and the region list. */
static int add_section(struct ptd_image *img, int isid)
{
	const struct ptd_module *m = ptd_iscache_module(img->ic, isid);
	struct pt_image_section_cache *sc;
	struct ptd_image_region reg;
	int r;

	if (!m)
		return -PTD_ENOIMAGE;
	r = regions_reserve(img, 1);
	if (r < 0)
		return r;
	sc = ptd_iscache_mirror_get(img->own, img->ic, isid);
	r = pt_image_add_cached(img->pt, sc ? sc : ptd_iscache_pt(img->ic),
				isid, NULL);
	if (r < 0)
		return r == -pte_nomem ? -ENOMEM : -PTD_ENOIMAGE;
	if (sc)
		img->stats.sections_own++;
	else
		img->stats.sections_shared++;
	reg.start = m->vaddr;
	reg.end = m->vaddr + m->size;
	reg.isid = isid;
	regions_insert(img, &reg);
	return 0;
}

static bool overlaps(const struct ptd_image_region *reg, uint64_t start,
		     uint64_t end)
{
	return reg->start < end && start < reg->end;
}

/* Whether one of the @nhit regions @hit comes from @path. */
static bool path_affected(const struct ptd_image *img, const char *path,
			  const struct ptd_image_region *hit, size_t nhit)
{
	for (size_t i = 0; i < nhit; i++) {
		const struct ptd_module *m =
			ptd_iscache_module(img->ic, hit[i].isid);

		if (m && strcmp(m->path, path) == 0)
			return true;
	}
	return false;
}

/* Add back the piece [start, end) of the section of @old. */
static int add_piece(struct ptd_image *img, const struct ptd_image_region *old,
		     uint64_t start, uint64_t end)
{
	int isid;

	if (start == old->start && end == old->end)
		return add_section(img, old->isid);
	/* From the same copy: opening the path again could read another
	 * file by now. */
	isid = ptd_iscache_add_piece(img->ic, old->isid, start, end);
	if (isid < 0)
		return isid;
	return add_section(img, isid);
}

int ptd_image_unmap(struct ptd_image *img, uint64_t start, uint64_t end)
{
	struct ptd_image_region *old;
	size_t lo, hi, nhit, nold, keep;
	int err = 0;

	if (!img || start > end)
		return -EINVAL;
	lo = lower_bound(img, start);
	for (hi = lo; hi < img->n && img->r[hi].start < end; hi++)
		;
	if (lo == hi)
		return 0;

	/* Take every region of an affected file out of the list.  The
	 * regions overlapping the range, [lo, hi), go first in @old. */
	old = malloc(img->n * sizeof(*old));
	if (!old)
		return -ENOMEM;
	nhit = hi - lo;
	memcpy(old, &img->r[lo], nhit * sizeof(*old));
	nold = nhit;
	keep = 0;
	for (size_t i = 0; i < img->n; i++) {
		const struct ptd_module *m =
			ptd_iscache_module(img->ic, img->r[i].isid);

		if (i >= lo && i < hi)
			continue;
		if (m && path_affected(img, m->path, old, nhit))
			old[nold++] = img->r[i];
		else
			img->r[keep++] = img->r[i];
	}
	img->n = keep;
	for (size_t i = 0; i < nold; i++) {
		const struct ptd_module *m =
			ptd_iscache_module(img->ic, old[i].isid);

		/* libipt names a section by the file it reads: ptd's copy.
		 * Every region of an affected file is in @old, so this takes
		 * them all; repeats return 0: harmless. */
		if (m)
			(void)pt_image_remove_by_filename(img->pt,
							  m->section_file,
							  NULL);
	}
	/* Add back what stays; keep going on failure so that one unusable
	 * piece does not lose the others, and report the first error. */
	for (size_t i = 0; i < nold; i++) {
		const struct ptd_image_region *o = &old[i];
		int r = 0;

		if (!overlaps(o, start, end)) {
			r = add_piece(img, o, o->start, o->end);
		} else {
			if (o->start < start)
				r = add_piece(img, o, o->start, start);
			if (r == 0 && o->end > end)
				r = add_piece(img, o, end, o->end);
		}
		if (r < 0 && err == 0)
			err = r;
	}
	free(old);
	return err;
}

int ptd_image_clear(struct ptd_image *img)
{
	int r;

	if (!img)
		return -EINVAL;
	/* A NULL asid matches every section. */
	r = pt_image_remove_by_asid(img->pt, NULL);
	if (r < 0)
		return -PTD_ENOIMAGE;
	img->n = 0;
	return 0;
}

int ptd_image_map_file(struct ptd_image *img, const char *path,
		       uint64_t offset, uint64_t size, uint64_t vaddr,
		       const char *name, struct ptd_diag *diag)
{
	return ptd_image_map_file_id(img, path, offset, size, vaddr, name,
				     NULL, diag);
}

/* The file at @path is not the one mapped (@rd says so): the range loses
 * what it held and gets the process's code instead, @fallback, if any. */
static int map_refused(struct ptd_image *img, const char *path,
		       uint64_t size, uint64_t vaddr, int fallback,
		       const struct ptd_diag *rd, struct ptd_diag *diag)
{
	int r = ptd_image_unmap(img, vaddr, vaddr + size);

	if (r == 0 && fallback > 0)
		r = add_section(img, fallback);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot map '%s' at 0x%" PRIx64
				 ": %s", path, vaddr, ptd_strerror(r));
	return ptd_diagf(diag, -PTD_EIDENTITY, "cannot map '%s' at 0x%" PRIx64
			 ": %s", path, vaddr, rd->msg);
}

uint32_t ptd_image_gen(const struct ptd_image *img, int isid)
{
	return img && isid > 0 && (size_t)isid < img->ngen ? img->gen[isid]
							   : 0;
}

/* Section @isid was mapped where it was not: a new mapping of it. */
static int gen_bump(struct ptd_image *img, int isid)
{
	if ((size_t)isid >= img->ngen) {
		size_t n = img->ngen ? img->ngen : 64;
		uint32_t *v;

		while (n <= (size_t)isid)
			n *= 2;
		v = reallocarray(img->gen, n, sizeof(*v));
		if (!v)
			return -ENOMEM;
		memset(v + img->ngen, 0, (n - img->ngen) * sizeof(*v));
		img->gen = v;
		img->ngen = n;
	}
	img->gen[isid]++;
	return 0;
}

int ptd_image_map_file_id(struct ptd_image *img, const char *path,
			  uint64_t offset, uint64_t size, uint64_t vaddr,
			  const char *name, const struct ptd_file_id *want,
			  struct ptd_diag *diag)
{
	const struct ptd_image_region *was;
	int isid, r, fallback = 0;
	bool remapped;

	if (!img || !path)
		return -EINVAL;
	if (size == 0 || vaddr + size < vaddr)
		return ptd_diagf(diag, -EINVAL,
				 "cannot map '%s': bad range 0x%" PRIx64
				 "+0x%" PRIx64, path, vaddr, size);
	struct ptd_diag rd = { "" };

	isid = ptd_iscache_add_resolved_id(img->ic, path, offset, size, vaddr,
					   name, want, &fallback, &rd);
	if (isid == -PTD_EIDENTITY)
		return map_refused(img, path, size, vaddr, fallback, &rd,
				   diag);
	if (isid < 0 && rd.msg[0])
		return ptd_diagf(diag, isid, "cannot map '%s' at 0x%" PRIx64
				 ": %s", path, vaddr, rd.msg);
	if (isid == -EINVAL) {
		struct stat st;

		if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
			return ptd_diagf(diag, -PTD_ENOIMAGE,
					 "cannot map '%s' at 0x%" PRIx64
					 ": not a regular file", path, vaddr);
		return ptd_diagf(diag, -PTD_ENOIMAGE,
				 "cannot map '%s' at 0x%" PRIx64
				 ": offset 0x%" PRIx64 " is beyond its end",
				 path, vaddr, offset);
	}
	if (isid < 0)
		return ptd_diagf(diag, isid,
				 "cannot map '%s' at 0x%" PRIx64 ": %s", path,
				 vaddr, ptd_strerror(isid));
	/* The same section where it already is (a repeated report of one
	 * mapping) is the same mapping; anywhere else it is a new one. */
	was = ptd_image_find(img, vaddr);
	remapped = was && was->isid == isid;
	r = ptd_image_unmap(img, vaddr, vaddr + size);
	if (r < 0)
		return ptd_diagf(diag, r,
				 "cannot map '%s' at 0x%" PRIx64
				 ": removing what was there: %s",
				 path, vaddr, ptd_strerror(r));
	r = add_section(img, isid);
	if (r == 0 && !remapped)
		r = gen_bump(img, isid);
	if (r < 0)
		return ptd_diagf(diag, r,
				 "cannot map '%s' at 0x%" PRIx64 ": %s", path,
				 vaddr, ptd_strerror(r));
	return isid;
}

int ptd_image_load_maps(struct ptd_image *img, const struct ptd_maps *maps,
			unsigned *ret_skipped, struct ptd_diag *diag)
{
	unsigned skipped = 0;

	if (!img || !maps)
		return -EINVAL;
	for (size_t i = 0; i < maps->n; i++) {
		const struct ptd_map *m = &maps->v[i];
		struct ptd_file_id id;
		struct ptd_diag d;
		int r;

		if (m->kind != PTD_MAP_FILE || !(m->prot & PTD_MAP_PROT_X))
			continue;
		ptd_file_id_from_map(m, &id);
		r = ptd_image_map_file_id(img, m->path, m->offset,
					  m->end - m->start, m->start, NULL,
					  &id, &d);
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			if (skipped++ == 0 && diag)
				*diag = d;
		}
	}
	if (ret_skipped)
		*ret_skipped = skipped;
	return 0;
}

/* Read the live process; counts into the stats.  Returns bytes or -1. */
static int live_read(struct ptd_image *img, uint64_t ip, uint8_t *buf,
		     size_t size)
{
	struct iovec local = { buf, size };
	struct iovec remote = { (void *)(uintptr_t)ip, size };
	ssize_t n;

	if (size > INT_MAX)
		size = local.iov_len = remote.iov_len = INT_MAX;
	n = process_vm_readv(img->pid, &local, 1, &remote, 1, 0);
	if (n <= 0) {
		img->stats.callback_failures++;
		return -1;
	}
	img->stats.callback_reads++;
	img->stats.callback_bytes += (uint64_t)n;
	return (int)n;
}

static int live_callback(uint8_t *buffer, size_t size,
			 const struct pt_asid *asid, uint64_t ip, void *context)
{
	struct ptd_image *img = context;
	int n;

	if (!img->pid)
		return -pte_nomap;
	n = live_read(img, ip, buffer, size);
	return n < 0 ? -pte_nomap : n;
}

int ptd_image_set_live_pid(struct ptd_image *img, pid_t pid)
{
	int r;

	if (!img || pid < 0)
		return -EINVAL;
	if (pid == 0)
		r = pt_image_set_callback(img->pt, NULL, NULL);
	else
		r = pt_image_set_callback(img->pt, live_callback, img);
	if (r < 0)
		return -EINVAL;
	img->pid = pid;
	return 0;
}

const struct ptd_image_region *ptd_image_find(const struct ptd_image *img,
					      uint64_t ip)
{
	size_t i;

	if (!img)
		return NULL;
	i = lower_bound(img, ip);
	if (i < img->n && img->r[i].start <= ip)
		return &img->r[i];
	return NULL;
}

int ptd_image_module_of(const struct ptd_image *img, int isid, uint64_t ip,
			const char **ret_name, uint64_t *ret_offset)
{
	const struct ptd_module *m;

	if (!img)
		return -EINVAL;
	if (isid == 0) {
		if (ret_name)
			*ret_name = "[live]";
		if (ret_offset)
			*ret_offset = ip;
		return 0;
	}
	m = ptd_iscache_module(img->ic, isid);
	if (!m)
		return -ENOENT;
	if (ret_name)
		*ret_name = m->name;
	if (ret_offset)
		*ret_offset = ip - m->vaddr + m->offset;
	return 0;
}

int ptd_image_read(struct ptd_image *img, uint64_t ip, uint8_t *buf,
		   size_t size)
{
	const struct ptd_image_region *reg;
	int n;

	if (!img || (!buf && size))
		return -EINVAL;
	if (size == 0)
		return 0;
	reg = ptd_image_find(img, ip);
	if (reg) {
		uint64_t avail = reg->end - ip, done = 0;

		if (size > INT_MAX)
			size = INT_MAX;
		if (avail > size)
			avail = size;
		/* libipt may cut a large read short (it promises 4 KiB);
		 * ours is short only at the region end. */
		while (done < avail) {
			n = ptd_iscache_read(img->ic, reg->isid, ip + done,
					     buf + done, avail - done);
			if (n <= 0)
				return done ? (int)done : (n ? n : -PTD_ENOIMAGE);
			done += (uint64_t)n;
		}
		return (int)done;
	}
	if (!img->pid)
		return -PTD_ENOIMAGE;
	/* As the decoder would: the live callback for what no section has.
	 * Do not read into the next region. */
	{
		size_t i = lower_bound(img, ip);

		if (i < img->n && img->r[i].start - ip < size)
			size = (size_t)(img->r[i].start - ip);
	}
	n = live_read(img, ip, buf, size);
	return n < 0 ? -PTD_ENOIMAGE : n;
}

int ptd_image_copy(struct ptd_image *dst, const struct ptd_image *src)
{
	int r, err = 0;

	if (!dst || !src || dst->ic != src->ic)
		return -EINVAL;
	if (dst == src)
		return 0;
	r = ptd_image_clear(dst);
	if (r < 0)
		return r;
	if (src->ngen > dst->ngen) {
		uint32_t *v = reallocarray(dst->gen, src->ngen, sizeof(*v));

		if (!v)
			return -ENOMEM;
		dst->gen = v;
		dst->ngen = src->ngen;
	}
	if (dst->ngen) {
		memset(dst->gen, 0, dst->ngen * sizeof(*dst->gen));
		if (src->ngen)
			memcpy(dst->gen, src->gen,
			       src->ngen * sizeof(*dst->gen));
	}
	for (size_t i = 0; i < src->n; i++) {
		r = add_section(dst, src->r[i].isid);
		if (r < 0 && err == 0)
			err = r;
	}
	return err;
}

void ptd_image_get_stats(const struct ptd_image *img,
			 struct ptd_image_stats *ret)
{
	if (!img || !ret)
		return;
	*ret = img->stats;
}
