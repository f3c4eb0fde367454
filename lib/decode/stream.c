/* SPDX-License-Identifier: MIT */
/*
 * Decoding a growing PT stream by re-decoding from a moving anchor
 * (decode/stream.h).
 *
 * State: a list of segments.  The last is open (appends go there); the
 * others ended with a loss or an overflow and wait for the next round,
 * which decodes them as whole streams.  Each segment keeps its bytes from
 * its anchor on, the image as it stood at the anchor, the index of the
 * first timeline event not yet in that image, and `done`.
 *
 * The timeline holds the image changes of this thread only, each with one
 * position (the stream end when it was added); positions only grow, so
 * "events up to offset X" is a prefix of it.
 */
#include "decode/stream.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <intel-pt.h>

#include "common/diag.h"
#include "common/lockopt.h"
#include "decode/calls.h"
#include "decode/counters.h"
#include "record/diff.h"

/* A PSB packet: 02 82 repeated 8 times. */
#define PSB_LEN 16
/* Packets a PSB+ may hold before its PSBEND, at most (a sanity bound). */
#define PSB_PLUS_MAX_PACKETS 64

struct seg {
	uint8_t *buf;		/* bytes [base, base + len) */
	size_t len, cap;
	uint64_t base;		/* the anchor: stream offset of buf[0] */
	uint64_t done;		/* records of a decode at base delivered */
	uint64_t decoded_to;	/* stream end at its last round */
	struct ptd_image *img;	/* the image at base */
	size_t tl_next;		/* first event not applied to img */
	/* An ended segment: why, and whether its record went out. */
	bool ended;
	int end_code;		/* -PTD_ETRUNC (lost) or -PTD_ELIMIT */
	uint64_t end_lost;	/* bytes lost at its end */
	bool end_reported;
};

struct ptd_stream {
	struct ptd_stream_opts o;
	char *dir;
	struct ptd_timeline tl;
	/* The block path's instruction cache when the caller gives none:
	 * one for the stream, not one a decode. */
	struct ptd_insncache *own_icache;
	struct seg *segs;	/* segs[nsegs - 1] is open */
	size_t nsegs;
	uint64_t end;		/* stream offset of the end */
	bool finished;		/* decoded final */
	/* Image changes that failed where no decode passed them (applied
	 * to a segment's image at its anchor): error records still to be
	 * sent, each once.  Events with seq < seq_told were told. */
	struct pend_err {
		int code;
		uint64_t offset;
		const char *detail;	/* interned in the iscache */
	} *perr;
	size_t nperr;
	uint64_t seq_told;
	struct ptd_stream_stats st;
	/* Call records asked for: the thread's stack, kept across rounds
	 * from the records delivered (the decodes themselves are asked for
	 * insn and event records instead), and the kinds the caller wants. */
	struct ptd_calls *calls;
	unsigned want;
	/* first_exec / counters asked for: the table counting the records
	 * delivered, across rounds (the caller's, or @own_xt); the decodes
	 * are asked for insn records instead. */
	struct ptd_counters *xt, *own_xt;
	/* ptd_stream_decode_locked's @lock while it runs, else NULL: what
	 * touches the section cache holds it. */
	pthread_mutex_t *lock;
};

/* --- Segments. --- */

/* An image of the section cache freed (under s->lock). */
static void image_free(const struct ptd_stream *s, struct ptd_image *img)
{
	if (!img)
		return;
	ptd_lock_opt(s->lock);
	ptd_image_free(img);
	ptd_unlock_opt(s->lock);
}

static void seg_fini(const struct ptd_stream *s, struct seg *g)
{
	free(g->buf);
	image_free(s, g->img);
	memset(g, 0, sizeof(*g));
}

/* A new image, a copy of @src unless NULL (under s->lock). */
static int image_make(struct ptd_stream *s, const struct ptd_image *src,
		      struct ptd_image **ret)
{
	struct ptd_image *img;
	int r = 0;

	ptd_lock_opt(s->lock);
	(void)ptd_image_new(s->o.iscache, "stream", &img);
	if (!img)
		r = -ENOMEM;
	else if (src && (r = ptd_image_copy(img, src)) < 0) {
		ptd_image_free(img);
		img = NULL;
	}
	ptd_unlock_opt(s->lock);
	*ret = img;
	return r;
}

/* Apply to @img the events from *@next on whose position is <= @upto.
 * A failed event is skipped, as the decoder's cursor skips it: the decode
 * that passed it reported it as an error record, and one no decode passed
 * (applied here first) gets its error record from seg_round. */
static void catch_up(struct ptd_stream *s, struct ptd_image *img,
		     size_t *next, uint64_t upto)
{
	while (*next < s->tl.n) {
		const struct ptd_tl_event *ev = &s->tl.ev[*next];
		struct ptd_diag d = { "" };
		int64_t pos = ptd_tl_event_pos(ev, s->o.tid);
		int r;

		if ((uint64_t)pos > upto)
			break;
		ptd_lock_opt(s->lock);
		r = ptd_tl_event_apply(ev, img, s->dir, &d);
		if (r < 0 && ev->seq >= s->seq_told) {
			struct pend_err *v = reallocarray(
				s->perr, s->nperr + 1, sizeof(*v));

			if (v) {	/* else: not told, decoded alike */
				s->perr = v;
				v[s->nperr].code = r;
				v[s->nperr].offset = pos < 0 ? 0 : (uint64_t)pos;
				v[s->nperr].detail = ptd_iscache_intern(
					s->o.iscache, d.msg[0] ? d.msg : NULL);
				s->nperr++;
			}
		}
		ptd_unlock_opt(s->lock);
		if (ev->seq >= s->seq_told)
			s->seq_told = ev->seq + 1;
		(*next)++;
	}
}

/* Send the error records catch_up queued. */
static int report_pending(struct ptd_stream *s, ptd_record_fn fn, void *ctx)
{
	for (size_t i = 0; i < s->nperr; i++) {
		struct ptd_record rec;
		int rc;

		memset(&rec, 0, sizeof(rec));
		rec.type = PTD_REC_ERROR;
		rec.pid = s->o.pid;
		rec.tid = s->o.tid;
		rec.u.error.code = s->perr[i].code;
		rec.u.error.ptd_code = true;
		rec.u.error.offset = s->perr[i].offset;
		rec.u.error.context = "image";
		rec.u.error.detail = s->perr[i].detail;
		s->st.delivered++;
		rc = fn(ctx, &rec);
		if (rc) {
			memmove(s->perr, s->perr + i + 1,
				(s->nperr - i - 1) * sizeof(*s->perr));
			s->nperr -= i + 1;
			return rc < 0 ? rc : -ECANCELED;
		}
	}
	s->nperr = 0;
	return 0;
}

/* Start a new open segment at the stream end, with the image of the
 * previous one brought up to it (the first: an empty image). */
static int seg_open(struct ptd_stream *s)
{
	struct seg *segs, *g, *prev;
	int r;

	if (s->nsegs > PTD_STREAM_MAX_SEGMENTS)
		return -PTD_ELIMIT;
	segs = reallocarray(s->segs, s->nsegs + 1, sizeof(*segs));
	if (!segs)
		return -ENOMEM;
	s->segs = segs;
	prev = s->nsegs ? &s->segs[s->nsegs - 1] : NULL;
	g = &s->segs[s->nsegs];
	memset(g, 0, sizeof(*g));
	g->base = s->end;
	g->decoded_to = s->end;
	r = image_make(s, prev ? prev->img : NULL, &g->img);
	if (r < 0)
		return r;
	if (prev)
		g->tl_next = prev->tl_next;
	catch_up(s, g->img, &g->tl_next, g->base);
	s->nsegs++;
	s->st.segments++;
	return 0;
}

/* End the open segment (@code: why) and open the next. */
static int seg_end(struct ptd_stream *s, int code, uint64_t lost)
{
	struct seg *g;
	int r;

	r = seg_open(s);
	if (r < 0)
		return r;
	g = &s->segs[s->nsegs - 2];
	g->ended = true;
	g->end_code = code;
	g->end_lost = lost;
	return 0;
}

/* Drop the first (ended, fully decoded) segment. */
static void seg_pop(struct ptd_stream *s)
{
	seg_fini(s, &s->segs[0]);
	memmove(&s->segs[0], &s->segs[1], (s->nsegs - 1) * sizeof(*s->segs));
	s->nsegs--;
}

/* Free the timeline events every segment's image already has. */
static void trim_timeline(struct ptd_stream *s)
{
	size_t n = s->tl.n;

	for (size_t i = 0; i < s->nsegs; i++)
		if (s->segs[i].tl_next < n)
			n = s->segs[i].tl_next;
	if (!n)
		return;
	/* timeline.h: the strings and pos of an added event are copies. */
	for (size_t i = 0; i < n; i++) {
		free(s->tl.ev[i].path);
		free(s->tl.ev[i].name);
		free(s->tl.ev[i].file);
		free(s->tl.ev[i].pos);
	}
	memmove(s->tl.ev, s->tl.ev + n, (s->tl.n - n) * sizeof(*s->tl.ev));
	s->tl.n -= n;
	for (size_t i = 0; i < s->nsegs; i++)
		s->segs[i].tl_next -= n;
}

/* --- Finding the next anchor. --- */

/* The IP of a FUP in a PSB+: last-IP is 0 after a PSB, so an update is
 * its payload. */
static uint64_t psb_fup_ip(const struct pt_packet_ip *p)
{
	const uint64_t low48 = (1ull << 48) - 1;

	if (p->ipc == pt_ipc_sext_48)
		return (p->ip & (1ull << 47)) ? p->ip | ~low48 : p->ip & low48;
	return p->ip;
}

/*
 * Where libipt's read ahead stops after a PSB+ (@pd is just past its
 * PSBEND): at the first packet that is not a status packet it decodes on
 * the way (padding, timing).  The PSB+'s status updates are fetched with
 * the decoder there.  *@ret: its offset.  False if the buffer ends first.
 */
static bool after_status(struct pt_packet_decoder *pd, uint64_t *ret)
{
	for (int i = 0; i < PSB_PLUS_MAX_PACKETS; i++) {
		struct pt_packet pkt;

		if (pt_pkt_get_offset(pd, ret) < 0 ||
		    pt_pkt_next(pd, &pkt, sizeof(pkt)) < 0)
			return false;
		if (pkt.type != ppt_pad && pkt.type != ppt_mtc &&
		    pkt.type != ppt_cyc && pkt.type != ppt_tsc &&
		    pkt.type != ppt_tma && pkt.type != ppt_cbr)
			return true;
	}
	return false;
}

/*
 * Whether the PSB at @off of @g can be an anchor: its PSB+ ends (PSBEND)
 * before the end of the buffer, and so does the padding and timing after
 * it (after_status), every packet in it well-formed, and it
 * holds a FUP with an IP, i.e. tracing is enabled there.  Where tracing is
 * disabled the decoder carries state across the PSB that a decode
 * starting there lacks (the IP it was disabled at, which decides
 * "resumed" on the next enabled event).  *@probe gets its stream offsets
 * and IP (and in_step already set where it has no MODE.Exec: nothing to
 * probe it with).
 */
static bool psb_plus_complete(const struct ptd_stream *s, const struct seg *g,
			      size_t off, struct ptd_psb_probe *probe)
{
	struct pt_packet_decoder *pd;
	struct pt_config cfg;
	bool ok = false, fup = false, exec = false;

	pt_config_init(&cfg);
	cfg.begin = g->buf;
	cfg.end = g->buf + g->len;
	cfg.cpu = s->o.decode.cpu;
	pd = pt_pkt_alloc_decoder(&cfg);
	if (!pd)
		return false;
	if (pt_pkt_sync_set(pd, off) >= 0) {
		for (int i = 0; i < PSB_PLUS_MAX_PACKETS; i++) {
			struct pt_packet pkt;

			if (pt_pkt_next(pd, &pkt, sizeof(pkt)) < 0)
				break;
			if (i == 0 && pkt.type != ppt_psb)
				break;
			if (pkt.type == ppt_mode &&
			    pkt.payload.mode.leaf == pt_mol_exec)
				exec = true;
			if (pkt.type == ppt_fup &&
			    pkt.payload.ip.ipc != pt_ipc_suppressed) {
				fup = true;
				probe->ip = psb_fup_ip(&pkt.payload.ip);
			}
			if (pkt.type == ppt_psbend) {
				uint64_t end = 0;

				ok = fup && after_status(pd, &end);
				probe->at = g->base + off;
				probe->end = g->base + end;
				/* No MODE.Exec, no status update to probe
				 * with: the records alone decide. */
				probe->in_step = !exec;
				break;
			}
		}
	}
	pt_pkt_free_decoder(pd);
	return ok;
}

/* Offset in @g of the last PSB in (0, @below) that can be an anchor (and
 * its *@probe), or 0 if there is none. */
static size_t find_anchor(const struct ptd_stream *s, const struct seg *g,
			  size_t below, struct ptd_psb_probe *probe)
{
	static const uint8_t psb[PSB_LEN] = {
		0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
		0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
	};

	if (below > g->len)
		below = g->len;
	if (below <= PSB_LEN)
		return 0;
	for (size_t i = below - PSB_LEN; i > 0; i--) {
		if (g->buf[i] != 0x02 || memcmp(g->buf + i, psb, PSB_LEN))
			continue;
		if (psb_plus_complete(s, g, i, probe))
			return i;
	}
	return 0;
}

/* --- Rounds. --- */

/* Records compared, at the end of two decodes, before an anchor moves. */
#define WINDOW 32
/* Candidate anchors tried a round. */
#define MAX_CANDIDATES 2

/* Records of one decode, counted, some skipped, the rest delivered. */
struct round {
	uint64_t skip;		/* records to skip (already delivered) */
	uint64_t seen;		/* records the decoder gave */
	uint64_t delivered;
	ptd_record_fn fn;	/* NULL: count only */
	void *ctx;
	int cb_rc;		/* fn's stopping value */
	bool nomem;
	/* The decode stopped at an error, before the end of the trace
	 * (ptd_decode_stats.held_at_error). */
	bool held_at_error;
	/* The decode at the old anchor: the candidate new anchors (last
	 * first) and whether it passed each in step. */
	struct ptd_psb_probe probes[MAX_CANDIDATES];
	size_t ncand;
	/* The last WINDOW records seen: record seen-1-i is at
	 * win[(seen - 1 - i) % WINDOW]. */
	struct ptd_record win[WINDOW];
	/* check_anchor: every record seen */
	struct ptd_record *keep;
	size_t nkeep, capkeep;
	bool keeping;
};

static int round_keep(struct round *rd, const struct ptd_record *rec)
{
	if (rd->nkeep == rd->capkeep) {
		size_t cap = rd->capkeep ? 2 * rd->capkeep : 1024;
		struct ptd_record *k = reallocarray(rd->keep, cap, sizeof(*k));

		if (!k)
			return -ENOMEM;
		rd->keep = k;
		rd->capkeep = cap;
	}
	rd->keep[rd->nkeep++] = *rec;
	return 0;
}

static int round_fn(void *ctx, const struct ptd_record *rec)
{
	struct round *rd = ctx;
	int rc;

	rd->win[rd->seen % WINDOW] = *rec;
	rd->seen++;
	if (rd->keeping && round_keep(rd, rec) < 0) {
		rd->nomem = true;
		return 1;
	}
	if (rd->seen <= rd->skip || !rd->fn)
		return 0;
	rd->delivered++;
	rc = rd->fn(rd->ctx, rec);
	if (rc) {
		rd->cb_rc = rc < 0 ? rc : -ECANCELED;
		return 1;
	}
	return 0;
}

/* Decode @g from buffer offset @from (a PSB, or 0) to its end with
 * @img (changed by the decode) and the events from @tl_next on.  Returns
 * 0, rd->cb_rc if the callback stopped it, or a negative error. */
static int decode_from(struct ptd_stream *s, struct seg *g, size_t from,
		       struct ptd_image *img, size_t tl_next, bool more,
		       struct round *rd)
{
	struct ptd_decode_thread_args a;
	struct ptd_decode_stats st;
	struct ptd_tl_cursor c;
	int r;

	memset(&c, 0, sizeof(c));
	c.tl = &s->tl;
	c.dir = s->dir;
	c.tid = s->o.tid;
	c.end_seq = UINT64_MAX;
	c.next = tl_next;
	c.next_pos = tl_next < s->tl.n ? (uint64_t)ptd_tl_event_pos(
						 &s->tl.ev[tl_next], s->o.tid)
				       : UINT64_MAX;
	memset(&a, 0, sizeof(a));
	/* (nothing appended yet: no buffer, and NULL + 0 is undefined) */
	a.pt = g->buf ? g->buf + from : NULL;
	a.len = g->len - from;
	a.base = g->base + from;
	a.more = more;
	a.pid = s->o.pid;
	a.tid = s->o.tid;
	a.img = img;
	a.cursor = &c;
	a.icache = s->o.icache;
	a.lock = s->lock;
	a.probes = rd->ncand ? rd->probes : NULL;
	a.nprobes = rd->ncand;
	s->st.decoded_bytes += a.len;
	memset(&st, 0, sizeof(st));
	r = ptd_decode_thread(&s->o.decode, &a, round_fn, rd, &st);
	rd->held_at_error = st.held_at_error;
	s->st.parts += st.parts;
	s->st.serial_parts += st.serial_parts;
	if (!s->st.serial_why)
		s->st.serial_why = st.serial_why;
	/* what the cursor applied, its decode reported */
	if (c.next > 0 && c.next <= s->tl.n &&
	    s->tl.ev[c.next - 1].seq >= s->seq_told)
		s->seq_told = s->tl.ev[c.next - 1].seq + 1;
	if (rd->nomem)
		return -ENOMEM;
	if (rd->cb_rc)
		return rd->cb_rc;
	return r < 0 ? r : 0;
}

/* How records are compared: on the block path an instruction's time is
 * its block's, and where libipt ends a block depends on its block cache. */
static unsigned diff_flags(const struct ptd_stream *s)
{
	return s->o.decode.path == PTD_PATH_BLOCK ? PTD_DIFF_IGNORE_TIME : 0;
}

/* Whether the last WINDOW records of the decodes at the old anchor (@a)
 * and at the candidate (@p) agree. */
static bool windows_match(const struct round *a, const struct round *p,
			  unsigned flags)
{
	if (p->seen < WINDOW || a->seen < p->seen)
		return false;
	for (uint64_t i = 0; i < WINDOW; i++)
		if (ptd_record_diff(&a->win[(a->seen - 1 - i) % WINDOW],
				    &p->win[(p->seen - 1 - i) % WINDOW], flags))
			return false;
	return true;
}

/* check_anchor: the records of @p, aligned with those of @a at the end,
 * agree after the first instruction or block boundary of @p (where a
 * decode starting at a PSB may order a status event differently). */
static bool tails_match(const struct round *a, const struct round *p,
			bool block, unsigned flags)
{
	enum ptd_rec_type sync_end = block ? PTD_REC_BLOCK : PTD_REC_INSN;
	size_t from = 0;

	if (p->nkeep > a->nkeep)
		return false;
	while (from < p->nkeep && p->keep[from].type != sync_end)
		from++;
	for (size_t i = from + 1; i < p->nkeep; i++)
		if (ptd_record_diff(&a->keep[a->nkeep - p->nkeep + i],
				    &p->keep[i], flags))
			return false;
	return true;
}

/*
 * Try the PSB at @p as @g's new anchor: decode [p, end) with the image at
 * p and count its records.  It becomes the anchor when its last records
 * are those of the decode at the old anchor (@ra): from there on both
 * decodes are in the same state, so a decode at p skipping that count
 * delivers what a decode at the old anchor would.  (A decode that starts
 * at a PSB may report the PSB+'s status events at another place in its
 * first block than one that passes the PSB, so the first records may
 * differ; they are never delivered.)  Returns 1 if moved, 0 if not, or a
 * negative error.
 */
static int try_anchor(struct ptd_stream *s, struct seg *g,
		      const struct round *ra, size_t p)
{
	struct ptd_image *img_p = NULL, *work = NULL;
	struct round *rp;
	size_t tl_p = g->tl_next;
	int r;

	rp = calloc(1, sizeof(*rp));
	if (!rp)
		return -ENOMEM;
	rp->keeping = s->o.check_anchor;
	r = image_make(s, g->img, &img_p);
	if (r < 0)
		goto out;
	catch_up(s, img_p, &tl_p, g->base + p);
	r = image_make(s, img_p, &work);
	if (r < 0)
		goto out;
	r = decode_from(s, g, p, work, tl_p, true, rp);
	s->st.redecoded += g->len - p;
	if (r < 0 || rp->held_at_error || !windows_match(ra, rp, diff_flags(s)))
		goto out;
	if (s->o.check_anchor &&
	    !tails_match(ra, rp, s->o.decode.path == PTD_PATH_BLOCK,
			 diff_flags(s))) {
		s->st.anchor_mismatches++;
		goto out;
	}
	memmove(g->buf, g->buf + p, g->len - p);
	g->len -= p;
	g->base += p;
	/* The decodes agree from here on, record for record, aligned at
	 * their ends.  What was delivered is every record the decode at
	 * the old anchor released, or more: an earlier round may have
	 * released records that this one holds back (a short round, see
	 * the stats), and those lie past ra's end, in both decodes alike. */
	g->done = rp->seen + (ra->skip > ra->seen ? ra->skip - ra->seen : 0);
	image_free(s, g->img);
	g->img = img_p;
	img_p = NULL;
	g->tl_next = tl_p;
	s->st.anchor_moves++;
	r = 1;
out:
	free(rp->keep);
	free(rp);
	image_free(s, work);
	image_free(s, img_p);
	return r;
}

/* The candidate new anchors of @g: its last PSBs that can be one, for
 * the decode at the old anchor (@rd) to probe. */
static void find_candidates(const struct ptd_stream *s, const struct seg *g,
			    struct round *rd)
{
	size_t below = g->len;

	rd->ncand = 0;
	while (rd->ncand < MAX_CANDIDATES) {
		size_t p = find_anchor(s, g, below, &rd->probes[rd->ncand]);

		if (!p)
			return;
		rd->ncand++;
		below = p + PSB_LEN - 1;
	}
}

/* Move @g's anchor to one of its last PSBs, if one is good (try_anchor).
 * Returns 0 or a negative error. */
static int move_anchor(struct ptd_stream *s, struct seg *g,
		       const struct round *ra)
{
	/* The decodes compared must stop at the same place, the end: one
	 * held back at an error stopped before it, and its last records
	 * may agree with those of a decode elsewhere (code that repeats)
	 * whose state differs. */
	if (ra->held_at_error)
		return 0;
	for (size_t i = 0; i < ra->ncand; i++) {
		int r;

		/* The decode at the old anchor passed the PSB out of step
		 * with the trace (corrupt trace sent it elsewhere): a decode
		 * starting there would not be in its state, whatever their
		 * last records say. */
		if (!ra->probes[i].in_step)
			continue;
		r = try_anchor(s, g, ra, ra->probes[i].at - g->base);
		if (r)
			return r < 0 ? r : 0;
	}
	return 0;
}

/* One round of segment @g: deliver what is new.  Returns the records
 * delivered or a negative error / the callback's stopping value. */
static int64_t seg_round(struct ptd_stream *s, struct seg *g, bool final,
			 ptd_record_fn fn, void *ctx)
{
	struct ptd_image *work = NULL;
	struct round *ra;
	uint64_t end = g->base + g->len, delivered;
	int r;

	ra = calloc(1, sizeof(*ra));
	if (!ra)
		return -ENOMEM;
	ra->skip = g->done;
	ra->fn = fn;
	ra->ctx = ctx;
	ra->keeping = s->o.check_anchor && !final;
	s->st.rounds++;
	catch_up(s, g->img, &g->tl_next, g->base);
	r = image_make(s, g->img, &work);
	if (r < 0) {
		free(ra);
		return r;
	}
	/* Bytes up to the last round's end were decoded before. */
	s->st.redecoded += g->decoded_to > g->base ? g->decoded_to - g->base
						   : 0;
	if (!final)
		find_candidates(s, g, ra);
	r = report_pending(s, fn, ctx);
	if (r == 0)
		r = decode_from(s, g, 0, work, g->tl_next, !final, ra);
	image_free(s, work);
	if (ra->seen < ra->skip)
		s->st.short_rounds++;
	g->done += ra->delivered;
	s->st.delivered += ra->delivered;
	g->decoded_to = end;
	s->st.decoded_to = end;
	if (r == 0 && !final)
		r = move_anchor(s, g, ra);
	delivered = ra->delivered;
	free(ra->keep);
	free(ra);
	return r < 0 ? r : (int64_t)delivered;
}

/* The error record that ends segment @g. */
static int seg_report_end(struct ptd_stream *s, struct seg *g,
			  ptd_record_fn fn, void *ctx)
{
	struct ptd_record rec;
	int rc;

	memset(&rec, 0, sizeof(rec));
	rec.type = PTD_REC_ERROR;
	rec.pid = s->o.pid;
	rec.tid = s->o.tid;
	rec.u.error.code = g->end_code;
	rec.u.error.ptd_code = true;
	rec.u.error.offset = g->base + g->len;
	rec.u.error.context = g->end_code == -PTD_ETRUNC ? "lost" : "overflow";
	rec.u.error.skipped = g->end_lost;
	g->end_reported = true;
	s->st.delivered++;
	rc = fn(ctx, &rec);
	if (rc)
		return rc < 0 ? rc : -ECANCELED;
	return 0;
}

/* --- API. --- */

static bool decode_opts_valid(const struct ptd_decode_opts *d)
{
	if (d->path != PTD_PATH_INSN && d->path != PTD_PATH_BLOCK)
		return false;
	if (d->want & ~PTD_REC_ALL)
		return false;
	if (d->has_clock &&
	    (d->clock.time_mult == 0 || d->clock.time_shift >= 32))
		return false;
	return !((d->want & PTD_REC_BIT(PTD_REC_BLOCK)) &&
		 d->path != PTD_PATH_BLOCK);
}

int ptd_stream_set_clock(struct ptd_stream *s,
			 const struct ptd_perf_clock *clock,
			 const struct ptd_perf_wallref *wallref)
{
	if (!s || (clock && (clock->time_mult == 0 ||
			     clock->time_shift >= 32)))
		return -EINVAL;
	s->o.decode.has_clock = clock != NULL;
	if (clock)
		s->o.decode.clock = *clock;
	if (wallref) {
		s->o.decode.has_wallref = true;
		s->o.decode.wallref = *wallref;
	}
	return 0;
}

int ptd_stream_new(const struct ptd_stream_opts *o, struct ptd_stream **ret)
{
	struct ptd_stream *s;
	int r;

	if (!o || !ret || !o->iscache || o->tid <= 0 || o->pid < 0 ||
	    !decode_opts_valid(&o->decode))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *o;
	s->want = o->decode.want;
	if (s->want & PTD_REC_BIT(PTD_REC_CALL)) {
		if (ptd_calls_new(&s->calls) < 0) {
			free(s);
			return -ENOMEM;
		}
		s->o.decode.want &= ~PTD_REC_BIT(PTD_REC_CALL);
		s->o.decode.want |= PTD_REC_BIT(PTD_REC_INSN) |
				    PTD_REC_BIT(PTD_REC_EVENT);
	}
	if (s->want & PTD_COUNTERS_KINDS) {
		int err;

		s->xt = o->decode.counters;
		if (!s->xt && ptd_counters_new(0, &s->own_xt) < 0) {
			ptd_stream_free(s);
			return -ENOMEM;
		}
		if (!s->xt)
			s->xt = s->own_xt;
		if ((s->want & PTD_REC_BIT(PTD_REC_TRACE)) &&
		    (err = ptd_counters_enable_traces(
			     s->xt, o->decode.trace_threshold)) < 0) {
			ptd_stream_free(s);
			return err;
		}
		/* the records are counted here, as delivered (held back
		 * ones only once delivered); the decoder gives each its
		 * slot in the table, resolved once per cached instruction */
		s->o.decode.counters = NULL;
		s->o.decode.counter_slots = s->xt;
		/* the unmaps and execs, in order, for the traces */
		s->o.decode.image_records =
			s->want & PTD_REC_BIT(PTD_REC_TRACE);
		s->o.decode.want &= ~PTD_COUNTERS_KINDS;
		s->o.decode.want |= PTD_REC_BIT(PTD_REC_INSN);
	}
	if (!s->o.max_buffered)
		s->o.max_buffered = PTD_STREAM_DEFAULT_MAX_BUFFERED;
	ptd_timeline_init(&s->tl);
	s->dir = strdup(o->dir ? o->dir : ".");
	if (!s->dir) {
		ptd_stream_free(s);
		return -ENOMEM;
	}
	s->o.dir = s->dir;
	if (!s->o.icache && s->o.decode.path == PTD_PATH_BLOCK) {
		(void)ptd_insncache_new(0, &s->own_icache);
		if (!s->own_icache) {
			ptd_stream_free(s);
			return -ENOMEM;
		}
		s->o.icache = s->own_icache;
	}
	r = seg_open(s);
	if (r < 0) {
		ptd_stream_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

void ptd_stream_free(struct ptd_stream *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nsegs; i++)
		seg_fini(s, &s->segs[i]);
	free(s->segs);
	ptd_timeline_fini(&s->tl);
	ptd_insncache_free(s->own_icache);
	free(s->perr);
	free(s->dir);
	ptd_calls_free(s->calls);
	ptd_counters_free(s->own_xt);
	free(s);
}

struct ptd_counters *ptd_stream_counters(const struct ptd_stream *s)
{
	return s ? s->xt : NULL;
}

static int seg_reserve(struct seg *g, size_t more)
{
	size_t cap;
	uint8_t *b;

	if (g->len + more <= g->cap)
		return 0;
	if (more > SIZE_MAX / 2 - g->len)
		return -ENOMEM;
	cap = g->cap ? g->cap : 4096;
	while (cap < g->len + more)
		cap *= 2;
	b = realloc(g->buf, cap);
	if (!b)
		return -ENOMEM;
	g->buf = b;
	g->cap = cap;
	return 0;
}

int ptd_stream_append(struct ptd_stream *s, const uint8_t *data, size_t len)
{
	struct seg *g;
	int r;

	if (!s || (!data && len) || s->finished)
		return -EINVAL;
	if (!len)
		return 0;
	if (s->end > UINT64_MAX - len)
		return -EINVAL;
	g = &s->segs[s->nsegs - 1];
	/* Past the bound: decode what is here as a whole stream and resume
	 * at the next PSB (an error record says so). */
	if (g->len && g->len + len > s->o.max_buffered) {
		r = seg_end(s, -PTD_ELIMIT, 0);
		if (r < 0)
			return r;
		s->st.overflows++;
		g = &s->segs[s->nsegs - 1];
	}
	r = seg_reserve(g, len);
	if (r < 0)
		return r;
	memcpy(g->buf + g->len, data, len);
	g->len += len;
	s->end += len;
	s->st.appended += len;
	return 0;
}

int ptd_stream_add_event(struct ptd_stream *s, const struct ptd_tl_event *ev)
{
	struct ptd_tl_pos pos;
	struct ptd_tl_event e;
	int64_t r;

	if (!s || !ev || s->finished)
		return -EINVAL;
	e = *ev;
	pos.tid = s->o.tid;
	pos.pos = s->end;
	e.pos = &pos;
	e.npos = 1;
	r = ptd_timeline_add(&s->tl, &e);
	return r < 0 ? (int)r : 0;
}

int ptd_stream_lost(struct ptd_stream *s, uint64_t bytes)
{
	int r;

	if (!s || !bytes || s->finished)
		return -EINVAL;
	r = seg_end(s, -PTD_ETRUNC, bytes);
	if (r < 0)
		return r;
	s->st.lost += bytes;
	return 0;
}

/* The caller's callback behind the stack (struct ptd_stream.calls) and
 * the counts (.xt). */
struct calls_fn {
	struct ptd_stream *s;
	ptd_record_fn fn;
	void *ctx;
};

static int calls_fn(void *ctx, const struct ptd_record *rec)
{
	struct calls_fn *cf = ctx;
	int rc = 0;

	if (cf->s->calls)
		rc = ptd_calls_feed(cf->s->calls, rec, cf->fn, cf->ctx);
	if (rc == 0 && cf->s->xt)
		rc = ptd_counters_feed(cf->s->xt, rec,
				       cf->s->want & PTD_COUNTERS_KINDS, cf->fn,
				       cf->ctx);
	if (rc || !(cf->s->want & PTD_REC_BIT(rec->type)))
		return rc;
	return cf->fn(cf->ctx, rec);
}

static int stream_decode(struct ptd_stream *s, bool final, ptd_record_fn fn,
			 void *ctx)
{
	int64_t total = 0, n;
	struct calls_fn cf;
	int r;

	if (s->finished)
		return 0;
	if (s->calls || s->xt) {
		cf.s = s;
		cf.fn = fn;
		cf.ctx = ctx;
		fn = calls_fn;
		ctx = &cf;
	}
	/* Ended segments first, each as a whole stream, then its record. */
	while (s->nsegs > 1) {
		struct seg *g = &s->segs[0];

		n = seg_round(s, g, true, fn, ctx);
		if (n < 0)
			return (int)n;
		total += n;
		if (!g->end_reported) {
			r = seg_report_end(s, g, fn, ctx);
			total++;
			if (r)
				return r;
		}
		seg_pop(s);
	}
	n = seg_round(s, &s->segs[0], final, fn, ctx);
	if (n < 0)
		return (int)n;
	total += n;
	/* a table of its own: its counts end the stream (decoder.h) */
	if (final && s->own_xt && (s->want & PTD_REC_BIT(PTD_REC_COUNTERS))) {
		r = ptd_counters_emit(s->own_xt, s->o.decode.counters_top,
				      s->o.pid, s->o.tid, cf.fn, cf.ctx);
		if (r)
			return r;
	}
	if (final)
		s->finished = true;
	trim_timeline(s);
	return total > INT_MAX ? INT_MAX : (int)total;
}

int ptd_stream_decode_locked(struct ptd_stream *s, bool final,
			     pthread_mutex_t *lock, ptd_record_fn fn,
			     void *ctx)
{
	int r;

	if (!s || !fn)
		return -EINVAL;
	s->lock = lock;
	r = stream_decode(s, final, fn, ctx);
	s->lock = NULL;
	return r;
}

int ptd_stream_decode(struct ptd_stream *s, bool final, ptd_record_fn fn,
		      void *ctx)
{
	return ptd_stream_decode_locked(s, final, NULL, fn, ctx);
}

void ptd_stream_get_stats(const struct ptd_stream *s,
			  struct ptd_stream_stats *ret)
{
	if (!s || !ret)
		return;
	*ret = s->st;
	ret->anchor = s->segs[s->nsegs - 1].base;
	ret->buffered = 0;
	for (size_t i = 0; i < s->nsegs; i++)
		ret->buffered += s->segs[i].len;
}
