/* SPDX-License-Identifier: MIT */
/*
 * perf.data decoding: where the traced code is (decode.h, "Finding the
 * traced files" and "Kernel code"): files by their traced path, a
 * --sysroot or their build-id; the kernel's from kcore or a vmlinux, its
 * modules, and the bytes PERF_RECORD_TEXT_POKE changed.
 */
#include "perfdata/decode-int.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strutil.h"

/* ---- finding files ---------------------------------------------------- */

static bool is_file(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The build-id of @path as hex in @hex, or NULL if none is known. */
static const char *bid_of(const struct dec *d, const char *path,
			  char hex[static 2 * PTD_PERFDATA_BUILD_ID_MAX + 1])
{
	const struct ptd_perfdata_buildid *b;
	size_t i;

	for (i = 0; i < d->nbids; i++)
		if (!strcmp(d->bids[i].path, path))
			return d->bids[i].hex;
	b = ptd_perfdata_find_buildid(d->pd, path);
	if (!b)
		return NULL;
	for (i = 0; i < b->size; i++)
		(void)snprintf(hex + 2 * i, 3, "%02x", b->id[i]);
	return hex;
}

/* Format a candidate path into @out; true if it is a regular file. */
static bool try_path(char *out, size_t outsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool try_path(char *out, size_t outsz, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, outsz, fmt, ap);
	va_end(ap);
	return n >= 0 && (size_t)n < outsz && is_file(out);
}

/* perf's build-id cache in @dir: DIR/.build-id/xx/REST/elf (vdso for a
 * vDSO, as perf names what it caches), or the file itself there. */
static bool in_perf_cache(const char *dir, const char *hex, char *out,
			  size_t outsz)
{
	return try_path(out, outsz, "%s/.build-id/%.2s/%s/elf", dir, hex,
			hex + 2) ||
	       try_path(out, outsz, "%s/.build-id/%.2s/%s/vdso", dir, hex,
			hex + 2) ||
	       try_path(out, outsz, "%s/.build-id/%.2s/%s", dir, hex,
			hex + 2);
}

/* The build-id cache layouts (see decode.h). */
static bool find_by_buildid(const struct dec *d, const char *hex, char *out,
			    size_t outsz)
{
	const char *home = getenv("HOME");
	char dir[4096];

	if (!hex || strlen(hex) < 3)
		return false;
	if (d->o->buildid_dir)
		return in_perf_cache(d->o->buildid_dir, hex, out, outsz);
	if (home && snprintf(dir, sizeof(dir), "%s/.debug", home) <
			    (int)sizeof(dir) &&
	    in_perf_cache(dir, hex, out, outsz))
		return true;
	return try_path(out, outsz, "%s/.build-id/%.2s/%s.debug",
			"/usr/lib/debug", hex, hex + 2);
}

/* This machine's own vDSO, as a file (a memfd) made once: the [vdso] of a
 * recording made here, as perf takes its own.  Taken only when its
 * build-id is the recorded one (@hex). */
static bool own_vdso(struct dec *d, const char *hex, char *out,
		     size_t outsz)
{
	if (!d->vdso_made) {
		d->vdso_made = true;
		d->vdso_fd = ptd_elf_own_vdso(d->vdso_bid,
					      sizeof(d->vdso_bid));
	}
	return d->vdso_fd >= 0 && hex && !strcmp(hex, d->vdso_bid) &&
	       snprintf(out, outsz, "/proc/self/fd/%d", d->vdso_fd) <
		       (int)outsz;
}

int pdd_resolve(void *ctx, const char *path, char *out, size_t outsz,
		struct ptd_diag *diag)
{
	struct dec *d = ctx;
	char buf[2 * PTD_PERFDATA_BUILD_ID_MAX + 1];
	const char *hex = bid_of(d, path, buf);
	size_t i;

	for (i = 0; i < d->k.nnames; i++)
		if (!strcmp(d->k.names[i], path))
			return ptd_strlcpy(out, d->k.path, outsz) == 0
				       ? 0
				       : -ENAMETOOLONG;
	if (d->k.poke_open && !strcmp(path, POKE_NAME))
		return ptd_strlcpy(out, d->k.poke_path, outsz) == 0
			       ? 0
			       : -ENAMETOOLONG;
	if (d->o->sysroot && path[0] == '/' &&
	    try_path(out, outsz, "%s%s", d->o->sysroot, path))
		return 0;
	if (find_by_buildid(d, hex, out, outsz))
		return 0;
	if (!strcmp(path, "[vdso]") && own_vdso(d, hex, out, outsz))
		return 0;
	if (path[0] == '/' && is_file(path) &&
	    ptd_strlcpy(out, path, outsz) == 0)
		return 0;
	return ptd_diagf(diag, -ENOENT, "image '%s' (build-id %s): not "
			 "found%s%s%s, in the build-id cache, or at its "
			 "path%s", path, hex ? hex : "unknown",
			 d->o->sysroot ? " under sysroot '" : "",
			 d->o->sysroot ? d->o->sysroot : "",
			 d->o->sysroot ? "'" : "",
			 strcmp(path, "[vdso]") ? ""
						: ", and this machine's vDSO "
						  "has another build-id");
}

/* ---- kernel code ------------------------------------------------------- */

/* A kernel mapping: the kernel's own (pid -1, "[kernel.kallsyms]_text"),
 * a module's or an x86 entry trampoline's, all recorded with the kernel
 * cpumode. */
bool pdd_is_kernel_map(const struct ptd_perf_event *e)
{
	uint16_t mode = e->misc & PERF_RECORD_MISC_CPUMODE_MASK;

	return (e->type == PERF_RECORD_MMAP || e->type == PERF_RECORD_MMAP2) &&
	       (mode == PERF_RECORD_MISC_KERNEL ||
		e->u.mmap.pid == UINT32_MAX);
}

#define KALLSYMS "[kernel.kallsyms]"

static void why_add(struct kernel *k, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void why_add(struct kernel *k, const char *fmt, ...)
{
	size_t n = strlen(k->why);
	va_list ap;

	if (n + 1 >= sizeof(k->why))
		return;
	va_start(ap, fmt);
	(void)vsnprintf(k->why + n, sizeof(k->why) - n, fmt, ap);
	va_end(ap);
}

/* The kernel's recorded build-id (BUILD_ID feature or MMAP2), or NULL. */
static const char *kernel_bid(const struct dec *d,
			      char buf[static 2 * PTD_PERFDATA_BUILD_ID_MAX + 1])
{
	const char *bid = bid_of(d, KALLSYMS, buf);

	return bid ? bid : bid_of(d, KALLSYMS "_text", buf);
}

/* Whether @path is the kernel: an ELF with code that places it (a kcore
 * copy, ET_CORE, or a vmlinux), of the recorded build-id @bid when both
 * are known.  Takes it (k->path, k->elf) and returns true, or says why
 * not in k->why when @quiet_missing is false or the file exists. */
static bool kernel_try(struct kernel *k, const char *path, const char *bid,
		       bool quiet_missing)
{
	struct ptd_elf_info info;
	struct ptd_diag ed = { "" };
	struct stat st;
	size_t i, code = 0;

	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (!quiet_missing)
			why_add(k, "; '%s': %s", path,
				stat(path, &st) < 0 ? strerror(errno)
						    : "not a regular file");
		return false;
	}
	if (ptd_elf_read_info(path, &info, &ed) < 0) {
		why_add(k, "; %s", ed.msg);
		return false;
	}
	for (i = 0; i < info.nseg; i++)
		if (info.seg[i].exec || info.type == ET_CORE)
			code++;
	if (!code) {
		why_add(k, "; '%s' has no code segment", path);
		ptd_elf_info_fini(&info);
		return false;
	}
	if (bid && info.build_id[0] && strcmp(bid, info.build_id)) {
		why_add(k, "; '%s' is another kernel (build-id %s)", path,
			info.build_id);
		ptd_elf_info_fini(&info);
		return false;
	}
	if (ptd_strlcpy(k->path, path, sizeof(k->path)) < 0) {
		ptd_elf_info_fini(&info);
		return false;
	}
	k->elf = info;
	return true;
}

/* The newest kcore perf buildid-cache --kcore keeps for @bid under @dir:
 * DIR/[kernel.kcore]/BID/TIMESTAMP/kcore. */
static bool kcore_in_cache(struct kernel *k, const char *dir,
			   const char *bid)
{
	char base[PATH_MAX], best[256] = "", path[PATH_MAX];
	struct dirent *de;
	DIR *dp;

	if (snprintf(base, sizeof(base), "%s/[kernel.kcore]/%s", dir, bid) >=
	    (int)sizeof(base))
		return false;
	dp = opendir(base);
	if (!dp)
		return false;
	while ((de = readdir(dp)) != NULL)
		if (de->d_name[0] != '.' && strlen(de->d_name) < sizeof(best) &&
		    strcmp(de->d_name, best) > 0)
			(void)ptd_strlcpy(best, de->d_name, sizeof(best));
	(void)closedir(dp);
	return best[0] &&
	       snprintf(path, sizeof(path), "%s/%s/kcore", base, best) <
		       (int)sizeof(path) &&
	       kernel_try(k, path, NULL, false);
}

/* Find the kernel's code once: o->kernel; the perf.data directory's
 * kcore; by build-id (perf's kcore cache, the build-id caches); the
 * vmlinux places named by the recording's OSRELEASE, under the sysroot. */
static bool kernel_find(struct dec *d)
{
	static const char *const places[][2] = {
		{ "/usr/lib/debug/boot/vmlinux-", "" },
		{ "/boot/vmlinux-", "" },
		{ "/usr/lib/debug/lib/modules/", "/vmlinux" },
		{ "/lib/modules/", "/build/vmlinux" },
	};
	struct kernel *k = &d->k;
	char buf[2 * PTD_PERFDATA_BUILD_ID_MAX + 1], path[PATH_MAX];
	const char *bid = kernel_bid(d, buf);
	const char *rel = d->pd->osrelease;
	const char *home = getenv("HOME");
	size_t i;

	if (k->looked)
		return k->found;
	k->looked = true;
	if (d->o->kernel) {
		/* Given: that one or none. */
		k->found = kernel_try(k, d->o->kernel, bid, false);
		return k->found;
	}
	if (k->kcore && (k->found = kernel_try(k, k->kcore, NULL, false)))
		return true;
	if (bid) {
		if (d->o->buildid_dir)
			k->found = kcore_in_cache(k, d->o->buildid_dir, bid);
		else if (home && snprintf(path, sizeof(path), "%s/.debug",
					  home) < (int)sizeof(path))
			k->found = kcore_in_cache(k, path, bid);
		if (!k->found && find_by_buildid(d, bid, path, sizeof(path)))
			k->found = kernel_try(k, path, bid, false);
		if (k->found)
			return true;
	}
	for (i = 0; rel && !strchr(rel, '/') &&
		    i < sizeof(places) / sizeof(places[0]);
	     i++) {
		if (snprintf(path, sizeof(path), "%s%s%s%s",
			     d->o->sysroot ? d->o->sysroot : "",
			     places[i][0], rel, places[i][1]) >=
		    (int)sizeof(path))
			continue;
		if ((k->found = kernel_try(k, path, bid, true)))
			return true;
	}
	return false;
}

/* Give process @pi the kernel changes from @from on (@maps_only: the
 * code, not the misses: after an exec cleared its image). */
int pdd_kernel_give(struct dec *d, size_t pi, size_t from, bool maps_only)
{
	size_t i;
	int r;

	for (i = from; i < d->k.nkev; i++) {
		struct kev *kv = &d->k.kev[i];

		if (maps_only && kv->ev.op != PTD_TL_MAP)
			continue;
		r = pdd_tl_add_proc(d, pi, &kv->ev, kv->miss);
		if (r < 0)
			return r;
	}
	return 0;
}

static int kev_add(struct kernel *k, enum ptd_tl_op op, const char *name,
		   uint64_t start, uint64_t end, uint64_t pgoff, char *miss)
{
	struct kev *kv = reallocarray(k->kev, k->nkev + 1, sizeof(*kv));

	if (!kv) {
		free(miss);
		return -ENOMEM;
	}
	k->kev = kv;
	kv = &k->kev[k->nkev];
	memset(kv, 0, sizeof(*kv));
	kv->ev.op = op;
	kv->ev.start = start;
	kv->ev.end = end;
	kv->ev.pgoff = pgoff;
	kv->miss = miss;
	if (op == PTD_TL_MAP && !(kv->ev.path = strdup(name))) {
		free(miss);
		return -ENOMEM;
	}
	k->nkev++;
	return 0;
}

static int kernel_name(struct kernel *k, const char *name)
{
	char **n;
	size_t i;

	for (i = 0; i < k->nnames; i++)
		if (!strcmp(k->names[i], name))
			return 0;
	n = reallocarray(k->names, k->nnames + 1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	k->names = n;
	n[k->nnames] = strdup(name);
	if (!n[k->nnames])
		return -ENOMEM;
	k->nnames++;
	return 0;
}

/* A kernel mapping record: its code, found in the kernel ELF by address,
 * goes into every process's image, now and later. */
int pdd_kernel_change(struct dec *d, const struct ptd_perf_event *e)
{
	const struct ptd_perf_mmap *m = &e->u.mmap;
	struct kernel *k = &d->k;
	const char *name = strncmp(m->filename, KALLSYMS, strlen(KALLSYMS))
				   ? m->filename
				   : KALLSYMS;
	uint64_t start = m->addr, end = m->addr + m->len;
	size_t first = k->nkev, i;
	char *miss = NULL;
	int r = 0;

	if (!k->traced || !m->len)
		return 0;	/* no kernel trace: its maps do not matter */
	if (end < start)
		end = UINT64_MAX;
	if (kernel_find(d)) {
		for (i = 0; r == 0 && i < k->elf.nseg; i++) {
			const struct ptd_elf_segment *sg = &k->elf.seg[i];
			uint64_t lo = start > sg->vaddr ? start : sg->vaddr;
			uint64_t hi = end < sg->vaddr + sg->size
					      ? end
					      : sg->vaddr + sg->size;

			if ((!sg->exec && k->elf.type != ET_CORE) || lo >= hi)
				continue;
			r = kev_add(k, PTD_TL_MAP, name, lo, hi,
				    sg->offset + (lo - sg->vaddr), NULL);
		}
		if (r == 0 && k->nkev > first)
			r = kernel_name(k, name);
		if (r == 0 && k->nkev == first && !k->told_modules) {
			/* Code the ELF does not hold: a vmlinux has no
			 * modules. */
			k->told_modules = true;
			if (asprintf(&miss, "kernel code '%s' at 0x%" PRIx64
				     "-0x%" PRIx64 ": not in '%s'%s; other "
				     "such kernel mappings are left out "
				     "too", m->filename, start, end, k->path,
				     k->elf.type == ET_CORE
					     ? ""
					     : " (module code is only in a "
					       "kcore copy: perf record "
					       "--kcore)") < 0)
				return -ENOMEM;
		}
	} else if (!k->told_missing) {
		char buf[2 * PTD_PERFDATA_BUILD_ID_MAX + 1];
		const char *bid = kernel_bid(d, buf);
		char looked[256] = "";

		k->told_missing = true;
		if (!d->o->kernel)
			(void)snprintf(looked, sizeof(looked), " (looked for "
				       "kcore_dir beside the data, in the "
				       "build-id caches%s%s%s)",
				       d->pd->osrelease ? ", for vmlinux-" : "",
				       d->pd->osrelease ? d->pd->osrelease : "",
				       d->pd->osrelease
					       ? " in /usr/lib/debug/boot, "
						 "/boot, ..."
					       : "");
		if (asprintf(&miss, "kernel code (%s, build-id %s): no kcore "
			     "copy or vmlinux found%s%s; record with perf "
			     "record --kcore or give the kernel's image "
			     "(ptctl decode --kernel FILE); every kernel "
			     "mapping is left out",
			     m->filename, bid ? bid : "unknown", looked,
			     k->why) < 0)
			return -ENOMEM;
	}
	if (r == 0 && k->nkev == first)
		r = kev_add(k, PTD_TL_UNMAP, NULL, start, end, 0, miss);
	else
		free(miss);
	for (i = 0; r == 0 && i < d->npr; i++)
		r = pdd_kernel_give(d, i, first, false);
	return r;
}

/* A TEXT_POKE: the kernel's new bytes at their address from here on, in
 * every process's image (as perf applies them to its kcore copy). */
int pdd_kernel_poke(struct dec *d, const struct ptd_perf_event *e)
{
	const struct ptd_perf_text_poke *t = &e->u.poke;
	struct kernel *k = &d->k;
	size_t first = k->nkev, i;
	int r;

	if (!k->traced || !t->new_len)
		return 0;
	if (!k->poke_open) {
		k->poke_fd = memfd_create("ptd-text-poke", MFD_CLOEXEC);
		if (k->poke_fd < 0)
			return -errno;
		k->poke_open = true;
		(void)snprintf(k->poke_path, sizeof(k->poke_path),
			       "/proc/self/fd/%d", k->poke_fd);
	}
	if (pwrite(k->poke_fd, t->new_bytes, t->new_len,
		   (off_t)k->poke_size) != (ssize_t)t->new_len)
		return errno ? -errno : -EIO;
	r = kev_add(k, PTD_TL_MAP, POKE_NAME, t->addr, t->addr + t->new_len,
		    k->poke_size, NULL);
	k->poke_size += t->new_len;
	for (i = 0; r == 0 && i < d->npr; i++)
		r = pdd_kernel_give(d, i, first, false);
	return r;
}

void pdd_kernel_free(struct kernel *k)
{
	size_t i;

	if (k->poke_open)
		(void)close(k->poke_fd);
	for (i = 0; i < k->nkev; i++) {
		free(k->kev[i].ev.path);
		free(k->kev[i].miss);
	}
	free(k->kev);
	for (i = 0; i < k->nnames; i++)
		free(k->names[i]);
	free(k->names);
	ptd_elf_info_fini(&k->elf);
}
