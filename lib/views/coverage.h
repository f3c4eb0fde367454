/* SPDX-License-Identifier: MIT */
/*
 * Coverage: what a trace ran, per module and function, from the exact
 * execution counts of a decode (decode/counters.h), as text or as an lcov
 * tracefile (geninfo(1)'s format) with source lines from DWARF.
 *
 * What is counted, per function (the ELF symbol covering the code, as
 * sym/symtab.h looks it up in the file the decode read the code from):
 *  - run: the distinct instructions executed (addresses in the module's
 *    file: the same instruction in two processes or two mappings of the
 *    file is one), and executions: the sum of their counts;
 *  - total, where the symbol has a size: the instructions of the symbol's
 *    bytes, read from the file and disassembled from its start to its end
 *    one after another (lib/x86); an executed instruction is always one
 *    of them -- where the sweep would step over one (bytes the compiler
 *    put among the code), it starts again there (a "resync"), and bytes
 *    that decode as no instruction are skipped one at a time
 *    ("undecodable") and counted in no total.  An executed instruction
 *    whose bytes differ from the file's (the file changed since) is
 *    counted and reported ("differs").  Without a size (a symbol without
 *    one, a perf map's JIT code, code no symbol covers) there is no total.
 *  - Functions of which no instruction ran are not listed.
 * Code outside any file (anonymous memory, JIT) is listed by its module
 * name, by the perf-map symbol the decode gave it, without a total.
 *
 * lcov: each sized function's instructions (executed or not) mapped to
 * file:line by the DWARF line table of its module (or of the separate
 * debug file its symbols came from), read with libdw from a bounded copy
 * of the file in memory (never mapped).  A line's DA count is the count of
 * its most executed instruction (so a loop's line counts its iterations,
 * not the sum of its instructions); a line with instructions of which
 * none ran has DA 0.  FN is the line of the function's first byte, FNDA
 * its entry instruction's count (the times it was run from its start).
 * Lines numbered 0 (code of no source line) are left out; a source file
 * or function name with a line break is left out, saying so.
 */
#ifndef PTD_VIEWS_COVERAGE_H
#define PTD_VIEWS_COVERAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/diag.h"
#include "decode/counters.h"
#include "sym/symbols.h"

/* Functions larger than this are not disassembled (no total). */
#define PTD_COVERAGE_MAX_FUNC_BYTES (16u << 20)
/* Files larger than this give no DWARF lines. */
#define PTD_COVERAGE_MAX_DWARF_FILE (1024ull << 20)
/* Most compilation units searched for an address (no .debug_aranges). */
#define PTD_COVERAGE_MAX_CUS (1u << 20)

struct ptd_coverage;

/* The coverage of the counts in @t, whose instructions were named by
 * @syms (the decode's symbols: ptd_decode_opts.symbols): modules grouped
 * by name, functions by symbol, each sized function disassembled from its
 * file.  A file that cannot be read gives a note (ptd_coverage_note), not
 * a failure.  Returns 0, or -ENOMEM, -EINVAL (@t or @ret NULL). */
int ptd_coverage_new(const struct ptd_counters *t, struct ptd_symbols *syms,
		     struct ptd_coverage **ret);
void ptd_coverage_free(struct ptd_coverage *c);

/* The text report (coverage.h's top says what is counted).  @trace names
 * the input in the header.  Returns 0 or -errno of the write. */
int ptd_coverage_write_text(FILE *f, const struct ptd_coverage *c,
			    const char *trace);

/* Whether this build reads DWARF (libdw): without it, lcov is refused. */
bool ptd_coverage_have_lcov(void);

/* The lcov tracefile, test name @test (TN:, may be ""), one record per
 * source file.  DWARF that cannot be read gives notes.  Returns 0,
 * -EOPNOTSUPP (built without libdw), -ENOMEM, -errno of the write. */
int ptd_coverage_write_lcov(FILE *f, struct ptd_coverage *c,
			    const char *test);

/* What could not be read or counted (files without symbols, bytes or
 * DWARF, names left out of lcov), one message each naming the file;
 * NULL past the last. */
const char *ptd_coverage_note(const struct ptd_coverage *c, size_t i);

#endif
