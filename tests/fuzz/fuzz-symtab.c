/* SPDX-License-Identifier: MIT */
/*
 * Symbol tables (sym/symtab.c): the input as an ELF file
 * (ptd_symtab_add_elf, then its debug-file variant) and as a perf map
 * (ptd_symtab_add_perfmap).  Checked: a refusal names what was wrong and
 * adds nothing; an accepted table is sorted, each symbol found again by
 * its first byte, every name a bounded string; no file stays open.
 */
#include "fuzz-common.h"

#include <sys/mman.h>

#include "sym/symtab.h"

static void check_table(const struct ptd_symtab *t, const char *fn)
{
	size_t n = ptd_symtab_count(t);

	if (n > PTD_SYMTAB_MAX_SYMS)
		fuzz_fail(fn, "more symbols than the limit");
	for (size_t i = 0; i < n; i++) {
		const struct ptd_sym *s = ptd_symtab_at(t, i);
		const struct ptd_sym *got;
		uint64_t off = 1;

		if (!s || !s->name ||
		    strnlen(s->name, PTD_SYMTAB_MAX_NAME + 8) >
			    PTD_SYMTAB_MAX_NAME + 4)
			fuzz_fail(fn, "a symbol without a bounded name");
		if (i && ptd_symtab_at(t, i - 1)->addr >= s->addr)
			fuzz_fail(fn, "symbols unsorted or duplicated");
		got = ptd_symtab_lookup(t, s->addr, &off);
		if (got != s || off != 0)
			fuzz_fail(fn, "a symbol not found at its address");
	}
}

static void one(const uint8_t *data, size_t size, int fd, unsigned flags)
{
	struct ptd_diag d = { "" };
	struct ptd_elf_syminfo info;
	struct ptd_symtab *t;
	int r;

	if (ptd_symtab_new(&t) < 0)
		return;
	r = ptd_symtab_add_elf(t, fd, "fuzz.elf", flags, &info, &d);
	fuzz_check_refusal(r, &d, "ptd_symtab_add_elf");
	ptd_symtab_seal(t);
	if (r < 0 && ptd_symtab_count(t))
		fuzz_fail("ptd_symtab_add_elf", "a refused file added symbols");
	if (r == 0 && (!memchr(info.build_id, '\0', sizeof(info.build_id)) ||
		       !memchr(info.debuglink, '\0', sizeof(info.debuglink))))
		fuzz_fail("ptd_symtab_add_elf", "unterminated syminfo");
	check_table(t, "ptd_symtab_add_elf");
	ptd_symtab_free(t);
	(void)data;
	(void)size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ptd_diag d = { "" };
	struct ptd_symtab *t;
	unsigned bad = 0;
	int fd, r;

	fd = memfd_create("fuzz-symtab", MFD_CLOEXEC);
	if (fd >= 0) {
		if (ptd_write_all(fd, data, size) == 0) {
			one(data, size, fd, 0);
			one(data, size, fd, PTD_SYMTAB_DEBUG_FILE);
		}
		(void)close(fd);
	}

	if (ptd_symtab_new(&t) < 0)
		return 0;
	r = ptd_symtab_add_perfmap(t, "fuzz.map", (const char *)data, size,
				   &bad, &d);
	fuzz_check_refusal(r, &d, "ptd_symtab_add_perfmap");
	if (r == 0 && bad && (!d.msg[0] || !strstr(d.msg, "fuzz.map:")))
		fuzz_fail("ptd_symtab_add_perfmap", "a bad line not named");
	ptd_symtab_seal(t);
	check_table(t, "ptd_symtab_add_perfmap");
	ptd_symtab_free(t);
	fuzz_check_fds();
	return 0;
}
