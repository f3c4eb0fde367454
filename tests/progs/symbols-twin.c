/* SPDX-License-Identifier: MIT */
/* A second static sym_twin for prog-symbols: a name two functions bear
 * (test-symtab: a lookup by that name is ambiguous, not guessed). */
int sym_twin_other(int x);

__attribute__((noinline)) static int sym_twin(int x)
{
	return x + 7;
}

int sym_twin_other(int x)
{
	return sym_twin(x);
}
