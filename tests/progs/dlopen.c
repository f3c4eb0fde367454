/* dlopen, a call into the library, dlclose: mappings that appear and go.
 * argv[1]: the library (default ./libptdtarget.so).  With a second
 * argument "thread", a second thread, started before the first dlopen,
 * spins without a syscall until main hands it the function, calls it five
 * times and ends before the dlclose. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static int (*shared)(int);

static void *caller(void *arg)
{
	int (*f)(int), s = 0;

	while (!(f = __atomic_load_n(&shared, __ATOMIC_ACQUIRE)))
		;
	for (int i = 0; i < 5; i++)
		s += f(10);
	return (void *)(long)s;
}

int main(int argc, char **argv)
{
	const char *lib = argc > 1 ? argv[1] : "./libptdtarget.so";
	int threaded = argc > 2 && !strcmp(argv[2], "thread");
	pthread_t th;
	void *ret;

	if (threaded && pthread_create(&th, NULL, caller, NULL) != 0)
		return 4;
	for (int round = 0; round < 2; round++) {
		void *h = dlopen(lib, RTLD_NOW);
		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 2;
		}
		int (*f)(int) = (int (*)(int))dlsym(h, "ptd_target_sum");
		if (!f || f(10) != 5)
			return 3;
		if (threaded && round == 0) {
			__atomic_store_n(&shared, f, __ATOMIC_RELEASE);
			if (pthread_join(th, &ret) != 0 || (long)ret != 25)
				return 5;
		}
		dlclose(h);
	}
	return 0;
}
