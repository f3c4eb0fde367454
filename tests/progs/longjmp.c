/* setjmp/longjmp: a return-address stack that no longer matches. */
#include <setjmp.h>
static jmp_buf env;
__attribute__((noinline)) static void leaf(int n)
{
	if (n == 0)
		longjmp(env, 7);
	leaf(n - 1);
}
int main(void)
{
	volatile int rounds = 0;
	int r = setjmp(env);
	if (rounds < 5) {
		rounds++;
		leaf(rounds * 3);
	}
	return r == 7 ? 0 : 1;
}
