/* SPDX-License-Identifier: MIT */
#include "common/strutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return 99;
}

int ptd_parse_u64n(const char *s, size_t len, int base, uint64_t *ret)
{
	uint64_t v = 0;
	size_t i = 0;

	if (!s || !ret || (base != 0 && base != 10 && base != 16))
		return -EINVAL;
	if (base == 0) {
		if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
			base = 16;
			i = 2;
		} else {
			base = 10;
		}
	}
	if (i >= len)
		return -EINVAL;
	for (; i < len; i++) {
		int d = digit_value(s[i]);

		if (d >= base)
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return -ERANGE;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	*ret = v;
	return 0;
}

int ptd_parse_u64(const char *s, int base, uint64_t *ret)
{
	if (!s)
		return -EINVAL;
	return ptd_parse_u64n(s, strlen(s), base, ret);
}

int ptd_parse_size(const char *s, uint64_t *ret)
{
	size_t len;
	unsigned shift = 0;
	uint64_t v;
	int r;

	if (!s || !ret)
		return -EINVAL;
	len = strlen(s);
	if (len > 0) {
		switch (s[len - 1]) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: break;
		}
		if (shift)
			len--;
	}
	r = ptd_parse_u64n(s, len, 10, &v);
	if (r < 0)
		return r;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*ret = v << shift;
	return 0;
}

int ptd_strlcpy(char *dst, const char *src, size_t cap)
{
	size_t n = strlen(src);

	if (n >= cap)
		return -ENAMETOOLONG;
	memcpy(dst, src, n + 1);
	return 0;
}

void ptd_freep(void *p)
{
	free(*(void **)p);
}

void ptd_closep(int *fd)
{
	if (*fd >= 0)
		(void)close(*fd);
}
