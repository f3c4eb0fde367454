/* SPDX-License-Identifier: MIT */
/*
 * For end-to-end tests that run the real daemon: ptd started from the
 * build tree with a config of its own in a scratch directory (its socket
 * and log there), ptctl run against it, and a prog-attach target held
 * before its first instruction until the test releases it.
 *
 * Header-only, one copy per test.  Three directories, which main() fills
 * with harness_setup (or by hand) before calling anything else here:
 *   build_root  the meson build directory (daemon/ptd, daemon/ptctl)
 *   progs       the test programs (prog-attach)
 *   tmpdir      its scratch directory; each daemon gets tmpdir/NAME
 * Include check.h first.
 */
#ifndef PTD_TESTS_E2E_DAEMON_HARNESS_H
#define PTD_TESTS_E2E_DAEMON_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "catching.h"
#include "spawn-piped.h"

static char build_root[1024], progs[1024], tmpdir[256];

struct daemon {
	pid_t pid;
	char dir[512];
	char conf[600];
	char sock[600];
};

static inline void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static inline int write_file(const char *path, const char *text)
{
	return ptd_file_write_atomic(path, text, strlen(text));
}

/* Wait for child @pid; its exit code, 128+signal, or -1. */
/* Copy @src to @dst with mode @mode (owned by root): a program another
 * user must run, out of a build tree that user may not reach (a clone in
 * a 0700 directory). */
static inline bool copy_prog(const char *src, const char *dst, mode_t mode)
{
	char *text = NULL;
	size_t len = 0;
	bool ok;

	if (ptd_file_read_all(src, 1 << 24, &text, &len) < 0)
		return false;
	ok = ptd_file_write_atomic(dst, text, len) == 0 &&
	     chmod(dst, mode) == 0;
	free(text);
	return ok;
}

static inline int wait_exit(pid_t pid)
{
	int st = 0;

	if (pid <= 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A connection to the socket at @path, or -1. */
static inline int daemon_connect_path(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	memcpy(a.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Start ptd in tmpdir/@name with socket_mode 0600, log_level debug and
 * the config lines @extra; its log goes to tmpdir/@name/ptd.log.  True
 * once its socket accepts (at most 5 s).  Unless @extra sets it,
 * user_memory_limit is 64G: tests of other things use queues up to 1G
 * (test-memlimit tests the limit). */
static inline bool daemon_start(struct daemon *d, const char *name,
				const char *extra)
{
	char ptd[1100], text[2048];
	int i;

	memset(d, 0, sizeof(*d));
	(void)snprintf(d->dir, sizeof(d->dir), "%s/%s", tmpdir, name);
	mkdir(d->dir, 0700);
	(void)snprintf(d->conf, sizeof(d->conf), "%s/ptd.conf", d->dir);
	/* The socket's directory does not exist yet: ptd creates it. */
	(void)snprintf(d->sock, sizeof(d->sock), "%s/run/ptd.sock", d->dir);
	(void)snprintf(text, sizeof(text),
		       "socket_path = %s\nsocket_mode = 0600\n"
		       "log_level = debug\n%s%s",
		       d->sock, extra,
		       strstr(extra, "user_memory_limit") ? ""
			       : "user_memory_limit = 64G\n");
	if (write_file(d->conf, text) < 0)
		return false;
	(void)snprintf(ptd, sizeof(ptd), "%s/daemon/ptd", build_root);
	d->pid = fork();
	if (d->pid == 0) {
		char log[700];
		int fd;

		(void)snprintf(log, sizeof(log), "%s/ptd.log", d->dir);
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 2);
		/* A test that ends early (a REQUIRE, a crash) must not leave
		 * its daemon behind: it would hold the test's stdout open,
		 * and meson waits for that to close. */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(ptd, ptd, "-c", d->conf, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 500; i++) {
		int fd = daemon_connect_path(d->sock);

		if (fd >= 0) {
			close(fd);
			return true;
		}
		msleep(10);
	}
	return false;
}

#define HARNESS_NOBODY 65534

/* Start ptd (a copy other users may run: the build's may lie where only
 * its owner can enter, a clone in a mktemp -d) as user nobody (@nobody)
 * or as root without CAP_SYS_ADMIN in its bounding set, as ptd.service
 * runs it; socket_mode 0666, its log in tmpdir/@name/ptd.log.  True once
 * its socket exists. */
static inline bool daemon_start_restricted(struct daemon *d,
					   const char *name, bool nobody)
{
	char ptd[1100], conf[2048], log[700];
	int i;

	memset(d, 0, sizeof(*d));
	(void)snprintf(d->dir, sizeof(d->dir), "%s/%s", tmpdir, name);
	REQUIRE_OR_FALSE(mkdir(d->dir, 0777) == 0 && chmod(d->dir, 0777) == 0 &&
			 chmod(tmpdir, 0755) == 0);
	(void)snprintf(d->conf, sizeof(d->conf), "%s/ptd.conf", d->dir);
	(void)snprintf(d->sock, sizeof(d->sock), "%s/ptd.sock", d->dir);
	(void)snprintf(conf, sizeof(conf), "socket_path = %s\n"
		       "socket_mode = 0666\nlog_level = debug\n", d->sock);
	REQUIRE_OR_FALSE(write_file(d->conf, conf) == 0 &&
			 chmod(d->conf, 0644) == 0);
	(void)snprintf(ptd, sizeof(ptd), "%s/daemon/ptd", build_root);
	(void)snprintf(log, sizeof(log), "%s/ptd", d->dir);
	REQUIRE_OR_FALSE(copy_prog(ptd, log, 0755));
	(void)snprintf(ptd, sizeof(ptd), "%s", log);
	(void)snprintf(log, sizeof(log), "%s/ptd.log", d->dir);
	d->pid = fork();
	if (d->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666);

		dup2(fd, 2);
		if (nobody ? setgroups(0, NULL) < 0 ||
				     setgid(HARNESS_NOBODY) < 0 ||
				     setuid(HARNESS_NOBODY) < 0
			   : prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) < 0)
			_exit(126);
		/* as daemon_start: never outlive the test */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(ptd, ptd, "-c", d->conf, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 500 && access(d->sock, F_OK) < 0; i++)
		msleep(10);
	REQUIRE_OR_FALSE(i < 500);
	msleep(50);
	return true;
}

/* SIGTERM and wait (at most 20 s); returns the exit status or -1. */
static inline int daemon_stop(struct daemon *d)
{
	int st, i;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	for (i = 0; i < 2000; i++) {
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st)
					     : 128 + WTERMSIG(st);
		}
		msleep(10);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &st, 0);
	d->pid = 0;
	return -1;
}

/* Start `ptctl --socket SOCK ARGS...` (@args NULL-terminated, at most 12)
 * with its stdout into the file @out and its stderr into the file @err
 * (NULL: the test's stderr).  Returns its pid (wait_exit it). */
static inline pid_t ptctl_spawn(const struct daemon *d, const char *out,
				const char *err, const char *const args[])
{
	char ptctl[1100];
	char *argv[16];
	size_t n = 0;
	pid_t pid;

	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", build_root);
	argv[n++] = ptctl;
	argv[n++] = (char *)"--socket";
	argv[n++] = (char *)d->sock;
	for (size_t i = 0; args[i] && n < 15; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		if (err) {
			int efd = open(err, O_WRONLY | O_CREAT | O_TRUNC,
				       0600);

			dup2(efd, 2);
		}
		execv(ptctl, argv);
		_exit(127);
	}
	return pid;
}

/* A target blocked in `read` until released: sh -c 'read x; exec PROG
 * SECS' (PROG: progs/prog-attach).  Returns its pid once it is sh (an
 * attach sees sh's one thread, not the test's forked child, whose
 * sanitizer runtime may have a thread of its own); *ret_go is the pipe to
 * release it. */
static inline pid_t spawn_target(double secs, int *ret_go)
{
	char prog[1100], arg[32];
	int p[2], e[2];
	pid_t pid;

	(void)snprintf(prog, sizeof(prog), "%s/prog-attach", progs);
	(void)snprintf(arg, sizeof(arg), "%g", secs);
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(e, O_CLOEXEC) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(p[0], 0);
		dup2(null, 1);
		execl("/bin/sh", "sh", "-c", "read x; exec \"$0\" \"$1\"", prog,
		      arg, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	exec_wait(e);
	*ret_go = p[1];
	return pid;
}

static inline void release(int *go)
{
	if (write(*go, "\n", 1) != 1)
		CHECK_FAIL_("releasing the target: %s", strerror(errno));
	close(*go);
	*go = -1;
}

/* Wait for @pid; returns its exit code, or 128+signal, or -1 (then it is
 * killed) after @timeout_ms. */
static inline int wait_target(pid_t pid, int timeout_ms)
{
	int st, i;

	for (i = 0; i < timeout_ms / 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st)
					     : 128 + WTERMSIG(st);
		msleep(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* Is @line a record of @type (its first key)? */
static inline bool is_type(const char *line, const char *type)
{
	char want[64];

	(void)snprintf(want, sizeof(want), "{\"type\":\"%s\"", type);
	return !strncmp(line, want, strlen(want));
}

/* Fill the directories from PTD_BUILD_ROOT and PTD_TEST_PROGS (as meson
 * test sets them) and a new scratch directory from @tmpl ("/tmp/X-XXXXXX":
 * keep it short, a socket path holds 108 bytes); ignore SIGPIPE (a client
 * ptd closes on).  Skips the whole test when something is missing. */
static inline void harness_setup(const char *tmpl)
{
	const char *root = getenv("PTD_BUILD_ROOT");
	const char *p = getenv("PTD_TEST_PROGS");
	char ptd[1100];

	if (!root || !p)
		SKIP_ALL("PTD_BUILD_ROOT and PTD_TEST_PROGS must be set (run "
			 "through meson test)");
	(void)snprintf(build_root, sizeof(build_root), "%s", root);
	(void)snprintf(progs, sizeof(progs), "%s", p);
	(void)snprintf(ptd, sizeof(ptd), "%s/daemon/ptd", build_root);
	if (access(ptd, X_OK) < 0)
		SKIP_ALL("%s is not built", ptd);
	(void)snprintf(tmpdir, sizeof(tmpdir), "%s", tmpl);
	if (!mkdtemp(tmpdir))
		SKIP_ALL("cannot create a temporary directory");
	signal(SIGPIPE, SIG_IGN);
}

/* The test's end: the scratch directory is removed if every check passed,
 * else kept (daemon logs) and named.  Returns main's exit code. */
static inline int harness_done(void)
{
	if (!check_failures)
		(void)ptd_rm_rf(tmpdir);
	else
		fprintf(stderr, "daemon logs kept in %s\n", tmpdir);
	return check_done();
}

#endif
