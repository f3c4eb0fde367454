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
#include <sys/types.h>

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
void ptd_buf_free(struct ptd_buf *b);

/* Read all of @path, at most @limit bytes, into a NUL-terminated malloc'd
 * buffer (*ret_data, *ret_len excludes the NUL).  Works for /proc files
 * whose st_size is 0.
 * Returns 0, -errno from open/read, or -PTD_ELIMIT if the file is larger
 * than @limit. */
int ptd_file_read_all(const char *path, size_t limit, char **ret_data,
		      size_t *ret_len);

/* Write @len bytes to @path atomically: a temporary file in the same
 * directory, fsync, rename.  Returns 0 or -errno. */
int ptd_file_write_atomic(const char *path, const void *data, size_t len);

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
