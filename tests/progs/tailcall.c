/* Tail calls: built with -O2 (tests/progs/meson.build), so that
 * forward() ends in a jmp to leaf() instead of a call and a ret;
 * test-calls checks that the jmp is there. */
__attribute__((noinline)) int leaf(int x);
__attribute__((noinline)) int forward(int x);
volatile int sink;
__attribute__((noinline)) int leaf(int x)
{
	sink = x;
	return x * 3 + sink;
}
__attribute__((noinline)) int forward(int x)
{
	sink = x + 1;
	return leaf(x + 7);
}
int main(void)
{
	int acc = 0;
	for (int i = 0; i < 5; i++)
		acc += forward(i);
	return acc == -1;
}
