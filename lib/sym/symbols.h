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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "aspace/iscache.h"
#include "common/diag.h"

struct ptd_symbols;
struct ptd_symtab;

struct ptd_symbols_opts {
	const char *debug_root;		/* NULL: /usr/lib/debug */
	const char *perfmap_dir;	/* NULL: /tmp */
	/* Whose perf maps are believed (besides root's): @perfmap_uid when
	 * @perfmap_uid_set, else the caller's effective uid.  A daemon
	 * running as root names the traced process's (or its client's)
	 * uid here: its own euid would believe anyone's file. */
	bool perfmap_uid_set;
	uid_t perfmap_uid;
	/* Opens every file symbols are read from (ELF files, debug file
	 * candidates, perf maps) as ptd_file_open_regular(AT_FDCWD, @path, 0,
	 * @ret_st, @diag) does: an fd, or -errno with a message.  @snapshot:
	 * @path is a snapshot of non-file code (a vDSO) that the decoder's
	 * owner wrote, not a file the traced program named.  NULL:
	 * ptd_file_open_regular on the calling thread.  A daemon opens them
	 * with its client's rights through this (daemon/cred.h), so that
	 * symbols -- and a debug link's CRC, an oracle of a file's bytes --
	 * come only from files the client may read. */
	int (*open)(void *ctx, const char *path, bool snapshot,
		    struct stat *ret_st, struct ptd_diag *diag);
	void *open_ctx;
	/* Asked for the bytes of each table before it is kept
	 * (ptd_symtab_bytes): a negative return (-PTD_ELIMIT) refuses it --
	 * its file's code then names no symbol and a failure says so, with
	 * the code returned.  Never called under a lock of the caller's that
	 * it takes.  NULL: nothing is charged.  What was charged is the
	 * caller's to give back once the object is freed
	 * (ptd_symbols_stats.bytes says how much). */
	int (*charge)(void *ctx, uint64_t bytes);
	void *charge_ctx;
};

/* Allocate into *@ret (@o may be NULL: the defaults; its strings are
 * copied, its hooks kept).  Returns 0, -ENOMEM. */
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
	uint64_t bytes;		/* held by the tables kept (charged) */
	uint64_t failures;	/* ptd_symbols_failure's count */
};

void ptd_symbols_get_stats(struct ptd_symbols *s,
			   struct ptd_symbols_stats *ret);

/* Why the @i-th file that failed (in the order they failed) gave no or
 * only some symbols: a message naming it; NULL past the last.  A debug
 * file that was looked for and not found is no failure. */
const char *ptd_symbols_failure(struct ptd_symbols *s, size_t i);
/* Its error: -PTD_ELIMIT (the charge refused, or a table past
 * sym/symtab.h's limits), -EPERM (a perf map of another user), -EACCES,
 * -PTD_EFORMAT..., 0 past the last. */
int ptd_symbols_failure_code(struct ptd_symbols *s, size_t i);
/* How many failures there are so far (cheap: no lock). */
size_t ptd_symbols_nfailures(struct ptd_symbols *s);

/* The debug file used for @path's symbols, "" if none (for tests and
 * messages): valid while @s lives.  NULL if @path was not loaded. */
const char *ptd_symbols_debug_file(struct ptd_symbols *s, const char *path);

/* The file whose symbols named the code of module @name (as records name
 * it: ptd_module.name, the traced path or "[vdso]"; when several files
 * did, the one whose path sorts first): its path (*@ret_path: the file
 * the bytes came from, a bundle's copy, a --sysroot's), its sealed table (*@ret_table, NULL when
 * its symbols could not be read) and the separate debug file its symbols
 * came from (*@ret_debug, "" if none).  Any of them may be NULL.  Only
 * files already loaded by ptd_symbols_resolve; valid while @s lives and
 * nothing resolves concurrently.  Returns 0, or -ENOENT. */
int ptd_symbols_module_file(struct ptd_symbols *s, const char *name,
			    const char **ret_path,
			    const struct ptd_symtab **ret_table,
			    const char **ret_debug);

#endif
