/* SPDX-License-Identifier: MIT */
/*
 * Splitting per-CPU intel_pt buffers into per-thread streams.
 *
 * perf traces a process with one intel_pt event per CPU (inherit=1, the
 * only mode in which the kernel lets inherited events be mmapped), so each
 * CPU's AUX stream interleaves every thread that ran there.  The records of
 * that CPU's data ring say whose bytes follow: PERF_RECORD_ITRACE_START
 * {pid, tid} when tracing starts for a task, PERF_RECORD_SWITCH (the
 * thread in the sample_id) and PERF_RECORD_SWITCH_CPU_WIDE (the same, plus
 * next_prev_pid/tid) around each context switch.  User-only tracing is
 * off while the kernel switches, so the next thread's bytes begin at a
 * PSB+ or TIP.PGE, and the per-thread byte streams decode on their own.
 * This module knows nothing of PT packets: it only routes bytes.
 *
 * Ownership rule (what is implemented):
 *   The owner of a CPU is the thread named by the last ITRACE_START or
 *   switch-IN record (SWITCH without MISC_SWITCH_OUT: the sample_id's
 *   pid/tid; SWITCH_CPU_WIDE IN: likewise).  A switch-OUT record does NOT
 *   end ownership: AUX bytes announced after it, up to the next IN, still
 *   belong to the thread that went out.  That covers both orders:
 *    - the kernel's, for a per-task (inherited) event: perf_event_switch
 *      (OUT) is emitted before the event is scheduled out, and
 *      pt_event_stop then commits the thread's last AUX chunk, so the
 *      ring reads SWITCH OUT(A), AUX(A), [ITRACE_START(B)], SWITCH IN(B);
 *    - ptd's software producer: AUX(A), SWITCH OUT(A), SWITCH IN(B).
 *   Every PERF_RECORD_AUX chunk goes whole to the owner at the time it is
 *   read (the reader passes a chunk's bytes just before its record).
 *
 * LIMITATION (real hardware): exact only when no AUX chunk spans a
 * context switch.  The kernel commits AUX at every sched-out of the event,
 * but when it swaps equivalent inherited contexts between two threads of
 * one process the event keeps running, and one chunk then holds the tail
 * of one thread and the head of the next.  perf splits such chunks by
 * time (PT TSC/MTC packets against the SWITCH records' sample time); this
 * module does not (no time-based split): such a chunk goes to the owner
 * at the time it is read, and the decoder of that thread sees foreign
 * bytes (the decode desynchronizes and resyncs at the next PSB).
 *
 * Losses (ptd_perf_reader's loss kinds), always reported to the thread the
 * bytes belonged to, through sink.lost(tid, bytes) (bytes 0: unknown):
 *  - AUX_GAP (exact bytes, no record announced them): if the owner did
 *    not change since the last AUX chunk on this CPU, the owner gets the
 *    exact count.  Otherwise the lost bytes could be any of the owners
 *    since that chunk (the record of a lost chunk precedes or follows the
 *    switch): each of them (at most PTD_PERCPU_PENDING_MAX) gets an
 *    unknown-size loss (stats.ambiguous_losses, stats.lost_bytes keeps the
 *    exact total).
 *  - OVERWRITTEN (exact), PARTIAL / COLLISION (unknown: the chunk that
 *    follows has gaps), TRUNCATED (unknown, after the chunk): the owner.
 *  - PERF_RECORD_LOST and a CORRUPT data ring (records unknown, so a
 *    switch may be missing): the owner gets an unknown-size loss and the
 *    CPU has no owner until the next ITRACE_START or switch IN; AUX bytes
 *    meanwhile are dropped and counted (stats.orphan_bytes).
 *  - CORRUPT of an AUX record (overlap not passed again) and LOST_SAMPLES:
 *    no trace bytes were lost; only counted.
 *
 * Validation (untrusted records; never an error, always counted):
 *  - malformed records (ptd_perf_event_parse fails): stats.bad_records,
 *    skipped; the last message is kept (ptd_percpu_last_error()).
 *  - AUX bytes with no owner (before any ITRACE_START / switch IN, or after
 *    a sideband loss): stats.orphan_bytes, dropped.
 *  - switch records out of order: OUT of a thread that is not the owner,
 *    OUT twice, IN of another thread while the owner was not switched
 *    out: stats.bad_switches.  An IN/ITRACE_START is still obeyed (it
 *    names the new owner); a wrong OUT changes nothing.
 *
 * Process filter: only threads whose pid passes reach the sinks (a CPU-wide
 * event sees every process).  With follow_children, a FORK record whose
 * parent passes and whose pid differs from the parent's adds the child
 * process (at most PTD_PERCPU_PIDS_MAX processes).  Because each CPU ring
 * is drained on its own, a child's bytes on another CPU that is drained
 * before the FORK is read are filtered out: drain the CPUs in rounds.
 * Filtered bytes/records are counted.
 *
 * Threads: sink.thread_seen(pid, tid) is called once per thread (and once
 * more after its EXIT if the tid is reused: a FORK, or a record whose
 * sample time is later than the EXIT's), before any bytes, record or loss
 * for it.  At most opts.max_threads threads are tracked; when the table is
 * full, exited threads are forgotten (oldest EXIT first); if none has
 * exited, a new thread's data is dropped and counted (stats.over_limit_*).
 *
 * Records passed to sink.record(tid, e): every parsed record except the
 * control ones (AUX, ITRACE_START, SWITCH, SWITCH_CPU_WIDE, LOST,
 * LOST_SAMPLES).  The tid is the record's own (MMAP/MMAP2/COMM/FORK (the
 * child)/EXIT/ptd CODE/ptd UNMAP), else the sample_id's, else (types this
 * parser does not know) the owner's.  @e and the strings in it are valid
 * only during the call.
 *
 * Sink errors: a negative return aborts the feeding call (and the reader's
 * drain) with that value; the reader replays the failed step later.  State
 * changes are made after the sinks succeed, except that a replayed AUX_GAP
 * may repeat lost() calls made before the failing one.
 *
 * Order across CPUs: NOT restored.  Each ring is in order, but a thread
 * that migrates from CPU a to CPU b has its bytes in both rings, and the
 * splitter passes them in the order the rings are drained.  Exact order
 * needs the caller to drain a's ring before b's (the tests do: each CPU is
 * drained at every switch-out), or a time-ordered merge of buffered
 * segments (perf's ordered events, flushed per round), which this module
 * does not do; the perf.data reader (perfdata/decode.c) feeds it a file's
 * records sorted by sample time, which is that merge for a whole file.  It detects the violation with the sample time (required
 * for this: PERF_SAMPLE_TIME): a switch-in of a thread whose time is
 * earlier than a switch-in of that thread already read from another ring
 * gives the thread an unknown-size loss before the segment's bytes (so
 * its decoder resyncs instead of decoding spliced bytes) and counts
 * stats.reordered.
 *
 * One ptd_percpu serves all CPUs of a trace (the thread table is shared);
 * not thread-safe: drain the CPUs from one thread.
 */
#ifndef PTD_PERF_PERCPU_H
#define PTD_PERF_PERCPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/perf_event.h>

#include "common/diag.h"
#include "perf/ring.h"
#include "perf/sideband.h"

#define PTD_PERCPU_MAX_CPUS PTD_SIDEBAND_MAX_CPUS
#define PTD_PERCPU_THREADS_DEFAULT 4096u
#define PTD_PERCPU_THREADS_MAX (1u << 20)
#define PTD_PERCPU_PIDS_MAX 1024u
/* Owners remembered between two AUX chunks of one CPU (gap attribution). */
#define PTD_PERCPU_PENDING_MAX 8u

/* Per-thread sinks.  Any may be NULL (that output is dropped).  A negative
 * return aborts the feeding call with that value. */
struct ptd_percpu_sink {
	/* @len AUX bytes of thread @tid, in its stream order. */
	int (*bytes)(void *ctx, uint32_t tid, const uint8_t *data, size_t len);
	/* A sideband record for @tid (see above for which). */
	int (*record)(void *ctx, uint32_t tid, const struct ptd_perf_event *e);
	/* Trace of @tid lost here: @bytes exact, or 0 if unknown.  The
	 * thread's decoder must resync (next PSB). */
	int (*lost)(void *ctx, uint32_t tid, uint64_t bytes);
	/* First sight of thread @tid of process @pid. */
	int (*thread_seen)(void *ctx, uint32_t pid, uint32_t tid);
	void *ctx;
};

struct ptd_percpu_opts {
	unsigned ncpus;		/* CPU rings fed: 1..PTD_PERCPU_MAX_CPUS */
	int64_t pid;		/* only this process; -1: every process */
	bool follow_children;	/* also processes forked by one that passes */
	/* The layout of every record in the rings (one sample_type per ring,
	 * as perf requires).  sample_id_all with PERF_SAMPLE_TID is
	 * required: without it a SWITCH record names no thread. */
	uint64_t sample_type;
	bool sample_id_all;
	uint32_t max_threads;	/* 0: PTD_PERCPU_THREADS_DEFAULT */
};

struct ptd_percpu_stats {
	uint64_t records;	/* records fed (AUX included) */
	uint64_t bytes;		/* AUX bytes passed to sink.bytes */
	uint64_t switches;	/* SWITCH(_CPU_WIDE) and ITRACE_START obeyed */
	uint64_t threads;	/* thread_seen calls */
	uint64_t filtered_bytes;/* AUX bytes of filtered-out processes */
	uint64_t filtered_records;
	uint64_t orphan_bytes;	/* AUX bytes with no owner, dropped */
	uint64_t bad_records;	/* malformed, skipped */
	uint64_t bad_switches;	/* out-of-order switch records */
	uint64_t losses;	/* sink.lost calls */
	uint64_t lost_bytes;	/* exact trace bytes lost (all kinds) */
	uint64_t ambiguous_losses;	/* AUX gaps across an owner change */
	uint64_t orphan_losses;	/* losses with no owner to report to */
	uint64_t owner_resets;	/* sideband loss/corruption: owner unknown */
	uint64_t over_limit_bytes;	/* data of untracked threads, dropped */
	uint64_t over_limit_records;
	uint64_t pids_over_limit;	/* children not followed */
	uint64_t reordered;	/* segments read after a later one */
};

struct ptd_percpu;

/* Create a splitter for @o->ncpus CPU rings, calling @sink (copied).
 * Returns 0 and *ret, or
 *   -EINVAL  a NULL argument, ncpus 0 or above PTD_PERCPU_MAX_CPUS,
 *            pid < -1 or above INT32_MAX, max_threads above
 *            PTD_PERCPU_THREADS_MAX, no sample_id_all / PERF_SAMPLE_TID;
 *   -ENOMEM. */
int ptd_percpu_new(const struct ptd_percpu_opts *o,
		   const struct ptd_percpu_sink *sink, struct ptd_percpu **ret);
/* NULL is fine. */
void ptd_percpu_free(struct ptd_percpu *pc);

/* Drain reader @r (CPU @cpu's ring) into the splitter: what
 * ptd_perf_reader_drain() returns (records read, or a sink's negative
 * value), or -EINVAL for a NULL argument or cpu >= ncpus. */
int ptd_percpu_drain(struct ptd_percpu *pc, unsigned cpu,
		     struct ptd_perf_reader *r);

/* The three steps of a drain, for other readers (a perf.data file): AUX
 * bytes, one record (hdr->size bytes readable), one loss, for CPU @cpu.
 * Return 0, a sink's negative value, or -EINVAL (NULL, cpu >= ncpus). */
int ptd_percpu_aux(struct ptd_percpu *pc, unsigned cpu, uint64_t aux_offset,
		   const void *bytes, size_t len);
int ptd_percpu_record(struct ptd_percpu *pc, unsigned cpu,
		      const struct perf_event_header *hdr);
int ptd_percpu_loss(struct ptd_percpu *pc, unsigned cpu,
		    const struct ptd_perf_loss *loss);
/* ptd_percpu_record() for a record its reader already parsed (a perf.data
 * file's events each have their own sample_type; opts.sample_type is then
 * not used).  @e and its strings need to live only during the call. */
int ptd_percpu_event(struct ptd_percpu *pc, unsigned cpu,
		     const struct ptd_perf_event *e);

/* The thread that owns CPU @cpu now: 1 and *ret_pid, *ret_tid set; 0 if none,
 * -EINVAL (NULL, cpu >= ncpus). */
int ptd_percpu_owner(const struct ptd_percpu *pc, unsigned cpu,
		     uint32_t *ret_pid, uint32_t *ret_tid);

void ptd_percpu_get_stats(const struct ptd_percpu *pc,
			  struct ptd_percpu_stats *ret);

/* The message of the last malformed record ("" if none).  Never NULL. */
const char *ptd_percpu_last_error(const struct ptd_percpu *pc);

#endif
