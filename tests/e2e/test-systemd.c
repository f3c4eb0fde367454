/* SPDX-License-Identifier: MIT */
/*
 * systemd integration: the units pass `systemd-analyze verify` (and a
 * broken copy does not), the sysusers file creates the ptd group,
 * sd_notify and socket activation (daemon/sdnotify) work for real, and
 * the log speaks the journal's "<N>" prefixes only on the journal stream
 * (daemon/log).  Checks that need a systemd tool say so and are skipped
 * one by one; the rest always run.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "daemon/log.h"
#include "daemon/sdnotify.h"

static char tmpdir[] = "/tmp/ptd-test-systemd-XXXXXX";

static bool have_tool(const char *name)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

/* Run @cmd with stderr folded into stdout; return its exit status and
 * its output in @out. */
static int run(const char *cmd, char *out, size_t cap)
{
	char full[4096];
	size_t n = 0;
	FILE *f;
	int st;

	snprintf(full, sizeof(full), "%s 2>&1", cmd);
	f = popen(full, "r");
	if (!f)
		return -1;
	n = fread(out, 1, cap - 1, f);
	out[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *src_file(const char *rel)
{
	const char *data = getenv("PTD_TEST_DATA");
	char path[4096];
	char *text = NULL;
	size_t len;

	if (!data)
		return NULL;
	snprintf(path, sizeof(path), "%s/../../%s", data, rel);
	if (ptd_file_read_all(path, 1 << 20, &text, &len) < 0)
		return NULL;
	return text;
}

/* Write @text to tmpdir/@name with every "ExecStart=/usr/sbin/ptd"
 * replaced by "ExecStart=@exec". */
static int write_unit(const char *name, const char *text, const char *exec)
{
	const char *key = "ExecStart=/usr/sbin/ptd";
	struct ptd_buf b = { 0 };
	char path[512];
	const char *p = text, *hit;
	int r = 0;

	while ((hit = strstr(p, key))) {
		r |= ptd_buf_append(&b, p, (size_t)(hit - p));
		r |= ptd_buf_append(&b, "ExecStart=", 10);
		r |= ptd_buf_append(&b, exec, strlen(exec));
		p = hit + strlen(key);
	}
	r |= ptd_buf_append(&b, p, strlen(p));
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	if (r == 0)
		r = ptd_file_write_atomic(path, b.data, b.len);
	ptd_buf_fini(&b);
	return r;
}

static int verify(const char *units, char *out, size_t cap)
{
	char cmd[1024];

	/* --man=no: the man pages are not installed in a build tree. */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && SYSTEMD_LOG_COLOR=0 systemd-analyze verify "
		 "--man=no %s", tmpdir, units);
	return run(cmd, out, cap);
}

static void test_units_verify(void)
{
	_cleanup_free_ char *svc = src_file("systemd/ptd.service");
	_cleanup_free_ char *sock = src_file("systemd/ptd.socket");
	const char *root = getenv("PTD_BUILD_ROOT");
	char exec[1024], out[8192];
	_cleanup_free_ char *broken = NULL;
	char *hit;

	REQUIRE(svc && sock);
	if (!have_tool("systemd-analyze")) {
		fprintf(stderr, "SKIP test_units_verify: systemd-analyze "
				"not installed\n");
		return;
	}
	snprintf(exec, sizeof(exec), "%s/daemon/ptd", root ? root : ".");
	if (access(exec, X_OK) != 0) {
		fprintf(stderr, "note: %s not built yet: ExecStart points at "
				"/bin/true\n", exec);
		snprintf(exec, sizeof(exec), "/bin/true");
	}
	REQUIRE(write_unit("ptd.service", svc, exec) == 0);
	REQUIRE(write_unit("ptd.socket", sock, exec) == 0);
	/* Clean: exit 0 and not a single warning (systemd 252 only warns,
	 * exit 0, about unknown keys and bad values). */
	CHECK_EQ_INT(verify("ptd.service ptd.socket", out, sizeof(out)), 0);
	CHECK_EQ_STR(out, "");

	/* Broken copies must be caught: a misspelt hardening key (a
	 * warning), an ExecStart that is not there (an error), a socket
	 * with no Listen line (an error). */
	broken = strdup(svc);
	REQUIRE(broken);
	hit = strstr(broken, "ProtectSystem=");
	REQUIRE(hit);
	memcpy(hit, "ProtectSistem=", 14);
	REQUIRE(write_unit("bad1.service", broken, exec) == 0);
	(void)verify("bad1.service", out, sizeof(out));
	CHECK_CONTAINS(out, "ProtectSistem");
	REQUIRE(write_unit("bad2.service", svc, "/nonexistent/ptd") == 0);
	CHECK(verify("bad2.service", out, sizeof(out)) != 0);
	CHECK_CONTAINS(out, "/nonexistent/ptd");
	free(broken);
	broken = strdup(sock);
	REQUIRE(broken);
	hit = strstr(broken, "ListenStream=");
	REQUIRE(hit);
	memcpy(hit, "#", 1);
	REQUIRE(write_unit("bad3.socket", broken, exec) == 0);
	CHECK(verify("bad3.socket", out, sizeof(out)) != 0);
}

/* What the units promise the rest of ptd (the design's security model). */
static void test_units_content(void)
{
	_cleanup_free_ char *svc = src_file("systemd/ptd.service");
	_cleanup_free_ char *sock = src_file("systemd/ptd.socket");
	static const char *const svc_lines[] = {
		"\nType=notify\n", "\nExecStart=/usr/sbin/ptd\n",
		"\nRestart=on-failure\n", "\nRuntimeDirectory=ptd\n",
		"\nNoNewPrivileges=yes\n", "\nProtectSystem=strict\n",
		"\nProtectHome=read-only\n",
		"\nRestrictAddressFamilies=AF_UNIX\n",
		"\nLimitMEMLOCK=infinity\n",
		"\nMemoryDenyWriteExecute=yes\n",
		"\nSystemCallArchitectures=native\n",
	};
	static const char *const sock_lines[] = {
		"\nListenStream=/run/ptd/ptd.sock\n", "\nSocketMode=0660\n",
		"\nSocketGroup=ptd\n",
	};
	static const char *const caps[] = {
		"CAP_SYS_PTRACE", "CAP_PERFMON", "CAP_IPC_LOCK", "CAP_BPF",
		"CAP_DAC_READ_SEARCH",
	};
	const char *bs, *amb;

	REQUIRE(svc && sock);
	for (size_t i = 0; i < PTD_ARRAY_SIZE(svc_lines); i++)
		CHECK_CONTAINS(svc, svc_lines[i]);
	for (size_t i = 0; i < PTD_ARRAY_SIZE(sock_lines); i++)
		CHECK_CONTAINS(sock, sock_lines[i]);
	bs = strstr(svc, "\nCapabilityBoundingSet=");
	amb = strstr(svc, "\nAmbientCapabilities=");
	REQUIRE(bs && amb);
	for (size_t i = 0; i < PTD_ARRAY_SIZE(caps); i++) {
		CHECK(strstr(bs, caps[i]) < strchr(bs + 1, '\n'));
		CHECK(strstr(amb, caps[i]) < strchr(amb + 1, '\n'));
	}
	/* Never the catch-all capability. */
	CHECK(!strstr(svc, "CAP_SYS_ADMIN C") && !strstr(svc, "CAP_SYS_ADMIN\n"));
	/* The hiding options that would break tracing are not set. */
	CHECK(!strstr(svc, "\nProtectProc="));
	CHECK(!strstr(svc, "\nProcSubset="));
}

static void test_sysusers(void)
{
	char cmd[1024], out[4096], path[512];
	_cleanup_free_ char *group = NULL;
	const char *data = getenv("PTD_TEST_DATA");
	size_t len;

	if (!have_tool("systemd-sysusers")) {
		fprintf(stderr, "SKIP test_sysusers: systemd-sysusers not "
				"installed\n");
		return;
	}
	REQUIRE(data);
	snprintf(path, sizeof(path), "%s/root/etc", tmpdir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && systemd-sysusers "
		 "--root=%s/root %s/../../systemd/ptd.sysusers", path, tmpdir,
		 data);
	CHECK_EQ_INT(run(cmd, out, sizeof(out)), 0);
	snprintf(path, sizeof(path), "%s/root/etc/group", tmpdir);
	REQUIRE(ptd_file_read_all(path, 1 << 16, &group, &len) == 0);
	CHECK(strncmp(group, "ptd:x:", 6) == 0);
}

/* ---- sd_notify ---- */

static int dgram_bind(const struct sockaddr_un *sa, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && bind(fd, (const struct sockaddr *)sa, len) < 0) {
		(void)close(fd);
		return -1;
	}
	return fd;
}

static void recv_eq(int fd, const char *want)
{
	char buf[256];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	CHECK(n >= 0);
	buf[n < 0 ? 0 : n] = '\0';
	CHECK_EQ_STR(buf, want);
}

static void test_notify_path(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	(void)unsetenv("NOTIFY_SOCKET");
	CHECK_EQ_INT(ptd_sd_notify("READY=1"), 0);
	(void)setenv("NOTIFY_SOCKET", "", 1);
	CHECK_EQ_INT(ptd_sd_notify("READY=1"), 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", tmpdir);
	fd = dgram_bind(&sa, sizeof(sa));
	REQUIRE(fd >= 0);
	(void)setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	CHECK_EQ_INT(ptd_sd_notify("READY=1"), 1);
	recv_eq(fd, "READY=1");
	CHECK_EQ_INT(ptd_sd_notify("STOPPING=1\nSTATUS=bye"), 1);
	recv_eq(fd, "STOPPING=1\nSTATUS=bye");
	CHECK_EQ_INT(ptd_sd_notify(""), -EINVAL);
	CHECK_EQ_INT(ptd_sd_notify(NULL), -EINVAL);
	(void)close(fd);
	/* Nobody listening there any more. */
	(void)unlink(sa.sun_path);
	CHECK_EQ_INT(ptd_sd_notify("READY=1"), -ENOENT);
	(void)unsetenv("NOTIFY_SOCKET");
}

/* A receiver that does not read fills its queue; sending must not wait
 * for it (the control loop sends STATUS= on every change: a blocked send
 * stopped the daemon in test-security, whose notify socket is read only
 * at start).  Each send returns at once: sent, or -EAGAIN dropped. */
static void test_notify_full_queue(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, sent = 0, dropped = 0;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify-full", tmpdir);
	fd = dgram_bind(&sa, sizeof(sa));
	REQUIRE(fd >= 0);
	(void)setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	alarm(20);	/* a blocking send would hang here: fail instead */
	for (int i = 0; i < 2000; i++) {
		int r = ptd_sd_notify("STATUS=1 session(s), 1 client(s)");

		if (r == 1)
			sent++;
		else if (r == -EAGAIN)
			dropped++;
		else
			CHECK_FAIL_("send %d: %d", i, r);
	}
	alarm(0);
	CHECK(sent > 0);
	CHECK(dropped > 0);
	fprintf(stderr, "  %d sent, %d dropped on a full queue\n", sent,
		dropped);
	(void)close(fd);
	(void)unlink(sa.sun_path);
	(void)unsetenv("NOTIFY_SOCKET");
}

/* Fill @fd's queue with STATUS= updates until one is dropped. */
static void fill_queue(void)
{
	for (int i = 0; i < 4000; i++)
		if (ptd_sd_notify("STATUS=filler") == -EAGAIN)
			return;
	CHECK_FAIL_("%s", "the notify queue never filled");
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* READY=1 is not dropped like a STATUS= update: on a full queue it waits
 * (up to a second) for the reader, and gives up with -EAGAIN when no
 * reader comes, rather than stopping the control loop. */
static void test_notify_ready_retry(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char buf[256], last[256] = "";
	double t0, waited;
	pid_t pid;
	int fd, st;
	ssize_t n;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify-retry",
		 tmpdir);
	fd = dgram_bind(&sa, sizeof(sa));
	REQUIRE(fd >= 0);
	(void)setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	alarm(20);

	/* No reader: READY=1 retries, then reports the full queue. */
	fill_queue();
	t0 = now_s();
	CHECK_EQ_INT(ptd_sd_notify("READY=1"), -EAGAIN);
	waited = now_s() - t0;
	CHECK(waited >= 0.5);
	fprintf(stderr, "  READY=1 gave up after %.2f s\n", waited);

	/* A reader that frees one slot 200 ms later: READY=1 gets through
	 * and is the last message in the queue. */
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		(void)nanosleep(&(struct timespec){ 0, 200 * 1000 * 1000 },
				NULL);
		_exit(recv(fd, buf, sizeof(buf), 0) > 0 ? 0 : 1);
	}
	CHECK_EQ_INT(ptd_sd_notify("READY=1"), 1);
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	while ((n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
		buf[n] = '\0';
		memcpy(last, buf, (size_t)n + 1);
	}
	CHECK_EQ_STR(last, "READY=1");
	alarm(0);
	(void)close(fd);
	(void)unlink(sa.sun_path);
	(void)unsetenv("NOTIFY_SOCKET");
}

static void test_notify_abstract(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char name[64];
	socklen_t len;
	int fd;

	snprintf(name, sizeof(name), "@ptd-test-notify-%d", (int)getpid());
	memcpy(sa.sun_path, name, strlen(name));
	sa.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
			  strlen(name));
	fd = dgram_bind(&sa, len);
	REQUIRE(fd >= 0);
	(void)setenv("NOTIFY_SOCKET", name, 1);
	CHECK_EQ_INT(ptd_sd_notify("READY=1"), 1);
	recv_eq(fd, "READY=1");
	(void)close(fd);
	(void)unsetenv("NOTIFY_SOCKET");
}

static void test_notify_bad_env(void)
{
	char longpath[200];

	(void)setenv("NOTIFY_SOCKET", "relative/notify", 1);
	CHECK_EQ_INT(ptd_sd_notify("READY=1"), -EINVAL);
	(void)setenv("NOTIFY_SOCKET", "@", 1);
	CHECK_EQ_INT(ptd_sd_notify("READY=1"), -EINVAL);
	memset(longpath, 'a', sizeof(longpath));
	longpath[0] = '/';
	longpath[108] = '\0';	/* 108 bytes + NUL: one too many */
	(void)setenv("NOTIFY_SOCKET", longpath, 1);
	CHECK_EQ_INT(ptd_sd_notify("READY=1"), -EINVAL);
	(void)unsetenv("NOTIFY_SOCKET");
}

/* ---- socket activation, each case in a child (fds from 3) ---- */

/* Put @fd at @target (dup2 is what systemd itself does here). */
static void place_fd(int fd, int target)
{
	if (fd != target) {
		if (dup2(fd, target) < 0)
			_exit(99);
		(void)close(fd);
	}
}

static int unix_listener(int type, bool do_listen)
{
	int fd = socket(AF_UNIX, type, 0);	/* no CLOEXEC, as passed */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (fd < 0)
		_exit(98);
	/* Only the family: the kernel picks an abstract name (autobind). */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa_family_t)) < 0)
		_exit(95);
	if (do_listen && listen(fd, 1) < 0)
		_exit(97);
	return fcntl(fd, F_DUPFD, 100);
}

static void set_listen_env(const char *pid, const char *fds)
{
	char buf[32];

	if (!pid) {
		snprintf(buf, sizeof(buf), "%d", (int)getpid());
		pid = buf;
	}
	(void)setenv("LISTEN_PID", pid, 1);
	if (fds)
		(void)setenv("LISTEN_FDS", fds, 1);
	(void)setenv("LISTEN_FDNAMES", "ptd.socket", 1);
}

static bool env_clean(void)
{
	return !getenv("LISTEN_PID") && !getenv("LISTEN_FDS") &&
	       !getenv("LISTEN_FDNAMES");
}

enum la_case {
	LA_GOOD, LA_NONE, LA_OTHER_PID, LA_BAD_PID, LA_BAD_FDS, LA_NO_FDS,
	LA_TOO_MANY, LA_CLOSED, LA_PIPE, LA_DGRAM, LA_NOT_LISTENING, LA_INET,
};

static const struct {
	enum la_case c;
	int want;
	const char *msg;
} la_cases[] = {
	{ LA_GOOD, 2, "" },
	{ LA_NONE, 0, "" },
	{ LA_OTHER_PID, 0, "" },
	{ LA_BAD_PID, -PTD_EFORMAT, "$LISTEN_PID is not a process id" },
	{ LA_BAD_FDS, -PTD_EFORMAT, "$LISTEN_FDS is not a number" },
	{ LA_NO_FDS, -PTD_EFORMAT, "$LISTEN_FDS is missing" },
	{ LA_TOO_MANY, -PTD_ELIMIT, "3 sockets passed, at most 2 expected" },
	{ LA_CLOSED, -EBADF, "fd 4 is not open" },
	{ LA_PIPE, -ENOTSOCK, "fd 3 is not a socket" },
	{ LA_DGRAM, -EINVAL, "fd 3 is not a stream socket" },
	{ LA_NOT_LISTENING, -EINVAL, "fd 3 is not listening" },
	{ LA_INET, -EINVAL, "fd 3 is not an AF_UNIX socket" },
};

static void la_child(size_t i)
{
	enum la_case c = la_cases[i].c;
	struct ptd_diag d = { "" };
	int fds[2] = { -7, -7 }, p[2], a, b;

	a = unix_listener(SOCK_STREAM, true);
	b = unix_listener(SOCK_STREAM, true);
	place_fd(a, 3);
	place_fd(b, 4);
	switch (c) {
	case LA_GOOD:
	case LA_NONE:
		break;
	case LA_OTHER_PID:
		set_listen_env("1", "2");
		break;
	case LA_BAD_PID:
		set_listen_env("12x", "2");
		break;
	case LA_BAD_FDS:
		set_listen_env(NULL, "-1");
		break;
	case LA_NO_FDS:
		set_listen_env(NULL, NULL);
		break;
	case LA_TOO_MANY:
		set_listen_env(NULL, "3");
		break;
	case LA_CLOSED:
		(void)close(4);
		break;
	case LA_PIPE:
		if (pipe(p) < 0)
			_exit(96);
		place_fd(fcntl(p[0], F_DUPFD, 100), 3);
		break;
	case LA_DGRAM:
		place_fd(unix_listener(SOCK_DGRAM, false), 3);
		break;
	case LA_NOT_LISTENING:
		place_fd(unix_listener(SOCK_STREAM, false), 3);
		break;
	case LA_INET:
		place_fd(fcntl(socket(AF_INET, SOCK_STREAM, 0), F_DUPFD, 100),
			 3);
		break;
	}
	if (c == LA_GOOD || c == LA_CLOSED || c == LA_PIPE || c == LA_DGRAM ||
	    c == LA_NOT_LISTENING || c == LA_INET)
		set_listen_env(NULL, "2");
	CHECK_EQ_INT(ptd_sd_listen_fds(fds, 2, &d), la_cases[i].want);
	CHECK_CONTAINS(d.msg, la_cases[i].msg);
	CHECK(env_clean());
	if (la_cases[i].want == 2) {
		CHECK_EQ_INT(fds[0], 3);
		CHECK_EQ_INT(fds[1], 4);
		CHECK(fcntl(3, F_GETFD) & FD_CLOEXEC);
		CHECK(fcntl(4, F_GETFD) & FD_CLOEXEC);
	} else {
		/* Not written on failure or when there is nothing. */
		CHECK_EQ_INT(fds[0], -7);
		CHECK_EQ_INT(fds[1], -7);
	}
	_exit(check_failures ? 1 : 0);
}

static void test_listen_fds(void)
{
	for (size_t i = 0; i < PTD_ARRAY_SIZE(la_cases); i++) {
		pid_t pid = fork();
		int st = -1;

		REQUIRE(pid >= 0);
		if (pid == 0)
			la_child(i);
		(void)waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			CHECK_FAIL_("socket activation case %zu (enum %d) "
				    "failed: status 0x%x", i,
				    (int)la_cases[i].c, st);
	}
}

/* ---- log ---- */

static void log_read(int fd, char *out, size_t cap)
{
	ssize_t n = read(fd, out, cap - 1);

	out[n < 0 ? 0 : n] = '\0';
}

static void test_log_plain(void)
{
	char out[4096], big[3000];
	int p[2];

	REQUIRE(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
	(void)unsetenv("JOURNAL_STREAM");
	ptd_log_init_fd(PTD_LOG_INFO, p[1]);
	CHECK_EQ_INT(ptd_log_get_level(), PTD_LOG_INFO);
	ptd_log_info("attached to pid %d", 42);
	log_read(p[0], out, sizeof(out));
	CHECK_EQ_STR(out, "ptd: info: attached to pid 42\n");
	ptd_log_debug("hidden");
	ptd_log_warning("w");
	ptd_log_error("e");
	log_read(p[0], out, sizeof(out));
	CHECK_EQ_STR(out, "ptd: warning: w\nptd: error: e\n");
	ptd_log_set_level(PTD_LOG_DEBUG);
	ptd_log_debug("d");
	log_read(p[0], out, sizeof(out));
	CHECK_EQ_STR(out, "ptd: debug: d\n");
	ptd_log_set_level(PTD_LOG_ERROR);
	ptd_log_warning("hidden");
	ptd_log_err(PTD_LOG_ERROR, -ENOENT, "cannot open '%s'", "x");
	ptd_log_err(PTD_LOG_ERROR, -PTD_EFORMAT, "bad");
	log_read(p[0], out, sizeof(out));
	CHECK_EQ_STR(out, "ptd: error: cannot open 'x': No such file or "
			  "directory\nptd: error: bad: malformed input\n");
	/* A client's string cannot start a line of its own. */
	ptd_log_error("name '%s'", "a\nptd: error: forged\r");
	log_read(p[0], out, sizeof(out));
	CHECK_EQ_STR(out, "ptd: error: name 'a ptd: error: forged '\n");
	/* errno survives logging. */
	errno = EDOM;
	ptd_log_error("x");
	CHECK_EQ_INT(errno, EDOM);
	log_read(p[0], out, sizeof(out));
	/* A long message is cut, still one line. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ptd_log_err(PTD_LOG_ERROR, -EIO, "%s", big);
	log_read(p[0], out, sizeof(out));
	CHECK(strlen(out) < sizeof(out) - 1);
	CHECK(strlen(out) >= 1000);
	CHECK_EQ_INT(out[strlen(out) - 1], '\n');
	CHECK(strchr(out, '\n') == out + strlen(out) - 1);
	(void)close(p[0]);
	(void)close(p[1]);
}

static void test_log_journal(void)
{
	char out[256], env[64];
	struct stat st;
	int p[2];

	REQUIRE(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
	REQUIRE(fstat(p[1], &st) == 0);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	(void)setenv("JOURNAL_STREAM", env, 1);
	ptd_log_init_fd(PTD_LOG_DEBUG, p[1]);
	ptd_log_error("e");
	ptd_log_warning("w");
	ptd_log_info("i");
	ptd_log_debug("d");
	log_read(p[0], out, sizeof(out));
	CHECK_EQ_STR(out, "<3>e\n<4>w\n<6>i\n<7>d\n");
	/* Another stream (stderr redirected elsewhere): plain. */
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino + 1);
	(void)setenv("JOURNAL_STREAM", env, 1);
	ptd_log_init_fd(PTD_LOG_INFO, p[1]);
	ptd_log_info("i");
	log_read(p[0], out, sizeof(out));
	CHECK_EQ_STR(out, "ptd: info: i\n");
	(void)setenv("JOURNAL_STREAM", "garbage", 1);
	ptd_log_init_fd(PTD_LOG_INFO, p[1]);
	ptd_log_info("i");
	log_read(p[0], out, sizeof(out));
	CHECK_EQ_STR(out, "ptd: info: i\n");
	(void)unsetenv("JOURNAL_STREAM");
	ptd_log_init(PTD_LOG_INFO);
	(void)close(p[0]);
	(void)close(p[1]);
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		SKIP_ALL("cannot create a temporary directory");
	RUN(test_units_verify);
	RUN(test_units_content);
	RUN(test_sysusers);
	RUN(test_notify_path);
	RUN(test_notify_abstract);
	RUN(test_notify_full_queue);
	RUN(test_notify_ready_retry);
	RUN(test_notify_bad_env);
	RUN(test_listen_fds);
	RUN(test_log_plain);
	RUN(test_log_journal);
	(void)ptd_rm_rf(tmpdir);
	return check_done();
}
