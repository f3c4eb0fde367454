/* SPDX-License-Identifier: MIT */
/*
 * perf.data decoding (see decode.h): one pass over the records builds each
 * thread's stream, its losses, and each process's timeline; then every
 * thread is decoded, segment by segment between losses.
 */
#include "perfdata/decode.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <elf.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aspace/elf.h"
#include "aspace/iscache.h"
#include "aspace/timeline.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "decode/insncache.h"
#include "perf/addrfilter.h"
#include "perf/percpu.h"

/* A place in a thread's stream where something was lost. */
struct loss {
	uint64_t pos;
	uint64_t bytes;		/* trace bytes lost, 0 unknown */
	bool split;		/* the stream is discontinuous here */
	char *why;
};

struct thr {
	pid_t pid, tid;
	size_t proc;
	uint64_t first_seq;
	struct ptd_buf pt;
	bool have_next;
	uint64_t next_aux;	/* expected AUX offset of the next payload */
	uint64_t last_len;	/* bytes of the last payload appended */
	bool have_aux_end;
	uint64_t aux_end;	/* end of the AUX data PERF_RECORD_AUX announced */
	struct loss *loss;
	size_t nloss;
};

/* A mapping whose file was not found. */
struct miss {
	uint64_t seq;
	char *msg;
};

struct proc {
	pid_t pid;
	struct ptd_timeline tl;
	struct miss *miss;
	size_t nmiss;
	/* The recording's address filter resolved in this process (see
	 * proc_filter): done once; all zero if there is none. */
	bool filter_done;
	struct pt_conf_addr_filter filter;
};

/* A traced path's build-id (MMAP2 records). */
struct bid {
	char *path;
	char hex[2 * PTD_PERFDATA_BUILD_ID_MAX + 1];
};

/* A change of the kernel's part of every image: a MAP of kernel code from
 * the kernel ELF, or the UNMAP of a range whose code was not found (with
 * why in @miss, reported once). */
struct kev {
	struct ptd_tl_event ev;
	char *miss;
};

/* Where the kernel's code comes from (decode.h "Kernel code"). */
struct kernel {
	bool traced;		/* some intel_pt event traces the kernel */
	const char *kcore;	/* the perf.data directory's kcore, or NULL */
	bool looked;
	bool found;
	char path[PATH_MAX];	/* the ELF (found) */
	struct ptd_elf_info elf;
	char why[1024];		/* why none was found (!found) */
	bool told_missing;	/* a miss was attached to a kev already */
	bool told_modules;
	struct kev *kev;	/* every change so far, in order */
	size_t nkev;
	char **names;		/* traced names resolved to @path */
	size_t nnames;
	/* TEXT_POKE bytes, one after the other, in a memfd mapped as
	 * "[text_poke]" */
	bool poke_open;
	int poke_fd;
	uint64_t poke_size;
	char poke_path[64];
};

struct dec {
	const struct ptd_perfdata *pd;
	const struct ptd_input_opts *o;
	struct ptd_diag *diag;
	struct thr *th;
	size_t nth;
	struct proc *pr;
	size_t npr;
	struct bid *bids;
	size_t nbids;
	struct ptd_iscache *ic;
	struct kernel k;
	/* tid -> pid (pid_of), made on first need */
	bool pidmap_made;
	struct tidpid *pidmap;
	size_t npidmap, npidmap_cap;
	/* This machine's vDSO (own_vdso), made on first need. */
	bool vdso_made;
	int vdso_fd;
	char vdso_bid[2 * PTD_ELF_BUILD_ID_MAX + 1];
};

struct tidpid;
static int kernel_give(struct dec *d, size_t pi, size_t from, bool maps_only);
/* What code changed by PERF_RECORD_TEXT_POKE is called in records. */
#define POKE_NAME "[text_poke]"
static int tl_add_proc(struct dec *d, size_t pi, struct ptd_tl_event *ev,
		       const char *miss);

/* ---- threads and processes -------------------------------------------- */

static struct proc *proc_get(struct dec *d, pid_t pid, size_t *ret_idx)
{
	struct proc *p;
	size_t i;

	for (i = 0; i < d->npr; i++)
		if (d->pr[i].pid == pid)
			goto out;
	p = reallocarray(d->pr, d->npr + 1, sizeof(*p));
	if (!p)
		return NULL;
	d->pr = p;
	memset(&d->pr[i], 0, sizeof(*p));
	d->pr[i].pid = pid;
	ptd_timeline_init(&d->pr[i].tl);
	d->npr++;
	/* Every process runs the kernel mapped so far. */
	if (kernel_give(d, i, 0, false) < 0)
		return NULL;
out:
	if (ret_idx)
		*ret_idx = i;
	return &d->pr[i];
}

static struct thr *thr_find(struct dec *d, pid_t tid)
{
	size_t i;

	for (i = 0; i < d->nth; i++)
		if (d->th[i].tid == tid)
			return &d->th[i];
	return NULL;
}

/* Which process each thread belongs to, by the first record that names
 * both (ITRACE_START, COMM, FORK), sorted by tid: made once, on the first
 * thread whose process is not known. */
struct tidpid {
	pid_t tid, pid;
	size_t seq;		/* the record's place: the first one wins */
};

static int tidpid_cmp(const void *a, const void *b)
{
	const struct tidpid *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int tid_cmp(const void *a, const void *b)
{
	const struct tidpid *x = a, *y = b;

	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int make_pidmap(struct dec *d)
{
	size_t i, n = 0, k;

	d->pidmap_made = true;
	for (i = 0; i < d->pd->nrecs; i++) {
		struct ptd_perf_event e;
		pid_t tid, pid;

		if (d->pd->recs[i].attr < 0 ||
		    ptd_perfdata_event(d->pd, i, &e, NULL) < 0)
			continue;
		if (e.type == PERF_RECORD_ITRACE_START) {
			tid = (pid_t)e.u.itrace.tid;
			pid = (pid_t)e.u.itrace.pid;
		} else if (e.type == PERF_RECORD_COMM) {
			tid = (pid_t)e.u.comm.tid;
			pid = (pid_t)e.u.comm.pid;
		} else if (e.type == PERF_RECORD_FORK) {
			tid = (pid_t)e.u.task.tid;
			pid = (pid_t)e.u.task.pid;
		} else {
			continue;
		}
		if (n == d->npidmap_cap) {
			size_t cap = n ? 2 * n : 64;
			struct tidpid *v = reallocarray(d->pidmap, cap,
							sizeof(*v));

			if (!v)
				return -ENOMEM;
			d->pidmap = v;
			d->npidmap_cap = cap;
		}
		d->pidmap[n].tid = tid;
		d->pidmap[n].pid = pid;
		d->pidmap[n].seq = n;
		n++;
	}
	/* by tid, each tid's first record first; keep that one */
	if (n)
		qsort(d->pidmap, n, sizeof(*d->pidmap), tidpid_cmp);
	for (i = 0, k = 0; i < n; i++)
		if (!k || d->pidmap[k - 1].tid != d->pidmap[i].tid)
			d->pidmap[k++] = d->pidmap[i];
	d->npidmap = k;
	return 0;
}

/* The process of @tid by the records that name both (0: none does). */
static pid_t pid_of(struct dec *d, pid_t tid)
{
	struct tidpid key = { tid, 0, 0 };
	const struct tidpid *hit;

	if (!d->pidmap_made && make_pidmap(d) < 0)
		return 0;
	hit = bsearch(&key, d->pidmap, d->npidmap, sizeof(key), tid_cmp);
	return hit ? hit->pid : 0;
}

/* Thread @tid (of @pid, 0: look it up), created on first sight. */
static struct thr *thr_get(struct dec *d, pid_t pid, pid_t tid)
{
	struct thr *t = thr_find(d, tid);
	struct proc *p;
	size_t pi;

	if (t)
		return t;
	if (pid <= 0)
		pid = pid_of(d, tid);
	if (pid <= 0)
		pid = tid;
	p = proc_get(d, pid, &pi);
	if (!p)
		return NULL;
	t = reallocarray(d->th, d->nth + 1, sizeof(*t));
	if (!t)
		return NULL;
	d->th = t;
	t = &d->th[d->nth++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	t->proc = pi;
	t->first_seq = p->tl.next_seq;
	return t;
}

/* Append trace bytes to @t.  Every image change read before a thread's
 * first byte is in effect when its stream starts. */
static int thr_append(struct dec *d, struct thr *t, const uint8_t *p,
		      size_t n)
{
	if (!n)
		return 0;
	if (!t->pt.len)
		t->first_seq = d->pr[t->proc].tl.next_seq;
	t->last_len = n;
	return ptd_buf_append(&t->pt, p, n);
}

static int add_loss(struct thr *t, uint64_t bytes, bool split,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int add_loss(struct thr *t, uint64_t bytes, bool split,
		    const char *fmt, ...)
{
	struct loss *l = reallocarray(t->loss, t->nloss + 1, sizeof(*l));
	va_list ap;
	int n;

	if (!l)
		return -ENOMEM;
	t->loss = l;
	l = &t->loss[t->nloss];
	l->pos = t->pt.len;
	l->bytes = bytes;
	l->split = split;
	va_start(ap, fmt);
	n = vasprintf(&l->why, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	t->nloss++;
	return 0;
}

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

static int resolve(void *ctx, const char *path, char *out, size_t outsz,
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
static bool is_kernel_map(const struct ptd_perf_event *e)
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
		ptd_elf_info_free(&info);
		return false;
	}
	if (bid && info.build_id[0] && strcmp(bid, info.build_id)) {
		why_add(k, "; '%s' is another kernel (build-id %s)", path,
			info.build_id);
		ptd_elf_info_free(&info);
		return false;
	}
	if (ptd_strlcpy(k->path, path, sizeof(k->path)) < 0) {
		ptd_elf_info_free(&info);
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
static int kernel_give(struct dec *d, size_t pi, size_t from, bool maps_only)
{
	size_t i;
	int r;

	for (i = from; i < d->k.nkev; i++) {
		struct kev *kv = &d->k.kev[i];

		if (maps_only && kv->ev.op != PTD_TL_MAP)
			continue;
		r = tl_add_proc(d, pi, &kv->ev, kv->miss);
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
static int kernel_change(struct dec *d, const struct ptd_perf_event *e)
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
		r = kernel_give(d, i, first, false);
	return r;
}

/* A TEXT_POKE: the kernel's new bytes at their address from here on, in
 * every process's image (as perf applies them to its kcore copy). */
static int kernel_poke(struct dec *d, const struct ptd_perf_event *e)
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
		r = kernel_give(d, i, first, false);
	return r;
}

static void kernel_free(struct kernel *k)
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
	ptd_elf_info_free(&k->elf);
}

/* ---- the pass over the records ---------------------------------------- */

/* Add @ev to process @pi's timeline, placed at every known thread's
 * length; @miss: why its code was not found (an error record for each
 * thread it concerns). */
static int tl_add_proc(struct dec *d, size_t pi, struct ptd_tl_event *ev,
		       const char *miss)
{
	struct ptd_tl_pos *pos;
	struct proc *p = &d->pr[pi];
	size_t i, n = 0;
	int64_t seq;

	pos = calloc(d->nth + 1, sizeof(*pos));
	if (!pos)
		return -ENOMEM;
	for (i = 0; i < d->nth; i++)
		if (d->th[i].pid == p->pid) {
			pos[n].tid = d->th[i].tid;
			pos[n++].pos = d->th[i].pt.len;
		}
	ev->pos = pos;
	ev->npos = n;
	seq = ptd_timeline_add(&p->tl, ev);
	ev->pos = NULL;
	ev->npos = 0;
	free(pos);
	if (seq < 0)
		return (int)seq;
	if (miss) {
		struct miss *m = reallocarray(p->miss, p->nmiss + 1,
					      sizeof(*m));

		if (!m)
			return -ENOMEM;
		p->miss = m;
		m[p->nmiss].seq = (uint64_t)seq;
		m[p->nmiss].msg = strdup(miss);
		if (!m[p->nmiss].msg)
			return -ENOMEM;
		p->nmiss++;
	}
	return 0;
}

/* The same for process @pid (created on first sight). */
static int tl_add(struct dec *d, pid_t pid, struct ptd_tl_event *ev,
		  const char *miss)
{
	size_t pi;

	if (!proc_get(d, pid, &pi))
		return -ENOMEM;
	return tl_add_proc(d, pi, ev, miss);
}

static int note_buildid(struct dec *d, const struct ptd_perf_mmap *m)
{
	struct bid *b;
	size_t i;

	if (!m->has_build_id || !m->build_id_size)
		return 0;
	b = reallocarray(d->bids, d->nbids + 1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	d->bids = b;
	b = &d->bids[d->nbids];
	b->path = strdup(m->filename);
	if (!b->path)
		return -ENOMEM;
	for (i = 0; i < m->build_id_size; i++)
		(void)snprintf(b->hex + 2 * i, 3, "%02x", m->build_id[i]);
	d->nbids++;
	return 0;
}

/* An image change from record @e of process @pid. */
static int image_change(struct dec *d, const struct ptd_perf_event *e)
{
	struct ptd_tl_event ev;
	struct ptd_diag rd = { "" };
	char out[4096];
	pid_t pid;
	int r;

	memset(&ev, 0, sizeof(ev));
	r = ptd_perf_event_to_tl(e, &ev, NULL);
	if (r <= 0)
		return 0;	/* nothing for the image (or a bad range) */
	pid = (pid_t)(e->type == PERF_RECORD_COMM ? e->u.comm.pid
			 : e->type == PTD_PERF_RECORD_UNMAP ? e->u.unmap.pid
							    : e->u.mmap.pid);
	if (e->type == PERF_RECORD_MMAP2) {
		int br = note_buildid(d, &e->u.mmap);

		if (br < 0)
			return br;
	}
	if (!thr_find(d, (pid_t)(e->type == PERF_RECORD_COMM
					 ? e->u.comm.tid
					 : e->u.mmap.tid)) &&
	    e->type != PTD_PERF_RECORD_UNMAP &&
	    !thr_get(d, pid, (pid_t)(e->type == PERF_RECORD_COMM
					     ? e->u.comm.tid
					     : e->u.mmap.tid)))
		return -ENOMEM;
	if (r == PTD_PERF_TL_NONFILE) {
		/* Non-file code: by build-id only, as a file named like it
		 * (the resolver finds it); else left out of the image. */
		ev.op = PTD_TL_MAP;
		ev.path = ev.name;
		ev.pgoff = 0;
		ev.name = NULL;
	}
	if (ev.op == PTD_TL_MAP &&
	    resolve(d, ev.path, out, sizeof(out), &rd) < 0) {
		ev.op = PTD_TL_UNMAP;	/* no stale code stays there */
		ev.path = NULL;
		return tl_add(d, pid, &ev, rd.msg);
	}
	r = tl_add(d, pid, &ev, NULL);
	if (r == 0 && ev.op == PTD_TL_EXEC) {
		/* The exec emptied the image; the kernel is still there. */
		size_t pi;

		if (!proc_get(d, pid, &pi))
			return -ENOMEM;
		r = kernel_give(d, pi, 0, true);
	}
	return r;
}

/* Snapshot mode: whether payload @a takes up the thread's stream where the
 * last one ended -- it starts at that AUX offset, or before it with the
 * bytes it shares with the stream's end identical (a snapshot taken
 * before the ring overwrote them; perf's decoder finds such overlaps by
 * content too).  *@ret_skip: the bytes to skip. */
static bool snapshot_continues(const struct thr *t,
			       const struct ptd_perfdata_auxtrace_rec *a,
			       uint64_t *ret_skip)
{
	uint64_t over;

	*ret_skip = 0;
	if (a->offset == t->next_aux)
		return true;
	if (a->offset > t->next_aux)
		return false;
	over = t->next_aux - a->offset;
	if (over > a->size || over > t->last_len || over > t->pt.len)
		return false;
	if (memcmp(a->data, t->pt.data + t->pt.len - over, over))
		return false;
	*ret_skip = over;
	return true;
}

/* An AUXTRACE payload of a per-thread recording. */
static int thread_payload(struct dec *d,
			  const struct ptd_perfdata_auxtrace_rec *a)
{
	struct thr *t = thr_get(d, 0, (pid_t)a->tid);
	uint64_t skip = 0;
	int r = 0;

	if (!t)
		return -ENOMEM;
	if (t->have_next && d->pd->pt.snapshot_mode &&
	    snapshot_continues(t, a, &skip)) {
		/* the stream goes on: nothing lost, skip what repeats */
	} else if (t->have_next && d->pd->pt.snapshot_mode)
		r = add_loss(t, 0, true, "snapshot: trace between AUXTRACE "
			     "records (0x%" PRIx64 ") not recorded",
			     a->rec_offset);
	else if (t->have_next && a->offset > t->next_aux)
		r = add_loss(t, a->offset - t->next_aux, true,
			     "lost %" PRIu64 " trace bytes (AUX offset "
			     "0x%" PRIx64 " to 0x%" PRIx64 ")",
			     a->offset - t->next_aux, t->next_aux, a->offset);
	else if (t->have_next && a->offset < t->next_aux) {
		/* perf pads each payload to 8 bytes with zeros and the next
		 * one starts at the unpadded end: the overlap is the last
		 * payload's padding, dropped.  A larger overlap is data
		 * passed before: skipped. */
		uint64_t over = t->next_aux - a->offset;

		if (over < 8 && over <= t->last_len)
			t->pt.len -= over;
		else
			skip = over;
	}
	if (r < 0)
		return r;
	t->have_next = true;
	if (a->offset + a->size > t->next_aux || !skip)
		t->next_aux = a->offset + a->size;
	if (skip >= a->size)
		return 0;
	return thr_append(d, t, a->data + skip, a->size - skip);
}

/* Losses a record announces, for thread @tid (0: every thread). */
static int record_loss(struct dec *d, const struct ptd_perf_event *e)
{
	struct thr *t = thr_find(d, (pid_t)e->sid.tid);
	size_t i;

	if (e->type == PERF_RECORD_AUX && t) {
		uint64_t f = e->u.aux.flags;

		if (!t->have_aux_end ||
		    e->u.aux.aux_offset + e->u.aux.aux_size > t->aux_end)
			t->aux_end = e->u.aux.aux_offset + e->u.aux.aux_size;
		t->have_aux_end = true;
		if (f & PERF_AUX_FLAG_TRUNCATED)
			return add_loss(t, 0, true, "AUX data truncated "
					"after offset 0x%" PRIx64 " (buffer "
					"full): trace lost",
					e->u.aux.aux_offset +
						e->u.aux.aux_size);
		if (f & (PERF_AUX_FLAG_PARTIAL | PERF_AUX_FLAG_COLLISION))
			return add_loss(t, 0, false, "AUX chunk of %" PRIu64
					" bytes at 0x%" PRIx64 " has gaps",
					e->u.aux.aux_size,
					e->u.aux.aux_offset);
		return 0;
	}
	if (e->type != PERF_RECORD_LOST)
		return 0;
	for (i = 0; i < d->nth; i++) {
		int r = add_loss(&d->th[i], 0, false, "%" PRIu64 " sideband "
				 "records lost: the image may be wrong",
				 e->u.lost.lost);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A kernel record of a per-thread recording. */
static int thread_record(struct dec *d, const struct ptd_perf_event *e)
{
	switch (e->type) {
	case PERF_RECORD_ITRACE_START:
		return thr_get(d, (pid_t)e->u.itrace.pid,
			       (pid_t)e->u.itrace.tid) ? 0 : -ENOMEM;
	case PERF_RECORD_FORK:
		return thr_get(d, (pid_t)e->u.task.pid,
			       (pid_t)e->u.task.tid) ? 0 : -ENOMEM;
	case PERF_RECORD_COMM:
		if (!thr_get(d, (pid_t)e->u.comm.pid, (pid_t)e->u.comm.tid))
			return -ENOMEM;
		return image_change(d, e);
	case PERF_RECORD_MMAP:
	case PERF_RECORD_MMAP2:
		if (is_kernel_map(e))
			return kernel_change(d, e);
		return image_change(d, e);
	case PERF_RECORD_TEXT_POKE:
		return kernel_poke(d, e);
	case PTD_PERF_RECORD_UNMAP:
		return image_change(d, e);
	case PERF_RECORD_AUX:
	case PERF_RECORD_LOST:
		return record_loss(d, e);
	default:
		return 0;
	}
}

/* ---- per-CPU recordings ----------------------------------------------- */

static int pc_bytes(void *ctx, uint32_t tid, const uint8_t *data, size_t len)
{
	struct thr *t = thr_get(ctx, 0, (pid_t)tid);

	return t ? thr_append(ctx, t, data, len) : -ENOMEM;
}

static int pc_record(void *ctx, uint32_t tid, const struct ptd_perf_event *e)
{
	(void)tid;
	return thread_record(ctx, e);
}

static int pc_lost(void *ctx, uint32_t tid, uint64_t bytes)
{
	struct thr *t = thr_get(ctx, 0, (pid_t)tid);

	if (!t)
		return -ENOMEM;
	if (bytes)
		return add_loss(t, bytes, true, "lost %" PRIu64 " trace "
				"bytes", bytes);
	return add_loss(t, 0, true, "trace lost (size unknown)");
}

static int pc_seen(void *ctx, uint32_t pid, uint32_t tid)
{
	return thr_get(ctx, (pid_t)pid, (pid_t)tid) ? 0 : -ENOMEM;
}

/* The AUXTRACE payloads by (cpu, offset), to find the one holding a CPU's
 * AUX byte without a scan of them all. */
struct auxidx {
	uint32_t cpu;
	uint64_t off, end;	/* AUX offsets [off, end) */
	size_t rec;		/* index in pd->auxtrace (input order) */
	uint64_t maxend;	/* the largest end of this CPU's entries up
				 * to here */
};

static int auxidx_cmp(const void *a, const void *b)
{
	const struct auxidx *x = a, *y = b;

	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->rec < y->rec ? -1 : x->rec > y->rec;
}

static struct auxidx *auxidx_make(const struct ptd_perfdata *pd)
{
	struct auxidx *v = calloc(pd->nauxtrace ? pd->nauxtrace : 1,
				  sizeof(*v));
	size_t i;

	if (!v)
		return NULL;
	for (i = 0; i < pd->nauxtrace; i++) {
		const struct ptd_perfdata_auxtrace_rec *a = &pd->auxtrace[i];

		v[i].cpu = a->cpu;
		v[i].off = a->offset;
		/* sizes are bounded by the input's; an offset near 2^64
		 * holds up to the end of the offsets */
		v[i].end = a->offset + a->size < a->offset ? UINT64_MAX
							  : a->offset + a->size;
		v[i].rec = i;
	}
	qsort(v, pd->nauxtrace, sizeof(*v), auxidx_cmp);
	for (i = 0; i < pd->nauxtrace; i++)
		v[i].maxend = i && v[i - 1].cpu == v[i].cpu &&
				      v[i - 1].maxend > v[i].end
				      ? v[i - 1].maxend
				      : v[i].end;
	return v;
}

/* The first payload in input order of CPU @cpu that holds AUX offset
 * @want, or NULL. */
static const struct ptd_perfdata_auxtrace_rec *
auxidx_find(const struct ptd_perfdata *pd, const struct auxidx *v,
	    uint32_t cpu, uint64_t want)
{
	size_t lo = 0, hi = pd->nauxtrace, best = SIZE_MAX;

	/* the first entry past (cpu, want) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].cpu < cpu || (v[mid].cpu == cpu &&
					 v[mid].off <= want))
			lo = mid + 1;
		else
			hi = mid;
	}
	/* back over this CPU's entries that start at or before @want while
	 * one of them may still reach past it */
	while (lo > 0 && v[lo - 1].cpu == cpu && v[lo - 1].maxend > want) {
		lo--;
		if (v[lo].end > want && v[lo].rec < best)
			best = v[lo].rec;
	}
	return best == SIZE_MAX ? NULL : &pd->auxtrace[best];
}

/* Copy CPU @cpu's AUX bytes [off, off + len) from its payloads; returns
 * the bytes found contiguous from @off (the rest is a gap).  @out NULL:
 * only count them. */
static size_t cpu_bytes(const struct ptd_perfdata *pd, const struct auxidx *v,
			uint32_t cpu, uint64_t off, uint64_t len, uint8_t *out)
{
	uint64_t have = 0;

	while (have < len) {
		uint64_t want = off + have, n;
		const struct ptd_perfdata_auxtrace_rec *a =
			auxidx_find(pd, v, cpu, want);

		if (!a)
			break;
		n = a->size - (want - a->offset);	/* want is inside */
		if (n > len - have)
			n = len - have;
		if (out)
			memcpy(out + have, a->data + (want - a->offset), n);
		have += n;
	}
	return have;
}

/* A kernel record's place in time: perf's ordered events.  perf drains
 * one CPU's ring after another, so a file holds CPU 0's records (and AUX
 * data) of a round before CPU 3's even when CPU 3's came first; perf sorts
 * each round's records by sample time before it acts on them.  ptd sorts
 * them all (a round never holds records older than the last round's
 * flush, so the whole sort is the same order).  A record without a time
 * keeps its place after the record it followed in the file. */
struct tord {
	uint64_t time;
	size_t rec;
};

static int tord_cmp(const void *a, const void *b)
{
	const struct tord *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->rec < y->rec ? -1 : x->rec > y->rec;
}

static int time_order(struct dec *d, struct tord **ret, size_t *ret_n)
{
	const struct ptd_perfdata *pd = d->pd;
	struct tord *v = calloc(pd->nrecs ? pd->nrecs : 1, sizeof(*v));
	uint64_t last = 0;
	size_t i, n = 0;
	int r;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < pd->nrecs; i++) {
		struct ptd_perf_event e;

		if (pd->recs[i].type >= PTD_PERFDATA_RECORD_USER_TYPE_START ||
		    pd->recs[i].attr < 0)
			continue;
		r = ptd_perfdata_event(pd, i, &e, d->diag);
		if (r < 0) {
			free(v);
			return r;
		}
		if (e.sid.mask & PTD_PERF_SID_TIME)
			last = e.sid.time;
		v[n].time = last;
		v[n++].rec = i;
	}
	qsort(v, n, sizeof(*v), tord_cmp);
	*ret = v;
	*ret_n = n;
	return 0;
}

/* Records that say whose trace is on a CPU, or bring it: without the CPU
 * in their sample_id they cannot be placed. */
static bool needs_cpu(uint32_t type)
{
	return type == PERF_RECORD_AUX || type == PERF_RECORD_ITRACE_START ||
	       type == PERF_RECORD_SWITCH ||
	       type == PERF_RECORD_SWITCH_CPU_WIDE ||
	       type == PERF_RECORD_LOST;
}

static int percpu_pass(struct dec *d)
{
	const struct ptd_perfdata *pd = d->pd;
	struct ptd_percpu_sink sink = { pc_bytes, pc_record, pc_lost,
					pc_seen, d };
	struct ptd_percpu_opts po;
	struct ptd_percpu *pc = NULL;
	uint32_t ncpus = 1;
	uint8_t *buf = NULL;
	struct auxidx *idx = NULL;
	struct tord *ord = NULL;
	size_t i, k, nord = 0;
	int r;

	/* Each event has its own sample_type (perf needs only the id's
	 * place to agree); every record is parsed with its own.  Switches
	 * name their thread through TID. */
	for (i = 0; i < pd->nattrs; i++) {
		const struct perf_event_attr *a = &pd->attrs[i].attr;

		if (!a->sample_id_all || !(a->sample_type & PERF_SAMPLE_TID))
			return ptd_diagf(d->diag, -PTD_EUNSUPPORTED, "%s: "
					 "per-CPU trace needs sample_id_all "
					 "and TID in every event's sample "
					 "ids; event %zu has %s", pd->name, i,
					 a->sample_id_all ? "no TID" :
					 "no sample_id_all");
	}
	for (i = 0; i < pd->nauxtrace; i++)
		if (pd->auxtrace[i].cpu != UINT32_MAX &&
		    pd->auxtrace[i].cpu >= ncpus)
			ncpus = pd->auxtrace[i].cpu + 1;
	if (ncpus > PTD_PERCPU_MAX_CPUS)
		return ptd_diagf(d->diag, -PTD_EFORMAT, "%s: AUXTRACE cpu %u "
				 "(at most %u)", pd->name, ncpus - 1,
				 PTD_PERCPU_MAX_CPUS - 1);
	memset(&po, 0, sizeof(po));
	po.ncpus = ncpus;
	po.pid = -1;
	po.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
	po.sample_id_all = true;
	r = ptd_percpu_new(&po, &sink, &pc);
	if (r == 0 && !(idx = auxidx_make(pd)))
		r = -ENOMEM;
	if (r == 0)
		r = time_order(d, &ord, &nord);
	for (k = 0; r == 0 && k < nord; k++) {
		struct ptd_perf_event e;
		size_t got;

		i = ord[k].rec;
		r = ptd_perfdata_event(pd, i, &e, d->diag);
		if (r < 0)
			break;
		if (!(e.sid.mask & PTD_PERF_SID_CPU)) {
			if (!needs_cpu(e.type))
				continue;	/* not about a CPU's trace */
			r = ptd_diagf(d->diag, -PTD_EUNSUPPORTED, "%s: offset "
				      "0x%" PRIx64 ": %s record has no CPU in "
				      "its sample id (event %d), so no CPU's "
				      "trace can take it", pd->name,
				      pd->recs[i].offset,
				      ptd_perf_record_name(e.type),
				      pd->recs[i].attr);
			break;
		}
		if (e.sid.cpu >= ncpus)
			continue;	/* no trace there */
		if (e.type == PERF_RECORD_AUX && e.u.aux.aux_size) {
			if (e.u.aux.aux_size > PTD_PERF_AUX_MAX) {
				r = ptd_diagf(d->diag, -PTD_EFORMAT, "%s: "
					      "offset 0x%" PRIx64 ": AUX size "
					      "%" PRIu64, pd->name,
					      pd->recs[i].offset,
					      e.u.aux.aux_size);
				break;
			}
			/* The record's size is the file's word: take room for
			 * the bytes the file holds, not for what it claims. */
			got = cpu_bytes(pd, idx, e.sid.cpu, e.u.aux.aux_offset,
					e.u.aux.aux_size, NULL);
			free(buf);
			buf = malloc(got ? got : 1);
			if (!buf) {
				r = -ENOMEM;
				break;
			}
			got = cpu_bytes(pd, idx, e.sid.cpu, e.u.aux.aux_offset,
					got, buf);
			r = ptd_percpu_aux(pc, e.sid.cpu, e.u.aux.aux_offset,
					   buf, got);
			if (r == 0 && got < e.u.aux.aux_size) {
				struct ptd_perf_loss l = {
					.kind = PTD_PERF_LOSS_AUX_GAP,
					.bytes = e.u.aux.aux_size - got,
					.bytes_known = true,
					.aux_offset = e.u.aux.aux_offset + got,
				};
				r = ptd_percpu_loss(pc, e.sid.cpu, &l);
			}
			if (r < 0)
				break;
		}
		r = ptd_percpu_event(pc, e.sid.cpu, &e);
	}
	free(ord);
	free(buf);
	free(idx);
	ptd_percpu_free(pc);
	return r;
}

static int build(struct dec *d)
{
	const struct ptd_perfdata *pd = d->pd;
	bool per_cpu = pd->pt.per_cpu_mmaps;
	size_t i;
	int r = 0;

	for (i = 0; i < pd->nauxtrace; i++)
		if (pd->auxtrace[i].tid == UINT32_MAX)
			per_cpu = true;
	if (per_cpu)
		return percpu_pass(d);
	for (i = 0; r == 0 && i < pd->nrecs; i++) {
		const struct ptd_perfdata_rec *rec = &pd->recs[i];
		struct ptd_perf_event e;

		if (rec->aux != UINT32_MAX) {
			r = thread_payload(d, &pd->auxtrace[rec->aux]);
			continue;
		}
		if (rec->attr < 0)
			continue;
		r = ptd_perfdata_event(pd, i, &e, d->diag);
		if (r == 0)
			r = thread_record(d, &e);
	}
	/* The last payload's zero padding, past the end the AUX records
	 * announced, is not trace. */
	for (i = 0; r == 0 && i < d->nth; i++) {
		struct thr *t = &d->th[i];

		if (t->have_aux_end && t->have_next &&
		    t->next_aux > t->aux_end &&
		    t->next_aux - t->aux_end < 8 &&
		    t->next_aux - t->aux_end <= t->last_len)
			t->pt.len -= t->next_aux - t->aux_end;
	}
	return r;
}

/* ---- decoding --------------------------------------------------------- */

static int emit_error(const struct ptd_input_sink *sink, const struct thr *t,
		      int code, uint64_t off, uint64_t skipped,
		      const char *why)
{
	struct ptd_record rec;

	memset(&rec, 0, sizeof(rec));
	rec.type = PTD_REC_ERROR;
	rec.pid = t->pid;
	rec.tid = t->tid;
	rec.u.error.code = code;
	rec.u.error.ptd_code = true;
	rec.u.error.offset = off;
	rec.u.error.context = why;
	rec.u.error.skipped = skipped;
	return sink->record(sink->ctx, &rec);
}

/* Image errors of thread @t: every missing file it would have mapped. */
static int image_errors(const struct dec *d, const struct thr *t,
			const struct ptd_input_sink *sink,
			struct ptd_decode_stats *st)
{
	const struct proc *p = &d->pr[t->proc];
	size_t i;

	for (i = 0; i < p->nmiss; i++) {
		const struct ptd_tl_event *ev = NULL;
		int64_t pos = 0;
		size_t k;
		int r;

		for (k = 0; k < p->tl.n; k++)
			if (p->tl.ev[k].seq == p->miss[i].seq)
				ev = &p->tl.ev[k];
		if (ev && ev->seq >= t->first_seq &&
		    (pos = ptd_tl_event_pos(ev, t->tid)) < 0)
			continue;	/* not in this thread's life */
		st->errors++;
		r = emit_error(sink, t, -PTD_ENOIMAGE, (uint64_t)pos, 0,
			       p->miss[i].msg);
		if (r)
			return r;
	}
	return 0;
}

static void add_stats(struct ptd_decode_stats *a,
		      const struct ptd_decode_stats *b)
{
	a->insns += b->insns;
	a->blocks += b->blocks;
	a->events += b->events;
	a->errors += b->errors;
	a->bytes += b->bytes;
	a->skipped += b->skipped;
	a->tl_applied += b->tl_applied;
}

static int decode_thread(const struct dec *d, const struct thr *t,
			 const struct ptd_decode_opts *dopts,
			 struct ptd_insncache *icache,
			 const struct ptd_input_sink *sink,
			 struct ptd_decode_stats *st, struct ptd_diag *td)
{
	const struct proc *p = &d->pr[t->proc];
	struct ptd_decode_thread_args a;
	struct ptd_tl_cursor cur;
	struct ptd_image *img;
	char name[64];
	uint64_t start = 0;
	size_t li = 0;
	int r;

	(void)snprintf(name, sizeof(name), "tid %ld", (long)t->tid);
	img = ptd_image_new(d->ic, name);
	if (!img)
		return -ENOMEM;
	/* Missing files were taken out of the timeline and are reported
	 * here, so an error applying the rest is not expected. */
	(void)ptd_tl_cursor_init(&cur, &p->tl, NULL, t->tid, t->first_seq,
				 img, td);
	r = image_errors(d, t, sink, st);
	while (r == 0) {
		uint64_t end = t->pt.len;
		struct ptd_decode_stats s;
		size_t k;

		/* The losses up to @start, then the segment up to the next
		 * discontinuity (split losses are in increasing order). */
		for (; r == 0 && li < t->nloss && t->loss[li].pos <= start;
		     li++) {
			st->errors++;
			r = emit_error(sink, t, -PTD_ETRUNC, t->loss[li].pos,
				       t->loss[li].bytes, t->loss[li].why);
		}
		if (r)
			break;
		for (k = li; k < t->nloss; k++)
			if (t->loss[k].split && t->loss[k].pos > start) {
				end = t->loss[k].pos;
				break;
			}
		memset(&a, 0, sizeof(a));
		memset(&s, 0, sizeof(s));
		a.pt = t->pt.data + start;
		a.len = end - start;
		a.base = start;
		a.pid = t->pid;
		a.tid = t->tid;
		a.img = img;
		a.cursor = &cur;
		a.icache = icache;
		if (end > start)
			r = ptd_decode_thread(dopts, &a, sink->record,
					      sink->ctx, &s);
		add_stats(st, &s);
		if (end >= t->pt.len)
			break;
		start = end;
	}
	/* Losses after the last byte (a truncated end). */
	for (; r == 0 && li < t->nloss; li++) {
		st->errors++;
		r = emit_error(sink, t, -PTD_ETRUNC, t->loss[li].pos,
			       t->loss[li].bytes, t->loss[li].why);
	}
	ptd_image_free(img);
	return r;
}

static void dec_free(struct dec *d)
{
	size_t i, k;

	for (i = 0; i < d->nth; i++) {
		for (k = 0; k < d->th[i].nloss; k++)
			free(d->th[i].loss[k].why);
		free(d->th[i].loss);
		ptd_buf_free(&d->th[i].pt);
	}
	free(d->th);
	for (i = 0; i < d->npr; i++) {
		for (k = 0; k < d->pr[i].nmiss; k++)
			free(d->pr[i].miss[k].msg);
		free(d->pr[i].miss);
		ptd_timeline_free(&d->pr[i].tl);
	}
	free(d->pr);
	for (i = 0; i < d->nbids; i++)
		free(d->bids[i].path);
	free(d->bids);
	ptd_iscache_free(d->ic);
	kernel_free(&d->k);
	free(d->pidmap);
	if (d->vdso_made && d->vdso_fd >= 0)
		(void)close(d->vdso_fd);
}

static bool selected(const struct ptd_input_opts *o, const struct thr *t)
{
	return t->pt.len && (!o->have_tid || t->tid == o->tid);
}

/* The address filter perf recorded with (AUXTRACE_INFO's filter text),
 * as libipt's decoder needs it for process @p: file ranges at the
 * addresses the process mapped the files at (its MMAP records).  A text or
 * range that does not resolve is said once through the sink's notice;
 * decoding goes on without it (it matters for erratum SKL014 only). */
static void proc_filter(const struct dec *d, struct proc *p,
			const struct ptd_input_sink *sink)
{
	const char *text = d->pd->pt.filter;
	struct ptd_addrfilter f = { .n = 0 };
	struct ptd_diag fd = { "" };
	struct ptd_maps maps = { NULL, 0 };
	int r;

	if (p->filter_done)
		return;
	p->filter_done = true;
	if (!text || !*text)
		return;
	r = ptd_addrfilter_parse(text, PTD_ADDRFILTER_MAX, &f, &fd);
	if (r == 0) {
		maps.v = calloc(p->tl.n ? p->tl.n : 1, sizeof(*maps.v));
		if (!maps.v)
			r = -ENOMEM;
	}
	for (size_t i = 0; r == 0 && i < p->tl.n; i++) {
		const struct ptd_tl_event *ev = &p->tl.ev[i];
		struct ptd_map *m = &maps.v[maps.n];

		if (ev->op != PTD_TL_MAP || !ev->path)
			continue;
		m->start = ev->start;
		m->end = ev->end;
		m->offset = ev->pgoff;
		m->prot = PTD_MAP_PROT_R | PTD_MAP_PROT_X;
		m->kind = PTD_MAP_FILE;
		m->path = ev->path;
		maps.n++;
	}
	if (r == 0)
		r = ptd_addrfilter_to_config(&f, &maps, &p->filter, &fd);
	free(maps.v);
	ptd_addrfilter_free(&f);
	if (r < 0 && sink->notice) {
		struct ptd_diag n = { "" };

		(void)ptd_diagf(&n, r, "%s: process %ld: address filter '%s' "
				"(AUXTRACE_INFO): %s; decoded without it",
				d->pd->name, (long)p->pid, text,
				fd.msg[0] ? fd.msg : ptd_strerror(r));
		sink->notice(sink->ctx, &n);
	}
}

/* Timing packets as perf's decoder reads them: AUXTRACE_INFO's MTC word
 * is the mask of the mtc bit in the intel_pt event's config and its
 * "MTC_FREQ_BITS" word the mask of the mtc_period field; with mtc set the
 * MTC period is that field.  The TSC:CTC ratio and the nominal ratio come
 * from AUXTRACE_INFO as they are. */
static void timing(const struct ptd_perfdata *pd, struct ptd_decode_opts *o)
{
	const struct ptd_perfdata_ptinfo *pt = &pd->pt;
	uint64_t fmask = pt->mtc_freq_bits;
	unsigned shift = 0;
	size_t i;

	if (!pt->present)
		return;
	while (fmask && !(fmask & 1)) {
		fmask >>= 1;
		shift++;
	}
	for (i = 0; i < pd->nattrs; i++) {
		const struct perf_event_attr *a = &pd->attrs[i].attr;
		uint64_t v;

		if (a->type != pt->pmu_type)
			continue;
		v = (a->config & pt->mtc_freq_bits) >> shift;
		if (pt->mtc_bit && (a->config & pt->mtc_bit) && v < 16)
			o->mtc_freq = (uint8_t)v;
		break;
	}
	if (pt->tsc_ctc_n <= UINT32_MAX && pt->tsc_ctc_d <= UINT32_MAX) {
		o->cpuid_0x15_eax = (uint32_t)pt->tsc_ctc_d;
		o->cpuid_0x15_ebx = (uint32_t)pt->tsc_ctc_n;
	}
	if (pt->max_nonturbo_ratio <= UINT8_MAX)
		o->nom_freq = (uint8_t)pt->max_nonturbo_ratio;
}

static int run(struct dec *d, const struct ptd_input_sink *sink,
	       size_t *ret_thread_errors)
{
	const struct ptd_perfdata *pd = d->pd;
	struct ptd_insncache *icache = NULL;
	struct ptd_decode_opts dopts = d->o->decode;
	struct ptd_input_info info;
	size_t i, nsel = 0, errors = 0;
	pid_t pid = 0;
	int r;

	for (i = 0; i < d->nth; i++) {
		if (!selected(d->o, &d->th[i]))
			continue;
		if (nsel++ == 0)
			pid = d->th[i].pid;
		else if (pid != d->th[i].pid)
			pid = -1;
	}
	if (d->o->have_tid && !nsel)
		return ptd_diagf(d->diag, -ENOENT, "%s has no trace of thread "
				 "%ld", pd->name, (long)d->o->tid);
	if (!d->o->cpu_given && pd->have_cpu)
		dopts.cpu = pd->cpu;
	/* Perf time on records: the TSC conversion AUXTRACE_INFO carries
	 * when the kernel gave one (cap_user_time_zero; the reader refused
	 * one that would not convert), as perf's own decoder uses it. */
	if (!dopts.has_clock && pd->pt.present && pd->pt.cap_user_time_zero) {
		dopts.has_clock = true;
		dopts.clock = pd->pt.clock;
	}
	timing(pd, &dopts);
	icache = ptd_insncache_new(0);
	if (!icache)
		return -ENOMEM;
	info = (struct ptd_input_info){ PTD_INPUT_PERFDATA, "perf.data",
					pid > 0 ? (long)pid : 0, nsel };
	r = sink->info ? sink->info(sink->ctx, &info) : 0;
	for (i = 0; r == 0 && i < d->nth; i++) {
		struct ptd_decode_stats st;
		struct ptd_diag td = { "" };

		if (!selected(d->o, &d->th[i]))
			continue;
		memset(&st, 0, sizeof(st));
		if (!d->o->decode.addr_filter.config.addr_cfg) {
			proc_filter(d, &d->pr[d->th[i].proc], sink);
			dopts.addr_filter = d->pr[d->th[i].proc].filter;
		}
		r = decode_thread(d, &d->th[i], &dopts, icache, sink, &st,
				  &td);
		if (r < 0) {
			errors++;
			if (sink->thread_done)
				sink->thread_done(sink->ctx, d->th[i].tid, &st,
						  r, &td);
			r = 0;
			continue;
		}
		if (r == 0 && sink->thread_done)
			sink->thread_done(sink->ctx, d->th[i].tid, &st, 0,
					  &td);
	}
	if (ret_thread_errors)
		*ret_thread_errors = errors;
	ptd_insncache_free(icache);
	return r;
}

/* Whether an intel_pt event of @pd traces kernel code. */
static bool traces_kernel(const struct ptd_perfdata *pd)
{
	size_t i;

	for (i = 0; i < pd->nattrs; i++)
		if (pd->attrs[i].attr.type == pd->pt.pmu_type &&
		    !pd->attrs[i].attr.exclude_kernel)
			return true;
	return false;
}

static int decode_parsed(const struct ptd_perfdata *pd, const char *kcore,
			 const struct ptd_input_opts *o,
			 const struct ptd_input_sink *sink,
			 size_t *ret_thread_errors, struct ptd_diag *diag)
{
	struct dec d;
	int r;

	if (!pd || !o || !sink || !sink->record)
		return -EINVAL;
	if (ret_thread_errors)
		*ret_thread_errors = 0;
	if (!pd->pt.present || pd->pt.type != PTD_PERFDATA_AUXTRACE_INTEL_PT)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED, "%s: %s", pd->name,
				 pd->pt.present ? "its AUX trace is not Intel "
						  "PT" : "no Intel PT trace "
						  "(no AUXTRACE_INFO record)");
	memset(&d, 0, sizeof(d));
	d.pd = pd;
	d.o = o;
	d.diag = diag;
	d.k.traced = traces_kernel(pd);
	d.k.kcore = kcore;
	d.ic = ptd_iscache_new();
	if (!d.ic)
		return -ENOMEM;
	ptd_iscache_set_resolver(d.ic, resolve, &d);
	r = build(&d);
	if (r == 0)
		r = run(&d, sink, ret_thread_errors);
	dec_free(&d);
	return r;
}

int ptd_perfdata_decode_parsed(const struct ptd_perfdata *pd,
			       const struct ptd_input_opts *o,
			       const struct ptd_input_sink *sink,
			       size_t *ret_thread_errors,
			       struct ptd_diag *diag)
{
	return decode_parsed(pd, NULL, o, sink, ret_thread_errors, diag);
}

int ptd_perfdata_decode(const char *path, const struct ptd_input_opts *o,
			const struct ptd_input_sink *sink,
			size_t *ret_thread_errors, struct ptd_diag *diag)
{
	struct ptd_perfdata *pd = NULL;
	char data[PATH_MAX], kcore[PATH_MAX];
	const char *kc = NULL;
	struct stat st;
	int r;

	if (!path || !o || !sink || !sink->record)
		return -EINVAL;
	if (strcmp(path, "-") && stat(path, &st) == 0 &&
	    S_ISDIR(st.st_mode)) {
		/* perf record --kcore: PATH/data, PATH/kcore_dir/kcore.
		 * perf record --threads adds PATH/data.N files, which
		 * hold records this reader would miss. */
		if (snprintf(data, sizeof(data), "%s/data.0", path) >=
		    (int)sizeof(data))
			return -ENAMETOOLONG;
		if (stat(data, &st) == 0)
			return ptd_diagf(diag, -PTD_EUNSUPPORTED, "'%s' was "
					 "recorded with perf record --threads "
					 "(it has data.N files), which ptd "
					 "does not read: record without "
					 "--threads", path);
		(void)snprintf(data, sizeof(data), "%s/data", path);
		if (snprintf(kcore, sizeof(kcore), "%s/kcore_dir", path) <
			    (int)sizeof(kcore) &&
		    stat(kcore, &st) == 0 && S_ISDIR(st.st_mode) &&
		    snprintf(kcore, sizeof(kcore), "%s/kcore_dir/kcore",
			     path) < (int)sizeof(kcore))
			kc = kcore;
		path = data;
	}
	r = o->streams ? ptd_perfdata_open(path, &pd, diag)
		       : ptd_perfdata_open_file(path, &pd, diag);
	if (r < 0)
		return r;
	r = decode_parsed(pd, kc, o, sink, ret_thread_errors, diag);
	ptd_perfdata_free(pd);
	return r;
}
