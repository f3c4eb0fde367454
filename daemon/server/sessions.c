/* SPDX-License-Identifier: MIT */
/*
 * srv_session (srv.h): the sinks its decode thread calls, finding one for
 * a client, the per-user limits a new one must pass, stopping and freeing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/log.h"
#include "common/strutil.h"
#include "daemon/server/srv.h"
#include "decode/counters.h"
#include "record/jsonw.h"

/* Wake the loop (its eventfd); any thread. */
void srv_wake(void *ctx)
{
	struct ptd_server *s = ctx;
	uint64_t one = 1;

	/* EAGAIN means the counter is saturated: the loop wakes anyway. */
	if (write(s->ev.fd, &one, sizeof(one)) < 0) {
		/* nothing more to do */
	}
}

/* A snapshot's records are paced: its trace was copied out of the ring
 * and the target runs on, so nothing is gained by dropping records for a
 * full queue.  The decode thread waits for room in every subscriber's
 * queue instead, cutting off one that reads nothing for stall_ms; a stop
 * cancels the wait (srv_session_stop).  A live full-mode session's
 * records are not: they drop rather than hold the target back. */
static int counters_out(void *ctx, const struct ptd_record *rec)
{
	struct srv_session *ss = ctx;

	/* paced where the session's other records are */
	if (ss->pacing || (ss->rp && ss->lossless))
		(void)ptd_fanout_wait_room(ss->fan, PTD_JSON_MAX_RECORD,
					   ss->stall_ms,
					   ss->pacing ? PTD_STALL_CUT
						      : PTD_STALL_DROP);
	ptd_fanout_record(ss->fan, rec);
	return 0;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Decode thread: a counters snapshot to the subscribers due one (the
 * last: to every one asking for counters).  The table is this thread's,
 * so the counts are those of every record handed to the fan-out so far. */
static void counters_snapshot(struct srv_session *ss, bool final)
{
	uint32_t top;

	if (!ss->xt || !ptd_fanout_counters_due(ss->fan, mono_ms(), final,
						&top))
		return;
	(void)ptd_counters_emit(ss->xt, top, ss->pid, 0, counters_out, ss);
}

static int counters_text(void *ctx, const struct ptd_record *rec)
{
	struct srv_session *ss = ctx;
	size_t n;

	if (ss->xt_cap - ss->xt_len < PTD_JSON_MAX_RECORD) {
		size_t cap = ss->xt_cap ? 2 * ss->xt_cap : 65536;
		char *p = realloc(ss->xt_text, cap);

		if (!p)
			return -ENOMEM;
		ss->xt_text = p;
		ss->xt_cap = cap;
	}
	n = ptd_json_record(ss->xt_text + ss->xt_len,
			    ss->xt_cap - ss->xt_len, rec);
	ss->xt_len += n;
	return 0;
}

static int counters_charge(void *ctx, uint64_t bytes)
{
	return ptd_memacct_charge(ctx, bytes, NULL);
}

int srv_counters_new(struct srv_session *ss)
{
	int r = ptd_counters_new(0, &ss->xt);

	if (r == 0)
		ptd_counters_set_grow(ss->xt, counters_charge, &ss->acct);
	return r;
}

int srv_counters_render(struct srv_session *ss, uint32_t top)
{
	ss->xt_len = 0;
	return ptd_counters_emit(ss->xt, top, ss->pid, 0, counters_text, ss);
}

/* Decode thread: a counters request waiting is answered with the counts
 * as they are now. */
static void counters_asked(struct srv_session *ss)
{
	/* (taken back by exchange: the loop may take it at the end) */
	if (!ss->xt || !atomic_load_explicit(&ss->xt_asked,
					     memory_order_relaxed) ||
	    !atomic_exchange(&ss->xt_asked, false))
		return;
	ss->xt_err = srv_counters_render(ss, ss->xt_top);
	atomic_store_explicit(&ss->xt_ready, true, memory_order_release);
	srv_wake(ss->srv);
}

/* Every this many instructions the decode thread looks at the clock for
 * the periodic counters snapshots. */
#define SRV_COUNTERS_TICK 4096u

static void sink_record(void *ctx, const struct ptd_record *rec)
{
	struct srv_session *ss = ctx;

	if (ss->xt && rec->type == PTD_REC_INSN &&
	    ++ss->xt_tick >= SRV_COUNTERS_TICK) {
		ss->xt_tick = 0;
		counters_snapshot(ss, false);
		counters_asked(ss);
	}

	if (atomic_load_explicit(&ss->gate_init, memory_order_acquire) &&
	    atomic_load(&ss->ngates) &&
	    !srv_gate_pass(ss, rec))
		return;
	if (ss->pacing)
		(void)ptd_fanout_wait_room(ss->fan, PTD_JSON_MAX_RECORD,
					   ss->stall_ms, PTD_STALL_CUT);
	if (ss->sym)
		srv_symbols_report(ss, rec);
	ptd_fanout_record(ss->fan, rec);
}

/* Is there more to do with a record than fan it out (sink_record)? */
static bool sink_busy(struct srv_session *ss)
{
	return ss->xt || ss->pacing || ss->sym ||
	       (atomic_load_explicit(&ss->gate_init, memory_order_acquire) &&
		atomic_load(&ss->ngates));
}

static size_t sink_records(void *ctx, const struct ptd_record *recs,
			   size_t n, unsigned stall_ms)
{
	struct srv_session *ss = ctx;
	struct ptd_fanout_pace pace = { PTD_JSON_MAX_RECORD, stall_ms,
					PTD_STALL_DROP };

	if (!sink_busy(ss))
		return ptd_fanout_records(ss->fan, recs, n,
					  stall_ms ? &pace : NULL);
	for (size_t i = 0; i < n; i++) {
		if (stall_ms && ptd_fanout_wait_room(ss->fan, pace.need,
						     stall_ms, pace.stall) !=
					PTD_ROOM_OK)
			return i;
		sink_record(ss, &recs[i]);
	}
	return n;
}

/* Runs of addresses go straight to the fan-out: nothing else looks at
 * the records (sink_busy), none of them needs more than an address. */
static bool sink_ips_ready(void *ctx)
{
	struct srv_session *ss = ctx;

	return !sink_busy(ss) && ptd_fanout_ips_ready(ss->fan);
}

static size_t sink_ips(void *ctx, pid_t pid, pid_t tid, const uint64_t *ips,
		       size_t n, unsigned stall_ms)
{
	struct srv_session *ss = ctx;
	struct ptd_fanout_pace pace = { PTD_JSON_MAX_RECORD, stall_ms,
					PTD_STALL_DROP };

	return ptd_fanout_ips(ss->fan, pid, tid, ips, n,
			      stall_ms ? &pace : NULL);
}

/* Decode thread: the per-subscriber counts at a snapshot's begin; false
 * if they cannot be kept (no memory: the response lists none, the
 * records are paced all the same). */
static bool snap_counts_begin(struct srv_session *ss)
{
	if (!ss->snap_base) {
		ss->snap_base = calloc(ss->max_subs, sizeof(*ss->snap_base));
		ss->snap_now = calloc(ss->max_subs, sizeof(*ss->snap_now));
		ss->snap_subs = calloc(ss->max_subs, sizeof(*ss->snap_subs));
		if (!ss->snap_base || !ss->snap_now || !ss->snap_subs) {
			free(ss->snap_base);
			free(ss->snap_now);
			free(ss->snap_subs);
			ss->snap_base = ss->snap_now = NULL;
			ss->snap_subs = NULL;
			return false;
		}
	}
	/* the records staged before the snapshot are counted before it */
	ptd_fanout_flush(ss->fan);
	ss->snap_nbase = ptd_fanout_get_stats(ss->fan, ss->snap_base,
					      ss->max_subs);
	return true;
}

/* Decode thread: what each subscriber there now was sent and lost since
 * the snapshot's begin (one that came since: since its hello). */
static void snap_counts_end(struct srv_session *ss)
{
	unsigned n, i, j;

	ss->snap_nsubs = 0;
	if (!ss->snap_base)
		return;
	n = ptd_fanout_get_stats(ss->fan, ss->snap_now, ss->max_subs);
	for (i = 0; i < n; i++) {
		const struct ptd_subscriber_stats *now = &ss->snap_now[i];
		struct srv_snap_sub *o = &ss->snap_subs[i];

		o->id = now->id;
		o->sent = now->sent;
		o->lost = now->lost;
		o->cut = now->cut;
		for (j = 0; j < ss->snap_nbase; j++)
			if (ss->snap_base[j].id == now->id) {
				o->sent -= ss->snap_base[j].sent;
				o->lost -= ss->snap_base[j].lost;
				break;
			}
	}
	ss->snap_nsubs = n;
}

/* A trigger's hit, before the records of the snapshot it took (doc/
 * protocol.md, "trigger records"). */
static void trigger_record(struct srv_session *ss, uint64_t seq)
{
	const struct srv_hit *h = &ss->snap_hit;
	char wall[64] = "";
	size_t cap = sizeof(ss->marker);
	int k;

	if (h->wall_ns) {
		time_t sec = (time_t)(h->wall_ns / 1000000000u);
		struct tm tm;

		if (gmtime_r(&sec, &tm))
			(void)snprintf(wall, sizeof(wall), ",\"wall\":\"%04d-%02d-"
				       "%02dT%02d:%02d:%02d.%09uZ\"",
				       tm.tm_year + 1900, tm.tm_mon + 1,
				       tm.tm_mday, tm.tm_hour, tm.tm_min,
				       tm.tm_sec,
				       (unsigned)(h->wall_ns % 1000000000u));
	}
	k = snprintf(ss->marker, cap,
		     "{\"type\":\"trigger\",\"session\":%" PRIu64
		     ",\"trigger\":%" PRIu32 ",\"action\":\"snapshot\","
		     "\"pid\":%d,\"tid\":%d,\"ip\":\"%#" PRIx64 "\","
		     "\"ktime\":%" PRIu64 "%s,\"seq\":%" PRIu64 "}\n",
		     ss->id, h->trigger, (int)ss->pid, (int)h->tid, h->ip,
		     h->ktime_ns, wall, seq);
	if (k > 0 && (size_t)k < cap)
		ptd_fanout_line(ss->fan, ss->marker, (size_t)k);
}

/* Snapshot markers bracket a snapshot's records in every subscriber's
 * stream (doc/protocol.md, "snapshot records"). */
static void sink_snapshot(void *ctx, const struct ptd_snapshot_info *in,
			  bool done)
{
	struct srv_session *ss = ctx;
	size_t cap = sizeof(ss->marker), n;
	char trig[48] = "";
	int k;

	if (!done && ss->snap_hit_set) {
		trigger_record(ss, in->seq);
		(void)snprintf(trig, sizeof(trig), ",\"trigger\":%" PRIu32
			       ",\"tid\":%d", ss->snap_hit.trigger,
			       (int)ss->snap_hit.tid);
	}
	if (!done)
		k = snprintf(ss->marker, cap,
			     "{\"type\":\"snapshot\",\"phase\":\"begin\","
			     "\"session\":%" PRIu64 ",\"seq\":%" PRIu64
			     ",\"threads\":%u,\"bytes\":%" PRIu64
			     ",\"overwritten\":%" PRIu64 "%s",
			     ss->id, in->seq, in->nthreads, in->bytes,
			     in->overwritten, trig);
	else
		k = snprintf(ss->marker, cap,
			     "{\"type\":\"snapshot\",\"phase\":\"end\","
			     "\"session\":%" PRIu64 ",\"seq\":%" PRIu64
			     ",\"records\":%" PRIu64 ",\"insns\":%" PRIu64,
			     ss->id, in->seq, in->records, in->insns);
	n = k > 0 ? (size_t)k : 0;
	if (!done) {
		ss->pacing = true;
		(void)snap_counts_begin(ss);
		ss->snap_nsubs = 0;
	}
	if (done && in->err && n + 16 < cap) {
		memcpy(ss->marker + n, ",\"error\":", 9);
		n += 9;
		n += ptd_json_string(ss->marker + n, cap - n - 4, in->message,
				     strnlen(in->message,
					     sizeof(in->message)));
	}
	memcpy(ss->marker + n, "}\n", 2);
	ptd_fanout_line(ss->fan, ss->marker, n + 2);
	if (!done)
		return;
	ss->pacing = false;
	/* the subscribers cut off get their lost record and bye, not the
	 * end marker */
	(void)snprintf(ss->marker, cap, "read nothing for %u ms while "
		       "snapshot %" PRIu64 " waited for room in its queue "
		       "(subscriber_stall_ms): cut off", ss->stall_ms,
		       in->seq);
	(void)ptd_fanout_cut_end(ss->fan, ss->marker);
	snap_counts_end(ss);
	ss->snap_info = *in;
	atomic_store_explicit(&ss->snap_ready, true, memory_order_release);
	srv_wake(ss->srv);
}

static void sink_ended(void *ctx, const struct ptd_session_end *end)
{
	struct srv_session *ss = ctx;

	srv_children_report(ss);
	counters_snapshot(ss, true);	/* the last one, before bye */
	counters_asked(ss);

	ss->end = *end;
	atomic_store_explicit(&ss->ended, true, memory_order_release);
	/* Queues the bye for every subscriber and wakes the loop. */
	ptd_fanout_end(ss->fan, end);
}

static void sink_flush(void *ctx)
{
	struct srv_session *ss = ctx;

	srv_children_report(ss);	/* children refused meanwhile */
	counters_snapshot(ss, false);	/* (an idle target: no records) */
	counters_asked(ss);

	ptd_fanout_flush(ss->fan);
}

static bool sink_wait_subscriber(void *ctx, unsigned ms)
{
	struct srv_session *ss = ctx;

	return ptd_fanout_wait_subscriber(ss->fan, ms);
}

/* The sinks of @ss's decode thread (snapshot markers for a live session). */
void srv_session_sink(struct srv_session *ss, bool snapshots,
		      struct ptd_session_sink *ret_sink)
{
	memset(ret_sink, 0, sizeof(*ret_sink));
	ret_sink->record = sink_record;
	ret_sink->records = sink_records;
	ret_sink->ips_ready = sink_ips_ready;
	ret_sink->ips = sink_ips;
	ret_sink->ended = sink_ended;
	ret_sink->wait_subscriber = sink_wait_subscriber;
	ret_sink->flush = sink_flush;
	if (snapshots)
		ret_sink->snapshot = sink_snapshot;
	ret_sink->ctx = ss;
	ss->stall_ms = ss->srv->cfg.subscriber_stall_ms;
	ss->max_subs = ss->srv->cfg.max_subscribers_per_session;
}

/* ---- the loop's side ---- */

static struct srv_session *session_find(struct ptd_server *s,
					const struct conn *c, uint64_t id)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next)
		if (ss->id == id && ptd_auth_may_see(&c->peer, ss->owner))
			return ss;
	return NULL;
}

/* The session @req names, if @c may see it; else answered (no such
 * session) and NULL. */
struct srv_session *srv_session_find_or_refuse(struct ptd_server *s,
					       struct conn *c,
					       const struct ptd_request *req)
{
	struct srv_session *ss = session_find(s, c, req->session);

	if (!ss)
		srv_reply_error(c, req->id, PTD_ERR_NO_SUCH_SESSION,
				"no session %" PRIu64, req->session);
	return ss;
}

const char *srv_session_state(const struct srv_session *ss)
{
	if (ss->attaching)
		return "attaching";
	if (ss->reaped)
		return "ended";
	return ss->stopping ? "stopping" : "running";
}

void srv_session_stats(struct srv_session *ss, struct ptd_session_stats *st)
{
	if (ss->s)
		ptd_session_get_stats(ss->s, st);
	else if (ss->rp && !ss->reaped)
		ptd_replay_get_stats(ss->rp, st);
	else
		*st = ss->last;
}

static unsigned live_sessions_of(const struct ptd_server *s, uid_t uid)
{
	const struct srv_session *ss;
	unsigned n = 0;

	for (ss = s->sessions; ss; ss = ss->next)
		if (ss->owner == uid && !ss->reaped)
			n++;
	for (ss = s->starting; ss; ss = ss->next)
		n += ss->owner == uid;
	return n;
}

/* A new session (attach, replay) for @c would pass max_sessions_per_user:
 * refuse it (answered) and return true. */
bool srv_refuse_over_session_limit(struct ptd_server *s, struct conn *c,
				   const struct ptd_peer *peer,
				   const struct ptd_request *req)
{
	if (live_sessions_of(s, peer->uid) < s->cfg.max_sessions_per_user)
		return false;
	srv_reply_error(c, req->id, PTD_ERR_LIMIT,
			"uid %u already has %u sessions (max_sessions_per_user)",
			(unsigned)peer->uid, s->cfg.max_sessions_per_user);
	return true;
}

/* subscribe, snapshot, record: the session @req names, once it has
 * something to give (not still attaching); else answered and NULL. */
struct srv_session *srv_session_find_ready(struct ptd_server *s,
					   struct conn *c,
					   const struct ptd_request *req)
{
	struct srv_session *ss = srv_session_find_or_refuse(s, c, req);

	if (!ss || !ss->attaching)
		return ss;
	srv_reply_error(c, req->id, PTD_ERR_ATTACHING,
			"session %" PRIu64 " is still attaching to pid %ld "
			"(ask again once its attach is answered)", ss->id,
			(long)ss->pid);
	return NULL;
}

/* Charge @bytes (@what: what they are for) to @c's user through @a; if the
 * limit refuses it, answer the request (code memory_limit: in use, asked,
 * the limit, the key) and return true. */
bool srv_memory_refused(struct ptd_server *s, struct conn *c,
			const struct ptd_peer *peer,
			const struct ptd_request *req,
			struct ptd_memacct *a, uint64_t bytes,
			const char *what)
{
	char u[32], b[32], l[32];
	uint64_t used = 0;
	int r;

	a->m = s->mem;
	a->uid = peer->uid;
	r = ptd_memacct_charge(a, bytes, &used);
	if (r == 0)
		return false;
	ptd_log_info("uid %u: %s refused: memory limit (%" PRIu64 " in use, "
		     "%" PRIu64 " asked)", (unsigned)peer->uid, what, used,
		     bytes);
	srv_reply_error(c, req->id, PTD_ERR_MEMORY_LIMIT,
			"uid %u has %s in use, %s needs %s more; the limit is "
			"%s a user (user_memory_limit)", (unsigned)peer->uid,
			ptd_memlimit_fmt(used, u, sizeof(u)), what,
			ptd_memlimit_fmt(bytes, b, sizeof(b)),
			ptd_memlimit_fmt(ptd_memlimit_limit(s->mem), l,
				     sizeof(l)));
	return true;
}

/* A live session or a replay: stop it (any reason; repeatable). */
void srv_session_stop(struct srv_session *ss, enum ptd_session_end_reason why)
{
	if (ss->s) {
		/* a snapshot's decode waiting for a subscriber ends now */
		ptd_fanout_cancel_waits(ss->fan);
		ptd_session_stop(ss->s, why);
	}
	if (ss->rp)
		ptd_replay_stop(ss->rp, why);
}

/* The end was reported: keep the last stats, free the threads. */
void srv_session_release(struct srv_session *ss)
{
	if (ss->srv)	/* its uprobes go before its source */
		srv_triggers_drop(ss->srv, ss);
	if (ss->s)
		ptd_session_get_stats(ss->s, &ss->last);
	else if (ss->rp)
		ptd_replay_get_stats(ss->rp, &ss->last);
	ptd_session_free(ss->s);
	ss->s = NULL;
	ptd_replay_free(ss->rp);
	ss->rp = NULL;
	/* (after the threads that resolve through them; their charges go
	 * back with the session's) */
	srv_symbols_free(ss);
	/* its process is gone or let go: its pid may name another */
	srv_children_unfollow(ss);
	/* (the counts stay: an ended session still answers counters) */
	ptd_memacct_release(&ss->acct);
	/* a rule's process: continued by now (its session thread is gone);
	 * the pidfd need not outlive the session's threads */
	srv_watch_continue(ss);
	if (ss->stop_pidfd > 0)
		close(ss->stop_pidfd);
	ss->stop_pidfd = 0;
}

void srv_session_free(struct srv_session *ss)
{
	if (!ss)
		return;
	/* rule streams following it let go first (its fan-out goes) */
	if (ss->srv && ss->rule)
		srv_rulesubs_forget_session(ss->srv, ss, "the session ended "
					    "before it was followed");
	if (ss->srv)	/* its uprobes go before its source */
		srv_triggers_drop(ss->srv, ss);
	if (ss->s && ss->fan)
		ptd_fanout_cancel_waits(ss->fan);
	ptd_session_free(ss->s);
	ptd_replay_free(ss->rp);
	srv_symbols_free(ss);
	ptd_counters_free(ss->xt);
	ss->xt = NULL;
	ptd_memacct_release(&ss->acct);
	srv_record_forget(ss);
	ptd_fanout_free(ss->fan);
	if (ss->pidfd > 0)
		close(ss->pidfd);
	srv_watch_continue(ss);
	if (ss->stop_pidfd > 0)
		close(ss->stop_pidfd);
	srv_children_free(ss);
	srv_pending_clear(&ss->attach);
	srv_pending_clear(&ss->detach);
	srv_pending_clear(&ss->snap);
	srv_pending_clear(&ss->xt_wait);
	free(ss->xt_text);
	srv_pending_clear(&ss->start);
	if (atomic_load(&ss->gate_init))
		(void)pthread_mutex_destroy(&ss->gate_lock);
	free(ss->gate_th);
	free(ss->snap_base);
	free(ss->snap_now);
	free(ss->snap_subs);
	free(ss->path);
	free(ss->filter);
	free(ss);
}

/* Take @ss off @list (sessions or starting). */
void srv_session_unlink(struct srv_session **list, struct srv_session *ss)
{
	struct srv_session **p;

	for (p = list; *p; p = &(*p)->next)
		if (*p == ss) {
			*p = ss->next;
			return;
		}
}

/* @c is going away: nothing is answered to it any more, and an attach
 * nobody waits for any more is cancelled. */
void srv_sessions_forget_conn(struct ptd_server *s, const struct conn *c)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next) {
		if (ss->attach.conn == c) {
			srv_pending_drop(&ss->attach, c);
			srv_session_stop(ss, PTD_END_DETACHED);
			ss->stopping = true;
			ptd_log_info("session %" PRIu64 ": its client went away "
				     "while it was attaching: cancelled",
				     ss->id);
		}
		/* a snapshot it waits for is answered to nobody */
		srv_pending_drop(&ss->snap, c);
		srv_pending_drop(&ss->xt_wait, c);
		srv_pending_drop(&ss->detach, c);
		srv_record_drop_conn(ss, c);
	}
	for (ss = s->starting; ss; ss = ss->next)
		srv_pending_drop(&ss->start, c);
}
