/* SPDX-License-Identifier: MIT */
/* A dynamically linked program that does almost nothing itself: what a
 * watch rule traces of it is mostly the dynamic loader's work, from its
 * entry.  Prints "hello N" (its argument count) and exits with 20 + N. */
#include <stdio.h>

int main(int argc, char **argv)
{
	printf("hello %d\n", argc);
	return 20 + argc;
}
