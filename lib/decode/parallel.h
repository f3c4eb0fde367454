/* SPDX-License-Identifier: MIT */
/*
 * One thread's trace decoded on several cores (ptd_decode_opts.jobs > 1),
 * giving exactly the records of the serial decode.
 *
 * The trace is cut at PSBs (decode/psbsplit.h) into parts of a few PSB
 * blocks each.  Worker threads decode the parts at once, each with its
 * own libipt decoder synchronized at the part's PSB, its own copy of the
 * image with the timeline events before the PSB applied, and its own
 * instruction cache.  The callback gets the parts' records in stream
 * order, called by one worker at a time (the one whose part is current
 * has the turn, parallel.c; in runs where the caller takes them:
 * opts.batch), not on the calling thread, which waits.  A part's decoder
 * does not stop at the part's end: it runs on as the serial decoder
 * would, which gives two things.
 * The records made before it handles the next part's PSB+ are the part's
 * (so an instruction before the PSB takes the flags of events after it,
 * as in the serial decode), and the records after it, up to the first
 * instruction (block on the block path), are what the serial decoder gives
 * there: the next part's decoder started without the history before its
 * PSB, and those records are the only ones that history can change.
 *
 * What a decoder synchronized at a PSB does not know, and what is done
 * about it (parallel.c says why each is right):
 *  - The events of the PSB+ itself are status updates either way: the
 *    same records.
 *  - Flags left for the next instruction by events before the PSB (an
 *    enable right before a PSB+), the flags of the first instruction and
 *    block after it, and whether an enable resumes where tracing was
 *    disabled before the PSB (libipt knows the IP it stopped at): taken
 *    from the previous part's records after its cut.
 *  - Return compression: libipt's stack is emptied where a decoder
 *    synchronizes, not at a PSB it reads on across; a return compressed
 *    against a call before the PSB fails (-pte_retstack_empty) in the
 *    part's decoder only.  Such a part is decoded serially.
 *  - The image: a part starts with every timeline event before its PSB
 *    applied; the serial decoder may hold back a removal (decoder.c,
 *    apply_timeline).  If the two did not apply the same events by the
 *    first instruction, the part is decoded serially.
 * Any other difference between the previous part's records after its cut
 * and the part's first records, a cut not where the serial decoder sees
 * the PSB (an error there), or a part with no instruction before the next
 * one, likewise: from that part on the trace is decoded serially (from the
 * start, delivering only what was not delivered yet), and
 * stats.serial_parts / serial_why say so.
 *
 * Decoded serially from the start, also saying so: the block path.  Where
 * pt_blk_next ends a block depends on libipt's block cache, kept in the
 * sections all decoders share, which parts warm in another order than the
 * serial decode.  ptd's insn, event and error records do not depend on it
 * (the block path makes them of runs, decoder.c, the same however libipt
 * cuts them into blocks: a first version dropped the rest of a block after
 * an "expand" error and gave a damaged trace's parts other records), but
 * block records do, the time of an insn record on the block path (its
 * block's) does, and so does how libipt itself reports damaged trace (a
 * cold cache gave -pte_noip where a warm one gave -pte_bad_context, 3
 * bytes on).  A fallback after parts ran would use a cache they warmed,
 * so the block path is serial before any part runs.  Decodes that want
 * neither insn nor block records, and a stream still growing
 * (args.more), are serial too.
 *
 * The loop guard's error does not depend on where a decode began: it
 * comes after exactly the 2^20th instruction since the offset moved.
 *
 * Memory: the parts' records wait for the part before them to be handed
 * on, in chunks (decode/chunks.h), PTD_DECODE_HELD(jobs) records at most
 * (stats.held_max says how many were): the workers wait there, and the
 * part being handed on streams -- its records go to the callback as its
 * worker makes them, however many its trace bytes give.  Images and
 * instruction caches: one for each of at most jobs + 2 parts.
 */
#ifndef PTD_DECODE_PARALLEL_H
#define PTD_DECODE_PARALLEL_H

#include "decode/decoder.h"

/* The most trace bytes a part holds (parallel.c), and about how many
 * records a trace byte gives (bench-decode's `ls -lR` trace: 7.7; tight
 * loops give more): what a part's records held take, for memory limits
 * (daemon/memlimit.h). */
#define PTD_DECODE_PART_MAX_BYTES (4u << 10)
#define PTD_DECODE_RECORDS_PER_BYTE 8u
/* A part's worth of records at that rate, and the most records a decode
 * with @jobs workers holds decoded ahead of its consumer: jobs + 2 parts'
 * worth, whatever the trace gives a byte (the workers wait there; the
 * threads decoded at once of decode/threadpar.h are bound the same). */
#define PTD_DECODE_PART_RECORDS \
	((size_t)PTD_DECODE_PART_MAX_BYTES * PTD_DECODE_RECORDS_PER_BYTE)
#define PTD_DECODE_HELD(jobs) (((size_t)(jobs) + 2) * PTD_DECODE_PART_RECORDS)

/* ptd_decode_thread for o->jobs > 1 (it calls this).  Returns as
 * ptd_decode_thread; on return @a->img and @a->cursor stand where the
 * serial decode would have left them. */
int ptd_decode_parallel(const struct ptd_decode_opts *o,
			const struct ptd_decode_thread_args *a,
			ptd_record_fn fn, void *ctx,
			struct ptd_decode_stats *stats);

#endif
