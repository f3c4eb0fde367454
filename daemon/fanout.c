/* SPDX-License-Identifier: MIT */
/*
 * Fan-out of one session's records to its subscribers (see fanout.h for the
 * threads, the lock and the counters).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/counter.h"
#include "common/diag.h"
#include "common/fileio.h"
#include "daemon/fanout.h"
#include "record/binframe.h"
#include "record/jsonw.h"

/* Longest lost record: {"type":"lost","records":N} + four kind counts of
 * up to 20 digits each. */
#define LOST_MAX 224
/* Room for a bye record: its message is at most PTD_DIAG_MAX bytes, which
 * escaping may grow six-fold. */
#define BYE_MAX (6 * PTD_DIAG_MAX + 256)
/* ,"session":N after a tagged record's type: at most 31 bytes. */
#define TAG_MAX 32

/* Stage entries a subscriber holds at most: then they are queued (a
 * largest entry always fits beside what is below the mark). */
#define STAGE_BYTES PTD_FANOUT_STAGE_BYTES
#define STAGE_ENTRY_MAX \
	(2 * sizeof(uint32_t) + PTD_JSON_MAX_RECORD + TAG_MAX)

struct ptd_subscriber {
	/* Decode thread only, read for every record (first, on one cache
	 * line: between two records the decode has pushed most of the
	 * fan-out out of the cache): its renderer in the roster
	 * (fan_view), and whether the record being fanned out passes its
	 * filter. */
	unsigned view;
	bool want;
	/* its filter passes every record of its kinds (but counters
	 * snapshots): no thread, no code condition */
	bool by_kind;
	unsigned kinds;			/* filter.spec.kinds */
	/* Decode thread only: records matched but not yet queued (stage_n
	 * of them, stage_len bytes of stage entries: a header, then the
	 * line or fixed-width record), so that a batch takes the lock
	 * once, not each record (stage_flush). */
	uint32_t stage_n;
	uint8_t *stage;
	size_t stage_len;
	/* The last entry, when it holds fixed-width records or JSON insn
	 * lines that the next one joins (offset + 1; 0: none): a run is one
	 * entry. */
	size_t stage_run;
	struct ptd_subscriber *next;
	struct ptd_fanout *fan;
	struct ptd_filter filter;	/* decode thread only (its cache) */
	unsigned id;
	uint64_t rule;			/* tagged for this rule's stream; 0:
					 * a session's own subscriber */
	size_t limit;			/* queue_size */
	bool binary;			/* frames (record/binframe.h), not
					 * JSON lines */
	bool packed;			/* binary, runs of addresses as
					 * address frames ("packed") */
	/* Guarded by the fan-out lock: */
	unsigned refs;			/* f->subs holds one, the roster one */
	bool gone;			/* unsubscribed: out of f->subs, its
					 * buffers freed */
	struct ptd_buf q;		/* appended by the decode thread */
	size_t open;			/* binary: q's open records frame
					 * (PTD_BIN_NONE) */
	uint64_t open_last;		/* an open address frame's last
					 * address (ptd_bin_buf_addrs) */
	struct ptd_buf out;		/* being written by the loop */
	size_t out_off;			/* bytes of out written */
	uint64_t matched, sent, lost;
	uint64_t lost_kind[PTD_REC_NTYPES];
	uint64_t lost_pending;		/* dropped since the last lost line */
	uint64_t lost_pending_kind[PTD_REC_NTYPES];
	bool bye_queued;
	/* lossless producers (ptd_fanout_wait_room): */
	uint64_t taken;			/* bytes the loop has written */
	bool stalled;			/* held back too long: not waited for */
	uint64_t stalled_taken;		/* ... until it takes more than this */
	bool cut;			/* PTD_STALL_CUT: held back too long;
					 * its records are counted lost until
					 * ptd_fanout_cut_end ends its stream */
};

/* One renderer per distinct field set among the subscribers (decode
 * thread only): each record is rendered once per set, not once per
 * subscriber, through the renderer's caches. */
struct fan_view {
	/* read for every record: first, with rec, away from the renderer's
	 * caches */
	uint64_t rendered;		/* the rec_seq it last rendered */
	bool is_rec;			/* this record went into rec */
	bool tagged;			/* ,"session":N after the type */
	/* binary frames: insn records of a fixed field set are encoded
	 * into rec (is_rec), the others rendered into line as for JSON */
	bool binary;
	bool fixed;			/* binary and jr.fields fixed-width */
	/* packed, and its fields an address frame's: runs of addresses go
	 * as address frames (fan_fixed_run), single records as fixed */
	bool packed;
	bool addrs;
	unsigned recsize;		/* fixed: ptd_bin_recsize */
	size_t len;			/* of line; 0: did not render */
	/* fan_lines_run: the subscriber its lines are rendered for (into
	 * its stage, at @at), the bytes rendered there so far and the room
	 * the stages of its subscribers all have */
	struct ptd_subscriber *first;
	uint8_t *at;
	size_t bytes, room;
	uint8_t rec[PTD_BIN_MAX_REC];
	struct ptd_jsonr jr;
	char line[PTD_JSON_MAX_RECORD + TAG_MAX];
};

struct ptd_fanout {
	pthread_mutex_t lock;
	pthread_cond_t room;		/* a queue shrank, a subscriber left,
					 * waits were cancelled */
	uint64_t session_id;
	pid_t pid;
	/* ,"session":N: what a rule stream's lines carry after their type
	 * (tag_line), rendered once */
	char tag[TAG_MAX];
	size_t tag_len;
	ptd_fanout_wake_fn wake;
	void *wake_ctx;
	/* Guarded by lock: */
	struct ptd_subscriber *subs;	/* in subscription order */
	unsigned nsubs;
	unsigned next_id;
	bool wake_pending;		/* a wake-up is on its way */
	bool wake_owed;			/* ... or owed: records queued by
					 * ptd_fanout_record wait for
					 * ptd_fanout_flush, or for a queue to
					 * fill to WAKE_BATCH_BYTES */
	bool ended;
	bool had_subs;			/* someone subscribed once */
	bool waits_cancelled;
	atomic_bool abandoned;		/* had subscribers, has none now */
	atomic_uint kinds_seen;		/* every subscriber's kinds, OR'ed */
	struct ptd_session_end end;
	char bye[BYE_MAX];		/* scratch for bye records */
	/* Bumped (under lock) whenever f->subs changes. */
	atomic_uint gen;
	/* Records rendered (ptd_fanout_renders), and of all records those
	 * fanned out in runs (ptd_fanout_run_records). */
	_Atomic uint64_t renders;
	_Atomic uint64_t in_runs;
	/* `ended`, readable without the lock: nothing is rendered after. */
	atomic_bool ended_hint;
	/* Decode thread only: the subscribers as of generation roster_gen,
	 * each holding a reference, and their renderers.  The decode thread
	 * matches and renders against it without the lock, then takes the
	 * lock once to queue the lines (skipping any that left since). */
	unsigned roster_gen;
	struct ptd_subscriber **roster;
	unsigned nroster, roster_cap;
	struct fan_view *views;
	unsigned nviews, views_cap;
	/* Decode thread only: bytes every subscriber's queue still had room
	 * for at the last ptd_fanout_wait_room that looked (beyond what it
	 * was asked for), less what was queued since: while it covers a
	 * wait, the wait needs no lock.  Valid for roster generation
	 * credit_gen; 0 while any subscriber is stalled. */
	size_t credit;
	unsigned credit_gen;
	bool staged;			/* a subscriber has staged records */
	/* every subscriber of the roster has its stage: records are
	 * staged (else, short of memory, queued one by one) */
	bool can_stage;
	uint64_t rec_seq;		/* records fanned out (fan_view) */
	/* every subscriber of the roster takes records by kind and, if it
	 * takes insn records, in fixed width (of some bytes): runs of insn
	 * records are fanned out whole (fan_fixed_run), encoded into run
	 * (STAGE_BYTES) once per view */
	bool fixed_run;
	uint8_t *run;
	/* fixed_run, and every subscriber that takes insn records reads
	 * nothing of them but what an address gives (PTD_BIN_IP_FIELDS):
	 * runs of addresses can stand for them (ptd_fanout_ips) */
	bool ips_ok;
	/* every subscriber of the roster takes records by kind and, if it
	 * takes insn records, as JSON lines: runs of insn records are
	 * rendered straight into a stage, once per view (fan_lines_run) */
	bool lines_run;
	atomic_bool cancelled_hint;	/* waits_cancelled, lock-free */
};

static struct ptd_fanout *fanout_alloc(uint64_t session_id, pid_t pid,
				       ptd_fanout_wake_fn wake, void *wake_ctx)
{
	struct ptd_fanout *f = calloc(1, sizeof(*f));
	pthread_condattr_t ca;

	if (!f)
		return NULL;
	if (pthread_mutex_init(&f->lock, NULL)) {
		free(f);
		return NULL;
	}
	/* ptd_fanout_wait_room's stall deadline is on the monotonic clock */
	if (pthread_condattr_init(&ca) ||
	    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
	    pthread_cond_init(&f->room, &ca)) {
		pthread_mutex_destroy(&f->lock);
		free(f);
		return NULL;
	}
	(void)pthread_condattr_destroy(&ca);
	f->session_id = session_id;
	f->pid = pid;
	f->tag_len = (size_t)snprintf(f->tag, sizeof(f->tag),
				      ",\"session\":%" PRIu64, session_id);
	f->wake = wake;
	f->wake_ctx = wake_ctx;
	f->next_id = 1;
	return f;
}

int ptd_fanout_new(uint64_t session_id, pid_t pid, ptd_fanout_wake_fn wake,
		   void *wake_ctx, struct ptd_fanout **ret)
{
	if (!ret)
		return -EINVAL;
	*ret = fanout_alloc(session_id, pid, wake, wake_ctx);
	return *ret ? 0 : -ENOMEM;
}

static void sub_free(struct ptd_subscriber *s)
{
	if (!s)
		return;
	ptd_buf_fini(&s->q);
	ptd_buf_fini(&s->out);
	free(s->stage);
	free(s);
}

/* Drop one reference to @s (lock held, or no other thread left); true if
 * that was the last (the caller frees it). */
static bool sub_unref(struct ptd_subscriber *s)
{
	return --s->refs == 0;
}

void ptd_fanout_free(struct ptd_fanout *f)
{
	struct ptd_subscriber *s, *next;

	if (!f)
		return;
	for (unsigned i = 0; i < f->nroster; i++)
		if (sub_unref(f->roster[i]))
			sub_free(f->roster[i]);
	for (s = f->subs; s; s = next) {
		next = s->next;
		if (sub_unref(s))
			sub_free(s);
	}
	free(f->roster);
	free(f->views);
	free(f->run);
	pthread_cond_destroy(&f->room);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/* Bytes of @s not yet written (lock held). */
static size_t sub_pending(const struct ptd_subscriber *s)
{
	return s->q.len + (s->out.len - s->out_off);
}

/* Append a JSON line (or lines) to @s's queue: as they are, or in a
 * frame of @type for a binary subscriber (lock held).  0 or -ENOMEM
 * (-EINVAL: too long for a frame; the subscriber misses it). */
static int sub_put_json(struct ptd_subscriber *s, const char *line, size_t n,
			enum ptd_bin_type type)
{
	if (!s->binary)
		return ptd_buf_append(&s->q, line, n);
	return ptd_bin_buf_json(&s->q, &s->open, type, line, n);
}

/* The framing a JSON line adds for @s. */
static size_t sub_frame_extra(const struct ptd_subscriber *s)
{
	return s->binary ? PTD_BIN_HDR : 0;
}

/* Append the lost record for what was dropped since the last one (lock
 * held).  Returns 0 or -ENOMEM (then the counts stay pending). */
static int put_lost(struct ptd_subscriber *s)
{
	char buf[LOST_MAX];
	int n, r;
	unsigned t;

	if (s->rule)
		n = snprintf(buf, sizeof(buf), "{\"type\":\"lost\",\"session\":%"
			     PRIu64 ",\"records\":%" PRIu64, s->fan->session_id,
			     s->lost_pending);
	else
		n = snprintf(buf, sizeof(buf), "{\"type\":\"lost\",\"records\":%"
			     PRIu64, s->lost_pending);
	for (t = 0; t < PTD_REC_NTYPES; t++)
		if (s->lost_pending_kind[t])
			n += snprintf(buf + n, sizeof(buf) - (size_t)n,
				      ",\"%s\":%" PRIu64,
				      ptd_rec_type_name((enum ptd_rec_type)t),
				      s->lost_pending_kind[t]);
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "}\n");
	r = sub_put_json(s, buf, (size_t)n, PTD_BIN_JSON);
	if (r < 0)
		return r;
	s->lost_pending = 0;
	memset(s->lost_pending_kind, 0, sizeof(s->lost_pending_kind));
	return 0;
}

static void count_lost(struct ptd_subscriber *s, enum ptd_rec_type t)
{
	s->lost++;
	s->lost_kind[t]++;
	s->lost_pending++;
	s->lost_pending_kind[t]++;
}

/* Queue one rendered record for @s, or drop and count it (lock held).
 * Returns true if the queue was empty before (the loop may need a
 * wake-up). */
static bool sub_enqueue(struct ptd_subscriber *s, const char *line,
			size_t len, enum ptd_rec_type t)
{
	size_t extra = sub_frame_extra(s);
	size_t need = len + extra + (s->lost_pending ? LOST_MAX + extra : 0);
	bool was_empty = s->q.len == 0;

	if (sub_pending(s) + need > s->limit ||
	    ptd_buf_reserve(&s->q, need) < 0 ||
	    (s->lost_pending && put_lost(s) < 0)) {
		count_lost(s, t);
		return false;
	}
	/* Cannot fail: reserved above. */
	(void)sub_put_json(s, line, len, PTD_BIN_JSON);
	s->sent++;
	return was_empty;
}

/* sub_enqueue for a binary subscriber's fixed-width insn record @rec of
 * @fields: into its queue's open records frame, or a new one. */
static bool sub_enqueue_rec(struct ptd_subscriber *s, const uint8_t *rec,
			    uint32_t fields, unsigned rs)
{
	size_t need = rs + PTD_BIN_HDR;
	bool was_empty = s->q.len == 0;

	/* the common case: the open frame takes it */
	if (!s->lost_pending && sub_pending(s) + need <= s->limit &&
	    ptd_bin_buf_record_fast(&s->q, s->open, fields, rec, rs)) {
		s->sent++;
		return was_empty;
	}
	if (s->lost_pending)	/* the lost frame closes the open one */
		need = rs + PTD_BIN_HDR + LOST_MAX + PTD_BIN_HDR;
	if (sub_pending(s) + need > s->limit ||
	    ptd_buf_reserve(&s->q, need) < 0 ||
	    (s->lost_pending && put_lost(s) < 0)) {
		count_lost(s, PTD_REC_INSN);
		return false;
	}
	/* Cannot fail: reserved above. */
	(void)ptd_bin_buf_record(&s->q, &s->open, fields, rec);
	s->sent++;
	return was_empty;
}

/* sub_enqueue for a packed subscriber's address frame @frame (@n bytes,
 * @k records, whole; its last address @last), joining its open address
 * frame where it can (ptd_bin_buf_addrs): all of it, or all @k records
 * counted lost.  Returns true if the queue was empty before. */
static bool sub_enqueue_frame(struct ptd_subscriber *s, const uint8_t *frame,
			      size_t n, uint32_t k, uint64_t last)
{
	size_t need = n + (s->lost_pending ? LOST_MAX + PTD_BIN_HDR : 0);
	bool was_empty = s->q.len == 0;

	if (sub_pending(s) + need > s->limit ||
	    ptd_buf_reserve(&s->q, need) < 0 ||
	    (s->lost_pending && put_lost(s) < 0)) {
		for (uint32_t i = 0; i < k; i++)
			count_lost(s, PTD_REC_INSN);
		return false;
	}
	/* (reserved: it adds at most @n) */
	(void)ptd_bin_buf_addrs(&s->q, &s->open, &s->open_last, frame, n,
				last);
	s->sent += k;
	return was_empty;
}

/* sub_enqueue_rec for @k records one after another at @recs: at once
 * where all fit in the open frame (as each would have), else one by one.
 * Returns true if the queue was empty before one of them. */
static bool sub_enqueue_recs(struct ptd_subscriber *s, const uint8_t *recs,
			     uint32_t fields, unsigned rs, uint32_t k)
{
	bool wake = false;

	for (uint32_t i = 0; i < k; i++) {
		size_t bytes = (size_t)(k - i) * rs;

		/* the rest at once: room in the queue and its open frame */
		if (!s->lost_pending &&
		    sub_pending(s) + bytes + PTD_BIN_HDR <= s->limit &&
		    ptd_buf_reserve(&s->q, bytes) == 0) {
			bool empty = s->q.len == 0;

			if (ptd_bin_buf_records_fast(&s->q, s->open, fields,
						     recs + (size_t)i * rs,
						     k - i, rs)) {
				s->sent += k - i;
				return wake || empty;
			}
		}
		/* else one (it may open a frame, or drop), then again */
		if (sub_enqueue_rec(s, recs + (size_t)i * rs, fields, rs))
			wake = true;
	}
	return wake;
}

/* sub_enqueue for @k JSON lines of records of type @t, @n bytes at @p
 * (a JSON subscriber's; each record one line): at once where all fit (as
 * each would have), else one by one.  Returns true if the queue was empty
 * before one of them. */
static bool sub_enqueue_lines(struct ptd_subscriber *s, const char *p,
			      size_t n, uint32_t k, enum ptd_rec_type t)
{
	const char *e = p + n;
	bool wake = false;

	if (!s->lost_pending && sub_pending(s) + n <= s->limit &&
	    ptd_buf_reserve(&s->q, n) == 0) {
		wake = s->q.len == 0;
		(void)ptd_buf_append(&s->q, p, n);	/* reserved */
		s->sent += k;
		return wake;
	}
	while (p < e) {
		const char *nl = memchr(p, '\n', (size_t)(e - p));
		size_t len = nl ? (size_t)(nl + 1 - p) : (size_t)(e - p);

		if (sub_enqueue(s, p, len, t))
			wake = true;
		p += len;
	}
	return wake;
}

/* Grow @arr (of *@cap elements of @size) to hold @n; false on ENOMEM. */
static bool grow(void **arr, unsigned *cap, unsigned n, size_t size)
{
	void *p;

	if (n <= *cap)
		return true;
	p = realloc(*arr, (size_t)n * size);
	if (!p)
		return false;
	*arr = p;
	*cap = n;
	return true;
}

/* Decode thread: bring the roster up to f->subs, with one renderer per
 * distinct field set.  Without memory for it the old roster stays (a
 * subscriber that joined gets nothing until a later try succeeds: its
 * records are not matched, so its counts stay exact). */
static void stage_flush_locking(struct ptd_fanout *f);

static void roster_sync(struct ptd_fanout *f)
{
	struct ptd_subscriber *s, *drop = NULL, *next;
	unsigned i, n = 0, v;
	bool tagged, binary, packed;

	/* records staged for the old roster go to it first */
	stage_flush_locking(f);

	for (;;) {
		pthread_mutex_lock(&f->lock);
		n = f->nsubs;
		pthread_mutex_unlock(&f->lock);
		/* room for every subscriber, each with a field set of its
		 * own at worst */
		if (!grow((void **)&f->roster, &f->roster_cap, n,
			  sizeof(*f->roster)) ||
		    !grow((void **)&f->views, &f->views_cap, n,
			  sizeof(*f->views)))
			return;
		pthread_mutex_lock(&f->lock);
		if (f->nsubs <= n)
			break;
		pthread_mutex_unlock(&f->lock);	/* more came: again */
	}
	/* Lock held: the old roster's references go, the new one's come. */
	for (i = 0; i < f->nroster; i++) {
		s = f->roster[i];
		if (sub_unref(s)) {
			s->next = drop;
			drop = s;
		}
	}
	n = 0;
	for (s = f->subs; s; s = s->next) {
		s->refs++;
		f->roster[n++] = s;
	}
	f->nroster = n;
	f->roster_gen = atomic_load_explicit(&f->gen, memory_order_relaxed);
	pthread_mutex_unlock(&f->lock);
	for (s = drop; s; s = next) {
		next = s->next;
		sub_free(s);
	}
	/* (the stage is the decode thread's: taken without the lock) */
	f->can_stage = true;
	for (i = 0; i < f->nroster; i++)
		if (!f->roster[i]->stage &&
		    !(f->roster[i]->stage = malloc(STAGE_BYTES)))
			f->can_stage = false;
	/* The renderers: one per distinct field set, caches fresh. */
	f->nviews = 0;
	for (i = 0; i < f->nroster; i++) {
		uint32_t fields = f->roster[i]->filter.spec.fields;

		/* A subscriber that chose nothing gets every field but
		 * sym: what it got before sessions had symbols, byte for
		 * byte, whether or not its session has them. */
		if (!fields)
			fields = PTD_FIELDS_ALL & ~PTD_FIELD_BIT(PTD_FIELD_SYM);
		fields |= PTD_FIELD_BIT(PTD_FIELD_TYPE);
		/* a rule's stream merges sessions: its lines always say
		 * whose (session, pid) */
		tagged = f->roster[i]->rule != 0;
		if (tagged)
			fields |= PTD_FIELD_BIT(PTD_FIELD_PID);
		binary = f->roster[i]->binary;
		packed = f->roster[i]->packed;
		for (v = 0; v < f->nviews; v++)
			if (f->views[v].jr.fields == fields &&
			    f->views[v].tagged == tagged &&
			    f->views[v].binary == binary &&
			    f->views[v].packed == packed)
				break;
		if (v == f->nviews) {
			struct fan_view *nv = &f->views[f->nviews++];

			ptd_jsonr_init(&nv->jr, fields);
			nv->rendered = 0;	/* not for this record */
			nv->tagged = tagged;
			nv->binary = binary;
			nv->fixed = binary && ptd_bin_fields_fixed(fields);
			nv->recsize = ptd_bin_recsize(fields);
			nv->packed = packed;
			nv->addrs = packed && ptd_bin_fields_addrs(fields);
		}
		f->roster[i]->view = v;
	}
	f->fixed_run = f->can_stage && f->nroster > 0;
	for (i = 0; i < f->nroster && f->fixed_run; i++) {
		const struct ptd_subscriber *rs = f->roster[i];
		const struct fan_view *rv = &f->views[rs->view];

		if (!rs->by_kind ||
		    ((rs->kinds & PTD_REC_BIT(PTD_REC_INSN)) &&
		     (!rv->fixed || !rv->recsize)))
			f->fixed_run = false;
	}
	if (f->fixed_run && !f->run && !(f->run = malloc(STAGE_BYTES)))
		f->fixed_run = false;
	f->lines_run = f->can_stage && f->nroster > 0;
	for (i = 0; i < f->nroster && f->lines_run; i++) {
		const struct ptd_subscriber *rs = f->roster[i];

		if (!rs->by_kind ||
		    ((rs->kinds & PTD_REC_BIT(PTD_REC_INSN)) && rs->binary))
			f->lines_run = false;
	}
	f->ips_ok = f->fixed_run;
	for (i = 0; i < f->nroster && f->ips_ok; i++) {
		const struct ptd_subscriber *rs = f->roster[i];

		if ((rs->kinds & PTD_REC_BIT(PTD_REC_INSN)) &&
		    (f->views[rs->view].jr.fields & ~PTD_BIN_IP_FIELDS))
			f->ips_ok = false;
	}
}

/* The roster brought up to date if a subscriber came or left since
 * (decode thread). */
static inline void roster_fresh(struct ptd_fanout *f)
{
	if (atomic_load_explicit(&f->gen, memory_order_acquire) !=
	    f->roster_gen)
		roster_sync(f);
}

/* Queued bytes that wake the loop at once (half the queue when smaller):
 * below them a record's wake-up waits for the producer's ptd_fanout_flush
 * (the end of its decode round), so that the loop writes many records a
 * send instead of one, and is woken once for them. */
#define WAKE_BATCH_BYTES (256u << 10)

static bool sub_urgent(const struct ptd_subscriber *s)
{
	size_t at = s->limit / 2 < WAKE_BATCH_BYTES ? s->limit / 2
						    : WAKE_BATCH_BYTES;

	return sub_pending(s) >= at;
}

/* Under the lock: records were queued (@queued), and a queue is full
 * enough to be written now (@urgent).  A wake-up is owed until one is on
 * its way; it is paid (returns true: wake the loop) once a queue is
 * urgent. */
static bool wake_due(struct ptd_fanout *f, bool queued, bool urgent)
{
	if (queued && !f->wake_pending) {
		f->wake_pending = true;
		f->wake_owed = true;
	}
	if (!f->wake_owed || !urgent)
		return false;
	f->wake_owed = false;
	return true;
}

/* A stage entry's header (host order, unaligned): the length of what
 * follows (a JSON line, fixed-width records, nothing, JSON lines, an
 * address frame), the records' type and which of the five it is.
 * STAGE_LINES (a JSON subscriber's insn lines, one per record) has their
 * count (uint32_t) between the header and the lines; a STAGE_FRAME is its
 * last address (uint64_t) and the frame (its count in its header). */
enum { STAGE_LINE, STAGE_REC, STAGE_LOST, STAGE_LINES, STAGE_FRAME };
#define STAGE_HDR(len, type, what)                                            \
	((uint32_t)(len) | (uint32_t)(type) << 16 | (uint32_t)(what) << 24)
#define STAGE_LEN(h) ((size_t)((h) & 0xffffu))
#define STAGE_TYPE(h) ((enum ptd_rec_type)(((h) >> 16) & 0xffu))
#define STAGE_WHAT(h) ((h) >> 24)
_Static_assert(PTD_JSON_MAX_RECORD + TAG_MAX <= 0xffffu,
	       "a stage entry's length takes 16 bits");
_Static_assert(STAGE_BYTES <= 0xffffu,
	       "a run of records (one entry) fits in 16 bits");

/* Queue every subscriber's staged records (lock held, decode thread): as
 * ptd_fanout_record would have one by one -- matched, then sent or lost
 * -- in their order, before whatever the caller queues next.  Returns
 * true if the loop needs a wake-up now (urgent), and notes an owed one. */
static bool stage_flush(struct ptd_fanout *f)
{
	bool wake = false, urgent = false;

	if (!f->staged)
		return false;
	f->staged = false;
	for (unsigned i = 0; i < f->nroster; i++) {
		struct ptd_subscriber *s = f->roster[i];
		const struct fan_view *v = &f->views[s->view];
		size_t len = s->stage_len, off = 0;

		if (!s->stage_n)
			continue;
		s->stage_n = 0;
		s->stage_len = 0;
		s->stage_run = 0;
		/* one that left, or whose stream ended, took none (as a
		 * record fanned out after that would have) */
		if (s->gone || s->bye_queued || f->ended)
			continue;
		while (off < len) {
			const uint8_t *p;
			uint32_t h;
			size_t n;
			enum ptd_rec_type t;

			memcpy(&h, s->stage + off, sizeof(h));
			n = STAGE_LEN(h);
			t = STAGE_TYPE(h);
			p = s->stage + off + sizeof(h);
			off += sizeof(h) + n;
			if (STAGE_WHAT(h) == STAGE_LINES) {
				uint32_t k;

				memcpy(&k, p, sizeof(k));
				p += sizeof(k);
				off += sizeof(k);
				s->matched += k;
				for (uint32_t j = 0; s->cut && j < k; j++)
					count_lost(s, t);
				if (!s->cut &&
				    sub_enqueue_lines(s, (const char *)p, n, k,
						      t))
					wake = true;
				continue;
			}
			if (STAGE_WHAT(h) == STAGE_FRAME) {
				uint64_t last;
				uint32_t k;

				memcpy(&last, p, sizeof(last));
				memcpy(&k, p + sizeof(last) + 8, sizeof(k));
				s->matched += k;
				for (uint32_t j = 0; s->cut && j < k; j++)
					count_lost(s, t);
				if (!s->cut &&
				    sub_enqueue_frame(s, p + sizeof(last),
						      n - sizeof(last), k,
						      last))
					wake = true;
				continue;
			}
			if (STAGE_WHAT(h) == STAGE_REC) {
				/* a run of fixed-width records */
				uint32_t k = v->recsize
						     ? (uint32_t)(n / v->recsize)
						     : 1;

				s->matched += k;
				for (uint32_t j = 0; s->cut && j < k; j++)
					count_lost(s, t);
				if (!s->cut &&
				    sub_enqueue_recs(s, p, v->jr.fields,
						     v->recsize, k))
					wake = true;
				continue;
			}
			s->matched++;
			if (s->cut || STAGE_WHAT(h) == STAGE_LOST) {
				count_lost(s, t);
				continue;
			}
			if (sub_enqueue(s, (const char *)p, n, t))
				wake = true;
		}
		urgent = urgent || sub_urgent(s);
	}
	return wake_due(f, wake, urgent);
}

/* stage_flush taking the lock, and waking the loop if it must. */
static void stage_flush_locking(struct ptd_fanout *f)
{
	bool wake;

	if (!f->staged)
		return;
	pthread_mutex_lock(&f->lock);
	wake = stage_flush(f);
	pthread_mutex_unlock(&f->lock);
	if (wake && f->wake)
		f->wake(f->wake_ctx);
}

void ptd_fanout_flush(struct ptd_fanout *f)
{
	bool wake;

	pthread_mutex_lock(&f->lock);
	/* (a wake-up stage_flush says is due is no longer owed: paid here) */
	wake = stage_flush(f) || f->wake_owed;
	f->wake_owed = false;
	pthread_mutex_unlock(&f->lock);
	if (wake && f->wake)
		f->wake(f->wake_ctx);
}

/* A rule stream's line: ,"session":N right after the record's type
 * (`{"type":"insn","session":3,"pid":...`).  @line has TAG_MAX bytes
 * beyond PTD_JSON_MAX_RECORD.  Returns the new length (0 stays 0). */
static size_t tag_line(const struct ptd_fanout *f, char *line, size_t len)
{
	char *at;

	/* the type's value ends at the first '"' after {"type":" (names
	 * have none); then ',' or '}' */
	if (len < 10 || !(at = memchr(line + 9, '"', len - 9)))
		return len;
	at++;
	memmove(at + f->tag_len, at, len - (size_t)(at - line));
	memcpy(at, f->tag, f->tag_len);
	return len + f->tag_len;
}


/* Does @s's next stage entry of kind @what join the run before it (a run
 * of @what: both run kinds hold insn records only)?  An entry of no bytes
 * never does (stage_put). */
static inline bool stage_joins(const struct ptd_subscriber *s, uint32_t what)
{
	uint32_t h;

	if ((what != STAGE_REC && what != STAGE_LINES) || !s->stage_run)
		return false;
	memcpy(&h, s->stage + s->stage_run - 1, sizeof(h));
	return STAGE_WHAT(h) == what;
}

/* Where the bytes of @s's next stage entry of kind @what go: right after
 * the run before it if it joins it (@join), else after a new entry's
 * header.  stage_entry puts them there; what is written there before is
 * not in the stage until then. */
static inline uint8_t *stage_next(const struct ptd_subscriber *s,
				  uint32_t what, bool join)
{
	if (join)
		return s->stage + s->stage_len;
	return s->stage + s->stage_len + sizeof(uint32_t) +
	       (what == STAGE_LINES ? sizeof(uint32_t) : 0);
}

/* Enter @k records of type @t, @n bytes at stage_next(@s, @what, @join),
 * into @s's stage (decode thread) as an entry of kind @what: with @join
 * (stage_joins, and @n > 0) as part of the run before it, its header
 * counting the bytes (a stage is far smaller than 64 KiB) and a run of
 * lines its records; else as a new entry, which the next may join if it
 * is a run of some bytes.  (A record of no bytes, fields "type" alone, is
 * one entry each: a run counts its records by their bytes.) */
static inline void stage_entry(struct ptd_subscriber *s, uint32_t what,
			       enum ptd_rec_type t, size_t n, uint32_t k,
			       bool join)
{
	bool run = (what == STAGE_REC || what == STAGE_LINES) && n;
	uint8_t *at;
	uint32_t h;

	if (join) {
		at = s->stage + s->stage_run - 1;
		memcpy(&h, at, sizeof(h));
		h += (uint32_t)n;
		memcpy(at, &h, sizeof(h));
		if (what == STAGE_LINES) {
			uint32_t c;

			memcpy(&c, at + sizeof(h), sizeof(c));
			c += k;
			memcpy(at + sizeof(h), &c, sizeof(c));
		}
		at = s->stage + s->stage_len;
	} else {
		at = s->stage + s->stage_len;
		s->stage_run = run ? s->stage_len + 1 : 0;
		h = STAGE_HDR(n, t, what);
		memcpy(at, &h, sizeof(h));
		at += sizeof(h);
		if (what == STAGE_LINES) {
			memcpy(at, &k, sizeof(k));
			at += sizeof(k);
		}
	}
	s->stage_len = (size_t)(at + n - s->stage);
	s->stage_n += k;
}

/* stage_entry for @n bytes copied from @p. */
static inline void stage_put(struct ptd_subscriber *s, uint32_t what,
			     enum ptd_rec_type t, const void *p, size_t n,
			     uint32_t k)
{
	bool join = n && stage_joins(s, what);

	memcpy(stage_next(s, what, join), p, n);
	stage_entry(s, what, t, n, k, join);
}

/* Stage the record being fanned out for @s, which wants it (decode
 * thread, no lock; f->can_stage): its line, its fixed-width record, or
 * that it is lost (it did not render).  *@used: the most bytes one
 * subscriber's queue will take for it; *@full: a stage is to be queued
 * (stage_done). */
static inline void stage_one(struct ptd_subscriber *s,
			     const struct fan_view *v, enum ptd_rec_type t,
			     size_t *used, bool *full)
{
	const void *p = v->line;
	size_t n = v->len, extra = sub_frame_extra(s), q;
	uint32_t what = STAGE_LOST;

	if (v->is_rec) {
		p = v->rec;
		n = v->recsize;
		extra = PTD_BIN_HDR;	/* a new frame at worst */
		what = STAGE_REC;
	} else if (n) {
		/* a JSON subscriber's insn lines run (one line a record:
		 * a run that does not fit is split at its newlines) */
		what = t == PTD_REC_INSN && !s->binary ? STAGE_LINES
						       : STAGE_LINE;
	}
	stage_put(s, what, t, p, n, 1);
	if (s->stage_len + STAGE_ENTRY_MAX > STAGE_BYTES)
		*full = true;
	/* what it will add to the queue: its lost record first if one is
	 * pending (only this thread makes them) */
	q = n ? n + extra : 0;
	if (q && s->lost_pending)
		q += LOST_MAX + extra;
	if (q > *used)
		*used = q;
}

/* After a record's stage_one()s. */
static void stage_done(struct ptd_fanout *f, size_t used, bool full)
{
	f->staged = true;
	f->credit = f->credit > used ? f->credit - used : 0;
	if (full)
		stage_flush_locking(f);
}

bool ptd_fanout_counters_due(struct ptd_fanout *f, uint64_t now_ms,
			     bool final, uint32_t *ret_top)
{
	uint32_t top = 0;
	bool any = false;

	roster_fresh(f);
	for (unsigned i = 0; i < f->nroster; i++) {
		struct ptd_filter *flt = &f->roster[i]->filter;
		uint32_t every = flt->spec.counters_every_ms;

		flt->counters_due = false;
		if (!(flt->spec.kinds & PTD_REC_BIT(PTD_REC_COUNTERS)))
			continue;
		if (!final) {
			if (!every)
				continue;
			if (!flt->counters_next_ms) {
				flt->counters_next_ms = now_ms + every;
				continue;
			}
			if (now_ms < flt->counters_next_ms)
				continue;
			flt->counters_next_ms = now_ms + every;
		}
		flt->counters_due = true;
		any = true;
		if (flt->spec.counters_top > top)
			top = flt->spec.counters_top;
	}
	if (ret_top)
		*ret_top = top;
	return any;
}

/* Room for @need bytes known without the lock (ptd_fanout_wait_room):
 * only the decode thread adds to the queues (and the credit counts what
 * it added), the loop only takes from them; a subscriber that joined or
 * left since voids it. */
static inline bool room_known(struct ptd_fanout *f, size_t need)
{
	return f->credit >= need &&
	       f->credit_gen ==
		       atomic_load_explicit(&f->gen, memory_order_acquire) &&
	       !atomic_load(&f->cancelled_hint) &&
	       !atomic_load_explicit(&f->abandoned, memory_order_relaxed);
}

/* ptd_fanout_record's work, inlined in the loop of ptd_fanout_records. */
static inline __attribute__((always_inline)) void
fan_one(struct ptd_fanout *f, const struct ptd_record *r)
{
	size_t used = 0;	/* the most bytes queued for one subscriber */
	bool urgent = false;
	struct ptd_subscriber *s;
	bool any = false, wake = false, full = false, staged_wake;
	unsigned i;

	if ((unsigned)r->type >= PTD_REC_NTYPES ||
	    atomic_load_explicit(&f->ended_hint, memory_order_relaxed))
		return;
	roster_fresh(f);
	/* Without the lock: match, render once per field set that a
	 * matching subscriber has, and stage it for each (queued a batch
	 * at a time). */
	f->rec_seq++;
	for (i = 0; i < f->nroster; i++) {
		struct fan_view *v;

		s = f->roster[i];
		if (s->by_kind && r->type != PTD_REC_COUNTERS)
			s->want = s->kinds & PTD_REC_BIT(r->type);
		else
			s->want = ptd_filter_match(&s->filter, r);
		if (!s->want)
			continue;
		any = true;
		v = &f->views[s->view];
		if (v->rendered != f->rec_seq) {
			/* a binary view's insn records straight into their
			 * fixed-width form: no JSON */
			v->is_rec = v->fixed && r->type == PTD_REC_INSN;
			if (v->is_rec) {
				v->len = ptd_bin_encode(v->rec, v->jr.fields,
							r);
			} else {
				v->len = ptd_jsonr_render(&v->jr, v->line, r);
				if (v->tagged)
					v->len = tag_line(f, v->line, v->len);
			}
			v->rendered = f->rec_seq;
			ptd_counter_add(&f->renders, 1);
		}
		if (f->can_stage)
			stage_one(s, v, r->type, &used, &full);
	}
	if (!any)
		return;
	if (f->can_stage) {
		stage_done(f, used, full);
		return;
	}
	/* One lock to queue the lines (after what is staged). */
	pthread_mutex_lock(&f->lock);
	staged_wake = stage_flush(f);
	for (i = 0; i < f->nroster && !f->ended; i++) {
		const struct fan_view *v;
		size_t before;

		s = f->roster[i];
		if (!s->want || s->gone || s->bye_queued)
			continue;
		before = s->q.len;
		s->matched++;
		if (s->cut) {
			count_lost(s, r->type);
			continue;
		}
		v = &f->views[s->view];
		if (v->is_rec) {
			if (sub_enqueue_rec(s, v->rec, v->jr.fields,
					    v->recsize))
				wake = true;
		} else if (!v->len) {
			count_lost(s, r->type);
			continue;
		} else if (sub_enqueue(s, v->line, v->len, r->type)) {
			wake = true;
		}
		urgent = urgent || sub_urgent(s);
		/* (the loop swaps queues under the lock: q only grew) */
		if (s->q.len - before > used)
			used = s->q.len - before;
	}
	f->credit = f->credit > used ? f->credit - used : 0;
	/* a wake-up owed until the flush, or a queue fills */
	wake = wake_due(f, wake, urgent) || staged_wake;
	pthread_mutex_unlock(&f->lock);
	if (wake && f->wake)
		f->wake(f->wake_ctx);
}

void ptd_fanout_record(struct ptd_fanout *f, const struct ptd_record *r)
{
	fan_one(f, r);
}

/* What fan_fixed_run fans out: insn records @recs, or (@ips non-NULL)
 * the instructions at @ips of thread @tid of process @pid. */
struct fan_src {
	const struct ptd_record *recs;
	const uint64_t *ips;
	pid_t pid, tid;
};

/* The leading insn records of @src (at most @n) fanned out at once, as
 * fan_one would one by one, where f->fixed_run (addresses: f->ips_ok):
 * each view encodes them once into f->run, each subscriber that takes
 * insn records stages them as one run -- as many as its stage takes
 * before it is full (then queued, as after the record that filled it),
 * and with @pace, as many as the credit covers, each with @pace->need to
 * spare before it (as its wait would have found; one after a wait,
 * @waited, as fan_one takes one).  Returns the records taken; 0: none,
 * the next is fan_one's (which waits for room if it must), or for
 * addresses, taken after a wait.  Addresses go to the roster they were
 * decided against (ptd_fanout_ips_ready): it is not synced first. */
static size_t fan_fixed_run(struct ptd_fanout *f, const struct fan_src *src,
			    size_t n, const struct ptd_fanout_pace *pace,
			    bool waited)
{
	size_t m = 0, u = 0, lostx = 0, fx = 0, used;
	bool any = false, full = false;

	if (!src->ips)
		roster_fresh(f);
	if (!(src->ips ? f->ips_ok : f->fixed_run) ||
	    atomic_load_explicit(&f->ended_hint, memory_order_relaxed))
		return 0;
	if (src->ips)
		m = n;
	while (m < n && src->recs[m].type == PTD_REC_INSN)
		m++;
	/* what every stage takes, and the most one record adds to a
	 * queue (stage_one's used: a new frame at worst; a pending lost
	 * record before the first) */
	for (unsigned i = 0; i < f->nroster && m; i++) {
		const struct ptd_subscriber *s = f->roster[i];
		/* a record's bytes in the stage, and at most in the queue */
		size_t rs = f->views[s->view].recsize, qs = rs + PTD_BIN_HDR;
		size_t start, k, most = SIZE_MAX;

		if (!(s->kinds & PTD_REC_BIT(PTD_REC_INSN)))
			continue;
		any = true;
		if (src->ips && f->views[s->view].addrs) {
			/* an address frame of its own entry (its last
			 * address before it), its header and head once */
			rs = qs = PTD_BIN_DELTA_MAX;
			start = s->stage_len + sizeof(uint32_t) +
				sizeof(uint64_t) + PTD_BIN_ADDRS_MAX(0);
			fx = PTD_BIN_ADDRS_MAX(0);
			most = PTD_BIN_MAX_ADDRS;
		} else {
			start = s->stage_len +
				(s->stage_run ? 0 : sizeof(uint32_t));
		}
		k = start + STAGE_ENTRY_MAX <= STAGE_BYTES
			    ? (STAGE_BYTES - STAGE_ENTRY_MAX - start) / rs + 1
			    : 1;
		if (k > most)
			k = most;
		if (k < m)
			m = k;
		if (qs > u)
			u = qs;
		if (s->lost_pending)
			lostx = LOST_MAX + PTD_BIN_HDR;
	}
	if (!any) {
		/* nobody takes them: as fan_one, nothing but the count */
		f->rec_seq += m;
		return m;
	}
	lostx += fx;
	if (pace) {
		size_t before = pace->need + lostx;

		if (!room_known(f, before + u))
			m = 0;
		else if (f->credit < before + m * u)
			m = (f->credit - before) / u;
		if (!m && waited)
			m = 1;
	}
	if (!m)
		return 0;
	f->rec_seq += m;
	for (unsigned v = 0; v < f->nviews; v++) {
		struct fan_view *fv = &f->views[v];
		size_t bytes = m * fv->recsize;
		bool encoded = false;
		uint32_t what = STAGE_REC;

		for (unsigned i = 0; i < f->nroster; i++) {
			struct ptd_subscriber *s = f->roster[i];

			if (s->view != v ||
			    !(s->kinds & PTD_REC_BIT(PTD_REC_INSN)))
				continue;
			if (!encoded && src->ips && fv->addrs) {
				/* its last address, the frame (m fits the
				 * stage: f->run's size) */
				memcpy(f->run, &src->ips[m - 1],
				       sizeof(uint64_t));
				bytes = sizeof(uint64_t) +
					ptd_bin_addrs_frame(
						f->run + sizeof(uint64_t),
						fv->jr.fields, src->pid,
						src->tid, src->ips, m);
				what = STAGE_FRAME;
			} else if (!encoded && src->ips)
				(void)ptd_bin_encode_ips(f->run, fv->jr.fields,
							 src->pid, src->tid,
							 src->ips, m);
			else if (!encoded)
				(void)ptd_bin_encode_run(f->run, fv->jr.fields,
							 src->recs, m);
			if (!encoded) {
				ptd_counter_add(&f->renders, m);
				encoded = true;
			}
			stage_put(s, what, PTD_REC_INSN, f->run, bytes,
				  (uint32_t)m);
			if (s->stage_len + STAGE_ENTRY_MAX > STAGE_BYTES)
				full = true;
		}
	}
	used = m * u + lostx;
	stage_done(f, used, full);
	ptd_counter_add(&f->in_runs, m);
	return m;
}

/* The leading insn records of @recs (at most @n) fanned out at once, as
 * fan_one would one by one, where f->lines_run: each view renders them
 * one after another straight into the stage of its first subscriber that
 * takes insn records (as one STAGE_LINES entry), and its other such
 * subscribers copy them from there at the end.  The run ends before a
 * record one of those stages may have no room for (the stage is full
 * then, and queued), before a record that does not render (fan_one's),
 * and with @pace before one the credit does not cover with @pace->need to
 * spare (as its wait would have found).  Returns the records taken; 0:
 * none, the next is fan_one's (which waits for room if it must). */
static size_t fan_lines_run(struct ptd_fanout *f,
			    const struct ptd_record *recs, size_t n,
			    const struct ptd_fanout_pace *pace)
{
	size_t m = 0, used = 0, lostx = 0;
	bool any = false, full = false;
	unsigned v;

	if (!n || recs[0].type != PTD_REC_INSN)
		return 0;
	roster_fresh(f);
	if (!f->lines_run ||
	    atomic_load_explicit(&f->ended_hint, memory_order_relaxed))
		return 0;
	for (v = 0; v < f->nviews; v++)
		f->views[v].first = NULL;
	for (unsigned i = 0; i < f->nroster; i++) {
		struct ptd_subscriber *s = f->roster[i];
		struct fan_view *fv = &f->views[s->view];
		uint8_t *at;
		size_t room;

		if (!(s->kinds & PTD_REC_BIT(PTD_REC_INSN)))
			continue;
		any = true;
		at = stage_next(s, STAGE_LINES, stage_joins(s, STAGE_LINES));
		room = STAGE_BYTES - (size_t)(at - s->stage);
		if (!fv->first) {
			fv->first = s;
			fv->at = at;
			fv->bytes = 0;
			fv->room = room;
		} else if (room < fv->room) {
			fv->room = room;
		}
		if (s->lost_pending)
			lostx = LOST_MAX;
	}
	if (!any) {
		/* nobody takes them: as fan_one, nothing but the count */
		while (m < n && recs[m].type == PTD_REC_INSN)
			m++;
		f->rec_seq += m;
		return m;
	}
	for (; m < n && recs[m].type == PTD_REC_INSN; m++) {
		size_t most = 0;	/* the most bytes a view rendered */
		bool fits = true;

		for (v = 0; v < f->nviews; v++) {
			struct fan_view *fv = &f->views[v];

			if (fv->first && fv->bytes + PTD_JSON_MAX_RECORD +
							 TAG_MAX >
						 fv->room)
				fits = false;
			if (fv->first && fv->bytes > most)
				most = fv->bytes;
		}
		if (!fits || (pace && !room_known(f, pace->need + lostx + most)))
			break;
		for (v = 0; v < f->nviews; v++) {
			struct fan_view *fv = &f->views[v];
			char *line = (char *)fv->at + fv->bytes;
			size_t len;

			if (!fv->first)
				continue;
			len = ptd_jsonr_render(&fv->jr, line, &recs[m]);
			if (fv->tagged)
				len = tag_line(f, line, len);
			if (!len)
				break;
			fv->bytes += len;
			fv->len = len;	/* (fan_one renders again) */
		}
		if (v < f->nviews) {
			/* did not render: none of it is entered */
			while (v-- > 0)
				if (f->views[v].first)
					f->views[v].bytes -= f->views[v].len;
			break;
		}
	}
	if (!m)
		return 0;
	f->rec_seq += m;
	for (v = 0; v < f->nviews; v++) {
		struct fan_view *fv = &f->views[v];

		if (!fv->first)
			continue;
		ptd_counter_add(&f->renders, m);
		if (fv->bytes > used)
			used = fv->bytes;
		for (unsigned i = 0; i < f->nroster; i++) {
			struct ptd_subscriber *s = f->roster[i];

			if (&f->views[s->view] != fv ||
			    !(s->kinds & PTD_REC_BIT(PTD_REC_INSN)))
				continue;
			if (s == fv->first)
				/* (its lines are there: bytes > 0) */
				stage_entry(s, STAGE_LINES, PTD_REC_INSN,
					    fv->bytes, (uint32_t)m,
					    stage_joins(s, STAGE_LINES));
			else
				stage_put(s, STAGE_LINES, PTD_REC_INSN, fv->at,
					  fv->bytes, (uint32_t)m);
			if (s->stage_len + STAGE_ENTRY_MAX > STAGE_BYTES)
				full = true;
		}
	}
	stage_done(f, used + lostx, full);
	ptd_counter_add(&f->in_runs, m);
	return m;
}

size_t ptd_fanout_records(struct ptd_fanout *f, const struct ptd_record *recs,
			  size_t n, const struct ptd_fanout_pace *pace)
{
	for (size_t i = 0; i < n;) {
		struct fan_src src = { recs + i, NULL, 0, 0 };
		size_t k = fan_fixed_run(f, &src, n - i, pace, false);

		if (!k)
			k = fan_lines_run(f, recs + i, n - i, pace);
		if (k) {
			i += k;
			continue;
		}
		if (pace && !room_known(f, pace->need) &&
		    ptd_fanout_wait_room(f, pace->need, pace->stall_ms,
					 pace->stall) != PTD_ROOM_OK)
			return i;
		fan_one(f, &recs[i++]);
	}
	return n;
}

bool ptd_fanout_ips_ready(struct ptd_fanout *f)
{
	roster_fresh(f);
	return f->ips_ok &&
	       atomic_load_explicit(&f->gen, memory_order_relaxed) ==
		       f->roster_gen &&
	       !atomic_load_explicit(&f->ended_hint, memory_order_relaxed);
}

size_t ptd_fanout_ips(struct ptd_fanout *f, pid_t pid, pid_t tid,
		      const uint64_t *ips, size_t n,
		      const struct ptd_fanout_pace *pace)
{
	bool waited = false;

	for (size_t i = 0; i < n;) {
		struct fan_src src = { NULL, ips + i, pid, tid };
		size_t k = fan_fixed_run(f, &src, n - i, pace, waited);

		if (k) {
			i += k;
			waited = false;
			continue;
		}
		/* after the end, nothing is fanned out (as fan_one) */
		if (atomic_load_explicit(&f->ended_hint, memory_order_relaxed))
			return n;
		if (!pace || waited || !f->ips_ok ||
		    ptd_fanout_wait_room(f, pace->need, pace->stall_ms,
					 pace->stall) != PTD_ROOM_OK)
			return i;
		waited = true;
	}
	return n;
}

uint64_t ptd_fanout_renders(struct ptd_fanout *f)
{
	return atomic_load_explicit(&f->renders, memory_order_relaxed);
}

uint64_t ptd_fanout_run_records(struct ptd_fanout *f)
{
	return atomic_load_explicit(&f->in_runs, memory_order_relaxed);
}

void ptd_fanout_line(struct ptd_fanout *f, const char *line, size_t len)
{
	struct ptd_subscriber *s;
	bool wake = false, staged_wake;

	pthread_mutex_lock(&f->lock);
	staged_wake = stage_flush(f);	/* woken below */
	f->credit = 0;
	for (s = f->subs; s && !f->ended; s = s->next) {
		if (s->bye_queued || s->cut)
			continue;
		if (s->lost_pending)
			(void)put_lost(s);
		if (s->q.len == 0)
			wake = true;
		/* -ENOMEM: the subscriber misses this line */
		(void)sub_put_json(s, line, len, PTD_BIN_JSON);
	}
	/* lines (markers, triggers) go at once, with what was owed */
	if (wake && !f->wake_pending)
		f->wake_pending = true;
	else
		wake = f->wake_owed;
	wake = wake || staged_wake;
	f->wake_owed = false;
	pthread_mutex_unlock(&f->lock);
	if (wake && f->wake)
		f->wake(f->wake_ctx);
}

/* Render @s's bye record for end @e into f->bye; returns its length. */
static size_t render_bye(struct ptd_fanout *f, const struct ptd_subscriber *s,
			 const struct ptd_session_end *e)
{
	size_t cap = sizeof(f->bye), n;
	int k;

	/* in a rule's stream the session's bye is its session_end */
	k = snprintf(f->bye, cap,
		     "{\"type\":\"%s\",\"reason\":\"%s\",\"session\":%" PRIu64
		     ",\"pid\":%ld,\"sent\":%" PRIu64 ",\"lost\":%" PRIu64,
		     s->rule ? "session_end" : "bye",
		     ptd_session_end_name(e->reason), f->session_id, (long)f->pid, s->sent,
		     s->lost);
	n = (size_t)k;
	if (e->reason == PTD_END_EXITED) {
		if (e->exit_signal)
			k = snprintf(f->bye + n, cap - n, ",\"signal\":%d",
				     e->exit_signal);
		else
			k = snprintf(f->bye + n, cap - n, ",\"exit_code\":%d",
				     e->exit_code);
		n += (size_t)k;
	}
	if (e->message[0]) {
		size_t mlen = strnlen(e->message, sizeof(e->message));

		k = snprintf(f->bye + n, cap - n, ",\"message\":");
		n += (size_t)k;
		n += ptd_json_string(f->bye + n, cap - n - 4, e->message,
				     mlen);
	}
	memcpy(f->bye + n, "}\n", 2);
	return n + 2;
}

/* Queue the end of @s's stream: what was lost, then bye.  Neither counts
 * against the queue limit: both are small and come once (lock held). */
static void sub_put_bye(struct ptd_fanout *f, struct ptd_subscriber *s,
			const struct ptd_session_end *e)
{
	size_t n;

	if (s->lost_pending)
		(void)put_lost(s);
	n = render_bye(f, s, e);
	/* On -ENOMEM the stream ends without its bye: the loop still sees
	 * bye_queued and closes the connection. */
	(void)sub_put_json(s, f->bye, n, PTD_BIN_END);
	s->bye_queued = true;
}

void ptd_fanout_end(struct ptd_fanout *f, const struct ptd_session_end *end)
{
	struct ptd_subscriber *s;

	pthread_mutex_lock(&f->lock);
	(void)stage_flush(f);	/* the wake-up below is for everything */
	if (f->ended) {
		pthread_mutex_unlock(&f->lock);
		return;
	}
	f->ended = true;
	atomic_store_explicit(&f->ended_hint, true, memory_order_relaxed);
	f->end = *end;
	f->end.message[sizeof(f->end.message) - 1] = 0;
	for (s = f->subs; s; s = s->next)
		if (!s->bye_queued)	/* not cut off before */
			sub_put_bye(f, s, &f->end);
	f->wake_pending = true;
	f->wake_owed = false;		/* paid now */
	pthread_mutex_unlock(&f->lock);
	if (f->wake)
		f->wake(f->wake_ctx);
}

static int put_hello(struct ptd_fanout *f, struct ptd_subscriber *s)
{
	uint32_t fields;
	char buf[512];
	int n;
	unsigned t;
	const char *sep = "";

	/* in a rule's stream the session's hello is its session_start:
	 * the rule's hello said the rest */
	if (s->rule) {
		n = snprintf(buf, sizeof(buf), "{\"type\":\"session_start\","
			     "\"session\":%" PRIu64 ",\"pid\":%ld,\"rule\":%"
			     PRIu64 "}\n", f->session_id, (long)f->pid,
			     s->rule);
		return sub_put_json(s, buf, (size_t)n, PTD_BIN_JSON);
	}
	n = snprintf(buf, sizeof(buf),
		     "{\"type\":\"hello\",\"version\":%d,\"session\":%" PRIu64
		     ",\"pid\":%ld,\"subscriber\":%u,\"kinds\":[",
		     PTD_STREAM_VERSION, f->session_id, (long)f->pid, s->id);
	for (t = 0; t < PTD_REC_NTYPES; t++) {
		if (!(s->filter.spec.kinds & PTD_REC_BIT(t)))
			continue;
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s\"%s\"", sep,
			      ptd_rec_type_name((enum ptd_rec_type)t));
		sep = ",";
	}
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "]");
	/* the fields insn records carry, when it chose them (fields or
	 * symbols) */
	fields = s->filter.spec.fields | PTD_FIELD_BIT(PTD_FIELD_TYPE);
	if (s->filter.spec.fields) {
		sep = "";
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, ",\"fields\":[");
		for (t = 0; t < PTD_FIELD_N; t++) {
			if (!(fields & PTD_FIELD_BIT(t)))
				continue;
			n += snprintf(buf + n, sizeof(buf) - (size_t)n,
				      "%s\"%s\"", sep,
				      ptd_field_name((enum ptd_field)t));
			sep = ",";
		}
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "]");
	}
	if (s->binary)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      ",\"format\":\"%s\"",
			      s->packed ? "packed" : "binary");
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "}\n");
	return sub_put_json(s, buf, (size_t)n, PTD_BIN_JSON);
}

int ptd_fanout_subscribe(struct ptd_fanout *f, const struct ptd_filter *filter,
			 size_t queue_size, unsigned max_subscribers,
			 struct ptd_subscriber **ret_sub)
{
	return ptd_fanout_subscribe_tagged(f, filter, queue_size,
					   max_subscribers, 0, ret_sub);
}

int ptd_fanout_subscribe_tagged(struct ptd_fanout *f,
				const struct ptd_filter *filter,
				size_t queue_size, unsigned max_subscribers,
				uint64_t rule, struct ptd_subscriber **ret_sub)
{
	struct ptd_subscriber *s, **tail;
	int r;

	if (queue_size < PTD_JSON_MAX_RECORD)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->filter = *filter;
	s->filter.mod_ptr = NULL;
	s->by_kind = !filter->spec.ntids && !filter->code_filter;
	s->kinds = filter->spec.kinds;
	s->limit = queue_size;
	s->rule = rule;
	/* a rule's stream is JSON lines (proto.c refuses binary there) */
	s->binary = filter->spec.binary && !rule;
	s->packed = s->binary && filter->spec.packed;
	s->open = PTD_BIN_NONE;
	s->fan = f;
	s->refs = 1;			/* f->subs */
	pthread_mutex_lock(&f->lock);
	if (f->nsubs >= max_subscribers) {
		r = -PTD_ELIMIT;
		goto err;
	}
	s->id = f->next_id;
	r = put_hello(f, s);
	if (r < 0)
		goto err;
	if (f->ended)
		sub_put_bye(f, s, &f->end);
	f->next_id++;
	for (tail = &f->subs; *tail; tail = &(*tail)->next)
		;
	*tail = s;
	f->nsubs++;
	atomic_fetch_add_explicit(&f->gen, 1, memory_order_release);
	f->had_subs = true;
	atomic_fetch_or_explicit(&f->kinds_seen, filter->spec.kinds,
				 memory_order_relaxed);
	pthread_cond_broadcast(&f->room);	/* wait_subscriber */
	atomic_store_explicit(&f->abandoned, false, memory_order_relaxed);
	pthread_mutex_unlock(&f->lock);
	*ret_sub = s;
	return 0;
err:
	pthread_mutex_unlock(&f->lock);
	sub_free(s);
	return r;
}

void ptd_fanout_unsubscribe(struct ptd_fanout *f, struct ptd_subscriber *s)
{
	struct ptd_subscriber **p;
	bool last;

	if (!s)
		return;
	pthread_mutex_lock(&f->lock);
	for (p = &f->subs; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			f->nsubs--;
			break;
		}
	}
	atomic_fetch_add_explicit(&f->gen, 1, memory_order_release);
	if (f->nsubs == 0)
		atomic_store_explicit(&f->abandoned, true,
				      memory_order_relaxed);
	/* The decode thread's roster may still hold it until its next
	 * record: it sees `gone` and skips it.  Its queues go now. */
	s->gone = true;
	ptd_buf_fini(&s->q);
	ptd_buf_fini(&s->out);
	s->out_off = 0;
	s->open = PTD_BIN_NONE;
	last = sub_unref(s);
	/* a lossless producer waiting for it waits no more */
	pthread_cond_broadcast(&f->room);
	pthread_mutex_unlock(&f->lock);
	if (last)
		sub_free(s);
}

void ptd_fanout_clear_wake(struct ptd_fanout *f)
{
	pthread_mutex_lock(&f->lock);
	f->wake_pending = false;
	pthread_mutex_unlock(&f->lock);
}

unsigned ptd_fanout_count(struct ptd_fanout *f)
{
	unsigned n;

	pthread_mutex_lock(&f->lock);
	n = f->nsubs;
	pthread_mutex_unlock(&f->lock);
	return n;
}

bool ptd_fanout_ended(struct ptd_fanout *f)
{
	bool e;

	pthread_mutex_lock(&f->lock);
	e = f->ended;
	pthread_mutex_unlock(&f->lock);
	return e;
}

enum ptd_sub_state ptd_subscriber_peek(struct ptd_subscriber *s,
				       const char **ret_data, size_t *ret_len)
{
	enum ptd_sub_state st = PTD_SUB_IDLE;
	struct ptd_buf tmp;

	pthread_mutex_lock(&s->fan->lock);
	if (s->out_off == s->out.len && s->q.len) {
		/* All taken bytes are written: take the queue. */
		tmp = s->out;
		tmp.len = 0;
		s->out = s->q;
		s->q = tmp;
		s->out_off = 0;
		s->open = PTD_BIN_NONE;	/* the frames taken are closed */
	}
	if (s->out_off < s->out.len) {
		*ret_data = (const char *)s->out.data + s->out_off;
		*ret_len = s->out.len - s->out_off;
		st = PTD_SUB_DATA;
	} else if (s->bye_queued) {
		st = PTD_SUB_DONE;
	}
	pthread_mutex_unlock(&s->fan->lock);
	return st;
}

void ptd_subscriber_consume(struct ptd_subscriber *s, size_t n)
{
	pthread_mutex_lock(&s->fan->lock);
	if (n > s->out.len - s->out_off)
		n = s->out.len - s->out_off;
	s->out_off += n;
	s->taken += n;
	if (s->out_off == s->out.len) {
		s->out.len = 0;
		s->out_off = 0;
	}
	/* room for a lossless producer waiting for it */
	if (n)
		pthread_cond_broadcast(&s->fan->room);
	pthread_mutex_unlock(&s->fan->lock);
}

/* Lock held. */
static void sub_stats(const struct ptd_subscriber *s,
		      struct ptd_subscriber_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->id = s->id;
	ret->kinds = s->filter.spec.kinds;
	ret->fields = s->filter.spec.fields;
	ret->binary = s->binary;
	ret->packed = s->packed;
	ret->matched = s->matched;
	ret->sent = s->sent;
	ret->lost = s->lost;
	memcpy(ret->lost_kind, s->lost_kind, sizeof(ret->lost_kind));
	ret->cut = s->cut;
	ret->queued = sub_pending(s);
	ret->mem = s->q.cap + s->out.cap;
}

void ptd_subscriber_get_stats(struct ptd_subscriber *s,
			      struct ptd_subscriber_stats *ret)
{
	pthread_mutex_lock(&s->fan->lock);
	sub_stats(s, ret);
	pthread_mutex_unlock(&s->fan->lock);
}

unsigned ptd_fanout_get_stats(struct ptd_fanout *f,
			      struct ptd_subscriber_stats *ret, unsigned max)
{
	struct ptd_subscriber *s;
	unsigned n = 0;

	pthread_mutex_lock(&f->lock);
	for (s = f->subs; s && n < max; s = s->next)
		sub_stats(s, &ret[n++]);
	pthread_mutex_unlock(&f->lock);
	return n;
}

const atomic_uint *ptd_fanout_kinds_seen(struct ptd_fanout *f)
{
	return &f->kinds_seen;
}

bool ptd_fanout_abandoned(struct ptd_fanout *f)
{
	return atomic_load_explicit(&f->abandoned, memory_order_relaxed);
}

void ptd_fanout_cancel_waits(struct ptd_fanout *f)
{
	pthread_mutex_lock(&f->lock);
	f->waits_cancelled = true;
	atomic_store(&f->cancelled_hint, true);
	pthread_cond_broadcast(&f->room);
	pthread_mutex_unlock(&f->lock);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The first subscriber that holds a producer of @need bytes back (lock
 * held): its queue has no room and it is not stalled.  A stalled one that
 * has taken bytes since counts again. */
static struct ptd_subscriber *holding_back(struct ptd_fanout *f, size_t need)
{
	struct ptd_subscriber *s;

	for (s = f->subs; s; s = s->next) {
		if (s->cut || s->bye_queued)
			continue;
		if (s->stalled && s->taken == s->stalled_taken)
			continue;
		s->stalled = false;
		if (sub_pending(s) + need > s->limit)
			return s;
	}
	return NULL;
}

/* The room every subscriber a wait counts has beyond @need (lock held, no
 * one holding back); 0 if one is stalled (it is looked at again each
 * time, to see it read). */
static size_t room_left(struct ptd_fanout *f, size_t need)
{
	struct ptd_subscriber *s;
	size_t room = SIZE_MAX;

	for (s = f->subs; s; s = s->next) {
		if (s->cut || s->bye_queued)
			continue;
		if (s->stalled)
			return 0;
		if (s->limit - sub_pending(s) - need < room)
			room = s->limit - sub_pending(s) - need;
	}
	return room == SIZE_MAX ? 0 : room;
}

enum ptd_room ptd_fanout_wait_room(struct ptd_fanout *f, size_t need,
				   unsigned stall_ms, enum ptd_stall stall)
{
	enum ptd_room res = PTD_ROOM_OK;
	unsigned watch_id = 0;
	uint64_t watch_taken = 0, since = 0;

	if (room_known(f, need))
		return PTD_ROOM_OK;
	/* what is staged is in the queues before they are looked at */
	stage_flush_locking(f);
	pthread_mutex_lock(&f->lock);
	for (;;) {
		struct ptd_subscriber *s;
		struct timespec ts;
		uint64_t deadline;

		if (f->waits_cancelled) {
			res = PTD_ROOM_CANCELLED;
			break;
		}
		if (f->had_subs && f->nsubs == 0) {
			res = PTD_ROOM_ABANDONED;
			break;
		}
		s = holding_back(f, need);
		if (!s) {
			f->credit = room_left(f, need);
			f->credit_gen = atomic_load_explicit(
				&f->gen, memory_order_relaxed);
			break;
		}
		/* what is waited for must be on its way to the loop */
		if (f->wake_owed) {
			f->wake_owed = false;
			pthread_mutex_unlock(&f->lock);
			if (f->wake)
				f->wake(f->wake_ctx);
			pthread_mutex_lock(&f->lock);
			continue;
		}
		/* The stall clock runs while one subscriber takes nothing. */
		if (s->id != watch_id || s->taken != watch_taken) {
			watch_id = s->id;
			watch_taken = s->taken;
			since = mono_ms();
		} else if (mono_ms() - since >= stall_ms) {
			if (stall == PTD_STALL_CUT) {
				s->cut = true;
			} else {
				s->stalled = true;
				s->stalled_taken = s->taken;
			}
			watch_id = 0;
			continue;
		}
		deadline = since + stall_ms;
		ts.tv_sec = (time_t)(deadline / 1000u);
		ts.tv_nsec = (long)(deadline % 1000u) * 1000000L;
		(void)pthread_cond_timedwait(&f->room, &f->lock, &ts);
	}
	pthread_mutex_unlock(&f->lock);
	return res;
}

unsigned ptd_fanout_cut_end(struct ptd_fanout *f, const char *why)
{
	struct ptd_session_end e;
	struct ptd_subscriber *s;
	unsigned n = 0;

	memset(&e, 0, sizeof(e));
	e.reason = PTD_END_STALLED;
	(void)snprintf(e.message, sizeof(e.message), "%s", why ? why : "");
	stage_flush_locking(f);
	pthread_mutex_lock(&f->lock);
	for (s = f->subs; s && !f->ended; s = s->next) {
		if (!s->cut || s->bye_queued)
			continue;
		sub_put_bye(f, s, &e);
		n++;
	}
	if (n)
		f->wake_pending = true;
	pthread_mutex_unlock(&f->lock);
	if (n && f->wake)
		f->wake(f->wake_ctx);
	return n;
}

bool ptd_fanout_wait_subscriber(struct ptd_fanout *f, unsigned timeout_ms)
{
	uint64_t deadline = mono_ms() + timeout_ms;
	struct timespec ts = { (time_t)(deadline / 1000u),
			       (long)(deadline % 1000u) * 1000000L };
	bool got;

	pthread_mutex_lock(&f->lock);
	while (!f->nsubs && !f->waits_cancelled && mono_ms() < deadline)
		(void)pthread_cond_timedwait(&f->room, &f->lock, &ts);
	got = f->nsubs > 0;
	pthread_mutex_unlock(&f->lock);
	return got;
}
