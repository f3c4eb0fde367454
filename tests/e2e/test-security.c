/* SPDX-License-Identifier: MIT */
/*
 * The security model end to end: ptd runs as root; a client connected as
 * an unprivileged user (ptdtest, created if missing, else nobody) may
 * attach only to its own processes, and cannot see, query, stream or
 * detach root's sessions -- those answer exactly as a session that does
 * not exist would.  The daemon carries on after every refusal.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "common/fileio.h"
#include "common/strutil.h"

#define OTHER_UID 4242		/* a uid that is neither root nor the user */

static uid_t user_uid;
static gid_t user_gid;
static char tmpdir[] = "/tmp/ptd-test-security-XXXXXX";
static char sock_path[256];
static pid_t ptd_pid = -1;
static int notify_fd = -1;
static pid_t targets[8];
static size_t ntargets;

static void find_user(void)
{
	struct passwd *pw = getpwnam("ptdtest");

	if (!pw) {
		int r = system("useradd --system --no-create-home "
			       "--shell /usr/sbin/nologin ptdtest "
			       ">/dev/null 2>&1");
		pw = r == 0 ? getpwnam("ptdtest") : NULL;
	}
	if (!pw)
		pw = getpwnam("nobody");
	if (!pw || pw->pw_uid == 0 || pw->pw_uid == OTHER_UID)
		SKIP_ALL("no unprivileged user (ptdtest or nobody)");
	user_uid = pw->pw_uid;
	user_gid = pw->pw_gid;
}

static void drop_to(uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0)
		_exit(126);
}

/* /bin/sleep as @uid, after its exec (a CLOEXEC pipe closes then). */
static pid_t spawn_sleep(uid_t uid, gid_t gid)
{
	int p[2];
	char c;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		if (uid)
			drop_to(uid, gid);
		execl("/bin/sleep", "sleep", "300", (char *)NULL);
		_exit(127);
	}
	(void)close(p[1]);
	while (pid > 0 && read(p[0], &c, 1) > 0)
		;
	(void)close(p[0]);
	if (pid > 0 && ntargets < PTD_ARRAY_SIZE(targets))
		targets[ntargets++] = pid;
	return pid;
}

/* ---- the daemon ---- */

static void dump_log(void)
{
	_cleanup_free_ char *log = NULL;
	char path[512];
	size_t len;

	snprintf(path, sizeof(path), "%s/ptd.log", tmpdir);
	if (ptd_file_read_all(path, 1 << 20, &log, &len) == 0)
		fprintf(stderr, "---- ptd log ----\n%s-----------------\n", log);
}

/* Wait up to @ms for a notify datagram containing @want (ptd also sends
 * STATUS= updates); returns the last datagram seen, or "". */
static const char *wait_notify(const char *want, int ms, char *buf,
			       size_t cap)
{
	struct pollfd pfd = { .fd = notify_fd, .events = POLLIN };
	struct timespec t0, t;
	ssize_t n;

	buf[0] = '\0';
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		long left;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = ms - ((t.tv_sec - t0.tv_sec) * 1000 +
			     (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&pfd, 1, (int)left) != 1)
			return buf;
		n = recv(notify_fd, buf, cap - 1, 0);
		buf[n < 0 ? 0 : n] = '\0';
		if (strstr(buf, want))
			return buf;
	}
}

static bool start_ptd(const char *exe)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char conf[512], text[1024], logp[512], buf[256];
	int n;

	snprintf(sock_path, sizeof(sock_path), "%s/ptd.sock", tmpdir);
	n = snprintf(text, sizeof(text),
		     "socket_path = %s\n"
		     "socket_group = root\n"
		     "socket_mode = 0666\n"
		     "intel_pt_sysfs = %s/no-intel-pt\n"
		     "software_source = yes\n"
		     "log_level = debug\n",
		     sock_path, tmpdir);
	snprintf(conf, sizeof(conf), "%s/ptd.conf", tmpdir);
	if (ptd_file_write_atomic(conf, text, (size_t)n) < 0)
		return false;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", tmpdir);
	notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (notify_fd < 0 ||
	    bind(notify_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return false;
	snprintf(logp, sizeof(logp), "%s/ptd.log", tmpdir);
	ptd_pid = fork();
	if (ptd_pid == 0) {
		int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(125);
		(void)setenv("NOTIFY_SOCKET", sa.sun_path, 1);
		(void)unsetenv("LISTEN_FDS");
		(void)unsetenv("LISTEN_PID");
		execl(exe, "ptd", "-c", conf, (char *)NULL);
		_exit(127);
	}
	if (ptd_pid < 0)
		return false;
	/* Type=notify: ready when it says so. */
	if (!strstr(wait_notify("READY=1", 30000, buf, sizeof(buf)),
		    "READY=1")) {
		fprintf(stderr, "ptd sent no READY=1 (got \"%s\")\n", buf);
		dump_log();
		return false;
	}
	return true;
}

static int stop_ptd(void)
{
	char buf[256];
	int st = -1;

	if (ptd_pid <= 0)
		return -1;
	/* The STATUS= updates since start fill the notify queue (ptd drops
	 * what does not fit rather than wait): empty it, as systemd would
	 * have, so that STOPPING=1 finds room. */
	while (recv(notify_fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
	(void)kill(ptd_pid, SIGTERM);
	CHECK_CONTAINS(wait_notify("STOPPING=1", 15000, buf, sizeof(buf)),
		       "STOPPING=1");
	(void)waitpid(ptd_pid, &st, 0);
	ptd_pid = -1;
	return st;
}

/* ---- clients ---- */

static int connect_sock(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (strlen(sock_path) >= sizeof(sa.sun_path)) {
		(void)close(fd);
		return -1;
	}
	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		(void)close(fd);
		return -1;
	}
	return fd;
}

/* A connection made by a process of @uid: a child becomes the user,
 * connects (the kernel records its credentials at connect()), and hands
 * the socket back over SCM_RIGHTS. */
static int connect_as(uid_t uid, gid_t gid)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = { 0 };
	struct iovec iov;
	char c = 'x';
	int sv[2], fd = -1;
	pid_t pid;

	if (uid == 0)
		return connect_sock();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int s;

		drop_to(uid, gid);
		s = connect_sock();
		if (s < 0)
			_exit(1);
		iov = (struct iovec){ &c, 1 };
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = u.b;
		m.msg_controllen = sizeof(u.b);
		CMSG_FIRSTHDR(&m)->cmsg_level = SOL_SOCKET;
		CMSG_FIRSTHDR(&m)->cmsg_type = SCM_RIGHTS;
		CMSG_FIRSTHDR(&m)->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(CMSG_FIRSTHDR(&m)), &s, sizeof(int));
		_exit(sendmsg(sv[1], &m, 0) == 1 ? 0 : 2);
	}
	(void)close(sv[1]);
	iov = (struct iovec){ &c, 1 };
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.b;
	m.msg_controllen = sizeof(u.b);
	if (pid > 0 && recvmsg(sv[0], &m, MSG_CMSG_CLOEXEC) == 1 &&
	    CMSG_FIRSTHDR(&m) && CMSG_FIRSTHDR(&m)->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	(void)close(sv[0]);
	if (pid > 0)
		(void)waitpid(pid, NULL, 0);
	return fd;
}

/* Send one request line; return the response with the same id (records
 * a stream may interleave are skipped), or NULL after 20 s. */
static cJSON *request(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int next_id = 1;

static cJSON *request(int fd, const char *fmt, ...)
{
	char line[1024], body[900];
	static char buf[1 << 16];
	static size_t have;
	static int buf_fd = -1;
	int id = next_id++;
	va_list ap;

	if (buf_fd != fd) {
		have = 0;
		buf_fd = fd;
	}
	va_start(ap, fmt);
	(void)vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	snprintf(line, sizeof(line), "{\"id\":%d,%s}\n", id, body);
	if (ptd_write_all(fd, line, strlen(line)) < 0)
		return NULL;
	for (;;) {
		char *nl = memchr(buf, '\n', have);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		while (nl) {
			cJSON *j;
			const cJSON *rid;

			*nl = '\0';
			j = cJSON_Parse(buf);
			have -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, have);
			rid = cJSON_GetObjectItemCaseSensitive(j, "id");
			if (cJSON_IsNumber(rid) && rid->valueint == id)
				return j;
			cJSON_Delete(j);
			nl = memchr(buf, '\n', have);
		}
		if (poll(&pfd, 1, 20000) != 1) {
			fprintf(stderr, "request: no response in 20 s\n");
			return NULL;
		}
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0) {
			fprintf(stderr, "request: connection closed (%s)\n",
				n < 0 ? strerror(errno) : "EOF");
			return NULL;
		}
		have += (size_t)n;
	}
}

static bool resp_ok(const cJSON *r)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"));
}

static const char *resp_err(const cJSON *r, const char *field)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, field);

	return cJSON_IsString(f) ? f->valuestring : "(none)";
}

static double resp_num(const cJSON *r, const char *field)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(r, "result");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(res, field);

	return cJSON_IsNumber(f) ? f->valuedouble : -1;
}

/* Is session @id in the result of a list? */
static bool listed(const cJSON *r, double id)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(r, "result");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(res, "sessions");
	const cJSON *s;

	cJSON_ArrayForEach(s, a) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "session");

		if (cJSON_IsNumber(v) && v->valuedouble == id)
			return true;
	}
	return false;
}

static void check_alive(int fd)
{
	cJSON *r = request(fd, "\"cmd\":\"ping\"");

	CHECK(r && resp_ok(r));
	cJSON_Delete(r);
	CHECK(ptd_pid > 0 && waitpid(ptd_pid, NULL, WNOHANG) == 0);
}

/* The user's view of session @id must be exactly that of @missing, a
 * session id that never existed: same code, same message but the id. */
static void check_invisible(int ufd, double id, double missing)
{
	static const char *const cmds[] = { "status", "detach", "subscribe" };

	for (size_t i = 0; i < PTD_ARRAY_SIZE(cmds); i++) {
		cJSON *a = request(ufd, "\"cmd\":\"%s\",\"session\":%.0f",
				   cmds[i], id);
		cJSON *b = request(ufd, "\"cmd\":\"%s\",\"session\":%.0f",
				   cmds[i], missing);
		char want[256];

		REQUIRE(a && b);
		CHECK(!resp_ok(a));
		CHECK_EQ_STR(resp_err(a, "code"), "no_such_session");
		CHECK_EQ_STR(resp_err(b, "code"), "no_such_session");
		/* Same text once the numbers are swapped. */
		{
			char idm[32], *hit;
			const char *bm = resp_err(b, "message");

			snprintf(idm, sizeof(idm), "%.0f", missing);
			hit = strstr(bm, idm);
			if (hit)
				snprintf(want, sizeof(want), "%.*s%.0f%s",
					 (int)(hit - bm), bm, id,
					 hit + strlen(idm));
			else
				snprintf(want, sizeof(want), "%s", bm);
		}
		CHECK_EQ_STR(resp_err(a, "message"), want);
		cJSON_Delete(a);
		cJSON_Delete(b);
	}
}

static void test_security(void)
{
	pid_t root_p = spawn_sleep(0, 0);
	pid_t user_p = spawn_sleep(user_uid, user_gid);
	pid_t other_p = spawn_sleep(OTHER_UID, OTHER_UID);
	int rfd = connect_as(0, 0), ufd = connect_as(user_uid, user_gid);
	double root_s, user_s;
	char want[256];
	cJSON *r;

	REQUIRE(root_p > 0 && user_p > 0 && other_p > 0);
	REQUIRE(rfd >= 0 && ufd >= 0);

	/* Root attaches to its process. */
	r = request(rfd, "\"cmd\":\"attach\",\"pid\":%d", (int)root_p);
	REQUIRE(r);
	CHECK(resp_ok(r));
	if (!resp_ok(r))
		fprintf(stderr, "root attach: %s\n", resp_err(r, "message"));
	root_s = resp_num(r, "session");
	cJSON_Delete(r);
	REQUIRE(root_s >= 0);

	/* The user may not attach to root's process, nor another user's;
	 * the message says which rule refused. */
	r = request(ufd, "\"cmd\":\"attach\",\"pid\":%d", (int)root_p);
	REQUIRE(r);
	CHECK(!resp_ok(r));
	CHECK_EQ_STR(resp_err(r, "code"), "permission_denied");
	snprintf(want, sizeof(want), "pid %d belongs to uid 0, you are uid %u",
		 (int)root_p, (unsigned)user_uid);
	CHECK_CONTAINS(resp_err(r, "message"), want);
	cJSON_Delete(r);
	check_alive(ufd);

	r = request(ufd, "\"cmd\":\"attach\",\"pid\":%d", (int)other_p);
	REQUIRE(r);
	CHECK(!resp_ok(r));
	CHECK_EQ_STR(resp_err(r, "code"), "permission_denied");
	snprintf(want, sizeof(want), "pid %d belongs to uid %u, you are uid %u",
		 (int)other_p, OTHER_UID, (unsigned)user_uid);
	CHECK_CONTAINS(resp_err(r, "message"), want);
	cJSON_Delete(r);
	check_alive(ufd);

	/* Root's session is invisible to the user: not listed, and status,
	 * detach and subscribe answer as for a session that never was. */
	r = request(ufd, "\"cmd\":\"list\"");
	REQUIRE(r);
	CHECK(resp_ok(r));
	CHECK(!listed(r, root_s));
	cJSON_Delete(r);
	check_invisible(ufd, root_s, root_s + 1000);

	/* ...and still running: the user's detach did nothing. */
	r = request(rfd, "\"cmd\":\"status\",\"session\":%.0f", root_s);
	REQUIRE(r);
	CHECK(resp_ok(r));
	{
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(r, "result"),
			"state");

		CHECK(cJSON_IsString(st) &&
		      strcmp(st->valuestring, "running") == 0);
	}
	cJSON_Delete(r);

	/* Its own process: allowed, listed for it and for root. */
	r = request(ufd, "\"cmd\":\"attach\",\"pid\":%d", (int)user_p);
	REQUIRE(r);
	CHECK(resp_ok(r));
	if (!resp_ok(r))
		fprintf(stderr, "user attach: %s\n", resp_err(r, "message"));
	user_s = resp_num(r, "session");
	cJSON_Delete(r);
	r = request(ufd, "\"cmd\":\"list\"");
	REQUIRE(r);
	CHECK(listed(r, user_s));
	CHECK(!listed(r, root_s));
	cJSON_Delete(r);
	r = request(rfd, "\"cmd\":\"list\"");
	REQUIRE(r);
	CHECK(listed(r, user_s));
	CHECK(listed(r, root_s));
	cJSON_Delete(r);

	/* Each detaches its own. */
	r = request(ufd, "\"cmd\":\"detach\",\"session\":%.0f", user_s);
	CHECK(r && resp_ok(r));
	cJSON_Delete(r);
	r = request(rfd, "\"cmd\":\"detach\",\"session\":%.0f", root_s);
	CHECK(r && resp_ok(r));
	cJSON_Delete(r);
	check_alive(rfd);
	(void)close(ufd);
	(void)close(rfd);
}

/* ---- replay: files are read with the client's permissions ---- */

static char build_root[512];

/* `ptctl trace --out OUT --no-decode PROG 1` as root, then give OUT to
 * @uid (0: keep root's). */
static bool make_capture(const char *prog, const char *out, uid_t uid,
			 gid_t gid)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "'%s/daemon/ptctl' trace --out '%s' --no-decode "
		 "--max-insns 3000 --quiet-target '%s' 1 >/dev/null 2>&1",
		 build_root, out, prog);
	if (system(cmd) != 0)
		return false;
	snprintf(cmd, sizeof(cmd), "chown -R %u:%u '%s'", (unsigned)uid,
		 (unsigned)gid, out);
	return system(cmd) == 0;
}

struct replay_out {
	bool ok;
	char code[64], message[512];
	unsigned insns, in_module;	/* insn records, of them in @module */
	bool bye;
	unsigned lines;			/* after the subscribe request */
	char last[160];			/* the last of them */
};

/* A line from @fd through @buf (its own buffer), or NULL. */
static char *rline(int fd, char *buf, size_t cap, size_t *have)
{
	for (;;) {
		char *nl = memchr(buf, '\n', *have);
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;

		if (nl) {
			size_t l = (size_t)(nl - buf);
			char *s = strndup(buf, l);

			*have -= l + 1;
			memmove(buf, nl + 1, *have);
			return s;
		}
		if (*have == cap || poll(&p, 1, 30000) != 1)
			return NULL;
		n = read(fd, buf + *have, cap - *have);
		if (n <= 0)
			return NULL;
		*have += (size_t)n;
	}
}

/* Replay @path as @uid, lossless, stream it, count insns in @module. */
static void replay_as(uid_t uid, gid_t gid, const char *path,
		      const char *module, struct replay_out *o)
{
	static char buf[1 << 16];
	size_t have = 0;
	char line[1024];
	int fd = connect_as(uid, gid);
	char *l;
	cJSON *r;

	memset(o, 0, sizeof(*o));
	if (fd < 0)
		return;
	snprintf(line, sizeof(line),
		 "{\"id\":1,\"cmd\":\"replay\",\"path\":\"%s\","
		 "\"lossless\":true}\n", path);
	if (ptd_write_all(fd, line, strlen(line)) < 0 ||
	    !(l = rline(fd, buf, sizeof(buf), &have))) {
		(void)close(fd);
		return;
	}
	r = cJSON_Parse(l);
	free(l);
	o->ok = resp_ok(r);
	snprintf(o->code, sizeof(o->code), "%s", resp_err(r, "code"));
	snprintf(o->message, sizeof(o->message), "%s",
		 resp_err(r, "message"));
	if (o->ok) {
		snprintf(line, sizeof(line),
			 "{\"id\":2,\"cmd\":\"subscribe\",\"session\":%.0f}\n",
			 resp_num(r, "session"));
		(void)ptd_write_all(fd, line, strlen(line));
		while ((l = rline(fd, buf, sizeof(buf), &have))) {
			o->lines++;
			snprintf(o->last, sizeof(o->last), "%s", l);
			if (!strncmp(l, "{\"type\":\"insn\"", 14)) {
				o->insns++;
				o->in_module += strstr(l, module) != NULL;
			}
			if (!strncmp(l, "{\"type\":\"bye\"", 13))
				o->bye = true;
			free(l);
			if (o->bye)
				break;
		}
	}
	cJSON_Delete(r);
	(void)close(fd);
}

static void test_replay_permissions(void)
{
	const char *progs = getenv("PTD_TEST_PROGS");
	char prog[512], ucap[300], rcap[300], cmd[1024];
	struct replay_out o;

	if (!progs) {
		fprintf(stderr, "PTD_TEST_PROGS not set: replay not tested\n");
		return;
	}
	snprintf(prog, sizeof(prog), "%s/prog-loop", progs);
	snprintf(ucap, sizeof(ucap), "%s/ucap", tmpdir);
	snprintf(rcap, sizeof(rcap), "%s/rcap", tmpdir);
	REQUIRE(make_capture(prog, ucap, user_uid, user_gid));
	REQUIRE(make_capture(prog, rcap, 0, 0));

	/* The user replays its own capture. */
	replay_as(user_uid, user_gid, ucap, "prog-loop", &o);
	CHECK(o.ok);
	if (!o.ok)
		fprintf(stderr, "user replay: %s\n", o.message);
	CHECK(o.bye);
	CHECK(o.insns > 1000);

	/* Root's capture with a 0600 manifest: refused, naming the file;
	 * root itself may replay it. */
	snprintf(cmd, sizeof(cmd), "%s/capture.json", rcap);
	REQUIRE(chmod(cmd, 0600) == 0);
	replay_as(user_uid, user_gid, rcap, "prog-loop", &o);
	CHECK(!o.ok);
	CHECK_EQ_STR(o.code, "permission_denied");
	CHECK_CONTAINS(o.message, cmd);
	replay_as(0, 0, rcap, "prog-loop", &o);
	CHECK(o.ok && o.bye && o.insns > 1000);
	if (!(o.ok && o.bye && o.insns > 1000))
		fprintf(stderr, "root replay: ok %d, %u lines, %u insns, bye %d, "
			"last line: %s\n", o.ok, o.lines, o.insns, o.bye,
			o.last);
}

/* A client that is not root may not reach a socket it has no access to:
 * the daemon applied socket_mode (0666 here) -- and the default 0660 is
 * what the shipped config asks. */
static void test_socket_mode(void)
{
	struct stat st;

	REQUIRE(stat(sock_path, &st) == 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_EQ_INT(st.st_mode & 07777, 0666);
}

int main(void)
{
	const char *root = getenv("PTD_BUILD_ROOT");
	char exe[1024];
	int st;

	if (geteuid() != 0)
		SKIP_ALL("needs root: runs ptd and clients as another user");
	snprintf(exe, sizeof(exe), "%s/daemon/ptd", root ? root : ".");
	if (access(exe, X_OK) != 0)
		SKIP_ALL("%s not built (daemon/ptd.c missing?)", exe);
	find_user();
	if (!mkdtemp(tmpdir))
		SKIP_ALL("cannot create a temporary directory");
	(void)chmod(tmpdir, 0755);
	signal(SIGPIPE, SIG_IGN);
	if (!start_ptd(exe)) {
		CHECK_FAIL_("%s", "ptd did not start");
		return check_done();
	}
	RUN(test_socket_mode);
	RUN(test_security);
	snprintf(build_root, sizeof(build_root), "%s", root ? root : ".");
	RUN(test_replay_permissions);
	st = stop_ptd();
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (check_failures)
		dump_log();
	for (size_t i = 0; i < ntargets; i++) {
		(void)kill(targets[i], SIGKILL);
		(void)waitpid(targets[i], NULL, 0);
	}
	(void)ptd_rm_rf(tmpdir);
	return check_done();
}
