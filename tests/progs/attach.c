/* A long-running program to attach to: a computing thread, a thread that
 * sleeps in nanosleep, short-lived threads started every ~50 ms, and a main
 * thread calling into the vDSO and the kernel.  It runs for argv[1]
 * seconds (wall clock), checks every result it computed, prints
 * "ok ITERATIONS" and exits 0 -- or 1 if anything came out wrong, which is
 * what an attach and detach must never cause.  It writes "ready\n" to fd 3
 * (if open) once its threads run.  With more arguments, it then executes
 * argv[2] with the rest as its arguments.  SIGUSR1 ends the run early, as
 * its time running out would (for a test that must attach first), after
 * one more short-lived thread. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static atomic_int done;
static volatile sig_atomic_t stop;

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}
static atomic_int bad;

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
		/* collatz(27) takes 111 steps */
		if (collatz(27) != 111)
			atomic_store(&bad, 1);
		it++;
	}
	return (void *)it;
}

static void *sleeper(void *arg)
{
	struct timespec ts = { 0, 2000000 };
	unsigned long it = 0;

	(void)arg;
	while (!atomic_load(&done)) {
		if (nanosleep(&ts, NULL) != 0)
			atomic_store(&bad, 1);
		it++;
	}
	return (void *)it;
}

static void *brief(void *arg)
{
	return (void *)collatz((unsigned long)arg);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0, start = now(), last = 0;
	pthread_t a, b;
	void *ra, *rb;
	unsigned long it = 0;

	if (signal(SIGUSR1, on_usr1) == SIG_ERR)
		return 2;
	if (pthread_create(&a, NULL, compute, NULL) ||
	    pthread_create(&b, NULL, sleeper, NULL))
		return 2;
	if (write(3, "ready\n", 6) < 0) {
		/* no fd 3: nobody waits */
	}
	/* at least once, however slowly it got here */
	do {
		if (collatz(97) != 118)
			atomic_store(&bad, 1);
		if (getpid() <= 0)
			atomic_store(&bad, 1);
		if (now() - last > 0.05) {
			pthread_t c;
			void *rc;

			last = now();
			if (pthread_create(&c, NULL, brief, (void *)27UL) ||
			    pthread_join(c, &rc) || (unsigned long)rc != 111)
				atomic_store(&bad, 1);
		}
		it++;
	} while (now() - start < secs && !stop);
	/* told to end: one more, so that a tracer that told it sees a thread
	 * start and end */
	if (stop) {
		pthread_t c;
		void *rc;

		if (pthread_create(&c, NULL, brief, (void *)27UL) ||
		    pthread_join(c, &rc) || (unsigned long)rc != 111)
			atomic_store(&bad, 1);
	}
	atomic_store(&done, 1);
	if (pthread_join(a, &ra) || pthread_join(b, &rb))
		return 2;
	printf("ok %lu %lu %lu\n", it, (unsigned long)ra, (unsigned long)rb);
	if (argc > 2 && !atomic_load(&bad)) {
		fflush(stdout);
		execv(argv[2], argv + 2);
		return 3;
	}
	return atomic_load(&bad) ? 1 : 0;
}
