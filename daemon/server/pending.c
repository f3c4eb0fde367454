/* SPDX-License-Identifier: MIT */
/*
 * Requests answered later (struct srv_pending, srv.h): attach, detach,
 * snapshot, replay and record each keep one while their slow step runs,
 * and answer through it once the loop sees the step decided.  One
 * mechanism: the connection's later requests wait meanwhile, are handled
 * after the answer, and a connection that went away is answered nothing.
 */
#include <errno.h>
#include <stdarg.h>

#include "daemon/server/srv.h"

int srv_pending_keep_id(struct srv_pending *p, const cJSON *id)
{
	cJSON_Delete(p->id);
	p->id = NULL;
	if (!id)
		return 0;
	p->id = cJSON_Duplicate(id, true);
	return p->id ? 0 : -ENOMEM;
}

void srv_pending_hold(struct srv_pending *p, struct conn *c)
{
	p->conn = c;
	c->waiting = true;
}

void srv_pending_wait(struct srv_pending *p, struct conn *c,
		      const cJSON *id)
{
	(void)srv_pending_keep_id(p, id);
	srv_pending_hold(p, c);
}

struct srv_pending srv_pending_move(struct srv_pending *p)
{
	struct srv_pending m = *p;

	p->conn = NULL;
	p->id = NULL;
	return m;
}

/* The response is queued (or not, the connection gone): forget the
 * request, and handle the connection's requests that waited. */
static void pending_done(struct ptd_server *s, struct srv_pending *p,
			 struct conn *c)
{
	cJSON_Delete(p->id);
	p->id = NULL;
	if (!c)
		return;
	c->waiting = false;
	srv_conn_handle_lines(s, c);
	srv_conn_flush(s, c);
}

void srv_pending_ok(struct ptd_server *s, struct srv_pending *p,
		    cJSON *result)
{
	struct conn *c = p->conn;

	p->conn = NULL;
	if (c)
		srv_reply_ok(c, p->id, result);
	else
		cJSON_Delete(result);
	pending_done(s, p, c);
}

void srv_pending_error(struct ptd_server *s, struct srv_pending *p,
		       const char *code, const char *fmt, ...)
{
	struct conn *c = p->conn;
	va_list ap;

	p->conn = NULL;
	if (c) {
		va_start(ap, fmt);
		srv_reply_verror(c, p->id, code, fmt, ap);
		va_end(ap);
	}
	pending_done(s, p, c);
}

void srv_pending_drop(struct srv_pending *p, const struct conn *c)
{
	if (p->conn == c)
		p->conn = NULL;
}

void srv_pending_clear(struct srv_pending *p)
{
	cJSON_Delete(p->id);
	p->id = NULL;
	p->conn = NULL;
}
