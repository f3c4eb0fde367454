/* SPDX-License-Identifier: MIT */
/*
 * For tests that run a command line tool (ptctl) to its end and look at
 * what it printed: its exit status, stdout and stderr, each read back
 * whole from a file in the test's scratch directory.  Header-only.
 */
#ifndef PTD_TESTS_E2E_RUN_CMD_H
#define PTD_TESTS_E2E_RUN_CMD_H

#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/fileio.h"

extern char **environ;

struct run {
	int status;	/* exit code, 128 + signal, or -1 (not started) */
	char *out;	/* stdout (at most 1 GiB), NUL-terminated */
	size_t out_len;
	char *err;	/* stderr (at most 1 MiB) */
	size_t err_len;
};

static inline void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

/* Run @exe with the arguments @args (NULL-terminated, at most 30) to its
 * end, its stdout and stderr into @scratch/stdout and @scratch/stderr. */
static inline struct run run_cmd_in(const char *exe,
				    const char *const *args,
				    const char *scratch, const char *in);

static inline struct run run_cmd(const char *exe, const char *const *args,
				 const char *scratch)
{
	return run_cmd_in(exe, args, scratch, NULL);
}

/* run_cmd with its stdin read from the file @in (NULL: inherited). */
static inline struct run run_cmd_in(const char *exe,
				    const char *const *args,
				    const char *scratch, const char *in)
{
	struct run r = { 0 };
	char outp[PATH_MAX], errp[PATH_MAX];
	posix_spawn_file_actions_t fa;
	const char *argv[32];
	pid_t pid;
	int st, n = 0;

	argv[n++] = exe;
	for (; *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	(void)snprintf(outp, sizeof(outp), "%s/stdout", scratch);
	(void)snprintf(errp, sizeof(errp), "%s/stderr", scratch);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, outp,
					 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addopen(&fa, 2, errp,
					 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (in)
		posix_spawn_file_actions_addopen(&fa, 0, in, O_RDONLY, 0);
	if (posix_spawn(&pid, exe, &fa, NULL, (char *const *)argv,
			environ) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		r.status = -1;
		return r;
	}
	posix_spawn_file_actions_destroy(&fa);
	(void)waitpid(pid, &st, 0);
	r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	(void)ptd_file_read_all(outp, 1u << 30, &r.out, &r.out_len);
	(void)ptd_file_read_all(errp, 1u << 20, &r.err, &r.err_len);
	return r;
}

#endif
