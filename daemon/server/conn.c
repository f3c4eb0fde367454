/* SPDX-License-Identifier: MIT */
/*
 * Connections (srv.h): reading request lines (and a passed directory
 * descriptor), handing them to srv_dispatch, writing the responses and
 * then the subscriber's stream, accepting and freeing.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/cred.h"
#include "daemon/log.h"
#include "daemon/server/srv.h"

/* Responses a client has not read yet, beyond which its requests wait. */
#define OUT_HIGH_WATER (256 * 1024)
/* Work per connection per wake-up, so one client cannot starve others. */
#define READ_CHUNK 65536
#define FLUSH_ROUNDS 8
#define ACCEPT_BURST 32
/* File descriptors taken from one recvmsg (the last one is kept). */
#define MAX_PASS_FDS 4

static void conn_update_events(struct ptd_server *s, struct conn *c,
			       bool want_out)
{
	uint32_t ev = 0;
	struct epoll_event e;

	/* (a connection waiting for a snapshot reads nothing meanwhile;
	 * a hang-up is still reported) */
	if (!c->close_after_flush && !c->waiting &&
	    c->out.len - c->out_off < OUT_HIGH_WATER)
		ev |= EPOLLIN;
	if (want_out)
		ev |= EPOLLOUT;
	if (ev == c->events)
		return;
	e.events = ev;
	e.data.ptr = &c->tag;
	if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->tag.fd, &e) == 0)
		c->events = ev;
	else
		c->dead = true;
}

/* Send what we can of @data.  Returns bytes sent (0 if the socket is
 * full), or -errno if the peer is gone. */
ssize_t srv_send_some(int fd, const char *data, size_t len)
{
	ssize_t n;

	do
		n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	return n;
}

/* Write responses, then the subscriber's stream.  Marks @c dead when the
 * peer is gone or its stream is over. */
void srv_conn_flush(struct ptd_server *s, struct conn *c)
{
	bool more = false;
	ssize_t n;
	int round;

	if (c->dead)
		return;
	if (c->out_off < c->out.len) {
		n = srv_send_some(c->tag.fd, (char *)c->out.data + c->out_off,
			      c->out.len - c->out_off);
		if (n < 0) {
			c->dead = true;
			return;
		}
		c->out_off += (size_t)n;
		if (c->out_off < c->out.len) {
			conn_update_events(s, c, true);
			return;
		}
		c->out.len = c->out_off = 0;
	}
	if (c->close_after_flush && !c->sub && !c->rsub) {
		c->dead = true;
		return;
	}
	if (c->rsub) {		/* a watch rule's stream */
		more = srv_rulesub_write(s, c);
		if (!c->dead)
			conn_update_events(s, c, more);
		return;
	}
	for (round = 0; c->sub && round < FLUSH_ROUNDS; round++) {
		const char *data;
		size_t len;
		enum ptd_sub_state st = ptd_subscriber_peek(c->sub, &data, &len);

		if (st == PTD_SUB_DONE) {
			c->dead = true;
			return;
		}
		if (st == PTD_SUB_IDLE)
			break;
		n = srv_send_some(c->tag.fd, data, len);
		if (n < 0) {
			c->dead = true;
			return;
		}
		ptd_subscriber_consume(c->sub, (size_t)n);
		if ((size_t)n < len) {
			more = true;
			break;
		}
	}
	/* Rounds used up with data left: the socket is writable, so EPOLLOUT
	 * brings us back at once, after the other clients. */
	if (c->sub && round == FLUSH_ROUNDS)
		more = true;
	conn_update_events(s, c, more);
}

static char quiet_error[PTD_DIAG_MAX + 256];

const char *srv_reply_quiet_error(void)
{
	return quiet_error;
}

static void conn_queue(struct conn *c, char *line, size_t len)
{
	if (!c) {
		free(line);
		return;
	}
	if (!line) {
		c->close_after_flush = true;	/* out of memory */
		return;
	}
	if (ptd_buf_append(&c->out, line, len) < 0)
		c->close_after_flush = true;
	free(line);
}

void srv_reply_verror(struct conn *c, const cJSON *id, const char *code,
		      const char *fmt, va_list ap)
{
	char msg[PTD_DIAG_MAX + 128];
	size_t len = 0;
	char *line;

	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	if (!c) {
		(void)snprintf(quiet_error, sizeof(quiet_error), "%s: %s",
			       code, msg);
		return;
	}
	/* Two statements: the length is known only after the call. */
	line = ptd_response_error(id, code, msg, &len);
	conn_queue(c, line, len);
}

void srv_reply_error(struct conn *c, const cJSON *id, const char *code,
		     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	srv_reply_verror(c, id, code, fmt, ap);
	va_end(ap);
}

void srv_reply_ok(struct conn *c, const cJSON *id, cJSON *result)
{
	size_t len = 0;
	char *line;

	if (!c) {
		cJSON_Delete(result);
		return;
	}
	line = ptd_response_ok(id, result, &len);

	conn_queue(c, line, len);
}

/* The client's supplementary groups (SO_PEERGROUPS), malloc'd.  Returns
 * the count (0 with *ret NULL if it has none) or -errno. */
int srv_peer_groups(int fd, gid_t **ret)
{
	socklen_t len = 64 * sizeof(gid_t);
	gid_t *g = NULL;

	*ret = NULL;
	for (;;) {
		gid_t *n = realloc(g, len ? len : sizeof(gid_t));

		if (!n) {
			free(g);
			return -ENOMEM;
		}
		g = n;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0)
			break;
		if (errno != ERANGE ||
		    len > PTD_CRED_MAX_GROUPS * sizeof(gid_t)) {
			free(g);
			return -errno;
		}
	}
	if (len == 0) {
		free(g);
		return 0;
	}
	*ret = g;
	return (int)(len / sizeof(gid_t));
}

static void handle_line(struct ptd_server *s, struct conn *c, const char *line,
			size_t len)
{
	struct ptd_diag diag = { "" };
	struct ptd_request req;
	int r;

	if (len && line[len - 1] == '\r')
		len--;
	r = ptd_request_parse(line, len, &req, &diag);
	if (r < 0)
		srv_reply_error(c, req.id,
				r == -PTD_EUNSUPPORTED ? PTD_ERR_UNKNOWN_COMMAND
				: r == -ENOMEM	   ? PTD_ERR_INTERNAL
						   : PTD_ERR_BAD_REQUEST,
				"%s", diag.msg[0] ? diag.msg : ptd_strerror(r));
	else
		srv_dispatch(s, c, &req);
	ptd_request_fini(&req);
}

static void too_long(struct ptd_server *s, struct conn *c)
{
	srv_reply_error(c, NULL, PTD_ERR_TOO_LONG,
			"request longer than %zu bytes (max_request_size); "
			"closing",
			s->cfg.max_request_size);
	c->close_after_flush = true;
}

/* Handle the complete lines in c->in, up to the point where the client has
 * too many responses unread; keep the rest. */
void srv_conn_handle_lines(struct ptd_server *s, struct conn *c)
{
	size_t start = 0;
	char *nl;

	while (!c->sub && !c->rsub && !c->close_after_flush && !c->waiting &&
	       c->out.len - c->out_off < OUT_HIGH_WATER) {
		size_t len;

		nl = memchr(c->in + start, '\n', c->in_len - start);
		if (!nl)
			break;
		len = (size_t)(nl - (c->in + start));
		if (len > s->cfg.max_request_size) {
			too_long(s, c);
			break;
		}
		handle_line(s, c, c->in + start, len);
		start += len + 1;
	}
	/* No end of line within the limit: framing is lost. */
	if (!c->sub && !c->rsub && !c->close_after_flush && !c->waiting &&
	    c->in_len - start > s->cfg.max_request_size &&
	    !memchr(c->in + start, '\n', c->in_len - start))
		too_long(s, c);
	memmove(c->in, c->in + start, c->in_len - start);
	c->in_len -= start;
}

/* recv that also takes file descriptors passed with SCM_RIGHTS (for a
 * record request): the last one is kept in c->pass_fd (replacing an
 * earlier one), the others closed; the kernel closes what does not fit. */
static ssize_t recv_with_fds(struct conn *c, char *buf, size_t len)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(MAX_PASS_FDS * sizeof(int))];
	} ctl;
	struct iovec iov = { buf, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *h;
	ssize_t n;

	n = recvmsg(c->tag.fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
		size_t i, nfd;
		int fd;

		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfd; i++) {
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int),
			       sizeof(fd));
			if (c->pass_fd >= 0)
				close(c->pass_fd);
			c->pass_fd = fd;
		}
	}
	return n;
}

void srv_conn_readable(struct ptd_server *s, struct conn *c)
{
	char discard[4096];
	size_t cap = s->cfg.max_request_size + 2;
	ssize_t n;

	if (c->sub || c->rsub || c->close_after_flush) {
		/* A stream or a closing connection: input is ignored, EOF
		 * ends it. */
		n = recv(c->tag.fd, discard, sizeof(discard), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			c->dead = true;
		return;
	}
	if (c->in_len >= cap) {
		srv_conn_handle_lines(s, c);
		return;
	}
	n = recv_with_fds(c, c->in + c->in_len,
			  cap - c->in_len < READ_CHUNK ? cap - c->in_len
						       : READ_CHUNK);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		c->dead = true;
		return;
	}
	if (n < 0)
		return;
	c->in_len += (size_t)n;
	srv_conn_handle_lines(s, c);
	srv_conn_flush(s, c);
}

void srv_conn_free(struct ptd_server *s, struct conn *c)
{
	srv_sessions_forget_conn(s, c);
	srv_rules_forget_conn(s, c);
	if (c->pass_fd >= 0)
		close(c->pass_fd);
	if (c->sub)
		ptd_fanout_unsubscribe(c->ss->fan, c->sub);
	srv_rulesub_free(s, c);
	ptd_memacct_release(&c->sub_acct);
	if (c->tag.fd >= 0) {
		(void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->tag.fd, NULL);
		close(c->tag.fd);
	}
	ptd_buf_fini(&c->out);
	free(c->in);
	free(c);
}

void srv_conns_reap(struct ptd_server *s)
{
	struct conn **p = &s->conns, *c;

	while ((c = *p)) {
		if (c->dead) {
			*p = c->next;
			s->nconns--;
			srv_conn_free(s, c);
		} else {
			p = &c->next;
		}
	}
}

static void refuse_conn(struct ptd_server *s, int fd)
{
	size_t len = 0;
	char msg[128];
	char *line;

	(void)snprintf(msg, sizeof(msg),
		       "too many connections (max_connections %u)",
		       s->cfg.max_connections);
	line = ptd_response_error(NULL, PTD_ERR_LIMIT, msg, &len);
	if (line)
		(void)srv_send_some(fd, line, len);
	free(line);
	close(fd);
}

void srv_conns_accept(struct ptd_server *s, int lfd)
{
	int i;

	for (i = 0; i < ACCEPT_BURST; i++) {
		struct conn *c;
		int fd = accept4(lfd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
			    errno != ECONNABORTED)
				ptd_log_err(PTD_LOG_WARNING, -errno,
					    "accept failed");
			return;
		}
		if (s->shutting_down || s->nconns >= s->cfg.max_connections) {
			refuse_conn(s, fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (c)
			c->in = malloc(s->cfg.max_request_size + 2);
		if (!c || !c->in || ptd_peer_get(fd, &c->peer) < 0) {
			if (c)
				free(c->in);
			free(c);
			close(fd);
			continue;
		}
		c->tag.kind = EP_CONN;
		c->tag.fd = fd;
		c->pass_fd = -1;
		c->events = EPOLLIN;
		if (srv_ep_add(s, &c->tag, EPOLLIN) < 0) {
			free(c->in);
			free(c);
			close(fd);
			continue;
		}
		c->next = s->conns;
		s->conns = c;
		s->nconns++;
	}
}
