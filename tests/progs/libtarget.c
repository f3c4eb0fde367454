/* The library prog-dlopen loads, calls and unloads. */
int ptd_target_sum(int n);
int ptd_target_sum(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += (i & 1) ? i : -i;
	return s;
}
