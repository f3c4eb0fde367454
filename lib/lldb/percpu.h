/* SPDX-License-Identifier: MIT */
/*
 * LLDB per-CPU bundles: which thread each piece of a CPU's trace is.
 *
 * A per-CPU bundle (trace.h: "cpus") has, for each CPU, the CPU's whole
 * Intel PT trace and its context switch trace: the perf records LLDB's
 * per-CPU context switch event wrote (PERF_RECORD_SWITCH_CPU_WIDE with
 * sample_id_all and sample_type TID|TIME: header, next_prev_pid/tid,
 * pid/tid, time, 32 bytes), times in perf nanoseconds, turned into TSC with
 * the bundle's tscPerfZeroConversion.  ptd splits the CPU's trace as LLDB
 * does, so both decode a bundle alike:
 *
 *  - The switch records, in order, give the thread's continuous
 *    executions on that CPU.  A switch-in followed by the same thread's
 *    switch-out is one execution [in, out].  Where a record is missing the
 *    execution's other end is hinted: IN(a) IN(b) ends a at b's time - 1;
 *    OUT(a) OUT(b) starts b at a's time + 1; IN(a) OUT(b) of another thread
 *    ends a at b's time - 1 and starts b at a's time + 1; a first OUT
 *    starts its execution at 0, a last IN ends its execution never.  An
 *    OUT followed by an IN is a gap (the CPU ran untraced tasks).
 *  - The CPU's trace is cut into PSB blocks (decode/psbsplit.h).  A block
 *    belongs to the execution whose (start, end) holds the block's TSC
 *    strictly; a block in no execution belongs to nobody (counted).  A
 *    per-CPU trace without TSC packets cannot be split: refused.
 *  - A thread's executions, on every CPU, are decoded in the order of their
 *    first block's TSC, each as one stretch of its CPU's trace (its blocks
 *    are adjacent there) decoded from its first PSB.
 *
 * The limits of the method (LLDB's too): a block that holds the end of one
 * thread's run and the start of the next goes whole to the thread running
 * at its PSB; the decode of the other thread starts at its next PSB.
 * User-space traces switch inside the kernel, where tracing is off, so an
 * execution's stretch ends with tracing disabled and nothing is decoded
 * twice.
 *
 * Untrusted input: every record's size is checked against the file
 * (8 <= size, inside the file, switch records at least 32 bytes), switch
 * times must increase strictly, and messages read
 * "DIR/trace.json: cpus[1].contextSwitchTrace: offset 96: ...".
 */
#ifndef PTD_LLDB_PERCPU_H
#define PTD_LLDB_PERCPU_H

#include <stddef.h>
#include <stdint.h>

#include "common/diag.h"
#include "decode/psbsplit.h"
#include "perf/time.h"

/* One continuous execution of a thread on a CPU. */
struct ptd_lldb_exec {
	size_t cpu;		/* index into the bundle's cpus */
	uint32_t pid, tid;
	uint64_t start, end;	/* TSC: blocks strictly between are its */
	size_t first, nblocks;	/* its blocks in the CPU's block list */
};

/* Parse a context switch trace (@len bytes at @data) into executions,
 * appended to *v (*n of them, *cap allocated; grown with realloc) with
 * cpu = @cpu, in time order, nblocks 0.  @what names the file in messages
 * ("DIR/trace.json: cpus[1].contextSwitchTrace").  Returns 0,
 * -PTD_EFORMAT (a record of a bad size, a switch record too short, times
 * not increasing: the message names the offset), -PTD_ELIMIT (more than
 * PTD_LLDB_MAX_EXECS executions in all) or -ENOMEM. */
#define PTD_LLDB_MAX_EXECS (1u << 24)
int ptd_lldb_cswitch_parse(const uint8_t *data, size_t len, size_t cpu,
			   const struct ptd_perf_clock *conv, const char *what,
			   struct ptd_lldb_exec **v, size_t *n, size_t *cap,
			   struct ptd_diag *diag);

/* Give the blocks of one CPU (@blocks, @nblocks, in stream order) to its
 * executions (@ex, @nex: that CPU's, in time order): sets each
 * execution's first/nblocks.  Returns the number of blocks that belong to
 * no execution, and adds their bytes to *ret_bytes. */
size_t ptd_lldb_assign_blocks(const struct ptd_psb_block *blocks,
			      size_t nblocks, struct ptd_lldb_exec *ex,
			      size_t nex, uint64_t *ret_bytes);

#endif
