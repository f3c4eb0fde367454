/* fork: the parent is traced, the child must run untraced and unharmed. */
#include <sys/wait.h>
#include <unistd.h>
int main(void)
{
	pid_t p = fork();
	if (p < 0)
		return 2;
	if (p == 0) {
		volatile unsigned long x = 0;
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i;
		_exit(x == 4999950000UL ? 42 : 1);
	}
	int st;
	if (waitpid(p, &st, 0) != p)
		return 3;
	return WIFEXITED(st) && WEXITSTATUS(st) == 42 ? 0 : 4;
}
