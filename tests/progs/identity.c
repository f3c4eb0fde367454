/* A program that replaces the library it mapped at its path.
 * argv[1]: seconds (ignored: it runs until told), argv[2]: the library (a
 * copy of libptdtarget.so), argv[3]: another file.  It writes "ready\n" to
 * fd 3 and waits for SIGUSR1 (sent once a tracer is attached); then it
 * dlopen()s the library, calls into it, renames argv[3] over argv[2] --
 * the library stays mapped, its path now names the other file -- prints
 * "swapped" and waits for SIGUSR1 again; then it prints "ok N" and exits
 * 0 (1 if a result was wrong, 2 if something could not be done). */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t told;

static void on_usr1(int sig)
{
	(void)sig;
	told++;
}

int main(int argc, char **argv)
{
	int (*f)(int);
	sigset_t block, old;
	void *h;
	int bad = 0, n = 0;

	if (argc < 4)
		return 2;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	if (signal(SIGUSR1, on_usr1) == SIG_ERR ||
	    sigprocmask(SIG_BLOCK, &block, &old) < 0)
		return 2;
	if (write(3, "ready\n", 6) < 0) {
		/* no fd 3: nobody waits */
	}
	while (told < 1)
		sigsuspend(&old);
	h = dlopen(argv[2], RTLD_NOW);
	f = h ? (int (*)(int))dlsym(h, "ptd_target_sum") : NULL;
	if (!f) {
		fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
		return 2;
	}
	for (int i = 0; i < 20; i++, n++)
		if (f(10) != 5)
			bad = 1;
	if (rename(argv[3], argv[2]) < 0)
		return 2;
	printf("swapped\n");
	fflush(stdout);
	while (told < 2)
		sigsuspend(&old);
	printf("ok %d\n", n);
	return bad;
}
