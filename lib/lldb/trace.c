/* SPDX-License-Identifier: MIT */
/*
 * Reading LLDB Intel PT trace bundles (see trace.h).
 */
#include "lldb/trace.h"

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

#include "aspace/image.h"
#include "aspace/iscache.h"
#include "common/fileio.h"
#include "common/json.h"
#include "common/strutil.h"
#include "decode/insncache.h"
#include "decode/psbsplit.h"
#include "lldb/percpu.h"

#define FIELD_MAX PTD_JSON_PATH_MAX

/* ---- parsing ---------------------------------------------------------- */

struct pctx {
	struct ptd_json_reader jr;	/* origin, diag, the exact integers */
	const char *dir;
};

/* LLDB reads an optional field given as null as absent; strings are
 * never empty; 64-bit values (addresses, timeZero) are LLDB's JSONUINT64:
 * a JSON integer or a decimal / "0x" hex string. */
#define OPT (PTD_JSON_NULL_ABSENT)
#define REQ (PTD_JSON_REQUIRED)
#define STR PTD_JSON_NONEMPTY
#define ADDR PTD_JSON_INT_STRING

/* A file named by the bundle, as LLDB takes it: an absolute path as it
 * is, a relative one from the bundle directory. */
static int get_path(const struct pctx *p, const cJSON *obj, const char *key,
		    const char *prefix, unsigned flags, char **ret)
{
	char f[FIELD_MAX];
	const char *s;
	int r = ptd_json_get_str(&p->jr, obj, prefix, key, flags | STR, &s);

	if (r < 0)
		return r;
	if (strlen(s) >= PATH_MAX)
		return ptd_json_badf(&p->jr, -PTD_EFORMAT,
				     ptd_json_path(f, prefix, key),
				     "\"%.64s...\" is longer than a path may "
				     "be", s);
	if (s[0] == '/')
		*ret = strdup(s);
	else if (asprintf(ret, "%s/%s", p->dir, s) < 0)
		*ret = NULL;
	return *ret ? 0 : -ENOMEM;
}

/* "PATH: expected an object, not ..." */
static int not_object(const struct pctx *p, const char *path,
		      const cJSON *it)
{
	return ptd_json_badf(&p->jr, -PTD_EFORMAT, path,
			     "expected an object, not %s",
			     ptd_json_type_name(it));
}

/* An optional item's result: absent is fine. */
static int optional(int r)
{
	return r == -ENOENT ? 0 : r;
}

static int parse_cpuinfo(const struct pctx *p, const cJSON *root,
			 struct pt_cpu *cpu)
{
	const cJSON *ci = NULL;
	const char *vendor = NULL;
	uint64_t fam = 0, model = 0, step = 0;
	int r;

	r = ptd_json_get_object(&p->jr, root, "", "cpuInfo", REQ, &ci);
	if (r < 0)
		return r;
	r = ptd_json_get_str(&p->jr, ci, "cpuInfo", "vendor", REQ | STR,
			     &vendor);
	if (r < 0)
		return r;
	if (strcmp(vendor, "GenuineIntel") && strcmp(vendor, "unknown"))
		return ptd_json_badf(&p->jr, -PTD_EFORMAT, "cpuInfo.vendor",
				     "\"%.40s\" is neither \"GenuineIntel\" "
				     "nor \"unknown\"", vendor);
	if ((r = ptd_json_get_u64(&p->jr, ci, "cpuInfo", "family", REQ, 0,
				  UINT16_MAX, &fam)) < 0 ||
	    (r = ptd_json_get_u64(&p->jr, ci, "cpuInfo", "model", REQ, 0,
				  UINT8_MAX, &model)) < 0 ||
	    (r = ptd_json_get_u64(&p->jr, ci, "cpuInfo", "stepping", REQ, 0,
				  UINT8_MAX, &step)) < 0)
		return r;
	memset(cpu, 0, sizeof(*cpu));
	cpu->vendor = strcmp(vendor, "GenuineIntel") ? pcv_unknown : pcv_intel;
	cpu->family = (uint16_t)fam;
	cpu->model = (uint8_t)model;
	cpu->stepping = (uint8_t)step;
	return 0;
}

static int parse_thread(const struct pctx *p, const cJSON *jt,
			const char *prefix, struct ptd_lldb_thread *t)
{
	uint64_t tid = 0;
	int r;

	if (!cJSON_IsObject(jt))
		return not_object(p, prefix, jt);
	r = ptd_json_get_u64(&p->jr, jt, prefix, "tid", REQ, 1, INT32_MAX,
			     &tid);
	if (r < 0)
		return r;
	t->tid = (pid_t)tid;
	return optional(get_path(p, jt, "iptTrace", prefix, OPT,
				 &t->ipt_trace));
}

static int parse_module(const struct pctx *p, const cJSON *jm,
			const char *prefix, struct ptd_lldb_module *m)
{
	int r;

	if (!cJSON_IsObject(jm))
		return not_object(p, prefix, jm);
	r = ptd_json_get_strdup(&p->jr, jm, prefix, "systemPath", REQ | STR,
				SIZE_MAX, &m->system_path);
	if (r < 0)
		return r;
	r = optional(get_path(p, jm, "file", prefix, OPT, &m->file));
	if (r < 0)
		return r;
	r = ptd_json_get_u64(&p->jr, jm, prefix, "loadAddress", REQ | ADDR, 0,
			     UINT64_MAX, &m->load_address);
	if (r < 0)
		return r;
	return optional(ptd_json_get_strdup(&p->jr, jm, prefix, "uuid",
					    OPT | STR, SIZE_MAX, &m->uuid));
}

static int parse_process(const struct pctx *p, const cJSON *jp,
			 const char *prefix, size_t *threads_left,
			 struct ptd_lldb_process *pr)
{
	const cJSON *arr = NULL, *it;
	char f[FIELD_MAX];
	uint64_t pid = 0;
	size_t n = 0, i;
	int r;

	if (!cJSON_IsObject(jp))
		return not_object(p, prefix, jp);
	r = ptd_json_get_u64(&p->jr, jp, prefix, "pid", REQ, 1, INT32_MAX,
			     &pid);
	if (r < 0)
		return r;
	pr->pid = (pid_t)pid;
	r = optional(ptd_json_get_strdup(&p->jr, jp, prefix, "triple",
					 OPT | STR, SIZE_MAX, &pr->triple));
	if (r < 0)
		return r;

	r = ptd_json_get_array(&p->jr, jp, prefix, "threads", REQ,
			       *threads_left, &arr, &n);
	if (r < 0)
		return r;
	*threads_left -= n;
	pr->threads = calloc(n ? n : 1, sizeof(*pr->threads));
	if (!pr->threads)
		return -ENOMEM;
	i = 0;
	cJSON_ArrayForEach(it, arr) {
		ptd_json_path_index(f, prefix, "threads", i);
		r = parse_thread(p, it, f, &pr->threads[i]);
		pr->nthreads = ++i;
		if (r < 0)
			return r;
	}

	r = ptd_json_get_array(&p->jr, jp, prefix, "modules", REQ,
			       PTD_LLDB_MAX_MODULES, &arr, &n);
	if (r < 0)
		return r;
	pr->modules = calloc(n ? n : 1, sizeof(*pr->modules));
	if (!pr->modules)
		return -ENOMEM;
	i = 0;
	cJSON_ArrayForEach(it, arr) {
		ptd_json_path_index(f, prefix, "modules", i);
		r = parse_module(p, it, f, &pr->modules[i]);
		pr->nmodules = ++i;
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_processes(const struct pctx *p, const cJSON *root,
			   struct ptd_lldb_trace *t)
{
	const cJSON *arr = NULL, *it;
	size_t n = 0, i = 0, threads_left = PTD_LLDB_MAX_THREADS;
	char f[FIELD_MAX];
	int r;

	r = ptd_json_get_array(&p->jr, root, "", "processes", OPT,
			       PTD_LLDB_MAX_PROCS, &arr, &n);
	if (r < 0)
		return optional(r);
	t->procs = calloc(n ? n : 1, sizeof(*t->procs));
	if (!t->procs)
		return -ENOMEM;
	cJSON_ArrayForEach(it, arr) {
		ptd_json_path_index(f, "", "processes", i);
		r = parse_process(p, it, f, &threads_left, &t->procs[i]);
		t->nprocs = ++i;
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_cpus(const struct pctx *p, const cJSON *root,
		      struct ptd_lldb_trace *t)
{
	const cJSON *arr = NULL, *it;
	size_t n = 0, i = 0, j;
	char f[FIELD_MAX];
	int r;

	r = ptd_json_get_array(&p->jr, root, "", "cpus", OPT,
			       PTD_LLDB_MAX_CPUS, &arr, &n);
	if (r < 0)
		return optional(r);
	t->cpus = calloc(n ? n : 1, sizeof(*t->cpus));
	if (!t->cpus)
		return -ENOMEM;
	cJSON_ArrayForEach(it, arr) {
		struct ptd_lldb_cpu *c = &t->cpus[i];
		uint64_t id = 0;

		ptd_json_path_index(f, "", "cpus", i);
		t->ncpus = ++i;
		if (!cJSON_IsObject(it))
			return not_object(p, f, it);
		if ((r = ptd_json_get_u64(&p->jr, it, f, "id", REQ, 0,
					  INT32_MAX, &id)) < 0 ||
		    (r = get_path(p, it, "iptTrace", f, REQ,
				  &c->ipt_trace)) < 0 ||
		    (r = get_path(p, it, "contextSwitchTrace", f, REQ,
				  &c->context_switch_trace)) < 0)
			return r;
		c->id = (uint32_t)id;
		for (j = 0; j + 1 < i; j++)
			if (t->cpus[j].id == c->id) {
				char fid[FIELD_MAX];

				return ptd_json_badf(&p->jr, -PTD_EFORMAT,
						     ptd_json_path(fid, f,
								   "id"),
						     "cpu %u is listed twice",
						     c->id);
			}
	}
	return 0;
}

static int parse_tsc_conv(const struct pctx *p, const cJSON *root,
			  struct ptd_lldb_trace *t)
{
	const char *k = "tscPerfZeroConversion";
	const cJSON *o = NULL;
	uint64_t mult = 0, shift = 0;
	int r = ptd_json_get_object(&p->jr, root, "", k, OPT, &o);

	if (r < 0)
		return optional(r);
	/* perf's header page has mult > 0 and shift < 32; anything else
	 * would divide by zero or overflow converting. */
	if ((r = ptd_json_get_u64(&p->jr, o, k, "timeMult", REQ, 1,
				  UINT32_MAX, &mult)) < 0 ||
	    (r = ptd_json_get_u64(&p->jr, o, k, "timeShift", REQ, 0, 31,
				  &shift)) < 0 ||
	    (r = ptd_json_get_u64(&p->jr, o, k, "timeZero", REQ | ADDR, 0,
				  UINT64_MAX, &t->time_zero)) < 0)
		return r;
	t->has_tsc_conv = true;
	t->time_mult = (uint32_t)mult;
	t->time_shift = (uint16_t)shift;
	return 0;
}

/* ptd's wall-clock reference (trace.h). */
static int parse_wallclock(const struct pctx *p, const cJSON *root,
			   struct ptd_lldb_trace *t)
{
	const char *k = PTD_LLDB_WALLCLOCK;
	const cJSON *o = NULL;
	int r = ptd_json_get_object(&p->jr, root, "", k, OPT, &o);

	if (r < 0)
		return optional(r);
	if ((r = ptd_json_get_u64(&p->jr, o, k, "perfTime", REQ | ADDR, 0,
				  UINT64_MAX, &t->wallref.perf_ns)) < 0 ||
	    (r = ptd_json_get_u64(&p->jr, o, k, "wallTime", REQ | ADDR, 0,
				  UINT64_MAX, &t->wallref.wall_ns)) < 0)
		return r;
	t->has_wallref = true;
	return 0;
}

static int parse_kernel(const struct pctx *p, const cJSON *root,
			struct ptd_lldb_trace *t)
{
	const cJSON *o = NULL;
	int r = ptd_json_get_object(&p->jr, root, "", "kernel", OPT, &o);

	if (r < 0)
		return optional(r);
	t->has_kernel = true;
	t->kernel_load = 0xffffffff81000000ull;
	r = optional(ptd_json_get_u64(&p->jr, o, "kernel", "loadAddress",
				      OPT | ADDR, 0, UINT64_MAX,
				      &t->kernel_load));
	if (r < 0)
		return r;
	return get_path(p, o, "file", "kernel", REQ, &t->kernel_file);
}

/* The rules between sections (see the schema's notes). */
static int check_consistency(const struct pctx *p,
			     const struct ptd_lldb_trace *t)
{
	size_t i, j;

	if (t->has_kernel && t->nprocs)
		return ptd_json_bad(&p->jr, "kernel",
				    "a kernel trace has no \"processes\"");
	if (t->has_kernel && !t->ncpus)
		return ptd_json_bad(&p->jr, "kernel",
				    "a kernel trace needs \"cpus\"");
	if (t->has_wallref && !t->has_tsc_conv)
		return ptd_json_bad(&p->jr, PTD_LLDB_WALLCLOCK,
				    "given without \"tscPerfZeroConversion\"");
	if (t->ncpus && !t->has_tsc_conv)
		return ptd_json_bad(&p->jr, "tscPerfZeroConversion",
				    "missing (required with \"cpus\")");
	for (i = 0; i < t->nprocs; i++)
		for (j = 0; j < t->procs[i].nthreads; j++) {
			char f[FIELD_MAX];

			if (!t->ncpus || !t->procs[i].threads[j].ipt_trace)
				continue;
			(void)snprintf(f, sizeof(f),
				       "processes[%zu].threads[%zu].iptTrace",
				       i, j);
			return ptd_json_bad(&p->jr, f,
					    "not allowed with \"cpus\" (a "
					    "bundle is per-thread or "
					    "per-CPU)");
		}
	return 0;
}

static int parse_root(const struct pctx *p, const cJSON *root,
		      struct ptd_lldb_trace *t)
{
	const char *type = NULL;
	int r;

	if (!cJSON_IsObject(root))
		return ptd_json_bad(&p->jr, "", "not a JSON object");
	r = ptd_json_get_str(&p->jr, root, "", "type", REQ | STR, &type);
	if (r < 0)
		return r;
	if (strcmp(type, "intel-pt"))
		return ptd_json_badf(&p->jr, -PTD_EFORMAT, "type",
				     "\"%.40s\" is not \"intel-pt\"", type);
	if ((r = parse_cpuinfo(p, root, &t->cpu)) < 0 ||
	    (r = parse_processes(p, root, t)) < 0 ||
	    (r = parse_cpus(p, root, t)) < 0 ||
	    (r = parse_tsc_conv(p, root, t)) < 0 ||
	    (r = parse_wallclock(p, root, t)) < 0 ||
	    (r = parse_kernel(p, root, t)) < 0)
		return r;
	return check_consistency(p, t);
}

void ptd_lldb_trace_fini(struct ptd_lldb_trace *t)
{
	size_t i, j;

	if (!t)
		return;
	for (i = 0; i < t->nprocs; i++) {
		struct ptd_lldb_process *pr = &t->procs[i];

		for (j = 0; j < pr->nthreads; j++)
			free(pr->threads[j].ipt_trace);
		for (j = 0; j < pr->nmodules; j++) {
			free(pr->modules[j].system_path);
			free(pr->modules[j].file);
			free(pr->modules[j].uuid);
		}
		free(pr->threads);
		free(pr->modules);
		free(pr->triple);
	}
	for (i = 0; i < t->ncpus; i++) {
		free(t->cpus[i].ipt_trace);
		free(t->cpus[i].context_switch_trace);
	}
	free(t->procs);
	free(t->cpus);
	free(t->kernel_file);
	free(t->dir);
	free(t->origin);
	memset(t, 0, sizeof(*t));
}

int ptd_lldb_trace_parse(const char *text, size_t len, const char *dir,
			 const char *origin, struct ptd_lldb_trace *ret,
			 struct ptd_diag *diag)
{
	struct ptd_lldb_trace t;
	struct pctx p = { { NULL, origin, diag }, dir };
	struct ptd_json *doc = NULL;
	int r;

	if (!text || !dir || !origin || !ret)
		return -EINVAL;
	if (len > PTD_LLDB_MAX_DESC)
		return ptd_diagf(diag, -PTD_ELIMIT,
				 "%s: %zu bytes, more than the %u allowed",
				 origin, len, PTD_LLDB_MAX_DESC);
	r = ptd_json_parse(text, len, origin, &doc, diag);
	if (r < 0)
		return r == -ENOMEM ? ptd_diagf(diag, r, "%s: out of memory",
						origin)
				    : r;
	p.jr.doc = doc;
	memset(&t, 0, sizeof(t));
	r = parse_root(&p, ptd_json_root(doc), &t);
	ptd_json_free(doc);
	if (r == 0) {
		t.dir = strdup(dir);
		t.origin = strdup(origin);
		if (!t.dir || !t.origin)
			r = -ENOMEM;
	}
	if (r == -ENOMEM)
		(void)ptd_diagf(diag, r, "%s: out of memory", origin);
	if (r < 0) {
		ptd_lldb_trace_fini(&t);
		return r;
	}
	*ret = t;
	return 0;
}

int ptd_lldb_trace_load(const char *path, struct ptd_lldb_trace *ret,
			struct ptd_diag *diag)
{
	_cleanup_free_ char *dir = NULL, *file = NULL, *text = NULL;
	struct stat st;
	size_t len = 0;
	int r;

	if (!path || !ret)
		return -EINVAL;
	if (stat(path, &st) < 0) {
		r = -errno;
		return ptd_diagf(diag, r, "'%s': %s", path, ptd_strerror(r));
	}
	if (S_ISDIR(st.st_mode)) {
		dir = strdup(path);
		if (asprintf(&file, "%s/" PTD_LLDB_DESC, path) < 0)
			file = NULL;
	} else {
		const char *slash = strrchr(path, '/');

		dir = slash ? strndup(path, (size_t)(slash - path) +
							(slash == path))
			    : strdup(".");
		file = strdup(path);
	}
	if (!dir || !file)
		return -ENOMEM;
	r = ptd_file_read_all(file, PTD_LLDB_MAX_DESC, &text, &len);
	if (r == -PTD_ELIMIT)
		return ptd_diagf(diag, r, "%s: larger than the %u bytes "
				 "allowed", file, PTD_LLDB_MAX_DESC);
	if (r < 0)
		return ptd_diagf(diag, r, "cannot read '%s': %s", file,
				 ptd_strerror(r));
	return ptd_lldb_trace_parse(text, len, dir, file, ret, diag);
}

/* ---- decoding --------------------------------------------------------- */

/* Map every executable PT_LOAD of module @m as LLDB loads it: the first
 * PT_LOAD (in header order: ObjectFile's base address) at loadAddress,
 * every other segment at the same distance from it.  @field names the
 * module in messages. */
static int map_module(struct ptd_image *img, const struct ptd_lldb_module *m,
		      const char *sysroot, const char *field,
		      struct ptd_diag *diag)
{
	char sysfile[PATH_MAX];
	const char *file = m->file;
	_cleanup_close_ int fd = -1;
	Elf *elf = NULL;
	struct stat st;
	size_t phnum = 0, i;
	uint64_t bias = 0;
	bool have_base = false;
	int mapped = 0, r = 0;

	if (!file && sysroot) {
		if (snprintf(sysfile, sizeof(sysfile), "%s%s", sysroot,
			     m->system_path) >= (int)sizeof(sysfile))
			return ptd_diagf(diag, -ENAMETOOLONG,
					 "%s: path too long", field);
		file = sysfile;
	} else if (!file) {
		file = m->system_path;
	}
	if (elf_version(EV_CURRENT) == EV_NONE)
		return ptd_diagf(diag, -PTD_EFORMAT, "libelf is unusable");
	fd = ptd_file_open_regular(AT_FDCWD, file, 0, &st, NULL);
	if (fd < 0)
		return ptd_diagf(diag, fd, "%s: cannot open '%s': %s", field,
				 file, ptd_strerror(fd));
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF ||
	    elf_getphdrnum(elf, &phnum) != 0) {
		r = ptd_diagf(diag, -PTD_EFORMAT, "%s: '%s' is not an ELF file",
			      field, file);
		goto out;
	}
	for (i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph)) {
			r = ptd_diagf(diag, -PTD_EFORMAT,
				      "%s: '%s': program header %zu "
				      "unreadable", field, file, i);
			goto out;
		}
		if (ph.p_type != PT_LOAD)
			continue;
		if (!have_base) {
			/* wraps modulo 2^64 like the addresses do */
			bias = m->load_address - ph.p_vaddr;
			have_base = true;
		}
		if (!(ph.p_flags & PF_X) || !ph.p_filesz)
			continue;
		if (ph.p_offset > (uint64_t)st.st_size ||
		    ph.p_filesz > (uint64_t)st.st_size - ph.p_offset) {
			r = ptd_diagf(diag, -PTD_EFORMAT,
				      "%s: '%s': segment %zu lies outside "
				      "the file", field, file, i);
			goto out;
		}
		r = ptd_image_map_file(img, file, ph.p_offset, ph.p_filesz,
				       ph.p_vaddr + bias, m->system_path,
				       diag);
		if (r < 0)
			goto out;
		mapped++;
	}
	r = mapped ? 0
		   : ptd_diagf(diag, -PTD_ENOIMAGE,
			       "%s: '%s' has no executable segment", field,
			       file);
out:
	elf_end(elf);
	return r;
}

static int build_image(const struct ptd_lldb_trace *t, size_t pi,
		       const char *sysroot, struct ptd_image *img,
		       struct ptd_diag *diag)
{
	const struct ptd_lldb_process *pr = &t->procs[pi];
	size_t j;
	int r;

	for (j = 0; j < pr->nmodules; j++) {
		char f[FIELD_MAX + 64];
		struct ptd_diag md = { "" };

		(void)snprintf(f, sizeof(f), "%s: processes[%zu].modules[%zu]",
			       t->origin, pi, j);
		r = map_module(img, &pr->modules[j], sysroot, f, &md);
		if (r < 0) {
			if (!md.msg[0])
				(void)snprintf(md.msg, sizeof(md.msg),
					       "%s: %s", f, ptd_strerror(r));
			return ptd_diagf(diag, r, "%s", md.msg);
		}
	}
	return 0;
}

/* A thread is decoded when it has a trace: its own file (per-thread), or
 * its runs on the CPUs (per-CPU: every listed thread). */
static bool selected(const struct ptd_lldb_trace *t,
		     const struct ptd_lldb_thread *th,
		     const struct ptd_input_opts *o)
{
	return (th->ipt_trace || t->ncpus) &&
	       (!o->have_tid || th->tid == o->tid);
}

/* A CPU of a per-CPU bundle, read and split. */
struct cpu_trace {
	uint8_t *pt;
	size_t len;
	struct ptd_psb_block *blocks;
	size_t nblocks;
};

struct dctx {
	const struct ptd_lldb_trace *t;
	const struct ptd_input_opts *o;
	const struct ptd_input_sink *sink;
	struct ptd_decode_opts dopts;
	struct ptd_insncache *icache;
	size_t errors;
	/* per-CPU bundles */
	struct cpu_trace *cpus;
	struct ptd_lldb_exec *ex;
	size_t nex;
};

/* Decode @len bytes of trace at @pt (stream offset @base) as thread
 * @th of process @pi, adding to @st.  Returns what ptd_decode_thread
 * returns. */
static int decode_stretch(struct dctx *d, size_t pi, pid_t tid,
			  const uint8_t *pt, size_t len, uint64_t base,
			  struct ptd_image *img, struct ptd_decode_stats *st)
{
	struct ptd_decode_thread_args a;
	struct ptd_decode_stats s;
	int r;

	memset(&a, 0, sizeof(a));
	memset(&s, 0, sizeof(s));
	a.pt = pt;
	a.len = len;
	a.base = base;
	a.pid = d->t->procs[pi].pid;
	a.tid = tid;
	a.img = img;
	a.icache = d->icache;
	r = ptd_decode_thread(&d->dopts, &a, d->sink->record, d->sink->ctx,
			      &s);
	st->insns += s.insns;
	st->blocks += s.blocks;
	st->events += s.events;
	st->errors += s.errors;
	st->bytes += s.bytes;
	st->skipped += s.skipped;
	st->tl_applied += s.tl_applied;
	st->serial_parts += s.serial_parts;
	if (!st->serial_why)
		st->serial_why = s.serial_why;
	return r;
}

/* Order of a thread's executions: by their first block's TSC. */
static int exec_cmp(const void *a, const void *b, void *arg)
{
	const struct ptd_lldb_exec *x = *(const struct ptd_lldb_exec *const *)a;
	const struct ptd_lldb_exec *y = *(const struct ptd_lldb_exec *const *)b;
	const struct cpu_trace *cpus = arg;
	uint64_t tx = cpus[x->cpu].blocks[x->first].tsc;
	uint64_t ty = cpus[y->cpu].blocks[y->first].tsc;

	if (tx != ty)
		return tx < ty ? -1 : 1;
	return x->cpu < y->cpu ? -1 : x->cpu > y->cpu;
}

/* Per-CPU: thread @tid's executions that have trace, each decoded as one
 * stretch of its CPU's trace, in time order. */
static int decode_runs(struct dctx *d, size_t pi, pid_t tid,
		       struct ptd_image *img, struct ptd_decode_stats *st)
{
	const struct ptd_lldb_exec **runs = NULL;
	size_t n = 0, i;
	int r = 0;

	for (i = 0; i < d->nex; i++)
		if (d->ex[i].tid == (uint32_t)tid && d->ex[i].nblocks)
			n++;
	if (!n)
		return 0;
	runs = calloc(n, sizeof(*runs));
	if (!runs)
		return -ENOMEM;
	for (i = 0, n = 0; i < d->nex; i++)
		if (d->ex[i].tid == (uint32_t)tid && d->ex[i].nblocks)
			runs[n++] = &d->ex[i];
	qsort_r(runs, n, sizeof(*runs), exec_cmp, d->cpus);
	for (i = 0; r == 0 && i < n; i++) {
		const struct cpu_trace *c = &d->cpus[runs[i]->cpu];
		const struct ptd_psb_block *b0 = &c->blocks[runs[i]->first];
		const struct ptd_psb_block *bl =
			&c->blocks[runs[i]->first + runs[i]->nblocks - 1];

		r = decode_stretch(d, pi, tid, c->pt + b0->offset,
				   (size_t)(bl->offset + bl->size - b0->offset),
				   b0->offset, img, st);
	}
	free(runs);
	return r;
}

/* Decode thread @ti of process @pi with @img.  Returns 0 (the thread
 * decoded, maybe with an error reported through thread_done), the sink's
 * non-zero stop value, or a negative refusal. */
static int decode_one(struct dctx *d, size_t pi, size_t ti,
		      struct ptd_image *img, struct ptd_diag *diag)
{
	const struct ptd_lldb_process *pr = &d->t->procs[pi];
	const struct ptd_lldb_thread *th = &pr->threads[ti];
	struct ptd_decode_stats st;
	struct ptd_diag td = { "" };
	char *pt = NULL;
	size_t len = 0;
	int r;

	memset(&st, 0, sizeof(st));
	if (d->t->ncpus) {
		r = decode_runs(d, pi, th->tid, img, &st);
	} else {
		r = ptd_file_read_all(th->ipt_trace, PTD_LLDB_MAX_PT, &pt,
				      &len);
		if (r < 0)
			return ptd_diagf(diag, r, "%s: processes[%zu]."
					 "threads[%zu].iptTrace: cannot read "
					 "'%s': %s", d->t->origin, pi, ti,
					 th->ipt_trace, ptd_strerror(r));
		r = decode_stretch(d, pi, th->tid, (const uint8_t *)pt, len,
				   0, img, &st);
		free(pt);
	}
	if (r > 0)
		return r;
	if (r < 0) {
		(void)ptd_diagf(&td, r, "decoding thread %ld failed: %s",
				(long)th->tid, ptd_strerror(r));
		d->errors++;
	}
	if (d->sink->thread_done)
		d->sink->thread_done(d->sink->ctx, th->tid, &st, r < 0 ? r : 0,
				     &td);
	return 0;
}

static int decode_process(struct dctx *d, struct ptd_iscache *ic, size_t pi,
			  struct ptd_diag *diag)
{
	const struct ptd_lldb_process *pr = &d->t->procs[pi];
	struct ptd_image *img;
	char name[64];
	size_t ti;
	int r = 0;

	for (ti = 0; ti < pr->nthreads; ti++)
		if (selected(d->t, &pr->threads[ti], d->o))
			break;
	if (ti == pr->nthreads)
		return 0;	/* nothing to decode: no image needed */
	(void)snprintf(name, sizeof(name), "pid %ld", (long)pr->pid);
	(void)ptd_image_new(ic, name, &img);
	if (!img)
		return -ENOMEM;
	r = build_image(d->t, pi, d->o->sysroot, img, diag);
	for (; r == 0 && ti < pr->nthreads; ti++)
		if (selected(d->t, &pr->threads[ti], d->o))
			r = decode_one(d, pi, ti, img, diag);
	ptd_image_free(img);
	return r;
}

/* Read CPU @i of a per-CPU bundle: its trace split into PSB blocks (each
 * must carry a TSC) and its context switch trace into executions, given
 * their blocks.  @budget: trace bytes still allowed in memory. */
static int load_cpu(struct dctx *d, size_t i, size_t *cap, size_t *budget,
		    uint64_t *none_blocks, uint64_t *none_bytes,
		    struct ptd_diag *diag)
{
	const struct ptd_lldb_cpu *cpu = &d->t->cpus[i];
	struct cpu_trace *c = &d->cpus[i];
	struct ptd_perf_clock conv = { .time_zero = d->t->time_zero,
				       .time_mult = d->t->time_mult,
				       .time_shift = d->t->time_shift };
	_cleanup_free_ char *cs = NULL;
	char what[FIELD_MAX + 64];
	size_t cslen = 0, first = d->nex, k;
	uint64_t skipped = 0;
	int r;

	r = ptd_file_read_all(cpu->ipt_trace, *budget, (char **)&c->pt,
			      &c->len);
	if (r < 0)
		return ptd_diagf(diag, r, "%s: cpus[%zu].iptTrace: cannot "
				 "read '%s': %s", d->t->origin, i,
				 cpu->ipt_trace,
				 r == -PTD_ELIMIT ? "the CPUs' traces are "
				 "larger than allowed in all"
						  : ptd_strerror(r));
	*budget -= c->len;
	r = ptd_psb_split(c->pt, c->len, &d->dopts.cpu, &c->blocks,
			  &c->nblocks, &skipped);
	if (r < 0)
		return r;
	for (k = 0; k < c->nblocks; k++)
		if (!c->blocks[k].has_tsc)
			return ptd_diagf(diag, -PTD_EFORMAT,
					 "%s: cpus[%zu].iptTrace: the PSB at "
					 "offset %" PRIu64 " has no TSC: a "
					 "per-CPU trace is split among threads "
					 "by time and needs TSC packets",
					 d->t->origin, i,
					 c->blocks[k].offset);
	*none_bytes += skipped;
	r = ptd_file_read_all(cpu->context_switch_trace, PTD_LLDB_MAX_PT,
			      &cs, &cslen);
	if (r < 0)
		return ptd_diagf(diag, r, "%s: cpus[%zu].contextSwitchTrace: "
				 "cannot read '%s': %s", d->t->origin, i,
				 cpu->context_switch_trace, ptd_strerror(r));
	(void)snprintf(what, sizeof(what), "%s: cpus[%zu].contextSwitchTrace",
		       d->t->origin, i);
	r = ptd_lldb_cswitch_parse((const uint8_t *)cs, cslen, i, &conv, what,
				   &d->ex, &d->nex, cap, diag);
	if (r < 0)
		return r;
	*none_blocks += ptd_lldb_assign_blocks(c->blocks, c->nblocks,
					       d->ex + first, d->nex - first,
					       none_bytes);
	return 0;
}

/* Per-CPU bundles: read every CPU, then say what no thread got. */
static int load_cpus(struct dctx *d, struct ptd_diag *diag)
{
	size_t cap = 0, budget = PTD_LLDB_MAX_PT, i;
	uint64_t none_blocks = 0, none_bytes = 0;
	int r;

	d->cpus = calloc(d->t->ncpus, sizeof(*d->cpus));
	if (!d->cpus)
		return -ENOMEM;
	for (i = 0; i < d->t->ncpus; i++)
		if ((r = load_cpu(d, i, &cap, &budget, &none_blocks,
				  &none_bytes, diag)) < 0)
			return r;
	if (none_bytes && d->sink->notice) {
		struct ptd_diag n = { "" };

		(void)ptd_diagf(&n, 0, "%s: %" PRIu64 " bytes of the CPUs' "
				"traces (%" PRIu64 " PSB blocks, and bytes "
				"before a first PSB) fall in no thread's run "
				"in the context switch traces: not decoded",
				d->t->origin, none_bytes, none_blocks);
		d->sink->notice(d->sink->ctx, &n);
	}
	return 0;
}

static void free_cpus(struct dctx *d)
{
	for (size_t i = 0; d->cpus && i < d->t->ncpus; i++) {
		free(d->cpus[i].pt);
		free(d->cpus[i].blocks);
	}
	free(d->cpus);
	free(d->ex);
}

static int check_decodable(const struct ptd_lldb_trace *t,
			   const struct ptd_input_opts *o, size_t *ret_nsel,
			   struct ptd_diag *diag)
{
	size_t i, j, n = 0;

	if (t->has_kernel)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "%s: a kernel LLDB trace (%zu cpus): only "
				 "process traces are decoded", t->origin,
				 t->ncpus);
	for (i = 0; i < t->nprocs; i++)
		for (j = 0; j < t->procs[i].nthreads; j++)
			if (selected(t, &t->procs[i].threads[j], o))
				n++;
	if (o->have_tid && !n)
		return ptd_diagf(diag, -ENOENT,
				 "%s: no trace of thread %ld", t->origin,
				 (long)o->tid);
	*ret_nsel = n;
	return 0;
}

int ptd_lldb_decode(const char *path, const struct ptd_input_opts *o,
		    const struct ptd_input_sink *sink,
		    size_t *ret_thread_errors, struct ptd_diag *diag)
{
	struct ptd_lldb_trace t;
	struct ptd_iscache *ic = NULL;
	struct ptd_input_info info;
	struct dctx d;
	size_t nsel = 0, pi;
	int r;

	if (!path || !o || !sink || !sink->record)
		return -EINVAL;
	if (ret_thread_errors)
		*ret_thread_errors = 0;
	r = ptd_lldb_trace_load(path, &t, diag);
	if (r < 0)
		return r;
	memset(&d, 0, sizeof(d));
	r = check_decodable(&t, o, &nsel, diag);
	if (r < 0)
		goto out;
	(void)ptd_iscache_new(&ic);
	(void)ptd_insncache_new(0, &d.icache);
	if (!ic || !d.icache) {
		r = -ENOMEM;
		goto out;
	}
	d.t = &t;
	d.o = o;
	d.sink = sink;
	d.dopts = o->decode;
	if (!o->cpu_given)
		d.dopts.cpu = t.cpu;
	/* Time on records: the bundle's TSC to perf time conversion. */
	if (t.has_tsc_conv && !d.dopts.has_clock) {
		d.dopts.has_clock = true;
		d.dopts.clock = (struct ptd_perf_clock){
			.time_zero = t.time_zero,
			.time_mult = t.time_mult,
			.time_shift = t.time_shift };
		d.dopts.has_wallref = t.has_wallref;
		d.dopts.wallref = t.wallref;
	}
	if (t.ncpus && (r = load_cpus(&d, diag)) < 0)
		goto out;
	info = (struct ptd_input_info){ PTD_INPUT_LLDB, "lldb-bundle",
					t.nprocs == 1 ? (long)t.procs[0].pid
						      : 0,
					nsel };
	r = sink->info ? sink->info(sink->ctx, &info) : 0;
	for (pi = 0; r == 0 && pi < t.nprocs; pi++)
		r = decode_process(&d, ic, pi, diag);
	if (ret_thread_errors)
		*ret_thread_errors = d.errors;
out:
	free_cpus(&d);
	ptd_insncache_free(d.icache);
	ptd_iscache_free(ic);
	ptd_lldb_trace_fini(&t);
	return r;
}
