/* SPDX-License-Identifier: MIT */
/*
 * Test helper: real pid reuse.  A test function runs as pid 1 of a new pid
 * namespace with its own /proc, where nobody else forks, so that writing
 * /proc/sys/kernel/ns_last_pid decides the pid the next fork gets: a pid
 * whose process was reaped can be given to a new process on purpose.
 * Needs root (CAP_SYS_ADMIN).  Header-only; include check.h first.
 */
#ifndef PTD_TESTS_PIDNS_H
#define PTD_TESTS_PIDNS_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run @fn(@arg) as pid 1 of a new pid namespace (and mount namespace,
 * /proc mounted anew); its return value is the checks that failed there
 * (what it printed says which).  Returns that count, or -1 when the
 * namespace cannot be made here, the reason in @why. */
static inline int pidns_run(int (*fn)(void *), void *arg, char *why,
			    size_t cap)
{
	int p[2], st = 0, err = 0;
	pid_t outer;

	if (pipe2(p, O_CLOEXEC) < 0) {
		(void)snprintf(why, cap, "pipe: %s", strerror(errno));
		return -1;
	}
	/* unshare(CLONE_NEWPID) changes where the caller's children go:
	 * done in a child of ours, whose own child is the namespace's pid 1 */
	outer = fork();
	if (outer == 0) {
		pid_t init;

		(void)close(p[0]);
		if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0) {
			err = errno;
			if (write(p[1], &err, sizeof(err)) < 0)
				_exit(124);
			_exit(125);
		}
		init = fork();
		if (init == 0) {
			if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE,
				  NULL) < 0 ||
			    mount("proc", "/proc", "proc",
				  MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
				err = errno;
				if (write(p[1], &err, sizeof(err)) < 0)
					_exit(124);
				_exit(125);
			}
			(void)close(p[1]);
			fflush(stderr);
			_exit(fn(arg) > 0 ? 1 : 0);
		}
		(void)close(p[1]);
		if (init < 0 || waitpid(init, &st, 0) != init)
			_exit(126);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 127);
	}
	(void)close(p[1]);
	if (outer < 0) {
		(void)close(p[0]);
		(void)snprintf(why, cap, "fork: %s", strerror(errno));
		return -1;
	}
	if (read(p[0], &err, sizeof(err)) == (ssize_t)sizeof(err)) {
		(void)close(p[0]);
		(void)waitpid(outer, &st, 0);
		(void)snprintf(why, cap, "cannot make a pid namespace with its "
			       "own /proc here: %s", strerror(err));
		return -1;
	}
	(void)close(p[0]);
	if (waitpid(outer, &st, 0) != outer || !WIFEXITED(st)) {
		(void)snprintf(why, cap, "the namespace's process ended "
			       "abnormally");
		return 1;
	}
	return WEXITSTATUS(st) == 0 ? 0 : 1;
}

/* In such a namespace: make the next fork get @pid (reaped already).
 * Returns 0 or -errno. */
static inline int pidns_next_pid(pid_t pid)
{
	char v[32];
	int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	int n = snprintf(v, sizeof(v), "%d", (int)pid - 1), r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, v, (size_t)n) != n)
		r = -errno;
	(void)close(fd);
	return r;
}

/* A child that sleeps until killed; its pid, or -1. */
static inline pid_t pidns_sleeper(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		for (;;)
			pause();
	}
	return pid;
}

#endif
