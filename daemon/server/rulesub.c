/* SPDX-License-Identifier: MIT */
/*
 * A watch rule's subscribers (srv.h): `subscribe` {"rule":N} gives one
 * stream of every session the rule starts (doc/protocol.md, "Rule
 * streams").
 *
 * Nothing of the fan-out is copied: each session of the rule gets one
 * ordinary subscriber of its own fan-out for each rule subscriber (a
 * member), tagged with the rule (ptd_fanout_subscribe_tagged), so its
 * records are matched, rendered once per distinct field set, queued,
 * dropped and counted exactly as a session subscriber's are; its hello
 * is the session's session_start, its bye the session's session_end.
 * The member is subscribed before the session's decode thread starts,
 * so it has every record from the first.  The loop writes the members'
 * queues into the one connection, whole buffers at a time (a buffer the
 * fan-out hands out holds whole lines), so lines never interleave: a
 * member whose buffer was written in part is finished first.
 *
 * The stream's own lines (hello, a session that could not be followed,
 * bye) are queued on the rule subscriber.  The rule's end (unwatch, its
 * owner's connection closing, shutdown) takes no new session into the
 * stream; the sessions in it run on to their session_end, then the bye
 * says why the rule ended.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "daemon/server/srv.h"
#include "record/jsonw.h"

#define RULESUB_ROUNDS 8

static void put_line(struct srv_rulesub *rs, const char *line, size_t len)
{
	/* -ENOMEM: the line is missing from the stream */
	(void)ptd_buf_append(&rs->lines, line, len);
}

/* A session that is in the stream without its records: its start and
 * its end, with why (the rule subscriber's own lines). */
static void put_not_followed(struct srv_rulesub *rs,
			     const struct srv_session *ss, const char *why)
{
	char buf[PTD_DIAG_MAX * 6 + 512];
	size_t n;
	int k;

	k = snprintf(buf, sizeof(buf), "{\"type\":\"session_start\","
		     "\"session\":%" PRIu64 ",\"pid\":%ld,\"rule\":%" PRIu64
		     "}\n{\"type\":\"session_end\",\"reason\":\"not_followed\","
		     "\"session\":%" PRIu64 ",\"pid\":%ld,\"sent\":0,\"lost\":0,"
		     "\"message\":", ss->id, (long)ss->pid, rs->rule, ss->id,
		     (long)ss->pid);
	if (k <= 0 || (size_t)k >= sizeof(buf) - 16)
		return;
	n = (size_t)k;
	n += ptd_json_string(buf + n, sizeof(buf) - n - 4, why, strlen(why));
	memcpy(buf + n, "}\n", 2);
	put_line(rs, buf, n + 2);
	rs->sessions++;
}

/* Follow @ss in @rs: a member of its fan-out.  Without room under the
 * subscriber's memory limit or the session's subscriber limit, the
 * session is in the stream as not followed, saying why. */
static void member_add(struct ptd_server *s, struct srv_rulesub *rs,
		       struct srv_session *ss)
{
	struct srv_rule_member *m;
	char why[PTD_DIAG_MAX];
	uint64_t used = 0;
	int r;

	m = calloc(1, sizeof(*m));
	if (!m) {
		put_not_followed(rs, ss, "out of memory");
		return;
	}
	m->ss = ss;
	m->acct.m = s->mem;
	m->acct.uid = rs->c->peer.uid;
	/* its queue, the buffer being written and its stage, as a
	 * session subscriber's */
	r = ptd_memacct_charge(&m->acct,
			       ptd_fanout_sub_bytes(s->cfg.subscriber_queue_size),
			       &used);
	if (r < 0) {
		(void)snprintf(why, sizeof(why), "uid %u has %" PRIu64 " bytes "
			       "in use; following one more session needs %"
			       PRIu64 " more (user_memory_limit)",
			       (unsigned)rs->c->peer.uid, used,
			       ptd_fanout_sub_bytes(s->cfg.subscriber_queue_size));
		put_not_followed(rs, ss, why);
		free(m);
		return;
	}
	r = ptd_fanout_subscribe_tagged(ss->fan, &rs->filter,
					s->cfg.subscriber_queue_size,
					s->cfg.max_subscribers_per_session,
					rs->rule, &m->sub);
	if (r < 0) {
		(void)snprintf(why, sizeof(why), "%s",
			       r == -PTD_ELIMIT
				       ? "the session has max_subscribers_per_"
					 "session subscribers"
				       : ptd_strerror(r));
		put_not_followed(rs, ss, why);
		ptd_memacct_release(&m->acct);
		free(m);
		return;
	}
	m->next = rs->members;
	rs->members = m;
	rs->sessions++;
}

/* Take @m out of @rs (its subscriber out of its session's fan-out),
 * adding what it was sent and lost to the stream's totals. */
static void member_drop(struct srv_rulesub *rs, struct srv_rule_member *m)
{
	struct srv_rule_member **p;
	struct ptd_subscriber_stats st;

	for (p = &rs->members; *p; p = &(*p)->next)
		if (*p == m) {
			*p = m->next;
			break;
		}
	if (rs->cur == m)
		rs->cur = NULL;
	ptd_subscriber_get_stats(m->sub, &st);
	rs->sent += st.sent;
	rs->lost += st.lost;
	ptd_fanout_unsubscribe(m->ss->fan, m->sub);
	ptd_memacct_release(&m->acct);
	free(m);
}

static struct srv_rule *rule_find(struct ptd_server *s, uint64_t id)
{
	struct srv_rule *r;

	for (r = s->rules; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

static cJSON *kinds_fields(cJSON *o, const struct ptd_filter_spec *spec)
{
	cJSON *a = cJSON_AddArrayToObject(o, "kinds");
	uint32_t fields;

	for (unsigned t = 0; a && t < PTD_REC_NTYPES; t++)
		if (spec->kinds & PTD_REC_BIT(t))
			cJSON_AddItemToArray(a, cJSON_CreateString(
				ptd_rec_type_name((enum ptd_rec_type)t)));
	if (!spec->fields)
		return o;
	/* as the lines carry them: pid always */
	fields = spec->fields | PTD_FIELD_BIT(PTD_FIELD_TYPE) |
		 PTD_FIELD_BIT(PTD_FIELD_PID);
	a = cJSON_AddArrayToObject(o, "fields");
	for (unsigned i = 0; a && i < PTD_FIELD_N; i++)
		if (fields & PTD_FIELD_BIT(i))
			cJSON_AddItemToArray(a, cJSON_CreateString(
				ptd_field_name((enum ptd_field)i)));
	return o;
}

void srv_rulesub_subscribe(struct ptd_server *s, struct conn *c,
			   const struct ptd_request *req,
			   const struct ptd_filter *f)
{
	struct srv_rule *r = rule_find(s, req->rule);
	struct srv_rulesub *rs;
	struct srv_session *ss;
	cJSON *res, *hello;
	char *line;

	/* the rule's sessions are its owner's: whoever may see them */
	if (!r || !ptd_auth_may_see(&c->peer, r->peer.uid)) {
		srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
				"no watch rule %" PRIu64 " you may see",
				req->rule);
		return;
	}
	/* symbols only from sessions that decode with them */
	if ((f->spec.fields & PTD_FIELD_BIT(PTD_FIELD_SYM)) &&
	    !r->req.symbols) {
		srv_reply_error(c, req->id, PTD_ERR_BAD_REQUEST,
				"%s: the sessions of rule %" PRIu64 " decode "
				"without symbols (watch with options.symbols)",
				req->filter.symbols ? "symbols" : "fields: sym",
				r->id);
		return;
	}
	/* its own lines: charged as a session subscriber's queues are */
	if (srv_memory_refused(s, c, &c->peer, req, &c->sub_acct,
			       2 * (uint64_t)s->cfg.subscriber_queue_size,
			       "subscribing"))
		return;
	rs = calloc(1, sizeof(*rs));
	hello = cJSON_CreateObject();
	if (!rs || !hello) {
		free(rs);
		cJSON_Delete(hello);
		ptd_memacct_release(&c->sub_acct);
		srv_reply_error(c, req->id, PTD_ERR_INTERNAL, "out of memory");
		return;
	}
	rs->c = c;
	rs->rule = r->id;
	rs->filter = *f;
	cJSON_AddStringToObject(hello, "type", "hello");
	cJSON_AddNumberToObject(hello, "version", PTD_STREAM_VERSION);
	cJSON_AddNumberToObject(hello, "rule", (double)r->id);
	kinds_fields(hello, &f->spec);
	line = cJSON_PrintUnformatted(hello);
	cJSON_Delete(hello);
	if (line) {
		put_line(rs, line, strlen(line));
		put_line(rs, "\n", 1);
		free(line);
	}
	c->rsub = rs;
	rs->next = s->rulesubs;
	s->rulesubs = rs;
	res = cJSON_CreateObject();
	cJSON_AddNumberToObject(res, "rule", (double)r->id);
	kinds_fields(res, &f->spec);
	srv_reply_ok(c, req->id, res);
	/* the rule's sessions that run already, from now on */
	if (req->rule_running)
		for (ss = s->sessions; ss; ss = ss->next)
			if (ss->rule == r->id && !ss->reaped && ss->s)
				member_add(s, rs, ss);
}

void srv_rulesubs_join(struct ptd_server *s, struct srv_session *ss)
{
	struct srv_rulesub *rs;

	for (rs = s->rulesubs; rs; rs = rs->next)
		if (rs->rule == ss->rule && !rs->end)
			member_add(s, rs, ss);
}

unsigned srv_rulesubs_count(const struct ptd_server *s, uint64_t rule)
{
	const struct srv_rulesub *rs;
	unsigned n = 0;

	for (rs = s->rulesubs; rs; rs = rs->next)
		n += rs->rule == rule && !rs->end;
	return n;
}

/* @m's subscriber is about to go with its session, its session_end not
 * queued: what was written in part of its buffer is finished from a copy
 * (lines never break), and if its session_start went out, a session_end
 * says it ended unfollowed. */
static void member_cut(struct srv_rulesub *rs, struct srv_rule_member *m,
		       const char *why)
{
	const char *data;
	size_t len;

	if (rs->cur == m &&
	    ptd_subscriber_peek(m->sub, &data, &len) == PTD_SUB_DATA) {
		struct ptd_buf nb = { 0 };

		/* the rest of its buffer, then the lines not yet written */
		if (ptd_buf_append(&nb, data, len) == 0 &&
		    ptd_buf_append(&nb, rs->lines.data ?
					(char *)rs->lines.data + rs->lines_off :
					"",
				   rs->lines.len - rs->lines_off) == 0) {
			ptd_buf_fini(&rs->lines);
			rs->lines = nb;
			rs->lines_off = 0;
		} else {
			ptd_buf_fini(&nb);
		}
	}
	if (m->taken) {
		char buf[PTD_DIAG_MAX * 6 + 256];
		size_t n;
		int k = snprintf(buf, sizeof(buf), "{\"type\":\"session_end\","
				 "\"reason\":\"not_followed\",\"session\":%"
				 PRIu64 ",\"pid\":%ld,\"sent\":0,\"lost\":0,"
				 "\"message\":", m->ss->id, (long)m->ss->pid);

		if (k > 0 && (size_t)k < sizeof(buf) - 16) {
			n = (size_t)k;
			n += ptd_json_string(buf + n, sizeof(buf) - n - 4, why,
					     strlen(why));
			memcpy(buf + n, "}\n", 2);
			put_line(rs, buf, n + 2);
		}
	} else if (rs->sessions) {
		rs->sessions--;		/* it never showed */
	}
	member_drop(rs, m);
}

void srv_rulesubs_forget_session(struct ptd_server *s, struct srv_session *ss,
				 const char *why)
{
	struct srv_rulesub *rs;
	struct srv_rule_member *m, *next;
	bool any = false;

	for (rs = s->rulesubs; rs; rs = rs->next)
		for (m = rs->members; m; m = next) {
			next = m->next;
			if (m->ss == ss) {
				member_cut(rs, m, why);
				any = true;
			}
		}
	if (any)
		srv_wake(s);
}

void srv_rulesubs_rule_ended(struct ptd_server *s, uint64_t rule,
			     const char *reason)
{
	struct srv_rulesub *rs;
	bool any = false;

	for (rs = s->rulesubs; rs; rs = rs->next)
		if (rs->rule == rule && !rs->end) {
			rs->end = reason;
			any = true;
		}
	/* the loop writes the bye once the sessions in it have ended */
	if (any)
		srv_wake(s);
}

void srv_rulesubs_shutdown(struct ptd_server *s)
{
	struct srv_rulesub *rs;

	for (rs = s->rulesubs; rs; rs = rs->next)
		if (!rs->end)
			rs->end = "shutdown";
	srv_wake(s);
}

static void put_bye(struct srv_rulesub *rs)
{
	char buf[256];
	int k = snprintf(buf, sizeof(buf), "{\"type\":\"bye\",\"reason\":\"%s\","
			 "\"rule\":%" PRIu64 ",\"sessions\":%" PRIu64
			 ",\"sent\":%" PRIu64 ",\"lost\":%" PRIu64 "}\n",
			 rs->end, rs->rule, rs->sessions, rs->sent, rs->lost);

	if (k > 0 && (size_t)k < sizeof(buf))
		put_line(rs, buf, (size_t)k);
	rs->bye_queued = true;
}

enum wr { WR_IDLE, WR_ALL, WR_FULL, WR_GONE };

/* Write what @m has; WR_FULL leaves it as rs->cur (a line in part). */
static enum wr member_write(struct srv_rulesub *rs, struct srv_rule_member *m,
			    int fd)
{
	const char *data;
	size_t len;
	ssize_t n;

	switch (ptd_subscriber_peek(m->sub, &data, &len)) {
	case PTD_SUB_IDLE:
		return WR_IDLE;
	case PTD_SUB_DONE:	/* its session_end is written */
		member_drop(rs, m);
		return WR_ALL;
	case PTD_SUB_DATA:
		break;
	}
	n = srv_send_some(fd, data, len);
	if (n < 0)
		return WR_GONE;
	ptd_subscriber_consume(m->sub, (size_t)n);
	if (n)
		m->taken = true;
	if ((size_t)n < len) {
		rs->cur = m;
		return WR_FULL;
	}
	rs->cur = NULL;
	return WR_ALL;
}

bool srv_rulesub_write(struct ptd_server *s, struct conn *c)
{
	struct srv_rulesub *rs = c->rsub;
	int round;

	for (round = 0; round < RULESUB_ROUNDS; round++) {
		struct srv_rule_member *m, *next;
		bool wrote = false;
		enum wr w;

		/* a line written in part is finished first */
		if (rs->cur) {
			w = member_write(rs, rs->cur, c->tag.fd);
			if (w == WR_GONE)
				goto gone;
			if (w == WR_FULL)
				return true;
		}
		if (rs->lines_off < rs->lines.len) {
			ssize_t n = srv_send_some(c->tag.fd,
						  (char *)rs->lines.data +
							  rs->lines_off,
						  rs->lines.len - rs->lines_off);

			if (n < 0)
				goto gone;
			rs->lines_off += (size_t)n;
			if (rs->lines_off < rs->lines.len)
				return true;
			rs->lines.len = rs->lines_off = 0;
			wrote = true;
		}
		if (rs->bye_queued) {
			c->dead = true;		/* the bye is written */
			return false;
		}
		for (m = rs->members; m; m = next) {
			next = m->next;
			w = member_write(rs, m, c->tag.fd);
			if (w == WR_GONE)
				goto gone;
			if (w == WR_FULL)
				return true;
			wrote = wrote || w == WR_ALL;
		}
		if (!rs->members && rs->end) {
			put_bye(rs);
			continue;
		}
		if (!wrote)
			return false;
	}
	return true;	/* rounds used up: EPOLLOUT brings it back */
gone:
	c->dead = true;
	return false;
}

void srv_rulesub_free(struct ptd_server *s, struct conn *c)
{
	struct srv_rulesub *rs = c->rsub, **p;

	if (!rs)
		return;
	for (p = &s->rulesubs; *p; p = &(*p)->next)
		if (*p == rs) {
			*p = rs->next;
			break;
		}
	while (rs->members)
		member_drop(rs, rs->members);
	ptd_buf_fini(&rs->lines);
	free(rs);
	c->rsub = NULL;
}
