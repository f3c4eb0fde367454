/* A process that creates threads as fast as it can: the main thread and
 * three others each start a short thread and join it, over and over, for
 * argv[1] seconds (wall clock; SIGUSR1 ends it early).  It writes "ready\n"
 * to fd 3 (if open) once they run, then prints "ok THREADS" and exits 0,
 * or 1 if a thread came back with a wrong result or could not be
 * started: what attaching to it, again and again, must never cause. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CREATORS 3

static atomic_int done, bad;
static atomic_ulong started;
static volatile sig_atomic_t stop;

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}

static void *brief(void *arg)
{
	return (void *)((unsigned long)arg * 2);
}

static void *creator(void *arg)
{
	unsigned long i = 0;

	(void)arg;
	while (!atomic_load(&done)) {
		pthread_t t;
		void *r;

		if (pthread_create(&t, NULL, brief, (void *)i) ||
		    pthread_join(t, &r) || (unsigned long)r != 2 * i)
			atomic_store(&bad, 1);
		atomic_fetch_add(&started, 1);
		i++;
	}
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0, start = now();
	pthread_t c[CREATORS];
	int i;

	if (signal(SIGUSR1, on_usr1) == SIG_ERR)
		return 2;
	for (i = 0; i < CREATORS; i++)
		if (pthread_create(&c[i], NULL, creator, NULL))
			return 2;
	if (write(3, "ready\n", 6) < 0) {
		/* no fd 3: nobody waits */
	}
	while (now() - start < secs && !stop) {
		pthread_t t;
		void *r;

		if (pthread_create(&t, NULL, brief, (void *)7UL) ||
		    pthread_join(t, &r) || (unsigned long)r != 14)
			atomic_store(&bad, 1);
		atomic_fetch_add(&started, 1);
	}
	atomic_store(&done, 1);
	for (i = 0; i < CREATORS; i++)
		if (pthread_join(c[i], NULL))
			return 2;
	printf("ok %lu\n", (unsigned long)atomic_load(&started));
	return atomic_load(&bad) ? 1 : 0;
}
