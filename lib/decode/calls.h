/* SPDX-License-Identifier: MIT */
/*
 * One thread's call stack, kept from its records in delivery order: insn
 * records (ip, size, class, symbol: resolved once per cached instruction),
 * the async_disabled and overflow events, and error records.  It turns
 * them into call records (record.h, struct ptd_rec_call; doc/protocol.md,
 * "call"):
 *
 *  - a near call pushes a frame whose return address is the call's next
 *    instruction: a "call" record (site, target, depth of the new frame);
 *  - a near return pops to the topmost frame whose return address is the
 *    return's target: a "return" record (frames: how many were popped,
 *    more than 1 when control skipped frames that never returned: an
 *    exception's unwinder, longjmp).  A return to no frame's return
 *    address pops to the topmost frame whose call site is in the
 *    function returned into (the
 *    unwinder landing in a catch or cleanup: "unwind":true); else, under a
 *    signal frame, it is the handler returning into the signal trampoline
 *    and pops nothing (the frame ends at sigreturn); else it pops the top
 *    frame, "unmatched":true (none on an empty stack: a function entered
 *    before the trace began);
 *  - a jump to the first instruction of another function is a tail call:
 *    "call" with "tail":true, its frame replacing the top one (same depth);
 *    a jump into the middle of a function whose call is on the stack
 *    (longjmp) pops to that frame, a "return" with "unwind":true and the
 *    jump as "from";
 *  - a syscall whose next instruction is its fall-through is no transfer;
 *    an asynchronous exit (async_disabled, its "at" the resume IP) or a
 *    syscall whose next instruction is elsewhere enters a signal handler
 *    ("call" with "async":true, a frame returning to the resume IP), or,
 *    when that instruction is the resume IP of a signal frame on the stack,
 *    is its sigreturn ("return" with "sigreturn":true);
 *  - tracing disabled after an instruction (a `disabled` event: an address
 *    filter, a stop) that is not a syscall: where it went is not known,
 *    nothing is made of the instruction after (a call into code outside
 *    the filter that returns untraced leaves no frame);
 *  - an error record or an overflow resets the stack: a "stack_reset"
 *    record with the reason and the depth lost; nothing is assumed across.
 * Function identity (tail calls, unwinding) needs symbols; without them
 * jumps are not calls and an unmatched return pops the top frame.
 *
 * The cost per instruction is a compare of its class; the records are made
 * when the instruction after a call, return, jump or syscall arrives (the
 * target's symbol is that instruction's).
 */
#ifndef PTD_DECODE_CALLS_H
#define PTD_DECODE_CALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record/record.h"

/* A stack deeper than this drops its bottom frames (counted in the
 * records' depth as before; their returns become "unmatched"). */
#define PTD_CALLS_MAX_DEPTH 65536u

struct ptd_calls;

typedef int (*ptd_calls_fn)(void *ctx, const struct ptd_record *rec);

/* Allocate an empty stack into *@ret.  Returns 0 or -ENOMEM. */
int ptd_calls_new(struct ptd_calls **ret);
void ptd_calls_free(struct ptd_calls *c);

/* Take record @r (the thread's next one) and give the call records it
 * completes to @fn before it.  Returns 0, or @fn's non-zero value. */
int ptd_calls_feed(struct ptd_calls *c, const struct ptd_record *r,
		   ptd_calls_fn fn, void *ctx);

/* The current depth (frames on the stack). */
uint32_t ptd_calls_depth(const struct ptd_calls *c);

#endif
