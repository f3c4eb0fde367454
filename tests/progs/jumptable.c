/* A dense switch compiled to a jump table: indirect jumps (TIP). */
__attribute__((noinline)) static int classify(volatile int x)
{
	switch (x) {
	case 0: return 11;
	case 1: return 23;
	case 2: return 35;
	case 3: return 47;
	case 4: return 59;
	case 5: return 61;
	case 6: return 73;
	case 7: return 85;
	case 8: return 97;
	default: return 0;
	}
}
int main(void)
{
	int s = 0;
	for (int i = 0; i < 40; i++)
		s += classify(i % 10);
	return s == 12345;
}
