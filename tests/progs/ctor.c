/* A library constructor that acts before its program's entry point, for
 * the tests of tracing from the entry (swpt/tracer.h, PTD_SWPT_START_ENTRY).
 * Preloaded (LD_PRELOAD), it does what PTD_CTOR says: "fork" forks a child
 * that exits at once, "exec" execs the program again without PTD_CTOR. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((constructor)) static void ctor(void)
{
	const char *what = getenv("PTD_CTOR");

	if (!what)
		return;
	if (strcmp(what, "fork") == 0) {
		pid_t p = fork();

		if (p == 0)
			_exit(0);
		if (p > 0)
			(void)waitpid(p, NULL, 0);
	} else if (strcmp(what, "exec") == 0) {
		char *argv[] = { "again", NULL };

		(void)unsetenv("PTD_CTOR");
		(void)execv("/proc/self/exe", argv);
		_exit(126);
	}
}
