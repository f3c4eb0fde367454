/* A process that runs code of a library a user may harm: it dlopen()s
 * argv[1], calls its ptd_target_sum once and writes "ready\n" to fd 3 (if
 * open), then loops until SIGUSR1 -- calling the library each time with
 * argv[2] "always", or only its own code with "once".  Prints "ok N" and
 * exits 0, or 1 if a call came back wrong ("once": without running the
 * library's destructors).  A library truncated under it
 * ends it with SIGBUS at its next call: the harm is its own. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}

static int own_sum(int n)
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += (i & 1) ? i : -i;
	return s;
}

int main(int argc, char **argv)
{
	int always = argc > 2 && !strcmp(argv[2], "always"), bad = 0;
	unsigned long it = 0;
	int (*f)(int);
	void *h;

	if (argc < 2 || signal(SIGUSR1, on_usr1) == SIG_ERR)
		return 2;
	h = dlopen(argv[1], RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	f = (int (*)(int))dlsym(h, "ptd_target_sum");
	if (!f || f(10) != 5)
		return 3;
	if (write(3, "ready\n", 6) < 0) {
		/* no fd 3: nobody waits */
	}
	while (!stop) {
		if ((always ? f(10) : own_sum(10)) != 5)
			bad = 1;
		it++;
	}
	printf("ok %lu\n", it);
	/* "once" never runs the library again, not even its destructors at
	 * exit */
	(void)fflush(stdout);
	if (!always)
		_exit(bad);
	return bad;
}
