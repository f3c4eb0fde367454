/* SPDX-License-Identifier: MIT */
/*
 * Symbols of whole address spaces: which function an instruction of a
 * module (aspace/iscache.h, struct ptd_module) belongs to.
 *
 * Each file is loaded once, the first time one of its instructions is
 * resolved (sym/symtab.h): its .symtab, .dynsym and PLT; when it has no
 * .symtab (stripped), its separate debug file's, found as gdb finds it:
 * by build-id as DEBUG_ROOT/.build-id/xx/yyyy.debug (the debug file's
 * build-id must be the file's), then by .gnu_debuglink's name in the
 * file's directory, its .debug/ and DEBUG_ROOT/ + the directory (the
 * debug file's CRC32 must be the link's).  Snapshots of non-file code are
 * ELF files when they are a vDSO, and resolve the same way.  Other code
 * that is no file (JIT, anonymous memory) is resolved through the perf map
 * file PERFMAP_DIR/perf-PID.map of its process, read once, and believed
 * only when it is owned by the caller's effective user or root (anyone
 * may create one in /tmp), as perf does.
 *
 * Callers resolve once per distinct instruction (the instruction cache
 * does, decode/insncache.h), never per execution.  Thread-safe; names live
 * as long as the object.
 */
#ifndef PTD_SYM_SYMBOLS_H
#define PTD_SYM_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "aspace/iscache.h"
#include "common/diag.h"

struct ptd_symbols;

struct ptd_symbols_opts {
	const char *debug_root;		/* NULL: /usr/lib/debug */
	const char *perfmap_dir;	/* NULL: /tmp */
};

/* Allocate into *@ret (@o may be NULL: the defaults; its strings are
 * copied).  Returns 0, -ENOMEM. */
int ptd_symbols_new(const struct ptd_symbols_opts *o,
		    struct ptd_symbols **ret);
void ptd_symbols_free(struct ptd_symbols *s);

/* The function holding @ip of module @m (NULL: code that is no module,
 * resolved through @pid's perf map) in process @pid, and @ip's offset in
 * it (*@ret_off).  Returns its name, or NULL if no symbol covers @ip or
 * the file's symbols could not be read (ptd_symbols_failure says why). */
const char *ptd_symbols_resolve(struct ptd_symbols *s,
				const struct ptd_module *m, pid_t pid,
				uint64_t ip, uint64_t *ret_off);

struct ptd_symbols_stats {
	uint64_t resolves;	/* ptd_symbols_resolve calls */
	uint64_t files;		/* files and perf maps loaded (or tried) */
};

void ptd_symbols_get_stats(struct ptd_symbols *s,
			   struct ptd_symbols_stats *ret);

/* Why the @i-th file that failed (in the order they failed) gave no or
 * only some symbols: a message naming it; NULL past the last.  A debug
 * file that was looked for and not found is no failure. */
const char *ptd_symbols_failure(struct ptd_symbols *s, size_t i);

/* The debug file used for @path's symbols, "" if none (for tests and
 * messages): valid while @s lives.  NULL if @path was not loaded. */
const char *ptd_symbols_debug_file(struct ptd_symbols *s, const char *path);

#endif
