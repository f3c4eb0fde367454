/* Calls through function pointers: indirect calls (TIP). */
static int add(int a, int b) { return a + b; }
static int sub(int a, int b) { return a - b; }
static int mul(int a, int b) { return a * b; }
typedef int (*op_fn)(int, int);
static op_fn volatile ops[3] = { add, sub, mul };
int main(void)
{
	int acc = 1;
	for (int i = 0; i < 30; i++)
		acc = ops[i % 3](acc, i + 1) & 0xffff;
	return acc == -1;
}
