/* Two pthreads beside the main thread, each entering the kernel again and
 * again (a system call a loop): where a thread enters the kernel a
 * scheduler may switch it out, and test-lldb-e2e cuts its per-CPU layout
 * there -- in every thread, however the threads happen to run. */
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CALLS 400

static void *work(void *arg)
{
	unsigned long n = (unsigned long)arg, s = 0;

	for (unsigned long i = 0; i < n; i++)
		s += (unsigned long)syscall(SYS_getppid) == 0 ? 0 : i;
	return (void *)s;
}

int main(void)
{
	pthread_t a, b;
	void *ra, *rb, *rm;

	if (pthread_create(&a, NULL, work, (void *)CALLS) ||
	    pthread_create(&b, NULL, work, (void *)(CALLS + 100)))
		return 2;
	rm = work((void *)CALLS);
	pthread_join(a, &ra);
	pthread_join(b, &rb);
	/* the sums of 0..n-1 (getppid is never 0 here) */
	return (unsigned long)ra == CALLS * (CALLS - 1) / 2 &&
		       (unsigned long)rb == (CALLS + 100) * (CALLS + 99) / 2 &&
		       (unsigned long)rm == CALLS * (CALLS - 1) / 2
		       ? 0
		       : 1;
}
