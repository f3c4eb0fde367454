/* SPDX-License-Identifier: MIT */
/*
 * test-coverage's program: branches taken and not, a loop, a function
 * never called, each on lines of its own (built with -g: the test maps
 * addresses to lines with addr2line and holds ptctl coverage's lcov to
 * it).  The argument count decides the branches, so the compiler cannot.
 */
#include <stdio.h>

__attribute__((noinline)) static int never_called(int x)
{
	return x * 7 + 3;
}

__attribute__((noinline)) static int classify(int v)
{
	int r;

	if (v > 100)
		r = 2;		/* never: v is small */
	else if (v > 1)
		r = 1;
	else
		r = 0;
	return r;
}

__attribute__((noinline)) static int loop(int n)
{
	int sum = 0;

	for (int i = 0; i < n; i++)
		sum += classify(i);
	return sum;
}

int main(int argc, char **argv)
{
	int s = loop(argc + 9);

	(void)argv;
	if (argc > 5)
		s += never_called(argc);	/* never: one argument */
	printf("%d\n", s);
	return 0;
}
