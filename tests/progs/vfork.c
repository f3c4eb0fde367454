/* A process that an attach cannot finish with until the test says so.
 * A thread computes while the main thread is in vfork(): a thread in
 * vfork() stops for nobody, a ptrace interrupt included, until its child
 * has exec'd or exited.  The child writes "ready\n" to fd 3 (if open) and
 * exits once a line (or end of file) comes on stdin.  The main thread
 * then runs argv[1] seconds more (wall clock; SIGUSR1 ends it early),
 * checks what both threads computed, prints "ok ITERATIONS" and exits 0
 * -- or 1 if anything came out wrong, which an attach, finished or
 * cancelled, must never cause. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int done, bad;
static volatile sig_atomic_t stop;

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}

__attribute__((noinline)) static unsigned long collatz(unsigned long x)
{
	unsigned long n = 0;

	while (x != 1) {
		x = (x & 1) ? 3 * x + 1 : x / 2;
		n++;
	}
	return n;
}

static void *compute(void *arg)
{
	unsigned long it = 0;

	(void)arg;
	while (!atomic_load(&done)) {
		if (collatz(27) != 111)
			atomic_store(&bad, 1);
		it++;
	}
	return (void *)it;
}

/* vfork() in a function of its own: nothing of main's is live across
 * it.  The child's pid, or -1. */
__attribute__((noinline)) static pid_t held_vfork(void)
{
	pid_t child = vfork();

	if (child == 0) {
		char c;

		/* only system calls here: the parent's memory is ours */
		if (write(3, "ready\n", 6) < 0) {
			/* no fd 3: nobody waits */
		}
		if (read(0, &c, 1) < 0) {
			/* end of file or an error: go on as well */
		}
		_exit(0);
	}
	return child;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0, start;
	unsigned long it = 0;
	pthread_t a;
	void *ra;
	pid_t child;
	int st;

	if (signal(SIGUSR1, on_usr1) == SIG_ERR ||
	    pthread_create(&a, NULL, compute, NULL))
		return 2;
	child = held_vfork();
	if (child < 0 || waitpid(child, &st, 0) != child || st != 0)
		atomic_store(&bad, 1);
	start = now();
	do {
		if (collatz(97) != 118)
			atomic_store(&bad, 1);
		it++;
	} while (now() - start < secs && !stop);
	atomic_store(&done, 1);
	if (pthread_join(a, &ra))
		return 2;
	printf("ok %lu %lu\n", it, (unsigned long)ra);
	return atomic_load(&bad) ? 1 : 0;
}
