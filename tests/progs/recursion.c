/* Deep recursion: many calls and returns, so return compression and its
 * 64-entry stack overflow are exercised. */
#include <stdlib.h>
__attribute__((noinline)) static unsigned long fib(unsigned n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}
__attribute__((noinline)) static unsigned long deep(unsigned n)
{
	return n == 0 ? 1 : 1 + deep(n - 1);
}
int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 12;
	return (int)((fib(n) + deep(100)) & 0x7f) == 0 ? 1 : 0;
}
