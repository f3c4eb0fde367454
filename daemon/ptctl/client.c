/* SPDX-License-Identifier: MIT */
/*
 * ptctl's side of the control protocol: the connection to ptd, requests
 * written and responses read through daemon/proto.h (the module ptd parses
 * and answers with), the stream options and a stream followed to its bye.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/strutil.h"
#include "daemon/filter.h"
#include "record/binframe.h"
#include "ptctl.h"

/* Longest response line ptctl accepts. */
#define PTCTL_MAX_LINE (16u << 20)

static const char *socket_path(void)
{
	const char *env = getenv("PTD_SOCKET");

	if (arg_socket)
		return arg_socket;
	return env && *env ? env : PTCTL_DEFAULT_SOCKET;
}

int client_connect(FILE **ret)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	const char *path = socket_path();
	int fd, err;
	FILE *f;

	if (strlen(path) >= sizeof(a.sun_path)) {
		errx_msg("socket path '%s' is too long", path);
		return EXIT_USAGE;
	}
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		errx_msg("cannot create a socket: %s", strerror(errno));
		return EXIT_CONNECT;
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		err = errno;
		close(fd);
		if (err == ENOENT || err == ECONNREFUSED)
			errx_msg("cannot connect to %s: %s — is ptd running? "
				 "(systemctl start ptd)",
				 path,
				 err == ENOENT ? "no such file"
					       : "connection refused");
		else if (err == EACCES || err == EPERM)
			errx_msg("cannot connect to %s: permission denied — "
				 "ask to be added to the socket's group "
				 "(usually 'ptd')",
				 path);
		else
			errx_msg("cannot connect to %s: %s", path,
				 strerror(err));
		return EXIT_CONNECT;
	}
	f = fdopen(fd, "r+");
	if (!f) {
		close(fd);
		errx_msg("out of memory");
		return EXIT_CONNECT;
	}
	*ret = f;
	return 0;
}

/* Read one line (without the newline) into *line. Returns its length, or
 * -1 at EOF/error. */
static ssize_t read_line(FILE *f, char **line, size_t *cap)
{
	ssize_t n = getline(line, cap, f);

	if (n <= 0)
		return -1;
	if ((size_t)n > PTCTL_MAX_LINE)
		return -1;
	if ((*line)[n - 1] == '\n')
		(*line)[--n] = 0;
	return n;
}

/* The exit status for an error response's code. */
static int exit_for_code(const char *code)
{
	if (!strcmp(code, PTD_ERR_NO_SUCH_PROCESS) ||
	    !strcmp(code, PTD_ERR_NO_SUCH_SESSION))
		return EXIT_NOT_FOUND;
	if (!strcmp(code, PTD_ERR_PERMISSION))
		return EXIT_PERMISSION;
	if (!strcmp(code, PTD_ERR_NO_INTEL_PT))
		return EXIT_NO_PT;
	if (!strcmp(code, PTD_ERR_LIMIT))
		return EXIT_LIMIT;
	return EXIT_REFUSED;
}

/* Read a response into @ret: 0 if ok:true; an exit status otherwise, with
 * the message printed. */
static int read_response(FILE *f, bool json, struct ptd_response *ret)
{
	_cleanup_free_ char *line = NULL;
	struct ptd_diag diag = { "" };
	size_t cap = 0;
	ssize_t n;
	int r;

	memset(ret, 0, sizeof(*ret));
	n = read_line(f, &line, &cap);
	if (n < 0) {
		errx_msg("ptd closed the connection without answering");
		return EXIT_CONNECT;
	}
	r = ptd_response_parse(line, (size_t)n, ret, &diag);
	if (r < 0) {
		errx_msg("ptd sent something that is not a response (%s): "
			 "%.200s",
			 r == -ENOMEM ? "out of memory" : diag.msg, line);
		ptd_response_fini(ret);
		return EXIT_REFUSED;
	}
	if (json)
		printf("%s\n", line);
	if (!ret->ok) {
		r = exit_for_code(ret->code);
		errx_msg("%s: %s", ret->code, ret->message);
		ptd_response_fini(ret);
		return r;
	}
	return 0;
}

void client_request(struct ptd_request *req, enum ptd_cmd cmd)
{
	static cJSON id = { .type = cJSON_Number, .valueint = 1,
			    .valuedouble = 1 };

	ptd_request_init(req, cmd);
	req->id = &id;	/* never freed: ptctl's requests own no memory */
}

/* @req as its line, or NULL with the message printed. */
static char *request_line(const struct ptd_request *req, size_t *len)
{
	char *s = ptd_request_line(req, len);

	if (!s)
		errx_msg("out of memory");
	return s;
}

int client_call(FILE *f, const struct ptd_request *req, bool json,
		struct ptd_response *ret)
{
	_cleanup_free_ char *s = NULL;
	size_t len;

	memset(ret, 0, sizeof(*ret));
	if (!(s = request_line(req, &len)))
		return EXIT_CONNECT;
	if (fwrite(s, 1, len, f) != len || fflush(f) != 0) {
		errx_msg("cannot send the request to ptd: %s",
			 strerror(errno));
		return EXIT_CONNECT;
	}
	return read_response(f, json, ret);
}

int client_send_record(FILE *f, const struct ptd_request *req,
		       const char *dir, bool json, struct ptd_response *ret)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	_cleanup_close_ int dfd = -1;
	_cleanup_free_ char *s = NULL;
	struct iovec iov;
	struct msghdr m;
	size_t len;
	ssize_t n;

	memset(ret, 0, sizeof(*ret));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		errx_msg("cannot open directory '%s': %s", dir,
			 strerror(errno));
		return EXIT_USAGE;
	}
	if (!(s = request_line(req, &len)))
		return EXIT_CONNECT;
	iov = (struct iovec){ s, len };
	memset(&m, 0, sizeof(m));
	memset(&ctl, 0, sizeof(ctl));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.b;
	m.msg_controllen = sizeof(ctl.b);
	CMSG_FIRSTHDR(&m)->cmsg_level = SOL_SOCKET;
	CMSG_FIRSTHDR(&m)->cmsg_type = SCM_RIGHTS;
	CMSG_FIRSTHDR(&m)->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(CMSG_FIRSTHDR(&m)), &dfd, sizeof(int));
	/* The fd goes with the request's first byte; the rest plainly. */
	if (fflush(f) != 0 ||
	    (n = sendmsg(fileno(f), &m, MSG_NOSIGNAL)) < 0 ||
	    ptd_write_all(fileno(f), s + n, len - (size_t)n) < 0) {
		errx_msg("cannot send the request to ptd: %s",
			 strerror(errno));
		return EXIT_CONNECT;
	}
	return read_response(f, json, ret);
}

double num_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

const char *str_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

int parse_session_arg(const char *s, uint64_t *ret)
{
	if (ptd_parse_u64(s, 10, ret) < 0 || *ret == 0 ||
	    *ret > (1ull << 53)) {
		errx_msg("expected a session id (a positive number), got '%s'",
			 s);
		return EXIT_USAGE;
	}
	return 0;
}

/* The exit status a bye line gives (and its message printed): 0 for a
 * session's normal ends, and a rule stream's (the rule was unwatched, or
 * its owner left). */
static int bye_status(const char *line, size_t n)
{
	cJSON *o = cJSON_ParseWithLength(line, n);
	const char *why = str_of(o, "reason");
	int ret = !strcmp(why, "exited") || !strcmp(why, "detached") ||
			  !strcmp(why, "limit") || !strcmp(why, "unwatched") ||
			  !strcmp(why, "owner_closed")
		      ? 0
		      : EXIT_STREAM;

	if (ret)
		errx_msg("the stream ended: %s%s%s", why,
			 *str_of(o, "message") ? ": " : "",
			 str_of(o, "message"));
	cJSON_Delete(o);
	return ret;
}

/* Copy a line to stdout (follow_stream's). */
static int write_line(void *ctx, const char *line, size_t n)
{
	(void)ctx;
	if (fwrite(line, 1, n, stdout) != n || putchar('\n') == EOF) {
		errx_msg("writing to stdout: %s", strerror(errno));
		return EXIT_STREAM;
	}
	return 0;
}

/* Follow a stream: copy JSON lines to stdout until bye. */
static int follow_stream(FILE *f)
{
	return follow_lines(f, write_line, NULL);
}

int follow_lines(FILE *f, int (*fn)(void *ctx, const char *line, size_t n),
		 void *ctx)
{
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ret = EXIT_STREAM, r;

	while ((n = read_line(f, &line, &cap)) >= 0) {
		r = fn(ctx, line, (size_t)n);
		if (r < 0)	/* done early: a normal end */
			return 0;
		if (r)
			return r;
		/* a rule's stream never ends by itself: each session is
		 * out once it has ended, whatever stdout's buffering */
		if (!strncmp(line, "{\"type\":\"session_end\"", 21) &&
		    fflush(stdout) != 0) {
			errx_msg("writing to stdout: %s", strerror(errno));
			return EXIT_STREAM;
		}
		if (!strncmp(line, "{\"type\":\"bye\"", 13)) {
			ret = bye_status(line, (size_t)n);
			break;
		}
	}
	if (fflush(stdout) != 0)
		ret = EXIT_STREAM;
	if (n < 0 && ret == EXIT_STREAM && !ferror(stdout))
		errx_msg("ptd closed the stream before its bye record");
	return ret;
}

/* --output FILE of a binary stream (stream_option); NULL: stdout. */
static const char *stream_output;

/* Follow a binary stream: every frame checked (record/binframe.h), then
 * written as it came to --output (or stdout), until the end frame; its
 * bye says how the stream ended. */
static int follow_binary(FILE *f)
{
	struct ptd_diag diag = { "" };
	struct ptd_bin_frame fr;
	uint64_t off = 0;
	size_t len = 0, cap = PTD_BIN_HDR + PTD_BIN_MAX_RECORDS_PAYLOAD;
	_cleanup_free_ uint8_t *buf = malloc(cap);
	int out = STDOUT_FILENO, ret = EXIT_STREAM;
	bool ended = false;

	if (!buf) {
		errx_msg("out of memory");
		return EXIT_STREAM;
	}
	if (stream_output) {
		out = open(stream_output, O_WRONLY | O_CREAT | O_TRUNC |
					      O_CLOEXEC, 0644);
		if (out < 0) {
			errx_msg("--output: cannot open '%s': %s",
				 stream_output, strerror(errno));
			return EXIT_STREAM;
		}
	}
	while (!ended) {
		ssize_t n = ptd_bin_frame_parse(buf, len, off, &fr, &diag);
		size_t k;

		if (n < 0) {
			errx_msg("%s", diag.msg);
			goto out;
		}
		if (n == 0) {
			k = fread(buf + len, 1, cap - len, f);
			if (k == 0) {
				errx_msg("ptd closed the stream %s",
					 len ? "inside a frame"
					     : "before its end frame");
				goto out;
			}
			len += k;
			continue;
		}
		if (ptd_write_all(out, buf, (size_t)n) < 0) {
			errx_msg("writing the frames: %s", strerror(errno));
			goto out;
		}
		if (fr.type == PTD_BIN_END) {
			/* the bye is the end frame's last line */
			const char *p = (const char *)fr.payload;
			size_t m = fr.len, at = 0;

			for (size_t i = 0; m && i + 1 < m; i++)
				if (p[i] == '\n')
					at = i + 1;
			ret = m ? bye_status(p + at, m - at) : 0;
			ended = true;
		}
		memmove(buf, buf + n, len - (size_t)n);
		len -= (size_t)n;
		off += (uint64_t)n;
	}
out:
	if (stream_output && close(out) < 0 && !ret) {
		errx_msg("--output '%s': %s", stream_output, strerror(errno));
		ret = EXIT_STREAM;
	}
	return ret;
}

/* Send a filled subscribe request and follow its stream. */
static int subscribe_follow(FILE *f, struct ptd_request *req)
{
	struct ptd_response resp;
	int r = client_call(f, req, false, &resp);

	if (r)
		return r;
	ptd_response_fini(&resp);
	return req->filter.binary ? follow_binary(f) : follow_stream(f);
}

int subscribe_and_follow(FILE *f, uint64_t session,
			 const struct ptd_filter_spec *spec)
{
	struct ptd_request req;

	client_request(&req, PTD_CMD_SUBSCRIBE);
	req.has_session = true;
	req.session = session;
	req.filter = *spec;
	return subscribe_follow(f, &req);
}

int subscribe_and_follow_lines(FILE *f, uint64_t session,
			       const struct ptd_filter_spec *spec,
			       int (*fn)(void *ctx, const char *line,
					 size_t n),
			       void *ctx)
{
	struct ptd_response resp;
	struct ptd_request req;
	int r;

	client_request(&req, PTD_CMD_SUBSCRIBE);
	req.has_session = true;
	req.session = session;
	req.filter = *spec;
	r = client_call(f, &req, false, &resp);
	if (r)
		return r;
	ptd_response_fini(&resp);
	return follow_lines(f, fn, ctx);
}

int subscribe_rule_and_follow(FILE *f, uint64_t rule, bool running,
			      const struct ptd_filter_spec *spec)
{
	struct ptd_request req;

	client_request(&req, PTD_CMD_SUBSCRIBE);
	req.has_rule = true;
	req.rule = rule;
	req.rule_running = running;
	req.filter = *spec;
	return subscribe_follow(f, &req);
}

int stream_args_check(const struct ptd_filter_spec *spec, bool rule)
{
	if (stream_output && !spec->binary) {
		errx_msg("--output: only with --format binary or packed (JSON "
			 "lines go to stdout)");
		return EXIT_USAGE;
	}
	if (spec->binary && rule) {
		errx_msg("--format %s: a session's stream only, not a rule's",
			 spec->packed ? "packed" : "binary");
		return EXIT_USAGE;
	}
	return 0;
}

void stream_filter_init(struct ptd_filter_spec *f)
{
	memset(f, 0, sizeof(*f));
	f->kinds = PTD_FILTER_DEFAULT_KINDS;
	f->counters_top = PTD_PROTO_COUNTERS_TOP_DEFAULT;
}

int stream_option(struct ptd_filter_spec *f, int c, const char *arg)
{
	uint64_t v, a, b;
	const char *dash;
	int ic;

	switch (c) {
	case 'k':
		if (parse_records(arg, &f->kinds) < 0)
			return -EINVAL;
		return 1;
	case PTCTL_FIELDS_OPT:
		if (parse_fields(arg, &f->fields) < 0)
			return -EINVAL;
		return 1;
	case PTCTL_SYMBOLS_OPT:
		f->symbols = true;
		return 1;
	case PTCTL_FORMAT_OPT:
		return parse_format(arg, &f->binary, &f->packed) < 0 ? -EINVAL
								     : 1;
	case PTCTL_OUTPUT_OPT:
		stream_output = arg;
		return 1;
	case PTCTL_TOP_OPT:	/* (ptd checks the bounds too) */
		if (ptd_parse_u64(arg, 10, &v) < 0 || v == 0 ||
		    v > PTD_PROTO_COUNTERS_TOP_MAX) {
			errx_msg("--top: expected 1 to %u, got '%s'",
				 PTD_PROTO_COUNTERS_TOP_MAX, arg);
			return -EINVAL;
		}
		f->counters_top = (uint32_t)v;
		f->kinds |= PTD_REC_BIT(PTD_REC_COUNTERS);
		return 1;
	case PTCTL_EVERY_OPT:
		if (ptd_parse_u64(arg, 10, &v) < 0 ||
		    v < PTD_PROTO_COUNTERS_EVERY_MIN ||
		    v > PTD_PROTO_COUNTERS_EVERY_MAX) {
			errx_msg("--every: expected %u to %u ms, got '%s'",
				 PTD_PROTO_COUNTERS_EVERY_MIN,
				 PTD_PROTO_COUNTERS_EVERY_MAX, arg);
			return -EINVAL;
		}
		f->counters_every_ms = (uint32_t)v;
		f->kinds |= PTD_REC_BIT(PTD_REC_COUNTERS);
		return 1;
	case 't':
		if (ptd_parse_u64(arg, 10, &v) < 0 || v == 0 || v > INT32_MAX) {
			errx_msg("--tid: expected a thread id, got '%s'", arg);
			return -EINVAL;
		}
		if (f->ntids >= PTD_FILTER_MAX_TIDS) {
			errx_msg("--tid: at most %d", PTD_FILTER_MAX_TIDS);
			return -EINVAL;
		}
		f->tids[f->ntids++] = (pid_t)v;
		return 1;
	case 'R':
		dash = strchr(arg, '-');
		if (!dash ||
		    ptd_parse_u64n(arg, (size_t)(dash - arg), 0, &a) < 0 ||
		    ptd_parse_u64(dash + 1, 0, &b) < 0 || a >= b) {
			errx_msg("--range: expected START-END (END exclusive, "
				 "e.g. 0x401000-0x402000), got '%s'",
				 arg);
			return -EINVAL;
		}
		if (f->nranges >= PTD_FILTER_MAX_RANGES) {
			errx_msg("--range: at most %d", PTD_FILTER_MAX_RANGES);
			return -EINVAL;
		}
		f->ranges[f->nranges].start = a;
		f->ranges[f->nranges++].end = b;
		return 1;
	case 'I':
		ic = ptd_iclass_parse(arg);
		if (ic < 0) {
			errx_msg("--iclass: expected an instruction class "
				 "(call, return, jump, cond_jump, far_call, "
				 "far_return, far_jump, ptwrite, other, "
				 "error), got '%s'",
				 arg);
			return -EINVAL;
		}
		f->iclasses |= 1u << ic;
		return 1;
	case 'M':
		if (!*arg || strlen(arg) >= sizeof(f->module)) {
			errx_msg("--module: expected a name of 1 to %zu bytes",
				 sizeof(f->module) - 1);
			return -EINVAL;
		}
		(void)ptd_strlcpy(f->module, arg, sizeof(f->module));
		return 1;
	default:
		return 0;
	}
}
