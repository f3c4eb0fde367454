/* Two pthreads beside the main thread: each has its own PT stream. */
#include <pthread.h>
static void *work(void *arg)
{
	volatile unsigned long s = 0;
	unsigned long n = (unsigned long)arg;
	for (unsigned long i = 0; i < n; i++)
		s += i;
	return (void *)s;
}
int main(void)
{
	pthread_t a, b;
	if (pthread_create(&a, NULL, work, (void *)200UL) ||
	    pthread_create(&b, NULL, work, (void *)300UL))
		return 2;
	void *ra, *rb;
	pthread_join(a, &ra);
	pthread_join(b, &rb);
	return ((unsigned long)ra == 19900 && (unsigned long)rb == 44850) ? 0 : 1;
}
