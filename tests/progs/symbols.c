/* SPDX-License-Identifier: MIT */
/* Known functions for the symbol tests (test-symtab): two static ones,
 * called in a loop, and puts through the PLT. */
#include <stdio.h>

__attribute__((noinline)) static int sym_leaf(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) static int sym_middle(int n)
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += sym_leaf(i);
	return s;
}

int main(void)
{
	puts("symbols");
	return sym_middle(5) == 35 ? 0 : 1;
}
