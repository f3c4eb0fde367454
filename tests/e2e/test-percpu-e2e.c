/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU sessions through the product: ptd started in a temp dir,
 * `ptctl attach --per-cpu --capture DIR PID` on a multi-threaded program
 * (per-CPU buffers: the software source's two virtual CPUs, threads
 * switching and migrating between them), `ptctl status` shows the layout,
 * and `ptctl stream` gets, for every thread, exactly the instructions the
 * ground truth says it executed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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
#include "e2e/subscribed.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "swpt/capture.h"

static char build_root[1024], progs[1024], tmpdir[256];

struct daemon {
	pid_t pid;
	char dir[512];
	char conf[600];
	char sock[600];
};

static void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int write_file(const char *path, const char *text)
{
	return ptd_file_write_atomic(path, text, strlen(text));
}

static int daemon_connect_path(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(a.sun_path, path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool daemon_start(struct daemon *d, const char *name,
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
		       "log_level = debug\n%s",
		       d->sock, extra);
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

/* SIGTERM and wait (at most 20 s); returns the exit status or -1. */
static int daemon_stop(struct daemon *d)
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

/* A target blocked in `read` until released: sh -c 'read x; exec PROG
 * SECS'.  Returns its pid; *ret_go is the pipe to release it. */
static pid_t spawn_target(double secs, int *ret_go)
{
	char prog[1100], arg[32];
	int p[2];
	pid_t pid;

	(void)snprintf(prog, sizeof(prog), "%s/prog-attach", progs);
	(void)snprintf(arg, sizeof(arg), "%g", secs);
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
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
	*ret_go = p[1];
	return pid;
}

static void release(int *go)
{
	if (write(*go, "\n", 1) != 1)
		CHECK_FAIL_("releasing the target: %s", strerror(errno));
	close(*go);
	*go = -1;
}

/* Wait for @pid; returns its exit code, or 128+signal, or -1. */
static int wait_target(pid_t pid, int timeout_ms)
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

static bool is_type(const char *line, const char *type)
{
	char want[64];

	(void)snprintf(want, sizeof(want), "{\"type\":\"%s\"", type);
	return !strncmp(line, want, strlen(want));
}

/* ptctl --socket SOCK ARGS... with its stdout into @out_path. */
static pid_t ptctl_spawn(struct daemon *d, const char *out_path,
			 const char *const args[])
{
	char ptctl[1100];
	char *argv[16];
	size_t n = 0;
	pid_t pid;

	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", build_root);
	argv[n++] = ptctl;
	argv[n++] = (char *)"--socket";
	argv[n++] = d->sock;
	for (size_t i = 0; args[i] && n < 15; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		execv(ptctl, argv);
		_exit(127);
	}
	return pid;
}

static int wait_exit(pid_t pid)
{
	int st = 0;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Every insn line of thread @tid in @text, in order, against @ips. */
static size_t match_truth(const char *text, pid_t tid, const uint64_t *ips,
			  size_t nips)
{
	const char *p = text;
	size_t k = 0;
	char key[64];

	(void)snprintf(key, sizeof(key), "\"tid\":%d,", (int)tid);
	while (*p) {
		const char *e = strchr(p, '\n'), *ipp;
		uint64_t ip;

		if (!e)
			break;
		if (is_type(p, "insn") &&
		    memmem(p, (size_t)(e - p), key, strlen(key)) &&
		    (ipp = memmem(p, (size_t)(e - p), "\"ip\":\"", 6)) &&
		    !strncmp(ipp + 6, "0x", 2) &&
		    ptd_parse_u64n(ipp + 8, strcspn(ipp + 8, "\""), 16,
				   &ip) == 0) {
			if (k >= nips || ip != ips[k]) {
				CHECK_FAIL_("tid %d: insn %zu is %#llx, truth "
					    "%#llx", (int)tid, k,
					    (unsigned long long)ip,
					    k < nips ? (unsigned long long)ips[k]
						     : 0ull);
				return k;
			}
			k++;
		}
		p = e + 1;
	}
	return k;
}

static char *read_text(const char *path)
{
	char *text = NULL;
	size_t len = 0;

	if (ptd_file_read_all(path, 1u << 30, &text, &len) < 0)
		return NULL;
	return text;
}

static void test_percpu_groundtruth(void)
{
	struct daemon d;
	struct ptd_capture cap;
	struct ptd_diag diag = { "" };
	char pidarg[32], capdir[700], attach_out[700], stream_out[700];
	char status_out[700], sidarg[32], *text;
	size_t nthreads_seen = 0;
	pid_t t, streamer;
	int go, r;

	REQUIRE(daemon_start(&d, "percpu", "subscriber_queue_size = 1G\n"));
	t = spawn_target(0.3, &go);
	REQUIRE(t > 0);
	(void)snprintf(pidarg, sizeof(pidarg), "%ld", (long)t);
	(void)snprintf(capdir, sizeof(capdir), "%s/capture", d.dir);
	(void)snprintf(attach_out, sizeof(attach_out), "%s/attach.out", d.dir);
	(void)snprintf(stream_out, sizeof(stream_out), "%s/stream.out", d.dir);
	(void)snprintf(status_out, sizeof(status_out), "%s/status.out", d.dir);
	{
		const char *args[] = { "attach", "--per-cpu", "--capture",
				       capdir, pidarg, NULL };

		r = wait_exit(ptctl_spawn(&d, attach_out, args));
	}
	CHECK_EQ_INT(r, 0);
	text = read_text(attach_out);
	REQUIRE(text != NULL);
	(void)snprintf(sidarg, sizeof(sidarg), "%.*s",
		       (int)strcspn(text, "\n"), text);
	free(text);
	{
		const char *args[] = { "status", sidarg, NULL };

		CHECK_EQ_INT(wait_exit(ptctl_spawn(&d, status_out, args)), 0);
	}
	text = read_text(status_out);
	CHECK(text && strstr(text, "buffers: per-cpu") != NULL);
	if (text)
		fprintf(stderr, "  %s", text);
	free(text);
	{
		const char *args[] = { "stream", sidarg, NULL };

		streamer = ptctl_spawn(&d, stream_out, args);
	}
	/* the streamer is in before the target runs */
	CHECK(wait_subscribed(d.sock, sidarg));
	release(&go);
	CHECK_EQ_INT(wait_exit(streamer), 0);
	CHECK_EQ_INT(wait_target(t, 120000), 0);
	text = read_text(stream_out);
	REQUIRE(text != NULL);
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
		size_t nips = 0, k;

		REQUIRE(ptd_capture_read_truth(&cap, i, &ips, &nips,
					       &diag) == 0);
		k = match_truth(text, cap.threads[i].tid, ips, nips);
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
	ptd_capture_free(&cap);
	free(text);
	CHECK_EQ_INT(daemon_stop(&d), 0);
}

int main(void)
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
	/* A short path: sun_path holds 108 bytes. */
	(void)snprintf(tmpdir, sizeof(tmpdir), "/tmp/ptdpc-XXXXXX");
	if (!mkdtemp(tmpdir))
		SKIP_ALL("cannot create a temporary directory");
	signal(SIGPIPE, SIG_IGN);
	RUN(test_percpu_groundtruth);
	if (!check_failures)
		(void)ptd_rm_rf(tmpdir);
	else
		fprintf(stderr, "daemon logs kept in %s\n", tmpdir);
	return check_done();
}
