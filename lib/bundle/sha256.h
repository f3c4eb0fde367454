/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 (FIPS 180-4), streaming, and a file helper.
 */
#ifndef PTD_BUNDLE_SHA256_H
#define PTD_BUNDLE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "common/cancel.h"

#define PTD_SHA256_LEN 32u
#define PTD_SHA256_HEX_LEN 64u	/* without the NUL */

struct ptd_sha256 {
	uint32_t h[8];
	uint64_t nbytes;	/* message length so far */
	uint8_t buf[64];	/* partial block */
	size_t nbuf;
};

void ptd_sha256_init(struct ptd_sha256 *s);
void ptd_sha256_update(struct ptd_sha256 *s, const void *data, size_t len);
/* Finish and write the digest; @s must be re-initialised before reuse. */
void ptd_sha256_final(struct ptd_sha256 *s, uint8_t out[PTD_SHA256_LEN]);

/* One call. */
void ptd_sha256(const void *data, size_t len, uint8_t out[PTD_SHA256_LEN]);

/* Hash the file open at @fd from its current offset to its end; the byte
 * count read goes to *@ret_size (may be NULL).  Reads at most @limit bytes:
 * -PTD_ELIMIT if there are more.  Returns 0 or -errno. */
int ptd_sha256_fd(int fd, uint64_t limit, uint8_t out[PTD_SHA256_LEN],
		  uint64_t *ret_size);

/* ptd_sha256_fd that asks @cancel (may be NULL) before each 64 KiB block:
 * -ECANCELED once it says stop. */
int ptd_sha256_fd_until(int fd, uint64_t limit,
			const struct ptd_cancel *cancel,
			uint8_t out[PTD_SHA256_LEN], uint64_t *ret_size);

/* Hash the file at @path.  Returns 0,
 * -errno, or -PTD_ELIMIT as ptd_sha256_fd. */
int ptd_sha256_file(const char *path, uint64_t limit,
		    uint8_t out[PTD_SHA256_LEN], uint64_t *ret_size);

/* Lower-case hex of a digest into @hex (65 bytes with the NUL). */
void ptd_sha256_hex(const uint8_t d[PTD_SHA256_LEN],
		    char hex[PTD_SHA256_HEX_LEN + 1]);

/* Parse exactly 64 hex digits (either case).  Returns 0 or -EINVAL. */
int ptd_sha256_parse_hex(const char *hex, uint8_t out[PTD_SHA256_LEN]);

#endif
