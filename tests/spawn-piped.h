/* SPDX-License-Identifier: MIT */
/*
 * Test helper: a test program started with pipes to its stdin and from
 * its stdout, returned once it is the program (exec'd), not the fork --
 * an attach then sees the program's threads, not the test's forked copy
 * (whose sanitizer runtime may have a thread of its own).  Header-only.
 */
#ifndef PTD_TESTS_SPAWN_PIPED_H
#define PTD_TESTS_SPAWN_PIPED_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

/* After fork: the parent's wait until the child exec'd (or exited), @e a
 * pipe made with O_CLOEXEC before the fork (both ends closed here). */
static inline void exec_wait(int e[2])
{
	char c;

	close(e[1]);
	/* end of file once the child's copy closed: at its exec */
	while (read(e[0], &c, 1) < 0 && errno == EINTR)
		;
	close(e[0]);
}

/* Start @progs_dir/@prog (no arguments), its stdin the pipe *@ret_in
 * writes to and its stdout the pipe *@ret_out reads; return once it is
 * the program (exec'd), not the fork.  Returns its pid, or -1. */
static inline pid_t spawn_piped(const char *progs_dir, const char *prog,
				int *ret_in, int *ret_out)
{
	char path[PATH_MAX + 64];
	int in[2], out[2], e[2];
	pid_t pid;

	(void)snprintf(path, sizeof(path), "%s/%s", progs_dir, prog);
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
	    pipe2(e, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		(void)dup2(in[0], 0);
		(void)dup2(out[1], 1);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	(void)close(in[0]);
	(void)close(out[1]);
	exec_wait(e);
	*ret_in = in[1];
	*ret_out = out[0];
	return pid;
}

#endif
