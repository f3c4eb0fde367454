/* SPDX-License-Identifier: MIT */
/*
 * A small control-socket client for end-to-end tests: a connection with a
 * line reader that times out, request/response calls parsed with cJSON.
 * Header-only; include check.h and daemon-harness.h first.
 */
#ifndef PTD_TESTS_E2E_DAEMON_CLIENT_H
#define PTD_TESTS_E2E_DAEMON_CLIENT_H

#include <cjson/cJSON.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"

struct dconn {
	int fd;
	char buf[65536];
	size_t len, off;
};

static inline struct dconn *dc_connect(const struct daemon *d)
{
	struct dconn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = daemon_connect_path(d->sock);
	if (c->fd < 0) {
		free(c);
		return NULL;
	}
	return c;
}

static inline void dc_close(struct dconn *c)
{
	if (c) {
		close(c->fd);
		free(c);
	}
}

static inline int dc_send(struct dconn *c, const char *s)
{
	return ptd_write_all(c->fd, s, strlen(s));
}

/* The next line (malloc'd, without '\n', no larger than it is), or NULL
 * at EOF or after @timeout_ms without one.  Tests keep hundreds of
 * thousands of lines: each kept in the buffer it was read into (4 KiB at
 * the least) made test_snapshot_paced's process 12 GB at its peak. */
static inline char *dc_read_line(struct dconn *c, int timeout_ms)
{
	struct ptd_buf line = { 0 };

	for (;;) {
		char *nl = memchr(c->buf + c->off, '\n', c->len - c->off);
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		ssize_t n;

		if (nl) {
			size_t k = (size_t)(nl - (c->buf + c->off));
			char *fit;

			(void)ptd_buf_append(&line, c->buf + c->off, k);
			(void)ptd_buf_append(&line, "", 1);
			c->off += k + 1;
			fit = malloc(line.len);
			if (fit)
				memcpy(fit, line.data, line.len);
			ptd_buf_fini(&line);
			return fit;
		}
		(void)ptd_buf_append(&line, c->buf + c->off, c->len - c->off);
		c->off = c->len = 0;
		if (poll(&p, 1, timeout_ms) <= 0)
			break;
		n = read(c->fd, c->buf, sizeof(c->buf));
		if (n <= 0)
			break;
		c->len = (size_t)n;
	}
	ptd_buf_fini(&line);
	return NULL;
}

/* Send a request line, read and parse its response (NULL: none). */
static inline cJSON *dc_call(struct dconn *c, const char *req)
{
	char *line;
	cJSON *o;

	if (dc_send(c, req) < 0)
		return NULL;
	line = dc_read_line(c, 20000);
	if (!line)
		return NULL;
	o = cJSON_Parse(line);
	free(line);
	return o;
}

/* One request on a connection of its own. */
static inline cJSON *dc_call1(const struct daemon *d, const char *req)
{
	struct dconn *c = dc_connect(d);
	cJSON *r = c ? dc_call(c, req) : NULL;

	dc_close(c);
	return r;
}

static inline bool dc_ok(const cJSON *r)
{
	return r && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok"));
}

static inline const char *dc_err_code(const cJSON *r)
{
	const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "error"),
					     "code");

	return cJSON_IsString(c) ? c->valuestring : "(none)";
}

static inline const char *dc_err_msg(const cJSON *r)
{
	const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "error"),
					     "message");

	return cJSON_IsString(c) ? c->valuestring : "(none)";
}

/* result.@key (a number), or -1. */
static inline double dc_num(const cJSON *r, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"),
					     key);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Attach to @pid ({"options": @opts} if not NULL); returns the session
 * id, or SKIPs the whole test when ptd cannot trace here. *ret_resp (may
 * be NULL) gets the response when the attach is refused otherwise; the
 * return is then -1. */
static inline long dc_attach_opts(const struct daemon *d, pid_t pid,
				  const char *opts, cJSON **ret_resp)
{
	char req[512];
	cJSON *r;
	long id;

	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"a\",\"cmd\":\"attach\",\"pid\":%ld%s%s}\n",
		       (long)pid, opts ? ",\"options\":" : "",
		       opts ? opts : "");
	r = dc_call1(d, req);
	if (r && !dc_ok(r) &&
	    (!strcmp(dc_err_code(r), "permission_denied") ||
	     !strcmp(dc_err_code(r), "no_intel_pt"))) {
		fprintf(stderr, "attach: %s: %s\n", dc_err_code(r),
			dc_err_msg(r));
		kill(pid, SIGKILL);
		SKIP_ALL("ptd cannot trace processes here (%s)",
			 dc_err_code(r));
	}
	if (!dc_ok(r)) {
		if (ret_resp)
			*ret_resp = r;
		else
			cJSON_Delete(r);
		return -1;
	}
	id = (long)dc_num(r, "session");
	cJSON_Delete(r);
	return id;
}

static inline long dc_attach(const struct daemon *d, pid_t pid,
			     cJSON **ret_resp)
{
	return dc_attach_opts(d, pid, NULL, ret_resp);
}

/* Detach session @id: its response (NULL: none). */
static inline cJSON *dc_detach_call(const struct daemon *d, long id)
{
	char req[128];

	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"d\",\"cmd\":\"detach\",\"session\":%ld}\n",
		       id);
	return dc_call1(d, req);
}

/* Detach session @id; true once answered ok. */
static inline bool dc_detach(const struct daemon *d, long id)
{
	cJSON *r = dc_detach_call(d, id);
	bool ok = dc_ok(r);

	cJSON_Delete(r);
	return ok;
}

#endif
