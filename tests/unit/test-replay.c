/* SPDX-License-Identifier: MIT */
/*
 * The daemon's replay and record requests, through a real server (forked,
 * in a temporary directory) and its socket:
 *  - a replay of a capture streams exactly the records ptd_input_decode
 *    gives for it (same JSON lines), between hello and bye;
 *  - lossless with a slow subscriber and a small queue loses nothing;
 *    without lossless the same reader loses records, counted in lost
 *    records and in bye (sent + lost = all);
 *  - bad paths are refused naming the path; list shows the replay;
 *    detach stops it; a stop during a bundle's verification ends it;
 *  - record: a session attached with record, ended by max_insns, is saved
 *    as a bundle into a directory passed by SCM_RIGHTS; the bundle loads
 *    and decodes to the IPs the live stream had; refusals are named.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "target.h"
#include "unit/ptdamage.h"
#include "unit/ptenc.h"
#include "unit/lldb-unclaimed.h"
#include "bundle/bundle.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "daemon/config.h"
#include "daemon/cred.h"
#include "daemon/replay.h"
#include "daemon/server.h"
#include "decode/threadpar.h"
#include "input/input.h"
#include "lldb/export.h"
#include "perfdata/write.h"
#include "record/jsonw.h"
#include "swpt/capture.h"
#include "swpt/tracer.h"

static const char *progs_dir;
static char workdir[64], sock[100], capdir[128];
static pid_t server_pid;

/* ---- a tiny client ---- */

struct client {
	int fd;
	char buf[1 << 16];
	size_t len;
};

static void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	(void)nanosleep(&ts, NULL);
}

static bool cl_open(struct client *c)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	c->len = 0;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	(void)snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
	return c->fd >= 0 &&
	       connect(c->fd, (struct sockaddr *)&a, sizeof(a)) == 0;
}

static void cl_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* One line (malloc'd, without '\n'), or NULL after @timeout_ms / EOF. */
static char *cl_line(struct client *c, int timeout_ms)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		struct pollfd p = { c->fd, POLLIN, 0 };
		ssize_t n;

		if (nl) {
			size_t l = (size_t)(nl - c->buf);
			char *s = strndup(c->buf, l);

			memmove(c->buf, nl + 1, c->len - l - 1);
			c->len -= l + 1;
			return s;
		}
		if (c->len == sizeof(c->buf) ||
		    poll(&p, 1, timeout_ms) <= 0)
			return NULL;
		n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
		if (n <= 0)
			return NULL;
		c->len += (size_t)n;
	}
}

/* Send @req (with @fd by SCM_RIGHTS if >= 0), return the response. */
static cJSON *cl_call_fd(struct client *c, const char *req, int fd)
{
	char line[4400];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { line, 0 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	char *resp;
	cJSON *o;

	iov.iov_len = (size_t)snprintf(line, sizeof(line), "%s\n", req);
	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof(ctl.b);
		CMSG_FIRSTHDR(&m)->cmsg_level = SOL_SOCKET;
		CMSG_FIRSTHDR(&m)->cmsg_type = SCM_RIGHTS;
		CMSG_FIRSTHDR(&m)->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(CMSG_FIRSTHDR(&m)), &fd, sizeof(int));
	}
	if (sendmsg(c->fd, &m, MSG_NOSIGNAL) != (ssize_t)iov.iov_len)
		return NULL;
	resp = cl_line(c, 60000);
	o = resp ? cJSON_Parse(resp) : NULL;
	free(resp);
	return o;
}

static cJSON *cl_call(struct client *c, const char *req)
{
	return cl_call_fd(c, req, -1);
}

static bool resp_ok(const cJSON *r)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"));
}

static const char *err_field(const cJSON *r, const char *k)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, k);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static double res_num(const cJSON *r, const char *k)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(r, "result");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(res, k);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* ---- lines ---- */

struct lines {
	char **l;
	size_t n, cap;
};

static void lines_add(struct lines *ls, char *s)
{
	if (ls->n == ls->cap) {
		ls->cap = ls->cap ? 2 * ls->cap : 1024;
		ls->l = realloc(ls->l, ls->cap * sizeof(*ls->l));
		if (!ls->l)
			abort();
	}
	ls->l[ls->n++] = s;
}

static void lines_free(struct lines *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		free(ls->l[i]);
	free(ls->l);
	memset(ls, 0, sizeof(*ls));
}

static int add_json(void *ctx, const struct ptd_record *r)
{
	char buf[PTD_JSON_MAX_RECORD];
	size_t n = ptd_json_record(buf, sizeof(buf), r);

	/* without its '\n', as the stream's lines are read */
	lines_add(ctx, strndup(buf, n && buf[n - 1] == '\n' ? n - 1 : n));
	return 0;
}

static bool is_type(const char *l, const char *t)
{
	char k[48];

	(void)snprintf(k, sizeof(k), "{\"type\":\"%s\"", t);
	return !strncmp(l, k, strlen(k));
}

/* Read a subscriber's stream to its bye: records into @recs, the counts
 * of lost records (sum of "records"), the bye.  @slow: pause 2 ms every
 * 50 lines. */
static cJSON *read_stream_pause(struct client *c, struct lines *recs,
				uint64_t *lost, unsigned pause_ms,
				char **hello)
{
	unsigned k = 0;
	char *l;

	*lost = 0;
	while ((l = cl_line(c, 60000))) {
		if (pause_ms && ++k % 50 == 0)
			msleep(pause_ms);
		if (is_type(l, "bye")) {
			cJSON *b = cJSON_Parse(l);

			free(l);
			return b;
		}
		if (is_type(l, "hello")) {
			if (hello && !*hello)
				*hello = l;
			else
				free(l);
			continue;
		}
		if (is_type(l, "lost")) {
			cJSON *o = cJSON_Parse(l);

			*lost += (uint64_t)num(o, "records");
			cJSON_Delete(o);
			free(l);
			continue;
		}
		lines_add(recs, l);
	}
	return NULL;
}

static cJSON *read_stream(struct client *c, struct lines *recs,
			  uint64_t *lost, bool slow, char **hello)
{
	return read_stream_pause(c, recs, lost, slow ? 2 : 0, hello);
}

/* ---- the server ---- */

static bool server_start(size_t queue_size)
{
	struct ptd_config cfg;
	struct stat st;

	ptd_config_defaults(&cfg);
	(void)snprintf(cfg.socket_path, sizeof(cfg.socket_path), "%s", sock);
	cfg.socket_mode = 0666;
	cfg.socket_group[0] = 0;
	cfg.subscriber_queue_size = queue_size;
	cfg.aux_buffer_size = 64u << 10;
	cfg.data_buffer_size = 16u << 10;
	strcpy(cfg.intel_pt_sysfs, "/nonexistent/intel_pt");
	cfg.software_source = true;
	server_pid = fork();
	if (server_pid == 0) {
		struct ptd_diag diag = { "" };
		struct ptd_server *s;
		int r = ptd_server_new(&cfg, NULL, &s, &diag);

		if (r < 0) {
			fprintf(stderr, "server: %s\n", diag.msg);
			_exit(1);
		}
		r = ptd_server_run(s);
		ptd_server_free(s);
		_exit(r < 0 ? 1 : 0);
	}
	for (int i = 0; i < 500; i++) {
		if (stat(sock, &st) == 0)
			return true;
		msleep(10);
	}
	return false;
}

static void server_stop(void)
{
	int status = 0;

	if (server_pid <= 0)
		return;
	(void)kill(server_pid, SIGTERM);
	(void)waitpid(server_pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	server_pid = 0;
}

/* ---- tests ---- */

/* prog-loop's first @max_insns instructions, captured into @dir. */
static bool make_capture_of(const char *dir, uint64_t max_insns)
{
	char prog[512];
	char *argv[] = { prog, "1", NULL };
	struct ptd_swpt_options o;
	struct ptd_diag diag = { "" };
	int r;

	(void)snprintf(prog, sizeof(prog), "%s/prog-loop", progs_dir);
	memset(&o, 0, sizeof(o));
	o.gen.psb_period = 4096;
	o.outdir = dir;
	o.max_insns = max_insns;
	o.quiet_target = true;
	r = ptd_swpt_run(argv, &o, NULL, &diag);
	if (r < 0)
		fprintf(stderr, "capture: %s\n", diag.msg);
	return r == 0;
}

static bool make_capture(void)
{
	(void)snprintf(capdir, sizeof(capdir), "%s/cap", workdir);
	return make_capture_of(capdir, 15000);
}

/* What the daemon must stream for the capture: ptd_input_decode's
 * records with the daemon's options, on the instruction path (the daemon
 * decodes on the block path: the records must be the same). */
static void expected_lines_of(const char *path, struct lines *exp)
{
	struct ptd_input_opts o;
	struct ptd_input_sink sink = { NULL, add_json, NULL, exp };
	struct ptd_diag diag = { "" };
	size_t terr = 0;

	memset(&o, 0, sizeof(o));
	o.decode.path = PTD_PATH_INSN;
	o.decode.want = PTD_REC_BIT(PTD_REC_INSN) |
			PTD_REC_BIT(PTD_REC_EVENT) | PTD_REC_BIT(PTD_REC_ERROR);
	CHECK_EQ_INT(ptd_input_decode(path, &o, &sink, &terr, &diag), 0);
}

static void expected_lines(struct lines *exp)
{
	expected_lines_of(capdir, exp);
}

/* Replay @path with the request's @opts (more keys, each after a comma,
 * or ""), subscribe on the same connection, read it all. */
static cJSON *replay_opts(const char *path, const char *opts, bool slow,
			  struct lines *got, uint64_t *lost, char **hello)
{
	struct client c;
	char req[600];
	cJSON *r, *bye = NULL;

	if (!cl_open(&c))
		return NULL;
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\"%s}",
		       path, opts);
	r = cl_call(&c, req);
	CHECK(resp_ok(r));
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			     cJSON_GetObjectItemCaseSensitive(r, "result"),
			     "kind")),
		     "replay");
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"subscribe\",\"session\":%.0f}",
		       res_num(r, "session"));
	cJSON_Delete(r);
	r = cl_call(&c, req);
	CHECK(resp_ok(r));
	cJSON_Delete(r);
	bye = read_stream(&c, got, lost, slow, hello);
	cl_close(&c);
	return bye;
}

static cJSON *replay_path(const char *path, bool lossless, bool slow,
			  struct lines *got, uint64_t *lost, char **hello)
{
	return replay_opts(path,
			   lossless ? ",\"lossless\":true" : ",\"lossless\":false",
			   slow, got, lost, hello);
}

static cJSON *replay_read(bool lossless, bool slow, struct lines *got,
			  uint64_t *lost, char **hello)
{
	return replay_path(capdir, lossless, slow, got, lost, hello);
}

/* What an input says of itself as a whole reaches the subscribers: an
 * LLDB per-CPU bundle whose trace no thread's run claims ends with a bye
 * that says how many bytes were not decoded. */
static void test_replay_notice(void)
{
	struct lines got = { 0 };
	char dir[128], *hello = NULL;
	const char *msg;
	uint64_t lost = 0;
	cJSON *bye;

	(void)snprintf(dir, sizeof(dir), "%s/lldb-unclaimed", workdir);
	REQUIRE(lldb_unclaimed_bundle(dir));
	bye = replay_path(dir, false, false, &got, &lost, &hello);
	REQUIRE(bye);
	msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(bye,
								    "message"));
	CHECK_CONTAINS(msg ? msg : "", "end of the trace; ");
	CHECK_CONTAINS(msg ? msg : "", LLDB_UNCLAIMED_NOTICE);
	free(hello);
	cJSON_Delete(bye);
	lines_free(&got);
}

static void compare_lines(const struct lines *got, const struct lines *exp)
{
	size_t i;

	CHECK_EQ_U64(got->n, exp->n);
	for (i = 0; i < got->n && i < exp->n; i++)
		if (strcmp(got->l[i], exp->l[i])) {
			CHECK_EQ_STR(got->l[i], exp->l[i]);
			break;
		}
}

static void test_replay_equals_decode(void)
{
	struct lines exp = { 0 }, got = { 0 };
	char *hello = NULL;
	uint64_t lost = 0;
	cJSON *bye;

	expected_lines(&exp);
	REQUIRE(exp.n > 1000);
	bye = replay_read(true, false, &got, &lost, &hello);
	REQUIRE(bye);
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			     bye, "reason")),
		     "exited");
	CHECK_EQ_U64(lost, 0);
	CHECK_EQ_U64(num(bye, "lost"), 0);
	CHECK_EQ_U64(num(bye, "sent"), exp.n);
	CHECK_CONTAINS(hello, "\"pid\":");
	compare_lines(&got, &exp);
	free(hello);
	cJSON_Delete(bye);
	lines_free(&got);
	lines_free(&exp);
}

/* A small queue and a reader that pauses: lossless loses nothing;
 * without it records are lost and counted. */
static void test_lossless_vs_lossy(void)
{
	struct lines exp = { 0 }, got = { 0 };
	uint64_t lost = 0;
	cJSON *bye;

	expected_lines(&exp);
	bye = replay_read(true, true, &got, &lost, NULL);
	REQUIRE(bye);
	CHECK_EQ_U64(lost, 0);
	CHECK_EQ_U64(num(bye, "lost"), 0);
	compare_lines(&got, &exp);
	cJSON_Delete(bye);
	lines_free(&got);

	bye = replay_read(false, true, &got, &lost, NULL);
	REQUIRE(bye);
	CHECK(lost > 0);
	CHECK_EQ_U64(num(bye, "lost"), lost);
	CHECK_EQ_U64(num(bye, "sent"), got.n);
	CHECK_EQ_U64(got.n + lost, exp.n);
	cJSON_Delete(bye);
	lines_free(&got);
	lines_free(&exp);
}

/* A replay keeps the call stack (daemon/replay.c calls_gate) only once a
 * subscriber has asked for call records -- and then from that moment:
 * one that joins the replay of a first that did not still gets its call
 * records, and the first's stream is untouched. */
struct call_reader {
	pthread_t th;
	struct client c;
	struct lines got;
	uint64_t lost;
	cJSON *bye;
};

static void *call_reader_main(void *arg)
{
	struct call_reader *b = arg;

	b->bye = read_stream(&b->c, &b->got, &b->lost, false, NULL);
	return NULL;
}

static void test_replay_calls_join(void)
{
	struct lines exp = { 0 }, got = { 0 };
	struct call_reader b;
	struct client a;
	char req[600], dir[160];
	uint64_t lost = 0;
	size_t calls = 0;
	double id;
	cJSON *r, *bye;

	/* calls all through: the first 15000 instructions make their last
	 * call by about the 1100th, before the second subscriber comes */
	(void)snprintf(dir, sizeof(dir), "%s/cap-calls", workdir);
	REQUIRE(make_capture_of(dir, 60000));
	expected_lines_of(dir, &exp);
	memset(&b, 0, sizeof(b));
	REQUIRE(cl_open(&a));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\"}",
		       dir);
	r = cl_call(&a, req);
	REQUIRE(resp_ok(r));
	id = res_num(r, "session");
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"subscribe\",\"session\":%.0f}",
		       id);
	r = cl_call(&a, req);
	REQUIRE(resp_ok(r));
	cJSON_Delete(r);
	/* a holds the lossless replay back (it reads nothing yet) while
	 * the second subscriber, of call records only, joins */
	msleep(100);
	REQUIRE(cl_open(&b.c));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"subscribe\",\"session\":%.0f,"
		       "\"kinds\":[\"call\"]}", id);
	r = cl_call(&b.c, req);
	REQUIRE(resp_ok(r));
	cJSON_Delete(r);
	REQUIRE(pthread_create(&b.th, NULL, call_reader_main, &b) == 0);
	bye = read_stream(&a, &got, &lost, false, NULL);
	CHECK(pthread_join(b.th, NULL) == 0);
	REQUIRE(bye && b.bye);
	CHECK_EQ_U64(lost, 0);
	compare_lines(&got, &exp);
	/* its stack kept from when it came: call records, nothing else */
	for (size_t i = 0; i < b.got.n; i++) {
		if (is_type(b.got.l[i], "call"))
			calls++;
		else
			CHECK(is_type(b.got.l[i], "return") ||
			      is_type(b.got.l[i], "stack_reset"));
	}
	CHECK(calls > 0);
	CHECK_EQ_U64(b.lost, 0);
	cJSON_Delete(bye);
	cJSON_Delete(b.bye);
	cl_close(&a);
	cl_close(&b.c);
	lines_free(&got);
	lines_free(&b.got);
	lines_free(&exp);
}

/* A replay is lossless unless asked otherwise: the same slow reader of
 * the same small queue, asking nothing, loses nothing; "lossy":true loses
 * and counts, as "lossless":false does. */
static void test_default_lossless(void)
{
	struct lines exp = { 0 }, got = { 0 };
	uint64_t lost = 0;
	cJSON *bye;

	expected_lines(&exp);
	bye = replay_opts(capdir, "", true, &got, &lost, NULL);
	REQUIRE(bye);
	CHECK_EQ_U64(lost, 0);
	CHECK_EQ_U64(num(bye, "lost"), 0);
	CHECK_EQ_U64(num(bye, "sent"), exp.n);
	compare_lines(&got, &exp);
	cJSON_Delete(bye);
	lines_free(&got);

	bye = replay_opts(capdir, ",\"lossy\":true", true, &got, &lost, NULL);
	REQUIRE(bye);
	CHECK(lost > 0);
	CHECK_EQ_U64(num(bye, "lost"), lost);
	CHECK_EQ_U64(got.n + lost, exp.n);
	cJSON_Delete(bye);
	lines_free(&got);
	lines_free(&exp);
}

static void check_refused(const char *req, const char *code,
			  const char *needle)
{
	struct client c;
	cJSON *r;

	REQUIRE(cl_open(&c));
	r = cl_call(&c, req);
	CHECK(r && !resp_ok(r));
	CHECK_EQ_STR(err_field(r, "code"), code);
	CHECK_CONTAINS(err_field(r, "message"), needle);
	cJSON_Delete(r);
	cl_close(&c);
}

static void test_replay_refusals(void)
{
	char req[600], path[300];

	check_refused("{\"id\":1,\"cmd\":\"replay\",\"path\":\"rel/x\"}",
		      "bad_request", "absolute");
	check_refused("{\"id\":1,\"cmd\":\"replay\"}", "bad_request",
		      "replay: path: missing");
	check_refused("{\"id\":1,\"cmd\":\"replay\",\"path\":\"/x\","
		      "\"lossless\":1}",
		      "bad_request", "lossless");
	check_refused("{\"id\":1,\"cmd\":\"replay\",\"path\":\"/x\","
		      "\"lossy\":\"yes\"}",
		      "bad_request", "lossy");
	check_refused("{\"id\":1,\"cmd\":\"replay\",\"path\":\"/x\","
		      "\"lossy\":true,\"lossless\":true}",
		      "bad_request", "contradict");
	(void)snprintf(path, sizeof(path), "%s/nonexistent", workdir);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\"}", path);
	check_refused(req, "no_such_file", path);
	/* a directory holding no trace */
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\"}",
		       workdir);
	check_refused(req, "bad_trace", workdir);
	/* a capture whose manifest is damaged */
	(void)snprintf(path, sizeof(path), "%s/bad", workdir);
	(void)mkdir(path, 0755);
	(void)snprintf(req, sizeof(req), "%s/capture.json", path);
	REQUIRE(ptd_file_write_atomic(req, "{\"format\":1}", 12) == 0);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\"}", path);
	check_refused(req, "bad_trace", "capture.json");
}

/* The input of a replay is checked on the replay's thread, not the control
 * loop's: while a large bundle is verified (a 256 MiB file listed with a
 * wrong checksum), another client's ping is answered and the replay's
 * response has not come yet; then the replay is refused naming the file
 * (or, if verifying took longer than PTD_REPLAY_START_MS, accepted and
 * ended with that error). */
/* A bundle at @dir (under workdir) whose first listed member is a 256 MiB
 * sparse file listed with a checksum it does not have: verifying it takes
 * a while, then refuses it.  False (a failed check) if it could not be
 * made. */
static bool make_slow_bundle(char *dir, size_t cap, const char *name)
{
	static const uint64_t pad_size = 256ull << 20;
	struct ptd_diag diag = { "" };
	char path[300], *text = NULL;
	cJSON *m, *files, *f;
	size_t len = 0;
	int fd;

	(void)snprintf(dir, cap, "%s/%s", workdir, name);
	if (ptd_bundle_save(capdir, dir, NULL, &diag) < 0) {
		CHECK_FAIL_("bundle: %s", diag.msg);
		return false;
	}
	/* a big (sparse) member, listed with a checksum it does not have */
	(void)snprintf(path, sizeof(path), "%s/capture/pad", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	REQUIRE_OR_FALSE(fd >= 0);
	REQUIRE_OR_FALSE(ftruncate(fd, (off_t)pad_size) == 0);
	close(fd);
	(void)snprintf(path, sizeof(path), "%s/" PTD_BUNDLE_MANIFEST, dir);
	REQUIRE_OR_FALSE(ptd_file_read_all(path, 1u << 24, &text, &len) == 0);
	m = cJSON_Parse(text);
	free(text);
	files = cJSON_GetObjectItem(m, "files");
	REQUIRE_OR_FALSE(cJSON_IsArray(files));
	f = cJSON_CreateObject();
	cJSON_AddStringToObject(f, "name", "capture/pad");
	cJSON_AddNumberToObject(f, "size", (double)pad_size);
	cJSON_AddStringToObject(f, "sha256",
				"00000000000000000000000000000000"
				"00000000000000000000000000000000");
	cJSON_InsertItemInArray(files, 0, f);	/* verified first */
	text = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	REQUIRE_OR_FALSE(text &&
			 ptd_file_write_atomic(path, text, strlen(text)) == 0);
	free(text);
	return true;
}

static void test_replay_slow_input(void)
{
	char dir[200], req[600], *line;
	struct pollfd pfd;
	struct client a, b;
	cJSON *r;

	if (!make_slow_bundle(dir, sizeof(dir), "slowbundle"))
		return;
	REQUIRE(cl_open(&a));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\"}\n", dir);
	REQUIRE(write(a.fd, req, strlen(req)) == (ssize_t)strlen(req));
	/* and one whose client leaves before the answer: nobody is told */
	REQUIRE(cl_open(&b));
	REQUIRE(write(b.fd, req, strlen(req)) == (ssize_t)strlen(req));
	cl_close(&b);
	msleep(50);	/* the replay requests are in ptd before the ping */
	REQUIRE(cl_open(&b));
	r = cl_call(&b, "{\"id\":7,\"cmd\":\"ping\"}");
	CHECK(resp_ok(r));
	cJSON_Delete(r);
	pfd = (struct pollfd){ a.fd, POLLIN, 0 };
	CHECK_EQ_INT(poll(&pfd, 1, 0), 0);	/* still verifying */
	cl_close(&b);

	line = cl_line(&a, 60000);
	r = line ? cJSON_Parse(line) : NULL;
	free(line);
	REQUIRE(r);
	if (!resp_ok(r)) {
		CHECK_EQ_STR(err_field(r, "code"), "bad_trace");
		CHECK_CONTAINS(err_field(r, "message"), "capture/pad");
		CHECK_CONTAINS(err_field(r, "message"), "checksum mismatch");
	} else {
		/* accepted by time: the refusal ends the replay */
		bool bye = false;

		fprintf(stderr, "  verifying outlasted the start wait\n");
		(void)snprintf(req, sizeof(req),
			       "{\"id\":2,\"cmd\":\"subscribe\","
			       "\"session\":%.0f}",
			       res_num(r, "session"));
		cJSON_Delete(r);
		r = cl_call(&a, req);
		CHECK(resp_ok(r));
		while ((line = cl_line(&a, 60000))) {
			if (strstr(line, "\"type\":\"bye\"")) {
				CHECK_CONTAINS(line, "capture/pad");
				bye = true;
			}
			free(line);
			if (bye)
				break;
		}
		CHECK(bye);
	}
	cJSON_Delete(r);
	cl_close(&a);
	/* ptd is still well after both */
	REQUIRE(cl_open(&b));
	r = cl_call(&b, "{\"id\":8,\"cmd\":\"ping\"}");
	CHECK(resp_ok(r));
	cJSON_Delete(r);
	cl_close(&b);
	(void)ptd_rm_rf(dir);
}

/* ---- the lossless wait, through the replay and fan-out interfaces ----
 *
 * A lossless replay held back by a subscriber whose queue is full waits
 * (replay.h); each way that wait ends, tested on its own: the queue
 * drains, the subscriber leaves, the replay is stopped, the subscriber
 * stalls.  A wait that never ended fails the test by its deadline. */

struct rig {
	struct ptd_fanout *fan;
	struct ptd_subscriber *sub;
	struct ptd_replay *rp;
	atomic_bool ended;
	struct ptd_session_end end;
};

static void rig_record(void *ctx, const struct ptd_record *rec)
{
	struct rig *g = ctx;

	ptd_fanout_record(g->fan, rec);
}

static void rig_ended(void *ctx, const struct ptd_session_end *end)
{
	struct rig *g = ctx;

	g->end = *end;
	ptd_fanout_end(g->fan, end);
	atomic_store(&g->ended, true);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A lossless replay of the capture to one subscriber with a queue of two
 * records' worth that nobody reads, held back once this returns true. */
static bool rig_start(struct rig *g, unsigned stall_ms)
{
	struct ptd_filter_spec spec = { .kinds = PTD_FILTER_DEFAULT_KINDS };
	struct ptd_replay_opts o = { 0 };
	struct ptd_session_sink sink = { 0 };
	struct ptd_replay_info info;
	struct ptd_diag diag = { "" };
	struct ptd_subscriber_stats st;
	struct ptd_session_stats ss;
	struct ptd_filter f;
	uint64_t deadline, before;

	memset(g, 0, sizeof(*g));
	REQUIRE_OR_FALSE(ptd_fanout_new(1, 0, NULL, NULL, &g->fan) == 0);
	REQUIRE_OR_FALSE(ptd_filter_compile(&spec, &f) == 0);
	REQUIRE_OR_FALSE(ptd_fanout_subscribe(g->fan, &f,
					      2 * PTD_JSON_MAX_RECORD, 8,
					      &g->sub) == 0);
	o.path = capdir;
	o.input.decode.path = PTD_PATH_INSN;
	o.input.decode.want = PTD_FILTER_DEFAULT_KINDS;
	o.lossless = true;
	o.creds.uid = geteuid();
	o.creds.gid = getegid();
	o.queue_size = 2 * PTD_JSON_MAX_RECORD;
	o.stall_ms = stall_ms;
	sink.record = rig_record;
	sink.ended = rig_ended;
	sink.ctx = g;
	REQUIRE_OR_FALSE(ptd_replay_start(&o, &sink, &g->rp, &info, &diag) ==
			 0);
	ptd_replay_go(g->rp, g->fan);
	/* held back: the queue is full and no record is added for 100 ms */
	deadline = mono_ms() + 20000;
	for (;;) {
		ptd_subscriber_get_stats(g->sub, &st);
		ptd_replay_get_stats(g->rp, &ss);
		before = ss.records;
		if (st.queued + PTD_JSON_MAX_RECORD > 2 * PTD_JSON_MAX_RECORD) {
			msleep(100);
			ptd_replay_get_stats(g->rp, &ss);
			if (ss.records == before)
				break;
		}
		REQUIRE_OR_FALSE(!atomic_load(&g->ended));
		REQUIRE_OR_FALSE(mono_ms() < deadline);
		msleep(5);
	}
	return true;
}

/* Wait (at most @ms) for the replay's end. */
static bool rig_wait_end(struct rig *g, unsigned ms)
{
	uint64_t deadline = mono_ms() + ms;

	while (!atomic_load(&g->ended) && mono_ms() < deadline)
		msleep(5);
	return atomic_load(&g->ended);
}

static void rig_free(struct rig *g)
{
	ptd_replay_free(g->rp);
	ptd_fanout_free(g->fan);
}

/* The subscriber drains its queue: the replay goes on, to the end,
 * losing nothing.  (Held back, the replay's thread is seen by its
 * name.) */
static void test_wait_drain(void)
{
	struct lines exp = { 0 };
	struct ptd_subscriber_stats st;
	enum ptd_sub_state s;
	struct rig g;
	uint64_t deadline;

	expected_lines(&exp);
	if (!rig_start(&g, 0))
		return;
	/* the replay's thread, by name (top -H, perf --sort comm) */
	CHECK_EQ_INT(threads_named(getpid(), "ptd-replay"), 1);
	deadline = mono_ms() + 60000;
	do {
		const char *data;
		size_t len;

		s = ptd_subscriber_peek(g.sub, &data, &len);
		if (s == PTD_SUB_DATA)
			ptd_subscriber_consume(g.sub, len);
		else if (s == PTD_SUB_IDLE)
			msleep(1);
	} while (s != PTD_SUB_DONE && mono_ms() < deadline);
	CHECK_EQ_INT(s, PTD_SUB_DONE);
	CHECK(atomic_load(&g.ended));
	CHECK_EQ_INT(g.end.reason, PTD_END_EXITED);
	ptd_subscriber_get_stats(g.sub, &st);
	CHECK_EQ_U64(st.lost, 0);
	CHECK_EQ_U64(st.sent, exp.n);
	rig_free(&g);
	lines_free(&exp);
}

/* The only subscriber leaves: the replay ends at once (nobody is left to
 * deliver to), rather than waiting or decoding on into the void. */
static void test_wait_subscriber_left(void)
{
	struct lines exp = { 0 };
	struct ptd_session_stats ss;
	struct rig g;

	expected_lines(&exp);
	if (!rig_start(&g, 0))
		return;
	ptd_fanout_unsubscribe(g.fan, g.sub);
	CHECK(rig_wait_end(&g, 10000));
	CHECK_EQ_INT(g.end.reason, PTD_END_DETACHED);
	CHECK_CONTAINS(g.end.message, "every subscriber left");
	ptd_replay_get_stats(g.rp, &ss);
	CHECK(ss.records < exp.n);
	rig_free(&g);
	lines_free(&exp);
}

/* Nobody subscribes within wait_ms: the replay decodes nothing and ends,
 * saying so, instead of decoding the whole trace for nobody (and a late
 * subscriber missing its start). */
static void test_wait_nobody(void)
{
	struct ptd_replay_opts o = { 0 };
	struct ptd_session_sink sink = { 0 };
	struct ptd_replay_info info;
	struct ptd_diag diag = { "" };
	struct ptd_session_stats ss;
	struct rig g;

	memset(&g, 0, sizeof(g));
	REQUIRE(ptd_fanout_new(1, 0, NULL, NULL, &g.fan) == 0);
	o.path = capdir;
	o.input.decode.path = PTD_PATH_INSN;
	o.input.decode.want = PTD_FILTER_DEFAULT_KINDS;
	o.lossless = true;
	o.creds.uid = geteuid();
	o.creds.gid = getegid();
	o.queue_size = 2 * PTD_JSON_MAX_RECORD;
	o.wait_ms = 200;
	sink.record = rig_record;
	sink.ended = rig_ended;
	sink.ctx = &g;
	REQUIRE(ptd_replay_start(&o, &sink, &g.rp, &info, &diag) == 0);
	ptd_replay_go(g.rp, g.fan);
	CHECK(rig_wait_end(&g, 20000));
	CHECK_EQ_INT(g.end.reason, PTD_END_DETACHED);
	CHECK_CONTAINS(g.end.message, "nobody subscribed within wait_ms "
				      "(200 ms)");
	ptd_replay_get_stats(g.rp, &ss);
	CHECK_EQ_U64(ss.records, 0);
	rig_free(&g);
}

/* A stop (detach, shutdown) ends the wait at once; so does freeing. */
static void test_wait_stopped(void)
{
	struct rig g;
	uint64_t t0;

	if (!rig_start(&g, 0))
		return;
	ptd_replay_stop(g.rp, PTD_END_DETACHED);
	CHECK(rig_wait_end(&g, 10000));
	CHECK_EQ_INT(g.end.reason, PTD_END_DETACHED);
	rig_free(&g);

	if (!rig_start(&g, 0))
		return;
	t0 = mono_ms();
	ptd_replay_free(g.rp);		/* stops (shutdown) and joins */
	g.rp = NULL;
	CHECK(mono_ms() - t0 < 10000);
	CHECK(atomic_load(&g.ended));
	CHECK_EQ_INT(g.end.reason, PTD_END_SHUTDOWN);
	rig_free(&g);
}

/* A subscriber that takes nothing for stall_ms is no longer waited for:
 * the replay goes to its end and that subscriber's records are lost,
 * counted. */
static void test_wait_stalled(void)
{
	struct ptd_subscriber_stats st;
	struct rig g;

	if (!rig_start(&g, 300))
		return;
	CHECK(rig_wait_end(&g, 30000));
	CHECK_EQ_INT(g.end.reason, PTD_END_EXITED);
	ptd_subscriber_get_stats(g.sub, &st);
	CHECK(st.lost > 0);
	CHECK_EQ_U64(st.sent + st.lost, st.matched);
	rig_free(&g);
}

/* ---- hostile files ----
 *
 * A client owns the files ptd reads for its replay and may truncate,
 * replace or swap any of them for a FIFO -- before ptd opens it or while
 * the replay runs.  ptd must survive, tell the client which file, and go
 * on serving another session untouched. */

/* Another client's replay of the capture, read slowly (so that it runs
 * beside the hostile ones), on its own thread. */
struct bystander {
	pthread_t th;
	struct lines got;
	uint64_t lost;
	cJSON *bye;
};

static void *bystander_main(void *arg)
{
	struct bystander *b = arg;
	struct client c;
	char req[600];
	cJSON *r;

	if (!cl_open(&c))
		return NULL;
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\"}",
		       capdir);
	r = cl_call(&c, req);
	if (resp_ok(r)) {
		(void)snprintf(req, sizeof(req),
			       "{\"id\":2,\"cmd\":\"subscribe\","
			       "\"session\":%.0f}", res_num(r, "session"));
		cJSON_Delete(r);
		r = cl_call(&c, req);
		if (resp_ok(r))
			b->bye = read_stream_pause(&c, &b->got, &b->lost, 5,
						   NULL);
	}
	cJSON_Delete(r);
	cl_close(&c);
	return NULL;
}

static bool bystander_start(struct bystander *b)
{
	memset(b, 0, sizeof(*b));
	return pthread_create(&b->th, NULL, bystander_main, b) == 0;
}

/* The bystander got everything, lost nothing, ended normally. */
static void bystander_check(struct bystander *b)
{
	struct lines exp = { 0 };

	CHECK(pthread_join(b->th, NULL) == 0);
	expected_lines(&exp);
	CHECK(b->bye != NULL);
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			     b->bye, "reason")), "exited");
	CHECK_EQ_U64(b->lost, 0);
	compare_lines(&b->got, &exp);
	cJSON_Delete(b->bye);
	lines_free(&b->got);
	lines_free(&exp);
}

static bool sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static bool sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd) == 0;
}

/* The traces a client could hand ptd, all of the same run, made once:
 * hb-cap, a capture whose timeline names private copies of the files the
 * program mapped (hb-cap/img/NAME: the program, ld.so, whose code the
 * trace runs) instead of the system's; a ptd bundle, an LLDB bundle and a
 * perf.data of it (the perf.data from a copy of its own, hb-capp, whose
 * images it names). */
static bool make_hostile_bases(void)
{
	static int made;
	char dir[300], path[400];
	struct ptd_diag diag = { "" };
	struct ptd_capture cap;
	const char *bases[] = { "hb-cap", "hb-capp" };

	if (made)
		return made > 0;
	made = -1;
	for (size_t i = 0; i < 2; i++) {
		(void)snprintf(dir, sizeof(dir), "%s/%s", workdir, bases[i]);
		REQUIRE_OR_FALSE(sh(
			"set -e; cp -a '%s' '%s'; cd '%s'; mkdir img; "
			"for p in $(grep -o '\"path\":\"[^\"]*\"' "
			"timeline.jsonl | cut -d'\"' -f4 | sort -u); do "
			"b=$(basename \"$p\"); cp \"$p\" \"img/$b\"; "
			"sed -i \"s|\\\"path\\\":\\\"$p\\\"|"
			"\\\"path\\\":\\\"$PWD/img/$b\\\"|g\" "
			"timeline.jsonl; done; "
			/* the copies are other files than the process
			 * mapped: what they were is no longer true */
			"sed -i 's/,\"dev\":\"[^\"]*\",\"ino\":\"[^\"]*\"//g' "
			"timeline.jsonl; "
			"grep -q \"$PWD/img/ld-\" timeline.jsonl",
			capdir, dir, dir));
	}
	(void)snprintf(dir, sizeof(dir), "%s/hb-cap", workdir);
	(void)snprintf(path, sizeof(path), "%s/hb-bundle", workdir);
	if (ptd_bundle_save(dir, path, NULL, &diag) < 0) {
		CHECK_FAIL_("bundle: %s", diag.msg);
		return false;
	}
	REQUIRE_OR_FALSE(ptd_capture_load(dir, &cap, &diag) == 0);
	(void)snprintf(path, sizeof(path), "%s/hb-lldb", workdir);
	if (ptd_lldb_export_capture(&cap, path, &diag) < 0) {
		CHECK_FAIL_("lldb: %s", diag.msg);
		ptd_capture_fini(&cap);
		return false;
	}
	ptd_capture_fini(&cap);
	(void)snprintf(dir, sizeof(dir), "%s/hb-capp", workdir);
	REQUIRE_OR_FALSE(ptd_capture_load(dir, &cap, &diag) == 0);
	(void)snprintf(path, sizeof(path), "%s/hb-perf", workdir);
	REQUIRE_OR_FALSE(mkdir(path, 0755) == 0);
	(void)snprintf(path, sizeof(path), "%s/hb-perf/perf.data", workdir);
	if (ptd_perfdata_write_capture(&cap, path, &diag) < 0) {
		CHECK_FAIL_("perf.data: %s", diag.msg);
		ptd_capture_fini(&cap);
		return false;
	}
	ptd_capture_fini(&cap);
	made = 1;
	return true;
}

/* The first regular file under @dir whose name matches @pattern,
 * relative to @dir ("" if none). */
static void find_file(const char *dir, const char *pattern, char *out,
		      size_t cap)
{
	char cmd[600];
	FILE *p;

	out[0] = 0;
	(void)snprintf(cmd, sizeof(cmd),
		       "cd '%s' && find . -type f -name '%s' | sort | head -n1",
		       dir, pattern);
	p = popen(cmd, "r");
	if (!p)
		return;
	if (fgets(out, (int)cap, p)) {
		out[strcspn(out, "\n")] = 0;
		if (!strncmp(out, "./", 2))
			memmove(out, out + 2, strlen(out + 2) + 1);
	}
	(void)pclose(p);
}

enum harm { HARM_FIFO, HARM_TRUNCATE, HARM_REPLACE };

/* Do @h to @path: swap it for a FIFO, cut it to nothing, or put another
 * file (a few bytes of text) in its place by rename. */
static bool harm(const char *path, enum harm h)
{
	char tmp[PATH_MAX];

	switch (h) {
	case HARM_FIFO:
		return unlink(path) == 0 && mkfifo(path, 0644) == 0;
	case HARM_TRUNCATE:
		return truncate(path, 0) == 0;
	case HARM_REPLACE:
		(void)snprintf(tmp, sizeof(tmp), "%s.new", path);
		return ptd_file_write_atomic(tmp, "not what it was\n", 16) ==
			       0 &&
		       rename(tmp, path) == 0;
	}
	return false;
}

/* Replay @trace; everything the client gets back (the response, then the
 * stream to its bye), as one string, or NULL if ptd said nothing for 20 s
 * (a replay thread blocked on the file). */
static char *replay_all_text(const char *trace)
{
	struct ptd_buf all = { 0 };
	struct client c;
	char req[PATH_MAX + 128], *l;
	bool done = false;
	cJSON *r;

	if (!cl_open(&c))
		return NULL;
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\"}\n",
		       trace);
	if (write(c.fd, req, strlen(req)) != (ssize_t)strlen(req) ||
	    !(l = cl_line(&c, 20000))) {
		cl_close(&c);
		return NULL;
	}
	(void)ptd_buf_append(&all, l, strlen(l));
	r = cJSON_Parse(l);
	free(l);
	if (resp_ok(r)) {
		(void)snprintf(req, sizeof(req),
			       "{\"id\":2,\"cmd\":\"subscribe\","
			       "\"session\":%.0f}\n", res_num(r, "session"));
		if (write(c.fd, req, strlen(req)) == (ssize_t)strlen(req))
			while (!done && (l = cl_line(&c, 20000))) {
				done = is_type(l, "bye");
				(void)ptd_buf_append(&all, "\n", 1);
				(void)ptd_buf_append(&all, l, strlen(l));
				free(l);
			}
	} else {
		done = true;
	}
	cJSON_Delete(r);
	cl_close(&c);
	(void)ptd_buf_append(&all, "", 1);
	if (!done) {
		ptd_buf_fini(&all);
		return NULL;
	}
	return (char *)all.data;
}

/* One file of one kind of trace, harmed before ptd opens it. */
struct victim {
	const char *base;	/* under workdir: the trace as made */
	const char *trace;	/* the replayed path, under the copy ("" the
				 * copy itself) */
	const char *file;	/* the file harmed, under the copy... */
	const char *pattern;	/* ...or the first one named so */
	/* the client must be told the file's name, for each harm (not for
	 * a file whose emptiness is as valid as its content: a timeline
	 * with no mappings, a thread that traced nothing; nor for an LLDB
	 * trace replaced by other bytes: nothing says what they should be,
	 * they are decoded, errors at their offsets) */
	bool needle[3];
};

static const struct victim victims[] = {
	{ "hb-cap", "", "capture.json", NULL, { true, true, true } },
	{ "hb-cap", "", "timeline.jsonl", NULL, { true, false, true } },
	{ "hb-cap", "", NULL, "pt-*", { true, true, true } },
	{ "hb-cap", "", NULL, "ld-*", { true, true, true } },
	{ "hb-bundle", "", "ptd-bundle.json", NULL, { true, true, true } },
	{ "hb-bundle", "", NULL, "pt-*", { true, true, true } },
	{ "hb-bundle", "", NULL, "*ld-*", { true, true, true } },
	{ "hb-lldb", "", "trace.json", NULL, { true, true, true } },
	{ "hb-lldb", "", NULL, "*.intelpt.trace", { true, false, false } },
	{ "hb-lldb", "", NULL, "ld-*", { true, true, true } },
	{ "hb-perf", "perf.data", "perf.data", NULL, { true, true, true } },
};

/* Each victim file, harmed with @h in a fresh copy of its trace before
 * the replay: the client is told (naming the file) within 20 s; another
 * client's replay running meanwhile gets all its records; ptd still
 * answers. */
static void hostile_before_open(enum harm h)
{
	struct bystander b;
	struct client c;
	cJSON *r;

	if (!make_hostile_bases())
		return;
	REQUIRE(bystander_start(&b));
	for (size_t i = 0; i < PTD_ARRAY_SIZE(victims); i++) {
		const struct victim *v = &victims[i];
		char copy[300], rel[300], file[700], trace[700], *all;

		(void)snprintf(copy, sizeof(copy), "%s/h%d-%zu-%s", workdir,
			       (int)h, i, v->base);
		if (!sh("cp -a '%s/%s' '%s'", workdir, v->base, copy)) {
			CHECK_FAIL_("cannot copy %s", v->base);
			continue;
		}
		if (v->file)
			(void)snprintf(rel, sizeof(rel), "%s", v->file);
		else
			find_file(copy, v->pattern, rel, sizeof(rel));
		CHECK(rel[0] != 0);
		(void)snprintf(file, sizeof(file), "%s/%s", copy, rel);
		(void)snprintf(trace, sizeof(trace), "%s%s%s", copy,
			       v->trace[0] ? "/" : "", v->trace);
		CHECK(harm(file, h));
		all = replay_all_text(trace);
		if (!all) {
			CHECK_FAIL_("%s: no answer for 20 s (harm %d of %s)",
				    trace, (int)h, rel);
			continue;
		}
		/* the file, by its name (ptd may name it by its path or, in
		 * a bundle, by its member name) */
		if (v->needle[h] && !strstr(all, strrchr(file, '/') + 1))
			CHECK_FAIL_("harm %d of %s: not named in: %.600s",
				    (int)h, file, all);
		free(all);
	}
	bystander_check(&b);
	REQUIRE(cl_open(&c));
	r = cl_call(&c, "{\"id\":9,\"cmd\":\"ping\"}");
	CHECK(resp_ok(r));
	cJSON_Delete(r);
	cl_close(&c);
}

static void test_hostile_fifo(void)
{
	hostile_before_open(HARM_FIFO);
}

static void test_hostile_truncated(void)
{
	hostile_before_open(HARM_TRUNCATE);
}

static void test_hostile_replaced(void)
{
	hostile_before_open(HARM_REPLACE);
}

/* Records session @id has handed its subscribers so far (-1: unknown). */
static double session_records(double id)
{
	struct client c;
	char req[128];
	double n = -1;
	cJSON *r;

	if (!cl_open(&c))
		return -1;
	(void)snprintf(req, sizeof(req),
		       "{\"id\":3,\"cmd\":\"status\",\"session\":%.0f}", id);
	r = cl_call(&c, req);
	if (resp_ok(r))
		n = res_num(r, "records");
	cJSON_Delete(r);
	cl_close(&c);
	return n;
}

/* Replay @trace, stop reading once subscribed until the replay is held
 * back mid-way (lossless: its records stop growing), harm the @nfiles
 * @files with @h meanwhile, then read to the end: what was read before
 * the harm is all ptd needs -- the replay ends normally with every
 * record, lost nothing -- and ptd never faulted on a file it had mapped
 * (it maps none: truncating them would SIGBUS it). */
static void hostile_mid_read(const char *trace, const char *const *files,
			     size_t nfiles, enum harm h, size_t want)
{
	struct lines got = { 0 };
	struct client c;
	char req[600];
	double id, before, now;
	uint64_t lost = 0, deadline;
	cJSON *r, *bye;

	REQUIRE(cl_open(&c));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\"}",
		       trace);
	r = cl_call(&c, req);
	REQUIRE(resp_ok(r));
	id = res_num(r, "session");
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"subscribe\",\"session\":%.0f}",
		       id);
	r = cl_call(&c, req);
	REQUIRE(resp_ok(r));
	cJSON_Delete(r);
	/* held back: records stop growing short of the end */
	deadline = mono_ms() + 30000;
	before = session_records(id);
	for (;;) {
		msleep(200);
		now = session_records(id);
		if (now == before && now > 0)
			break;
		before = now;
		REQUIRE(mono_ms() < deadline);
	}
	CHECK(now < (double)want);
	for (size_t i = 0; i < nfiles; i++)
		CHECK(harm(files[i], h));
	bye = read_stream(&c, &got, &lost, false, NULL);
	cl_close(&c);
	REQUIRE(bye);
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			     bye, "reason")), "exited");
	CHECK_EQ_U64(lost, 0);
	CHECK_EQ_U64(got.n, want);
	cJSON_Delete(bye);
	lines_free(&got);
	REQUIRE(cl_open(&c));
	r = cl_call(&c, "{\"id\":9,\"cmd\":\"ping\"}");
	CHECK(resp_ok(r));
	cJSON_Delete(r);
	cl_close(&c);
}

static void test_hostile_mid_read(void)
{
	struct lines exp = { 0 }, pexp = { 0 };
	struct bystander b;
	char copy[300], f[4][700], rel[300];
	const char *files[4];

	if (!make_hostile_bases())
		return;
	expected_lines(&exp);
	(void)snprintf(copy, sizeof(copy), "%s/hb-perf/perf.data", workdir);
	expected_lines_of(copy, &pexp);
	REQUIRE(pexp.n > 1000);
	REQUIRE(bystander_start(&b));
	for (int h = HARM_FIFO; h <= HARM_REPLACE; h++) {
		/* a capture: its image, timeline, PT file and manifest */
		(void)snprintf(copy, sizeof(copy), "%s/hm%d-cap", workdir, h);
		REQUIRE(sh("cp -a '%s/hb-cap' '%s'", workdir, copy));
		find_file(copy, "pt-*", rel, sizeof(rel));
		(void)snprintf(f[0], sizeof(f[0]), "%s/img/ld-linux-x86-64.so.2",
			       copy);
		(void)snprintf(f[1], sizeof(f[1]), "%s/timeline.jsonl", copy);
		(void)snprintf(f[2], sizeof(f[2]), "%s/%s", copy, rel);
		(void)snprintf(f[3], sizeof(f[3]), "%s/capture.json", copy);
		for (size_t i = 0; i < 4; i++)
			files[i] = f[i];
		hostile_mid_read(copy, files, 4, (enum harm)h, exp.n);
		/* a perf.data and the image it names */
		(void)snprintf(copy, sizeof(copy), "%s/hm%d-perf", workdir, h);
		REQUIRE(sh("cp -a '%s/hb-perf' '%s'", workdir, copy));
		(void)snprintf(f[0], sizeof(f[0]), "%s/perf.data", copy);
		(void)snprintf(f[1], sizeof(f[1]),
			       "%s/hb-capp/img/ld-linux-x86-64.so.2", workdir);
		files[0] = f[0];
		files[1] = f[1];
		/* the image every hb-perf copy names: harmed last */
		hostile_mid_read(f[0], files, h == HARM_REPLACE ? 2 : 1,
				 (enum harm)h, pexp.n);
	}
	bystander_check(&b);
	lines_free(&exp);
	lines_free(&pexp);
}

static void no_record(void *ctx, const struct ptd_record *rec)
{
	(void)rec;
	(*(int *)ctx)++;
}

static void no_end(void *ctx, const struct ptd_session_end *end)
{
	(void)end;
	(*(int *)ctx)++;
}

/* A replay stopped while its input is still being verified (a shutdown, a
 * client gone) stops verifying: the input is refused as cancelled, naming
 * the file it was reading, instead of the stop waiting for the whole
 * bundle to be hashed (seconds per GiB). */
static void test_replay_stop_verifying(void)
{
	struct ptd_replay_opts o = { 0 };
	struct ptd_session_sink sink = { 0 };
	struct ptd_replay_info info;
	struct ptd_diag diag = { "" };
	struct ptd_replay *rp = NULL;
	char dir[200];
	int calls = 0, res = 0;

	if (!make_slow_bundle(dir, sizeof(dir), "stopbundle"))
		return;
	o.path = dir;
	o.creds.uid = geteuid();
	o.creds.gid = getegid();
	sink.record = no_record;
	sink.ended = no_end;
	sink.ctx = &calls;
	REQUIRE(ptd_replay_begin(&o, &sink, &rp, &diag) == 0);
	ptd_replay_stop(rp, PTD_END_DETACHED);
	for (int i = 0; i < 60000 && res == 0; i++) {
		res = ptd_replay_started(rp, &info, &diag);
		if (res == 0)
			msleep(1);
	}
	CHECK_EQ_INT(res, -ECANCELED);
	CHECK_CONTAINS(diag.msg, "capture/pad");
	CHECK_CONTAINS(diag.msg, "verification stopped");
	ptd_replay_free(rp);
	CHECK_EQ_INT(calls, 0);
	(void)ptd_rm_rf(dir);
}

/* A replay waiting for its first subscriber is listed; detach ends it. */
static void test_replay_list_detach(void)
{
	struct client c;
	struct lines got = { 0 };
	char req[600];
	uint64_t lost;
	cJSON *r, *bye;
	double id;

	REQUIRE(cl_open(&c));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\","
		       "\"wait_ms\":60000}", capdir);
	r = cl_call(&c, req);
	REQUIRE(resp_ok(r));
	id = res_num(r, "session");
	cJSON_Delete(r);
	r = cl_call(&c, "{\"id\":2,\"cmd\":\"list\"}");
	REQUIRE(resp_ok(r));
	{
		char *s = cJSON_PrintUnformatted(r);

		CHECK_CONTAINS(s, "\"kind\":\"replay\"");
		CHECK_CONTAINS(s, capdir);
		free(s);
	}
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":3,\"cmd\":\"detach\",\"session\":%.0f}", id);
	r = cl_call(&c, req);
	CHECK(resp_ok(r));
	cJSON_Delete(r);
	/* a subscriber after the detach gets the bye (the session lingers
	 * while it is being reaped, or is gone) */
	(void)snprintf(req, sizeof(req),
		       "{\"id\":4,\"cmd\":\"subscribe\",\"session\":%.0f}", id);
	r = cl_call(&c, req);
	if (resp_ok(r)) {
		bye = read_stream(&c, &got, &lost, false, NULL);
		REQUIRE(bye);
		CHECK_EQ_STR(cJSON_GetStringValue(
				     cJSON_GetObjectItemCaseSensitive(bye,
								      "reason")),
			     "detached");
		CHECK_EQ_U64(got.n, 0);
		cJSON_Delete(bye);
	} else {
		CHECK_EQ_STR(err_field(r, "code"), "no_such_session");
	}
	cJSON_Delete(r);
	lines_free(&got);
	cl_close(&c);
}

/* ---- jobs ---- */

/* A software-source capture of @prog (argument @arg) into @dir: a PSB
 * every @psb bytes, TSC packets if @tsc, at most @max_insns. */
static bool capture_prog(const char *dir, const char *prog, const char *arg,
			 uint64_t psb, bool tsc, uint64_t max_insns)
{
	char exe[512];
	char *argv[] = { exe, (char *)arg, NULL };
	struct ptd_swpt_options o;
	struct ptd_diag diag = { "" };
	int r;

	(void)snprintf(exe, sizeof(exe), "%s/%s", progs_dir, prog);
	memset(&o, 0, sizeof(o));
	o.gen.psb_period = psb;
	o.gen.tsc = tsc;
	o.outdir = dir;
	o.max_insns = max_insns;
	o.quiet_target = true;
	r = ptd_swpt_run(argv, &o, NULL, &diag);
	if (r < 0)
		fprintf(stderr, "capture of %s: %s\n", prog, diag.msg);
	return r == 0;
}

/* Trace bytes of capture @dir's first thread. */
/* Whether capture @dir's threads are decoded at once with @jobs
 * (decode/threadpar.h): the rule reads their sizes, which depend on where
 * the run put them -- prog-threads' main thread was 8.1 KiB of trace on
 * one machine and 8.4 on another, either side of 2 jobs' 8 KiB. */
static bool threads_at_once(const char *dir, unsigned jobs)
{
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	struct ptd_decode_opts o;
	uint64_t bytes[8];
	bool fits;

	REQUIRE_OR_FALSE(ptd_capture_load(dir, &c, &diag) == 0);
	for (size_t i = 0; i < c.nthreads && i < 8; i++)
		bytes[i] = c.threads[i].pt_bytes;
	memset(&o, 0, sizeof(o));
	o.jobs = jobs;
	o.path = PTD_PATH_INSN;
	o.want = PTD_REC_BIT(PTD_REC_INSN);
	fits = c.nthreads <= 8 && ptd_threadpar_fits(&o, bytes, c.nthreads);
	ptd_capture_fini(&c);
	return fits;
}

static size_t capture_pt_bytes(const char *dir, char *ptpath, size_t size)
{
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	struct stat st;

	REQUIRE_OR_FALSE(ptd_capture_load(dir, &c, &diag) == 0);
	(void)snprintf(ptpath, size, "%s/%s", dir, c.threads[0].pt);
	ptd_capture_fini(&c);
	return stat(ptpath, &st) == 0 ? (size_t)st.st_size : 0;
}

/* Damage capture @dir in place: every TIP before a PSB (a part's decoder
 * reaches the next part's PSB out of step) and @flips pseudo-random
 * bytes. */
static void damage_capture(const char *dir, unsigned flips)
{
	char ptpath[300];
	uint64_t x = PTDAMAGE_SEED;
	char *buf = NULL;
	size_t len = 0;

	REQUIRE(capture_pt_bytes(dir, ptpath, sizeof(ptpath)) > 1024);
	REQUIRE(ptd_file_read_all(ptpath, 1u << 30, &buf, &len) == 0);
	CHECK(ptdamage_tips_before_psbs((uint8_t *)buf, len, NULL) > 0);
	ptdamage_flip_bytes((uint8_t *)buf, len, flips, &x);
	REQUIRE(ptd_file_write_atomic(ptpath, buf, len) == 0);
	free(buf);
}

/* Replay @path with @jobs (0: no "jobs" key) and read its records into
 * @got; the response names the path and jobs; *@status: the session's
 * status once it ended. */
static void replay_jobs(const char *path, unsigned jobs, struct lines *got,
			cJSON **status)
{
	struct client c;
	char req[600], opt[32] = "";
	const cJSON *res;
	uint64_t lost = 0;
	cJSON *r, *bye;
	double id;

	*status = NULL;
	if (jobs)
		(void)snprintf(opt, sizeof(opt), ",\"jobs\":%u", jobs);
	REQUIRE(cl_open(&c));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\"%s}", path,
		       opt);
	r = cl_call(&c, req);
	REQUIRE(resp_ok(r));
	res = cJSON_GetObjectItemCaseSensitive(r, "result");
	CHECK_EQ_STR(cJSON_GetStringValue(
			     cJSON_GetObjectItemCaseSensitive(res, "decoder")),
		     jobs ? "insn" : "block");
	CHECK_EQ_INT(num(res, "jobs"), jobs ? (int)jobs : -1);
	id = res_num(r, "session");
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"subscribe\",\"session\":%.0f}", id);
	r = cl_call(&c, req);
	CHECK(resp_ok(r));
	cJSON_Delete(r);
	bye = read_stream(&c, got, &lost, false, NULL);
	REQUIRE(bye);
	CHECK_EQ_STR(cJSON_GetStringValue(
			     cJSON_GetObjectItemCaseSensitive(bye, "reason")),
		     "exited");
	CHECK_EQ_U64(lost, 0);
	cJSON_Delete(bye);
	cl_close(&c);
	/* an ended session lingers (PTD_SERVER_LINGER_MS); the stream's
	 * connection is the stream's: another one asks */
	REQUIRE(cl_open(&c));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":3,\"cmd\":\"status\",\"session\":%.0f}", id);
	r = cl_call(&c, req);
	CHECK(resp_ok(r));
	*status = cJSON_DetachItemFromObjectCaseSensitive(r, "result");
	cJSON_Delete(r);
	cl_close(&c);
}

/* The lines of @a and @b without the time fields of their records. */
static bool same_but_time(const struct lines *a, const struct lines *b)
{
	static const char *const keys[] = { ",\"tsc\":\"", ",\"time\":\"",
					    ",\"wall\":\"" };

	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		char *x[2] = { strdup(a->l[i]), strdup(b->l[i]) };
		bool same;

		for (int j = 0; j < 2; j++)
			for (size_t k = 0; k < 3; k++) {
				char *p = strstr(x[j], keys[k]), *q;

				if (p && (q = strchr(p + strlen(keys[k]), '"')))
					memmove(p, q + 1, strlen(q + 1) + 1);
			}
		same = !strcmp(x[0], x[1]);
		free(x[0]);
		free(x[1]);
		if (!same)
			return false;
	}
	return true;
}

/*
 * A replay with "jobs" decodes on the instruction path, each thread's
 * trace cut into parts decoded on that many threads (or, a trace mostly
 * of short threads, its threads decoded at once): subscribers get the
 * same bytes for jobs 1, 2 and 4 -- on clean captures of a single- and a
 * multi-threaded program, a timed one, and damaged ones (errors and
 * resynchronizations across part boundaries).  Without "jobs" the replay
 * decodes on the block path: the same bytes on the clean untimed
 * captures; on the timed one the same records but for the time of some
 * insn records (the block path gives each its block's); on the damaged
 * ones the records around errors differ (the two paths' ptctl decode
 * differ there too).  status says the jobs and, where the parallel
 * decoder fell back to the serial one, how many parts and why.
 */
static void test_replay_jobs(void)
{
	static const struct {
		const char *name, *prog, *arg;
		bool tsc;
		unsigned damage;	/* 0: clean; else flips + 1 */
	} caps[] = {
		{ "jobs-loop", "prog-loop", "1", false, 0 },
		{ "jobs-threads", "prog-threads", NULL, false, 0 },
		{ "jobs-tsc", "prog-recursion", NULL, true, 0 },
		{ "jobs-damaged", "prog-loop", "1", false, 1 },
		{ "jobs-damaged30", "prog-recursion", NULL, false, 31 },
	};
	unsigned parallel_clean = 0, fell_back = 0;

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct lines base = { 0 }, block = { 0 };
		char dir[256], ptpath[300];
		cJSON *st;

		(void)snprintf(dir, sizeof(dir), "%s/%s", workdir,
			       caps[i].name);
		REQUIRE(capture_prog(dir, caps[i].prog, caps[i].arg, 256,
				     caps[i].tsc, 200000));
		/* big enough to be cut into parts (parallel.c: 4 KiB and
		 * more each) */
		CHECK(capture_pt_bytes(dir, ptpath, sizeof(ptpath)) > 6000);
		if (caps[i].damage)
			damage_capture(dir, caps[i].damage - 1);
		replay_jobs(dir, 1, &base, &st);
		REQUIRE(base.n > 10000);
		CHECK_EQ_INT(num(st, "jobs"), 1);
		cJSON_Delete(st);
		for (unsigned jobs = 2; jobs <= 4; jobs += 2) {
			struct lines got = { 0 };

			const char *why;

			replay_jobs(dir, jobs, &got, &st);
			why = cJSON_GetStringValue(
				cJSON_GetObjectItemCaseSensitive(st,
								 "serial_why"));
			fprintf(stderr, "%s, jobs %u: %zu records, %.0f parts, "
					"%.0f serial (%s)\n",
				caps[i].name, jobs, got.n, num(st, "parts"),
				num(st, "serial_parts"), why ? why : "-");
			compare_lines(&got, &base);
			CHECK_EQ_INT(num(st, "jobs"), jobs);
			CHECK(num(st, "serial_parts") >= 0);
			/* prog-threads: its three threads are short, so
			 * decoded at once (decode/threadpar.h), not cut,
			 * with 4 jobs at least (the main thread is short
			 * of 16 KiB of trace) */
			if (!strcmp(caps[i].prog, "prog-threads"))
				CHECK(jobs < 4 || threads_at_once(dir, jobs));
			if (threads_at_once(dir, jobs)) {
				CHECK_EQ_INT(num(st, "threads_at_once"), 3);
				CHECK_EQ_INT(num(st, "parts"), 0);
			} else {
				CHECK_EQ_INT(num(st, "threads_at_once"), 0);
				CHECK(num(st, "parts") >= 2);
			}
			if (!caps[i].damage && num(st, "serial_parts") == 0)
				parallel_clean++;
			if (num(st, "serial_parts") > 0) {
				fell_back++;
				CHECK(why != NULL);
			}
			cJSON_Delete(st);
			lines_free(&got);
		}
		replay_jobs(dir, 0, &block, &st);
		CHECK_EQ_INT(num(st, "jobs"), -1);
		CHECK_EQ_INT(num(st, "serial_parts"), -1);
		cJSON_Delete(st);
		if (!caps[i].tsc && !caps[i].damage)
			compare_lines(&block, &base);
		if (caps[i].tsc) {
			size_t differ = 0;

			CHECK(same_but_time(&block, &base));
			for (size_t k = 0; k < block.n && k < base.n; k++)
				differ += strcmp(block.l[k], base.l[k]) != 0;
			/* (the paths do differ there: else the test of the
			 * timed capture proves nothing about the time) */
			fprintf(stderr, "%s: %zu records' time differs "
					"between the paths\n",
				caps[i].name, differ);
			CHECK(differ > 0);
		}
		lines_free(&block);
		lines_free(&base);
	}
	/* the clean captures really were decoded in parallel */
	CHECK_EQ_INT(parallel_clean, 6);
	fprintf(stderr, "replays that fell back to the serial decoder: %u\n",
		fell_back);
}

/* "jobs" over max_decode_jobs (default 4) is refused by name; a bad
 * value is refused by the protocol (test-proto has them all). */
static void test_replay_jobs_refused(void)
{
	static const struct {
		const char *v, *msg;
	} bad[] = {
		{ "5", "jobs: 5 is more than this ptd allows "
		       "(max_decode_jobs = 4)" },
		{ "64", "(max_decode_jobs = 4)" },
		{ "0", "jobs: 0 out of range" },
		{ "65", "jobs: 65 out of range" },
		{ "-1", "jobs: expected a non-negative integer" },
		{ "\"2\"", "jobs: expected an integer" },
	};
	struct client c;
	char req[600];

	REQUIRE(cl_open(&c));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *r;

		(void)snprintf(req, sizeof(req),
			       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\","
			       "\"jobs\":%s}", capdir, bad[i].v);
		r = cl_call(&c, req);
		REQUIRE(r);
		CHECK(!resp_ok(r));
		CHECK_EQ_STR(err_field(r, "code"), "bad_request");
		CHECK_CONTAINS(err_field(r, "message"), bad[i].msg);
		cJSON_Delete(r);
	}
	cl_close(&c);
}

/* ---- record ---- */

static pid_t spawn_attach_target(void)
{
	char prog[512];
	pid_t pid;
	int p[2];
	char b[8];

	(void)snprintf(prog, sizeof(prog), "%s/prog-attach", progs_dir);
	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		(void)dup2(p[1], 3);
		(void)dup2(devnull, 1);
		execl(prog, prog, "20", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	/* "ready\n" once its threads run */
	(void)read(p[0], b, sizeof(b));
	close(p[0]);
	return pid;
}

/* The insn lines of thread @tid, in order, without their "isid" (a
 * session's section cache is shared by its threads, so its numbers differ
 * from a fresh decode's; module and offset say the same). */
static void insns_of(const struct lines *ls, long tid, struct lines *ret)
{
	char key[32];

	(void)snprintf(key, sizeof(key), "\"tid\":%ld,", tid);
	for (size_t i = 0; i < ls->n; i++) {
		char *l, *is, *end;

		if (!is_type(ls->l[i], "insn") || !strstr(ls->l[i], key))
			continue;
		l = strdup(ls->l[i]);
		if (l && (is = strstr(l, "\"isid\":")) &&
		    (end = strchr(is, ',')))
			memmove(is, end + 1, strlen(end + 1) + 1);
		lines_add(ret, l);
	}
}

/* Each thread's insn records, line for line (time and wall included),
 * in @a (the live stream) and @b (the bundle's decode). */
static void same_threads(const struct lines *a, const struct lines *b)
{
	long tids[64];
	size_t nt = 0, total = 0, timed = 0;

	for (size_t i = 0; i < b->n; i++) {
		const char *t = strstr(b->l[i], "\"tid\":");
		long tid;
		size_t k;

		if (!is_type(b->l[i], "insn") || !t)
			continue;
		tid = strtol(t + 6, NULL, 10);
		for (k = 0; k < nt && tids[k] != tid; k++)
			;
		if (k == nt && nt < 64)
			tids[nt++] = tid;
	}
	CHECK(nt > 0);
	for (size_t k = 0; k < nt; k++) {
		struct lines la = { 0 }, lb = { 0 };

		insns_of(a, tids[k], &la);
		insns_of(b, tids[k], &lb);
		CHECK_EQ_U64(la.n, lb.n);
		for (size_t i = 0; i < la.n && i < lb.n; i++) {
			if (strcmp(la.l[i], lb.l[i])) {
				CHECK_FAIL_("thread %ld, insn %zu:\n  live   "
					    "%s\n  bundle %s", tids[k], i,
					    la.l[i], lb.l[i]);
				break;
			}
			timed += strstr(la.l[i], "\"wall\":") != NULL;
		}
		total += lb.n;
		lines_free(&la);
		lines_free(&lb);
	}
	fprintf(stderr, "  %zu threads, %zu insn records alike, %zu with "
		"time and wall\n", nt, total, timed);
	CHECK(total > 1000);
	CHECK_EQ_U64(timed, total);	/* every PSB+ has a TSC */
}

/* Session @id's record_state in a status response ("" if none). */
static const char *status_record_state(struct client *c, double id)
{
	static char state[32];
	char req[100];
	cJSON *r;
	const char *v;

	(void)snprintf(req, sizeof(req),
		       "{\"id\":9,\"cmd\":\"status\",\"session\":%.0f}", id);
	r = cl_call(c, req);
	v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(r, "result"),
		"record_state"));
	(void)snprintf(state, sizeof(state), "%s", v ? v : "");
	cJSON_Delete(r);
	return state;
}

static void test_record_round_trip(void)
{
	struct ptd_input_opts io;
	struct lines live = { 0 }, off = { 0 };
	struct ptd_input_sink sink = { NULL, add_json, NULL, &off };
	struct ptd_diag diag = { "" };
	struct ptd_bundle bun;
	struct client c, s;
	char req[600], dir[300];
	uint64_t lost = 0;
	size_t terr = 0;
	cJSON *r, *bye;
	double id;
	pid_t target;
	int dfd, status;

	target = spawn_attach_target();
	REQUIRE(target > 0);
	REQUIRE(cl_open(&c));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"attach\",\"pid\":%ld,"
		       "\"wait_ms\":60000,\"options\":"
		       "{\"record\":true,\"tsc\":true,"
		       "\"max_insns\":10000}}",
		       (long)target);
	r = cl_call(&c, req);
	if (!resp_ok(r))
		fprintf(stderr, "attach: %s\n", err_field(r, "message"));
	REQUIRE(resp_ok(r));
	id = res_num(r, "session");
	cJSON_Delete(r);
	REQUIRE(cl_open(&s));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"subscribe\",\"session\":%.0f}", id);
	r = cl_call(&s, req);
	CHECK(resp_ok(r));
	cJSON_Delete(r);

	/* refusals first: no fd, a file, a non-empty directory */
	(void)snprintf(req, sizeof(req),
		       "{\"id\":3,\"cmd\":\"record\",\"session\":%.0f}", id);
	r = cl_call(&c, req);
	CHECK_EQ_STR(err_field(r, "code"), "bad_request");
	CHECK_CONTAINS(err_field(r, "message"), "SCM_RIGHTS");
	cJSON_Delete(r);
	dfd = open(capdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = cl_call_fd(&c, req, dfd);
	CHECK_EQ_STR(err_field(r, "code"), "bad_directory");
	CHECK_CONTAINS(err_field(r, "message"), "not empty");
	cJSON_Delete(r);
	close(dfd);
	(void)snprintf(dir, sizeof(dir), "%s/cap/capture.json", workdir);
	dfd = open(dir, O_RDONLY | O_CLOEXEC);
	r = cl_call_fd(&c, req, dfd);
	CHECK_EQ_STR(err_field(r, "code"), "bad_directory");
	CHECK_CONTAINS(err_field(r, "message"), "not a directory");
	cJSON_Delete(r);
	close(dfd);

	/* the live stream to its end (max_insns) */
	bye = read_stream(&s, &live, &lost, false, NULL);
	REQUIRE(bye);
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			     bye, "reason")),
		     "limit");
	CHECK_EQ_U64(lost, 0);
	cJSON_Delete(bye);
	/* status tells its owner how the record went: not asked yet */
	CHECK_EQ_STR(status_record_state(&c, id), "not_asked");
	/* the real one, after the end: the bundle is written at once and
	 * the response comes when it is */
	(void)snprintf(dir, sizeof(dir), "%s/bundle", workdir);
	REQUIRE(mkdir(dir, 0700) == 0);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = cl_call_fd(&c, req, dfd);
	close(dfd);
	CHECK(resp_ok(r));
	if (!resp_ok(r))
		fprintf(stderr, "record: %s\n", err_field(r, "message"));
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			     cJSON_GetObjectItemCaseSensitive(r, "result"),
			     "state")),
		     "written");
	cJSON_Delete(r);
	/* a second record of the same session is refused */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = cl_call_fd(&c, req, dfd);
	CHECK(!resp_ok(r));
	cJSON_Delete(r);
	close(dfd);
	CHECK_EQ_STR(status_record_state(&c, id), "written");
	cl_close(&s);
	cl_close(&c);

	memset(&bun, 0, sizeof(bun));
	CHECK_EQ_INT(ptd_bundle_load(dir, &bun, &diag), 0);
	if (diag.msg[0])
		fprintf(stderr, "bundle: %s\n", diag.msg);
	ptd_bundle_fini(&bun);
	memset(&io, 0, sizeof(io));
	/* the live stream's path: block records' time is per block */
	io.decode.path = PTD_PATH_BLOCK;
	io.decode.want = PTD_REC_BIT(PTD_REC_INSN) |
			 PTD_REC_BIT(PTD_REC_EVENT) |
			 PTD_REC_BIT(PTD_REC_ERROR);
	CHECK_EQ_INT(ptd_bundle_decode(dir, &io, &sink, &terr, &diag), 0);
	CHECK_EQ_U64(terr, 0);
	/* the same records, thread by thread in the bundle, mixed in the
	 * live stream; the bundle keeps the live buffers' clock */
	same_threads(&live, &off);
	lines_free(&live);
	lines_free(&off);
	(void)kill(target, SIGKILL);
	(void)waitpid(target, &status, 0);
}

/* A session not attached with record (a replay here) is refused, and
 * so are unknown sessions and a bad "wait". */
static void test_record_not_recording(void)
{
	struct client c;
	char req[300];
	cJSON *r;
	int dfd;

	REQUIRE(cl_open(&c));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\","
		       "\"wait_ms\":0}", capdir);
	r = cl_call(&c, req);
	REQUIRE(resp_ok(r));
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"record\",\"session\":%.0f}",
		       res_num(r, "session"));
	cJSON_Delete(r);
	dfd = open(workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = cl_call_fd(&c, req, dfd);
	close(dfd);
	CHECK_EQ_STR(err_field(r, "code"), "not_recording");
	CHECK_CONTAINS(err_field(r, "message"), "not attached with record");
	cJSON_Delete(r);
	check_refused("{\"id\":1,\"cmd\":\"record\",\"session\":999}",
		      "no_such_session", "999");
	check_refused("{\"id\":1,\"cmd\":\"record\",\"session\":1,"
		      "\"wait\":3}", "bad_request", "wait");
	check_refused("{\"id\":1,\"cmd\":\"attach\",\"pid\":1,"
		      "\"options\":{\"record\":true,\"source\":"
		      "\"intel_pt\"}}", "unsupported", "software source");
	cl_close(&c);
}

/* A record's thread (ptd_cred_become_writer): reads what only ptd may
 * read, creates files only where the client may, and they are the
 * client's.  A replay's (ptd_cred_become_reader) reads nothing ptd's own. */
struct become_args {
	bool writer;
	int read_err, create_root_err, create_own_err;
	uid_t own_uid;
	bool dac_override, dac_read;	/* effective after (ptd_cred_has_cap) */
};

static void *become_main(void *arg)
{
	struct become_args *a = arg;
	struct ptd_cred c = { 65534, 65534, NULL, 0 };
	struct ptd_diag diag = { "" };
	char path[PATH_MAX];
	struct stat st;
	int fd, r;

	r = a->writer ? ptd_cred_become_writer(&c, &diag)
		      : ptd_cred_become_reader(&c, &diag);
	if (r < 0) {
		fprintf(stderr, "become: %s\n", diag.msg);
		a->read_err = a->create_root_err = a->create_own_err = r;
		return NULL;
	}
	a->dac_override = ptd_cred_has_cap(CAP_DAC_OVERRIDE);
	a->dac_read = ptd_cred_has_cap(CAP_DAC_READ_SEARCH);
	(void)snprintf(path, sizeof(path), "%s/become/secret", workdir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	a->read_err = fd < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	(void)snprintf(path, sizeof(path), "%s/become/new-%d", workdir,
		       a->writer);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	a->create_root_err = fd < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	(void)snprintf(path, sizeof(path), "%s/become/client/f-%d", workdir,
		       a->writer);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	a->create_own_err = fd < 0 ? -errno : 0;
	if (fd >= 0 && fstat(fd, &st) == 0)
		a->own_uid = st.st_uid;
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void test_become_writer(void)
{
	struct become_args w = { .writer = true }, rd = { .writer = false };
	char path[PATH_MAX];
	pthread_t th;

	if (geteuid() != 0) {
		printf("  skipped: taking another uid needs root\n");
		return;
	}
	(void)snprintf(path, sizeof(path), "%s/become", workdir);
	CHECK(mkdir(path, 0755) == 0);
	(void)snprintf(path, sizeof(path), "%s/become/secret", workdir);
	CHECK(ptd_file_write_atomic(path, "x", 1) == 0);
	CHECK(chmod(path, 0600) == 0);
	(void)snprintf(path, sizeof(path), "%s/become/client", workdir);
	CHECK(mkdir(path, 0755) == 0);
	CHECK(chown(path, 65534, 65534) == 0);

	CHECK(pthread_create(&th, NULL, become_main, &w) == 0);
	CHECK(pthread_join(th, NULL) == 0);
	CHECK_EQ_INT(w.read_err, 0);		/* ptd's read rights kept */
	CHECK_EQ_INT(w.create_root_err, -EACCES); /* not where ptd may */
	CHECK_EQ_INT(w.create_own_err, 0);	/* where the client may */
	CHECK_EQ_INT((int)w.own_uid, 65534);	/* and it is the client's */
	CHECK(!w.dac_override && w.dac_read);	/* as its capabilities say */

	CHECK(pthread_create(&th, NULL, become_main, &rd) == 0);
	CHECK(pthread_join(th, NULL) == 0);
	CHECK_EQ_INT(rd.read_err, -EACCES);	/* a replay reads as the client */
	CHECK_EQ_INT(rd.create_root_err, -EACCES);
	CHECK(!rd.dac_override && !rd.dac_read);
	/* the main thread kept its own credentials */
	CHECK_EQ_INT((int)setfsuid((uid_t)-1), 0);
	CHECK(ptd_cred_has_cap(CAP_DAC_OVERRIDE) &&
	      ptd_cred_has_cap(CAP_DAC_READ_SEARCH));
	CHECK(!ptd_cred_has_cap(-1) && !ptd_cred_has_cap(64));
}

int main(void)
{
	char tmpl[] = "/tmp/ptd-replay-test-XXXXXX";

	progs_dir = getenv("PTD_TEST_PROGS");
	if (!progs_dir)
		SKIP_ALL("PTD_TEST_PROGS is not set");
	if (!mkdtemp(tmpl))
		SKIP_ALL("mkdtemp: %s", strerror(errno));
	(void)snprintf(workdir, sizeof(workdir), "%s", tmpl);
	(void)snprintf(sock, sizeof(sock), "%s/run/ptd.sock", workdir);
	if (!make_capture())
		SKIP_ALL("cannot trace %s/prog-loop with the software source "
			 "(ptrace refused?)", progs_dir);
	/* a queue of 4 records' worth: a slow reader fills it */
	if (!server_start(4 * PTD_JSON_MAX_RECORD)) {
		fprintf(stderr, "the server did not start\n");
		return 1;
	}
	RUN(test_become_writer);
	RUN(test_replay_equals_decode);
	RUN(test_lossless_vs_lossy);
	RUN(test_default_lossless);
	RUN(test_replay_calls_join);
	RUN(test_replay_refusals);
	RUN(test_replay_slow_input);
	RUN(test_replay_stop_verifying);
	RUN(test_replay_notice);
	RUN(test_replay_list_detach);
	RUN(test_wait_drain);
	RUN(test_wait_subscriber_left);
	RUN(test_wait_nobody);
	RUN(test_wait_stopped);
	RUN(test_wait_stalled);
	RUN(test_hostile_fifo);
	RUN(test_hostile_truncated);
	RUN(test_hostile_replaced);
	RUN(test_hostile_mid_read);
	server_stop();
	/* live sessions drop what a queue cannot take: a roomy one */
	if (!server_start(4u << 20)) {
		fprintf(stderr, "the server did not start\n");
		return 1;
	}
	RUN(test_record_not_recording);
	RUN(test_record_round_trip);
	RUN(test_replay_jobs_refused);
	RUN(test_replay_jobs);
	server_stop();
	if (!check_failures)
		(void)ptd_rm_rf(workdir);
	return check_done();
}
