/* SPDX-License-Identifier: MIT */
/*
 * Symbols (sym/symtab.h, sym/symbols.h), against independent tools: every
 * function nm lists in a test program and in the system's libc resolves
 * to its name at offset 0 (and its last byte to the same name); every PLT
 * entry objdump names resolves to that name (puts@plt); a stripped
 * library falls back to .dynsym; a debug file made with objcopy
 * --only-keep-debug is found by build-id and by .gnu_debuglink, and a
 * wrong one is not used; perf map lines are read, hostile ones refused
 * with their line numbers; hostile ELF files (a symbol table past the end
 * of the file, a name index outside its strings, bad entry sizes and
 * links) are refused with a message naming the section.  Last, a program
 * traced by the software source and decoded on both paths carries, on
 * every instruction of its own code and of libc, the symbol nm and
 * objdump give for that address, each address resolved once; and the
 * vDSO's instructions are named from its snapshot as nm names them.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/diag.h"
#include "aspace/elf.h"
#include "common/fileio.h"
#include "input/input.h"
#include "record/record.h"
#include "swpt/tracer.h"
#include "sym/symbols.h"
#include "sym/symtab.h"

#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"

static char workdir[] = "/tmp/ptd-test-symtab-XXXXXX";
static const char *progs_dir;

/* ---- helpers ---------------------------------------------------------- */

static void path_in(char *buf, size_t n, const char *name)
{
	(void)snprintf(buf, n, "%s/%s", workdir, name);
}

__attribute__((format(printf, 1, 2))) static int sh(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

/* A symbol as nm or objdump gives it. */
struct osym {
	uint64_t addr, size;
	char name[256];
};

struct oracle {
	struct osym *v;
	size_t n, cap;
	/* PT_LOAD segments, from readelf */
	uint64_t seg_off[16], seg_va[16], seg_sz[16];
	bool seg_x[16];
	size_t nseg;
};

static void oracle_add(struct oracle *o, uint64_t addr, uint64_t size,
		       const char *name)
{
	if (o->n == o->cap) {
		o->cap = o->cap ? 2 * o->cap : 1024;
		o->v = realloc(o->v, o->cap * sizeof(*o->v));
		if (!o->v)
			abort();
	}
	o->v[o->n].addr = addr;
	o->v[o->n].size = size;
	(void)snprintf(o->v[o->n].name, sizeof(o->v[o->n].name), "%s", name);
	o->n++;
}

static int osym_cmp(const void *a, const void *b)
{
	const struct osym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Text symbols from `nm -nS` (@dynamic: -D), names without their
 * version; PLT entries from objdump's headings; segments from readelf. */
static bool oracle_load(struct oracle *o, const char *path, bool dynamic)
{
	char cmd[PATH_MAX + 128], line[1024];
	char sect[64] = "";
	FILE *f;

	memset(o, 0, sizeof(*o));
	(void)snprintf(cmd, sizeof(cmd), "nm -nS --defined-only %s '%s'",
		       dynamic ? "-D" : "", path);
	f = popen(cmd, "r");
	REQUIRE_OR_FALSE(f);
	while (fgets(line, sizeof(line), f)) {
		char a[32], b[512], c[512], d[512];
		uint64_t addr, size = 0;
		char type, *at;
		int k = sscanf(line, "%31s %511s %511s %511s", a, b, c, d);

		if (k == 4) {
			addr = strtoull(a, NULL, 16);
			size = strtoull(b, NULL, 16);
			type = c[0];
		} else if (k == 3) {
			addr = strtoull(a, NULL, 16);
			type = b[0];
			memcpy(d, c, sizeof(d));
		} else {
			continue;
		}
		if (type != 'T' && type != 't' && type != 'W' && type != 'i')
			continue;
		if (!addr)
			continue;
		at = strchr(d, '@');
		if (at)
			*at = '\0';
		oracle_add(o, addr, size, d);
	}
	REQUIRE_OR_FALSE(pclose(f) == 0);
	(void)snprintf(cmd, sizeof(cmd),
		       "objdump -d -j .plt -j .plt.sec -j .plt.got '%s'", path);
	f = popen(cmd, "r");
	REQUIRE_OR_FALSE(f);
	while (fgets(line, sizeof(line), f)) {
		char name[512];
		unsigned long long addr;
		size_t nl;

		if (sscanf(line, "Disassembly of section %63[^:]:", sect) == 1)
			continue;
		/* "puts@plt", not "puts@plt-0x10" (the first entry) */
		if (sscanf(line, "%llx <%511[^>]>:", &addr, name) == 2 &&
		    (nl = strlen(name)) > 4 && !strcmp(name + nl - 4, "@plt"))
			oracle_add(o, addr, strcmp(sect, ".plt.got") ? 16 : 8,
				   name);
	}
	(void)pclose(f);
	(void)snprintf(cmd, sizeof(cmd), "readelf -lW '%s'", path);
	f = popen(cmd, "r");
	REQUIRE_OR_FALSE(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long off, va, pa, fsz, msz;

		if (sscanf(line, " LOAD 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx",
			   &off, &va, &pa, &fsz, &msz) == 5 && o->nseg < 16) {
			o->seg_off[o->nseg] = off;
			o->seg_va[o->nseg] = va;
			o->seg_sz[o->nseg] = fsz;
			/* flags "R E": the E after the sizes */
			o->seg_x[o->nseg] = strstr(line + 50, " E ") != NULL;
			o->nseg++;
		}
	}
	(void)pclose(f);
	/* symbols of code only: nm's W and t say nothing of the section */
	{
		size_t k = 0;

		for (size_t i = 0; i < o->n; i++) {
			bool code = false;

			for (size_t j = 0; j < o->nseg; j++)
				code |= o->seg_x[j] &&
					o->v[i].addr - o->seg_va[j] <
						o->seg_sz[j];
			if (code)
				o->v[k++] = o->v[i];
		}
		o->n = k;
	}
	qsort(o->v, o->n, sizeof(*o->v), osym_cmp);
	return o->n > 0 && o->nseg > 0;
}

static void oracle_fini(struct oracle *o)
{
	free(o->v);
	memset(o, 0, sizeof(*o));
}

/* Is @name (at offset @off) a right answer for @addr: a symbol that covers
 * it by its size, or, when none does, the nearest one below it without a
 * size?  @name NULL: right if nothing covers @addr. */
static bool oracle_accepts(const struct oracle *o, uint64_t addr,
			   const char *name, uint64_t off)
{
	bool covered = false;
	const struct osym *below = NULL;

	for (size_t i = 0; i < o->n && o->v[i].addr <= addr; i++) {
		const struct osym *s = &o->v[i];

		below = s;
		if (s->size && addr - s->addr < s->size) {
			covered = true;
			if (name && !strcmp(name, s->name) &&
			    off == addr - s->addr)
				return true;
		}
	}
	if (covered)
		return false;
	/* nearest below without a size: covers up to the next symbol */
	if (below && !below->size) {
		for (size_t i = 0; i < o->n; i++)
			if (o->v[i].addr == below->addr && name &&
			    !strcmp(name, o->v[i].name) &&
			    off == addr - below->addr)
				return true;
		return false;
	}
	return name == NULL;
}

static bool oracle_vaddr(const struct oracle *o, uint64_t off, uint64_t *va)
{
	for (size_t i = 0; i < o->nseg; i++)
		if (off >= o->seg_off[i] && off - o->seg_off[i] < o->seg_sz[i]) {
			*va = o->seg_va[i] + off - o->seg_off[i];
			return true;
		}
	return false;
}

static struct ptd_symtab *load_table(const char *path, int want,
				     struct ptd_elf_syminfo *info,
				     struct ptd_diag *d)
{
	struct ptd_symtab *t = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || ptd_symtab_new(&t) < 0) {
		if (fd >= 0)
			(void)close(fd);
		return NULL;
	}
	CHECK_EQ_INT(ptd_symtab_add_elf(t, fd, path, 0, info, d), want);
	(void)close(fd);
	ptd_symtab_seal(t);
	return t;
}

/* Every symbol of @o resolves in @t to a name @o gives at that address,
 * at offset 0, and its last byte too.  Returns how many were checked. */
static size_t check_all(const struct ptd_symtab *t, const struct oracle *o)
{
	size_t checked = 0;

	for (size_t i = 0; i < o->n; i++) {
		const struct osym *s = &o->v[i];
		uint64_t off = 99;
		const struct ptd_sym *got = ptd_symtab_lookup(t, s->addr, &off);

		if (!got || !oracle_accepts(o, s->addr, got->name, off)) {
			CHECK_FAIL_("0x%" PRIx64 " (%s): got %s+0x%" PRIx64,
				    s->addr, s->name,
				    got ? got->name : "nothing", off);
			continue;
		}
		CHECK_EQ_U64(off, 0);
		if (s->size > 1) {
			got = ptd_symtab_lookup(t, s->addr + s->size - 1,
						&off);
			if (!got || !oracle_accepts(o, s->addr + s->size - 1,
						    got->name, off))
				CHECK_FAIL_("last byte of %s: got %s",
					    s->name,
					    got ? got->name : "nothing");
		}
		checked++;
	}
	return checked;
}

static const struct ptd_sym *find_name(const struct ptd_symtab *t,
				       const char *name)
{
	for (size_t i = 0; i < ptd_symtab_count(t); i++)
		if (!strcmp(ptd_symtab_at(t, i)->name, name))
			return ptd_symtab_at(t, i);
	return NULL;
}

/* ---- tests ------------------------------------------------------------- */

static void test_program_vs_nm(void)
{
	char prog[PATH_MAX];
	struct ptd_elf_syminfo info;
	struct ptd_diag d = { "" };
	struct ptd_symtab *t;
	struct oracle o;
	const struct ptd_sym *s;
	uint64_t off;

	(void)snprintf(prog, sizeof(prog), "%s/prog-symbols", progs_dir);
	REQUIRE(oracle_load(&o, prog, false));
	t = load_table(prog, 0, &info, &d);
	REQUIRE(t);
	CHECK(info.has_symtab);
	CHECK(strlen(info.build_id) == 40);
	CHECK(check_all(t, &o) >= 5);
	/* the functions the source names, and puts through the PLT */
	CHECK(find_name(t, "main"));
	CHECK(find_name(t, "sym_leaf"));
	CHECK(find_name(t, "sym_middle"));
	s = find_name(t, "puts@plt");
	CHECK(s);
	if (s) {
		CHECK(ptd_symtab_lookup(t, s->addr + 3, &off) == s);
		CHECK_EQ_U64(off, 3);
	}
	/* below every function: nothing */
	CHECK(ptd_symtab_lookup(t, 0x10, &off) == NULL);
	ptd_symtab_free(t);
	oracle_fini(&o);
}

/* By name, before the seal: one function, its file offset (the segment
 * mapping, inverse of ptd_symtab_vaddr_of), and a name two functions bear
 * refused as ambiguous; after the seal nothing is found by name. */
static void test_find_by_name(void)
{
	char prog[PATH_MAX];
	struct ptd_diag d = { "" };
	struct ptd_symtab *t = NULL;
	struct oracle o;
	uint64_t addr = 0, off = 0, back = 0, want = 0;
	unsigned twins = 0;
	int fd;

	(void)snprintf(prog, sizeof(prog), "%s/prog-symbols", progs_dir);
	REQUIRE(oracle_load(&o, prog, false));
	for (size_t i = 0; i < o.n; i++) {
		if (!strcmp(o.v[i].name, "sym_leaf"))
			want = o.v[i].addr;
		twins += !strcmp(o.v[i].name, "sym_twin");
	}
	REQUIRE(want != 0);
	CHECK_EQ_INT(twins, 2);
	fd = open(prog, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0 && ptd_symtab_new(&t) == 0);
	CHECK_EQ_INT(ptd_symtab_add_elf(t, fd, prog, 0, NULL, &d), 0);
	(void)close(fd);
	CHECK_EQ_INT(ptd_symtab_find(t, "sym_leaf", &addr), 1);
	CHECK_EQ_U64(addr, want);
	CHECK_EQ_INT(ptd_symtab_offset_of(t, addr, &off), 0);
	CHECK_EQ_INT(ptd_symtab_vaddr_of(t, off, &back), 0);
	CHECK_EQ_U64(back, addr);
	CHECK_EQ_INT(ptd_symtab_find(t, "sym_twin", NULL), 2);
	CHECK_EQ_INT(ptd_symtab_find(t, "no_such_function", NULL), 0);
	CHECK_EQ_INT(ptd_symtab_offset_of(t, 0x7fffffff0000, &off), -ENOENT);
	ptd_symtab_seal(t);
	CHECK_EQ_INT(ptd_symtab_find(t, "sym_leaf", NULL), 0);
	ptd_symtab_free(t);
	oracle_fini(&o);
}

static void test_libc_vs_nm(void)
{
	struct ptd_elf_syminfo info;
	struct ptd_diag d = { "" };
	struct ptd_symtab *t;
	struct oracle o;

	if (access(LIBC, R_OK) != 0) {
		fprintf(stderr, "skip: no %s\n", LIBC);
		return;
	}
	REQUIRE(oracle_load(&o, LIBC, true));
	t = load_table(LIBC, 0, &info, &d);
	REQUIRE(t);
	CHECK(!info.has_symtab);	/* Debian's libc is stripped */
	CHECK(check_all(t, &o) > 1000);
	/* (puts is there as _IO_puts, its global alias: check_all) */
	CHECK(find_name(t, "__tunable_get_val@plt"));
	ptd_symtab_free(t);
	oracle_fini(&o);
}

/* A stripped copy keeps .dynsym: exported functions resolve, a static
 * one does not. */
static void test_stripped_dynsym(void)
{
	char lib[PATH_MAX], stripped[PATH_MAX];
	struct ptd_elf_syminfo info;
	struct ptd_diag d = { "" };
	struct ptd_symtab *t;
	const struct ptd_sym *s;
	struct oracle o;

	(void)snprintf(lib, sizeof(lib), "%s/libptdtarget.so", progs_dir);
	path_in(stripped, sizeof(stripped), "libstripped.so");
	REQUIRE(sh("objcopy --strip-all '%s' '%s'", lib, stripped) == 0);
	REQUIRE(oracle_load(&o, stripped, true));
	t = load_table(stripped, 0, &info, &d);
	REQUIRE(t);
	CHECK(!info.has_symtab);
	CHECK(check_all(t, &o) >= 1);
	s = find_name(t, "ptd_target_sum");
	CHECK(s);
	oracle_fini(&o);
	ptd_symtab_free(t);
}

/* A module covering all of @path's executable code at its vaddrs. */
static struct ptd_module module_of(const char *path)
{
	struct ptd_module m;

	memset(&m, 0, sizeof(m));
	m.isid = 1;
	m.path = m.name = path;
	m.offset = 0;
	m.vaddr = 0;
	m.size = 1ull << 40;
	return m;
}

static void test_debug_file(void)
{
	char prog[PATH_MAX], stripped[PATH_MAX], dbg[PATH_MAX];
	char root[512], bid_dir[1024], bid_file[2048];
	char linked[PATH_MAX], other[PATH_MAX];
	struct ptd_elf_syminfo info;
	struct ptd_diag d = { "" };
	struct ptd_symtab *t;
	struct ptd_symbols *syms;
	struct ptd_symbols_opts so;
	struct ptd_module m;
	const struct ptd_sym *leaf;
	const char *name;
	uint64_t off = 0, leaf_addr;

	(void)snprintf(prog, sizeof(prog), "%s/prog-symbols", progs_dir);
	t = load_table(prog, 0, &info, &d);
	REQUIRE(t);
	leaf = find_name(t, "sym_leaf");
	REQUIRE(leaf);
	leaf_addr = leaf->addr;
	ptd_symtab_free(t);

	path_in(stripped, sizeof(stripped), "stripped");
	path_in(dbg, sizeof(dbg), "prog.debug");
	path_in(root, sizeof(root), "debugroot");
	REQUIRE(sh("objcopy --only-keep-debug '%s' '%s'", prog, dbg) == 0);
	REQUIRE(sh("objcopy --strip-all '%s' '%s'", prog, stripped) == 0);
	t = load_table(stripped, 0, &info, &d);
	REQUIRE(t);
	CHECK(!info.has_symtab);
	/* without its debug file the static function is unknown */
	CHECK(find_name(t, "sym_leaf") == NULL);
	ptd_symtab_free(t);
	REQUIRE(strlen(info.build_id) == 40);
	(void)snprintf(bid_dir, sizeof(bid_dir), "%s/.build-id/%.2s", root,
		       info.build_id);
	(void)snprintf(bid_file, sizeof(bid_file), "%s/%s.debug", bid_dir,
		       info.build_id + 2);
	REQUIRE(sh("mkdir -p '%s'", bid_dir) == 0);

	/* a file at the build-id path that is another file's: not used */
	(void)snprintf(other, sizeof(other), "%s/libptdtarget.so", progs_dir);
	REQUIRE(sh("objcopy --only-keep-debug '%s' '%s'", other, bid_file) ==
		0);
	memset(&so, 0, sizeof(so));
	so.debug_root = root;
	REQUIRE(ptd_symbols_new(&so, &syms) == 0);
	m = module_of(stripped);
	name = ptd_symbols_resolve(syms, &m, 1, leaf_addr, &off);
	CHECK(!name || strcmp(name, "sym_leaf") != 0);
	CHECK_EQ_STR(ptd_symbols_debug_file(syms, stripped), "");
	ptd_symbols_free(syms);

	/* the right one: found by build-id */
	REQUIRE(sh("cp '%s' '%s'", dbg, bid_file) == 0);
	REQUIRE(ptd_symbols_new(&so, &syms) == 0);
	name = ptd_symbols_resolve(syms, &m, 1, leaf_addr + 2, &off);
	CHECK_EQ_STR(name, "sym_leaf");
	CHECK_EQ_U64(off, 2);
	CHECK_EQ_STR(ptd_symbols_debug_file(syms, stripped), bid_file);
	CHECK(ptd_symbols_failure(syms, 0) == NULL);
	ptd_symbols_free(syms);
	REQUIRE(unlink(bid_file) == 0);

	/* by .gnu_debuglink, in the file's .debug/ directory */
	path_in(linked, sizeof(linked), "linked");
	REQUIRE(sh("cd '%s' && objcopy --add-gnu-debuglink=prog.debug "
		   "stripped linked && mkdir -p .debug && mv prog.debug .debug/",
		   workdir) == 0);
	REQUIRE(ptd_symbols_new(&so, &syms) == 0);
	m = module_of(linked);
	name = ptd_symbols_resolve(syms, &m, 1, leaf_addr, &off);
	CHECK_EQ_STR(name, "sym_leaf");
	CHECK_EQ_U64(off, 0);
	ptd_symbols_free(syms);

	/* a debug file whose CRC is not the link's: not used */
	REQUIRE(sh("cd '%s' && printf x >> .debug/prog.debug", workdir) == 0);
	REQUIRE(ptd_symbols_new(&so, &syms) == 0);
	name = ptd_symbols_resolve(syms, &m, 1, leaf_addr, &off);
	CHECK(!name || strcmp(name, "sym_leaf") != 0);
	CHECK_EQ_STR(ptd_symbols_debug_file(syms, linked), "");
	ptd_symbols_free(syms);
}

static void test_perfmap(void)
{
	static const char text[] =
		"1000 10 jit_a\n"			/* 1 */
		"0x2000 0x20 jit b with spaces\n"	/* 2 */
		"zz 10 bad_start\n"			/* 3 */
		"3000 0 zero_size\n"			/* 4 */
		"ffffffffffffffff 2 wraps\n"		/* 5 */
		"4000 10\n"				/* 6 */
		"\n"					/* 7: blank */
		"5000 10 nul\0here\n"			/* 8 */
		"6000 g0 bad_size\n"			/* 9 */
		"7000 8 last_no_newline";		/* 10 */
	char big[PTD_PERFMAP_MAX_LINE + 64], path[PATH_MAX];
	struct ptd_diag d = { "" };
	struct ptd_symtab *t;
	struct ptd_symbols *syms;
	struct ptd_symbols_opts so;
	const struct ptd_sym *s;
	unsigned bad = 0;
	uint64_t off = 0;
	const char *name;

	REQUIRE(ptd_symtab_new(&t) == 0);
	CHECK_EQ_INT(ptd_symtab_add_perfmap(t, "perf-1.map", text,
					    sizeof(text) - 1, &bad, &d),
		     0);
	CHECK_EQ_INT(bad, 6);
	CHECK_EQ_STR(d.msg, "perf-1.map:3: START is not a hex number");
	ptd_symtab_seal(t);
	CHECK_EQ_INT(ptd_symtab_count(t), 3);
	s = ptd_symtab_lookup(t, 0x1005, &off);
	CHECK(s && !strcmp(s->name, "jit_a"));
	CHECK_EQ_U64(off, 5);
	s = ptd_symtab_lookup(t, 0x201f, &off);
	CHECK(s && !strcmp(s->name, "jit b with spaces"));
	CHECK(ptd_symtab_lookup(t, 0x1010, &off) == NULL);
	CHECK(ptd_symtab_lookup(t, 0x2020, &off) == NULL);
	s = ptd_symtab_lookup(t, 0x7007, &off);
	CHECK(s && !strcmp(s->name, "last_no_newline"));
	/* sealed: nothing more */
	CHECK_EQ_INT(ptd_symtab_add_perfmap(t, "x", "1 1 a\n", 6, NULL, &d),
		     -EINVAL);
	ptd_symtab_free(t);

	/* each refusal names its line */
	{
		static const struct {
			const char *text, *msg;
		} cases[] = {
			{ "1 1 ok\n4000 0 z\n", "m:2: SIZE is 0" },
			{ "1 1 ok\n\nffffffffffffffff 2 w\n",
			  "m:3: START + SIZE wraps around" },
			{ "4000 10\n", "m:1: expected START SIZE NAME" },
			{ "4000 10 \n", "m:1: NAME is empty" },
			{ "4000 1x0 n\n", "m:1: SIZE is not a hex number" },
		};

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			REQUIRE(ptd_symtab_new(&t) == 0);
			d.msg[0] = '\0';
			CHECK_EQ_INT(ptd_symtab_add_perfmap(
					     t, "m", cases[i].text,
					     strlen(cases[i].text), &bad, &d),
				     0);
			CHECK_EQ_INT(bad, 1);
			CHECK_EQ_STR(d.msg, cases[i].msg);
			ptd_symtab_free(t);
		}
	}
	/* an overlong line */
	memset(big, 'a', sizeof(big));
	memcpy(big, "1 1 ", 4);
	REQUIRE(ptd_symtab_new(&t) == 0);
	CHECK_EQ_INT(ptd_symtab_add_perfmap(t, "m", big, sizeof(big), &bad,
					    &d), 0);
	CHECK_EQ_INT(bad, 1);
	CHECK_EQ_STR(d.msg, "m:1: line too long");
	ptd_symtab_free(t);

	/* through ptd_symbols: code that is no file, by its process's map */
	path_in(path, sizeof(path), "perf-4242.map");
	REQUIRE(ptd_file_write_atomic(path, text, sizeof(text) - 1) == 0);
	memset(&so, 0, sizeof(so));
	so.perfmap_dir = workdir;
	REQUIRE(ptd_symbols_new(&so, &syms) == 0);
	name = ptd_symbols_resolve(syms, NULL, 4242, 0x100f, &off);
	CHECK_EQ_STR(name, "jit_a");
	CHECK_EQ_U64(off, 0xf);
	/* another process has no map */
	CHECK(ptd_symbols_resolve(syms, NULL, 4243, 0x100f, &off) == NULL);
	/* the bad lines are reported, naming the file and line */
	CHECK_CONTAINS(ptd_symbols_failure(syms, 0), "perf-4242.map:3:");
	ptd_symbols_free(syms);

	/* a map someone else owns is not believed */
	if (geteuid() == 0) {
		REQUIRE(chown(path, 65534, 65534) == 0);
		REQUIRE(ptd_symbols_new(&so, &syms) == 0);
		CHECK(ptd_symbols_resolve(syms, NULL, 4242, 0x100f, &off) ==
		      NULL);
		CHECK_CONTAINS(ptd_symbols_failure(syms, 0),
			       "is owned by uid 65534, not by uid 0 or root");
		CHECK_EQ_INT(ptd_symbols_failure_code(syms, 0), -EPERM);
		CHECK_EQ_U64(ptd_symbols_nfailures(syms), 1);
		ptd_symbols_free(syms);
		/* ...unless it is the uid the caller names (a daemon: the
		 * traced process's) */
		so.perfmap_uid_set = true;
		so.perfmap_uid = 65534;
		REQUIRE(ptd_symbols_new(&so, &syms) == 0);
		CHECK_EQ_STR(ptd_symbols_resolve(syms, NULL, 4242, 0x100f,
						 &off), "jit_a");
		ptd_symbols_free(syms);
	} else {
		fprintf(stderr, "  (not root: a map of another owner is not "
			"tried)\n");
	}
}

/* The caller's hooks: every file is opened through opts.open; each table
 * kept is charged through opts.charge, and one refused is not kept (its
 * code names nothing, a failure -PTD_ELIMIT says why). */
struct hooks {
	unsigned opens;
	int open_err;		/* 0: open it */
	uint64_t charged;
	uint64_t budget;
};

static int hook_open(void *ctx, const char *path, bool snapshot,
		     struct stat *ret_st, struct ptd_diag *diag)
{
	struct hooks *h = ctx;

	h->opens++;
	CHECK(!snapshot);
	if (h->open_err)
		return ptd_diagf(diag, h->open_err, "'%s': denied", path);
	return ptd_file_open_regular(AT_FDCWD, path, 0, ret_st, diag);
}

static int hook_charge(void *ctx, uint64_t bytes)
{
	struct hooks *h = ctx;

	if (h->charged + bytes > h->budget)
		return -PTD_ELIMIT;
	h->charged += bytes;
	return 0;
}

static void test_symbols_hooks(void)
{
	static const char text[] = "1000 10 jit_a\n2000 8 jit_b\n";
	struct ptd_symbols_opts so;
	struct ptd_symbols_stats st;
	struct ptd_symbols *syms;
	struct hooks h;
	char path[600];
	uint64_t off;

	path_in(path, sizeof(path), "perf-5151.map");
	REQUIRE(ptd_file_write_atomic(path, text, sizeof(text) - 1) == 0);
	memset(&so, 0, sizeof(so));
	so.perfmap_dir = workdir;
	so.open = hook_open;
	so.charge = hook_charge;
	so.open_ctx = so.charge_ctx = &h;

	/* charged: what is kept, as the stats say */
	memset(&h, 0, sizeof(h));
	h.budget = 1ull << 30;
	REQUIRE(ptd_symbols_new(&so, &syms) == 0);
	CHECK_EQ_STR(ptd_symbols_resolve(syms, NULL, 5151, 0x2001, &off),
		     "jit_b");
	CHECK_EQ_INT(h.opens, 1);
	ptd_symbols_get_stats(syms, &st);
	CHECK(h.charged > 0);
	CHECK_EQ_U64(st.bytes, h.charged);
	CHECK_EQ_U64(st.failures, 0);
	ptd_symbols_free(syms);

	/* refused: nothing kept, the failure says so */
	memset(&h, 0, sizeof(h));
	h.budget = 100;
	REQUIRE(ptd_symbols_new(&so, &syms) == 0);
	CHECK(ptd_symbols_resolve(syms, NULL, 5151, 0x2001, &off) == NULL);
	CHECK(ptd_symbols_resolve(syms, NULL, 5151, 0x1001, &off) == NULL);
	CHECK_EQ_U64(h.charged, 0);
	CHECK_EQ_U64(ptd_symbols_nfailures(syms), 1);	/* tried once */
	CHECK_EQ_INT(ptd_symbols_failure_code(syms, 0), -PTD_ELIMIT);
	CHECK_CONTAINS(ptd_symbols_failure(syms, 0),
		       "perf-5151.map': its symbols (");
	CHECK_CONTAINS(ptd_symbols_failure(syms, 0),
		       "bytes) were refused: over the memory limit");
	ptd_symbols_get_stats(syms, &st);
	CHECK_EQ_U64(st.bytes, 0);
	ptd_symbols_free(syms);

	/* the opener refuses: its error and message */
	memset(&h, 0, sizeof(h));
	h.budget = 1ull << 30;
	h.open_err = -EACCES;
	REQUIRE(ptd_symbols_new(&so, &syms) == 0);
	CHECK(ptd_symbols_resolve(syms, NULL, 5151, 0x2001, &off) == NULL);
	CHECK_EQ_INT(ptd_symbols_failure_code(syms, 0), -EACCES);
	CHECK_CONTAINS(ptd_symbols_failure(syms, 0), "perf-5151.map': denied");
	ptd_symbols_free(syms);
}

/* ---- hostile ELF files -------------------------------------------------- */

struct elfbuf {
	uint8_t *b;
	size_t len;
	Elf64_Shdr *sh;		/* into b */
	size_t shnum;
	size_t symtab;		/* index of .symtab */
};

static bool elf_read(struct elfbuf *e, const char *path)
{
	char *data = NULL;
	const Elf64_Ehdr *eh;

	memset(e, 0, sizeof(*e));
	REQUIRE_OR_FALSE(ptd_file_read_all(path, 64u << 20, &data, &e->len) ==
			 0);
	e->b = (uint8_t *)data;
	eh = (const Elf64_Ehdr *)e->b;
	REQUIRE_OR_FALSE(e->len > sizeof(*eh) && eh->e_shoff < e->len);
	e->sh = (Elf64_Shdr *)(e->b + eh->e_shoff);
	e->shnum = eh->e_shnum;
	for (size_t i = 0; i < e->shnum; i++)
		if (e->sh[i].sh_type == SHT_SYMTAB)
			e->symtab = i;
	REQUIRE_OR_FALSE(e->symtab != 0);
	return true;
}

/* Write @len bytes of @e as @name, load it: the result, *@d the message,
 * and the table must be empty when refused. */
static int try_elf(const struct elfbuf *e, size_t len, const char *name,
		   struct ptd_diag *d)
{
	char path[PATH_MAX];
	struct ptd_symtab *t;
	int fd, r;

	path_in(path, sizeof(path), name);
	REQUIRE_OR_FALSE(ptd_file_write_atomic(path, e->b, len) == 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	REQUIRE_OR_FALSE(fd >= 0);
	REQUIRE_OR_FALSE(ptd_symtab_new(&t) == 0);
	d->msg[0] = '\0';
	r = ptd_symtab_add_elf(t, fd, path, 0, NULL, d);
	ptd_symtab_seal(t);
	if (r < 0)
		CHECK_EQ_INT(ptd_symtab_count(t), 0);
	ptd_symtab_free(t);
	(void)close(fd);
	return r;
}

static void test_hostile_elf(void)
{
	char prog[PATH_MAX], want[64];
	struct ptd_diag d = { "" };
	struct elfbuf e;
	Elf64_Shdr *st;
	Elf64_Sym *sym;
	uint64_t save;

	(void)snprintf(prog, sizeof(prog), "%s/prog-symbols", progs_dir);
	REQUIRE(elf_read(&e, prog));
	st = &e.sh[e.symtab];
	(void)snprintf(want, sizeof(want), "section %zu", e.symtab);

	CHECK_EQ_INT(try_elf(&e, e.len, "good", &d), 0);

	/* the symbol table runs past the end of the file */
	save = st->sh_size;
	st->sh_size = e.len;
	CHECK_EQ_INT(try_elf(&e, e.len, "symtab-past-end", &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, want);
	CHECK_CONTAINS(d.msg, "lies outside the file");
	st->sh_size = save;

	/* a truncated file: the section headers (after the table) go */
	CHECK_EQ_INT(try_elf(&e, st->sh_offset + st->sh_size / 2,
			     "truncated", &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "section headers (offset 0x");
	CHECK_CONTAINS(d.msg, "outside the file");

	/* a name index outside the string table */
	sym = (Elf64_Sym *)(e.b + st->sh_offset) + 5;
	save = sym->st_name;
	sym->st_name = 0x7fffffff;
	CHECK_EQ_INT(try_elf(&e, e.len, "bad-name", &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, want);
	CHECK_CONTAINS(d.msg, "symbol 5: name index 0x7fffffff outside");
	sym->st_name = (Elf64_Word)save;

	/* a name that runs off the end of its strings */
	{
		Elf64_Shdr *str = &e.sh[st->sh_link];
		uint8_t *sb = e.b + str->sh_offset;
		uint8_t last = sb[str->sh_size - 1];

		sb[str->sh_size - 1] = 'x';
		save = sym->st_name;
		sym->st_name = (Elf64_Word)(str->sh_size - 1);
		CHECK_EQ_INT(try_elf(&e, e.len, "unterminated", &d),
			     -PTD_EFORMAT);
		CHECK_CONTAINS(d.msg, "runs past the end");
		sym->st_name = (Elf64_Word)save;
		sb[str->sh_size - 1] = last;
	}

	/* a bad entry size */
	save = st->sh_entsize;
	st->sh_entsize = 7;
	CHECK_EQ_INT(try_elf(&e, e.len, "entsize", &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "entry size 7");
	st->sh_entsize = save;

	/* a link to a section that is no string table, and past the end */
	save = st->sh_link;
	st->sh_link = (Elf64_Word)e.symtab;
	CHECK_EQ_INT(try_elf(&e, e.len, "link-self", &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "not a string table");
	st->sh_link = 60000;
	CHECK_EQ_INT(try_elf(&e, e.len, "link-far", &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "not a string table");
	st->sh_link = (Elf64_Word)save;

	/* not an ELF file at all */
	memcpy(e.b, "JUNK", 4);
	CHECK_EQ_INT(try_elf(&e, e.len, "junk", &d), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "not an ELF file");
	free(e.b);
}

/* ---- a decoded trace ------------------------------------------------------ */

struct dec_check {
	const char *prog;
	struct oracle prog_o, libc_o;
	size_t n_prog, n_libc, n_other, n_with_sym, bad;
	size_t leaf, plt_puts;
	uint64_t *ips;		/* every insn's ip, to count distinct ones */
	size_t nips, ips_cap;
};

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static size_t distinct_ips(struct dec_check *c)
{
	size_t n = 0;

	qsort(c->ips, c->nips, sizeof(*c->ips), u64_cmp);
	for (size_t i = 0; i < c->nips; i++)
		n += !i || c->ips[i] != c->ips[i - 1];
	return n;
}

static int check_record(void *ctx, const struct ptd_record *r)
{
	struct dec_check *c = ctx;
	const struct ptd_rec_insn *in = &r->u.insn;
	const struct oracle *o;
	uint64_t va;

	if (r->type != PTD_REC_INSN)
		return 0;
	if (c->nips == c->ips_cap) {
		c->ips_cap = c->ips_cap ? 2 * c->ips_cap : 4096;
		c->ips = realloc(c->ips, c->ips_cap * sizeof(*c->ips));
		if (!c->ips)
			abort();
	}
	c->ips[c->nips++] = in->ip;
	if (in->sym)
		c->n_with_sym++;
	if (!strcmp(in->module, c->prog)) {
		o = &c->prog_o;
		c->n_prog++;
	} else if (!strcmp(in->module, LIBC)) {
		o = &c->libc_o;
		c->n_libc++;
	} else {
		c->n_other++;
		return 0;
	}
	if (in->sym && !strcmp(in->sym, "sym_leaf"))
		c->leaf++;
	if (in->sym && !strcmp(in->sym, "puts@plt"))
		c->plt_puts++;
	if (!oracle_vaddr(o, in->modoff, &va) ||
	    !oracle_accepts(o, va, in->sym, in->symoff)) {
		if (c->bad++ < 5)
			CHECK_FAIL_("%s+0x%" PRIx64 ": got %s+0x%" PRIx64,
				    in->module, in->modoff,
				    in->sym ? in->sym : "nothing", in->symoff);
	}
	return 0;
}

static int sink_record(void *ctx, const struct ptd_record *r)
{
	return check_record(ctx, r);
}

static void test_decoded_trace(void)
{
	char dir[PATH_MAX], prog[PATH_MAX], root[PATH_MAX];
	char *argv[2];
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag d = { "" };
	struct ptd_input_opts o;
	struct ptd_input_sink sink;
	struct ptd_symbols_opts sop;
	struct dec_check c;
	size_t terr = 0;

	if (access(LIBC, R_OK) != 0) {
		fprintf(stderr, "  skip: no %s to compare with\n", LIBC);
		return;
	}
	(void)snprintf(prog, sizeof(prog), "%s/prog-symbols", progs_dir);
	path_in(dir, sizeof(dir), "cap");
	/* no debug files: libc's symbols are its .dynsym and PLT, which
	 * nm -D and objdump see as well */
	path_in(root, sizeof(root), "nodebug");
	REQUIRE(mkdir(root, 0700) == 0);
	argv[0] = prog;
	argv[1] = NULL;
	memset(&so, 0, sizeof(so));
	so.outdir = dir;
	so.quiet_target = true;
	REQUIRE(ptd_swpt_run(argv, &so, &res, &d) == 0);

	memset(&c, 0, sizeof(c));
	c.prog = prog;
	REQUIRE(oracle_load(&c.prog_o, prog, false));
	REQUIRE(oracle_load(&c.libc_o, LIBC, true));
	memset(&sop, 0, sizeof(sop));
	sop.debug_root = root;
	for (int path = 0; path < 2; path++) {
		struct dec_check k = c;

		memset(&o, 0, sizeof(o));
		o.decode.path = path ? PTD_PATH_INSN : PTD_PATH_BLOCK;
		o.decode.want = PTD_REC_BIT(PTD_REC_INSN);
		REQUIRE(ptd_symbols_new(&sop, &o.decode.symbols) == 0);
		memset(&sink, 0, sizeof(sink));
		sink.record = sink_record;
		sink.ctx = &k;
		CHECK_EQ_INT(ptd_input_decode(dir, &o, &sink, &terr, &d), 0);
		CHECK_EQ_U64(terr, 0);
		fprintf(stderr, "  %s path: %zu insns of the program, %zu of "
			"libc checked, %zu elsewhere; %zu with a symbol\n",
			path ? "insn" : "block", k.n_prog, k.n_libc,
			k.n_other, k.n_with_sym);
		CHECK_EQ_U64(k.bad, 0);
		CHECK(k.n_prog > 50);
		CHECK(k.n_libc > 1000);
		/* sym_leaf runs 5 times, 2 instructions or more each */
		CHECK(k.leaf >= 10);
		CHECK(k.plt_puts >= 1);
		/* resolved once per cached instruction, not per execution:
		 * (a handful more for bytes no cache entry holds) */
		{
			struct ptd_symbols_stats st;
			size_t distinct = distinct_ips(&k);

			ptd_symbols_get_stats(o.decode.symbols, &st);
			fprintf(stderr, "  %zu instructions, %zu distinct, %"
				PRIu64 " resolved, %" PRIu64 " files\n",
				k.nips, distinct, st.resolves, st.files);
			CHECK(st.resolves >= distinct);
			CHECK(st.resolves <= distinct + 64);
			CHECK(st.resolves * 4 < k.nips);
		}
		free(k.ips);
		ptd_symbols_free(o.decode.symbols);
	}
	oracle_fini(&c.prog_o);
	oracle_fini(&c.libc_o);
}

/* The vDSO's code is named from its snapshot: a traced prog-vdso's
 * instructions in [vdso] carry the symbol nm -D gives for them in this
 * process's own vDSO (the kernel maps the same image into every
 * process), and none where it gives none: some vDSOs have code outside
 * every symbol (kernel 6.18's: 190 of 525 instructions of prog-vdso's
 * calls). */
struct vdso_check {
	struct oracle o;
	size_t n, named, nameable, bad;
};

static int vdso_record(void *ctx, const struct ptd_record *r)
{
	struct vdso_check *c = ctx;
	const struct ptd_rec_insn *in = &r->u.insn;
	uint64_t va;

	if (r->type != PTD_REC_INSN || strcmp(in->module, "[vdso]"))
		return 0;
	c->n++;
	c->named += in->sym != NULL;
	/* (a symbol covers it: no name is wrong) */
	c->nameable += oracle_vaddr(&c->o, in->modoff, &va) &&
		       !oracle_accepts(&c->o, va, NULL, 0);
	if (!oracle_vaddr(&c->o, in->modoff, &va) ||
	    !oracle_accepts(&c->o, va, in->sym, in->symoff)) {
		if (c->bad++ < 5)
			CHECK_FAIL_("[vdso]+0x%" PRIx64 ": got %s+0x%" PRIx64,
				    in->modoff,
				    in->sym ? in->sym : "nothing", in->symoff);
	}
	return 0;
}

static void test_vdso(void)
{
	char dir[PATH_MAX], prog[PATH_MAX], img[PATH_MAX], hex[160];
	char *argv[2];
	struct ptd_swpt_options so;
	struct ptd_swpt_result res;
	struct ptd_diag d = { "" };
	struct ptd_input_opts o;
	struct ptd_input_sink sink;
	struct vdso_check c;
	size_t terr = 0;
	int fd;

	fd = ptd_elf_own_vdso(hex, sizeof(hex));
	if (fd < 0) {
		fprintf(stderr, "  skip: this process has no vDSO\n");
		return;
	}
	path_in(img, sizeof(img), "vdso.so");
	/* CLOEXEC: the shell reads it through this process's fd table */
	REQUIRE(sh("cp /proc/%d/fd/%d '%s'", (int)getpid(), fd, img) == 0);
	(void)close(fd);
	memset(&c, 0, sizeof(c));
	REQUIRE(oracle_load(&c.o, img, true));

	(void)snprintf(prog, sizeof(prog), "%s/prog-vdso", progs_dir);
	path_in(dir, sizeof(dir), "vdsocap");
	argv[0] = prog;
	argv[1] = NULL;
	memset(&so, 0, sizeof(so));
	so.outdir = dir;
	so.quiet_target = true;
	REQUIRE(ptd_swpt_run(argv, &so, &res, &d) == 0);
	memset(&o, 0, sizeof(o));
	o.decode.path = PTD_PATH_BLOCK;
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN);
	REQUIRE(ptd_symbols_new(NULL, &o.decode.symbols) == 0);
	memset(&sink, 0, sizeof(sink));
	sink.record = vdso_record;
	sink.ctx = &c;
	CHECK_EQ_INT(ptd_input_decode(dir, &o, &sink, &terr, &d), 0);
	fprintf(stderr, "  %zu instructions in [vdso], %zu named, %zu in a "
			"symbol\n", c.n, c.named, c.nameable);
	CHECK(c.n >= 50);
	CHECK(c.nameable >= 50);
	CHECK_EQ_U64(c.named, c.nameable);
	CHECK_EQ_U64(c.bad, 0);
	ptd_symbols_free(o.decode.symbols);
	oracle_fini(&c.o);
}

int main(void)
{
	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set (run through meson test)");
	if (sh("command -v nm objdump objcopy readelf >/dev/null") != 0)
		SKIP_ALL("binutils (nm, objdump, objcopy, readelf) is not "
			 "installed: it is the independent oracle");
	if (!mkdtemp(workdir)) {
		fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	RUN(test_program_vs_nm);
	RUN(test_find_by_name);
	RUN(test_libc_vs_nm);
	RUN(test_stripped_dynsym);
	RUN(test_debug_file);
	RUN(test_perfmap);
	RUN(test_symbols_hooks);
	RUN(test_hostile_elf);
	RUN(test_decoded_trace);
	RUN(test_vdso);
	(void)ptd_rm_rf(workdir);
	return check_done();
}
