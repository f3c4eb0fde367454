/* SPDX-License-Identifier: MIT */
/*
 * Writing a capture as an LLDB trace bundle (see export.h).
 */
#include "lldb/export.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/fileio.h"
#include "common/strutil.h"
#include "lldb/elfwrap.h"
#include "lldb/trace.h"

#define EXPORT_PAGE 4096ull
#define EXPORT_MAX_FILE (2ull << 30)

/* One module of the bundle: a mapped file, or a snapshot's bytes. */
struct xmod {
	const char *path;	/* traced path (file) or name ("[vdso]") */
	bool snapshot;
	uint64_t load;		/* loadAddress */
	uint8_t *code;		/* snapshot bytes */
	size_t ncode;
};

/* An address range some module occupies, for the overlap check. */
struct xrange {
	uint64_t start, end;
	size_t mod;
	uint64_t seq;		/* the timeline event, for messages */
};

struct xctx {
	const struct ptd_capture *c;
	ptd_iscache_resolve_fn resolve;	/* traced path -> file (or NULL) */
	void *resolve_ctx;
	struct xmod *mods;
	size_t nmods;
	struct xrange *ranges;
	size_t nranges;
	struct ptd_diag *diag;
};

/* The file to read for traced path @path (the path itself without a
 * resolver). */
static int real_path(const struct xctx *x, const char *path, char *out,
		     size_t outsz)
{
	struct ptd_diag d = { "" };
	int r;

	if (!x->resolve)
		return ptd_strlcpy(out, path, outsz) == 0 ? 0 : -ENAMETOOLONG;
	r = x->resolve(x->resolve_ctx, path, out, outsz, &d);
	if (r < 0)
		return ptd_diagf(x->diag, r, "mapped file '%s': %s", path,
				 d.msg[0] ? d.msg : ptd_strerror(r));
	return 0;
}

static void xctx_free(struct xctx *x)
{
	for (size_t i = 0; i < x->nmods; i++)
		free(x->mods[i].code);
	free(x->mods);
	free(x->ranges);
}

static int add_range(struct xctx *x, uint64_t start, uint64_t end,
		     size_t mod, uint64_t seq)
{
	struct xrange *r = realloc(x->ranges,
				   (x->nranges + 1) * sizeof(*r));

	if (!r)
		return -ENOMEM;
	x->ranges = r;
	r[x->nranges++] = (struct xrange){ start, end, mod, seq };
	return 0;
}

static int add_mod(struct xctx *x, const struct xmod *m, size_t *ret_idx)
{
	struct xmod *v = realloc(x->mods, (x->nmods + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	x->mods = v;
	v[x->nmods] = *m;
	*ret_idx = x->nmods++;
	return 0;
}

/* Where LLDB must load @path so that file offset @pgoff lands at @start:
 * the address of its first PT_LOAD segment (ObjectFileELF's base address)
 * moved by the same bias as the segment holding @pgoff. */
static int elf_load_address(const char *path, uint64_t start, uint64_t pgoff,
			    uint64_t *ret, struct ptd_diag *diag)
{
	_cleanup_close_ int fd = -1;
	Elf *elf = NULL;
	size_t phnum = 0, i;
	uint64_t first = 0, bias = 0;
	bool have_first = false, found = false;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return ptd_diagf(diag, -PTD_EFORMAT, "libelf is unusable");
	fd = ptd_file_open_regular(AT_FDCWD, path, 0, NULL, NULL);
	if (fd < 0)
		return ptd_diagf(diag, fd, "cannot open mapped file '%s': %s",
				 path, ptd_strerror(fd));
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF ||
	    elf_getphdrnum(elf, &phnum) != 0) {
		elf_end(elf);
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "mapped file '%s' is not an ELF file (LLDB "
				 "loads only object files)", path);
	}
	for (i = 0; i < phnum && !found; i++) {
		GElf_Phdr ph;
		uint64_t off0, vaddr0;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (!have_first) {
			first = ph.p_vaddr;
			have_first = true;
		}
		off0 = ph.p_offset & ~(EXPORT_PAGE - 1);
		vaddr0 = ph.p_vaddr & ~(EXPORT_PAGE - 1);
		if (pgoff < off0 || pgoff >= ph.p_offset + ph.p_filesz)
			continue;
		bias = start - (vaddr0 + (pgoff - off0));
		found = true;
	}
	elf_end(elf);
	if (!found)
		return ptd_diagf(diag, -PTD_EFORMAT,
				 "'%s': no PT_LOAD segment holds file offset "
				 "0x%" PRIx64 " (mapped at 0x%" PRIx64 ")",
				 path, pgoff, start);
	*ret = first + bias;
	return 0;
}

static int collect_map(struct xctx *x, const struct ptd_tl_event *ev)
{
	struct xmod m = { ev->path, false, 0, NULL, 0 };
	char file[PATH_MAX];
	size_t i, idx;
	int r;

	r = real_path(x, ev->path, file, sizeof(file));
	if (r == 0)
		r = elf_load_address(file, ev->start, ev->pgoff, &m.load,
				     x->diag);
	if (r < 0)
		return r;
	for (i = 0; i < x->nmods; i++) {
		if (x->mods[i].snapshot || strcmp(x->mods[i].path, ev->path))
			continue;
		if (x->mods[i].load != m.load)
			return ptd_diagf(x->diag, -PTD_EUNSUPPORTED,
					 "'%s' is loaded at two addresses "
					 "(0x%" PRIx64 " and, at timeline event "
					 "%" PRIu64 ", 0x%" PRIx64 "): an LLDB "
					 "bundle has one image per process",
					 ev->path, x->mods[i].load, ev->seq,
					 m.load);
		return add_range(x, ev->start, ev->end, i, ev->seq);
	}
	r = add_mod(x, &m, &idx);
	return r < 0 ? r : add_range(x, ev->start, ev->end, idx, ev->seq);
}

static int collect_snapshot(struct xctx *x, const struct ptd_tl_event *ev)
{
	struct xmod m = { ev->name ? ev->name : "[anon]", true, ev->start,
			  NULL, 0 };
	char path[PATH_MAX];
	size_t i, idx;
	int r;

	if (!ev->file ||
	    snprintf(path, sizeof(path), "%s/%s", x->c->dir, ev->file) >=
		    (int)sizeof(path))
		return ptd_diagf(x->diag, -PTD_EFORMAT,
				 "timeline event %" PRIu64 ": bad snapshot "
				 "file", ev->seq);
	r = ptd_file_read_all(path, PTD_ELFWRAP_MAX_CODE, (char **)&m.code,
			      &m.ncode);
	if (r < 0)
		return ptd_diagf(x->diag, r, "cannot read snapshot '%s': %s",
				 path, ptd_strerror(r));
	for (i = 0; i < x->nmods; i++) {
		const struct xmod *o = &x->mods[i];

		/* the same bytes snapshotted again: one module */
		if (o->snapshot && o->load == m.load && o->ncode == m.ncode &&
		    !memcmp(o->code, m.code, m.ncode)) {
			free(m.code);
			return 0;
		}
	}
	if (!m.ncode) {
		free(m.code);
		return 0;	/* nothing to load */
	}
	r = add_mod(x, &m, &idx);
	if (r < 0) {
		free(m.code);
		return r;
	}
	return add_range(x, m.load, m.load + m.ncode, idx, ev->seq);
}

/* The modules of the capture's timeline, checked to form one static
 * image. */
static int collect(struct xctx *x)
{
	const struct ptd_timeline *tl = &x->c->tl;
	size_t i, j;
	int r = 0;

	for (i = 0; r == 0 && i < tl->n; i++) {
		const struct ptd_tl_event *ev = &tl->ev[i];

		switch (ev->op) {
		case PTD_TL_MAP:
			r = collect_map(x, ev);
			break;
		case PTD_TL_SNAPSHOT:
			r = collect_snapshot(x, ev);
			break;
		case PTD_TL_UNMAP:	/* the static image keeps it */
			break;
		case PTD_TL_EXEC:
			if (x->nmods)
				r = ptd_diagf(x->diag, -PTD_EUNSUPPORTED,
					      "timeline event %" PRIu64
					      ": exec of '%s' after code was "
					      "mapped: an LLDB bundle holds "
					      "one program image", ev->seq,
					      ev->path ? ev->path : "?");
			break;
		}
	}
	for (i = 0; r == 0 && i < x->nranges; i++)
		for (j = i + 1; j < x->nranges; j++) {
			const struct xrange *a = &x->ranges[i];
			const struct xrange *b = &x->ranges[j];

			if (a->mod == b->mod || a->end <= b->start ||
			    b->end <= a->start)
				continue;
			return ptd_diagf(x->diag, -PTD_EUNSUPPORTED,
					 "'%s' (timeline event %" PRIu64
					 ") and '%s' (event %" PRIu64
					 ") overlap at 0x%" PRIx64 ": an LLDB "
					 "bundle has one static image",
					 x->mods[a->mod].path, a->seq,
					 x->mods[b->mod].path, b->seq,
					 a->start > b->start ? a->start
							     : b->start);
		}
	return r;
}

/* ---- writing ---------------------------------------------------------- */

static int mkdir_in(const char *root, const char *sub, struct ptd_diag *diag)
{
	char p[PATH_MAX];
	int r;

	if (snprintf(p, sizeof(p), "%s/%s", root, sub) >= (int)sizeof(p))
		return ptd_diagf(diag, -ENAMETOOLONG, "'%s/%s': too long",
				 root, sub);
	if (mkdir(p, 0755) < 0) {
		r = -errno;
		return ptd_diagf(diag, r, "cannot create '%s': %s", p,
				 ptd_strerror(r));
	}
	return 0;
}

static int write_in(const char *root, const char *rel, const void *data,
		    size_t len, struct ptd_diag *diag)
{
	char p[PATH_MAX];
	int r;

	if (snprintf(p, sizeof(p), "%s/%s", root, rel) >= (int)sizeof(p))
		return ptd_diagf(diag, -ENAMETOOLONG, "'%s/%s': too long",
				 root, rel);
	r = ptd_file_write_atomic(p, data, len);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot write '%s': %s", p,
				 ptd_strerror(r));
	return 0;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	const char *b = s ? s + 1 : path;

	return *b ? b : "module";
}

/* A file name from a snapshot name: "[vdso]" -> "vdso". */
static void snap_name(const char *name, char *out, size_t cap)
{
	size_t n = 0;

	for (; *name && n + 1 < cap; name++)
		if ((*name >= 'a' && *name <= 'z') ||
		    (*name >= 'A' && *name <= 'Z') ||
		    (*name >= '0' && *name <= '9') || *name == '-' ||
		    *name == '_' || *name == '.')
			out[n++] = *name;
	out[n] = '\0';
	if (!n)
		(void)ptd_strlcpy(out, "code", cap);
}

/* Write module @i into the bundle at @tmp; its relative file name goes to
 * @rel. */
static int write_module(const struct xctx *x, size_t i, const char *tmp,
			char *rel, size_t relcap)
{
	const struct xmod *m = &x->mods[i];
	char sub[32], nm[64];
	int r;

	(void)snprintf(sub, sizeof(sub), "modules/%zu", i);
	r = mkdir_in(tmp, sub, x->diag);
	if (r < 0)
		return r;
	if (m->snapshot) {
		char p[PATH_MAX];

		snap_name(m->path, nm, sizeof(nm));
		if (snprintf(rel, relcap, "%s/%s.elf", sub, nm) >=
			    (int)relcap ||
		    snprintf(p, sizeof(p), "%s/%s", tmp, rel) >=
			    (int)sizeof(p))
			return ptd_diagf(x->diag, -ENAMETOOLONG,
					 "bundle path too long");
		return ptd_elfwrap_write(p, m->code, m->ncode, m->load,
					 x->diag);
	}

	_cleanup_free_ char *data = NULL;
	char file[PATH_MAX];
	size_t len = 0;

	r = real_path(x, m->path, file, sizeof(file));
	if (r < 0)
		return r;
	r = ptd_file_read_all(file, EXPORT_MAX_FILE, &data, &len);
	if (r < 0)
		return ptd_diagf(x->diag, r, "cannot read mapped file '%s': %s",
				 m->path, ptd_strerror(r));
	if (snprintf(rel, relcap, "%s/%s", sub, base_name(m->path)) >=
	    (int)relcap)
		return ptd_diagf(x->diag, -ENAMETOOLONG, "'%s': name too long",
				 m->path);
	return write_in(tmp, rel, data, len, x->diag);
}

/* Whether thread @i's tid was an earlier thread's too. */
static bool tid_seen(const struct ptd_capture *c, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (c->threads[j].tid == c->threads[i].tid)
			return true;
	return false;
}

/* Thread @i's trace file.  LLDB knows one trace per thread id, so a tid the
 * kernel gave again later in the capture gets the streams of all its
 * threads one after the other, in the order they lived; each begins with a
 * PSB, where a decoder syncs again. */
static int write_thread(const struct xctx *x, size_t i, const char *tmp,
			char *rel, size_t relcap)
{
	struct ptd_buf all = { 0 };
	int r = 0;

	for (size_t j = i; r == 0 && j < x->c->nthreads; j++) {
		uint8_t *pt = NULL;
		size_t len = 0;

		if (x->c->threads[j].tid != x->c->threads[i].tid)
			continue;
		r = ptd_capture_read_pt(x->c, j, &pt, &len, x->diag);
		if (r == 0)
			r = ptd_buf_append(&all, pt, len);
		free(pt);
	}
	if (r == 0) {
		(void)snprintf(rel, relcap, "threads/%ld.intelpt.trace",
			       (long)x->c->threads[i].tid);
		r = write_in(tmp, rel, all.data, all.len, x->diag);
	}
	ptd_buf_fini(&all);
	return r;
}

/* LLDB asks libipt for the CPU's errata (pt_cpu_errata) and gives up
 * ("unknown cpu") for any CPU libipt does not list, so a capture without
 * an Intel CPU (the software source has none) is described as a CPU libipt
 * knows whose only erratum, apl11, is about OVF packets, which the
 * software source never writes: it decodes exactly like no CPU at all. */
#define EXPORT_PLAIN_CPU { pcv_intel, 6, 0x7a, 1 }

static cJSON *cpu_json(const struct pt_cpu *cpu)
{
	struct pt_cpu plain = EXPORT_PLAIN_CPU;
	cJSON *o = cJSON_CreateObject();

	if (cpu->vendor != pcv_intel)
		cpu = &plain;
	if (!o || !cJSON_AddStringToObject(o, "vendor", "GenuineIntel") ||
	    !cJSON_AddNumberToObject(o, "family", cpu->family) ||
	    !cJSON_AddNumberToObject(o, "model", cpu->model) ||
	    !cJSON_AddNumberToObject(o, "stepping", cpu->stepping)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* The capture's clock as LLDB describes it (tscPerfZeroConversion, with
 * timeZero a decimal string as LLDB itself writes it: readers that keep
 * numbers as doubles lose nothing), and its wall-clock reference under
 * ptd's own key (lldb/trace.h), which LLDB ignores.  Records read back
 * carry the "time" and "wall" the live stream had. */
static bool add_clock(cJSON *root, const struct ptd_capture *c)
{
	char n[24];
	cJSON *o;

	if (!(o = cJSON_AddObjectToObject(root, "tscPerfZeroConversion")) ||
	    !cJSON_AddNumberToObject(o, "timeMult", c->clock.time_mult) ||
	    !cJSON_AddNumberToObject(o, "timeShift", c->clock.time_shift))
		return false;
	(void)snprintf(n, sizeof(n), "%" PRIu64, c->clock.time_zero);
	if (!cJSON_AddStringToObject(o, "timeZero", n))
		return false;
	if (!c->has_wallref)
		return true;
	if (!(o = cJSON_AddObjectToObject(root, PTD_LLDB_WALLCLOCK)))
		return false;
	(void)snprintf(n, sizeof(n), "%" PRIu64, c->wallref.perf_ns);
	if (!cJSON_AddStringToObject(o, "perfTime", n))
		return false;
	(void)snprintf(n, sizeof(n), "%" PRIu64, c->wallref.wall_ns);
	return cJSON_AddStringToObject(o, "wallTime", n) != NULL;
}

/* Write the modules, threads and trace.json into @tmp. */
static int write_bundle(const struct xctx *x, const char *tmp)
{
	const struct ptd_capture *c = x->c;
	cJSON *root = cJSON_CreateObject(), *procs, *proc, *threads, *mods;
	char rel[PATH_MAX], addr[24];
	char *text = NULL;
	size_t i;
	int r = -ENOMEM;

	if (!root || !cJSON_AddStringToObject(root, "type", "intel-pt") ||
	    !cJSON_AddItemToObject(root, "cpuInfo", cpu_json(&c->cpu)) ||
	    !(procs = cJSON_AddArrayToObject(root, "processes")) ||
	    !(proc = cJSON_CreateObject()) ||
	    !cJSON_AddItemToArray(procs, proc) ||
	    !cJSON_AddNumberToObject(proc, "pid", c->pid) ||
	    !cJSON_AddStringToObject(proc, "triple",
				     "x86_64-unknown-linux-gnu") ||
	    !(threads = cJSON_AddArrayToObject(proc, "threads")) ||
	    !(mods = cJSON_AddArrayToObject(proc, "modules")))
		goto out;
	if ((r = mkdir_in(tmp, "threads", x->diag)) < 0 ||
	    (r = mkdir_in(tmp, "modules", x->diag)) < 0)
		goto out;
	for (i = 0; i < c->nthreads; i++) {
		cJSON *t;

		if (tid_seen(c, i))
			continue;
		r = write_thread(x, i, tmp, rel, sizeof(rel));
		if (r < 0)
			goto out;
		r = -ENOMEM;
		if (!(t = cJSON_CreateObject()) ||
		    !cJSON_AddItemToArray(threads, t) ||
		    !cJSON_AddNumberToObject(t, "tid", c->threads[i].tid) ||
		    !cJSON_AddStringToObject(t, "iptTrace", rel))
			goto out;
	}
	for (i = 0; i < x->nmods; i++) {
		cJSON *m;

		r = write_module(x, i, tmp, rel, sizeof(rel));
		if (r < 0)
			goto out;
		r = -ENOMEM;
		(void)snprintf(addr, sizeof(addr), "0x%" PRIx64,
			       x->mods[i].load);
		if (!(m = cJSON_CreateObject()) ||
		    !cJSON_AddItemToArray(mods, m) ||
		    !cJSON_AddStringToObject(m, "systemPath",
					     x->mods[i].path) ||
		    !cJSON_AddStringToObject(m, "file", rel) ||
		    !cJSON_AddStringToObject(m, "loadAddress", addr))
			goto out;
	}
	if (c->has_clock && !add_clock(root, c))
		goto out;
	text = cJSON_Print(root);
	if (!text)
		goto out;
	r = write_in(tmp, PTD_LLDB_DESC, text, strlen(text), x->diag);
out:
	if (r == -ENOMEM)
		(void)ptd_diagf(x->diag, r, "out of memory writing the bundle");
	free(text);
	cJSON_Delete(root);
	return r;
}

int ptd_lldb_export_capture(const struct ptd_capture *c, const char *out_dir,
			    struct ptd_diag *diag)
{
	return ptd_lldb_export_capture_resolved(c, NULL, NULL, out_dir, diag);
}

int ptd_lldb_export_capture_resolved(const struct ptd_capture *c,
				     ptd_iscache_resolve_fn resolve,
				     void *resolve_ctx, const char *out_dir,
				     struct ptd_diag *diag)
{
	struct xctx x = { c, resolve, resolve_ctx, NULL, 0, NULL, 0, diag };
	char tmp[PATH_MAX];
	struct stat st;
	int r;

	if (!c || !out_dir || !*out_dir)
		return -EINVAL;
	if (lstat(out_dir, &st) == 0)
		return ptd_diagf(diag, -EEXIST, "'%s' already exists",
				 out_dir);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", out_dir) >=
	    (int)sizeof(tmp))
		return ptd_diagf(diag, -ENAMETOOLONG, "'%s': too long",
				 out_dir);
	r = collect(&x);
	if (r < 0)
		goto out;
	if (!mkdtemp(tmp)) {
		r = -errno;
		(void)ptd_diagf(diag, r, "cannot create '%s': %s", tmp,
				ptd_strerror(r));
		goto out;
	}
	/* mkdtemp makes it 0700; a bundle is as readable as any file */
	(void)chmod(tmp, 0755);
	r = write_bundle(&x, tmp);
	if (r == 0 && rename(tmp, out_dir) < 0) {
		r = -errno;
		(void)ptd_diagf(diag, r, "cannot rename '%s' to '%s': %s", tmp,
				out_dir, ptd_strerror(r));
	}
	if (r < 0)
		(void)ptd_rm_rf(tmp);
out:
	xctx_free(&x);
	return r;
}
