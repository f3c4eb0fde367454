/* SPDX-License-Identifier: MIT */
/*
 * Whole-file I/O with limits, and a growable byte buffer.
 */
#ifndef PTD_COMMON_FILEIO_H
#define PTD_COMMON_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/diag.h"

/* A growable byte buffer.  Zero-initialise it ({0}) before first use. */
struct ptd_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

/* Append @n bytes. Returns 0 or -ENOMEM. */
int ptd_buf_append(struct ptd_buf *b, const void *p, size_t n);
/* Make room for @n more bytes; returns 0 or -ENOMEM. */
int ptd_buf_reserve(struct ptd_buf *b, size_t n);
void ptd_buf_fini(struct ptd_buf *b);

/* Open @path (relative to directory @dfd, or AT_FDCWD) for reading a file
 * that someone else controls (a client's trace, the files and images it
 * names), so that nothing put there can block or fault the reader: opened
 * O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | @flags (@flags: 0 or
 * O_NOFOLLOW, which refuses a final symlink with -ELOOP), so that a FIFO
 * does not wait for a writer, a terminal does not become ours and a lease
 * does not hold the open; then fstat'ed on the descriptor (what was
 * opened, not what the path names a moment later) and refused unless a
 * regular file; only then made blocking again.  This is the one place
 * ptd opens such files: every reader of outside files goes through it.
 * Returns the descriptor (*ret_st, if not NULL, its fstat), or with a
 * message naming @path in @diag:
 *  -errno         open/fstat failed ("cannot open 'PATH': ...")
 *  -EISDIR        a directory
 *  -PTD_ENOTREG   a FIFO, device or socket ("'PATH' is a FIFO, not a
 *                 regular file") */
int ptd_file_open_regular(int dfd, const char *path, int flags,
			  struct stat *ret_st, struct ptd_diag *diag);

/* "a FIFO", "a character device", ... for @mode's file type. */
const char *ptd_file_type_name(mode_t mode);

/* Read all of @path, at most @limit bytes, into a NUL-terminated malloc'd
 * buffer (*ret_data, *ret_len excludes the NUL).  Works for /proc files
 * whose st_size is 0.  @path must be a regular file (opened as
 * ptd_file_open_regular does).
 * Returns 0, -errno from open/read, -EISDIR/-PTD_ENOTREG (not a regular
 * file), or -PTD_ELIMIT if the file is larger than @limit. */
int ptd_file_read_all(const char *path, size_t limit, char **ret_data,
		      size_t *ret_len);

/* Write @len bytes to @path atomically: a temporary file in the same
 * directory, fsync, rename.  Returns 0 or -errno. */
int ptd_file_write_atomic(const char *path, const void *data, size_t len);

/* Write @len bytes to @path, a new file (refused if it exists; a link
 * is not followed), mode 0600, without fsync or rename: for a session's
 * own scratch files (the code snapshots in its private directory), read
 * back by the process that wrote them and removed with the session.
 * Durability buys nothing there, and an fsync a file costs a decode
 * thread milliseconds each -- one a new thread of the target (its vDSO
 * copy) held a live stream back for seconds.  On failure nothing is left
 * at @path.  Returns 0 or -errno. */
int ptd_file_write_scratch(const char *path, const void *data, size_t len);

/* Write all @len bytes to @fd, retrying on EINTR and short writes.
 * Returns 0 or -errno. */
int ptd_write_all(int fd, const void *data, size_t len);

/* Whether the @len bytes at @name are a plain file name: one path
 * component that stays in the directory it is joined to.  Every name that
 * comes from a file or a request and becomes a path component (a bundle's
 * files, a capture's data files, a timeline's snapshot files) is checked
 * here, so that they all agree.  Refused: the empty name, one over NAME_MAX
 * (255) bytes, one holding '/' or a NUL byte, and "." and "..": what could
 * name another directory or be cut short.  Nothing else is: "a..b" or
 * ".hidden" is one name inside the directory (it cannot climb out of it),
 * and control or non-UTF-8 bytes are legal in Linux file names, which a
 * traced library's may hold (messages print names bounded and quoted).
 * Returns 0, -EINVAL (not plain), -ENAMETOOLONG (over NAME_MAX). */
int ptd_filename_check(const char *name, size_t len);

/* ptd_filename_check() of a NUL-terminated @name (NULL: not plain). */
static inline bool ptd_filename_is_plain(const char *name)
{
	return name && ptd_filename_check(name, strlen(name)) == 0;
}

/* Remove @path and everything below it (not following symlinks).
 * Returns 0, or the first -errno met (it goes on with the rest). */
int ptd_rm_rf(const char *path);

/* Raise this process's soft limit on open files to its hard limit: ptd
 * holds one descriptor per private copy of code it decodes (aspace/
 * iscache.c).  Returns the soft limit now in force, or -errno. */
long ptd_nofile_raise(void);

#endif
