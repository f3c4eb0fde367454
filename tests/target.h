/* SPDX-License-Identifier: MIT */
/*
 * Test helper: a running prog-attach to trace (tests/progs/attach.c), and
 * the check that it finished unharmed.  Header-only; include check.h
 * first.
 */
#ifndef PTD_TESTS_TARGET_H
#define PTD_TESTS_TARGET_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <grp.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

struct target {
	pid_t pid;
	int out;	/* its stdout */
};

/* Start @progs_dir/prog-attach for @secs seconds as @uid (-1: ours),
 * then exec @then (NULL-terminated argv, NULL: exit); return once its
 * threads run.  Returns 0 or -errno. */
static inline int target_start_as(const char *progs_dir, double secs,
				  uid_t uid, char *const then[],
				  struct target *t)
{
	char *argv[16];
	size_t na = 0;
	char path[512], arg[32], buf[16];
	int ready[2], out[2];
	ssize_t n;

	(void)snprintf(path, sizeof(path), "%s/prog-attach", progs_dir);
	(void)snprintf(arg, sizeof(arg), "%g", secs);
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		return -errno;
	t->pid = fork();
	if (t->pid < 0)
		return -errno;
	if (t->pid == 0) {
		(void)dup2(out[1], 1);
		(void)dup2(ready[1], 3);
		argv[na++] = path;
		argv[na++] = arg;
		for (size_t i = 0; then && then[i] && na < 15; i++)
			argv[na++] = then[i];
		argv[na] = NULL;
		if (uid != (uid_t)-1 &&
		    (setgroups(0, NULL) < 0 || setgid(uid) < 0 ||
		     setuid(uid) < 0))
			_exit(126);
		execv(path, argv);
		_exit(127);
	}
	(void)close(ready[1]);
	(void)close(out[1]);
	t->out = out[0];
	n = read(ready[0], buf, sizeof(buf));
	(void)close(ready[0]);
	return n == 6 ? 0 : -EIO;
}

static inline int target_start(const char *progs_dir, double secs,
			       struct target *t)
{
	return target_start_as(progs_dir, secs, (uid_t)-1, NULL, t);
}

/* Its output so far up to EOF (it exited), NUL-terminated in @buf. */
static inline void target_output(struct target *t, char *buf, size_t cap)
{
	ssize_t n;
	size_t len = 0;

	while (len + 1 < cap &&
	       (n = read(t->out, buf + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = 0;
	(void)close(t->out);
	t->out = -1;
}

/* Wait for the target's end: it must exit 0 and print "ok ...". */
static inline void target_finish(struct target *t)
{
	char buf[256];
	int status = 0;

	target_output(t, buf, sizeof(buf));
	if (waitpid(t->pid, &status, 0) != t->pid) {
		CHECK_FAIL_("waitpid %d: %s", (int)t->pid, strerror(errno));
		return;
	}
	CHECK(WIFEXITED(status));
	CHECK_EQ_INT(WEXITSTATUS(status), 0);
	CHECK(strncmp(buf, "ok ", 3) == 0);
	fprintf(stderr, "  target said: %s", buf);
}

#endif
