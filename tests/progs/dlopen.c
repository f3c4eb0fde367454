/* dlopen, a call into the library, dlclose: mappings that appear and go. */
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	const char *lib = argc > 1 ? argv[1] : "./libptdtarget.so";
	for (int round = 0; round < 2; round++) {
		void *h = dlopen(lib, RTLD_NOW);
		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 2;
		}
		int (*f)(int) = (int (*)(int))dlsym(h, "ptd_target_sum");
		if (!f || f(10) != 5)
			return 3;
		dlclose(h);
	}
	return 0;
}
