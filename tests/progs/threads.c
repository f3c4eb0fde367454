/* Two pthreads beside the main thread: each has its own PT stream.
 * prog-threads N ITERS: N threads (at most 64), each summing ITERS
 * numbers (bench-decode's many-threads trace). */
#include <pthread.h>
#include <stdlib.h>
static void *work(void *arg)
{
	volatile unsigned long s = 0;
	unsigned long n = (unsigned long)arg;
	for (unsigned long i = 0; i < n; i++)
		s += i;
	return (void *)s;
}
int main(int argc, char **argv)
{
	pthread_t t[64];
	unsigned long n = 2, iters = 0;
	if (argc == 3) {
		n = strtoul(argv[1], NULL, 10);
		iters = strtoul(argv[2], NULL, 10);
		if (n < 1 || n > 64)
			return 2;
	}
	for (unsigned long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, work,
				   (void *)(iters ? iters : 200UL + 100 * i)))
			return 2;
	for (unsigned long i = 0; i < n; i++) {
		unsigned long k = iters ? iters : 200UL + 100 * i;
		void *r;
		pthread_join(t[i], &r);
		if ((unsigned long)r != k * (k - 1) / 2)
			return 1;
	}
	return 0;
}
