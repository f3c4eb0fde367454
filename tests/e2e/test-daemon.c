/* SPDX-License-Identifier: MIT */
/*
 * The daemon end to end: build/daemon/ptd started with a config in a temp
 * dir, real clients on its socket, real processes traced (the software PT
 * source where the CPU has no Intel PT).
 *
 * Targets are started blocked: `sh -c 'read x; exec prog-attach N'` waits
 * on a pipe, so attach and every subscription happen before the target
 * runs a single instruction of interest; then one newline releases it.
 * That makes every subscriber's window the same, and streams comparable
 * record for record.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "e2e/daemon-harness.h"
#include "e2e/daemon-client.h"
#include "e2e/subscribed.h"
#include "unit/fieldcmp.h"
#include "target.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "swpt/capture.h"

/* Run ptd with @args (NULL-terminated after argv[0]); return its exit
 * status and its stdout+stderr in @out. */
static int run_ptd(char *const argv[], char *out, size_t cap)
{
	int p[2], st;
	pid_t pid;
	size_t len = 0;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	while (len + 1 < cap && (n = read(p[0], out + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = 0;
	close(p[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Attach to @pid; returns the session id, or SKIPs when tracing is not
 * possible here (dc_attach). */
static long attach(struct daemon *d, pid_t pid)
{
	cJSON *r = NULL;
	long id = dc_attach(d, pid, &r);

	if (id < 0) {
		CHECK_FAIL_("attach %ld failed: %s: %s", (long)pid,
			    r ? dc_err_code(r) : "no response",
			    r ? dc_err_msg(r) : "");
		cJSON_Delete(r);
	}
	return id;
}

/* A subscriber: its connection and everything it received. */
struct sub {
	struct dconn *c;
	unsigned delay_ms;	/* do not read for this long */
	unsigned nap_every, nap_ms;	/* then sleep nap_ms every nap_every
					 * lines (0: never) */
	char **lines;
	size_t n, cap;
	atomic_size_t seen;	/* lines read so far (any thread) */
	pthread_t th;
	bool running;
};

static struct sub *subscribe(struct daemon *d, long session,
			     const char *extra)
{
	char req[1024];
	struct sub *s = calloc(1, sizeof(*s));
	cJSON *r;

	s->c = dc_connect(d);
	if (!s->c) {
		free(s);
		return NULL;
	}
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"subscribe\",\"session\":%ld%s}\n",
		       session, extra);
	r = dc_call(s->c, req);
	if (!dc_ok(r)) {
		CHECK_FAIL_("subscribe %s: %s: %s", req,
			    r ? dc_err_code(r) : "no response",
			    r ? dc_err_msg(r) : "");
		cJSON_Delete(r);
		dc_close(s->c);
		free(s);
		return NULL;
	}
	cJSON_Delete(r);
	return s;
}

static void *sub_main(void *arg)
{
	struct sub *s = arg;
	char *line;

	msleep(s->delay_ms);
	while ((line = dc_read_line(s->c, 60000))) {
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 1024;
			s->lines = realloc(s->lines, s->cap * sizeof(char *));
		}
		s->lines[s->n++] = line;
		atomic_store(&s->seen, s->n);
		if (s->nap_every && s->n % s->nap_every == 0)
			msleep(s->nap_ms);
	}
	return NULL;
}

static void sub_start(struct sub *s)
{
	s->running = pthread_create(&s->th, NULL, sub_main, s) == 0;
}

static void sub_join(struct sub *s)
{
	if (s->running)
		pthread_join(s->th, NULL);
	s->running = false;
}

static void sub_free(struct sub *s)
{
	size_t i;

	if (!s)
		return;
	sub_join(s);
	for (i = 0; i < s->n; i++)
		free(s->lines[i]);
	free(s->lines);
	dc_close(s->c);
	free(s);
}

/* The bye record (parsed), after checking hello is first and bye last. */
static cJSON *check_framing(const struct sub *s, const char *who)
{
	if (s->n < 2) {
		CHECK_FAIL_("%s: %zu lines, expected hello ... bye", who, s->n);
		return NULL;
	}
	if (!is_type(s->lines[0], "hello"))
		CHECK_FAIL_("%s: first line is not hello: %.200s", who,
			    s->lines[0]);
	if (!is_type(s->lines[s->n - 1], "bye")) {
		CHECK_FAIL_("%s: last line is not bye: %.200s", who,
			    s->lines[s->n - 1]);
		return NULL;
	}
	for (size_t i = 1; i + 1 < s->n; i++)
		if (is_type(s->lines[i], "hello") || is_type(s->lines[i], "bye"))
			CHECK_FAIL_("%s: hello/bye in the middle (line %zu)",
				    who, i);
	return cJSON_Parse(s->lines[s->n - 1]);
}

static const char *bye_reason(const cJSON *bye)
{
	const cJSON *r = cJSON_GetObjectItem(bye, "reason");

	return cJSON_IsString(r) ? r->valuestring : "(none)";
}

static double json_num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Count the records of a stream (not hello, lost, bye) and the sum of its
 * lost records. */
static void count_stream(const struct sub *s, uint64_t *records,
			 uint64_t *lost)
{
	*records = *lost = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (is_type(s->lines[i], "lost")) {
			cJSON *o = cJSON_Parse(s->lines[i]);

			*lost += (uint64_t)json_num(o, "records");
			cJSON_Delete(o);
		} else if (!is_type(s->lines[i], "hello") &&
			   !is_type(s->lines[i], "bye")) {
			(*records)++;
		}
	}
}

static unsigned count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;

	(void)snprintf(path, sizeof(path), "/proc/%ld/fd", (long)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* ---- tests ---- */

static void test_check_config(void)
{
	char ptd[1100], good[600], bad[600], missing[600], out[4096];
	int st;

	(void)snprintf(ptd, sizeof(ptd), "%s/daemon/ptd", build_root);
	(void)snprintf(good, sizeof(good), "%s/good.conf", tmpdir);
	(void)snprintf(bad, sizeof(bad), "%s/bad.conf", tmpdir);
	(void)snprintf(missing, sizeof(missing), "%s/missing.conf", tmpdir);
	REQUIRE(write_file(good, "# fine\nmax_connections = 5\n") == 0);
	REQUIRE(write_file(bad, "max_connections = 5\nfrobnicate = yes\n") ==
		0);
	st = run_ptd((char *[]){ ptd, "-c", good, "--check-config", NULL },
		     out, sizeof(out));
	CHECK_EQ_INT(st, 0);
	CHECK_CONTAINS(out, "ok");
	st = run_ptd((char *[]){ ptd, "-c", bad, "--check-config", NULL }, out,
		     sizeof(out));
	CHECK_EQ_INT(st, 1);
	CHECK_CONTAINS(out, "bad.conf:2");
	st = run_ptd((char *[]){ ptd, "-c", missing, "--check-config", NULL },
		     out, sizeof(out));
	CHECK_EQ_INT(st, 1);
	CHECK_CONTAINS(out, "missing.conf");
	st = run_ptd((char *[]){ ptd, "--bogus", NULL }, out, sizeof(out));
	CHECK_EQ_INT(st, 1);
}

/* Every bad request is answered with an error naming the problem; the
 * connection stays usable; the daemon survives. */
static void test_bad_requests(void)
{
	static const struct {
		const char *line;
		const char *code;
		const char *msg;
	} cases[] = {
		{ "not json\n", "bad_request", "not valid JSON" },
		{ "[1]\n", "bad_request", "JSON object" },
		{ "{\"cmd\":\"ping\"}\n", "bad_request", "id: missing" },
		{ "{\"id\":1}\n", "bad_request", "cmd: missing" },
		{ "{\"id\":1,\"cmd\":3}\n", "bad_request",
		  "cmd: expected a string" },
		{ "{\"id\":1,\"cmd\":\"dance\"}\n", "unknown_command",
		  "dance" },
		{ "{\"id\":1,\"cmd\":\"attach\",\"pid\":-1}\n", "bad_request",
		  "attach: pid: " },
		{ "{\"id\":1,\"cmd\":\"attach\",\"pid\":999999}\n",
		  "no_such_process", "" },
		{ "{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":"
		  "{\"sauce\":1}}\n",
		  "bad_request", "sauce" },
		{ "{\"id\":1,\"cmd\":\"subscribe\",\"session\":12345}\n",
		  "no_such_session", "" },
		{ "{\"id\":1,\"cmd\":\"detach\",\"session\":12345}\n",
		  "no_such_session", "" },
		{ "{\"id\":1,\"cmd\":\"status\",\"session\":12345}\n",
		  "no_such_session", "" },
		{ "{\"id\":1,\"cmd\":\"subscribe\",\"session\":1,\"filter\":"
		  "{\"ranges\":[[\"0xg\",\"0x1\"]]}}\n",
		  "bad_request", "filter.ranges[0][0]" },
		{ "{\"id\":1,\"cmd\":\"subscribe\",\"session\":1,\"fields\":"
		  "[\"ip\",\"tid\",\"adress\"]}\n",
		  "bad_request", "subscribe: fields[2]: unknown field \"adress\" "
		  "(fields: type, pid, tid, ip, " },
		{ "{\"id\":1,\"cmd\":\"subscribe\",\"session\":1,\"fields\":"
		  "[\"ip\",\"ip\"]}\n",
		  "bad_request", "subscribe: fields[1]: \"ip\" given twice" },
		{ "\n", "bad_request", "not valid JSON" },
	};
	struct daemon d;
	struct dconn *c;
	cJSON *r;
	size_t i;

	REQUIRE(daemon_start(&d, "bad", "max_request_size = 1k\n"));
	c = dc_connect(&d);
	REQUIRE(c);
	for (i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
		r = dc_call(c, cases[i].line);
		if (!r) {
			CHECK_FAIL_("no response to %s", cases[i].line);
			break;
		}
		if (dc_ok(r) || strcmp(dc_err_code(r), cases[i].code) ||
		    !strstr(dc_err_msg(r), cases[i].msg))
			CHECK_FAIL_("%s: expected %s (\"%s\"), got %s: %s",
				    cases[i].line, cases[i].code, cases[i].msg,
				    dc_err_code(r), dc_err_msg(r));
		cJSON_Delete(r);
	}
	/* The same connection still works; the id is echoed. */
	r = dc_call(c, "{\"id\":\"still-here\",\"cmd\":\"ping\"}\n");
	CHECK(dc_ok(r));
	CHECK_EQ_STR(cJSON_GetObjectItem(r, "id")->valuestring, "still-here");
	cJSON_Delete(r);
	r = dc_call(c, "{\"id\":2,\"cmd\":\"version\"}\n");
	CHECK(dc_ok(r));
	CHECK_EQ_INT(dc_num(r, "protocol"), 1);
	cJSON_Delete(r);

	/* An oversized line: too_long, then the connection is closed. */
	char big[2100];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	r = dc_call(c, big);
	CHECK(r && !strcmp(dc_err_code(r), "too_long"));
	cJSON_Delete(r);
	char *eof = dc_read_line(c, 5000);

	CHECK(eof == NULL);
	free(eof);
	dc_close(c);

	/* A client that vanishes mid-line costs nothing. */
	c = dc_connect(&d);
	REQUIRE(c);
	dc_send(c, "{\"id\":1,\"cmd\":\"pi");
	dc_close(c);
	c = dc_connect(&d);
	REQUIRE(c);
	r = dc_call(c, "{\"id\":3,\"cmd\":\"ping\"}\n");
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	dc_close(c);
	CHECK_EQ_INT(daemon_stop(&d), 0);
	/* ptd removed the socket it created. */
	CHECK(access(d.sock, F_OK) < 0);
}

static void test_max_connections(void)
{
	struct dconn *cs[4];
	struct daemon d;
	struct dconn *extra;
	cJSON *r;
	int i;

	REQUIRE(daemon_start(&d, "maxconn", "max_connections = 4\n"));
	for (i = 0; i < 4; i++) {
		cs[i] = dc_connect(&d);
		REQUIRE(cs[i]);
		/* A round trip: the daemon has accepted this one. */
		r = dc_call(cs[i], "{\"id\":1,\"cmd\":\"ping\"}\n");
		CHECK(dc_ok(r));
		cJSON_Delete(r);
	}
	extra = dc_connect(&d);
	REQUIRE(extra);
	char *line = dc_read_line(extra, 5000);
	r = line ? cJSON_Parse(line) : NULL;

	CHECK(r && !strcmp(dc_err_code(r), "limit"));
	cJSON_Delete(r);
	free(line);
	line = dc_read_line(extra, 5000);
	CHECK(line == NULL);	/* closed */
	free(line);
	dc_close(extra);
	for (i = 0; i < 4; i++)
		dc_close(cs[i]);
	msleep(100);
	extra = dc_connect(&d);
	REQUIRE(extra);
	r = dc_call(extra, "{\"id\":1,\"cmd\":\"ping\"}\n");
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	dc_close(extra);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* max_sessions_per_user: a uid's second session (attach or replay) is
 * refused with "limit" naming the setting, and allowed again once the first
 * has ended. */
static void test_max_sessions(void)
{
	struct daemon d;
	struct dconn *c;
	char req[160];
	cJSON *r = NULL;
	long sid;
	int go, go2, i;
	pid_t t, t2;

	REQUIRE(daemon_start(&d, "maxsess", "max_sessions_per_user = 1\n"));
	t = spawn_target(2, &go);
	sid = attach(&d, t);
	REQUIRE(sid > 0);
	t2 = spawn_target(0.1, &go2);
	c = dc_connect(&d);
	REQUIRE(c);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"attach\",\"pid\":%ld}\n",
		       (long)t2);
	r = dc_call(c, req);
	CHECK_EQ_STR(dc_err_code(r), "limit");
	CHECK_CONTAINS(dc_err_msg(r), "already has 1 sessions");
	CHECK_CONTAINS(dc_err_msg(r), "max_sessions_per_user");
	cJSON_Delete(r);
	/* The limit is checked before the path: a replay is refused alike. */
	r = dc_call(c, "{\"id\":2,\"cmd\":\"replay\",\"path\":\"/nonexistent\"}\n");
	CHECK_EQ_STR(dc_err_code(r), "limit");
	CHECK_CONTAINS(dc_err_msg(r), "max_sessions_per_user");
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":3,\"cmd\":\"detach\",\"session\":%ld}\n",
		       sid);
	r = dc_call(c, req);
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	/* Once the first session has ended, a new one is allowed. */
	(void)snprintf(req, sizeof(req),
		       "{\"id\":4,\"cmd\":\"attach\",\"pid\":%ld}\n",
		       (long)t2);
	for (i = 0, r = NULL; i < 500; i++) {
		cJSON_Delete(r);
		r = dc_call(c, req);
		if (!r || strcmp(dc_err_code(r), "limit"))
			break;
		msleep(10);
	}
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	dc_close(c);
	release(&go);
	release(&go2);
	CHECK_EQ_INT(wait_target(t, 60000), 0);
	CHECK_EQ_INT(wait_target(t2, 60000), 0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* Keep the insn lines of @s that satisfy @keep. */
static size_t insn_lines(const struct sub *s, bool (*keep)(const char *),
			 char ***ret)
{
	char **out = calloc(s->n + 1, sizeof(char *));
	size_t n = 0;

	for (size_t i = 0; i < s->n; i++)
		if (is_type(s->lines[i], "insn") && (!keep || keep(s->lines[i])))
			out[n++] = s->lines[i];
	*ret = out;
	return n;
}

static bool keep_call_ret(const char *l)
{
	return strstr(l, "\"iclass\":\"call\"") ||
	       strstr(l, "\"iclass\":\"return\"");
}

static pid_t main_tid;

static bool keep_main_libc(const char *l)
{
	char want[48];

	(void)snprintf(want, sizeof(want), "\"tid\":%ld,", (long)main_tid);
	return strstr(l, want) && strstr(l, "\"module\":\"") &&
	       strstr(strstr(l, "\"module\":\""), "libc");
}

static void compare_filtered(const struct sub *all, const struct sub *f,
			     bool (*keep)(const char *), const char *who)
{
	char **want, **got;
	size_t nw = insn_lines(all, keep, &want);
	size_t ng = insn_lines(f, NULL, &got);

	if (nw != ng)
		CHECK_FAIL_("%s: %zu insn records, the unfiltered stream "
			    "filtered gives %zu",
			    who, ng, nw);
	for (size_t i = 0; i < nw && i < ng; i++)
		if (strcmp(want[i], got[i])) {
			CHECK_FAIL_("%s: record %zu differs:\n  want %.200s\n"
				    "  got  %.200s",
				    who, i, want[i], got[i]);
			break;
		}
	free(want);
	free(got);
}

/* Subscribers with different filters each get exactly what their filter
 * selects; hello first, bye "exited" with the exit code last; no fd leak
 * in ptd once sessions are over. */
/*
 * Two subscribers with the same fields (ip, tid) get the same bytes, and
 * each record is the unfiltered one restricted to those fields; ptd
 * rendered every record once per field set (status "renders"), not once
 * per subscriber.  The session's other subscribers all take every field.
 */
static void check_projected(struct daemon *d, long sid, const struct sub *all,
			    const struct sub *pa, const struct sub *pb)
{
	const uint32_t fields = PTD_FIELD_BIT(PTD_FIELD_TYPE) |
				PTD_FIELD_BIT(PTD_FIELD_IP) |
				PTD_FIELD_BIT(PTD_FIELD_TID);
	uint64_t records, lost;
	size_t i, bytes_all = 0, bytes_p = 0;
	char req[128];
	cJSON *r, *subs, *o;

	cJSON_Delete(check_framing(pa, "fields a"));
	cJSON_Delete(check_framing(pb, "fields b"));
	CHECK_CONTAINS(pa->lines[0], "\"fields\":[\"type\",\"tid\",\"ip\"]");
	CHECK_EQ_U64(pa->n, pb->n);
	CHECK_EQ_U64(pa->n, all->n);
	for (i = 1; i < pa->n && i < pb->n; i++)
		if (strcmp(pa->lines[i], pb->lines[i])) {
			CHECK_FAIL_("line %zu differs between two subscribers "
				    "of the same fields:\n%s\n%s",
				    i, pa->lines[i], pb->lines[i]);
			break;
		}
	for (i = 1; i < pa->n && i < all->n; i++) {
		bytes_all += strlen(all->lines[i]);
		bytes_p += strlen(pa->lines[i]);
		if (!fieldcmp_line(all->lines[i], strlen(all->lines[i]),
				   pa->lines[i], strlen(pa->lines[i]),
				   fields)) {
			CHECK_FAIL_("line %zu is not the full one restricted",
				    i);
			break;
		}
	}
	CHECK(bytes_p * 3 < bytes_all);
	count_stream(all, &records, &lost);
	CHECK(records > 1000);
	CHECK_EQ_U64(lost, 0);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"status\",\"session\":%ld}\n",
		       sid);
	r = dc_call1(d, req);
	REQUIRE(dc_ok(r));
	o = cJSON_GetObjectItem(r, "result");
	/* every record once for every field (all, calls, main+libc) and once
	 * for ip,tid (both subscribers) */
	CHECK_EQ_U64((uint64_t)json_num(o, "renders"), 2 * records);
	subs = cJSON_GetObjectItem(o, "subscriber_list");
	CHECK(cJSON_GetArraySize(subs) == 0 ||
	      cJSON_GetArraySize(subs) == 5);
	cJSON_Delete(r);
}

static void test_filters_exit_and_fds(void)
{
	struct daemon d;
	struct sub *all, *calls, *mainlibc, *pa, *pb;
	unsigned fds0, fds1;
	cJSON *bye;
	long sid;
	int go;
	pid_t t;

	REQUIRE(daemon_start(&d, "filters",
			     "subscriber_queue_size = 512M\n"));
	msleep(100);
	fds0 = count_fds(d.pid);
	t = spawn_target(0.3, &go);
	REQUIRE(t > 0);
	main_tid = t;
	sid = attach(&d, t);
	REQUIRE(sid > 0);
	all = subscribe(&d, sid, "");
	calls = subscribe(&d, sid, ",\"kinds\":[\"insn\"],\"filter\":"
				   "{\"iclass\":[\"call\",\"return\"]}");
	char extra[256];

	(void)snprintf(extra, sizeof(extra),
		       ",\"kinds\":[\"insn\",\"event\"],\"filter\":"
		       "{\"tid\":[%ld],\"module\":\"libc\"}",
		       (long)t);
	mainlibc = subscribe(&d, sid, extra);
	pa = subscribe(&d, sid, ",\"fields\":[\"ip\",\"tid\"]");
	pb = subscribe(&d, sid, ",\"fields\":[\"tid\",\"ip\"]");
	REQUIRE(all && calls && mainlibc && pa && pb);
	sub_start(all);
	sub_start(calls);
	sub_start(mainlibc);
	sub_start(pa);
	sub_start(pb);
	release(&go);
	sub_join(all);
	sub_join(calls);
	sub_join(mainlibc);
	sub_join(pa);
	sub_join(pb);
	CHECK_EQ_INT(wait_target(t, 120000), 0);

	bye = check_framing(all, "unfiltered");
	CHECK_EQ_STR(bye_reason(bye), "exited");
	CHECK_EQ_INT(json_num(bye, "exit_code"), 0);
	CHECK_EQ_INT(json_num(bye, "lost"), 0);
	cJSON_Delete(bye);
	cJSON_Delete(check_framing(calls, "calls"));
	cJSON_Delete(check_framing(mainlibc, "main+libc"));
	char **tmp;
	size_t ninsn = insn_lines(all, NULL, &tmp);

	free(tmp);
	CHECK(ninsn > 1000);
	compare_filtered(all, calls, keep_call_ret, "iclass call,return");
	compare_filtered(all, mainlibc, keep_main_libc, "tid+module");
	check_projected(&d, sid, all, pa, pb);
	/* Records of other kinds than asked never appear. */
	for (size_t i = 0; i < calls->n; i++)
		if (is_type(calls->lines[i], "event"))
			CHECK_FAIL_("kinds [insn] got an event: %.100s",
				    calls->lines[i]);
	sub_free(all);
	sub_free(calls);
	sub_free(mainlibc);
	sub_free(pa);
	sub_free(pb);

	/* Once the subscribers are gone ptd holds what it held before (as
	 * soon as its loop has seen them go: a loaded machine may take a
	 * while). */
	for (int i = 0; i < 1000; i++) {
		fds1 = count_fds(d.pid);
		if (fds1 == fds0)
			break;
		msleep(10);
	}
	CHECK_EQ_INT(fds1, fds0);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* A slow subscriber (small queue, does not read for a while) gets lost
 * records whose counts plus what it received equal what a fast one got. */
static void test_slow_subscriber(void)
{
	struct daemon d;
	struct sub *fast, *slow;
	uint64_t fr, fl, sr, sl;
	cJSON *fb, *sb;
	long sid;
	int go;
	pid_t t;

	REQUIRE(daemon_start(&d, "slow", "subscriber_queue_size = 16k\n"));
	t = spawn_target(0.3, &go);
	sid = attach(&d, t);
	REQUIRE(sid > 0);
	fast = subscribe(&d, sid, "");
	slow = subscribe(&d, sid, "");
	REQUIRE(fast && slow);
	slow->delay_ms = 1500;
	sub_start(fast);
	sub_start(slow);
	release(&go);
	sub_join(fast);
	sub_join(slow);
	CHECK_EQ_INT(wait_target(t, 120000), 0);
	fb = check_framing(fast, "fast");
	sb = check_framing(slow, "slow");
	count_stream(fast, &fr, &fl);
	count_stream(slow, &sr, &sl);
	fprintf(stderr, "fast: %" PRIu64 " received, %" PRIu64
			" lost; slow: %" PRIu64 " received, %" PRIu64 " lost\n",
		fr, fl, sr, sl);
	CHECK(sl > 0);
	CHECK_EQ_U64(sr + sl, fr + fl);
	/* The bye tells the same counts. */
	CHECK_EQ_U64((uint64_t)json_num(sb, "sent"), sr);
	CHECK_EQ_U64((uint64_t)json_num(sb, "lost"), sl);
	CHECK_EQ_U64((uint64_t)json_num(fb, "sent"), fr);
	cJSON_Delete(fb);
	cJSON_Delete(sb);
	sub_free(fast);
	sub_free(slow);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* detach: bye "detached", the target runs on and finishes normally; when
 * the response comes, no thread of it is traced any more (a debugger may
 * attach at once). */
static void test_detach(void)
{
	struct daemon d;
	struct sub *s;
	struct dconn *c;
	char req[128];
	cJSON *r, *bye;
	long sid;
	int go;
	pid_t t;

	REQUIRE(daemon_start(&d, "detach", ""));
	t = spawn_target(2, &go);
	sid = attach(&d, t);
	REQUIRE(sid > 0);
	s = subscribe(&d, sid, "");
	REQUIRE(s);
	sub_start(s);
	release(&go);
	msleep(500);
	/* the session's decode thread and its software source's tracer,
	 * by name (top -H, perf --sort comm) */
	CHECK_EQ_INT(threads_named(d.pid, "ptd-session"), 1);
	CHECK_EQ_INT(threads_named(d.pid, "ptd-swpt"), 1);
	c = dc_connect(&d);
	REQUIRE(c);
	r = dc_call(c, "{\"id\":1,\"cmd\":\"list\"}\n");
	CHECK(dc_ok(r));
	CHECK(r && cJSON_GetArraySize(cJSON_GetObjectItem(
			   cJSON_GetObjectItem(r, "result"), "sessions")) == 1);
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"status\",\"session\":%ld}\n", sid);
	r = dc_call(c, req);
	CHECK(dc_ok(r));
	CHECK(r && cJSON_GetArraySize(cJSON_GetObjectItem(
			   cJSON_GetObjectItem(r, "result"),
			   "subscriber_list")) == 1);
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"detach\",\"session\":%ld}\n", sid);
	r = dc_call(c, req);
	CHECK(dc_ok(r));
	CHECK_EQ_INT(target_traced_threads(t), 0);
	cJSON_Delete(r);
	dc_close(c);
	sub_join(s);
	bye = check_framing(s, "detached");
	CHECK_EQ_STR(bye_reason(bye), "detached");
	cJSON_Delete(bye);
	CHECK_EQ_INT(kill(t, 0), 0);
	CHECK_EQ_INT(wait_target(t, 60000), 0);
	sub_free(s);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* ---- attach beside the control loop ---- */

/* The state of session @sid in a `list` on @c: "" if it is not listed,
 * NULL if the list was not answered. */
static const char *list_state(struct dconn *c, long sid, char *buf,
			      size_t cap)
{
	cJSON *r = dc_call(c, "{\"id\":\"l\",\"cmd\":\"list\"}\n");
	const cJSON *e;

	if (!dc_ok(r)) {
		cJSON_Delete(r);
		return NULL;
	}
	buf[0] = 0;
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(
				      cJSON_GetObjectItem(r, "result"),
				      "sessions")) {
		const cJSON *st = cJSON_GetObjectItem(e, "state");

		if ((long)cJSON_GetNumberValue(cJSON_GetObjectItem(
			    e, "session")) == sid && cJSON_IsString(st))
			(void)snprintf(buf, cap, "%s", st->valuestring);
	}
	cJSON_Delete(r);
	return buf;
}

/* Send an attach to @pid on @a without reading its answer, then list on
 * @b until session @sid shows as "attaching" -- every list answered while
 * the attach is under way.  (The bound only keeps a broken ptd from
 * hanging the test.) */
static bool attach_pending(struct dconn *a, struct dconn *b, pid_t pid,
			   long sid)
{
	char req[128], st[32];

	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"a\",\"cmd\":\"attach\",\"pid\":%ld}\n",
		       (long)pid);
	REQUIRE_OR_FALSE(dc_send(a, req) == 0);
	for (int i = 0; i < 6000; i++) {
		const char *state = list_state(b, sid, st, sizeof(st));

		REQUIRE_OR_FALSE(state);
		if (!strcmp(state, "attaching"))
			return true;
		if (state[0]) {
			CHECK_FAIL_("session %ld is %s, not attaching", sid,
				    state);
			return false;
		}
		msleep(10);
	}
	CHECK_FAIL_("session %ld never showed as attaching", sid);
	return false;
}

/* A target whose attach cannot finish until the test releases it
 * (tests/progs/vfork.c: its main thread is in vfork()), and that ends only
 * when told (end_target): a run ended by its clock could end before the
 * test has looked at its session on a loaded machine. */
static bool held_target(struct target *t, int *go)
{
	return target_spawn(progs, "prog-vfork", 3600, (uid_t)-1, NULL, go,
			    t) == 0;
}

/* Let the target's vfork child exit: the attach can finish. */
static void unhold(int *go)
{
	release(go);
}

/* Tell a released target to end, and check it ran unharmed. */
static void end_target(struct target *t)
{
	CHECK_EQ_INT(target_tell(t->pid), 0);
	target_finish(t);
}

/* Attach runs beside the control loop: while it waits for a target
 * (held in vfork()), other clients are answered, the session is listed
 * as "attaching" and counts against max_sessions_per_user, nothing else
 * can be done with it yet; the attach is answered once the target lets
 * it finish. */
static void test_attach_beside(void)
{
	struct daemon d;
	struct target t;
	struct dconn *a, *b;
	char req[160], st[32], *line;
	cJSON *r;
	int go;

	REQUIRE(daemon_start(&d, "attachbg", "max_sessions_per_user = 1\n"));
	REQUIRE(held_target(&t, &go));
	a = dc_connect(&d);
	b = dc_connect(&d);
	REQUIRE(a && b);
	REQUIRE(attach_pending(a, b, t.pid, 1));
	r = dc_call(b, "{\"id\":1,\"cmd\":\"version\"}\n");
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"attach\",\"pid\":%ld}\n",
		       (long)t.pid);
	r = dc_call(b, req);
	CHECK_EQ_STR(dc_err_code(r), "limit");
	cJSON_Delete(r);
	r = dc_call(b, "{\"id\":3,\"cmd\":\"subscribe\",\"session\":1}\n");
	CHECK_EQ_STR(dc_err_code(r), "attaching");
	cJSON_Delete(r);
	r = dc_call(b, "{\"id\":4,\"cmd\":\"status\",\"session\":1}\n");
	CHECK(dc_ok(r));
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(
			     cJSON_GetObjectItem(r, "result"), "state")),
		     "attaching");
	cJSON_Delete(r);
	/* not answered while the target holds it */
	line = dc_read_line(a, 0);
	CHECK(line == NULL);
	free(line);
	unhold(&go);
	line = dc_read_line(a, 120000);
	r = line ? cJSON_Parse(line) : NULL;
	free(line);
	CHECK(dc_ok(r));
	CHECK_EQ_INT((long)dc_num(r, "session"), 1);
	cJSON_Delete(r);
	CHECK_EQ_STR(list_state(b, 1, st, sizeof(st)), "running");
	r = dc_call(b, "{\"id\":5,\"cmd\":\"detach\",\"session\":1}\n");
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	CHECK_EQ_INT(target_traced_threads(t.pid), 0);
	end_target(&t);
	dc_close(a);
	dc_close(b);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* An attach under way ends cleanly when the session is detached, when
 * its client goes away and when ptd stops (SIGTERM, as `systemctl stop`
 * sends): every thread of the target is released (the one that never
 * stopped too), the client is answered, the target runs on unharmed. */
static void test_attach_cancelled(void)
{
	struct daemon d;
	struct target t;
	struct dconn *a, *b;
	char st[32], *line;
	cJSON *r;
	int go, i;

	REQUIRE(daemon_start(&d, "attachcancel", ""));
	/* detach: answered once every thread is released; the attach is
	 * answered "cancelled" */
	REQUIRE(held_target(&t, &go));
	a = dc_connect(&d);
	b = dc_connect(&d);
	REQUIRE(a && b);
	REQUIRE(attach_pending(a, b, t.pid, 1));
	r = dc_call(b, "{\"id\":1,\"cmd\":\"detach\",\"session\":1}\n");
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	CHECK_EQ_INT(target_traced_threads(t.pid), 0);
	line = dc_read_line(a, 60000);
	r = line ? cJSON_Parse(line) : NULL;
	free(line);
	CHECK_EQ_STR(dc_err_code(r), "cancelled");
	CHECK_CONTAINS(dc_err_msg(r), "detached while it was attaching");
	cJSON_Delete(r);
	CHECK_EQ_STR(list_state(b, 1, st, sizeof(st)), "");
	unhold(&go);
	end_target(&t);
	dc_close(a);

	/* the client goes away: the session is forgotten once every thread
	 * is released */
	REQUIRE(held_target(&t, &go));
	a = dc_connect(&d);
	REQUIRE(a);
	REQUIRE(attach_pending(a, b, t.pid, 2));
	dc_close(a);
	for (i = 0; i < 6000; i++) {
		const char *state = list_state(b, 2, st, sizeof(st));

		if (!state || !state[0])
			break;
		msleep(10);
	}
	CHECK_EQ_STR(list_state(b, 2, st, sizeof(st)), "");
	CHECK_EQ_INT(target_traced_threads(t.pid), 0);
	unhold(&go);
	end_target(&t);

	/* ptd stops: the attach is answered "shutting_down", ptd exits 0 */
	REQUIRE(held_target(&t, &go));
	a = dc_connect(&d);
	REQUIRE(a);
	REQUIRE(attach_pending(a, b, t.pid, 3));
	CHECK_EQ_INT(daemon_stop(&d), 0);
	line = dc_read_line(a, 0);
	r = line ? cJSON_Parse(line) : NULL;
	free(line);
	CHECK_EQ_STR(dc_err_code(r), "shutting_down");
	cJSON_Delete(r);
	CHECK_EQ_INT(target_traced_threads(t.pid), 0);
	unhold(&go);
	end_target(&t);
	dc_close(a);
	dc_close(b);
}

/* SIGTERM: every subscriber gets bye "shutdown", targets live on, ptd
 * exits 0. */
static void test_shutdown(void)
{
	struct daemon d;
	struct sub *s1, *s2;
	cJSON *b1, *b2;
	long sid;
	int go;
	pid_t t;

	REQUIRE(daemon_start(&d, "shutdown", ""));
	t = spawn_target(2, &go);
	sid = attach(&d, t);
	REQUIRE(sid > 0);
	s1 = subscribe(&d, sid, "");
	s2 = subscribe(&d, sid, ",\"kinds\":[\"event\"]");
	REQUIRE(s1 && s2);
	sub_start(s1);
	sub_start(s2);
	release(&go);
	msleep(500);
	CHECK_EQ_INT(daemon_stop(&d), 0);
	sub_join(s1);
	sub_join(s2);
	b1 = check_framing(s1, "s1");
	b2 = check_framing(s2, "s2");
	CHECK_EQ_STR(bye_reason(b1), "shutdown");
	CHECK_EQ_STR(bye_reason(b2), "shutdown");
	cJSON_Delete(b1);
	cJSON_Delete(b2);
	CHECK_EQ_INT(kill(t, 0), 0);
	CHECK_EQ_INT(wait_target(t, 60000), 0);
	CHECK(access(d.sock, F_OK) < 0);
	sub_free(s1);
	sub_free(s2);
}

/* The promise, through the product: ptd started in a temp dir, `ptctl
 * attach` on a running multi-threaded program (with a capture beside, for
 * its ground truth), `ptctl stream` as the subscriber: every thread's insn
 * IPs in the stream equal what the thread executed. */
static void test_groundtruth(void)
{
	struct daemon d;
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };
	char pidarg[32], capdir[700], attach_out[700], stream_out[700];
	char sidarg[32], *text = NULL;
	/* its threads decoded at once (--jobs; the default path:
	 * test-groundtruth) */
	const char *attach_args[] = { "attach", pidarg, "--capture", capdir,
				      "--jobs", "2", NULL };
	const char *stream_args[] = { "stream", sidarg, NULL };
	const char *status_args[] = { "status", sidarg, "--json", NULL };
	char status_out[700];
	size_t len = 0, nthreads_seen = 0;
	pid_t t, streamer;
	int go, r;

	REQUIRE(daemon_start(&d, "truth", "subscriber_queue_size = 1G\n"));
	t = spawn_target(0.3, &go);
	REQUIRE(t > 0);
	(void)snprintf(pidarg, sizeof(pidarg), "%ld", (long)t);
	(void)snprintf(capdir, sizeof(capdir), "%s/capture", d.dir);
	(void)snprintf(attach_out, sizeof(attach_out), "%s/attach.out", d.dir);
	(void)snprintf(stream_out, sizeof(stream_out), "%s/stream.out", d.dir);
	r = wait_exit(ptctl_spawn(&d, attach_out, NULL, attach_args));
	CHECK_EQ_INT(r, 0);
	REQUIRE(ptd_file_read_all(attach_out, 4096, &text, &len) == 0);
	(void)snprintf(sidarg, sizeof(sidarg), "%.*s",
		       (int)strcspn(text, "\n"), text);
	free(text);
	text = NULL;
	streamer = ptctl_spawn(&d, stream_out, NULL, stream_args);
	/* the streamer is in before the target runs */
	CHECK(wait_subscribed(d.sock, sidarg));
	release(&go);
	CHECK_EQ_INT(wait_exit(streamer), 0);
	CHECK_EQ_INT(wait_target(t, 120000), 0);
	REQUIRE(ptd_file_read_all(stream_out, 1u << 30, &text, &len) == 0);
	CHECK(is_type(text, "hello"));
	r = ptd_capture_load(capdir, &cap, &diag);
	if (r < 0) {
		CHECK_FAIL_("capture: %s", diag.msg);
		free(text);
		daemon_stop(&d);
		return;
	}
	for (size_t i = 0; i < cap.nthreads; i++) {
		uint64_t *ips = NULL;
		size_t nips = 0, k = 0;
		char key[64];
		const char *p = text ? text : "";

		REQUIRE(ptd_capture_read_truth(&cap, i, &ips, &nips,
					       &diag) == 0);
		(void)snprintf(key, sizeof(key), "\"tid\":%d,",
			       (int)cap.threads[i].tid);
		while (*p) {
			const char *e = strchr(p, '\n'), *ipp;
			uint64_t ip;

			if (!e)
				break;
			if (!strncmp(p, "{\"type\":\"insn\"", 14) &&
			    memmem(p, (size_t)(e - p), key, strlen(key)) &&
			    (ipp = memmem(p, (size_t)(e - p), "\"ip\":\"", 6)) &&
			    !strncmp(ipp + 6, "0x", 2) &&
			    ptd_parse_u64n(ipp + 8, strcspn(ipp + 8, "\""), 16,
					   &ip) == 0) {
				if (k >= nips || ip != ips[k]) {
					CHECK_FAIL_("tid %d: insn %zu is "
						    "%#llx, truth %#llx",
						    (int)cap.threads[i].tid, k,
						    (unsigned long long)ip,
						    k < nips ? (unsigned long long)
								       ips[k]
							     : 0ull);
					break;
				}
				k++;
			}
			p = e + 1;
		}
		CHECK_EQ_U64(k, nips);
		if (k == nips && nips > 0)
			nthreads_seen++;
		fprintf(stderr, "  tid %d: %zu insns streamed = truth\n",
			(int)cap.threads[i].tid, k);
		free(ips);
	}
	CHECK(nthreads_seen >= 4);	/* main, 2 workers, brief ones */
	CHECK(strstr(text, "\"type\":\"bye\"") != NULL);
	CHECK(strstr(text, "\"reason\":\"exited\"") != NULL);
	ptd_capture_fini(&cap);
	free(text);
	text = NULL;
	/* the session says how it decoded: rounds of threads at once */
	(void)snprintf(status_out, sizeof(status_out), "%s/status.out", d.dir);
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&d, status_out, NULL, status_args)),
		     0);
	REQUIRE(ptd_file_read_all(status_out, 1u << 20, &text, &len) == 0);
	CHECK_CONTAINS(text, "\"decoder\":\"insn\",\"jobs\":2");
	{
		cJSON *st = cJSON_Parse(text);

		CHECK(dc_num(st, "threads_at_once") > 0);
		if (dc_num(st, "threads_at_once") <= 0)
			fprintf(stderr, "status: %s\n", text);
		cJSON_Delete(st);
	}
	free(text);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* Lines of @text that start with @prefix. */
static size_t count_lines(const char *text, const char *prefix)
{
	size_t n = 0;

	for (const char *p = text; p && *p;) {
		n += !strncmp(p, prefix, strlen(prefix));
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return n;
}

/* `ptctl replay TRACE > file` loses nothing by default, however small
 * the subscriber queue and however the reader keeps up (it lost 26-72%
 * of a trace before: replays were lossy unless asked); --lossy asks for
 * a live session's dropping, which the session then shows.  --jobs N
 * reaches ptd (list shows it), the same records; over ptd's
 * max_decode_jobs it is refused by ptd naming the setting, and a bad N
 * by ptctl. */
static void test_ptctl_replay(void)
{
	struct daemon d;
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };
	char prog[1100], capdir[700], out[700], *text = NULL;
	const char *trace_args[] = { "trace", "--out", capdir, "--max-insns",
				     "60000", "--", prog, "1", NULL };
	const char *replay_args[] = { "replay", capdir, NULL };
	const char *lossy_args[] = { "replay", "--lossy", capdir, NULL };
	const char *jobs_args[] = { "replay", "--jobs", "2", capdir, NULL };
	const char *over_args[] = { "replay", "--jobs", "3", capdir, NULL };
	const char *bad_args[] = { "replay", "--jobs", "0", capdir, NULL };
	const char *list_args[] = { "list", "--json", NULL };
	char err[700];
	uint64_t truth = 0;
	size_t len = 0;

	REQUIRE(daemon_start(&d, "replay", "subscriber_queue_size = 16k\n"
					   "max_decode_jobs = 2\n"));
	(void)snprintf(prog, sizeof(prog), "%s/prog-loop", progs);
	(void)snprintf(capdir, sizeof(capdir), "%s/cap", d.dir);
	(void)snprintf(out, sizeof(out), "%s/trace.out", d.dir);
	REQUIRE(wait_exit(ptctl_spawn(&d, out, NULL, trace_args)) == 0);
	REQUIRE(ptd_capture_load(capdir, &cap, &diag) == 0);
	for (size_t i = 0; i < cap.nthreads; i++)
		truth += cap.threads[i].insns;
	ptd_capture_fini(&cap);
	REQUIRE(truth > 10000);

	(void)snprintf(out, sizeof(out), "%s/replay.out", d.dir);
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&d, out, NULL, replay_args)), 0);
	REQUIRE(ptd_file_read_all(out, 1u << 30, &text, &len) == 0);
	CHECK_EQ_U64(count_lines(text, "{\"type\":\"insn\""), truth);
	CHECK_EQ_U64(count_lines(text, "{\"type\":\"lost\""), 0);
	CHECK(strstr(text, "\"lost\":0") != NULL);	/* the bye's */
	free(text);

	(void)snprintf(out, sizeof(out), "%s/lossy.out", d.dir);
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&d, out, NULL, lossy_args)), 0);
	REQUIRE(ptd_file_read_all(out, 1u << 30, &text, &len) == 0);
	CHECK(strstr(text, "\"type\":\"bye\"") != NULL);
	free(text);

	(void)snprintf(out, sizeof(out), "%s/jobs.out", d.dir);
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&d, out, NULL, jobs_args)), 0);
	REQUIRE(ptd_file_read_all(out, 1u << 30, &text, &len) == 0);
	CHECK_EQ_U64(count_lines(text, "{\"type\":\"insn\""), truth);
	free(text);
	(void)snprintf(out, sizeof(out), "%s/over.out", d.dir);
	(void)snprintf(err, sizeof(err), "%s/over.err", d.dir);
	CHECK(wait_exit(ptctl_spawn(&d, out, err, over_args)) != 0);
	REQUIRE(ptd_file_read_all(err, 1u << 20, &text, &len) == 0);
	CHECK_CONTAINS(text, "jobs: 3 is more than this ptd allows "
			     "(max_decode_jobs = 2)");
	free(text);
	(void)snprintf(err, sizeof(err), "%s/bad.err", d.dir);
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&d, out, err, bad_args)), 1);
	REQUIRE(ptd_file_read_all(err, 1u << 20, &text, &len) == 0);
	CHECK_CONTAINS(text, "--jobs: expected a number of threads from 1 "
			     "to 64, got '0'");
	free(text);
	(void)snprintf(out, sizeof(out), "%s/list.out", d.dir);
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&d, out, NULL, list_args)), 0);
	REQUIRE(ptd_file_read_all(out, 1u << 20, &text, &len) == 0);
	CHECK_CONTAINS(text, "\"lossless\":true");
	CHECK_CONTAINS(text, "\"lossless\":false");
	CHECK_CONTAINS(text, "\"decoder\":\"insn\",\"jobs\":2");
	CHECK_CONTAINS(text, "\"decoder\":\"block\"");
	free(text);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* Snapshot mode through the socket: the subscriber gets records only
 * between snapshot markers; each snapshot is answered with what it read;
 * full sessions and bad options are refused. */
static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void test_snapshot(void)
{
	struct daemon d;
	struct sub *s;
	struct dconn *c;
	char req[512];
	cJSON *r, *bye;
	const cJSON *res, *th;
	long sid, fid;
	uint64_t t0;
	int go, go2;
	pid_t t, t2;
	unsigned markers = 0, outside = 0, insns = 0;
	bool in = false;

	REQUIRE(daemon_start(&d, "snapshot", ""));
	c = dc_connect(&d);
	REQUIRE(c);
	/* bad options: bad_request, naming the field */
	r = dc_call(c, "{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":"
		    "{\"mode\":\"fast\"}}\n");
	CHECK_EQ_STR(dc_err_code(r), "bad_request");
	CHECK_CONTAINS(dc_err_msg(r), "options.mode");
	cJSON_Delete(r);
	r = dc_call(c, "{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":"
		    "{\"mode\":\"snapshot\",\"snapshot_size\":100000}}\n");
	CHECK_EQ_STR(dc_err_code(r), "bad_request");
	CHECK_CONTAINS(dc_err_msg(r), "power of two");
	cJSON_Delete(r);
	r = dc_call(c, "{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":"
		    "{\"mode\":\"snapshot\",\"snapshot_size\":1024}}\n");
	CHECK_EQ_STR(dc_err_code(r), "bad_request");
	CHECK_CONTAINS(dc_err_msg(r), "out of range");
	cJSON_Delete(r);
	r = dc_call(c, "{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":"
		    "{\"snapshot_size\":65536}}\n");
	CHECK_EQ_STR(dc_err_code(r), "bad_request");
	CHECK_CONTAINS(dc_err_msg(r), "needs \"mode\"");
	cJSON_Delete(r);
	r = dc_call(c, "{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":"
		    "{\"jobs\":2,\"per_cpu\":true}}\n");
	CHECK_EQ_STR(dc_err_code(r), "bad_request");
	CHECK_CONTAINS(dc_err_msg(r), "options.jobs: is not for per-CPU");
	cJSON_Delete(r);
	r = dc_call(c, "{\"id\":1,\"cmd\":\"attach\",\"pid\":1,\"options\":"
		    "{\"mode\":1}}\n");
	CHECK_EQ_STR(dc_err_code(r), "bad_request");
	cJSON_Delete(r);
	r = dc_call(c, "{\"id\":1,\"cmd\":\"snapshot\"}\n");
	CHECK_EQ_STR(dc_err_code(r), "bad_request");
	CHECK_CONTAINS(dc_err_msg(r), "session");
	cJSON_Delete(r);
	r = dc_call(c, "{\"id\":1,\"cmd\":\"snapshot\",\"session\":77}\n");
	CHECK_EQ_STR(dc_err_code(r), "no_such_session");
	cJSON_Delete(r);

	/* a full session takes no snapshot */
	t2 = spawn_target(1, &go2);
	fid = attach(&d, t2);
	REQUIRE(fid > 0);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"snapshot\",\"session\":%ld}\n", fid);
	r = dc_call(c, req);
	CHECK_EQ_STR(dc_err_code(r), "bad_request");
	CHECK_CONTAINS(dc_err_msg(r), "is not in snapshot mode");
	cJSON_Delete(r);
	release(&go2);

	/* runs until told (SIGUSR1): the snapshots are paced, and how long
	 * they take is no business of the target's.  16 KiB a thread: each
	 * snapshot decodes up to ~150k records per thread, which an ASan
	 * build beside a busy CI takes tens of seconds over at 64 KiB (the
	 * third answer once came after the 30 s this test waited then) */
	t = spawn_target(3600, &go);
	/* more jobs than max_decode_jobs (4): refused, nothing attached */
	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"a\",\"cmd\":\"attach\",\"pid\":%ld,"
		       "\"options\":{\"mode\":\"snapshot\",\"jobs\":8}}\n",
		       (long)t);
	r = dc_call(c, req);
	CHECK_EQ_STR(dc_err_code(r), "bad_request");
	CHECK_CONTAINS(dc_err_msg(r), "(max_decode_jobs = 4)");
	cJSON_Delete(r);
	/* each snapshot's threads decoded on 2 threads (options.jobs) */
	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"a\",\"cmd\":\"attach\",\"pid\":%ld,"
		       "\"options\":{\"mode\":\"snapshot\","
		       "\"snapshot_size\":16384,\"jobs\":2}}\n", (long)t);
	r = dc_call(c, req);
	if (!dc_ok(r)) {
		CHECK_FAIL_("attach: %s: %s", dc_err_code(r), dc_err_msg(r));
		cJSON_Delete(r);
		kill(t, SIGKILL);
		return;
	}
	res = cJSON_GetObjectItem(r, "result");
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(res, "mode")),
		     "snapshot");
	sid = (long)dc_num(r, "session");
	cJSON_Delete(r);
	s = subscribe(&d, sid, "");
	REQUIRE(s);
	sub_start(s);
	release(&go);
	msleep(800);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":3,\"cmd\":\"status\",\"session\":%ld}\n", sid);
	r = dc_call(c, req);
	res = cJSON_GetObjectItem(r, "result");
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(res, "mode")),
		     "snapshot");
	CHECK(dc_num(r, "snapshot_size") == 16384);
	CHECK(dc_num(r, "records") == 0);	/* none until asked */
	CHECK(dc_num(r, "jobs") == 2);
	CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(res, "decoder")),
		     "insn");
	cJSON_Delete(r);
	/* the first alone; then two requests in one write: the second
	 * waits for the first's answer, then finds the session idle */
	(void)snprintf(req, sizeof(req),
		       "{\"id\":11,\"cmd\":\"snapshot\",\"session\":%ld}\n",
		       sid);
	REQUIRE(dc_send(c, req) == 0);
	t0 = now_ms();
	for (int k = 1; k <= 3; k++) {
		char *line = dc_read_line(c, 120000);

		r = line ? cJSON_Parse(line) : NULL;
		fprintf(stderr, "  snapshot %d: %s after %llu ms, %.0f records\n",
			k, line ? "answered" : "no answer",
			(unsigned long long)(now_ms() - t0),
			dc_num(r, "records"));
		free(line);
		CHECK(dc_ok(r));
		if (r && !dc_ok(r))
			fprintf(stderr, "  snapshot: %s: %s\n", dc_err_code(r),
				dc_err_msg(r));
		CHECK(json_num(r, "id") == 10 + k);
		CHECK(dc_num(r, "seq") == k);
		th = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"),
					 "threads");
		/* a snapshot reads the threads whose trace grew since the
		 * last one: the pipelined ones may find nothing new */
		if (k == 1 || cJSON_GetArraySize(th) > 0) {
			CHECK(dc_num(r, "records") > 0);
			CHECK(dc_num(r, "bytes") > 0);
			CHECK(cJSON_GetArraySize(th) >= 1);
			CHECK(json_num(cJSON_GetArrayItem(th, 0), "bytes") <=
			      16384);
			CHECK(json_num(cJSON_GetArrayItem(th, 0), "tid") > 0);
			/* options.jobs: each thread's parts */
			CHECK(json_num(cJSON_GetArrayItem(th, 0), "parts") >=
			      0);
		}
		cJSON_Delete(r);
		if (k == 1) {
			msleep(500);
			(void)snprintf(req, sizeof(req),
				       "{\"id\":12,\"cmd\":\"snapshot\","
				       "\"session\":%ld}\n{\"id\":13,\"cmd\":"
				       "\"snapshot\",\"session\":%ld}\n",
				       sid, sid);
			REQUIRE(dc_send(c, req) == 0);
		}
	}
	(void)snprintf(req, sizeof(req),
		       "{\"id\":3,\"cmd\":\"status\",\"session\":%ld}\n", sid);
	r = dc_call(c, req);
	CHECK(dc_num(r, "snapshots") == 3);
	/* the parts the snapshots' traces were cut into (how many depends
	 * on how far prog-attach got: test-session checks them) */
	fprintf(stderr, "  snapshots' parts: %.0f, %.0f decoded serially "
		"(%s)\n", dc_num(r, "parts"), dc_num(r, "serial_parts"),
		cJSON_GetStringValue(cJSON_GetObjectItem(
			cJSON_GetObjectItem(r, "result"), "serial_why")));
	CHECK(dc_num(r, "parts") >= 0);
	CHECK(dc_num(r, "serial_parts") >= 0);
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":4,\"cmd\":\"detach\",\"session\":%ld}\n", sid);
	r = dc_call(c, req);
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	dc_close(c);
	sub_join(s);
	bye = check_framing(s, "snapshot");
	CHECK_EQ_STR(bye_reason(bye), "detached");
	cJSON_Delete(bye);
	/* begin, records, end; twice; nothing outside */
	for (size_t i = 1; i + 1 < s->n; i++) {
		if (is_type(s->lines[i], "snapshot")) {
			cJSON *o = cJSON_Parse(s->lines[i]);
			const char *ph = cJSON_GetStringValue(
				cJSON_GetObjectItem(o, "phase"));

			markers++;
			CHECK_EQ_STR(ph ? ph : "", in ? "end" : "begin");
			CHECK(json_num(o, "seq") == (markers + 1) / 2);
			CHECK(json_num(o, "session") == sid);
			if (in)
				CHECK(json_num(o, "insns") == insns);
			in = !in;
			insns = 0;
			cJSON_Delete(o);
		} else if (is_type(s->lines[i], "lost")) {
			/* a full queue dropped some: they count */
			cJSON *o = cJSON_Parse(s->lines[i]);

			if (json_num(o, "insn") > 0)
				insns += (unsigned)json_num(o, "insn");
			cJSON_Delete(o);
		} else if (!in) {
			outside++;
		} else if (is_type(s->lines[i], "insn")) {
			insns++;
		}
	}
	CHECK_EQ_INT(markers, 6);
	CHECK_EQ_INT(outside, 0);
	/* the snapshots may all come while prog-attach is still in ld.so
	 * (traced, on a loaded machine): SIGUSR1 would kill it there */
	CHECK(wait_catching(t, SIGUSR1, 120000));
	CHECK_EQ_INT(kill(t, SIGUSR1), 0);
	CHECK_EQ_INT(wait_target(t, 60000), 0);
	CHECK_EQ_INT(wait_target(t2, 60000), 0);
	sub_free(s);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

/* ---- paced snapshots ----
 *
 * A snapshot's trace is already copied out of the ring and the target runs
 * on, so its decode waits for its subscribers rather than drop records: a
 * subscriber that keeps reading gets all of them; one that reads nothing
 * for subscriber_stall_ms is cut off (lost + bye "stalled") and the others
 * go on; nobody else waits meanwhile. */

/* Attach to @pid in snapshot mode (64 KiB per thread); the session id or
 * -1 (failed, said). */
static long attach_snapshot(struct daemon *d, pid_t pid)
{
	char req[256];
	cJSON *r;
	long sid = -1;

	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"a\",\"cmd\":\"attach\",\"pid\":%ld,"
		       "\"options\":{\"mode\":\"snapshot\","
		       "\"snapshot_size\":65536}}\n", (long)pid);
	r = dc_call1(d, req);
	if (dc_ok(r))
		sid = (long)dc_num(r, "session");
	else
		CHECK_FAIL_("attach (snapshot mode): %s: %s", dc_err_code(r),
			    dc_err_msg(r));
	cJSON_Delete(r);
	return sid;
}

/* The number @key of session @sid's status, or -1 (failed, said). */
static double session_num(struct daemon *d, long sid, const char *key)
{
	char req[128];
	cJSON *r;
	double n;

	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"u\",\"cmd\":\"status\",\"session\":%ld}\n",
		       sid);
	r = dc_call1(d, req);
	if (!dc_ok(r)) {
		CHECK_FAIL_("status %ld: %s", sid, r ? dc_err_msg(r) : "none");
		cJSON_Delete(r);
		return -1;
	}
	n = dc_num(r, key);
	cJSON_Delete(r);
	return n;
}

/* Trace bytes of snapshot-mode session @sid that no snapshot has read
 * yet (status: aux_written less trace_bytes and overwritten_bytes), or -1
 * (status failed, said). */
static double unread_bytes(struct daemon *d, long sid)
{
	char req[128];
	cJSON *r;
	double n;

	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"u\",\"cmd\":\"status\",\"session\":%ld}\n",
		       sid);
	r = dc_call1(d, req);
	if (!dc_ok(r)) {
		CHECK_FAIL_("status %ld: %s", sid, r ? dc_err_msg(r) : "none");
		cJSON_Delete(r);
		return -1;
	}
	n = dc_num(r, "aux_written") - dc_num(r, "trace_bytes") -
	    dc_num(r, "overwritten_bytes");
	cJSON_Delete(r);
	return n;
}

/* Wait (polling status, at most two minutes) until snapshot-mode session
 * @sid holds trace enough for a snapshot of @want records: a first
 * snapshot (nobody subscribed yet) of 4 KiB or more says how many records
 * a byte of this target's trace gives; then the unread bytes must give
 * 1.5 times @want.  False if they never do. */
static bool snapshot_grow(struct daemon *d, long sid, double want)
{
	char req[128];
	double per_byte = 0, need = 4096, unread = 0;
	cJSON *r;

	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"p\",\"cmd\":\"snapshot\",\"session\":%ld}\n",
		       sid);
	for (int i = 0; i < 1200; i++) {
		unread = unread_bytes(d, sid);
		if (unread < 0)
			return false;
		if (unread >= need && per_byte > 0)
			break;
		if (unread >= need) {
			struct dconn *c = dc_connect(d);
			char *line = NULL;

			/* a decode under ASan on a loaded machine may take
			 * longer than dc_call's 20 s */
			if (c && dc_send(c, req) == 0)
				line = dc_read_line(c, 300000);
			r = line ? cJSON_Parse(line) : NULL;
			free(line);
			dc_close(c);
			if (!dc_ok(r)) {
				CHECK_FAIL_("probe snapshot: %s: %s",
					    r ? dc_err_code(r) : "no answer",
					    r ? dc_err_msg(r) : "in 300 s");
				cJSON_Delete(r);
				return false;
			}
			per_byte = dc_num(r, "records") / dc_num(r, "bytes");
			cJSON_Delete(r);
			REQUIRE_OR_FALSE(per_byte > 0);
			need = 1.5 * want / per_byte;
			continue;
		}
		msleep(100);
	}
	fprintf(stderr, "  %.0f trace bytes unread, %.1f records a byte\n",
		unread, per_byte);
	REQUIRE_OR_FALSE(per_byte > 0 && unread >= need);
	return true;
}

/* Send a snapshot request for @sid on @c (the answer is read later). */
static bool snapshot_send(struct dconn *c, long sid)
{
	char req[128];

	(void)snprintf(req, sizeof(req),
		       "{\"id\":\"s\",\"cmd\":\"snapshot\",\"session\":%ld}\n",
		       sid);
	return dc_send(c, req) == 0;
}

/* Has @c a response waiting (without reading it)? */
static bool answered(struct dconn *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };

	return c->off < c->len || poll(&p, 1, 0) > 0;
}

/* The subscriber id of @s (its hello), 0 if none. */
static unsigned sub_id(const struct sub *s)
{
	cJSON *o = s->n ? cJSON_Parse(s->lines[0]) : NULL;
	unsigned id = (unsigned)json_num(o, "subscriber");

	cJSON_Delete(o);
	return id;
}

/* The snapshot response's entry for subscriber @id, or NULL. */
static const cJSON *snap_sub(const cJSON *r, unsigned id)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(
				      cJSON_GetObjectItem(r, "result"),
				      "subscribers"))
		if (json_num(e, "subscriber") == id)
			return e;
	return NULL;
}

/* The records of snapshot @seq in @s: the lines between its markers (or
 * its begin marker and a lost/bye), in *ret_first (index of the first)
 * and *ret_n; the sum of lost records after its begin in *ret_lost.
 * Returns whether its end marker came. */
static bool snap_lines(const struct sub *s, unsigned seq, size_t *ret_first,
		       size_t *ret_n, uint64_t *ret_lost)
{
	bool in = false;

	*ret_first = *ret_n = 0;
	*ret_lost = 0;
	for (size_t i = 0; i < s->n; i++) {
		const char *l = s->lines[i];

		if (is_type(l, "snapshot")) {
			cJSON *o = cJSON_Parse(l);
			const char *ph = cJSON_GetStringValue(
				cJSON_GetObjectItem(o, "phase"));
			bool mine = json_num(o, "seq") == seq;
			bool end = mine && ph && !strcmp(ph, "end");

			if (mine && ph && !strcmp(ph, "begin")) {
				in = true;
				*ret_first = i + 1;
			}
			cJSON_Delete(o);
			if (end)
				return true;
		} else if (in && is_type(l, "lost")) {
			cJSON *o = cJSON_Parse(l);

			*ret_lost += (uint64_t)json_num(o, "records");
			cJSON_Delete(o);
		} else if (in && !is_type(l, "bye")) {
			(*ret_n)++;
		}
	}
	return false;
}

/* 100,000+ records to a fast and a slow (sleeping) subscriber: both get
 * every one, in the same order, nothing lost, though their queues hold
 * ~100 records; a third that reads nothing is cut off after
 * subscriber_stall_ms, with a lost record and a bye "stalled" whose
 * counts add up to the others' records; the response says what each was
 * sent and lost. */
static void test_snapshot_paced(void)
{
	struct daemon d;
	struct target t;
	struct sub *fast = NULL, *slow = NULL, *stuck = NULL;
	struct dconn *c = NULL;
	size_t ff, fn, sf, sn, kf, kn;
	uint64_t fl, sl, kl;
	unsigned seq;
	cJSON *r = NULL, *bye;
	const cJSON *e;
	char req[128], *line, out[700], sidtext[32], want[96], *text = NULL;
	const char *snap_args[] = { "snapshot", sidtext, NULL };
	size_t len = 0;
	long sid;

	REQUIRE(daemon_start(&d, "paced", "subscriber_queue_size = 16k\n"
					  "subscriber_stall_ms = 1500\n"));
	REQUIRE(target_start(progs, 3600, &t) == 0);
	/* from here on a failure still ends the target and the daemon */
	sid = attach_snapshot(&d, t.pid);
	if (sid < 0 || !snapshot_grow(&d, sid, 100000))
		goto out;
	fast = subscribe(&d, sid, "");
	slow = subscribe(&d, sid, "");
	stuck = subscribe(&d, sid, "");
	c = dc_connect(&d);
	if (!fast || !slow || !stuck || !c) {
		CHECK_FAIL_("%s", "subscribers or connection missing");
		goto out;
	}
	slow->nap_every = 2000;
	slow->nap_ms = 20;
	sub_start(fast);
	sub_start(slow);
	/* stuck reads nothing until the snapshot is answered */
	CHECK(snapshot_send(c, sid));
	line = dc_read_line(c, 300000);
	r = line ? cJSON_Parse(line) : NULL;
	free(line);
	sub_start(stuck);
	/* a second snapshot through ptctl, which prints each subscriber's
	 * share (checked against the streams below) */
	(void)snprintf(out, sizeof(out), "%s/snapshot.out", d.dir);
	(void)snprintf(sidtext, sizeof(sidtext), "%ld", sid);
	CHECK_EQ_INT(wait_exit(ptctl_spawn(&d, out, NULL, snap_args)), 0);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":4,\"cmd\":\"detach\",\"session\":%ld}\n", sid);
	bye = dc_call(c, req);
	CHECK(dc_ok(bye));
	cJSON_Delete(bye);
	sub_join(fast);
	sub_join(slow);
	sub_join(stuck);
	if (!dc_ok(r)) {
		CHECK_FAIL_("snapshot: %s: %s", r ? dc_err_code(r) : "no answer",
			    r ? dc_err_msg(r) : "");
		goto out;
	}
	seq = (unsigned)dc_num(r, "seq");
	CHECK(snap_lines(fast, seq, &ff, &fn, &fl));
	CHECK(snap_lines(slow, seq, &sf, &sn, &sl));
	CHECK(!snap_lines(stuck, seq, &kf, &kn, &kl));
	fprintf(stderr, "  snapshot %u: %.0f records; fast %zu (lost %" PRIu64
			"), slow %zu (lost %" PRIu64 "), stuck %zu + %" PRIu64
			" lost\n", seq, dc_num(r, "records"), fn, fl, sn, sl,
		kn, kl);
	CHECK(fn >= 100000);
	CHECK_EQ_U64(fl, 0);
	CHECK_EQ_U64(sl, 0);
	CHECK_EQ_U64(sn, fn);
	for (size_t i = 0; i < fn && i < sn; i++)
		if (strcmp(fast->lines[ff + i], slow->lines[sf + i])) {
			CHECK_FAIL_("record %zu differs: fast %.120s, slow "
				    "%.120s", i, fast->lines[ff + i],
				    slow->lines[sf + i]);
			break;
		}
	/* stuck: what it got is the start of the others', the rest lost */
	CHECK(kl > 0);
	CHECK_EQ_U64(kn + kl, fn);
	for (size_t i = 0; i < kn && i < fn; i++)
		if (strcmp(fast->lines[ff + i], stuck->lines[kf + i])) {
			CHECK_FAIL_("stuck's record %zu differs", i);
			break;
		}
	bye = check_framing(stuck, "stuck");
	CHECK_EQ_STR(bye_reason(bye), "stalled");
	CHECK_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItem(bye,
								"message")),
		       "subscriber_stall_ms");
	CHECK_EQ_U64((uint64_t)json_num(bye, "lost"), kl);
	cJSON_Delete(bye);
	/* the response: each one's share of this snapshot */
	e = snap_sub(r, sub_id(fast));
	CHECK(e && json_num(e, "sent") == fn && json_num(e, "lost") == 0 &&
	      cJSON_IsFalse(cJSON_GetObjectItem(e, "cut_off")));
	e = snap_sub(r, sub_id(slow));
	CHECK(e && json_num(e, "sent") == sn && json_num(e, "lost") == 0);
	e = snap_sub(r, sub_id(stuck));
	CHECK(e && json_num(e, "sent") == kn && json_num(e, "lost") == kl &&
	      cJSON_IsTrue(cJSON_GetObjectItem(e, "cut_off")));
	/* ptctl snapshot's text: fast and slow got all of the second one */
	if (ptd_file_read_all(out, 1 << 20, &text, &len) == 0) {
		fprintf(stderr, "  ptctl snapshot said:\n%s", text);
		CHECK(snap_lines(fast, seq + 1, &ff, &fn, &fl));
		CHECK(snap_lines(slow, seq + 1, &sf, &sn, &sl));
		CHECK_EQ_U64(sn, fn);
		(void)snprintf(want, sizeof(want),
			       "  subscriber %u: %zu sent, 0 lost\n",
			       sub_id(fast), fn);
		CHECK_CONTAINS(text, want);
		(void)snprintf(want, sizeof(want),
			       "  subscriber %u: %zu sent, 0 lost\n",
			       sub_id(slow), sn);
		CHECK_CONTAINS(text, want);
		free(text);
	} else {
		CHECK_FAIL_("%s: not written", out);
	}
	/* the others' streams go on to the session's end */
	bye = check_framing(fast, "fast");
	CHECK_EQ_STR(bye_reason(bye), "detached");
	cJSON_Delete(bye);
	bye = check_framing(slow, "slow");
	CHECK_EQ_STR(bye_reason(bye), "detached");
	cJSON_Delete(bye);
out:
	cJSON_Delete(r);
	end_target(&t);
	CHECK_EQ_INT(daemon_stop(&d), 0);
	dc_close(c);
	sub_free(fast);
	sub_free(slow);
	sub_free(stuck);
}

/* While a snapshot waits for a subscriber that reads nothing, nobody else
 * waits: another session's live subscriber keeps getting records and the
 * control loop answers; a detach of the snapshot's session ends its wait
 * at once (the snapshot is answered "cut short"), long before the stall
 * limit. */
static void test_snapshot_paced_beside(void)
{
	struct daemon d;
	struct target lt, st;
	struct sub *live = NULL, *stuck = NULL;
	struct dconn *c = NULL, *c2 = NULL;
	size_t before, after;
	double aux0, aux1, rec0;
	uint64_t t0, ms;
	char req[160];
	char *line;
	cJSON *r;
	long lid, sid;

	REQUIRE(daemon_start(&d, "pacedbg", "subscriber_queue_size = 16k\n"
					    "subscriber_stall_ms = 60000\n"));
	REQUIRE(target_start(progs, 3600, &lt) == 0);
	if (target_start(progs, 3600, &st) < 0) {
		CHECK_FAIL_("%s", "second target did not start");
		end_target(&lt);
		daemon_stop(&d);
		return;
	}
	/* from here on a failure still ends the targets and the daemon */
	lid = attach(&d, lt.pid);
	sid = attach_snapshot(&d, st.pid);
	if (lid < 0 || sid < 0 || !(live = subscribe(&d, lid, "")))
		goto out;
	sub_start(live);
	if (!snapshot_grow(&d, sid, 50000))
		goto out;
	stuck = subscribe(&d, sid, "");
	c = dc_connect(&d);
	c2 = dc_connect(&d);
	if (!stuck || !c || !c2 || !snapshot_send(c, sid)) {
		CHECK_FAIL_("%s", "subscriber, connections or snapshot request");
		goto out;
	}
	/* the snapshot waits for stuck (60 s); meanwhile ... */
	msleep(300);
	before = atomic_load(&live->seen);
	aux0 = session_num(&d, sid, "aux_written");
	rec0 = session_num(&d, lid, "records");
	r = dc_call(c2, "{\"id\":1,\"cmd\":\"list\"}\n");
	CHECK(dc_ok(r));	/* ... the loop answers ... */
	cJSON_Delete(r);
	/* ... the live subscriber gets records and the snapshot's own
	 * target runs on (its trace grows) -- however slowly a loaded
	 * machine runs the two software sources, as long as the snapshot
	 * is still waiting (checked after) */
	t0 = now_ms();
	do {
		msleep(50);
		after = atomic_load(&live->seen);
		aux1 = session_num(&d, sid, "aux_written");
	} while ((after == before || aux1 <= aux0) && now_ms() - t0 < 20000);
	fprintf(stderr, "  while the snapshot waits: live subscriber %zu -> "
			"%zu lines (its session decoded %.0f -> %.0f "
			"records), snapshot target's trace %.0f -> %.0f "
			"bytes, in %" PRIu64 " ms\n", before, after, rec0,
		session_num(&d, lid, "records"), aux0, aux1, now_ms() - t0);
	CHECK(after > before);
	CHECK(aux1 > aux0);
	CHECK(!answered(c));
	/* a detach ends the wait now */
	t0 = now_ms();
	(void)snprintf(req, sizeof(req),
		       "{\"id\":2,\"cmd\":\"detach\",\"session\":%ld}\n", sid);
	r = dc_call(c2, req);
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	line = dc_read_line(c, 30000);
	r = line ? cJSON_Parse(line) : NULL;
	free(line);
	ms = now_ms() - t0;
	fprintf(stderr, "  detach during the wait: answered after %" PRIu64
			" ms\n", ms);
	CHECK(r && !dc_ok(r));
	CHECK_CONTAINS(dc_err_msg(r), "cut short");
	CHECK(ms < 30000);
	cJSON_Delete(r);
	/* stuck's stream ends with the session's bye */
	sub_start(stuck);
	sub_join(stuck);
	r = check_framing(stuck, "stuck");
	CHECK_EQ_STR(bye_reason(r), "detached");
	cJSON_Delete(r);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":3,\"cmd\":\"detach\",\"session\":%ld}\n", lid);
	r = dc_call(c2, req);
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	sub_join(live);
	r = check_framing(live, "live");
	CHECK_EQ_STR(bye_reason(r), "detached");
	cJSON_Delete(r);
out:
	end_target(&lt);
	end_target(&st);
	CHECK_EQ_INT(daemon_stop(&d), 0);
	dc_close(c);
	dc_close(c2);
	sub_free(live);
	sub_free(stuck);
}

/* attach's wait_ms: a client that subscribes only after the answer (here
 * 300 ms after it, the target running all along) still gets every
 * thread's trace from its start: each thread's insn records are as many
 * as the capture's truth says it executed. */
static void test_attach_wait_subscriber(void)
{
	struct daemon d;
	struct target t;
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };
	struct dconn *sub;
	char capdir[700], req[900], *line;
	unsigned counts[64] = { 0 };
	pid_t tids[64];
	size_t ntids = 0;
	bool bye = false;
	cJSON *r;
	long s;

	REQUIRE(daemon_start(&d, "waitsub", "subscriber_queue_size = 1G\n"));
	REQUIRE(target_start(progs, 3600, &t) == 0);
	(void)snprintf(capdir, sizeof(capdir), "%s/capture", d.dir);
	(void)snprintf(req, sizeof(req),
		       "{\"id\":1,\"cmd\":\"attach\",\"pid\":%ld,"
		       "\"wait_ms\":60000,\"options\":{\"max_insns\":20000,"
		       "\"capture\":\"%s\"}}\n", (long)t.pid, capdir);
	r = dc_call1(&d, req);
	REQUIRE(dc_ok(r));
	s = (long)dc_num(r, "session");
	cJSON_Delete(r);
	msleep(300);
	sub = dc_connect(&d);
	REQUIRE(sub);
	(void)snprintf(req, sizeof(req), "{\"id\":1,\"cmd\":\"subscribe\","
		       "\"session\":%ld,\"kinds\":[\"insn\"]}\n", s);
	r = dc_call(sub, req);
	CHECK(dc_ok(r));
	cJSON_Delete(r);
	while (!bye && (line = dc_read_line(sub, 120000))) {
		const char *tp = strstr(line, "\"tid\":");

		bye = is_type(line, "bye");
		if (is_type(line, "insn") && tp) {
			pid_t tid = (pid_t)strtol(tp + 6, NULL, 10);
			size_t i = 0;

			while (i < ntids && tids[i] != tid)
				i++;
			if (i == ntids && ntids < PTD_ARRAY_SIZE(tids))
				tids[ntids++] = tid;
			if (i < ntids)
				counts[i]++;
		}
		free(line);
	}
	CHECK(bye);
	dc_close(sub);
	CHECK_EQ_INT(target_tell(t.pid), 0);
	target_finish(&t);
	REQUIRE(ptd_capture_load(capdir, &cap, &diag) == 0);
	CHECK(cap.nthreads > 0);
	for (size_t k = 0; k < cap.nthreads; k++) {
		unsigned got = 0;

		for (size_t i = 0; i < ntids; i++)
			if (tids[i] == cap.threads[k].tid)
				got = counts[i];
		if (got != cap.threads[k].insns)
			CHECK_FAIL_("tid %d: %u insn records streamed, %llu "
				    "executed", (int)cap.threads[k].tid, got,
				    (unsigned long long)cap.threads[k].insns);
	}
	ptd_capture_fini(&cap);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

int main(void)
{
	harness_setup("/tmp/ptdd-XXXXXX");
	RUN(test_check_config);
	RUN(test_bad_requests);
	RUN(test_max_connections);
	RUN(test_max_sessions);
	RUN(test_groundtruth);
	RUN(test_filters_exit_and_fds);
	RUN(test_slow_subscriber);
	RUN(test_detach);
	RUN(test_attach_beside);
	RUN(test_attach_cancelled);
	RUN(test_attach_wait_subscriber);
	RUN(test_snapshot);
	RUN(test_snapshot_paced);
	RUN(test_snapshot_paced_beside);
	RUN(test_ptctl_replay);
	RUN(test_shutdown);
	return harness_done();
}
