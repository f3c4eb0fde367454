/* SPDX-License-Identifier: MIT */
/*
 * replay (srv.h): a saved trace decoded as a session (daemon/replay.h),
 * answered once its input is accepted or refused.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "daemon/server/srv.h"
#include "decode/counters.h"

/* The response code of a refused replay. */
static const char *replay_error_code(int err)
{
	switch (err) {
	case -ENOENT:
	case -ENOTDIR:
		return PTD_ERR_NO_SUCH_FILE;
	case -EACCES:
	case -EPERM:
		return PTD_ERR_PERMISSION;
	case -EINVAL:
		return PTD_ERR_BAD_REQUEST;
	case -PTD_EFORMAT:
	case -PTD_EVERSION:
	case -PTD_ECHECKSUM:
	case -PTD_ETRUNC:
	case -PTD_EUNSUPPORTED:
	case -PTD_ELIMIT:
	case -PTD_ENOTREG:	/* a FIFO, a device: named in the message */
	case -EISDIR:
		return PTD_ERR_BAD_TRACE;
	default:
		return PTD_ERR_INTERNAL;
	}
}

static void replay_opts(const struct ptd_server *s, const struct conn *c,
			const struct ptd_request *req,
			struct ptd_replay_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->path = req->path;
	/* The block path: the same insn records as the instruction path
	 * on clean, untimed traces (the differential tests hold both to
	 * it), each block's instructions from the instruction cache instead
	 * of one pt_insn_next each: what ptctl decode does by default.
	 * "jobs": the instruction path, each thread on that many threads.
	 * The block path is always decoded serially (decode/parallel.h: its
	 * block cache), and its records are not the instruction path's
	 * everywhere: an insn record's time is its block's, and around a
	 * decode error it drops the rest of a run.  So any "jobs", 1
	 * included, means the instruction path: the records of a replay
	 * are then the same bytes whatever the number (doc/protocol.md). */
	o->input.decode.path = req->jobs ? PTD_PATH_INSN : PTD_PATH_BLOCK;
	o->input.decode.jobs = req->jobs;
	o->input.decode.want =
		PTD_FILTER_DEFAULT_KINDS | PTD_REC_BIT(PTD_REC_CALL);
	/* each instruction's fields rendered once, by the instruction
	 * cache, as live sessions and ptctl decode do: the fan-out's JSON
	 * views copy them */
	o->input.decode.json_bodies = true;
	o->input.have_tid = req->has_tid;
	o->input.tid = req->tid;
	o->lossless = req->lossless;
	o->creds.uid = c->peer.uid;
	o->creds.gid = c->peer.gid;
	o->wait_ms = req->has_wait_ms ? (unsigned)req->wait_ms
				      : PTD_REPLAY_WAIT_MS;
	o->queue_size = s->cfg.subscriber_queue_size;
	o->stall_ms = s->cfg.subscriber_stall_ms;
}

static cJSON *replay_result(const struct srv_session *ss,
			    const struct ptd_replay_info *info)
{
	cJSON *res = cJSON_CreateObject();

	cJSON_AddNumberToObject(res, "session", (double)ss->id);
	cJSON_AddStringToObject(res, "kind", "replay");
	cJSON_AddStringToObject(res, "source",
				ptd_input_kind_name(info->kind));
	cJSON_AddNumberToObject(res, "pid", (double)info->pid);
	cJSON_AddNumberToObject(res, "threads", (double)info->nthreads);
	cJSON_AddBoolToObject(res, "lossless", ss->lossless);
	srv_replay_decode_summary(ss, res);
	return res;
}

bool srv_jobs_refused(struct ptd_server *s, struct conn *c,
		      const struct ptd_request *req, const char *field)
{
	if (req->jobs <= s->cfg.max_decode_jobs)
		return false;
	srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
			"%s: %u is more than this ptd allows (max_decode_jobs "
			"= %u)", field, req->jobs, s->cfg.max_decode_jobs);
	return true;
}

/* How a replay decodes: "decoder", the path of decoder.h ("path" is the
 * trace's), and "jobs" if asked. */
void srv_replay_decode_summary(const struct srv_session *ss, cJSON *o)
{
	cJSON_AddStringToObject(o, "decoder", ss->jobs ? "insn" : "block");
	if (ss->jobs)
		cJSON_AddNumberToObject(o, "jobs", ss->jobs);
}

/* Refuse @ss's replay (logged; answered if its client is still there)
 * and free it. */
static void replay_refused(struct ptd_server *s, struct srv_session *ss,
			   int err, const struct ptd_diag *diag)
{
	const char *msg = diag->msg[0] ? diag->msg : ptd_strerror(err);
	struct srv_pending w = srv_pending_move(&ss->start);

	ptd_log_info("uid %u: replay of '%s' refused: %s",
		     (unsigned)ss->owner, ss->path, msg);
	srv_session_free(ss);
	srv_pending_error(s, &w, replay_error_code(err), "%s", msg);
}

/* Decode a saved trace as a session of kind "replay" (replay.h): the
 * client reads files with its own permissions, subscribes as to any
 * session, and the replay waits for that first subscriber.  The input is
 * checked on the replay's thread (a bundle is verified whole, which takes
 * a while for large images): the request is answered by srv_replays_answer
 * once it is accepted or refused; the connection's later requests wait,
 * other clients do not. */
void srv_cmd_replay(struct ptd_server *s, struct conn *c,
		    const struct ptd_request *req)
{
	struct ptd_diag diag = { "" };
	struct ptd_replay_opts o;
	struct ptd_session_sink sink;
	struct srv_session *ss;
	gid_t *groups = NULL;
	int r;

	if (srv_refuse_over_session_limit(s, c, &c->peer, req))
		return;
	r = srv_peer_groups(c->tag.fd, &groups);
	ss = calloc(1, sizeof(*ss));
	if (r < 0 || !ss || !(ss->path = strdup(req->path)) ||
	    srv_pending_keep_id(&ss->start, req->id) < 0) {
		free(groups);
		srv_session_free(ss);
		srv_reply_error(c, req->id, PTD_ERR_INTERNAL,
				"cannot start a replay: %s",
				ptd_strerror(r < 0 ? r : -ENOMEM));
		return;
	}
	if (srv_jobs_refused(s, c, req, "jobs")) {
		srv_session_free(ss);
		free(groups);
		return;
	}
	if (srv_memory_refused(s, c, &c->peer, req, &ss->acct,
			       PTD_MEMLIMIT_REPLAY_BYTES +
				       (req->jobs > 1 ? (req->jobs + 2ull) *
							PTD_MEMLIMIT_REPLAY_PART_BYTES
						      : 0),
			       "a replay")) {
		free(groups);
		srv_session_free(ss);
		return;
	}
	replay_opts(s, c, req, &o);
	if (req->symbols) {
		r = srv_symbols_new(s, ss, c->tag.fd, &c->peer, 0, &diag);
		if (r < 0) {
			free(groups);
			srv_session_free(ss);
			srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "%s",
					diag.msg);
			return;
		}
		o.input.decode.symbols = srv_symbols_of(ss);
	}
	/* one table over every thread of the trace, as ptctl decode keeps;
	 * the session's sink takes its counters records (sessions.c) */
	if (req->counters) {
		r = srv_counters_new(ss);
		if (r < 0) {
			free(groups);
			srv_session_free(ss);
			srv_reply_error(c, req->id, PTD_ERR_INTERNAL,
					"counters: %s", ptd_strerror(r));
			return;
		}
		o.input.decode.counters = ss->xt;
		o.input.decode.want |= PTD_COUNTERS_KINDS;
	}
	o.creds.groups = groups;
	o.creds.ngroups = (size_t)r;
	o.decided = srv_wake;
	o.decided_ctx = s;
	ss->srv = s;
	ss->owner = c->peer.uid;
	ss->lossless = req->lossless;
	ss->jobs = req->jobs;
	srv_session_sink(ss, false, &sink);
	r = ptd_replay_begin(&o, &sink, &ss->rp, &diag);
	free(groups);
	if (r < 0) {
		/* (not held yet: answered here, to the request at hand) */
		replay_refused(s, ss, r, &diag);
		srv_reply_error(c, req->id, replay_error_code(r), "%s",
				diag.msg[0] ? diag.msg : ptd_strerror(r));
		return;
	}
	srv_pending_hold(&ss->start, c);
	ss->next = s->starting;
	s->starting = ss;
}

/* @ss's input was accepted: make it a session and answer its client (if
 * it is still there). */
static void replay_accepted(struct ptd_server *s, struct srv_session *ss,
			    const struct ptd_replay_info *info)
{
	ss->id = s->next_session_id;
	if (ptd_fanout_new(ss->id, (pid_t)info->pid, srv_wake, s,
			   &ss->fan) < 0) {
		struct ptd_diag diag;

		replay_refused(s, ss,
			       ptd_diagf(&diag, -ENOMEM, "out of memory"),
			       &diag);
		return;
	}
	s->next_session_id++;
	ss->pid = (pid_t)info->pid;
	ss->input_kind = info->kind;
	ptd_replay_go(ss->rp, ss->fan);
	ss->next = s->sessions;
	s->sessions = ss;
	ptd_log_info("session %" PRIu64 ": uid %u replays '%s' (%s%s)", ss->id,
		     (unsigned)ss->owner, ss->path,
		     ptd_input_kind_name(info->kind),
		     ss->lossless ? ", lossless" : "");
	if (ss->start.conn)
		srv_pending_ok(s, &ss->start, replay_result(ss, info));
	else
		/* Nobody has the session's id: it ends when its wait for a
		 * first subscriber does, like any replay nobody follows. */
		ptd_log_info("session %" PRIu64 ": the client that asked for "
			     "it has gone", ss->id);
}

/* Answer the replays whose input has been accepted or refused (or has
 * been undecided for PTD_REPLAY_START_MS: accepted). */
void srv_replays_answer(struct ptd_server *s)
{
	struct srv_session **p = &s->starting, *ss;

	while ((ss = *p)) {
		struct ptd_diag diag = { "" };
		struct ptd_replay_info info;
		struct srv_pending w;
		int r = ptd_replay_started(ss->rp, &info, &diag);

		if (r == 0) {
			p = &ss->next;
			continue;
		}
		*p = ss->next;
		ss->next = NULL;
		if (r < 0) {
			replay_refused(s, ss, r, &diag);
		} else if (s->shutting_down) {
			w = srv_pending_move(&ss->start);
			srv_session_free(ss);
			srv_pending_error(s, &w, PTD_ERR_SHUTTING_DOWN,
					  "ptd is shutting down");
		} else {
			replay_accepted(s, ss, &info);
		}
	}
}

/* Until when the loop may sleep for the replays being started: the
 * milliseconds until the first counts as accepted, or -1. */
int srv_replays_timeout(const struct ptd_server *s)
{
	const struct srv_session *ss;
	int t = -1;

	for (ss = s->starting; ss; ss = ss->next) {
		int left = (int)ptd_replay_start_left_ms(ss->rp) + 1;

		if (t < 0 || left < t)
			t = left;
	}
	return t;
}
