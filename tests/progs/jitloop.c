/* A hot loop, twice: in the program (200 iterations) and in JIT code
 * written into anonymous memory (100 iterations a call), which is then
 * rewritten in place (W^X via mprotect) and run again: the hot trace
 * over the JIT loop must be withdrawn, and form again on the new code
 * (test-traces). */
#include <string.h>
#include <sys/mman.h>

static volatile unsigned sink;

int main(void)
{
	unsigned char code[] = {
		0x31, 0xc0,			/* xor %eax,%eax */
		0xb9, 0x64, 0x00, 0x00, 0x00,	/* mov $100,%ecx */
		0x83, 0xc0, 0x01,		/* L: add $1,%eax */
		0xff, 0xc9,			/* dec %ecx */
		0x75, 0xf9,			/* jnz L */
		0xc3,				/* ret */
	};
	unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int (*f)(void) = (int (*)(void))(void *)p;
	int r;

	for (unsigned i = 0; i < 200; i++)
		sink += i;
	if (p == MAP_FAILED)
		return 2;
	memcpy(p, code, sizeof(code));
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
		return 3;
	r = f();
	if (mprotect(p, 4096, PROT_READ | PROT_WRITE))
		return 4;
	p[9] = 2;	/* add $2,%eax */
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
		return 5;
	r += f();
	return r == 300 ? 0 : 1;
}
