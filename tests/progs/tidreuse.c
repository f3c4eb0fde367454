/* One thread id given to two threads in one run.  Thread A runs code in an
 * anonymous executable page; once A is gone (reaped: /proc/self/task/A no
 * longer there), the next id is set to A's (ns_last_pid: the test runs this
 * in a PID namespace of its own, where nothing else takes ids) and thread B
 * gets it.  B rewrites the page with another instruction layout and runs
 * it, so those image changes land early in B's stream, at positions A's
 * stream passed long before its end: a decoder that took B's events for A's
 * would decode A's calls from B's bytes.
 * Exits 0 when B had A's id, 3 when it had another, 2 if a step failed. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static unsigned char *page;
static pid_t tid_a, tid_b;

static void *thread_a(void *arg)
{
	int (*f)(void) = (int (*)(void))(void *)page;
	unsigned long s = 0;

	(void)arg;
	tid_a = gettid();
	for (int i = 0; i < 5000; i++)
		s += (unsigned long)f();
	return (void *)s;
}

static void *thread_b(void *arg)
{
	/* xor %eax,%eax; inc %eax; inc %eax; ret */
	static const unsigned char v2[] = { 0x31, 0xc0, 0xff, 0xc0, 0xff,
					    0xc0, 0xc3 };
	int (*f)(void) = (int (*)(void))(void *)page;
	unsigned long s = 0;

	(void)arg;
	tid_b = gettid();
	if (mprotect(page, 4096, PROT_READ | PROT_WRITE))
		return NULL;
	memcpy(page, v2, sizeof(v2));
	if (mprotect(page, 4096, PROT_READ | PROT_EXEC))
		return NULL;
	for (int i = 0; i < 100; i++)
		s += (unsigned long)f();
	return (void *)s;
}

int main(void)
{
	/* mov $1,%eax; ret */
	static const unsigned char v1[] = { 0xb8, 0x01, 0x00, 0x00, 0x00,
					    0xc3 };
	struct timespec ms = { 0, 1000000 };
	char path[64], next[32];
	pthread_t a, b;
	void *ra, *rb;
	int fd, n;

	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 2;
	memcpy(page, v1, sizeof(v1));
	if (mprotect(page, 4096, PROT_READ | PROT_EXEC))
		return 2;
	if (pthread_create(&a, NULL, thread_a, NULL) || pthread_join(a, &ra))
		return 2;
	/* A's id is free once its tracer has reaped it: wait for that. */
	(void)snprintf(path, sizeof(path), "/proc/self/task/%d", (int)tid_a);
	while (access(path, F_OK) == 0)
		(void)nanosleep(&ms, NULL);
	if (errno != ENOENT)
		return 2;
	fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return 2;
	n = snprintf(next, sizeof(next), "%d", (int)tid_a - 1);
	if (write(fd, next, (size_t)n) != n || close(fd))
		return 2;
	if (pthread_create(&b, NULL, thread_b, NULL) || pthread_join(b, &rb))
		return 2;
	if ((unsigned long)ra != 5000 || (unsigned long)rb != 200)
		return 2;
	return tid_b == tid_a ? 0 : 3;
}
