/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 as FIPS 180-4 sections 4.1.2, 4.2.2, 5.1.1, 5.3.3 and 6.2 define
 * it: 64-byte blocks, big-endian words, the message padded with 0x80, zeros
 * and its bit length.
 */
#include "bundle/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/diag.h"
#include "common/fileio.h"
#include "common/strutil.h"

/* The first 32 bits of the fractional parts of the cube roots of the
 * first 64 primes (4.2.2). */
static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

static uint32_t load_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void store_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* One 64-byte block into the state (6.2.2). */
static void compress(uint32_t h[8], const uint8_t *block)
{
	uint32_t w[64], a, b, c, d, e, f, g, hh;
	unsigned t;

	for (t = 0; t < 16; t++)
		w[t] = load_be32(block + 4 * t);
	for (t = 16; t < 64; t++) {
		uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^
			      (w[t - 15] >> 3);
		uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^
			      (w[t - 2] >> 10);
		w[t] = w[t - 16] + s0 + w[t - 7] + s1;
	}
	a = h[0], b = h[1], c = h[2], d = h[3];
	e = h[4], f = h[5], g = h[6], hh = h[7];
	for (t = 0; t < 64; t++) {
		uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
		uint32_t ch = (e & f) ^ (~e & g);
		uint32_t t1 = hh + S1 + ch + K[t] + w[t];
		uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
		uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
		uint32_t t2 = S0 + maj;

		hh = g, g = f, f = e, e = d + t1;
		d = c, c = b, b = a, a = t1 + t2;
	}
	h[0] += a, h[1] += b, h[2] += c, h[3] += d;
	h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

void ptd_sha256_init(struct ptd_sha256 *s)
{
	/* 5.3.3: fractional parts of the square roots of the first 8 primes */
	static const uint32_t h0[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(s->h, h0, sizeof(h0));
	s->nbytes = 0;
	s->nbuf = 0;
}

void ptd_sha256_update(struct ptd_sha256 *s, const void *data, size_t len)
{
	const uint8_t *p = data;

	s->nbytes += len;
	if (s->nbuf) {
		size_t take = 64 - s->nbuf;

		if (take > len)
			take = len;
		memcpy(s->buf + s->nbuf, p, take);
		s->nbuf += take;
		p += take;
		len -= take;
		if (s->nbuf < 64)
			return;
		compress(s->h, s->buf);
		s->nbuf = 0;
	}
	for (; len >= 64; p += 64, len -= 64)
		compress(s->h, p);
	if (len) {
		memcpy(s->buf, p, len);
		s->nbuf = len;
	}
}

void ptd_sha256_final(struct ptd_sha256 *s, uint8_t out[PTD_SHA256_LEN])
{
	uint64_t bits = s->nbytes * 8;
	unsigned i;

	/* 5.1.1: 0x80, zeros up to 56 mod 64, then the 64-bit length */
	s->buf[s->nbuf++] = 0x80;
	if (s->nbuf > 56) {
		memset(s->buf + s->nbuf, 0, 64 - s->nbuf);
		compress(s->h, s->buf);
		s->nbuf = 0;
	}
	memset(s->buf + s->nbuf, 0, 56 - s->nbuf);
	store_be32(s->buf + 56, (uint32_t)(bits >> 32));
	store_be32(s->buf + 60, (uint32_t)bits);
	compress(s->h, s->buf);
	for (i = 0; i < 8; i++)
		store_be32(out + 4 * i, s->h[i]);
	memset(s, 0, sizeof(*s));
}

void ptd_sha256(const void *data, size_t len, uint8_t out[PTD_SHA256_LEN])
{
	struct ptd_sha256 s;

	ptd_sha256_init(&s);
	ptd_sha256_update(&s, data, len);
	ptd_sha256_final(&s, out);
}

int ptd_sha256_fd(int fd, uint64_t limit, uint8_t out[PTD_SHA256_LEN],
		  uint64_t *ret_size)
{
	return ptd_sha256_fd_until(fd, limit, NULL, out, ret_size);
}

int ptd_sha256_fd_until(int fd, uint64_t limit,
			const struct ptd_cancel *cancel,
			uint8_t out[PTD_SHA256_LEN], uint64_t *ret_size)
{
	struct ptd_sha256 s;
	uint8_t buf[65536];
	uint64_t total = 0;

	ptd_sha256_init(&s);
	for (;;) {
		ssize_t n;

		if (ptd_cancelled(cancel))
			return -ECANCELED;
		n = read(fd, buf, sizeof(buf));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
		if (total > limit)
			return -PTD_ELIMIT;
		ptd_sha256_update(&s, buf, (size_t)n);
	}
	ptd_sha256_final(&s, out);
	if (ret_size)
		*ret_size = total;
	return 0;
}

int ptd_sha256_file(const char *path, uint64_t limit,
		    uint8_t out[PTD_SHA256_LEN], uint64_t *ret_size)
{
	_cleanup_close_ int fd = ptd_file_open_regular(AT_FDCWD, path, 0, NULL,
							NULL);

	if (fd < 0)
		return fd;
	return ptd_sha256_fd(fd, limit, out, ret_size);
}

void ptd_sha256_hex(const uint8_t d[PTD_SHA256_LEN],
		    char hex[PTD_SHA256_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";
	unsigned i;

	for (i = 0; i < PTD_SHA256_LEN; i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[PTD_SHA256_HEX_LEN] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ptd_sha256_parse_hex(const char *hex, uint8_t out[PTD_SHA256_LEN])
{
	uint8_t d[PTD_SHA256_LEN];
	unsigned i;

	if (!hex || strlen(hex) != PTD_SHA256_HEX_LEN)
		return -EINVAL;
	for (i = 0; i < PTD_SHA256_LEN; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		d[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(out, d, sizeof(d));
	return 0;
}
