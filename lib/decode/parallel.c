/* SPDX-License-Identifier: MIT */
/*
 * One thread's trace decoded on several cores (decode/parallel.h).
 *
 * Threads: the caller's thread starts min(jobs, parts) workers and waits
 * for them.  The parts are the units of a turn (decode/turn.h): workers
 * take them in order, at most nslots at once; a part's slot (its image,
 * cursor and instruction cache) is free again once its records were
 * handed on.  A part ahead of the current one is held in chunks, within
 * PTD_DECODE_HELD(jobs) records with the chunks being filled: bounded,
 * not by the parts' size nor by how many records a trace byte gives (a
 * tight loop: some 20).  The worker of the current part has the turn: it
 * checks the part's first records against the previous part's records
 * after its cut (seam), hands on what the part queued, then its records
 * as it makes them (in runs of PTD_CHUNK_RUN, in a buffer that stays in
 * its caches: not the memory traffic of records held), and once the part
 * is done passes the turn on, handing on the parts after it that are
 * done.  So the callback is called by one thread at a time, in the
 * serial order.  A part takes the turn only past its first HEAD_MAX
 * records, which the seam needs.  Past those, a part's decoder makes its
 * insn records right in the chunk (or run) that keeps them (place_next)
 * and reports them a run at a time (part_run).
 * Lock order: the turn's mutex (the parts' queues, why it stopped) and
 * @iclock (the section cache, held by the decoders, decoder.h) are never
 * held together.
 */
#include "decode/parallel.h"

#include "decode/calls.h"
#include "decode/counters.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "decode/chunks.h"
#include "decode/psbsplit.h"
#include "decode/turn.h"
#include "record/diff.h"

/* A part is a run of whole PSB blocks of about
 * len / (jobs * PARTS_PER_JOB) bytes: several parts a worker, so that one
 * slow part does not leave the others idle, within bounds that keep the
 * per-part cost (an image copy, the records after the cut decoded twice)
 * small and its records, held until it is handed out, in the caches:
 * about PTD_DECODE_RECORDS_PER_BYTE a trace byte at 192 bytes each (4 KiB
 * of trace: some 6 MB).  Copying records into those buffers and faulting
 * their pages in is most of what a worker does beyond the serial decode,
 * and costs more the less of them the caches hold: on bench-decode's
 * trace, 2 threads on 2 cores, the decoder's CPU a record was 86 / 77 /
 * 71 ns with parts of at most 64 / 16 / 4 KiB (the serial decode's: 51
 * ns), no better with 2 KiB, where the cost per part grows.  (Holding
 * an instruction's fields once a part and each record as 12 bytes, made
 * whole again when stitched, cost more than it saved: 92 ns.)  Making
 * each insn record in the part's buffer instead of copying it there, as
 * a replay's runs are made (decoder.c, new_insn), saved nothing by
 * itself: what costs is the memory written, not the copy.  With the
 * callback then counting a record, not checking everything at each
 * (place_next), a record took 80-83 ns, against 83-93 before (the serial
 * decode's: 62; the same runs alternated).  And then the records' memory
 * no longer cost anything to speak of: a throwaway build that made every
 * record in 64 records of scratch (for a consumer that reads none) took
 * 79-83 ns, against 80-90. */
#define PARTS_PER_JOB 16u
#define PART_MIN_BYTES (2u << 10)
#define PART_MAX_BYTES PTD_DECODE_PART_MAX_BYTES
/* Records after a cut that may come before the first instruction (or
 * block): more, and the part is decoded serially. */
#define HEAD_MAX 256u
_Static_assert(HEAD_MAX < PTD_CHUNK_RECORDS, "a head in a part's first chunk");
_Static_assert(PTD_CHUNKS_A_PART >= 4, "a budget past the chunks being filled");

struct recbuf {
	struct ptd_record *v;
	size_t n, cap;
};

struct part {
	uint64_t start;		/* offset in args.pt */
	uint64_t cut;		/* stream offset of the next part's PSB;
				 * 0: the last part */
	bool tracing_off;	/* at its PSB: the PSB+ has no IP */
	/* Filled by its worker before its unit of the turn is done (the
	 * records made before the cut are queued there). */
	uint64_t nrec;		/* records made before the cut */
	struct recbuf probe;	/* after the cut: the serial decode's first
				 * records of the next part */
	/* The cursor's next event after each of the first records was
	 * delivered (the image they were decoded with), and after the last
	 * of @probe. */
	size_t head_tl[HEAD_MAX];
	size_t probe_tl;
	bool cut_done, cut_clean;
	bool probe_done;	/* ends with the first instruction/block */
	bool probe_full;	/* HEAD_MAX records and none */
	struct ptd_decode_stats st;	/* of the records before the cut */
	uint64_t tl_before;	/* events applied before its start */
	const char *why;	/* why its own records are not the serial
				 * decode's (static) */
	const char *probe_why;	/* why those after its cut are not */
	int err;
	bool seamed;		/* its first records were checked (seam) */
};

/* Where a part is decoded: no two parts decoded at once share a slot, nor
 * its image's sections (ptd_image_own_sections: libipt locks a section at
 * every switch to it). */
struct slot {
	struct ptd_image *img;
	struct ptd_tl_cursor cur;
	struct ptd_insncache *ic;
};

struct par {
	const struct ptd_decode_thread_args *a;
	struct ptd_decode_opts po;	/* the caller's, serial */
	enum ptd_rec_type stop_type;	/* ends a probe */
	struct part *parts;
	size_t nparts;
	struct slot *slots;
	size_t nslots;
	/* The callback (in runs to @bfn where it is not NULL). */
	ptd_record_fn fn;
	ptd_records_fn bfn;
	void *fctx;
	pthread_mutex_t iclock;
	struct ptd_turn t;	/* a unit a part */
	/* Why it stopped (under t.mx): the callback's value or a part's
	 * error, or part @bad cannot be stitched (@why) */
	int rc;
	size_t bad;
	const char *why;
	uint64_t delivered;	/* records handed on (by the turn's holder) */
};

struct wctx {
	struct par *p;
	size_t k;
	struct part *pt;
	struct slot *s;
	bool first;		/* part 0: the serial decoder itself */
	struct ptd_chunk *c;	/* being filled (NULL: none yet); with the
				 * turn, a run for @p->bfn */
	bool turn;		/* its records go to the callback as made */
	struct ptd_decode_part *dp;	/* its decoder's (place) */
};

static int push(struct recbuf *b, const struct ptd_record *r)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 4096;
		struct ptd_record *v = reallocarray(b->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		b->v = v;
		b->cap = cap;
	}
	b->v[b->n++] = *r;
	return 0;
}

static void recbuf_fini(struct recbuf *b)
{
	free(b->v);
	memset(b, 0, sizeof(*b));
}

static size_t tl_index(const struct wctx *w)
{
	return w->p->a->cursor ? w->s->cur.next : 0;
}

/* libipt empties its return stack where a decoder synchronizes, not at a
 * PSB it reads on across (pt_insn_decoder.c, pt_block_decoder.c): a
 * return compressed against a call made before the part's PSB finds the
 * part's stack empty where the serial decoder's is not.  (The software
 * source never compresses such a return, swpt/ptgen.c; hardware may.)
 * Otherwise both stacks pop the same entries: the part's holds the latest
 * calls since its PSB, as the top of the serial decoder's does. */
static bool history_error(const struct ptd_record *r)
{
	return r->type == PTD_REC_ERROR && !r->u.error.ptd_code &&
	       r->u.error.code == -pte_retstack_empty;
}

#define HISTORY_WHY                                                         \
	"a return compressed against a call before a PSB (libipt's stack "  \
	"starts empty where it synchronizes)"

/*
 * Equal but for what the history before a PSB decides and a decoder
 * synchronized there cannot know: the flags of an instruction or block
 * (flags left for the next instruction by an enable before the PSB; a
 * disable, stop or abort after the cut binding to the instruction before
 * it, which the previous part's records carry) and whether an enable
 * resumes where tracing was disabled before the PSB (libipt compares with
 * the IP it stopped at).  Anything else differing means the part's
 * decoder does not decode as the serial one does there.
 */
static bool same_but_history(const struct ptd_record *x,
			     const struct ptd_record *y)
{
	struct ptd_record a = *x, b = *y;

	switch (a.type) {
	case PTD_REC_INSN:
		a.u.insn.flags = b.u.insn.flags = 0;
		a.u.insn.json_body = b.u.insn.json_body = NULL;
		a.u.insn.json_body_len = b.u.insn.json_body_len = 0;
		break;
	case PTD_REC_BLOCK:
		a.u.block.flags = b.u.block.flags = 0;
		break;
	case PTD_REC_EVENT:
		if (a.u.event.ev.type == ptev_enabled &&
		    b.u.event.ev.type == ptev_enabled)
			a.u.event.ev.variant.enabled.resumed =
				b.u.event.ev.variant.enabled.resumed = 0;
		break;
	case PTD_REC_ERROR:
	case PTD_REC_CALL:	/* none: the parts give none (callwrap) */
	case PTD_REC_FIRST_EXEC:
	case PTD_REC_COUNTERS:
	case PTD_REC_TRACE:
	case PTD_REC_TRACE_WITHDRAWN:
	case PTD_REC_NTYPES:
	case PTD_REC_IMAGE:
		break;
	}
	return !ptd_record_diff(&a, &b, 0);
}

/*
 * Check the seam between parts @k - 1 and @k and make part @k's first
 * records the serial decoder's.  Returns NULL, or why part @k cannot be
 * stitched.
 *
 * The previous part's decoder ran on past its cut as the serial decoder
 * does (its own start was made the serial decoder's the same way, part by
 * part), so its records after the cut, up to and including the first
 * instruction (block), are the serial decode's.  Part @k's decoder gives
 * the same records but for what history decides (same_but_history); from
 * its first instruction on, that history no longer matters -- the enable
 * has been handled, the flags taken -- as long as both decoders used the
 * same image: the same timeline events applied by then.  So the seam is
 * exact with the previous part's records in place of part @k's first
 * ones.  @v: part @k's first @n records (at least HEAD_MAX, or all it
 * has); @total: its records, UINT64_MAX while it is being decoded.
 */
static const char *seam(struct par *p, size_t k, struct ptd_record *v,
			size_t n, uint64_t total)
{
	struct part *prev = &p->parts[k - 1], *cur = &p->parts[k];
	size_t h = prev->probe.n;

	if (!prev->cut_clean)
		return "an error record at the PSB that ends a part (the "
		       "serial decoder reports it before the PSB)";
	if (prev->probe_why)
		return prev->probe_why;
	/* Without an instruction after the cut, the records after it are
	 * all there is: the last part's. */
	if (!prev->probe_done &&
	    (prev->probe_full || k + 1 < p->nparts || total != h))
		return "no instruction between a PSB and the next part";
	if (n < h)
		return "fewer records after a PSB than the serial decode has";
	for (size_t i = 0; i < h; i++)
		if (!same_but_history(&prev->probe.v[i], &v[i]))
			return "the records after a PSB are not the serial "
			       "decode's";
	if (h && prev->probe_done && cur->head_tl[h - 1] != prev->probe_tl)
		return "the image at the first instruction after a PSB is not "
		       "the serial decode's (a timeline event held back)";
	for (size_t i = 0; i < h; i++)
		v[i] = prev->probe.v[i];
	return NULL;
}

/* Everything stops: @rc, the callback's value or a part's error, or part
 * @bad cannot be stitched (@why); or, with neither, every part was handed
 * on.  The first reason stands. */
static void stop_all(struct par *p, int rc, size_t bad, const char *why)
{
	(void)pthread_mutex_lock(&p->t.mx);
	if (!p->rc && p->bad == SIZE_MAX) {
		p->rc = rc;
		p->bad = bad;
		p->why = why;
	}
	ptd_turn_stop_locked(&p->t);
	(void)pthread_mutex_unlock(&p->t.mx);
}

/* Hand @n records of part @k to the callback (the turn's holder), its
 * first ones checked against the previous part's and replaced by them
 * (seam); @total: the part's records, UINT64_MAX while it is being
 * decoded.  Returns false when everything stops.  The records handed on,
 * counted in @delivered, are the serial decode's all the same: the
 * part's decoder differs from the serial one only in what seam checks
 * and in libipt's return stack, and the records from the first that the
 * stack changed on are never handed on (part_record). */
static bool give(struct par *p, size_t k, struct ptd_record *v, size_t n,
		 uint64_t total)
{
	struct part *pt = &p->parts[k];
	int rc = 0;

	if (!pt->seamed) {
		const char *why = k ? seam(p, k, v, n, total) : NULL;

		pt->seamed = true;
		if (why) {
			stop_all(p, 0, k, why);
			return false;
		}
	}
	if (!n)
		return true;
	if (p->bfn)
		rc = p->bfn(p->fctx, v, n);
	for (size_t i = 0; !p->bfn && i < n && !rc; i++)
		rc = p->fn(p->fctx, &v[i]);
	if (rc) {
		stop_all(p, rc, SIZE_MAX, NULL);
		return false;
	}
	p->delivered += n;
	return true;
}

struct drain_ctx {
	struct par *p;
	size_t k;
	uint64_t total;
};

static bool give_chunk(void *ctx, struct ptd_chunk *c)
{
	struct drain_ctx *d = ctx;

	return give(d->p, d->k, c->v, c->n, d->total);
}

/* Hand on what part @k has queued (the turn's holder); @done: its decode
 * returned. */
static bool drain(struct par *p, size_t k, bool done)
{
	struct drain_ctx d = { p, k,
			       done ? p->parts[k].nrec : UINT64_MAX };

	return ptd_turn_drain(&p->t, k, give_chunk, &d);
}

/* Part @k, which has the turn, was decoded and all handed on: stop where
 * it ends what can be stitched, else pass the turn on, handing on the
 * parts after it that are done. */
static void pass_turn(struct par *p, size_t k)
{
	for (;;) {
		struct part *pt = &p->parts[k];

		if (pt->err < 0) {
			stop_all(p, pt->err, SIZE_MAX, NULL);
			return;
		}
		/* no records at all: the seam is checked all the same */
		if (!give(p, k, NULL, 0, 0))
			return;
		if (pt->why) {
			stop_all(p, 0, k, pt->why);
			return;
		}
		if (k)
			recbuf_fini(&p->parts[k - 1].probe);
		if (!ptd_turn_pass(&p->t, k++) || !drain(p, k, true))
			return;
	}
}

/* Hand on what @w's chunk holds, not queued (the turn's holder), and
 * empty it for the next run. */
static bool give_filling(struct wctx *w)
{
	size_t n = w->c->n;

	w->c->n = 0;
	return give(w->p, w->k, w->c->v, n, UINT64_MAX);
}

/* The turn came to @w's part, still being decoded: hand on what it
 * queued and what it is filling; from now on its records go to the
 * callback as they are made. */
static bool take_turn(struct wctx *w)
{
	w->turn = true;
	if (!drain(w->p, w->k, false))
		return false;
	return w->c ? give_filling(w) : true;
}

/* Queue @w's full chunk on its part, then wait while the parts hold
 * their budget, or until the turn comes to it.  Returns false when the
 * decode is cancelled. */
static bool queue_chunk(struct wctx *w)
{
	struct ptd_chunk *c = w->c;

	w->c = NULL;
	return ptd_turn_queue(&w->p->t, w->k, c);
}

/* A body lives in the slot's cache, which the worker goes on using (and
 * clearing) while the record waits: the writer renders them.  (The insn
 * path, the only one decoded in parts, makes none.) */
static void no_body(struct ptd_record *r)
{
	if (r->type == PTD_REC_INSN)
		r->u.insn.json_body = NULL, r->u.insn.json_body_len = 0;
}

/* What part_record checks (the stop, the turn, the chunk or run full)
 * at every record it copies, but only once every PTD_CHUNK_CHECK records
 * where they are made in place (part_run). */
#define PTD_CHUNK_CHECK 64u
_Static_assert(PTD_CHUNK_RUN % PTD_CHUNK_CHECK == 0 &&
		       PTD_CHUNK_RECORDS % PTD_CHUNK_CHECK == 0,
	       "a run or chunk full at a check");

/* The decoder makes @w's next insn records where they will be kept, in
 * the free records of the chunk @w fills up to the next check (decoder.h,
 * ptd_decode_part.place, room), and reports them a run at a time
 * (part_run): copying each record there and checking everything at each
 * was most of what a worker did beyond the serial decode (callgrind: some
 * 75 instructions a record), and a call for each record made there still
 * some 5 ns of a worker's 76 a record (perf, one worker).  Not for the
 * first HEAD_MAX records (each one's timeline position is kept), after
 * the cut (the probe's records are copied) or without a chunk. */
static void place_next(struct wctx *w)
{
	struct ptd_chunk *c = w->c;
	bool go = c && !w->pt->cut_done && w->pt->nrec >= HEAD_MAX;

	w->dp->place = go ? &c->v[c->n] : NULL;
	w->dp->room = go ? PTD_CHUNK_CHECK - c->n % PTD_CHUNK_CHECK : 0;
}

/* A record of the part was stored in @w's chunk: stop if everything
 * stops, take the turn where it came, hand on a full run (with the turn)
 * or queue a full chunk (without). */
static int part_checks(struct wctx *w)
{
	struct par *p = w->p;
	bool go = !ptd_turn_cancelled(&p->t) &&
		  (w->turn || w->pt->nrec <= HEAD_MAX ||
		   !ptd_turn_came(&p->t, w->k) || take_turn(w));

	if (go && w->turn)
		go = w->c->n != PTD_CHUNK_RUN || give_filling(w);
	else if (go)
		go = w->c->n != PTD_CHUNK_RECORDS || queue_chunk(w);
	/* (none where it stops: nothing is made there any more) */
	if (go) {
		place_next(w);
	} else {
		w->dp->place = NULL;
		w->dp->room = 0;
	}
	return go ? 0 : 1;
}

/* After the cut: what the serial decoder gives at the start of the next
 * part. */
static int probe_record(struct wctx *w, const struct ptd_record *rec)
{
	struct part *pt = w->pt;
	struct ptd_record r = *rec;

	no_body(&r);
	if (!w->first && !pt->probe_why && history_error(&r))
		pt->probe_why = HISTORY_WHY;
	if (push(&pt->probe, &r) < 0) {
		pt->err = -ENOMEM;
		return 1;
	}
	if (r.type == w->p->stop_type) {
		pt->probe_done = true;
		pt->probe_tl = tl_index(w);
		return 1;
	}
	if (pt->probe.n >= HEAD_MAX) {
		pt->probe_full = true;
		return 1;
	}
	return 0;
}

/* A record not made in place: copied into the chunk, or to the probe. */
static int part_record(void *ctx, const struct ptd_record *rec)
{
	struct wctx *w = ctx;
	struct part *pt = w->pt;
	struct ptd_record *d;

	if (ptd_turn_cancelled(&w->p->t))
		return 1;
	if (pt->cut_done)
		return probe_record(w, rec);
	/* The records before it are the serial decode's, those from it on
	 * not: it ends what the part can hand on. */
	if (!w->first && history_error(rec)) {
		pt->why = HISTORY_WHY;
		return 1;
	}
	if (++pt->nrec <= HEAD_MAX)
		pt->head_tl[pt->nrec - 1] = tl_index(w);
	if (!w->c && !(w->c = ptd_turn_chunk(&w->p->t))) {
		pt->err = -ENOMEM;
		return 1;
	}
	d = &w->c->v[w->c->n++];
	*d = *rec;
	no_body(d);
	return part_checks(w);
}

/* @n insn records made in place: they fill the chunk up to a check. */
static int part_run(void *ctx, size_t n)
{
	struct wctx *w = ctx;

	w->pt->nrec += n;
	w->c->n += n;
	return part_checks(w);
}

static void part_cut(void *ctx, const struct ptd_decode_stats *st,
		     bool clean)
{
	struct wctx *w = ctx;

	w->pt->cut_done = true;
	place_next(w);
	w->pt->cut_clean = clean;
	w->pt->st = *st;
}

/* Decode part @w->k in its slot. */
static void decode_part(struct wctx *w)
{
	struct par *p = w->p;
	const struct ptd_decode_thread_args *a = p->a;
	size_t k = w->k;
	struct part *pt = w->pt;
	struct slot *s = w->s;
	struct ptd_decode_thread_args args;
	struct ptd_decode_part dp;
	struct ptd_decode_stats st;
	int r;

	/* The image as the stream began, with the events before the part
	 * applied (those that fail are skipped, as the serial decoder skips
	 * them: its error records are the previous part's). */
	(void)pthread_mutex_lock(&p->iclock);
	r = ptd_image_copy(s->img, a->img);
	if (a->cursor) {
		s->cur = *a->cursor;
		while (r >= 0 && k > 0) {
			struct ptd_diag diag;
			size_t before = s->cur.next;
			int n = ptd_tl_cursor_advance(&s->cur, a->base + pt->start,
						      s->img, &diag);

			if (n >= 0) {
				pt->tl_before += (uint64_t)n;
				break;
			}
			if (n == -EINVAL || s->cur.next == before)
				r = n;
			else
				pt->tl_before += s->cur.next - before - 1;
		}
	}
	(void)pthread_mutex_unlock(&p->iclock);
	if (r < 0) {
		pt->err = r;
		return;
	}

	memset(&args, 0, sizeof(args));
	memset(&dp, 0, sizeof(dp));
	args.pt = a->pt + pt->start;
	args.len = a->len - pt->start;
	args.base = a->base + pt->start;
	args.pid = a->pid;
	args.tid = a->tid;
	args.img = s->img;
	args.cursor = a->cursor ? &s->cur : NULL;
	args.icache = s->ic;
	args.part = &dp;
	args.lock = &p->iclock;
	dp.cut = pt->cut;
	dp.tracing_off = pt->tracing_off;
	dp.on_cut = part_cut;
	dp.on_run = part_run;
	dp.ctx = w;
	w->dp = &dp;
	memset(&st, 0, sizeof(st));
	r = ptd_decode_thread(&p->po, &args, part_record, w, &st);
	if (r < 0 && !pt->err)
		pt->err = r;
	if (!pt->cut)
		pt->st = st;
	else if (!pt->cut_done && !pt->why)
		pt->why = "the decode did not reach the PSB that ends the part";
}

/* Decode part @k in its slot and say it is done, with its last chunk;
 * with the turn, hand it on and pass the turn. */
static void run_part(struct par *p, size_t k)
{
	struct wctx w = { p, k, &p->parts[k], &p->slots[k % p->nslots],
			  k == 0, NULL, false, NULL };

	decode_part(&w);
	/* the run it gathered with the turn */
	if (w.turn && w.c && w.c->n && !ptd_turn_cancelled(&p->t))
		(void)give_filling(&w);
	/* the turn came (or had come) to it: whatever it still queued, then
	 * the parts after it */
	if (ptd_turn_finish(&p->t, k, w.c, w.turn) && drain(p, k, true))
		pass_turn(p, k);
}

static void *worker(void *arg)
{
	struct par *p = arg;

	(void)pthread_setname_np(pthread_self(), "ptd-part");
	for (;;) {
		size_t k = ptd_turn_take(&p->t);

		if (k == SIZE_MAX)
			return NULL;
		run_part(p, k);
	}
}

/* Serial decode of the whole trace, delivering what comes after the
 * @left records already delivered. */
struct skip {
	ptd_record_fn fn;
	void *ctx;
	size_t left;
};

static int skip_record(void *ctx, const struct ptd_record *rec)
{
	struct skip *sk = ctx;

	if (sk->left) {
		sk->left--;
		return 0;
	}
	return sk->fn(sk->ctx, rec);
}

static void stats_add(struct ptd_decode_stats *t,
		      const struct ptd_decode_stats *s)
{
	t->insns += s->insns;
	t->blocks += s->blocks;
	t->events += s->events;
	t->errors += s->errors;
	t->skipped += s->skipped;
}

/* Cut the trace into parts (at least two) or return 0 parts;
 * *ret_timed: a PSB+ carries a TSC. */
static int make_parts(struct par *p, const struct ptd_decode_opts *o,
		      bool *ret_timed)
{
	const struct ptd_decode_thread_args *a = p->a;
	struct ptd_psb_block *b = NULL;
	size_t nb = 0, n = 0;
	uint64_t target, start = 0;
	int r;

	r = ptd_psb_split(a->pt, a->len, &o->cpu, &b, &nb, NULL);
	if (r < 0)
		return r;
	target = a->len / ((uint64_t)o->jobs * PARTS_PER_JOB);
	if (target < PART_MIN_BYTES)
		target = PART_MIN_BYTES;
	if (target > PART_MAX_BYTES)
		target = PART_MAX_BYTES;
	if (o->part_bytes)
		target = o->part_bytes;
	p->parts = calloc(nb + 1, sizeof(*p->parts));
	if (!p->parts) {
		free(b);
		return -ENOMEM;
	}
	/* Part 0 starts where the serial decode does, at the first byte. */
	p->parts[n++].start = 0;
	*ret_timed = false;
	for (size_t i = 0; i < nb; i++) {
		*ret_timed |= b[i].has_tsc;
		if (b[i].offset <= start || b[i].offset - start < target ||
		    (!o->part_bytes && a->len - b[i].offset < target / 2))
			continue;
		p->parts[n - 1].cut = a->base + b[i].offset;
		p->parts[n].start = b[i].offset;
		p->parts[n].tracing_off = !b[i].has_ip;
		start = b[i].offset;
		n++;
	}
	free(b);
	p->nparts = n > 1 ? n : 0;
	return 0;
}

static void par_fini(struct par *p)
{
	for (size_t i = 0; i < p->nparts; i++)
		recbuf_fini(&p->parts[i].probe);
	ptd_turn_fini(&p->t);
	free(p->parts);
	for (size_t i = 0; p->slots && i < p->nslots; i++) {
		ptd_image_free(p->slots[i].img);
		ptd_insncache_free(p->slots[i].ic);
	}
	free(p->slots);
}

static int serial(const struct ptd_decode_opts *po,
		  const struct ptd_decode_thread_args *a, ptd_record_fn fn,
		  void *ctx, size_t skip, struct ptd_decode_stats *stats)
{
	struct skip sk = { fn, ctx, skip };

	return ptd_decode_thread(po, a, skip ? skip_record : fn,
				 skip ? (void *)&sk : ctx, stats);
}

static int par_decode(const struct ptd_decode_opts *o,
		      const struct ptd_decode_thread_args *a,
		      ptd_record_fn fn, void *ctx,
		      struct ptd_decode_stats *stats);

/* Call records (decode/calls.h) need one stack kept over the whole trace,
 * in the serial order: a part's decoder would start one empty at its PSB.
 * So the parts give the records the stack reads, and the stitched records
 * go through one stack here, as decoder.c's own call_fn does for a
 * serial decode.  Counts and first executions (decode/counters.h) the
 * same way: one table over the stitched records, in their serial order,
 * so both are exactly the serial decode's (the parts' own instruction
 * caches resolve no slots: each stitched record is looked up). */
struct callwrap {
	struct ptd_calls *calls;	/* NULL: no call records */
	struct ptd_counters *xt, *own_xt;	/* NULL: no counts */
	unsigned xwant;		/* PTD_COUNTERS_KINDS asked for */
	ptd_record_fn fn;
	ptd_records_fn batch;	/* the caller's, where fn is its batch_of */
	void *ctx;
	unsigned want;		/* what the caller asked for */
	bool want_all;		/* ... every kind the parts make */
	const atomic_bool *calls_gate;	/* decoder.h */
	bool calls_live;	/* ... seen open (or none) */
};

/* Whether the call stack is kept from now on. */
static bool callwrap_calls(struct callwrap *w)
{
	if (w->calls && !w->calls_live &&
	    (!w->calls_gate ||
	     atomic_load_explicit(w->calls_gate, memory_order_relaxed)))
		w->calls_live = true;
	return w->calls && w->calls_live;
}

static int callwrap_record(void *ctx, const struct ptd_record *r)
{
	struct callwrap *w = ctx;
	int rc = 0;

	if (callwrap_calls(w))
		rc = ptd_calls_feed(w->calls, r, w->fn, w->ctx);
	if (rc == 0 && w->xt)
		rc = ptd_counters_feed(w->xt, r, w->xwant, w->fn, w->ctx);
	if (rc == 0 && (w->want & PTD_REC_BIT(r->type)))
		rc = w->fn(w->ctx, r);
	return rc;
}

/* callwrap_record for a run (opts.batch): while no stack is kept (its
 * gate, looked at once a run, is closed) and nothing is counted, the
 * records the caller wants go on to its batch in runs, not one by one
 * (a replay with jobs asks for call records in case a subscriber comes
 * for them). */
static int callwrap_records(void *ctx, const struct ptd_record *recs,
			    size_t n)
{
	struct callwrap *w = ctx;
	size_t i = 0;
	int rc = 0;

	if (callwrap_calls(w) || w->xt) {
		for (; i < n && !rc; i++)
			rc = callwrap_record(w, &recs[i]);
		return rc;
	}
	if (w->want_all)
		return w->batch(w->ctx, recs, n);
	while (i < n && !rc) {
		size_t k = i;

		while (k < n && (w->want & PTD_REC_BIT(recs[k].type)))
			k++;
		if (k > i)
			rc = w->batch(w->ctx, recs + i, k - i);
		i = k + 1;	/* (past one it does not want) */
	}
	return rc;
}

int ptd_decode_parallel(const struct ptd_decode_opts *o,
			const struct ptd_decode_thread_args *a,
			ptd_record_fn fn, void *ctx,
			struct ptd_decode_stats *stats)
{
	const unsigned xkinds = PTD_COUNTERS_KINDS;
	struct ptd_decode_opts po;
	struct callwrap w;
	int r;

	if (!o || !(o->want & (PTD_REC_BIT(PTD_REC_CALL) | xkinds)))
		return par_decode(o, a, fn, ctx, stats);
	memset(&w, 0, sizeof(w));
	po = *o;
	po.want = (o->want & ~(PTD_REC_BIT(PTD_REC_CALL) | xkinds)) |
		  PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_ERROR);
	po.counters = NULL;
	if (o->want & PTD_REC_BIT(PTD_REC_CALL)) {
		if (ptd_calls_new(&w.calls) < 0)
			return -ENOMEM;
		po.want |= PTD_REC_BIT(PTD_REC_EVENT);
	}
	if (o->want & xkinds) {
		w.xt = o->counters;
		if (!w.xt && ptd_counters_new(0, &w.own_xt) < 0) {
			ptd_calls_free(w.calls);
			return -ENOMEM;
		}
		if (!w.xt)
			w.xt = w.own_xt;
		w.xwant = o->want & xkinds;
		/* the unmaps and execs, in order, for the traces */
		po.image_records = o->want & PTD_REC_BIT(PTD_REC_TRACE);
		if ((o->want & PTD_REC_BIT(PTD_REC_TRACE)) &&
		    (r = ptd_counters_enable_traces(w.xt,
						    o->trace_threshold)) < 0) {
			ptd_counters_free(w.own_xt);
			ptd_calls_free(w.calls);
			return r;
		}
	}
	w.fn = fn;
	w.ctx = ctx;
	w.want = o->want;
	/* what the parts make: what they were asked for, error records
	 * always, image records where asked (decoder.h) */
	w.want_all = !((po.want | PTD_REC_BIT(PTD_REC_ERROR) |
			(po.image_records ? PTD_REC_BIT(PTD_REC_IMAGE) : 0)) &
		       ~o->want);
	w.calls_gate = o->calls_gate;
	/* the stitched records in runs where the caller takes them so */
	w.batch = o->batch && fn == o->batch_of ? o->batch : NULL;
	po.batch = w.batch ? callwrap_records : NULL;
	po.batch_of = w.batch ? callwrap_record : NULL;
	/* no runs of addresses: the stack and the counts are made of the
	 * insn records (and o->ips takes the caller's ctx, not &w) */
	po.ips = NULL;
	po.ips_gate = NULL;
	r = par_decode(&po, a, callwrap_record, &w, stats);
	/* a table of its own: its counts end the decode (decoder.h) */
	if (r == 0 && w.own_xt && (o->want & PTD_REC_BIT(PTD_REC_COUNTERS)))
		r = ptd_counters_emit(w.own_xt, o->counters_top, a->pid,
				      a->tid, fn, ctx);
	ptd_counters_free(w.own_xt);
	ptd_calls_free(w.calls);
	return r;
}

static int par_decode(const struct ptd_decode_opts *o,
		      const struct ptd_decode_thread_args *a,
		      ptd_record_fn fn, void *ctx,
		      struct ptd_decode_stats *stats)
{
	struct par p;
	pthread_t th[PTD_DECODE_MAX_JOBS];
	struct ptd_decode_stats tot, st;
	size_t nth = 0, k;
	bool timed = false, batch;
	int r = 0;

	if (!o || !a || !fn || !a->img || o->jobs > PTD_DECODE_MAX_JOBS)
		return -EINVAL;
	/* the parts' records at once, where the caller takes runs */
	batch = o->batch && fn == o->batch_of;
	memset(&p, 0, sizeof(p));
	p.a = a;
	p.po = *o;
	p.po.jobs = 0;
	p.stop_type = (o->want & PTD_REC_BIT(PTD_REC_INSN)) ? PTD_REC_INSN
							      : PTD_REC_EVENT;
	if (a->more || o->jobs <= 1 || !a->len || p.stop_type == PTD_REC_EVENT)
		return ptd_decode_thread(&p.po, a, fn, ctx, stats);
	r = make_parts(&p, o, &timed);
	if (r < 0 || !p.nparts) {
		free(p.parts);
		return r < 0 ? r : ptd_decode_thread(&p.po, a, fn, ctx, stats);
	}

	/* Where pt_blk_next ends a block depends on libipt's block cache,
	 * which lives in the sections every decoder of the process shares:
	 * parts decoded at once warm it in another order than the serial
	 * decode, and their blocks end elsewhere.  Block records differ
	 * then, and so does the time of an insn record on the block path
	 * (its block's).  ptd's own records do not depend on where blocks
	 * end (decoder.c, runs), but libipt's handling of damaged trace
	 * does: on one damaged capture a cold cache gave -pte_noip at
	 * offset 0x78a where a warm one gave -pte_bad_context at 0x78d.
	 * Parts would have warmed the cache before a fallback could start,
	 * so the block path is decoded serially -- decided before any part
	 * runs.  (Measured on 16 cores, its 2-thread decode gave 1.00x the
	 * serial one anyway; the insn path, which has no such cache, is
	 * decoded in parallel.) */
	if (o->path == PTD_PATH_BLOCK) {
		size_t n = p.nparts;

		free(p.parts);
		r = ptd_decode_thread(&p.po, a, fn, ctx, stats);
		if (stats && r >= 0) {
			stats->serial_parts = n;
			stats->parts = n;
			stats->serial_why =
				(o->want & PTD_REC_BIT(PTD_REC_BLOCK))
					? "block records: where libipt ends a "
					  "block depends on its block cache, "
					  "which parts would warm in another "
					  "order"
					: "the block path: libipt's block cache, "
					  "which parts would warm in another "
					  "order, decides where blocks end, and "
					  "with them the time of insn records "
					  "and how libipt reports damaged trace "
					  "(--path insn decodes in parallel)";
		}
		return r;
	}
	nth = o->jobs < p.nparts ? o->jobs : p.nparts;
	p.nslots = nth + 2 < p.nparts ? nth + 2 : p.nparts;
	p.bad = SIZE_MAX;
	p.fn = fn;
	p.bfn = batch ? o->batch : NULL;
	p.fctx = ctx;
	/* PTD_DECODE_HELD(jobs) chunks held at most */
	p.slots = calloc(p.nslots, sizeof(*p.slots));
	if (!p.slots || ptd_turn_init(&p.t, p.nparts, nth, p.nslots) < 0) {
		par_fini(&p);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p.nslots; i++) {
		(void)ptd_image_new(ptd_image_iscache(a->img), "part",
				    &p.slots[i].img);
		(void)ptd_insncache_new(0, &p.slots[i].ic);
		if (!p.slots[i].img || !p.slots[i].ic ||
		    ptd_image_own_sections(p.slots[i].img) < 0) {
			par_fini(&p);
			return -ENOMEM;
		}
	}
	(void)pthread_mutex_init(&p.iclock, NULL);
	for (k = 0; k < nth; k++) {
		if (pthread_create(&th[k], NULL, worker, &p) != 0)
			break;
	}
	nth = k;
	if (!nth) {
		/* No worker: the caller's thread decodes it all. */
		p.bad = 0;
		p.why = "no worker thread could be started";
		goto out;
	}

	/* until every part was handed on, or it stopped */
	ptd_turn_wait(&p.t);

out:
	for (size_t i = 0; i < nth; i++)
		(void)pthread_join(th[i], NULL);
	(void)pthread_mutex_destroy(&p.iclock);

	memset(&tot, 0, sizeof(tot));
	for (k = 0; k < atomic_load(&p.t.current); k++)
		stats_add(&tot, &p.parts[k].st);
	if (p.bad == SIZE_MAX && !p.rc) {
		/* Where the serial decode leaves the image. */
		struct part *pt = &p.parts[p.nparts - 1];
		struct slot *s = &p.slots[(p.nparts - 1) % p.nslots];

		tot.tl_applied = pt->tl_before + pt->st.tl_applied;
		r = ptd_image_copy(a->img, s->img);
		if (a->cursor)
			*a->cursor = s->cur;
	}
	if (p.bad != SIZE_MAX) {
		/* a->img and a->cursor are as the stream began: the parts
		 * decoded copies. */
		memset(&st, 0, sizeof(st));
		r = serial(&p.po, a, fn, ctx, p.delivered, &st);
		st.serial_parts = p.nparts - p.bad;
		st.parts = p.nparts;
		st.serial_why = p.why;
		st.held_max = p.t.ch.held_max;
		st.held = p.t.ch.queued;
		if (stats)
			*stats = st;
		par_fini(&p);
		return r;
	}
	tot.parts = p.nparts;
	tot.held_max = p.t.ch.held_max;
	tot.held = p.t.ch.queued;
	par_fini(&p);
	if (p.rc) {
		if (stats) {
			tot.bytes = a->len;
			*stats = tot;
		}
		return p.rc;
	}
	if (r < 0)
		return r;
	tot.bytes = a->len;
	if (stats)
		*stats = tot;
	return 0;
}
