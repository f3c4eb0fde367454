/* Threads one at a time, each when the test asks: for every byte read on
 * stdin, a thread is started, computes, and is joined; then one byte is
 * written to stdout.  At the end of stdin it exits 0 (1 if a thread's
 * result was wrong, 2 if one could not be started).  The test decides
 * when the next thread begins, so that what it checks between two threads
 * (the daemon freed the last one) is not a race with the target.
 * prog-onebyone N: N threads one after another, without stdin. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) static unsigned long collatz(unsigned long x)
{
	unsigned long n = 0;

	while (x != 1) {
		x = (x & 1) ? 3 * x + 1 : x / 2;
		n++;
	}
	return n;
}

static void *work(void *arg)
{
	return (void *)collatz((unsigned long)arg);
}

/* 0, or the exit code */
static int one(void)
{
	pthread_t t;
	void *r;

	if (pthread_create(&t, NULL, work, (void *)27UL) != 0)
		return 2;
	if (pthread_join(t, &r) != 0 || (unsigned long)r != 111)
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	char c;
	int r;

	if (argc > 1) {
		for (long n = atol(argv[1]); n > 0; n--)
			if ((r = one()) != 0)
				return r;
		return 0;
	}
	while (read(0, &c, 1) == 1) {
		if ((r = one()) != 0)
			return r;
		if (write(1, "+", 1) != 1)
			return 2;
	}
	return 0;
}
