/* SPDX-License-Identifier: MIT */
/* posix_spawn (clone with CLONE_VM | CLONE_VFORK): the child runs on the
 * parent's memory, untraced, through code the parent ran before -- code a
 * tracer may have put breakpoints into.  Spawns /bin/true three times
 * between calls into libc; exits 0 only if every child exited 0. */
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

int main(void)
{
	char *argv[] = { "/bin/true", NULL };
	volatile size_t s = 0;

	for (int i = 0; i < 3; i++) {
		pid_t pid;
		int st;

		s += strlen(argv[0]);
		if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
			return 2;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			return 1;
	}
	return s == 27 ? 0 : 3;
}
