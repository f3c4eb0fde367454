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
#include <sys/wait.h>
#include <unistd.h>

struct target {
	pid_t pid;
	int out;	/* its stdout */
};

/* Start @progs_dir/prog-attach for @secs seconds; return once its threads
 * run.  Returns 0 or -errno. */
static inline int target_start(const char *progs_dir, double secs,
			       struct target *t)
{
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
		execl(path, path, arg, (char *)NULL);
		_exit(127);
	}
	(void)close(ready[1]);
	(void)close(out[1]);
	t->out = out[0];
	n = read(ready[0], buf, sizeof(buf));
	(void)close(ready[0]);
	return n == 6 ? 0 : -EIO;
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
