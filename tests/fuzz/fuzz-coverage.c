/* SPDX-License-Identifier: MIT */
/*
 * Coverage (views/coverage.c): the input as a module's ELF file, whose
 * symbols name executed instructions at the start of up to 64 of its
 * functions; the coverage disassembles each function's bytes from the
 * file and writes the text and the lcov tracefile, with the DWARF line
 * tables libdw reads from the file.  Checked: no crash, leak or hang;
 * every note a bounded, non-empty message; no file stays open.
 */
#include "fuzz-common.h"

#include <stdio.h>
#include <sys/mman.h>

#include "aspace/iscache.h"
#include "decode/counters.h"
#include "sym/symbols.h"
#include "sym/symtab.h"
#include "views/coverage.h"

#define MODULE "/fuzz/prog"

static void run(int fd, size_t size)
{
	const struct ptd_symtab *tab = NULL;
	struct ptd_counters *t = NULL;
	struct ptd_coverage *c = NULL;
	struct ptd_symbols *s = NULL;
	char path[64];
	struct ptd_module m;
	const char *msg;
	size_t n, added = 0;
	FILE *out;

	(void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	memset(&m, 0, sizeof(m));
	m.isid = 1;
	m.path = path;
	m.name = MODULE;
	m.size = size;
	m.vaddr = 0x400000;
	if (ptd_symbols_new(NULL, &s) < 0 || ptd_counters_new(0, &t) < 0)
		goto out;
	/* loads the file's symbols */
	(void)ptd_symbols_resolve(s, &m, 1, m.vaddr, NULL);
	if (ptd_symbols_module_file(s, MODULE, NULL, &tab, NULL) < 0 || !tab)
		goto out;
	n = ptd_symtab_count(tab);
	for (size_t i = 0; i < n && added < 64; i++) {
		const struct ptd_sym *sym = ptd_symtab_at(tab, i);
		struct ptd_rec_insn in;
		uint64_t off;
		uint32_t slot;

		if (!sym->size || ptd_symtab_offset_of(tab, sym->addr, &off) < 0)
			continue;
		memset(&in, 0, sizeof(in));
		in.ip = m.vaddr + off;
		in.modoff = off;
		in.module = MODULE;
		in.isid = 1;
		in.mode = ptem_64bit;
		in.size = 1;
		in.raw[0] = 0x90;
		in.sym = sym->name;
		slot = ptd_counters_slot(t, &in);
		for (size_t k = 0; k <= i % 3; k++)
			(void)ptd_counters_hit(t, slot);
		added++;
	}
	if (ptd_coverage_new(t, s, &c) < 0)
		goto out;
	out = fopen("/dev/null", "w");
	if (out) {
		(void)ptd_coverage_write_text(out, c, "fuzz");
		if (ptd_coverage_have_lcov())
			(void)ptd_coverage_write_lcov(out, c, "fuzz");
		fclose(out);
	}
	for (size_t i = 0; (msg = ptd_coverage_note(c, i)); i++)
		if (!*msg || strnlen(msg, 8192) >= 8192)
			fuzz_fail("ptd_coverage_note",
				  "an empty or unbounded note");
out:
	ptd_coverage_free(c);
	ptd_counters_free(t);
	ptd_symbols_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-coverage", MFD_CLOEXEC);

	if (fd >= 0) {
		if (ptd_write_all(fd, data, size) == 0)
			run(fd, size);
		(void)close(fd);
	}
	fuzz_check_fds();
	return 0;
}
