/* SPDX-License-Identifier: MIT */
/*
 * Decoding one thread's PT stream into records (decode/decoder.h).
 *
 * The two paths differ only in how they get instructions: pt_insn_next
 * gives one, pt_blk_next gives a block that is expanded through the
 * instruction cache.  Everything else -- events, the flags they put on
 * instructions, errors and resynchronisation, timeline changes, module
 * names -- is one piece of code both paths call, so both give the same
 * records.
 *
 * Event flags (record/record.h).  The last insn record (and on the block
 * path the last block record) is kept pending, not delivered.  An event
 * that binds to the instruction before it (disabled, async_disabled,
 * async_branch, stop, tsx abort/commit) adds its flag to the pending
 * records; an event that binds to the next instruction (enabled, overflow)
 * leaves flags for the next insn record.  Event records wait behind the
 * pending records (a TraceStop arrives after the TIP.PGD's disabled event
 * and still binds to the same instruction), and everything pending is
 * delivered, in trace order, when the next instruction, block or error
 * comes, at the end, or when too many events wait.  Delivery order is
 * therefore always the order of the trace: insn..., [block], event...,
 * insn...
 *
 * One file of over 1,000 lines on purpose: both paths call the
 * per-instruction helpers (new_insn, rec_init, module_of, the pending
 * records) once per instruction, and within one translation unit the
 * compiler inlines them; a path in a file of its own would make each a
 * call on the hottest loop ptd has (the build has no LTO).
 */
#include "decode/decoder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/diag.h"
#include "common/lockopt.h"
#include "decode/calls.h"
#include "decode/counters.h"
#include "decode/parallel.h"
#include "sym/symbols.h"

/* Internal: the callback asked to stop (its value is in dec.cb_rc).  Far
 * outside libipt's error range. */
#define DEC_STOP (-1000000)
/* Internal: more trace may follow and what comes next depends on it: stop
 * here, holding back the pending records (decoder.h, args.more). */
#define HOLD (-1000001)

/* isids below this get a slot in the per-decoder module cache. */
#define MODCACHE_MAX 65536

/* Event records that may wait behind a pending instruction. */
#define MAX_QUEUED_EVENTS 32

/* Code the trace never leaves (direct jumps in a cycle, where the trace
 * and the code disagree) needs no trace to decode: libipt would follow it
 * forever.  After this many instructions in a row that did not move the
 * decoder's trace offset, it is an error and decoding resyncs at the next
 * PSB.  Real code meets a conditional branch, a return or an indirect
 * branch long before (each needs trace).  Counted are the instructions
 * libipt decoded, not the records made of them: on the block path, a
 * block that cannot be expanded (code libipt decodes and ptd's x86
 * decoder refuses) still took libipt its ninsn instructions.  The error
 * comes after exactly the instruction that reaches the limit, on both
 * paths, wherever libipt's blocks end and wherever the decode started
 * (a part of a parallel decode, decode/parallel.h): see loop_after. */
#define MAX_INSNS_WITHOUT_TRACE (1u << 20)

struct modent {
	const char *name;
	uint64_t delta;		/* module offset = ip + delta (mod 2^64) */
	bool valid;
	/* ptd_image_gen of the isid, as of image change @gen_at - 1 of the
	 * decode (dec.img_changes); gen_at 0: not known */
	uint32_t gen;
	uint64_t gen_at;
};

struct dec {
	const struct ptd_decode_opts *o;
	const struct ptd_decode_thread_args *a;
	ptd_record_fn fn;
	void *ctx;
	int cb_rc;
	/* Where records go: fn/ctx, or (o->batch) out_record/this, which
	 * gathers them in @out, handed to o->batch when full and at the end
	 * (out_flush). */
	ptd_record_fn efn;
	void *ectx;
	struct ptd_record *out;
	size_t nout;
	/* Runs of addresses (opts.ips): @nips instructions in @ips, handed
	 * over before any later record (out_record) as @out's are before
	 * any later address (ips_begin); @ips_live: the gate as read after
	 * the consumer's last call.  @ips NULL: no runs in this decode. */
	uint64_t *ips;
	size_t nips;
	bool ips_live;

	struct pt_insn_decoder *insn;
	struct pt_block_decoder *blk;
	struct ptd_insncache *ic;
	bool own_ic;

	bool want_insn, want_block, want_event;
	bool want_image;	/* PTD_REC_IMAGE (o->image_records, traces) */
	/* Call records (decode/calls.h) from the records delivered, which
	 * then include insn and event records the caller may not want:
	 * @user_want says which go on. */
	struct ptd_calls *calls;
	bool calls_live;		/* o->calls_gate seen open (or none) */
	unsigned user_want;
	/* Counts and first executions (decode/counters.h): @xt, the
	 * caller's table or @own_xt; also fed insn records the caller may
	 * not want. */
	struct ptd_counters *xt, *own_xt;
	unsigned xwant;		/* PTD_COUNTERS_KINDS asked for */

	/* args.more: records are not delivered but kept here until the
	 * decoder steps to the next instruction (insn path) or block (block
	 * path); what is kept at the end is dropped.  So a decode delivers
	 * exactly the records before its last instruction or block, wherever
	 * it started: with trace missing at the end, libipt may run a block
	 * through code where an event not seen yet would have ended it, and
	 * events after the last instruction are queued or not depending on
	 * what came before.  The next decode, with more trace, gives them. */
	bool hold;
	/* Insn records go straight to efn while no call stack is kept:
	 * no counters or hold between, and the caller wants them (call_fn's
	 * common case, taken by new_insn). */
	bool direct;
	struct ptd_record *tail;
	size_t ntail, captail;
	bool nomem;
	/* Pending records (see the top comment).  The pending insn record
	 * is *@pi: @pend_insn, or, where nothing stands between it and
	 * @out (new_insn), the slot of @out it will take: made there, not
	 * copied there. */
	struct ptd_record *pi;
	struct ptd_record pend_insn;
	struct ptd_record pend_blk;
	bool have_insn, have_blk;
	/* Event records waiting behind them; only while have_insn or
	 * have_blk. */
	struct ptd_record evq[MAX_QUEUED_EVENTS];
	size_t nevq;
	uint32_t next_flags;	/* for the next insn record */
	/* Tracing is disabled: every instruction before the last disable
	 * has been reported (see apply_timeline).  Also before the first
	 * enable. */
	bool tracing_off;
	/* The last instruction reported was kernel code (the upper half of
	 * the address space): in a trace of user and kernel code, every
	 * user instruction before this kernel entry has been reported. */
	bool in_kernel;

	/* Time of the instruction or block being emitted. */
	bool has_tsc;
	uint64_t tsc;

	/* Where the last decode step failed. */
	const char *err_ctx;
	uint64_t err_ip;
	bool err_ip_valid;

	/* A disable bound by ptd, not libipt (see disable_at_branch): the
	 * IP where tracing resumes is not known after anything but a call,
	 * so the next enable is not a resume. */
	bool resume_unknown;

	/* The last instruction of the last block expanded, where the next
	 * block's first is looked for (ptd_insncache_get_from). */
	struct ptd_icache_ref blk_last;

	/* Resync progress guard. */
	uint64_t last_sync;
	bool have_sync;

	/* Loop guard (MAX_INSNS_WITHOUT_TRACE): the decoder's offset when
	 * last seen to move, and the instructions libipt decoded since that
	 * did not move it.  @loop_recheck: events were fetched or the decoder
	 * synchronized since the last step (the offset may have moved
	 * between steps).  @err_off: where the last step's error is (the
	 * loop error's: @loop_off), when @err_off_valid. */
	bool have_loop_off, loop_recheck;
	uint64_t loop_off, loop_still;
	/* The offset after the last step (loop_after), if it could be read;
	 * still the decoder's offset until loop_recheck is set. */
	bool step_off_ok;
	uint64_t step_off;
	/* The offset at which the time (has_tsc, tsc) was last read, if
	 * known (step_time). */
	bool time_ok;
	uint64_t time_off;
	bool err_off_valid, loop_err;
	uint64_t err_off;
	/* The offset moved during the last step. */
	bool step_moved;

	/* The block path's run (see on_block): the last block ended without
	 * needing trace, and the next one continues ptd's walk at @run_ip;
	 * @run_walk_ip: ptd's last instruction, @run_end_ip: libipt's last
	 * (@run_walked: both are set); @run_drop: an instruction could not
	 * be expanded (@run_err at @run_err_ip), the run's other
	 * instructions are no records. */
	bool run_open, run_walked, run_drop;
	uint64_t run_ip, run_walk_ip, run_end_ip;
	int run_err;
	uint64_t run_err_ip;

	struct modent *mods;
	size_t nmods;
	uint64_t img_changes;	/* timeline events applied or tried */

	struct ptd_decode_stats st;

	/* A part of a parallel decode (args.part; NULL: none).  @cut_left:
	 * records made before the cut still to be delivered; @cut_seen: the
	 * cut was passed; @cut_bad: an error record at or after the cut came
	 * before it; @cut_st: the statistics at the cut. */
	const struct ptd_decode_part *part;
	pthread_mutex_t *lock;		/* args.lock */
	size_t cut_left;
	bool cut_seen, cut_bad;
	struct ptd_decode_stats cut_st;
	/* The part's window (ptd_decode_part.place, room) as it last said:
	 * @nwin insn records made at @win and delivered, not yet reported
	 * to its on_run (win_flush); @win NULL: none. */
	struct ptd_record *win;
	size_t nwin, room;
};

/* The section cache shared with decodes on other threads (args.lock):
 * every use of it (a miss of the module cache or the instruction cache,
 * a timeline change, a message interned) holds the lock. */
static inline void lock(const struct dec *d)
{
	ptd_lock_opt(d->lock);
}

static inline void unlock(const struct dec *d)
{
	ptd_unlock_opt(d->lock);
}

/* --- The two libipt decoders behind one set of calls. --- */

static int d_sync(struct dec *d)
{
	return d->insn ? pt_insn_sync_forward(d->insn)
		       : pt_blk_sync_forward(d->blk);
}

/* Offsets are stream offsets: libipt's offset in the buffer plus the
 * buffer's base (decoder.h). */
static int d_offset(const struct dec *d, uint64_t *off)
{
	int err = d->insn ? pt_insn_get_offset(d->insn, off)
			  : pt_blk_get_offset(d->blk, off);

	if (err >= 0)
		*off += d->a->base;
	return err;
}

static int d_sync_offset(const struct dec *d, uint64_t *off)
{
	int err = d->insn ? pt_insn_get_sync_offset(d->insn, off)
			  : pt_blk_get_sync_offset(d->blk, off);

	if (err >= 0)
		*off += d->a->base;
	return err;
}

/* Stream offset of the end of the buffer. */
static uint64_t end_offset(const struct dec *d)
{
	return d->a->base + d->a->len;
}

static int d_event(struct dec *d, struct pt_event *ev)
{
	return d->insn ? pt_insn_event(d->insn, ev, sizeof(*ev))
		       : pt_blk_event(d->blk, ev, sizeof(*ev));
}

static uint64_t cur_offset(const struct dec *d)
{
	uint64_t off = d->a->base;

	(void)d_offset(d, &off);
	return off;
}

static void d_time(struct dec *d)
{
	uint32_t lost_mtc, lost_cyc;
	uint64_t tsc;
	int err;

	err = d->insn ? pt_insn_time(d->insn, &tsc, &lost_mtc, &lost_cyc)
		      : pt_blk_time(d->blk, &tsc, &lost_mtc, &lost_cyc);
	d->has_tsc = err >= 0;
	d->tsc = d->has_tsc ? tsc : 0;
}

/* After a step (loop_after): the decoder's time, read again only where
 * the offset moved since it was last read -- libipt's time changes only
 * as it reads timing packets, which moves the offset; most steps read
 * none (an instruction that is no branch, a TNT bit already fetched). */
static void step_time(struct dec *d)
{
	if (d->time_ok && d->step_off_ok && d->step_off == d->time_off)
		return;
	d_time(d);
	d->time_ok = d->step_off_ok;
	d->time_off = d->step_off;
}

/* --- Records and delivery. --- */

/* Is the call stack kept from this record on (decoder.h calls_gate)? */
static bool calls_open(struct dec *d)
{
	if (!d->calls_live && (!d->o->calls_gate ||
			       atomic_load_explicit(d->o->calls_gate,
						    memory_order_relaxed)))
		d->calls_live = true;
	return d->calls_live;
}

/* The consumer may have changed the gate of the runs of addresses in
 * its last call (decoder.h, opts.ips): read it. */
static void ips_gate_read(struct dec *d)
{
	d->ips_live = d->ips && atomic_load_explicit(d->o->ips_gate,
						     memory_order_relaxed);
}

/* The gathered records to o->batch.  Returns its value. */
static int out_flush(struct dec *d)
{
	size_t n = d->nout;
	int rc;

	d->nout = 0;
	if (!n)
		return 0;
	rc = d->o->batch(d->ctx, d->out, n);
	ips_gate_read(d);
	return rc;
}

/* The gathered addresses to o->ips (counted here, not one by one).
 * Returns its value. */
static int ips_flush(struct dec *d)
{
	size_t n = d->nips;
	int rc;

	d->nips = 0;
	if (!n)
		return 0;
	d->st.insns += n;
	rc = d->o->ips(d->ctx, d->a->pid, d->a->tid, d->ips, n);
	ips_gate_read(d);
	return rc;
}

/* The record fn of a decode that hands records over in runs. */
static int out_record(void *ctx, const struct ptd_record *r)
{
	struct dec *d = ctx;

	/* the addresses before it go first */
	if (d->nips) {
		int rc = ips_flush(d);

		if (rc)
			return rc;
	}
	if (r != &d->out[d->nout])	/* (not made in place: new_insn) */
		d->out[d->nout] = *r;
	return ++d->nout == PTD_DECODE_BATCH ? out_flush(d) : 0;
}

/* The part's window as it says now, after a call of its callbacks: none
 * where call records or counters could come between the decoder and the
 * callback (a part has neither: decode/parallel.c). */
static void win_read(struct dec *d)
{
	d->nwin = 0;
	d->room = d->part ? d->part->room : 0;
	d->win = d->room && d->direct && !d->calls ? d->part->place : NULL;
}

/* The records made in the part's window to its on_run.  Returns its
 * value. */
static int win_flush(struct dec *d)
{
	size_t n = d->nwin;
	int rc;

	if (!n)
		return 0;
	rc = d->part->on_run(d->part->ctx, n);
	win_read(d);
	return rc;
}

/* Deliver @r to efn, or, made in the part's window, count it there: the
 * window's records go before any other (decoder.h). */
static inline int emit(struct dec *d, const struct ptd_record *r)
{
	int rc;

	if (d->win) {
		if (r == &d->win[d->nwin])
			return ++d->nwin == d->room ? win_flush(d) : 0;
		if ((rc = win_flush(d)) != 0)
			return rc;
	}
	rc = d->efn(d->ectx, r);
	if (d->part)
		win_read(d);
	return rc;
}

/* A part's cut was reached and its records delivered: the window's
 * reported first.  Returns 0 or DEC_STOP. */
static int cut_done(struct dec *d)
{
	int rc = win_flush(d);

	if (rc) {
		d->cb_rc = rc;
		return DEC_STOP;
	}
	d->part->on_cut(d->part->ctx, &d->cut_st, !d->cut_bad);
	win_read(d);
	return 0;
}

static int call_fn(struct dec *d, const struct ptd_record *r)
{
	int rc = 0;

	if (d->calls && calls_open(d))
		rc = ptd_calls_feed(d->calls, r, d->efn, d->ectx);
	/* after the calls it completes, right before the instruction */
	if (d->xt && rc == 0)
		rc = ptd_counters_feed(d->xt, r, d->xwant, d->efn, d->ectx);
	if (rc == 0 && (!(d->calls || d->xt) ||
			(d->user_want & PTD_REC_BIT(r->type))))
		rc = emit(d, r);

	if (rc) {
		d->cb_rc = rc;
		return DEC_STOP;
	}
	/* The last record made before a part's cut (see cut_at). */
	if (d->cut_left && !--d->cut_left)
		return cut_done(d);
	return 0;
}

/*
 * A part's cut (decoder.h, struct ptd_decode_part): the decoder is about
 * to handle the first event of the PSB+ that ends the part.  What
 * is pending now (the last instruction, block, the events queued behind
 * them) was made before and belongs to the part; it is delivered first,
 * whenever the decoder next flushes, and may still take flags from the
 * events after the cut, as in the serial decode.  Everything made from
 * here on is the next part's.
 */
static int cut_at(struct dec *d)
{
	d->cut_seen = true;
	d->cut_st = d->st;
	d->cut_left = d->have_insn + d->have_blk + d->nevq;
	return d->cut_left ? 0 : cut_done(d);
}

/* Keep @r back (args.more, see struct dec). */
static int keep(struct dec *d, const struct ptd_record *r)
{
	if (d->ntail == d->captail) {
		size_t cap = d->captail ? 2 * d->captail : 256;
		struct ptd_record *t = reallocarray(d->tail, cap, sizeof(*t));

		if (!t) {
			d->nomem = true;
			return DEC_STOP;
		}
		d->tail = t;
		d->captail = cap;
	}
	d->tail[d->ntail++] = *r;
	return 0;
}

static int deliver(struct dec *d, const struct ptd_record *r)
{
	return d->hold ? keep(d, r) : call_fn(d, r);
}

/* The decoder steps to a new instruction or block: what was kept is
 * final. */
static int release(struct dec *d)
{
	size_t n = d->ntail;

	d->ntail = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = call_fn(d, &d->tail[i]);

		if (rc)
			return rc;
	}
	return 0;
}

/* Give @r, whose has_tsc/tsc are set, the times of its TSC (decoder.h:
 * has_clock, has_wallref). */
static void rec_times(const struct dec *d, struct ptd_record *r)
{
	const struct ptd_decode_opts *o = d->o;

	r->has_time = true;
	r->time = ptd_perf_tsc_to_time(&o->clock, r->tsc);
	if (o->has_wallref) {
		r->has_wall = true;
		r->wall = ptd_perf_time_to_wall(&o->wallref, r->time);
	}
}

/* (the test inline: it is made for every instruction) */
static inline void rec_time(const struct dec *d, struct ptd_record *r)
{
	if (r->has_tsc && d->o->has_clock)
		rec_times(d, r);
}

static void rec_init(const struct dec *d, struct ptd_record *r,
		     enum ptd_rec_type type)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	r->pid = d->a->pid;
	r->tid = d->a->tid;
}

/* Deliver the pending insn record, the pending block record, then the
 * event records waiting behind them. */
static int flush_pending(struct dec *d)
{
	size_t n = d->nevq;
	int rc;

	d->nevq = 0;
	if (d->have_insn) {
		d->have_insn = false;
		rc = deliver(d, d->pi);
		if (rc)
			return rc;
	}
	if (d->have_blk) {
		d->have_blk = false;
		rc = deliver(d, &d->pend_blk);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < n; i++) {
		rc = deliver(d, &d->evq[i]);
		if (rc)
			return rc;
	}
	return 0;
}

/* modent_of, growing the cache. */
static struct modent *modent_grow(struct dec *d, int isid)
{
	size_t n = d->nmods ? d->nmods : 64;
	struct modent *mods;

	if (isid < 0 || isid >= MODCACHE_MAX)
		return NULL;
	while (n <= (size_t)isid)
		n *= 2;
	mods = realloc(d->mods, n * sizeof(*mods));
	if (!mods)
		return NULL;
	memset(mods + d->nmods, 0, (n - d->nmods) * sizeof(*mods));
	d->mods = mods;
	d->nmods = n;
	return &d->mods[isid];
}

/* The per-isid cache entry of @isid, or NULL (an isid too large, or no
 * memory: the caller goes without). */
static inline struct modent *modent_of(struct dec *d, int isid)
{
	if (isid >= 0 && (size_t)isid < d->nmods)
		return &d->mods[isid];
	return modent_grow(d, isid);
}

/* Which mapping of section @isid the image holds (ptd_image_gen), kept
 * in its cache entry @m (may be NULL) until the image changes. */
static inline uint32_t gen_in(struct dec *d, struct modent *m, int isid)
{
	if (isid <= 0)
		return 0;
	if (!m || m->gen_at != d->img_changes + 1) {
		uint32_t g = ptd_image_gen(d->a->img, isid);

		if (!m)
			return g;
		m->gen = g;
		m->gen_at = d->img_changes + 1;
	}
	return m->gen;
}

static uint32_t gen_of(struct dec *d, int isid)
{
	return gen_in(d, modent_of(d, isid), isid);
}

/* Module name and offset of @ip in section @isid, cached per isid: an isid
 * names one immutable section, and the names live as long as the iscache. */
static void module_of(struct dec *d, int isid, uint64_t ip,
		      const char **ret_name, uint64_t *ret_off)
{
	struct modent *m = modent_of(d, isid);
	const char *name;
	uint64_t off;

	if (m && m->valid) {
		*ret_name = m->name;
		*ret_off = ip + m->delta;
		return;
	}
	lock(d);
	if (ptd_image_module_of(d->a->img, isid, ip, &name, &off) < 0 ||
	    !name) {
		name = "[unknown]";
		off = ip;
	}
	unlock(d);
	if (m) {
		m->name = name;
		m->delta = off - ip;
		m->valid = true;
	}
	*ret_name = name;
	*ret_off = off;
}

/* An insn record's module, module offset and mapping (ptd_image_gen) of
 * @ip in section @isid. */
static inline void insn_module(struct dec *d, struct ptd_rec_insn *r)
{
	struct modent *m = modent_of(d, r->isid);

	if (m && m->valid) {
		r->module = m->name;
		r->modoff = r->ip + m->delta;
	} else {
		module_of(d, r->isid, r->ip, &r->module, &r->modoff);
		m = modent_of(d, r->isid);	/* may have moved */
	}
	r->gen = gen_in(d, m, r->isid);
}

/* The symbol of @ip (section @isid, @mode) when symbols are wanted: from
 * the instruction cache (resolved once per instruction), else, for bytes
 * the cache cannot decode (a truncated instruction), resolved now. */
static void sym_of(struct dec *d, int isid, uint64_t ip,
		   enum pt_exec_mode mode, const char **ret_sym,
		   uint64_t *ret_off)
{
	const struct ptd_icache_entry *e;
	int err;

	*ret_sym = NULL;
	*ret_off = 0;
	if (!d->o->symbols)
		return;
	e = ptd_insncache_get(d->ic, d->a->img, isid, ip, mode, &err);
	if (e) {
		*ret_sym = e->sym;
		*ret_off = e->symoff;
		return;
	}
	lock(d);
	*ret_sym = ptd_symbols_resolve(
		d->o->symbols,
		ptd_iscache_module(ptd_image_iscache(d->a->img), isid),
		d->a->pid, ip, ret_off);
	unlock(d);
}

/* Where an insn record that goes straight to the consumer is made: the
 * slot it takes in @out, or the next one of a part's window
 * (ptd_decode_part.place); NULL: in @pend_insn. */
static inline struct ptd_record *insn_place(const struct dec *d)
{
	if (d->out)
		return &d->out[d->nout];
	return d->win ? &d->win[d->nwin] : NULL;
}

/*
 * Make a new pending insn record: the previous one is delivered, the new
 * one takes the flags left by events before it.  Returns NULL if the
 * callback asked to stop.
 */
static inline __attribute__((always_inline)) struct ptd_rec_insn *
new_insn(struct dec *d)
{
	struct ptd_record *r = d->pi;
	/* nothing between the decoder and @out for an insn record now */
	bool straight = d->direct && !(d->calls && calls_open(d));

	d->st.insns++;
	/* flush_pending's common case, without its calls: the last
	 * instruction alone is pending */
	if (d->have_insn && straight && !d->have_blk && !d->nevq &&
	    !d->cut_left) {
		/* (made in @out's slot: efn is out_record, which keeps it
		 * there; or in a part's window) */
		int rc = emit(d, r);

		d->have_insn = false;
		if (rc) {
			d->cb_rc = rc;
			return NULL;
		}
	} else if (flush_pending(d)) {
		return NULL;
	}
	/* Where it will go straight to @out (or to a part's window):
	 * made in the slot it takes there.  No record can be delivered
	 * before it: events and blocks wait behind it, an error record
	 * flushes it first, and if the call stack's gate opens meanwhile,
	 * the stack starts empty with this instruction, so it makes no call
	 * record before it. */
	if (straight && (r = insn_place(d)) != NULL) {
		r->type = PTD_REC_INSN;
		r->pid = d->a->pid;
		r->tid = d->a->tid;
	} else {
		r = &d->pend_insn;
	}
	d->pi = r;
	/* Field by field, not rec_init's memset of the whole record (the
	 * largest union member is not this one): this runs once per
	 * instruction.  The caller sets what the instruction says; raw
	 * beyond its size is never read.  Type, pid and tid of @pend_insn
	 * were set when the decode began: it is never another record. */
	r->has_tsc = d->has_tsc;
	r->tsc = d->tsc;
	r->has_time = r->has_wall = false;
	r->time = r->wall = 0;
	rec_time(d, r);
	r->u.insn.flags = d->next_flags;
	r->u.insn.json_body = NULL;
	r->u.insn.json_body_len = 0;
	r->u.insn.json_body_nosym_len = 0;
	r->u.insn.sym = NULL;
	r->u.insn.symoff = 0;
	r->u.insn.cslot = 0;
	r->u.insn.gen = 0;
	d->next_flags = 0;
	d->have_insn = true;
	return &r->u.insn;
}

/* An error record at @off; @detail (may be NULL) is a string that
 * outlives the record. */
static int emit_error_rec(struct dec *d, int code, bool ptd_code,
			  uint64_t off, bool ip_valid, uint64_t ip,
			  const char *context, uint64_t skipped,
			  const char *detail)
{
	struct ptd_record r;
	int rc;

	/* libipt's offset reaches the end of the buffer only when its read
	 * ahead ran into the end: with more trace it would be elsewhere. */
	if (d->a->more && off >= end_offset(d))
		return HOLD;
	if (d->part && d->part->cut && !d->cut_seen && off >= d->part->cut)
		d->cut_bad = true;
	rc = flush_pending(d);
	if (rc)
		return rc;
	rec_init(d, &r, PTD_REC_ERROR);
	r.u.error.code = code;
	r.u.error.ptd_code = ptd_code;
	r.u.error.offset = off;
	r.u.error.ip = ip_valid ? ip : 0;
	r.u.error.ip_valid = ip_valid;
	r.u.error.context = context ? context : "decode";
	r.u.error.skipped = skipped;
	r.u.error.detail = detail;
	d->st.errors++;
	return deliver(d, &r);
}

static int emit_error(struct dec *d, int code, bool ptd_code, uint64_t off,
		      bool ip_valid, uint64_t ip, const char *context,
		      uint64_t skipped)
{
	return emit_error_rec(d, code, ptd_code, off, ip_valid, ip, context,
			      skipped, NULL);
}

/* A ptd error record at @off with @detail (may be NULL). */
static int emit_error_detail(struct dec *d, int code, uint64_t off,
			     const char *context, const char *detail)
{
	return emit_error_rec(d, code, true, off, false, 0, context, 0,
			      detail);
}

/* --- Events: the one place flags are decided. --- */

static void event_flags(const struct pt_event *ev, uint32_t *ret_prev,
			uint32_t *ret_next)
{
	uint32_t prev = 0, next = 0;

	switch (ev->type) {
	case ptev_enabled:
		next = PTD_F_ENABLED;
		if (ev->variant.enabled.resumed)
			next |= PTD_F_RESUMED;
		break;
	case ptev_disabled:
		prev = PTD_F_DISABLED;
		break;
	case ptev_async_disabled:
		prev = PTD_F_DISABLED | PTD_F_INTERRUPTED;
		break;
	case ptev_async_branch:
		prev = PTD_F_INTERRUPTED;
		break;
	case ptev_overflow:
		next = PTD_F_RESYNCED;
		break;
	case ptev_stop:
		prev = PTD_F_STOPPED;
		break;
	case ptev_tsx:
		/* A status update only restates the state in PSB+. */
		if (ev->status_update)
			break;
		if (ev->variant.tsx.aborted)
			prev = PTD_F_ABORTED;
		else if (!ev->variant.tsx.speculative)
			prev = PTD_F_COMMITTED;
		break;
	case ptev_paging:
	case ptev_async_paging:
	case ptev_exec_mode:
	case ptev_vmcs:
	case ptev_async_vmcs:
	case ptev_exstop:
	case ptev_mwait:
	case ptev_pwre:
	case ptev_pwrx:
	case ptev_ptwrite:
	case ptev_tick:
	case ptev_cbr:
	case ptev_mnt:
		break;
	}
	*ret_prev = prev;
	*ret_next = next;
}

static int apply_timeline(struct dec *d, bool after_step);
static int run_end(struct dec *d, bool check);
static int on_event_record(struct dec *d, const struct pt_event *ev,
			   uint64_t off);

static int on_event(struct dec *d, const struct pt_event *ev, uint64_t off)
{
	uint32_t prev, next;
	int rc;

	event_flags(ev, &prev, &next);
	if (d->have_insn)
		d->pi->u.insn.flags |= prev;
	if (d->have_blk)
		d->pend_blk.u.block.flags |= prev;
	if (ev->type == ptev_disabled || ev->type == ptev_async_disabled)
		d->tracing_off = true;
	else if (ev->type == ptev_enabled || ev->type == ptev_overflow)
		d->tracing_off = false;
	/* Tracing stopped: whatever an earlier event left for the next
	 * instruction did not find one. */
	if (ev->type == ptev_disabled || ev->type == ptev_async_disabled)
		d->next_flags = 0;
	d->next_flags |= next;

	d->st.events++;
	rc = on_event_record(d, ev, off);
	/* Tracing is off now: this is where the thread's own map changes
	 * (and any removal deferred so far) apply, before an enable that
	 * libipt may report right after this event. */
	if (rc == 0 && d->tracing_off)
		rc = apply_timeline(d, false);
	return rc;
}

/* Where a record made now goes: behind the pending instruction or block
 * (in the queue of events, in order), or, nothing pending, @one, which
 * the caller delivers (queued_end).  NULL: the queue could not be
 * flushed (*@ret_rc). */
static struct ptd_record *queued(struct dec *d, struct ptd_record *one,
				 int *ret_rc)
{
	*ret_rc = 0;
	if (d->nevq == MAX_QUEUED_EVENTS) {
		*ret_rc = flush_pending(d);
		if (*ret_rc)
			return NULL;
	}
	return (d->have_insn || d->have_blk) ? &d->evq[d->nevq++] : one;
}

/* @r, filled, from queued(): nothing pending, nothing it must wait for. */
static int queued_end(struct dec *d, struct ptd_record *r,
		      struct ptd_record *one)
{
	return r == one ? deliver(d, r) : 0;
}

static int on_event_record(struct dec *d, const struct pt_event *ev,
			   uint64_t off)
{
	struct ptd_record one, *r;
	int rc;

	if (!d->want_event)
		return 0;
	r = queued(d, &one, &rc);
	if (!r)
		return rc;
	rec_init(d, r, PTD_REC_EVENT);
	r->u.event.ev = *ev;
	r->u.event.offset = off;
	r->has_tsc = ev->has_tsc;
	r->tsc = ev->has_tsc ? ev->tsc : 0;
	rec_time(d, r);
	return queued_end(d, r, &one);
}

/* The decode applied @ev, which was @op over [@start, @end): an unmap
 * or exec is a PTD_REC_IMAGE record. */
static int on_image_record(struct dec *d, enum ptd_tl_op op, uint64_t start,
			   uint64_t end)
{
	struct ptd_record one, *r;
	int rc;

	if (!d->want_image || (op != PTD_TL_UNMAP && op != PTD_TL_EXEC))
		return 0;
	r = queued(d, &one, &rc);
	if (!r)
		return rc;
	rec_init(d, r, PTD_REC_IMAGE);
	r->u.image.exec = op == PTD_TL_EXEC;
	r->u.image.start = r->u.image.exec ? 0 : start;
	r->u.image.end = r->u.image.exec ? UINT64_MAX : end;
	return queued_end(d, r, &one);
}

/* A PSB+'s status update, with @ip, fetched at offset @off: the probes
 * of args.probes it is in step with (struct ptd_psb_probe). */
static void probe_psbs(struct dec *d, uint64_t off, uint64_t ip)
{
	for (size_t i = 0; i < d->a->nprobes; i++) {
		struct ptd_psb_probe *p = &d->a->probes[i];

		if (off >= p->at && off <= p->end && ip == p->ip)
			p->in_step = true;
	}
}

/* Fetch and handle the events libipt says are pending.  Returns the new
 * status, a libipt error, or DEC_STOP. */
static int drain_events(struct dec *d, int status)
{
	while (status & pts_event_pending) {
		struct pt_event ev;
		uint64_t off = d->a->base;
		int rc;

		/* An event ends the block path's run (see on_block). */
		if (d->run_open || d->run_drop) {
			rc = run_end(d, true);
			if (rc)
				return rc;
		}
		d->loop_recheck = true;
		(void)d_offset(d, &off);
		status = d_event(d, &ev);
		if (status < 0) {
			d->err_ctx = "event";
			d->err_ip_valid = false;
			return status;
		}
		if (ev.status_update && ev.type == ptev_exec_mode &&
		    !ev.ip_suppressed)
			probe_psbs(d, off, ev.variant.exec_mode.ip);
		/* The PSB+ that ends a part: its events are status updates.
		 * Events before them may come with an offset past the PSB
		 * (libipt reads ahead to find out whether another event is
		 * pending), but their packets came before it. */
		if (d->part && d->part->cut && !d->cut_seen &&
		    ev.status_update && off >= d->part->cut &&
		    cut_at(d) == DEC_STOP)
			return DEC_STOP;
		if (ev.type == ptev_enabled || ev.type == ptev_overflow) {
			if (d->resume_unknown && ev.type == ptev_enabled)
				ev.variant.enabled.resumed = 0;
			d->resume_unknown = false;
		}
		rc = on_event(d, &ev, off);
		if (rc)
			return rc;
	}
	return status;
}

/*
 * Apply the timeline events due at the decoder's offset.  Errors become
 * error records; decoding goes on.  Returns 0 or DEC_STOP.
 *
 * libipt reads ahead: its offset can pass an event's position while
 * instructions before that position are still to be reported.  Adding code
 * early is harmless, but removing it (unmap, exec) is not, so while tracing
 * is enabled events are applied in order only up to the first removal; the
 * rest waits until tracing is disabled (the thread's own mmap/munmap/execve
 * sits between the TIP.PGD of its syscall and the TIP.PGE after it, and by
 * the disabled event every instruction before it has been reported) or, in
 * a trace of kernel code too, until the decoder is in the kernel (the
 * syscall's own kernel code: user code before it has been reported).
 */
static int apply_timeline(struct dec *d, bool after_step)
{
	struct ptd_tl_cursor *c = d->a->cursor;
	const struct ptd_tl_event *ev;
	uint64_t off;

	/* Once per step: nothing left is the common case, and the step's
	 * own offset is the decoder's until events are fetched. */
	if (!c || c->next_pos == UINT64_MAX)
		return 0;
	if (after_step && d->step_off_ok && !d->loop_recheck)
		off = d->step_off;
	else if (d_offset(d, &off) < 0)
		return 0;
	if (!ptd_tl_cursor_due(c, off))
		return 0;
	while (ptd_tl_cursor_due(c, off) && (ev = ptd_tl_cursor_peek(c))) {
		enum ptd_tl_op op = ev->op;
		uint64_t start = ev->start, end = ev->end;
		struct ptd_diag diag;
		int n, rc;

		if (!d->tracing_off && !d->in_kernel &&
		    (op == PTD_TL_UNMAP || op == PTD_TL_EXEC))
			break;
		diag.msg[0] = '\0';
		lock(d);
		d->img_changes++;	/* even a failure may change it */
		n = ptd_tl_cursor_apply_next(c, d->a->img, &diag);
		if (n < 0) {
			const char *msg = ptd_iscache_intern(
				ptd_image_iscache(d->a->img),
				diag.msg[0] ? diag.msg : NULL);

			unlock(d);
			rc = emit_error_detail(d, n, off, "image", msg);
			if (rc)
				return rc;
			continue;
		}
		unlock(d);
		if (!n)
			break;
		d->st.tl_applied++;
		rc = on_image_record(d, op, start, end);
		if (rc)
			return rc;
	}
	return 0;
}

/* --- The loop guard (MAX_INSNS_WITHOUT_TRACE). --- */

#define LOOP_CTX                                                           \
	"loop: over 2^20 instructions without trace (the code is not what " \
	"was traced?)"

/* Before a step: events fetched or a sync since the last one may have
 * moved the offset. */
static void loop_before(struct dec *d)
{
	uint64_t off;

	d->err_off_valid = false;
	d->step_off_ok = false;
	if (d->have_loop_off && !d->loop_recheck)
		return;
	d->loop_recheck = false;
	if (d_offset(d, &off) < 0)
		return;
	if (!d->have_loop_off || off != d->loop_off) {
		d->have_loop_off = true;
		d->loop_off = off;
		d->loop_still = 0;
	}
}

/* The loop guard's count after a step that decoded @n instructions and
 * left the decoder at offset @off (d->step_off_ok: it could be read);
 * @allow: how many more may decode without trace.  See loop_after. */
static uint64_t loop_count(struct dec *d, uint64_t n, uint64_t off,
			   uint64_t allow, bool *ret_loop)
{
	bool moved;

	moved = !d->step_off_ok || !d->have_loop_off || off != d->loop_off;
	uint64_t still = moved && n ? n - 1 : n;

	d->step_moved = moved;
	*ret_loop = still >= allow;
	if (*ret_loop) {
		d->err_off_valid = d->have_loop_off;
		d->err_off = d->loop_off;
		d->loop_recheck = true;
		d->have_loop_off = false;
		return allow;
	}
	if (moved) {
		d->have_loop_off = true;
		d->loop_off = off;
		d->loop_still = 0;
	} else {
		d->loop_still += n;
	}
	return n;
}

/*
 * After a step that decoded @n instructions.  Only a step's last
 * instruction reads trace (a pt_blk_next block ends at the first one that
 * needs it), so if the offset moved, the first n - 1 did not move it.
 * Returns how many of the @n come before the loop error: @n, or, with
 * *ret_loop set, the count up to the one that reaches the limit.  So the
 * error comes after the same instruction however libipt cut the
 * instructions into blocks (its block cache decides that), and a decode
 * started at a PSB counts as one that read on across it: reading the
 * PSB+ moves the offset.
 */
static uint64_t loop_after(struct dec *d, uint64_t n, bool *ret_loop)
{
	uint64_t off, allow = MAX_INSNS_WITHOUT_TRACE - d->loop_still;

	d->step_off_ok = d_offset(d, &off) >= 0;
	d->step_off = off;
	return loop_count(d, n, off, allow, ret_loop);
}

/*
 * loop_after for a step of pt_insn_next that read no trace, so that the
 * offset is the one the step before left (@off; the caller knows).
 * libipt 2.0.5 reads trace in pt_insn_next only to fetch an event the
 * last query announced -- which that step's own check of its next IP
 * fetched already, so none is left announced -- and to find where a
 * branch goes: an instruction of class ptic_other, stepped without error,
 * read none.  This saves two calls into libipt for most instructions.
 */
static uint64_t loop_after_still(struct dec *d, uint64_t off, bool *ret_loop)
{
	d->step_off_ok = true;
	d->step_off = off;
	return loop_count(d, 1, off, MAX_INSNS_WITHOUT_TRACE - d->loop_still,
			  ret_loop);
}

static void loop_error(struct dec *d)
{
	d->err_ctx = LOOP_CTX;
	d->err_ip_valid = false;
	d->loop_err = true;
}

/* --- The instruction path. --- */

/* (inline: it runs once per instruction, from one place) */
static inline __attribute__((always_inline)) int
emit_pt_insn(struct dec *d, const struct pt_insn *in)
{
	struct ptd_rec_insn *r;
	int rc;

	if (!d->want_insn) {
		d->st.insns++;
		d->next_flags = 0;
		return release(d);
	}
	r = new_insn(d);
	if (!r)
		return DEC_STOP;
	rc = release(d);
	if (rc)
		return rc;
	r->ip = in->ip;
	r->isid = in->isid;
	r->mode = in->mode;
	r->iclass = in->iclass;
	r->size = in->size <= pt_max_insn_size ? in->size : pt_max_insn_size;
	/* all of it: a copy of fixed size is two moves, not a call */
	memcpy(r->raw, in->raw, sizeof(r->raw));
	if (in->speculative)
		r->flags |= PTD_F_SPECULATIVE;
	if (in->truncated)
		r->flags |= PTD_F_TRUNCATED;
	insn_module(d, r);
	if (d->o->symbols)
		sym_of(d, in->isid, in->ip, in->mode, &r->sym, &r->symoff);
	return 0;
}

/*
 * libipt 2.0.5's pt_insn_next binds a TIP.PGD whose IP is suppressed only
 * to a far branch or an instruction changing CPL or CR3.  Real CPUs also
 * send one, with no FUP, when an indirect call or jump or a return leaves
 * the IP filter (the target is outside, so it is not traced): pt_insn_next
 * then fails on the branch with -pte_bad_query (-pte_eos if the TIP.PGD
 * ends the trace), with the disabled event in hand, where pt_blk_next ends
 * the block with the branch and gives the event.  libipt 2.2 does what the
 * block decoder does.
 *
 * @in, the branch, has been reported.  If the event libipt holds is that
 * disable, handle it as the block path does and return the status that
 * follows it (tracing is off: events, or the end); else return @err, the
 * error to report.  Returns DEC_STOP if the callback asked to stop.
 */
static int disable_at_branch(struct dec *d, const struct pt_insn *in,
			     int err)
{
	struct pt_event ev;
	uint64_t off = d->a->base;
	int status, rc;

	switch (in->iclass) {
	case ptic_cond_jump:
	case ptic_call:
	case ptic_jump:
	case ptic_return:
		break;	/* the next ip needs trace */
	case ptic_error:
	case ptic_other:
	case ptic_ptwrite:
	case ptic_far_call:	/* libipt binds these itself */
	case ptic_far_return:
	case ptic_far_jump:
		return err;
	}
	(void)d_offset(d, &off);
	d->loop_recheck = true;
	status = pt_insn_event(d->insn, &ev, sizeof(ev));
	if (status < 0 || ev.type != ptev_disabled || !ev.ip_suppressed)
		return err;	/* none, or not this case: decoding resyncs */
	/* The block decoder expects tracing to resume after a call only. */
	d->resume_unknown = in->iclass != ptic_call;
	rc = on_event(d, &ev, off);
	return rc ? rc : status;
}

/* One pt_insn_next.  Returns its status, a libipt error or DEC_STOP. */
static int step_insn(struct dec *d)
{
	struct pt_insn in;
	int status, rc;
	bool decoded, loop;
	/* the offset the last step left, if nothing read trace since */
	bool known = d->step_off_ok && !d->loop_recheck && d->have_loop_off;
	uint64_t known_off = d->step_off;

	if (known) {	/* loop_before's work where it keeps the anchor */
		d->err_off_valid = false;
		d->step_off_ok = false;
	} else {
		loop_before(d);
	}
	memset(&in, 0, sizeof(in));
	status = pt_insn_next(d->insn, &in, sizeof(in));
	/* On error the instruction may still have been decoded (the error
	 * came while finding its successor): it executed. */
	decoded = status >= 0 || (in.iclass != ptic_error && in.size);
	if (known && status >= 0 && in.iclass == ptic_other &&
	    d->loop_still + 1 < MAX_INSNS_WITHOUT_TRACE) {
		/* Most instructions: one that read no trace, the offset
		 * known (loop_after_still).  The offset is the last step's,
		 * which is the loop guard's anchor (a step that moved it made
		 * it the anchor), so the guard only counts, and the time is
		 * the one step_time read at that offset: both without a
		 * call. */
		d->step_off_ok = true;
		d->step_off = known_off;
		d->step_moved = false;
		d->loop_still++;
		loop = false;
	} else {
		if (known && status >= 0 && in.iclass == ptic_other)
			(void)loop_after_still(d, known_off, &loop);
		else
			(void)loop_after(d, decoded, &loop);
		step_time(d);
	}
	if (decoded) {
		d->in_kernel = (int64_t)in.ip < 0;
		rc = emit_pt_insn(d, &in);
		if (rc)
			return rc;
	}
	if (loop) {
		loop_error(d);
		return -PTD_EDECODE;
	}
	if ((status == -pte_bad_query || status == -pte_eos) &&
	    in.iclass != ptic_error && in.size) {
		status = disable_at_branch(d, &in, status);
		if (status >= 0 || status == DEC_STOP || status == HOLD)
			return status;
	}
	if (status < 0) {
		d->err_ctx = "decode";
		d->err_ip = in.ip;
		d->err_ip_valid = in.ip != 0;
	}
	return status;
}

/* --- The block path. --- */

/* The instruction that ends block @b when it is truncated: its bytes are in
 * the block, not in one section. */
static int emit_truncated(struct dec *d, const struct pt_block *b,
			  uint64_t ip)
{
	struct ptd_rec_insn *r = new_insn(d);
	struct ptd_x86_insn x;

	if (!r)
		return DEC_STOP;
	r->ip = ip;
	r->isid = b->isid;
	r->mode = b->mode;
	r->size = b->size <= pt_max_insn_size ? b->size : pt_max_insn_size;
	memcpy(r->raw, b->raw, r->size);
	r->iclass = b->iclass;
	if (r->iclass == ptic_error &&
	    ptd_x86_decode(r->raw, r->size, ip, b->mode, &x) == 0)
		r->iclass = x.iclass;
	r->flags |= PTD_F_TRUNCATED | (b->speculative ? PTD_F_SPECULATIVE : 0);
	insn_module(d, r);
	sym_of(d, b->isid, ip, b->mode, &r->sym, &r->symoff);
	return 0;
}

/*
 * Runs.  Where pt_blk_next ends a block depends on libipt's block cache,
 * kept in the sections and so warmed by every decode before (and by the
 * other parts of a parallel decode, in another order): a warm cache runs
 * a block on through direct calls and backward jumps where a cold one
 * ends it.  Only the last instruction of a block can need trace, and a
 * block always ends at one that does and at an event, so the stretches
 * between those -- runs -- are the same whatever the cache holds.  The
 * records are made of runs, not blocks: ptd's walk goes on from one block
 * to the next within a run (run_ip); an instruction the cache cannot
 * provide makes the rest of its run no records (run_drop) and its error
 * record comes where the run ends; and ptd's walk is checked against
 * libipt's at a run's end.  The offsets of those error records are
 * libipt's at the run's end.  So the insn, event and error records of the
 * block path do not depend on the cache (block records and, with timing
 * packets, the time of an insn record -- its block's -- do).
 */

/* Whether block @b ended at an instruction that needs trace (or at a
 * truncated one: libipt ends a block there too) -- ptd's decode of it;
 * @last: ptd's entry for the last instruction walked (may be NULL).
 * Where ptd cannot decode it, libipt's class says so, or, where that is
 * a call or jmp (direct or not), whether the offset moved: an indirect
 * one reads a TIP. */
static bool run_ends(struct dec *d, const struct pt_block *b,
		     const struct ptd_icache_entry *last)
{
	int err;

	if (b->truncated)
		return true;
	if (!last || last->ip != b->end_ip)
		last = ptd_insncache_get(d->ic, d->a->img, b->isid, b->end_ip,
					 b->mode, &err);
	if (last) {
		switch (last->kind) {
		case PTD_X86_OTHER:
		case PTD_X86_JMP_DIRECT:
		case PTD_X86_CALL_DIRECT:
		case PTD_X86_PTWRITE:
			return false;
		case PTD_X86_COND:
		case PTD_X86_JMP_INDIRECT:
		case PTD_X86_CALL_INDIRECT:
		case PTD_X86_RET:
		case PTD_X86_SYSCALL:
		case PTD_X86_INT:
		case PTD_X86_FAR:
			return true;
		}
	}
	switch (b->iclass) {
	case ptic_cond_jump:
	case ptic_return:
	case ptic_far_call:
	case ptic_far_return:
	case ptic_far_jump:
	case ptic_error:
		return true;
	case ptic_call:
	case ptic_jump:
		return d->step_moved;
	case ptic_other:
	case ptic_ptwrite:
		return false;
	}
	return true;
}

/* The run ends (see above): report what its end reports.  @check: ptd's
 * walk reached libipt's last instruction (not a loop error inside it).
 * Returns 0, DEC_STOP or HOLD. */
static int run_end(struct dec *d, bool check)
{
	bool drop = d->run_drop, walked = d->run_walked;
	uint64_t walk_ip = d->run_walk_ip;

	d->run_open = d->run_drop = d->run_walked = false;
	if (drop)
		return emit_error(d, d->run_err, true, cur_offset(d), true,
				  d->run_err_ip, "expand", 0);
	/* The walk must end where libipt says the run ends. */
	if (check && walked && walk_ip != d->run_end_ip)
		return emit_error(d, -PTD_EDECODE, true, cur_offset(d), true,
				  walk_ip, "expand", 0);
	return 0;
}

/* Whether a block's instructions may go as addresses (decoder.h,
 * opts.ips): the gate is open and nothing stands between the decoder and
 * the consumer for insn records (new_insn's straight), nothing pending. */
static bool ips_open(struct dec *d)
{
	return d->ips_live && d->direct && !d->want_block && !d->have_insn &&
	       !d->have_blk && !d->nevq && !(d->calls && calls_open(d));
}

/*
 * A block's instructions are about to go as addresses (ips_open held):
 * the records made before them go first, which may close the gate; the
 * flags of events before the first are not in an address.  Returns
 * whether they go (0) or not (1: records instead), or DEC_STOP.
 */
static int ips_begin(struct dec *d)
{
	int rc;

	if (d->nout && (rc = out_flush(d)) != 0) {
		d->cb_rc = rc;
		return DEC_STOP;
	}
	if (!d->ips_live)
		return 1;
	d->next_flags = 0;
	return 0;
}

/* Instruction @ip as an address (after ips_begin).  Returns 0, DEC_STOP,
 * or 1: handed over, and the gate is closed now (records from the
 * next). */
static inline int put_ip(struct dec *d, uint64_t ip)
{
	int rc;

	d->ips[d->nips++] = ip;
	if (d->nips < PTD_DECODE_IPS)
		return 0;
	if ((rc = ips_flush(d)) != 0) {
		d->cb_rc = rc;
		return DEC_STOP;
	}
	return d->ips_live ? 0 : 1;
}

/* The instruction at @ip of a run could not be had from the cache (@err):
 * its error record comes at the run's end, what is pending is final now.
 * Returns 0 or DEC_STOP. */
static int run_dropped(struct dec *d, int err, uint64_t ip,
		       const struct ptd_icache_entry **ret_last)
{
	d->run_drop = true;
	d->run_err = err;
	d->run_err_ip = ip;
	d->run_walked = false;
	*ret_last = NULL;
	return flush_pending(d);
}

/*
 * Expand the first @n of @b's instructions into insn records, going on
 * with ptd's walk of the run (each instruction followed by its successor:
 * fall-through or direct jmp/call target).  Sets *ret_last to the cache
 * entry of the last instruction (NULL if truncated or not reached).
 * Returns 0 or DEC_STOP.
 */
static int expand_block(struct dec *d, const struct pt_block *b, uint64_t n,
			const struct ptd_icache_entry **ret_last)
{
	const struct ptd_icache_entry *e = NULL;
	uint64_t ip = d->run_open ? d->run_ip : b->ip;
	/* its mapping's generation, for records only (looked up at the
	 * first) */
	uint32_t gen = 0;
	bool have_gen = false;
	/* its instructions as addresses, until the gate closes (on_block
	 * left nothing pending) */
	bool ips = false;

	*ret_last = NULL;
	if (d->run_drop)
		return 0;
	if (ips_open(d)) {
		int rc = ips_begin(d);

		if (rc == DEC_STOP)
			return rc;
		ips = rc == 0;
	}
	uint64_t i = 0;
	/* Addresses: the walk alone, its bookkeeping once (the loop below
	 * takes a truncated last instruction, and whatever follows the gate
	 * closing). */
	if (ips) {
		uint64_t stop = n == b->ninsn && b->truncated ? n - 1 : n;
		const struct ptd_icache_entry *last = NULL;
		uint64_t walk_ip = 0;
		int err = 0, rc = 0;

		for (; i < stop; i++) {
			const struct ptd_icache_entry *f =
				e ? ptd_insncache_next(d->ic, d->a->img, e,
						       &err)
				  : ptd_insncache_get_from(
					    d->ic, d->a->img, &d->blk_last,
					    b->isid, ip, b->mode, &err);

			if (!f)
				return run_dropped(d, err, ip, ret_last);
			e = f;
			if ((rc = put_ip(d, ip)) == DEC_STOP)
				break;
			last = e;
			walk_ip = ip;
			ip = e->next;
			if (rc) {	/* closed: records from the next on */
				ips = false;
				i++;
				break;
			}
		}
		if (last) {
			*ret_last = last;
			d->run_walked = true;
			d->run_walk_ip = walk_ip;
		}
		if (rc == DEC_STOP)
			return rc;
	}
	for (; i < n; i++) {
		struct ptd_rec_insn *r;
		int err = 0, rc;

		if (i + 1 == b->ninsn && b->truncated) {
			d->run_walked = true;
			d->run_walk_ip = ip;
			return emit_truncated(d, b, ip);
		}
		/* Successors follow links, and so does the first
		 * instruction where the block follows the last one as
		 * before (no hash lookup). */
		e = e ? ptd_insncache_next(d->ic, d->a->img, e, &err)
		      : ptd_insncache_get_from(d->ic, d->a->img, &d->blk_last,
					       b->isid, ip, b->mode, &err);
		if (!e)
			return run_dropped(d, err, ip, ret_last);
		if (ips) {
			rc = put_ip(d, ip);
			if (rc == DEC_STOP)
				return rc;
			/* 1: closed, records from the next on */
			ips = rc == 0;
		} else {
			r = new_insn(d);
			if (!r)
				return DEC_STOP;
			if (!have_gen) {
				gen = gen_of(d, b->isid);
				have_gen = true;
			}
			r->ip = ip;
			r->isid = b->isid;
			r->gen = gen;
			r->mode = b->mode;
			r->iclass = e->iclass;
			r->size = e->size;
			memcpy(r->raw, e->raw, sizeof(r->raw));
			if (b->speculative)
				r->flags |= PTD_F_SPECULATIVE;
			r->module = e->module;
			r->modoff = e->modoff;
			r->sym = e->sym;
			r->symoff = e->symoff;
			if (d->xt || d->o->counter_slots)
				r->cslot = ptd_insncache_cslot(d->ic, e, gen);
			if (d->o->json_bodies) {
				r->json_body = ptd_insncache_json(
					d->ic, e, &r->json_body_len);
				r->json_body_nosym_len =
					r->json_body ? e->json_nosym_len : 0;
			}
		}
		*ret_last = e;
		d->run_walked = true;
		d->run_walk_ip = ip;
		ip = e->next;
	}
	d->run_ip = ip;
	ptd_insncache_ref(d->ic, e, &d->blk_last);
	return 0;
}

static int emit_block(struct dec *d, const struct pt_block *b,
		      uint32_t first_flags,
		      const struct ptd_icache_entry *last)
{
	struct ptd_rec_block *r = &d->pend_blk.u.block;

	rec_init(d, &d->pend_blk, PTD_REC_BLOCK);
	d->pend_blk.has_tsc = d->has_tsc;
	d->pend_blk.tsc = d->tsc;
	rec_time(d, &d->pend_blk);
	r->ip = b->ip;
	r->end_ip = b->end_ip;
	r->isid = b->isid;
	r->mode = b->mode;
	r->iclass = b->iclass;
	r->ninsn = b->ninsn;
	r->flags = first_flags;
	if (b->speculative)
		r->flags |= PTD_F_SPECULATIVE;
	if (b->truncated) {
		r->flags |= PTD_F_TRUNCATED;
		r->size = b->size <= pt_max_insn_size ? b->size
						      : pt_max_insn_size;
		memcpy(r->raw, b->raw, r->size);
	}
	/* libipt's block cache may not know the last class. */
	if (r->iclass == ptic_error && !b->truncated) {
		int err;

		if (!last)
			last = ptd_insncache_get(d->ic, d->a->img, b->isid,
						 b->end_ip, b->mode, &err);
		if (last)
			r->iclass = last->iclass;
	}
	module_of(d, b->isid, b->ip, &r->module, &r->modoff);
	/* after @last's use: the lookup may move the cache's entries */
	sym_of(d, b->isid, b->ip, b->mode, &r->sym, &r->symoff);
	d->have_blk = true;
	return 0;
}

/* Block @b, of which the first @n instructions come before a loop error
 * (@n < b->ninsn: the error follows, the run ends there). */
static int on_block(struct dec *d, const struct pt_block *b, uint64_t n)
{
	const struct ptd_icache_entry *last = NULL;
	uint32_t first_flags = d->next_flags;
	int rc;

	d->st.blocks++;
	/* A new block: the previous block and its last insn are done. */
	rc = flush_pending(d);
	if (!rc)
		rc = release(d);
	if (rc)
		return rc;
	if (d->want_insn) {
		rc = expand_block(d, b, n, &last);
		if (rc)
			return rc;
		d->run_end_ip = b->end_ip;
		if (n < b->ninsn)
			d->run_open = false;	/* the loop error ends it */
		else if (run_ends(d, b, last))
			rc = run_end(d, true);
		else
			d->run_open = true;
		if (rc)
			return rc;
	} else {
		d->st.insns += b->ninsn;
	}
	/* Flags for the first instruction were taken by it (or would have
	 * been). */
	d->next_flags = 0;
	if (d->want_block)
		return emit_block(d, b, first_flags, last);
	return 0;
}

/* Where the block decoder failed, as pt_insn_next would report it: the
 * instruction it could not fetch for -pte_nomap/-pte_bad_insn (the
 * successor of the last one when that needs no trace), else the last. */
static void block_error_ip(struct dec *d, const struct pt_block *b,
			   int status)
{
	d->err_ip_valid = true;
	if (!b->ninsn) {
		d->err_ip = b->ip;
		d->err_ip_valid = b->ip != 0;
		return;
	}
	d->err_ip = b->end_ip;
	if ((status == -pte_nomap || status == -pte_bad_insn) &&
	    !b->truncated) {
		int err;
		const struct ptd_icache_entry *e = ptd_insncache_get(
			d->ic, d->a->img, b->isid, b->end_ip, b->mode, &err);

		if (e && (e->kind == PTD_X86_OTHER ||
			  e->kind == PTD_X86_JMP_DIRECT ||
			  e->kind == PTD_X86_CALL_DIRECT))
			d->err_ip = e->next;
	}
}

static int step_block(struct dec *d)
{
	struct pt_block b;
	int status, rc;

	uint64_t n;
	bool loop;

	loop_before(d);
	memset(&b, 0, sizeof(b));
	status = pt_blk_next(d->blk, &b, sizeof(b));
	n = loop_after(d, b.ninsn, &loop);
	step_time(d);
	/* Even on error the block's instructions executed. */
	if (b.ninsn) {
		d->in_kernel = (int64_t)b.ip < 0;
		rc = on_block(d, &b, n);
		if (rc)
			return rc;
	}
	if (loop) {
		loop_error(d);
		return -PTD_EDECODE;
	}
	if (status < 0) {
		d->err_ctx = "decode";
		block_error_ip(d, &b, status);
	}
	return status;
}

/* --- The loop both paths share. --- */

/* Decode from a sync point until an error or the end.  Returns a libipt
 * error (-pte_eos at the end), -PTD_EDECODE (the loop guard) or DEC_STOP. */
static int decode_segment(struct dec *d, int status)
{
	for (;;) {
		const struct ptd_tl_cursor *c;
		int rc;

		status = drain_events(d, status);
		if (status < 0)
			return status;
		if (status & pts_eos)
			return -pte_eos;
		/* nothing due at the last step's offset (apply_timeline's
		 * first test): the common case, without a call */
		c = d->a->cursor;
		if (c && c->next_pos != UINT64_MAX &&
		    !(d->step_off_ok && !d->loop_recheck &&
		      !ptd_tl_cursor_due(c, d->step_off))) {
			rc = apply_timeline(d, true);
			if (rc)
				return rc;
		}
		status = d->insn ? step_insn(d) : step_block(d);
		if (status < 0)
			return status;
	}
}

/*
 * After error @err at the decoder's offset: resync at the next PSB, then
 * report the error with the bytes skipped.  Returns the sync status (a
 * libipt error, -pte_eos if no PSB is left) or DEC_STOP.
 */
static int recover(struct dec *d, int err, const char *ctx, bool ip_valid,
		   uint64_t ip)
{
	uint64_t eoff = d->a->base, soff = end_offset(d), skipped;
	int status, rc;
	bool loop = d->loop_err;

	(void)d_offset(d, &eoff);
	/* The loop error is where the offset last moved (loop_after). */
	d->loop_err = false;
	if (loop && d->err_off_valid)
		eoff = d->err_off;
	d->err_off_valid = false;
	/* The run of the block path ends before the error (its own error
	 * records first; after a loop error its walk ended inside it). */
	if (d->run_open || d->run_drop) {
		rc = run_end(d, !loop);
		if (rc)
			return rc;
	}
	d->run_walked = false;
	d->in_kernel = false;	/* not known again until an instruction */
	d->resume_unknown = false;
	status = d_sync(d);
	d->loop_recheck = true;
	/* More trace may follow: where decoding resumes (and so how many
	 * bytes the error skips) is not known yet.  Hold the error and what
	 * is pending back; a later decode with more trace reports them. */
	if (status == -pte_eos && d->a->more) {
		d->st.held_at_error = true;
		return HOLD;
	}
	if (status >= 0)
		(void)d_sync_offset(d, &soff);
	else if (status != -pte_eos)
		(void)d_offset(d, &soff);
	skipped = soff > eoff ? soff - eoff : 0;
	d->st.skipped += skipped;
	d->next_flags = 0;
	rc = emit_error(d, err, err <= -PTD_ERR_BASE, eoff, ip_valid, ip, ctx,
			skipped);
	if (rc)
		return rc;
	if (status == -pte_eos)
		return status;

	/* A sync point at or before the last one means no progress:
	 * stop rather than loop. */
	if (d->have_sync && soff <= d->last_sync) {
		/* The bytes skipped run to the end of the stream, not known
		 * yet while more may follow. */
		if (d->a->more) {
			d->st.held_at_error = true;
			return HOLD;
		}
		rc = emit_error(d, -pte_nosync, false, soff, false, 0, "sync",
				end_offset(d) > soff ? end_offset(d) - soff
						     : 0);
		return rc ? rc : -pte_eos;
	}
	d->have_sync = true;
	d->last_sync = soff;
	return status;
}

/* The trace ran out.  At the end of the stream everything pending is
 * delivered; while more may follow, the pending records stay back: the
 * events after them (in trace not here yet) may still change their
 * flags. */
static int end_of_trace(struct dec *d)
{
	int rc;

	if (d->a->more)
		return 0;
	if (d->run_open || d->run_drop) {
		rc = run_end(d, true);
		if (rc)
			return rc;
	}
	return flush_pending(d);
}

static int run(struct dec *d)
{
	int status = d_sync(d);

	if (status >= 0) {
		(void)d_sync_offset(d, &d->last_sync);
		d->have_sync = true;
	}
	for (;;) {
		if (status == -pte_eos)
			return end_of_trace(d);
		if (status == DEC_STOP || status == HOLD)
			return status == HOLD ? 0 : status;
		if (status < 0) {
			/* The sync point itself could not be decoded. */
			status = recover(d, status, "sync", false, 0);
			continue;
		}
		status = decode_segment(d, status);
		if (status == DEC_STOP)
			return status;
		if (status == HOLD)
			return 0;
		if (status == -pte_eos)
			return end_of_trace(d);
		status = recover(d, status, d->err_ctx, d->err_ip_valid,
				 d->err_ip);
	}
}

/* --- Set-up. --- */

static int check_args(const struct ptd_decode_opts *o,
		      const struct ptd_decode_thread_args *a, ptd_record_fn fn)
{
	if (!o || !a || !fn || !a->img || (!a->pt && a->len))
		return -EINVAL;
	if (a->base > UINT64_MAX - a->len)
		return -EINVAL;
	if (o->path != PTD_PATH_INSN && o->path != PTD_PATH_BLOCK)
		return -EINVAL;
	if (o->want & ~PTD_REC_ALL)
		return -EINVAL;
	if (o->jobs > PTD_DECODE_MAX_JOBS)
		return -EINVAL;
	if ((o->want & PTD_REC_BIT(PTD_REC_BLOCK)) && o->path != PTD_PATH_BLOCK)
		return -EINVAL;
	if (o->has_clock &&
	    (o->clock.time_mult == 0 || o->clock.time_shift >= 32))
		return -EINVAL;
	return 0;
}

static int open_decoder(struct dec *d)
{
	struct pt_image *image = ptd_image_pt(d->a->img);
	struct pt_config cfg;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)(uintptr_t)d->a->pt;
	cfg.end = cfg.begin + d->a->len;
	cfg.cpu = d->o->cpu;
	if (cfg.cpu.vendor == pcv_intel)
		(void)pt_cpu_errata(&cfg.errata, &cfg.cpu); /* unknown: none */
	cfg.addr_filter = d->o->addr_filter;
	cfg.mtc_freq = d->o->mtc_freq;
	cfg.nom_freq = d->o->nom_freq;
	cfg.cpuid_0x15_eax = d->o->cpuid_0x15_eax;
	cfg.cpuid_0x15_ebx = d->o->cpuid_0x15_ebx;

	if (d->o->path == PTD_PATH_INSN) {
		d->insn = pt_insn_alloc_decoder(&cfg);
		if (!d->insn)
			return -ENOMEM;
		if (pt_insn_set_image(d->insn, image) < 0)
			return -EINVAL;
		/* The insn path needs the cache for symbols only. */
		if (!d->o->symbols)
			return 0;
	} else {
		d->blk = pt_blk_alloc_decoder(&cfg);
		if (!d->blk)
			return -ENOMEM;
		if (pt_blk_set_image(d->blk, image) < 0)
			return -EINVAL;
	}
	d->ic = d->a->icache;
	if (!d->ic) {
		(void)ptd_insncache_new(0, &d->ic);
		if (!d->ic)
			return -ENOMEM;
		d->own_ic = true;
	}
	ptd_insncache_set_symbols(d->ic, d->o->symbols, d->a->pid);
	/* the block path's counts: a slot per cached instruction (the
	 * instruction path looks each one up); none: a cache a decode with
	 * counts used before resolves no slots into that table */
	ptd_insncache_set_counters(d->ic, !d->blk ? NULL
					  : d->xt ? d->xt
						  : d->o->counter_slots);
	ptd_insncache_set_lock(d->ic, d->lock);
	return 0;
}

static void close_decoder(struct dec *d)
{
	/* A caller's cache must not keep slots of the table freed here (a
	 * caller's table stays: the next thread's decode keeps the cache
	 * warm). */
	if (d->ic && !d->own_ic && d->own_xt && d->blk)
		ptd_insncache_set_counters(d->ic, NULL);
	pt_insn_free_decoder(d->insn);
	pt_blk_free_decoder(d->blk);
	if (d->own_ic)
		ptd_insncache_free(d->ic);
	free(d->mods);
	free(d->tail);
}

int ptd_decode_thread(const struct ptd_decode_opts *o,
		      const struct ptd_decode_thread_args *a,
		      ptd_record_fn fn, void *ctx,
		      struct ptd_decode_stats *stats)
{
	struct dec *d;
	int err, rc;

	err = check_args(o, a, fn);
	if (err)
		return err;
	if (o->jobs > 1 && !a->part && !a->more)
		return ptd_decode_parallel(o, a, fn, ctx, stats);
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->o = o;
	d->a = a;
	d->fn = fn;
	d->efn = fn;
	d->ectx = ctx;
	d->ctx = ctx;
	d->want_insn = o->want & PTD_REC_BIT(PTD_REC_INSN);
	d->want_block = o->want & PTD_REC_BIT(PTD_REC_BLOCK);
	d->want_event = o->want & PTD_REC_BIT(PTD_REC_EVENT);
	d->user_want = o->want;
	if (o->want & PTD_REC_BIT(PTD_REC_CALL)) {
		if (ptd_calls_new(&d->calls) < 0) {
			free(d);
			return -ENOMEM;
		}
		d->want_insn = true;
		d->want_event = true;
	}
	if (o->want & PTD_COUNTERS_KINDS) {
		d->xt = o->counters;
		if (!d->xt && ptd_counters_new(0, &d->own_xt) < 0) {
			ptd_calls_free(d->calls);
			free(d);
			return -ENOMEM;
		}
		if (!d->xt)
			d->xt = d->own_xt;
		d->xwant = o->want & PTD_COUNTERS_KINDS;
		if ((o->want & PTD_REC_BIT(PTD_REC_TRACE)) &&
		    (err = ptd_counters_enable_traces(
			     d->xt, o->trace_threshold)) < 0) {
			ptd_counters_free(d->own_xt);
			ptd_calls_free(d->calls);
			free(d);
			return err;
		}
		d->want_insn = true;
	}
	d->want_image = o->image_records ||
			(d->xwant & PTD_REC_BIT(PTD_REC_TRACE));
	/* (not a part of a parallel decode: its records are the part's;
	 * without the memory, one by one) */
	if (o->batch && fn == o->batch_of && !a->part) {
		d->out = malloc(PTD_DECODE_BATCH * sizeof(*d->out));
		if (d->out) {
			d->efn = out_record;
			d->ectx = d;
		}
		/* (runs of addresses: see ips_open for the rest) */
		if (d->out && o->ips && o->ips_gate && !a->more)
			d->ips = malloc(PTD_DECODE_IPS * sizeof(*d->ips));
		ips_gate_read(d);
	}
	d->hold = a->more;
	rec_init(d, &d->pend_insn, PTD_REC_INSN);	/* (see new_insn) */
	d->pi = &d->pend_insn;
	d->direct = !d->hold && !d->xt &&
		    (d->user_want & PTD_REC_BIT(PTD_REC_INSN));
	d->st.bytes = a->len;
	d->part = a->part;
	d->lock = a->lock;
	if (d->part)
		d->tracing_off = d->part->tracing_off;
	win_read(d);

	/* An empty stream has nothing to decode (libipt refuses it). */
	if (a->len) {
		err = open_decoder(d);
		if (!err)
			err = run(d) == DEC_STOP
				      ? (d->nomem ? -ENOMEM : d->cb_rc)
				      : 0;
	}
	/* what was made before a stop too (a stop by the consumer left
	 * none) */
	/* (at most one of them holds any) */
	if ((d->out || d->win) &&
	    (rc = d->nips ? ips_flush(d) : d->out ? out_flush(d)
						  : win_flush(d)) != 0 &&
	    err >= 0 && !d->cb_rc) {
		d->cb_rc = rc;
		err = rc;
	}
	/* A table of its own: its counts end the decode. */
	if (err == 0 && d->own_xt && !a->more &&
	    (o->want & PTD_REC_BIT(PTD_REC_COUNTERS)))
		err = ptd_counters_emit(d->own_xt, o->counters_top, a->pid,
					a->tid, fn, ctx);
	if (stats && (err >= 0 || d->cb_rc))
		*stats = d->st;
	close_decoder(d);
	ptd_counters_free(d->own_xt);
	ptd_calls_free(d->calls);
	free(d->out);
	free(d->ips);
	free(d);
	return err;
}
