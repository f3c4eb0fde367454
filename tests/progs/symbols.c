/* SPDX-License-Identifier: MIT */
/* Known functions for the symbol tests (test-symtab): two static ones,
 * called in a loop, puts through the PLT, and sym_twin, a static function
 * whose name symbols-twin.c gives another one too. */
#include <stdio.h>

int sym_twin_other(int x);

__attribute__((noinline)) static int sym_twin(int x)
{
	return x * 5;
}

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
	return sym_middle(5) == 35 && sym_twin(2) == 10 &&
	       sym_twin_other(3) == 10 ? 0 : 1;
}
