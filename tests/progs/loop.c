/* A long-running loop of calls and branches: the benchmark's workload
 * (about N million instructions for argument N). */
#include <stdlib.h>
__attribute__((noinline)) static unsigned step(unsigned x)
{
	return (x & 1) ? 3 * x + 1 : x / 2;
}
int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1;
	unsigned long total = 0;
	for (unsigned long i = 1; total < n * 1000000UL / 9; i++) {
		unsigned x = (unsigned)i;
		while (x != 1) {
			x = step(x);
			total++;
		}
	}
	return total == 0;
}
