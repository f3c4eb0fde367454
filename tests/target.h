/* SPDX-License-Identifier: MIT */
/*
 * Test helper: a running prog-attach to trace (tests/progs/attach.c), or
 * another test program, the check that it finished unharmed, who traces
 * its threads and what they are called.  Header-only; include check.h
 * first.
 */
#ifndef PTD_TESTS_TARGET_H
#define PTD_TESTS_TARGET_H

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <grp.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fileio.h"
#include "spawn-piped.h"

struct target {
	pid_t pid;
	int out;	/* its stdout */
};

/* Start @progs_dir/@prog with argument @secs (then the @then strings,
 * NULL-terminated, or none) as @uid (-1: ours), its stdout a pipe the test
 * reads (target_output) and, if @ret_in is not NULL, its stdin the read
 * end of a pipe whose write end is *ret_in; return once it wrote
 * "ready\n" to fd 3.  Returns 0 or -errno. */
static inline int target_spawn(const char *progs_dir, const char *prog,
			       double secs, uid_t uid, char *const then[],
			       int *ret_in, struct target *t)
{
	char *argv[16];
	size_t na = 0;
	char path[PATH_MAX + 64], arg[32], buf[16];
	int ready[2], out[2], in[2] = { -1, -1 };
	ssize_t n;

	(void)snprintf(path, sizeof(path), "%s/%s", progs_dir, prog);
	(void)snprintf(arg, sizeof(arg), "%g", secs);
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
	    (ret_in && pipe2(in, O_CLOEXEC) < 0))
		return -errno;
	t->pid = fork();
	if (t->pid < 0)
		return -errno;
	if (t->pid == 0) {
		(void)dup2(out[1], 1);
		(void)dup2(ready[1], 3);
		if (ret_in)
			(void)dup2(in[0], 0);
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
	if (ret_in) {
		(void)close(in[0]);
		*ret_in = in[1];
	}
	t->out = out[0];
	n = read(ready[0], buf, sizeof(buf));
	(void)close(ready[0]);
	return n == 6 ? 0 : -EIO;
}

/* Start @progs_dir/prog-attach for @secs seconds as @uid (-1: ours),
 * then exec @then (NULL-terminated argv, NULL: exit); return once its
 * threads run.  Returns 0 or -errno. */
static inline int target_start_as(const char *progs_dir, double secs,
				  uid_t uid, char *const then[],
				  struct target *t)
{
	return target_spawn(progs_dir, "prog-attach", secs, uid, then, NULL,
			    t);
}

/* Of the threads of @pid, how many @fn says yes to, given each one's
 * /proc/PID/task/TID/@file (NUL-terminated) and its TID; (@ret_total,
 * may be NULL) how many were read; -1 if the process is gone.  A thread
 * that ends meanwhile is left out. */
static inline int tasks_matching(pid_t pid, const char *file,
				 bool (*fn)(const char *tid, const char *text,
					    size_t len, const void *arg),
				 const void *arg, int *ret_total)
{
	char path[PATH_MAX], *text = NULL;
	struct dirent *e;
	size_t len;
	DIR *d;
	int n = 0, total = 0;

	(void)snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		(void)snprintf(path, sizeof(path), "/proc/%d/task/%s/%s",
			       (int)pid, e->d_name, file);
		if (ptd_file_read_all(path, 1 << 16, &text, &len) < 0)
			continue;	/* the thread has gone */
		total++;
		n += fn(e->d_name, text, len, arg);
		free(text);
		text = NULL;
	}
	(void)closedir(d);
	if (ret_total)
		*ret_total = total;
	return n;
}

/* (tasks_matching: a TracerPid in the status; @arg non-NULL: say so) */
static inline bool task_traced(const char *tid, const char *text, size_t len,
			       const void *say)
{
	const char *p = strstr(text, "\nTracerPid:");

	(void)len;
	if (!p || strtol(p + 11, NULL, 10) == 0)
		return false;
	if (say)
		fprintf(stderr, "thread %s traced by %ld\n", tid,
			strtol(p + 11, NULL, 10));
	return true;
}

/* How many threads of @pid are traced (a TracerPid in their status), and
 * (@ret_total, may be NULL) how many it has; -1 if the process is gone.
 * With @say, each traced one is named on stderr. */
static inline int target_threads_traced(pid_t pid, bool say, int *ret_total)
{
	return tasks_matching(pid, "status", task_traced, say ? "" : NULL,
			      ret_total);
}

/* How many threads of @pid are traced, each named on stderr; -1 if the
 * process is gone. */
static inline int target_traced_threads(pid_t pid)
{
	return target_threads_traced(pid, true, NULL);
}

/* (tasks_matching: the comm is @name) */
static inline bool task_named(const char *tid, const char *text, size_t len,
			      const void *name)
{
	(void)tid;
	return len == strlen(name) + 1 && !memcmp(text, name, len - 1) &&
	       text[len - 1] == '\n';
}

/* How many threads of process @pid are named @name (their comm, as
 * pthread_setname_np sets it); -1 if the process is gone. */
static inline int threads_named(pid_t pid, const char *name)
{
	return tasks_matching(pid, "comm", task_named, name, NULL);
}

/* Tell a prog-attach target (pid @pid) to end its run now: SIGUSR1 to its
 * main thread, as tgkill sends it.  A process-directed one (kill) may be
 * taken by its sleeping thread, whose nanosleep then fails and the target
 * reports an error.  0 or -errno. */
static inline int target_tell(pid_t pid)
{
	return syscall(SYS_tgkill, pid, pid, SIGUSR1) == 0 ? 0 : -errno;
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
