/* SPDX-License-Identifier: MIT */
/*
 * Coverage per module and function, as text or lcov (views/coverage.h).
 */
#include "views/coverage.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef PTD_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <libelf.h>
#endif

#include "common/fileio.h"
#include "sym/symtab.h"
#include "x86/insn.h"

/* An instruction of a function: executed (count > 0, bytes known) or
 * found by the disassembly only (count 0). */
struct cov_insn {
	uint64_t vaddr;		/* in the file's address space */
	uint64_t count;
	uint8_t size;
	uint8_t raw[pt_max_insn_size];
	enum pt_exec_mode mode;
};

struct cov_func {
	const char *name;	/* NULL: no symbol covers the code */
	uint64_t addr, size;	/* the symbol's; size 0: unknown */
	struct cov_insn *ex;	/* executed, by vaddr */
	size_t nex;
	uint64_t execs;
	/* the disassembly (has_total): every instruction by vaddr, with
	 * the executed ones' counts */
	bool has_total;
	struct cov_insn *all;
	size_t nall;
	uint64_t resyncs, undecodable, differs;
	const char *why;	/* no total: why (static string) */
};

struct cov_module {
	const char *name;	/* as records name it */
	const char *file;	/* the file read, NULL: none */
	const char *debug;	/* its debug file, "" none */
	const struct ptd_symtab *tab;
	struct cov_func *f;
	size_t nf;
};

struct ptd_coverage {
	struct cov_module *m;
	size_t nm;
	char **notes;
	size_t nnotes, capnotes;
	bool nomem;
};

/* One entry of the counter table, placed. */
struct placed {
	const char *module;
	const char *fname;
	uint64_t faddr, fsize;
	const struct ptd_symtab *tab;
	struct cov_insn in;
};

__attribute__((format(printf, 2, 3))) static void note(struct ptd_coverage *c,
						       const char *fmt, ...)
{
	va_list ap;
	char *m;

	if (c->nnotes == c->capnotes) {
		size_t n = c->capnotes ? 2 * c->capnotes : 8;
		char **v = reallocarray(c->notes, n, sizeof(*v));

		if (!v) {
			c->nomem = true;
			return;
		}
		c->notes = v;
		c->capnotes = n;
	}
	va_start(ap, fmt);
	if (vasprintf(&m, fmt, ap) < 0)
		c->nomem = true;
	else
		c->notes[c->nnotes++] = m;
	va_end(ap);
}

const char *ptd_coverage_note(const struct ptd_coverage *c, size_t i)
{
	return c && i < c->nnotes ? c->notes[i] : NULL;
}

static int strcmp0(const char *a, const char *b)
{
	if (a == b)
		return 0;
	if (!a || !b)
		return a ? 1 : -1;
	return strcmp(a, b);
}

/* By module, function (address, then name), instruction address. */
static int placed_cmp(const void *x, const void *y)
{
	const struct placed *a = x, *b = y;
	int c = strcmp0(a->module, b->module);

	if (c)
		return c;
	if (a->faddr != b->faddr)
		return a->faddr < b->faddr ? -1 : 1;
	c = strcmp0(a->fname, b->fname);
	if (c)
		return c;
	if (a->in.vaddr != b->in.vaddr)
		return a->in.vaddr < b->in.vaddr ? -1 : 1;
	return 0;
}

void ptd_coverage_free(struct ptd_coverage *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nm; i++) {
		for (size_t k = 0; k < c->m[i].nf; k++) {
			free(c->m[i].f[k].ex);
			free(c->m[i].f[k].all);
		}
		free(c->m[i].f);
	}
	free(c->m);
	for (size_t i = 0; i < c->nnotes; i++)
		free(c->notes[i]);
	free(c->notes);
	free(c);
}

/* The last module looked up and its table (the table's module names are
 * one copy each: a pointer compare). */
struct place_cache {
	const char *module;
	const struct ptd_symtab *tab;
};

/* Where the instruction @in lies: its file vaddr and function. */
static void place(struct ptd_symbols *syms, struct place_cache *pc,
		  const struct ptd_rec_insn *in, uint64_t count,
		  struct placed *p)
{
	const struct ptd_symtab *tab = NULL;
	const struct ptd_sym *sym = NULL;
	uint64_t vaddr;

	memset(p, 0, sizeof(*p));
	p->module = in->module;
	p->in.count = count;
	p->in.size = in->size;
	p->in.mode = in->mode;
	memcpy(p->in.raw, in->raw, sizeof(p->in.raw));
	if (in->module && in->module == pc->module) {
		tab = pc->tab;
	} else {
		(void)ptd_symbols_module_file(syms, in->module, NULL, &tab,
					      NULL);
		pc->module = in->module;
		pc->tab = tab;
	}
	if (tab && ptd_symtab_vaddr_of(tab, in->modoff, &vaddr) == 0) {
		p->tab = tab;
		p->in.vaddr = vaddr;
		sym = ptd_symtab_lookup(tab, vaddr, NULL);
	}
	if (sym) {
		p->fname = sym->name;
		p->faddr = sym->addr;
		p->fsize = sym->size;
		return;
	}
	/* no table (code of no file), or no symbol covers it */
	p->tab = NULL;
	p->in.vaddr = in->ip;
	p->fname = in->sym;
	p->faddr = in->sym ? in->ip - in->symoff : 0;
}

/* Read the @size bytes of vaddr @addr from @m's file into *@ret. */
static int read_func(struct ptd_coverage *c, const struct cov_module *m,
		     uint64_t addr, uint64_t size, uint8_t **ret)
{
	struct ptd_diag diag = { "" };
	uint64_t off, off_end;
	uint8_t *buf;
	size_t got = 0;
	int fd;

	if (ptd_symtab_offset_of(m->tab, addr, &off) < 0 ||
	    ptd_symtab_offset_of(m->tab, addr + size - 1, &off_end) < 0 ||
	    off_end - off != size - 1)
		return -ENOENT;
	fd = ptd_file_open_regular(AT_FDCWD, m->file, 0, NULL, &diag);
	if (fd < 0) {
		note(c, "%s", diag.msg);
		return fd;
	}
	buf = malloc(size);
	if (!buf) {
		(void)close(fd);
		return -ENOMEM;
	}
	while (got < size) {
		ssize_t n = pread(fd, buf + got, size - got,
				  (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? -errno : -PTD_ETRUNC;

			note(c, "%s: reading %" PRIu64 " bytes at file offset "
				"0x%" PRIx64 ": %s",
			     m->file, (uint64_t)size, off, ptd_strerror(err));
			free(buf);
			(void)close(fd);
			return err;
		}
		got += (size_t)n;
	}
	(void)close(fd);
	*ret = buf;
	return 0;
}

/* Disassemble @f's bytes: its instructions into f->all, the executed ones
 * with their counts (coverage.h says how). */
static int disassemble(struct ptd_coverage *c, const struct cov_module *m,
		       struct cov_func *f)
{
	enum pt_exec_mode mode = f->nex ? f->ex[0].mode : ptem_64bit;
	uint8_t *bytes = NULL;
	size_t pos = 0, j = 0, cap = 0;
	int r;

	if (!f->size) {
		f->why = "the symbol has no size";
		return 0;
	}
	if (!m->tab || !m->file) {
		f->why = "no file";
		return 0;
	}
	if (f->size > PTD_COVERAGE_MAX_FUNC_BYTES) {
		f->why = "larger than 16 MiB";
		return 0;
	}
	r = read_func(c, m, f->addr, f->size, &bytes);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		f->why = "its bytes are not in the file";
		return 0;
	}
	while (pos < f->size) {
		uint64_t cur = f->addr + pos;
		struct ptd_x86_insn xi;
		struct cov_insn *ci;

		while (j < f->nex && f->ex[j].vaddr < cur)
			j++;	/* cannot be: the sweep resyncs at each */
		if (j < f->nex && f->ex[j].vaddr == cur) {
			/* an executed instruction: its own bytes say its
			 * size (the file's may differ: checked below) */
			xi.size = f->ex[j].size;
			r = 0;
		} else {
			r = ptd_x86_decode(bytes + pos, f->size - pos, cur,
					   mode, &xi);
		}
		if (r < 0) {
			f->undecodable++;
			pos++;
			continue;
		}
		if (j < f->nex && f->ex[j].vaddr > cur &&
		    f->ex[j].vaddr < cur + xi.size) {
			/* the sweep would step over an executed one */
			f->resyncs++;
			pos = f->ex[j].vaddr - f->addr;
			continue;
		}
		if (f->nall == cap) {
			size_t n = cap ? 2 * cap : 64;
			struct cov_insn *v = reallocarray(f->all, n,
							  sizeof(*v));

			if (!v) {
				free(bytes);
				return -ENOMEM;
			}
			f->all = v;
			cap = n;
		}
		ci = &f->all[f->nall++];
		memset(ci, 0, sizeof(*ci));
		ci->vaddr = cur;
		ci->size = xi.size;
		ci->mode = mode;
		if (j < f->nex && f->ex[j].vaddr == cur) {
			*ci = f->ex[j];
			if (pos + ci->size > f->size ||
			    memcmp(bytes + pos, ci->raw, ci->size))
				f->differs++;
			j++;
		}
		pos += xi.size;
	}
	free(bytes);
	/* executed instructions past the symbol's end (its size too small):
	 * kept, outside the total */
	if (j < f->nex) {
		f->why = "code ran past the symbol's size";
		return 0;
	}
	f->has_total = true;
	if (f->differs)
		note(c, "%s: %s: %" PRIu64 " executed instructions differ "
			"from the file's bytes",
		     m->file, f->name, f->differs);
	return 0;
}

/* Group placed[lo..hi) (one module, sorted) into functions. */
static int add_module(struct ptd_coverage *c, struct ptd_symbols *syms,
		      struct placed *pl, size_t lo, size_t hi)
{
	struct cov_module *m = &c->m[c->nm++];
	const char *debug = "";
	int r;

	memset(m, 0, sizeof(*m));
	m->name = pl[lo].module;
	if (ptd_symbols_module_file(syms, m->name, &m->file, &m->tab,
				    &debug) < 0 ||
	    !m->tab)
		m->tab = NULL;
	m->debug = debug;
	if (m->name && m->name[0] != '[' && !m->tab)
		note(c, "%s: no symbols (functions unknown)", m->name);
	m->f = calloc(hi - lo, sizeof(*m->f));
	if (!m->f)
		return -ENOMEM;
	for (size_t i = lo; i < hi;) {
		size_t k = i, n = 0;
		struct cov_func *f = &m->f[m->nf++];

		while (k < hi && pl[k].faddr == pl[i].faddr &&
		       !strcmp0(pl[k].fname, pl[i].fname))
			k++;
		f->name = pl[i].fname;
		f->addr = pl[i].faddr;
		f->size = pl[i].tab && f->name ? pl[i].fsize : 0;
		f->ex = calloc(k - i, sizeof(*f->ex));
		if (!f->ex)
			return -ENOMEM;
		for (size_t e = i; e < k; e++) {
			f->execs += pl[e].in.count;
			/* one address, two entries (two mappings of the
			 * file, two processes): one instruction */
			if (n && f->ex[n - 1].vaddr == pl[e].in.vaddr) {
				f->ex[n - 1].count += pl[e].in.count;
				continue;
			}
			f->ex[n++] = pl[e].in;
		}
		f->nex = n;
		if (!f->name)
			f->why = "no symbol covers it";
		else {
			r = disassemble(c, m, f);
			if (r < 0)
				return r;
		}
		i = k;
	}
	return 0;
}

int ptd_coverage_new(const struct ptd_counters *t, struct ptd_symbols *syms,
		     struct ptd_coverage **ret)
{
	size_t n = ptd_counters_nentries(t), np = 0, nmod = 0;
	struct place_cache pc = { NULL, NULL };
	struct ptd_coverage *c;
	struct placed *pl;
	int r = 0;

	if (!t || !ret)
		return -EINVAL;
	*ret = NULL;
	c = calloc(1, sizeof(*c));
	pl = calloc(n ? n : 1, sizeof(*pl));
	if (!c || !pl) {
		free(pl);
		free(c);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t count;
		const struct ptd_rec_insn *in = ptd_counters_entry(t, i,
								   &count);

		if (in && count)
			place(syms, &pc, in, count, &pl[np++]);
	}
	qsort(pl, np, sizeof(*pl), placed_cmp);
	for (size_t i = 0; i < np; i++)
		if (!i || strcmp0(pl[i].module, pl[i - 1].module))
			nmod++;
	c->m = calloc(nmod ? nmod : 1, sizeof(*c->m));
	if (!c->m)
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < np;) {
		size_t k = i;

		while (k < np && !strcmp0(pl[k].module, pl[i].module))
			k++;
		r = add_module(c, syms, pl, i, k);
		i = k;
	}
	free(pl);
	if (r == 0 && c->nomem)
		r = -ENOMEM;
	if (r < 0) {
		ptd_coverage_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

/* ---- text ---- */

static void pct(char *buf, size_t sz, uint64_t part, uint64_t whole)
{
	if (!whole)
		(void)snprintf(buf, sz, "-");
	else
		(void)snprintf(buf, sz, "%.1f%%",
			       100.0 * (double)part / (double)whole);
}

int ptd_coverage_write_text(FILE *f, const struct ptd_coverage *c,
			    const char *trace)
{
	fprintf(f, "# coverage of %s\n"
		   "# run: distinct instructions executed; executions: their "
		   "counts summed;\n"
		   "# total: the instructions of the function's symbol, "
		   "disassembled from its file\n"
		   "# (\"-\": no total; the note says why); functions of "
		   "which nothing ran are not listed\n",
		trace ? trace : "");
	for (size_t i = 0; i < c->nm; i++) {
		const struct cov_module *m = &c->m[i];
		uint64_t run = 0, execs = 0, srun = 0, stot = 0;
		char p[32];

		for (size_t k = 0; k < m->nf; k++) {
			run += m->f[k].nex;
			execs += m->f[k].execs;
			if (m->f[k].has_total) {
				srun += m->f[k].nex;
				stot += m->f[k].nall;
			}
		}
		pct(p, sizeof(p), srun, stot);
		fprintf(f, "\nmodule %s\n", m->name ? m->name : "[unknown]");
		if (m->file && (!m->name || strcmp(m->file, m->name)))
			fprintf(f, "  file %s\n", m->file);
		if (m->debug && m->debug[0])
			fprintf(f, "  debug file %s\n", m->debug);
		fprintf(f, "  functions %zu, run %" PRIu64 ", executions %" PRIu64
			   "; functions with a total: run %" PRIu64
			   " of %" PRIu64 " (%s)\n",
			m->nf, run, execs, srun, stot, p);
		fprintf(f, "  %8s %8s %7s %14s  %s\n", "run", "total", "cover",
			"executions", "function");
		for (size_t k = 0; k < m->nf; k++) {
			const struct cov_func *fn = &m->f[k];
			char tot[24], name[64];

			if (fn->has_total)
				(void)snprintf(tot, sizeof(tot), "%zu",
					       fn->nall);
			else
				(void)snprintf(tot, sizeof(tot), "-");
			pct(p, sizeof(p), fn->nex, fn->has_total ? fn->nall : 0);
			if (!fn->name)
				(void)snprintf(name, sizeof(name),
					       "[no symbol] (from 0x%" PRIx64
					       ")",
					       fn->nex ? fn->ex[0].vaddr : 0);
			fprintf(f, "  %8zu %8s %7s %14" PRIu64 "  %s\n", fn->nex,
				tot, p, fn->execs, fn->name ? fn->name : name);
			if (!fn->has_total && fn->why)
				fprintf(f, "    note: no total: %s\n", fn->why);
			if (fn->resyncs || fn->undecodable || fn->differs)
				fprintf(f, "    note: disassembly: %" PRIu64
					   " resyncs at executed instructions, "
					   "%" PRIu64 " undecodable bytes, "
					   "%" PRIu64 " executed instructions "
					   "differ from the file\n",
					fn->resyncs, fn->undecodable,
					fn->differs);
		}
	}
	if (fflush(f) != 0 || ferror(f))
		return -(errno ? errno : EIO);
	return 0;
}

/* ---- lcov ---- */

#ifdef PTD_HAVE_LIBDW

bool ptd_coverage_have_lcov(void)
{
	return true;
}

/* A source line and its count (max over its instructions). */
struct lline {
	const char *src;	/* interned in the module's DWARF */
	int line;
	uint64_t count;
};

/* A function in lcov: its source file and line, entry count. */
struct lfunc {
	const char *src;
	int line;
	const char *name;
	uint64_t count;
};

struct lcov {
	struct lline *l;
	size_t nl, capl;
	struct lfunc *fn;
	size_t nfn, capfn;
	/* source names are copied: each module's DWARF goes away */
	char **srcs;
	size_t nsrcs, capsrcs;
};

static const char *src_copy(struct lcov *lc, const char *s)
{
	char *d;

	/* one copy per name (the lines are grouped by pointer); the
	 * newest first: a function's lines are mostly of one file */
	for (size_t i = lc->nsrcs; i-- > 0;)
		if (!strcmp(lc->srcs[i], s))
			return lc->srcs[i];
	if (lc->nsrcs == lc->capsrcs) {
		size_t n = lc->capsrcs ? 2 * lc->capsrcs : 16;
		char **v = reallocarray(lc->srcs, n, sizeof(*v));

		if (!v)
			return NULL;
		lc->srcs = v;
		lc->capsrcs = n;
	}
	d = strdup(s);
	if (d)
		lc->srcs[lc->nsrcs++] = d;
	return d;
}

static void lcov_fini(struct lcov *lc)
{
	for (size_t i = 0; i < lc->nsrcs; i++)
		free(lc->srcs[i]);
	free(lc->srcs);
	free(lc->l);
	free(lc->fn);
}

/* One module's DWARF, in memory. */
struct mdwarf {
	char *bytes;
	Elf *elf;
	Dwarf *dw;
	const char *file;
};

static void mdwarf_fini(struct mdwarf *d)
{
	if (d->dw)
		dwarf_end(d->dw);
	if (d->elf)
		elf_end(d->elf);
	free(d->bytes);
	memset(d, 0, sizeof(*d));
}

/* Open @path's DWARF; 0, or a note and -ENOENT. */
static int mdwarf_open(struct ptd_coverage *c, const char *path,
		       struct mdwarf *d)
{
	size_t len = 0;
	int r;

	memset(d, 0, sizeof(*d));
	d->file = path;
	r = ptd_file_read_all(path, PTD_COVERAGE_MAX_DWARF_FILE, &d->bytes,
			      &len);
	if (r < 0) {
		note(c, "%s: no DWARF read: %s%s", path, ptd_strerror(r),
		     r == -PTD_ELIMIT ? " (larger than 1 GiB)" : "");
		return r == -ENOMEM ? r : -ENOENT;
	}
	(void)elf_version(EV_CURRENT);
	d->elf = elf_memory(d->bytes, len);
	if (!d->elf || elf_kind(d->elf) != ELF_K_ELF) {
		note(c, "%s: no DWARF read: not an ELF file", path);
		mdwarf_fini(d);
		return -ENOENT;
	}
	d->dw = dwarf_begin_elf(d->elf, DWARF_C_READ, NULL);
	if (!d->dw) {
		note(c, "%s: no DWARF read: %s", path, dwarf_errmsg(-1));
		mdwarf_fini(d);
		return -ENOENT;
	}
	return 0;
}

/* The compilation unit holding @addr: through .debug_aranges, else each
 * unit's ranges (at most PTD_COVERAGE_MAX_CUS). */
static bool cu_of(Dwarf *dw, uint64_t addr, Dwarf_Die *ret)
{
	Dwarf_Off off = 0, next;
	size_t hsize;
	unsigned n = 0;

	if (dwarf_addrdie(dw, addr, ret))
		return true;
	while (n++ < PTD_COVERAGE_MAX_CUS &&
	       dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		if (dwarf_offdie(dw, off + hsize, ret) &&
		    dwarf_haspc(ret, addr) > 0)
			return true;
		off = next;
	}
	return false;
}

/* @addr's line; false if none (or line 0).  A relative source name is
 * joined to its unit's DW_AT_comp_dir in @buf (as addr2line does), and
 * left out if that is longer than @bufsz. */
static bool line_of(struct mdwarf *d, uint64_t addr, char *buf, size_t bufsz,
		    const char **ret_src, int *ret_line)
{
	Dwarf_Attribute at;
	Dwarf_Die cu;
	Dwarf_Line *l;
	const char *src, *dir;
	int line = 0, n;

	if (!cu_of(d->dw, addr, &cu))
		return false;
	l = dwarf_getsrc_die(&cu, addr);
	if (!l || dwarf_lineno(l, &line) != 0 || line <= 0)
		return false;
	src = dwarf_linesrc(l, NULL, NULL);
	if (!src || !*src)
		return false;
	if (src[0] != '/') {
		dir = dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &at));
		if (dir && *dir) {
			n = snprintf(buf, bufsz, "%s/%s", dir, src);
			if (n < 0 || (size_t)n >= bufsz)
				return false;
			src = buf;
		}
	}
	*ret_src = src;
	*ret_line = line;
	return true;
}

static int lline_add(struct lcov *lc, const char *src, int line,
		     uint64_t count)
{
	if (lc->nl == lc->capl) {
		size_t n = lc->capl ? 2 * lc->capl : 256;
		struct lline *v = reallocarray(lc->l, n, sizeof(*v));

		if (!v)
			return -ENOMEM;
		lc->l = v;
		lc->capl = n;
	}
	lc->l[lc->nl].src = src;
	lc->l[lc->nl].line = line;
	lc->l[lc->nl].count = count;
	lc->nl++;
	return 0;
}

static bool has_break(const char *s)
{
	return strpbrk(s, "\n\r") != NULL;
}

/* Lines and functions of module @m into @lc. */
static int lcov_module(struct ptd_coverage *c, const struct cov_module *m,
		       struct lcov *lc)
{
	const char *path = m->debug && m->debug[0] ? m->debug : m->file;
	struct mdwarf d;
	bool any = false;
	int r = 0;

	if (!path || !m->tab)
		return 0;
	for (size_t k = 0; k < m->nf; k++)
		any |= m->f[k].has_total;
	if (!any)
		return 0;
	r = mdwarf_open(c, path, &d);
	if (r < 0)
		return r == -ENOMEM ? r : 0;
	any = false;
	for (size_t k = 0; r == 0 && k < m->nf; k++) {
		const struct cov_func *fn = &m->f[k];
		const char *src, *first_src = NULL;
		int line, first_line = 0;

		if (!fn->has_total)
			continue;
		if (has_break(fn->name)) {
			note(c, "%s: a function name with a line break left "
				"out of lcov (at 0x%" PRIx64 ")",
			     m->name, fn->addr);
			continue;
		}
		for (size_t i = 0; r == 0 && i < fn->nall; i++) {
			const struct cov_insn *ci = &fn->all[i];
			char buf[4096];

			if (!line_of(&d, ci->vaddr, buf, sizeof(buf), &src,
				     &line))
				continue;
			if (has_break(src)) {
				note(c, "%s: a source file name with a line "
					"break left out of lcov",
				     d.file);
				continue;
			}
			src = src_copy(lc, src);
			if (!src) {
				r = -ENOMEM;
				break;
			}
			any = true;
			if (ci->vaddr == fn->addr) {
				first_src = src;
				first_line = line;
			}
			r = lline_add(lc, src, line, ci->count);
		}
		if (r == 0 && first_src) {
			struct lfunc *v;

			if (lc->nfn == lc->capfn) {
				size_t n = lc->capfn ? 2 * lc->capfn : 64;

				v = reallocarray(lc->fn, n, sizeof(*v));
				if (!v) {
					r = -ENOMEM;
					break;
				}
				lc->fn = v;
				lc->capfn = n;
			}
			v = &lc->fn[lc->nfn++];
			v->src = first_src;
			v->line = first_line;
			v->name = fn->name;
			v->count = fn->nall && fn->all[0].vaddr == fn->addr
					   ? fn->all[0].count
					   : 0;
		}
	}
	if (r == 0 && !any)
		note(c, "%s: no DWARF line covers its functions", d.file);
	mdwarf_fini(&d);
	return r;
}

static int lline_cmp(const void *x, const void *y)
{
	const struct lline *a = x, *b = y;
	int c = strcmp(a->src, b->src);

	if (c)
		return c;
	return a->line < b->line ? -1 : a->line > b->line;
}

static int lfunc_cmp(const void *x, const void *y)
{
	const struct lfunc *a = x, *b = y;
	int c = strcmp(a->src, b->src);

	if (c)
		return c;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return strcmp(a->name, b->name);
}

int ptd_coverage_write_lcov(FILE *f, struct ptd_coverage *c,
			    const char *test)
{
	struct lcov lc;
	size_t i = 0, fi = 0;
	int r = 0;

	memset(&lc, 0, sizeof(lc));
	for (size_t k = 0; r == 0 && k < c->nm; k++)
		r = lcov_module(c, &c->m[k], &lc);
	if (r < 0) {
		lcov_fini(&lc);
		return r;
	}
	if (lc.nl)
		qsort(lc.l, lc.nl, sizeof(*lc.l), lline_cmp);
	if (lc.nfn)
		qsort(lc.fn, lc.nfn, sizeof(*lc.fn), lfunc_cmp);
	while (i < lc.nl) {
		const char *src = lc.l[i].src;
		uint64_t lf = 0, lh = 0, fnf = 0, fnh = 0;
		size_t f0;

		fprintf(f, "TN:%s\nSF:%s\n", test && !has_break(test) ? test
								     : "",
			src);
		while (fi < lc.nfn && strcmp(lc.fn[fi].src, src) < 0)
			fi++;	/* cannot be: a function's line is a line */
		f0 = fi;
		for (; fi < lc.nfn && !strcmp(lc.fn[fi].src, src); fi++)
			fprintf(f, "FN:%d,%s\n", lc.fn[fi].line,
				lc.fn[fi].name);
		for (size_t k = f0; k < fi; k++) {
			fprintf(f, "FNDA:%" PRIu64 ",%s\n", lc.fn[k].count,
				lc.fn[k].name);
			fnf++;
			fnh += lc.fn[k].count > 0;
		}
		fprintf(f, "FNF:%" PRIu64 "\nFNH:%" PRIu64 "\n", fnf, fnh);
		while (i < lc.nl && !strcmp(lc.l[i].src, src)) {
			int line = lc.l[i].line;
			uint64_t max = 0;

			for (; i < lc.nl && lc.l[i].src == src &&
			       lc.l[i].line == line;
			     i++)
				if (lc.l[i].count > max)
					max = lc.l[i].count;
			fprintf(f, "DA:%d,%" PRIu64 "\n", line, max);
			lf++;
			lh += max > 0;
		}
		fprintf(f, "LF:%" PRIu64 "\nLH:%" PRIu64 "\nend_of_record\n",
			lf, lh);
	}
	lcov_fini(&lc);
	if (fflush(f) != 0 || ferror(f))
		return -(errno ? errno : EIO);
	return 0;
}

#else /* !PTD_HAVE_LIBDW */

bool ptd_coverage_have_lcov(void)
{
	return false;
}

int ptd_coverage_write_lcov(FILE *f, struct ptd_coverage *c,
			    const char *test)
{
	(void)f;
	(void)c;
	(void)test;
	return -EOPNOTSUPP;
}

#endif
