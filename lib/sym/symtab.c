/* SPDX-License-Identifier: MIT */
/*
 * Symbol tables (sym/symtab.h).
 *
 * Symbols are kept in one array, sorted at seal; names in chunks that
 * never move, so a name pointer lives as long as the table.  An ELF source
 * is read into a staging list first and appended only when the whole file
 * passed its checks, so a refused file adds nothing.
 */
#include "sym/symtab.h"

#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/strutil.h"

#define NAME_CHUNK (256u << 10)
#define MAX_SEGS 64u
/* x86 PLT entries (lazy .plt, .plt.sec) are 16 bytes. */
#define PLT_ENTRY 16u

/* Rank at one address: higher wins (see ptd_symtab_seal). */
enum {
	RANK_LOCAL = 0,
	RANK_WEAK = 1,
	RANK_GLOBAL = 2,
	RANK_SIZED = 4,
	RANK_FUNC = 8,		/* not a label (STT_NOTYPE) */
	RANK_SYMTAB = 16,
};

struct ent {
	struct ptd_sym s;
	uint8_t rank;
};

struct chunk {
	struct chunk *next;
	size_t used, cap;
	char data[];
};

struct seg {
	uint64_t vaddr, offset, size;
};

struct ptd_symtab {
	struct ent *v;
	size_t n, cap;
	struct ptd_sym *sorted;	/* after seal */
	bool sealed;
	size_t strbytes;
	struct chunk *chunks;
	struct seg seg[MAX_SEGS];
	size_t nseg;
};

int ptd_symtab_new(struct ptd_symtab **ret)
{
	if (!ret)
		return -EINVAL;
	*ret = calloc(1, sizeof(**ret));
	return *ret ? 0 : -ENOMEM;
}

void ptd_symtab_free(struct ptd_symtab *t)
{
	if (!t)
		return;
	while (t->chunks) {
		struct chunk *n = t->chunks->next;

		free(t->chunks);
		t->chunks = n;
	}
	free(t->v);
	free(t->sorted);
	free(t);
}

/* A copy of @len bytes at @s (+ @suffix) that lives as long as @t. */
static const char *name_copy(struct ptd_symtab *t, const char *s, size_t len,
			     const char *suffix)
{
	size_t sl = suffix ? strlen(suffix) : 0, need;
	struct chunk *k = t->chunks;
	char *p;

	if (len > PTD_SYMTAB_MAX_NAME)
		len = PTD_SYMTAB_MAX_NAME;
	need = len + sl + 1;
	if (t->strbytes + need > PTD_SYMTAB_MAX_STRBYTES)
		return NULL;
	if (!k || k->cap - k->used < need) {
		k = malloc(sizeof(*k) + NAME_CHUNK);
		if (!k)
			return NULL;
		k->used = 0;
		k->cap = NAME_CHUNK;
		k->next = t->chunks;
		t->chunks = k;
	}
	p = k->data + k->used;
	memcpy(p, s, len);
	if (sl)
		memcpy(p + len, suffix, sl);
	p[len + sl] = '\0';
	k->used += need;
	t->strbytes += need;
	return p;
}

static int push(struct ptd_symtab *t, uint64_t addr, uint64_t size,
		const char *name, uint8_t rank)
{
	if (t->n >= PTD_SYMTAB_MAX_SYMS)
		return -PTD_ELIMIT;
	if (t->n == t->cap) {
		size_t c = t->cap ? 2 * t->cap : 256;
		struct ent *v;

		if (c > PTD_SYMTAB_MAX_SYMS)
			c = PTD_SYMTAB_MAX_SYMS;
		v = reallocarray(t->v, c, sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = c;
	}
	t->v[t->n++] = (struct ent){ { addr, size, name }, rank };
	return 0;
}

/* ---- ELF ---------------------------------------------------------- */

struct elfsrc {
	struct ptd_symtab *t;
	const char *name;
	Elf *e;
	uint64_t fsize;
	size_t shnum, shstrndx;
	struct ptd_diag *diag;
};

/* The table is full (names or symbols). */
static int t_full(struct elfsrc *s)
{
	return ptd_diagf(s->diag, -PTD_ELIMIT, "'%s': more than %u symbols or "
			 "%u bytes of names", s->name, PTD_SYMTAB_MAX_SYMS,
			 PTD_SYMTAB_MAX_STRBYTES);
}

/* Section @i's header, its bytes checked to lie in the file (NOBITS
 * sections have none). */
static int section(struct elfsrc *s, size_t i, Elf_Scn **ret_scn,
		   GElf_Shdr *sh)
{
	Elf_Scn *scn = elf_getscn(s->e, i);

	if (!scn || !gelf_getshdr(scn, sh))
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': section header %zu unreadable",
				 s->name, i);
	if (sh->sh_type != SHT_NOBITS &&
	    (sh->sh_offset > s->fsize || sh->sh_size > s->fsize - sh->sh_offset))
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': section %zu (offset 0x%" PRIx64
				 ", size 0x%" PRIx64 ") lies outside the file "
				 "(0x%" PRIx64 " bytes)", s->name, i,
				 (uint64_t)sh->sh_offset, (uint64_t)sh->sh_size,
				 s->fsize);
	*ret_scn = scn;
	return 0;
}

static Elf_Data *section_data(struct elfsrc *s, size_t i, Elf_Scn *scn,
			      const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);

	if (!d || (sh->sh_size && (!d->d_buf || d->d_size != sh->sh_size))) {
		(void)ptd_diagf(s->diag, -PTD_EFORMAT,
				"'%s': section %zu (offset 0x%" PRIx64
				"): its bytes are unreadable%s%s", s->name,
				i, (uint64_t)sh->sh_offset,
				elf_errmsg(-1) ? ": " : "",
				elf_errmsg(-1) ? elf_errmsg(-1) : "");
		return NULL;
	}
	return d;
}

static const char *section_name(struct elfsrc *s, const GElf_Shdr *sh)
{
	const char *n = elf_strptr(s->e, s->shstrndx, sh->sh_name);

	return n ? n : "";
}

/* A symbol table section and its strings, checked. */
struct symsec {
	size_t idx;
	GElf_Shdr sh;
	Elf_Data *syms;
	const char *str;
	size_t strsz;
	size_t n;
};

static int load_symsec(struct elfsrc *s, size_t i, struct symsec *ss)
{
	Elf_Scn *scn, *sscn;
	GElf_Shdr ssh;
	Elf_Data *sd;
	size_t esz = gelf_fsize(s->e, ELF_T_SYM, 1, EV_CURRENT);
	int r;

	memset(ss, 0, sizeof(*ss));
	ss->idx = i;
	r = section(s, i, &scn, &ss->sh);
	if (r < 0)
		return r;
	if (ss->sh.sh_type == SHT_NOBITS)
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': symbol table section %zu has no bytes "
				 "(NOBITS)", s->name, i);
	if (!esz || ss->sh.sh_entsize != esz || ss->sh.sh_size % esz)
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': symbol table section %zu (offset 0x%"
				 PRIx64 "): entry size %" PRIu64 " and size %"
				 PRIu64 " do not fit %zu-byte symbols",
				 s->name, i, (uint64_t)ss->sh.sh_offset,
				 (uint64_t)ss->sh.sh_entsize,
				 (uint64_t)ss->sh.sh_size, esz);
	ss->n = ss->sh.sh_size / esz;
	if (ss->n > PTD_SYMTAB_MAX_SYMS)
		return ptd_diagf(s->diag, -PTD_ELIMIT,
				 "'%s': symbol table section %zu has %zu "
				 "symbols (at most %u)", s->name, i, ss->n,
				 PTD_SYMTAB_MAX_SYMS);
	if (ss->sh.sh_link == 0 || ss->sh.sh_link >= s->shnum)
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': symbol table section %zu links to "
				 "section %u, not a string table", s->name, i,
				 (unsigned)ss->sh.sh_link);
	r = section(s, ss->sh.sh_link, &sscn, &ssh);
	if (r < 0)
		return r;
	if (ssh.sh_type != SHT_STRTAB)
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': symbol table section %zu links to "
				 "section %u, not a string table", s->name, i,
				 (unsigned)ss->sh.sh_link);
	ss->syms = section_data(s, i, scn, &ss->sh);
	if (!ss->syms)
		return -PTD_EFORMAT;
	sd = section_data(s, ss->sh.sh_link, sscn, &ssh);
	if (!sd)
		return -PTD_EFORMAT;
	ss->str = sd->d_buf;
	ss->strsz = sd->d_size;
	return 0;
}

/* Symbol @j of @ss and its name (checked to lie inside the strings and
 * end there). */
static int symsec_get(struct elfsrc *s, const struct symsec *ss, size_t j,
		      GElf_Sym *sym, const char **ret_name, size_t *ret_len)
{
	const char *nul;

	if (!gelf_getsym(ss->syms, (int)j, sym))
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': section %zu: symbol %zu unreadable",
				 s->name, ss->idx, j);
	if (sym->st_name >= ss->strsz)
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': section %zu (offset 0x%" PRIx64
				 "): symbol %zu: name index 0x%x outside its "
				 "string table (0x%zx bytes)", s->name,
				 ss->idx, (uint64_t)ss->sh.sh_offset, j,
				 (unsigned)sym->st_name, ss->strsz);
	nul = memchr(ss->str + sym->st_name, '\0',
		     ss->strsz - sym->st_name);
	if (!nul)
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': section %zu (offset 0x%" PRIx64
				 "): symbol %zu: name at 0x%x runs past the "
				 "end of its string table", s->name, ss->idx,
				 (uint64_t)ss->sh.sh_offset, j,
				 (unsigned)sym->st_name);
	*ret_name = ss->str + sym->st_name;
	*ret_len = (size_t)(nul - *ret_name);
	return 0;
}

/* A label (STT_NOTYPE) in a section of code. */
static bool label_in_code(struct elfsrc *s, const GElf_Sym *sym)
{
	GElf_Shdr sh;
	Elf_Scn *scn;

	if (sym->st_shndx >= SHN_LORESERVE || sym->st_shndx >= s->shnum)
		return false;
	scn = elf_getscn(s->e, sym->st_shndx);
	return scn && gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR);
}

static int add_symsec(struct elfsrc *s, const struct symsec *ss, bool symtab)
{
	for (size_t j = 1; j < ss->n; j++) {
		GElf_Sym sym;
		const char *nm, *copy;
		size_t len;
		uint8_t rank;
		int type, bind, r;

		r = symsec_get(s, ss, j, &sym, &nm, &len);
		if (r < 0)
			return r;
		type = GELF_ST_TYPE(sym.st_info);
		bind = GELF_ST_BIND(sym.st_info);
		if (sym.st_shndx == SHN_UNDEF || !sym.st_value || !len)
			continue;
		/* Functions, and labels in code (as perf takes them:
		 * ld.so's _start is one). */
		if (type == STT_NOTYPE) {
			if (!label_in_code(s, &sym))
				continue;
		} else if (type != STT_FUNC && type != STT_GNU_IFUNC) {
			continue;
		}
		rank = bind == STB_GLOBAL ? RANK_GLOBAL
		       : bind == STB_WEAK ? RANK_WEAK : RANK_LOCAL;
		if (type != STT_NOTYPE)
			rank |= RANK_FUNC;
		if (sym.st_size)
			rank |= RANK_SIZED;
		if (symtab)
			rank |= RANK_SYMTAB;
		copy = name_copy(s->t, nm, len, NULL);
		if (!copy)
			return t_full(s);
		r = push(s->t, sym.st_value, sym.st_size, copy, rank);
		if (r < 0)
			return r == -PTD_ELIMIT ? t_full(s) : r;
	}
	return 0;
}

/* The sections the PLT is named from. */
struct pltsecs {
	size_t rel, dyn;		/* .rela.plt, .rela.dyn; 0: none */
	size_t plt, pltsec, pltgot;	/* 0: none */
};

/* A PLT relocation: the GOT slot its entry jumps through, and what it
 * names. */
struct pltrel {
	uint64_t got;
	const char *name;	/* in the symbol strings, NULL: IRELATIVE */
	size_t len;
	int64_t addend;
};

static int pltrel_cmp(const void *a, const void *b)
{
	const struct pltrel *x = a, *y = b;

	return x->got < y->got ? -1 : x->got > y->got;
}

/* The GOT slot the x86-64 PLT entry at @addr (@b, @n bytes) jumps
 * through: its `jmp *disp32(%rip)` (ff 25; in a lazy .plt entry first,
 * in .plt.sec after endbr64 and a bnd prefix). */
static bool plt_entry_got(const uint8_t *b, size_t n, uint64_t addr,
			  uint64_t *ret_got)
{
	for (size_t i = 0; i + 6 <= n; i++) {
		int32_t disp;

		if (b[i] != 0xff || b[i + 1] != 0x25)
			continue;
		memcpy(&disp, b + i + 2, 4);
		*ret_got = addr + i + 6 + (uint64_t)(int64_t)disp;
		return true;
	}
	return false;
}

/* Name the entries of PLT section @idx: each jumps through a GOT slot, and
 * the relocation of that slot names the function, "sym@plt" as perf and
 * objdump name it (an IRELATIVE slot: "*ABS*+0xADDEND@plt", objdump's
 * name).  Entries whose slot has no relocation (.plt's first, the
 * resolver's) stay unnamed. */
static int name_plt_section(struct elfsrc *s, size_t idx,
			    const struct pltrel *rel, size_t nrel)
{
	GElf_Shdr sh;
	Elf_Scn *scn;
	Elf_Data *d;
	uint64_t esz;
	int r;

	r = section(s, idx, &scn, &sh);
	if (r < 0)
		return r;
	if (sh.sh_type == SHT_NOBITS || sh.sh_addr + sh.sh_size < sh.sh_addr)
		return 0;
	d = section_data(s, idx, scn, &sh);
	if (!d)
		return -PTD_EFORMAT;
	/* .plt.got's entries are 8 bytes (16 with IBT), the others 16 */
	esz = sh.sh_entsize == 8 ? 8 : PLT_ENTRY;
	for (uint64_t off = 0; off + esz <= d->d_size; off += esz) {
		struct pltrel key, *hit;
		const char *copy;
		char abs[48];
		uint64_t got;

		if (!plt_entry_got((const uint8_t *)d->d_buf + off, esz,
				   sh.sh_addr + off, &got))
			continue;
		key.got = got;
		hit = bsearch(&key, rel, nrel, sizeof(*rel), pltrel_cmp);
		if (!hit)
			continue;
		if (hit->name) {
			copy = name_copy(s->t, hit->name, hit->len, "@plt");
		} else {
			(void)snprintf(abs, sizeof(abs), "*ABS*+0x%" PRIx64,
				       (uint64_t)hit->addend);
			copy = name_copy(s->t, abs, strlen(abs), "@plt");
		}
		if (!copy)
			return t_full(s);
		r = push(s->t, sh.sh_addr + off, esz, copy,
			 RANK_FUNC | RANK_GLOBAL | RANK_SIZED);
		if (r < 0)
			return r == -PTD_ELIMIT ? t_full(s) : r;
	}
	return 0;
}

/* Append the relocations of section @idx to *@rel (*@nrel of *@cap):
 * every one of .rela.plt (.rel.plt), only those naming a symbol of others
 * (.rela.dyn's GLOB_DAT slots that .plt.got jumps through). */
static int read_rels(struct elfsrc *s, size_t idx, bool all,
		     struct pltrel **rel, size_t *nrel, size_t *cap)
{
	GElf_Shdr rsh;
	Elf_Scn *rscn;
	Elf_Data *rd;
	struct symsec dyn;
	size_t esz, n;
	bool rela;
	int r;

	r = section(s, idx, &rscn, &rsh);
	if (r < 0)
		return r;
	rela = rsh.sh_type == SHT_RELA;
	esz = gelf_fsize(s->e, rela ? ELF_T_RELA : ELF_T_REL, 1, EV_CURRENT);
	if (!esz || rsh.sh_entsize != esz || rsh.sh_size % esz)
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': relocation section %zu (offset 0x%"
				 PRIx64 "): entry size %" PRIu64 " and size %"
				 PRIu64 " do not fit %zu-byte entries",
				 s->name, idx, (uint64_t)rsh.sh_offset,
				 (uint64_t)rsh.sh_entsize,
				 (uint64_t)rsh.sh_size, esz);
	n = rsh.sh_size / esz;
	if (n > PTD_SYMTAB_MAX_SYMS || *nrel + n > PTD_SYMTAB_MAX_SYMS)
		return ptd_diagf(s->diag, -PTD_ELIMIT,
				 "'%s': %zu relocations in section %zu (at "
				 "most %u)", s->name, n, idx,
				 PTD_SYMTAB_MAX_SYMS);
	if (rsh.sh_link == 0 || rsh.sh_link >= s->shnum)
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': relocation section %zu links to "
				 "section %u, not a symbol table", s->name,
				 idx, (unsigned)rsh.sh_link);
	r = load_symsec(s, rsh.sh_link, &dyn);
	if (r < 0)
		return r;
	rd = section_data(s, idx, rscn, &rsh);
	if (!rd)
		return -PTD_EFORMAT;
	if (*nrel + n > *cap) {
		size_t c = *nrel + n;
		struct pltrel *v = reallocarray(*rel, c ? c : 1, sizeof(*v));

		if (!v)
			return -ENOMEM;
		*rel = v;
		*cap = c;
	}
	for (size_t i = 0; i < n; i++) {
		struct pltrel *pr = &(*rel)[*nrel];
		GElf_Rela ra;
		GElf_Rel rl;
		GElf_Sym sym;
		size_t si;
		bool ok;

		ok = rela ? gelf_getrela(rd, (int)i, &ra) != NULL
			  : gelf_getrel(rd, (int)i, &rl) != NULL;
		if (!ok)
			return ptd_diagf(s->diag, -PTD_EFORMAT,
					 "'%s': section %zu: relocation %zu "
					 "unreadable", s->name, idx, i);
		if (!rela) {
			ra.r_offset = rl.r_offset;
			ra.r_info = rl.r_info;
			ra.r_addend = 0;
		}
		si = GELF_R_SYM(ra.r_info);
		pr->got = ra.r_offset;
		pr->addend = ra.r_addend;
		pr->name = NULL;
		pr->len = 0;
		if (si >= dyn.n)
			return ptd_diagf(s->diag, -PTD_EFORMAT,
					 "'%s': section %zu (offset 0x%" PRIx64
					 "): relocation %zu names symbol %zu "
					 "of %zu", s->name, idx,
					 (uint64_t)rsh.sh_offset, i, si,
					 dyn.n);
		if (!si && !all)
			continue;
		if (si) {
			r = symsec_get(s, &dyn, si, &sym, &pr->name,
				       &pr->len);
			if (r < 0)
				return r;
			if (!pr->len)
				continue;
		}
		(*nrel)++;
	}
	return 0;
}

/* The PLT of an x86-64 file: .plt.sec, .plt and .plt.got entries, named
 * by the relocations of .rela.plt and .rela.dyn.  Entries are matched to
 * relocations by the GOT slot they jump through, not by their order,
 * which IRELATIVE relocations upset. */
static int add_plt(struct elfsrc *s, const struct pltsecs *ps)
{
	struct pltrel *rel = NULL;
	size_t nrel = 0, cap = 0;
	int r = 0;

	if (!ps->plt && !ps->pltsec && !ps->pltgot)
		return 0;
	if (ps->rel)
		r = read_rels(s, ps->rel, true, &rel, &nrel, &cap);
	if (r == 0 && ps->dyn && ps->pltgot)
		r = read_rels(s, ps->dyn, false, &rel, &nrel, &cap);
	if (r == 0 && nrel) {
		qsort(rel, nrel, sizeof(*rel), pltrel_cmp);
		if (ps->pltsec)
			r = name_plt_section(s, ps->pltsec, rel, nrel);
		if (r == 0 && ps->plt)
			r = name_plt_section(s, ps->plt, rel, nrel);
		if (r == 0 && ps->pltgot)
			r = name_plt_section(s, ps->pltgot, rel, nrel);
	}
	free(rel);
	return r;
}

/* .gnu_debuglink: a file name, NUL, padding to 4, a CRC32. */
static int read_debuglink(struct elfsrc *s, size_t i,
			  struct ptd_elf_syminfo *info)
{
	GElf_Shdr sh;
	Elf_Scn *scn;
	Elf_Data *d;
	const char *p, *nul;
	size_t len, crcoff;
	int r;

	r = section(s, i, &scn, &sh);
	if (r < 0)
		return r;
	if (sh.sh_type == SHT_NOBITS)
		return 0;
	d = section_data(s, i, scn, &sh);
	if (!d)
		return -PTD_EFORMAT;
	p = d->d_buf;
	nul = d->d_size ? memchr(p, '\0', d->d_size) : NULL;
	len = nul ? (size_t)(nul - p) : 0;
	crcoff = (len + 4) & ~(size_t)3;
	if (!nul || !len || len >= sizeof(info->debuglink) ||
	    crcoff + 4 > d->d_size || memchr(p, '/', len))
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': .gnu_debuglink (section %zu, offset "
				 "0x%" PRIx64 ") is not a file name and a "
				 "CRC", s->name, i, (uint64_t)sh.sh_offset);
	memcpy(info->debuglink, p, len);
	info->debuglink[len] = '\0';
	memcpy(&info->debuglink_crc, p + crcoff, 4);
	return 0;
}

static int read_segments(struct elfsrc *s, struct seg *seg, size_t *ret_n)
{
	size_t phnum = 0, n = 0;

	if (elf_getphdrnum(s->e, &phnum) != 0)
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': program headers unreadable", s->name);
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(s->e, (int)i, &ph))
			return ptd_diagf(s->diag, -PTD_EFORMAT,
					 "'%s': program header %zu unreadable",
					 s->name, i);
		if (ph.p_type != PT_LOAD || !ph.p_filesz)
			continue;
		if (n == MAX_SEGS)
			return ptd_diagf(s->diag, -PTD_ELIMIT,
					 "'%s': more than %u loadable "
					 "segments", s->name, MAX_SEGS);
		if (ph.p_offset + ph.p_filesz < ph.p_offset ||
		    ph.p_vaddr + ph.p_filesz < ph.p_vaddr)
			return ptd_diagf(s->diag, -PTD_EFORMAT,
					 "'%s': program header %zu wraps "
					 "around", s->name, i);
		seg[n++] = (struct seg){ ph.p_vaddr, ph.p_offset,
					 ph.p_filesz };
	}
	*ret_n = n;
	return 0;
}

static int add_elf(struct elfsrc *s, unsigned flags,
		   struct ptd_elf_syminfo *info, struct seg *seg,
		   size_t *nseg)
{
	struct pltsecs ps = { 0, 0, 0, 0, 0 };
	size_t link = 0;
	GElf_Ehdr eh;
	int r;

	if (elf_kind(s->e) != ELF_K_ELF || !gelf_getehdr(s->e, &eh))
		return ptd_diagf(s->diag, -PTD_EFORMAT, "'%s' is not an ELF "
				 "file", s->name);
	if (elf_getshdrnum(s->e, &s->shnum) != 0 ||
	    elf_getshdrstrndx(s->e, &s->shstrndx) != 0)
		return ptd_diagf(s->diag, -PTD_EFORMAT, "'%s': section headers "
				 "unreadable%s%s", s->name,
				 elf_errmsg(-1) ? ": " : "",
				 elf_errmsg(-1) ? elf_errmsg(-1) : "");
	/* libelf reads a truncated file's missing section headers as none */
	if (s->shnum &&
	    (eh.e_shoff > s->fsize || !eh.e_shentsize ||
	     (s->fsize - eh.e_shoff) / eh.e_shentsize < s->shnum))
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': section headers (offset 0x%" PRIx64
				 ", %zu of %u bytes) lie outside the file "
				 "(0x%" PRIx64 " bytes)", s->name,
				 (uint64_t)eh.e_shoff, s->shnum,
				 (unsigned)eh.e_shentsize, s->fsize);
	if (!s->shnum && eh.e_shoff)
		return ptd_diagf(s->diag, -PTD_EFORMAT,
				 "'%s': section headers (offset 0x%" PRIx64
				 ") unreadable: outside the file (0x%" PRIx64
				 " bytes)?", s->name, (uint64_t)eh.e_shoff,
				 s->fsize);
	for (size_t i = 1; i < s->shnum; i++) {
		struct symsec ss;
		GElf_Shdr sh;
		Elf_Scn *scn;
		const char *sn;

		r = section(s, i, &scn, &sh);
		if (r < 0)
			return r;
		if (sh.sh_type == SHT_SYMTAB)
			info->has_symtab = true;
		if (sh.sh_type == SHT_SYMTAB ||
		    (sh.sh_type == SHT_DYNSYM &&
		     !(flags & PTD_SYMTAB_DEBUG_FILE))) {
			r = load_symsec(s, i, &ss);
			if (r == 0)
				r = add_symsec(s, &ss,
					       sh.sh_type == SHT_SYMTAB);
			if (r < 0)
				return r;
			continue;
		}
		if (flags & PTD_SYMTAB_DEBUG_FILE)
			continue;
		sn = section_name(s, &sh);
		if ((sh.sh_type == SHT_RELA && !strcmp(sn, ".rela.plt")) ||
		    (sh.sh_type == SHT_REL && !strcmp(sn, ".rel.plt")))
			ps.rel = i;
		else if (sh.sh_type == SHT_PROGBITS && !strcmp(sn, ".plt"))
			ps.plt = i;
		else if (sh.sh_type == SHT_PROGBITS && !strcmp(sn, ".plt.sec"))
			ps.pltsec = i;
		else if (sh.sh_type == SHT_PROGBITS && !strcmp(sn, ".plt.got"))
			ps.pltgot = i;
		else if ((sh.sh_type == SHT_RELA &&
			  !strcmp(sn, ".rela.dyn")) ||
			 (sh.sh_type == SHT_REL && !strcmp(sn, ".rel.dyn")))
			ps.dyn = i;
		else if (!strcmp(sn, ".gnu_debuglink"))
			link = i;
	}
	if (flags & PTD_SYMTAB_DEBUG_FILE)
		return 0;
	if (eh.e_machine == EM_X86_64) {
		r = add_plt(s, &ps);
		if (r < 0)
			return r;
	}
	if (link) {
		r = read_debuglink(s, link, info);
		if (r < 0)
			return r;
	}
	return read_segments(s, seg, nseg);
}

int ptd_symtab_add_elf(struct ptd_symtab *t, int fd, const char *name,
		       unsigned flags, struct ptd_elf_syminfo *ret_info,
		       struct ptd_diag *diag)
{
	struct ptd_elf_syminfo info;
	struct seg seg[MAX_SEGS];
	size_t nseg = 0, n0, str0;
	struct elfsrc s;
	struct stat st;
	int r;

	if (!t || fd < 0)
		return -EINVAL;
	if (t->sealed)
		return -EINVAL;
	if (!name)
		name = "(ELF file)";
	memset(&info, 0, sizeof(info));
	if (fstat(fd, &st) < 0)
		return ptd_diagf(diag, -errno, "'%s': %s", name,
				 strerror(errno));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return ptd_diagf(diag, -PTD_EFORMAT, "libelf is unusable");
	memset(&s, 0, sizeof(s));
	s.t = t;
	s.name = name;
	s.fsize = (uint64_t)st.st_size;
	s.diag = diag;
	/* ELF_C_READ reads with pread: a file changed under us gives bad
	 * bytes (checked like any), never a fault. */
	s.e = elf_begin(fd, ELF_C_READ, NULL);
	if (!s.e)
		return ptd_diagf(diag, -PTD_EFORMAT, "'%s' is not an ELF file: "
				 "%s", name, elf_errmsg(-1));
	n0 = t->n;
	str0 = t->strbytes;
	r = add_elf(&s, flags, &info, seg, &nseg);
	elf_end(s.e);
	if (r < 0) {
		/* The names stay in their chunks, unreachable until the
		 * table is freed. */
		t->n = n0;
		t->strbytes = str0;
		return r;
	}
	if (!(flags & PTD_SYMTAB_DEBUG_FILE)) {
		memcpy(t->seg, seg, nseg * sizeof(*seg));
		t->nseg = nseg;
		(void)ptd_elf_build_id_fd(fd, info.build_id,
					  sizeof(info.build_id));
	}
	if (ret_info)
		*ret_info = info;
	return 0;
}

/* ---- perf map files ------------------------------------------------ */

/* Hex with an optional 0x, as perf writes and reads these files. */
static int parse_hex(const char *p, size_t len, uint64_t *ret)
{
	if (len > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		p += 2;
		len -= 2;
	}
	return ptd_parse_u64n(p, len, 16, ret);
}

/* Parse one line (without its newline).  Returns 0 and the symbol, or a
 * static string saying why not. */
static const char *perfmap_line(const char *p, size_t len, uint64_t *start,
				uint64_t *size, const char **name,
				size_t *name_len)
{
	const char *sp1, *sp2, *end = p + len;

	if (len > PTD_PERFMAP_MAX_LINE)
		return "line too long";
	if (memchr(p, '\0', len))
		return "NUL byte in the line";
	sp1 = memchr(p, ' ', len);
	if (!sp1)
		return "expected START SIZE NAME";
	sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
	if (!sp2)
		return "expected START SIZE NAME";
	if (parse_hex(p, (size_t)(sp1 - p), start) < 0)
		return "START is not a hex number";
	if (parse_hex(sp1 + 1, (size_t)(sp2 - sp1 - 1), size) < 0)
		return "SIZE is not a hex number";
	if (!*size)
		return "SIZE is 0";
	if (*start + *size < *start)
		return "START + SIZE wraps around";
	*name = sp2 + 1;
	*name_len = (size_t)(end - *name);
	if (*name_len && (*name)[*name_len - 1] == '\r')
		(*name_len)--;
	if (!*name_len)
		return "NAME is empty";
	return NULL;
}

int ptd_symtab_add_perfmap(struct ptd_symtab *t, const char *name,
			   const char *text, size_t len, unsigned *ret_bad,
			   struct ptd_diag *diag)
{
	unsigned bad = 0, lineno = 0;
	size_t pos = 0;

	if (ret_bad)
		*ret_bad = 0;
	if (!t || (!text && len) || t->sealed)
		return -EINVAL;
	if (!name)
		name = "(perf map)";
	if (len > PTD_PERFMAP_MAX_BYTES)
		return ptd_diagf(diag, -PTD_ELIMIT, "'%s': more than %u bytes",
				 name, PTD_PERFMAP_MAX_BYTES);
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t ll = nl ? (size_t)(nl - text - pos) : len - pos;
		const char *why, *nm, *copy;
		uint64_t start = 0, size = 0;
		size_t nlen = 0;
		int r;

		lineno++;
		why = perfmap_line(text + pos, ll, &start, &size, &nm, &nlen);
		pos += ll + 1;
		if (why) {
			/* Blank lines are not symbols, nor errors. */
			if (ll == 0)
				continue;
			if (!bad++)
				(void)ptd_diagf(diag, -PTD_EFORMAT,
						"%s:%u: %s", name, lineno,
						why);
			continue;
		}
		copy = name_copy(t, nm, nlen, NULL);
		if (!copy)
			return ptd_diagf(diag, -PTD_ELIMIT, "%s:%u: more than "
					 "%u bytes of names", name, lineno,
					 PTD_SYMTAB_MAX_STRBYTES);
		r = push(t, start, size, copy, RANK_GLOBAL | RANK_SIZED);
		if (r == -PTD_ELIMIT)
			return ptd_diagf(diag, r, "%s:%u: more than %u "
					 "symbols", name, lineno,
					 PTD_SYMTAB_MAX_SYMS);
		if (r < 0)
			return r;
	}
	if (ret_bad)
		*ret_bad = bad;
	return 0;
}

/* ---- sealed tables -------------------------------------------------- */

static int ent_cmp(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;

	if (x->s.addr != y->s.addr)
		return x->s.addr < y->s.addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank > y->rank ? -1 : 1;
	/* stable between runs: by name */
	return strcmp(x->s.name, y->s.name);
}

void ptd_symtab_seal(struct ptd_symtab *t)
{
	size_t n = 0;

	if (!t || t->sealed)
		return;
	t->sealed = true;
	if (!t->n)
		return;
	qsort(t->v, t->n, sizeof(*t->v), ent_cmp);
	/* In place: the ents become ptd_syms (smaller), first per address. */
	t->sorted = malloc(t->n * sizeof(*t->sorted));
	if (!t->sorted) {
		/* Out of memory: an empty table, never a wrong one. */
		t->n = 0;
		return;
	}
	for (size_t i = 0; i < t->n; i++) {
		if (n && t->sorted[n - 1].addr == t->v[i].s.addr)
			continue;
		t->sorted[n++] = t->v[i].s;
	}
	t->n = n;
	free(t->v);
	t->v = NULL;
	t->cap = 0;
}

size_t ptd_symtab_bytes(const struct ptd_symtab *t)
{
	size_t n;

	if (!t)
		return 0;
	n = sizeof(*t) + t->cap * sizeof(*t->v) +
	    (t->sorted ? t->n * sizeof(*t->sorted) : 0);
	for (const struct chunk *k = t->chunks; k; k = k->next)
		n += sizeof(*k) + k->cap;
	return n;
}

size_t ptd_symtab_count(const struct ptd_symtab *t)
{
	return t && t->sealed ? t->n : 0;
}

const struct ptd_sym *ptd_symtab_at(const struct ptd_symtab *t, size_t i)
{
	return t && t->sealed && i < t->n ? &t->sorted[i] : NULL;
}

/* How far back a lookup looks for a symbol enclosing a smaller one. */
#define ENCLOSING_BACK 8

const struct ptd_sym *ptd_symtab_lookup(const struct ptd_symtab *t,
					uint64_t addr, uint64_t *ret_off)
{
	size_t lo = 0, hi, i;

	if (!t || !t->sealed || !t->n)
		return NULL;
	hi = t->n;
	/* the first symbol above @addr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->sorted[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	i = lo - 1;
	for (size_t k = 0; k < ENCLOSING_BACK; k++, i--) {
		const struct ptd_sym *s = &t->sorted[i];
		uint64_t off = addr - s->addr;

		if (s->size ? off < s->size
			    : (k == 0 && (i + 1 == t->n ||
					  addr < t->sorted[i + 1].addr))) {
			if (ret_off)
				*ret_off = off;
			return s;
		}
		if (!i)
			break;
	}
	return NULL;
}

unsigned ptd_symtab_find(const struct ptd_symtab *t, const char *name,
			 uint64_t *ret_addr)
{
	unsigned found = 0;
	uint64_t first = 0;

	if (!t || !name || t->sealed)
		return 0;
	for (size_t i = 0; i < t->n && found < 2; i++) {
		if (strcmp(t->v[i].s.name, name) != 0)
			continue;
		if (!found)
			first = t->v[i].s.addr;
		found += !found || t->v[i].s.addr != first;
	}
	if (found && ret_addr)
		*ret_addr = first;
	return found;
}

int ptd_symtab_offset_of(const struct ptd_symtab *t, uint64_t vaddr,
			 uint64_t *ret_off)
{
	if (!t)
		return -EINVAL;
	for (size_t i = 0; i < t->nseg; i++) {
		const struct seg *s = &t->seg[i];

		if (vaddr >= s->vaddr && vaddr - s->vaddr < s->size) {
			if (ret_off)
				*ret_off = s->offset + (vaddr - s->vaddr);
			return 0;
		}
	}
	return -ENOENT;
}

int ptd_symtab_vaddr_of(const struct ptd_symtab *t, uint64_t off,
			uint64_t *ret_vaddr)
{
	if (!t)
		return -EINVAL;
	for (size_t i = 0; i < t->nseg; i++) {
		const struct seg *s = &t->seg[i];

		if (off >= s->offset && off - s->offset < s->size) {
			if (ret_vaddr)
				*ret_vaddr = s->vaddr + (off - s->offset);
			return 0;
		}
	}
	return -ENOENT;
}
