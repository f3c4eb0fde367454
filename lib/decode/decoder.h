/* SPDX-License-Identifier: MIT */
/*
 * Decoding one thread's PT stream into records.
 *
 * Two paths give the same records:
 *  - PTD_PATH_INSN: pt_insn_next, one instruction at a time (the reference).
 *  - PTD_PATH_BLOCK: pt_blk_next, each block expanded into insn records
 *    through the instruction cache (decode/insncache.h); several times
 *    faster.  A differential test proves both give identical records on
 *    every test trace.
 * Block records come straight from pt_blk_next on the block path.
 *
 * Events become event records and set the flags of the instruction they
 * bind to (record/record.h).  A decode error becomes an error record
 * (trace offset, IP, libipt's reason) and decoding resumes at the next PSB:
 * one bad byte never ends a stream.  So does code the trace never leaves
 * (2^20 instructions without trace: a cycle of direct jumps, where the
 * code is not what was traced), which libipt would follow forever.  Image changes from the timeline are
 * applied as the decoder's offset passes their position.
 */
#ifndef PTD_DECODE_DECODER_H
#define PTD_DECODE_DECODER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include <intel-pt.h>

#include "aspace/image.h"
#include "aspace/timeline.h"
#include "decode/insncache.h"
#include "perf/time.h"
#include "record/record.h"

enum ptd_decode_path {
	PTD_PATH_INSN,
	PTD_PATH_BLOCK,
};

/* Receives each record.  A non-zero return stops decoding and is returned
 * by ptd_decode_thread. */
typedef int (*ptd_record_fn)(void *ctx, const struct ptd_record *rec);

/* Receives @n >= 1 records in stream order (ptd_decode_opts.batch), valid
 * only during the call.  A non-zero return stops decoding as
 * ptd_record_fn's does; every one of the @n was made (the consumer may
 * have taken fewer). */
typedef int (*ptd_records_fn)(void *ctx, const struct ptd_record *recs,
			      size_t n);

/* The most records one call of a ptd_records_fn gets from a serial decode
 * (a parallel decode hands over a part's records at once). */
#define PTD_DECODE_BATCH 256u

/* Receives @n >= 1 instructions of thread @tid of process @pid, in stream
 * order, as their addresses alone (ptd_decode_opts.ips): what insn
 * records with those addresses would have been, for a consumer that
 * reads nothing else of them.  Valid only during the call; a non-zero
 * return stops decoding as ptd_record_fn's does. */
typedef int (*ptd_ips_fn)(void *ctx, pid_t pid, pid_t tid,
			  const uint64_t *ips, size_t n);

/* The most addresses one call of a ptd_ips_fn gets. */
#define PTD_DECODE_IPS 1024u

struct ptd_symbols;

struct ptd_decode_opts {
	enum ptd_decode_path path;
	/* PTD_REC_BIT() of the kinds wanted; PTD_REC_BLOCK needs the block
	 * path. Errors are always delivered.  PTD_REC_CALL: the thread's
	 * call stack (decode/calls.h) is kept over this one decode, from
	 * insn and event records made whether or not they are wanted (a
	 * stream kept across decodes: decode/stream.h does it). */
	unsigned want;
	/* With PTD_REC_CALL in @want: while *@calls_gate is false the stack
	 * is not kept and no call record is made; it is kept (from an empty
	 * stack, as at a trace's start) from the first record that sees it
	 * true.  For a caller that knows when nobody can want call records
	 * (a replay before a subscriber asks for them, daemon/replay.c):
	 * the stack costs about as much as the rest of the fan-out.  Set it
	 * once, never back to false.  NULL: always kept. */
	const atomic_bool *calls_gate;
	/* Records in runs, for a consumer with a cost per call (a check of
	 * its state, a wait for room): where the decode's callback is
	 * @batch_of, the decoder may hand records to @batch instead (with the
	 * same ctx), never out of order with those it gives @batch_of.  A
	 * callback that wraps another (its own fn) gets every record one by
	 * one, so opts can be passed on as they are.  The records of a
	 * serial decode are handed over at the latest when it returns: a
	 * consumer that needs each as it is made (a live stream) leaves
	 * these NULL. */
	ptd_records_fn batch;
	ptd_record_fn batch_of;
	/* Runs of addresses: with @batch (and the decode's callback
	 * @batch_of), while *@ips_gate is true, the block path hands the
	 * instructions of its blocks to @ips (same ctx) as addresses, not
	 * insn records: for a consumer that reads nothing of an insn record
	 * but its address, thread and process (daemon/fanout.h: binary
	 * ip,tid subscribers), whose records then cost next to nothing
	 * each.  Never out of order with the records it gives @batch: every
	 * address handed over before a later record is.  The gate is read
	 * when the decode starts and after every call of @batch or @ips,
	 * which is where a consumer may change it: so each address is
	 * decided after the consumer's last call before it.  Only where
	 * nothing stands between the decoder and @batch for insn records
	 * (no call stack kept, no counters, no hold, no block records
	 * wanted; a parallel decode's parts make records); otherwise, or
	 * with the gate false, records as ever.  The flags events give an
	 * instruction and its time are not in an address: a consumer of
	 * them does not open the gate. */
	ptd_ips_fn ips;
	const atomic_bool *ips_gate;
	struct pt_cpu cpu;		/* vendor pcv_unknown: no errata */
	/* Decoder-side address filter (pt_config.addr_filter), for traces
	 * recorded with hardware filters; all zero: none. */
	struct pt_conf_addr_filter addr_filter;
	/* Timing packets (pt_config's fields of the same names): the MTC
	 * period (log2 of CTC ticks an MTC stands for, the event's
	 * mtc_period), the nominal core:bus ratio (for CYC) and CPUID
	 * 0x15's TSC:CTC ratio eax (denominator) / ebx (numerator).  All
	 * zero: MTC and CYC do not advance time; TSC packets alone do. */
	uint8_t mtc_freq;
	uint8_t nom_freq;
	uint32_t cpuid_0x15_eax, cpuid_0x15_ebx;
	/* The records go to a JSON writer: on the block path, give each insn
	 * record the body its instruction cache entry rendered once
	 * (ptd_rec_insn.json_body), so the writer copies it. */
	bool json_bodies;
	/* Time on records (record.h has_time/time, has_wall/wall): with
	 * has_clock, every record with a TSC also gets its perf time through
	 * @clock (ptd_perf_tsc_to_time); with has_wallref too, its wall-clock
	 * time through @wallref (ptd_perf_time_to_wall).  has_clock false:
	 * records carry the TSC only.  A clock with time_mult 0 or time_shift
	 * >= 32 is refused (-EINVAL). */
	bool has_clock;
	bool has_wallref;
	struct ptd_perf_clock clock;
	struct ptd_perf_wallref wallref;
	/* Symbols on insn and block records (ptd_rec_insn.sym), resolved
	 * through @symbols once per instruction of the instruction cache
	 * (both paths then use one); must outlive the decode.  NULL: none. */
	struct ptd_symbols *symbols;
	/* PTD_REC_FIRST_EXEC / PTD_REC_COUNTERS in @want: the executions are
	 * counted (decode/counters.h) into @counters, which the caller
	 * owns, may share between the decodes of one trace's threads and
	 * takes the counts of whenever it likes (ptd_counters_emit); the
	 * decode then gives no counters records itself.  NULL: into a table
	 * of this decode's own, whose counters records (the @counters_top
	 * most executed of each kind; 0: all) end the decode.  first_exec
	 * records come right before their instruction's insn record (where
	 * it would be when insn records are not wanted).  Identical on both
	 * paths and with any number of jobs.  On the block path
	 * args.icache resolves its instructions' slots in @counters and
	 * keeps them past the decode: the table must outlive the cache, or
	 * the cache's next decode (which lets go of it). */
	struct ptd_counters *counters;
	/* Without @counters' kinds in @want: on the block path, give each
	 * insn record its instruction's slot in this table (ptd_rec_insn.
	 * cslot), resolved once per cached instruction, counting nothing:
	 * for a caller that counts the records itself (decode/stream.c), at
	 * an increment an execution, not a lookup.  NULL: none. */
	struct ptd_counters *counter_slots;
	uint32_t counters_top;
	/* PTD_REC_TRACE in @want: hot traces (decode/traces.h) built from
	 * the counted executions, heads hot at @trace_threshold executions
	 * (0: PTD_TRACES_DEFAULT_THRESHOLD); a @counters without traces
	 * gets them (ptd_counters_enable_traces).  trace_withdrawn records
	 * come with them. */
	uint32_t trace_threshold;
	/* Give PTD_REC_IMAGE records (record.h: internal, for a caller that
	 * builds traces from the records itself, decode/stream.c and
	 * parallel.c): each unmap and exec of the timeline as the decode
	 * applies it, in order with the records.  A decode that builds
	 * traces (PTD_REC_TRACE in @want) makes and takes them itself. */
	bool image_records;
	/* Threads decoding one thread's trace (decode/parallel.h): 0 or 1,
	 * the serial decode; more: the trace cut at its PSBs, the parts
	 * decoded at once and stitched into the records the serial decode
	 * gives (or decoded serially where that cannot be proven), the
	 * callback called on the workers, one at a time.  Not with
	 * args.more.  At most PTD_DECODE_MAX_JOBS.  (The readers of
	 * saved traces also decode short threads at once with it:
	 * decode/threadpar.h.) */
	unsigned jobs;
	/* Bytes of trace per part of a parallel decode, rounded up to whole
	 * PSB blocks (1: every PSB starts a part); 0: about len / (jobs * 16),
	 * from 2 KiB to 4 KiB (PTD_DECODE_PART_MAX_BYTES). */
	uint32_t part_bytes;
};

#define PTD_DECODE_MAX_JOBS 64u

struct ptd_decode_stats {
	uint64_t insns;
	uint64_t blocks;
	uint64_t events;
	uint64_t errors;
	uint64_t bytes;		/* trace bytes */
	uint64_t skipped;	/* trace bytes skipped after errors */
	uint64_t tl_applied;	/* timeline events applied */
	/* opts.jobs > 1: parts of the trace the parallel decode gave to the
	 * serial decoder instead (decode/parallel.h says when), and why the
	 * first was (a static string; NULL: none was). */
	uint64_t serial_parts;
	const char *serial_why;
	/* opts.jobs > 1: parts the trace was cut into (0: it was not, a
	 * trace too short for two parts, or one the parallel decoder does
	 * not cut: decoded serially without a serial_why) */
	uint64_t parts;
	/* opts.jobs > 1, parts: the most records held at once, decoded ahead
	 * of the callback (PTD_DECODE_HELD(jobs) at most, parallel.h). */
	uint64_t held_max;
	/* ... the records held at all: decoded ahead of the callback and
	 * handed on later; the others went to it as their worker made them
	 * (parallel.c, the turn) */
	uint64_t held;
	/* opts.jobs > 1: the thread was decoded serially on a worker, at once
	 * with the trace's other threads (decode/threadpar.h; its parts are
	 * 0). */
	bool at_once;
	/* args.more: the decode stopped at an error whose resync point is
	 * not in the trace yet, holding back what followed it: it ended
	 * there, not at the end of the trace. */
	bool held_at_error;
};

/*
 * A PSB+ with a FUP, from @at (the PSB) to @end (just past its PSBEND),
 * stream offsets; @ip: its FUP's IP.  A decode that passes it sets
 * @in_step when it was in step with the trace there: the status update of
 * its MODE.Exec came within the PSB+, at @ip.  libipt holds a status
 * update back until the decoder reaches its IP, so a decode that corrupt
 * trace sent elsewhere gets it later or never (decode/stream.c: a decode
 * starting at that PSB would not be in the same state).
 */
struct ptd_psb_probe {
	uint64_t at, end, ip;
	bool in_step;
};

struct ptd_decode_thread_args {
	const uint8_t *pt;	/* must stay valid during the call */
	size_t len;
	pid_t pid, tid;
	struct ptd_image *img;		/* the thread's image */
	struct ptd_tl_cursor *cursor;	/* NULL: image never changes */
	struct ptd_insncache *icache;	/* block path; NULL: a private one */
	/* Stream offset of pt[0] (0: the whole stream).  Offsets in records
	 * and the positions compared with the cursor's events are
	 * base + offset in @pt. */
	uint64_t base;
	/* More trace may follow @pt (a stream still growing, decode/stream.h):
	 * deliver only what a decode of the longer stream would deliver the
	 * same: the records before the last instruction (insn path) or the
	 * last block (block path) decoded; the rest is held back, not
	 * delivered.  Running out of trace -- also after an error, before the
	 * next PSB+ is complete -- is not an error record, and neither is an
	 * error at an offset libipt's read-ahead pushed to the end of @pt.
	 * false: today's end-of-stream behaviour. */
	bool more;
	/* The parallel decoder's own (decode/parallel.c); zero otherwise. */
	const struct ptd_decode_part *part;
	/* The image's section cache is shared with decodes on other threads
	 * (a part's, decode/parallel.h; another thread's,
	 * decode/threadpar.h): every decoder step that touches it holds
	 * @lock.  NULL: not shared. */
	pthread_mutex_t *lock;
	/* PSBs to report on (struct ptd_psb_probe); may be NULL. */
	struct ptd_psb_probe *probes;
	size_t nprobes;
};

/*
 * One part of a trace decoded on its own for the parallel decoder.  The
 * decode starts at pt[0] (@a.base: its stream offset), with tracing off
 * there if @tracing_off (a PSB+ without an IP), and runs on past @cut, the
 * stream offset of the PSB that ends the part (0: none): when the decoder
 * handles the first event of that PSB+ (a status update at or after @cut),
 * the records made before are the part's; once they have been
 * delivered, @on_cut(@ctx, st, clean) is called with the part's
 * statistics; @clean is false if an
 * error record at or after @cut came before (the cut is not where the
 * serial decode would see it).  (The section cache the parts share:
 * args.lock.)
 */
struct ptd_decode_part {
	uint64_t cut;
	bool tracing_off;
	void (*on_cut)(void *ctx, const struct ptd_decode_stats *st,
		       bool clean);
	void *ctx;
	/* Where the decoder makes its next insn records when nothing stands
	 * between it and the callback (as a serial decode makes its runs
	 * for opts.batch): up to @room of them, one after the other from
	 * @place on.  They do not go to the callback: once @room were
	 * delivered, and before the callback gets any other record, before
	 * @on_cut and at the end, @on_run(@ctx, n) says that the next n
	 * records are there (its non-zero value stops the decode as the
	 * callback's does).  Read at the start and after each call of the
	 * callback, @on_run or @on_cut, which may change them.  @room 0: in
	 * the decoder's own memory, each to the callback. */
	struct ptd_record *place;
	size_t room;
	int (*on_run)(void *ctx, size_t n);
};

/* Decode @a->pt to the end.  Returns 0 when the stream was decoded to its
 * end (errors inside it are records, not failures), the callback's non-zero
 * value if it stopped early, or a negative error for bad arguments (-EINVAL)
 * or allocation failure. */
int ptd_decode_thread(const struct ptd_decode_opts *o,
		      const struct ptd_decode_thread_args *a,
		      ptd_record_fn fn, void *ctx,
		      struct ptd_decode_stats *stats);

#endif
