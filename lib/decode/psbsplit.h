/* SPDX-License-Identifier: MIT */
/*
 * A PT stream cut at its PSBs: where each PSB+ begins, the time it carries
 * and where tracing stands there.
 *
 * A PSB+ is the one place a decoder can start without history (the SDM:
 * nothing is kept across a PSB), so the bytes from one PSB to the next --
 * a PSB block -- can be given to a decoder on their own.  Splitting a
 * CPU's trace among the threads that ran on it by time (what LLDB does
 * with its per-CPU bundles, lldb/trace.h) works on these blocks: each
 * block's TSC says when it was written.
 *
 * A block's TSC is the one its PSB+ carries (hardware puts a TSC packet in
 * every PSB+ when TSCEn is set); a PSB+ without one has none.  Its IP is the FUP of the PSB+ (where execution
 * stands; none while tracing is off: the block then starts disabled).
 *
 * The bytes are untrusted: a PSB whose PSB+ does not decode does not start
 * a block (its bytes stay in the block before, whose decoder reports the
 * error), bytes before the first PSB belong to no block (*ret_skipped).
 */
#ifndef PTD_DECODE_PSBSPLIT_H
#define PTD_DECODE_PSBSPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <intel-pt.h>

struct ptd_psb_block {
	uint64_t offset;	/* of the PSB in the stream */
	uint64_t size;		/* to the next block, or to the end */
	bool has_tsc;
	uint64_t tsc;
	bool has_ip;
	uint64_t ip;
};

/* Split @len bytes at @pt (decoded for @cpu: its errata; pcv_unknown:
 * none) into PSB blocks, in stream order: *ret (malloc'd, NULL when there
 * is none) and *ret_n; *ret_skipped (may be NULL) gets the number of bytes
 * before the first block.  Returns 0, -EINVAL (a NULL argument other than
 * @ret_skipped, or @pt NULL with @len non-zero) or -ENOMEM. */
int ptd_psb_split(const uint8_t *pt, size_t len, const struct pt_cpu *cpu,
		  struct ptd_psb_block **ret, size_t *ret_n,
		  uint64_t *ret_skipped);

#endif
