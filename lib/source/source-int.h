/* SPDX-License-Identifier: MIT */
/*
 * Inside a trace source: what every source module shares (source.c) --
 * the decode side (a stream decoder per thread, fed by a buffer per thread
 * or by the per-CPU feed), the address filter, snapshots -- and the
 * operations each module (intelpt.c, software.c) provides.
 */
#ifndef PTD_SOURCE_SOURCE_INT_H
#define PTD_SOURCE_SOURCE_INT_H

#include <stdatomic.h>

#include "aspace/timeline.h"
#include "decode/codesnap.h"
#include "decode/cpufeed.h"
#include "decode/feed.h"
#include "decode/stream.h"
#include "perf/addrfilter.h"
#include "perf/ring.h"
#include "perf/time.h"
#include "source/source.h"

struct ptd_livesink_thread;

/* One traced thread on the decode side. */
struct ptd_source_thread {
	pid_t tid;
	struct ptd_livesink_thread *lt;	/* software source */
	int fd;				/* intel_pt: its event, or -1 */
	struct ptd_perf_buf hwbuf;	/* intel_pt: its buffer */
	struct ptd_stream *stream;
	struct ptd_feed *feed;
	bool done;		/* final decode delivered */
	bool go, last;		/* ptd_source_threads_step: to decode this
				 * round (the final one if @last) */
	bool ended;		/* per-CPU: its EXIT was read */
	/* snapshot mode */
	struct ptd_timeline *tl;	/* software: its image changes */
	uint64_t snap_head;	/* aux_head at its previous snapshot */
	uint8_t *snap;		/* the bytes of the snapshot being taken */
	size_t nsnap;
	uint64_t snap_over;	/* overwritten before this snapshot */
	bool in_snap;		/* part of the snapshot being taken */
	bool snap_kept;		/* snap is @kept's copy (not to free) */
	/* snapshot mode, once ended: its last trace, copied out of its
	 * buffer (ptd_source_threads_retire), which then goes */
	bool copied;		/* its window copied (kept may be NULL:
				 * nothing written, or dropped) */
	bool released;		/* its buffer, feed, stream and charge
				 * given back */
	bool kept_charged;	/* host.keep took @nkept */
	uint8_t *kept;		/* the window's bytes */
	size_t nkept;
	uint64_t kept_head;	/* aux_head at its end */
	uint64_t kept_over;	/* overwritten since its last snapshot */
	bool kept_has_clock;
	struct ptd_perf_clock kept_clock;	/* its buffer's */
};

struct ptd_source_ops {
	enum ptd_source_kind kind;
	unsigned poll_ms;
	/* optional: the filter's most ranges (else PTD_ADDRFILTER_MAX),
	 * and what the source makes of the resolved filter */
	int (*filter_cap)(struct ptd_source *s, uint32_t *cap,
			  struct ptd_diag *diag);
	int (*filter_ready)(struct ptd_source *s, struct ptd_diag *diag);
	/* optional: the decoder's CPU and timing (else an unknown CPU) */
	void (*decode_opts)(const struct ptd_source *s,
			    struct ptd_decode_opts *o);
	int (*start)(struct ptd_source *s, struct ptd_diag *diag);
	bool (*ending)(struct ptd_source *s);
	int (*drain)(struct ptd_source *s, bool final, struct ptd_diag *diag);
	void (*stop)(struct ptd_source *s);		/* optional */
	void (*kick)(struct ptd_source *s);		/* optional */
	void (*cancel)(struct ptd_source *s, struct ptd_diag *diag);
	void (*result)(struct ptd_source *s, struct ptd_source_result *ret);
	void (*stats)(struct ptd_source *s, struct ptd_source_stats *ret);
	/* snapshots: producers paused (threads listed meanwhile added) */
	int (*pause)(struct ptd_source *s);
	void (*resume)(struct ptd_source *s);
	void (*join)(struct ptd_source *s);	/* optional: its threads */
	/* Full mode, thread @d decoded to its end: free its buffer (the
	 * feed over it is gone already).  -EBUSY: not yet (the producer is
	 * still finishing it; asked again next round).  Optional. */
	int (*thread_release)(struct ptd_source *s,
			      struct ptd_source_thread *d);
	void (*destroy)(struct ptd_source *s);	/* the module's part */
	/* optional: a kernel uprobe added to or removed from the process
	 * (source.h, ptd_source_uprobe) */
	int (*uprobe)(struct ptd_source *s, bool add,
		      const struct ptd_swpt_uprobe *u);
};

/* Every module's object starts with this. */
struct ptd_source {
	const struct ptd_source_ops *ops;
	struct ptd_source_params p;

	/* the address filter: the text (copied), parsed, resolved for the
	 * decoder (all zero: none) */
	char *filter_text;
	struct ptd_addrfilter filter;
	struct pt_conf_addr_filter fcfg;

	struct ptd_iscache *iscache;
	struct ptd_insncache *icache;
	struct ptd_codesnap_files snapfiles;	/* code copies, in p.dir */
	/* wall clock <-> perf time, sampled once (records' "wall") */
	bool has_wallref;
	struct ptd_perf_wallref wallref;

	struct ptd_source_thread *dt;
	size_t ndt;
	struct ptd_timeline hist;	/* intel_pt: image changes so far */
	bool leader_exited;		/* its EXIT was read */
	atomic_uint threads, live;	/* intel_pt's counts */

	/* per-CPU mode: one buffer per CPU, decoded by cf */
	struct ptd_cpufeed *cf;
	unsigned ncpus;
	struct ptd_cpufeed_stats cf_last;	/* counters already added */

	struct ptd_perf_reader *snap_reader;	/* snapshot mode */
	pid_t snap_upto_tid;			/* the snapshot's upto */
	int64_t snap_upto_ns;
	atomic_uint_fast64_t trace_bytes, lost_bytes, overwritten;
	atomic_uint_fast64_t at_once;	/* threads decoded on workers */
	/* snapshot mode: ended threads' windows kept now, and those
	 * dropped (the user's memory limit) */
	atomic_uint kept_threads, dropped_threads;
	atomic_uint_fast64_t kept_bytes, dropped_bytes;
};

/* source.c, for the modules */
void ptd_source_init(struct ptd_source *s, const struct ptd_source_ops *ops,
		     const struct ptd_source_params *p);
int ptd_source_record(void *ctx, const struct ptd_record *rec);
int ptd_source_charge(struct ptd_source *s, pid_t tid);
void ptd_source_uncharge(struct ptd_source *s, pid_t tid);
int ptd_source_recheck(struct ptd_source *s, struct ptd_diag *diag);
void ptd_source_wake(struct ptd_source *s);
void ptd_source_stream_opts(const struct ptd_source *s, pid_t tid,
			    struct ptd_stream_opts *so);
/* a new thread slot, zeroed (fd -1), not yet counted in s->ndt */
struct ptd_source_thread *ptd_source_thread_slot(struct ptd_source *s);
/* Every thread decoded to its end gives back what it held -- its buffer
 * (ops->thread_release), its feed and stream decoder, its charge
 * (host.uncharge) -- and (full mode) leaves s->dt, so that a process that
 * starts and ends threads costs what its live ones do.  Snapshot mode:
 * an ended thread's window (the newest bytes of its buffer, what a
 * snapshot would read) is copied first and kept for the snapshots,
 * charged at its size (host.keep); a copy the user's limit refuses
 * makes room by forgetting copies a snapshot has read, earliest thread
 * first, or else is dropped (counted: dropped_threads, dropped_bytes).
 * A kept window leaves at the start of a snapshot after one that read
 * it (not if that snapshot is its thread's trigger's). */
void ptd_source_threads_retire(struct ptd_source *s);
/* One round of the per-thread buffers: drain every thread's (those not
 * done, with a feed) and decode what arrived, at a thread's end (or
 * @final) the rest.  With params.jobs > 1 (full mode), the threads with
 * something to decode are decoded at once (decode/threadpar.h), their
 * records reaching the host thread after thread as they would one after
 * another. */
int ptd_source_threads_step(struct ptd_source *s, bool final,
			    struct ptd_diag *diag);
/* per-CPU mode: the feed over @bufs, and one round of it */
int ptd_source_cpufeed_new(struct ptd_source *s, struct ptd_perf_buf **bufs,
			   unsigned n, uint64_t sample_type,
			   struct ptd_diag *diag);
int ptd_source_cpufeed_round(struct ptd_source *s, bool final,
			     struct ptd_diag *diag);

#endif
