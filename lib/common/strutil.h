/* SPDX-License-Identifier: MIT */
/*
 * Strict number parsing and small helpers.  Every parser here refuses what
 * strtoul() would quietly accept: empty strings, signs, trailing junk,
 * overflow.
 */
#ifndef PTD_COMMON_STRUTIL_H
#define PTD_COMMON_STRUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PTD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Parse the whole of @s as an unsigned number in @base (10 or 16; base 0
 * accepts a "0x" prefix for hex, decimal otherwise).
 * Returns 0 on success, -EINVAL if @s is empty or has a character that is not
 * a digit of @base, -ERANGE on overflow. */
int ptd_parse_u64(const char *s, int base, uint64_t *ret);

/* Same, on the @len bytes at @s (not NUL-terminated). */
int ptd_parse_u64n(const char *s, size_t len, int base, uint64_t *ret);

/* Parse a value with an optional k/K, m/M, g/G suffix (powers of 1024). */
int ptd_parse_size(const char *s, uint64_t *ret);

/* Copy @src into @dst of @cap bytes; returns -ENAMETOOLONG (and writes
 * nothing) if it does not fit with its NUL. */
int ptd_strlcpy(char *dst, const char *src, size_t cap);

/* Free *p; for __attribute__((cleanup)). */
void ptd_freep(void *p);
/* Close *fd if >= 0; for __attribute__((cleanup)). */
void ptd_closep(int *fd);

#define _cleanup_free_ __attribute__((cleanup(ptd_freep)))
#define _cleanup_close_ __attribute__((cleanup(ptd_closep)))

/* Hand ownership out of a _cleanup_ variable. */
#define PTD_TAKE_PTR(p) \
	__extension__({ __typeof__(p) _p = (p); (p) = NULL; _p; })
#define PTD_TAKE_FD(fd) \
	__extension__({ int _fd = (fd); (fd) = -1; _fd; })

#endif
