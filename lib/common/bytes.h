/* SPDX-License-Identifier: MIT */
/*
 * Fields of untrusted binary records (perf records, file headers): loads
 * from any alignment, in the host's byte order (the files are written by
 * the same kind of machine: perf.data and LLDB's perf records are
 * little-endian x86-64).  The caller has checked the bytes are there.
 */
#ifndef PTD_COMMON_BYTES_H
#define PTD_COMMON_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ptd_get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint64_t ptd_get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

#endif
