/* SPDX-License-Identifier: MIT */
/*
 * Requests (srv.h): the dispatch table, and the commands answered from
 * what the loop knows (ping, version, list, status, subscribe) or by a
 * decode thread soon (snapshot).  attach.c, replay.c and record.c have
 * the others.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "daemon/server/srv.h"

static cJSON *kinds_array(unsigned kinds)
{
	cJSON *a = cJSON_CreateArray();
	unsigned t;

	for (t = 0; a && t < PTD_REC_NTYPES; t++)
		if (kinds & PTD_REC_BIT(t))
			cJSON_AddItemToArray(a, cJSON_CreateString(
				ptd_rec_type_name((enum ptd_rec_type)t)));
	return a;
}

/* The fields a subscriber chose (none: every field but sym, the key is
 * left out). */
static void add_fields(cJSON *o, uint32_t fields)
{
	cJSON *a;

	if (!fields)
		return;
	fields |= PTD_FIELD_BIT(PTD_FIELD_TYPE);
	a = cJSON_AddArrayToObject(o, "fields");
	for (unsigned i = 0; a && i < PTD_FIELD_N; i++)
		if (fields & PTD_FIELD_BIT(i))
			cJSON_AddItemToArray(a, cJSON_CreateString(
				ptd_field_name((enum ptd_field)i)));
}

static cJSON *session_summary(struct srv_session *ss)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "session", (double)ss->id);
	cJSON_AddNumberToObject(o, "pid", ss->pid);
	cJSON_AddNumberToObject(o, "owner", ss->owner);
	cJSON_AddStringToObject(o, "kind", ss->path ? "replay" : "live");
	if (ss->rule)
		cJSON_AddNumberToObject(o, "rule", (double)ss->rule);
	srv_children_status(ss, o);
	if (ss->path) {
		cJSON_AddStringToObject(o, "source",
					ptd_input_kind_name(ss->input_kind));
		cJSON_AddStringToObject(o, "path", ss->path);
		cJSON_AddBoolToObject(o, "lossless", ss->lossless);
		srv_replay_decode_summary(ss, o);
	} else {
		cJSON_AddStringToObject(o, "source",
					ptd_source_name(ss->source));
	}
	if (ss->spool)
		cJSON_AddBoolToObject(o, "record", true);
	cJSON_AddStringToObject(o, "state", srv_session_state(ss));
	cJSON_AddStringToObject(o, "mode", ptd_session_mode_name(ss->mode));
	if (!ss->path)	/* live sessions: their buffer layout */
		cJSON_AddStringToObject(o, "buffers", ss->per_cpu ? "per-cpu"
								  : "per-thread");
	if (!ss->path && ss->jobs > 1) {	/* its decodes (options.jobs) */
		cJSON_AddStringToObject(o, "decoder", "insn");
		cJSON_AddNumberToObject(o, "jobs", ss->jobs);
	}
	if (ss->filter)
		cJSON_AddStringToObject(o, "filter", ss->filter);
	srv_symbols_summary(ss, o);
	cJSON_AddNumberToObject(o, "subscribers", ptd_fanout_count(ss->fan));
	if (ss->reaped)
		cJSON_AddStringToObject(o, "end",
					ptd_session_end_name(ss->end.reason));
	return o;
}

static void cmd_list(struct ptd_server *s, struct conn *c,
		     const struct ptd_request *req)
{
	cJSON *res = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(res, "sessions");
	struct srv_session *ss;

	for (ss = s->sessions; a && ss; ss = ss->next)
		if (ptd_auth_may_see(&c->peer, ss->owner))
			cJSON_AddItemToArray(a, session_summary(ss));
	srv_rules_list(s, c, res);
	srv_reply_ok(c, req->id, res);
}

/* The asking user's memory use against user_memory_limit. */
static void status_memory(struct ptd_server *s, const struct conn *c,
			  cJSON *res)
{
	cJSON *m = cJSON_AddObjectToObject(res, "memory");

	cJSON_AddNumberToObject(m, "uid", c->peer.uid);
	cJSON_AddNumberToObject(m, "used",
				(double)ptd_memlimit_used(s->mem, c->peer.uid));
	cJSON_AddNumberToObject(m, "limit",
				(double)ptd_memlimit_limit(s->mem));
}

static void cmd_status_daemon(struct ptd_server *s, struct conn *c,
			      const struct ptd_request *req)
{
	cJSON *res = cJSON_CreateObject();
	struct srv_session *ss;
	unsigned n = 0;

	for (ss = s->sessions; ss; ss = ss->next)
		if (ptd_auth_may_see(&c->peer, ss->owner))
			n++;
	cJSON_AddStringToObject(res, "ptd", PTD_VERSION_STRING);
	cJSON_AddNumberToObject(res, "protocol", PTD_PROTO_VERSION);
	cJSON_AddNumberToObject(res, "sessions", n);
	cJSON_AddNumberToObject(res, "connections", s->nconns);
	cJSON_AddNumberToObject(res, "uptime_ms",
				(double)(srv_now_ms() - s->start_ms));
	status_memory(s, c, res);
	srv_reply_ok(c, req->id, res);
}

static void cmd_status(struct ptd_server *s, struct conn *c,
		       const struct ptd_request *req)
{
	struct ptd_subscriber_stats subs[64];
	struct ptd_session_stats st;
	struct srv_session *ss;
	cJSON *res, *a;
	unsigned i, n;

	if (!req->has_session) {
		cmd_status_daemon(s, c, req);
		return;
	}
	ss = srv_session_find_or_refuse(s, c, req);
	if (!ss)
		return;
	srv_session_stats(ss, &st);
	res = session_summary(ss);
	cJSON_AddNumberToObject(res, "threads", st.threads);
	cJSON_AddNumberToObject(res, "threads_live", st.threads_live);
	cJSON_AddNumberToObject(res, "trace_bytes", (double)st.trace_bytes);
	cJSON_AddNumberToObject(res, "insns", (double)st.insns);
	cJSON_AddNumberToObject(res, "records", (double)st.records);
	cJSON_AddNumberToObject(res, "lost_bytes", (double)st.lost_bytes);
	cJSON_AddNumberToObject(res, "threads_refused", st.threads_refused);
	cJSON_AddNumberToObject(res, "identity_mismatches",
				(double)st.identity_mismatches);
	if (ss->jobs > 1) {
		/* the parts the threads' traces were cut into; those a
		 * parallel decode could not prove the records of it decoded
		 * serially (the records are the same) */
		cJSON_AddNumberToObject(res, "parts", (double)st.parts);
		cJSON_AddNumberToObject(res, "serial_parts",
					(double)st.serial_parts);
		if (st.serial_why)
			cJSON_AddStringToObject(res, "serial_why",
						st.serial_why);
		/* threads decoded at once instead (decode/threadpar.h) */
		cJSON_AddNumberToObject(res, "threads_at_once",
					(double)st.threads_at_once);
	}
	srv_children_counts(ss, res);
	cJSON_AddNumberToObject(res, "memory",
				(double)atomic_load(&ss->acct.charged));
	if (ss->spool)
		srv_record_status(ss, res);
	if (ss->mode == PTD_MODE_SNAPSHOT) {
		cJSON_AddNumberToObject(res, "snapshot_size",
					(double)st.snapshot_size);
		cJSON_AddNumberToObject(res, "snapshots",
					(double)st.snapshots);
		cJSON_AddNumberToObject(res, "overwritten_bytes",
					(double)st.overwritten_bytes);
		cJSON_AddNumberToObject(res, "aux_written",
					(double)st.aux_written);
		/* ended threads: their last trace kept for the snapshots,
		 * or dropped (the memory limit) */
		cJSON_AddNumberToObject(res, "kept_threads",
					(double)st.kept_threads);
		cJSON_AddNumberToObject(res, "kept_bytes",
					(double)st.kept_bytes);
		cJSON_AddNumberToObject(res, "dropped_threads",
					(double)st.dropped_threads);
		cJSON_AddNumberToObject(res, "dropped_bytes",
					(double)st.dropped_bytes);
	}
	/* records rendered to JSON: once per field set, not per subscriber */
	cJSON_AddNumberToObject(res, "renders",
				(double)ptd_fanout_renders(ss->fan));
	srv_triggers_status(s, ss, res);
	a = cJSON_AddArrayToObject(res, "subscriber_list");
	n = ptd_fanout_get_stats(ss->fan, subs, PTD_ARRAY_SIZE(subs));
	for (i = 0; a && i < n; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddNumberToObject(o, "id", subs[i].id);
		cJSON_AddItemToObject(o, "kinds", kinds_array(subs[i].kinds));
		add_fields(o, subs[i].fields);
		if (subs[i].binary)
			cJSON_AddStringToObject(o, "format",
						subs[i].packed ? "packed"
							       : "binary");
		cJSON_AddNumberToObject(o, "matched", (double)subs[i].matched);
		cJSON_AddNumberToObject(o, "sent", (double)subs[i].sent);
		cJSON_AddNumberToObject(o, "lost", (double)subs[i].lost);
		cJSON_AddNumberToObject(o, "queued", (double)subs[i].queued);
		cJSON_AddItemToArray(a, o);
	}
	srv_reply_ok(c, req->id, res);
}

static void cmd_version(struct ptd_server *s, struct conn *c,
			const struct ptd_request *req)
{
	cJSON *res = cJSON_CreateObject();

	cJSON_AddNumberToObject(res, "protocol", PTD_PROTO_VERSION);
	cJSON_AddStringToObject(res, "ptd", PTD_VERSION_STRING);
	cJSON_AddNumberToObject(res, "stream", PTD_STREAM_VERSION);
	srv_reply_ok(c, req->id, res);
}

static void cmd_subscribe(struct ptd_server *s, struct conn *c,
			  const struct ptd_request *req)
{
	struct srv_session *ss = NULL;
	struct ptd_filter_spec spec = req->filter;
	struct ptd_filter f;
	cJSON *res;
	int r;

	if (!req->has_rule && !(ss = srv_session_find_ready(s, c, req)))
		return;
	/* Live decoding gives insn records; blocks come from offline decodes
	 * only (libipt's block cache decides where blocks end, which a
	 * stream decoder cannot reproduce exactly). */
	if (req->filter.kinds & PTD_REC_BIT(PTD_REC_BLOCK)) {
		srv_reply_error(c, req->id, PTD_ERR_UNSUPPORTED,
				"block records are not available from live "
				"sessions (ask for insn; ptctl decode --records "
				"block gives them offline)");
		return;
	}
	/* "symbols": every field, or the ones chosen, and sym.  Symbols are
	 * resolved by a session that decodes with them (attach's
	 * options.symbols, replay's "symbols"), once per instruction from
	 * its start: a subscriber cannot turn them on later (doc/protocol.md
	 * says why), so one asking a session without them is refused. */
	if (spec.symbols)
		spec.fields = (spec.fields ? spec.fields : PTD_FIELDS_ALL) |
			      PTD_FIELD_BIT(PTD_FIELD_SYM);
	if (req->has_rule) {
		if (ptd_filter_compile(&spec, &f) < 0)
			srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
					"bad filter");
		else
			srv_rulesub_subscribe(s, c, req, &f);
		return;
	}
	/* counts are kept by a session asked to count from its start
	 * (attach's options.counters, replay's "counters"): a subscriber
	 * cannot start them later, the first executions before it came
	 * are gone */
	if ((spec.kinds & PTD_COUNTERS_KINDS) && !ss->xt) {
		srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
				"kinds: %s: session %" PRIu64 " does not "
				"count (attach with options.counters, replay "
				"with \"counters\": true)",
				ptd_rec_type_name((enum ptd_rec_type)__builtin_ctz(
					spec.kinds & PTD_COUNTERS_KINDS)),
				ss->id);
		return;
	}
	if ((spec.fields & PTD_FIELD_BIT(PTD_FIELD_SYM)) && !ss->had_symbols) {
		srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
				"%s: session %" PRIu64 " decodes without "
				"symbols (attach with options.symbols, "
				"replay with \"symbols\": true)",
				spec.symbols ? "symbols" : "fields: sym",
				ss->id);
		return;
	}
	if (ptd_filter_compile(&spec, &f) < 0) {
		srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST, "bad filter");
		return;
	}
	/* its queue, the buffer being written and its stage: fanout.h */
	if (srv_memory_refused(s, c, &c->peer, req, &c->sub_acct,
			       ptd_fanout_sub_bytes(s->cfg.subscriber_queue_size),
			       "subscribing"))
		return;
	r = ptd_fanout_subscribe(ss->fan, &f, s->cfg.subscriber_queue_size,
				 s->cfg.max_subscribers_per_session, &c->sub);
	if (r < 0) {
		ptd_memacct_release(&c->sub_acct);
		srv_reply_error(c, req->id, ptd_proto_error_code(r),
				r == -PTD_ELIMIT
				    ? "session %" PRIu64 " already has %u "
				      "subscribers (max_subscribers_per_session)"
				    : "cannot subscribe to session %" PRIu64
				      " (%u)",
				ss->id, s->cfg.max_subscribers_per_session);
		return;
	}
	c->ss = ss;
	res = cJSON_CreateObject();
	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	cJSON_AddItemToObject(res, "kinds", kinds_array(f.spec.kinds));
	add_fields(res, f.spec.fields);
	if (f.spec.binary)
		cJSON_AddStringToObject(res, "format",
					f.spec.packed ? "packed" : "binary");
	srv_reply_ok(c, req->id, res);
}

/* Ask for a snapshot; the response comes when the decode thread has
 * taken it (srv_snapshots_answer), and the connection's later requests wait
 * for it. */
static void cmd_snapshot(struct ptd_server *s, struct conn *c,
			 const struct ptd_request *req)
{
	struct srv_session *ss = srv_session_find_ready(s, c, req);
	uint64_t seq;
	int r;

	if (!ss)
		return;
	if (ss->mode != PTD_MODE_SNAPSHOT) {
		srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
				"session %" PRIu64 " is not in snapshot mode "
				"(attach with \"mode\": \"snapshot\")", ss->id);
		return;
	}
	if (ss->snap_busy) {
		srv_reply_error(c, req->id, PTD_ERR_LIMIT,
				"a snapshot of session %" PRIu64 " is being "
				"taken", ss->id);
		return;
	}
	ss->snap_hit_set = false;	/* asked for, not a trigger's */
	r = ss->s && !ss->reaped ? ptd_session_snapshot(ss->s, &seq) : -ESRCH;
	if (r < 0) {
		srv_reply_error(c, req->id,
				r == -ESRCH ? PTD_ERR_NO_SUCH_SESSION
				: r == -EBUSY ? PTD_ERR_LIMIT
					  : PTD_ERR_INTERNAL,
				"session %" PRIu64 ": %s", ss->id,
				r == -ESRCH ? "it has ended" : ptd_strerror(r));
		return;
	}
	ss->snap_busy = true;
	srv_pending_wait(&ss->snap, c, req->id);
}

static cJSON *snapshot_result(const struct srv_session *ss)
{
	const struct ptd_snapshot_info *in = &ss->snap_info;
	cJSON *res = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(res, "threads");

	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	cJSON_AddNumberToObject(res, "seq", (double)in->seq);
	for (unsigned i = 0; a && i < in->nlisted; i++) {
		const struct ptd_snapshot_thread *t = &in->th[i];
		cJSON *o = cJSON_CreateObject();

		cJSON_AddNumberToObject(o, "tid", t->tid);
		cJSON_AddNumberToObject(o, "bytes", (double)t->bytes);
		cJSON_AddNumberToObject(o, "end", (double)t->end);
		cJSON_AddNumberToObject(o, "overwritten",
					(double)t->overwritten);
		cJSON_AddNumberToObject(o, "records", (double)t->records);
		cJSON_AddNumberToObject(o, "insns", (double)t->insns);
		if (ss->jobs > 1) {	/* options.jobs: its decode's parts */
			cJSON_AddNumberToObject(o, "parts", (double)t->parts);
			cJSON_AddNumberToObject(o, "serial_parts",
						(double)t->serial_parts);
			if (t->serial_why)
				cJSON_AddStringToObject(o, "serial_why",
							t->serial_why);
		}
		cJSON_AddItemToArray(a, o);
	}
	cJSON_AddNumberToObject(res, "threads_total", in->nthreads);
	cJSON_AddNumberToObject(res, "bytes", (double)in->bytes);
	cJSON_AddNumberToObject(res, "overwritten", (double)in->overwritten);
	cJSON_AddNumberToObject(res, "records", (double)in->records);
	cJSON_AddNumberToObject(res, "insns", (double)in->insns);
	a = cJSON_AddArrayToObject(res, "subscribers");
	for (unsigned i = 0; a && i < ss->snap_nsubs; i++) {
		const struct srv_snap_sub *u = &ss->snap_subs[i];
		cJSON *o = cJSON_CreateObject();

		cJSON_AddNumberToObject(o, "subscriber", u->id);
		cJSON_AddNumberToObject(o, "sent", (double)u->sent);
		cJSON_AddNumberToObject(o, "lost", (double)u->lost);
		cJSON_AddBoolToObject(o, "cut_off", u->cut);
		cJSON_AddItemToArray(a, o);
	}
	return res;
}

/* Answer the snapshots the decode threads have taken. */
void srv_snapshots_answer(struct ptd_server *s)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next) {
		if (!atomic_load_explicit(&ss->snap_ready,
					  memory_order_acquire))
			continue;
		/* idle before the waiting requests may ask again */
		atomic_store(&ss->snap_ready, false);
		ss->snap_busy = false;
		if (ss->snap_info.err)
			srv_pending_error(s, &ss->snap, PTD_ERR_INTERNAL,
					  "session %" PRIu64 ": snapshot "
					  "failed: %s", ss->id,
					  ss->snap_info.message);
		else
			srv_pending_ok(s, &ss->snap, snapshot_result(ss));
		ss->snap_hit_set = false;
		srv_trigger_pump(ss);	/* the next trigger's, if one waits */
	}
}

/* The counts as they are now: asked of the decode thread (the table is
 * its own), answered by srv_counters_answer; an ended session's from the
 * loop at once.  One request at a time per session. */
static void cmd_counters(struct ptd_server *s, struct conn *c,
			 const struct ptd_request *req)
{
	struct srv_session *ss = srv_session_find_ready(s, c, req);

	if (!ss)
		return;
	if (!ss->xt) {
		srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
				"session %" PRIu64 " does not count (attach "
				"with options.counters, replay with "
				"\"counters\": true)", ss->id);
		return;
	}
	if (ss->xt_busy) {
		srv_reply_error(c, req->id, PTD_ERR_LIMIT,
				"a counters request of session %" PRIu64
				" is being answered", ss->id);
		return;
	}
	ss->xt_busy = true;
	srv_pending_wait(&ss->xt_wait, c, req->id);
	ss->xt_top = req->filter.counters_top;
	atomic_store_explicit(&ss->xt_asked, true, memory_order_release);
	/* Ended (now, or since the ask: its last look may have come
	 * before), the decode thread is done with the table: the loop
	 * renders it, unless the thread took the ask. */
	if (atomic_load_explicit(&ss->ended, memory_order_acquire) &&
	    atomic_exchange(&ss->xt_asked, false)) {
		ss->xt_err = srv_counters_render(ss, ss->xt_top);
		/* answered by the loop's next pass, as the others: not
		 * from inside this request's handling */
		atomic_store(&ss->xt_ready, true);
		srv_wake(s);
	}
}

static cJSON *counters_result(const struct srv_session *ss)
{
	cJSON *res = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(res, "records");
	const char *p = ss->xt_text, *end = p + ss->xt_len;

	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	while (a && p && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		cJSON_AddItemToArray(a, cJSON_ParseWithLength(p, n));
		p += n + 1;
	}
	return res;
}

void srv_counters_answer(struct ptd_server *s)
{
	struct srv_session *ss;

	for (ss = s->sessions; ss; ss = ss->next) {
		if (!atomic_load_explicit(&ss->xt_ready, memory_order_acquire))
			continue;
		atomic_store(&ss->xt_ready, false);
		ss->xt_busy = false;
		if (ss->xt_err)
			srv_pending_error(s, &ss->xt_wait, PTD_ERR_INTERNAL,
					  "session %" PRIu64 ": counters: %s",
					  ss->id, ptd_strerror(ss->xt_err));
		else
			srv_pending_ok(s, &ss->xt_wait, counters_result(ss));
	}
}

static void cmd_ping(struct ptd_server *s, struct conn *c,
		     const struct ptd_request *req)
{
	srv_reply_ok(c, req->id, NULL);
}

static srv_cmd_fn *const cmd_handlers[PTD_CMD_COUNT] = {
	[PTD_CMD_PING] = cmd_ping,
	[PTD_CMD_VERSION] = cmd_version,
	[PTD_CMD_ATTACH] = srv_cmd_attach,
	[PTD_CMD_DETACH] = srv_cmd_detach,
	[PTD_CMD_LIST] = cmd_list,
	[PTD_CMD_STATUS] = cmd_status,
	[PTD_CMD_SUBSCRIBE] = cmd_subscribe,
	[PTD_CMD_SNAPSHOT] = cmd_snapshot,
	[PTD_CMD_COUNTERS] = cmd_counters,
	[PTD_CMD_REPLAY] = srv_cmd_replay,
	[PTD_CMD_RECORD] = srv_cmd_record,
	[PTD_CMD_WATCH] = srv_cmd_watch,
	[PTD_CMD_UNWATCH] = srv_cmd_unwatch,
	[PTD_CMD_TRIGGER] = srv_cmd_trigger,
};

void srv_dispatch(struct ptd_server *s, struct conn *c,
		  const struct ptd_request *req)
{
	if (s->shutting_down && req->cmd != PTD_CMD_PING &&
	    req->cmd != PTD_CMD_VERSION) {
		srv_reply_error(c, req->id, PTD_ERR_SHUTTING_DOWN,
				"ptd is shutting down");
		return;
	}
	if ((unsigned)req->cmd < PTD_CMD_COUNT && cmd_handlers[req->cmd]) {
		cmd_handlers[req->cmd](s, c, req);
		return;
	}
	srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "unhandled command");
}
