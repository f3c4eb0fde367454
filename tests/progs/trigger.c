/* For test-trigger: three threads each call hit() once, one after the
 * other, then wait; the main thread never calls it.  Prints "ready PID"
 * and waits for a line on stdin; then starts the threads, printing "tid
 * N" for each once it has called hit(); waits for a second line, lets the
 * threads end and exits 0. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;
static volatile unsigned long sink;
static atomic_int printed;	/* workers that printed their tid */

static __attribute__((noinline, noclone, used)) unsigned long
hit(unsigned long x)
{
	unsigned long s = 0;

	for (unsigned long i = 0; i < x; i++)
		s += i * 3 + 1;
	return s;
}

static void *worker(void *arg)
{
	unsigned long n = (unsigned long)arg;

	sink += hit(10 * n);
	printf("tid %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	atomic_fetch_add(&printed, 1);
	pthread_mutex_lock(&mu);
	while (!done)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(void)
{
	pthread_t th[3];
	char line[64];
	unsigned long i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %ld\n", (long)getpid());
	if (!fgets(line, sizeof(line), stdin))
		return 2;
	for (i = 0; i < 3; i++) {
		if (pthread_create(&th[i], NULL, worker, (void *)(i + 1)))
			return 2;
		/* one after the other: its hit, and its line after it, before
		 * the next starts (the lines are in the order of the hits) */
		while (atomic_load(&printed) < (int)i + 1)
			usleep(1000);
	}
	if (!fgets(line, sizeof(line), stdin))
		line[0] = 0;
	pthread_mutex_lock(&mu);
	done = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	return 0;
}
