/* JIT-style code: written into anonymous memory, made executable, run,
 * then rewritten in place (W^X via mprotect) and run again.  No file backs
 * it, so the source must snapshot it when first executed, and again after
 * it changed.  With an argument (a hex address) the code goes there
 * (MAP_FIXED_NOREPLACE), so that a test can write a perf map for it
 * before it runs (test-dsym). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
int main(int argc, char **argv)
{
	unsigned char code[] = { 0xb8, 0x2a, 0x00, 0x00, 0x00, /* mov $42,%eax */
				 0xc3 };			/* ret */
	void *want = argc > 1 ? (void *)strtoul(argv[1], NULL, 16) : NULL;
	unsigned char *p = mmap(want, 4096, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS |
					(want ? MAP_FIXED_NOREPLACE : 0),
				-1, 0);
	int (*f)(void) = (int (*)(void))(void *)p;
	int r;

	if (p == MAP_FAILED || (want && (void *)p != want))
		return 2;
	memcpy(p, code, sizeof(code));
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
		return 3;
	r = f() + f();
	if (mprotect(p, 4096, PROT_READ | PROT_WRITE))
		return 4;
	p[1] = 7;	/* mov $7,%eax */
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
		return 5;
	r += f();
	return r == 91 ? 0 : 1;
}
